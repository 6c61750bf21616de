"""The cuBLASLt path: a handle's GEMMs issued as ``cublasLtMatmul`` from cublasGemmEx's own arguments.

A configuration with ``api="lt"`` gives its handle an :class:`LtPath`; ``gemm()``, ``prepare_gemm()``
and every check and timing then run through it, unchanged: the arguments cuBLAS would take are
turned into cuBLASLt's layouts and descriptor once per GEMM and SM-count target, and reused. What
cuBLASLt is told comes from the configuration: a reduction-scheme mask, a fixed SM-count target, a
pinned algorithm, the BIAS epilogue. ``cublasLtMatmul`` takes no math mode; TF32 math stands for
the ``COMPUTE_32F_FAST_TF32`` compute type here, as it engages TF32 in cublasGemmEx.
"""

from __future__ import annotations

import threading
from ctypes import c_int, c_void_p

from . import _cublaslt as lt
from ._cublas import GEMM_EX_ARGS, ComputeType, MathMode
from .config import HALF_SCALAR_COMPUTE, GemmConfig
from .dtypes import BY_CUDA, GEMM_TYPES

_bias_vectors: dict = {}  # (device, length, type) -> the bias an epilogue adds when the caller gives none


def _bias(length: int, data_type: int) -> int:
    """A bias vector drawn once per device, length and type (seed 0): the same bits in every process."""
    import cupy

    key = (cupy.cuda.runtime.getDevice(), length, data_type)
    vector = _bias_vectors.get(key)
    if vector is None:
        values = cupy.random.default_rng(0).standard_normal(length, dtype=cupy.float32)
        vector = _bias_vectors[key] = values.astype(BY_CUDA[data_type].numpy_dtype)
    return vector.data.ptr


