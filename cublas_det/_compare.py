"""Bitwise comparison of GEMM outputs (float32, bfloat16, float16): mismatches, greatest difference, ULP distance, digests.

Works on numpy and CuPy arrays alike (the array module is taken from the inputs), so the
arithmetic is tested on the CPU and runs on the GPU without a host copy.

Definitions:
- Two elements *mismatch* when their bits differ. +0.0 and -0.0 mismatch (their bits differ) but
  are 0 ULP apart; so are two NaNs with different payloads.
- The *ULP distance* is the number of representable floats between two values: the bit patterns
  are mapped to integers in the order of the values (:func:`ordered_bits`), +0 and -0 both to 0.
- The *location* of a mismatch is the element with the greatest ULP distance among the elements
  that mismatch (the first such element in row-major order on a tie), so a mismatch of 0 ULP,
  such as a signed zero, is located where it is.
- The *greatest absolute difference* is taken over every mismatching element of every run
  compared (NaN when only NaNs differ), not only at the located element.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib


def _xp(array):
    try:
        import cupy

        return cupy.get_array_module(array)
    except ImportError:
        import numpy

        return numpy


def _unravel(flat: int, shape) -> tuple[int, ...]:
    """Flat index -> tuple, on the host (cupy.unravel_index rejects Python ints under NEP 50)."""
    import numpy

    return tuple(int(i) for i in numpy.unravel_index(flat, shape))


def _bits(xp, array, signed: bool = False):
    """The array's bit patterns as integers of its width (float32: 32 bits; bfloat16, float16: 16)."""
    width = array.dtype.itemsize
    if width not in (2, 4):
        raise TypeError(f"cannot compare {array.dtype} bit for bit: float32, bfloat16 or float16 expected")
    return array.view((xp.int16 if width == 2 else xp.int32) if signed else (xp.uint16 if width == 2 else xp.uint32))


def ordered_bits(array):
    """A float array -> int64 such that adjacent floats differ by 1 and +0 == -0 (for ULP distances)."""
    xp = _xp(array)
    bits = _bits(xp, array, signed=True).astype(xp.int64)
    # Negative floats have the sign bit set; map them below zero in reverse order.
    return xp.where(bits < 0, -(2 ** (8 * array.dtype.itemsize - 1)) - bits, bits)


def ulp_distance(a, b):
    """Elementwise distance in units in the last place between two arrays of one float type."""
    return abs(ordered_bits(a) - ordered_bits(b))


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """How an output differs from the reference, bit for bit."""

    mismatched_elements: int
    total_elements: int
    max_abs_diff: float
    max_ulp: int
    index: tuple[int, ...] | None  # where the greatest ULP distance is; None when identical
    reference_value: float | None = None
    actual_value: float | None = None

    @property
    def identical(self) -> bool:
        return self.mismatched_elements == 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def count_mismatches(reference, actual):
    """Number of elements whose bits differ, as a 0-d array (no host sync on the GPU)."""
    xp = _xp(reference)
    return xp.count_nonzero(_bits(xp, reference) != _bits(xp, actual))


def compare(reference, actual) -> Mismatch:
    """Compare two arrays of one shape and float type bit for bit and locate the worst element."""
    if reference.shape != actual.shape or reference.dtype != actual.dtype:
        raise ValueError(f"cannot compare {reference.dtype}{reference.shape} with {actual.dtype}{actual.shape}")
    xp = _xp(reference)
    mismatched = int(count_mismatches(reference, actual))
    if mismatched == 0:
        return Mismatch(0, int(reference.size), 0.0, 0, None)
    # -1 where the bits match, so that argmax finds a mismatch even when it is 0 ULP (a signed zero).
    differ = _bits(xp, reference) != _bits(xp, actual)
    ulps = xp.where(differ, ulp_distance(reference, actual), -1)
    flat = int(xp.argmax(ulps))
    index = _unravel(flat, reference.shape)
    max_abs = _max_abs_diff(xp, reference, actual)
    return Mismatch(mismatched, int(reference.size), max_abs, int(ulps.reshape(-1)[flat]), index,
                    float(reference[index]), float(actual[index]))


