"""python -m cublas_det.bench: are the GEMMs reproducible in each math mode, and what does each cost?

Checks every shape in every mode under the reproducibility scenarios, then times the modes side
by side (CUDA-graph replay and eager, interleaved, paired ratios with 95% intervals, an A/A
control). Tables and the summary go to stdout, progress and diagnostics to stderr. With
--devices it instead runs each shape and mode on every chosen GPU, one worker process per GPU,
and reports whether all devices give the same bits.

Exit codes: EXIT_CODES below (in --help; docs/method.md has every command's).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shutil
import sys
import time

from .. import __version__, lockfile
from .._cublas import ComputeType
from ..capture.file import load as load_capture
from ..check import CheckInterrupted, check_many
from ..check.devices import (
    INTERRUPTED,
    agreements,
    parse_devices,
    run_sweep,
    sweep_failed,
)
from ..check.scenarios import REGISTRY, validate_scenarios, without_workers
from ..config import (
    DEFAULT_MODES,
    HALF_DEFAULT_MODES,
    MODE_CHOICES,
    PRECISIONS,
    GemmConfig,
    canonical_dtype,
)
from ..device import device_properties, fingerprint, gpu_failures, require_gpu
from ..errors import DoesNotFit, UsageError
from ..kernels.explain import explain_shape, render_explanation
from ..kernels.recorder import cupti_unavailable, require_cupti
from ..memory import check_fits
from ..operands import HostOperands
from ..phases import Phases
from ..prescribe import lock_entries, prescribe
from ..report.compare import compare_runs
from ..report.markdown import to_markdown
from ..report.plot import write_plot
from ..report.prescribe import render_lock, render_prescriptions
from ..report.results import BenchResult, ShapeReport
from ..report.runfile import load_run, now_iso, run_from_dict, to_json
from ..report.sweep import render_sweep, sweep_to_json
from ..report.text import render_text, run_failed
from ..words import plural, report_width
from ..shapes import (
    DEFAULT_TOKENS,
    PRESETS,
    format_catalogue,
    parse_shape,
    preset,
    resolve_shapes,
)
from ..timing import time_shapes, warm_up
from ..timing.monitor import GpuMonitor
from .common import (
    EXIT_FINDING,
    EXIT_OK,
    EXIT_USAGE,
    ArgumentParser,
    ExtendList,
    check_writable,
    error_line,
    prog_name,
    run_guarded,
    warning_line,
    wrap_paragraphs,
    write_json,
    write_text,
)

DEFAULT_PRESETS = ["trunk", "mamba2-130m"]
# Visits a shape takes at least and at most (``timing.visits``): one Williams cycle each on a setup
# made anew, round-robin over the run's shapes, until every ratio is within ±1% (docs/method.md).
VISITS = (4, 8)
QUICK_VISITS = (2, 3)
BUDGET_S, QUICK_BUDGET_S = 1.0, 0.2  # seconds of rounds a shape may spend (after its first visits)

EXIT_CODES = """exit codes:
  0    every guarantee held (a hazard that changed bits is reported, and never fails a run)
  1    a guarantee failed, or its scenario, the GEMM or its timing could not run; devices
       disagree (--devices); bits differ from --compare's baseline; a time regressed past --fail-on;
       --prescribe: a hazard with no verified cure
  2    usage or environment error (bad argument, no GPU, no such device, unwritable output path)
  130  interrupted (Ctrl-C); what completed was reported and written
"""
# Each line fits 100 columns under the longest name a user types (python3.12 -m cublas_det.bench).
EPILOG = """examples:
  %(prog)s                  # trunk + mamba2-130m, all modes, all scenarios
  %(prog)s --quick          # fewer repeats and visits, no worker processes
  %(prog)s --preset mamba2-2.7b --tokens 2048 --modes pedantic tf32
  %(prog)s --shape 4096x4096x4096 --scenarios repeat --json run.json
  %(prog)s --compare base.json --fail-on 5 --json new.json
  %(prog)s --devices all --json a.json     # same bits on every GPU here?
  %(prog)s --devices 0,3 --compare a.json  # ... and the same as a.json?
  %(prog)s --list           # the shape catalogue (no GPU needed)
  %(prog)s --kernels        # + the kernels each GEMM ran, and their time
  %(prog)s --explain 128x56x4096:nt   # kernels per mode, SM count, batch

