"""pytest-benchmark suite: one benchmark per shape x math mode, over the catalogue.

    python -m pytest bench/ --benchmark-json=bench.json
    CUBLAS_DET_BENCH_PRESETS="mamba2-2.7b" CUBLAS_DET_BENCH_TOKENS=2048 python -m pytest bench/test_gemm_modes.py

Each round replays a CUDA graph holding a batch of GEMMs (>= 1 ms of GPU work) and waits for it,
so pytest-benchmark's host clock measures GPU work, not Python launch overhead. Reported times
are per batch; ``extra_info["calls_per_batch"]`` converts them to per-GEMM times. For modes
interleaved with paired ratios, use ``python -m cublas_det.bench``.
"""

import os

import pytest

from cublas_det.shapes import resolve_shapes

PRESETS = os.environ.get("CUBLAS_DET_BENCH_PRESETS", "trunk mamba2-130m").split()
TOKENS = int(os.environ.get("CUBLAS_DET_BENCH_TOKENS", "16384"))
SHAPES = resolve_shapes(PRESETS, tokens=TOKENS)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["PEDANTIC", "DEFAULT", "TF32"])
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_gemm(benchmark, shape, mode):
    import cupy

    from cublas_det import create_handle, shape_gemm
    from cublas_det._timing import WORKSPACE_BYTES, _calibrate
    from cublas_det.operands import device_operands

    a, b = device_operands(shape, 0)
    out = cupy.empty((shape.m, shape.n), cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with create_handle(mode, stream=stream, workspace_bytes=WORKSPACE_BYTES) as handle, stream:
        def batch(h, calls):
            for _ in range(calls):
                shape_gemm(a, b, out, h, shape)

        batch(handle, 3)
        calls = _calibrate(stream, {mode: handle}, batch)
        stream.begin_capture()
        batch(handle, calls)
        graph = stream.end_capture()
        graph.upload(stream)

        def replay():
            graph.launch(stream)
            stream.synchronize()

        benchmark.group = shape.name
        benchmark.extra_info.update(calls_per_batch=calls, shape=shape.spec, mode=mode, flop_per_call=shape.flop)
        benchmark.pedantic(replay, rounds=20, warmup_rounds=3)
