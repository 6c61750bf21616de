"""Does the pytest-benchmark suite give the bench's ratios? TF32 against PEDANTIC per shape, from both files.

    python -m pytest bench/ --benchmark-json=suite.json
    python -m cublas_det.bench --preset trunk --json bench.json
    python bench/suite_vs_bench.py suite.json bench.json [--numerator TF32 --denominator PEDANTIC]

Per shape in both files: the suite's ratio of medians (per-GEMM GPU times of separate tests) and the
bench's paired ratio with its 95% interval; "inside" when the suite's ratio lies in that interval.
Exit codes: 0 every shared shape inside; 1 one outside; 2 a file that cannot be read.
"""

import argparse
import json
import sys

from cublas_det._cli import ArgumentParser, prog_name, run_guarded
from cublas_det.errors import InputFileError


def _load(path: str) -> dict:
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError) as err:
        raise InputFileError(f"{path}: cannot be read as JSON ({err})") from None


def suite_medians(suite: dict) -> dict:
    """{(shape name, mode): median seconds per GEMM} of a pytest-benchmark file of bench/test_gemm_modes.py."""
    return {(b["group"], b["extra_info"]["mode"]): b["stats"]["median"] for b in suite.get("benchmarks", [])
            if b.get("stats") and "mode" in (b.get("extra_info") or {})}


def bench_ratios(bench: dict, numerator: str, denominator: str) -> dict:
    """{shape name: (median, low, high)} of the bench's paired ratio numerator/denominator."""
    found = {}
    for shape, ratios in ((bench.get("cublas_det") or {}).get("ratios") or {}).items():
        for r in ratios:
            if (r["numerator"], r["denominator"]) == (numerator, denominator):
                found[shape] = (r["median"], r["ci_low"], r["ci_high"])
    return found


def compare(suite: dict, bench: dict, numerator: str = "TF32", denominator: str = "PEDANTIC") -> tuple[list, bool]:
    medians = suite_medians(suite)
    lines, inside_all = [], True
    for shape, (median, low, high) in bench_ratios(bench, numerator, denominator).items():
        if (shape, numerator) not in medians or (shape, denominator) not in medians:
            continue
        ratio = medians[(shape, numerator)] / medians[(shape, denominator)]
        inside = low <= ratio <= high
        inside_all &= inside
        lines.append(f"{shape}: suite {numerator}/{denominator} {ratio:.3f} ({1 / ratio:.2f}x), bench {median:.3f} "
                     f"[{low:.3f}, {high:.3f}] -> {'inside' if inside else 'OUTSIDE'}")
    if not lines:
        raise InputFileError("no shape with both ratios in the two files")
    return lines, inside_all


def main() -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", help="--benchmark-json of python -m pytest bench/")
    parser.add_argument("bench", help="--json of python -m cublas_det.bench")
    parser.add_argument("--numerator", default="TF32")
    parser.add_argument("--denominator", default="PEDANTIC")
    args = parser.parse_args()
    lines, ok = compare(_load(args.suite), _load(args.bench), args.numerator, args.denominator)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
