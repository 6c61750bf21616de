"""Does the pytest-benchmark suite give the bench's ratios? TF32 against PEDANTIC per shape, from both files.

    python -m pytest bench/ --benchmark-json=suite.json
    python -m cublas_det.bench --preset trunk --json bench.json
    python bench/suite_vs_bench.py suite.json bench.json [--numerator TF32 --denominator PEDANTIC]

Per shape in both files: the suite's ratio of medians (per-GEMM GPU times of two tests, read from
the same rounds) and the bench's paired ratio with its 95% interval; "inside" when the suite's
ratio lies in that interval.

That interval is for the ratio on this GPU during the bench's run, from its visits.
The suite is another run (of twice the visits), with an error of its own, so a shape outside is
not by itself a fault of either. The rerun's reach, sqrt(2) x each side of the interval, allows
the suite an error as large as the bench's; that is what the verdict and the exit code go by. Runs
minutes apart also differ by the GPU's drift, which no one run's interval holds (docs/h200.md).
Exit codes: 0 every shared shape within reach; 1 one beyond; 2 a file that cannot be read.
"""

import argparse
import json
import math
import sys

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.base.errors import InputFileError
from cublas_det.check.stored import stored_ratios
from cublas_det.store.run import is_suite_data, load_run
from cublas_det.base.words import plural


def load_suite(path: str) -> dict:
    """{(shape name, mode): median seconds per GEMM} of a pytest-benchmark file of bench/test_gemm_modes.py."""
    try:
        with open(path) as file:
            data = json.load(file)
    except (OSError, ValueError) as err:
        raise InputFileError(f"{path}: cannot be read as JSON ({err})") from None
    if not is_suite_data(data):
        raise InputFileError(f"{path}: not a file of python -m pytest bench/ --benchmark-json (give that file "
                             "first, the bench's --json second)")
    return {(b["group"], b["extra_info"]["mode"]): b["stats"]["median"] for b in data["benchmarks"]
            if isinstance(b, dict) and b.get("stats") and "mode" in (b.get("extra_info") or {})}


def bench_ratios(path: str, numerator: str, denominator: str) -> dict:
    """{shape name: Ratio} of a bench run's --json file (``report.stored`` reads it, as rerun_spread does)."""
    run = load_run(path, suite_advice="give the suite's file first, the bench's --json second")
    return {name: ratio for name, (ratio, _) in stored_ratios(run, numerator, denominator).items()}


RERUN_REACH = math.sqrt(2)  # another run's estimate differs by both runs' errors: sqrt(2) x one's


def rerun_reach(median: float, low: float, high: float) -> tuple[float, float]:
    """Where a rerun of the bench's size lands in 95% of cases: each side of the interval x sqrt(2)."""
    return median - RERUN_REACH * (median - low), median + RERUN_REACH * (high - median)


def compare(medians: dict, ratios: dict, numerator: str = "TF32", denominator: str = "PEDANTIC") -> tuple[list, bool]:
    """The suite's ratio of medians (``load_suite``) against the bench's ratios (``bench_ratios``), per shape
    in both: the lines to print, and whether every one lies within a rerun's reach."""
    lines, inside_count, reached_count = [], 0, 0
    for shape, bench in ratios.items():
        median, low, high = bench.median, bench.ci_low, bench.ci_high
        if (shape, numerator) not in medians or (shape, denominator) not in medians:
            continue
        ratio = medians[(shape, numerator)] / medians[(shape, denominator)]
        inside = low <= ratio <= high
        reach_low, reach_high = rerun_reach(median, low, high)
        reached = reach_low <= ratio <= reach_high
        inside_count += inside
        reached_count += reached
        lines.append(f"{shape}: suite {numerator}/{denominator} {ratio:.4f} ({1 / ratio:.2f}x), bench {median:.4f} "
                     f"[{low:.4f}, {high:.4f}] -> {'inside' if inside else 'OUTSIDE'}; rerun's reach "
                     f"[{reach_low:.4f}, {reach_high:.4f}] -> {'agrees' if reached else 'DISAGREES'}")
    if not lines:
        raise InputFileError("no shape with both ratios in the two files")
    shapes = len(lines)
    lines.append(f"{plural(shapes, 'shape')}: {inside_count} inside the bench's interval, {reached_count} within a "
                 f"rerun's reach")
    return lines, reached_count == shapes


def main() -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", help="--benchmark-json of python -m pytest bench/")
    parser.add_argument("bench", help="--json of python -m cublas_det.bench")
    parser.add_argument("--numerator", default="TF32")
    parser.add_argument("--denominator", default="PEDANTIC")
    args = parser.parse_args()
    lines, ok = compare(load_suite(args.suite), bench_ratios(args.bench, args.numerator, args.denominator),
                        args.numerator, args.denominator)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
