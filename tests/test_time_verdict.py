"""Time verdicts from both runs' intervals: FASTER / SLOWER / SAME / UNSURE, and --fail-on only on SLOWER."""

import json
import pathlib

import pytest

from cublas_det.store.run import run_from_dict, stats
from cublas_det.render.time_verdict import (
    CLEAR_GAP,
    TimeLabel,
    entry_interval,
    overlap,
    time_verdict,
)
from cublas_det.results.stats import median_ci

STORED = pathlib.Path(__file__).parent / "data" / "h200_run.json"


def entry(median_us, spread=0.002, rounds=25, noise_floor=None, untrusted=None, with_ci=True):
    """A pytest-benchmark entry of ``rounds`` samples spread evenly over ±spread around ``median_us``."""
    samples = [median_us * (1 + spread * (2 * i / (rounds - 1) - 1)) for i in range(rounds)]
    data = {"stats": stats(samples, 100), "extra_info": {}}
    if not with_ci:
        return data
    low, high = median_ci(samples)
    data["extra_info"] = {"median_ci_s": [low * 1e-6, high * 1e-6], "noise_floor": noise_floor,
                          "untrusted_reason": untrusted}
    return data


def test_clearly_slower_and_faster():
    verdict = time_verdict(entry(10.0), entry(10.6), fail_on_pct=5)
    assert verdict.label is TimeLabel.SLOWER and verdict.change_pct == pytest.approx(6.0)
    assert verdict.low_pct > CLEAR_GAP * 100 and verdict.fails
    assert str(verdict).startswith("time SLOWER +6.0% [+5.")
    assert not time_verdict(entry(10.0), entry(10.6), fail_on_pct=10).fails  # slower, by less than 10%
    assert not time_verdict(entry(10.0), entry(10.6)).fails  # no --fail-on: nothing fails
    faster = time_verdict(entry(10.0), entry(9.0), fail_on_pct=5)
    assert faster.label is TimeLabel.FASTER and not faster.fails and faster.high_pct < -CLEAR_GAP * 100


def test_same_when_close_and_overlapping():
    verdict = time_verdict(entry(10.0), entry(10.02), fail_on_pct=0)  # +0.2%, both intervals ±0.1%
    assert verdict.label is TimeLabel.SAME and not verdict.fails and verdict.change_pct == pytest.approx(0.2)
    assert -1 <= verdict.low_pct and verdict.high_pct <= 1  # the whole change within ±1%
    wider = time_verdict(entry(10.0, spread=0.02), entry(10.05, spread=0.02))  # +0.5%, intervals ±0.8%
    assert wider.label is TimeLabel.SAME and wider.high_pct > 1  # centred within ±1%, the intervals overlapping


def test_noisy_runs_are_unsure_and_never_fail():
    # A median 8% higher, but the samples spread ±30%: the intervals overlap.
    verdict = time_verdict(entry(10.0, spread=0.3), entry(10.8, spread=0.3), fail_on_pct=5)
    assert verdict.label is TimeLabel.UNSURE and verdict.change_pct == pytest.approx(8.0) and not verdict.fails
    assert verdict.low_pct < CLEAR_GAP * 100  # no clear gap
    # The same median, but intervals too wide to vouch for it.
    assert time_verdict(entry(10.0, spread=0.3), entry(10.0, spread=0.3)).label is TimeLabel.UNSURE


def test_overlap_fraction():
    assert overlap((0, 2), (1, 3)) == 0.5 and overlap((0, 1), (2, 3)) == 0.0 and overlap((0, 4), (1, 2)) == 1.0
    assert overlap((1, 1), (0, 2)) == 1.0 and overlap((1, 1), (2, 3)) == 0.0


def test_the_aa_noise_floor_widens_the_interval():
    tight = time_verdict(entry(10.0), entry(10.1))
    assert tight.label is TimeLabel.SLOWER  # +1% with ±0.2% samples
    widened = time_verdict(entry(10.0, noise_floor=0.005), entry(10.1, noise_floor=0.005))
    assert widened.label is TimeLabel.UNSURE and widened.low_pct < tight.low_pct


def test_untrusted_timings_are_named_with_the_run():
    verdict = time_verdict(entry(10.0, untrusted="the A/A control ... lies outside 1 ± 0.5%"), entry(10.0))
    assert verdict.untrusted == ("baseline: the A/A control ... lies outside 1 ± 0.5%",)
    assert time_verdict(entry(10.0), entry(10.0, untrusted="drift")).untrusted == ("this run: drift",)
    assert time_verdict(entry(10.0), entry(10.0)).untrusted == ()


def test_intervals_from_data_or_quartiles_when_no_interval_was_stored():
    bare = entry(10.0, with_ci=False)
    median, low, high = entry_interval(bare)
    assert low <= median <= high and median == pytest.approx(10e-6, rel=0.01)
    del bare["stats"]["data"]
    assert entry_interval(bare)[1:] == (bare["stats"]["q1"], bare["stats"]["q3"])


def test_untimed_entries_have_no_verdict():
    untimed = {"stats": {"rounds": 0, "median": 0.0, "data": []}, "extra_info": {}}
    assert time_verdict(untimed, entry(10.0)) is None and time_verdict(entry(10.0), {"stats": None}) is None


def test_works_on_stored_runs_and_their_entries():
    data = json.loads(STORED.read_text())
    run = run_from_dict(data, "h200_run.json")
    same = [time_verdict(e, e, 5) for e in run.entries]  # a run against itself: never slower or faster
    assert all(v.label in (TimeLabel.SAME, TimeLabel.UNSURE) and v.change_pct == 0 and not v.fails for v in same)
    unsure = [e.name for e, v in zip(run.entries, same) if v.label is TimeLabel.UNSURE]
    # Only arms whose own interval is wider than ±2% (out_proj/forward's took 42 noisy rounds) stay UNSURE.
    assert unsure == ["mamba2-130m/out_proj/forward[PEDANTIC]", "mamba2-130m/out_proj/forward[DEFAULT]"]
    slower = json.loads(json.dumps(data))
    for raw in slower["benchmarks"]:
        raw["stats"]["median"] *= 1.2
        raw["stats"]["data"] = [x * 1.2 for x in raw["stats"]["data"]]
    verdicts = [time_verdict(b, n, 5) for b, n in zip(data["benchmarks"], slower["benchmarks"])]
    assert all(v.label is TimeLabel.SLOWER and v.fails for v in verdicts)
