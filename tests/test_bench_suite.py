"""The pytest-benchmark suite (bench/test_gemm_modes.py) compares like with like, on the CPU: every
mode of a shape runs the same number of GEMMs per sample, and its timer reports GPU time per GEMM."""

import pathlib

import pytest

from .conftest import load_bench_script

SUITE = pathlib.Path(__file__).resolve().parent.parent / "bench" / "test_gemm_modes.py"


@pytest.fixture
def suite():
    return load_bench_script("test_gemm_modes.py")


ARMS = ["PEDANTIC", "DEFAULT", "TF32", "DEFAULT-AA"]  # the bench's arms: the modes and the A/A control


class FakeBench:
    """A ShapeSetups stand-in: calibrates to 100 / 200 ... GEMMs on successive set-ups; 2 setups."""

    made = []

    def __init__(self, shape, modes):
        assert modes == ["PEDANTIC", "DEFAULT", "TF32"]
        self.shape, self.closed, self.names = shape, False, list(ARMS)
        self.calls, self.sets, self.setups = 0, 4, 2
        self.rounds, self.setups_taken = [], []
        FakeBench.made.append(self)

    def prepare(self, calls=None):
        self.calls = calls or 100 * len(FakeBench.made)  # a recalibration would give another count
        return self.calls

    def measure_round(self, order, setup):
        """A bench round: every arm once; PEDANTIC 40 µs, DEFAULT 30, TF32 20 per GEMM, plus the round's
        index in ns (so each sample names its round); the first round's TF32 batch was not held (the
        blocking kernel let go) and must be redone."""
        from cublas_det.timing.rounds import Sample

        assert not self.closed
        self.rounds.append(list(order))
        self.setups_taken.append(setup)
        per_call = {"PEDANTIC": 4e-5, "DEFAULT": 3e-5, "TF32": 2e-5, "DEFAULT-AA": 3e-5}
        held = len(self.rounds) > 1
        return {arm: Sample(per_call[arm] + len(self.rounds) * 1e-9, per_call[arm], None, held or arm != "TF32")
                for arm in order}

    def close(self):
        self.closed = True


def test_every_mode_of_a_shape_runs_the_same_gemms_per_sample(suite):
    FakeBench.made = []
    first, second = suite.SHAPES[0], suite.SHAPES[1]
    calls = {mode: suite.shape_rounds(first, FakeBench).calls for mode in suite.MODES}
    assert set(calls.values()) == {100} and len(FakeBench.made) == 1  # set up once for all three modes
    suite.shape_rounds(second, FakeBench)
    assert FakeBench.made[0].closed and len(FakeBench.made) == 2  # one shape set up at a time
    # Back to the first shape before its rounds were complete (tests run in another order): set up
    # again, with its first batch size, and its rounds begin afresh on the new setups.
    again = suite.shape_rounds(first, FakeBench)
    assert again.calls == 100 and len(FakeBench.made) == 3 and again.measured == []
    for index in range(again.count - 1):
        again.sample("TF32", index)
    assert not FakeBench.made[2].closed
    again.sample("TF32", again.count - 1)
    # Its last round measured, its setups are closed and let go (their operand buffers freed) at once,
    # before another shape is set up; the rounds are kept.
    assert FakeBench.made[2].closed and again.bench is None and len(again.measured) == again.count
    suite.shape_rounds(second, FakeBench)
    # The first shape's other tests read its rounds: no set-up, no GPU.
    assert suite.shape_rounds(first, FakeBench) is again and len(FakeBench.made) == 4


class FakeBenchmark:
    """pytest-benchmark's fixture, as far as the suite uses it: each round's reading of the timer."""

    def __init__(self, timer):
        self.timer, self.group, self.extra_info, self.times = timer, None, {}, []

    def pedantic(self, target, rounds):
        for _ in range(rounds):
            start = self.timer()
            target()
            self.times.append(self.timer() - start)
        target()  # as --benchmark-cprofile does: one call more, profiled


def test_each_round_is_measured_once_and_gives_every_mode_its_gpu_time_per_gemm(suite):
    FakeBench.made = []
    shape = suite.SHAPES[0]
    suite.shape_rounds(shape, FakeBench)  # set up with the stand-in; the test reads the rounds from there
    results = {}
    for mode in suite.MODES:
        benchmark = FakeBenchmark(suite.GPU_CLOCK)
        suite.test_gemm(benchmark, shape, mode)
        results[mode] = benchmark
    bench = FakeBench.made[0]
    rounds = suite.PASSES * 4 * 2  # whole passes: a Williams cycle of 4 arms on each of 2 setups
    assert len(bench.rounds) == rounds + 1  # every round measured once for all modes, the unheld one redone
    for mode, per_call in (("PEDANTIC", 4e-5), ("DEFAULT", 3e-5), ("TF32", 2e-5)):
        times = results[mode].times
        assert len(times) == rounds
        # The mode's own GPU time per GEMM, from the same rounds as every other mode (round i + 2 after
        # the redone first round), not a neighbour's.
        assert times == pytest.approx([per_call + (i + 2) * 1e-9 for i in range(rounds)], rel=1e-9, abs=1e-15)
        assert results[mode].group == shape.name and results[mode].extra_info["gemms_per_sample"] == 100
        assert results[mode].extra_info["discards"] == {"throttled": 0, "unheld": 1,  # the first round
                                                        "kept_throttled": 0, "kept_unheld": 0}
    # Every round ran every arm, the A/A control too, in the Williams design's orders, whole cycles
    # on each setup in turn.
    assert all(sorted(order) == sorted(ARMS) for order in bench.rounds)
    assert {order[0] for order in bench.rounds} == set(ARMS)  # the mode under test does not always run first
    assert bench.rounds[0] == bench.rounds[1]  # the redone round is retaken in its order
    assert bench.setups_taken[1:] == ([0] * 4 + [1] * 4) * suite.PASSES
    marks = {mark.name: mark for mark in suite.test_gemm.pytestmark}
    assert marks["benchmark"].kwargs == {"timer": suite.GPU_CLOCK} and "gpu" in marks