def digest(array) -> str:
    """sha256 of the array's bytes (copied to the host), comparable across processes and machines."""
    xp = _xp(array)
    return bytes_digest(array.get() if hasattr(array, "get") and xp.__name__ == "cupy" else array)


def bytes_digest(array) -> str:
    """sha256 of a host array's bytes, through a byte view (the buffer protocol has no format for
    ml_dtypes' bfloat16, and a view copies nothing)."""
    import numpy

    return hashlib.sha256(numpy.ascontiguousarray(array).reshape(-1).view("uint8").data).hexdigest()


def relative_error(actual, reference64) -> float:
    """``max|actual - ref| / max|ref|`` against a float64 reference."""
    xp = _xp(actual)
    scale = float(xp.abs(reference64).max())
    return float(xp.abs(actual.astype(xp.float64) - reference64).max()) / (scale or 1.0)


def _max_abs_diff(xp, reference, actual) -> float:
    """Greatest |reference - actual| over elements whose bits differ (NaN when only NaNs differ)."""
    quiet = xp.errstate(all="ignore") if xp.__name__ == "numpy" else contextlib.nullcontext()
    with quiet:
        diff = xp.abs(reference.astype(xp.float64) - actual.astype(xp.float64))
        finite = diff[~xp.isnan(diff)]
        return float(finite.max()) if finite.size else float("nan")


def _finite_max(xp, worst_abs) -> float:
    """The greatest recorded difference; NaN when no mismatch had a finite one (-1 marks none)."""
    largest = float(worst_abs.max())
    return largest if largest >= 0 else float("nan")


@dataclasses.dataclass(frozen=True)
class RunsSummary:
    """Many runs compared with one reference."""

    runs: int
    differing_runs: int
    worst: Mismatch  # the most mismatched elements of one run; ULP and location over all runs
    differing_run_indices: tuple[int, ...] = ()


class MismatchTracker:
    """Compare many outputs with one reference without a host round trip per output.

    Per recorded output it keeps, on the device: the mismatched element count, and per element
    the greatest ULP distance seen, the value that had it, and the greatest absolute difference
    seen (kept apart: near a power of two a larger ULP distance can be a smaller difference).
    ``summary()`` syncs once.
    On the GPU both steps are single fused kernels (a GEMM-checking loop must cost little more
    than the GEMMs); on numpy the same arithmetic runs with array operations.
    """

    def __init__(self, reference, max_runs: int):
        xp = _xp(reference)
        self._xp = xp
        self._reference = reference
        self._counts = xp.zeros(max_runs, dtype=xp.uint64)
        # -1: no mismatch seen at this element (a mismatch of 0 ULP, a signed zero, is recorded as 0).
        self._worst_ulp = xp.full(reference.shape, -1, dtype=xp.int64)
        self._worst_bits = _bits(xp, reference).copy()  # the value with the greatest ULP distance, as bits
        self._worst_abs = xp.full(reference.shape, -1.0, dtype=xp.float64)
        self._runs = 0

    def record(self, actual) -> None:
        """Compare one output (the reference's shape and type) with the reference; queued on the current stream."""
        if self._runs >= self._counts.size:
            raise ValueError(f"MismatchTracker was made for {self._counts.size} runs")
        xp = self._xp
        ref_bits = _bits(xp, self._reference)
        out_bits = _bits(xp, actual)
        if xp.__name__ == "cupy":
            _gpu_tracker_kernel(self._reference.dtype.name)(ref_bits, out_bits, xp.int32(self._runs), self._worst_ulp,
                                                            self._worst_bits, self._worst_abs, self._counts)
        else:
            differ = ref_bits != out_bits
            self._counts[self._runs] = int(differ.sum())
            ulps = xp.where(differ, ulp_distance(self._reference, actual), -1)
            worse = ulps > self._worst_ulp
            self._worst_ulp[worse] = ulps[worse]
            self._worst_bits[worse] = out_bits[worse]
            with xp.errstate(invalid="ignore"):
                diff = xp.abs(self._reference.astype(xp.float64) - actual.astype(xp.float64))
                larger = differ & (diff > self._worst_abs)  # NaN compares false: not recorded
            self._worst_abs[larger] = diff[larger]
        self._runs += 1

    def summary(self) -> RunsSummary:
        xp = self._xp
        counts = [int(c) for c in (self._counts[: self._runs].get() if xp.__name__ == "cupy"
                                   else self._counts[: self._runs])]
        differing = tuple(i for i, c in enumerate(counts) if c)
        if not differing:
            return RunsSummary(self._runs, 0, Mismatch(0, int(self._reference.size), 0.0, 0, None))
        flat = int(xp.argmax(self._worst_ulp))
        index = _unravel(flat, self._reference.shape)
        worst = Mismatch(
            max(counts), int(self._reference.size),
            _finite_max(xp, self._worst_abs),
            int(self._worst_ulp.reshape(-1)[flat]), index,
            float(self._reference[index]), float(self._worst_bits.view(self._reference.dtype)[index]),
        )
        return RunsSummary(self._runs, len(differing), worst, differing)


