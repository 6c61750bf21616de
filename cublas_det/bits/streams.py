"""Bit-for-bit comparison of two element streams of one dtype, chunk by chunk, with ULP distances (the
ULP distance orders bit patterns like the floats): the :class:`Mismatch` record and its policy."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..base.dtypes import ELEMENT_TYPES, ElementType, lookup

_BLOCK_ELEMENTS = 1 << 15  # elements per block of the mismatch arithmetic
DTYPES = {name: element for name, element in ELEMENT_TYPES.items() if element.comparable}


def lookup_dtype(name: str) -> ElementType:
    """The :class:`~cublas_det.base.dtypes.ElementType` of a name (``fp16`` ...); ValueError if not compared."""
    return lookup(name, DTYPES)


def dtype_name_of(numpy_dtype) -> str:
    """The table name of a numpy dtype (ml_dtypes' bfloat16 included); ValueError if it has no entry."""
    dtype = np.dtype(numpy_dtype)
    if dtype.byteorder == ">":
        raise ValueError(f"big-endian dtype {dtype.str} is not supported; convert it to little-endian")
    if dtype.name not in DTYPES:
        raise ValueError(f"dtype {dtype} is not supported; supported: {', '.join(DTYPES)}")
    return dtype.name


def ordered(bits: np.ndarray, dtype: ElementType, out: np.ndarray | None = None,
            sign: np.ndarray | None = None) -> np.ndarray:
    """Float bit patterns -> int64 ordered like the floats: adjacent floats 1 apart, +0 == -0 == 0; into ``out``
    with ``sign`` as scratch where given. Branch-free: the magnitude, negated where the sign bit is set
    ((x ^ -1) - -1 == -x)."""
    out = np.empty(bits.shape, np.int64) if out is None else out
    sign = np.empty(bits.shape, np.int64) if sign is None else sign
    out[...] = bits.view(np.dtype(f"<i{dtype.itemsize}"))  # sign-extended
    np.right_shift(out, 63, out=sign)  # 0, or -1 where negative
    out &= np.int64((1 << (dtype.itemsize * 8 - 1)) - 1)
    out ^= sign
    out -= sign
    return out


def ulp_distance(bits_a: np.ndarray, bits_b: np.ndarray, dtype: ElementType) -> np.ndarray:
    """Elementwise ULP distance as uint64 (float64's can exceed int64: the difference wraps back exactly)."""
    a, b = ordered(bits_a, dtype), ordered(bits_b, dtype)
    return np.where(a >= b, a.view(np.uint64) - b.view(np.uint64), b.view(np.uint64) - a.view(np.uint64))


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """How two arrays (or element streams) of one type differ, bit for bit: the one record of the checks
    and of the diff (A is the reference, B the actual values).

    Equal bits are equal, NaNs included. A mismatched pair with a NaN on either side has no ULP distance:
    it is counted in ``nan_mismatches`` and enters neither ``max_ulp`` nor ``max_abs_diff``. +0 against -0
    is a mismatch of 0 ULP, counted in ``signed_zero_mismatches``. ``max_ulp`` and ``max_abs_diff`` are 0 when
    nothing differs, and None when every mismatched pair holds a NaN (``max_ulp`` also for a type that is
    not a float). The location (``index``, in the array's shape, and both values there) is the first element
    (lowest flat index) of the greatest distance: the ULP distance for floats, |a - b| for integers and bools;
    a NaN pair ranks below every number, so it is located only when only NaN pairs differ.
    """

    mismatched_elements: int
    total_elements: int
    max_abs_diff: float | None = 0.0
    max_ulp: int | None = 0
    index: tuple[int, ...] | None = None  # None when identical
    reference_value: float | int | bool | None = None
    actual_value: float | int | bool | None = None
    nan_mismatches: int = 0
    signed_zero_mismatches: int = 0

    @property
    def identical(self) -> bool:
        return self.mismatched_elements == 0

    @property
    def only_signed_zeros(self) -> bool:
        return self.mismatched_elements > 0 and self.signed_zero_mismatches == self.mismatched_elements

    def to_dict(self) -> dict:
        return {**vars(self), "index": list(self.index) if self.index is not None else None}


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A flat (C-order) index in ``shape``, as Python ints; by numpy (cupy.unravel_index rejects Python ints)."""
    return tuple(int(i) for i in np.unravel_index(flat, shape))


class BitComparison:
    """The :class:`Mismatch` of two element streams, chunk by chunk: ``update`` each pair of chunks, then
    ``stats``; ``shape``: the arrays' (the location's; flat when not given)."""

    def __init__(self, dtype: ElementType, shape: tuple[int, ...] | None = None):
        self.dtype, self.shape = dtype, shape
        self._elements = self._mismatched = self._nan = self._signed_zero = 0
        self._max_delta: float | None = None
        self._worst: tuple | None = None  # (distance, flat index, a, b): the first at the greatest distance
        self._first_nan: tuple | None = None  # (flat index, a, b) of the first NaN pair
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
        values_a = self.dtype.values(a, scratch.values_a[:n], scratch.widened[:n])
        values_b = self.dtype.values(b, scratch.values_b[:n], scratch.widened[:n])
        numbers, ulps = differ, None
        if self.dtype.is_float:
            with_nan = np.isnan(values_a, out=scratch.mask[:n])
            with_nan |= np.isnan(values_b, out=scratch.numbers[:n])
            with_nan &= differ
            nans = int(np.count_nonzero(with_nan))
            if nans and self._first_nan is None:
                self._first_nan = self._values_at(a, b, offset, int(np.argmax(with_nan)))
            self._nan += nans
            numbers = np.logical_not(with_nan, out=scratch.numbers[:n])
            numbers &= differ
            zeros = np.equal(values_a, 0.0, out=scratch.mask[:n])
            zeros &= values_b == 0.0
            zeros &= differ
            self._signed_zero += int(np.count_nonzero(zeros))
            if count == nans:
                return
            ulps = _ulp_distance_into(a, b, self.dtype, scratch, n)
        elif self.dtype.itemsize == 8:  # 64-bit integers ranked by their exact |a - b| (float64 rounds past 2**53)
            ordered_a, ordered_b = (a.view(np.int64), b.view(np.int64)) if self.dtype.name == "int64" else (a, b)
            ulps = np.where(ordered_a >= ordered_b, a - b, b - a)  # unsigned: wraps back to the exact distance
        with np.errstate(over="ignore", invalid="ignore"):
            delta = np.subtract(values_a, values_b, out=values_a)
            delta = np.abs(delta, out=delta)
        largest = float(np.max(delta, where=numbers, initial=0.0))
        self._max_delta = largest if self._max_delta is None else max(self._max_delta, largest)
        self._locate(delta if ulps is None else ulps, numbers, a, b, offset)

    def _locate(self, distance: np.ndarray, numbers: np.ndarray, a: np.ndarray, b: np.ndarray, offset: int) -> None:
        """Keep the first element of the greatest distance among ``numbers`` (earlier blocks win a tie)."""
        largest = np.max(distance, where=numbers, initial=0).item()
        if self._worst is None or largest > self._worst[0]:
            at = np.equal(distance, largest, out=self._scratch.mask[:a.size])
            at &= numbers
            self._worst = (largest, *self._values_at(a, b, offset, int(np.argmax(at))))

    def _values_at(self, a: np.ndarray, b: np.ndarray, offset: int, where: int) -> tuple:
        return offset + where, self.dtype.value(a[where:where + 1]), self.dtype.value(b[where:where + 1])

    def stats(self) -> Mismatch:
        located = self._worst[1:] if self._worst is not None else self._first_nan
        if located is None:
            return Mismatch(0, self._elements)
        max_ulp = self._worst[0] if self._worst is not None and self.dtype.is_float else None
        shape = self.shape if self.shape is not None else (self._elements,)
        return Mismatch(self._mismatched, self._elements, self._max_delta, max_ulp, unravel(located[0], shape),
                        *located[1:], self._nan, self._signed_zero)


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


def _ulp_distance_into(a: np.ndarray, b: np.ndarray, dtype: ElementType, scratch: _Scratch, n: int) -> np.ndarray:
    """:func:`ulp_distance` of one block, in the scratch arrays where it fits in int64."""
    if dtype.itemsize > 4:  # float64: the distance may exceed int64
        return ulp_distance(a, b, dtype)
    ordered_a = ordered(a, dtype, scratch.ordered_a[:n], scratch.sign[:n])
    ordered_b = ordered(b, dtype, scratch.ordered_b[:n], scratch.sign[:n])
    ordered_a -= ordered_b
    return np.abs(ordered_a, out=ordered_a)


def _same_bytes(chunk_a, chunk_b, nbytes: int) -> bool:
    """memcmp of the first ``nbytes``: bytearray == bytearray is memcmp (a memoryview compare is not)."""
    if len(chunk_a) == nbytes and len(chunk_b) == nbytes and not isinstance(chunk_a, memoryview):
        return chunk_a == chunk_b
    return np.array_equal(np.frombuffer(chunk_a, np.uint8, nbytes), np.frombuffer(chunk_b, np.uint8, nbytes))


def compare_arrays(a: np.ndarray, b: np.ndarray, dtype: ElementType | str) -> Mismatch:
    """Compare two in-memory arrays (C order) in one chunk; the location in ``a``'s shape."""
    dtype = lookup_dtype(dtype) if isinstance(dtype, str) else dtype
    raw_a = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    raw_b = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    if raw_a.size != raw_b.size:
        raise ValueError(f"arrays of {raw_a.size} and {raw_b.size} bytes cannot be compared element by element")
    comparison = BitComparison(dtype, np.shape(a))
    comparison.update(raw_a.tobytes(), raw_b.tobytes(), raw_a.size)
    return comparison.stats()
