"""gemm()'s host side on the CPU: which checks a call takes, what cublasGemmEx receives, which binding issues it.

The operands are real ``cupy.ndarray`` objects over made-up device addresses (CuPy builds them
without touching a GPU, and nothing here dereferences them); the two cuBLAS entry points, and
cublasSetStream, are replaced by recorders. The GPU tests in test_gemm.py check the numbers.
"""

import ctypes
import dataclasses
import math

import pytest

from cublas_det import CublasError, MathMode
from cublas_det.bindings import cublas as _cublas
from cublas_det.core import call as _gemm
from cublas_det.core import handle as _handle
from cublas_det.core.config import GemmConfig
from cublas_det.core.handle import Handle, LtPath, ModeSource
from cublas_det.core.key import GemmKey

from .conftest import needs_cuda_extra

cupy = pytest.importorskip("cupy", reason=needs_cuda_extra.kwargs["reason"])  # needs_cuda_extra's, at import

CURRENT_STREAM = 0x5100
M, N, K = 128, 56, 4096


class _CupyCublasError(Exception):
    def __init__(self, status):
        super().__init__(status)
        self.status = status


def _array(shape, address, dtype="float32"):
    """A C-contiguous cupy.ndarray at a fake device address on device 0."""
    from cupy.cuda import memory

    nbytes = cupy.dtype(dtype).itemsize * math.prod(shape)
    memory_block = memory.UnownedMemory(address, nbytes, None, device_id=0)  # device_id given: no CUDA query
    return cupy.ndarray(shape, dtype=dtype, memptr=memory.MemoryPointer(memory_block, 0))


@pytest.fixture
def calls(monkeypatch):
    """Bind gemm() to recorders; return the list of (entry point, arguments...) it issues."""
    issued = []
    monkeypatch.setattr(_gemm, "_cupy", cupy)  # as if _bind() had run: no library is loaded
    monkeypatch.setattr(_gemm, "_several_devices", False)
    monkeypatch.setattr(_handle, "CupyCublasError", _CupyCublasError)
    monkeypatch.setattr(_handle, "cupy_gemm_ex", lambda *args: issued.append(("cupy",) + args))
    monkeypatch.setattr(_handle, "_gemm_ex", lambda *args: issued.append(("ctypes",) + args) or 0)
    monkeypatch.setattr(_cublas, "cublas_set_stream", lambda ptr, stream: issued.append(("setStream", ptr, stream)))
    monkeypatch.setattr(_handle, "_stream_ptr_getter", lambda: CURRENT_STREAM)
    return issued


@pytest.fixture
def full_checks(monkeypatch):
    """Count the calls that go through _prepare, the path that checks everything in turn."""
    counted = []
    prepare = _gemm._prepare
    monkeypatch.setattr(_gemm, "_prepare", lambda *args: counted.append(1) or prepare(*args))
    return counted


@pytest.fixture
def handles():
    """Make Handles over fake cuBLAS handle pointers; forget them (no cublasDestroy) afterwards."""
    made = []

    def make(ptr=0xA000):
        made.append(Handle(ptr, GemmConfig(MathMode.PEDANTIC), ModeSource.ARGUMENT, 0))
        return made[-1]

    yield make
    for handle in made:
        handle._ptr = 0


