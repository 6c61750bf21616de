"""``gemm()``: row-major GEMM on CuPy arrays or DLPack tensors through ``cublasGemmEx`` (strided batched for a
batch), capturable in CUDA graphs. CuPy's Cython binding issues eager calls on a handle that follows CuPy's
current stream (less host time); ctypes the rest (a pinned stream, a workspace, capture: CuPy's breaks them)."""

from __future__ import annotations

from ctypes import addressof, c_float, c_uint16

import numpy

from ..bindings import cublas as _cublas
from ..bindings.cublas import HALF_SCALAR_COMPUTE, Operation
from .config import COMPUTE_TYPES, check_types
from ..base.dtypes import BFLOAT16_HINT, GEMM_TYPES
from . import handle as _handle
from .handle import Handle, cublas_error_of_cupy, default_handle

# The enums as plain ints, read once: the hot path passes them untyped.
CUDA_R_32F = GEMM_TYPES["float32"].cuda
CUBLAS_OP_N, CUBLAS_OP_T = int(Operation.N), int(Operation.T)
# CuPy's float32 is NumPy's, and builtin dtypes are singletons: `dtype is _F32` is an exact test.
_F32 = numpy.dtype(numpy.float32)

# Host scalars for the usual alpha/beta, made once: ctypes objects per call cost host time.
_ONE, _ZERO = c_float(1.0), c_float(0.0)
_ONE_ADDRESS, _ZERO_ADDRESS = addressof(_ONE), addressof(_ZERO)
# The compute types cublasGemmEx takes with float32 in and out; any other takes the checked path.
_F32_COMPUTES = frozenset(int(c) for c in COMPUTE_TYPES[("float32", "float32")])

# Bound by _bind() on the first checked call: this module must import without CuPy.
_cupy = None
_several_devices = True  # with one visible GPU every array and handle is on it: no per-call device check


def _bind():
    global _cupy, _several_devices
    if _cupy is None:
        import cupy
        _cublas.gemm_ex_untyped()  # loads libcublas: a CublasNotFoundError before anything binds
        _handle.bind_cupy_gemm_ex()  # before _cupy is set: the hot path, open once _cupy is, calls the binding
        try:
            _several_devices = cupy.cuda.runtime.getDeviceCount() > 1
        except cupy.cuda.runtime.CUDARuntimeError:  # no driver: keep checking; the call itself will fail clearly
            _several_devices = True
        _cupy = cupy
    return _cupy


def _check_operand(name: str, array) -> None:
    """TypeError/ValueError unless ``array`` is a non-empty 2-D (3-D: a batch) C-contiguous CuPy GEMM array."""
    if not isinstance(array, _cupy.ndarray):
        raise TypeError(f"{name} must be a CuPy array or a GPU tensor with __dlpack__ (PyTorch ...), not "
                        f"{type(array).__name__} (move it with cupy.asarray)")
    if array.dtype.name not in GEMM_TYPES:
        raise TypeError(f"{name} must be float32, bfloat16 or float16, not {array.dtype} "
                        f"(convert with {name}.astype(cupy.float32))")
    if array.ndim not in (2, 3):
        raise ValueError(f"{name} must be 2-D, or 3-D for a batch of matrices, not {array.ndim}-D with shape "
                         f"{array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {array.shape}")
    # _c_contiguous is the flag that .flags.c_contiguous reads, without building a Flags object.
    if not array._c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (row-major); pass cupy.ascontiguousarray({name})")


def _prepare(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type):
    """Validate a GEMM in full, naming the first problem: (handle, out, its definition as the handle issues it, the
    pointers it runs on, its scalars)."""
    cupy = _bind()
    a, b, out = _as_cupy("a", a), _as_cupy("b", b), _as_cupy("out", out)  # None, not a tensor, stays None
    _check_operand("a", a)
    _check_operand("b", b)
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must have one element type, not {a.dtype} and {b.dtype}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"a and b must be batches of one size (or both 2-D), not shapes {a.shape} and {b.shape}")
    stack = a.shape[:-2]  # (batch,) for a batched GEMM
    a_rows, lda = a.shape[-2:]
    b_rows, ldb = b.shape[-2:]
    m, k = (lda, a_rows) if trans_a else (a_rows, lda)
    k_b, n = (ldb, b_rows) if trans_b else (b_rows, ldb)
    if k != k_b:
        raise ValueError(
            f"inner dimensions differ: op(a) is {m}x{k} and op(b) is {k_b}x{n} "
            f"(a.shape={a.shape}, trans_a={trans_a}, b.shape={b.shape}, trans_b={trans_b})"
        )
    if handle is None:
        handle = default_handle()
    elif not isinstance(handle, Handle):
        raise TypeError(f"handle must be a cublas_det.Handle, not {type(handle).__name__}")
    handle.require_open()
    device_id = handle.device_id
    if a.data.device_id != device_id or b.data.device_id != device_id:
        raise ValueError(
            f"operands are on devices {a.data.device_id} and {b.data.device_id} but the handle is "
            f"on device {device_id}; create the handle under `with cupy.cuda.Device({a.data.device_id}):`"
        )
    out = _checked_out(cupy, out, (*stack, m, n), a.dtype, device_id)
    compute = handle.compute_type if compute_type is None else int(compute_type)
    check_types(a.dtype.name, out.dtype.name, compute)  # ValueError naming an unsupported combination
    scalars = _scalars(alpha, beta, compute)
    alpha_address, beta_address = addressof(scalars[0]), addressof(scalars[1])
    definition = handle.definition(a.dtype.name, out.dtype.name, compute, trans_a, trans_b, m, n, k,
                                   stack[0] if stack else 1)
    return handle, out, definition, (alpha_address, a.data.ptr, b.data.ptr, beta_address, out.data.ptr), scalars


