"""pytest-benchmark suite: one benchmark per shape x math mode, over the catalogue.

    python -m pytest bench/ --benchmark-json=bench.json
    CUBLAS_DET_BENCH_PRESETS="mamba2-2.7b" CUBLAS_DET_BENCH_TOKENS=2048 python -m pytest bench/test_gemm_modes.py

Like with like, so that pytest-benchmark's own table and its relative columns give true ratios:

- the rounds are the bench's (``cublas_det.timing.time_shapes``): every mode's held graph and eager
  batch, and the A/A control's, in the Williams order of the round, in visits round-robin over the
  selected shapes, each visit on a setup of its own (operand buffers, handles and graphs made
  anew). Every mode runs the same number of GEMMs per sample, calibrated once per shape on its
  fastest mode (>= 1 ms), with the operand sets rotated;
- a round whose batch started unheld or ran below 75% of the default SM clock is taken again, as
  in the bench, and the counts go into each test's extra_info;
- the first test measures the rounds of every selected shape, and each round gives every mode its
  sample: the tests of a shape's modes read the *same* rounds, so the ratio of two tests' medians
  is taken on the same setups, clocks and moments, as the bench's paired ratio is;
- pytest-benchmark's timer is the GPU's (``GPU_CLOCK``): a test's round advances it by the held
  graph replay's GPU time per GEMM of its mode, from CUDA events. The table's times are GPU time
  per GEMM, without the host's launch and sync cost (which would pull every ratio towards 1).

The suite takes twice the bench's most visits (VISITS), so that its error is smaller than the
bench's interval it is checked against. For paired ratios with intervals and the A/A verdict, use
``cublas-det bench`` (``bench/suite_vs_bench.py`` checks that the two agree). Exit codes are
pytest's: 0 every test passed (or skipped: without a GPU each skips with the reason), 1 a test
failed.
"""

import itertools
import os

import pytest

from cublas_det import MathMode
from cublas_det.core.shapes import GemmShape, resolve_shapes

PRESETS = os.environ.get("CUBLAS_DET_BENCH_PRESETS", "trunk mamba2-130m").split()
TOKENS = int(os.environ.get("CUBLAS_DET_BENCH_TOKENS", "16384"))
SHAPES = resolve_shapes(PRESETS, tokens=TOKENS)
MODES = ("PEDANTIC", "DEFAULT", "TF32")  # the bench's default modes, in its order (the A/A arm follows)
VISITS = 16  # visits a shape (a Williams cycle each: 64 rounds of 4 arms), twice the bench's most
DISABLED_VISITS = 2  # under --benchmark-disable (each test called once): enough for a timing, not for an interval
BUDGET_S = 30.0  # a shape's rounds stop after this many seconds (after 4 visits): large GEMMs


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
_TIMINGS: dict = {}  # shape name -> ShapeTiming, or the one-line reason its timing failed
_WARMED_UP = False


def selected_shapes(items) -> list:
    """The shapes of the collected tests (``-k`` may have left out some), each once, in order."""
    shapes = [getattr(item, "callspec", None) and item.callspec.params.get("shape") for item in items]
    return list({shape.name: shape for shape in shapes if isinstance(shape, GemmShape)}.values())


def shape_timing(shape, selected, *, visits: int = VISITS):
    """The shape's timing: at the first call, every selected shape not yet timed is timed at once, in
    visits spread over the run as the bench times them; later calls read what was measured.
    Returns a :class:`~cublas_det.timing.ShapeTiming`, or the one-line reason the shape's timing failed."""
    if shape.name not in _TIMINGS:
        from cublas_det.timing import time_shapes, warm_up

        global _WARMED_UP
        if not _WARMED_UP:  # as the bench does: clocks up before the first sample
            warm_up(1.0)
            _WARMED_UP = True
        todo = [s for s in selected if s.name not in _TIMINGS]
        if shape not in todo:
            todo.append(shape)
        run = time_shapes(todo, list(MODES), min_visits=visits, max_visits=visits, budget_s=BUDGET_S)
        if run.interrupted:
            raise KeyboardInterrupt
        _TIMINGS.update(run.errors)
        _TIMINGS.update(run.timings)
    return _TIMINGS[shape.name]


@pytest.mark.gpu
@pytest.mark.benchmark(timer=GPU_CLOCK)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_gemm(benchmark, shape, mode, request):
    disabled = getattr(benchmark, "disabled", False)
    timing = shape_timing(shape, selected_shapes(request.session.items), visits=DISABLED_VISITS if disabled else VISITS)
    if isinstance(timing, str):
        pytest.fail(f"{shape.name}: {timing}", pytrace=False)
    per_gemm_s = [us * 1e-6 for us in timing.arm(timing.arm_for(MathMode[mode])).graph_us]
    benchmark.group = shape.name
    benchmark.extra_info.update(gemms_per_sample=timing.calls_per_batch, buffer_sets=timing.buffer_sets,
                                visits=timing.options["visits"], setups=timing.options["setups"],
                                shape=shape.spec, mode=mode, flop_per_call=shape.flop,
                                stop_reason=timing.stop_reason, discards=timing.discards.to_dict(),
                                time="GPU seconds per GEMM, held graph replay within a Williams-ordered "
                                     "round of all modes and the A/A control, in visits spread over the "
                                     "run, the rounds shared by the shape's modes")
    taken = itertools.count()  # calls past the rounds (--benchmark-cprofile's profiled ones) read rounds again
    benchmark.pedantic(lambda: GPU_CLOCK.advance(per_gemm_s[next(taken) % len(per_gemm_s)]),
                       rounds=len(per_gemm_s))