def _operands(trans_a, trans_b):
    a = _array((K, M) if trans_a else (M, K), 0x7000_0000)
    b = _array((N, K) if trans_b else (K, N), 0x7100_0000)
    return a, b, _array((M, N), 0x7200_0000)


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_common_call_issues_the_swapped_column_major_gemm_without_the_full_checks(calls, full_checks, handles,
                                                                                  trans_a, trans_b):
    a, b, out = _operands(trans_a, trans_b)
    handle = handles()
    assert _gemm.gemm(a, b, out=out, handle=handle, trans_a=trans_a, trans_b=trans_b) is out
    assert full_checks == []
    # Row-major out = op(a) op(b) is column-major out^T = op(b)^T op(a)^T: B first, each ld a row length.
    assert calls == [("cupy", 0xA000, int(trans_b), int(trans_a), N, M, K, _gemm._ONE_ADDRESS, 0x7100_0000, 0,
                      b.shape[1], 0x7000_0000, 0, a.shape[1], _gemm._ZERO_ADDRESS, 0x7200_0000, 0, N, 68, -1)]


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True)])
@pytest.mark.parametrize("alpha, beta, compute_type", [(1.0, 0.0, None), (0.5, 2.0, 77)])
def test_common_call_passes_what_the_checked_path_passes(calls, handles, monkeypatch, trans_a, trans_b, alpha, beta,
                                                         compute_type):
    a, b, out = _operands(trans_a, trans_b)
    handle = handles()
    scalars, record = [], _handle.cupy_gemm_ex
    monkeypatch.setattr(_handle, "cupy_gemm_ex", lambda *args: scalars.append(_scalars_at(args[6], args[13]))
                        or record(*args))
    _gemm.gemm(a, b, out=out, handle=handle, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta,
               compute_type=compute_type)
    _gemm._checked_gemm(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type)
    prepared = _gemm.prepare_gemm(a, b, out=out, handle=handle, trans_a=trans_a, trans_b=trans_b, alpha=alpha,
                                  beta=beta, compute_type=compute_type)
    prepared(), prepared()
    fast, checked, *again = calls
    scalar_positions = (7, 14)  # alpha and beta host addresses: each path holds its own c_float
    assert len(again) == 2 and again[0] == again[1]
    assert scalars == [(alpha, beta)] * 4  # what each call's alpha and beta held as it ran
    for issued in (checked, again[0]):
        assert [x for i, x in enumerate(fast) if i not in scalar_positions] == \
               [x for i, x in enumerate(issued) if i not in scalar_positions]
    assert fast[-2] == (68 if compute_type is None else compute_type)


def _scalars_at(alpha, beta) -> tuple:
    """The fp32 alpha and beta at two host addresses (ints, or c_void_p as ctypes takes them), read as the call runs:
    a checked call's scalars live only until it returns."""
    return tuple(ctypes.c_float.from_address(getattr(x, "value", x)).value for x in (alpha, beta))


def _bad_calls():
    """(description, make the call's (args, kwargs) from good operands and a handle, error, message)."""
    import numpy as np

    return [
        ("numpy a", lambda a, b, out, h: ((np.zeros((M, K), np.float32), b), dict(out=out, handle=h)),
         TypeError, r"a must be a CuPy array or a GPU tensor with __dlpack__"),
        ("float64 b", lambda a, b, out, h: ((a, _array((K, N), 0x7300_0000, "float64")), dict(out=out, handle=h)),
         TypeError, r"b must be float32, bfloat16 or float16, not float64"),
        ("1-D a", lambda a, b, out, h: ((_array((M,), 0x7000_0000), b), dict(out=out, handle=h)),
         ValueError, r"a must be 2-D, or 3-D for a batch of matrices, not 1-D"),
        ("3-D out", lambda a, b, out, h: ((a, b), dict(out=_array((M, N, 1), 0x7200_0000), handle=h)),
         ValueError, r"out must have shape \(128, 56\), not \(128, 56, 1\)"),
        ("batched a", lambda a, b, out, h: ((_array((2, M, K), 0x7000_0000), b), dict(out=out, handle=h)),
         ValueError, r"a and b must be batches of one size \(or both 2-D\)"),
        ("transposed a", lambda a, b, out, h: ((_array((K, M), 0x7000_0000).T, b), dict(out=out, handle=h)),
         ValueError, r"a must be C-contiguous"),
        ("inner dimensions", lambda a, b, out, h: ((a, b), dict(out=out, handle=h, trans_b=True)),
         ValueError, r"inner dimensions differ: op\(a\) is 128x4096 and op\(b\) is 56x4096"),
        ("out shape", lambda a, b, out, h: ((a, b), dict(out=_array((N, M), 0x7200_0000), handle=h)),
         ValueError, r"out must have shape \(128, 56\), not \(56, 128\)"),
        ("empty", lambda a, b, out, h: ((_array((0, K), 0x7000_0000), b), dict(out=out, handle=h)),
         ValueError, r"a must not be empty"),
        ("handle type", lambda a, b, out, h: ((a, b), dict(out=out, handle="pedantic")),
         TypeError, r"handle must be a cublas_det.Handle, not str"),
        ("closed handle", lambda a, b, out, h: ((a, b), dict(out=out, handle=_closed(h))),
         RuntimeError, r"this cuBLAS handle is closed"),
        ("compute type", lambda a, b, out, h: ((a, b), dict(out=out, handle=h,
                                                            compute_type=_cublas.ComputeType.COMPUTE_16F)),
         ValueError, r"compute type COMPUTE_16F does not take float32 inputs with a float32 output"),
        ("unknown compute type", lambda a, b, out, h: ((a, b), dict(out=out, handle=h, compute_type=12345)),
         ValueError, r"compute type 12345 \(no cuBLAS compute type\) does not take float32 inputs"),
        ("half handle", lambda a, b, out, h: ((a, b), dict(out=out, handle=_half(h))),
         ValueError, r"compute type COMPUTE_16F does not take float32 inputs with a float32 output"),
    ]


