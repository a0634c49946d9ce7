"""The compressed-tensors codec's refusals asserted whole, its limits at the limit and one past, and the parameters
it must not ignore (issue 33: tests with teeth; `make mutation MODULE=qformats/formats/ctensors/codec.py`).

Every expected value is worked by hand from spec/compressed_tensors.md (the CT-2.1 inventory, CT-2.2 groups, the
CT-2.3 offset and widths, the CT-2.6 per-word layout, the CT-3.1 worked example) or is a property; none comes from
the code under test.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from qformats.formats import ctensors
from qformats.formats.ctensors import codec
from whole_error import refusal, whole


def pack_args(n=4, k=64, groups=2):
    """Signed 4-bit codes (N = 4, K = 64) cycling through [-8, 7] and scales 0.5 (G = 2)."""
    codes = np.arange(n * k).reshape(n, k) % 16 - 8
    return codes, np.full((n, groups), 0.5, np.float16)


def stored(n=4, k=64, groups=2, words=None):
    """The stored tensors of a 4-bit symmetric layer by CT-2.1 (N = 4, K = 64: 8 dense words a row, G = 2)."""
    return {"weight_packed": np.zeros((n, words or k * 4 // 32), np.int32),
            "weight_scale": np.ones((n, groups), np.float16), "weight_shape": np.array([n, k], np.int64)}


# -- num_bits, layout, widths (CT-2.3, CT-2.6) ----------------------------------------------------


@pytest.mark.parametrize("bits", [1, 8, np.int64(4)])
def test_num_bits_1_to_8_are_taken(bits):
    """CT-2.3: widths 1 .. 8 (a NumPy integer too): the limits themselves pack."""
    low = -(1 << (int(bits) - 1))
    layer = ctensors.pack(np.full((2, 32), low), np.ones((2, 1), np.float16), num_bits=bits)
    assert layer.num_bits == int(bits) and type(layer.num_bits) is int


@pytest.mark.parametrize("bits", [0, 9, True, 4.0, "4"])
def test_num_bits_outside_1_to_8_are_refused(bits):
    """CT-2.3: 0 and 9 are one past the limits; a bool, a float and a string are no integer width."""
    assert whole(lambda: ctensors.pack(np.zeros((2, 32), int), np.ones((2, 1), np.float16), num_bits=bits)) == \
        refusal("bits.unsupported", "num_bits", "an integer in [1, 8] (CT-2.3)", bits)


def test_an_unknown_layout_is_refused_by_the_reader():
    assert whole(lambda: ctensors.unpack(stored(), num_bits=4, layout="Dense")) == refusal(
        "argument.invalid", "layout", "'dense' (CT-2.3) or 'word' (CT-2.6)", "Dense")


@pytest.mark.parametrize(("count", "bits", "dense", "word"), [
    (32, 3, 3, 4), (32, 5, 5, 6), (1, 8, 1, 1), (33, 1, 2, 2), (7, 7, 2, 2), (100, 6, 19, 20)])
def test_packed_words_by_hand(count, bits, dense, word):
    """CT-2.3: ceil(count b / 32) dense; CT-2.6: ceil(count / p), p = 32 // b, per word."""
    assert (codec.packed_words(count, bits), codec.packed_words(count, bits, "dense"),
            codec.packed_words(count, bits, "word")) == (dense, dense, word)


# -- pack (CT-2.1 .. CT-2.5, CT-3.3) --------------------------------------------------------------


def test_pack_refuses_codes_that_are_not_2d():
    """CT-2.1: codes are (out, in)."""
    codes, scales = pack_args()
    assert whole(lambda: ctensors.pack(codes.reshape(4, 64, 1), scales, num_bits=4, group_size=32)) == refusal(
        "tensor.shape", "codes", "2-D", (4, 64, 1))


def test_pack_refuses_float_codes():
    codes, scales = pack_args()
    assert whole(lambda: ctensors.pack(codes.astype(np.float32), scales, num_bits=4, group_size=32)) == refusal(
        "tensor.dtype", "codes", "an integer array", "float32")


