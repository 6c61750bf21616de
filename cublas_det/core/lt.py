""":class:`GemmKey`, a GEMM's one identity, and :meth:`GemmKey.laid_out`, the key as it lies in memory: the one
place a row-major GEMM becomes cuBLAS's column-major :class:`~.definition.GemmDefinition`. Its plan:
:class:`~.plan.LtPlan`; cuBLASLt's ctypes layer: :mod:`cublas_det.bindings.cublaslt`."""

from __future__ import annotations

import dataclasses

from ..bindings.cublas import HALF_SCALAR_COMPUTE, ComputeType
from ..base.dtypes import GEMM_TYPES
from .definition import GemmDefinition
from .shapes import cublas_op, other_layout, packed_strides, shape_spec

_F32_NAME = GEMM_TYPES["float32"].cuda_name
TF32_COMPUTE = ComputeType.COMPUTE_32F_FAST_TF32.name  # fp32 as TF32: the TF32 math mode, torch's allow_tf32


@dataclasses.dataclass(frozen=True)
class GemmKey:
    """A GEMM's identity, the one the lock, the router, prescribe and the cuBLASLt path share: row-major
    ``op(A)[M,K] @ op(B)[K,N]`` (each matrix of a batch) with its types, compute type and epilogue; no batch
    count, as one pinned algorithm serves every batch count and the unbatched call. Its layout in memory:
    :meth:`laid_out`."""

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

    def laid_out(self, lda: int, ldb: int, ldd: int, batch: int = 1, strides: tuple = (0, 0, 0),
                 sm_count_target: int = 0) -> GemmDefinition:
        """This key (its M set) as cuBLASLt runs it on operands in memory: the column-major call, whose A is our
        B and whose B is our A. ``lda``, ``ldb``, ``ldd`` and, for a strided batch of ``batch``, ``strides`` (in
        elements, 0: one matrix shared by the batch) are in our row-major naming: A, B, D. ``sm_count_target``:
        0 for the device's. The one place a row-major GEMM turns column-major for cuBLASLt."""
        # cuBLAS's m, n, k and the transposes of its A (our B) and B (our A)
        m, n, k, trans_first, trans_second = other_layout(self.m, self.n, self.k, self.trans_a, self.trans_b)
        a_stride, b_stride, d_stride = strides
        ab_type, c_type = GEMM_TYPES[self.input_dtype].cuda_name, GEMM_TYPES[self.output_dtype].cuda_name
        # alpha and beta are in the output's type for a half compute type, else fp32 (cuBLASLt's rule)
        scale_type = c_type if ComputeType[self.compute_type] in HALF_SCALAR_COMPUTE else _F32_NAME
        bias = self.epilogue == "BIAS"
        return GemmDefinition("cublasLtMatmul", "T" if trans_first else "N", "T" if trans_second else "N", m, n, k,
                              ldb, lda, ldd, ab_type, ab_type, c_type, self.compute_type, batch_count=batch,
                              strides=(b_stride, a_stride, d_stride) if batch > 1 else None, scale_type=scale_type,
                              epilogue="EPILOGUE_BIAS" if bias else "EPILOGUE_DEFAULT", bias=bias,
                              sm_count_target=sm_count_target or None)  # None: no target set, as a capture has it

    def packed(self, batch: int = 1) -> GemmDefinition:
        """:meth:`laid_out` with row-major operands packed one after another, as a C-contiguous array holds them."""
        m, n, k = self.m, self.n, self.k
        b_stride, a_stride, d_stride = packed_strides(m, n, k)  # cuBLAS's operand order: our B first
        return self.laid_out(m if self.trans_a else k, k if self.trans_b else n, n, batch,
                             (a_stride, b_stride, d_stride))

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
