import random

import pytest

from cublas_det._timing import (
    Ratio,
    batch_size,
    buffer_sets,
    median_ci,
    paired_ratio,
    quartiles,
    ratio_pairs,
    rotation,
    should_stop,
)


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


def test_stopping_rule():
    tight = Ratio("a", "b", 1.0, 0.998, 1.002, 10)
    loose = Ratio("a", "b", 1.0, 0.95, 1.05, 10)
    assert not should_stop([tight], rounds=9, elapsed_s=0.1)
    assert should_stop([tight], rounds=10, elapsed_s=0.1)
    assert not should_stop([tight, loose], rounds=10, elapsed_s=0.1)
    assert should_stop([loose], rounds=100, elapsed_s=0.1)
    assert should_stop([loose], rounds=10, elapsed_s=3.0)


def test_quartiles_rotation_batch_and_buffers():
    assert quartiles([1, 2, 3, 4, 5]) == (2, 3, 4)
    assert quartiles([7.0]) == (7.0, 7.0, 7.0)
    arms = ["PEDANTIC", "DEFAULT", "TF32", "DEFAULT-AA"]
    firsts = [rotation(arms, r)[0] for r in range(4)]
    assert sorted(firsts) == sorted(arms) and sorted(rotation(arms, 5)) == sorted(arms)
    assert batch_size(1e-5) == 100 and batch_size(5e-3) == 1 and batch_size(1e-9) == 4000
    l2 = 60 * 2**20
    assert buffer_sets(200 * 2**20, l2) == 1
    assert buffer_sets(3 * 2**20, l2) == 60
    assert buffer_sets(2**30, l2, budget_bytes=2**30) == 1


def test_ratio_pairs():
    assert ratio_pairs(["PEDANTIC", "DEFAULT", "TF32", "DEFAULT-AA"]) == [
        ("DEFAULT", "PEDANTIC"), ("TF32", "PEDANTIC"), ("PEDANTIC", "DEFAULT"), ("DEFAULT-AA", "DEFAULT")]
    assert ratio_pairs(["TF32"]) == []
