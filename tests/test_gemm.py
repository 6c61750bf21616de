import numpy as np
import pytest

from cublas_det import ComputeType, MathMode, create_handle, gemm
from cublas_det.core.key import GemmKey

from .conftest import fp64_product, host_operands


def test_numpy_operands_are_a_type_error_naming_the_fix():
    a = np.zeros((4, 4), np.float32)
    pytest.importorskip("cupy")
    with pytest.raises(TypeError, match=r"a must be a CuPy array or a GPU tensor with __dlpack__ \(PyTorch ...\), not ndarray \(move it "
                                          r"with cupy.asarray\)"):
        gemm(a, a)


def test_bad_handle_type_is_reported_before_gpu_work():
    pytest.importorskip("cupy")
    with pytest.raises(TypeError, match="a must be a CuPy array"):
        gemm([[1.0]], [[1.0]], handle="pedantic")


def _rel_error(c, ref):
    import cupy

    return float(cupy.abs(c - ref).max() / cupy.abs(ref).max())


SHAPES = [(512, 512, 512), (128, 56, 4096), (4096, 56, 128), (4096, 128, 56), (128, 128, 4096)]
LAYOUTS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", SHAPES)
@pytest.mark.parametrize("trans_a, trans_b", LAYOUTS, ids=["nn", "nt", "tn", "tt"])
def test_gemm_matches_fp64_in_every_mode(m, n, k, trans_a, trans_b):
    import cupy

    a_host, b_host = host_operands(m, n, k, trans_a, trans_b)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    ref = fp64_product(a, b, trans_a, trans_b)
    outputs = {}
    for mode in (MathMode.DEFAULT, MathMode.PEDANTIC, MathMode.TF32):
        with create_handle(mode) as handle:
            c = gemm(a, b, handle=handle, trans_a=trans_a, trans_b=trans_b)
            assert c.shape == (m, n) and c.dtype == cupy.float32
            outputs[mode] = c
            error = _rel_error(c, ref)
            if mode == MathMode.TF32:
                assert 1e-5 < error < 2e-3, f"TF32 error {error:.2e}: TF32 not engaged?"
            else:
                assert error < 1e-5, f"{mode.name} error {error:.2e}"
    assert cupy.array_equal(outputs[MathMode.DEFAULT].view(cupy.uint32),
                            outputs[MathMode.PEDANTIC].view(cupy.uint32))


@pytest.mark.gpu
def test_alpha_beta_and_out_accumulate():
    import cupy

    a_host, b_host = host_operands(64, 48, 32)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    with create_handle("pedantic") as handle:
        out = cupy.ones((64, 48), cupy.float32)
        result = gemm(a, b, out=out, handle=handle, alpha=2.0, beta=0.5)
        assert result is out
        expected = 2.0 * fp64_product(a, b) + 0.5
        assert _rel_error(out, expected) < 1e-5


@pytest.mark.gpu
def test_compute_type_overrides_math_mode():
    import cupy

    a_host, b_host = host_operands(1024, 1024, 1024)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    ref = fp64_product(a, b)
    with create_handle("pedantic") as handle:
        assert _rel_error(gemm(a, b, handle=handle, compute_type=ComputeType.COMPUTE_32F_FAST_TF32), ref) > 1e-5
    with create_handle("tf32") as handle:
        assert _rel_error(gemm(a, b, handle=handle, compute_type=ComputeType.COMPUTE_32F_PEDANTIC), ref) < 1e-5


@pytest.mark.gpu
def test_default_handle_follows_env(monkeypatch):
    import cupy

    a_host, b_host = host_operands(1024, 1024, 1024)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    ref = fp64_product(a, b)
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "tf32")
    assert _rel_error(gemm(a, b), ref) > 1e-5
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "pedantic")
    assert _rel_error(gemm(a, b), ref) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["pedantic", "tf32"])
