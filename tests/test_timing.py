"""The timing engine's pure parts on synthetic samples: intervals, the Williams order, the round
loop (redo, pair, stop and why), calibration, the A/A control and trust."""

import collections
import itertools
import random

import pytest
from pytest_benchmark.stats import Stats

from cublas_det import MathMode
from cublas_det.timing import (
    ArmTiming,
    Discards,
    Ratio,
    Sample,
    ShapeTiming,
    StopReason,
)
from cublas_det.results.timing import aa_reference, arm_with_role, ratio_pairs
from cublas_det.timing.rounds import MAX_REDOS, THROTTLE_PAUSE_S, KeptRounds, round_problem
from cublas_det.timing.rounds import cycle_length, round_order, williams_rows
from cublas_det.results.stats import (batch_size, buffer_sets, median_ci, paired_ratio, probe_calls, quartiles,
    stop_reason)
from cublas_det.results.timing import Arm
from cublas_det.store.run import stats as run_stats


def test_median_ci_order_statistics():
    values = list(range(1, 101))  # n = 100: ranks floor(50 - 9.8) = 40 and ceil(51 + 9.8) = 61
    assert median_ci(values) == (40, 61)
    assert median_ci([5.0]) == (5.0, 5.0)
    with pytest.raises(ValueError):
        median_ci([])


def test_median_ci_covers_the_true_median_about_95_percent():
    rng = random.Random(0)
    hits = sum(lo <= 0.0 <= hi for lo, hi in (median_ci([rng.gauss(0, 1) for _ in range(41)]) for _ in range(2000)))
    assert 0.93 <= hits / 2000 <= 0.99


def test_paired_ratio_cancels_common_drift():
    drift = [1.0 + 0.3 * (i % 5) for i in range(30)]  # clocks wander by 120% between rounds
    slow = [2.0 * d for d in drift]
    fast = [1.0 * d for d in drift]
    ratio = paired_ratio("PEDANTIC", "TF32", slow, fast)
    assert ratio.median == pytest.approx(2.0) and ratio.ci_low == pytest.approx(2.0) == ratio.ci_high
    assert ratio.half_width == pytest.approx(0.0)
    with pytest.raises(ValueError, match="same, non-zero number of rounds"):
        paired_ratio("a", "b", [1.0], [1.0, 2.0])