def _checked_out(cupy, out, shape: tuple, dtype, device_id: int):
    """``out`` checked against the GEMM's shape and the handle's device; None: a new array there."""
    if out is None:
        with cupy.cuda.Device(device_id):
            return cupy.empty(shape, dtype=dtype)
    _check_operand("out", out)
    if out.shape != shape:
        raise ValueError(f"out must have shape {shape}, not {out.shape}")
    if out.data.device_id != device_id:
        raise ValueError(f"out is on device {out.data.device_id} but the handle is on device {device_id}")
    return out


def _bias_pointer(bias, handle: Handle, out) -> int:
    """The device address of ``bias`` (0 for none), checked against the handle and the output."""
    if bias is None:
        return 0
    if handle.lt is None or handle.config.lt_epilogue != "BIAS":
        raise ValueError("bias needs a cuBLASLt handle with the BIAS epilogue: "
                         "create_handle(GemmConfig(..., api='lt', lt_epilogue='BIAS'))")
    bias = _as_cupy("bias", bias)
    if not isinstance(bias, _cupy.ndarray) or bias.shape != (out.shape[-1],) or bias.dtype != out.dtype:
        raise ValueError(f"bias must be a vector of {out.shape[-1]} {out.dtype} on the GPU, not "
                         f"{getattr(bias, 'shape', type(bias).__name__)} {getattr(bias, 'dtype', '')}".rstrip())
    if not bias._c_contiguous:
        raise ValueError("bias must be contiguous; pass cupy.ascontiguousarray(bias)")
    if bias.data.device_id != handle.device_id:
        raise ValueError(f"bias is on device {bias.data.device_id} but the handle is on device {handle.device_id}")
    return bias.data.ptr


def _as_cupy(name: str, value):
    """A CuPy array as it is; another GPU tensor (PyTorch ...) as a CuPy view of its memory through DLPack."""
    if isinstance(value, _cupy.ndarray) or not hasattr(value, "__dlpack__"):
        return value  # not a tensor at all: _check_operand names the problem
    try:
        on_gpu = value.__dlpack_device__()[0] in (2, 13)  # kDLCUDA, kDLCUDAManaged
    except (AttributeError, TypeError, ValueError):
        on_gpu = False
    if not on_gpu:
        return value  # a host array (NumPy ...): _check_operand says to move it
    try:
        return _cupy.from_dlpack(value)  # zero copy: the view shares the tensor's memory
    except (TypeError, ValueError, NotImplementedError, BufferError) as err:
        hint = f" ({BFLOAT16_HINT})" if "bfloat16" in str(err).lower() else ""
        raise TypeError(f"{name}: CuPy cannot view this {type(value).__name__} through DLPack: {err}{hint}") from None


def _scalars(alpha: float, beta: float, compute: int) -> tuple:
    if compute in HALF_SCALAR_COMPUTE:
        return tuple(c_uint16(int(numpy.float16(x).view(numpy.uint16))) for x in (alpha, beta))
    return c_float(alpha), c_float(beta)


def _checked_gemm(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type, bias=None):
    handle, written, definition, pointers, _kept = _prepare(a, b, out, handle, trans_a, trans_b, alpha, beta,
                                                            compute_type)
    handle.issue(definition, pointers, _bias_pointer(bias, handle, written))
    return written if out is None else out  # the caller's own tensor when one was given


