"""pytest-benchmark suite: one benchmark per shape x math mode, over the catalogue.

    python -m pytest bench/ --benchmark-json=bench.json
    CUBLAS_DET_BENCH_PRESETS="mamba2-2.7b" CUBLAS_DET_BENCH_TOKENS=2048 python -m pytest bench/test_gemm_modes.py

Like with like, so that pytest-benchmark's own table and its relative columns give true ratios:

- a shape's rounds are the bench's rounds (``ShapeSetups.measure_round``): every mode's held graph
  and eager batch, and the A/A control's, in the Williams order of the round, on one of the shape's
  independent setups (operand buffers, handles and graphs made anew), whole Williams cycles on each
  setup in turn, over PASSES whole passes. Every mode runs the same number of GEMMs per sample,
  calibrated once per shape on its fastest mode (>= 1 ms), with the operand sets rotated;
- a round whose batch started unheld or ran below 75% of the default SM clock is taken again, as
  in the bench (after a pause when throttled; 10 times a shape at most, then kept), and the counts
  go into each test's extra_info;
- each round is measured once and gives every mode its sample: the tests of a shape's modes read
  the *same* rounds, so the ratio of two tests' medians is taken on the same setups, clocks and
  neighbours, as the bench's paired ratio is, and not on rounds run at another time;
- pytest-benchmark's timer is the GPU's (``GPU_CLOCK``): a test's round advances it by the held
  graph replay's GPU time per GEMM of its mode, from CUDA events. The table's times are GPU time
  per GEMM, without the host's launch and sync cost (which would pull every ratio towards 1).

For paired ratios with intervals and the A/A verdict, use ``python -m cublas_det.bench``
(``bench/suite_vs_bench.py`` checks that the two agree).
"""

import itertools
import os
import time

import pytest

from cublas_det.shapes import resolve_shapes
from cublas_det.timing.order import cycle_length, round_order
from cublas_det.timing.results import Discards
from cublas_det.timing.rounds import THROTTLE_FRACTION, take_round

PRESETS = os.environ.get("CUBLAS_DET_BENCH_PRESETS", "trunk mamba2-130m").split()
TOKENS = int(os.environ.get("CUBLAS_DET_BENCH_TOKENS", "16384"))
SHAPES = resolve_shapes(PRESETS, tokens=TOKENS)
MODES = ("PEDANTIC", "DEFAULT", "TF32")  # the bench's default modes, in its order (the A/A arm follows)
PASSES = 3  # whole passes over the setups: 48 rounds of 4 arms on 4 setups, the most the bench takes


class GpuClock:
    """pytest-benchmark's timer for this suite: seconds of GPU time per GEMM, advanced by each timed replay.

    pytest-benchmark reads its timer before and after each round and records the difference; the
    round itself advances this clock, so the difference is the replay's GPU time per GEMM.
    """

    __name__ = "cublas_det_gpu_seconds_per_gemm"  # how pytest-benchmark names the timer in its JSON

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


GPU_CLOCK = GpuClock()


class ShapeRounds:
    """One shape's rounds on a set-up :class:`~cublas_det.timing.ShapeSetups`, each measured when a
    test first asks for it and kept for the shape's other modes."""

    def __init__(self, bench, clock_floor_mhz=None, sleep=time.sleep):
        self.bench, self.clock_floor_mhz, self.sleep = bench, clock_floor_mhz, sleep
        self.discards = Discards()  # rounds taken again, and kept after the shape's redos ran out
        self.calls, self.sets, self.setups = bench.calls, bench.sets, bench.setups
        self.cycle = cycle_length(len(bench.names))
        self.count = PASSES * self.cycle * bench.setups
        self.measured = []  # one {arm: Sample} per round

    def sample(self, mode: str, index: int):
        """``mode``'s sample of round ``index`` (measuring the rounds up to it)."""
        while len(self.measured) <= index:
            self.measured.append(self._measure(len(self.measured)))
            if self.complete:  # the shape's memory goes back before the next shape is set up
                self.close()
        return self.measured[index][mode]

    def _measure(self, index: int) -> dict:
        order = round_order(self.bench.names, index)
        setup = (index // self.cycle) % self.bench.setups
        samples, self.discards = take_round(self.bench.measure_round, order, setup, self.discards,
                                            clock_floor_mhz=self.clock_floor_mhz, sleep=self.sleep)
        return samples

    @property
    def open(self) -> bool:
        return self.bench is not None

    def close(self) -> None:
        """Free the setups (handles, graphs, operand buffers); the measured rounds stay."""
        self.bench.close()
        self.bench = None

    @property
    def complete(self) -> bool:
        return len(self.measured) >= self.count


_CALLS: dict = {}  # shape name -> GEMMs per sample, the same for every mode of the shape
_ROUNDS: dict = {}  # shape name -> ShapeRounds; at most one is set up (open) at a time
_WARMED_UP = False


def shape_rounds(shape, make_bench=None) -> ShapeRounds:
    """The shape's rounds, its ShapeSetups set up with every arm's batch graph at the shape's one batch size.

    One shape is kept set up at a time (its operand sets may be large). The first test of a shape
    measures all its rounds; its other tests, whatever order they run in, read them and need no GPU.
    A shape whose rounds stopped short (a test that failed, or ``--benchmark-disable``, which calls
    each test once) and is asked for again starts its rounds afresh on new setups, with the batch
    size calibrated the first time, so every mode of a shape runs the same GEMMs per sample.
    """
    rounds = _ROUNDS.get(shape.name)
    if rounds is not None and (rounds.complete or rounds.open):
        return rounds
    for other in _ROUNDS.values():
        if other.open:
            other.close()
    global _WARMED_UP
    floor = None
    if make_bench is None:
        from cublas_det.timing import ShapeSetups as make_bench
        from cublas_det.timing import warm_up
        from cublas_det.timing.clocks import default_sm_clock_mhz

        if not _WARMED_UP:  # as the bench does: clocks up before the first sample
            warm_up(1.0)
            _WARMED_UP = True
        default = default_sm_clock_mhz()
        floor = THROTTLE_FRACTION * default if default else None
    bench = make_bench(shape, list(MODES))
    _CALLS[shape.name] = bench.prepare(_CALLS.get(shape.name))
    _ROUNDS[shape.name] = ShapeRounds(bench, floor)
    return _ROUNDS[shape.name]


@pytest.mark.gpu
@pytest.mark.benchmark(timer=GPU_CLOCK)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_gemm(benchmark, shape, mode):
    rounds = shape_rounds(shape)
    benchmark.group = shape.name
    benchmark.extra_info.update(gemms_per_sample=rounds.calls, buffer_sets=rounds.sets, setups=rounds.setups,
                                shape=shape.spec, mode=mode, flop_per_call=shape.flop,
                                time="GPU seconds per GEMM, held graph replay within a Williams-ordered "
                                     "round of all modes and the A/A control, the rounds shared by the "
                                     "shape's modes")
    taken = itertools.count()  # calls past the rounds (--benchmark-cprofile's profiled ones) read rounds again
    benchmark.pedantic(lambda: GPU_CLOCK.advance(rounds.sample(mode, next(taken) % rounds.count).graph_s),
                       rounds=rounds.count)
    benchmark.extra_info.update(discards=rounds.discards.to_dict())
