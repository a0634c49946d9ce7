"""Tests with teeth for qformats/formats/bnb/codec.py (issue 33 item 3; spec/bnb.md): each pins one behaviour a
mutant of the codec changes. Expected values come from the spec's hand-worked arithmetic (BNB-1.2, BNB-3.1, BNB-4.1,
BNB-4.3), from properties, or from the real libraries (torch 2.13.0 / bitsandbytes 0.50.2 in ``.venv/real``, run once
on CPU; the bit patterns are written out below, as ``fixtures/third_party/bnb`` holds bitsandbytes' own output)."""

from __future__ import annotations

import numpy as np
import pytest

from qformats.formats.bnb.codec import (FP4, NF4, _linspace, dequantize_4bit, dequantize_int8, dynamic_map,
                                        pack_codes, quantize_4bit, quantize_absmax, scales, to_dtype)


def _bits(*words: int) -> np.ndarray:
    return np.array(words, dtype=np.uint32).view(np.float32)


# ----------------------------------------------------------------------------------------------------- BNB-1.2


def test_pack_codes_pads_an_odd_count_with_code_0_by_default():
    """BNB-1.2: "Byte j holds c[2j] in its high nibble and c[2j+1] in its low nibble"; an odd count gets one padding
    nibble, here the default code 0: codes 1, 2, 3 are bytes 0x12, 0x30."""
    assert pack_codes(np.array([1, 2, 3], np.uint8)).tolist() == [[0x12], [0x30]]


def test_pack_codes_returns_uint8_bytes_for_an_odd_count():
    """BNB-1.1: the packed weight is uint8 (ceil(n/2), 1), also when a padding nibble is added."""
    packed = pack_codes(np.array([1, 2, 3], np.uint8), pad=7)
    assert (packed.dtype, packed.shape, packed.tolist()) == (np.uint8, (2, 1), [[0x12], [0x37]])


def test_pack_codes_returns_uint8_bytes_for_integer_codes():
    """BNB-1.1: the packed weight is uint8 whatever integer type the codes come in."""
    packed = pack_codes(np.array([15, 0, 10, 5], np.int64))
    assert (packed.dtype, packed.tolist()) == (np.uint8, [[0xF0], [0xA5]])


def test_pack_codes_takes_a_matrix_in_row_major_order():
    """BNB-1.2: "The codes of W are taken in row-major order over the whole tensor": [[1, 2], [3, 4]] packs as
    0x12, 0x34 (not column pairs 0x13, 0x24)."""
    assert pack_codes(np.array([[1, 2], [3, 4]], np.uint8)).tolist() == [[0x12], [0x34]]


# ----------------------------------------------------------------------------------------------------- BNB-3.1

# NF4 midpoint between code 7 (0.0) and code 8 (0.07958029955625534): halving a float32 is exact
_NF4_MID_7_8 = np.float32(NF4[8] / np.float32(2))


def test_quantize_4bit_whole_blocks_only():
    """BNB-3.1: n a multiple of B has no partial block: nb = n / B entries of absmax. Table values times 2 in one
    block of 32 come back as their codes, high nibble first, with absmax 2."""
    codes = np.tile(np.arange(16), 2)
    packed, absmax = quantize_4bit(NF4[codes] * np.float32(2), quant_type="nf4", blocksize=32)
    assert packed.reshape(-1).tolist() == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF] * 2
    assert absmax.tolist() == [2.0]


def test_quantize_4bit_scales_a_block_with_absmax_below_1():
    """BNB-3.1: each value is "clamp(x * f32(1 / max(absmax, 1e-38)), -1, 1)": a block with absmax 0.5 is scaled by
    2 (1e-38 only guards a zero block), so 0.5 * table[q] is code q."""
    codes = np.tile(np.arange(16), 2)
    packed, absmax = quantize_4bit(NF4[codes] * np.float32(0.5), quant_type="nf4", blocksize=32)
    assert packed.reshape(-1).tolist() == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF] * 2
    assert absmax.tolist() == [0.5]


