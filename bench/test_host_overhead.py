"""Host cost of one eager GEMM call: cublas_det.gemm() against CuPy's own cublas.gemmEx binding.

The GEMM is the trunk's 128x56x4096 (~8 µs on an H200), so the loop is host-bound and the
per-call time is the Python + cuBLAS launch cost. Both calls use a PEDANTIC handle, COMPUTE_32F,
CUBLAS_GEMM_DEFAULT, the same operands and a preallocated output on CuPy's current stream.

    python -m pytest bench/test_host_overhead.py --benchmark-columns=median,iqr,rounds
"""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.benchmark(group="host overhead, 128x56x4096 eager", warmup=True)]

M, N, K = 128, 56, 4096


@pytest.fixture(scope="module")
def operands():
    import cupy
    import numpy as np

    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((M, K), dtype=np.float32))
    b = cupy.asarray(rng.standard_normal((K, N), dtype=np.float32))
    return a, b, cupy.empty((M, N), cupy.float32)


def _drain(benchmark, call):
    import cupy

    benchmark.pedantic(call, rounds=2000, iterations=20, warmup_rounds=50)
    cupy.cuda.get_current_stream().synchronize()


def test_cublas_det_gemm(benchmark, operands):
    from cublas_det import create_handle, gemm

    a, b, c = operands
    with create_handle("pedantic") as handle:
        _drain(benchmark, lambda: gemm(a, b, out=c, handle=handle))


def test_cupy_gemm_ex(benchmark, operands):
    from cupy_backends.cuda.libs import cublas

    a, b, c = operands
    handle = cublas.create()
    cublas.setMathMode(handle, 2)  # PEDANTIC
    one = __import__("numpy").array(1.0, "float32")
    zero = __import__("numpy").array(0.0, "float32")
    args = (handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, N, M, K, one.ctypes.data, b.data.ptr, 0, N,
            a.data.ptr, 0, K, zero.ctypes.data, c.data.ptr, 0, N, cublas.CUBLAS_COMPUTE_32F, -1)
    try:
        _drain(benchmark, lambda: cublas.gemmEx(*args))
    finally:
        cublas.destroy(handle)
