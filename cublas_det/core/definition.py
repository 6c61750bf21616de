"""A GEMM call as cuBLAS takes it (column-major): its API, ops, dimensions, leading dimensions, types, compute
type and the handle's state. Every front door that meets a cuBLAS call makes one: the log parser, the capture
file, the interposer's table and its reports."""

from __future__ import annotations

import dataclasses

from ..base.dtypes import BY_CUDA_NAME
from ..base.integers import is_int
from ..bindings.cublas import ComputeType, GemmAlgo, Operation

MAX_INT = (1 << 63) - 1  # cuBLAS's widest integer arguments (the _64 API's int64_t)
GEMM_EX_APIS = ("cublasGemmEx", "cublasGemmStridedBatchedEx")  # the calls gemm_ex_args gives the arguments of
OPERATIONS = {op.name: int(op) for op in Operation}  # as plain ints: cublasGemmEx's arguments go untyped


class InvalidGemm(ValueError):
    """Arguments no GEMM has (m = 0, a leading dimension below its matrix's rows ...): not replayable."""


@dataclasses.dataclass(frozen=True)
class GemmDefinition:
    """What defines one GEMM call, and the state of its handle at that moment."""

    api: str  # cublasGemmEx, cublasSgemm, cublasGemmStridedBatchedEx, cublasLtMatmul ...
    transa: str  # N, T or C
    transb: str
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    a_type: str  # R_16BF, R_32F ...
    b_type: str
    c_type: str
    compute_type: str  # COMPUTE_32F ...
    algo: int | None = None  # cublasGemmAlgo_t of the cuBLAS API; None for cuBLASLt
    batch_count: int = 1
    strides: tuple | None = None  # (A, B, C) in elements, strided batched calls only
    math_mode: int | None = None  # the handle's cublasMath_t (cuBLAS API)
    workspace_bytes: int | None = None  # the handle's user workspace (None: cuBLAS's own) or Lt's
    scale_type: str | None = None  # cuBLASLt from here on
    epilogue: str | None = None
    bias: bool = False
    sm_count_target: int | None = None
    preference: tuple = ()  # the heuristic's preference: sorted (name, value)
    lt_algo: tuple = ()  # the algorithm that ran: sorted (name, value), algoId, tile, numSplitsK ...
    workspace_unknown: bool = False  # a call that set the handle's workspace was unread: never a value then

    @property
    def is_lt(self) -> bool:
        return self.api == "cublasLtMatmul"

    def launched(self) -> GemmDefinition:
        """What a cuBLAS call and the cuBLASLt kernel it launched both show of it (ops, dimensions, leading
        dimensions, A's and C's types, batch): the two are joined on it, since the kernel's log line names no call."""
        return GemmDefinition("", self.transa, self.transb, self.m, self.n, self.k, self.lda, self.ldb, self.ldc,
                              self.a_type, self.a_type, self.c_type, "", batch_count=self.batch_count)

    def gemm_ex_args(self, alpha: int, a: int, b: int, beta: int, d: int) -> tuple:
        """Its arguments after the handle as ``cublasGemmEx`` takes them (``cublasGemmStridedBatchedEx``, with the
        count and strides last, for a batch), on the row-major operands ``a``, ``b``, ``d`` (cuBLAS's A is ``b``)
        and the host addresses of ``alpha`` and ``beta``; its ``algo`` None: cuBLAS's default. InvalidGemm for a call
        of another API (a cuBLASLt call's epilogue would be lost; a batch of pointer arrays has no strides)."""
        if self.api not in GEMM_EX_APIS:
            raise InvalidGemm(f"a {self.api} call has no cublasGemmEx arguments; only {' and '.join(GEMM_EX_APIS)}")
        args = (OPERATIONS[self.transa], OPERATIONS[self.transb], self.m, self.n, self.k, alpha, b,
                BY_CUDA_NAME[self.a_type].cuda, self.lda, a, BY_CUDA_NAME[self.b_type].cuda, self.ldb, beta, d,
                BY_CUDA_NAME[self.c_type].cuda, self.ldc, int(ComputeType[self.compute_type]),
                int(GemmAlgo.DEFAULT) if self.algo is None else self.algo)
        return args + (self.batch_count, *self.strides) if self.batch_count > 1 else args

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "strides": list(self.strides) if self.strides else None,
                "preference": dict(self.preference), "lt_algo": dict(self.lt_algo)}

    def __post_init__(self):
        # Here, so that every definition the parser makes is one the file's reader takes back.
        for name in ("api", "transa", "transb", "a_type", "b_type", "c_type", "compute_type", "scale_type", "epilogue"):
            value, nullable = getattr(self, name), name in ("scale_type", "epilogue")
            if not isinstance(value, str) and not (nullable and value is None):
                raise InvalidGemm(f"{name} must be a string{' or null' * nullable}, not {value!r}")
        if self.transa not in ("N", "T", "C") or self.transb not in ("N", "T", "C"):
            raise InvalidGemm(f"transa and transb must be N, T or C, not {self.transa!r}, {self.transb!r}")
        for name in ("m", "n", "k", "lda", "ldb", "ldc", "batch_count"):
            _check_int(name, getattr(self, name), 1)
        for name, low in (("algo", -MAX_INT), ("math_mode", 0), ("workspace_bytes", 0), ("sm_count_target", 0)):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), low)
        if self.strides is not None and len(self.strides) != 3:
            raise InvalidGemm(f"strides must be 3 (A, B, C), not {len(self.strides)}")
        for name, value in zip(("strideA", "strideB", "strideC"), self.strides or ()):
            _check_int(name, value, 0)  # 0: one matrix broadcast over the batch
        for ld, rows in (("lda", "m" if self.transa == "N" else "k"), ("ldb", "k" if self.transb == "N" else "n"),
                         ("ldc", "m")):
            if getattr(self, ld) < getattr(self, rows):
                raise InvalidGemm(f"{ld} = {getattr(self, ld)} is below {rows} = {getattr(self, rows)}, the rows of "
                                  f"its matrix (op {self.transa}{self.transb}): cuBLAS refuses the call")
        for name, ld, cols in (("A", self.lda, self.k if self.transa == "N" else self.m),
                               ("B", self.ldb, self.n if self.transb == "N" else self.k), ("C", self.ldc, self.n)):
            if ld * cols * self.batch_count > MAX_INT:  # its elements are past what a 64-bit offset reaches
                raise InvalidGemm(f"{name} of {ld} x {cols} x {self.batch_count} elements: more than any memory holds")

    @classmethod
    def from_dict(cls, data: dict) -> GemmDefinition:
        """The definition of a capture file's GEMM, its fields' types checked (apilog.file._GEMM)."""
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        return cls(**{**values, "strides": tuple(values["strides"]) if values.get("strides") else None,
                      "bias": bool(values.get("bias")),
                      **{name: tuple(sorted((values.get(name) or {}).items())) for name in ("preference", "lt_algo")}})


def _check_int(name: str, value, low: int) -> None:
    if not is_int(value):
        raise InvalidGemm(f"{name} must be an int, not {value!r}")
    if value < low or value > MAX_INT:
        what = " (a GEMM of no elements: a no-op)" if value == 0 and low == 1 else ""
        raise InvalidGemm(f"{name} = {value}{what}: out of bounds ({low} to 2**63 - 1)")
