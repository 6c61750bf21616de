"""A run's timing in visits, apart from the GPU: round-robin over shapes, one Williams cycle a visit on
a setup of its own, intervals that hold the spread between visits, stops per shape, failures and Ctrl-C."""

import contextlib
import itertools
import random
import weakref

import pytest

from cublas_det.timing import Sample, StopReason
from cublas_det.timing.rounds import KeptRounds, round_order
from cublas_det.results.stats import median_ci
from cublas_det.timing.visits import BUDGET_FLOOR_VISITS, run_visits
from cublas_det.results.timing import Arm

NAMES = [Arm.read("PEDANTIC"), Arm.read("TF32")]  # a Williams cycle of 2 rounds
TRUE_RATIO = 0.5


class Moments:
    """Synthetic setups: TF32 takes TRUE_RATIO x PEDANTIC's time, times the bias of the visit (the moment
    and the setup, drawn once a visit) and +-``noise`` per batch."""

    def __init__(self, visit_sd=0.004, noise=0.001, seed=0, fail=None, interrupt_at=None):
        self.rng = random.Random(seed)
        self.visit_sd, self.noise = visit_sd, noise
        self.opened, self.orders, self.bias = [], [], {}
        self.fail, self.interrupt_at = fail or {}, interrupt_at
        self.rounds = itertools.count()

    @contextlib.contextmanager
    def open_visit(self, key, visit):
        self.opened.append((key, visit))
        if (key, visit) in self.fail:
            raise self.fail[key, visit]
        self.bias[key, visit] = 1 + self.rng.gauss(0, self.visit_sd)
        yield lambda order, setup, eager=True: self.measure(key, visit, order, setup, eager)

    def measure(self, key, visit, order, setup, eager):
        if next(self.rounds) == self.interrupt_at:
            raise KeyboardInterrupt
        self.orders.append((key, order))
        times = {"PEDANTIC": 2e-5, "TF32": 2e-5 * TRUE_RATIO * self.bias[key, visit]}
        return {name: Sample(times[name] * (1 + self.rng.uniform(-self.noise, self.noise)), 1e-5 if eager else None,
                             1980.0, True, setup)
                for name in order}


def _run(moments, keys=("a", "b", "c"), **options):
    options = {"min_visits": 4, "max_visits": 12, "budget_s": 1e9, "now": itertools.count().__next__,
               "sleep": lambda s: None, **options}
    return run_visits(list(keys), NAMES, moments.open_visit, **options)


def test_visits_go_round_robin_one_cycle_each_on_a_setup_of_their_own():
    moments = Moments()
    seen = []
    run = _run(moments, min_visits=3, max_visits=3, target_half_width=0.0,
               on_visit=lambda visit, going: seen.append((visit, going)))
    assert moments.opened == [(key, visit) for visit in range(3) for key in "abc"]
    assert seen == [(1, 3), (2, 3), (3, 0)]
    for key in "abc":
        outcome = run.outcomes[key]
        assert outcome.visits == 3 and outcome.rounds.rounds == 6 and outcome.stop_reason is StopReason.ROUNDS
        assert [s.setup for s in outcome.rounds.kept["TF32"]] == [0, 0, 1, 1, 2, 2]  # a sample's setup: its visit
        # the eager batch: once an arm, in the first round of the first visit (host-bound: kept short)
        assert [s.eager_s is not None for s in outcome.rounds.kept["TF32"]] == [True] + [False] * 5
        # The Williams order follows the shape's kept rounds across its visits.
        assert [order for k, order in moments.orders if k == key] == [round_order(NAMES, r) for r in range(6)]


def test_the_interval_holds_the_spread_between_visits():
    run = _run(Moments(visit_sd=0.004, noise=0.0005), keys=["a"], min_visits=12, max_visits=12)
    kept = run.outcomes["a"].rounds.kept
    ratio = run.outcomes["a"].ratios[0]
    # The rounds' own noise is 0.05%, the visits' 0.4%: the between-visit term carries the visits'
    # spread (t(11) x 0.4% / sqrt(12), ~0.25%), added in quadrature to the rounds' interval.
    blind_low, blind_high = median_ci([t.graph_s / p.graph_s for t, p in zip(kept["TF32"], kept["PEDANTIC"])])
    assert 0.0015 < ratio.setup_half_width < 0.004
    assert ratio.ci_low < blind_low and ratio.ci_high > blind_high