""" + EXIT_CODES


def build_parser(prog: str | None = None) -> ArgumentParser:
    parser = ArgumentParser(
        prog=prog or prog_name(), description=wrap_paragraphs(__doc__.split("\n\n")[1]), epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_argument_group("what to run")
    # Every list option takes `--flag a b` and repeated flags alike (ExtendList).
    what.add_argument("--preset", nargs="+", action=ExtendList, choices=PRESETS, metavar="NAME",
                      help=f"one or more shape presets: {', '.join(PRESETS)} (default: {' '.join(DEFAULT_PRESETS)})")
    what.add_argument("--shape", nargs="+", action=ExtendList, metavar="MxNxK[:op]",
                      help="custom row-major shapes; op is the cuBLAS transa+transb (nn, nt, tn, tt); a :bB "
                           "suffix makes a strided batch of B matrices (64x64x512:nt:b8)")
    what.add_argument("--capture", metavar="FILE",
                      help="check and time exactly the GEMMs of a capture file (cublas-det capture), each in its "
                           "captured configuration")
    what.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, metavar="T",
                      help="tokens (batch x seqlen) for the Mamba2 presets (default: %(default)s)")
    what.add_argument("--modes", nargs="+", action=ExtendList, type=str.lower, metavar="MODE",
                      help=f"math modes: {', '.join(MODE_CHOICES)}, each optionally +disallow-rpr, or run through "
                           "cuBLASLt with +lt, +lt-nosplitk (no split-K) or +lt-smN (planned for N SMs), "
                           f"e.g. default+lt-nosplitk (default: {' '.join(DEFAULT_MODES)}; in half precision: "
                           f"{' '.join(HALF_DEFAULT_MODES)})")
    what.add_argument("--dtype", type=str.lower, metavar="TYPE",
                      help="input element type: float32, bfloat16 or float16 (bf16, fp16) (default: float32)")
    what.add_argument("--out-dtype", type=str.lower, metavar="TYPE",
                      help="output element type: the input type or float32 (default: the input type)")
    what.add_argument("--compute-type", nargs="+", action=ExtendList, metavar="TYPE",
                      help="cuBLAS compute types, each run in every mode, with or without COMPUTE_ and in any "
                           "case: 32f 16f, or COMPUTE_32F_PEDANTIC (default: 32f)")
    what.add_argument("--precision", choices=tuple(PRECISIONS), metavar="NAME",
                      help="a named precision: " + "; ".join(f"{name}: {text}" for name, (text, _) in
                                                            PRECISIONS.items()))
    what.add_argument("--scenarios", nargs="+", action=ExtendList, metavar="NAME",
                      help="reproducibility scenarios, or 'all' or 'none' (default: all; with --devices: repeat): "
                           f"{', '.join(REGISTRY)}")
    what.add_argument("--repeats", type=int, default=20, metavar="N", help="runs per scenario (default: %(default)s)")
    what.add_argument("--seed", type=int, default=0, help="input seed (default: %(default)s)")
    what.add_argument("--quick", action="store_true",
                      help=f"5 repeats, {QUICK_VISITS[0]}-{QUICK_VISITS[1]} timing visits a shape, no scenario that "
                           "needs worker processes ("
                           f"{', '.join(name for name, s in REGISTRY.items() if s.in_worker)})")
    what.add_argument("--no-timing", action="store_true", help="only the reproducibility checks")
    what.add_argument("--list", action="store_true", help="print the shapes that would run, and exit (no GPU needed)")
    what.add_argument("--devices", nargs="+", action=ExtendList, metavar="all|ID",
                      help="per-device sweep instead of the benchmark: 'all' or ids (0,1 or 0 1); one worker "
                           "process per GPU computes every shape in every mode (and --scenarios inside it); the "
                           "report says whether the devices agree. No timing.")
    cure = parser.add_argument_group("prescriptions")
    cure.add_argument("--prescribe", action="store_true",
                      help="for every shape and mode whose bits a hazard changed (SM count, shared handle, batch "
                           "size), try the cures (cuBLASLt with the algorithm pinned, without split-K, planning for "
                           "the fleet's smallest SM count; BF16X9; a handle per stream), verify each bitwise against "
                           "that hazard, time it against the mode it replaces, and report the cheapest")
    cure.add_argument("--lock", metavar="FILE",
                      help="with --prescribe: pin cuBLASLt's algorithm for every GEMM (of the shapes, presets or "
                           "--capture), verify it bitwise (rows m = 1 ... M, SM counts, 4 streams, repeats), time it, "
                           "and write the lock that `cublas-det run --lock FILE` applies to a PyTorch program; "
                           "an existing FILE of this machine gets the new GEMMs added")
    cure.add_argument("--sm-counts", metavar="N,N", type=_sm_counts,
                      help="the SM counts of your fleet (e.g. 132,114): verify the cures under them too, and try "
                           "cuBLASLt planning for the smallest")
    kernels = parser.add_argument_group("kernels (CUPTI: the kernels-cuda13 extra, or kernels-cuda12 for CUDA 12)")
    kernels.add_argument("--kernels", action="store_true",
                         help="record the kernels each GEMM ran: a kernels column, kernel time per GEMM beside graph "
                              "time, and the kernel change behind each bit change (sm-count, batch-invariance, "
                              "streams-shared-handle), and with --prescribe behind each failed cure. Timing is "
                              "unchanged: kernels are recorded after the timed rounds")
    kernels.add_argument("--explain", metavar="SHAPE",
                         help="print the kernels of one shape (MxNxK[:op], or a catalogue name such as "
                              "mamba2-130m/in_proj/dW) per configuration, SM-count target and batch rung, and exit")
    out = parser.add_argument_group("outputs")
    out.add_argument("--json", metavar="PATH", help="write results in pytest-benchmark's JSON layout, with digests")
    out.add_argument("--markdown", metavar="PATH", help="write the tables and summary as Markdown")
    out.add_argument("--plot", metavar="PATH", help="write a PNG of time per mode per shape (needs matplotlib: the plot extra)")
    out.add_argument("--compare", metavar="BASE.json", help="compare bits and times with an earlier --json")
    out.add_argument("--fail-on", type=float, metavar="PCT",
                     help="with --compare: exit 1 if a median time grew by more than PCT percent")
    out.add_argument("-v", "--verbose", action="store_true",
                     help="also how each shape was timed (GEMMs per batch, buffer sets, visits, SM clock) and the "
                          "seconds of each phase of the run")
    return parser


def _options(args, parser):
    """Everything the command line asks for, checked and parsed before any GPU work.

    A value the user gave that does not parse is a :class:`UsageError` (one line, exit 2).
    """
    try:
        return _parse_options(args, parser)
    except UsageError:
        raise
    except ValueError as err:  # the parsers of user input (shapes, presets, modes ...) say what is wrong
        raise UsageError(str(err)) from None


def _parse_options(args, parser):
    if args.fail_on is not None and not args.compare:
        parser.error("--fail-on needs --compare BASE.json")
    if args.fail_on is not None and not (math.isfinite(args.fail_on) and args.fail_on >= 0):
        raise UsageError(f"--fail-on {args.fail_on}: expected a percentage >= 0, e.g. --fail-on 5")
    if args.repeats < 2:
        raise UsageError(f"--repeats {args.repeats}: expected an integer >= 2")
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: expected an integer >= 0")
    if args.devices:
        parse_devices(args.devices, None)  # the syntax now; the ids once the GPUs are counted
    specs = (args.preset or []) + (args.shape or [])
    shapes = resolve_shapes(specs or DEFAULT_PRESETS, tokens=args.tokens)
    if args.devices and args.plot:
        parser.error("--plot draws times, and --devices does not time; drop one of them")
    if args.devices and args.kernels:
        parser.error("--kernels records kernels in this process, and --devices runs worker processes; drop one of them")
    if args.scenarios is None:
        scenarios = ["repeat"] if args.devices else list(REGISTRY)
    elif args.scenarios == ["all"]:
        scenarios = list(REGISTRY)
    elif args.scenarios == ["none"]:
        scenarios = []
    else:
        scenarios = list(validate_scenarios(args.scenarios))
    repeats = args.repeats
    if args.quick:
        scenarios = list(without_workers(scenarios))
        repeats = min(repeats, 5)
    return shapes, scenarios, repeats, _configurations(args)


def _configurations(args) -> list:
    """The configurations to run: --precision's, or --modes x --compute-type in --dtype / --out-dtype."""

    if args.precision:
        if args.dtype or args.out_dtype or args.compute_type or args.modes:
            raise UsageError(f"--precision {args.precision} sets the types and modes; drop --dtype, --out-dtype, "
                             "--compute-type and --modes, or drop --precision")
        return list(PRECISIONS[args.precision][1])
    dtype = canonical_dtype(args.dtype or "float32", "--dtype")
    out_dtype = canonical_dtype(args.out_dtype or dtype, "--out-dtype")
    modes = args.modes or (DEFAULT_MODES if dtype == "float32" else HALF_DEFAULT_MODES)
    computes = []
    for name in args.compute_type or ["COMPUTE_32F"]:
        key = name.upper() if name.upper().startswith("COMPUTE_") else "COMPUTE_" + name.upper()
        if key not in ComputeType.__members__:
            raise UsageError(f"--compute-type {name!r} is not a cuBLAS compute type; choose from "
                             f"{', '.join(ComputeType.__members__)}")
        try:  # a compute type the element types refuse is --compute-type's error, whatever the mode
            GemmConfig(compute_type=ComputeType[key], input_dtype=dtype, output_dtype=out_dtype)
        except ValueError as err:
            raise UsageError(f"--compute-type {name}: {str(err).removeprefix('GemmConfig: ')}") from None
        computes.append(ComputeType[key])
    configs = []
    for mode in modes:
        parsed = GemmConfig.parse(mode, source="--modes")
        for compute in computes:
            try:
                configs.append(dataclasses.replace(parsed, compute_type=compute, input_dtype=dtype,
                                                   output_dtype=out_dtype))
            except ValueError as err:
                raise UsageError(f"--modes {mode}: {str(err).removeprefix('GemmConfig: ')}") from None
    return list(dict.fromkeys(configs))


