"""The GEMM shapes of a Mamba2 block's forward and backward pass, and ``MxNxK[:op]`` parsing. Shapes are
row-major ``C[M, N] = op(A)[M, K] @ op(B)[K, N]``; the op is cuBLAS's ``transa, transb`` of the column-major
``C^T = op(B)^T op(A)^T``, so its first letter is ``T`` when *B* is stored transposed."""

from __future__ import annotations

import dataclasses
import re

from ..base.integers import is_int
from ..base.words import table

DEFAULT_TOKENS = 16384  # batch 8 x seqlen 2048
DEFAULT_PRESETS = ["trunk", "mamba2-130m"]  # what a command runs without --preset or --shape

# d_model of the released state-spaces Mamba2 checkpoints; the Mamba2 class defaults give the rest.
MAMBA2_D_MODEL = {"130m": 768, "370m": 1024, "780m": 1536, "1.3b": 2048, "2.7b": 2560}
EXPAND, D_STATE, HEADDIM, NGROUPS = 2, 128, 64, 1

# The user's trading trunk (mamba2_shapes.md §5, variant A): T = 128 x 32 rows, W_a and W_b assumed [128, 128].
TRUNK_TOKENS = 4096
TRUNK_LAYERS = {"W_in": (128, 56), "W_a": (128, 128), "W_b": (128, 128)}


def other_layout(m: int, n: int, k: int, trans_first: bool, trans_second: bool) -> tuple[int, int, int, bool, bool]:
    """The same product in the other layout, either way: M and N trade places, as do the operands' transposes."""
    return n, m, k, trans_second, trans_first


def cublas_op(trans_a: bool, trans_b: bool) -> str:
    """``transa`` + ``transb`` of the cuBLAS call for a row-major GEMM's transposes."""
    return "".join("T" if trans else "N" for trans in other_layout(0, 0, 0, trans_a, trans_b)[3:])


def shape_spec(m, n, k, op: str, batch: int = 1) -> str:
    """``MxNxK:op``, and ``:bB`` for a batch of B: how a GEMM is named everywhere."""
    return f"{m}x{n}x{k}:{op.lower()}" + (f":b{batch}" if batch > 1 else "")


def packed_strides(m: int, n: int, k: int) -> tuple[int, int, int]:
    """The strides of a batch of packed matrices, in elements, in cuBLAS's operand order: B, A, C."""
    return k * n, m * k, m * n


@dataclasses.dataclass(frozen=True)
class GemmShape:
    """One GEMM: row-major ``M x N x K``, operand layout, and where it comes from."""
    name: str
    m: int
    n: int
    k: int
    trans_a: bool = False
    trans_b: bool = False
    layer: str = ""
    gemm_pass: str = ""  # "forward", "dX", "dW" or "" for a custom shape
    preset: str = ""  # the preset it belongs to, "" for a custom shape
    tokens: int = 0  # T = batch x seqlen of the preset (0 for a custom shape)
    batch: int = 1  # matrices of a batched GEMM (cublasGemmStridedBatchedEx), each M x N x K

    def __post_init__(self):
        for axis in ("m", "n", "k", "batch"):
            value = getattr(self, axis)
            if not is_int(value, 1):
                raise ValueError(f"GemmShape {axis.upper() if axis != 'batch' else axis} must be a positive int, "
                                 f"not {value!r}")

    cublas_op = property(lambda self: cublas_op(self.trans_a, self.trans_b))
    flop = property(lambda self: 2 * self.m * self.n * self.k * self.batch)
    _stack = property(lambda self: (self.batch,) if self.batch > 1 else ())  # a batched GEMM's leading axis
    spec = property(lambda self: shape_spec(self.m, self.n, self.k, self.cublas_op, self.batch))

    @property
    def a_shape(self) -> tuple[int, ...]:
        """Stored shape of A (``(K, M)`` when transposed)."""
        return self._stack + ((self.k, self.m) if self.trans_a else (self.m, self.k))

    @property
    def b_shape(self) -> tuple[int, ...]:
        """Stored shape of B (``(N, K)`` when transposed)."""
        return self._stack + ((self.n, self.k) if self.trans_b else (self.k, self.n))

    def c_shape(self, rows: int | None = None) -> tuple[int, ...]:
        return self._stack + (self.m if rows is None else rows, self.n)

    def operand_bytes(self, in_size: int, out_size: int) -> tuple[int, int, int]:
        """Bytes of A, B and C, given the element sizes of the inputs and of the output: the one footprint of
        a GEMM, which the timing's buffer sets, the memory bound and the host operands' budget all read."""
        return (self.batch * self.m * self.k * in_size, self.batch * self.k * self.n * in_size,
                self.batch * self.m * self.n * out_size)

    def __str__(self) -> str:
        return f"{self.name} ({self.spec})" if self.name != self.spec else self.spec

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "cublas_op": self.cublas_op, "spec": self.spec}

    @classmethod
    def from_dict(cls, data: dict) -> GemmShape:
        """:meth:`to_dict`'s output read back (the derived ``cublas_op`` and ``spec`` ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def linear_layer_gemms(prefix: str, layer: str, out_features: int, in_features: int,
                       tokens: int) -> list[GemmShape]:
    """The forward, dX and dW GEMMs of ``Y[T, out] = X[T, in] @ W.T`` with ``W`` ``[out, in]``."""
    passes = (("forward", tokens, out_features, in_features, False, True),
              ("dX", tokens, in_features, out_features, False, False),
              ("dW", out_features, in_features, tokens, True, False))
    return [GemmShape(f"{prefix}/{layer}/{gemm_pass}", m, n, k, trans_a, trans_b, layer, gemm_pass, prefix, tokens)
            for gemm_pass, m, n, k, trans_a, trans_b in passes]


PRESETS = ("trunk",) + tuple(f"mamba2-{size}" for size in MAMBA2_D_MODEL)


def preset(name: str, tokens: int = DEFAULT_TOKENS) -> list[GemmShape]:
    """Forward, dX and dW of a preset's layers: the trunk's at its own T, a Mamba2 size's at ``tokens``."""
    if not is_int(tokens, 1):
        raise ValueError(f"tokens (T = batch x seqlen) must be a positive int, not {tokens!r}")
    if name == "trunk":
        return [shape for layer, (out_features, in_features) in TRUNK_LAYERS.items()
                for shape in linear_layer_gemms("trunk", layer, out_features, in_features, TRUNK_TOKENS)]
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    # A Mamba2 mixer with the class defaults: d_inner, nheads and d_in_proj from d_model.
    d_model = MAMBA2_D_MODEL[name.removeprefix("mamba2-")]
    d_inner = EXPAND * d_model
    d_in_proj = 2 * d_inner + 2 * NGROUPS * D_STATE + d_inner // HEADDIM
    return (linear_layer_gemms(name, "in_proj", d_in_proj, d_model, tokens)
            + linear_layer_gemms(name, "out_proj", d_model, d_inner, tokens))


