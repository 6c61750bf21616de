"""Bitwise comparison of GEMM outputs (float32, bfloat16, float16) on numpy or CuPy arrays (no host copy),
into :class:`~.streams.Mismatch` (its docstring holds the policy), on the GPU through :mod:`.gpu`."""

from __future__ import annotations

import dataclasses

import numpy

from .gpu import kernel_format, launch
from .streams import Mismatch, compare_arrays, unravel


def array_module(array):
    try:
        import cupy
    except ImportError:  # the CPU path: no CuPy needed
        return numpy
    return cupy.get_array_module(array)


def _bits(xp, array):
    kernel_format(array.dtype)  # TypeError for a type the comparisons do not take
    return array.view(xp.uint16 if array.dtype.itemsize == 2 else xp.uint32)


def compare(reference, actual) -> Mismatch:
    """Compare two arrays of one shape and float type bit for bit."""
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
    worst: Mismatch  # the counts of the run with the most mismatched elements; ULP, |diff| and location over all runs


NO_KEY = 2**64 - 1  # a run's location key before any mismatch was seen


class MismatchTracker:
    """Compare many outputs with one reference, syncing once in ``summary()``.

    Per output it keeps (on the device, for CuPy arrays) six numbers: the mismatched elements, those with
    a NaN on either side, the signed zeros, the greatest rank (a pair's ULP distance + 1; 0 for a NaN pair),
    the greatest absolute difference over pairs without NaN (+1, as the bits of a non-negative double; 0 for
    none) and the location key (index << 32 | the output's bits there) of the first element of that rank.
    """

    def __init__(self, reference, max_runs: int):
        xp = self._xp = array_module(reference)
        _bits(xp, reference)  # a float format this module compares, or TypeError
        if reference.size >= 2**32:
            raise ValueError(f"cannot compare {reference.size} elements: the location key holds 2**32 at most")
        self._reference = xp.ascontiguousarray(reference)
        records = numpy.zeros((max_runs, 6), numpy.uint64)
        records[:, 5] = NO_KEY
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
        records = self._records[: self._runs]
        records = (records.get() if self._xp.__name__ == "cupy" else records).tolist()  # Python ints
        size = int(self._reference.size)
        differing = tuple(i for i, row in enumerate(records) if row[0])
        if not differing:
            return RunsSummary(self._runs, 0, Mismatch(0, size))
        most = max((records[i] for i in differing), key=lambda row: row[0])  # the first such run
        rank = max(records[i][3] for i in differing)
        # The first element of the greatest rank; on a tie between runs, the earliest run's value there.
        key = min((records[i][5] >> 32, i) for i in differing if records[i][3] == rank)
        index = unravel(key[0], self._reference.shape)
        actual_bits = records[key[1]][5] & 0xFFFFFFFF
        width = numpy.uint16 if self._reference.dtype.itemsize == 2 else numpy.uint32
        actual_value = float(numpy.array(actual_bits, width).view(self._reference.dtype))
        largest = max(records[i][4] for i in differing)
        worst = Mismatch(most[0], size, _decoded(largest) if largest else None, rank - 1 if rank else None, index,
                         float(self._reference[index]), actual_value, most[1], most[2])
        return RunsSummary(self._runs, len(differing), worst)


def _decoded(encoded: int) -> float:
    """A non-negative double stored as its bits + 1 (0 stands for none: 0.0)."""
    return float(numpy.array(encoded - 1, numpy.uint64).view(numpy.float64)) if encoded else 0.0


def _host_record(reference, actual) -> list[int]:
    """One run's six numbers (see :class:`MismatchTracker`) with numpy, from the streams' comparison."""
    found = compare_arrays(reference.reshape(-1), actual.reshape(-1), reference.dtype.name)
    if found.identical:
        return [0, 0, 0, 0, 0, NO_KEY]
    (flat,) = found.index
    rank = 0 if found.max_ulp is None else found.max_ulp + 1
    largest = 0 if found.max_abs_diff is None else int(numpy.float64(found.max_abs_diff).view(numpy.uint64)) + 1
    out_bits = int(_bits(numpy, actual).reshape(-1)[flat])
    return [found.mismatched_elements, found.nan_mismatches, found.signed_zero_mismatches, rank, largest,
            (flat << 32) | out_bits]
