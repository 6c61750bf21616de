"""The ctypes layer of cuBLASLt: the libcublasLt beside CuPy's libcublas, its prototypes and enums; and
:class:`LtPlan`, one matmul made once and run many times (as nvmath-python's ``Matmul``), the one place a
row-major GEMM becomes cuBLASLt's column-major one. Like :mod:`cublas_det.bindings.cublas`, no policy: plain ints,
CublasError; a plan is what ``Handle(api="lt")``, the lock's router and ``prescribe`` share."""

from __future__ import annotations

import ctypes
import dataclasses
import enum
import functools
import threading
from ctypes import POINTER, byref, c_float, c_int, c_int64, c_size_t, c_uint16, c_uint32, c_uint64, c_void_p

from ..bindings.cublas import HALF_SCALAR_COMPUTE, ComputeType, CublasError, CublasNotFoundError, declared
from ..base.dtypes import GEMM_TYPES
from .shapes import cublas_op, packed_strides, shape_spec

BATCH_COUNT, STRIDED_BATCH_OFFSET = 5, 6  # cublasLtMatrixLayoutAttribute_t: int32, int64


class MatmulDesc(enum.IntEnum):
    """``cublasLtMatmulDescAttributes_t`` used here."""
    TRANSA = 3
    TRANSB = 4
    EPILOGUE = 7
    BIAS_POINTER = 8
    SM_COUNT_TARGET = 15
    BIAS_DATA_TYPE = 26


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


def matmul(handle: int, desc: int, alpha: int, a: int, a_desc: int, b: int, b_desc: int, beta: int, c: int,
           c_desc: int, d: int, d_desc: int, algo: MatmulAlgo, workspace: int, workspace_bytes: int,
           stream: int) -> None:
    _call("cublasLtMatmul", handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, byref(algo),
          workspace or None, workspace_bytes, stream or None)


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


_F32 = GEMM_TYPES["float32"].cuda
TF32_COMPUTE = ComputeType.COMPUTE_32F_FAST_TF32.name  # fp32 as TF32: the TF32 math mode, torch's allow_tf32


@dataclasses.dataclass(frozen=True)
class GemmKey:
    """A GEMM's identity, the one the lock, the router, prescribe and the cuBLASLt path share: row-major
    ``op(A)[M,K] @ op(B)[K,N]`` (each matrix of a batch) with its types, compute type and epilogue; no batch
    count, as one pinned algorithm serves every batch count and the unbatched call. Its layout: :class:`Geometry`."""

    input_dtype: str
    output_dtype: str
    compute_type: str  # the compute type cuBLASLt runs: TF32 math is TF32_COMPUTE
    trans_a: bool
    trans_b: bool
    n: int
    k: int
    epilogue: str = ""  # "BIAS": a bias vector of N added to each row
    m: int = 0  # 0: any M (the rows verified batch-invariant); else the one M the entry holds for

    @classmethod
    def of(cls, shape, config, any_m: bool = True) -> GemmKey:
        """The key of ``shape`` (a GemmShape) run in ``config`` (a GemmConfig): for any M, or its own."""
        return cls(config.input_dtype, config.output_dtype, config.lt_compute_type.name, shape.trans_a,
                   shape.trans_b, shape.n, shape.k, config.lt_epilogue, 0 if any_m else shape.m)

    def at(self, m: int) -> GemmKey:
        return dataclasses.replace(self, m=m)

    @property
    def tf32(self) -> bool:
        return self.compute_type == TF32_COMPUTE

    @property
    def spec(self) -> str:
        """``MxNxK:op``, M left open (``M``) in a key for any M."""
        return shape_spec(self.m or "M", self.n, self.k, cublas_op(self.trans_a, self.trans_b))

    def __str__(self) -> str:
        types = GEMM_TYPES[self.input_dtype].label  # fp32, bf16, fp16
        if self.output_dtype != self.input_dtype:
            types += f"->{GEMM_TYPES[self.output_dtype].label}"
        extra = f" +{self.epilogue.lower()}" if self.epilogue else ""
        tf32 = " tf32" if self.tf32 else ""
        return f"{self.spec} {types}{tf32}{extra}"


@dataclasses.dataclass(frozen=True)
class Geometry:
    """A :class:`GemmKey` (its M set) as it lies in memory: leading dimensions, and for a strided batch its count
    and strides in elements (A, B, D; 0: one matrix shared by all); an SM count target (0: the device's)."""

    key: GemmKey
    lda: int
    ldb: int
    ldd: int
    batch: int = 1
    strides: tuple = (0, 0, 0)
    sm_count_target: int = 0

    @classmethod
    def packed(cls, key: GemmKey, batch: int = 1) -> Geometry:
        """``key`` with row-major operands packed one after another, as a C-contiguous array holds them."""
        m, n, k = key.m, key.n, key.k
        b_stride, a_stride, d_stride = packed_strides(m, n, k) if batch > 1 else (0, 0, 0)
        return cls(key, m if key.trans_a else k, k if key.trans_b else n, n, batch, (a_stride, b_stride, d_stride))

    def column_major(self) -> tuple:
        """cuBLASLt's ``(op of its A, op of its B, layouts)``: its A is our B, its B our A, D transposed. The one
        place a row-major GEMM turns column-major for cuBLASLt."""
        key, (a_stride, b_stride, d_stride) = self.key, self.strides
        ab_type, d_type = GEMM_TYPES[key.input_dtype].cuda, GEMM_TYPES[key.output_dtype].cuda
        m, n, k = key.m, key.n, key.k
        b = (ab_type, *((k, n) if key.trans_b else (n, k)), self.ldb, b_stride)
        a = (ab_type, *((m, k) if key.trans_a else (k, m)), self.lda, a_stride)
        return key.trans_b, key.trans_a, (b, a, (d_type, n, m, self.ldd, d_stride))