class Progress:
    """A one-line progress bar on stderr; where stderr is no terminal, a line at each tenth of the run
    (at most a dozen lines in a log)."""

    LOG_LINES = 10

    def __init__(self, total: int):
        self.total, self.done, self.started = max(1, total), 0, time.perf_counter()
        self.tty = sys.stderr.isatty()
        self.logged = 0  # tenths printed so far, where stderr is no terminal

    def step(self, label: str, skip: int = 0) -> None:
        """One step done (and ``skip`` more that will not be taken)."""
        self.done = min(self.total, self.done + 1 + skip)
        filled = int(30 * self.done / self.total)
        line = (f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                f"{time.perf_counter() - self.started:5.1f}s {label}")
        if self.tty:
            print(f"\r\033[K{line[:shutil.get_terminal_size().columns - 1]}", end="", file=sys.stderr, flush=True)
            return
        tenth = self.LOG_LINES * self.done // self.total
        if tenth > self.logged:
            self.logged = tenth
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def _run(argv, prog: str | None = None) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    shapes, scenarios, repeats, configs = _options(args, parser)
    _prescribe_options(args, parser)
    groups = _capture_groups(args, parser) if args.capture else [(shapes, configs)]
    old_lock = _lock_options(args) if args.lock else None
    explained = _explain_target(args, parser) if args.explain else None
    if args.list:
        print(_listing(groups) if args.capture else format_catalogue(shapes))
        return EXIT_OK
    for flag in ("json", "markdown", "plot"):
        if getattr(args, flag) is not None:
            check_writable(getattr(args, flag), f"--{flag}")
    baseline = None
    if args.compare is not None:
        baseline = load_run(args.compare)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: install the plot extra (pip install matplotlib)") from None

    phases = Phases()
    with phases("startup"):
        require_gpu()
    if explained is not None:
        return _explain(explained, configs, args.seed)
    kernels = args.kernels and _kernels_available()
    if args.lock:
        return _lock(args, groups, old_lock)
    if args.prescribe:
        return _prescribe(args, shapes, configs, kernels)
    if args.devices:
        import cupy

        try:
            devices = parse_devices(args.devices, cupy.cuda.runtime.getDeviceCount())
        except ValueError as err:
            raise UsageError(str(err)) from None
        return _sweep(args, shapes, scenarios, repeats, configs, baseline, devices)
    refused = {}
    for group_shapes, group_configs in groups:
        refused.update(_refused_for_memory(group_shapes, group_configs, timing=not args.no_timing))
    return _bench(args, groups, scenarios, repeats, baseline, refused, kernels, phases)