def test_quantize_4bit_scales_a_partial_last_block_with_absmax_below_1():
    """BNB-3.1: "the partial last block divides: x / max(absmax, 1e-38)": a last block of 16 values with absmax 0.25
    after a full block of 32; 0.25 * table[q] / 0.25 is code q."""
    x = np.concatenate([np.ones(32, np.float32), NF4 * np.float32(0.25)])
    packed, absmax = quantize_4bit(x, quant_type="nf4", blocksize=32)
    assert packed.reshape(-1)[16:].tolist() == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF]
    assert absmax.tolist() == [1.0, 0.25]


def test_quantize_4bit_returns_float32_absmax():
    """BNB-1.1: plain absmax is float32 (nb,), also for a tensor of one partial block."""
    _, absmax = quantize_4bit(np.array([0.5, -3.0, 1.0], np.float32), quant_type="fp4", blocksize=64)
    assert (absmax.dtype, absmax.tolist()) == (np.float32, [3.0])


def test_quantize_4bit_rounds_a_float64_input_to_float32_first():
    """BNB-3.1: "Per block of the flattened float32 x". x32 / 3 rounds in float32 to the NF4 midpoint of codes 7 and
    8, "a value on a midpoint takes the lower code" (7); a float64 input a quarter ulp above x32 is x32 in float32,
    so code 7 too (divided in float64 it would round above the midpoint: code 8). 3 is the block's absmax (code 15)."""
    x32 = _bits(1039431807)[0]
    above = float(x32) + 0.25 * float(np.spacing(x32))
    assert np.float32(above) == x32 and np.float32(x32 / np.float32(3)) == _NF4_MID_7_8
    assert np.float32(above / 3.0) > _NF4_MID_7_8                         # the float64 route would differ
    packed, _ = quantize_4bit(np.array([above, 3.0]), quant_type="nf4", blocksize=32)
    assert packed.tolist() == [[0x7F]]


@pytest.mark.filterwarnings("error")
def test_quantize_4bit_of_an_infinite_block_raises_no_numpy_warning():
    """BNB-3.1 is the reference encoder: it quantizes whatever float32 it gets without a NumPy warning (an infinite
    absmax makes inf * 0, NumPy's "invalid value"); refusing non-finite absmax is the validator's (BNB-3.4)."""
    _, absmax = quantize_4bit(np.array([np.inf, 1.0, 2.0], np.float32), quant_type="nf4", blocksize=32)
    assert absmax.tolist() == [np.inf]


def test_quantize_4bit_pads_an_odd_count_with_the_code_of_zero():
    """BNB-1.2: "An odd n is padded with one code ... the code of 0 (NF4: 7, FP4: 0)"."""
    nf4, _ = quantize_4bit(np.array([1.0], np.float32), quant_type="nf4", blocksize=32)
    fp4, _ = quantize_4bit(np.array([1.0], np.float32), quant_type="fp4", blocksize=32)
    assert (nf4.tolist(), fp4.tolist()) == ([[0xF7]], [[0x30]])


# ----------------------------------------------------------------------------------------------------- BNB-3.2


def test_dequantize_4bit_reads_absmax_as_float32():
    """BNB-3.2: "w[i] = f32(table[c[i]] * absmax_f32[...])": a float64 absmax 0.1 is read as f32(0.1) first. NF4
    code 2 times f32(0.1) rounds to float32 bits 0xBD5711E7, one ulp from the float64 product's rounding."""
    w = dequantize_4bit(np.array([[0x2F]], np.uint8), np.array([0.1]), quant_type="nf4", blocksize=64, shape=(1, 2),
                        dtype="float32")
    assert w.view(np.uint32).tolist() == [[0xBD5711E7, 0x3DCCCCCD]]
    assert np.float32(NF4[2] * np.float32(0.1)).view(np.uint32) == 0xBD5711E7


# ----------------------------------------------------------------------------------------------------- BNB-4


def test_quantize_absmax_of_exactly_one_nested_block():
    """BNB-4.1: 256 absmax values are one nested block of 256, no partial one. 128 of 1.0 and 128 of 3.0: offset 2,
    centred -1 and +1, nested absmax 1; -1 is nearest the map's lowest entry (code 0), +1 is its 1 (code 255)."""
    codes, nested, offset = quantize_absmax(np.repeat(np.float32([1.0, 3.0]), 128))
    assert (codes.tolist(), nested.tolist(), offset) == ([0] * 128 + [255] * 128, [1.0], 2.0)


