"""The numeric configuration of a GEMM (:class:`GemmConfig`: what decides its arithmetic besides its shape),
parsed once from ``MODE[+disallow-rpr][+lt...]`` (``pedantic``, ``default``, ``tf32``, ``bf16x9`` or the cuBLAS
names, case-insensitive) or its :attr:`~GemmConfig.name` (``PEDANTIC/COMPUTE_32F_PEDANTIC/bfloat16->bfloat16``)."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
import re

from ..bindings.cublas import MATH_MODE_FLAGS, ComputeType, GemmAlgo, MathMode
from ..base.dtypes import GEMM_TYPES, lookup
from ..base.integers import is_int

MATH_MODE_VAR = "CUBLAS_DET_MATH_MODE"


class ModeSource(str, enum.Enum):
    """Where a configuration's math mode came from."""
    ARGUMENT = "argument"
    ENV = "env"
    DEFAULT = "default"


# Per (input, output) element type, the compute types cublasGemmEx accepts (the cuBLAS docs' table).
_FP32_COMPUTE = (ComputeType.COMPUTE_32F, ComputeType.COMPUTE_32F_PEDANTIC)
COMPUTE_TYPES = {
    ("float32", "float32"): _FP32_COMPUTE + (ComputeType.COMPUTE_32F_FAST_TF32, ComputeType.COMPUTE_32F_FAST_16F,
                                             ComputeType.COMPUTE_32F_FAST_16BF),
    ("bfloat16", "bfloat16"): _FP32_COMPUTE,
    ("bfloat16", "float32"): _FP32_COMPUTE,
    ("float16", "float16"): _FP32_COMPUTE + (ComputeType.COMPUTE_16F, ComputeType.COMPUTE_16F_PEDANTIC),
    ("float16", "float32"): _FP32_COMPUTE,
}
OUTPUT_TYPES = {a: tuple(c for a_type, c in COMPUTE_TYPES if a_type == a) for a in GEMM_TYPES}
# Math modes that only make sense with float32 inputs.
FP32_ONLY_MODES = (MathMode.TF32, MathMode.FP32_EMULATED_BF16X9)

DEFAULT_MATH_MODE = MathMode.PEDANTIC
HOPPER_WORKSPACE_BYTES = 32 << 20  # cuBLAS's recommended workspace (cublasSetWorkspace) on Hopper and later
LT_WORKSPACE_BYTES = HOPPER_WORKSPACE_BYTES  # a cuBLASLt handle's, unless its configuration names one
DEFAULT_MODES = ("pedantic", "default", "tf32")  # the benchmark's default: the modes the user's problem is about
# In half precision TF32 does not apply; the choice is the DISALLOW_REDUCED_PRECISION_REDUCTION flag.
HALF_DEFAULT_MODES = ("pedantic", "default", "pedantic+disallow-rpr")


@dataclasses.dataclass(frozen=True)
class MathModeName:
    """The spellings of a ``cublasMath_t`` value or flag."""
    value: int
    name: str  # in GemmConfig.name, JSON and reports: the MathMode's (the flag's is shorter)
    choice: str  # what --modes and CUBLAS_DET_MATH_MODE take
    log: str  # cublas_api.h's enumerator, as cuBLAS's log prints it
    label: str = ""  # in a table's narrow column, where the name is too wide for it


# The math modes in the CLI's order, and the flag; TENSOR_OP (deprecated) only as a log may show it.
MATH_MODE_NAMES = (
    MathModeName(MathMode.PEDANTIC, "PEDANTIC", "pedantic", "CUBLAS_PEDANTIC_MATH"),
    MathModeName(MathMode.DEFAULT, "DEFAULT", "default", "CUBLAS_DEFAULT_MATH"),
    MathModeName(MathMode.TF32, "TF32", "tf32", "CUBLAS_TF32_TENSOR_OP_MATH"),
    MathModeName(MathMode.FP32_EMULATED_BF16X9, "FP32_EMULATED_BF16X9", "bf16x9", "CUBLAS_FP32_EMULATED_BF16X9_MATH"),
    MathModeName(1, "TENSOR_OP", "", "CUBLAS_TENSOR_OP_MATH"),
)
FLAG_NAME = MathModeName(MATH_MODE_FLAGS, "DISALLOW_RPR", "disallow-rpr",
                         "CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION", "DRPR")
