"""python -m cublas_det.compare: do stored runs give the same bits? No GPU needed.

Two files: a baseline and a new run, result by result. Three or more: a fleet, per GEMM and
configuration, the files (and devices of a --devices sweep) grouped by digest.

Results are paired by shape and configuration, and compared only when their inputs are the same
(M, N, K, op, T, seed and the sha256 of A and B); otherwise they are reported as "inputs differ".

Exit codes: 0 the bits agree; 1 bits differ under identical inputs (or a time regressed past
--fail-on); 2 usage or file error, or nothing comparable was found.
"""

from __future__ import annotations

import argparse
import math
import sys

from ..errors import UsageError
from ..report.compare import compare_fleet, compare_runs
from ..report.runfile import load_run
from .common import ArgumentParser, run_guarded, wrap_paragraphs

PROG = "python -m cublas_det.compare"
EPILOG = """examples:
  %(prog)s base.json new.json               # yesterday against today
  %(prog)s base.json new.json --fail-on 5   # ... failing on a time regression above 5%%
  %(prog)s node-*.json                      # a fleet: one --devices all --json per node

a cluster: let its launcher start one run per node, each writing its file, e.g. with Slurm:
  srun --ntasks-per-node=1 sh -c 'cublas-det bench --devices all --json node-$(hostname).json'
then compare the files on any machine.
"""


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=prog, description=wrap_paragraphs(__doc__.split("\n\n")[1]),
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="RUN.json", help="files written by --json (two, or a fleet)")
    parser.add_argument("--fail-on", type=float, metavar="PCT",
                        help="with two files: exit 1 if a median time grew by more than PCT percent")
    return parser


def _run(argv, prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if len(args.files) < 2:
        raise UsageError(f"give two files (a baseline and a new run) or more (a fleet), not {len(args.files)}")
    if args.fail_on is not None and (len(args.files) != 2 or not (math.isfinite(args.fail_on) and args.fail_on >= 0)):
        raise UsageError(f"--fail-on {args.fail_on}: expected a percentage >= 0, with exactly two files")
    runs = [load_run(path) for path in args.files]
    comparison = compare_runs(runs[0], runs[1], args.fail_on) if len(runs) == 2 else compare_fleet(runs)
    print("\n".join(comparison.lines))
    return comparison.exit_code


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    return run_guarded(prog, lambda: _run(sys.argv[1:] if argv is None else argv, prog))


if __name__ == "__main__":
    sys.exit(main())
