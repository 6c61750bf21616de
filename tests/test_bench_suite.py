"""The pytest-benchmark suite (bench/test_gemm_modes.py) compares like with like, on the CPU: every
mode of a shape reads the same rounds of one timing (so the same GEMMs per sample), and its timer
reports GPU time per GEMM."""

import pathlib

import pytest

from .conftest import load_bench_script

SUITE = pathlib.Path(__file__).resolve().parent.parent / "bench" / "test_gemm_modes.py"


@pytest.fixture
def suite():
    return load_bench_script("test_gemm_modes.py")


ARMS = ["PEDANTIC", "DEFAULT", "TF32", "DEFAULT-AA"]  # the bench's arms: the modes and the A/A control
PER_CALL_US = {"PEDANTIC": 40.0, "DEFAULT": 30.0, "TF32": 20.0, "DEFAULT-AA": 30.0}


class FakeTimeShapes:
    """``cublas_det.timing.time_shapes`` as far as the suite uses it: each shape's arms over ``min_visits``
    visits of 4 rounds, PEDANTIC 40 µs, DEFAULT 30, TF32 20 per GEMM plus the round's index in ns (so each sample
    names its round), 100 GEMMs per sample; shapes named in ``failing`` fail as the GPU's failures do."""

    def __init__(self, failing=()):
        self.calls, self.failing = [], set(failing)

    def __call__(self, shapes, modes, *, min_visits, max_visits, budget_s):
        from cublas_det.timing import ArmTiming, RunTiming, ShapeTiming

        self.calls.append(([s.name for s in shapes], list(modes), min_visits, max_visits))
        min_rounds = 4 * min_visits
        timings, errors = {}, {}
        for shape in shapes:
            if shape.name in self.failing:
                errors[shape.name] = "timing failed: OutOfMemoryError: out of memory allocating 2 GiB"
                continue
            arms = tuple(ArmTiming(arm, tuple(PER_CALL_US[arm] + i * 1e-3 for i in range(min_rounds)),
                                   (1.0,) * min_rounds, setups=tuple(i // 4 for i in range(min_rounds)))
                         for arm in ARMS)
            timings[shape.name] = ShapeTiming(shape.name, shape.flop, 100, 3, min_rounds, arms, (), 1.0, "rounds",
                                              options={"visits": min_rounds // 4, "setups": min_rounds // 4})
        return RunTiming(timings, errors)


class FakeItem:
    def __init__(self, shape, mode):
        self.callspec = type("CallSpec", (), {"params": {"shape": shape, "mode": mode}})()


class FakeBenchmark:
    """pytest-benchmark's fixture, as far as the suite uses it: each round's reading of the timer."""

    def __init__(self, timer, disabled=False):
        self.timer, self.disabled, self.group, self.extra_info, self.times = timer, disabled, None, {}, []

    def pedantic(self, target, rounds):
        for _ in range(rounds):
            start = self.timer()
            target()
            self.times.append(self.timer() - start)
        target()  # as --benchmark-cprofile does: one call more, profiled


def _request(items):
    return type("Request", (), {"session": type("Session", (), {"items": items})()})()


@pytest.fixture
def fake(suite, monkeypatch):
    """The engine's time_shapes and warm_up replaced, as the suite imports them when it first times."""
    import cublas_det.timing

    fake = FakeTimeShapes()
    monkeypatch.setattr(cublas_det.timing, "time_shapes", fake)
    monkeypatch.setattr(cublas_det.timing, "warm_up", lambda seconds: None)
    return fake


def test_the_first_test_times_every_selected_shape_at_once_and_the_others_read_it(suite, fake):
    shapes = suite.SHAPES[:3]
    items = [FakeItem(shape, mode) for shape in shapes for mode in suite.MODES] + [object()]  # and a test of another kind
    assert suite.selected_shapes(items) == shapes
    first = suite.shape_timing(shapes[0], shapes)
    assert fake.calls == [([s.name for s in shapes], list(suite.MODES), suite.VISITS, suite.VISITS)]
    # Every mode of every selected shape reads that one timing: no other rounds, no other batch size.
    assert suite.shape_timing(shapes[2], shapes).shape_name == shapes[2].name
    assert suite.shape_timing(shapes[0], shapes) is first and len(fake.calls) == 1
    # A shape not among the selected (not expected; still served) is timed when first asked for.
    suite.shape_timing(suite.SHAPES[5], shapes)
    assert fake.calls[1][0] == [suite.SHAPES[5].name]


def test_each_round_gives_every_mode_its_gpu_time_per_gemm_and_the_same_gemms_per_sample(suite, fake):
    shapes = suite.SHAPES[:2]
    request = _request([FakeItem(shape, mode) for shape in shapes for mode in suite.MODES])
    results = {}
    for mode in suite.MODES:
        benchmark = FakeBenchmark(suite.GPU_CLOCK)
        suite.test_gemm(benchmark, shapes[0], mode, request)
        results[mode] = benchmark
    rounds = suite.VISITS * 4
    assert len(fake.calls) == 1 and fake.calls[0][0] == [s.name for s in shapes]
    for mode in suite.MODES:
        times = results[mode].times
        # The mode's own GPU time per GEMM, round by round, from the rounds every other mode reads.
        assert times == pytest.approx([(PER_CALL_US[mode] + i * 1e-3) * 1e-6 for i in range(rounds)],
                                      rel=1e-9, abs=1e-15)
        info = results[mode].extra_info
        assert results[mode].group == shapes[0].name and info["mode"] == mode
        assert info["gemms_per_sample"] == 100 and info["visits"] == suite.VISITS and info["stop_reason"] == "rounds"
    marks = {mark.name: mark for mark in suite.test_gemm.pytestmark}
    assert marks["benchmark"].kwargs == {"timer": suite.GPU_CLOCK} and "gpu" in marks


def test_under_benchmark_disable_the_shapes_take_two_visits(suite, fake):
    shape = suite.SHAPES[0]
    suite.test_gemm(FakeBenchmark(suite.GPU_CLOCK, disabled=True), shape, "TF32", _request([FakeItem(shape, "TF32")]))
    assert fake.calls[0][2:] == (suite.DISABLED_VISITS, suite.DISABLED_VISITS)


def test_a_shape_whose_timing_failed_fails_its_tests_in_one_line(suite, fake):
    fake.failing.add(suite.SHAPES[1].name)
    shapes = suite.SHAPES[:2]
    request = _request([FakeItem(shape, "TF32") for shape in shapes])
    with pytest.raises(pytest.fail.Exception, match=r"^trunk/W_in/dX: timing failed: OutOfMemoryError: out of memory"):
        suite.test_gemm(FakeBenchmark(suite.GPU_CLOCK), shapes[1], "TF32", request)
    suite.test_gemm(FakeBenchmark(suite.GPU_CLOCK), shapes[0], "TF32", request)  # the other shape was timed
    assert len(fake.calls) == 1


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

