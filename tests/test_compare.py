import dataclasses
import hashlib

import numpy as np
import pytest

from cublas_det.bits.compare import MismatchTracker, compare, relative_error
from cublas_det.bits.digest import digest, digest_later
from cublas_det.bits.streams import BitComparison, Mismatch, compare_arrays, lookup_dtype, ordered
from cublas_det.bits.streams import ulp_distance as bits_ulp_distance

from .conftest import nvrtc_ptx


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
    assert summary.runs == 4 and summary.differing_runs == 2
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
    from cublas_det.bits.gpu import module_source

    ptx = nvrtc_ptx(module_source(), "bits.cu")
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
    """A reference and four outputs with planted differences of every kind the policy names: a few ULP, a
    signed zero, a NaN beside a number, a ULP tie later in the array, a far value at a power of two, and
    NaN pairs alone."""
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal((257, 129)).astype(dtype)
    ref[3, 4], ref[200, 100] = 0.0, 2.0
    outs = [ref.copy() for _ in range(4)]
    bits = outs[0].view(np.uint16 if np.dtype(dtype).itemsize == 2 else np.uint32)
    bits[10, 10] += 3
    bits[250, 1] += 3  # the same distance later: the first one is the location
    outs[0][3, 4] = -0.0
    outs[1][7, 7] = np.nan
    outs[1].view(bits.dtype)[20, 20] -= 1  # a finite difference beside the NaN (NaN != NaN in ==)
    outs[2][200, 100] = -2.0
    outs[3][5, 6] = outs[3][100, 3] = np.nan  # only NaN pairs: no ULP, located at the first
    return ref, outs


@pytest.mark.gpu
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16", "float16"])
def test_the_gpu_module_gives_the_numpy_definition_bit_for_bit(dtype_name):
    import cupy

    dtype = np.float32 if dtype_name == "float32" else np.float16
    if dtype_name == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    ref, outs = _planted(dtype, seed=1)
    for out in outs + [ref.copy()]:
        assert _same_record(compare(cupy.asarray(ref), cupy.asarray(out)), compare(ref, out))
    tie = compare(ref, outs[0])
    assert tie.index == (10, 10) and tie.max_ulp == 3 and tie.signed_zero_mismatches == 1
    beside = compare(ref, outs[1])  # the NaN pair ranks below the 1-ULP number: counted apart, not located
    assert beside.index == (20, 20) and beside.max_ulp == 1 and beside.nan_mismatches == 1
    assert not np.isnan(beside.actual_value) and not np.isnan(beside.max_abs_diff)
    alone = compare(ref, outs[3])
    assert alone.max_ulp is None and alone.max_abs_diff is None and alone.index == (5, 6) and alone.nan_mismatches == 2
    host, device = MismatchTracker(ref, len(outs)), MismatchTracker(cupy.asarray(ref), len(outs))
    for out in outs:
        host.record(out)
        device.record(cupy.asarray(out))
    assert _same_record(device.summary().worst, host.summary().worst)
    assert device.summary().worst.index == (200, 100) and device.summary().worst.signed_zero_mismatches == 1
    assert device.summary().runs == host.summary().runs == 4
    assert device.summary().differing_runs == 4
    ref64 = ref.astype(np.float64) * 1.001
    assert relative_error(cupy.asarray(outs[0]), cupy.asarray(ref64)) == relative_error(outs[0], ref64)
    assert np.isnan(relative_error(cupy.asarray(outs[1]), cupy.asarray(ref64)))


def _f32(*values_or_bits):
    """A (2, 4) float32 array; a np.uint32 is a bit pattern (another NaN payload, a value some ULP away)."""
    return np.array([np.array(v).view(np.float32) if isinstance(v, np.uint32) else v for v in values_or_bits],
                    np.float32).reshape(2, 4)


def _bits_of(value, ulps=0) -> np.uint32:
    return np.uint32(int(np.array(value, np.float32).view(np.uint32)) + ulps)


