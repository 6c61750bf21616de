""":class:`LtPlan`, one cuBLASLt matmul made once and run many times (as nvmath-python's ``Matmul``): the plan of a
:class:`~.lt.Geometry`, which ``Handle(api="lt")``, the lock's router and ``prescribe`` share."""

from __future__ import annotations

import ctypes
import threading
from ctypes import c_int, c_void_p

from ..base.dtypes import GEMM_TYPES
from ..bindings import cublaslt
from ..bindings.cublas import HALF_SCALAR_COMPUTE, ComputeType, CublasError
from .lt import Geometry

_F32 = GEMM_TYPES["float32"].cuda


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
            self.desc = self._own(cublaslt.matmul_desc_create(compute, scale), cublaslt.matmul_desc_destroy)
            op_a, op_b, layouts = geometry.column_major()
            cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.TRANSA, int(op_a))
            cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.TRANSB, int(op_b))
            if geometry.sm_count_target:
                cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.SM_COUNT_TARGET, geometry.sm_count_target)
            if key.epilogue == "BIAS":
                cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.EPILOGUE, int(cublaslt.Epilogue.BIAS))
            self.layouts = []
            for data_type, rows, cols, ld, stride in layouts:
                layout = self._own(cublaslt.layout_create(data_type, rows, cols, ld), cublaslt.layout_destroy)
                if geometry.batch > 1:
                    cublaslt.layout_batch(layout, geometry.batch, stride)
                self.layouts.append(layout)
            types = tuple(layout[0] for layout in (*layouts, layouts[2]))
            self.algo = (cublaslt.algo_init(lt_handle, compute, scale, types, algo) if algo else
                         self._heuristic(workspace_bytes, reduction_scheme_mask))
        except BaseException:
            self.close()
            raise
        self._algo_ref = ctypes.pointer(self.algo)
        self._matmul = cublaslt.library().cublasLtMatmul

    def _own(self, value: int, destroy) -> int:
        self._owned.append((value, destroy))
        return value

    def _heuristic(self, workspace_bytes: int, reduction_scheme_mask: int | None) -> cublaslt.MatmulAlgo:
        preference = self._own(cublaslt.preference_create(), cublaslt.preference_destroy)
        cublaslt.preference_set(preference, cublaslt.Preference.MAX_WORKSPACE_BYTES, workspace_bytes)
        if reduction_scheme_mask is not None:
            cublaslt.preference_set(preference, cublaslt.Preference.REDUCTION_SCHEME_MASK, reduction_scheme_mask, c_int)
        found = cublaslt.heuristic(self.handle, self.desc, (*self.layouts, self.layouts[2]), preference)
        if not found:
            raise CublasError(15, "cublasLtMatmulAlgoGetHeuristic (no algorithm for these options)")
        return found[0].algo

    def algorithm(self) -> tuple:
        """The algorithm it runs, as sorted ``(name, value)`` pairs (a configuration's ``lt_algo``)."""
        return tuple(sorted(cublaslt.algo_config(self.algo).items()))

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
                    cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.BIAS_POINTER, bias, c_void_p)
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