def _half(handle):
    """The handle as a float16 handle computing in half precision would be."""
    handle.compute_type = int(_cublas.ComputeType.COMPUTE_16F)
    return handle


def _closed(handle):
    """The handle as close() leaves it, without destroying a handle that never was."""
    handle._ptr = handle.cupy_ptr = 0
    return handle


@pytest.mark.parametrize("what, make_call, error, message", _bad_calls(), ids=[c[0] for c in _bad_calls()])
def test_each_bad_call_is_checked_once_named_and_not_issued(calls, full_checks, handles, what, make_call, error,
                                                            message):
    args, kwargs = make_call(*_operands(False, False), handles())
    with pytest.raises(error, match=message):
        _gemm.gemm(*args, **kwargs)
    # the fast path handed it over once, and did not catch the error it raised; a closed handle names itself
    # where it would issue (as a prepared call's does), so the fast path spends no check on it
    assert len(full_checks) == (0 if what == "closed handle" else 1)
    assert calls == []


def test_pinned_handle_issues_through_ctypes_on_its_own_stream(calls, handles):
    class Stream:
        ptr = 0x5200

    a, b, out = _operands(False, False)
    handle = handles()
    handle.set_stream(Stream())
    _gemm.gemm(a, b, out=out, handle=handle)
    _gemm.gemm(a, b, out=out, handle=handle)
    assert [call[0] for call in calls] == ["setStream", "ctypes", "ctypes"]  # bound once, when pinned
    assert calls[0] == ("setStream", 0xA000, 0x5200)
    entry, handle_arg, *args = calls[1]
    assert handle_arg.value == 0xA000
    assert [arg.value for arg in (args[5], args[6], args[9], args[13])] == [
        _gemm._ONE_ADDRESS, 0x7100_0000, 0x7000_0000, 0x7200_0000]


def test_under_capture_the_call_falls_back_to_ctypes_bound_to_the_current_stream(calls, handles, monkeypatch):
    def refuse(*args):  # what CuPy's binding does while the current stream is being captured
        calls.append(("cupy refused",))
        raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")

    monkeypatch.setattr(_handle, "cupy_gemm_ex", refuse)
    a, b, out = _operands(False, False)
    handle = handles()
    _gemm.gemm(a, b, out=out, handle=handle)
    _gemm.gemm(a, b, out=out, handle=handle)
    # Bound again before every ctypes call: between them CuPy's binding may have moved the handle.
    assert [call[0] for call in calls] == ["cupy refused", "setStream", "ctypes"] * 2
    assert calls[1] == ("setStream", 0xA000, CURRENT_STREAM)


