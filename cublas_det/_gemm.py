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
    cupy = _cupy or _import_cupy()
    ndarray = cupy.ndarray
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
    elif not isinstance(handle, Handle):
        raise TypeError(f"handle must be a cublas_det.Handle, not {type(handle).__name__}")
    device_id = handle.device_id
    if a.data.device_id != device_id or b.data.device_id != device_id:
        raise ValueError(
            f"operands are on devices {a.data.device_id} and {b.data.device_id} but the handle is "
            f"on device {device_id}; create the handle under `with cupy.cuda.Device({a.data.device_id}):`"
        )
    if out is None:
        with cupy.cuda.Device(device_id):
            out = cupy.empty((m, n), dtype=cupy.float32)
    else:
        _check_operand("out", out, ndarray)
        if out.shape != (m, n):
            raise ValueError(f"out must have shape {(m, n)}, not {out.shape}")
        if out.data.device_id != device_id:
            raise ValueError(f"out is on device {out.data.device_id} but the handle is on device {device_id}")
    handle_ptr = handle.bind_current_stream()
    # Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and give
    # cuBLAS the row lengths as leading dimensions.
    status = _cublas.gemm_ex_untyped()(
        handle_ptr, CUBLAS_OP_T if trans_b else CUBLAS_OP_N, CUBLAS_OP_T if trans_a else CUBLAS_OP_N,
        n, m, k, byref(_ONE if alpha == 1.0 else c_float(alpha)),
        c_void_p(b.data.ptr), CUDA_R_32F, b_cols,
        c_void_p(a.data.ptr), CUDA_R_32F, a_cols,
        byref(_ZERO if beta == 0.0 else c_float(beta)), c_void_p(out.data.ptr), CUDA_R_32F, n,
        _COMPUTE_32F if compute_type is None else int(compute_type), CUBLAS_GEMM_DEFAULT,
    )
    if status:
        raise _cublas.CublasError(status, "cublasGemmEx")
    return out
