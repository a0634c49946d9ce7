"""QF-4: rounding rules and the ULP distance, against hand-worked values."""

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.numerics import nearest_int, round_half_even, ulp_distance


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
