"""Do a bench run's intervals hold another run's ratios? Several runs' files, side by side, per shape.

    python -m cublas_det.bench --json run1.json; python -m cublas_det.bench --json run2.json; ...
    python bench/rerun_spread.py run1.json run2.json [run3.json ...] [--numerator TF32 --denominator PEDANTIC]

An interval of ``python -m cublas_det.bench`` is for the ratio on this GPU from one run's rounds and
setups. Whether it holds what another run gives is a question only several runs answer. Per shape
with the ratio in every file, this prints each run's median and interval, then three figures:

- **inside**: of the ordered pairs of runs (i, j), those where run j's median lies in run i's
  interval. Faultless 95% intervals of runs of one size give about 83%: both runs' errors count,
  and 1.96 / sqrt(2) standard errors hold 83%.
- **between**: the standard deviation of the runs' medians, relative to their mean.
- **beyond**: the part of ``between`` that the runs' own intervals do not account for:
  sqrt(max(0, var(medians) - mean(se^2))), with se = half the interval / 1.96. 0 when one run's
  interval says all there is to say about the next; above 0, a spread between runs (the GPU's
  state minutes apart, the process) that no run's rounds or setups show.

Exit codes: 0 the table was printed; 2 fewer than two files, a file that cannot be read, or no
shape with the ratio in every file.
"""

import argparse
import itertools
import math
import statistics
import sys

from cublas_det._cli import ArgumentParser, prog_name, run_guarded
from cublas_det.errors import InputFileError
from cublas_det.report.stored import bench_result
from cublas_det.runfile import load_run

Z_95 = 1.96
FAULTLESS_INSIDE = math.erf(Z_95 / math.sqrt(2) / math.sqrt(2))  # P(|Z| < 1.96 / sqrt(2)) = 0.834


def run_ratios(path: str, numerator: str, denominator: str) -> dict:
    """{shape name: Ratio} of one stored bench run, for numerator/denominator."""
    found = {}
    for shape_report in bench_result(load_run(path)).shapes:
        for ratio in (shape_report.timing.ratios if shape_report.timing else ()):
            if (ratio.numerator, ratio.denominator) == (numerator, denominator):
                found[shape_report.shape.name] = ratio
    return found


def spread(ratios: list) -> dict:
    """The figures of one shape over its runs' Ratios: inside (pairs, of), between and beyond (relative)."""
    pairs = [(i, j) for i, j in itertools.permutations(range(len(ratios)), 2)]
    inside = sum(ratios[i].ci_low <= ratios[j].median <= ratios[i].ci_high for i, j in pairs)
    medians = [r.median for r in ratios]
    mean = statistics.fmean(medians)
    variance = statistics.variance(medians)
    own = statistics.fmean(((r.ci_high - r.ci_low) / 2 / Z_95) ** 2 for r in ratios)
    return {"inside": inside, "pairs": len(pairs), "between": math.sqrt(variance) / mean,
            "beyond": math.sqrt(max(0.0, variance - own)) / mean}


def report(paths: list, numerator: str = "TF32", denominator: str = "PEDANTIC") -> list:
    """The table's lines."""
    if len(paths) < 2:
        raise InputFileError("give two or more --json files of python -m cublas_det.bench")
    runs = [run_ratios(path, numerator, denominator) for path in paths]
    shapes = [name for name in runs[0] if all(name in run for run in runs[1:])]
    if not shapes:
        raise InputFileError(f"no shape has a {numerator}/{denominator} ratio in every file")
    lines, inside, pairs, beyond = [], 0, 0, []
    for name in shapes:
        ratios = [run[name] for run in runs]
        figures = spread(ratios)
        inside += figures["inside"]
        pairs += figures["pairs"]
        beyond.append(figures["beyond"])
        each = "  ".join(f"{r.median:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]" for r in ratios)
        lines.append(f"{name}: {each}  inside {figures['inside']}/{figures['pairs']}, between "
                     f"{100 * figures['between']:.2f}%, beyond {100 * figures['beyond']:.2f}%")
    lines.append(f"{len(paths)} runs, {len(shapes)} shapes, {numerator}/{denominator}: another run's median inside an "
                 f"interval in {inside} of {pairs} ordered pairs ({100 * inside / pairs:.0f}%; faultless 95% "
                 f"intervals: about {100 * FAULTLESS_INSIDE:.0f}%); spread beyond the intervals: median "
                 f"{100 * statistics.median(beyond):.2f}%, largest {100 * max(beyond):.2f}%")
    return lines


def main() -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="--json files of python -m cublas_det.bench (two or more)")
    parser.add_argument("--numerator", default="TF32")
    parser.add_argument("--denominator", default="PEDANTIC")
    args = parser.parse_args()
    print("\n".join(report(args.runs, args.numerator, args.denominator)))
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
