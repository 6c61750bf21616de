""":class:`LtPlan`, one cuBLASLt matmul made once and run many times (as nvmath-python's ``Matmul``): the plan of a
:class:`~.definition.GemmDefinition` in cuBLAS's column-major terms (a :class:`~.key.GemmKey` gives it by
:meth:`~.key.GemmKey.laid_out`). :func:`plan_for` makes one per GEMM per process, which ``Handle(api="lt")``, the
lock's router and ``prescribe`` share."""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import c_int, c_void_p

from ..base.dtypes import BY_CUDA_NAME
from ..bindings import cublaslt
from ..bindings.cublas import ComputeType, CublasError
from .definition import GemmDefinition


class LtPlan:
    """One cuBLASLt matmul: the descriptor, layouts and algorithm of one cuBLASLt
    :class:`~.definition.GemmDefinition`, ``algo`` pinned (an ``algo_config`` dict) or the
    heuristic's first pick for ``workspace_bytes`` (and a reduction-scheme mask). :meth:`run` issues it;
    :meth:`close` frees it."""

    def __init__(self, handle: int, definition: GemmDefinition, algo: dict | None = None, workspace_bytes: int = 0,
                 reduction_scheme_mask: int | None = None):
        self.handle, self.definition = handle, definition
        d = definition
        compute, scale = int(ComputeType[d.compute_type]), BY_CUDA_NAME[d.scale_type].cuda
        # cuBLAS's A is m x k (k x m under T), B k x n (n x k under T), D m x n; a batch's strides set alone
        types = tuple(BY_CUDA_NAME[name].cuda for name in (d.a_type, d.b_type, d.c_type))
        strides = d.strides if d.batch_count > 1 else (0, 0, 0)
        layouts = ((types[0], *((d.m, d.k) if d.transa == "N" else (d.k, d.m)), d.lda, strides[0]),
                   (types[1], *((d.k, d.n) if d.transb == "N" else (d.n, d.k)), d.ldb, strides[1]),
                   (types[2], d.m, d.n, d.ldc, strides[2]))
        bias = d.epilogue == "EPILOGUE_BIAS"
        self._owned: list = []
        self._bias_lock = threading.Lock() if bias else None
        self._bias_ptr = None
        try:
            self.desc = self._own(cublaslt.matmul_desc_create(compute, scale), cublaslt.matmul_desc_destroy)
            cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.TRANSA, int(d.transa != "N"))
            cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.TRANSB, int(d.transb != "N"))
            if d.sm_count_target:
                cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.SM_COUNT_TARGET, d.sm_count_target)
            if bias:
                cublaslt.matmul_desc_set(self.desc, cublaslt.MatmulDesc.EPILOGUE, int(cublaslt.Epilogue.BIAS))
            self.layouts = []
            for data_type, rows, cols, ld, stride in layouts:
                layout = self._own(cublaslt.layout_create(data_type, rows, cols, ld), cublaslt.layout_destroy)
                if d.batch_count > 1:
                    cublaslt.layout_batch(layout, d.batch_count, stride)
                self.layouts.append(layout)
            self.algo = (cublaslt.algo_init(handle, compute, scale, (*types, types[2]), algo) if algo else
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


# One plan per GEMM per process: a definition run by one algorithm on one device is planned once, for every
# handle, the lock's router and prescribe. Plans and each device's cuBLASLt handle live as long as the process
# (a CUDA graph that captured a plan's call may replay after its caller is gone). The heuristic's pick is a plan
# of its own, not the pinned plan of the algorithm it picked: a pinned algorithm is verified as a lock runs it,
# rebuilt from its configuration.
_plans: dict = {}  # (device, definition, pinned algorithm, or the heuristic's workspace and mask) -> LtPlan
_lt_handles: dict = {}  # device -> cuBLASLt handle
_planning = threading.Lock()
_handle_made = threading.Lock()


def plan_for(device: int, definition: GemmDefinition, algo: tuple = (), workspace_bytes: int = 0,
             reduction_scheme_mask: int | None = None) -> LtPlan:
    """The process's plan of ``definition`` on ``device`` (the current one): ``algo`` pinned (sorted ``(name,
    value)`` pairs, a configuration's ``lt_algo``), else the heuristic's first pick for ``workspace_bytes`` (and a
    reduction-scheme mask)."""
    key = (device, definition, algo or ("heuristic", workspace_bytes, reduction_scheme_mask))
    plan = _plans.get(key)
    if plan is None:
        with _planning:
            plan = _plans.get(key)
            if plan is None:
                plan = _plans[key] = LtPlan(lt_handle(device), definition, dict(algo) or None, workspace_bytes,
                                            reduction_scheme_mask)
    return plan


def lt_handle(device: int) -> int:
    """The process's cuBLASLt handle on ``device`` (the current one), made on first use: a handle made with
    ``api="lt"`` asks for it as it is made, so that its first GEMM may run under graph capture."""
    handle = _lt_handles.get(device)
    if handle is None:
        with _handle_made:
            handle = _lt_handles.get(device) or _lt_handles.setdefault(device, cublaslt.create())
    return handle


def plans_made() -> int:
    """How many plans this process holds."""
    return len(_plans)


def _forget_the_parents() -> None:
    """In a forked child: the parent's cuBLASLt objects are not this process's to use or free."""
    global _planning, _handle_made
    _plans.clear(), _lt_handles.clear()
    _planning, _handle_made = threading.Lock(), threading.Lock()  # a thread of the parent may have held them


os.register_at_fork(after_in_child=_forget_the_parents)
