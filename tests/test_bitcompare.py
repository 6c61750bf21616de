"""Bit comparison with ULP distances for float16, bfloat16, float32, float64 and integer dtypes."""

import numpy as np
import pytest

from cublas_det.bits import streams as bitcompare
from cublas_det.bits.streams import (
    BitComparison,
    compare_arrays,
    lookup_dtype,
    ordered,
    ulp_distance,
)


def _bf16_bits(values) -> np.ndarray:
    """float32 -> bfloat16 bits by truncation (exact for the values used here)."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("name, numpy_type", [("float16", np.float16), ("float32", np.float32),
                                              ("float64", np.float64)])
def test_adjacent_floats_are_one_ulp_apart_and_signed_zeros_zero(name, numpy_type):
    dtype = lookup_dtype(name)
    x = np.array([1.0, -1.0, 3.5e-3, -7.25, 0.0, np.finfo(numpy_type).max], numpy_type)
    with np.errstate(over="ignore"):  # max -> inf is one step too
        up = np.nextafter(x, numpy_type(np.inf))
    bits = dtype.bits_dtype
    assert ulp_distance(x.view(bits), up.view(bits), dtype).tolist() == [1] * 6
    zeros = np.array([0.0, -0.0], numpy_type).view(bits)
    assert ordered(zeros, dtype).tolist() == [0, 0]
    tiny = np.array([np.finfo(numpy_type).smallest_subnormal, -np.finfo(numpy_type).smallest_subnormal],
                    numpy_type).view(bits)
    assert ulp_distance(tiny[:1], tiny[1:], dtype).tolist() == [2]  # across zero: -tiny, 0, +tiny


def test_float64_ulp_distance_beyond_int64():
    dtype = lookup_dtype("float64")
    extremes = np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max]).view(np.uint64)
    assert int(ulp_distance(extremes[:1], extremes[1:], dtype)[0]) == 2 * 0x7FEFFFFFFFFFFFFF


def test_bfloat16_is_decoded_by_bits_without_ml_dtypes():
    dtype = lookup_dtype("bf16")
    bits = _bf16_bits([1.0, -2.5, 2.0 ** 100, -(2.0 ** -130), np.inf])
    assert dtype.values(bits).tolist() == [1.0, -2.5, 2.0 ** 100, -(2.0 ** -130), np.inf]
    one, next_up = _bf16_bits([1.0])[0], np.uint16(_bf16_bits([1.0])[0] + 1)
    stats = compare_arrays(np.array([one]), np.array([next_up]), "bfloat16")
    assert stats.max_ulp == 1 and stats.max_abs_diff == 2.0 ** -7


def test_bfloat16_values_match_ml_dtypes_when_installed():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.random.default_rng(0).standard_normal(1000).astype(ml_dtypes.bfloat16)
    bits = values.view(np.uint16)
    assert lookup_dtype("bfloat16").values(bits).tolist() == values.astype(np.float64).tolist()


def test_nan_rules():
    nan = np.float32(np.nan)
    other_nan = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    same = compare_arrays(np.array([nan, 1.0], np.float32), np.array([nan, 1.0], np.float32), "float32")
    assert same.identical  # NaN against NaN with the same bits is equal
    stats = compare_arrays(np.array([nan, 1.0, nan, 2.0], np.float32),
                           np.array([1.0, 1.0, other_nan, 2.0 + 2.0 ** -22], np.float32), "float32")
    assert stats.mismatched_elements == 3 and stats.nan_mismatches == 2
    assert stats.max_ulp == 1 and stats.max_abs_diff == 2.0 ** -22  # taken over the pairs without NaN
    # a NaN pair ranks below every number: the location is the one pair with a distance
    assert stats.index == (3,) and stats.reference_value == 2.0 and stats.actual_value == 2.0 + 2.0 ** -22
    only_nan = compare_arrays(np.array([nan], np.float32), np.array([0.0], np.float32), "float32")
    assert only_nan.max_ulp is None and only_nan.max_abs_diff is None and only_nan.nan_mismatches == 1
    assert only_nan.index == (0,) and np.isnan(only_nan.reference_value) and only_nan.actual_value == 0.0


def test_signed_zero_is_a_mismatch_of_zero_ulp():
    stats = compare_arrays(np.array([0.0, 1.0], np.float32), np.array([-0.0, 1.0], np.float32), "float32")
    assert stats.mismatched_elements == 1 and stats.signed_zero_mismatches == 1 and stats.only_signed_zeros
    assert stats.max_ulp == 0 and stats.max_abs_diff == 0.0 and stats.index == (0,)
    mixed = compare_arrays(np.array([0.0, 1.0], np.float16), np.array([-0.0, 2.0], np.float16), "float16")
    assert mixed.signed_zero_mismatches == 1 and not mixed.only_signed_zeros and mixed.max_ulp == 1024
    assert mixed.index == (1,)  # 1024 ULP outranks the signed zero's 0


def test_infinities_and_integers():
    stats = compare_arrays(np.array([np.inf], np.float32), np.array([-np.inf], np.float32), "float32")
    assert stats.max_abs_diff == np.inf and stats.max_ulp == 2 * 0x7F800000
    ints = compare_arrays(np.array([5, -3, 7], np.int32), np.array([5, 4, 7], np.int32), "int32")
    assert ints.mismatched_elements == 1 and ints.max_ulp is None and ints.max_abs_diff == 7.0
    assert ints.actual_value == 4 and ints.nan_mismatches == ints.signed_zero_mismatches == 0
    flags = compare_arrays(np.array([True, False]), np.array([True, True]), "bool")
    assert flags.index == (1,) and flags.reference_value is False and flags.actual_value is True


@pytest.mark.parametrize("chunk_elements", [1, 7, 1000, 10_000])
@pytest.mark.parametrize("block", [5, 1 << 15])
def test_results_do_not_depend_on_chunks_or_blocks(monkeypatch, chunk_elements, block):
    monkeypatch.setattr(bitcompare, "_BLOCK_ELEMENTS", block)
    rng = np.random.default_rng(1)
    a = rng.standard_normal(5000).astype(np.float32)
    b = a.copy()
    b[[17, 2500, 4999]] = np.nextafter(b[[17, 2500, 4999]], np.float32(np.inf))
    b[3000] += 1.0
    b[123] = np.nan
    b[4000] = -b[4000] if a[4000] else 1.0
    expected = compare_arrays(a, b, "float32")
    comparison = BitComparison(lookup_dtype("float32"))
    raw_a, raw_b = a.tobytes(), b.tobytes()
    step = chunk_elements * 4
    for start in range(0, len(raw_a), step):
        piece_a, piece_b = bytearray(raw_a[start:start + step]), bytearray(raw_b[start:start + step])
        comparison.update(piece_a, piece_b, len(piece_a))
    assert comparison.stats() == expected
    assert expected.mismatched_elements == 6 and expected.nan_mismatches == 1
    assert expected.index == (4000,)  # the sign flip: the greatest ULP distance, whatever the chunk holding it


def test_lookup_names_and_errors():
    assert lookup_dtype("FP16").name == "float16" and lookup_dtype("bf16").name == "bfloat16"
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        lookup_dtype("float8")
    with pytest.raises(ValueError, match="big-endian"):
        bitcompare.dtype_name_of(np.dtype(">f4"))
    with pytest.raises(ValueError, match="not supported"):
        bitcompare.dtype_name_of(np.dtype("complex64"))


def test_format_value_is_the_shortest_name_of_the_element():
    assert lookup_dtype("float32").format_value(float(np.float32(1.2500305))) == "1.2500305"
    assert lookup_dtype("float32").format_value(-0.0) == "-0.0"
    assert lookup_dtype("int32").format_value(7) == "7"


def test_bfloat16_values_print_with_the_fewest_digits_that_name_them():
    bf16 = lookup_dtype("bfloat16")
    assert [bf16.format_value(v) for v in (-3.0, 1.0078125, -3.015625, -0.0, np.inf)] == \
        ["-3.0", "1.01", "-3.02", "-0.0", "inf"]
    for bits in (0x3F81, 0x4049, 0x0001, 0x7F7F, 0xC2F7):  # every printed value reads back as itself
        value = float(bf16.values(np.array([bits], np.uint16))[0])
        printed = float(bf16.format_value(value))
        rounded = int(np.array([printed], np.float32).view(np.uint32)[0])
        assert (rounded + 0x7FFF + ((rounded >> 16) & 1)) >> 16 == bits


def test_ints_and_bools_are_located_at_the_greatest_difference_the_first_on_a_tie():
    a, b = np.array([[0, 5], [-3, 9]], np.int16), np.array([[1, 5], [4, 2]], np.int16)  # |a - b|: 1, 0, 7, 7
    ints = compare_arrays(a, b, "int16")
    assert (ints.mismatched_elements, ints.max_abs_diff, ints.max_ulp) == (3, 7.0, None)
    assert ints.index == (1, 0) and (ints.reference_value, ints.actual_value) == (-3, 4)
    streamed = BitComparison(lookup_dtype("int16"), a.shape)
    streamed.update(a.tobytes()[:6], b.tobytes()[:6], 6)  # the tie across two chunks: the earlier one stays
    streamed.update(a.tobytes()[6:], b.tobytes()[6:], 2)
    assert streamed.stats() == ints
    flags = compare_arrays(np.array([True, False, True]), np.array([False, False, False]), "bool")
    assert (flags.mismatched_elements, flags.max_abs_diff, flags.index, flags.reference_value) == (2, 1.0, (0,), True)


def test_64_bit_integers_are_located_by_their_exact_difference():
    # Both differences are 1; in float64 the first would round to 0 (or 2): the tie goes to the lowest index.
    assert compare_arrays(np.array([2**60, 5, 7]), np.array([2**60 + 1, 5, 8]), "int64").index == (0,)
    assert compare_arrays(np.array([-2**62, 7]), np.array([2**62, 8]), "int64").index == (0,)  # 2**63 apart
    assert compare_arrays(np.array([2**63 + 10, 5], np.uint64), np.array([3, 9], np.uint64), "uint64").index == (0,)