class LtPath:
    """``cublasLtMatmul`` for the GEMMs of one handle, with its configuration's options and workspace."""

    def __init__(self, config: GemmConfig, workspace_ptr: int, workspace_bytes: int):
        self.config = config
        self.handle = lt.create()
        self.workspace = (workspace_ptr, workspace_bytes)
        self._prepared: dict = {}  # GEMM and SM-count target -> (descriptor, layouts, algorithm, owned)
        self._lock = threading.Lock()  # a descriptor is set (bias) and used in one step; prepared once

    def _compute(self, compute: int) -> int:
        if compute == ComputeType.COMPUTE_32F and self.config.math_mode is MathMode.TF32:
            return int(ComputeType.COMPUTE_32F_FAST_TF32)
        return compute

    def _target(self, sm_count_target: int) -> int:
        """The SM count to plan for: the configuration's fixed target and the handle's, the smaller."""
        targets = [t for t in (self.config.lt_sm_count_target, sm_count_target) if t]
        return min(targets) if targets else 0

    def _prepare(self, key: tuple):
        op_a, op_b, m, n, k, lda, ldb, ldc, a_type, b_type, c_type, compute, target, batch = key
        compute = self._compute(compute)
        scale = c_type if compute in HALF_SCALAR_COMPUTE else GEMM_TYPES["float32"].cuda
        owned = []
        try:
            desc = lt.matmul_desc_create(compute, scale)
            owned.append((desc, lt.matmul_desc_destroy))
            lt.matmul_desc_set(desc, lt.MatmulDesc.TRANSA, op_a)
            lt.matmul_desc_set(desc, lt.MatmulDesc.TRANSB, op_b)
            if target:
                lt.matmul_desc_set(desc, lt.MatmulDesc.SM_COUNT_TARGET, target)
            if self.config.lt_epilogue == "BIAS":
                lt.matmul_desc_set(desc, lt.MatmulDesc.EPILOGUE, int(lt.Epilogue.BIAS))
            shapes = ((a_type, *((k, m) if op_a else (m, k)), lda), (b_type, *((n, k) if op_b else (k, n)), ldb),
                      (c_type, m, n, ldc))
            layouts = []
            for (data_type, rows, cols, ld), stride in zip(shapes, batch[1:] or (0, 0, 0)):
                layouts.append(lt.layout_create(data_type, rows, cols, ld))
                owned.append((layouts[-1], lt.layout_destroy))
                if batch:  # a strided batch: (count, stride of A, of B, of C)
                    lt.layout_batch(layouts[-1], batch[0], stride)
            if self.config.lt_algo:
                algo = lt.algo_init(self.handle, compute, scale, (a_type, b_type, c_type, c_type),
                                    dict(self.config.lt_algo))
            else:
                preference = lt.preference_create()
                owned.append((preference, lt.preference_destroy))
                lt.preference_set(preference, lt.Preference.MAX_WORKSPACE_BYTES, self.workspace[1])
                if self.config.lt_reduction_scheme_mask is not None:
                    lt.preference_set(preference, lt.Preference.REDUCTION_SCHEME_MASK,
                                      self.config.lt_reduction_scheme_mask, c_int)
                found = lt.heuristic(self.handle, desc, (layouts[0], layouts[1], layouts[2], layouts[2]), preference)
                if not found:
                    raise lt.CublasError(15, "cublasLtMatmulAlgoGetHeuristic (no algorithm for these options)")
                algo = found[0].algo
        except BaseException:
            for value, destroy in reversed(owned):
                destroy(value)
            raise
        prepared = self._prepared[key] = (desc, layouts, algo, owned)
        return prepared

    def _key(self, args: tuple, sm_count_target: int) -> tuple:
        op_a, op_b, m, n, k, _, _, a_type, lda, _, b_type, ldb, _, _, c_type, ldc, compute, _ = args[:GEMM_EX_ARGS]
        return (op_a, op_b, m, n, k, lda, ldb, ldc, a_type, b_type, c_type, compute, self._target(sm_count_target),
                args[GEMM_EX_ARGS:])  # a batched call's count and strides

    def issue(self, args: tuple, stream_ptr: int, sm_count_target: int = 0, bias_ptr: int = 0,
              workspace: tuple | None = None) -> None:
        """Run the GEMM of cublasGemmEx's arguments ``args`` (after the handle; a batched call's count
        and strides after them) on ``stream_ptr``; ``workspace``: (pointer, bytes) in place of the path's
        own, for a caller with one workspace per stream."""
        key = self._key(args, sm_count_target)
        _, _, m, _, _, alpha, a, _, _, b, _, _, beta, c, c_type, _, _, _ = args[:GEMM_EX_ARGS]
        with self._lock:
            desc, layouts, algo, _ = self._prepared.get(key) or self._prepare(key)
            if self.config.lt_epilogue == "BIAS":
                lt.matmul_desc_set(desc, lt.MatmulDesc.BIAS_POINTER, bias_ptr or _bias(m, c_type), c_void_p)
            lt.matmul(self.handle, desc, alpha, a, layouts[0], b, layouts[1], beta, c, layouts[2], c, layouts[2],
                      algo, *(workspace or self.workspace), stream_ptr)

    def algorithm(self, args: tuple, sm_count_target: int = 0) -> tuple:
        """The algorithm this GEMM runs (sorted (name, value)): a configuration's ``lt_algo`` pins it."""
        key = self._key(args, sm_count_target)
        with self._lock:
            return tuple(sorted(lt.algo_config((self._prepared.get(key) or self._prepare(key))[2]).items()))

    def close(self) -> None:
        """Destroy every descriptor and the cuBLASLt handle, all of them even if one fails (the first
        failure is raised after)."""
        failures = []
        owned = [item for _, _, _, made in self._prepared.values() for item in reversed(made)]
        self._prepared.clear()
        if self.handle:
            owned.append((self.handle, lt.destroy))
            self.handle = 0
        for value, destroy in owned:
            try:
                destroy(value)
            except lt.CublasError as err:
                failures.append(err)
        if failures:
            raise failures[0]


def split_k(algo: tuple) -> bool:
    """Whether an algorithm (``LtPath.algorithm``'s) splits K: its partial sums depend on how K is cut."""
    config = dict(algo)
    return config.get("splitk", 1) > 1 or config.get("reduction_scheme", 0) != 0