def test_graph_replay_gives_the_same_bits_as_eager(mode):
    import cupy

    a_host, b_host = host_operands(128, 56, 4096, trans_a=True)  # the trunk dW layout
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    stream = cupy.cuda.Stream(non_blocking=True)
    with create_handle(mode, stream=stream, workspace_bytes=32 * 2**20) as handle:
        eager = gemm(a, b, handle=handle, trans_a=True)
        replayed = cupy.full_like(eager, cupy.nan)
        with stream:
            stream.begin_capture()
            gemm(a, b, out=replayed, handle=handle, trans_a=True)
            graph = stream.end_capture()
        assert cupy.isnan(replayed).all()  # capture records, it does not run
        for _ in range(3):
            graph.launch(stream)
        stream.synchronize()
        assert cupy.array_equal(eager.view(cupy.uint32), replayed.view(cupy.uint32))


@pytest.mark.gpu
def test_argument_errors_on_cupy_arrays():
    import cupy

    a = cupy.ones((8, 4), cupy.float32)
    b = cupy.ones((4, 6), cupy.float32)
    with create_handle("pedantic") as handle:
        with pytest.raises(TypeError, match="a must be float32, bfloat16 or float16, not float64"):
            gemm(a.astype(cupy.float64), b, handle=handle)
        with pytest.raises(ValueError, match="a and b must be batches of one size"):
            gemm(a, b.reshape(1, 4, 6), handle=handle)
        with pytest.raises(ValueError, match=r"inner dimensions differ: op\(a\) is 8x4 and op\(b\) is 6x4"):
            gemm(a, b, trans_b=True, handle=handle)
        with pytest.raises(ValueError, match="b must be C-contiguous"):
            gemm(a, cupy.ones((6, 4), cupy.float32).T, handle=handle)
        with pytest.raises(ValueError, match=r"out must have shape \(8, 6\), not \(6, 8\)"):
            gemm(a, b, out=cupy.empty((6, 8), cupy.float32), handle=handle)
        with pytest.raises(ValueError, match="float32 inputs with a float16 output are not supported; choose float32"):
            gemm(a, b, out=cupy.empty((8, 6), cupy.float16), handle=handle)
        with pytest.raises(ValueError, match="must not be empty"):
            gemm(cupy.ones((0, 4), cupy.float32), b, handle=handle)
        with pytest.raises(TypeError, match="handle must be a cublas_det.Handle"):
            gemm(a, b, handle=object())
    closed = create_handle("pedantic")
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        gemm(a, b, handle=closed)


@pytest.mark.gpu
def test_operands_on_another_device_are_rejected():
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    with cupy.cuda.Device(1):
        a = cupy.ones((8, 4), cupy.float32)
        b = cupy.ones((4, 6), cupy.float32)
    with cupy.cuda.Device(0):
        with create_handle("pedantic") as handle:
            with pytest.raises(ValueError, match="on devices 1 and 1 but the handle is on device 0"):
                gemm(a, b, handle=handle)


@pytest.mark.gpu
def test_prepared_call_reissues_the_same_gemm():
    import cupy

    from cublas_det import prepare_gemm

    a_host, b_host = host_operands(128, 56, 4096, trans_a=True)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    with create_handle("pedantic") as handle:
        expected = gemm(a, b, handle=handle, trans_a=True)
        call = prepare_gemm(a, b, handle=handle, trans_a=True)
        first = call().copy()
        call.out.fill(0)
        assert call() is call.out
        assert cupy.array_equal(first.view(cupy.uint32), expected.view(cupy.uint32))
        assert cupy.array_equal(call.out.view(cupy.uint32), expected.view(cupy.uint32))
        with pytest.raises(ValueError, match="inner dimensions differ"):
            prepare_gemm(a, b, handle=handle)


def test_pointer_cache_reuses_and_stays_bounded(monkeypatch):
    from cublas_det.core import handle as _handle

    monkeypatch.setattr(_handle, "_pointers", {})
    first = _handle._pointer(0x7F0000001000)
    assert first.value == 0x7F0000001000 and _handle._pointer(0x7F0000001000) is first
    for address in range(_handle._POINTER_CACHE_SIZE + 10):
        _handle._pointer(address + 1)
    assert len(_handle._pointers) <= _handle._POINTER_CACHE_SIZE


def _trunk_dw_operands():
    import cupy

    a_host, b_host = host_operands(128, 56, 4096, trans_a=True)
    return cupy.asarray(a_host), cupy.asarray(b_host)