@pytest.mark.parametrize(("code", "where"), [(7, None), (8, "8 at [2, 5]"), (-8, None), (-9, "-9 at [2, 5]")])
def test_pack_takes_codes_in_minus_8_to_7_for_4_bits(code, where):
    """CT-2.3: codes in [-o, o - 1], o = 2^(b-1) = 8 -- each limit packs, one past it is refused."""
    codes, scales = pack_args()
    codes[2, 5] = code
    if where is None:
        assert ctensors.unpack(ctensors.pack(codes, scales, num_bits=4, group_size=32), num_bits=4)[0][2, 5] == code
    else:
        assert whole(lambda: ctensors.pack(codes, scales, num_bits=4, group_size=32)) == refusal(
            "ctensors.value.range", "codes", "in [-8, 7] for 4 bits (CT-2.3)", where)


@pytest.mark.parametrize(("bits", "low", "high"), [(1, -1, 0), (3, -4, 3), (8, -128, 127)])
def test_the_code_range_follows_the_width(bits, low, high):
    """CT-2.3: [-2^(b-1), 2^(b-1) - 1]; high + 1 is refused."""
    codes = np.full((1, 32), low)
    codes[0, 31] = high + 1
    assert whole(lambda: ctensors.pack(codes, np.ones((1, 1), np.float16), num_bits=bits)) == refusal(
        "ctensors.value.range", "codes", f"in [{low}, {high}] for {bits} bits (CT-2.3)", f"{high + 1} at [0, 31]")


def test_pack_refuses_zero_points_of_the_wrong_shape():
    """CT-2.5: zero points are (N, G) = (4, 2) before packing."""
    codes, scales = pack_args()
    assert whole(lambda: ctensors.pack(codes, scales, num_bits=4, group_size=32, zero_points=np.zeros((4, 1), int))) \
        == refusal("tensor.shape", "zero_points", "of shape (4, 2)", (4, 1))


def test_pack_refuses_a_zero_point_of_8_at_4_bits():
    """CT-2.5: zero points take the codes' signed range."""
    codes, scales = pack_args()
    zp = np.zeros((4, 2), int)
    zp[3, 1] = 8
    assert whole(lambda: ctensors.pack(codes, scales, num_bits=4, group_size=32, zero_points=zp)) == refusal(
        "ctensors.value.range", "zero_points", "in [-8, 7] for 4 bits (CT-2.3)", "8 at [3, 1]")


@pytest.mark.parametrize("group_size", [0, -2, True, 32.0])
def test_pack_refuses_a_group_size_that_is_no_size(group_size):
    """CT-2.2: None or -1 (channel), or a positive integer (group)."""
    codes, scales = pack_args()
    assert whole(lambda: ctensors.pack(codes, scales, num_bits=4, group_size=group_size)) == refusal(
        "argument.invalid", "group_size", "None or -1 (channel) or > 0 (group)", group_size)


def test_pack_refuses_a_group_size_not_dividing_k_whole():
    """CT-2.2: gs MUST divide K; 48 does not divide 64."""
    codes, scales = pack_args()
    assert whole(lambda: ctensors.pack(codes, scales, num_bits=4, group_size=48)) == refusal(
        "ctensors.group.shape", "group_size", "a divisor of in_features 64 (CT-2.2)", 48)


@pytest.mark.parametrize(("group_size", "groups"), [(None, 1), (-1, 1), (64, 1), (32, 2), (1, 64), (np.int64(16), 4)])
def test_the_scale_columns_follow_the_group_size(group_size, groups):
    """CT-2.2: channel (None, -1) has G = 1; group has G = K / gs."""
    codes, _ = pack_args()
    layer = ctensors.pack(codes, np.ones((4, groups), np.float16), num_bits=4, group_size=group_size)
    assert layer.weight_scale.shape == (4, groups) and layer.group_size is group_size


