"""Cross-check the timing engine against an independent profiler (the torch profiler, CUPTI).

    python bench/profiler_crosscheck.py [--shape 128x56x4096:nt] [--modes pedantic tf32]

For each mode, in this one process: the graph-replay time per GEMM from cublas_det's timing
engine (and the eager time, host-bound on small shapes), against the torch profiler's (CUPTI)
kernel timestamps while the same batch graph replays: the kernel span per GEMM (which should
agree within 10%) and the summed kernel durations (lower: it leaves out the ~1 µs launch gaps
between a split-K GEMM's two kernels).
"""

import argparse
import importlib.util
import sys

from cublas_det._cli import ArgumentParser, prog_name, run_guarded
from cublas_det._device import require_gpu


def profiled_us_per_gemm(shape, mode, calls, replays=20):
    """Replay a graph of ``calls`` GEMMs under the torch profiler; per GEMM: (kernel span, kernel busy, names).

    Span = last kernel end - first kernel start over all replays (what back-to-back GEMMs take,
    launch gaps between a GEMM's kernels included); busy = summed kernel durations.
    """
    import cupy
    import torch
    from torch.profiler import ProfilerActivity, profile

    from cublas_det import create_handle, shape_gemm
    from cublas_det._timing import WORKSPACE_BYTES
    from cublas_det.operands import device_operands

    a, b = device_operands(shape, 0)
    out = cupy.empty((shape.m, shape.n), cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with create_handle(mode, stream=stream, workspace_bytes=WORKSPACE_BYTES) as handle, stream:
        stream.begin_capture()
        for _ in range(calls):
            shape_gemm(a, b, out, handle, shape)
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                graph.launch(stream)
            stream.synchronize()
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    span = max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)
    busy = sum(e.time_range.end - e.time_range.start for e in kernels)
    gemms = calls * replays
    return span / gemms, busy / gemms, sorted({e.name[:50] for e in kernels}), len(kernels) / gemms


def main():
    from cublas_det._timing import time_shape, warm_up
    from cublas_det.shapes import parse_shape

    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="128x56x4096:nt")
    parser.add_argument("--modes", nargs="+", default=["PEDANTIC", "TF32"])
    args = parser.parse_args()
    require_gpu()  # one line and exit 2 without a GPU, before the first CUDA call
    if importlib.util.find_spec("torch") is None:  # imported only after the timing: check now
        raise ModuleNotFoundError("the profiler cross-check needs PyTorch: No module named 'torch'", name="torch")
    shape = parse_shape(args.shape)
    modes = [m.upper() for m in args.modes]
    warm_up(1.0)
    timing = time_shape(shape, modes, aa_control=False, min_rounds=20, max_rounds=60)
    for mode in modes:
        arm = timing.arm(mode)
        span_us, busy_us, names, per_gemm = profiled_us_per_gemm(shape, mode, timing.calls_per_batch)
        print(f"{shape.spec} {mode}: cublas_det graph {arm.median_us:.2f} µs/GEMM (eager {arm.eager_median_us:.2f}); "
              f"torch profiler: kernel span {span_us:.2f} µs/GEMM -> ratio {arm.median_us / span_us:.3f}, "
              f"kernel busy {busy_us:.2f} µs/GEMM ({per_gemm:.0f} kernels/GEMM: {names})")


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
