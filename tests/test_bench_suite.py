"""The pytest-benchmark suite (bench/test_gemm_modes.py) compares like with like, on the CPU: every
mode of a shape runs the same number of GEMMs per sample, and its timer reports GPU time per GEMM."""

import pathlib

import pytest

from .conftest import load_bench_script

SUITE = pathlib.Path(__file__).resolve().parent.parent / "bench" / "test_gemm_modes.py"


@pytest.fixture
def suite():
    return load_bench_script("test_gemm_modes.py")


class FakeBench:
    """A ShapeBench stand-in: calibrates to 100 / 200 ... GEMMs on successive set-ups, 2 ms per replay."""

    made = []

    def __init__(self, shape, modes, aa_control):
        assert not aa_control and modes == ["PEDANTIC", "DEFAULT", "TF32"]
        self.shape, self.closed, self.graphs = shape, False, {}
        self.calls, self.sets, self.setups = 0, 4, 2
        FakeBench.made.append(self)

    def prepare(self, calls=None):
        self.calls = calls or 100 * len(FakeBench.made)  # a recalibration would give another count
        self.graphs = {mode: f"graph {mode}" for mode in ["PEDANTIC", "DEFAULT", "TF32"]}
        return self.calls

    rounds = []
    setups_taken = []

    def measure_round(self, order, setup):
        """A bench round: every mode once; PEDANTIC 4 ms, DEFAULT 3 ms, TF32 2 ms per 100 GEMMs; the
        first round's TF32 batch was not held (the blocking kernel let go) and must be redone."""
        from cublas_det.timing.rounds import Sample

        FakeBench.rounds.append(list(order))
        FakeBench.setups_taken.append(setup)
        per_call = {"PEDANTIC": 4e-5, "DEFAULT": 3e-5, "TF32": 2e-5}
        held = len(FakeBench.rounds) > 1
        return {mode: Sample(per_call[mode], per_call[mode], None, held or mode != "TF32") for mode in order}

    def close(self):
        self.closed = True


def test_every_mode_of_a_shape_runs_the_same_gemms_per_sample(suite):
    FakeBench.made = []
    first, second = suite.SHAPES[0], suite.SHAPES[1]
    calls = {mode: suite.shape_bench(first, FakeBench).calls for mode in suite.MODES}
    assert set(calls.values()) == {100} and len(FakeBench.made) == 1  # set up once for all three modes
    suite.shape_bench(second, FakeBench)
    assert FakeBench.made[0].closed and len(FakeBench.made) == 2  # one shape set up at a time
    # Back to the first shape (tests run in another order): set up again, with its first batch size.
    assert suite.shape_bench(first, FakeBench).calls == 100 and len(FakeBench.made) == 3


def test_the_timer_reports_gpu_time_per_gemm_of_the_mode_in_an_interleaved_round(suite):
    FakeBench.made, FakeBench.rounds, FakeBench.setups_taken = [], [], []
    bench = suite.shape_bench(suite.SHAPES[0], FakeBench)
    start = suite.GPU_CLOCK()
    suite.timed_replay(bench, "TF32")
    assert suite.GPU_CLOCK() - start == pytest.approx(2e-5)  # TF32's 20 µs per GEMM, not a neighbour's
    # Every round ran all three modes (the unheld first one was redone), in the Williams design's orders.
    assert [sorted(order) for order in FakeBench.rounds] == [sorted(suite.MODES)] * 2
    assert FakeBench.rounds[0] != FakeBench.rounds[1]
    for _ in range(4):
        suite.timed_replay(bench, "TF32")
    firsts = [order[0] for order in FakeBench.rounds]
    assert set(firsts) == set(suite.MODES)  # the mode under test does not always run first
    for _ in range(8):
        suite.timed_replay(bench, "TF32")
    # Whole Williams cycles (6 rounds for 3 modes) on each setup in turn.
    assert FakeBench.setups_taken == [0] * 6 + [1] * 6 + [0] * 2
    marks = {mark.name: mark for mark in suite.test_gemm.pytestmark}
    assert marks["benchmark"].kwargs == {"timer": suite.GPU_CLOCK} and "gpu" in marks


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
                             str(tmp_path / "bench.json")], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1, result.stderr  # W_a/dX: 5.5/8.5 = 0.647 lies outside [0.594, 0.598]
    assert "trunk/W_in/dW: suite TF32/PEDANTIC 0.826 (1.21x), bench 0.824 [0.822, 0.828] -> inside" in result.stdout
    assert "trunk/W_a/dX: suite TF32/PEDANTIC 0.647 (1.55x), bench 0.596 [0.594, 0.598] -> OUTSIDE" in result.stdout
