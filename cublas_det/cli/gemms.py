"""The GEMMs that bench, sweep, prescribe and explain run: their shared options (families), read before any
GPU work, and how each run ends (its comparison with a baseline, its exit code)."""

from __future__ import annotations

import argparse
import dataclasses

from ..bindings.cublas import ComputeType
from ..apilog.file import load as load_capture
from ..check.devices import parse_devices
from ..check.scenarios import REGISTRY, validate_scenarios, without_workers
from ..core.config import (DEFAULT_MODES, HALF_DEFAULT_MODES, MODE_CHOICES, PRECISIONS, GemmConfig, canonical_dtype,
    check_types)
from ..base.dtypes import ALIASES, GEMM_TYPES
from ..base.errors import ExitCode, UsageError
from ..kernels.recorder import cupti_unavailable
from ..render.compare import compare_runs
from ..store.run import load_run, run_from_dict
from ..core.shapes import DEFAULT_PRESETS, DEFAULT_TOKENS, PRESETS, format_catalogue, resolve_shapes
from ..base.words import plural, report_width
from .common import (ExtendList, check_fail_on, check_outputs, error_line, fail_on, given, unless_missing,
                     warning_line)

# Visits a shape takes at least and at most (``timing.visits``): one Williams cycle each on a setup
# made anew, round-robin over the run's shapes, until every ratio is within ±1% (docs/method.md).
VISITS = (4, 8)
QUICK_VISITS = (2, 2)  # --quick: a first look in under 8 s warm; the intervals it gives say how sure
QUICK_REPEATS = 5  # the most runs per scenario under --quick
BUDGET_S, QUICK_BUDGET_S = 1.0, 0.2  # seconds of rounds a shape may spend (after its first visits)
WHAT, OUTPUTS = "what to run", "outputs"


def timing_budget(quick: bool) -> dict:
    """The visits and seconds a timed shape may take, as ``time_shapes`` takes them."""
    (low, high), budget = (QUICK_VISITS, QUICK_BUDGET_S) if quick else (VISITS, BUDGET_S)
    return {"min_visits": low, "max_visits": high, "budget_s": budget}


def quick_help(timed: bool) -> str:
    """--quick's help: the visits only for a command that times (a sweep does not)."""
    low, high = QUICK_VISITS
    visits = f", {low if low == high else f'{low}-{high}'} timing visits a shape" if timed else ""
    workers = ", ".join(name for name, s in REGISTRY.items() if s.in_worker)
    return f"{QUICK_REPEATS} repeats{visits}, no scenario that needs worker processes ({workers})"


def _sm_counts(text: str) -> tuple:
    try:
        counts = tuple(int(part) for part in text.replace(" ", ",").split(",") if part)
    except ValueError:
        counts = ()
    if not counts or any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected SM counts such as 132,114")
    return counts


