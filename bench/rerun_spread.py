"""Do a bench run's intervals hold another run's ratios? Several runs' files, side by side, per shape.

    python -m cublas_det.bench --json run1.json; python -m cublas_det.bench --json run2.json; ...
    python bench/rerun_spread.py run1.json run2.json [run3.json ...] [--numerator TF32 --denominator PEDANTIC]

An interval of ``python -m cublas_det.bench`` is for the ratio on this GPU from one run's rounds and
setups. Whether it holds what another run gives is a question only several runs answer. Per shape
with the ratio in every file, this prints each run's median and interval, then:

- **inside**: of the ordered pairs of runs (i, j), those where run j's median lies in run i's
  interval;
- **expected**: how many that would be if the runs differed only by their own errors: per pair,
  P(|Z| < h_i / sqrt(se_i^2 + se_j^2)), with h_i run i's half-width and se each run's standard
  error. A run's se is taken from what its interval is made of: the between-setup term is
  t(dof) x se over a run's visits (the degrees of freedom are in the file, ``setup_dof``, or P-1
  for P visits in files written before it; the setup medians carry the rounds' noise too); with one setup, the
  order-statistic interval is about 1.96 se. The intervals are wider than 1.96 se on
  purpose (t(P-1), the two terms added in quadrature), so faultless runs hold each other on
  well over 83%, the figure for intervals of exactly 1.96 se (1.96 / sqrt(2) se hold 83%);
- **between**: the standard deviation of the runs' medians, relative to their mean;
- **beyond**: the part of ``between`` that the runs' own errors do not account for,
  sqrt(max(0, var(medians) - mean(se^2))). With two runs each shape's figure rests on one degree
  of freedom; the summary pools the shapes.

Exit codes: 0 the table was printed; 2 fewer than two files, a file that cannot be read, or no
shape with the ratio in every file.
"""

import argparse
import itertools
import math
import statistics
import sys

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.base.errors import InputFileError
from cublas_det.check.stored import stored_ratios
from cublas_det.store.run import load_run
from cublas_det.base.words import plural
from cublas_det.results.stats import t_975

Z_95 = 1.96


def run_ratios(path: str, numerator: str, denominator: str) -> tuple[dict, str | None]:
    """{shape name: (Ratio, setups)} of one stored bench run, for numerator/denominator, and the UUID of
    its GPU (None in files written before it was recorded)."""
    run = load_run(path, suite_advice="set it against a bench run with bench/suite_vs_bench.py")
    found = stored_ratios(run, numerator, denominator)
    gpu = (run.data.get("machine_info") or {}).get("gpu") or {}
    return found, gpu.get("uuid") if isinstance(gpu, dict) else None


def gpus_line(uuids: list) -> str:
    """Whether the runs share one GPU: a spread between runs on several GPUs is partly the GPUs'."""
    known = {u for u in uuids if u}
    if not known:
        return "GPU: no UUID in these files (written before it was recorded): another GPU of the model cannot be told apart"
    unknown = f"; {plural(uuids.count(None), 'file')} without one" if None in uuids else ""
    if len(known) == 1:
        return f"GPU: every run with a UUID on {known.pop()}{unknown}"
    return f"GPU: {len(known)} different GPUs ({', '.join(sorted(known))}): the spread between runs is partly theirs{unknown}"


def standard_error(ratio, setups: int) -> float:
    """A run's standard error of its ratio (relative), from what its interval is made of."""
    dof = ratio.setup_dof or setups - 1
    if dof >= 1 and ratio.setup_half_width > 0:
        return ratio.setup_half_width / t_975(dof)
    return ratio.half_width / Z_95


def spread(runs: list) -> dict:
    """The figures of one shape over its runs' (Ratio, setups): inside and expected (of pairs), between,
    the variance of the medians and the runs' mean squared error (both relative)."""
    ratios = [ratio for ratio, _ in runs]
    errors = [standard_error(ratio, setups) for ratio, setups in runs]
    pairs = list(itertools.permutations(range(len(runs)), 2))
    inside = sum(ratios[i].ci_low <= ratios[j].median <= ratios[i].ci_high for i, j in pairs)
    expected = sum(math.erf(ratios[i].half_width / math.sqrt(2 * (errors[i] ** 2 + errors[j] ** 2)))
                   if errors[i] or errors[j] else 1.0 for i, j in pairs)
    medians = [ratio.median for ratio in ratios]
    mean = statistics.fmean(medians)
    variance = statistics.variance(medians) / mean ** 2
    own = statistics.fmean(error ** 2 for error in errors)
    return {"inside": inside, "expected": expected, "pairs": len(pairs), "between": math.sqrt(variance),
            "variance": variance, "own": own}


def report(paths: list, numerator: str = "TF32", denominator: str = "PEDANTIC") -> list:
    """The table's lines."""
    if len(paths) < 2:
        raise InputFileError("give two or more --json files of python -m cublas_det.bench")
    loaded = [run_ratios(path, numerator, denominator) for path in paths]
    runs = [found for found, _ in loaded]
    shapes = [name for name in runs[0] if all(name in run for run in runs[1:])]
    if not shapes:
        raise InputFileError(f"no shape has a {numerator}/{denominator} ratio in every file")
    dropped = sorted(set().union(*runs) - set(shapes))
    lines, inside, expected, pairs, excess = [], 0, 0.0, 0, []
    for name in shapes:
        figures = spread([run[name] for run in runs])
        inside += figures["inside"]
        expected += figures["expected"]
        pairs += figures["pairs"]
        excess.append(figures["variance"] - figures["own"])
        each = "  ".join(f"{r.median:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]" for r, _ in (run[name] for run in runs))
        beyond = math.sqrt(max(0.0, figures["variance"] - figures["own"]))
        lines.append(f"{name}: {each}  inside {figures['inside']}/{figures['pairs']} (expected "
                     f"{figures['expected']:.1f}), between {100 * figures['between']:.2f}%, beyond {100 * beyond:.2f}%")
    pooled = math.sqrt(max(0.0, statistics.fmean(excess)))
    lines.append(f"{len(paths)} runs, {len(shapes)} shapes, {numerator}/{denominator}: another run's median inside an "
                 f"interval in {inside} of {pairs} ordered pairs ({100 * inside / pairs:.0f}%), where runs that "
                 f"differed only by their own errors would give {expected:.0f} ({100 * expected / pairs:.0f}%); spread "
                 f"beyond the runs' errors, pooled over the shapes: {100 * pooled:.2f}%")
    lines.append(gpus_line([gpu for _, gpu in loaded]))
    if dropped:
        lines.append(f"not in every file, left out: {', '.join(dropped)}")
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
