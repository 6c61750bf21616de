"""Host cost of one eager GEMM call: cublas_det.core.call() against CuPy's own cublas.gemmEx binding.

    python bench/host_overhead.py [--blocks 100] [--calls 500]

The GEMM is the trunk's 128x56x4096 (~8 µs of GPU time on an H200) so a loop of calls is
host-bound and the per-call time is the Python + cuBLAS launch cost. All use a PEDANTIC handle,
COMPUTE_32F, CUBLAS_GEMM_DEFAULT, the same operands and a preallocated output on CuPy's current
stream. Ours is timed on both of its paths: a handle that follows the current stream (eager
calls go through CuPy's Cython binding) and a handle pinned to that stream (ctypes), plus a
prepared GemmCall (no per-call checks) on the first handle. CuPy's gemmEx is timed with its 19
arguments built once (the floor) and with the pointers and shapes read from the arrays per call
(what any caller holding arrays pays). Blocks of calls rotate between the bodies (so drift hits
all alike); each block is timed with perf_counter after a device sync. Printed: the median and
minimum per-call time of each body, and against each CuPy baseline the median of the paired
per-block ratios, the ratio of medians and the ratio of minima. Host load slows the Python
bodies more than the C call, so ratios measured on a busy host come out higher. Exit codes: 0
printed; 2 with one line without a GPU or CuPy, or for a bad argument; 130 interrupted.
"""

import argparse
import statistics
import sys
import time

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import require_gpu

M, N, K = 128, 56, 4096


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    # CuPy after the arguments: --help and a usage error need no GPU stack
    import cupy
    import numpy as np
    from cupy_backends.cuda.libs import cublas

    from cublas_det import create_handle, gemm, prepare_gemm
    require_gpu()  # one line and exit 2 without a GPU, before the first CUDA call
    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((M, K), dtype=np.float32))
    b = cupy.asarray(rng.standard_normal((K, N), dtype=np.float32))
    c = cupy.empty((M, N), cupy.float32)
    ours = create_handle("pedantic")
    pinned = create_handle("pedantic", stream=cupy.cuda.get_current_stream())
    theirs = cublas.create()
    cublas.setMathMode(theirs, 2)  # PEDANTIC
    one, zero = np.array(1.0, np.float32), np.array(0.0, np.float32)
    cupy_args = (theirs, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, N, M, K, one.ctypes.data, b.data.ptr, 0, N,
                 a.data.ptr, 0, K, zero.ctypes.data, c.data.ptr, 0, N, cublas.CUBLAS_COMPUTE_32F, -1)

    def run_ours(calls):
        for _ in range(calls):
            gemm(a, b, out=c, handle=ours)

    def run_pinned(calls):
        for _ in range(calls):
            gemm(a, b, out=c, handle=pinned)

    prepared = prepare_gemm(a, b, out=c, handle=ours)

    def run_prepared(calls):
        for _ in range(calls):
            prepared()

    def run_cupy(calls):
        gemm_ex = cublas.gemmEx
        for _ in range(calls):
            gemm_ex(*cupy_args)

    def run_cupy_on_arrays(calls):  # what a caller holding arrays must do: read pointers and shapes
        gemm_ex, alpha, beta = cublas.gemmEx, one.ctypes.data, zero.ctypes.data
        for _ in range(calls):
            m, k = a.shape
            n = b.shape[1]
            gemm_ex(theirs, 0, 0, n, m, k, alpha, b.data.ptr, 0, n, a.data.ptr, 0, k, beta, c.data.ptr, 0, n,
                    cublas.CUBLAS_COMPUTE_32F, -1)

    bodies = {"gemm() [CuPy binding]": run_ours, "gemm() pinned [ctypes]": run_pinned,
              "GemmCall [CuPy binding]": run_prepared, "cupy gemmEx, array reads": run_cupy_on_arrays,
              "cupy gemmEx": run_cupy}
    per_call = {name: [] for name in bodies}
    for body in bodies.values():
        body(200)  # warm-up: heuristics cache, lazy loading
    for block in range(args.blocks):
        names = list(bodies)
        order = names[block % len(names):] + names[:block % len(names)]  # rotate who goes first
        for name in order:
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            bodies[name](args.calls)
            cupy.cuda.Device().synchronize()
            per_call[name].append((time.perf_counter() - start) / args.calls * 1e6)
    medians = {name: statistics.median(times) for name, times in per_call.items()}
    for name, times in per_call.items():
        q = statistics.quantiles(times, n=4)
        print(f"{name:<25} median {medians[name]:6.2f} µs/call  IQR {q[0]:.2f}-{q[2]:.2f}  min {min(times):6.2f}"
              f"  ({args.blocks} blocks x {args.calls})")
    def paired(name, baseline):  # median of the per-block ratios: drift hits both bodies of a block alike
        return statistics.median(o / t for o, t in zip(per_call[name], per_call[baseline]))

    # Two baselines: CuPy's gemmEx fed from the same arrays (like for like: any caller holding
    # arrays reads the pointers and shapes), and with its 19 arguments built once (the floor).
    for baseline in ("cupy gemmEx, array reads", "cupy gemmEx"):
        for name in list(bodies)[:3]:
            print(f"ratio {name} / {baseline}: median of paired blocks {paired(name, baseline):.3f}, "
                  f"ratio of medians {medians[name] / medians[baseline]:.3f}, "
                  f"ratio of minima {min(per_call[name]) / min(per_call[baseline]):.3f}")
    print(f"ratio cupy gemmEx, array reads / cupy gemmEx: median of paired blocks "
          f"{paired('cupy gemmEx, array reads', 'cupy gemmEx'):.3f}")
    ours.close()
    pinned.close()
    cublas.destroy(theirs)


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