# Per element format: the C type of its bits, and an expression decoding bits `x` to a double.
_FORMATS = {
    "float32": ("uint32", "int", "(double)__uint_as_float(x)"),
    "bfloat16": ("uint16", "short", "(double)__uint_as_float(((unsigned int)x) << 16)"),
    "float16": ("uint16", "short", "half_bits_to_double(x)"),
}
_HALF_DECODER = """
__device__ double half_bits_to_double(unsigned short x) {
    int exponent = (x >> 10) & 0x1f, mantissa = x & 0x3ff;
    double value;
    if (exponent == 0) value = ldexp((double)mantissa, -24);
    else if (exponent == 31) value = mantissa ? __longlong_as_double(0x7ff8000000000000LL)
                                              : __longlong_as_double(0x7ff0000000000000LL);
    else value = ldexp((double)(mantissa | 0x400), exponent - 25);
    return (x & 0x8000) ? -value : value;
}
"""


@functools.cache
def _gpu_tracker_kernel(dtype_name: str = "float32"):
    """One pass per output: count differing elements, keep each element's worst ULP, its bits, and its
    greatest absolute difference.

    Why one fused elementwise kernel: a CuPy ReductionKernel reducing to one value ran in one
    block (~22 ms for 27 M elements, measured on the H200), slower than the GEMM it checks. Here
    matching elements only read the two inputs; the atomic counter is touched only on a mismatch.
    """
    import cupy

    inputs, outputs, body, preamble = tracker_kernel_parts(dtype_name)
    return cupy.ElementwiseKernel(inputs, outputs, body, f"cublas_det_track_mismatches_{dtype_name}",
                                  preamble=preamble)


def tracker_kernel_parts(dtype_name: str) -> tuple[str, str, str, str]:
    """The tracker kernel's (inputs, outputs, body, preamble) for one element format (compiled by
    CuPy on the GPU; by the tests with NVRTC alone)."""
    if dtype_name not in _FORMATS:
        raise TypeError(f"cannot compare {dtype_name} bit for bit: float32, bfloat16 or float16 expected")
    bits, signed, decode = _FORMATS[dtype_name]
    low = "-2147483648LL" if bits == "uint32" else "-32768LL"
    body = f"""
        if (r != o) {{
            atomicAdd(&counts[run], 1ULL);
            // Order the bit patterns so that adjacent floats differ by one (as ordered_bits does).
            long long rk = ({signed})r < 0 ? {low} - (long long)({signed})r : (long long)({signed})r;
            long long ok = ({signed})o < 0 ? {low} - (long long)({signed})o : (long long)({signed})o;
            long long d = rk > ok ? rk - ok : ok - rk;
            if (d > worst_ulp) {{ worst_ulp = d; worst_bits = o; }}
            double diff = fabs(to_double(r) - to_double(o));
            if (diff > worst_abs) worst_abs = diff;  // NaN compares false: not recorded
        }}
        """
    preamble = ((_HALF_DECODER if dtype_name == "float16" else "")
                + f"template <typename T> __device__ double to_double(T x) {{ return {decode}; }}\n")
    return (f"{bits} r, {bits} o, int32 run", f"int64 worst_ulp, {bits} worst_bits, float64 worst_abs, raw uint64 counts",
            body, preamble)
