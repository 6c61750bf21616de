"""cublas-det diff RUN_A RUN_B: the first step and the first tensor where two runs' bits differ.

Reads the dumps or trace logs of two runs of any framework (raw binaries, .npy, .npz,
safetensors, or the digest logs of cublas_det.trace.Recorder), compares them step by step
and leaf by leaf, and prints per step a table of leaves (equal, or DIVERGE with the mismatched
elements, the greatest ULP distance and |difference|, and the worst element's index), then a
verdict. Streams: at most four chunks of one leaf (two per side) are in memory at a time.
"""

from __future__ import annotations

import argparse
import math

from ..bits.streams import DTYPES, lookup_dtype
from ..rundiff.diff import DiffInterrupted, IncompleteDiff, diff_runs, report_lines
from ..rundiff.layouts import RunLayoutError, open_run, read_order_file
from ..base.words import plural, report_width
from ..base.errors import ExitCode
from .common import (check_outputs, command_main, describe, error_line, exit_codes, unless_missing, warning_line,
                     write_json)

EPILOG = """layouts (RUN is a directory unless said otherwise):
  RUN/trace.jsonl (or the .jsonl itself)   digests logged by cublas_det.trace.Recorder, in order
  RUN/step_<N>/<leaf>.bin, RUN/step<N>_<leaf>.bin   raw binaries of --dtype, 1-D
  RUN/step_<N>/<leaf>.npy, RUN/step<N>_<leaf>.npy, RUN/step_<N>.npz, RUN/step_<N>.safetensors
  RUN/step_<N>/<file>.safetensors, .npz, .pt (with PyTorch)   checkpoints: leaves named <file>:<key>
  a single .npz, .safetensors or .pt file: a run of one step (step 0)
  without a log, leaves are compared in name order (or --order's); other files are skipped

examples:
  %(prog)s runs/a runs/b                # stop after the first divergent step
  %(prog)s runs/a runs/b --all -v       # every step, every table
  %(prog)s dump1 dump2 --dtype bfloat16 --order leaves.txt
  %(prog)s runs/a/trace.jsonl runs/b --json diff.json

""" + exit_codes("0  identical in every step both runs have; a run that ends before the other is said first")


def _dtype(value: str) -> str:
    try:
        return lookup_dtype(value).name
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _chunk_mib(value: str) -> int:
    try:
        mib = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not math.isfinite(mib):
        raise argparse.ArgumentTypeError(f"must be a finite number of MiB, not {value}")
    chunk = int(mib * (1 << 20)) // 8 * 8
    if chunk <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {value}")
    return chunk


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG)
    parser.add_argument("run_a", metavar="RUN_A", help="the first run: a directory of dumps, or a trace log")
    parser.add_argument("run_b", metavar="RUN_B", help="the second run, in any layout")
    parser.add_argument("--dtype", type=_dtype, default="float32", metavar="DTYPE",
                        help=f"dtype of raw .bin files without a log: {', '.join(DTYPES)} (default: %(default)s)")
    parser.add_argument("--order", metavar="FILE",
                        help="leaf names, one per line: compare these first, in this order (default: "
                             "recording order from a log, else name order)")
    parser.add_argument("--all", action="store_true", dest="all_steps",
                        help="compare every step (default: stop after the first divergent step)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print each equal step with its table (default: equal steps in a row, one line)")
    parser.add_argument("--json", metavar="PATH", help="also write the comparison as JSON")
    parser.add_argument("--chunk-mib", type=_chunk_mib, default=4 << 20, dest="chunk_bytes", metavar="MIB",
                        help="bytes read per side per step of the stream, in MiB (default: 4)")


def run(args, parser) -> int:
    prog = parser.prog
    check_outputs(args, "json")
    order = read_order_file(args.order) if args.order else None
    runs = [open_run(path, raw_dtype=args.dtype) for path in (args.run_a, args.run_b)]
    for side, run in zip("AB", runs):
        for note in run.notes:
            warning_line(prog, f"run {side}: {note}")
    try:
        diff, error = diff_runs(*runs, order=order, all_steps=args.all_steps, chunk_bytes=args.chunk_bytes), None
    except (IncompleteDiff, DiffInterrupted) as err:  # the steps compared before it are reported, then it
        diff, error = err.diff, err
    if not diff.nothing_compared:
        print("\n".join(report_lines(diff, verbose=args.verbose, width=report_width())))
    nan_patterns = sum(leaf.stats.nan_mismatches for step in diff.steps for leaf in step.leaves if leaf.stats)
    if nan_patterns and any(run.layout.startswith("raw ") for run in runs):
        warning_line(prog, f"--dtype {args.dtype}: {plural(nan_patterns, 'mismatched element')} read as NaN: "
                     "is it the files' dtype?")
    written = not args.json or write_json(args.json, diff.to_dict(), prog)
    if isinstance(error, DiffInterrupted):
        raise error  # exit 130, after what was compared
    if diff.first_divergence is not None:  # a finding stands, whatever failed after it
        if error is not None:
            error_line(prog, str(error))
        return ExitCode.FINDING
    if error is not None:
        raise error
    if diff.nothing_compared:
        raise RunLayoutError(diff.verdict())
    return unless_missing(ExitCode.OK, written)


build_parser, main = command_main(add_arguments, run)

