"""Bitwise comparison of float32 outputs: mismatch counts, greatest difference, ULP distance, digests.

Works on numpy and CuPy arrays alike (the array module is taken from the inputs), so the
arithmetic is tested on the CPU and runs on the GPU without a host copy.
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


def ordered_bits(array):
    """float32 -> int64 such that adjacent floats differ by 1 and +0 == -0 (for ULP distances)."""
    xp = _xp(array)
    bits = array.view(xp.int32).astype(xp.int64)
    # Negative floats have the sign bit set; map them below zero in reverse order.
    return xp.where(bits < 0, -(2**31) - bits, bits)


def ulp_distance(a, b):
    """Elementwise distance in units in the last place between two float32 arrays."""
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
    return xp.count_nonzero(reference.view(xp.uint32) != actual.view(xp.uint32))


def compare(reference, actual) -> Mismatch:
    """Compare two float32 arrays of one shape bit for bit and locate the worst element."""
    if reference.shape != actual.shape or reference.dtype != actual.dtype:
        raise ValueError(f"cannot compare {reference.dtype}{reference.shape} with {actual.dtype}{actual.shape}")
    xp = _xp(reference)
    mismatched = int(count_mismatches(reference, actual))
    if mismatched == 0:
        return Mismatch(0, int(reference.size), 0.0, 0, None)
    ulps = ulp_distance(reference, actual)
    flat = int(xp.argmax(ulps))
    index = _unravel(flat, reference.shape)
    max_abs = _max_abs_diff(xp, reference, actual)
    return Mismatch(mismatched, int(reference.size), max_abs, int(ulps.reshape(-1)[flat]), index,
                    float(reference[index]), float(actual[index]))


def digest(array) -> str:
    """sha256 of the array's bytes (copied to the host), comparable across processes and machines."""
    xp = _xp(array)
    host = array.get() if hasattr(array, "get") and xp.__name__ == "cupy" else array
    return hashlib.sha256(host.tobytes()).hexdigest()


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
    the greatest ULP distance seen and the value that had it. ``summary()`` syncs once.
    On the GPU both steps are single fused kernels (a GEMM-checking loop must cost little more
    than the GEMMs); on numpy the same arithmetic runs with array operations.
    """

    def __init__(self, reference, max_runs: int):
        xp = _xp(reference)
        self._xp = xp
        self._reference = reference
        self._counts = xp.zeros(max_runs, dtype=xp.uint64)
        self._worst_ulp = xp.zeros(reference.shape, dtype=xp.int64)
        self._worst_value = reference.copy()
        self._runs = 0

    def record(self, actual) -> None:
        """Compare one output (same shape, float32) with the reference; queued on the current stream."""
        if self._runs >= self._counts.size:
            raise ValueError(f"MismatchTracker was made for {self._counts.size} runs")
        xp = self._xp
        ref_bits = self._reference.view(xp.uint32)
        out_bits = actual.view(xp.uint32)
        if xp.__name__ == "cupy":
            _gpu_tracker_kernel()(ref_bits, out_bits, xp.int32(self._runs), self._worst_ulp, self._worst_value,
                                  self._counts)
        else:
            self._counts[self._runs] = count_mismatches(self._reference, actual)
            ulps = ulp_distance(self._reference, actual)
            worse = ulps > self._worst_ulp
            self._worst_ulp[worse] = ulps[worse]
            self._worst_value[worse] = actual[worse]
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
            _max_abs_diff(xp, self._reference, self._worst_value),
            int(self._worst_ulp.reshape(-1)[flat]), index,
            float(self._reference[index]), float(self._worst_value[index]),
        )
        return RunsSummary(self._runs, len(differing), worst, differing)


@functools.cache
def _gpu_tracker_kernel():
    """One pass per output: count differing elements, keep each element's worst ULP and value.

    Why one fused elementwise kernel: a CuPy ReductionKernel reducing to one value ran in one
    block (~22 ms for 27 M elements, measured on the H200), slower than the GEMM it checks. Here
    matching elements only read the two inputs; the atomic counter is touched only on a mismatch.
    """
    import cupy

    return cupy.ElementwiseKernel(
        "uint32 r, uint32 o, int32 run", "int64 worst_ulp, float32 worst_value, raw uint64 counts",
        """
        if (r != o) {
            atomicAdd(&counts[run], 1ULL);
            // Order the bit patterns so that adjacent floats differ by one (as ordered_bits does).
            long long rk = (int)r < 0 ? -2147483648LL - (long long)(int)r : (long long)(int)r;
            long long ok = (int)o < 0 ? -2147483648LL - (long long)(int)o : (long long)(int)o;
            long long d = rk > ok ? rk - ok : ok - rk;
            if (d > worst_ulp) { worst_ulp = d; worst_value = __uint_as_float(o); }
        }
        """,
        "cublas_det_track_mismatches",
    )