def _sm_counts(text: str) -> tuple:
    try:
        counts = tuple(int(part) for part in text.replace(" ", ",").split(",") if part)
    except ValueError:
        counts = ()
    if not counts or any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected SM counts such as 132,114")
    return counts


def _prescribe_options(args, parser) -> None:
    """What --prescribe and --sm-counts refuse, before any GPU work."""
    if args.sm_counts and not args.prescribe:
        parser.error("--sm-counts is the fleet of --prescribe; add --prescribe")
    if args.lock and not args.prescribe:
        parser.error("--lock writes what --prescribe verifies; add --prescribe")
    if not args.prescribe:
        return
    for flag in (() if args.lock else ("capture",)) + ("devices", "compare", "markdown", "plot", "explain", "no_timing",
                 "scenarios"):
        if getattr(args, flag):
            parser.error(f"--prescribe runs its own checks and timing; drop --{flag.replace('_', '-')}")


def _prescribe(args, shapes, configs, kernels: bool) -> int:
    """--prescribe: the cures of every hazard found, verified and timed; exit 1 if a hazard has none, or if
    a configuration's own check failed."""
    operands = HostOperands(args.seed)
    min_visits, max_visits = QUICK_VISITS if args.quick else VISITS
    try:
        found, problems = prescribe(shapes, configs, fleet=args.sm_counts or (), seed=args.seed, quick=args.quick,
                          repeats=min(args.repeats, 5 if args.quick else 10), operands=operands,
                          on_step=lambda text: print(f"  {text}", file=sys.stderr, flush=True),
                          timing={"min_visits": min_visits, "max_visits": max_visits,
                                  "budget_s": QUICK_BUDGET_S if args.quick else BUDGET_S}, kernels=kernels)
    finally:
        operands.close()
    print(render_prescriptions(found, device_properties()["sm_count"], args.sm_counts or (), problems, kernels))
    if args.json and not write_json(args.json, {"cublas_det": __version__, "provenance": fingerprint(),
                                                 "prescriptions": [p.to_dict() for p in found],
                                                 "problems": problems}):
        return EXIT_USAGE
    return EXIT_FINDING if problems or any(p.best is None for p in found) else EXIT_OK