# -- the Williams order ---------------------------------------------------------------------
@pytest.mark.parametrize("n", range(1, 9))
def test_williams_design_balances_positions_and_predecessors(n):
    rows = williams_rows(n)
    assert len(rows) == cycle_length(n) == (n if n % 2 == 0 or n == 1 else 2 * n)
    assert all(sorted(row) == list(range(n)) for row in rows)  # every round holds every arm once
    positions = collections.Counter((arm, i) for row in rows for i, arm in enumerate(row))
    assert set(positions.values()) == {len(rows) // n}  # each arm in each position equally often
    follows = collections.Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    # Every arm follows every other equally often: once per cycle (n even), twice (n odd).
    assert set(follows) == {(a, b) for a, b in itertools.permutations(range(n), 2)}
    assert set(follows.values()) <= {1 if n % 2 == 0 else 2}


def test_round_order_cycles_and_a_rotation_would_not_balance():
    arms = ["PEDANTIC", "DEFAULT", "TF32", "DEFAULT-AA"]
    orders = [round_order(arms, r) for r in range(8)]
    assert orders[:4] == orders[4:] and all(sorted(o) == sorted(arms) for o in orders)
    follows = collections.Counter((o[i], o[i + 1]) for o in orders[:4] for i in range(3))
    assert follows[("DEFAULT", "DEFAULT-AA")] == follows[("TF32", "DEFAULT-AA")] == 1
    rotation = [arms[r:] + arms[:r] for r in range(4)]  # what the engine did before: A/A always after TF32
    rotated = collections.Counter((o[i], o[i + 1]) for o in rotation for i in range(3))
    assert rotated[("TF32", "DEFAULT-AA")] == 3 and rotated[("DEFAULT", "DEFAULT-AA")] == 0


# -- stopping --------------------------------------------------------------------------------
def test_stop_reason():
    tight = Ratio("a", "b", 1.0, 0.998, 1.002, 12)
    loose = Ratio("a", "b", 1.0, 0.95, 1.05, 12)
    assert stop_reason([tight], rounds=11, elapsed_s=0.1) is None
    assert stop_reason([tight], rounds=12, elapsed_s=0.1) is StopReason.INTERVAL
    assert stop_reason([tight], rounds=14, elapsed_s=0.1, cycle=4) is None  # waits for a whole cycle
    assert stop_reason([tight], rounds=16, elapsed_s=0.1, cycle=4) is StopReason.INTERVAL
    assert stop_reason([tight, loose], rounds=12, elapsed_s=0.1) is None
    assert stop_reason([loose], rounds=100, elapsed_s=0.1) is StopReason.ROUNDS
    assert stop_reason([loose], rounds=12, elapsed_s=3.0) is StopReason.BUDGET
    # A long GEMM: the budget stops it after 5 rounds, short of min_rounds; never before.
    assert stop_reason([loose], rounds=4, elapsed_s=9.0) is None
    assert stop_reason([loose], rounds=5, elapsed_s=9.0) is StopReason.BUDGET
    assert stop_reason([loose], rounds=5, elapsed_s=9.0, budget_floor=8) is None
    # The rule watches the whole interval, its between-setup (visit) term too: more visits shrink it.
    spread = Ratio("a", "b", 1.0, 0.987, 1.013, 12, setup_half_width=0.0129)
    sampling = (spread.half_width ** 2 - spread.setup_half_width ** 2) ** 0.5  # the part more rounds shrink
    assert sampling < 0.01 and stop_reason([spread], rounds=12, elapsed_s=0.1) is None
    # The target is ±1%: the resolution the user's question needs.
    assert stop_reason([Ratio("a", "b", 1.0, 0.991, 1.009, 12)], rounds=12, elapsed_s=0.1) is StopReason.INTERVAL


def test_students_t_from_the_table_and_beyond():
    from cublas_det.results.stats import t_975

    assert t_975(3) == 3.182 and t_975(11) == 2.201
    exact = {16: 2.1199, 20: 2.0860, 30: 2.0423, 60: 2.0003, 120: 1.9799}
    assert all(abs(t_975(dof) - value) < 0.001 for dof, value in exact.items())
    assert t_975(10**6) == pytest.approx(1.96, abs=1e-3)
    with pytest.raises(ValueError, match="one degree of freedom"):
        t_975(0)


def _rounds(names, times, *, clock=1980.0, problems=(), setup_bias=None):
    """A measure_round callback: per-call seconds per arm with +-1% noise; ``problems`` maps round
    attempts to (arm, "throttled"/"unheld"); ``setup_bias``: {arm: [factor per setup]}, a setup's own bias."""
    rng = random.Random(1)
    attempts = itertools.count()
    orders = []

    def measure(order, setup=0, eager=True):
        orders.append(order)
        attempt = next(attempts)
        bad = dict(problems).get(attempt)
        out = {}
        for name in order:
            t = times[name] * (1 + rng.uniform(-0.01, 0.01)) * (setup_bias or {}).get(name, [1.0] * 8)[setup]
            out[name] = Sample(t, 1.5 * t if eager else None, clock / 2 if bad == (name, "throttled") else clock,
                               bad != (name, "unheld"), setup)
        return out

    return measure, orders


def test_rounds_follow_the_williams_order_and_pair_every_arm_with_its_reference():
    names = _arms("PEDANTIC", "DEFAULT", "TF32", "DEFAULT-AA")
    measure, orders = _rounds(names, {"PEDANTIC": 2e-5, "DEFAULT": 2e-5, "TF32": 1e-5, "DEFAULT-AA": 2e-5})
    rounds = KeptRounds(names)
    rounds.take(measure, 12, sleep=lambda s: None)
    assert orders == [round_order(names, r) for r in range(12)]
    ratios = {(r.numerator, r.denominator): r for r in rounds.ratios()}
    assert ratios[("TF32", "PEDANTIC")].median == pytest.approx(0.5, rel=0.02)
    assert ("DEFAULT-AA", "DEFAULT") in ratios and all(len(s) == 12 for s in rounds.kept.values())


def test_between_setups_is_t_times_the_spread_of_setup_medians():
    from cublas_det.results.stats import between_term, widened_ci

    assert between_term([1.0, 1.1, 1.2], [0, 0, 0]) == (0.0, 0)
    term, dof = between_term([1.0, 1.0, 1.02, 1.02], [0, 0, 1, 1])
    assert dof == 1 and term == pytest.approx(12.706 * 0.02 / 2 ** 0.5 / 2 ** 0.5)
    values, setups = [1.0, 1.01, 0.99, 1.02, 1.03, 1.01], [0, 0, 1, 1, 2, 2]
    low, high = widened_ci(values, setups)
    from cublas_det.results.stats import median_ci

    assert low < median_ci(values)[0] and high > median_ci(values)[1]
    assert widened_ci(values) == median_ci(values)


def test_an_arms_interval_holds_the_between_setup_term():
    arm = ArmTiming(Arm.read("TF32"), (5.0, 5.0, 5.1, 5.1), (6.0,) * 4, setups=(0, 0, 1, 1))
    low, high = arm.median_ci_us
    assert low < 5.0 and high > 5.1
    assert ArmTiming(Arm.read("TF32"), (5.0, 5.0, 5.1, 5.1), (6.0,) * 4).median_ci_us == (5.0, 5.1)
    assert arm.to_dict()["setups"] == [0, 0, 1, 1]


def test_throttled_and_unheld_rounds_are_redone_and_counted():
    names = _arms("PEDANTIC", "TF32")
    problems = {1: ("TF32", "throttled"), 2: ("PEDANTIC", "unheld"), 4: ("TF32", "throttled")}
    measure, orders = _rounds(names, {"PEDANTIC": 2e-5, "TF32": 1e-5}, problems=problems)
    pauses = []
    out = KeptRounds(names)
    out.take(measure, 4, clock_floor_mhz=1485.0, sleep=pauses.append)
    assert out.rounds == 4 and len(orders) == 7
    assert out.discards == Discards(throttled=2, unheld=1)
    assert pauses == [THROTTLE_PAUSE_S] * 2  # a pause after each throttled round, none after an unheld one
    assert orders[1] == orders[2] == orders[3]  # a redone round is retaken in the same order
    assert all(s.clock_mhz == 1980.0 and s.held for kept in out.kept.values() for s in kept)


def test_a_gpu_that_stays_throttled_still_ends_and_says_so():
    names = _arms("PEDANTIC", "TF32")
    measure, _ = _rounds(names, {"PEDANTIC": 2e-5, "TF32": 1e-5}, clock=1000.0)
    out = KeptRounds(names)
    out.take(measure, 3, clock_floor_mhz=1485.0, sleep=lambda s: None)
    assert out.rounds == 3 and out.discards == Discards(throttled=MAX_REDOS, kept_throttled=3)


def test_round_problem_ignores_unread_clocks():
    assert round_problem({"a": Sample(1.0, 1.0, None)}, 1485.0) is None
    assert round_problem({"a": Sample(1.0, 1.0, 1400.0)}, None) is None
    assert round_problem({"a": Sample(1.0, 1.0, 1400.0, held=False)}, 1485.0) == "unheld"


# Counts of every remainder mod 4 (where method 3's two branches and method 2 part), one value, ties, and
# random samples; the linear interpolation results.stats used before gave other quartiles for most of them.
SAMPLES = [[7.0], [1.0, 2.0], [3.0, 1.0, 2.0], [4.0, 1.0, 3.0, 2.0], [1, 2, 3, 4, 5], [9.0, 1.0, 8.0, 2.0, 7.0, 3.0],
           [5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 0.5], [2.0, 2.0, 2.0, 9.0, 1.0, 1.0, 3.0, 8.0, 4.0]]
SAMPLES += [[rng.lognormvariate(0, 0.3) for _ in range(count)]
            for count, rng in ((count, random.Random(count)) for count in (10, 11, 12, 13, 101))]


@pytest.mark.parametrize("values", SAMPLES, ids=lambda values: f"n={len(values)}")
def test_quartiles_are_pytest_benchmarks(values):
    stats = Stats()
    for value in values:
        stats.update(value)
    assert quartiles(values) == (stats.q1, stats.median, stats.q3)
    stored = run_stats(values)  # the run file's, from µs: the same definition on the values in seconds
    assert (stored["q1"], stored["median"], stored["q3"]) == quartiles([v * 1e-6 for v in values])


# -- calibration, batches, buffers -----------------------------------------------------------
def test_quartiles_batch_probe_and_buffers():
    assert quartiles([1, 2, 3, 4, 5]) == (1.75, 3, 4.25)  # pytest-benchmark's (method 3), not linear (2, 3, 4)
    assert quartiles([7.0]) == (7.0, 7.0, 7.0)
    assert batch_size(1e-5) == 100 and batch_size(5e-3) == 1 and batch_size(1e-9) == 4000
    # Long GEMMs are calibrated from one call (a batch already) to five (0.2 ms and more).
    assert probe_calls(50e-3) == 0 and probe_calls(1e-3) == 0
    assert probe_calls(0.3e-3) == 4 and probe_calls(0.2e-3) == 5 and probe_calls(0.19e-3) == 6
    assert probe_calls(5e-6) == 16
    l2 = 60 * 2**20
    assert buffer_sets(200 * 2**20, l2) == 1
    assert buffer_sets(3 * 2**20, l2) == 60
    assert buffer_sets(2**30, l2, budget_bytes=2**30) == 1


# -- arms, the A/A control, trust -------------------------------------------------------------
def test_ratio_pairs_keep_an_aa_control_whatever_the_modes():
    assert ratio_pairs(_arms("PEDANTIC", "DEFAULT", "TF32", "DEFAULT-AA")) == [
        ("DEFAULT", "PEDANTIC"), ("TF32", "PEDANTIC"), ("PEDANTIC", "DEFAULT"), ("DEFAULT-AA", "DEFAULT")]
    assert aa_reference(_arms("PEDANTIC", "TF32")) == "PEDANTIC" and aa_reference(_arms("TF32")) == "TF32"
    assert ratio_pairs(_arms("PEDANTIC", "TF32", "PEDANTIC-AA")) == [("TF32", "PEDANTIC"), ("PEDANTIC-AA", "PEDANTIC")]
    assert ratio_pairs(_arms("TF32", "TF32-AA")) == [("TF32-AA", "TF32")]
    assert ratio_pairs(_arms("TF32")) == []


def test_arms_are_found_by_their_math_mode_not_their_name():
    arms = _arms("PEDANTIC+DISALLOW_RPR/bfloat16->bfloat16", "PEDANTIC/bfloat16->bfloat16",
                 "DEFAULT/bfloat16->bfloat16")
    assert arm_with_role(arms, MathMode.PEDANTIC) == "PEDANTIC/bfloat16->bfloat16"  # the flag is another configuration
    assert arm_with_role(arms, MathMode.TF32) is None and aa_reference(arms) == "DEFAULT/bfloat16->bfloat16"


def _arms(*names):
    return [Arm.read(name) for name in names]


def _timing(aa):
    arms = tuple(ArmTiming(Arm.read(n), (t,) * 12, (t,) * 12, (1980.0,) * 11 + (None,)) for n, t in
                 (("PEDANTIC", 10.0), ("TF32", 5.0), ("PEDANTIC-AA", 10.0)))
    ratios = (Ratio("TF32", "PEDANTIC", 0.5, 0.499, 0.501, 12), aa)
    return ShapeTiming("s", 1, 100, 1, 12, arms, ratios, 1.0, "interval")


def test_aa_control_outside_its_band_makes_ratios_untrusted():
    fine = _timing(Ratio("PEDANTIC-AA", "PEDANTIC", 1.003, 1.001, 1.004, 12))  # excludes 1, inside ±0.5%
    assert fine.control == "PEDANTIC-AA" and fine.trusted and fine.untrusted_reason is None
    assert fine.noise_floor == pytest.approx(0.003)
    off = _timing(Ratio("PEDANTIC-AA", "PEDANTIC", 1.012, 1.008, 1.015, 12))
    assert not off.trusted and "PEDANTIC-AA/PEDANTIC 1.012 [1.008, 1.015]" in off.untrusted_reason
    assert off.to_dict()["trusted"] is False and off.to_dict()["stop_reason"] == "interval"
    wide = _timing(Ratio("PEDANTIC-AA", "PEDANTIC", 1.0, 0.9, 1.1, 12))  # noisy, not biased: wide intervals say so
    assert wide.trusted and wide.noise_floor == pytest.approx(0.1)
    assert off.arm("PEDANTIC").median_clock_mhz == 1980.0 and off.clock_range_mhz == (1980.0, 1980.0)
