"""Is a configuration faster or slower than in a baseline? FASTER / SLOWER / SAME / UNSURE, from both runs' 95%
intervals of the median, each widened by its A/A noise floor (docs/method.md). ``--fail-on PCT`` fails a SLOWER
entry whose median grew by more than PCT, never an UNSURE one."""

from __future__ import annotations

import dataclasses
import enum

from ..results.stats import median_ci

# nvbench_compare_robust's defaults, but SAME_CENTER: the 1% resolution the user's question needs, wider
# than the drift between runs (docs/h200.md gives it).
CLEAR_GAP = 0.005
SAME_CENTER = 0.01
SAME_OVERLAP = 0.5
DISPERSION_CEILING = 0.02


class TimeLabel(str, enum.Enum):
    FASTER = "FASTER"
    SLOWER = "SLOWER"
    SAME = "SAME"
    UNSURE = "UNSURE"


@dataclasses.dataclass(frozen=True)
class TimeVerdict:
    """The verdict on one entry's time; percentages are of the baseline's median."""
    label: TimeLabel
    change_pct: float
    low_pct: float
    high_pct: float
    fails: bool
    untrusted: tuple = ()  # "baseline: why", "this run: why": a run that did not trust its own timing

    def __str__(self) -> str:
        return f"time {self.label.value} {self.change_pct:+.1f}% [{self.low_pct:+.1f}%, {self.high_pct:+.1f}%]"


def _parts(entry) -> tuple[dict, dict]:
    """(stats, extra_info) of a dict entry or an object with those attributes; {} for what is missing."""
    if isinstance(entry, dict):
        return entry.get("stats") or {}, entry.get("extra_info") or {}
    return getattr(entry, "stats", None) or {}, getattr(entry, "extra_info", None) or {}


def entry_interval(entry) -> tuple[float, float, float] | None:
    """(median, low, high) seconds per GEMM of an entry, widened by its noise floor; None if not timed."""
    stats, info = _parts(entry)
    if not stats.get("rounds") or not stats.get("median"):
        return None
    median = stats["median"]
    if info.get("median_ci_s"):
        low, high = info["median_ci_s"]
    elif stats.get("data"):
        low, high = median_ci(stats["data"])
    else:
        low, high = stats.get("q1") or median, stats.get("q3") or median
    noise = info.get("noise_floor") or 0.0
    return median, min(low, median) * (1 - noise), max(high, median) * (1 + noise)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """How much two intervals overlap, as a fraction of the narrower one (1 for a point inside the other)."""
    shared = min(a[1], b[1]) - max(a[0], b[0])
    narrower = min(a[1] - a[0], b[1] - b[0])
    if narrower <= 0:
        return 1.0 if shared >= 0 else 0.0
    return max(0.0, shared) / narrower


def time_verdict(base_entry, new_entry, fail_on_pct: float | None = None) -> TimeVerdict | None:
    """The time verdict of ``new_entry`` against ``base_entry``; None when either was not timed."""
    base, new = entry_interval(base_entry), entry_interval(new_entry)
    if base is None or new is None:
        return None
    (base_median, base_low, base_high), (new_median, new_low, new_high) = base, new
    change = new_median / base_median - 1
    low, high = new_low / base_high - 1, new_high / base_low - 1
    if low > CLEAR_GAP:
        label = TimeLabel.SLOWER
    elif high < -CLEAR_GAP:
        label = TimeLabel.FASTER
    elif -SAME_CENTER <= low and high <= SAME_CENTER or (
            abs(change) <= SAME_CENTER and overlap((base_low, base_high), (new_low, new_high)) >= SAME_OVERLAP
            and max((upper - lower) / 2 / median for median, lower, upper in (base, new)) <= DISPERSION_CEILING):
        label = TimeLabel.SAME  # within ±1%; or centred there, the intervals overlapping and neither too wide
    else:
        label = TimeLabel.UNSURE
    fails = label is TimeLabel.SLOWER and fail_on_pct is not None and change * 100 > fail_on_pct
    untrusted = tuple(f"{which}: {_parts(e)[1]['untrusted_reason']}" for which, e in (("baseline", base_entry),
                      ("this run", new_entry)) if _parts(e)[1].get("untrusted_reason"))
    return TimeVerdict(label, change * 100, low * 100, high * 100, fails, untrusted)