def test_cuBLAS_rejections_are_cublas_errors_on_both_bindings(calls, handles, monkeypatch):
    def reject(*args):
        raise _CupyCublasError(7)

    monkeypatch.setattr(_handle, "cupy_gemm_ex", reject)
    a, b, out = _operands(False, False)
    with pytest.raises(CublasError, match=r"CUBLAS_STATUS_INVALID_VALUE \(7\).*\[cublasGemmEx\]"):
        _gemm.gemm(a, b, out=out, handle=handles())
    monkeypatch.setattr(_handle, "_gemm_ex", lambda *args: 13)
    pinned = handles(0xB000)
    pinned.cupy_ptr = 0  # as a handle with its own workspace
    with pytest.raises(CublasError, match=r"\(13\).*\[cublasGemmEx\]") as caught:
        _gemm.gemm(a, b, out=out, handle=pinned)
    assert caught.value.status == 13


def test_without_cupys_binding_every_call_goes_through_ctypes(calls, handles, monkeypatch):
    monkeypatch.setattr(_handle, "cupy_gemm_ex", _handle._no_cupy_binding)  # what _bind() sets for such a CuPy
    a, b, out = _operands(True, False)
    _gemm.gemm(a, b, out=out, handle=handles(), trans_a=True)
    assert [call[0] for call in calls] == ["setStream", "ctypes"]
    _, handle_arg, op_b, op_a, n, m = calls[1][:6]
    assert (handle_arg.value, op_b, op_a, n, m) == (0xA000, _gemm.CUBLAS_OP_N, _gemm.CUBLAS_OP_T, N, M)


# -- half precision and DLPack tensors (issue: the GEMMs Mamba2 trains with) ------------------------
class FakeCudaTensor:
    """A stand-in for a PyTorch CUDA tensor: it exposes only the DLPack interface."""

    def __init__(self, view):
        self.view = view

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, **kwargs):
        raise AssertionError("cupy.from_dlpack is replaced in this test")


@pytest.mark.parametrize("dtype, cuda_type", [("float16", 2), ("bfloat16", 14)])
def test_dlpack_tensors_in_half_precision_are_viewed_not_copied(monkeypatch, calls, handles, dtype, cuda_type):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = getattr(ml_dtypes, dtype) if dtype == "bfloat16" else dtype
    views = []

    def from_dlpack(tensor):
        views.append(tensor)
        return tensor.view  # CuPy's zero-copy view of the tensor's memory

    monkeypatch.setattr(cupy, "from_dlpack", from_dlpack)
    a, b, out = (FakeCudaTensor(_array(shape, address, dtype)) for shape, address in
                 (((M, K), 0x1000), ((K, N), 0x2000), ((M, N), 0x3000)))
    handle = handles()
    assert _gemm.gemm(a, b, out=out, handle=handle) is out  # the caller's own tensor comes back
    assert views == [a, b, out]
    (call,) = [c for c in calls if c[0] in ("cupy", "ctypes")]
    args = call[2:] if call[0] == "cupy" else call[2:]
    pointers = [getattr(x, "value", x) for x in args]
    assert 0x1000 in pointers and 0x2000 in pointers and 0x3000 in pointers  # the tensors' own memory
    assert [args[7], args[10], args[14]] == [cuda_type, cuda_type, cuda_type]  # B, A and C types
    assert args[15 + 1] == int(_cublas.ComputeType.COMPUTE_32F)


