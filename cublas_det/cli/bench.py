"""cublas-det bench: are the GEMMs reproducible in each math mode, and what does each cost?

Checks every shape in every mode under the reproducibility scenarios, then times the modes side
by side (CUDA-graph replay and eager, interleaved, paired ratios with 95% intervals, an A/A
control). Tables and the summary go to stdout, progress and diagnostics to stderr. --prescribe,
--explain SHAPE and --devices run the prescribe, explain and sweep commands.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

from .. import __version__
from ..check import CheckInterrupted, check_many
from ..core.device import fingerprint, gpu_failures, require_gpu
from ..base.errors import DoesNotFit, ExitCode
from ..core.memory import check_fits
from ..core.operands import HostOperands
from ..base.phases import Phases
from ..render.markdown import to_markdown
from ..render.plot import plot
from ..results.bench import BenchResult, ShapeReport, run_failed
from ..store.results import to_json
from ..store.run import now_iso
from ..render.text import render_text, summary_lines, warnings_for
from ..timing import time_shapes, warm_up
from ..timing.monitor import GpuMonitor
from ..base.words import plural
from . import explain, prescribe, sweep
from .common import command_main, describe, exit_codes, write_file, write_json, write_text
from .gemms import (add_family, baseline, capture_groups, exit_code, kernels_available, listing, print_comparison,
                    read_options, timing_budget)

EXIT_CODES = exit_codes("1 also when a scenario, the GEMM or its timing could not run; a hazard that changed bits "
                        "is reported, and never fails a run")
# Each line fits 100 columns under the longest name a user types (python3.12 -m cublas_det.bench).
EPILOG = """examples:
  %(prog)s                  # trunk + mamba2-130m, all modes, all scenarios
  %(prog)s --quick          # fewer repeats and visits, no worker processes
  %(prog)s --preset mamba2-2.7b --tokens 2048 --modes pedantic tf32
  %(prog)s --shape 4096x4096x4096 --scenarios repeat --json run.json
  %(prog)s --compare base.json --fail-on 5 --json new.json
  %(prog)s --list           # the shapes a run would take (no GPU needed)
  %(prog)s --kernels        # + the kernels each GEMM ran, and their time
  %(prog)s --capture capture.json     # exactly the GEMMs a program ran

""" + EXIT_CODES
# The commands a bench flag runs, one at a time; their messages name the flag (not --devices).
AS_COMMANDS = {"--prescribe": prescribe, "--explain": explain, "--devices": sweep}


class _AsCommand(argparse.Action):
    """A bench flag that runs another command; found before parsing, so argparse sees only an abbreviation."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: write {self.option_strings[0]} in full")


def add_arguments(parser) -> None:
    special = {"--lock": "--lock writes what prescribe verifies; add --prescribe",
               "--sm-counts": "--sm-counts is the fleet of prescribe; add --prescribe"}
    describe(parser, __doc__, EPILOG)
    add_family(parser, ("shapes", "capture", "configs", "scenarios", "checks", "kernels", "json", "reports", "timed"),
               None, special)
    others = parser.add_argument_group("other commands, as bench flags")
    others.add_argument("--prescribe", nargs=0, action=_AsCommand,
                        help="the cures of each hazard found, verified and timed: `cublas-det prescribe --help`")
    others.add_argument("--explain", metavar="SHAPE", action=_AsCommand,
                        help="the kernels of one shape per configuration: `cublas-det explain --help`")
    others.add_argument("--devices", nargs="+", metavar="all|ID", action=_AsCommand,
                        help="every shape and mode on each GPU, the same bits?: `cublas-det sweep --help`")
    parser.redirect = _as_command


def _as_command(parser, argv: list[str]):
    """The parser and words of the command a flag of AS_COMMANDS runs when it is given in full, else None; two
    of them given together are refused."""
    found = {}
    for at, word in enumerate(argv):
        found.setdefault(word.partition("=")[0], at)
    flags = [flag for flag in AS_COMMANDS if flag in found]
    if len(flags) > 1:
        parser.refuse(flags, f"{', '.join(flags[:-1])} and {flags[-1]} each run a command of their own; give one")
    if not flags:
        return None
    flag, command = flags[0], AS_COMMANDS[flags[0]]
    at, (_, equals, value) = found[flag], argv[found[flag]].partition("=")
    if command is sweep:
        return command.build_parser(parser.prog), argv
    if command is prescribe:
        return command.build_parser(f"{parser.prog} {flag}"), argv[:at] + argv[at + 1:]
    shape = [value] if equals else argv[at + 1:at + 2]  # explain's shape comes first
    return command.build_parser(f"{parser.prog} {flag}"), shape + argv[:at] + argv[at + (1 if equals else 2):]


def run(args, parser) -> int:
    shapes, scenarios, repeats, configs = read_options(args)
    groups = capture_groups(args, parser) if args.capture else [(shapes, configs)]
    if args.list:
        print(listing(args, groups))
        return ExitCode.OK
    base = baseline(args, parser, "json", "markdown", "plot")
    phases = Phases()
    with phases("startup"):
        require_gpu()
    kernels = args.kernels and kernels_available(parser.prog)
    refused = {name: why for group_shapes, group_configs in groups
               for name, why in _refused_for_memory(group_shapes, group_configs, timing=not args.no_timing).items()}
    return _bench(args, groups, scenarios, repeats, base, refused, kernels, phases, parser.prog)