KERNELS = "kernels (CUPTI: the kernels-cuda13 extra, or kernels-cuda12 for CUDA 12)"
LISTED = dict(nargs="+", action=ExtendList)  # every list option takes `--flag a b` and repeated flags alike
# Each family: its group and its options (flags, argparse's keywords); a command is made of the families it takes.
OPTIONS = {
    "shapes": (WHAT, [
        ("--preset", dict(**LISTED, metavar="NAME", help=f"one or more shape presets: {', '.join(PRESETS)} (default: "
                          f"{' '.join(DEFAULT_PRESETS)})")),
        ("--shape", dict(**LISTED, metavar="MxNxK[:op]", help="custom row-major shapes; op is the cuBLAS transa+transb "
                         "(nn, nt, tn, tt); a :bB suffix makes a strided batch of B matrices (64x64x512:nt:b8)")),
        ("--list", dict(action="store_true", help="print the shapes that would run, and exit (no GPU needed)"))]),
    "capture": (WHAT, [
        ("--capture", dict(metavar="FILE", help="check and time exactly the GEMMs of a capture file (cublas-det "
                           "capture), each in its captured configuration"))]),
    "configs": (WHAT, [
        ("--tokens", dict(type=int, default=DEFAULT_TOKENS, metavar="T",
                          help="tokens (batch x seqlen) for the Mamba2 presets (default: %(default)s)")),
        ("--modes", dict(**LISTED, type=str.lower, metavar="MODE", help=f"math modes: {', '.join(MODE_CHOICES)}, each "
                         "optionally +disallow-rpr, or run through cuBLASLt with +lt, +lt-nosplitk (no split-K) or "
                         "+lt-smN (planned for N SMs), e.g. default+lt-nosplitk (default: "
                         f"{' '.join(DEFAULT_MODES)}; in half precision: {' '.join(HALF_DEFAULT_MODES)})")),
        ("--dtype", dict(type=str.lower, metavar="TYPE", help=f"input element type: {', '.join(GEMM_TYPES)} "
                         f"({', '.join(a for a, name in ALIASES.items() if name in GEMM_TYPES)}) (default: float32)")),
        ("--out-dtype", dict(type=str.lower, metavar="TYPE",
                             help="output element type: the input type or float32 (default: the input type)")),
        ("--compute-type", dict(**LISTED, metavar="TYPE", help="cuBLAS compute types, each run in every mode, with or "
                                "without COMPUTE_ and in any case: 32f 16f, or COMPUTE_32F_PEDANTIC (default: 32f)")),
        ("--precision", dict(choices=tuple(PRECISIONS), metavar="NAME", help="a named precision: " + "; ".join(
            f"{name}: {text}" for name, (text, _) in PRECISIONS.items()))),
        ("--seed", dict(type=int, default=0, help="input seed (default: %(default)s)"))]),
    "scenarios": (WHAT, [
        ("--scenarios", dict(**LISTED, metavar="NAME", help="reproducibility scenarios, or 'all' or 'none' (default: "
                             f"all; in a sweep: repeat): {', '.join(REGISTRY)}"))]),
    "checks": (WHAT, [
        ("--repeats", dict(type=int, default=20, metavar="N", help="runs per scenario (default: %(default)s)")),
        ("--quick", dict(action="store_true", help=quick_help(timed=True)))]),
    "devices": (WHAT, [
        ("--devices", dict(**LISTED, default=["all"], metavar="all|ID",
                           help="the GPUs: 'all' or ids (0,1 or 0 1) (default: all)"))]),
    "kernels": (KERNELS, [
        ("--kernels", dict(action="store_true", help="record the kernels each GEMM ran: a kernels column, kernel time "
                           "per GEMM beside graph time, and the kernel change behind each bit change (sm-count, "
                           "batch-invariance, streams-shared-handle), and in prescribe behind each failed cure. "
                           "Timing is unchanged: kernels are recorded after the timed rounds"))]),
    "prescriptions": ("prescriptions", [
        ("--lock", dict(metavar="FILE", help="pin cuBLASLt's algorithm for every GEMM (of the shapes, presets or "
                        "--capture), verify it bitwise (rows m = 1 ... M, SM counts, 4 streams, repeats), time it, "
                        "and write the lock that `cublas-det run --lock FILE` applies to a PyTorch program; an "
                        "existing FILE of this machine gets the new GEMMs added")),
        ("--sm-counts", dict(metavar="N,N", type=_sm_counts, help="the SM counts of your fleet (e.g. 132,114): verify "
                             "the cures under them too, and try cuBLASLt planning for the smallest"))]),
    "json": (OUTPUTS, [
        ("--json", dict(metavar="PATH", help="write results in pytest-benchmark's JSON layout, with digests"))]),
    "reports": (OUTPUTS, [
        ("--markdown", dict(metavar="PATH", help="write the tables and summary as Markdown")),
        ("--compare", dict(metavar="BASE.json", help="compare bits and times with an earlier --json")),
        ("--fail-on", fail_on("with --compare"))]),
    "timed": (OUTPUTS, [
        ("--plot", dict(metavar="PATH",
                        help="write a PNG of time per mode per shape (needs matplotlib: the plot extra)")),
        ("-v --verbose", dict(action="store_true", help="also how each shape was timed (GEMMs per batch, buffer sets, "
                              "visits, SM clock) and the seconds of each phase of the run")),
        ("--no-timing", dict(action="store_true", help="only the reproducibility checks"))]),
}


