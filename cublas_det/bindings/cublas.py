"""The ctypes layer of libcublas (the copy CuPy uses) and its enums: no policy; each wrapper is named
after its C call, takes and returns plain ints and raises :class:`CublasError` on a non-zero status. It imports
nothing of the package: its errors derive from the built-ins alone, and the entry points name them beside
:class:`~cublas_det.base.errors.CublasDetError` (``cli.common.EXPECTED_ERRORS``)."""

from __future__ import annotations

import ctypes
import enum
import functools
from ctypes import POINTER, byref, c_int, c_longlong, c_size_t, c_void_p

# cublasStatus_t (cublas_api.h), here so that errors format and unpickle without libcublas.
STATUS_TEXT: dict[int, tuple[str, str]] = {
    0: ("CUBLAS_STATUS_SUCCESS", "the operation completed successfully"),
    1: ("CUBLAS_STATUS_NOT_INITIALIZED", "the cuBLAS library was not initialized"),
    3: ("CUBLAS_STATUS_ALLOC_FAILED", "resource allocation failed inside the cuBLAS library"),
    7: ("CUBLAS_STATUS_INVALID_VALUE", "an unsupported value or parameter was passed"),
    8: ("CUBLAS_STATUS_ARCH_MISMATCH", "the function requires a feature absent from the device architecture"),
    11: ("CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"),
    13: ("CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"),
    14: ("CUBLAS_STATUS_INTERNAL_ERROR", "an internal cuBLAS operation failed"),
    15: ("CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"),
    16: ("CUBLAS_STATUS_LICENSE_ERROR", "the functionality requested requires some license"),
}


class MathMode(enum.IntEnum):
    """``cublasMath_t`` (cuBLAS 13 ``cublas_api.h``)."""
    DEFAULT = 0
    PEDANTIC = 2
    TF32 = 3
    FP32_EMULATED_BF16X9 = 4  # fp32 GEMMs emulated with bf16x9 on tensor cores (cuBLAS 12.9+)
    # A flag OR-able with any mode: reductions inside a GEMM keep the compute type.
    DISALLOW_REDUCED_PRECISION_REDUCTION = 16

    def __str__(self) -> str:  # print(mode) says TF32, not the 3 of IntEnum's str (int() still gives 3)
        return self.name


MATH_MODE_FLAGS = int(MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION)


class ComputeType(enum.IntEnum):
    """``cublasComputeType_t`` (cuBLAS 13 ``cublas_api.h``)."""
    COMPUTE_16F = 64
    COMPUTE_16F_PEDANTIC = 65
    COMPUTE_32F = 68
    COMPUTE_32F_PEDANTIC = 69
    COMPUTE_64F = 70
    COMPUTE_64F_PEDANTIC = 71
    COMPUTE_32I = 72
    COMPUTE_32I_PEDANTIC = 73
    COMPUTE_32F_FAST_16F = 74
    COMPUTE_32F_FAST_16BF = 75
    COMPUTE_32F_FAST_TF32 = 77


# Half-precision compute types take alpha and beta as half; every other one as float.
HALF_SCALAR_COMPUTE = (ComputeType.COMPUTE_16F, ComputeType.COMPUTE_16F_PEDANTIC)


class Operation(enum.IntEnum):
    """``cublasOperation_t``."""
    N = 0
    T = 1
    C = 2


class AtomicsMode(enum.IntEnum):
    """``cublasAtomicsMode_t``."""
    NOT_ALLOWED = 0
    ALLOWED = 1


class GemmAlgo(enum.IntEnum):
    """``cublasGemmAlgo_t``: the heuristic choice, unless a captured program's own algo is replayed."""
    DEFAULT = -1
    DEFAULT_TENSOR_OP = 99  # what PyTorch passes


class CublasError(RuntimeError):
    """A cuBLAS call returned ``status`` (a ``cublasStatus_t``) other than success, from ``function``."""

    def __init__(self, status: int, function: str = ""):
        self.status = int(status)
        self.function = function
        name, text = STATUS_TEXT.get(self.status, ("CUBLAS_STATUS_UNKNOWN", "unknown status code"))
        where = f" [{function}]" if function else ""
        super().__init__(f"{name} ({self.status}): {text}{where}")

    def __reduce__(self):  # picklable across processes (worker results, multiprocessing)
        return (type(self), (self.status, self.function))


class CublasNotFoundError(ImportError):
    """libcublas could not be located or loaded."""