def test_pack_refuses_scales_of_the_wrong_shape():
    """CT-2.1: scales are (N, G) = (4, 2)."""
    codes, scales = pack_args()
    assert whole(lambda: ctensors.pack(codes, scales.T, num_bits=4, group_size=32)) == refusal(
        "tensor.shape", "scales", "of shape (4, 2)", (2, 4))


def test_pack_refuses_float64_scales():
    """CT-2.1: scales are the model dtype, float16 or float32 here."""
    codes, scales = pack_args()
    assert whole(lambda: ctensors.pack(codes, scales.astype(np.float64), num_bits=4, group_size=32)) == refusal(
        "tensor.dtype", "scales", "float16 or float32", "float64")


def test_pack_refuses_a_nan_scale():
    """CT-3.3: every scale MUST be finite."""
    codes, scales = pack_args()
    scales[3, 1] = np.nan
    assert whole(lambda: ctensors.pack(codes, scales, num_bits=4, group_size=32)) == refusal(
        "ctensors.scales.nonfinite", "scales", "finite float16", "NaN at [3, 1]")


def test_pack_stores_the_shape_as_int64_out_then_in():
    """CT-2.1: weight_shape is int64 [N, K]."""
    layer = ctensors.pack(*pack_args(), num_bits=4, group_size=32)
    assert layer.weight_shape.dtype == np.int64 and layer.weight_shape.tolist() == [4, 64]


def test_pack_keeps_g_idx_and_bias():
    """CT-2.1, CT-2.4: weight_g_idx and the bias are stored as given."""
    g_idx = (np.arange(64) % 2).astype(np.int32)
    bias = np.arange(4, dtype=np.float16)
    layer = ctensors.pack(*pack_args(), num_bits=4, group_size=32, g_idx=g_idx, bias=bias)
    assert np.array_equal(layer.weight_g_idx, g_idx) and np.array_equal(layer.bias, bias)


def test_pack_without_the_optional_tensors_has_none():
    """CT-2.1: zero points, g_idx and bias are optional: absent reads as None."""
    layer = ctensors.pack(*pack_args(), num_bits=4, group_size=32)
    assert (layer.weight_zero_point, layer.weight_g_idx, layer.bias) == (None, None, None)


def test_pack_refuses_a_g_idx_one_short():
    """CT-2.1: weight_g_idx has one entry per input column (K = 64)."""
    assert whole(lambda: ctensors.pack(*pack_args(), num_bits=4, group_size=32, g_idx=np.zeros(63, np.int32))) == \
        refusal("tensor.shape", "g_idx", "of shape (64,)", (63,))


def test_pack_refuses_a_float_g_idx():
    assert whole(lambda: ctensors.pack(*pack_args(), num_bits=4, group_size=32, g_idx=np.zeros(64))) == \
        refusal("tensor.dtype", "g_idx", "int32 or int64", "float64")


# -- the reader (CT-2.1, CT-2.2, CT-3.1) ----------------------------------------------------------


def test_the_reader_takes_an_object_without_the_optional_tensors():
    """CT-2.1: a layer given as a plain object holding only the required tensors is symmetric: no zero points."""
    assert ctensors.unpack(SimpleNamespace(**stored()), num_bits=4)[1] is None


def test_unpack_reads_dense_by_default():
    """CT-2.3: without a layout the reader reads the dense one; the worked row [-5, 0 x 7] is the word 0x88888883."""
    t = stored(n=1, k=8, groups=1)
    t["weight_packed"] = np.array([[0x88888883]], np.uint32).view(np.int32)
    assert ctensors.unpack(t, num_bits=4)[0].tolist() == [[-5, 0, 0, 0, 0, 0, 0, 0]]


@pytest.mark.parametrize("read", [
    lambda t: ctensors.dequantize(t, num_bits=4, group_size=16),
    lambda t: codec.checked_tensors(t, 4, group_size=16)])
def test_a_given_group_size_is_checked_against_the_scales(read):
    """CT-2.2: group size 16 over K = 64 means 4 scale columns; the 2 stored (what gs 32 has) are refused."""
    assert whole(lambda: read(stored())) == refusal("tensor.shape", "weight_scale", "of shape (4, 4)", (4, 2))