MODE_CHOICES = tuple(m.choice for m in MATH_MODE_NAMES if m.choice)
_MODE_NAMES = {spelling.lower(): MathMode(m.value) for m in MATH_MODE_NAMES if m.choice
               for spelling in (m.choice, m.name, m.log)}
_FLAG_NAMES = {FLAG_NAME.choice, FLAG_NAME.name.lower(), FLAG_NAME.log.lower(),
               MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION.name.lower()}
_BY_VALUE = {m.value: m for m in MATH_MODE_NAMES}
APIS = ("gemm_ex", "lt")
_LT_OPTION = re.compile(r"lt(?:-(nosplitk)|-rs([1-7]))?(?:-sm([1-9]\d{0,4}))?(-bias)?")
_ALGO, _WORKSPACE, _TYPES = re.compile(r"algo(-?\d+)"), re.compile(r"ws(\d+)([km]?)"), re.compile(r"(\w+)->(\w+)")


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """What decides a GEMM's arithmetic besides its shape; by default an fp32 GEMM in PEDANTIC math."""

    math_mode: MathMode = DEFAULT_MATH_MODE
    disallow_reduced_precision_reduction: bool = False
    compute_type: ComputeType = ComputeType.COMPUTE_32F
    input_dtype: str = "float32"
    output_dtype: str = "float32"
    # cublasGemmEx's algo and a user workspace (None: cuBLAS's pool): a captured program's, for a replay.
    algo: int = int(GemmAlgo.DEFAULT)
    workspace_bytes: int | None = None
    # cuBLASLt ("lt") and what it is told: a reduction-scheme mask (0: no split-K), an SM-count target, a
    # pinned algorithm (_cublaslt.algo_config's pairs), an epilogue (BIAS: as PyTorch's biased Linear).
    api: str = "gemm_ex"
    lt_reduction_scheme_mask: int | None = None
    lt_sm_count_target: int = 0
    lt_algo: tuple = ()
    lt_epilogue: str = ""

    def __post_init__(self):
        try:
            object.__setattr__(self, "math_mode", MathMode(self.math_mode))
            object.__setattr__(self, "compute_type", ComputeType(self.compute_type))
        except ValueError as err:
            raise ValueError(f"GemmConfig: {err}") from None
        if self.math_mode is MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION:
            raise ValueError("GemmConfig: DISALLOW_REDUCED_PRECISION_REDUCTION is a flag, not a math mode; "
                             "set disallow_reduced_precision_reduction=True")
        object.__setattr__(self, "input_dtype", canonical_dtype(self.input_dtype, "input dtype"))
        object.__setattr__(self, "output_dtype", canonical_dtype(self.output_dtype, "output dtype"))
        check_types(self.input_dtype, self.output_dtype, self.compute_type, "GemmConfig: ")
        if not is_int(self.algo):
            raise ValueError(f"GemmConfig: algo must be a cublasGemmAlgo_t int, not {self.algo!r}")
        if self.workspace_bytes is not None and not is_int(self.workspace_bytes, 0):
            raise ValueError(f"GemmConfig: workspace_bytes must be an int >= 0 or None, not {self.workspace_bytes!r}")
        try:
            object.__setattr__(self, "lt_algo", tuple(sorted(dict(self.lt_algo).items())))
        except (TypeError, ValueError):
            raise ValueError(f"GemmConfig: lt_algo must map names to ints, not {self.lt_algo!r}") from None
        if self.lt_algo and (not all(is_int(v) for _, v in self.lt_algo) or "algo_id" not in dict(self.lt_algo)):
            raise ValueError(f"GemmConfig: lt_algo needs int values and an algo_id, not {dict(self.lt_algo)!r}")
        if not is_int(self.lt_sm_count_target, 0):
            raise ValueError(f"GemmConfig: lt_sm_count_target must be an int >= 0, not {self.lt_sm_count_target!r}")
        if self.lt_reduction_scheme_mask is not None and not is_int(self.lt_reduction_scheme_mask, 0, 7):
            raise ValueError("GemmConfig: lt_reduction_scheme_mask must be an int 0-7 (cublasLtReductionScheme_t) or "
                             f"None, not {self.lt_reduction_scheme_mask!r}")
        if self.api not in APIS:
            raise ValueError(f"GemmConfig: api {self.api!r} is not one of {', '.join(APIS)}")
        if self.api != "lt" and (self.lt_reduction_scheme_mask is not None or self.lt_sm_count_target or self.lt_algo
                                 or self.lt_epilogue):
            raise ValueError("GemmConfig: lt_* options need api='lt'")
        if self.lt_epilogue not in ("", "BIAS"):
            raise ValueError(f"GemmConfig: lt_epilogue {self.lt_epilogue!r}: only BIAS (or none) is supported")
        if self.api == "lt" and self.algo != GemmAlgo.DEFAULT:
            raise ValueError("GemmConfig: algo is cublasGemmEx's; a cuBLASLt configuration pins lt_algo")
        if self.api == "lt" and (self.math_mode is MathMode.FP32_EMULATED_BF16X9
                                 or self.disallow_reduced_precision_reduction):
            raise ValueError("GemmConfig: cuBLASLt takes no math mode: BF16X9 and +disallow-rpr apply to "
                             "cublasGemmEx only (for no split-K in cuBLASLt, use +lt-nosplitk)")
        if self.math_mode in FP32_ONLY_MODES and self.input_dtype != "float32":
            raise ValueError(f"GemmConfig: {self.math_mode.name} math applies to float32 inputs, not "
                             f"{self.input_dtype}; choose PEDANTIC or DEFAULT")

    @property
    def math_mode_value(self) -> int:
        """The ``cublasMath_t`` for ``cublasSetMathMode``: the mode with the flag."""
        return int(self.math_mode) | (MATH_MODE_FLAGS if self.disallow_reduced_precision_reduction else 0)

    a_type = property(lambda self: GEMM_TYPES[self.input_dtype])
    c_type = property(lambda self: GEMM_TYPES[self.output_dtype])

    @property
    def lt_compute_type(self) -> ComputeType:
        """The compute type cuBLASLt is given (it has no math mode: TF32 math is COMPUTE_32F_FAST_TF32)."""
        if self.compute_type is ComputeType.COMPUTE_32F and self.math_mode is MathMode.TF32:
            return ComputeType.COMPUTE_32F_FAST_TF32
        return self.compute_type

    @property
    def name(self) -> str:
        """``PEDANTIC``, ``TF32/COMPUTE_32F_PEDANTIC`` ...: what differs from the defaults (stored runs' names hold)."""
        return self._name(role=False)

    @property
    def role(self) -> str:
        """The name without element types, algo and workspace: what tells a run's configurations apart."""
        return self._name(role=True)

    def plain(self, mode: MathMode) -> bool:
        """Whether this is math mode ``mode`` and nothing else but element types, algo and workspace."""
        return (self.math_mode is mode and not self.disallow_reduced_precision_reduction
                and self.compute_type is ComputeType.COMPUTE_32F and self.api == "gemm_ex")

    def _name(self, role: bool) -> str:
        name = self.math_mode.name
        if self.disallow_reduced_precision_reduction:
            name += "+" + FLAG_NAME.name
        if self.compute_type is not ComputeType.COMPUTE_32F:
            name += "/" + self.compute_type.name
        if self.algo != GemmAlgo.DEFAULT and not role:
            name += f"/algo{self.algo}"
        if self.workspace_bytes is not None and not role:
            name += f"/ws{_size(self.workspace_bytes)}"
        if self.api == "lt":
            name += "/" + self.lt_name
        if (self.input_dtype, self.output_dtype) != ("float32", "float32") and not role:
            name += f"/{self.input_dtype}->{self.output_dtype}"
        return name

    @property
    def lt_name(self) -> str:
        """``lt``, ``lt-nosplitk``, ``lt-sm16``, ``lt-bias``, ``lt-pin20k66.3fa2c1`` (algo 20, split-K 66, a digest)."""
        parts = ["lt"]
        if self.lt_reduction_scheme_mask == 0:
            parts.append("nosplitk")
        elif self.lt_reduction_scheme_mask is not None:
            parts.append(f"rs{self.lt_reduction_scheme_mask}")
        if self.lt_sm_count_target:
            parts.append(f"sm{self.lt_sm_count_target}")
        if self.lt_algo:  # which algorithm: two pinned configurations never share a name
            algo = dict(self.lt_algo)
            digest = hashlib.sha256(repr(self.lt_algo).encode()).hexdigest()[:6]
            parts.append(f"pin{algo['algo_id']}k{algo.get('splitk', 1)}.{digest}")
        if self.lt_epilogue:
            parts.append(self.lt_epilogue.lower())
        return "-".join(parts)

    def __str__(self) -> str:
        return self.name

    def to_dict(self) -> dict:
        return {"name": self.name, "math_mode": self.math_mode.name,
                "disallow_reduced_precision_reduction": self.disallow_reduced_precision_reduction,
                "math_mode_value": self.math_mode_value, "compute_type": self.compute_type.name,
                "input_dtype": self.input_dtype, "output_dtype": self.output_dtype,
                **({"algo": self.algo} if self.algo != GemmAlgo.DEFAULT else {}),
                **({"workspace_bytes": self.workspace_bytes} if self.workspace_bytes is not None else {}),
                **({"api": self.api, "lt_reduction_scheme_mask": self.lt_reduction_scheme_mask,
                    "lt_sm_count_target": self.lt_sm_count_target, "lt_algo": dict(self.lt_algo),
                    "lt_epilogue": self.lt_epilogue} if self.api != "gemm_ex" else {})}

    @classmethod
    def from_dict(cls, data: dict) -> GemmConfig:
        """:meth:`to_dict`'s output read back (derived keys such as ``name`` ignored)."""
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}  # absent: the default
        return cls(**{**values, "math_mode": MathMode[data["math_mode"]],
                      "disallow_reduced_precision_reduction": bool(data.get("disallow_reduced_precision_reduction")),
                      "compute_type": ComputeType[data.get("compute_type", "COMPUTE_32F")],
                      "lt_algo": _pairs(data.get("lt_algo"))})

    @classmethod
    def parse(cls, text: str, *, source: str = "mode") -> GemmConfig:
        """The configuration of a mode choice or a name; ValueError naming ``source``, the value and the choices."""
        head, *rest = str(text).split("/")
        parts = [part.strip().lower() for part in head.split("+")]
        mode = _MODE_NAMES.get(parts[0])
        flags = [part for part in parts[1:] if part in _FLAG_NAMES]
        fields = {}
        for piece in [part for part in parts[1:] if part not in _FLAG_NAMES] + rest:
            if "-pin" in piece.lower():
                raise ValueError(f"{source}={text!r}: a pinned cuBLASLt algorithm is named by a digest, not in "
                                 "full; read its configuration from the run file")
            field = name_part(piece.strip())
            if field is None or field[0] in fields:
                mode = None
                break
            fields[field[0]] = field[1]
        if mode is None or len(flags) > 1:
            # One 100-column line after "cublas-det bench: error: "; the +lt forms in full are in --help.
            raise ValueError(f"{source}={text!r}: not {', '.join(MODE_CHOICES)} (+{FLAG_NAME.choice}, +lt...)")
        input_dtype, output_dtype = fields.pop("types", ("float32", "float32"))
        lt = fields.pop("lt", None)
        if lt:
            nosplitk, scheme, sm_count, bias = lt.groups()
            fields.update(api="lt", lt_reduction_scheme_mask=0 if nosplitk else int(scheme) if scheme else None,
                          lt_sm_count_target=int(sm_count or 0), lt_epilogue="BIAS" if bias else "")
        try:
            return cls(mode, bool(flags), input_dtype=input_dtype, output_dtype=output_dtype, **fields)
        except ValueError as err:
            raise ValueError(f"{source}={text!r}: {str(err).removeprefix('GemmConfig: ')}") from None

    @classmethod
    def from_math_mode_value(cls, value: int) -> GemmConfig:
        if not is_int(value):
            raise TypeError(f"mode must be a GemmConfig, MathMode, int or str, not {type(value).__name__}")
        base = int(value) & ~MATH_MODE_FLAGS
        if base not in _MODE_NAMES.values() or int(value) & ~0xFF:
            modes = ", ".join(f"{mode.name} ({int(mode)})" for mode in dict.fromkeys(_MODE_NAMES.values()))
            raise ValueError(f"mode={int(value)} is not a supported math mode; use MathMode.{modes}, optionally "
                             f"| MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION ({MATH_MODE_FLAGS})")
        return cls(MathMode(base), bool(int(value) & MATH_MODE_FLAGS))


