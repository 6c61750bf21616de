import dataclasses
import hashlib

import numpy as np
import pytest

from cublas_det.bits.compare import MismatchTracker, compare, relative_error
from cublas_det.bits.digest import digest, digest_later
from cublas_det.bits.streams import lookup_dtype, ordered
from cublas_det.bits.streams import ulp_distance as bits_ulp_distance


def _values(*xs):
    return np.array(xs, dtype=np.float32)


def ulp_distance(a, b):
    """The one ULP distance (bits.streams), on float arrays."""
    width = np.uint16 if a.dtype.itemsize == 2 else np.uint32
    return bits_ulp_distance(a.view(width), b.view(width), lookup_dtype(a.dtype.name))


def ordered_bits(xs):
    return ordered(xs.view(np.uint32), lookup_dtype(xs.dtype.name))


def test_ulp_distance_of_neighbours_and_signs():
    one = _values(1.0)
    assert ulp_distance(one, np.nextafter(one, np.float32(2)))[0] == 1
    assert ulp_distance(one, np.nextafter(one, np.float32(0)))[0] == 1
    assert ulp_distance(_values(0.0), _values(-0.0))[0] == 0
    tiny = np.float32(1e-45)  # the smallest subnormal: +tiny and -tiny are 2 ULP apart across zero
    assert ulp_distance(_values(tiny), _values(-tiny))[0] == 2
    assert ulp_distance(_values(1.0), _values(2.0))[0] == 2**23


def test_ordered_bits_is_monotonic():
    xs = np.sort(np.random.default_rng(1).standard_normal(1000).astype(np.float32))
    assert np.all(np.diff(ordered_bits(xs)) >= 0)


def test_compare_counts_and_locates_the_worst_element():
    ref = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    out = ref.copy()
    out[4, 2] = np.nextafter(out[4, 2], np.float32(np.inf))
    out[1, 5] = np.nextafter(np.nextafter(out[1, 5], np.float32(-np.inf)), np.float32(-np.inf))
    mismatch = compare(ref, out)
    assert mismatch.mismatched_elements == 2 and mismatch.total_elements == 42
    assert mismatch.max_ulp == 2 and mismatch.index == (1, 5)
    assert mismatch.reference_value == float(ref[1, 5]) and mismatch.actual_value == float(out[1, 5])
    assert mismatch.max_abs_diff == pytest.approx(max(abs(float(ref[1, 5]) - float(out[1, 5])),
                                                      abs(float(ref[4, 2]) - float(out[4, 2]))))
    assert compare(ref, ref.copy()).identical


def test_compare_sees_bit_differences_that_compare_equal_and_locates_them():
    ref = _values(1.0, 0.0, 1.0)
    out = _values(1.0, -0.0, 1.0)
    mismatch = compare(ref, out)
    assert mismatch.mismatched_elements == 1 and mismatch.max_ulp == 0 and mismatch.max_abs_diff == 0.0
    assert mismatch.index == (1,)  # where the signed zero is, not the first element
    assert str(mismatch.reference_value) == "0.0" and str(mismatch.actual_value) == "-0.0"


def test_tracker_locates_a_signed_zero_across_runs():
    ref = np.ones((3, 4), np.float32)
    ref[2, 1] = 0.0
    flipped = ref.copy()
    flipped[2, 1] = -0.0
    tracker = MismatchTracker(ref, 2)
    tracker.record(ref.copy())
    tracker.record(flipped)
    worst = tracker.summary().worst
    assert tracker.summary().differing_runs == 1 and worst.mismatched_elements == 1
    assert worst.max_ulp == 0 and worst.index == (2, 1) and str(worst.actual_value) == "-0.0"
    assert worst.max_abs_diff == 0.0


def test_tracker_reports_the_true_greatest_difference_across_runs():
    # At a power of two the ULP below is half the ULP above: 5 ULP down (2.5 ulps of the binade above)
    # is a larger ULP distance but a smaller difference than 3 ULP up.
    ref = _values(1.0, 8.0)
    above = ref.copy()
    above[0] = np.float32(1.0) + np.float32(3 * 2.0**-23)
    below = ref.copy()
    below[0] = np.float32(1.0) - np.float32(5 * 2.0**-24)
    tracker = MismatchTracker(ref, 2)
    tracker.record(above)
    tracker.record(below)
    worst = tracker.summary().worst
    assert worst.max_ulp == 5 and worst.actual_value == float(below[0])  # the location follows the ULP distance
    assert worst.max_abs_diff == pytest.approx(3 * 2.0**-23, rel=1e-12)  # the difference is the true greatest


def test_compare_rejects_other_shapes():
    with pytest.raises(ValueError, match="cannot compare"):
        compare(np.zeros((2, 2), np.float32), np.zeros((2, 3), np.float32))


def test_tracker_counts_differing_runs_and_the_worst_over_all_runs():
    ref = np.random.default_rng(0).standard_normal((5, 5)).astype(np.float32)
    runs = [ref.copy() for _ in range(4)]
    runs[1][0, 0] = np.nextafter(ref[0, 0], np.float32(np.inf))
    runs[3][2, 3] = ref[2, 3] + np.float32(1.0)
    runs[3][4, 4] = np.nextafter(ref[4, 4], np.float32(np.inf))
    tracker = MismatchTracker(ref, 4)
    for out in runs:
        tracker.record(out)
    summary = tracker.summary()
    assert summary.runs == 4 and summary.differing_runs == 2 and summary.differing_run_indices == (1, 3)
    assert summary.worst.mismatched_elements == 2  # the worst single run
    assert summary.worst.index == (2, 3)
    assert summary.worst.max_abs_diff == pytest.approx(1.0, rel=1e-6)
    with pytest.raises(ValueError, match="made for 4 runs"):
        tracker.record(ref)


