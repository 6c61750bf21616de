"""``gemm()``: row-major float32 GEMM on CuPy arrays through ``cublasGemmEx``, capturable in CUDA graphs.

CuPy's own ``gemmEx`` binding re-binds the handle to CuPy's current stream on every call (which
resets a user workspace) and refuses to run during stream capture, so the call is made through
ctypes on the handle's own stream.
"""

from __future__ import annotations

from ctypes import byref, c_float, c_void_p

from . import _cublas
from ._handle import ComputeType, Handle, create_handle, resolve_math_mode

CUDA_R_32F = 0  # cudaDataType_t
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_GEMM_DEFAULT = -1  # heuristic choice; never 99 (may allow FAST_16F) or 999 (autotune, timing-dependent)
_COMPUTE_32F = int(ComputeType.COMPUTE_32F)

# Host scalars for the usual alpha/beta, made once: building a c_float per call costs host time
# that is visible next to a 5-µs GEMM.
_ONE = c_float(1.0)
_ZERO = c_float(0.0)
_default_handles: dict[tuple[int, int], Handle] = {}
_cupy = None


def _import_cupy():
    global _cupy
    if _cupy is None:
        import cupy

        _cupy = cupy
    return _cupy


def default_handle() -> Handle:
    """The handle ``gemm(handle=None)`` uses: one per (device, math mode), mode read at call time."""
    cupy = _import_cupy()
    mode_value, _ = resolve_math_mode(None)
    key = (cupy.cuda.runtime.getDevice(), mode_value)
    handle = _default_handles.get(key)
    if handle is None or handle.closed:
        handle = _default_handles[key] = create_handle(None)
    return handle


def _check_operand(name: str, array, ndarray) -> None:
    """Raise TypeError/ValueError unless ``array`` is a non-empty 2-D C-contiguous float32 CuPy array."""
    if not isinstance(array, ndarray):
        raise TypeError(f"{name} must be a cupy.ndarray, not {type(array).__name__} (move it with cupy.asarray)")
    if array.dtype.char != "f":
        raise TypeError(f"{name} must be float32, not {array.dtype} (convert with {name}.astype(cupy.float32))")
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D, not {array.ndim}-D with shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {array.shape}")
    # _c_contiguous is the flag that .flags.c_contiguous reads, without building a Flags object.
    if not array._c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (row-major); pass cupy.ascontiguousarray({name})")


def _prepare(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type):
    """Validate a GEMM; return ``(handle, out, args)`` where ``args`` follow the handle in cublasGemmEx."""
    cupy = _cupy or _import_cupy()
    ndarray = cupy.ndarray
    # One combined test for the common, valid case; the checker runs only to name a problem.
    if not (type(a) is ndarray and type(b) is ndarray and a.dtype.char == "f" and b.dtype.char == "f"
            and a.ndim == 2 and b.ndim == 2 and a._c_contiguous and b._c_contiguous and a.size and b.size):
        _check_operand("a", a, ndarray)
        _check_operand("b", b, ndarray)
    a_rows, a_cols = a.shape
    b_rows, b_cols = b.shape
    m, k = (a_cols, a_rows) if trans_a else (a_rows, a_cols)
    k_b, n = (b_cols, b_rows) if trans_b else (b_rows, b_cols)
    if k != k_b:
        raise ValueError(
            f"inner dimensions differ: op(a) is {m}x{k} and op(b) is {k_b}x{n} "
            f"(a.shape={a.shape}, trans_a={trans_a}, b.shape={b.shape}, trans_b={trans_b})"
        )
    if handle is None:
        handle = default_handle()
    elif type(handle) is not Handle and not isinstance(handle, Handle):
        raise TypeError(f"handle must be a cublas_det.Handle, not {type(handle).__name__}")
    device_id = handle._device_id
    a_data, b_data = a.data, b.data
    if a_data.device_id != device_id or b_data.device_id != device_id:
        raise ValueError(
            f"operands are on devices {a_data.device_id} and {b_data.device_id} but the handle is "
            f"on device {device_id}; create the handle under `with cupy.cuda.Device({a_data.device_id}):`"
        )
    if out is None:
        with cupy.cuda.Device(device_id):
            out = cupy.empty((m, n), dtype=cupy.float32)
    else:
        if not (type(out) is ndarray and out.dtype.char == "f" and out.ndim == 2 and out._c_contiguous):
            _check_operand("out", out, ndarray)
        if out.shape != (m, n):
            raise ValueError(f"out must have shape {(m, n)}, not {out.shape}")
        if out.data.device_id != device_id:
            raise ValueError(f"out is on device {out.data.device_id} but the handle is on device {device_id}")
    # Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and give
    # cuBLAS the row lengths as leading dimensions.
    args = (
        CUBLAS_OP_T if trans_b else CUBLAS_OP_N, CUBLAS_OP_T if trans_a else CUBLAS_OP_N,
        n, m, k, byref(_ONE if alpha == 1.0 else c_float(alpha)),
        c_void_p(b_data.ptr), CUDA_R_32F, b_cols,
        c_void_p(a_data.ptr), CUDA_R_32F, a_cols,
        byref(_ZERO if beta == 0.0 else c_float(beta)), c_void_p(out.data.ptr), CUDA_R_32F, n,
        _COMPUTE_32F if compute_type is None else int(compute_type), CUBLAS_GEMM_DEFAULT,
    )
    return handle, out, args