def _lock_options(args):
    """The lock --lock adds to (None for a new file), read and checked before any GPU work."""
    check_writable(args.lock, "--lock")
    return lockfile.load(args.lock) if os.path.exists(args.lock) else None


def _lock(args, groups, old_lock) -> int:
    """--prescribe --lock: every GEMM pinned, verified and timed, written to the lock; exit 1 if one could not be."""
    here = lockfile.where_here(fingerprint())
    if old_lock is not None:
        old_lock.check_here(here)
    operands = HostOperands(args.seed)
    min_visits, max_visits = QUICK_VISITS if args.quick else VISITS
    entries, refused = [], []
    try:
        for shapes, configs in groups:
            found, why = lock_entries(shapes, configs, fleet=args.sm_counts or (), seed=args.seed,
                                      repeats=min(args.repeats, 5 if args.quick else 10), operands=operands,
                                      on_step=lambda text: print(f"  {text}", file=sys.stderr, flush=True),
                                      timing={"min_visits": min_visits, "max_visits": max_visits,
                                              "budget_s": QUICK_BUDGET_S if args.quick else BUDGET_S})
            entries += found
            refused += why
    finally:
        operands.close()
    lock = (old_lock or lockfile.Lock(here, {}, args.lock)).merged(entries)
    lockfile.write(lock, args.lock)
    print(render_lock(lock, entries, refused))
    return EXIT_FINDING if refused else EXIT_OK