def test_tracker_all_identical():
    ref = np.ones((3, 3), np.float32)
    tracker = MismatchTracker(ref, 3)
    for _ in range(3):
        tracker.record(ref.copy())
    summary = tracker.summary()
    assert summary.differing_runs == 0 and summary.worst.index is None


def test_digest_is_sha256_of_bytes_and_relative_error():
    x = _values(1.0, 2.0)
    assert digest(x) == hashlib.sha256(x.tobytes()).hexdigest() == digest_later(x).result()
    assert digest(x) != digest(_values(1.0, -2.0))
    assert relative_error(_values(1.0, 2.5), np.array([1.0, 2.0])) == pytest.approx(0.25)


def test_the_gpu_module_compiles_with_nvrtc_with_an_entry_per_kernel_and_format():
    """The one module the GPU compares with, compiled as CuPy compiles it (NVRTC), without a GPU."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as err:  # no CuPy, or no libnvrtc: nothing to compile with
        pytest.skip(f"NVRTC not available: {err}")
    from cublas_det.bits.gpu import module_source

    program = nvrtc.createProgram(module_source(), "bits.cu", [], [])
    try:
        nvrtc.compileProgram(program, ["-arch=compute_90"])
    except Exception as err:
        pytest.fail(f"{err}\n{nvrtc.getProgramLog(program)}")
    ptx = nvrtc.getPTX(program)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    for kernel in ("mismatch_stats", "mismatch_locate", "error_stats"):
        for name in ("f32", "bf16", "f16"):
            assert f".entry cublas_det_{kernel}_{name}(" in ptx


def test_16_bit_formats_compare_bit_for_bit_with_ulps():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for dtype in (np.float16, ml_dtypes.bfloat16):
        ref = np.array([1.0, 0.0, 2.0, -3.0], dtype=dtype)
        out = ref.copy()
        out.view(np.uint16)[3] += 2  # -3 moved 2 ULP further from zero
        out[1] = -0.0
        mismatch = compare(ref, out)
        assert mismatch.mismatched_elements == 2 and mismatch.max_ulp == 2 and mismatch.index == (3,)
        assert mismatch.reference_value == -3.0 and mismatch.actual_value < -3.0
        tracker = MismatchTracker(ref, 1)
        tracker.record(out)
        worst = tracker.summary().worst
        assert (worst.max_ulp, worst.index, worst.actual_value) == (2, (3,), mismatch.actual_value)
        assert worst.max_abs_diff == pytest.approx(abs(float(out[3]) + 3.0))
    assert ulp_distance(np.array([1.0], np.float16), np.array([2.0], np.float16))[0] == 2**10


def _planted(dtype, seed):
    """A reference and three outputs with planted differences of every kind the definitions name: a few
    ULP, a signed zero, a NaN, a ULP tie later in the array, and a far value at a power of two."""
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal((257, 129)).astype(dtype)
    ref[3, 4], ref[200, 100] = 0.0, 2.0
    outs = [ref.copy() for _ in range(3)]
    bits = outs[0].view(np.uint16 if np.dtype(dtype).itemsize == 2 else np.uint32)
    bits[10, 10] += 3
    bits[250, 1] += 3  # the same distance later: the first one is the location
    outs[0][3, 4] = -0.0
    outs[1][7, 7] = np.nan
    outs[1].view(bits.dtype)[20, 20] -= 1  # a finite difference beside the NaN (NaN != NaN in ==)
    outs[2][200, 100] = -2.0
    return ref, outs


@pytest.mark.gpu
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16", "float16"])
def test_the_gpu_module_gives_the_numpy_definition_bit_for_bit(dtype_name):
    import cupy

    dtype = np.float32 if dtype_name == "float32" else np.float16
    if dtype_name == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    def same(a, b) -> bool:  # field by field, a NaN equal to a NaN (the planted NaN is a located value)
        return all(x == y or (x != x and y != y) for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b)))

    ref, outs = _planted(dtype, seed=1)
    for out in outs + [ref.copy()]:
        assert same(compare(cupy.asarray(ref), cupy.asarray(out)), compare(ref, out))
    assert np.isnan(compare(ref, outs[1]).actual_value)  # the NaN is the farthest value: its location
    host, device = MismatchTracker(ref, len(outs)), MismatchTracker(cupy.asarray(ref), len(outs))
    for out in outs:
        host.record(out)
        device.record(cupy.asarray(out))
    assert same(device.summary().worst, host.summary().worst)
    assert device.summary().runs == host.summary().runs == 3
    assert device.summary().differing_run_indices == (0, 1, 2)
    ref64 = ref.astype(np.float64) * 1.001
    assert relative_error(cupy.asarray(outs[0]), cupy.asarray(ref64)) == relative_error(outs[0], ref64)
    assert np.isnan(relative_error(cupy.asarray(outs[1]), cupy.asarray(ref64)))