def gemm(a, b, *, out=None, handle: Handle | None = None, trans_a: bool = False,
         trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0, compute_type=None, bias=None):
    """``out = alpha * op(a) @ op(b) + beta * out`` on row-major C-contiguous float32, bfloat16 or float16 CuPy
    arrays or DLPack GPU tensors (3-D: a batch, one strided batched call); returns ``out`` (None: a new array).
    ``handle`` None: :func:`default_handle`; ``compute_type`` None: the handle's; ``bias``: a vector of N added
    to each row, on a cuBLASLt handle with the BIAS epilogue. TypeError/ValueError name the problem."""
    # The common valid call is checked with the fewest attribute reads (host time); anything else, or a CuPy
    # without `_c_contiguous` or `_shape`, takes _checked_gemm, which names the problem.
    if bias is not None:
        return _checked_gemm(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type, bias)
    try:
        common = (a.dtype is _F32 and b.dtype is _F32 and out.dtype is _F32 and a._c_contiguous and b._c_contiguous
                  and out._c_contiguous and type(handle) is Handle and handle.lt is None and _cupy is not None)
        a_rows, lda = a._shape  # leading dimension = row length (row-major)
        b_rows, ldb = b._shape
        m, n = out._shape
    except (AttributeError, ValueError):  # not a CuPy array, or not 2-D
        common = False
    if not common:
        return _checked_gemm(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type)
    if trans_a:
        m_a, k, op_a = lda, a_rows, CUBLAS_OP_T
    else:
        m_a, k, op_a = a_rows, lda, CUBLAS_OP_N
    if trans_b:
        k_b, n_b, op_b = ldb, b_rows, CUBLAS_OP_T
    else:
        k_b, n_b, op_b = b_rows, ldb, CUBLAS_OP_N
    a_data, b_data, out_data = a.data, b.data, out.data
    compute = handle.compute_type if compute_type is None else int(compute_type)
    if m != m_a or n != n_b or k != k_b or not (m and n and k) or compute not in _F32_COMPUTES or (
            _several_devices and not (a_data.device_id == b_data.device_id == out_data.device_id
                                      == handle.device_id)):
        return _checked_gemm(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type)  # names the problem
    if alpha == 1.0 and beta == 0.0:
        alpha_address, beta_address = _ONE_ADDRESS, _ZERO_ADDRESS
    else:
        scalars = (c_float(alpha), c_float(beta))  # alive until the call returns
        alpha_address, beta_address = addressof(scalars[0]), addressof(scalars[1])
    # The arguments GemmDefinition.gemm_ex_args gives (the operands swap: cuBLAS is column-major) and
    # issue_gemm_ex's CuPy branch, written out: a helper's call here costs host time on every GEMM.
    ptr = handle.cupy_ptr  # 0: closed, or CuPy's binding does not fit the handle; issue_gemm_ex says which
    if ptr:
        try:
            _handle.cupy_gemm_ex(ptr, op_b, op_a, n, m, k, alpha_address, b_data.ptr, CUDA_R_32F, ldb, a_data.ptr,
                                 CUDA_R_32F, lda, beta_address, out_data.ptr, CUDA_R_32F, n, compute, handle.algo)
            return out
        except NotImplementedError:  # the stream is being captured (CuPy refuses) or no binding: ctypes can
            pass
        except _handle.CupyCublasError as err:
            raise cublas_error_of_cupy(err) from None
    handle.issue_gemm_ex((op_b, op_a, n, m, k, alpha_address, b_data.ptr, CUDA_R_32F, ldb, a_data.ptr, CUDA_R_32F,
                          lda, beta_address, out_data.ptr, CUDA_R_32F, n, compute, handle.algo), via_cupy=False)
    return out


class GemmCall:
    """One validated GEMM (:func:`prepare_gemm`), issued by ``call()`` with no checks; it keeps the arrays alive."""

    def __init__(self, a, b, handle, out, definition, pointers, scalars, bias=None):
        self._keep = (a, b, scalars, bias)  # the addresses in the call stay valid while these live
        self.out = out
        self.handle = handle
        self._issue = handle.issuer(definition, pointers, _bias_pointer(bias, handle, out))

    def __call__(self):
        self._issue()
        return self.out


def prepare_gemm(a, b, *, out=None, handle: Handle | None = None, trans_a: bool = False,
                 trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0, compute_type=None,
                 bias=None) -> GemmCall:
    return GemmCall(a, b, *_prepare(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type), bias)


def shape_gemm(a, b, out, handle: Handle, shape) -> None:
    """:func:`gemm` into ``out`` with ``shape``'s transposes: a check's ``gemm_fn``, which a test may replace."""
    gemm(a, b, out=out, handle=handle, trans_a=shape.trans_a, trans_b=shape.trans_b)
