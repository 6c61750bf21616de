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

import concurrent.futures
import dataclasses
import functools
import hashlib
import threading


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


def compare(reference, actual) -> Mismatch:
    """Compare two arrays of one shape and float type bit for bit and locate the worst element."""
    if reference.shape != actual.shape or reference.dtype != actual.dtype:
        raise ValueError(f"cannot compare {reference.dtype}{reference.shape} with {actual.dtype}{actual.shape}")
    tracker = MismatchTracker(reference, 1)
    tracker.record(actual)
    return tracker.summary().worst


def digest(array) -> str:
    """sha256 of the array's bytes (copied to the host), comparable across processes and machines."""
    return bytes_digest(_host(array))


HASHERS = 4  # threads hashing at once, and host copies waiting for them at most


def digest_later(array, stream=None) -> concurrent.futures.Future:
    """:func:`digest` in a background thread (the copy and hashlib release the GIL) while this one goes
    on; the array must stay unchanged until the future is done. A CuPy array is copied on ``stream``
    (default: the current one), after the work queued there. Waits while HASHERS digests are under
    way: the host holds that many outputs at most."""
    if _xp(array).__name__ == "cupy":
        import cupy

        stream = stream or cupy.cuda.get_current_stream()

    def hashed() -> str:
        if stream is None:
            return bytes_digest(array)
        with array.device:  # a thread starts on device 0: the copy runs on the array's, on its stream
            return bytes_digest(array.get(stream=stream))

    pool, slots = _hashers()
    slots.acquire()
    try:
        future = pool.submit(hashed)
    except BaseException:
        slots.release()
        raise
    future.add_done_callback(lambda _: slots.release())
    return future


@functools.cache
def _hashers() -> tuple[concurrent.futures.ThreadPoolExecutor, threading.BoundedSemaphore]:
    return (concurrent.futures.ThreadPoolExecutor(HASHERS, thread_name_prefix="digest"),
            threading.BoundedSemaphore(HASHERS))


def _host(array):
    return array.get() if _xp(array).__name__ == "cupy" else array


def bytes_digest(array) -> str:
    """sha256 of a host array's bytes, through a byte view (the buffer protocol has no format for
    ml_dtypes' bfloat16, and a view copies nothing)."""
    import numpy

    return hashlib.sha256(numpy.ascontiguousarray(array).reshape(-1).view("uint8").data).hexdigest()


def relative_error(actual, reference64) -> float:
    """``max|actual - ref| / max|ref|`` against a float64 reference (NaN when either holds a NaN)."""
    xp = _xp(actual)
    if xp.__name__ == "cupy":
        record = xp.zeros(3, xp.uint64)
        _launch("error_stats", actual, (actual, xp.ascontiguousarray(reference64, xp.float64)), record)
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
    """Compare many outputs with one reference without a host round trip per output.

    Per recorded output it keeps four numbers (on the device, for CuPy arrays): the mismatched
    element count, the greatest ULP distance, the greatest absolute difference (+1, as the bits of a
    non-negative double; 0 when no mismatch had a finite one) and the location key (index << 32 |
    the output's bits there) of the first element at that distance. ``summary()`` syncs once.
    On the GPU each record is two passes of one compiled module (:data:`KERNEL_SOURCE`): a checking
    loop must cost little more than the GEMMs it checks; on numpy the same arithmetic runs with
    array operations.
    """

    def __init__(self, reference, max_runs: int):
        xp = self._xp = _xp(reference)
        _bits(xp, reference)  # a float format this module compares, or TypeError
        if reference.size >= 2**32:
            raise ValueError(f"cannot compare {reference.size} elements: the location key holds 2**32 at most")
        import numpy

        self._reference = reference
        records = numpy.zeros((max_runs, 4), numpy.uint64)
        records[:, 3] = NO_KEY
        self._records = xp.asarray(records)  # made on the host: no fill kernel to compile
        self._runs = 0

    def record(self, actual) -> None:
        """Compare one output (the reference's shape and type) with the reference; queued on the current stream."""
        if self._runs >= self._records.shape[0]:
            raise ValueError(f"MismatchTracker was made for {self._records.shape[0]} runs")
        xp, record = self._xp, self._records[self._runs]
        if xp.__name__ == "cupy":
            operands = (self._reference, xp.ascontiguousarray(actual))
            _launch("mismatch_stats", self._reference, operands, record)
            _launch("mismatch_locate", self._reference, operands, record)
        else:
            record[:] = _host_record(self._reference, actual)
        self._runs += 1

    def summary(self) -> RunsSummary:
        import numpy

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
        index = _unravel(key[0], self._reference.shape)
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
    import numpy

    return float(numpy.array(encoded - 1, numpy.uint64).view(numpy.float64)) if encoded else 0.0