def test_quantize_absmax_returns_uint8_codes_and_float32_nested_absmax():
    """BNB-1.1: with double quantization the stored absmax is uint8 and nested_absmax float32."""
    codes, nested, _ = quantize_absmax(np.float32([1.0, 2.0, 4.0]))
    assert (codes.dtype, nested.dtype) == (np.uint8, np.float32)


def test_quantize_absmax_rounds_a_float64_input_to_float32_first():
    """BNB-4.1: "offset = mean(absmax) in float32; absmax - offset ..." over the float32 absmax: a float64 input
    0.4 ulp above f32(0.7) gives what its float32 rounding gives (nested absmax f32(0.7) - 0.5, not f32(x - 0.5))."""
    v = np.float32(0.7)
    a64 = np.array([float(v) + 0.4 * float(np.spacing(v)), 0.5, 0.3])
    got, want = quantize_absmax(a64), quantize_absmax(a64.astype(np.float32))
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist() and got[2] == want[2]
    assert got[1].tolist() == [float(v - np.float32(0.5))]


@pytest.mark.filterwarnings("error")
def test_quantize_absmax_of_equal_absmax_round_trips_silently():
    """BNB-4.1 / BNB-4.3: absmax all equal (every centred value 0, a nested absmax 0) decodes back exactly
    (map[code] * 0 + offset = offset) and quantizes without a NumPy divide or invalid warning."""
    absmax = np.full(300, 0.75, np.float32)
    codes, nested, offset = quantize_absmax(absmax)
    assert nested.tolist() == [0.0, 0.0] and offset == 0.75
    assert scales(codes, nested, offset=offset).tolist() == absmax.tolist()


def test_scales_without_nested_state_is_absmax_as_float32():
    """BNB-3.4 / BNB-3.2: without double quantization absmax_f32 is the stored absmax read as float32."""
    s = scales([0.1, 2.5])
    assert (s.dtype, s.tolist()) == (np.float32, [float(np.float32(0.1)), 2.5])


def test_scales_use_the_stored_nested_map():
    """BNB-4.2: "readers use the stored map (QuantState.from_dict)": with map[j] = j / 256, codes 0, 128, 255,
    nested absmax 2 and offset 1 decode to 1, 2 and 1 + 255 / 128 (all exact)."""
    s = scales(np.array([0, 128, 255], np.uint8), np.float32([2.0]), np.arange(256, dtype=np.float32) / 256, 1.0)
    assert s.tolist() == [1.0, 2.0, 1.0 + 255 / 128]


def test_scales_read_a_nested_map_given_in_float64_as_float32():
    """BNB-4.2 / BNB-4.3: the map is "256 finite float32"; map[code] * nested_absmax is rounded to float32: a map of
    0.1 (float64) and nested absmax 3 give f32(f32(0.1) * 3) + 0, a float32 array."""
    s = scales(np.array([5], np.uint8), np.float32([3.0]), [0.1] * 256, 0.0)
    assert (s.dtype, s.tolist()) == (np.float32, [float(np.float32(0.1) * np.float32(3))])


def test_scales_read_nested_absmax_given_in_float64_as_float32():
    """BNB-4.3: "f32(f32(map[absmax_u8[j]] * nested_absmax[...]) + f32(nested_offset))" in float32: a float64 nested
    absmax 0.1 is read as f32(0.1); code 255 (map 1.0) gives f32(0.1) + 0, a float32 array."""
    s = scales(np.array([255], np.uint8), [0.1], None, 0.0)
    assert (s.dtype, s.tolist()) == (np.float32, [float(np.float32(0.1))])


def test_linspace_is_torchs_for_the_second_half():
    """BNB-4.2: torch's CPU linspace, "the first half start + step * j, the second half end - step * (steps - 1 -
    j)": the middle of an odd count is in the second half. torch.linspace(0.1, 0.9, 3) and (0.1, 0.7, 5) in float32
    (torch 2.13.0, CPU), whose middles the first-half formula puts one ulp lower."""
    assert _linspace(0.1, 0.9, 3).view(np.uint32).tolist() == [1036831949, 1056964608, 1063675494]
    assert _linspace(0.1, 0.7, 5).view(np.uint32).tolist() == [1036831949, 1048576000, 1053609165, 1057803469,
                                                                 1060320051]