@pytest.mark.gpu
def test_both_call_paths_give_the_same_bits(monkeypatch):
    """Eager calls on a current-stream handle go through CuPy's binding; the rest through ctypes."""
    import cupy

    from cublas_det.core import handle as _handle

    a, b = _trunk_dw_operands()
    _handle.bind_cupy_gemm_ex()
    through_cupy = []
    cupy_gemm_ex = _handle.cupy_gemm_ex
    monkeypatch.setattr(_handle, "cupy_gemm_ex", lambda *args: through_cupy.append(1) or cupy_gemm_ex(*args))
    outs = [cupy.full((128, 56), cupy.nan, cupy.float32) for _ in range(4)]
    stream = cupy.cuda.Stream(non_blocking=True)
    with create_handle("pedantic") as follows, create_handle("pedantic", stream=stream) as pinned, \
            create_handle("pedantic", workspace_bytes=32 * 2**20) as with_workspace:
        gemm(a, b, out=outs[0], handle=follows, trans_a=True)
        assert len(through_cupy) == 1
        with stream:
            gemm(a, b, out=outs[1], handle=pinned, trans_a=True)
        gemm(a, b, out=outs[2], handle=with_workspace, trans_a=True)
        assert len(through_cupy) == 1  # pinned stream and own workspace: ctypes
        with stream:
            stream.begin_capture()
            gemm(a, b, out=outs[3], handle=follows, trans_a=True)  # CuPy refuses under capture
            graph = stream.end_capture()
        assert len(through_cupy) == 2
        graph.launch(stream)
        stream.synchronize()
    cupy.cuda.Device().synchronize()
    for out in outs[1:]:
        assert cupy.array_equal(out.view(cupy.uint32), outs[0].view(cupy.uint32))


@pytest.mark.gpu
def test_handle_is_rebound_after_cupy_moved_it(monkeypatch):
    import cupy
    from cupy_backends.cuda.libs import cublas

    from cublas_det.core import handle as _handle

    a, b = _trunk_dw_operands()
    out = cupy.empty((128, 56), cupy.float32)
    first, second = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    _handle.bind_cupy_gemm_ex()
    cupy_gemm_ex = _handle.cupy_gemm_ex
    with create_handle("pedantic") as handle:
        monkeypatch.setattr(_handle, "cupy_gemm_ex", _handle._no_cupy_binding)
        with first:
            gemm(a, b, out=out, handle=handle, trans_a=True)  # ctypes binds `first`
        monkeypatch.setattr(_handle, "cupy_gemm_ex", cupy_gemm_ex)
        with second:
            gemm(a, b, out=out, handle=handle, trans_a=True)  # CuPy binds `second`
        assert cublas.getStream(handle.ptr) == second.ptr
        monkeypatch.setattr(_handle, "cupy_gemm_ex", _handle._no_cupy_binding)
        with first:
            gemm(a, b, out=out, handle=handle, trans_a=True)
        assert cublas.getStream(handle.ptr) == first.ptr
        cupy.cuda.Device().synchronize()


@pytest.mark.gpu
def test_common_call_skips_the_full_checks_and_errors_still_name_the_problem(monkeypatch):
    import cupy

    from cublas_det.core import call as _gemm

    a, b = _trunk_dw_operands()
    out = cupy.empty((128, 56), cupy.float32)
    full_checks = []
    prepare = _gemm._prepare
    monkeypatch.setattr(_gemm, "_prepare", lambda *args: full_checks.append(1) or prepare(*args))
    stream = cupy.cuda.Stream(non_blocking=True)
    with create_handle("pedantic") as follows, create_handle("pedantic", stream=stream) as pinned:
        gemm(a, b, out=out, handle=follows, trans_a=True)
        gemm(a, b, out=out, handle=pinned, trans_a=True)
        assert full_checks == []
        with pytest.raises(ValueError, match=r"inner dimensions differ: op\(a\) is 4096x128 and op\(b\) is 4096x56"):
            gemm(a, b, out=out, handle=follows)
        with pytest.raises(ValueError, match=r"out must have shape \(128, 56\), not \(56, 128\)"):
            gemm(a, b, out=out.T.copy(), handle=pinned, trans_a=True)
        with pytest.raises(ValueError, match="out must be C-contiguous"):
            gemm(a, b, out=cupy.empty((56, 128), cupy.float32).T, handle=follows, trans_a=True)
        assert len(full_checks) == 3
    stream.synchronize()