def test_another_run_lands_inside_the_interval_as_often_as_it_promises():
    """The point of visits: over many synthetic runs whose moments differ (0.4% sd a visit, 0.05% noise a
    batch), an interval from 12 visits holds the true ratio at least as often as 95% intervals
    should (they are conservative), where one stretch of rounds on one setup, as the bench timed
    before, holds it far less often."""
    visits_held = stretch_held = 0
    runs = 200
    for seed in range(runs):
        ratio = _run(Moments(noise=0.0005, seed=seed), keys=["a"], min_visits=12, max_visits=12).outcomes["a"].ratios[0]
        visits_held += ratio.ci_low <= TRUE_RATIO <= ratio.ci_high
        moments = Moments(noise=0.0005, seed=seed)
        one = KeptRounds(NAMES)
        with moments.open_visit("a", 0) as measure_round:
            one.take(measure_round, 24)
        stretch = one.ratios()[0]
        stretch_held += stretch.ci_low <= TRUE_RATIO <= stretch.ci_high
    assert visits_held >= 0.93 * runs
    assert stretch_held <= 0.5 * runs


def test_each_shape_stops_on_its_own_and_the_others_go_on():
    moments = Moments()
    quiet = Moments(visit_sd=0.0, noise=0.0001)

    @contextlib.contextmanager
    def open_visit(key, visit):  # "q" is quiet and meets the target at min_visits; "n" is noisy
        with (quiet if key == "q" else moments).open_visit(key, visit) as measure_round:
            yield measure_round

    run = run_visits(["q", "n"], NAMES, open_visit, min_visits=3, max_visits=7, budget_s=1e9, target_half_width=0.001,
                     now=itertools.count().__next__)
    assert (run.outcomes["q"].stop_reason, run.outcomes["q"].visits) == (StopReason.INTERVAL, 3)
    assert (run.outcomes["n"].stop_reason, run.outcomes["n"].visits) == (StopReason.ROUNDS, 7)
    assert [key for key, _ in quiet.opened + moments.opened].count("n") == 7


def test_the_budget_stops_a_shape_after_four_visits_not_before():
    ticks = itertools.count(step=10.0).__next__  # each look at the clock: 10 s later, so a visit spends 10 s
    run = _run(Moments(), keys=["a"], min_visits=6, budget_s=1.0, now=ticks)
    assert (run.outcomes["a"].stop_reason, run.outcomes["a"].visits) == (StopReason.BUDGET, BUDGET_FLOOR_VISITS)
    fewer = _run(Moments(), keys=["a"], min_visits=3, budget_s=1.0, now=itertools.count(step=10.0).__next__)
    assert fewer.outcomes["a"].visits == 3  # asked for fewer than the floor: the budget may stop at min_visits


def test_a_failing_shape_is_named_in_one_line_and_the_others_are_timed():
    moments = Moments(fail={("b", 1): MemoryError("out of memory allocating 2 GiB")})
    run = _run(moments, min_visits=3, max_visits=3, failures=(MemoryError,))
    assert run.errors == {"b": "timing failed: MemoryError: out of memory allocating 2 GiB"}
    assert set(run.outcomes) == {"a", "c"} and not run.interrupted
    assert ("b", 2) not in moments.opened
    with pytest.raises(MemoryError):  # what is not a failure of the GPU is a bug: it propagates
        _run(Moments(fail={("b", 1): MemoryError("x")}), min_visits=3, max_visits=3)


def test_ctrl_c_keeps_the_shapes_with_two_whole_visits_and_leaves_a_cut_visit_out():
    # Rounds are taken a, a, b, b, c, c per turn of visits; round 16 is c's first round in visit 2,
    # after a and b took theirs.
    run = _run(Moments(interrupt_at=16), min_visits=5)
    assert run.interrupted
    assert {k: (o.visits, o.rounds.rounds, o.stop_reason) for k, o in run.outcomes.items()} == {
        "a": (3, 6, StopReason.INTERRUPTED), "b": (3, 6, StopReason.INTERRUPTED), "c": (2, 4, StopReason.INTERRUPTED)}
    early = _run(Moments(interrupt_at=7), min_visits=5)  # a has one visit and a round, b and c one visit
    assert early.interrupted and early.outcomes == {}


def test_a_shape_takes_two_visits_at_least_whatever_it_is_asked():
    run = _run(Moments(visit_sd=0.0, noise=0.0), keys=["a"], min_visits=1, max_visits=1, target_half_width=0.5)
    assert (run.outcomes["a"].visits, run.outcomes["a"].stop_reason) == (2, StopReason.INTERVAL)