def gemm(a, b, *, out=None, handle: Handle | None = None, trans_a: bool = False,
         trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0, compute_type=None):
    """``out = alpha * op(a) @ op(b) + beta * out`` on row-major float32 CuPy arrays.

    Args:
        a, b: 2-D C-contiguous float32 ``cupy.ndarray``; ``op(x)`` is ``x.T`` when ``trans_x``.
        out: an (M, N) float32 C-contiguous array to write into; a new one when ``None``.
        handle: a :class:`Handle`; ``None`` uses a per-device handle in the mode that
            ``CUBLAS_DET_MATH_MODE`` names (PEDANTIC by default).
        compute_type: a :class:`ComputeType`; ``None`` passes ``CUBLAS_COMPUTE_32F`` so that the
            handle's math mode decides the arithmetic (TF32 math engages TF32 with it; a FAST_TF32
            compute type would engage TF32 even under PEDANTIC math).

    Returns:
        ``out``.
    Raises:
        TypeError: an operand that is not a CuPy array, or not float32.
        ValueError: shapes that do not multiply, a wrong ``out``, a non-contiguous operand, or an
            operand on another device than the handle.
        CublasError: cuBLAS rejected the call.
    """
    handle, out, args = _prepare(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type)
    status = _cublas.gemm_ex_untyped()(handle.bind_current_stream(), *args)
    if status:
        raise _cublas.CublasError(status, "cublasGemmEx")
    return out


class GemmCall:
    """One validated GEMM that can be issued again and again: ``call()`` (no argument checks).

    For loops over fixed buffers, where even the checks of :func:`gemm` cost host time. The
    arrays are referenced until the call is dropped. Make one with :func:`prepare_gemm`.
    """

    def __init__(self, a, b, out, handle, args):
        self._keep = (a, b)  # the pointers in args stay valid while the arrays live
        self.out = out
        self.handle = handle
        self._args = args
        self._fn = _cublas.gemm_ex_untyped()

    def __call__(self):
        status = self._fn(self.handle.bind_current_stream(), *self._args)
        if status:
            raise _cublas.CublasError(status, "cublasGemmEx")
        return self.out


def prepare_gemm(a, b, *, out=None, handle: Handle | None = None, trans_a: bool = False,
                 trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0, compute_type=None) -> GemmCall:
    """Validate a GEMM once (as :func:`gemm` does) and return a :class:`GemmCall` that issues it."""
    handle, out, args = _prepare(a, b, out, handle, trans_a, trans_b, alpha, beta, compute_type)
    return GemmCall(a, b, out, handle, args)