NAN = float("nan")
# (reference, actual, the record): one policy, written in Mismatch's docstring.
POLICY_CASES = {
    # a NaN pair (no distance: counted apart, never located over a number), a signed zero (0 ULP), 1 ULP,
    # and a tie of 3 ULP at flat 5 and 7: the lower index is the location
    "nan beside numbers": (_f32(1, NAN, 2, 0, 3, 4, 5, 6), _f32(1, 1, _bits_of(2, 1), -0.0, 3, _bits_of(4, 3), 5,
                                                              _bits_of(6, -3)),
                           Mismatch(5, 8, 3 * 2.0**-21, 3, (1, 1), 4.0, 4 + 3 * 2.0**-21, 1, 1)),
    # only NaN pairs differ (a NaN against a number, two NaN payloads): no ULP, no difference; the first pair
    "nan only": (_f32(1, 2, NAN, 4, 5, NAN, 7, 8), _f32(1, 2, 3, 4, 5, np.uint32(0x7FC00001), 7, 8),
                 Mismatch(2, 8, None, None, (0, 2), NAN, 3.0, 2, 0)),
    "signed zeros only": (_f32(0, 1, 0, 1, 1, 1, 1, -0.0), _f32(-0.0, 1, -0.0, 1, 1, 1, 1, 0),
                          Mismatch(3, 8, 0.0, 0, (0, 0), 0.0, -0.0, 0, 3)),
    "equal bits, NaNs included": (_f32(NAN, 1, 2, 3, 4, 5, 6, 7), _f32(NAN, 1, 2, 3, 4, 5, 6, 7), Mismatch(0, 8)),
}


def _same_record(a, b) -> bool:
    """Field by field, a NaN equal to a NaN, -0.0 not equal to 0.0."""
    def key(value):
        return ("nan",) if isinstance(value, float) and value != value else (value, str(value))
    return [key(v) for v in dataclasses.astuple(a)] == [key(v) for v in dataclasses.astuple(b)]


@pytest.mark.parametrize("case", POLICY_CASES)
@pytest.mark.parametrize("split", [1, 3, 6])
def test_one_policy_in_compare_and_in_streamed_chunks(case, split):
    """The same inputs through compare() (numpy, the GPU path's twin), compare_arrays and BitComparison in two
    chunks give one record: the one that case names."""
    ref, out, expected = POLICY_CASES[case]
    streamed = BitComparison(lookup_dtype("float32"), ref.shape)
    raw_ref, raw_out, cut = ref.tobytes(), out.tobytes(), 4 * split
    streamed.update(raw_ref[:cut], raw_out[:cut], cut)
    streamed.update(raw_ref[cut:], raw_out[cut:], len(raw_ref) - cut)
    for record in (compare(ref, out), compare_arrays(ref, out, "float32"), streamed.stats()):
        assert _same_record(record, expected), (record, expected)


def test_a_nan_pair_entering_the_ulps_or_the_location_is_caught():
    """Planted faults of the old policy: a NaN pair ranked by its bits would be 0x40400000 ULP, located first."""
    ref, out, expected = POLICY_CASES["nan beside numbers"]
    nan_as_bits = int(ulp_distance(ref[0, 1:2], out[0, 1:2])[0])
    assert nan_as_bits == 0x40400000
    found = compare(ref, out)
    assert found.max_ulp == 3 != nan_as_bits and found.index == (1, 1) != (0, 1)
    assert not _same_record(dataclasses.replace(found, max_ulp=nan_as_bits), expected)
    assert not _same_record(dataclasses.replace(found, index=(0, 1)), expected)


def test_tracker_ranks_nan_pairs_below_numbers_across_runs():
    ref = np.ones((2, 3), np.float32)
    nan_only = ref.copy()
    nan_only[0, 0] = nan_only[1, 2] = np.nan
    number = ref.copy()
    number[1, 1] = np.nextafter(np.float32(1), np.float32(2))
    tracker = MismatchTracker(ref, 2)
    tracker.record(nan_only)
    tracker.record(number)
    worst = tracker.summary().worst
    assert worst.max_ulp == 1 and worst.index == (1, 1) and worst.max_abs_diff == 2.0**-23  # the later run's number
    assert (worst.mismatched_elements, worst.nan_mismatches, worst.signed_zero_mismatches) == (2, 2, 0)  # the most
    alone = compare(ref, nan_only)
    assert alone.max_ulp is None and alone.max_abs_diff is None and alone.index == (0, 0)
    assert alone.reference_value == 1.0 and np.isnan(alone.actual_value) and alone.nan_mismatches == 2


@pytest.mark.gpu
@pytest.mark.parametrize("case", POLICY_CASES)
def test_the_gpu_kernels_follow_the_one_policy(case):
    """NaN on either side, two NaN payloads, signed zeros, a tie: the kernels' record is the policy's."""
    import cupy

    ref, out, expected = POLICY_CASES[case]
    assert _same_record(compare(cupy.asarray(ref), cupy.asarray(out)), expected)
    tracker = MismatchTracker(cupy.asarray(ref), 2)
    tracker.record(cupy.asarray(ref))
    tracker.record(cupy.asarray(out))
    assert _same_record(tracker.summary().worst, expected)
