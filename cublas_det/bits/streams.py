"""Bit-for-bit comparison of two element streams of one dtype, chunk by chunk, with ULP distances.

Equal bits are equal, NaNs included. The ULP distance orders bit patterns like the floats (+0 against
-0 is a *signed zero* mismatch of 0 ULP); a pair with a NaN has no distance and is counted apart; the
greatest |a - b| is over pairs without NaN. Integers and bools have only ``|a - b|``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..dtypes import ELEMENT_TYPES, ElementType, lookup

_BLOCK_ELEMENTS = 1 << 15  # elements per block of the mismatch arithmetic
DTYPES = {name: element for name, element in ELEMENT_TYPES.items() if element.comparable}


def lookup_dtype(name: str) -> ElementType:
    """The :class:`~cublas_det.dtypes.ElementType` of a name (``fp16`` ...); ValueError if not compared."""
    return lookup(name, DTYPES)


def dtype_name_of(numpy_dtype) -> str:
    """The table name of a numpy dtype (ml_dtypes' bfloat16 included); ValueError if it has no entry."""
    dtype = np.dtype(numpy_dtype)
    if dtype.byteorder == ">":
        raise ValueError(f"big-endian dtype {dtype.str} is not supported; convert it to little-endian")
    if dtype.name not in DTYPES:
        raise ValueError(f"dtype {dtype} is not supported; supported: {', '.join(DTYPES)}")
    return dtype.name


def ordered(bits: np.ndarray, dtype: ElementType) -> np.ndarray:
    """Float bit patterns -> int64 ordered like the floats: adjacent floats 1 apart, +0 == -0 == 0
    (a negative pattern s, read signed, becomes ``INT_MIN - s`` = -magnitude)."""
    width = dtype.itemsize * 8
    signed = bits.view(np.dtype(f"<i{dtype.itemsize}")).astype(np.int64)
    return np.where(signed < 0, np.int64(-(1 << (width - 1))) - signed, signed)


def ulp_distance(bits_a: np.ndarray, bits_b: np.ndarray, dtype: ElementType) -> np.ndarray:
    """Elementwise ULP distance as uint64 (float64's can exceed int64: the difference wraps back exactly)."""
    a, b = ordered(bits_a, dtype), ordered(bits_b, dtype)
    return np.where(a >= b, a.view(np.uint64) - b.view(np.uint64), b.view(np.uint64) - a.view(np.uint64))


@dataclasses.dataclass(frozen=True)
class BitStats:
    """How two equally long element streams differ, bit for bit (NaN policy: see :class:`.compare.Mismatch`)."""

    elements: int
    mismatched: int = 0
    nan_mismatches: int = 0  # mismatched pairs where either side is NaN (no ULP distance)
    signed_zero_mismatches: int = 0  # +0 against -0: other bits, 0 ULP
    max_ulp: int | None = None  # over mismatched pairs without NaN; None: none, or not a float dtype
    max_abs_delta: float | None = None  # over mismatched pairs without NaN
    first_index: int | None = None  # flat index of the first mismatched element
    first_a: float | int | bool | None = None
    first_b: float | int | bool | None = None

    @property
    def equal(self) -> bool:
        return self.mismatched == 0

    @property
    def only_signed_zeros(self) -> bool:
        return self.mismatched > 0 and self.signed_zero_mismatches == self.mismatched

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class BitComparison:
    """Running counts over chunks of two element streams: ``update`` each pair of chunks, then ``stats``."""

    def __init__(self, dtype: ElementType):
        self.dtype = dtype
        self._elements = self._mismatched = self._nan = self._signed_zero = 0
        self._max_ulp: int | None = None
        self._max_delta: float | None = None
        self._first: tuple[int, object, object] | None = None
        self._scratch = _Scratch()

    def update(self, chunk_a, chunk_b, nbytes: int) -> None:
        """Compare the first ``nbytes`` of two buffers (bytearray/bytes/memoryview): the next elements."""
        if nbytes % self.dtype.itemsize:
            raise ValueError(f"a chunk of {nbytes} bytes is not a whole number of {self.dtype.name} elements")
        offset = self._elements
        count = nbytes // self.dtype.itemsize
        self._elements += count
        if _same_bytes(chunk_a, chunk_b, nbytes):
            return
        bits_a = np.frombuffer(chunk_a, dtype=self.dtype.bits_dtype, count=count)
        bits_b = np.frombuffer(chunk_b, dtype=self.dtype.bits_dtype, count=count)
        for start in range(0, count, _BLOCK_ELEMENTS):  # blocks that stay in the CPU cache
            self._add_block(bits_a[start:start + _BLOCK_ELEMENTS], bits_b[start:start + _BLOCK_ELEMENTS],
                            offset + start)

    def _add_block(self, a: np.ndarray, b: np.ndarray, offset: int) -> None:
        # Every temporary is a slice of a scratch array made once: fresh ones would be faulted in each block.
        n = a.size
        scratch = self._scratch
        differ = np.not_equal(a, b, out=scratch.differ[:n])
        count = int(np.count_nonzero(differ))
        if not count:
            return
        self._mismatched += count
        if self._first is None:
            where = int(np.argmax(differ))
            self._first = (offset + where, self.dtype.value(a[where:where + 1]), self.dtype.value(b[where:where + 1]))
        values_a = self.dtype.values(a, scratch.values_a[:n], scratch.widened[:n])
        values_b = self.dtype.values(b, scratch.values_b[:n], scratch.widened[:n])
        numbers = differ
        if self.dtype.is_float:
            with_nan = np.isnan(values_a, out=scratch.mask[:n])
            with_nan |= np.isnan(values_b, out=scratch.numbers[:n])
            with_nan &= differ
            self._nan += int(np.count_nonzero(with_nan))
            numbers = np.logical_not(with_nan, out=scratch.numbers[:n])
            numbers &= differ
            zeros = np.equal(values_a, 0.0, out=scratch.mask[:n])
            zeros &= values_b == 0.0
            zeros &= differ
            self._signed_zero += int(np.count_nonzero(zeros))
            if numbers.any():
                ulps = _ulp_distance_into(a, b, self.dtype, scratch, n)
                self._max_ulp = max(self._max_ulp or 0, int(np.max(ulps, where=numbers, initial=0)))
        if numbers.any():
            with np.errstate(over="ignore", invalid="ignore"):
                delta = np.subtract(values_a, values_b, out=values_a)
                delta = float(np.max(np.abs(delta, out=delta), where=numbers, initial=0.0))
            self._max_delta = delta if self._max_delta is None else max(self._max_delta, delta)

    def stats(self) -> BitStats:
        first_index, first_a, first_b = self._first if self._first is not None else (None, None, None)
        return BitStats(self._elements, self._mismatched, self._nan, self._signed_zero, self._max_ulp,
                        self._max_delta, first_index, first_a, first_b)


class _Scratch:
    """Work arrays of one block, allocated once per comparison."""

    def __init__(self, size: int = _BLOCK_ELEMENTS):
        self.differ = np.empty(size, bool)
        self.mask = np.empty(size, bool)
        self.numbers = np.empty(size, bool)
        self.values_a = np.empty(size, np.float64)
        self.values_b = np.empty(size, np.float64)
        self.widened = np.empty(size, np.uint32)
        self.ordered_a = np.empty(size, np.int64)
        self.ordered_b = np.empty(size, np.int64)
        self.sign = np.empty(size, np.int64)


def _ordered_into(bits: np.ndarray, dtype: ElementType, out: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """:func:`ordered` into ``out``, ``sign`` as scratch, branch-free: the magnitude, negated where the
    sign bit is set ((x ^ -1) - -1 == -x)."""
    out[...] = bits.view(np.dtype(f"<i{dtype.itemsize}"))  # sign-extended
    np.right_shift(out, 63, out=sign)  # 0, or -1 where negative
    out &= np.int64((1 << (dtype.itemsize * 8 - 1)) - 1)
    out ^= sign
    out -= sign
    return out


def _ulp_distance_into(a: np.ndarray, b: np.ndarray, dtype: ElementType, scratch: _Scratch, n: int) -> np.ndarray:
    """:func:`ulp_distance` of one block, in the scratch arrays where it fits in int64."""
    if dtype.itemsize > 4:  # float64: the distance may exceed int64
        return ulp_distance(a, b, dtype)
    ordered_a = _ordered_into(a, dtype, scratch.ordered_a[:n], scratch.sign[:n])
    ordered_b = _ordered_into(b, dtype, scratch.ordered_b[:n], scratch.sign[:n])
    ordered_a -= ordered_b
    return np.abs(ordered_a, out=ordered_a)


def _same_bytes(chunk_a, chunk_b, nbytes: int) -> bool:
    """memcmp of the first ``nbytes``: bytearray == bytearray is memcmp (a memoryview compare is not)."""
    if len(chunk_a) == nbytes and len(chunk_b) == nbytes and not isinstance(chunk_a, memoryview):
        return chunk_a == chunk_b
    return np.array_equal(np.frombuffer(chunk_a, np.uint8, nbytes), np.frombuffer(chunk_b, np.uint8, nbytes))


def compare_arrays(a: np.ndarray, b: np.ndarray, dtype: ElementType | str) -> BitStats:
    """Compare two in-memory arrays (C order) in one chunk."""
    dtype = lookup_dtype(dtype) if isinstance(dtype, str) else dtype
    raw_a = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    raw_b = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    if raw_a.size != raw_b.size:
        raise ValueError(f"arrays of {raw_a.size} and {raw_b.size} bytes cannot be compared element by element")
    comparison = BitComparison(dtype)
    comparison.update(raw_a.tobytes(), raw_b.tobytes(), raw_a.size)
    return comparison.stats()
