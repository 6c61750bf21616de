"""Cross-check the timing engine against an independent profiler (the torch profiler, CUPTI).

    python bench/profiler_crosscheck.py [--shape 128x56x4096:nt] [--modes pedantic tf32]

For each mode: the graph-replay time per GEMM from cublas_det's timing engine, the eager time,
and the summed device time of the kernels the torch profiler saw per GEMM (split-K reduction
kernels included), all in this one process. The graph time should lie within 10% of the kernel
time; the eager time is host-bound on small shapes and is reported separately.
"""

import argparse


def kernel_us_per_gemm(shape, mode, calls=2000):
    import cupy
    import torch
    from torch.profiler import ProfilerActivity, profile

    from cublas_det import create_handle
    from cublas_det._check import _device_operands, cublas_gemm

    a, b = _device_operands(shape, 0)
    out = cupy.empty((shape.m, shape.n), cupy.float32)
    with create_handle(mode) as handle:
        for _ in range(20):
            cublas_gemm(a, b, out, handle, shape)
        cupy.cuda.Device().synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                cublas_gemm(a, b, out, handle, shape)
            cupy.cuda.Device().synchronize()
            torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.count >= calls]
    total_us = sum(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) for e in kernels)
    return total_us / calls, sorted({e.key[:60] for e in kernels})


def main():
    from cublas_det.shapes import parse_shape
    from cublas_det._timing import time_shape, warm_up

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="128x56x4096:nt")
    parser.add_argument("--modes", nargs="+", default=["PEDANTIC", "TF32"])
    args = parser.parse_args()
    shape = parse_shape(args.shape)
    modes = [m.upper() for m in args.modes]
    warm_up(1.0)
    timing = time_shape(shape, modes, aa_control=False, min_rounds=20, max_rounds=60)
    for mode in modes:
        arm = timing.arm(mode)
        kernel_us, names = kernel_us_per_gemm(shape, mode)
        print(f"{shape.spec} {mode}: graph {arm.median_us:.2f} µs/GEMM, eager {arm.eager_median_us:.2f} µs/GEMM, "
              f"profiler kernels {kernel_us:.2f} µs/GEMM -> graph/kernel {arm.median_us / kernel_us:.3f} "
              f"({timing.calls_per_batch} GEMMs/batch); kernels: {names}")


if __name__ == "__main__":
    main()