@pytest.mark.gpu
def test_cublas_rejection_is_a_cublas_error_on_both_paths():
    import cupy

    from cublas_det import CublasError
    from cublas_det.core import call as _gemm

    a, b = _trunk_dw_operands()
    out = cupy.empty((128, 56), cupy.float32)
    # gemm() names a compute type cuBLAS would refuse before any call; the issuing step itself is
    # given one (12345), so that cuBLAS rejects it on each binding.
    with pytest.raises(ValueError, match=r"compute type 12345 \(no cuBLAS compute type\) does not take float32"):
        gemm(a, b, out=out, trans_a=True, compute_type=12345)
    key = GemmKey("float32", "float32", "COMPUTE_32F", True, False, 56, 4096, m=128)
    args = key.packed(algo=-1).gemm_ex_args(_gemm._ONE_ADDRESS, a.data.ptr, b.data.ptr, _gemm._ZERO_ADDRESS,
                                            out.data.ptr)
    args = (*args[:16], 12345, args[17])  # a compute type cuBLAS refuses
    statuses = []
    with create_handle("pedantic") as follows, create_handle("pedantic", workspace_bytes=2**20) as with_workspace:
        assert follows.cupy_ptr and not with_workspace.cupy_ptr  # one binding each
        for handle in (follows, with_workspace):
            with pytest.raises(CublasError, match=r"\[cublasGemmEx\]") as caught:
                handle.issue_gemm_ex(args)
            statuses.append(caught.value.status)
    assert statuses[0] == statuses[1] and statuses[0] in (7, 15)


def test_ctypes_arguments_wrap_exactly_the_five_pointers():
    from ctypes import c_void_p

    from cublas_det.core import call as _gemm
    from cublas_det.core import handle as _handle

    key = GemmKey("float32", "float32", ComputeType.COMPUTE_32F.name, True, False, 56, 4096, m=128)
    args = key.packed(algo=-1).gemm_ex_args(0x7F00_0000_4000, 0x7F00_0000_1000, 0x7F00_0000_2000, 0x7F00_0000_5000,
                                            0x7F00_0000_3000)
    wrapped = _handle.as_ctypes(args)
    assert len(wrapped) == len(args) == 18
    pointers = [i for i, arg in enumerate(wrapped) if isinstance(arg, c_void_p)]
    assert pointers == [5, 6, 9, 12, 13]  # alpha, B, A, beta, C
    assert [wrapped[i].value for i in pointers] == [0x7F00_0000_4000, 0x7F00_0000_2000, 0x7F00_0000_1000,
                                                    0x7F00_0000_5000, 0x7F00_0000_3000]
    assert [arg for i, arg in enumerate(wrapped) if i not in pointers] == [
        _gemm.CUBLAS_OP_N, _gemm.CUBLAS_OP_T, 56, 128, 4096, 0, 56, 0, 128, 0, 56, 68, -1]


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["pedantic", "default+lt"])
@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_a_batch_of_matrices_is_one_call_each_matrix_its_own_product(mode, dtype, tolerance):
    import dataclasses

    from cublas_det import GemmConfig
    from cublas_det.bits.compare import relative_error
    from cublas_det.core.operands import device_operands, fp64_reference
    from cublas_det.core.shapes import parse_shape

    shape = parse_shape("96x40x300:nt:b5")
    config = dataclasses.replace(GemmConfig.parse(mode), input_dtype=dtype, output_dtype=dtype)
    a, b = device_operands(shape, 0, config)
    with create_handle(config) as handle:
        out = gemm(a, b, handle=handle, trans_a=shape.trans_a, trans_b=shape.trans_b)
        assert out.shape == (5, 96, 40) and out.dtype == a.dtype
        reference = fp64_reference(shape, a, b)
        for i in range(5):  # matrix i of the batch from operands i: the strides are right
            assert relative_error(out[i], reference[i]) < tolerance, i
        with pytest.raises(ValueError, match="batches of one size"):
            gemm(a[:4], b, handle=handle, trans_a=True)
        with pytest.raises(ValueError, match="3-D for a batch of matrices, not 4-D"):
            gemm(a[None], b[None], handle=handle, trans_a=True)
