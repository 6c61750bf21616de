""":class:`GemmKey`, a GEMM's one identity, and :class:`Geometry`, its layout in memory: the one place a row-major
GEMM becomes cuBLASLt's column-major one. Its plan: :class:`~.plan.LtPlan`; cuBLASLt's ctypes layer:
:mod:`cublas_det.bindings.cublaslt`."""

from __future__ import annotations

import dataclasses

from ..bindings.cublas import ComputeType
from ..base.dtypes import GEMM_TYPES
from .shapes import cublas_op, packed_strides, shape_spec

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