def math_modes(choices) -> tuple[MathMode, ...]:
    """The math modes of mode choices (``pedantic+disallow-rpr`` is PEDANTIC), in their order, each once."""
    return tuple(dict.fromkeys(GemmConfig.parse(choice).math_mode for choice in choices))


def resolve_config(mode: GemmConfig | MathMode | int | str | None = None) -> tuple[GemmConfig, ModeSource]:
    """The configuration and its source: argument > ``CUBLAS_DET_MATH_MODE`` (read now) > PEDANTIC."""
    if mode is None:
        raw = os.environ.get(MATH_MODE_VAR, "").strip()  # empty means unset
        if not raw:
            return GemmConfig(), ModeSource.DEFAULT
        return GemmConfig.parse(raw, source=MATH_MODE_VAR), ModeSource.ENV
    if isinstance(mode, GemmConfig):
        return mode, ModeSource.ARGUMENT
    if isinstance(mode, str):
        return GemmConfig.parse(mode), ModeSource.ARGUMENT
    return GemmConfig.from_math_mode_value(mode), ModeSource.ARGUMENT


def check_types(input_dtype: str, output_dtype: str, compute_type: ComputeType, prefix: str = "") -> None:
    """ValueError naming the combination unless cublasGemmEx takes these element and compute types."""
    if output_dtype not in OUTPUT_TYPES[input_dtype]:
        raise ValueError(f"{prefix}{input_dtype} inputs with a {output_dtype} output are not supported; "
                         f"choose {', '.join(OUTPUT_TYPES[input_dtype])}")
    allowed = COMPUTE_TYPES[(input_dtype, output_dtype)]
    if compute_type not in allowed:
        try:
            name = ComputeType(compute_type).name
        except ValueError:
            name = f"{compute_type!r} (no cuBLAS compute type)"
        raise ValueError(f"{prefix}compute type {name} does not take {input_dtype} inputs "
                         f"with a {output_dtype} output; choose {', '.join(c.name for c in allowed)}")