def test_half_precision_combinations_are_named(monkeypatch, calls, handles):
    import ctypes

    alphas = []  # alpha read while the call runs: the host scalar lives only as long as the call

    def record(*args):
        alpha = args[6]
        alphas.append(ctypes.c_uint16.from_address(getattr(alpha, "value", alpha)).value)
        return 0

    monkeypatch.setattr(_handle, "_gemm_ex", record)
    monkeypatch.setattr(_handle, "cupy_gemm_ex", record)
    a16 = _array((M, K), 0x1000, "float16")
    b16 = _array((K, N), 0x2000, "float16")
    with pytest.raises(TypeError, match="a and b must have one element type, not float16 and float32"):
        _gemm.gemm(a16, _array((K, N), 0x2000), handle=handles())
    with pytest.raises(ValueError, match="compute type COMPUTE_32F_FAST_TF32 does not take float16 inputs"):
        _gemm.gemm(a16, b16, out=_array((M, N), 0x3000, "float16"), handle=handles(),
                   compute_type=_cublas.ComputeType.COMPUTE_32F_FAST_TF32)
    half = _gemm.gemm(a16, b16, out=_array((M, N), 0x3000, "float16"), handle=handles(), alpha=2.0,
                      compute_type=_cublas.ComputeType.COMPUTE_16F)
    assert half.dtype == cupy.float16
    assert alphas == [0x4000]  # 2.0 as an IEEE half, as COMPUTE_16F reads alpha


def test_a_batched_call_passes_cublas_its_arguments_in_the_prototypes_order(monkeypatch):
    from cublas_det.bindings import cublas as _cublas
    from cublas_det.core.key import GemmKey

    seen = []
    monkeypatch.setattr(_cublas, "_call", lambda name, *args: seen.append((name, args)))
    # row-major out[4, 7, 3] = a[i].T @ b[i], a (4, 5, 7), b (4, 5, 3); pointers a 11, b 22, out 33, alpha 44, beta 55
    key = GemmKey("float32", "float32", "COMPUTE_32F", True, False, 3, 5, m=7)  # 7x3x5:nt:b4
    args = key.packed(4, algo=-1).gemm_ex_args(44, 11, 22, 55, 33)
    _cublas.gemm_strided_batched_ex(99, args)
    # handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
    # strideC, batchCount, computeType, algo: cuBLAS's A is b (3x5, ld 3), its B is a transposed (7x5, ld 7)
    assert seen == [("cublasGemmStridedBatchedEx",
                     (99, 0, 1, 3, 7, 5, 44, 22, 0, 3, 15, 11, 0, 7, 35, 55, 33, 0, 3, 21, 4, 68, -1))]


def test_a_batch_from_gemm_and_from_a_prepared_call_is_one_strided_batched_call(calls, handles, monkeypatch):
    seen = []
    monkeypatch.setattr(_cublas, "_call", lambda name, handle, *args: seen.append(
        (name, handle.value, *args, _scalars_at(args[5], args[14]))))
    # row-major out[4, 7, 3] = a[i].T @ b[i], a (4, 5, 7), b (4, 5, 3): cuBLAS's A is b (3x5, ld 3), its B a (7x5, ld 7)
    a, b, out = _array((4, 5, 7), 0x11000), _array((4, 5, 3), 0x22000), _array((4, 7, 3), 0x33000)
    handle = handles()
    _gemm.gemm(a, b, out=out, handle=handle, trans_a=True)
    prepared = _gemm.prepare_gemm(a, b, out=out, handle=handle, trans_a=True, alpha=2.0, beta=0.5)
    prepared(), prepared()
    assert {call[0] for call in calls} == {"setStream"}  # neither cublasGemmEx binding: one batched call each
    expected = ("cublasGemmStridedBatchedEx", 0xA000, 0, 1, 3, 7, 5, 0x22000, 0, 3, 15, 0x11000, 0, 7, 35, 0x33000, 0,
                3, 21, 4, 68, -1)
    assert [tuple(x for i, x in enumerate(call[:-1]) if i not in (7, 16)) for call in seen] == [expected] * 3
    assert [call[-1] for call in seen] == [(1.0, 0.0), (2.0, 0.5), (2.0, 0.5)]