def _refused_for_memory(shapes, configs, *, timing: bool) -> dict:
    """``{shape name: why}`` for the shapes that do not fit in host or device memory; when none fits, a
    usage error naming the bytes, before any operand is made."""
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


class Progress:
    """A one-line progress bar on stderr; without a terminal, a line at each tenth of the run."""

    def __init__(self, total: int):
        self.total, self.done, self.started = max(1, total), 0, time.perf_counter()
        self.tty, self.logged = sys.stderr.isatty(), 0  # logged: tenths printed so far, where stderr is no terminal

    def step(self, label: str, skip: int = 0) -> None:
        """One step done (and ``skip`` more that will not be taken)."""
        self.done = min(self.total, self.done + 1 + skip)
        filled = int(30 * self.done / self.total)
        line = (f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                f"{time.perf_counter() - self.started:5.1f}s {label}")
        tenth = 10 * self.done // self.total
        if self.tty:
            print(f"\r\033[K{line[:shutil.get_terminal_size().columns - 1]}", end="", file=sys.stderr, flush=True)
        elif tenth > self.logged:
            self.logged = tenth
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def _bench(args, groups, scenarios, repeats, baseline, refused, kernels=False, phases=None, prog="bench") -> int:
    phases = phases or Phases()
    started_iso, started = now_iso(), time.perf_counter()
    with phases("startup"):
        provenance = fingerprint()
    timing = not args.no_timing
    shapes = [shape for group_shapes, _ in groups for shape in group_shapes]
    # refused: one line each, no GPU work. A group is shapes that run in the same configurations.
    groups = [([s for s in group_shapes if s.name not in refused], configs) for group_shapes, configs in groups]
    groups = [(runnable, configs) for runnable, configs in groups if runnable]
    budget = timing_budget(args.quick)
    progress = Progress(sum(len(runnable) * len(configs) for runnable, configs in groups) * bool(scenarios)
                        + budget["max_visits"] * len(groups) * bool(timing))
    checks, timings, errors = {}, {}, dict(refused)
    interrupted, monitor = False, None
    operands = HostOperands(args.seed)  # drawn once for the checks and the timing
    try:
        if scenarios:
            interrupted = _check(groups, scenarios, repeats, args.seed, progress, kernels, operands, phases, checks)
        if timing and not interrupted and groups:
            try:
                with phases("timing warm-up"):
                    monitor = GpuMonitor.start()  # other processes, clocks, power: before and while timing runs
                    warm_up(0.1 if args.quick else 0.5)  # after the checks: the clocks are mostly up
            except gpu_failures() as err:  # the checks above are kept; every shape's timing says why
                for shape in (s for runnable, _ in groups for s in runnable):
                    errors.setdefault(shape.name, f"timing failed: {type(err).__name__}: {err}")
                groups = []
            interrupted = _time(groups, args.seed, budget, progress, monitor, kernels, operands, phases, timings,
                                errors)
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
    return _report(args, result, baseline, phases, prog)


def _check(groups, scenarios, repeats, seed, progress, kernels, operands, phases, checks) -> bool:
    """Each group's checks into ``checks`` (shape name -> mode -> check); whether Ctrl-C stopped them."""
    for runnable, configs in groups:
        try:
            found, interrupted = check_many(runnable, configs, repeats=repeats, scenarios=scenarios, seed=seed,
                                            on_check=lambda c: progress.step(f"checked {c.shape.name} {c.mode_name}"),
                                            kernels=kernels, operands=operands, phases=phases), False
        except CheckInterrupted as stop:
            found, interrupted = stop.checks, True
        for check in found:
            checks.setdefault(check.shape.name, {})[check.mode_name] = check
        if interrupted:
            return True
    return False


def _time(groups, seed, budget, progress, monitor, kernels, operands, phases, timings, errors) -> bool:
    """Each group's timing into ``timings`` and ``errors`` (by shape name); whether Ctrl-C stopped it."""
    for runnable, configs in groups:
        def on_visit(visit: int, going: int) -> None:
            if going:
                progress.step(f"timing: visit {visit} done, {going} of {plural(len(runnable), 'shape')} go on")
            else:  # every shape stopped: the visits it did not need are done
                progress.step(f"timed {plural(len(runnable), 'shape')} in {plural(visit, 'visit')}",
                              skip=budget["max_visits"] - visit)
        with phases("timing"):
            timed = time_shapes(runnable, configs, seed=seed, **budget, monitor=monitor, kernels=kernels,
                                on_visit=on_visit, operands=operands)
        timings.update(timed.timings)
        errors.update(timed.errors)
        if timed.interrupted:
            return True
    return False


def _report(args, result, baseline, phases, prog: str) -> int:
    """Print the run and write each output on its own (before comparing: a bad baseline never costs the run),
    then the comparison with the baseline; the exit code."""
    with phases("report"):
        text = render_text(result, verbose=args.verbose)
    print(text)
    data = to_json(result, summary_lines(result), warnings_for(result))
    written = True
    if args.json:
        written &= write_json(args.json, data, prog)
    if args.markdown:
        written &= write_text(args.markdown, to_markdown(result), prog)
    if args.plot and any(r.timing for r in result.shapes):
        written &= write_file(args.plot, prog, lambda: plot(result).savefig(args.plot))
    if args.verbose:
        print("phases (s): " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in phases.seconds.items()),
              file=sys.stderr)
    return exit_code(prog, run_failed(result), result.interrupted, print_comparison(args, baseline, data), written)


build_parser, main = command_main(add_arguments, run)