def test_dynamic_map_has_256_sorted_entries_from_its_lowest_to_1():
    """BNB-4.2: "both signs; then 0 and 1; sorted: 256 float32 values"; the largest decade's largest midpoint
    (0.99296875 = (0.9859375 + 1) / 2 of linspace(0.1, 1, 65)) is the lowest, negated."""
    m = dynamic_map()
    assert (m.size, m[0], m[127], m[255]) == (256, np.float32(-0.99296875), 0.0, 1.0) and np.all(np.diff(m) > 0)


# ----------------------------------------------------------------------------------------------------- rounding


def test_to_dtype_float32_of_float64_is_float32():
    """BNB-3.2: results are "rounded once to the quant_state's dtype": float32 output is a float32 array."""
    w = to_dtype(np.array([0.1]), "float32")
    assert (w.dtype, w.tolist()) == (np.float32, [float(np.float32(0.1))])


@pytest.mark.filterwarnings("error")
def test_to_dtype_float16_overflows_to_inf_silently():
    """BNB-3.2: rounding to float16 (to nearest): 1e5 is past float16's largest finite 65504, so inf, without a
    NumPy overflow warning."""
    assert to_dtype(np.float32([1e5, -1e5]), "float16").tolist() == [np.inf, -np.inf]


def test_to_dtype_bfloat16_ties_go_to_even():
    """BNB-3.2: bfloat16 "to nearest, ties to even": 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to 1 (even);
    1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 and goes to 1 + 2^-6 (torch 2.13 gives 0x3F80, 0x3F82)."""
    got = to_dtype(_bits(0x3F808000, 0x3F818000), "bfloat16")
    assert got.view(np.uint32).tolist() == [0x3F800000, 0x3F820000]


def test_to_dtype_bfloat16_keeps_every_nan_a_nan():
    """BNB-3.2: a NaN stays NaN in bfloat16, also one whose payload sits in the low 16 bits the rounding drops
    (0x7F800001 would round to inf, 0xFFFFFFFF carry out to +0)."""
    got = to_dtype(_bits(0x7F800001, 0xFFFFFFFF, 0x7FC00000), "bfloat16")
    assert np.isnan(got).tolist() == [True, True, True]


def test_to_dtype_bfloat16_of_a_nan_holds_a_bfloat16_value():
    """BNB-3.2: "bfloat16 results come back as float32 arrays holding bfloat16 values": the low 16 bits are 0, also
    for a NaN whose payload had low bits set."""
    got = to_dtype(_bits(0x7F800001, 0xFFFFFFFF), "bfloat16")
    assert (got.view(np.uint32) & 0xFFFF).tolist() == [0, 0]


# ----------------------------------------------------------------------------------------------------- BNB-6.2


def test_dequantize_int8_rounds_the_product_before_the_reciprocal():
    """BNB-6.2: "f32(f32(weight * SCB) * f32(7.874015718698502e-3))", the product rounded first. bitsandbytes 0.50.2's
    int8_vectorwise_dequant on these codes and SCB (CPU) gives these float32 bits; one rounding at the end would not."""
    scb = _bits(1067348067, 1075239414, 1053526018)
    w = dequantize_int8(np.array([[-108], [-123], [27]], np.int8), scb, dtype="float32")
    assert w.view(np.uint32).tolist() == [[3213278285], [3222411685], [1034753260]]


def test_dequantize_int8_reads_scb_as_float32():
    """BNB-6.1 / BNB-6.2: SCB is float32: a float64 SCB 1.7506644878324598 is read as its float32 rounding;
    bitsandbytes 0.50.2 decodes code 6 with that float32 SCB to bits 1034511130 (the float64 SCB gives one more)."""
    w = dequantize_int8(np.array([[6]], np.int8), [1.7506644878324598], dtype="float32")
    assert w.view(np.uint32).tolist() == [[1034511130]]


def test_fp4_code_8_is_negative_zero():
    """BNB-2.3: "FP4 code 8 (sign set, zero) is -0.0 here"."""
    assert FP4[8] == 0 and np.signbit(FP4[8])
