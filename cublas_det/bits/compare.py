"""Bitwise comparison of GEMM outputs (float32, bfloat16, float16) on numpy or CuPy arrays (no host copy).

Elements *mismatch* when their bits differ (+0.0 and -0.0 do, 0 ULP apart). A mismatch is located at
the first element of greatest ULP distance; the greatest absolute difference is over every mismatching
element of every run (NaN when only NaNs differ).
"""

from __future__ import annotations

import dataclasses

import numpy

from .gpu import kernel_format, launch
from .streams import lookup_dtype, ulp_distance


def array_module(array):
    try:
        import cupy
    except ImportError:  # the CPU path: no CuPy needed
        return numpy
    return cupy.get_array_module(array)


def _bits(xp, array):
    """The array's bit patterns as unsigned integers of its width."""
    kernel_format(array.dtype)  # TypeError for a type the comparisons do not take
    return array.view(xp.uint16 if array.dtype.itemsize == 2 else xp.uint32)


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """How a GEMM output differs from the reference, bit for bit.

    NaN policy: unlike :class:`.streams.BitStats` (the diff tool, which counts NaN pairs apart), a NaN
    here is ranked by its bit pattern's ULP distance, so that a NaN output is located as the worst
    element: the GPU kernels and the run files' ``max_ulp`` and ``index`` have always meant that.
    """

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


def compare(reference, actual) -> Mismatch:
    """Compare two arrays of one shape and float type bit for bit and locate the worst element."""
    if reference.shape != actual.shape or reference.dtype != actual.dtype:
        raise ValueError(f"cannot compare {reference.dtype}{reference.shape} with {actual.dtype}{actual.shape}")
    tracker = MismatchTracker(reference, 1)
    tracker.record(actual)
    return tracker.summary().worst


def relative_error(actual, reference64) -> float:
    """``max|actual - ref| / max|ref|`` against a float64 reference (NaN when either holds a NaN)."""
    xp = array_module(actual)
    if xp.__name__ == "cupy":
        record = xp.zeros(3, xp.uint64)
        actual = xp.ascontiguousarray(actual)  # the kernel reads memory order
        launch("error_stats", actual, (actual, xp.ascontiguousarray(reference64, xp.float64)), record)
        diff, scale, nan = (int(v) for v in record.get())
        if nan:
            return float("nan")
        return _decoded(diff) / (_decoded(scale) or 1.0)
    with xp.errstate(all="ignore"):
        scale = float(xp.abs(reference64).max())
        return float(xp.abs(actual.astype(xp.float64) - reference64).max()) / (scale or 1.0)


@dataclasses.dataclass(frozen=True)
class RunsSummary:
    """Many runs compared with one reference."""

    runs: int
    differing_runs: int
    worst: Mismatch  # the most mismatched elements of one run; ULP and location over all runs
    differing_run_indices: tuple[int, ...] = ()


NO_KEY = 2**64 - 1  # a run's location key before any mismatch was seen


class MismatchTracker:
    """Compare many outputs with one reference, syncing once in ``summary()``.

    Per output it keeps (on the device, for CuPy arrays) the mismatched element count, the greatest ULP
    distance, the greatest absolute difference (+1, as the bits of a non-negative double; 0 when no
    mismatch had a finite one) and the location key (index << 32 | the output's bits there).
    """

    def __init__(self, reference, max_runs: int):
        xp = self._xp = array_module(reference)
        _bits(xp, reference)  # a float format this module compares, or TypeError
        if reference.size >= 2**32:
            raise ValueError(f"cannot compare {reference.size} elements: the location key holds 2**32 at most")
        self._reference = xp.ascontiguousarray(reference)
        records = numpy.zeros((max_runs, 4), numpy.uint64)
        records[:, 3] = NO_KEY
        self._records = xp.asarray(records)  # made on the host: no fill kernel to compile
        self._runs = 0

    def record(self, actual) -> None:
        """Compare one output with the reference; queued on the current stream."""
        if self._runs >= self._records.shape[0]:
            raise ValueError(f"MismatchTracker was made for {self._records.shape[0]} runs")
        xp, record = self._xp, self._records[self._runs]
        if xp.__name__ == "cupy":
            operands = (self._reference, xp.ascontiguousarray(actual))
            launch("mismatch_stats", self._reference, operands, record)
            launch("mismatch_locate", self._reference, operands, record)
        else:
            record[:] = _host_record(self._reference, actual)
        self._runs += 1

    def summary(self) -> RunsSummary:
        xp = self._xp
        records = self._records[: self._runs]
        records = [[int(v) for v in row] for row in (records.get() if xp.__name__ == "cupy" else records)]
        size = int(self._reference.size)
        differing = tuple(i for i, (count, *_) in enumerate(records) if count)
        if not differing:
            return RunsSummary(self._runs, 0, Mismatch(0, size, 0.0, 0, None))
        max_ulp = max(records[i][1] for i in differing)
        # The first element at the greatest distance; on a tie between runs, the earliest run's value there.
        key = min((records[i][3] >> 32, i) for i in differing if records[i][1] == max_ulp)
        # On the host: cupy.unravel_index rejects Python ints under NEP 50.
        index = tuple(int(i) for i in numpy.unravel_index(key[0], self._reference.shape))
        actual_bits = records[key[1]][3] & 0xFFFFFFFF
        width = numpy.uint16 if self._reference.dtype.itemsize == 2 else numpy.uint32
        actual_value = float(numpy.array(actual_bits, width).view(self._reference.dtype))
        largest = max(records[i][2] for i in differing)
        worst = Mismatch(max(records[i][0] for i in differing), size,
                         _decoded(largest) if largest else float("nan"), max_ulp, index,
                         float(self._reference[index]), actual_value)
        return RunsSummary(self._runs, len(differing), worst, differing)


def _decoded(encoded: int) -> float:
    """A non-negative double stored as its bits + 1 (0 stands for none: 0.0)."""
    return float(numpy.array(encoded - 1, numpy.uint64).view(numpy.float64)) if encoded else 0.0


def _host_record(reference, actual) -> list[int]:
    """One run's four numbers (see :class:`MismatchTracker`) with numpy."""
    ref_bits, out_bits = _bits(numpy, reference).reshape(-1), _bits(numpy, actual).reshape(-1)
    differ = numpy.flatnonzero(ref_bits != out_bits)
    if differ.size == 0:
        return [0, 0, 0, NO_KEY]
    ulps = ulp_distance(ref_bits[differ], out_bits[differ], lookup_dtype(reference.dtype.name)).astype(numpy.int64)
    with numpy.errstate(invalid="ignore"):
        diff = numpy.abs(reference.reshape(-1)[differ].astype(numpy.float64)
                         - actual.reshape(-1)[differ].astype(numpy.float64))
    finite = diff[~numpy.isnan(diff)]
    largest = int(finite.max().view(numpy.uint64)) + 1 if finite.size else 0
    at = int(numpy.argmax(ulps))
    return [int(differ.size), int(ulps[at]), largest, (int(differ[at]) << 32) | int(out_bits[differ[at]])]
