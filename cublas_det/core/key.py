""":class:`GemmKey`, a GEMM's one identity, and the one conversion between it and cuBLAS's column-major
:class:`~.definition.GemmDefinition`, both ways: :meth:`GemmKey.laid_out` (the key as it lies in memory, the call
cuBLASLt or cublasGemmEx runs) and :func:`key_of` / :func:`plan` (a captured call as the shim's row-major shape and
configuration, a :class:`ReplayPlan`, or why not; ``M, N, K = n, m, k`` with the transposes swapped is the same
cuBLAS call when operands are packed). Its plan: :class:`~.plan.LtPlan`."""

from __future__ import annotations

import dataclasses

from ..base.dtypes import GEMM_TYPES
from ..bindings.cublas import HALF_SCALAR_COMPUTE, MATH_MODE_FLAGS, ComputeType, MathMode
from .config import FP32_ONLY_MODES, GemmConfig
from .definition import GemmDefinition
from .shapes import GemmShape, catalogue_entry, cublas_op, other_layout, packed_strides, shape_spec, token_counts

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
                 sm_count_target: int = 0, algo: int | None = None) -> GemmDefinition:
        """This key (its M set) as cuBLAS runs it on operands in memory: the column-major call, whose A is our B
        and whose B is our A. ``lda``, ``ldb``, ``ldd`` and, for a strided batch of ``batch``, ``strides`` (in
        elements, 0: one matrix shared by the batch) are in our row-major naming: A, B, D. ``sm_count_target``:
        0 for the device's. ``algo`` None: the cuBLASLt call; a ``cublasGemmAlgo_t``: the cublasGemmEx call
        (strided batched for a batch) with it, which has no epilogue and no SM-count target of its own (the
        handle's holds). The one place a row-major GEMM turns column-major."""
        # cuBLAS's m, n, k and the transposes of its A (our B) and B (our A)
        m, n, k, trans_first, trans_second = other_layout(self.m, self.n, self.k, self.trans_a, self.trans_b)
        a_stride, b_stride, d_stride = strides
        ab_type, c_type = GEMM_TYPES[self.input_dtype].cuda_name, GEMM_TYPES[self.output_dtype].cuda_name
        call = ("T" if trans_first else "N", "T" if trans_second else "N", m, n, k, ldb, lda, ldd, ab_type, ab_type,
                c_type, self.compute_type)
        batched = {"batch_count": batch, "strides": (b_stride, a_stride, d_stride) if batch > 1 else None}
        if algo is not None:
            return GemmDefinition("cublasGemmStridedBatchedEx" if batch > 1 else "cublasGemmEx", *call, algo=algo,
                                  **batched)
        # alpha and beta are in the output's type for a half compute type, else fp32 (cuBLASLt's rule)
        scale_type = c_type if ComputeType[self.compute_type] in HALF_SCALAR_COMPUTE else _F32_NAME
        bias = self.epilogue == "BIAS"
        return GemmDefinition("cublasLtMatmul", *call, **batched, scale_type=scale_type,
                              epilogue="EPILOGUE_BIAS" if bias else "EPILOGUE_DEFAULT", bias=bias,
                              sm_count_target=sm_count_target or None)  # None: no target set, as a capture has it

    def packed(self, batch: int = 1, algo: int | None = None) -> GemmDefinition:
        """:meth:`laid_out` with row-major operands packed one after another, as a C-contiguous array holds them."""
        m, n, k = self.m, self.n, self.k
        b_stride, a_stride, d_stride = packed_strides(m, n, k)  # cuBLAS's operand order: our B first
        return self.laid_out(m if self.trans_a else k, k if self.trans_b else n, n, batch,
                             (a_stride, b_stride, d_stride), algo=algo)

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


_DTYPES = {element.cuda_name: name for name, element in GEMM_TYPES.items()}  # R_32F -> float32 ...
_SCALE_TYPES = (None, *(GEMM_TYPES[name].cuda_name for name in ("float32", "float16")))  # as core/handle.py sets them
_REPLAYED_APIS = {f"cublas{name}{form}{ex}" for name, ex in (("Sgemm", ""), ("Hgemm", ""), ("Gemm", "Ex"))
                  for form in ("", "StridedBatched", "Batched")}


@dataclasses.dataclass(frozen=True)
class ReplayPlan:
    """One captured GEMM as the shim runs it: ``shape`` and ``config``, or ``reason`` it is not replayed."""

    gemm_id: str
    definition: GemmDefinition
    calls: int
    like: str = ""  # the catalogue role of the same shape, e.g. mamba2-130m/in_proj/dW
    shape: GemmShape | None = None
    config: GemmConfig | None = None
    reason: str = ""  # "needs ...", when not replayed
    note: str = ""  # how the replay differs from the call, where it does

    @property
    def replayed(self) -> bool:
        return self.shape is not None


def shape_of(definition: GemmDefinition, name: str = "capture") -> GemmShape:
    """The shim's row-major shape of a captured column-major call: the one place a cuBLAS call turns row-major."""
    m, n, k, trans_a, trans_b = other_layout(definition.m, definition.n, definition.k, definition.transa != "N",
                                             definition.transb != "N")
    return GemmShape(name, m, n, k, trans_a, trans_b, preset="capture", batch=definition.batch_count)


