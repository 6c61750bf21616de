"""The tensor digest: the numpy implementation against the definition, the CUDA source against both."""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from cublas_det.bits import digest
from cublas_det.bits.digest import (
    MASK64,
    WEYL,
    DigestAccumulator,
    digest_groups,
    finish,
    fmix64,
    host_digest,
    smix64,
)
from cublas_det.check.devices import Agreement
from cublas_det.check.scenarios.modes import identical_groups
from cublas_det.core.config import GemmConfig
from cublas_det.core.shapes import parse_shape

from .conftest import nvrtc_ptx

SIZES = [0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 47, 64, 1000, 4097]


def reference_digest(data: bytes) -> str:
    """The module docstring's definition, word by word on Python ints."""
    words = (len(data) + 7) // 8
    padded = data.ljust(words * 8, b"\0")
    s1 = s2 = 0
    for i in range(words):
        x = int.from_bytes(padded[8 * i:8 * i + 8], "little") ^ (((i + 1) * WEYL) & MASK64)
        s1 = (s1 + fmix64(x)) & MASK64
        s2 = (s2 + smix64(x)) & MASK64
    return finish(s1, s2, len(data))


@pytest.mark.parametrize("size", SIZES)
def test_numpy_digest_follows_the_definition(size):
    data = np.random.default_rng(size).bytes(size)
    assert host_digest(np.frombuffer(data, np.uint8)) == reference_digest(data)


@pytest.mark.parametrize("piece", [1, 3, 8, 13, 4096])
def test_any_chunking_gives_the_same_digest(piece):
    data = np.random.default_rng(1).bytes(10_007)
    accumulator = DigestAccumulator()
    for start in range(0, len(data), piece):
        accumulator.update(data[start:start + piece])
    assert accumulator.nbytes == len(data)
    assert accumulator.hexdigest() == reference_digest(data)


def test_long_inputs_cross_the_numpy_pass_boundary(monkeypatch):
    monkeypatch.setattr(digest, "_WORDS_PER_PASS", 5)  # many passes over a short input
    data = np.random.default_rng(2).bytes(333)
    assert host_digest(np.frombuffer(data, np.uint8)) == reference_digest(data)


@pytest.mark.parametrize("data, expected", [
    (b"", "7d6e4ac38b2b1be27ab40e090f363a7d"),
    (b"cublas_det", "98fecb37153b281367ef5a9359c4ba46"),
    (np.arange(10, dtype=np.float32).tobytes(), "3b84957bca229438c431a1ed1a453c8b"),
])
def test_known_answers_pin_the_algorithm(data, expected):
    # A change of these values would make earlier trace logs incomparable: it needs a new ALGORITHM name.
    assert digest.ALGORITHM == "wsum128-v1"
    assert reference_digest(data) == expected
    assert host_digest(np.frombuffer(data, np.uint8)) == expected


def test_every_single_bit_flip_changes_the_digest():
    data = bytearray(np.random.default_rng(3).bytes(40))
    base = host_digest(np.frombuffer(bytes(data), np.uint8))
    seen = {base}
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        seen.add(host_digest(np.frombuffer(bytes(flipped), np.uint8)))
    assert len(seen) == len(data) * 8 + 1


def test_position_and_length_matter():
    words = np.arange(1, 9, dtype=np.uint64)
    assert host_digest(words) != host_digest(words[::-1].copy())  # the same words in another order
    assert host_digest(np.zeros(8, np.uint8)) != host_digest(np.zeros(9, np.uint8))  # zero padding is not data
    assert host_digest(np.zeros(8, np.uint8)) != host_digest(np.zeros(16, np.uint8))


def test_digest_is_of_the_c_order_bytes():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert host_digest(np.asfortranarray(array)) == host_digest(array)
    assert host_digest(array.T) == host_digest(np.ascontiguousarray(array.T)) != host_digest(array)


# -- the CUDA source, checked without a GPU ------------------------------------------------------
C_HARNESS = """
#define __device__
#define __forceinline__ static inline
typedef struct { unsigned long long x, y; } ulonglong2;
#define __ldg(p) (*(p))
%s
void all_threads(const unsigned char* data, unsigned long long nbytes, unsigned long long nthreads,
                 unsigned long long* out) {
    unsigned long long s1 = 0, s2 = 0;
    for (unsigned long long tid = 0; tid < nthreads; ++tid) {
        unsigned long long t1 = 0, t2 = 0;
        cbd_thread_sums(data, nbytes, tid, nthreads, &t1, &t2);
        s1 += t1; s2 += t2;
    }
    out[0] = s1; out[1] = s2;
}
"""


