"""A row-major GEMM through cuBLASLt: the heuristic's algorithm or a pinned one, an SM-count target, a
reduction-scheme mask, a bias epilogue.

The groundwork of the Lt path: :class:`LtGemm` prepares one ``cublasLtMatmul`` on fixed operands
and issues it; the algorithm it runs can be read (:attr:`LtGemm.algo`) and given back to pin it
(``LtOptions(algo=...)``), on this host or another. The same operand swap as :func:`cublas_det.gemm`
turns row-major ``out = op(a) @ op(b)`` into cuBLASLt's column-major call.
"""

from __future__ import annotations

import dataclasses
from ctypes import addressof, c_int, c_void_p

from . import _cublaslt as lt
from ._cublas import ComputeType
from .call import _as_cupy, _bind, _check_operand, _scalars
from .config import ELEMENT_TYPES, HALF_SCALAR_COMPUTE, check_types
from .memory import WORKSPACE_BYTES


@dataclasses.dataclass(frozen=True)
class LtOptions:
    """What a cuBLASLt GEMM may choose, and what it is told."""

    sm_count_target: int = 0  # 0: the device's own SM count
    reduction_scheme_mask: int | None = None  # None: every scheme (split-K allowed); 0: none (no split-K)
    algo: tuple = ()  # a pinned algorithm: sorted (name, value) of _cublaslt.algo_config; () = the heuristic's
    workspace_bytes: int = WORKSPACE_BYTES


class LtGemm:
    """One prepared cuBLASLt matmul, ``out = op(a) @ op(b) [+ bias]``, row-major; call it to issue it.

    ``bias`` (length N, the output's type) selects the BIAS epilogue, as PyTorch's biased Linear does.
    Close it (or use it as a context manager) to free its descriptors, workspace and handle.
    """

    def __init__(self, a, b, out, *, trans_a: bool = False, trans_b: bool = False, bias=None,
                 compute_type: ComputeType = ComputeType.COMPUTE_32F, options: LtOptions = LtOptions()):
        cupy = _bind()
        a, b, out = (_as_cupy(name, x) for name, x in (("a", a), ("b", b), ("out", out)))
        for name, x in (("a", a), ("b", b), ("out", out)):
            _check_operand(name, x, cupy.ndarray)
        (a_rows, a_cols), (b_rows, b_cols) = a.shape, b.shape
        m, k = (a_cols, a_rows) if trans_a else (a_rows, a_cols)
        k_b, n = (b_cols, b_rows) if trans_b else (b_rows, b_cols)
        if k != k_b or out.shape != (m, n):
            raise ValueError(f"op(a) is {m}x{k}, op(b) {k_b}x{n}, out {out.shape}: they do not multiply")
        check_types(a.dtype.name, out.dtype.name, compute_type)
        self._keep = (a, b, out, bias)
        self.out = out
        ab, c = int(ELEMENT_TYPES[a.dtype.name].cuda), int(ELEMENT_TYPES[out.dtype.name].cuda)
        scale = c if compute_type in HALF_SCALAR_COMPUTE else int(ELEMENT_TYPES["float32"].cuda)
        self._scalars = _scalars(1.0, 0.0, int(compute_type))
        self._handle = lt.create()
        self._owned = []
        try:
            self._desc = self._own(lt.matmul_desc_create(int(compute_type), scale), lt.matmul_desc_destroy)
            # Column-major C^T = op(b)^T op(a)^T: cuBLASLt's A is our b, its B our a.
            lt.matmul_desc_set(self._desc, lt.MatmulDesc.TRANSA, int(trans_b))
            lt.matmul_desc_set(self._desc, lt.MatmulDesc.TRANSB, int(trans_a))
            if options.sm_count_target:
                lt.matmul_desc_set(self._desc, lt.MatmulDesc.SM_COUNT_TARGET, options.sm_count_target)
            if bias is not None:
                bias = _as_cupy("bias", bias)
                if bias.shape != (n,) or bias.dtype != out.dtype:
                    raise ValueError(f"bias must be a vector of {n} {out.dtype}, not {bias.shape} {bias.dtype}")
                lt.matmul_desc_set(self._desc, lt.MatmulDesc.EPILOGUE, int(lt.Epilogue.BIAS))
                lt.matmul_desc_set(self._desc, lt.MatmulDesc.BIAS_POINTER, bias.data.ptr, c_void_p)
                self._keep += (bias,)
            self._layouts = tuple(self._own(lt.layout_create(t, rows, cols, rows), lt.layout_destroy) for t, rows, cols in (
                (ab, b_cols, b_rows), (ab, a_cols, a_rows), (c, n, m), (c, n, m)))
            self._workspace = cupy.cuda.alloc(options.workspace_bytes) if options.workspace_bytes else None
            self._workspace_bytes = options.workspace_bytes
            if options.algo:
                self._algo = lt.algo_init(self._handle, int(compute_type), scale, (ab, ab, c, c), dict(options.algo))
            else:
                preference = self._own(lt.preference_create(), lt.preference_destroy)
                lt.preference_set(preference, lt.Preference.MAX_WORKSPACE_BYTES, options.workspace_bytes)
                if options.reduction_scheme_mask is not None:
                    lt.preference_set(preference, lt.Preference.REDUCTION_SCHEME_MASK, options.reduction_scheme_mask,
                                      c_int)
                found = lt.heuristic(self._handle, self._desc, self._layouts, preference)
                if not found:
                    raise lt.CublasError(15, "cublasLtMatmulAlgoGetHeuristic (no algorithm for these options)")
                self._algo = found[0].algo
            self.algo = tuple(sorted(lt.algo_config(self._algo).items()))
        except BaseException:
            self.close()
            raise

    def _own(self, value: int, destroy) -> int:
        self._owned.append((value, destroy))
        return value

    def __call__(self, stream=None):
        """Issue the matmul on ``stream`` (a ``cupy.cuda.Stream``; default: CuPy's current stream)."""
        cupy = _bind()
        stream_ptr = (stream or cupy.cuda.get_current_stream()).ptr
        a, b, out = self._keep[:3]
        lt.matmul(self._handle, self._desc, addressof(self._scalars[0]), b.data.ptr, self._layouts[0], a.data.ptr,
                  self._layouts[1], addressof(self._scalars[1]), out.data.ptr, self._layouts[2], out.data.ptr,
                  self._layouts[3], self._algo, self._workspace.ptr if self._workspace is not None else 0,
                  self._workspace_bytes if self._workspace is not None else 0, stream_ptr)
        return out

    def close(self) -> None:
        while self._owned:
            value, destroy = self._owned.pop()
            destroy(value)
        if self._handle:
            lt.destroy(self._handle)
            self._handle = 0

    def __enter__(self) -> LtGemm:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def split_k(algo: tuple) -> bool:
    """Whether an algorithm (``LtGemm.algo``) splits K: its partial sums depend on how K is cut."""
    config = dict(algo)
    return config.get("splitk", 1) > 1 or config.get("reduction_scheme", 0) != 0