def catalogue_entry(matches, tokens=(DEFAULT_TOKENS,)) -> GemmShape | None:
    """The first shape of each preset at each of ``tokens`` (a count below 1 has none) that ``matches``, or None."""
    return next((shape for name in PRESETS for count in dict.fromkeys(tokens) if count > 0
                 for shape in preset(name, count) if matches(shape)), None)


def token_counts(m: int, k: int, gemm_pass: str = "") -> tuple[int, ...]:
    """The token counts T a GEMM of these dimensions is a catalogue shape at: T is M, or K for dW (either
    without the pass)."""
    return (k,) if gemm_pass == "dW" else (m,) if gemm_pass else (m, k)


_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*(?::\s*([nNtT]{2}))?\s*(?::\s*[bB](\d+))?\s*$")


def gemm_key(spec: str, config_name: str) -> str:
    """``128x56x4096:nt|PEDANTIC``: one GEMM in one configuration, whatever the shape is called."""
    return f"{spec}|{config_name}"


def parse_shape(text: str) -> GemmShape:
    """The shape of ``MxNxK[:op][:bB]`` (``64x64x512:nt:b8``); ValueError saying what is expected."""
    if not isinstance(text, str):
        raise TypeError(f"a shape must be a string like '128x56x4096:nt', not {type(text).__name__}")
    match = _SHAPE_RE.match(text)
    if not match:
        expected = ("dimensions must be positive integers, e.g. 64x64x512:nt" if "-" in text
                    else "expected MxNxK[:nn|nt|tn|tt][:bB], e.g. 64x64x512:nt:b8")
        raise ValueError(f"bad shape {text!r}: {expected}")
    m, n, k = (int(group) for group in match.groups()[:3])
    batch = int(match.group(5) or 1)
    if 0 in (m, n, k, batch):
        raise ValueError(f"bad shape {text!r}: M, N, K and the batch count must be positive, got {m}x{n}x{k}"
                         + (f" in a batch of {batch}" if batch != 1 else ""))
    op = (match.group(4) or "nn").upper()
    shape = GemmShape("", m, n, k, trans_a=op[1] == "T", trans_b=op[0] == "T", batch=batch)
    return dataclasses.replace(shape, name=shape.spec)


def resolve_shapes(specs: list[str], tokens: int = DEFAULT_TOKENS) -> list[GemmShape]:
    shapes: dict[str, GemmShape] = {}
    for spec in specs:
        if spec in PRESETS:
            found = preset(spec, tokens)
        elif spec.strip()[:1].isdigit() or "x" in spec.lower():
            found = [parse_shape(spec)]
        else:
            raise ValueError(f"{spec!r} is neither a preset ({', '.join(PRESETS)}) nor a shape like 128x56x4096:nt")
        for shape in found:
            shapes.setdefault(shape.name, shape)
    return list(shapes.values())


def format_catalogue(shapes: list[GemmShape]) -> str:
    rows = [(s.name, str(s.m), str(s.n), str(s.k), s.cublas_op, f"{s.flop / 1e9:.3f}") for s in shapes]
    return "\n".join(table([("name", "M", "N", "K", "op", "GFLOP"), *rows], right=(1, 2, 3, 5)))


def batch_ladder(m: int) -> list[int]:
    """Row counts to slice: 1, 2, 4, ... below M, and M - 1 (at most 14 values)."""
    ladder = [1 << power for power in range(13) if 1 << power < m]
    return ladder + [m - 1] if m > 1 and m - 1 not in ladder else ladder


def sm_count_ladder(sm_count: int, divisors=(2,), also=()) -> list[int]:
    """SM counts below the device's: an eighth fewer, the device's / each of ``divisors``, and ``also``."""
    rungs = (sm_count - sm_count // 8, *(sm_count // d for d in divisors), *also)
    return sorted({t for t in rungs if 0 < t < sm_count})