def test_bad_rounds_are_taken_again_as_the_bench_does_then_kept_and_counted(suite):
    from cublas_det.timing.rounds import MAX_REDOS, THROTTLE_PAUSE_S, Sample

    class Troubled(FakeBench):
        """Rounds 1-2 unheld, rounds 3-12 throttled (900 MHz), good after that."""

        def measure_round(self, order, setup):
            self.rounds.append(list(order))
            count = len(self.rounds)
            return {arm: Sample(1e-5, 1e-5, 900.0 if 3 <= count <= 12 else 1900.0, count > 2) for arm in order}

    pauses = []
    rounds = suite.ShapeRounds(Troubled(suite.SHAPES[0], list(suite.MODES)), clock_floor_mhz=1485.0,
                               sleep=pauses.append)
    rounds.sample("TF32", 0)  # 2 unheld (no pause), then 8 throttled (a pause each): 10 redos, the shape's all
    assert (rounds.discards.unheld, rounds.discards.throttled) == (2, MAX_REDOS - 2)
    assert pauses == [THROTTLE_PAUSE_S] * 8
    assert (rounds.discards.kept_unheld, rounds.discards.kept_throttled) == (0, 1)  # the 11th attempt is kept
    rounds.sample("TF32", 1)  # throttled again: no redo left, kept
    rounds.sample("TF32", 2)  # good
    assert (rounds.discards.kept_unheld, rounds.discards.kept_throttled) == (0, 2) and len(rounds.bench.rounds) == 13
    assert rounds.measured[2]["TF32"].clock_mhz == 1900.0 and len(pauses) == 8


def test_suite_ratios_are_checked_against_the_bench_intervals(tmp_path):
    import json
    import os
    import subprocess
    import sys

    root = SUITE.parent.parent
    suite = {"benchmarks": [
        {"group": "trunk/W_in/dW", "stats": {"median": 8.9e-6}, "extra_info": {"mode": "PEDANTIC"}},
        {"group": "trunk/W_in/dW", "stats": {"median": 7.35e-6}, "extra_info": {"mode": "TF32"}},
        {"group": "trunk/W_a/dX", "stats": {"median": 8.5e-6}, "extra_info": {"mode": "PEDANTIC"}},
        {"group": "trunk/W_a/dX", "stats": {"median": 5.5e-6}, "extra_info": {"mode": "TF32"}}]}
    bench = {"cublas_det": {"ratios": {
        "trunk/W_in/dW": [{"numerator": "TF32", "denominator": "PEDANTIC", "median": 0.824, "ci_low": 0.822,
                           "ci_high": 0.828}],
        "trunk/W_a/dX": [{"numerator": "TF32", "denominator": "PEDANTIC", "median": 0.596, "ci_low": 0.594,
                          "ci_high": 0.598}]}}}
    (tmp_path / "suite.json").write_text(json.dumps(suite))
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, str(root / "bench" / "suite_vs_bench.py"), str(tmp_path / "suite.json"),
                             str(tmp_path / "bench.json")], capture_output=True, text=True, timeout=60, env=env,
                            check=False)
    assert result.returncode == 1, result.stderr  # W_a/dX: 5.5/8.5 = 0.647 lies beyond [0.5932, 0.5988]
    assert ("trunk/W_in/dW: suite TF32/PEDANTIC 0.8258 (1.21x), bench 0.8240 [0.8220, 0.8280] -> inside; rerun's "
            "reach [0.8212, 0.8297] -> agrees") in result.stdout
    assert ("trunk/W_a/dX: suite TF32/PEDANTIC 0.6471 (1.55x), bench 0.5960 [0.5940, 0.5980] -> OUTSIDE; rerun's "
            "reach [0.5932, 0.5988] -> DISAGREES") in result.stdout
    assert "2 shapes: 1 inside the bench's interval, 1 within a rerun's reach" in result.stdout


def test_a_suite_ratio_outside_the_interval_but_within_a_reruns_reach_agrees(tmp_path):
    """The bench's interval is for the ratio; another run carries its own error too: sqrt(2) x the interval."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_vs_bench", SUITE.parent / "suite_vs_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    suite = {"benchmarks": [
        {"group": "s", "stats": {"median": 1.0}, "extra_info": {"mode": "PEDANTIC"}},
        {"group": "s", "stats": {"median": 0.8035}, "extra_info": {"mode": "TF32"}}]}
    bench = {"cublas_det": {"ratios": {"s": [{"numerator": "TF32", "denominator": "PEDANTIC", "median": 0.800,
                                              "ci_low": 0.797, "ci_high": 0.803}]}}}
    lines, ok = module.compare(suite, bench)
    assert ok and "-> OUTSIDE; rerun's reach [0.7958, 0.8042] -> agrees" in lines[0]
    bench["cublas_det"]["ratios"]["s"][0]["ci_high"] = 0.802  # reach 0.8028: 0.8035 lies beyond
    lines, ok = module.compare(suite, bench)
    assert not ok and "DISAGREES" in lines[0]

