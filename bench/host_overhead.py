"""Host cost of one eager GEMM call: cublas_det.gemm() against CuPy's own cublas.gemmEx binding.

    python bench/host_overhead.py [--blocks 30] [--calls 1000]

The GEMM is the trunk's 128x56x4096 (~8 µs of GPU time on an H200) so a loop of calls is
host-bound and the per-call time is the Python + cuBLAS launch cost. Both use a PEDANTIC handle,
COMPUTE_32F, CUBLAS_GEMM_DEFAULT, the same operands and a preallocated output on CuPy's current
stream. Blocks of calls alternate between the two (so drift hits both alike); each block is
timed with perf_counter after a device sync, and the medians of the per-call times are printed.
"""

import argparse
import statistics
import time

M, N, K = 128, 56, 4096


def main() -> None:
    import cupy
    import numpy as np
    from cupy_backends.cuda.libs import cublas

    from cublas_det import create_handle, gemm, prepare_gemm

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((M, K), dtype=np.float32))
    b = cupy.asarray(rng.standard_normal((K, N), dtype=np.float32))
    c = cupy.empty((M, N), cupy.float32)
    ours = create_handle("pedantic")
    theirs = cublas.create()
    cublas.setMathMode(theirs, 2)  # PEDANTIC
    one, zero = np.array(1.0, np.float32), np.array(0.0, np.float32)
    cupy_args = (theirs, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, N, M, K, one.ctypes.data, b.data.ptr, 0, N,
                 a.data.ptr, 0, K, zero.ctypes.data, c.data.ptr, 0, N, cublas.CUBLAS_COMPUTE_32F, -1)

    def run_ours(calls):
        for _ in range(calls):
            gemm(a, b, out=c, handle=ours)

    prepared = prepare_gemm(a, b, out=c, handle=ours)

    def run_prepared(calls):
        for _ in range(calls):
            prepared()

    def run_cupy(calls):
        gemm_ex = cublas.gemmEx
        for _ in range(calls):
            gemm_ex(*cupy_args)

    bodies = {"cublas_det.gemm": run_ours, "GemmCall": run_prepared, "cupy gemmEx": run_cupy}
    per_call = {name: [] for name in bodies}
    for body in bodies.values():
        body(200)  # warm-up: heuristics cache, lazy loading
    for block in range(args.blocks):
        order = list(bodies)[block % 3:] + list(bodies)[:block % 3]  # rotate who goes first
        for name in order:
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            bodies[name](args.calls)
            cupy.cuda.Device().synchronize()
            per_call[name].append((time.perf_counter() - start) / args.calls * 1e6)
    medians = {name: statistics.median(times) for name, times in per_call.items()}
    for name, times in per_call.items():
        q = statistics.quantiles(times, n=4)
        print(f"{name:<16} median {medians[name]:6.2f} µs/call  IQR {q[0]:.2f}-{q[2]:.2f}  ({args.blocks} blocks x {args.calls})")
    for name in ("cublas_det.gemm", "GemmCall"):
        ratios = [o / t for o, t in zip(per_call[name], per_call["cupy gemmEx"])]
        print(f"ratio {name}/cupy gemmEx: median of paired blocks {statistics.median(ratios):.3f}, "
              f"ratio of medians {medians[name] / medians['cupy gemmEx']:.3f}")
    ours.close()
    cublas.destroy(theirs)


if __name__ == "__main__":
    main()
