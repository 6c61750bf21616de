"""The element types, one table (:data:`ELEMENT_TYPES`) of names, sizes, ``cudaDataType_t``, labels and bits;
elements are read as bit patterns (bfloat16 is the top half of a float32), so comparing needs no ml_dtypes."""

from __future__ import annotations

import dataclasses

import numpy as np

from .errors import UsageError

_NUMPY_KIND = {"float": "f", "int": "i", "uint": "u", "bool": "u"}
BFLOAT16_HINT = "CuPy takes bfloat16 from ml_dtypes: pip install ml-dtypes"


@dataclasses.dataclass(frozen=True)
class ElementType:
    """An element type: its names, its size, its CUDA enum, and how to read values from its bits."""
    name: str  # numpy's
    itemsize: int
    kind: str  # "float", "int", "uint", "bool" or "complex"
    aliases: tuple = ()  # what a --dtype also takes; the first is the type's label in tables (fp32)
    cuda: int | None = None  # cudaDataType_t (library_types.h)
    cuda_name: str = ""  # its enumerator less CUDA_ (R_32F), as the cuBLAS log names it
    blas: tuple = ()  # the letter of cublas<t>gemm and the compute type that call runs
    gemm: bool = False  # cublasGemmEx takes it here, in and out (config.COMPUTE_TYPES)
    format: str = ""  # the GPU comparison kernels' format (bits/gpu.py)
    safetensors: str = ""  # the safetensors header's name (F32)

    label = property(lambda self: self.aliases[0] if self.aliases else self.name)
    comparable = property(lambda self: self.kind != "complex")
    is_float = property(lambda self: self.kind == "float")
    bits_dtype = property(lambda self: np.dtype(f"<u{self.itemsize}"), doc="The unsigned type of the same size.")
    _numpy_kind = property(lambda self: np.dtype(f"<{_NUMPY_KIND[self.kind]}{self.itemsize}"))  # bool as uint8

    @property
    def numpy_dtype(self):
        """bfloat16 comes from ``ml_dtypes``, as CuPy's does."""
        if self.name != "bfloat16":
            return np.dtype(self.name)
        try:
            import ml_dtypes
        except ImportError:
            raise UsageError(f"bfloat16 needs the ml_dtypes package ({BFLOAT16_HINT})") from None
        return np.dtype(ml_dtypes.bfloat16)

    def values(self, bits: np.ndarray, out: np.ndarray | None = None, widened: np.ndarray | None = None):
        """``bits`` as float64 (exact for floats), into ``out`` with ``widened`` (uint32) as scratch where given."""
        out = np.empty(bits.shape, np.float64) if out is None else out
        # A signalling NaN widened to float64 warns "invalid"; it stays a NaN, which is counted apart.
        with np.errstate(invalid="ignore"):
            if self.name == "bfloat16":
                widened = np.empty(bits.shape, np.uint32) if widened is None else widened
                widened[...] = bits
                widened <<= np.uint32(16)
                out[...] = widened.view(np.float32)
            else:
                out[...] = bits.view(self._numpy_kind)
        return out

    def value(self, bits: np.ndarray) -> float | int | bool:
        if self.is_float:
            return float(self.values(bits)[0])
        value = int(bits.view(self._numpy_kind)[0])
        return bool(value) if self.kind == "bool" else value

    def format_value(self, value) -> str:
        """A value as short as it can be while naming the element (float32: 1.2500305)."""
        if not self.is_float or value is None:
            return str(value)
        if self.name == "bfloat16":
            return _shortest_bfloat16(value)
        return str(np.dtype(self.name).type(value))


def _shortest_bfloat16(value: float) -> str:
    """The fewest digits that read back as the same bfloat16 (as numpy prints float32)."""
    if not np.isfinite(value):
        return str(value)
    def to_bfloat16_bits(x: float) -> int:  # round to nearest even, as a float32 -> bfloat16 cast does
        bits = int(np.array([x], np.float32).view(np.uint32)[0])
        return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    target = to_bfloat16_bits(value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if to_bfloat16_bits(float(text)) == target:
            break
    return text if any(c in text for c in ".en") else text + ".0"


_T = ElementType
ELEMENT_TYPES = {t.name: t for t in (
    _T("float32", 4, "float", ("fp32", "f32"), 0, "R_32F", ("S", "COMPUTE_32F"), True, "f32", "F32"),
    _T("bfloat16", 2, "float", ("bf16",), 14, "R_16BF", (), True, "bf16", "BF16"),
    _T("float16", 2, "float", ("fp16", "f16", "half"), 2, "R_16F", ("H", "COMPUTE_16F"), True, "f16", "F16"),
    _T("float64", 8, "float", ("fp64", "f64"), 1, "R_64F", ("D", "COMPUTE_64F"), safetensors="F64"),
    _T("complex64", 8, "complex", ("c64",), 4, "C_32F", ("C", "COMPUTE_32F")),
    _T("complex128", 16, "complex", ("c128",), 5, "C_64F", ("Z", "COMPUTE_64F")),
    *(_T(f"{kind}{8 * size}", size, kind, safetensors=f"{kind[0].upper()}{8 * size}")
      for kind in ("int", "uint") for size in (1, 2, 4, 8)),
    _T("bool", 1, "bool", safetensors="BOOL"),
)}
ALIASES = {alias: t.name for t in ELEMENT_TYPES.values() for alias in t.aliases}
GEMM_TYPES = {name: t for name, t in ELEMENT_TYPES.items() if t.gemm}
BY_CUDA = {t.cuda: t for t in ELEMENT_TYPES.values() if t.cuda is not None}  # cudaDataType_t -> type
BY_CUDA_NAME = {t.cuda_name: t for t in ELEMENT_TYPES.values() if t.cuda_name}  # R_32F -> float32


def lookup(name, table: dict = ELEMENT_TYPES, what: str = "dtype") -> ElementType:
    """The type of a name, an alias (``bf16``) or a numpy/CuPy dtype in ``table``; ValueError naming the choices."""
    text = str(getattr(name, "name", name)).strip().lower()
    text = ALIASES.get(text, text)
    if text in table:
        return table[text]
    aliases = ", ".join(alias for alias, full in ALIASES.items() if full in table)
    if text in ELEMENT_TYPES:
        raise ValueError(f"{what} {name!r} is not supported; choose {', '.join(table)} (or {aliases})")
    raise ValueError(f"unknown {what} {name!r}; choose one of {', '.join(table)} (or {aliases})")
