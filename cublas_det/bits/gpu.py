"""The GPU side of the comparisons: one module of kernels compiled once (NVRTC, through CuPy) for every
element format, and their launch on the current stream."""

from __future__ import annotations

import functools

from ..base.dtypes import ELEMENT_TYPES

_FORMATS = {name: element.format for name, element in ELEMENT_TYPES.items() if element.format}
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

// A differing pair's rank: its ULP distance + 1, or 0 with a NaN on either side (no distance; the
// difference of a differing pair is NaN only then: equal infinities have equal bits).
template <typename F>
__device__ u64 rank(typename F::bits r, typename F::bits o) {
    return isnan(F::value(r) - F::value(o)) ? 0 : ulps(F::ordered(r), F::ordered(o)) + 1;
}

// record: differing elements, those with a NaN, signed zeros (rank 1: +0 against -0, the one pair 0 ULP
// apart), the greatest rank, the greatest |difference| over pairs without NaN (encoded).
template <typename F>
__device__ void stats(const typename F::bits* ref, const typename F::bits* out, i64 n, u64* record) {
    u64 count = 0, nan = 0, zero = 0, worst = 0, diff = 0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        typename F::bits r = ref[i], o = out[i];
        if (r != o) {
            count++;
            u64 k = rank<F>(r, o);
            if (k == 0) { nan++; continue; }
            zero += k == 1;
            worst = larger(worst, k);
            diff = larger(diff, encoded(fabs(F::value(r) - F::value(o))));
        }
    }
    count = warp_sum(count); nan = warp_sum(nan); zero = warp_sum(zero); worst = warp_max(worst); diff = warp_max(diff);
    if ((threadIdx.x & 31) == 0 && count) {
        atomicAdd(record, count); atomicAdd(record + 1, nan); atomicAdd(record + 2, zero);
        atomicMax(record + 3, worst); atomicMax(record + 4, diff);
    }
}

// record[5]: index << 32 | the output's bits, of the first differing element of record[3]'s rank.
template <typename F>
__device__ void locate(const typename F::bits* ref, const typename F::bits* out, i64 n, u64* record) {
    const u64 worst = record[3];
    u64 key = ~0ULL;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        typename F::bits r = ref[i], o = out[i];
        if (r != o && rank<F>(r, o) == worst) key = smaller(key, ((u64)i << 32) | (u64)o);
    }
    key = warp_min(key);
    if ((threadIdx.x & 31) == 0 && key != ~0ULL) atomicMin(record + 5, key);
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
extern "C" __global__ void cublas_det_mismatch_stats_{name}(const {fmt}::bits* a, const {fmt}::bits* b, i64 n, u64* r) {{ stats<{fmt}>(a, b, n, r); }}
extern "C" __global__ void cublas_det_mismatch_locate_{name}(const {fmt}::bits* a, const {fmt}::bits* b, i64 n, u64* r) {{ locate<{fmt}>(a, b, n, r); }}
extern "C" __global__ void cublas_det_error_stats_{name}(const {fmt}::bits* a, const double* b, i64 n, u64* r) {{ error<{fmt}>(a, b, n, r); }}
"""


def module_source() -> str:
    """The whole module: the kernels and an entry point per kernel and element format (named
    ``cublas_det_*``, which a kernel trace leaves out of a GEMM's kernels)."""
    return KERNEL_SOURCE + "".join(_WRAPPERS.format(name=name, fmt=name.upper()) for name in _FORMATS.values())


@functools.cache
def _module(device_id: int):
    import cupy

    return cupy.RawModule(code=module_source())


def kernel_format(dtype) -> str:
    """The kernels' format of an element type (``f32`` ...); TypeError for a type they do not take."""
    name = _FORMATS.get(dtype.name)
    if name is None:
        raise TypeError(f"cannot compare {dtype} bit for bit: {', '.join(_FORMATS)} expected")
    return name


def launch(kernel: str, like, arrays, record) -> None:
    """Queue ``kernel`` for ``like``'s element format on the current stream over ``arrays``."""
    import cupy

    name = kernel_format(like.dtype)
    n = int(like.size)
    device = cupy.cuda.runtime.getDevice()
    blocks = max(1, min(-(-n // THREADS), 8 * sm_count(device)))
    function = _module(device).get_function(f"cublas_det_{kernel}_{name}")
    function((blocks,), (THREADS,), (*arrays, cupy.int64(n), record))


@functools.cache
def sm_count(device_id: int) -> int:
    import cupy

    runtime = cupy.cuda.runtime
    return runtime.deviceGetAttribute(runtime.cudaDevAttrMultiProcessorCount, device_id)