def _kernels_available() -> bool:
    """Whether CUPTI can record kernels; if not, one line saying what to install (the run goes on without)."""

    reason = cupti_unavailable()
    if reason:
        warning_line(prog_name(), f"--kernels: {reason}; running without kernel traces")
    return reason is None


def explain_target(spec: str, tokens: int):
    """The shape ``--explain`` names: a catalogue name (any preset at ``tokens``) or MxNxK[:op]."""

    for name in PRESETS:
        for shape in preset(name, tokens):
            if shape.name == spec:
                return shape
    if not spec.strip()[:1].isdigit():
        raise UsageError(f"{spec!r} to explain: neither a shape like 128x56x4096:nt nor a catalogue name "
                         "(see cublas-det bench --list)")
    try:
        return parse_shape(spec)
    except ValueError as err:
        raise UsageError(f"the shape to explain: {err}") from None


def _explain_target(args, parser):
    """--explain's shape, before any GPU work; the options it cannot go with are refused."""
    flags = ("json", "markdown", "plot", "compare", "devices", "preset", "shape", "scenarios", "no_timing", "list",
             "quick", "kernels")
    clashing = [flag for flag in flags if getattr(args, flag)]
    if clashing:
        parser.error(f"explain prints one table and exits; drop --{', --'.join(f.replace('_', '-') for f in clashing)}")
    return explain_target(args.explain, args.tokens)


def _explain(shape, configs, seed: int) -> int:
    require_cupti()  # the feature itself: without CUPTI, one line and exit 2
    for config in configs:
        check_fits(shape, config, timing=False)
    print(render_explanation(explain_shape(shape, configs, seed=seed)))
    return EXIT_OK


def _refused_for_memory(shapes, configs, *, timing: bool) -> dict:
    """``{shape name: why}`` for the shapes that do not fit in host or device memory.

    When none fits, that is a usage error: one line naming the bytes, within seconds, no operand made.
    """

    refused = {}
    for shape in shapes:
        try:
            for config in configs:
                check_fits(shape, config, timing=timing)
        except DoesNotFit as err:
            refused[shape.name] = str(err)
    if len(refused) == len(shapes):
        first = next(iter(refused.values()))
        more = f" ({plural(len(refused) - 1, 'more shape')} do not fit either)" if len(refused) > 1 else ""
        raise DoesNotFit(first + more)
    for why in refused.values():
        print(f"skipped: {why}", file=sys.stderr)
    return refused


def _sweep(args, shapes, scenarios, repeats, configs, baseline, devices) -> int:
    started_iso = now_iso()
    started = time.perf_counter()
    provenance = fingerprint()
    print(f"sweeping {plural(len(shapes), 'shape')} x {plural(len(configs), 'mode')} on "
          f"{'device' if len(devices) == 1 else 'devices'} {', '.join(map(str, devices))}, "
          "one worker process each", file=sys.stderr)
    runs = run_sweep(shapes, configs, devices, scenarios=scenarios, repeats=repeats, seed=args.seed,
                     on_device=lambda run: print(f"device {run.device_id}: "
                                                 f"{run.error or f'done in {run.elapsed_s:.1f} s'}", file=sys.stderr))
    found = agreements(shapes, configs, runs)
    text = render_sweep(runs, found)
    print(text)
    data = sweep_to_json(runs, found, provenance, started_iso, time.perf_counter() - started, __version__, args.seed)
    written = True
    if args.json:
        written &= write_json(args.json, data)
    if args.markdown:
        written &= write_text(args.markdown, f"# cublas_det device sweep\n\n{started_iso}\n\n```\n{text}\n```\n")
    comparison = _print_comparison(args, baseline, data)
    return _exit_code(sweep_failed(runs, found), any(run.error == INTERRUPTED for run in runs), comparison, written)