# name -> argtypes (restype is always cublasStatus_t, an int)
_PROTOTYPES: dict[str, list] = {
    "cublasCreate_v2": [POINTER(c_void_p)],
    "cublasDestroy_v2": [c_void_p],
    "cublasGetVersion_v2": [c_void_p, POINTER(c_int)],
    "cublasSetMathMode": [c_void_p, c_int],
    "cublasGetMathMode": [c_void_p, POINTER(c_int)],
    "cublasSetAtomicsMode": [c_void_p, c_int],
    "cublasGetAtomicsMode": [c_void_p, POINTER(c_int)],
    "cublasSetStream_v2": [c_void_p, c_void_p],
    "cublasSetWorkspace_v2": [c_void_p, c_void_p, c_size_t],
    "cublasSetSmCountTarget": [c_void_p, c_int],
    "cublasGetSmCountTarget": [c_void_p, POINTER(c_int)],
    # handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo
    "cublasGemmEx": [c_void_p, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_int, c_int, c_void_p, c_int,
                     c_int, c_void_p, c_void_p, c_int, c_int, c_int, c_int],
    # as cublasGemmEx, each operand's stride after its ld, and batchCount before computeType
    "cublasGemmStridedBatchedEx": [c_void_p, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_int, c_int,
                                   c_longlong, c_void_p, c_int, c_int, c_longlong, c_void_p, c_void_p, c_int, c_int,
                                   c_longlong, c_int, c_int, c_int],
}


@functools.cache
def library() -> tuple[ctypes.CDLL, str, str]:
    """``(cdll, abs_path, found_via)`` of libcublas: CuPy's copy, through ``cuda.pathfinder`` as CuPy does."""
    try:
        from cuda import pathfinder
    except ImportError as err:
        raise CublasNotFoundError(
            "cuda.pathfinder is not installed; install CuPy: pip install 'cupy-cuda12x>=14,<15' (or cupy-cuda13x)"
        ) from err
    try:
        loaded = pathfinder.load_nvidia_dynamic_lib("cublas")
    except pathfinder.DynamicLibNotFoundError as err:
        raise CublasNotFoundError(
            f"libcublas not found ({err}); install it: pip install 'cuda-toolkit[cublas,cudart,nvrtc]==12.*' "
            "(==13.* with cupy-cuda13x), or a CUDA toolkit"
        ) from err
    return declared(loaded.abs_path, _PROTOTYPES), loaded.abs_path, str(getattr(loaded, "found_via", ""))


def declared(path: str, prototypes: dict) -> ctypes.CDLL:
    cdll = ctypes.CDLL(path)
    for name, argtypes in prototypes.items():
        fn = getattr(cdll, name)
        fn.argtypes = argtypes
        fn.restype = c_int
    return cdll


def _check(status: int, function: str) -> None:
    if status != 0:
        raise CublasError(status, function)


def _call(name: str, *args) -> None:
    _check(getattr(library()[0], name)(*args), name)


def _getter(name: str):
    """The wrapper of ``name(first, int *value)``: the value it writes."""
    def get(first: int) -> int:
        value = c_int()
        _call(name, first, byref(value))
        return value.value
    return get


def _setter(name: str):
    return lambda handle, value: _call(name, handle, value)


cublas_get_math_mode = _getter("cublasGetMathMode")
cublas_set_math_mode = _setter("cublasSetMathMode")
cublas_get_atomics_mode = _getter("cublasGetAtomicsMode")
cublas_set_atomics_mode = _setter("cublasSetAtomicsMode")
cublas_get_sm_count_target = _getter("cublasGetSmCountTarget")
cublas_set_sm_count_target = _setter("cublasSetSmCountTarget")  # 0 restores the device's own SM count


def cublas_create() -> int:
    handle = c_void_p()
    _call("cublasCreate_v2", byref(handle))
    return int(handle.value)


def cublas_destroy(handle: int) -> None:
    """``cublasDestroy``: it synchronizes the device."""
    _call("cublasDestroy_v2", handle)


def cublas_get_version(handle: int = 0) -> int:
    """``MAJOR*10000 + MINOR*100 + PATCH``; the handle may be 0."""
    value = c_int()
    _call("cublasGetVersion_v2", handle or None, byref(value))
    return value.value


def cublas_set_stream(handle: int, stream_ptr: int) -> None:
    """``cublasSetStream``: it resets any workspace set with ``cublasSetWorkspace``."""
    _call("cublasSetStream_v2", handle, stream_ptr or None)


def cublas_set_workspace(handle: int, ptr: int, size_bytes: int) -> None:
    """``ptr`` aligned to 256 bytes."""
    _call("cublasSetWorkspace_v2", handle, ptr or None, size_bytes)


@functools.cache
def gemm_ex_untyped():
    """``cublasGemmEx`` without ``argtypes`` (they cost host time): pointers as ``c_void_p``, status unchecked."""
    fn = library()[0]["cublasGemmEx"]  # indexing makes a new function object: typed one untouched
    fn.restype = c_int
    return fn


def gemm_strided_batched_ex(handle: int, args: tuple) -> None:
    """``cublasGemmStridedBatchedEx`` of cublasGemmEx's ``args`` and the batch count and strides."""
    (op_a, op_b, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, compute, algo,
     batch, stride_a, stride_b, stride_c) = args
    _call("cublasGemmStridedBatchedEx", handle, op_a, op_b, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb,
          stride_b, beta, c, c_type, ldc, stride_c, batch, compute, algo)
