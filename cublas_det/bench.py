"""python -m cublas_det.bench: are the GEMMs reproducible in each math mode, and what does each cost?

Checks every shape in every mode under the reproducibility scenarios, then times the modes side
by side (CUDA-graph replay and eager, interleaved, paired ratios with 95% intervals, an A/A
control). Tables and the summary go to stdout, progress and diagnostics to stderr. With
--devices it instead runs each shape and mode on every chosen GPU, one worker process per GPU,
and reports whether all devices give the same bits.

Exit codes: 0 all as expected; 1 a scenario that cuBLAS documents as reproducible gave other bits
(or could not run), devices disagree (--devices), bits differ from --compare's baseline, or a
time regressed past --fail-on; 2 usage or environment error (no GPU, bad shape, no such device,
unwritable output path ...).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ._cli import (EXIT_FINDING, EXIT_OK, ArgumentParser, ExtendList, error_line, prog_name,
                   run_guarded, wrap_paragraphs)

DEFAULT_PRESETS = ["trunk", "mamba2-130m"]
MODE_CHOICES = ("pedantic", "default", "tf32")

EPILOG = """examples:
  %(prog)s                        # trunk + mamba2-130m, all modes, all scenarios
  %(prog)s --quick                # fewer repeats and rounds, no extra processes
  %(prog)s --preset mamba2-2.7b --tokens 2048 --modes pedantic tf32
  %(prog)s --shape 4096x4096x4096 --scenarios repeat --json run.json --plot run.png
  %(prog)s --compare base.json --fail-on 5 --json new.json
  %(prog)s --devices all --json host-a.json     # same bits on every GPU of this host?
  %(prog)s --devices 0,3 --compare host-a.json  # ... and the same as on host A?
  %(prog)s --list                 # the shape catalogue (no GPU needed)

exit codes:
  0  no finding
  1  a finding: such a scenario gave other bits or could not run, devices disagree (--devices),
     bits differ from --compare's baseline, or a time regressed past --fail-on
  2  usage or environment error (bad argument, no GPU, no such device, unwritable output path)
  130  interrupted (Ctrl-C); what completed was reported
"""


def build_parser(prog: str | None = None) -> ArgumentParser:
    from ._check import SCENARIOS
    from .shapes import DEFAULT_TOKENS, PRESETS

    parser = ArgumentParser(
        prog=prog or prog_name(), description=wrap_paragraphs(__doc__.split("\n\n")[1]), epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_argument_group("what to run")
    # Every list option takes `--flag a b` and repeated flags alike (ExtendList).
    what.add_argument("--preset", nargs="+", action=ExtendList, choices=PRESETS, metavar="NAME",
                      help=f"one or more shape presets: {', '.join(PRESETS)} (default: {' '.join(DEFAULT_PRESETS)})")
    what.add_argument("--shape", nargs="+", action=ExtendList, metavar="MxNxK[:op]",
                      help="custom row-major shapes; op is the cuBLAS transa+transb (nn, nt, tn, tt)")
    what.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, metavar="T",
                      help="tokens (batch x seqlen) for the Mamba2 presets (default: %(default)s)")
    what.add_argument("--modes", nargs="+", action=ExtendList, type=str.lower, choices=MODE_CHOICES,
                      default=list(MODE_CHOICES), metavar="MODE",
                      help=f"math modes: {', '.join(MODE_CHOICES)} (default: {' '.join(MODE_CHOICES)})")
    what.add_argument("--scenarios", nargs="+", action=ExtendList, metavar="NAME",
                      help="reproducibility scenarios, or 'all' or 'none' (default: all; with --devices: repeat): "
                           f"{', '.join(SCENARIOS)}")
    what.add_argument("--repeats", type=int, default=20, metavar="N", help="runs per scenario (default: %(default)s)")
    what.add_argument("--seed", type=int, default=0, help="input seed (default: %(default)s)")
    what.add_argument("--quick", action="store_true",
                      help="5 repeats, 5-20 timing rounds, no worker processes (fresh-process, workspace-config)")
    what.add_argument("--no-timing", action="store_true", help="only the reproducibility checks")
    what.add_argument("--list", action="store_true", help="print the shapes that would run, and exit (no GPU needed)")
    what.add_argument("--devices", nargs="+", action=ExtendList, metavar="all|ID",
                      help="per-device sweep instead of the benchmark: 'all' or ids (0,1 or 0 1); one worker "
                           "process per GPU computes every shape in every mode (and --scenarios inside it); the "
                           "report says whether the devices agree. No timing.")
    out = parser.add_argument_group("outputs")
    out.add_argument("--json", metavar="PATH", help="write results in pytest-benchmark's JSON layout, with digests")
    out.add_argument("--markdown", metavar="PATH", help="write the tables and summary as Markdown")
    out.add_argument("--plot", metavar="PATH", help="write a PNG of time per mode per shape (needs matplotlib)")
    out.add_argument("--compare", metavar="BASE.json", help="compare bits and times with an earlier --json")
    out.add_argument("--fail-on", type=float, metavar="PCT",
                     help="with --compare: exit 1 if a median time grew by more than PCT percent")
    return parser


def _check_writable(path: str, flag: str) -> None:
    """Fail before any GPU work if ``path`` cannot be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OSError(f"{flag} {path}: is a directory; give a file name")
    if not os.path.isdir(directory):
        raise OSError(f"{flag} {path}: directory {directory} does not exist; create it first")
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OSError(f"{flag} {path}: not writable; choose another path")


