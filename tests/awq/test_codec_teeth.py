"""The AWQ codec's refusals asserted whole, its limits at the limit and one past, and the parameters it must not
ignore (issue 33: tests with teeth; `make mutation MODULE=qformats/formats/awq/codec.py`).

Every expected value is worked by hand from spec/awq.md (the AWQ-2.1/2.2 inventory and shapes, the AWQ-2.3 packing
order and its worked word 0x75316420, the AWQ-3.1 worked decode) or is a property; none comes from the code under test.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from qformats.formats import awq, gptq
from qformats.formats.awq.codec import group_size_of
from whole_error import refusal, whole


def pack_args(k=64, n=8, groups=2):
    """Codes, zero points and scales of a valid layer: codes 0..15 cycling, zero 8, scale 0.5."""
    codes = np.arange(k * n).reshape(k, n) % 16
    return codes, np.full((groups, n), 8), np.full((groups, n), 0.5, np.float16)


def stored(k=64, n=8, groups=2):
    """The stored tensors of a layer by AWQ-2.1/2.2 (K = 64, N = 8, G = 2 unless told): all-zero words, unit scales."""
    return {"qweight": np.zeros((k, n // 8), np.int32), "qzeros": np.zeros((groups, n // 8), np.int32),
            "scales": np.ones((groups, n), np.float16)}


# -- pack (AWQ-2, AWQ-3.2, AWQ-3.3) ---------------------------------------------------------------


def test_pack_refuses_codes_that_are_not_2d():
    """AWQ-2.2: codes are (in_features, out_features)."""
    codes, zeros, scales = pack_args()
    assert whole(lambda: awq.pack(codes.reshape(64, 8, 1), zeros, scales, group_size=32)) == refusal(
        "tensor.shape", "codes", "2-D (in_features, out_features)", (64, 8, 1))


def test_pack_takes_out_features_8_and_refuses_one_more():
    """AWQ-2.2: N MUST be a multiple of 8 -- 8 packs into one word per row, 9 is refused."""
    codes, zeros, scales = pack_args(n=8)
    assert awq.pack(codes, zeros, scales, group_size=32).qweight.shape == (64, 1)
    codes, zeros, scales = pack_args(n=9)
    assert whole(lambda: awq.pack(codes, zeros, scales, group_size=32)) == refusal(
        "bits.length", "codes", "out_features a multiple of 8 (AWQ-2.2)", 9)


def test_pack_refuses_zeros_with_a_row_too_many():
    """AWQ-2.2: zero points have G = K / gs rows (2 for 64 / 32)."""
    codes, _, scales = pack_args()
    assert whole(lambda: awq.pack(codes, np.full((3, 8), 8), scales, group_size=32)) == refusal(
        "tensor.shape", "zeros", "of shape (2, 8)", (3, 8))


def test_pack_refuses_float_zeros():
    """AWQ-3.2: zero points are integers packed into 4-bit fields."""
    codes, zeros, scales = pack_args()
    assert whole(lambda: awq.pack(codes, zeros.astype(np.float64), scales, group_size=32)) == refusal(
        "tensor.dtype", "zeros", "an integer array", "float64")


def test_pack_refuses_float_codes():
    """AWQ-3.2: codes are integers packed into 4-bit fields."""
    codes, zeros, scales = pack_args()
    assert whole(lambda: awq.pack(codes.astype(np.float32), zeros, scales, group_size=32)) == refusal(
        "tensor.dtype", "codes", "an integer array", "float32")


def test_pack_takes_zero_point_15_and_refuses_16():
    """AWQ-3.2: zero points in [0, 15] -- 15 at the limit packs, 16 one past is refused at its position."""
    codes, zeros, scales = pack_args()
    zeros[1, 3] = 15
    assert awq.unpack(awq.pack(codes, zeros, scales, group_size=32))[1][1, 3] == 15
    zeros[1, 3] = 16
    assert whole(lambda: awq.pack(codes, zeros, scales, group_size=32)) == refusal(
        "awq.zero.range", "zeros", "in [0, 15]", "16 at [1, 3]")


def test_pack_takes_zero_point_0_and_refuses_minus_1():
    """AWQ-3.2: the lower limit of a zero point, 0, packs; -1 is refused."""
    codes, zeros, scales = pack_args()
    zeros[0, 6] = 0
    assert awq.unpack(awq.pack(codes, zeros, scales, group_size=32))[1][0, 6] == 0
    zeros[0, 6] = -1
    assert whole(lambda: awq.pack(codes, zeros, scales, group_size=32)) == refusal(
        "awq.zero.range", "zeros", "in [0, 15]", "-1 at [0, 6]")


def test_pack_refuses_a_code_of_16_whole():
    """AWQ-3.2: codes in [0, 15]; the first code out of range is named with its position."""
    codes, zeros, scales = pack_args()
    codes[5, 2] = 16
    assert whole(lambda: awq.pack(codes, zeros, scales, group_size=32)) == refusal(
        "awq.codes.range", "codes", "in [0, 15]", "16 at [5, 2]")


def test_pack_refuses_scales_of_the_wrong_shape():
    """AWQ-2.2: scales are (G, N) = (2, 8)."""
    codes, zeros, scales = pack_args()
    assert whole(lambda: awq.pack(codes, zeros, scales[:1], group_size=32)) == refusal(
        "tensor.shape", "scales", "of shape (2, 8)", (1, 8))


def test_pack_refuses_float32_scales():
    """AWQ-2.1: scales are float16, exactly."""
    codes, zeros, scales = pack_args()
    assert whole(lambda: awq.pack(codes, zeros, scales.astype(np.float32), group_size=32)) == refusal(
        "tensor.dtype", "scales", "float16", "float32")


def test_pack_refuses_a_nan_scale():
    """AWQ-3.3: every scale MUST be finite."""
    codes, zeros, scales = pack_args()
    scales[1, 4] = np.nan
    assert whole(lambda: awq.pack(codes, zeros, scales, group_size=32)) == refusal(
        "awq.scales.nonfinite", "scales", "finite float16", "NaN at [1, 4]")


def test_pack_keeps_the_bias():
    """AWQ-2.1: a float16 bias of shape (N,) is stored as it is."""
    bias = np.arange(8, dtype=np.float16) / 4
    layer = awq.pack(*pack_args(), group_size=32, bias=bias)
    assert layer.bias.dtype == np.float16 and np.array_equal(layer.bias, bias)


def test_pack_without_a_bias_has_none():
    """AWQ-2.1: the bias is optional -- a layer without one reads as None, not an error."""
    assert awq.pack(*pack_args(), group_size=32).bias is None


def test_pack_refuses_a_float32_bias():
    """AWQ-2.1: the bias is float16."""
    bias = np.zeros(8, np.float32)
    assert whole(lambda: awq.pack(*pack_args(), group_size=32, bias=bias)) == refusal(
        "tensor.dtype", "bias", "float16", "float32")


def test_pack_refuses_a_bias_one_longer_than_out_features():
    """AWQ-2.1: the bias has one entry per output feature (N = 8)."""
    bias = np.zeros(9, np.float16)
    assert whole(lambda: awq.pack(*pack_args(), group_size=32, bias=bias)) == refusal(
        "tensor.shape", "bias", "of shape (8,)", (9,))


def test_pack_states_its_group_size():
    assert awq.pack(*pack_args(), group_size=32).group_size == 32


# -- group_size_of (AWQ-2.2) ----------------------------------------------------------------------


@pytest.mark.parametrize("groups, size", [(1, -1), (2, 32), (64, 1)])
def test_group_size_of_whole_divisors(groups, size):
    """AWQ-2.2: gs = K / G; one group is the whole-column group -1."""
    assert group_size_of(64, groups) == size


@pytest.mark.parametrize("groups", [0, 3])
def test_group_size_of_refuses_no_groups_and_a_non_divisor(groups):
    """AWQ-2.2: G = 0 (the limit is 1) and G = 3 (64 % 3 = 1) give no whole group size."""
    assert whole(lambda: group_size_of(64, groups)) == refusal(
        "awq.group.shape", "scales", "a row count dividing in_features 64 (AWQ-2.2)", groups)


# -- the reader's checks (AWQ-2.1, AWQ-2.2, AWQ-3.3) ----------------------------------------------


@pytest.mark.parametrize("name", ["qweight", "qzeros", "scales"])
def test_a_missing_tensor_is_named(name):
    """AWQ-2.1: qweight, qzeros and scales MUST be present."""
    t = stored()
    del t[name]
    assert whole(lambda: awq.dequantize(t)) == refusal("tensor.missing", name, "present (AWQ-2.1)", "absent")


def test_a_missing_tensor_of_an_object_is_named():
    """AWQ-2.1: a layer given as an object with the tensors as attributes, scales absent."""
    t = stored()
    layer = SimpleNamespace(qweight=t["qweight"], qzeros=t["qzeros"])
    assert whole(lambda: awq.unpack(layer)) == refusal("tensor.missing", "scales", "present (AWQ-2.1)", "absent")


def test_int64_qweight_is_refused():
    """AWQ-2.1: qweight is int32, exactly."""
    t = stored()
    t["qweight"] = t["qweight"].astype(np.int64)
    assert whole(lambda: awq.dequantize(t)) == refusal("tensor.dtype", "qweight", "int32", "int64")


def test_a_1d_qweight_is_refused():
    """AWQ-2.2: qweight is (K, N / 8)."""
    t = stored()
    t["qweight"] = np.zeros(64, np.int32)
    assert whole(lambda: awq.dequantize(t)) == refusal(
        "tensor.shape", "qweight", "2-D (in_features, out_features / 8)", (64,))


def test_float32_scales_are_refused_by_the_reader():
    """AWQ-2.1: scales are float16, exactly."""
    t = stored()
    t["scales"] = t["scales"].astype(np.float32)
    assert whole(lambda: awq.dequantize(t)) == refusal("tensor.dtype", "scales", "float16", "float32")


def test_scales_one_column_short_of_n_are_refused():
    """AWQ-2.2: scales have N = 8 columns (qweight's 1 word times 8); 16 columns are refused."""
    t = stored()
    t["scales"] = np.ones((2, 16), np.float16)
    assert whole(lambda: awq.dequantize(t)) == refusal(
        "tensor.shape", "scales", "of shape (groups, 8) (AWQ-2.2)", (2, 16))


def test_1d_scales_are_refused():
    t = stored()
    t["scales"] = np.ones(8, np.float16)
    assert whole(lambda: awq.dequantize(t)) == refusal(
        "tensor.shape", "scales", "of shape (groups, 8) (AWQ-2.2)", (8,))


def test_scales_with_a_row_count_not_dividing_k_are_refused():
    """AWQ-2.2: without a group size the scales' rows give it, K / G; 3 rows do not divide K = 64."""
    t = stored(groups=3)
    assert whole(lambda: awq.dequantize(t)) == refusal(
        "awq.group.shape", "scales", "a row count dividing in_features 64 (AWQ-2.2)", 3)


@pytest.mark.parametrize("read", [awq.dequantize, awq.unpack, awq.to_gptq])
def test_a_given_group_size_is_checked_against_the_scales(read):
    """AWQ-2.2: group size 16 over K = 64 means 4 scale rows; 2 rows (what gs 32 has) are refused."""
    assert whole(lambda: read(stored(), group_size=16)) == refusal(
        "tensor.shape", "scales", "of shape (4, 8)", (2, 8))


def test_qzeros_a_word_too_wide_are_refused():
    """AWQ-2.2: qzeros are (G, N / 8) = (2, 1)."""
    t = stored()
    t["qzeros"] = np.zeros((2, 2), np.int32)
    assert whole(lambda: awq.dequantize(t)) == refusal("tensor.shape", "qzeros", "of shape (2, 1)", (2, 2))


def test_int64_qzeros_are_refused():
    """AWQ-2.1: qzeros are int32, exactly."""
    t = stored()
    t["qzeros"] = t["qzeros"].astype(np.int64)
    assert whole(lambda: awq.dequantize(t)) == refusal("tensor.dtype", "qzeros", "int32", "int64")


def test_an_infinite_scale_is_refused_whole():
    """AWQ-3.3: every scale MUST be finite; the first offender is named with its position."""
    t = stored()
    t["scales"][1, 3] = np.inf
    assert whole(lambda: awq.dequantize(t)) == refusal(
        "awq.scales.nonfinite", "scales", "finite float16", "inf at [1, 3]")


# -- to_gptq / from_gptq (AWQ-4.1, AWQ-4.2) -------------------------------------------------------


def test_to_gptq_states_the_group_size_asked_for():
    """AWQ-4.1: one group of K = 64 rows asked as group size 64 stays 64, not the -1 a lone row would imply."""
    t = stored(groups=1)
    assert awq.to_gptq(t, group_size=64).group_size == 64


@pytest.mark.parametrize("as_dict", [True, False])
def test_to_gptq_keeps_the_bias(as_dict):
    """AWQ-4.1: the same layer, bias included, from a packed layer or a plain mapping of tensors."""
    bias = np.arange(8, dtype=np.float16) / 8
    layer = awq.pack(*pack_args(), group_size=32, bias=bias)
    g = awq.to_gptq(dict(layer.tensors) if as_dict else layer)
    assert g.bias.dtype == np.float16 and np.array_equal(g.bias, bias)


def test_to_gptq_of_an_object_without_a_bias_has_none():
    """AWQ-2.1: the bias is optional, also on a layer given as a plain object of tensors."""
    t = stored()
    assert awq.to_gptq(SimpleNamespace(**t)).bias is None


def test_from_gptq_refusal_of_three_bits_whole():
    """AWQ-4.2: AWQ GEMM stores 4-bit codes only."""
    g = gptq.pack(np.zeros((64, 32), int), np.ones((2, 32), int), np.ones((2, 32), np.float16), bits=3,
                  version="v2", group_size=32)
    assert whole(lambda: awq.from_gptq(g, bits=3, version="v2")) == refusal(
        "awq.convert.unrepresentable", "bits", "4 (AWQ GEMM stores 4-bit codes only, AWQ-4.2)", 3)


def test_from_gptq_refuses_a_short_last_group_of_the_group_size_given():
    """AWQ-4.2: K = 96 in groups of 64 (G = 2, no g_idx) leaves a short last group; the size given, not the 48
    that 96 / 2 rows would suggest, is the one judged."""
    t = {"qweight": np.zeros((96 // 8, 8), np.int32), "qzeros": np.zeros((2, 1), np.int32),
         "scales": np.ones((2, 8), np.float16)}
    assert whole(lambda: awq.from_gptq(t, bits=4, version="v2", group_size=64)) == refusal(
        "awq.convert.unrepresentable", "group_size",
        "a divisor of in_features 96: AWQ has no short last group (AWQ-4.2)", 64)


def test_from_gptq_refusal_of_act_order_whole():
    """AWQ-4.2: AWQ has no g_idx; a permuted one is refused."""
    codes, zeros, scales = pack_args()
    g_idx = (np.arange(64) // 32)[::-1].astype(np.int32)
    g = gptq.pack(codes, zeros, scales, bits=4, version="v2", g_idx=g_idx, group_size=32)
    assert whole(lambda: awq.from_gptq(g, bits=4, version="v2", group_size=32)) == refusal(
        "awq.convert.unrepresentable", "g_idx",
        "trivial (k // group_size): AWQ has no g_idx, so act-order layers cannot be expressed (AWQ-4.2)",
        "a permuted g_idx")


def test_from_gptq_keeps_the_bias():
    """AWQ-4.2: the bias travels with the weights."""
    bias = np.arange(8, dtype=np.float16) / 2
    g = gptq.pack(*pack_args(), bits=4, version="v2", group_size=32, bias=bias)
    back = awq.from_gptq(g, bits=4, version="v2")
    assert back.bias.dtype == np.float16 and np.array_equal(back.bias, bias)
