"""QF-4: rounding rules and the ULP distance, against hand-worked values."""

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.numerics import first_nonfinite, fp16_bits, fp16_from_bits, nearest_int, round_half_even, ulp_distance


def test_round_half_even_ties_go_to_even():
    """QF-4.1: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -1.5 -> -2."""
    assert round_half_even(np.array([0.5, 1.5, 2.5, -0.5, -1.5])).tolist() == [0, 2, 2, 0, -2]


def test_nearest_int_is_the_float_addition_trick():
    """QF-4.2: llama.cpp's 12582912.f trick rounds ties to even inside |x| < 2^22."""
    assert nearest_int(np.float32([0.5, 1.5, 2.5, -0.5, -1.5, 3.49, 4194303.0])).tolist() == [0, 2, 2, 0, -2, 3, 4194303]


@pytest.mark.parametrize(("a", "b", "ulps"), [
    pytest.param(np.float16(1.0), np.float16(1.0009765625), 1, id="fp16-next-after-1"),  # 1 + 2^-10
    pytest.param(np.float16(0.0), np.float16(-0.0), 0, id="signed-zeros"),
    pytest.param(np.float16(-5.96e-8), np.float16(5.96e-8), 2, id="fp16-across-zero"),  # -min_sub .. +min_sub
    pytest.param(np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2.0)), 1, id="fp32-next-after-1"),
    pytest.param(np.float32(-np.inf), np.float32(np.inf), 2 * 0x7F800000, id="fp32-inf-to-inf"),
])
def test_ulp_distance_hand_worked(a, b, ulps):
    """QF-4.4: representable values between a and b; +0 and -0 coincide."""
    assert int(ulp_distance(a, b)) == ulps


def test_ulp_distance_refuses_mixed_or_float64():
    """QF-4.4 is defined for float16 and float32 pairs only."""
    with pytest.raises(QFormatsError) as info:
        ulp_distance(np.float64(1.0), np.float64(1.0))
    assert info.value.code == "argument.invalid"


# Tests with teeth (issue 33): hand-worked IEEE binary16 patterns, the whole refusal, every branch of the helpers.

# IEEE 754 binary16, worked by hand: sign | 5-bit exponent (bias 15) | 10-bit fraction.
FP16_PATTERNS = [  # (value, its pattern, the pattern's exact value)
    (1.0, 0x3C00, 1.0),                       # 0 01111 0000000000
    (-2.0, 0xC000, -2.0),                     # 1 10000 0000000000
    (65504.0, 0x7BFF, 65504.0),               # largest finite: 0 11110 1111111111
    (2.0 ** -14, 0x0400, 2.0 ** -14),         # smallest normal: 0 00001 0000000000
    (2.0 ** -24, 0x0001, 2.0 ** -24),         # smallest subnormal: 0 00000 0000000001
    (1.0 / 3.0, 0x3555, 1365 / 4096),         # 2^-2 * 1.0101010101|0101...: the rest is under half an ulp
    (float("inf"), 0x7C00, float("inf")),     # 0 11111 0000000000
]


def test_nearest_int_rounds_python_floats_in_float32():
    """QF-4.2: nearest_int evaluates x + 12582912 in float32 whatever the input's type, so Python floats round ties to even."""
    assert nearest_int([0.5, 1.5, 2.5, -2.5, 3.49]).tolist() == [0, 2, 2, -2, 3]


@pytest.mark.parametrize(("a", "b", "got"), [
    pytest.param(np.float64(1.0), np.float64(1.0), "float64 and float64", id="float64"),
    pytest.param(np.float16(1.0), np.float32(1.0), "float16 and float32", id="mixed-float16-float32"),
])
def test_ulp_distance_refusal_whole(a, b, got):
    """QF-4.4 / QF-2.6: ulp_distance is defined for two float16 or two float32 arrays; the refusal names both dtypes."""
    with pytest.raises(QFormatsError) as info:
        ulp_distance(a, b)
    e = info.value
    constraint = "two arrays of one dtype, float16 or float32"
    assert (e.code, e.tensor, e.constraint, e.actual, e.message) == (
        "argument.invalid", "ulp_distance", constraint, got, f"'ulp_distance' must be {constraint} (got {got})")


def test_fp16_bits_are_the_ieee_binary16_patterns():
    """QF-4.3: float16 conversion rounds to nearest and keeps subnormals; the stored bits are the IEEE binary16 patterns."""
    values, patterns, _ = zip(*FP16_PATTERNS)
    out = fp16_bits(list(values))
    assert out.dtype == np.uint16 and out.tolist() == list(patterns)


def test_fp16_bits_overflow_to_infinity():
    """QF-4.3: 65520 lies halfway between 65504 and 2^16; the tie goes to the even 2^16, which overflows to +inf (0x7c00)."""
    with np.errstate(over="ignore"):  # the overflow is the behaviour under test
        assert fp16_bits([65519.0, 65520.0, -65520.0]).tolist() == [0x7BFF, 0x7C00, 0xFC00]


def test_fp16_from_bits_reads_ieee_binary16_patterns():
    """QF-4.3: uint16 patterns decode to the values they encode, subnormals included."""
    _, patterns, exact = zip(*FP16_PATTERNS)
    out = fp16_from_bits(np.array(patterns, np.uint16))
    assert out.dtype == np.float16 and out.astype(np.float64).tolist() == list(exact)


@pytest.mark.parametrize(("patterns", "values"), [
    pytest.param(np.array([0x12343C00, -0x10000 + 0xC000], np.int32), [1.0, -2.0], id="int32-low-half"),
    pytest.param(np.array([-0x4000, 0x0001], np.int16), [-2.0, 2.0 ** -24], id="int16-twos-complement"),
])
def test_fp16_from_bits_takes_the_low_sixteen_bits(patterns, values):
    """QF-4.3: int16 and int32 patterns are read by their low 16 bits (0xc000 is -2, 0x3c00 is 1)."""
    out = fp16_from_bits(patterns)
    assert out.dtype == np.float16 and out.astype(np.float64).tolist() == values


def test_first_nonfinite_none_when_all_finite():
    """QF-2.4: an all-finite array (largest float32, subnormals, zeros) has no first non-finite element."""
    assert first_nonfinite(np.array([[0.0, -0.0], [np.finfo(np.float32).max, 1e-45]], np.float32)) is None


@pytest.mark.parametrize(("bad", "label"), [
    pytest.param(np.nan, "NaN", id="nan"), pytest.param(np.inf, "inf", id="inf"), pytest.param(-np.inf, "-inf", id="minus-inf"),
])
def test_first_nonfinite_labels_the_value(bad, label):
    """QF-2.4: the first non-finite element is named NaN, inf or -inf, with its index."""
    x = np.zeros((2, 3), np.float32)
    x[1, 2] = bad
    assert first_nonfinite(x) == (label, [1, 2])


def test_first_nonfinite_is_first_in_row_major_order():
    """QF-2.4: of several non-finite elements the first in C order is reported ([0, 2] before [1, 0] and [1, 1])."""
    x = np.ones((2, 3), np.float16)
    x[1, 1], x[1, 0], x[0, 2] = np.nan, -np.inf, np.inf
    label, index = first_nonfinite(x)
    assert (label, index, [type(i) for i in index]) == ("inf", [0, 2], [int, int])
