"""Digests of an array's bytes: the sha256 a result records (:func:`digest`, on the host, comparable
across processes, machines and files), and the 128-bit ``wsum128`` hash computed where the array is,
the same on the GPU and on the CPU (:func:`device_digest`, :class:`DigestAccumulator`).

``wsum128-v1`` (not a cryptographic hash) on an array's C-order bytes, ``L`` long::

    w[i]  = the i-th little-endian 64-bit word, i = 0 .. ceil(L/8) - 1 (the last one zero-padded)
    x[i]  = w[i] XOR ((i + 1) * 0x9E3779B97F4A7C15 mod 2**64)      # position matters
    S1    = sum of fmix64(x[i]) mod 2**64                          # MurmurHash3's 64-bit finaliser
    S2    = sum of smix64(x[i]) mod 2**64                          # SplitMix64's finaliser
    d1    = fmix64(S1 XOR fmix64(L + 1)),  d2 = smix64(S2 XOR smix64(L + 1))
    digest = 16 hex digits of d1, then 16 of d2

Addition mod 2**64 is associative and commutative: any split of the words among GPU threads or CPU
chunks gives the same sums; both finalisers are bijections, so one changed word changes both sums.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import threading

import numpy as np

from .compare import array_module
from .gpu import sm_count


def digest(array) -> str:
    """sha256 of the array's bytes (copied to the host), comparable across processes and machines."""
    return bytes_digest(array.get() if array_module(array).__name__ == "cupy" else array)


def digest_groups(pairs) -> dict:
    """``(item, digest)`` pairs grouped by digest, in first-seen order: ``{digest: [item ...]}``."""
    groups: dict = {}
    for item, value in pairs:
        groups.setdefault(value, []).append(item)
    return groups


HASHERS = 4  # threads hashing at once, and host copies waiting for them at most


def digest_later(array) -> concurrent.futures.Future:
    """:func:`digest` in a background thread; the array must stay unchanged until the future is done.
    A CuPy array is copied on the current stream. Waits while HASHERS digests are under way: the host
    holds that many outputs at most."""
    stream = None
    if array_module(array).__name__ == "cupy":
        import cupy
        stream = cupy.cuda.get_current_stream()

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


def bytes_digest(array) -> str:
    """sha256 of a host array's bytes, through a byte view (the buffer protocol has no format for
    ml_dtypes' bfloat16)."""
    return hashlib.sha256(np.ascontiguousarray(array).reshape(-1).view("uint8").data).hexdigest()