def test_dequantize_follows_g_idx():
    """CT-3.1: W[n, k] = s[n, g(k)] (q[n, k] - zp[n, g(k)]) with g(k) = weight_g_idx[k], here k mod 2 (act-order):
    group 0 scale 0.5 zero point 1, group 1 scale 2 zero point -3."""
    codes, _ = pack_args()
    scales = np.tile(np.array([0.5, 2.0], np.float16), (4, 1))
    zp = np.tile(np.array([1, -3]), (4, 1))
    g_idx = (np.arange(64) % 2).astype(np.int32)
    layer = ctensors.pack(codes, scales, num_bits=4, group_size=32, zero_points=zp, g_idx=g_idx)
    want = np.where(np.arange(64) % 2 == 0, 0.5 * (codes - 1), 2.0 * (codes + 3))
    assert np.array_equal(ctensors.dequantize(layer, num_bits=4), want.astype(np.float32))


def test_dequantize_channel_scales_cover_every_column():
    """CT-2.2, CT-3.1: one scale column (channel) applies to all K inputs: code -8 times scale 0.25 per row."""
    t = stored(groups=1)
    t["weight_scale"] = np.full((4, 1), 0.25, np.float16)
    assert np.array_equal(ctensors.dequantize(t, num_bits=4), np.full((4, 64), -2.0, np.float32))


# -- padding (CT-2.3, CT-2.6, CT-3.2) -------------------------------------------------------------


def test_a_dirty_bit_after_the_last_dense_value_is_named():
    """CT-2.3: K = 60 at 4 bits is 240 stream bits in 8 words: the top 16 bits of word 7 are padding."""
    layer = ctensors.pack(np.zeros((4, 60), int), np.ones((4, 1), np.float16), num_bits=4)
    t = codec.checked_tensors(layer, 4)
    t["weight_packed"] = t["weight_packed"].copy()
    t["weight_packed"][2, 7] |= np.int32(1 << 16)
    assert whole(lambda: codec.check_padding(t, 4)) == refusal(
        "ctensors.padding.nonzero", "weight_packed",
        "zero bits after the last value of each packed row (CT-2.3: a writer MUST write zeros)", "1 rows with bits set")


def test_a_dirty_bit_after_the_last_zero_point_is_named():
    """CT-2.5: zero points of N = 4 rows at 4 bits fill 16 bits of one word a column; bit 16 is padding."""
    codes, scales = pack_args()
    layer = ctensors.pack(codes, scales, num_bits=4, group_size=32, zero_points=np.zeros((4, 2), int))
    t = codec.checked_tensors(layer, 4)
    t["weight_zero_point"] = t["weight_zero_point"].copy()
    t["weight_zero_point"][0, 1] |= np.int32(1 << 16)
    assert whole(lambda: codec.check_padding(t, 4)) == refusal(
        "ctensors.padding.nonzero", "weight_zero_point",
        "zero bits after the last value of each packed row (CT-2.3: a writer MUST write zeros)", "1 rows with bits set")


def test_clean_zero_points_filling_their_words_pass():
    """CT-2.5: N = 8 zero points of 4 bits fill their word exactly: every bit set is a value, none is padding."""
    codes = np.zeros((8, 64), int)
    layer = ctensors.pack(codes, np.ones((8, 2), np.float16), num_bits=4, group_size=32,
                          zero_points=np.full((8, 2), 7))
    assert codec.check_padding(codec.checked_tensors(layer, 4), 4) is None


@pytest.mark.parametrize("layout", ["dense", "word"])
@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_full_words_have_no_padding(bits, layout):
    """CT-2.3, CT-2.6: where b divides 32 and K = 64 fills whole words, every bit is a value: all ones is clean."""
    packed = np.full((3, 2 * bits), -1, np.int32)
    assert codec.dirty_padding_rows(packed, bits, 64, layout) == 0
