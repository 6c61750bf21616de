"""The ctypes layer of cuBLASLt: the libcublasLt beside CuPy's libcublas, its prototypes, enums and structures, and
thin calls named after it. Like :mod:`.cublas`, no policy: plain ints in and out, :class:`~.cublas.CublasError` on a
non-zero status; :class:`~cublas_det.core.plan.LtPlan` is what makes a GEMM of them."""

from __future__ import annotations

import ctypes
import enum
import functools
from ctypes import POINTER, byref, c_float, c_int, c_int64, c_size_t, c_uint16, c_uint32, c_uint64, c_void_p

from .cublas import CublasError, CublasNotFoundError, declared

BATCH_COUNT, STRIDED_BATCH_OFFSET = 5, 6  # cublasLtMatrixLayoutAttribute_t: int32, int64


class MatmulDesc(enum.IntEnum):
    """``cublasLtMatmulDescAttributes_t`` used here."""
    TRANSA = 3
    TRANSB = 4
    EPILOGUE = 7
    BIAS_POINTER = 8
    SM_COUNT_TARGET = 15


class Preference(enum.IntEnum):
    """``cublasLtMatmulPreferenceAttributes_t`` used here."""
    MAX_WORKSPACE_BYTES = 1
    REDUCTION_SCHEME_MASK = 3


class ReductionScheme(enum.IntFlag):
    """``cublasLtReductionScheme_t``: how a split-K GEMM sums its parts."""
    NONE = 0
    INPLACE = 1
    COMPUTE_TYPE = 2
    OUTPUT_TYPE = 4
    MASK = 7


class Epilogue(enum.IntEnum):
    """``cublasLtEpilogue_t`` used here."""
    DEFAULT = 1
    BIAS = 4


# cublasLtMatmulAlgoConfigAttributes_t: (attribute, C type), read by algo_config, written by algo_init.
ALGO_CONFIG = {"algo_id": (0, ctypes.c_int32), "tile": (1, c_uint32), "splitk": (2, c_uint32),
               "reduction_scheme": (3, c_uint32), "cta_swizzling": (4, c_uint32), "custom_option": (5, c_uint32),
               "stages": (6, c_uint32), "inner_shape": (7, c_uint16), "cluster_shape": (8, c_uint16)}


