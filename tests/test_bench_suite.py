"""The pytest-benchmark suite (bench/test_gemm_modes.py) compares like with like, on the CPU: every
mode of a shape reads the same rounds of one timing (so the same GEMMs per sample), and its timer
reports GPU time per GEMM."""

import pathlib

import pytest
from cublas_det.results.timing import Arm

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
            arms = tuple(ArmTiming(Arm.read(arm), tuple(PER_CALL_US[arm] + i * 1e-3 for i in range(min_rounds)),
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


DATA = pathlib.Path(__file__).parent / "data"


def _suite_file(tmp_path, medians: dict) -> str:
    """A file as ``pytest bench/ --benchmark-json`` writes it, as far as suite_vs_bench reads it."""
    import json

    benchmarks = [{"group": shape, "stats": {"median": median}, "extra_info": {"mode": mode, "gemms_per_sample": 100}}
                  for (shape, mode), median in medians.items()]
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"benchmarks": benchmarks}))
    return str(path)


def test_suite_ratios_are_checked_against_the_bench_intervals(typed, tmp_path):
    # The H200 run's TF32/PEDANTIC: trunk/W_in/dW 0.8257 [0.8239, 0.8277], trunk/W_a/dX 0.6032 [0.6014, 0.6052].
    suite = _suite_file(tmp_path, {("trunk/W_in/dW", "PEDANTIC"): 9.0e-6, ("trunk/W_in/dW", "TF32"): 7.425e-6,
                                   ("trunk/W_a/dX", "PEDANTIC"): 8.5e-6, ("trunk/W_a/dX", "TF32"): 5.5e-6})
    result = typed("bench/suite_vs_bench.py", suite, str(DATA / "h200_run_identity.json"))
    assert result.returncode == 1, result.stderr  # W_a/dX: 5.5/8.5 = 0.647 lies beyond its reach
    assert ("trunk/W_in/dW: suite TF32/PEDANTIC 0.8250 (1.21x), bench 0.8257 [0.8239, 0.8277] -> inside; rerun's "
            "reach [0.8231, 0.8285] -> agrees") in result.stdout
    assert ("trunk/W_a/dX: suite TF32/PEDANTIC 0.6471 (1.55x), bench 0.6032 [0.6014, 0.6052] -> OUTSIDE; rerun's "
            "reach [0.6006, 0.6060] -> DISAGREES") in result.stdout
    assert "2 shapes: 1 inside the bench's interval, 1 within a rerun's reach" in result.stdout


def test_files_given_the_wrong_way_round_are_one_line_errors(typed, tmp_path):
    suite = _suite_file(tmp_path, {("trunk/W_in/dW", "PEDANTIC"): 9.0e-6, ("trunk/W_in/dW", "TF32"): 7.4e-6})
    bench = str(DATA / "h200_run_identity.json")
    for args in ((bench, suite), (suite, suite)):
        result = typed("bench/suite_vs_bench.py", *args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr
    assert "not a file of python -m pytest bench/" in typed("bench/suite_vs_bench.py", bench, suite).stderr
    assert ("a file of python -m pytest bench/, not a --json run of python -m cublas_det.bench; give the suite's "
            "file first") in typed("bench/suite_vs_bench.py", suite, suite).stderr


def test_a_suite_ratio_outside_the_interval_but_within_a_reruns_reach_agrees():
    """The bench's interval is for the ratio; another run carries its own error too: sqrt(2) x the interval."""
    from cublas_det.timing import Ratio

    module = load_bench_script("suite_vs_bench.py")
    medians = {("s", "PEDANTIC"): 1.0, ("s", "TF32"): 0.8035}
    lines, ok = module.compare(medians, {"s": Ratio("TF32", "PEDANTIC", 0.800, 0.797, 0.803, 48)})
    assert ok and "-> OUTSIDE; rerun's reach [0.7958, 0.8042] -> agrees" in lines[0]
    lines, ok = module.compare(medians, {"s": Ratio("TF32", "PEDANTIC", 0.800, 0.797, 0.802, 48)})  # reach 0.8028
    assert not ok and "DISAGREES" in lines[0]
