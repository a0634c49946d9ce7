"""The reference NVFP4 and MXFP4 quantizers' scales, clamps and edge blocks asserted exactly (issue 33: tests with
teeth; `make mutation MODULE=qformats/formats/fp4/encode.py`).

Expected values are worked by hand from FP4-3.9 (NVFP4: global = 2688 / amax(|W|), block byte
UE4M3(amax(|block|) / 6 * global); MXFP4: e = floor(log2(amax(|block|))) - 2 clamped to -127 .. 127, byte e + 127)
and FE-2's E2M1 codes (0x1 = 0.5, 0x2 = 1, 0x7 = 6), UE4M3 bytes through ml_dtypes' float8_e4m3fn cast; none comes
from the code under test.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from qformats.formats.fp4 import codec, encode
from whole_error import refusal, whole


def _e4m3_bytes(values) -> list[int]:
    """UE4M3 bytes of positive values: the float8_e4m3fn bytes, whose sign bit is 0 (FP4-3.3)."""
    return np.asarray(values, np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).tolist()


# -- shape (FP4-2.2) ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,group", [(encode.nvfp4, 16), (encode.mxfp4, 32)])
def test_k_not_a_multiple_of_the_group_is_refused_whole(fn, group):
    """FP4-2.2: K must be a multiple of the group (16 for NVFP4, 32 for MXFP4)."""
    assert whole(lambda: fn(np.ones((2, group + 1), np.float32))) == refusal(
        "fp4.group.shape", "weight", f"(N, K) with K a multiple of {group}", [2, group + 1])


def test_a_vector_is_refused_whole():
    """FP4-2.2: the weight is (N, K); a vector of 32 has no rows."""
    assert whole(lambda: encode.mxfp4(np.ones(32, np.float32))) == refusal(
        "fp4.group.shape", "weight", "(N, K) with K a multiple of 32", [32])


# -- MXFP4 (FP4-3.9) ----------------------------------------------------------------------------------

def test_mxfp4_exponent_of_a_float32_amax_just_under_a_power_of_two():
    """FP4-3.9: amax = 2^-5 (1 - 2^-24) < 2^-5, so floor(log2) = -6 and e = -8 (byte 119); the block's largest
    weight over 2^-8 is just under 8 and saturates at 6 (code 0x7). A float32 log2 rounds to -5 and gives 120."""
    w = np.zeros((1, 32), np.float32)
    w[0, 0] = np.nextafter(np.float32(2.0 ** -5), np.float32(0))
    assert float(np.log2(w[0, 0])) == -5.0                                # float32's rounding
    packed, scale = encode.mxfp4(w)
    assert scale.tolist() == [[119]] and codec.unpack(packed)[0, 0] == 0x7


def test_mxfp4_scale_bytes_are_uint8():
    """FP4-3.7: the MXFP4 scale is E8M0 bytes, byte e + 127 (e = 1 - 2 for amax 3)."""
    _, scale = encode.mxfp4(np.full((1, 32), 3.0, np.float32))
    assert scale.dtype == np.uint8 and scale.tolist() == [[126]]


def test_mxfp4_tiny_block_clamps_at_minus_127():
    """FP4-3.9: amax 2^-128 gives e = -130, clamped to -127 (byte 0x00); 2^-128 / 2^-127 = 0.5 is code 0x1."""
    packed, scale = encode.mxfp4(np.full((1, 32), 2.0 ** -128))
    assert scale.tolist() == [[0]] and codec.unpack(packed).tolist() == [[0x1] * 32]


def test_mxfp4_huge_block_clamps_at_127():
    """FP4-3.9: amax 2^135 gives e = 133, clamped to 127 (byte 254, never 0xFF); 2^135 / 2^127 saturates at 6."""
    packed, scale = encode.mxfp4(np.full((1, 32), 2.0 ** 135))
    assert scale.tolist() == [[254]] and codec.unpack(packed).tolist() == [[0x7] * 32]


# -- NVFP4 (FP4-3.9) ----------------------------------------------------------------------------------

def test_nvfp4_block_scale_bytes_are_ue4m3_of_amax_over_6_times_global():
    """FP4-3.9: amax(|W|) = 6 gives global 2688 / 6 = 448; blocks of amax 6, 3, 0.75 and 0.5 get
    UE4M3(448), UE4M3(224), UE4M3(56) and UE4M3(37.33) = 36 (E4M3's step is 4 in [32, 64))."""
    w = np.repeat(np.array([6.0, 3.0, 0.75, 0.5], np.float32), 16).reshape(1, 64)
    w[0, 1::2] *= -1
    _, scale, g = encode.nvfp4(w)
    assert g.tolist() == [448.0]
    assert scale.tolist() == [_e4m3_bytes([448.0, 224.0, 56.0, 37.333333])]
    assert _e4m3_bytes([37.333333]) == _e4m3_bytes([36.0])


def test_nvfp4_of_zeros_is_zeros_with_global_one():
    """FP4-3.9: an all-zero weight has no amax to divide by; it gets global 1 (the zero cell's rule of FP8-5.3),
    scale bytes 0 and codes 0, and no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        packed, scale, g = encode.nvfp4(np.zeros((2, 32), np.float32))
    assert g.dtype == np.float32 and g.tolist() == [1.0]
    assert scale.tolist() == [[0, 0], [0, 0]] and not packed.any()


def test_nvfp4_of_no_columns_is_empty_with_global_one():
    """FP4-3.9: a weight of K = 0 (a multiple of 16) has amax 0 over no weights: global 1, empty tensors."""
    packed, scale, g = encode.nvfp4(np.zeros((2, 0), np.float32))
    assert (packed.shape, scale.shape, g.tolist()) == ((2, 0), (2, 0), [1.0])


def test_nvfp4_blocks_whose_scale_byte_is_zero_encode_to_zeros_silently():
    """FP4-3.9: with global 448 (amax 6) a block of amax 1e-6 has 1e-6 / 6 * 448 < 2^-10, half UE4M3's smallest
    step, so its byte is 0 and its weights code 0 (no division by the zero scale leaks out); an all-zero block
    likewise. Neither warns."""
    w = np.zeros((1, 48), np.float32)
    w[0, :16] = 6.0
    w[0, 16:32] = 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        packed, scale, _ = encode.nvfp4(w)
    assert scale.tolist() == [[_e4m3_bytes([448.0])[0], 0, 0]]
    assert codec.unpack(packed).tolist() == [[0x7] * 16 + [0] * 32]