class MatmulAlgo(ctypes.Structure):
    """``cublasLtMatmulAlgo_t``: opaque, 64 bytes."""
    _fields_ = [("data", c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """``cublasLtMatmulHeuristicResult_t``."""
    _fields_ = [("algo", MatmulAlgo), ("workspace_size", c_size_t), ("state", c_int), ("waves_count", c_float),
                ("reserved", c_int * 4)]


_PROTOTYPES: dict[str, list] = {
    "cublasLtCreate": [POINTER(c_void_p)],
    "cublasLtDestroy": [c_void_p],
    "cublasLtMatmulDescCreate": [POINTER(c_void_p), c_int, c_int],
    "cublasLtMatmulDescDestroy": [c_void_p],
    "cublasLtMatmulDescSetAttribute": [c_void_p, c_int, c_void_p, c_size_t],
    "cublasLtMatrixLayoutCreate": [POINTER(c_void_p), c_int, c_uint64, c_uint64, c_int64],
    "cublasLtMatrixLayoutDestroy": [c_void_p],
    "cublasLtMatrixLayoutSetAttribute": [c_void_p, c_int, c_void_p, c_size_t],
    "cublasLtMatmulPreferenceCreate": [POINTER(c_void_p)],
    "cublasLtMatmulPreferenceDestroy": [c_void_p],
    "cublasLtMatmulPreferenceSetAttribute": [c_void_p, c_int, c_void_p, c_size_t],
    # handle, desc, A, B, C, D layouts, preference, requested, results, returned
    "cublasLtMatmulAlgoGetHeuristic": [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_int,
                                       POINTER(HeuristicResult), POINTER(c_int)],
    # handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, size, stream
    "cublasLtMatmul": [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
                       c_void_p, c_void_p, c_void_p, POINTER(MatmulAlgo), c_void_p, c_size_t, c_void_p],
    # handle, computeType, scaleType, Atype, Btype, Ctype, Dtype, algoId, algo
    "cublasLtMatmulAlgoInit": [c_void_p, c_int, c_int, c_int, c_int, c_int, c_int, c_int, POINTER(MatmulAlgo)],
    "cublasLtMatmulAlgoConfigSetAttribute": [POINTER(MatmulAlgo), c_int, c_void_p, c_size_t],
    "cublasLtMatmulAlgoConfigGetAttribute": [POINTER(MatmulAlgo), c_int, c_void_p, c_size_t, POINTER(c_size_t)],
}


@functools.cache
def library() -> ctypes.CDLL:
    """Load libcublasLt through ``cuda.pathfinder``, as CuPy does (one copy in the process)."""
    try:
        from cuda import pathfinder
        loaded = pathfinder.load_nvidia_dynamic_lib("cublasLt")
    except (ImportError, AttributeError) as err:
        raise CublasNotFoundError("cuda.pathfinder is not installed; install CuPy") from err
    except Exception as err:  # pathfinder's DynamicLibNotFoundError
        raise CublasNotFoundError(f"libcublasLt not found ({err}); install the cuBLAS wheel of your CUDA") from err
    return declared(loaded.abs_path, _PROTOTYPES)


def _call(name: str, *args) -> None:
    status = getattr(library(), name)(*args)
    if status:
        raise CublasError(status, name)


def _set(name: str, target, attribute: int, buffer) -> None:
    """``name(target, attribute, &buffer, sizeof buffer)``: how cuBLASLt sets an attribute."""
    _call(name, target, attribute, byref(buffer), ctypes.sizeof(buffer))


def _create(name: str, *args) -> int:
    value = c_void_p()
    _call(name, byref(value), *args)
    return int(value.value)


def _destroyer(name: str):
    def destroy_object(value: int) -> None:
        _call(name, value)
    return destroy_object


def create() -> int:
    return _create("cublasLtCreate")


destroy = _destroyer("cublasLtDestroy")
matmul_desc_destroy = _destroyer("cublasLtMatmulDescDestroy")
layout_destroy = _destroyer("cublasLtMatrixLayoutDestroy")
preference_destroy = _destroyer("cublasLtMatmulPreferenceDestroy")


def matmul_desc_create(compute_type: int, scale_type: int) -> int:
    return _create("cublasLtMatmulDescCreate", compute_type, scale_type)


def matmul_desc_set(desc: int, attribute: int, value, kind=c_int) -> None:
    """Set one attribute (``kind``: its C type, ``c_int`` for the enums, ``c_void_p`` for a pointer)."""
    _set("cublasLtMatmulDescSetAttribute", desc, attribute, kind(value))


def layout_create(data_type: int, rows: int, cols: int, ld: int) -> int:
    return _create("cublasLtMatrixLayoutCreate", data_type, rows, cols, ld)


def layout_batch(layout: int, count: int, stride: int) -> None:
    """Make ``layout`` a strided batch: ``count`` matrices ``stride`` elements apart."""
    for attribute, value in ((BATCH_COUNT, c_int(count)), (STRIDED_BATCH_OFFSET, c_int64(stride))):
        _set("cublasLtMatrixLayoutSetAttribute", layout, attribute, value)


def preference_create() -> int:
    return _create("cublasLtMatmulPreferenceCreate")


def preference_set(preference: int, attribute: int, value, kind=c_uint64) -> None:
    _set("cublasLtMatmulPreferenceSetAttribute", preference, attribute, kind(value))


def heuristic(handle: int, desc: int, layouts: tuple, preference: int, count: int = 1) -> list[HeuristicResult]:
    """The heuristic's first ``count`` algorithms, best first (fewer where fewer fit)."""
    results = (HeuristicResult * count)()
    returned = c_int()
    _call("cublasLtMatmulAlgoGetHeuristic", handle, desc, *layouts, preference, count, results, byref(returned))
    return [results[i] for i in range(returned.value) if results[i].state == 0]


def algo_config(algo: MatmulAlgo) -> dict[str, int]:
    values = {}
    for name, (attribute, kind) in ALGO_CONFIG.items():
        buffer, written = kind(), c_size_t()
        _call("cublasLtMatmulAlgoConfigGetAttribute", byref(algo), attribute, byref(buffer), ctypes.sizeof(buffer),
              byref(written))
        values[name] = int(buffer.value)
    return values


def algo_init(handle: int, compute_type: int, scale_type: int, types: tuple, config: dict[str, int]) -> MatmulAlgo:
    """An algorithm made from a stored configuration (:func:`algo_config`'s)."""
    algo = MatmulAlgo()
    _call("cublasLtMatmulAlgoInit", handle, compute_type, scale_type, *types, config["algo_id"], byref(algo))
    for name, (attribute, kind) in ALGO_CONFIG.items():
        if name != "algo_id" and name in config:
            _set("cublasLtMatmulAlgoConfigSetAttribute", byref(algo), attribute, kind(config[name]))
    return algo
