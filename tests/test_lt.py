"""The cuBLASLt groundwork: its ctypes layer without a GPU, and LtGemm on one."""

import ctypes

import pytest

from cublas_det import _cublaslt
from cublas_det.lt import LtOptions, split_k


def test_the_lt_structures_have_cublasLt_h_sizes():
    assert ctypes.sizeof(_cublaslt.MatmulAlgo) == 64  # uint64_t data[8]
    assert ctypes.sizeof(_cublaslt.HeuristicResult) == 96  # algo, size_t, status, float, int[4]


def test_split_k_reads_the_algorithm_configuration():
    assert split_k((("splitk", 4), ("reduction_scheme", 2)))
    assert not split_k((("splitk", 1), ("reduction_scheme", 0)))
    assert LtOptions().reduction_scheme_mask is None and LtOptions().workspace_bytes == 32 << 20


@pytest.mark.gpu
def test_lt_gemm_matches_float64_and_a_pinned_algorithm_repeats_its_bits():
    import cupy

    from cublas_det.lt import LtGemm

    rng = cupy.random.default_rng(0)
    a = rng.standard_normal((4096, 128), dtype=cupy.float32)  # a dW GEMM: op(a) = a.T
    b = rng.standard_normal((4096, 56), dtype=cupy.float32)
    out = cupy.empty((128, 56), dtype=cupy.float32)
    with LtGemm(a, b, out, trans_a=True) as call:
        call()
        algo = call.algo
    want = a.astype(cupy.float64).T @ b.astype(cupy.float64)
    assert float(abs(out - want).max() / abs(want).max()) < 1e-5
    pinned = cupy.empty_like(out)
    with LtGemm(a, b, pinned, trans_a=True, options=LtOptions(algo=algo, sm_count_target=16)) as call:
        call()
        assert call.algo == algo
    assert cupy.array_equal(out.view(cupy.uint32), pinned.view(cupy.uint32))
    none = cupy.empty_like(out)
    with LtGemm(a, b, none, trans_a=True, options=LtOptions(reduction_scheme_mask=0)) as call:
        call()
        assert not split_k(call.algo)


@pytest.mark.gpu
def test_lt_gemm_bias_epilogue_adds_the_bias():
    import cupy

    from cublas_det.lt import LtGemm

    rng = cupy.random.default_rng(1)
    x = rng.standard_normal((512, 64), dtype=cupy.float32)
    w = rng.standard_normal((96, 64), dtype=cupy.float32)
    bias = rng.standard_normal(96, dtype=cupy.float32)
    out = cupy.empty((512, 96), dtype=cupy.float32)
    with LtGemm(x, w, out, trans_b=True, bias=bias) as call:
        call()
    want = x.astype(cupy.float64) @ w.astype(cupy.float64).T + bias
    assert float(abs(out - want).max()) < 1e-3
    with pytest.raises(ValueError, match="bias must be a vector of 96"):
        LtGemm(x, w, out, trans_b=True, bias=bias[:5])