def _capture_groups(args, parser) -> list:
    """The replayable GEMMs of --capture, grouped by configuration: ``[(shapes, [config]), ...]``."""
    for flag in ("preset", "shape", "modes", "dtype", "out_dtype", "compute_type", "precision", "devices", "explain"):
        if getattr(args, flag):
            parser.error(f"--capture replays the captured GEMMs in their own configurations; drop --{flag.replace('_', '-')}")
    capture = load_capture(args.capture)
    groups: dict = {}
    for plan in capture.plans:
        if plan.replayed:
            groups.setdefault(plan.config, []).append(plan.shape)
        else:
            warning_line(prog_name(), f"{plan.gemm_id} ({plural(plan.calls, 'call')}) not replayed: {plan.reason}")
        if plan.note:
            warning_line(prog_name(), f"{plan.gemm_id}: {plan.note}")
    if not groups:
        raise UsageError(f"--capture {args.capture}: no GEMM in it can be replayed by this version "
                         "(`cublas-det capture` lists why)")
    return [(shapes, [config]) for config, shapes in groups.items()]


def _listing(groups) -> str:
    """--capture --list: the captured GEMMs that would run, a table per configuration."""
    return "\n\n".join(f"{plural(len(shapes), 'captured GEMM')} in {configs[0].name}:\n"
                       + format_catalogue(shapes) for shapes, configs in groups)


def _bench(args, groups, scenarios, repeats, baseline, refused, kernels=False, phases=None) -> int:
    phases = phases or Phases()
    started_iso = now_iso()
    started = time.perf_counter()
    with phases("startup"):
        provenance = fingerprint()
    timing = not args.no_timing
    shapes = [shape for group_shapes, _ in groups for shape in group_shapes]
    # refused: one line each, no GPU work. A group is shapes that run in the same configurations.
    groups = [([shape for shape in group_shapes if shape.name not in refused], configs) for group_shapes, configs in groups]
    groups = [(runnable, configs) for runnable, configs in groups if runnable]
    min_visits, max_visits = QUICK_VISITS if args.quick else VISITS
    progress = Progress(sum(len(runnable) * len(configs) for runnable, configs in groups) * bool(scenarios)
                        + max_visits * len(groups) * bool(timing))
    checks, timings, errors = {}, {}, dict(refused)
    interrupted = False
    monitor = None
    operands = HostOperands(args.seed)  # drawn once for the checks and the timing
    try:
        for runnable, configs in groups if scenarios else ():
            try:
                found = check_many(runnable, configs, repeats=repeats, scenarios=scenarios, seed=args.seed,
                                   on_check=lambda c: progress.step(f"checked {c.shape.name} {c.mode_name}"),
                                   kernels=kernels, operands=operands, phases=phases)
            except CheckInterrupted as stop:
                found, interrupted = stop.checks, True
            for check in found:
                checks.setdefault(check.shape.name, {})[check.mode_name] = check
            if interrupted:
                break
        if timing and not interrupted and groups:
            try:
                with phases("timing warm-up"):
                    monitor = GpuMonitor.start()  # other processes, clocks, power: before and while timing runs
                    warm_up(0.1 if args.quick else 0.5)  # after the checks: the clocks are mostly up
            except gpu_failures() as err:  # the checks above are kept; every shape's timing says why
                for runnable, _ in groups:
                    for shape in runnable:
                        errors.setdefault(shape.name, f"timing failed: {type(err).__name__}: {err}")
                groups = []
            for runnable, configs in groups:
                def on_visit(visit: int, going: int) -> None:
                    if going:
                        progress.step(f"timing: visit {visit} done, {going} of {plural(len(runnable), 'shape')} "
                                      "go on")
                    else:  # every shape stopped: the visits it did not need are done
                        progress.step(f"timed {plural(len(runnable), 'shape')} in {plural(visit, 'visit')}",
                                      skip=max_visits - visit)

                with phases("timing"):
                    run = time_shapes(runnable, configs, seed=args.seed, min_visits=min_visits,
                                      max_visits=max_visits, budget_s=QUICK_BUDGET_S if args.quick else BUDGET_S,
                                      monitor=monitor, kernels=kernels, on_visit=on_visit, operands=operands)
                timings.update(run.timings)
                errors.update(run.errors)
                if run.interrupted:
                    interrupted = True
                    break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        operands.close()
        progress.close()
        if monitor is not None:
            provenance["gpu_state"] = monitor.stop()
    order = [s for s in shapes if s.name in checks or s.name in timings or s.name in errors]
    reports = tuple(ShapeReport(s, checks.get(s.name, {}), timings.get(s.name), errors.get(s.name)) for s in order)
    result = BenchResult(reports, provenance, started_iso, time.perf_counter() - started, __version__, interrupted,
                         args.seed, phases.seconds)
    with phases("report"):
        text = render_text(result, verbose=args.verbose)
    print(text)
    data = to_json(result)
    written = _write_outputs(args, result, data)  # before comparing: a bad baseline never costs the run
    if args.verbose:
        print("phases (s): " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in phases.seconds.items()),
              file=sys.stderr)
    comparison = _print_comparison(args, baseline, data)
    return _exit_code(run_failed(result), interrupted, comparison, written)