def add_family(parser, families: tuple[str, ...], why: str | None, special: dict | None = None) -> None:
    """A command of the benchmark, made of the options of ``families``: an option of the others that it does not
    take is refused with ``why`` (``{}`` stands for the options), or with its own reason in ``special``."""
    groups = {}
    for name in families:
        title, options = OPTIONS[name]
        group = groups.get(title) or groups.setdefault(title, parser.add_argument_group(title))
        for flags, keywords in options:
            group.add_argument(*flags.split(), **keywords)
    every = {flag for _, options in OPTIONS.values() for flags, _ in options for flag in flags.split()}
    every |= {"--explain", "--prescribe"}  # bench's flags for explain and prescribe
    parser.refusals = {option: (special or {}).get(option, why) for option in every
                       if option not in parser._option_string_actions}


def read_options(args):
    """The shapes, scenarios, repeats and configurations the command line asks for, checked and parsed
    before any GPU work; a value that does not parse is a :class:`UsageError` (one line, exit 2)."""
    # a command without --repeats or --scenarios (explain, prescribe) runs no scenario itself
    repeats, scenarios = getattr(args, "repeats", 2), getattr(args, "scenarios", ["none"])
    try:  # the parsers of user input (shapes, presets, modes ...) say what is wrong in a ValueError
        if repeats < 2:
            raise UsageError(f"--repeats {repeats}: expected an integer >= 2")
        if args.seed < 0:
            raise UsageError(f"--seed {args.seed}: expected an integer >= 0")
        if getattr(args, "devices", None):
            parse_devices(args.devices, None)  # the syntax now; the ids once the GPUs are counted
        presets = getattr(args, "preset", None) or []
        unknown = [name for name in presets if name not in PRESETS]
        if unknown:  # not argparse's choices: the presets are too many for its one line
            raise UsageError(f"--preset: invalid choice: {unknown[0]!r}; choose from the presets --help lists")
        shapes = resolve_shapes(presets + (getattr(args, "shape", None) or []) or DEFAULT_PRESETS, tokens=args.tokens)
        if scenarios is None:
            scenarios = ["repeat"] if getattr(args, "devices", None) else list(REGISTRY)
        elif scenarios == ["all"]:
            scenarios = list(REGISTRY)
        elif scenarios == ["none"]:
            scenarios = []
        else:
            scenarios = list(validate_scenarios(scenarios, listed_in="--help"))
        if getattr(args, "quick", False):
            scenarios = list(without_workers(scenarios))
            repeats = min(repeats, QUICK_REPEATS)
        return shapes, scenarios, repeats, _configurations(args)
    except UsageError:
        raise
    except ValueError as err:
        raise UsageError(str(err)) from None


def _configurations(args) -> list:
    """The configurations to run: --precision's, or --modes x --compute-type in --dtype / --out-dtype."""
    if args.precision:
        if args.dtype or args.out_dtype or args.compute_type or args.modes:
            raise UsageError(f"--precision {args.precision} sets the types and modes; drop --dtype, --out-dtype, "
                             "--compute-type and --modes, or drop --precision")
        return list(PRECISIONS[args.precision][1])
    dtype = canonical_dtype(args.dtype or "float32", "--dtype")
    out_dtype = canonical_dtype(args.out_dtype or dtype, "--out-dtype")
    computes = []
    for name in args.compute_type or ["COMPUTE_32F"]:
        key = "COMPUTE_" + name.upper().removeprefix("COMPUTE_")
        if key not in ComputeType.__members__:
            raise UsageError(f"--compute-type {name!r} is not a cuBLAS compute type; choose from "
                             f"{', '.join(ComputeType.__members__)}")
        # a compute type the element types refuse is --compute-type's error, whatever the mode
        check_types(dtype, out_dtype, ComputeType[key], f"--compute-type {name}: ")
        computes.append(ComputeType[key])
    configs = []
    for mode in args.modes or (DEFAULT_MODES if dtype == "float32" else HALF_DEFAULT_MODES):
        parsed = GemmConfig.parse(mode, source="--modes")
        for compute in computes:
            try:
                configs.append(dataclasses.replace(parsed, compute_type=compute, input_dtype=dtype,
                                                   output_dtype=out_dtype))
            except ValueError as err:
                raise UsageError(f"--modes {mode}: {str(err).removeprefix('GemmConfig: ')}") from None
    return list(dict.fromkeys(configs))


