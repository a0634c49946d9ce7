"""The reference FP8 quantizer's roundings and edge cells asserted exactly (issue 33: tests with teeth;
`make mutation MODULE=qformats/formats/fp8/encode.py`).

Expected values are worked by hand from FP8-5.3 ("s = amax(|w|) / 448 rounded once to the scale dtype", a cell of
zeros gets s = 1, every scale positive) and FE-2's E4M3FN grid (0x38 = 1, 0x39 = 1.125, 0x7E = 448), with exact
quotients from ``fractions`` and the smallest positive values of each scale dtype from ml_dtypes / NumPy's finfo;
none comes from the code under test.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from qformats.formats.fp8 import encode

ONE, ONE_EIGHTH_MORE, MAX = 0x38, 0x39, 0x7E


def test_float32_weights_are_divided_exactly_not_in_float32():
    """FP8-5.3: codes E4M3FN(w / s), nearest. With s = float32(1000 / 448) the weight 0x1.2f924ap+1 over s is
    1.0625 + 1.3e-8, just above the midpoint of 1 and 1.125, so its code is 1.125's; a float32 quotient would
    round to the midpoint itself and tie to 1 (0x38)."""
    s = np.float32(1000 / 448)
    w1 = np.float32(float.fromhex("0x1.2f924ap+1"))
    assert Fraction(float(w1)) / Fraction(float(s)) > Fraction(17, 16)              # the exact quotient
    assert float(w1 / s) == 1.0625                                                 # float32's rounding of it
    layer = encode.quantize(np.array([[1000.0, w1]], np.float32), strategy="tensor")
    assert layer["weight_scale"].tolist() == [float(s)]
    assert layer["weight"].tolist() == [[MAX, ONE_EIGHTH_MORE]]


@pytest.mark.parametrize("scale_dtype,dtype", [("F32", np.float32), ("BF16", ml_dtypes.bfloat16),
                                               ("F16", np.float16)])
def test_scales_come_back_as_float32_arrays_of_scale_dtype_values(scale_dtype, dtype):
    """FP8-5.3: weight_scale is a float32 array holding scale_dtype values: 1/448 = 2^-6 / 7 rounded to the dtype."""
    s = encode.quantize(np.ones((2, 4), np.float32), strategy="channel", scale_dtype=scale_dtype)["weight_scale"]
    want = float(np.array(1 / 448).astype(dtype).astype(np.float64))
    assert s.dtype == np.float32 and s.tolist() == [[want], [want]]


@pytest.mark.parametrize("strategy,cells", [("tensor", [1.0]), ("channel", [[1.0], [1.0], [1.0]])])
def test_a_cell_without_weights_is_a_cell_of_zeros(strategy, cells):
    """FP8-5.3: amax over no weights is 0, so the cell gets s = 1 (FP8-6.4), not an error."""
    layer = encode.quantize(np.zeros((3, 0), np.float32), strategy=strategy)
    assert layer["weight"].shape == (3, 0) and layer["weight_scale"].tolist() == cells


@pytest.mark.parametrize("scale_dtype,tiny", [("F32", float(np.finfo(np.float32).smallest_subnormal)),
                                              ("BF16", float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal)),
                                              ("F16", float(np.finfo(np.float16).smallest_subnormal))])
def test_a_cell_whose_scale_would_round_to_zero_gets_the_smallest_positive_scale(scale_dtype, tiny):
    """FP8-5.3 / FP8-6.4: amax / 448 below half the dtype's smallest positive value rounds to 0; the scale stays
    positive at that smallest value, and the codes are E4M3FN(w / tiny) (w / tiny = 64 = 2^6: code 0x68, exponent field 6 + 7)."""
    w = np.full((2, 2), tiny * 64, np.float64)
    assert Fraction(tiny * 64) / 448 < Fraction(tiny) / 2
    layer = encode.quantize(w, strategy="tensor", scale_dtype=scale_dtype)
    assert layer["weight_scale"].tolist() == [tiny]
    assert layer["weight"].tolist() == [[0x68, 0x68], [0x68, 0x68]]


def test_a_bfloat16_subnormal_scale_is_rounded_once():
    """FP8-5.3: "rounded once to the scale dtype". amax = 9175041 · 2^-146 (a float32) over 448 is
    (2.5 + 2^-16 / 56) · 2^-133, just above the midpoint of the bfloat16 subnormals 2 · 2^-133 and 3 · 2^-133,
    so s = 3 · 2^-133; a stop in float32 first lands on the midpoint exactly and ties to 2 · 2^-133."""
    amax = np.float32(9175041 * 2.0 ** -146)
    exact = Fraction(float(amax)) / 448 / Fraction(2) ** -133
    assert Fraction(5, 2) < exact < Fraction(5, 2) + Fraction(1, 2 ** 20)
    assert float(amax / np.float32(448)) == 2.5 * 2.0 ** -133                      # float32's rounding of it
    s = encode.quantize(np.array([[amax]], np.float32), strategy="tensor", scale_dtype="BF16")["weight_scale"]
    assert s.tolist() == [3 * 2.0 ** -133]