def like(shape: GemmShape) -> str:
    """The catalogue name of the same row-major GEMM at any token count, or ``""``."""
    same = (shape.m, shape.n, shape.k, shape.trans_a, shape.trans_b)
    found = catalogue_entry(lambda s: (s.m, s.n, s.k, s.trans_a, s.trans_b) == same, token_counts(shape.m, shape.k))
    return found.name if found else ""


def plan(gemm_id: str, definition: GemmDefinition, calls: int) -> ReplayPlan:
    shape = shape_of(definition)
    role = like(shape) if definition.batch_count == 1 else ""  # the catalogue has no batches
    base = ReplayPlan(gemm_id, definition, calls, role)
    reason = _unsupported(definition)
    if reason:
        return dataclasses.replace(base, reason=reason)
    notes = []
    try:
        config = _config(definition, notes)
    except ValueError as err:
        return dataclasses.replace(base, reason=f"needs what the shim refuses: {err}")
    shape = dataclasses.replace(shape, name=f"{gemm_id} {role or 'capture'}")
    m, n, k = shape.m, shape.n, shape.k
    tight = (shape.b_shape[-1], shape.a_shape[-1], n)  # cuBLAS's lda, ldb, ldc of packed operands
    captured = (definition.lda, definition.ldb, definition.ldc)
    if captured != tight:
        notes.append(f"replayed with packed operands: the call's lda, ldb, ldc were {', '.join(map(str, captured))}, "
                     f"packed {', '.join(map(str, tight))}")
    if definition.batch_count == 1 and "Batched" in definition.api:
        notes.append(f"a batch of one: replayed as one GEMM (cublasGemmEx), not as {definition.api}")
    packed = packed_strides(m, n, k)
    if definition.batch_count > 1 and definition.strides is None:
        notes.append("the call passed arrays of pointers: replayed as one strided batch "
                     "(cublasGemmStridedBatchedEx) of packed matrices")
    elif definition.batch_count > 1 and tuple(definition.strides) != packed:
        notes.append(f"replayed with packed matrices: the call's strides were "
                     f"{', '.join(map(str, definition.strides))}, packed {', '.join(map(str, packed))}")
    return dataclasses.replace(base, shape=shape, config=config, note="; ".join(notes))


def key_of(definition: GemmDefinition) -> GemmKey | None:
    """The GemmKey (its M set) of a captured or intercepted call, by the capture's own path; None when the shim
    does not run such a call. The inverse of :meth:`GemmKey.laid_out`."""
    replay = plan("call", definition, 1)
    return GemmKey.of(replay.shape, replay.config, any_m=False) if replay.replayed else None


def _config(definition: GemmDefinition, notes: list) -> GemmConfig:
    """The shim's configuration of a call ``_unsupported`` passed, a note where it differs; ValueError if refused."""
    types = (ComputeType[definition.compute_type], _DTYPES[definition.a_type], _DTYPES[definition.c_type])
    if definition.is_lt:  # cuBLASLt takes no math mode: its compute type says it all
        return GemmConfig(MathMode.DEFAULT, False, *types, workspace_bytes=definition.workspace_bytes, api="lt",
                          lt_epilogue="BIAS" if definition.epilogue == "EPILOGUE_BIAS" else "",
                          lt_sm_count_target=definition.sm_count_target or 0)  # 0: the call set none
    mode, flag = definition.math_mode & ~MATH_MODE_FLAGS, definition.math_mode & MATH_MODE_FLAGS
    if mode in FP32_ONLY_MODES and _DTYPES[definition.a_type] != "float32":
        notes.append(f"{MathMode(mode).name} math has no effect on {definition.a_type} inputs: replayed as DEFAULT")
        mode = MathMode.DEFAULT
    return GemmConfig(MathMode(mode), bool(flag), *types, -1 if definition.algo is None else definition.algo,
                      definition.workspace_bytes)


def _unsupported(definition: GemmDefinition) -> str:
    if definition.is_lt and definition.epilogue not in (None, "EPILOGUE_DEFAULT", "EPILOGUE_BIAS"):
        return f"needs the {definition.epilogue} epilogue in the cuBLASLt path (it has DEFAULT and BIAS)"
    if definition.is_lt and definition.scale_type not in _SCALE_TYPES:
        return f"needs scale type {definition.scale_type}"
    if definition.api not in _REPLAYED_APIS and not definition.is_lt:
        return f"needs {definition.api}"
    for what, name in (("A", definition.a_type), ("B", definition.b_type), ("C", definition.c_type)):
        if name not in _DTYPES:
            return f"needs {name} {what} (the shim takes {', '.join(_DTYPES)})"
    if definition.a_type != definition.b_type:
        return f"needs A and B of different types ({definition.a_type}, {definition.b_type})"
    if definition.compute_type not in ComputeType.__members__:
        return f"needs {definition.compute_type}"
    if definition.workspace_unknown:
        return "needs the handle's workspace, set by a call the log lost"
    mode = definition.math_mode
    if mode is None and not definition.is_lt:
        return "needs the handle's math mode, which the log does not show"
    if mode is not None and mode & ~MATH_MODE_FLAGS not in set(MathMode) - {MathMode(MATH_MODE_FLAGS)}:
        return f"needs math mode {mode & ~MATH_MODE_FLAGS}"
    return ""


def plans(gemms) -> list[ReplayPlan]:
    return [plan(gemm_id, definition, calls) for gemm_id, definition, calls in gemms]