def capture_groups(args, parser) -> list:
    """The replayable GEMMs of --capture, grouped by configuration: ``[(shapes, [config]), ...]``."""
    parser.refuse(given(args, "preset", "shape", "modes", "dtype", "out_dtype", "compute_type", "precision"),
                  "--capture replays the captured GEMMs in their own configurations; drop {}")
    capture = load_capture(args.capture)
    groups: dict = {}
    for plan in capture.plans:
        if plan.replayed:
            groups.setdefault(plan.config, []).append(plan.shape)
        else:
            warning_line(parser.prog, f"{plan.gemm_id} ({plural(plan.calls, 'call')}) not replayed: {plan.reason}")
        if plan.note:
            warning_line(parser.prog, f"{plan.gemm_id}: {plan.note}")
    if not groups:
        raise UsageError(f"--capture {args.capture}: no GEMM in it can be replayed by this version "
                         "(the capture command lists why)")
    return [(shapes, [config]) for config, shapes in groups.items()]


def listing(args, groups) -> str:
    """--list: the shapes that would run, or the captured GEMMs, a table per configuration; it writes no file."""
    outputs = given(args, "json", "markdown", "plot")
    if outputs:
        raise UsageError(f"--list prints the shapes and writes no file; drop {', '.join(outputs)}")
    if not getattr(args, "capture", None):
        return format_catalogue(groups[0][0])
    return "\n\n".join(f"{plural(len(shapes), 'captured GEMM')} in {configs[0].name}:\n"
                       + format_catalogue(shapes) for shapes, configs in groups)


def baseline(args, parser, *outputs: str):
    """The --compare baseline (or None), after the outputs and --fail-on are checked: all before any GPU work."""
    percent = getattr(args, "fail_on", None)
    if percent is not None and not args.compare:
        parser.error("--fail-on needs --compare BASE.json")
    check_fail_on(percent)
    check_outputs(args, *outputs)
    return load_run(args.compare) if getattr(args, "compare", None) is not None else None


def kernels_available(prog: str) -> bool:
    """Whether CUPTI can record kernels; if not, one line saying what to install (the run goes on without)."""
    reason = cupti_unavailable()
    if reason:
        warning_line(prog, f"--kernels: {reason}; running without kernel traces")
    return reason is None


def exit_code(prog: str, failed: bool, interrupted: bool, comparison: int = ExitCode.OK, written: bool = True) -> int:
    """130 after Ctrl-C; else the verdict (1 on a finding, 2 when nothing was comparable, 0), kept when an
    output could not be written, which turns only a clean 0 into 2: the promised file is missing."""
    if interrupted:
        error_line(prog, "interrupted: the results above are those that completed")
        return ExitCode.INTERRUPTED
    verdict = max(ExitCode.FINDING if failed else ExitCode.OK, comparison)
    return unless_missing(verdict, written)


def print_comparison(args, baseline, data: dict) -> int:
    """Print how ``data`` compares with the --compare baseline; return the comparison's exit code."""
    if baseline is None:
        return ExitCode.OK
    comparison = compare_runs(baseline, run_from_dict(data, "this run"), args.fail_on)
    print("Compared with " + args.compare)
    print("\n".join(f"  {line}" if line else "" for line in comparison.text(report_width() - 2).splitlines()))
    return comparison.exit_code