@pytest.fixture(scope="module")
def c_thread_sums(tmp_path_factory):
    """The kernel's per-thread work (cbd_thread_sums), compiled by the host C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the CUDA source's thread function")
    directory = tmp_path_factory.mktemp("digest_c")
    source = directory / "harness.c"
    library = directory / "harness.so"
    source.write_text(C_HARNESS % digest.cuda_source())
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True,
                   capture_output=True)
    function = ctypes.CDLL(str(library)).all_threads
    function.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_ulonglong)]

    def run(data: bytes, nthreads: int) -> tuple[int, int]:
        buffer = np.zeros(len(data) + 16, np.uint8)
        start = (-buffer.ctypes.data) % 16  # the kernel's 16-byte alignment
        buffer[start:start + len(data)] = np.frombuffer(data, np.uint8)
        out = (ctypes.c_ulonglong * 2)()
        function(buffer.ctypes.data + start, len(data), nthreads, out)
        return int(out[0]), int(out[1])

    return run


@pytest.mark.parametrize("size", SIZES + [16 * 1000 + 8, 16 * 4 * 37 + 5])
@pytest.mark.parametrize("nthreads", [1, 2, 3, 32, 37, 256, 5000])
def test_cuda_thread_split_covers_every_word_once_for_any_thread_count(c_thread_sums, size, nthreads):
    data = np.random.default_rng(size).bytes(size)
    accumulator = DigestAccumulator()
    accumulator.update(data)
    assert c_thread_sums(data, nthreads) == accumulator.sums()


def test_cuda_source_compiles_with_nvrtc():
    assert "cublas_det_digest" in nvrtc_ptx(digest.cuda_source(), "digest.cu")


# -- on the GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("size", SIZES + [2**20 + 3, 100_000_000])
def test_gpu_digest_equals_numpy_digest_of_the_same_bytes(size):
    import cupy

    host = np.frombuffer(np.random.default_rng(size).bytes(size), np.uint8)
    assert digest.device_digest(cupy.asarray(host)) == host_digest(host)


@pytest.mark.gpu
def test_gpu_digest_of_views_dtypes_and_misaligned_data():
    import cupy

    host = np.random.default_rng(5).standard_normal((301, 77)).astype(np.float32)
    device = cupy.asarray(host)
    cases = [(device, host), (device.T, host.T), (device[:, ::2], host[:, ::2]),
             (device.reshape(-1)[1:], host.reshape(-1)[1:]),  # 4 bytes past a 16-byte boundary
             (device.astype(cupy.float16), host.astype(np.float16)), (device > 0, host > 0),
             (device.astype(cupy.int64), host.astype(np.int64))]
    for on_gpu, on_cpu in cases:
        assert digest.device_digest(on_gpu) == host_digest(on_cpu)


@pytest.mark.gpu
@pytest.mark.parametrize("blocks, threads", [(1, 32), (1, 1024), (3, 96), (64, 256), (1000, 128), (7919, 64)])
def test_gpu_sums_do_not_depend_on_the_launch_configuration(blocks, threads):
    import cupy

    host = np.frombuffer(np.random.default_rng(6).bytes(3_000_017), np.uint8)
    sums = cupy.empty(2, cupy.uint64)
    digest.queue_device_sums(cupy.asarray(host), sums, blocks=blocks, threads=threads)
    accumulator = DigestAccumulator()
    accumulator.update(host)
    assert tuple(int(v) for v in sums.get()) == accumulator.sums()


def test_one_digest_grouping_for_modes_devices_and_fleets():
    assert digest_groups([("PEDANTIC", "x"), ("TF32", "y"), ("DEFAULT", "x")]) == {"x": ["PEDANTIC", "DEFAULT"],
                                                                                     "y": ["TF32"]}
    assert identical_groups({"PEDANTIC": "x", "TF32": "y", "DEFAULT": "x"}) == [["PEDANTIC", "DEFAULT"], ["TF32"]]
    shape = parse_shape("64x64x64")

    def majority(digests):
        return Agreement(shape, GemmConfig(), digests, {}, {}).majority

    assert majority({2: "b", 0: "a", 1: "b", 3: "a"}) == "a"  # a tie: the lowest device's digest
    assert majority({3: "a", 1: "b", 2: "b"}) == "b" and majority({}) is None
