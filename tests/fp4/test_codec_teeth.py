"""The FP4 codec's refusals asserted whole, its limits at the limit and one past, the float32 roundings of FP4-3.1
and FP4-4.1 where float64 would give other bytes, and its quiet infinities (issue 33: tests with teeth;
`make mutation MODULE=qformats/formats/fp4/codec.py`).

Expected values are worked from spec/fp4.md and spec/float_elements.md: the E2M1 table of FP4-1.2, the UE4M3
bytes of FE-7.4, E8M0 = 2^(e - 127) (FE-5), the formulas of FP4-3.1 / FP4-4.1 written out in NumPy float32 and
ml_dtypes' bfloat16 rounding; none comes from the code under test.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np

from qformats.formats.fp4 import codec
from whole_error import refusal, whole

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)   # FP4-1.2
ONE, ONE_AND_A_HALF, MAX_UE4M3 = 0x38, 0x3C, 0x7E      # UE4M3 bytes of 1.0, 1.5 and 448 (FE-7.4, FE-7.1)
ROW = "E2M1 codes in [0, 15], an even count a row (FP4-1.2)"


def bf16(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def row_of(*codes: int, group: int = 16) -> np.ndarray:
    """One row of ``group`` E2M1 codes (the rest code 0), packed low nibble first (FP4-1.2) by hand."""
    c = np.zeros(group, np.uint8)
    c[:len(codes)] = codes
    return (c[0::2] | (c[1::2] << 4)).astype(np.uint8)[None, :]


def quietly(call):
    """``call()`` with every warning an error: a decode reports nothing of its own (the libraries do not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def same_bits(got: np.ndarray, want) -> bool:
    """float32, the shape, NaN where ``want`` has NaN (any payload: 0 / 0 gives x86's negative NaN) and every other
    value bit for bit (signed zeros apart)."""
    want = np.asarray(want, np.float32)
    if got.dtype != np.float32 or got.shape != want.shape or not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    keep = ~np.isnan(want)
    return np.array_equal(got[keep].view(np.uint32), want[keep].view(np.uint32))


# -- pack (FP4-1.2) ------------------------------------------------------------------------------


def test_pack_puts_element_2j_in_the_low_nibble_of_any_integer_codes():
    """FP4-1.2: "element 2j in the low nibble": codes 1, 2 | 15, 0 are bytes 0x21, 0x0F, from int8 codes too."""
    codes = np.array([[[1, 2, 15, 0]], [[0, 15, 8, 7]]], np.int8)
    got = codec.pack(codes)
    assert got.dtype == np.uint8
    assert got.tolist() == [[[0x21, 0x0F]], [[0xF0, 0x78]]]


def test_pack_takes_code_15_and_refuses_16():
    """FP4-1.2: a nibble holds codes 0 .. 15; 15 is the largest (-6), 16 is no code."""
    assert codec.pack(np.array([[15, 15]])).tolist() == [[0xFF]]
    assert whole(lambda: codec.pack(np.array([[16, 0]]))) == refusal(
        "argument.invalid", "codes", ROW, "shape (1, 2), codes in [0, 16]")


def test_pack_refuses_256_rather_than_packing_it_as_code_0():
    """FP4-1.2: 256 is no E2M1 code; a cast to uint8 would have made it code 0 without a word."""
    assert whole(lambda: codec.pack(np.array([[256, 1]]))) == refusal(
        "argument.invalid", "codes", ROW, "shape (1, 2), codes in [1, 256]")


def test_pack_refuses_a_negative_code():
    """FP4-1.2: codes are 0 .. 15; -1 is none (a uint8 cast would have made it 15, -6)."""
    assert whole(lambda: codec.pack(np.array([[3, -1]]))) == refusal(
        "argument.invalid", "codes", ROW, "shape (1, 2), codes in [-1, 3]")


def test_pack_refuses_codes_that_are_not_integers():
    """FP4-1.2: a code is a 4-bit integer; 2.5 is none (a cast would have truncated it to code 2)."""
    assert whole(lambda: codec.pack(np.array([[2.5, 1.0]]))) == refusal(
        "argument.invalid", "codes", "an integer array of E2M1 codes (FP4-1.2)", "float64")


def test_pack_refuses_an_odd_count_in_the_last_axis_only():
    """FP4-1.2: two codes a byte along the row: (1, 2, 3) has 3 codes a row, whatever the other axes hold."""
    assert whole(lambda: codec.pack(np.zeros((1, 2, 3), np.uint8))) == refusal(
        "argument.invalid", "codes", ROW, "shape (1, 2, 3), codes in [0, 0]")


def test_pack_refuses_an_empty_tensor_with_odd_rows():
    """FP4-1.2: zero rows of 3 codes are still rows of an odd count; there is no code to name."""
    assert whole(lambda: codec.pack(np.zeros((0, 3), np.int64))) == refusal(
        "argument.invalid", "codes", ROW, "shape (0, 3), codes in [0, 0]")


# -- NVFP4 scales and decode (FP4-3.1, FP4-3.2) --------------------------------------------------------


def test_nvfp4_scale_divides_by_the_global_scale_rounded_to_float32():
    """FP4-3.1: ``s32 = float32(ue4m3(weight_scale)) / float32(weight_global_scale)``, one float32 rounding: a
    float64 global 0.001 is float32(0.001) first, so 1 / it is 999.99994, not 1000."""
    got = codec.nvfp4_scales(np.array([[ONE, MAX_UE4M3]], np.uint8), np.array([0.001]))
    want = np.float32([1.0, 448.0]) / np.float32(0.001)
    assert want[0] != np.float32(1 / 0.001)                 # the test tells the two roundings apart
    assert same_bits(got, [want])


def test_nvfp4_global_scale_may_be_a_scalar():
    """FP4-2.1: the global scale is one value; ``()`` holds one as well as ``(1,)`` does."""
    got = codec.nvfp4_scales(np.array([[ONE, MAX_UE4M3]], np.uint8), np.array(2.0, np.float32))
    assert same_bits(got, [[0.5, 224.0]])


def test_nvfp4_scales_read_the_first_value_of_the_global_scale():
    """FP4-2.1: one global scale (the checks refuse more first, FP4-2.1); the decode reads the first value."""
    got = codec.nvfp4_scales(np.array([[ONE]], np.uint8), np.array([4.0, 8.0], np.float32))
    assert same_bits(got, [[0.25]])


def test_nvfp4_scale_bytes_are_read_as_bytes_from_a_signed_view():
    """FE-7.4: 0x38 is 1.0, 0xB8 and 0x80 are NaN (bit 7 set); the same bytes viewed as int8 read the same."""
    raw = np.array([[ONE, 0xB8, 0x80]], np.uint8)
    got = codec.nvfp4_scales(raw.view(np.int8), np.array([1.0], np.float32))
    assert same_bits(got, [[1.0, np.nan, np.nan]])


def test_zero_global_scale_decodes_to_infinities_and_nan_quietly():
    """FP4-3.2: "compressed-tensors decodes a zero global scale to inf and NaN (0 / 0) without a word"."""
    got = quietly(lambda: codec.nvfp4_scales(np.array([[ONE, 0x00]], np.uint8), np.array([0.0], np.float32)))
    assert same_bits(got, [[np.inf, np.nan]])


def test_tiny_global_scale_overflows_the_block_scale_to_inf_quietly():
    """FP4-3.1: s32 is float32: 448 / 2^-127 = 1.75 * 2^135 is past float32's largest, so inf."""
    got = quietly(lambda: codec.nvfp4_scales(np.array([[MAX_UE4M3]], np.uint8), np.array([2.0 ** -127], np.float32)))
    assert same_bits(got, [[np.inf]])


def test_nvfp4_weights_of_an_infinite_block_scale_are_infinite_and_zero_weights_nan():
    """FP4-3.1, FP4-3.2: w32 = e2m1 * s32 with s32 = 1 / 0 = inf: 1 -> inf, -1 -> -inf, 0 * inf -> NaN, quietly."""
    got = quietly(lambda: codec.nvfp4_dequantize(row_of(2, 10, 0), np.array([[ONE]], np.uint8),
                                                 np.array([0.0], np.float32)))
    assert same_bits(got[:, :3], [[np.inf, -np.inf, np.nan]])


def test_nvfp4_product_past_float32_is_inf_quietly():
    """FP4-3.1: w32 = e2m1 * s32 rounded to float32: 6 * 2^127 overflows to inf; 0.5 * 2^127 stays."""
    got = quietly(lambda: codec.nvfp4_dequantize(row_of(7, 1), np.array([[ONE]], np.uint8),
                                                 np.array([2.0 ** -127], np.float32)))
    assert same_bits(got[:, :2], [[np.inf, 2.0 ** 126]])


def test_nvfp4_weight_rounding_past_the_largest_bfloat16_is_inf_quietly():
    """FP4-3.1: W = bfloat16(w32): a finite w32 above bfloat16's largest (2 - 2^-8) * 2^127 rounds to inf."""
    g = np.float32(1.0) / np.float32(1.999 * 2.0 ** 127)                # s32 = 1 / g, finite in float32
    w32 = np.float32(1.0) / g
    assert np.isfinite(w32) and np.isinf(bf16(w32))
    got = quietly(lambda: codec.nvfp4_dequantize(row_of(2), np.array([[ONE]], np.uint8), np.array([g])))
    assert same_bits(got[:, :1], [[np.inf]])


# -- MXFP4 and gpt-oss (FP4-3.7, FP4-3.8) -------------------------------------------------------------


def test_mxfp4_products_past_bfloat16_are_inf_and_the_rest_exact_quietly():
    """FP4-3.7: "exact in bfloat16 unless it overflows (|v| >= 2 with e = 254; then inf)": 6 and 2 -> inf,
    1.5 -> 1.5 * 2^127, 0.5 -> 2^126."""
    got = quietly(lambda: codec.mxfp4_dequantize(row_of(7, 4, 3, 1, group=32), np.array([[254]], np.uint8)))
    assert same_bits(got[:, :4], [[np.inf, np.inf, 1.5 * 2.0 ** 127, 2.0 ** 126]])


def test_mxfp4_scale_bytes_are_read_as_bytes_from_a_signed_view():
    """FE-5: byte 0x80 is 2^(128 - 127) = 2, byte 0x7F is 1; the same bytes viewed as int8 (-128, 127) read the
    same: 1.5 * 2 and 1.5 * 1."""
    scale = np.array([[0x80, 0x7F]], np.uint8).view(np.int8)
    packed = np.concatenate([row_of(3, group=32), row_of(3, group=32)], axis=1)
    got = codec.mxfp4_dequantize(packed, scale)
    assert same_bits(got[:, [0, 32]], [[3.0, 1.5]])


def test_gpt_oss_blocks_are_read_as_bytes_from_a_signed_view():
    """FP4-2.5, FP4-1.2: byte 0xF7 holds code 7 (6) low and 15 (-6) high; viewed as int8 (-9) it is the same
    byte. (E, R, K/32, 16) blocks decode to (E, R, K)."""
    blocks = np.zeros((1, 1, 1, 16), np.uint8)
    blocks[..., 0] = 0xF7
    got = codec.gpt_oss_dequantize(blocks.view(np.int8), np.array([[[127]]], np.uint8))
    assert got.shape == (1, 1, 32)
    assert same_bits(got[..., :3], [[[6.0, -6.0, 0.0]]])


# -- ModelOpt NVFP4 (FP4-4.1) ----------------------------------------------------------------------------


def test_modelopt_block_scale_is_rounded_to_float32_before_the_weights():
    """FP4-4.1: ``s32 = float32(ue4m3) * float32(weight_scale_2)`` one float32 rounding: 1.5 * float32(w) for a
    float64 w whose exact product 1.5 * w lies above bfloat16's midpoint 1 + 2^-8 gives 1.0, not 1 + 2^-7."""
    w = 0.6692708929379781
    s32 = np.float32(1.5) * np.float32(w)
    want = bf16(np.float32(1.0) * s32)                             # code 2 (1.0) times s32, then bfloat16
    assert want != bf16(np.float32(1.5 * w))                       # float64 scales would round the other way
    got = codec.modelopt_nvfp4_dequantize(row_of(2), np.array([[ONE_AND_A_HALF]], np.uint8), w)
    assert same_bits(got[:, :1], [[want]])


def test_modelopt_reads_the_first_value_of_weight_scale_2():
    """FP4-4.1: weight_scale_2 is one value (the checks refuse more first); the decode reads the first."""
    got = codec.modelopt_nvfp4_dequantize(row_of(2), np.array([[ONE]], np.uint8), np.array([0.5, 4.0], np.float32))
    assert same_bits(got[:, :1], [[0.5]])


def test_modelopt_scale_bytes_are_read_as_bytes_from_a_signed_view():
    """FE-7.4: 0x38 is 1.0 and 0xB8 NaN, from an int8 view as from uint8 (code 2 is 1.0)."""
    packed = np.concatenate([row_of(2), row_of(2)], axis=1)
    got = codec.modelopt_nvfp4_dequantize(packed, np.array([[ONE, 0xB8]], np.uint8).view(np.int8),
                                          np.array(1.0, np.float32))
    assert same_bits(got[:, [0, 16]], [[1.0, np.nan]])


def test_modelopt_block_scale_past_float32_is_inf_quietly():
    """FP4-4.1: s32 = 448 * 2^120 = 1.75 * 2^128 overflows float32 to inf before the weights: 0.5 -> inf."""
    got = quietly(lambda: codec.modelopt_nvfp4_dequantize(row_of(1, 7), np.array([[MAX_UE4M3]], np.uint8),
                                                          np.array(2.0 ** 120, np.float32)))
    assert same_bits(got[:, :2], [[np.inf, np.inf]])


def test_modelopt_zero_weights_of_an_infinite_scale_are_nan_quietly():
    """FP4-4.1: w32 = e2m1' * s32; with weight_scale_2 = inf, code 0 and code 8 (+0 in ModelOpt's table) give
    0 * inf = NaN, code 2 inf."""
    got = quietly(lambda: codec.modelopt_nvfp4_dequantize(row_of(0, 8, 2), np.array([[ONE]], np.uint8),
                                                          np.array(np.inf, np.float32)))
    assert same_bits(got[:, :3], [[np.nan, np.nan, np.inf]])


def test_modelopt_code_8_is_positive_zero_where_compressed_tensors_gives_negative_zero():
    """FP4-4.1: "code 8 is +0, so ModelOpt never returns -0 where compressed-tensors ... returns -0"."""
    packed, scale = row_of(8, 9), np.array([[ONE]], np.uint8)
    assert same_bits(codec.modelopt_nvfp4_dequantize(packed, scale, np.array(1.0, np.float32))[:, :2], [[0.0, -0.5]])
    assert same_bits(codec.nvfp4_dequantize(packed, scale, np.array([1.0], np.float32))[:, :2], [[-0.0, -0.5]])
