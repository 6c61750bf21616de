"""The CLI's timing step on stand-ins (no GPU): time_shapes asked for the run's shapes in visits, its
progress lines, a shape whose timing failed reported in its line, and Ctrl-C during the visits."""

import pytest

from cublas_det.cli import bench, gemms
from cublas_det.timing import ArmTiming, Ratio, RunTiming, ShapeTiming
from cublas_det.results.timing import Arm

from .conftest import load_bench_script


class StandIn:
    """``time_shapes``: visit progress for every shape, a timing for the first, a failure for the second."""

    def __init__(self, interrupted=False):
        self.asked, self.interrupted = None, interrupted

    def __call__(self, shapes, configs, *, seed, min_visits, max_visits, budget_s, monitor, kernels, on_visit,
                 operands):
        self.asked = ([s.name for s in shapes], min_visits, max_visits, budget_s)
        assert operands is not None  # the host operands the checks drew, not drawn again
        on_visit(1, 2)
        on_visit(2, 0)
        first = shapes[0]
        arms = tuple(ArmTiming(Arm.read(name), (t,) * 8, (2 * t,) * 8, (1980.0,) * 8, setups=(0,) * 4 + (1,) * 4)
                     for name, t in (("PEDANTIC", 9.0), ("DEFAULT", 9.0), ("TF32", 7.0), ("DEFAULT-AA", 9.0)))
        ratios = (Ratio("TF32", "PEDANTIC", 0.778, 0.776, 0.780, 8), Ratio("DEFAULT-AA", "DEFAULT", 1.0, 0.999, 1.001, 8))
        timing = ShapeTiming(first.name, first.flop, 100, 3, 8, arms, ratios, 0.5, "interval", options={"visits": 2})
        return RunTiming({first.name: timing}, {shapes[1].name: "timing failed: OutOfMemoryError: out of memory"},
                         self.interrupted)


@pytest.fixture
def stand_in(monkeypatch):
    from cublas_det.timing import monitor

    class Monitor:
        def stop(self):
            return {}

    monkeypatch.setattr(bench, "fingerprint",
                        lambda device_id=None: {"gpu": {"name": "Stand-in GPU", "sm_count": 132}, "env": {}})
    monkeypatch.setattr(monitor.GpuMonitor, "start", classmethod(lambda cls, *a, **k: Monitor()))
    monkeypatch.setattr(bench, "warm_up", lambda seconds: None)

    def install(interrupted=False):
        fake = StandIn(interrupted)
        monkeypatch.setattr(bench, "time_shapes", fake)
        return fake

    return install


def _bench(*argv):
    parser = bench.build_parser()
    args = parser.parse_args(["--scenarios", "none", *argv])
    shapes, scenarios, repeats, configs = gemms.read_options(args)
    return bench._bench(args, [(shapes[:2], configs)], scenarios, repeats, None, {})


def test_the_timing_asks_for_visits_shows_them_and_reports_a_failed_shape_in_its_line(stand_in, capsys):
    fake = stand_in()
    code = _bench("--preset", "trunk")
    out, err = capsys.readouterr()
    assert fake.asked == (["trunk/W_in/forward", "trunk/W_in/dX"], *gemms.VISITS, gemms.BUDGET_S)
    assert "timing: visit 1 done, 2 of 2 shapes go on" in err
    most = gemms.VISITS[1]  # the visits a shape may take
    assert f"[{'#' * 30}] {most}/{most}" in err and "timed 2 shapes in 2 visits" in err
    assert len(err.splitlines()) <= 12  # stderr is no terminal here: a line a tenth of the run at most
    assert "trunk/W_in/dX" in out and "timing failed: OutOfMemoryError: out of memory" in out
    assert "8 rounds in 2 visits" not in out  # how a shape was timed: --verbose
    assert code == 1  # a shape that could not be timed fails the run
    # bench/timing_load_check.py starts its load on these lines
    assert load_bench_script("timing_load_check.py").VISIT_DONE in err


def test_quick_takes_fewer_visits_and_ctrl_c_in_the_visits_keeps_what_was_timed(stand_in, capsys):
    fake = stand_in(interrupted=True)
    code = _bench("--preset", "trunk", "--quick")
    out, _ = capsys.readouterr()
    assert fake.asked[1:] == (*gemms.QUICK_VISITS, gemms.QUICK_BUDGET_S)
    assert code == 130 and "trunk/W_in/forward" in out and "0.778" in out


def test_verbose_shows_how_each_shape_was_timed_and_where_the_run_spent_its_time(stand_in, capsys):
    stand_in()
    _bench("--preset", "trunk", "--verbose")
    out, err = capsys.readouterr()
    assert "  timed: 100 GEMMs/batch, 3 buffer sets, 8 rounds in 2 visits, stop: interval" in out
    phases = next(line for line in err.splitlines() if line.startswith("phases (s): "))
    assert all(name in phases for name in ("startup", "timing warm-up", "timing", "report"))