def canonical_dtype(name, what: str = "dtype") -> str:
    """``"float32"``, ``"bfloat16"`` or ``"float16"`` from a name, an alias (``bf16``) or a numpy/CuPy dtype."""
    return lookup(name, GEMM_TYPES, what).name


def math_mode_name(value: int | None, narrow: bool = False) -> str:
    """``PEDANTIC``, ``DEFAULT+DISALLOW_RPR`` (``narrow``: ``+DRPR``), ``unknown`` ... of a ``cublasMath_t``."""
    if value is None:
        return "unknown"
    base = _BY_VALUE.get(value & ~FLAG_NAME.value)
    flag = FLAG_NAME.label if narrow else FLAG_NAME.name
    return (base.name if base else str(value & ~FLAG_NAME.value)) + ("+" + flag if value & FLAG_NAME.value else "")


def _pairs(value) -> tuple:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ValueError(f"lt_algo must be an object of names to ints, not {value!r}")
    return tuple(value.items())


def name_part(piece: str):
    """``(field, value)`` of a part of a name (``COMPUTE_16F``, ``algo5``, ``ws32M``, ``lt-sm16`` ...), or None."""
    if piece.upper() in ComputeType.__members__:
        return "compute_type", ComputeType[piece.upper()]
    lower = piece.lower()
    if found := _LT_OPTION.fullmatch(lower):
        return "lt", found
    if found := _ALGO.fullmatch(lower):
        return "algo", int(found.group(1))
    if found := _WORKSPACE.fullmatch(lower):
        return "workspace_bytes", int(found.group(1)) << {"": 0, "k": 10, "m": 20}[found.group(2)]
    if found := _TYPES.fullmatch(lower):
        return "types", found.groups()
    return None


def name_role(name: str) -> str:
    """:attr:`GemmConfig.role` of a name stored without its configuration (a modes scenario's groups and cells,
    a stored arm no configuration reads back); where a configuration is at hand, its ``role``."""
    return "/".join(part for part in name.split("/")
                    if (name_part(part) or ("",))[0] not in ("types", "algo", "workspace_bytes"))


def _size(n: int) -> str:
    for unit, shift in (("M", 20), ("K", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


# Named precisions: what a training setup runs, as the configurations the benchmark compares.
_BF16 = {"input_dtype": "bfloat16", "output_dtype": "bfloat16"}
PRECISIONS = {
    "mamba2-amp": ("bf16 in and out with fp32 accumulation, as Mamba2 trains under PyTorch autocast; PEDANTIC, "
                   "DEFAULT, PEDANTIC+DISALLOW_RPR and COMPUTE_32F_PEDANTIC",
                   (GemmConfig(MathMode.PEDANTIC, **_BF16), GemmConfig(MathMode.DEFAULT, **_BF16),
                    GemmConfig(MathMode.PEDANTIC, True, **_BF16),
                    GemmConfig(MathMode.PEDANTIC, compute_type=ComputeType.COMPUTE_32F_PEDANTIC, **_BF16))),
}
