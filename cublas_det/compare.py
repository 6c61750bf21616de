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
import sys

from .cli.common import ArgumentParser, run_guarded

PROG = "python -m cublas_det.compare"
EPILOG = """examples:
  python -m cublas_det.compare base.json new.json               # yesterday against today
  python -m cublas_det.compare base.json new.json --fail-on 5   # ... and fail on a time regression above 5%
  python -m cublas_det.compare node-*.json                      # a fleet: one --devices all --json per node

checking a cluster: let the cluster's own launcher start one run per node, each writing its file,
e.g. with Slurm:  srun --ntasks-per-node=1 sh -c 'python -m cublas_det.bench --devices all --json node-$(hostname).json'
then compare the files on any machine:  python -m cublas_det.compare node-*.json
"""


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[1].replace("\n", " "),
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="RUN.json", help="files written by --json (two, or a fleet)")
    parser.add_argument("--fail-on", type=float, metavar="PCT",
                        help="with two files: exit 1 if a median time grew by more than PCT percent")
    return parser


def _run(argv) -> int:
    import math

    from .errors import UsageError
    from .report.compare import compare_fleet, compare_runs
    from .runfile import load_run

    parser = build_parser()
    args = parser.parse_args(argv)
    if len(args.files) < 2:
        raise UsageError(f"give two files (a baseline and a new run) or more (a fleet), not {len(args.files)}")
    if args.fail_on is not None and (len(args.files) != 2 or not (math.isfinite(args.fail_on) and args.fail_on >= 0)):
        raise UsageError(f"--fail-on {args.fail_on}: expected a percentage >= 0, with exactly two files")
    runs = [load_run(path) for path in args.files]
    comparison = compare_runs(runs[0], runs[1], args.fail_on) if len(runs) == 2 else compare_fleet(runs)
    print("\n".join(comparison.lines))
    return comparison.exit_code


def main(argv: list[str] | None = None) -> int:
    return run_guarded(PROG, lambda: _run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