class LtPlan:
    """One cuBLASLt matmul, freed by its owner: the descriptor, layouts and algorithm of one :class:`Geometry`,
    ``algo`` pinned (an ``algo_config`` dict) or the heuristic's first pick for ``workspace_bytes`` (and a
    reduction-scheme mask). :meth:`run` issues it; :meth:`close` frees it."""

    def __init__(self, lt_handle: int, geometry: Geometry, algo: dict | None = None, workspace_bytes: int = 0,
                 reduction_scheme_mask: int | None = None):
        self.handle, self.geometry = lt_handle, geometry
        key = geometry.key
        compute = int(ComputeType[key.compute_type])
        scale = GEMM_TYPES[key.output_dtype].cuda if compute in HALF_SCALAR_COMPUTE else _F32
        self._owned: list = []
        self._bias_lock = threading.Lock() if key.epilogue == "BIAS" else None
        self._bias_ptr = None
        try:
            self.desc = self._own(matmul_desc_create(compute, scale), matmul_desc_destroy)
            op_a, op_b, layouts = geometry.column_major()
            matmul_desc_set(self.desc, MatmulDesc.TRANSA, int(op_a))
            matmul_desc_set(self.desc, MatmulDesc.TRANSB, int(op_b))
            if geometry.sm_count_target:
                matmul_desc_set(self.desc, MatmulDesc.SM_COUNT_TARGET, geometry.sm_count_target)
            if key.epilogue == "BIAS":
                matmul_desc_set(self.desc, MatmulDesc.EPILOGUE, int(Epilogue.BIAS))
            self.layouts = []
            for data_type, rows, cols, ld, stride in layouts:
                layout = self._own(layout_create(data_type, rows, cols, ld), layout_destroy)
                if geometry.batch > 1:
                    layout_batch(layout, geometry.batch, stride)
                self.layouts.append(layout)
            types = tuple(layout[0] for layout in (*layouts, layouts[2]))
            self.algo = (algo_init(lt_handle, compute, scale, types, algo) if algo else
                         self._heuristic(workspace_bytes, reduction_scheme_mask))
        except BaseException:
            self.close()
            raise
        self._algo_ref = ctypes.pointer(self.algo)
        self._matmul = library().cublasLtMatmul

    def _own(self, value: int, destroy) -> int:
        self._owned.append((value, destroy))
        return value

    def _heuristic(self, workspace_bytes: int, reduction_scheme_mask: int | None) -> MatmulAlgo:
        preference = self._own(preference_create(), preference_destroy)
        preference_set(preference, Preference.MAX_WORKSPACE_BYTES, workspace_bytes)
        if reduction_scheme_mask is not None:
            preference_set(preference, Preference.REDUCTION_SCHEME_MASK, reduction_scheme_mask,
                                     c_int)
        found = heuristic(self.handle, self.desc, (*self.layouts, self.layouts[2]), preference)
        if not found:
            raise CublasError(15, "cublasLtMatmulAlgoGetHeuristic (no algorithm for these options)")
        return found[0].algo

    def algorithm(self) -> tuple:
        """The algorithm it runs, as sorted ``(name, value)`` pairs (a configuration's ``lt_algo``)."""
        return tuple(sorted(algo_config(self.algo).items()))

    def run(self, alpha: int, a: int, b: int, beta: int, d: int, workspace: int, workspace_bytes: int, stream: int,
            bias: int = 0) -> None:
        """``d = alpha op(a) @ op(b) + beta d`` (+ ``bias``) on ``stream``: device pointers, host scalars' addresses."""
        if self._bias_lock is None:
            status = self._matmul(self.handle, self.desc, alpha, b, self.layouts[0], a, self.layouts[1], beta, d,
                                  self.layouts[2], d, self.layouts[2], self._algo_ref, workspace, workspace_bytes,
                                  stream)
        else:
            with self._bias_lock:  # the bias is the descriptor's: set and used in one step
                if bias != self._bias_ptr:
                    matmul_desc_set(self.desc, MatmulDesc.BIAS_POINTER, bias, c_void_p)
                    self._bias_ptr = bias
                status = self._matmul(self.handle, self.desc, alpha, b, self.layouts[0], a, self.layouts[1], beta,
                                      d, self.layouts[2], d, self.layouts[2], self._algo_ref, workspace,
                                      workspace_bytes, stream)
        if status:
            raise CublasError(status, "cublasLtMatmul")

    def close(self) -> None:
        """Destroy its descriptors, all even if one fails; raise the first failure (idempotent)."""
        owned, self._owned = self._owned, []
        failures = []
        for value, destroy in reversed(owned):
            try:
                destroy(value)
            except CublasError as err:
                failures.append(err)
        if failures:
            raise failures[0]