ALGORITHM = "wsum128-v1"
DIGEST_HEX_DIGITS = 32
MASK64 = (1 << 64) - 1
WEYL = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, odd: (i + 1) * WEYL differs for every i < 2**64
FMIX_SHIFTS = (33, 33, 33)
FMIX_MULTIPLIERS = (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
SMIX_SHIFTS = (30, 27, 31)
SMIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
_WORDS_PER_PASS = 1 << 20  # words hashed per numpy pass: bounds the temporaries


def _mix(x: int, shifts, multipliers) -> int:
    """A finaliser on a Python int: the definition the vector code is tested against."""
    x ^= x >> shifts[0]
    x = (x * multipliers[0]) & MASK64
    x ^= x >> shifts[1]
    x = (x * multipliers[1]) & MASK64
    return x ^ (x >> shifts[2])


fmix64 = functools.partial(_mix, shifts=FMIX_SHIFTS, multipliers=FMIX_MULTIPLIERS)
smix64 = functools.partial(_mix, shifts=SMIX_SHIFTS, multipliers=SMIX_MULTIPLIERS)


def finish(s1: int, s2: int, nbytes: int) -> str:
    """The digest string from the two word sums and the byte length."""
    d1 = fmix64((s1 ^ fmix64(nbytes + 1)) & MASK64)
    d2 = smix64((s2 ^ smix64(nbytes + 1)) & MASK64)
    return f"{d1:016x}{d2:016x}"


def _mix_array(x: np.ndarray, shifts, multipliers) -> np.ndarray:
    """The finaliser in place on a uint64 array (numpy's uint64 arithmetic wraps mod 2**64)."""
    x ^= x >> np.uint64(shifts[0])
    x *= np.uint64(multipliers[0])
    x ^= x >> np.uint64(shifts[1])
    x *= np.uint64(multipliers[1])
    x ^= x >> np.uint64(shifts[2])
    return x


def word_sums(words: np.ndarray, first_index: int) -> tuple[int, int]:
    """S1 and S2 (mod 2**64) of consecutive words whose first has index ``first_index``."""
    s1 = s2 = 0
    for start in range(0, words.size, _WORDS_PER_PASS):
        part = words[start:start + _WORDS_PER_PASS]
        x = np.arange(first_index + start + 1, first_index + start + 1 + part.size, dtype=np.uint64)
        x *= np.uint64(WEYL)
        x ^= part
        y = x.copy()
        s1 += int(_mix_array(x, FMIX_SHIFTS, FMIX_MULTIPLIERS).sum(dtype=np.uint64))
        s2 += int(_mix_array(y, SMIX_SHIFTS, SMIX_MULTIPLIERS).sum(dtype=np.uint64))
    return s1 & MASK64, s2 & MASK64


class DigestAccumulator:
    """The digest of bytes fed in pieces of any length (``update``), finished by ``hexdigest``."""

    def __init__(self):
        self._s1 = self._s2 = 0
        self._words = 0  # whole words hashed so far
        self._carry = b""  # bytes of a word not yet complete

    @property
    def nbytes(self) -> int:
        return self._words * 8 + len(self._carry)

    def update(self, data) -> None:
        """Hash more bytes (bytes, bytearray, memoryview or a contiguous numpy array)."""
        view = memoryview(data).cast("B")
        if self._carry:
            need = 8 - len(self._carry)
            self._carry += bytes(view[:need])
            view = view[need:]
            if len(self._carry) < 8:
                return
            self._add(np.frombuffer(self._carry, dtype="<u8"))
            self._carry = b""
        whole = len(view) - len(view) % 8
        if whole:
            self._add(np.frombuffer(view[:whole], dtype="<u8"))
        self._carry = bytes(view[whole:])

    def _add(self, words: np.ndarray) -> None:
        s1, s2 = word_sums(words, self._words)
        self._s1 = (self._s1 + s1) & MASK64
        self._s2 = (self._s2 + s2) & MASK64
        self._words += words.size

    def sums(self) -> tuple[int, int]:
        """S1 and S2 over everything fed, the partial last word zero-padded."""
        if not self._carry:
            return self._s1, self._s2
        s1, s2 = word_sums(np.frombuffer(self._carry.ljust(8, b"\0"), dtype="<u8"), self._words)
        return (self._s1 + s1) & MASK64, (self._s2 + s2) & MASK64

    def hexdigest(self) -> str:
        return finish(*self.sums(), self.nbytes)


def host_digest(array) -> str:
    """The digest of a numpy array's C-order bytes (any dtype)."""
    accumulator = DigestAccumulator()
    accumulator.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
    return accumulator.hexdigest()


THREADS_PER_BLOCK = 256
BLOCKS_PER_SM = 4  # one wave of 1024 threads per SM, four 16-byte loads in flight each: HBM kept busy


# The kernel: a str.format template filled by cuda_source().
_CUDA_TEMPLATE = """
typedef unsigned long long cbd_u64;

__device__ __forceinline__ cbd_u64 cbd_fmix64(cbd_u64 x) {{
    x ^= x >> {f[0]}; x *= 0x{fm[0]:016X}ULL; x ^= x >> {f[1]}; x *= 0x{fm[1]:016X}ULL; x ^= x >> {f[2]};
    return x;
}}

__device__ __forceinline__ cbd_u64 cbd_smix64(cbd_u64 x) {{
    x ^= x >> {s[0]}; x *= 0x{sm[0]:016X}ULL; x ^= x >> {s[1]}; x *= 0x{sm[1]:016X}ULL; x ^= x >> {s[2]};
    return x;
}}

__device__ __forceinline__ void cbd_add_word(cbd_u64 w, cbd_u64 i, cbd_u64* s1, cbd_u64* s2) {{
    const cbd_u64 x = w ^ ((i + 1ULL) * 0x{WEYL:016X}ULL);
    *s1 += cbd_fmix64(x);
    *s2 += cbd_smix64(x);
}}

__device__ __forceinline__ void cbd_add_pair(ulonglong2 v, cbd_u64 p, cbd_u64* s1, cbd_u64* s2) {{
    cbd_add_word(v.x, 2ULL * p, s1, s2);
    cbd_add_word(v.y, 2ULL * p + 1ULL, s1, s2);
}}

/* data must be 16-byte aligned. */
__device__ void cbd_thread_sums(const unsigned char* data, cbd_u64 nbytes, cbd_u64 tid, cbd_u64 nthreads,
                                cbd_u64* s1, cbd_u64* s2) {{
    const cbd_u64 nwords = nbytes >> 3;
    const cbd_u64 npairs = nwords >> 1;
    const ulonglong2* pairs = (const ulonglong2*)data;
    cbd_u64 p = tid;
    for (; p + 3ULL * nthreads < npairs; p += 4ULL * nthreads) {{
        const ulonglong2 v0 = __ldg(pairs + p);
        const ulonglong2 v1 = __ldg(pairs + p + nthreads);
        const ulonglong2 v2 = __ldg(pairs + p + 2ULL * nthreads);
        const ulonglong2 v3 = __ldg(pairs + p + 3ULL * nthreads);
        cbd_add_pair(v0, p, s1, s2);
        cbd_add_pair(v1, p + nthreads, s1, s2);
        cbd_add_pair(v2, p + 2ULL * nthreads, s1, s2);
        cbd_add_pair(v3, p + 3ULL * nthreads, s1, s2);
    }}
    for (; p < npairs; p += nthreads) {{
        cbd_add_pair(__ldg(pairs + p), p, s1, s2);
    }}
    if (tid == 0) {{
        if (nwords & 1ULL) {{
            cbd_add_word(((const cbd_u64*)data)[nwords - 1ULL], nwords - 1ULL, s1, s2);
        }}
        const cbd_u64 rest = nbytes & 7ULL;
        if (rest) {{
            cbd_u64 w = 0;
            for (cbd_u64 b = 0; b < rest; ++b) w |= ((cbd_u64)data[nwords * 8ULL + b]) << (8ULL * b);
            cbd_add_word(w, nwords, s1, s2);
        }}
    }}
}}

#ifdef __CUDACC_RTC__
/* sums[0] += S1, sums[1] += S2 of this launch's share; sums must be zero before the launch.
   blockDim.x must be a multiple of 32 (full-warp shuffles). */
extern "C" __global__ void cublas_det_digest(const unsigned char* data, cbd_u64 nbytes, cbd_u64* sums) {{
    cbd_u64 s1 = 0, s2 = 0;
    const cbd_u64 nthreads = (cbd_u64)gridDim.x * blockDim.x;
    const cbd_u64 tid = (cbd_u64)blockIdx.x * blockDim.x + threadIdx.x;
    cbd_thread_sums(data, nbytes, tid, nthreads, &s1, &s2);
    for (int offset = 16; offset > 0; offset >>= 1) {{
        s1 += __shfl_down_sync(0xffffffffu, s1, offset);
        s2 += __shfl_down_sync(0xffffffffu, s2, offset);
    }}
    __shared__ cbd_u64 warp_s1[32], warp_s2[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) {{ warp_s1[warp] = s1; warp_s2[warp] = s2; }}
    __syncthreads();
    if (warp == 0) {{
        const unsigned nwarps = (blockDim.x + 31u) >> 5;
        s1 = lane < nwarps ? warp_s1[lane] : 0ULL;
        s2 = lane < nwarps ? warp_s2[lane] : 0ULL;
        for (int offset = 16; offset > 0; offset >>= 1) {{
            s1 += __shfl_down_sync(0xffffffffu, s1, offset);
            s2 += __shfl_down_sync(0xffffffffu, s2, offset);
        }}
        if (lane == 0) {{ atomicAdd(sums, s1); atomicAdd(sums + 1, s2); }}
    }}
}}
#endif
"""


def cuda_source() -> str:
    """The kernel's source with this module's constants (so the two cannot drift apart). ``cbd_thread_sums``
    alone decides which words a thread hashes; plain C but ``__ldg``, the CPU tests compile and check it."""
    return _CUDA_TEMPLATE.format(f=FMIX_SHIFTS, s=SMIX_SHIFTS, fm=FMIX_MULTIPLIERS, sm=SMIX_MULTIPLIERS,
                                 WEYL=WEYL)


@functools.cache
def _kernel():
    import cupy
    return cupy.RawKernel(cuda_source(), "cublas_det_digest")


def device_bytes(array):
    """A CuPy array's C-order bytes as a 16-byte-aligned 1-D uint8 CuPy array (the kernel loads 16 bytes
    at a time), copied on the device only when not C-contiguous or not aligned."""
    import cupy
    flat = cupy.ascontiguousarray(array).reshape(-1)
    if flat.data.ptr % 16:
        aligned = cupy.empty(flat.shape, flat.dtype)
        aligned[...] = flat
        flat = aligned
    return flat.view(cupy.uint8)


def queue_device_sums(array, sums, *, blocks: int | None = None, threads: int = THREADS_PER_BLOCK) -> int:
    """Queue S1 and S2 of a CuPy array's bytes into ``sums`` (CuPy uint64[2], zeroed here) on the current
    stream, waiting for nothing; return the byte length :func:`finish` needs. ``blocks``/``threads``
    override the launch configuration (the tests vary it: it must not matter)."""
    import cupy
    if threads <= 0 or threads % 32 or threads > 1024:
        raise ValueError(f"threads must be a multiple of 32 in 32..1024, not {threads}")
    data = device_bytes(array)
    nbytes = int(data.size)
    stream = cupy.cuda.get_current_stream()
    sums.data.memset_async(0, 16, stream)
    if blocks is None:
        pairs = nbytes // 16
        blocks = max(1, min(-(-pairs // (threads * 4)), sm_count(data.data.device_id) * BLOCKS_PER_SM))
    _kernel()((blocks,), (threads,), (data, np.uint64(nbytes), sums))
    return nbytes


def device_digest(array) -> str:
    """The digest of a CuPy array, computed on the GPU; waits for it and copies 16 bytes back."""
    import cupy
    sums = cupy.empty(2, dtype=cupy.uint64)
    nbytes = queue_device_sums(array, sums)
    s1, s2 = (int(v) for v in sums.get())
    return finish(s1, s2, nbytes)
