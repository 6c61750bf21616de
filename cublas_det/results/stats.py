"""The statistics of side-by-side timing (intervals, paired ratios, batch sizes, when to stop), on floats."""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics

from ..base.schema import Codec

TARGET_BATCH_S = 1e-3  # a sample lasts >= 1 ms: ~2000x the 0.5 µs resolution of CUDA events
MAX_BATCH = 4000
PROBE_MAX_CALLS = 16
TARGET_HALF_WIDTH = 0.01  # stop when every ratio's interval is within ±1% of its median: the resolution asked
BUDGET_FLOOR_ROUNDS = 5  # the time budget may stop a shape only after this many rounds
# Student's t, two-sided 95%, by degrees of freedom: the between-setup term of an interval from a few setups.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131}
Z_975 = 1.959964


def t_975(dof: int) -> float:
    """Student's t, two-sided 95%: the table up to 15, then the Cornish-Fisher expansion (within 0.001)."""
    if dof < 1:
        raise ValueError("Student's t needs at least one degree of freedom")
    if dof in T_975:
        return T_975[dof]
    z = Z_975
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)


def quartiles(values) -> tuple[float, float, float]:
    """(q1, median, q3) as pytest-benchmark's ``Stats`` computes them, so that a run file's stats read as its own:
    Wikipedia's method 3 for an odd count, method 2 (medians of the halves) for an even one; one value is all three."""
    values = sorted(values)
    rounds = len(values)
    if not rounds:
        raise ValueError("no samples")
    if rounds == 1:
        return values[0], values[0], values[0]
    if rounds % 2:
        n, q = rounds // 4, rounds % 4
        if q == 1:
            q1, q3 = 0.25 * values[n - 1] + 0.75 * values[n], 0.75 * values[3 * n] + 0.25 * values[3 * n + 1]
        else:
            q1, q3 = 0.75 * values[n] + 0.25 * values[n + 1], 0.25 * values[3 * n + 1] + 0.75 * values[3 * n + 2]
    else:
        q1, q3 = statistics.median(values[:rounds // 2]), statistics.median(values[rounds // 2:])
    return q1, statistics.median(values), q3


def median_ci(values) -> tuple[float, float]:
    """Distribution-free 95% interval for the median from order statistics: ranks floor(n/2 - z*sqrt(n)/2) and
    ceil(n/2 + 1 + z*sqrt(n)/2), 1-based, clamped to 1..n."""
    values = sorted(values)
    n = len(values)
    if n == 0:
        raise ValueError("no samples")
    half = 0.98 * math.sqrt(n)
    j = max(1, math.floor(n / 2 - half))
    k = min(n, math.ceil(n / 2 + 1 + half))
    return values[j - 1], values[k - 1]


def between_term(values, setups) -> tuple[float, int]:
    """The between-setup term of a 95% interval for the median (t x the standard error of the setups'
    medians; ``setups[i]`` took ``values[i]``) and its degrees of freedom; (0, 0) with one setup."""
    groups: dict = {}
    for value, setup in zip(values, setups):
        groups.setdefault(setup, []).append(value)
    if len(groups) < 2:
        return 0.0, 0
    medians = [statistics.median(group) for group in groups.values()]
    dof = len(medians) - 1
    return t_975(dof) * statistics.stdev(medians) / math.sqrt(len(medians)), dof


def widened_ci(values, setups=None) -> tuple[float, float]:
    """:func:`median_ci`, widened in quadrature by :func:`between_term` when values come from several setups."""
    between = between_term(values, setups)[0] if setups else 0.0
    low, high = median_ci(values)
    if not between:
        return low, high
    center = statistics.median(values)
    return center - math.hypot(center - low, between), center + math.hypot(high - center, between)


@dataclasses.dataclass(frozen=True)
class Ratio(Codec):
    """Median of per-round ratios numerator/denominator, with its 95% interval; ``setup_half_width`` and
    ``setup_dof``: the between-setup term's relative size and degrees of freedom (0 with one setup)."""

    numerator: str
    denominator: str
    median: float
    ci_low: float
    ci_high: float
    rounds: int
    setup_half_width: float = 0.0
    setup_dof: int = 0

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2 / self.median if self.median else math.inf

    def excludes(self, low: float, high: float) -> bool:
        return self.ci_low > high or self.ci_high < low

    def __str__(self) -> str:
        return f"{self.numerator}/{self.denominator} {self.median:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]"


def paired_ratio(numerator: str, denominator: str, num_samples, den_samples, setups=None) -> Ratio:
    """Ratio of two arms from samples of the same rounds (paired: drift cancels), widened by ``setups``' spread."""
    if len(num_samples) != len(den_samples) or not num_samples:
        raise ValueError("paired samples need the same, non-zero number of rounds")
    ratios = [n / d for n, d in zip(num_samples, den_samples)]
    between, dof = between_term(ratios, setups) if setups else (0.0, 0)
    low, high = widened_ci(ratios, setups)
    median = statistics.median(ratios)
    return Ratio(numerator, denominator, median, low, high, len(ratios), between / median if median else 0.0, dof)


class StopReason(str, enum.Enum):
    """Why a shape's rounds ended: the precision was reached, or a limit was."""

    INTERVAL = "interval"  # every ratio's interval within the target, after min_rounds complete cycles
    ROUNDS = "rounds"  # max_rounds taken
    BUDGET = "budget"  # the time budget spent
    INTERRUPTED = "interrupted"  # Ctrl-C: the visits taken so far


def stop_reason(ratios: list[Ratio], rounds: int, elapsed_s: float, *, min_rounds: int = 12,
                max_rounds: int = 100, budget_s: float = 3.0, target_half_width: float = TARGET_HALF_WIDTH,
                cycle: int = 1, budget_floor: int = BUDGET_FLOOR_ROUNDS) -> StopReason | None:
    """Why to stop after ``rounds`` kept rounds, or None. The interval rule waits for whole order cycles; the
    budget stops a shape only after ``budget_floor`` rounds (or min_rounds), so a long GEMM gets an interval."""
    if rounds >= min_rounds and rounds % cycle == 0 and all(r.half_width <= target_half_width for r in ratios):
        return StopReason.INTERVAL
    if rounds >= max_rounds:
        return StopReason.ROUNDS
    if elapsed_s >= budget_s and rounds >= min(min_rounds, budget_floor):
        return StopReason.BUDGET
    return None


def batch_size(per_call_s: float, target_s: float = TARGET_BATCH_S, cap: int = MAX_BATCH) -> int:
    return cap if per_call_s <= 0 else max(1, min(cap, math.ceil(target_s / per_call_s)))


def probe_calls(single_call_s: float, target_s: float = TARGET_BATCH_S, cap: int = PROBE_MAX_CALLS) -> int:
    """Calls of the second calibration probe after one call took ``single_call_s``: 0 when one call lasts a
    batch, else enough for ``target_s``, at most ``cap``."""
    return 0 if single_call_s >= target_s else batch_size(single_call_s, target_s, cap)


def buffer_sets(footprint_bytes: int, l2_bytes: int, budget_bytes: int = 2 * 2**30) -> int:
    """Operand sets to rotate: 1 when the footprint is at least 2x L2, else ceil(3*L2/F), within budget."""
    if footprint_bytes >= 2 * l2_bytes:
        return 1
    return max(1, min(math.ceil(3 * l2_bytes / footprint_bytes), budget_bytes // footprint_bytes))
