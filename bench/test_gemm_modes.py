"""pytest-benchmark suite: one benchmark per shape x math mode, over the catalogue.

    python -m pytest bench/ --benchmark-json=bench.json
    CUBLAS_DET_BENCH_PRESETS="mamba2-2.7b" CUBLAS_DET_BENCH_TOKENS=2048 python -m pytest bench/test_gemm_modes.py

Like with like, so that pytest-benchmark's own table and its relative columns give true ratios:

- within a shape's group every mode replays a CUDA graph of the same number of GEMMs, calibrated
  once per shape on its fastest mode (>= 1 ms), with the operand sets rotated as the engine does;
- each round of a test is one round of the bench (``ShapeSetups.measure_round``): every mode's
  held graph and eager batch, in the Williams order of the round, so the mode under test runs
  under the conditions the bench times it in (clock, power and cache state set by the same mix of
  neighbours) and not after twenty replays of itself;
- as in the bench, the rounds go round the shape's independent setups (operand buffers, handles
  and graphs made anew), whole Williams cycles on each: each setup has a small bias of its own,
  which one setup alone would carry into every median;
- pytest-benchmark's timer is the GPU's (``GPU_CLOCK``): the round advances it by the held graph
  replay's GPU time per GEMM of the mode under test, from CUDA events. The table's times are GPU
  time per GEMM, without the host's launch and sync cost (which would pull every ratio towards 1).

Each test keeps only its own mode's samples, so its ratios are of medians, not paired: for paired
ratios with intervals and an A/A control, use ``python -m cublas_det.bench``
(``bench/suite_vs_bench.py`` checks that the two agree).
"""

import os

import pytest

from cublas_det.shapes import resolve_shapes
from cublas_det.timing.order import cycle_length, round_order

PRESETS = os.environ.get("CUBLAS_DET_BENCH_PRESETS", "trunk mamba2-130m").split()
TOKENS = int(os.environ.get("CUBLAS_DET_BENCH_TOKENS", "16384"))
SHAPES = resolve_shapes(PRESETS, tokens=TOKENS)
MODES = ("PEDANTIC", "DEFAULT", "TF32")
MAX_UNHELD = 3  # rounds redone when the blocking kernel let go before the graph was queued


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

    def advance(self, elapsed_s: float, calls: int) -> None:
        self.now += elapsed_s / calls


GPU_CLOCK = GpuClock()
_CALLS: dict = {}  # shape name -> GEMMs per sample, the same for every mode of the shape
_BENCH: dict = {}  # the one shape set up now: name -> ShapeBench
_ROUNDS: dict = {}  # (shape name, mode) -> rounds run, which picks the round's Williams order


def shape_bench(shape, make_bench=None):
    """The shape's ShapeBench with every mode's batch graph captured at the shape's one batch size.

    One shape is kept set up at a time (its operand sets may be large); set up again later, it
    reuses the batch size calibrated the first time, so every mode of a shape runs the same number
    of GEMMs per sample whatever order the tests run in.
    """
    if shape.name not in _BENCH:
        for old in _BENCH.values():
            old.close()
        _BENCH.clear()
        if make_bench is None:
            from cublas_det.timing import ShapeSetups as make_bench
        bench = make_bench(shape, list(MODES), aa_control=False)
        _CALLS[shape.name] = bench.prepare(_CALLS.get(shape.name))
        _BENCH[shape.name] = bench
    return _BENCH[shape.name]


def timed_replay(bench, mode: str) -> None:
    """One round: a bench round over every mode on the round's setup; the GPU clock advances by ``mode``'s
    held graph time per GEMM."""
    key = (bench.shape.name, mode)
    for _ in range(MAX_UNHELD):
        count = _ROUNDS.get(key, 0)
        _ROUNDS[key] = count + 1
        sample = bench.measure_round(round_order(list(MODES), count),
                                     (count // cycle_length(len(MODES))) % bench.setups)[mode]
        if sample.held:
            break
    GPU_CLOCK.advance(sample.graph_s * bench.calls, bench.calls)


@pytest.mark.gpu
@pytest.mark.benchmark(timer=GPU_CLOCK)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_gemm(benchmark, shape, mode):
    bench = shape_bench(shape)
    benchmark.group = shape.name
    benchmark.extra_info.update(gemms_per_sample=bench.calls, buffer_sets=bench.sets, setups=bench.setups,
                                shape=shape.spec, mode=mode,
                                flop_per_call=shape.flop, time="GPU seconds per GEMM, held graph replay within a Williams-ordered round of all modes")
    benchmark.pedantic(timed_replay, args=(bench, mode), rounds=20, warmup_rounds=3)