def _host_record(reference, actual) -> list[int]:
    """One run's four numbers (see :class:`MismatchTracker`) with numpy."""
    import numpy

    ref_bits, out_bits = _bits(numpy, reference).reshape(-1), _bits(numpy, actual).reshape(-1)
    differ = numpy.flatnonzero(ref_bits != out_bits)
    if differ.size == 0:
        return [0, 0, 0, NO_KEY]
    ulps = ulp_distance(reference.reshape(-1)[differ], actual.reshape(-1)[differ])
    with numpy.errstate(invalid="ignore"):
        diff = numpy.abs(reference.reshape(-1)[differ].astype(numpy.float64)
                         - actual.reshape(-1)[differ].astype(numpy.float64))
    finite = diff[~numpy.isnan(diff)]
    largest = int(finite.max().view(numpy.uint64)) + 1 if finite.size else 0
    at = int(numpy.argmax(ulps))
    return [int(differ.size), int(ulps[at]), largest, (int(differ[at]) << 32) | int(out_bits[differ[at]])]


# -- the GPU module: one NVRTC compile for every kernel and element format --------------------------
_FORMATS = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
THREADS = 256

KERNEL_SOURCE = r"""
typedef unsigned long long u64;
typedef long long i64;

// Per element format: its bits, their order (adjacent floats one apart, +0 == -0), its value.
struct F32 {
    typedef unsigned int bits;
    static __device__ i64 ordered(bits x) { int s = (int)x; return s < 0 ? -2147483648LL - s : s; }
    static __device__ double value(bits x) { return (double)__uint_as_float(x); }
};
struct BF16 {
    typedef unsigned short bits;
    static __device__ i64 ordered(bits x) { short s = (short)x; return s < 0 ? -32768LL - s : s; }
    static __device__ double value(bits x) { return (double)__uint_as_float(((unsigned int)x) << 16); }
};
struct F16 {
    typedef unsigned short bits;
    static __device__ i64 ordered(bits x) { short s = (short)x; return s < 0 ? -32768LL - s : s; }
    static __device__ double value(bits x) {
        int exponent = (x >> 10) & 0x1f, mantissa = x & 0x3ff;
        double v;
        if (exponent == 0) v = ldexp((double)mantissa, -24);
        else if (exponent == 31) v = mantissa ? __longlong_as_double(0x7ff8000000000000LL)
                                              : __longlong_as_double(0x7ff0000000000000LL);
        else v = ldexp((double)(mantissa | 0x400), exponent - 25);
        return (x & 0x8000) ? -v : v;
    }
};

__device__ u64 larger(u64 a, u64 b) { return a > b ? a : b; }
__device__ u64 smaller(u64 a, u64 b) { return a < b ? a : b; }
__device__ u64 warp_sum(u64 v) { for (int o = 16; o; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o); return v; }
__device__ u64 warp_max(u64 v) { for (int o = 16; o; o /= 2) v = larger(v, __shfl_down_sync(0xffffffffu, v, o)); return v; }
__device__ u64 warp_min(u64 v) { for (int o = 16; o; o /= 2) v = smaller(v, __shfl_down_sync(0xffffffffu, v, o)); return v; }
__device__ u64 ulps(i64 a, i64 b) { return a > b ? (u64)(a - b) : (u64)(b - a); }
// A non-negative double's bits order as its values do; +1 leaves 0 for "none".
__device__ u64 encoded(double v) { return (u64)__double_as_longlong(v) + 1; }

// record: count of differing elements, greatest ULP distance, greatest |difference| (encoded).
template <typename F>
__device__ void stats(const typename F::bits* ref, const typename F::bits* out, i64 n, u64* record) {
    u64 count = 0, ulp = 0, diff = 0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        typename F::bits r = ref[i], o = out[i];
        if (r != o) {
            count++;
            ulp = larger(ulp, ulps(F::ordered(r), F::ordered(o)));
            double d = fabs(F::value(r) - F::value(o));
            if (!isnan(d)) diff = larger(diff, encoded(d));  // NaN differences are not recorded
        }
    }
    count = warp_sum(count); ulp = warp_max(ulp); diff = warp_max(diff);
    if ((threadIdx.x & 31) == 0 && count) {
        atomicAdd(record, count); atomicMax(record + 1, ulp); atomicMax(record + 2, diff);
    }
}

// record[3]: index << 32 | the output's bits, of the first differing element at record[1]'s distance.
template <typename F>
__device__ void locate(const typename F::bits* ref, const typename F::bits* out, i64 n, u64* record) {
    const u64 worst = record[1];
    u64 key = ~0ULL;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        typename F::bits r = ref[i], o = out[i];
        if (r != o && ulps(F::ordered(r), F::ordered(o)) == worst) key = smaller(key, ((u64)i << 32) | (u64)o);
    }
    key = warp_min(key);
    if ((threadIdx.x & 31) == 0 && key != ~0ULL) atomicMin(record + 3, key);
}

// record: greatest |actual - ref|, greatest |ref| (both encoded), 1 if either was NaN.
template <typename F>
__device__ void error(const typename F::bits* actual, const double* ref, i64 n, u64* record) {
    u64 diff = 0, scale = 0, nan = 0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        double d = fabs(F::value(actual[i]) - ref[i]), m = fabs(ref[i]);
        if (isnan(d) || isnan(m)) nan = 1;
        else { diff = larger(diff, encoded(d)); scale = larger(scale, encoded(m)); }
    }
    diff = warp_max(diff); scale = warp_max(scale); nan = warp_max(nan);
    if ((threadIdx.x & 31) == 0) { atomicMax(record, diff); atomicMax(record + 1, scale); atomicMax(record + 2, nan); }
}
"""
_WRAPPERS = r"""
extern "C" __global__ void mismatch_stats_{name}(const {fmt}::bits* a, const {fmt}::bits* b, i64 n, u64* r) {{ stats<{fmt}>(a, b, n, r); }}
extern "C" __global__ void mismatch_locate_{name}(const {fmt}::bits* a, const {fmt}::bits* b, i64 n, u64* r) {{ locate<{fmt}>(a, b, n, r); }}
extern "C" __global__ void error_stats_{name}(const {fmt}::bits* a, const double* b, i64 n, u64* r) {{ error<{fmt}>(a, b, n, r); }}
"""


def module_source() -> str:
    """The whole module: the kernels and an entry point per kernel and element format."""
    return KERNEL_SOURCE + "".join(_WRAPPERS.format(name=name, fmt=name.upper()) for name in _FORMATS.values())


@functools.cache
def _module(device_id: int):
    import cupy

    return cupy.RawModule(code=module_source())


def _launch(kernel: str, like, arrays, record) -> None:
    """Queue ``kernel`` for ``like``'s element format on the current stream over ``arrays``."""
    import cupy

    name = _FORMATS.get(like.dtype.name)
    if name is None:
        raise TypeError(f"cannot compare {like.dtype} bit for bit: float32, bfloat16 or float16 expected")
    n = int(like.size)
    blocks = max(1, min(-(-n // THREADS), 8 * _sm_count()))
    function = _module(cupy.cuda.runtime.getDevice()).get_function(f"{kernel}_{name}")
    function((blocks,), (THREADS,), (*arrays, cupy.int64(n), record))


@functools.cache
def _sm_count() -> int:
    import cupy

    runtime = cupy.cuda.runtime
    return runtime.deviceGetAttribute(runtime.cudaDevAttrMultiProcessorCount, runtime.getDevice())