class StandIns:
    """The engine's GPU parts replaced: ShapeBench by a stand-in (TF32 twice as fast, one batch size
    per shape from its first visit), the clock, the upload and CuPy's pool. ``fail`` maps
    (shape name, setup number) to an exception its ShapeBench raises; ``kernels`` is what
    kernel_signatures does."""

    def __init__(self, monkeypatch):
        import sys
        import types

        from cublas_det.core import operands
        from cublas_det.timing import engine

        self.engine, self.made, self.fail, self.alive_at_open, self.freed = engine, [], {}, [], []
        self.kernels = lambda names: {}
        stand = self

        class FakeBench:
            def __init__(self, shape, configs, *, aa_control=True, operands=None, seed=0):
                assert operands is not None  # from the run's host copy, not made anew
                stand.alive_at_open.append(sum(ref() is not None for ref in stand.refs))
                stand.made.append(shape.name)
                problem = stand.fail.get((shape.name, len(stand.made) - 1))
                if problem:
                    raise problem
                self.names, self.sets = list(engine.arms_of(configs, aa_control)), 7
                stand.refs.append(weakref.ref(self))

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return None

            def prepare(self, calls=None):
                return calls or 100 + len(stand.made)  # a recalibration would give another count

            def measure_round(self, order, setup, eager=True):
                return {name: Sample(1e-5 if name == "TF32" else 2e-5, 3e-5 if eager else None, 1980.0, True, setup)
                        for name in order}

            def kernel_signatures(self):
                return stand.kernels(self.names)

        self.refs = []
        pool = types.SimpleNamespace(free_all_blocks=lambda: self.freed.append(True))
        monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(get_default_memory_pool=lambda: pool))
        monkeypatch.setattr(engine, "ShapeBench", FakeBench)
        monkeypatch.setattr(engine, "default_sm_clock_mhz", lambda: 1980.0)
        monkeypatch.setattr(operands, "_upload", lambda a, b: (a, b))

    def time_shapes(self, shapes, **options):
        options = {"min_visits": 2, "max_visits": 2, "budget_s": 1e9, "failures": (MemoryError,), **options}
        return self.engine.time_shapes(shapes, ["pedantic", "tf32"], **options)


SHAPES = ["64x32x16", "32x64x16:tn"]


def test_time_shapes_builds_each_shapes_timing_from_its_visits(monkeypatch):
    """The engine's GPU glue on stand-ins: setups made per visit, round-robin, one at a time, the first
    visit's batch size kept, and each shape's ShapeTiming (samples by visit, options, clock floor)."""
    from cublas_det.core.shapes import parse_shape

    stand = StandIns(monkeypatch)
    shapes = [parse_shape(spec) for spec in SHAPES]
    run = stand.time_shapes(shapes)
    assert stand.made == [s.name for s in shapes] * 2  # 2 visits of a 6-round cycle (3 arms), round-robin
    assert stand.alive_at_open == [0, 0, 0, 0]  # each setup is gone before the next is made
    assert not run.errors and not run.interrupted and list(run.timings) == [s.name for s in shapes]
    for shape, calls in zip(shapes, (101, 102)):
        timing = run.timings[shape.name]
        assert timing.calls_per_batch == calls and timing.buffer_sets == 7 and timing.rounds == 12
        assert [a.name for a in timing.arms] == ["PEDANTIC", "TF32", "PEDANTIC-AA"]
        assert all(a.setups == (0,) * 6 + (1,) * 6 and a.eager_us == (30.0,) for a in timing.arms)
        assert timing.options["visits"] == timing.options["setups"] == 2 and timing.options["rounds_per_visit"] == 6
        assert (timing.options["min_rounds"], timing.options["max_rounds"]) == (12, 12)  # pytest-benchmark's terms
        assert timing.ratio("TF32", "PEDANTIC").median == pytest.approx(0.5) and timing.clock_floor_mhz == 1485.0
        assert timing.stop_reason == "interval" and timing.elapsed_s > 0


def test_a_gpu_failure_in_one_shapes_visit_frees_the_pool_and_the_others_are_timed(monkeypatch):
    from cublas_det.core.shapes import parse_shape

    stand = StandIns(monkeypatch)
    shapes = [parse_shape(spec) for spec in SHAPES]
    stand.fail[(shapes[1].name, 3)] = MemoryError("out of memory allocating 1 GiB")  # its second visit
    run = stand.time_shapes(shapes, max_visits=3, min_visits=3)
    assert run.errors == {shapes[1].name: "timing failed: MemoryError: out of memory allocating 1 GiB"}
    assert list(run.timings) == [shapes[0].name] and run.timings[shapes[0].name].options["visits"] == 3
    assert stand.freed == [True]  # the pool's cached blocks went back before the next shape's visit


def test_kernels_that_cannot_be_recorded_leave_the_timing_standing(monkeypatch):
    from cublas_det.core.shapes import parse_shape

    stand = StandIns(monkeypatch)
    shapes = [parse_shape(spec) for spec in SHAPES]

    def kernels(names):
        raise MemoryError("no room for the recording")

    stand.kernels = kernels
    run = stand.time_shapes(shapes, kernels=True)
    assert not run.errors and len(run.timings) == 2
    assert all(arm.kernels == "not recorded (MemoryError: no room for the recording)" and arm.kernel_us is None
               for timing in run.timings.values() for arm in timing.arms)

    def interrupted(names):
        raise KeyboardInterrupt

    stand.kernels = interrupted
    run = stand.time_shapes(shapes, kernels=True)
    assert run.interrupted and len(run.timings) == 2  # Ctrl-C while recording kernels: the timings stand