def _options(args, parser):
    from ._check import SCENARIOS, validate_scenarios
    from .shapes import resolve_shapes

    if args.fail_on is not None and not args.compare:
        parser.error("--fail-on needs --compare BASE.json")
    if args.repeats < 2:
        parser.error(f"--repeats must be >= 2, not {args.repeats}")
    specs = (args.preset or []) + (args.shape or [])
    shapes = resolve_shapes(specs or DEFAULT_PRESETS, tokens=args.tokens)
    if args.devices and args.plot:
        parser.error("--plot draws times, and --devices does not time; drop one of them")
    if args.scenarios is None:
        scenarios = ["repeat"] if args.devices else list(SCENARIOS)
    elif args.scenarios == ["all"]:
        scenarios = list(SCENARIOS)
    elif args.scenarios == ["none"]:
        scenarios = []
    else:
        scenarios = list(validate_scenarios(args.scenarios))
    repeats = args.repeats
    if args.quick:
        scenarios = [s for s in scenarios if s not in ("fresh-process", "workspace-config")]
        repeats = min(repeats, 5)
    modes = [m.upper() for m in dict.fromkeys(args.modes)]
    return shapes, scenarios, repeats, modes


class Progress:
    """A one-line progress bar on stderr (a line per step when stderr is not a terminal)."""

    def __init__(self, total: int):
        self.total, self.done, self.started = max(1, total), 0, time.perf_counter()
        self.tty = sys.stderr.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        filled = int(30 * self.done / self.total)
        line = (f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                f"{time.perf_counter() - self.started:5.1f}s {label}")
        if self.tty:
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def _run(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    shapes, scenarios, repeats, modes = _options(args, parser)
    if args.list:
        from .shapes import format_catalogue

        print(format_catalogue(shapes))
        return EXIT_OK
    for flag in ("json", "markdown", "plot"):
        if getattr(args, flag):
            _check_writable(getattr(args, flag), f"--{flag}")
    baseline = None
    if args.compare:
        from ._report import load_baseline

        baseline = load_baseline(args.compare)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise OSError("--plot needs matplotlib: pip install 'cublas-det[plot]'") from None

    from ._device import require_gpu

    require_gpu()
    if args.devices:
        import cupy

        from ._sweep import parse_devices

        devices = parse_devices(args.devices, cupy.cuda.runtime.getDeviceCount())
        return _sweep(args, shapes, scenarios, repeats, modes, baseline, devices)
    return _bench(args, shapes, scenarios, repeats, modes, baseline)


def _sweep(args, shapes, scenarios, repeats, modes, baseline, devices) -> int:
    from . import __version__, _report
    from ._env import fingerprint
    from ._handle import resolve_math_mode
    from ._sweep import INTERRUPTED, agreements, render_sweep, run_sweep, sweep_failed, sweep_to_json

    started_iso = _report.now_iso()
    started = time.perf_counter()
    provenance = fingerprint()
    mode_values = [resolve_math_mode(mode)[0] for mode in modes]
    print(f"sweeping {len(shapes)} shapes x {len(modes)} modes on device(s) {', '.join(map(str, devices))}, "
          "one worker process each", file=sys.stderr)
    runs = run_sweep(shapes, mode_values, devices, scenarios=scenarios, repeats=repeats, seed=args.seed,
                     on_device=lambda run: print(f"device {run.device_id}: "
                                                 f"{run.error or f'done in {run.elapsed_s:.1f} s'}", file=sys.stderr))
    found = agreements(shapes, mode_values, runs)
    text = render_sweep(runs, found)
    print(text)
    data = sweep_to_json(runs, found, provenance, started_iso, time.perf_counter() - started, __version__)
    drift = _print_comparison(args, baseline, data)
    failed = sweep_failed(runs, found) or drift
    if args.json:
        _write_json(args.json, data)
    if args.markdown:
        _write_text(args.markdown, f"# cublas_det device sweep\n\n{started_iso}\n\n```\n{text}\n```\n")
    return _exit_code(failed, any(run.error == INTERRUPTED for run in runs))


def _bench(args, shapes, scenarios, repeats, modes, baseline) -> int:
    import cupy

    from . import __version__, _report
    from ._check import CheckInterrupted, check_many
    from ._env import fingerprint
    from ._timing import time_shape, warm_up

    started_iso = _report.now_iso()
    started = time.perf_counter()
    provenance = fingerprint()
    timing = not args.no_timing
    progress = Progress(len(shapes) * len(modes) * bool(scenarios) + len(shapes) * timing)
    checks, timings, errors = {}, {}, {}
    interrupted = False
    try:
        if scenarios:
            try:
                found = check_many(shapes, modes, repeats=repeats, scenarios=scenarios, seed=args.seed,
                                   on_check=lambda c: progress.step(f"checked {c.shape.name} {c.mode_name}"))
            except CheckInterrupted as stop:
                found, interrupted = stop.checks, True
            for check in found:
                checks.setdefault(check.shape.name, {})[check.mode_name] = check
        if timing and not interrupted:
            warm_up(0.5 if args.quick else 1.0)
            for shape in shapes:
                try:
                    timings[shape.name] = time_shape(
                        shape, modes, seed=args.seed, min_rounds=5 if args.quick else 10,
                        max_rounds=20 if args.quick else 60, budget_s=1.0 if args.quick else 2.5)
                except KeyboardInterrupt:
                    interrupted = True
                    break
                except (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError) as err:
                    errors[shape.name] = f"timing failed: {type(err).__name__}: {err}"
                    cupy.get_default_memory_pool().free_all_blocks()
                progress.step(f"timed {shape.name}")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress.close()
    reports = tuple(_report.ShapeReport(s, checks.get(s.name, {}), timings.get(s.name), errors.get(s.name))
                    for s in shapes if s.name in checks or s.name in timings or s.name in errors)
    result = _report.BenchResult(reports, provenance, started_iso, time.perf_counter() - started, __version__,
                                 interrupted)
    print(_report.render_text(result))
    failed = any(_report.check_failures(c) for per in checks.values() for c in per.values()) or bool(errors)
    data = _report.to_json(result)
    drift = _print_comparison(args, baseline, data)
    failed = failed or drift
    _write_outputs(args, result, data)
    return _exit_code(failed, interrupted)


def _exit_code(failed: bool, interrupted: bool) -> int:
    """130 after Ctrl-C (what completed was reported), else 1 on a finding, else 0."""
    if interrupted:
        error_line(prog_name(), "interrupted: the results above are those that completed")
        return 130
    return EXIT_FINDING if failed else EXIT_OK


def _print_comparison(args, baseline: dict | None, data: dict) -> bool:
    """Print how ``data`` compares with the --compare baseline; True when bits drifted or time regressed."""
    if baseline is None:
        return False
    from ._report import compare

    lines, drift = compare(baseline, data, args.fail_on)
    print("Compared with " + args.compare)
    print("\n".join("  " + line for line in lines))
    return drift


def _write_text(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)
    print(f"wrote {path}", file=sys.stderr)


def _write_json(path: str, data: dict) -> None:
    import json

    _write_text(path, json.dumps(data, indent=1, default=str))


def _write_outputs(args, result, data) -> None:
    from . import _report

    if args.json:
        _write_json(args.json, data)
    if args.markdown:
        _write_text(args.markdown, _report.to_markdown(result))
    if args.plot and any(r.timing for r in result.shapes):
        _report.write_plot(result, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    return run_guarded(prog_name(), lambda: _run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