@pytest.fixture
def lt_runs(monkeypatch):
    """Make a handle over a cuBLASLt path whose plans record what they run: (definition, run's arguments, alpha and
    beta as they ran), in the list returned beside it; forget the handles (no cublasDestroy) afterwards."""
    made, runs = [], []

    class Recorded:
        def __init__(self, definition):
            self.definition = definition

        def run(self, *args):
            runs.append((self.definition, args, _scalars_at(args[0], args[3])))

    def make(config: GemmConfig):
        made.append(Handle(0xA000, config, ModeSource.ARGUMENT, 0, lt_path=LtPath(config, 0, 0x9000, 1 << 20)))
        return made[-1], runs

    monkeypatch.setattr(_handle, "plan_for", lambda device, definition, *options: Recorded(definition))
    yield make
    for handle in made:
        handle._ptr = 0


@pytest.mark.parametrize("epilogue", ["", "BIAS"])
def test_a_cublaslt_handle_runs_the_plan_of_its_definition_from_gemm_and_from_a_prepared_call(calls, lt_runs,
                                                                                             epilogue):
    handle, runs = lt_runs(GemmConfig(api="lt", lt_epilogue=epilogue))
    a, b, out = _operands(True, False)
    bias = _array((N,), 0x7300_0000) if epilogue else None
    _gemm.gemm(a, b, out=out, handle=handle, trans_a=True, bias=bias)
    prepared = _gemm.prepare_gemm(a, b, out=out, handle=handle, trans_a=True, alpha=0.5, beta=2.0, bias=bias)
    prepared(), prepared()
    assert not calls  # no cublasGemmEx, no cublasSetStream: cuBLASLt takes the stream with each call
    key = GemmKey("float32", "float32", "COMPUTE_32F", True, False, N, K, epilogue, M)
    assert all(definition == key.packed() for definition, _, _ in runs) and len(runs) == 3
    bias_ptr = 0x7300_0000 if epilogue else 0
    assert [args[1:] for _, args, _ in runs] == [(0x7000_0000, 0x7100_0000, args[3], 0x7200_0000, 0x9000, 1 << 20,
                                                  CURRENT_STREAM, bias_ptr) for _, args, _ in runs]
    assert [scalars for _, _, scalars in runs] == [(1.0, 0.0), (0.5, 2.0), (0.5, 2.0)]


def test_a_handle_makes_each_definition_once_with_its_algorithm_and_holds_a_bounded_number():
    handle = Handle(0, GemmConfig(MathMode.TF32), ModeSource.ARGUMENT, 0)  # closed: it only makes definitions
    assert handle.compute_type == 68  # cublasGemmEx's COMPUTE_32F: the math mode makes it TF32, not the compute type
    first = handle.definition("float32", "float32", 68, False, True, 7, 3, 5)
    assert handle.definition("float32", "float32", 68, 0, 1, 7, 3, 5) is first  # not made anew on each call
    assert (first.api, first.compute_type, first.algo) == ("cublasGemmEx", "COMPUTE_32F", -1)
    handle.algo = 99  # a plain attribute: the next call's definition has it
    assert handle.definition("float32", "float32", 68, False, True, 7, 3, 5).algo == 99
    for m in range(1, 5000):
        handle.definition("float32", "float32", 68, False, False, m, 3, 5)
    assert len(handle._definitions) <= 4096
    assert handle.definition("float32", "float32", 68, False, True, 7, 3, 5) == dataclasses.replace(first, algo=99)


def test_a_prepared_call_on_a_closed_handle_says_it_is_closed(calls, handles):
    a, b, out = _operands(False, False)
    handle = handles()
    prepared = _gemm.prepare_gemm(a, b, out=out, handle=handle)
    _closed(handle)
    with pytest.raises(RuntimeError, match="this cuBLAS handle is closed"):  # not cuBLAS's NOT_INITIALIZED
        prepared()
    assert calls == []