def _exit_code(failed: bool, interrupted: bool, comparison: int = EXIT_OK, written: bool = True) -> int:
    """130 after Ctrl-C (what completed was reported and written); else the verdict -- 1 on a finding, 2
    when the comparison found nothing comparable, 0 -- kept when an output could not be written (said in
    its line), which turns only a clean 0 into 2: the promised file is missing."""
    if interrupted:
        error_line(prog_name(), "interrupted: the results above are those that completed")
        return 130
    verdict = max(EXIT_FINDING if failed else EXIT_OK, comparison)
    return EXIT_USAGE if verdict == EXIT_OK and not written else verdict


def _print_comparison(args, baseline, data: dict) -> int:
    """Print how ``data`` compares with the --compare baseline; return the comparison's exit code."""
    if baseline is None:
        return EXIT_OK

    comparison = compare_runs(baseline, run_from_dict(data, "this run"), args.fail_on)
    print("Compared with " + args.compare)
    print("\n".join(f"  {line}" if line else "" for line in comparison.text(report_width() - 2).splitlines()))
    return comparison.exit_code


def _write_outputs(args, result, data) -> bool:
    """Write each requested output on its own; False when one could not be written (said in one line)."""

    written = True
    if args.json:
        written &= write_json(args.json, data)
    if args.markdown:
        written &= write_text(args.markdown, to_markdown(result))
    if args.plot and any(r.timing for r in result.shapes):
        try:
            write_plot(result, args.plot)
            print(f"wrote {args.plot}", file=sys.stderr)
        except OSError as err:
            error_line(prog_name(), f"could not write {args.plot}: {err.strerror or err}")
            written = False
    return written


EXPLAIN_USAGE = """usage: {prog} SHAPE [--modes MODE ...] [--dtype TYPE] [--tokens T] [--seed N]

The kernels one shape runs in each configuration, under SM-count targets and at each batch size,
and how long they take (CUPTI: the kernels-cuda13 or kernels-cuda12 extra). SHAPE is MxNxK[:op]
or a catalogue name such as mamba2-130m/in_proj/dW (see cublas-det bench --list). Options as for
cublas-det bench.
"""


def explain_main(argv: list[str], prog: str) -> int:
    """``cublas-det explain SHAPE ...``: ``cublas-det bench --explain SHAPE ...``, its messages under its own name."""
    if argv[:1] in (["-h"], ["--help"]):
        print(EXPLAIN_USAGE.format(prog=prog), end="")
        return EXIT_OK
    if not argv or argv[0].startswith("-"):
        error_line(prog, f"a shape comes first, e.g. {prog} 128x56x4096:nt --modes pedantic tf32 (see {prog} --help)")
        return EXIT_USAGE
    return main(["--explain", *argv], prog)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    prog = prog or prog_name()
    return run_guarded(prog, lambda: _run(sys.argv[1:] if argv is None else argv, prog))


if __name__ == "__main__":
    sys.exit(main())
