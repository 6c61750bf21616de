"""cublas-det compare: do stored runs give the same bits? No GPU needed.

Two files: a baseline and a new run, result by result. Three or more: a fleet, per GEMM and
configuration, the files (and devices of a sweep) grouped by digest.

Results are paired by shape and configuration, and compared only when their inputs are the same
(M, N, K, op, T, seed and the sha256 of A and B); otherwise they are reported as "inputs differ".
The answer comes first.
"""

from __future__ import annotations

import glob
import os

from ..base.errors import UsageError
from ..render.compare import compare_fleet, compare_runs
from ..store.run import load_run
from ..base.words import report_width
from .common import check_fail_on, command_main, describe, exit_codes, fail_on

EPILOG = """examples:
  %(prog)s base.json new.json               # yesterday against today
  %(prog)s base.json new.json --fail-on 5   # ... and fail on +5%%
  %(prog)s node-*.json                      # a fleet: one file per node

a cluster: let its launcher start one run per node, each writing its file, e.g. with Slurm:
  srun --ntasks-per-node=1 sh -c 'cublas-det sweep --json node-$(hostname).json'
then compare the files on any machine.

""" + exit_codes("2 also when, in a fleet, a file was compared with no other (named)")


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG, slice(1, 3))
    parser.add_argument("files", nargs="+", metavar="RUN.json", help="files written by --json (two, or a fleet)")
    parser.add_argument("--fail-on", **fail_on("with two files"))


def run(args, parser) -> int:
    # a shell pattern that matched no file: the shell passes it on as written
    patterns = [path for path in args.files if glob.has_magic(path) and not os.path.exists(path)]
    if patterns:
        raise UsageError(f"{', '.join(patterns)}: no file matches the pattern; check the path")
    if len(args.files) < 2:
        raise UsageError(f"give two files (a baseline and a new run) or more (a fleet), not {len(args.files)}")
    check_fail_on(args.fail_on)
    if args.fail_on is not None and len(args.files) != 2:
        raise UsageError(f"--fail-on {args.fail_on}: compares a baseline and a new run; give exactly two files")
    runs = [load_run(path) for path in args.files]
    comparison = compare_runs(runs[0], runs[1], args.fail_on) if len(runs) == 2 else compare_fleet(runs)
    print(comparison.text(report_width()))
    return comparison.exit_code


build_parser, main = command_main(add_arguments, run)

