"""The GPTQ validity rules' refusals asserted whole, their limits at the limit and one past (issue 33: tests with teeth;
`make mutation MODULE=qformats/formats/gptq/checks.py`).

Every expected value is worked by hand from spec/gptq.md (the shapes table of GPTQ-2.2, the act-order worked example
of GPTQ-5.3, the group-size rule of GPTQ-5.2) or is a property; none comes from the code under test.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from qformats.formats.gptq import checks
from whole_error import refusal, whole

# GPTQ-5.3 worked example: K = 8, gs = 3, G = 3 (last group 2 rows); its act-order g_idx and the trivial one.
ACT_ORDER = np.array([1, 0, 2, 0, 1, 1, 2, 0], np.int32)
TRIVIAL = np.array([0, 0, 0, 1, 1, 1, 2, 2], np.int32)


def layer(k=64, n=16, groups=2, bits=4, **extra):
    """A layer's tensors of the GPTQ-2.2 shapes: qweight (K*b/32, N), qzeros (G, N*b/32), scales (G, N)."""
    t = {"qweight": np.zeros((k * bits // 32, n), np.int32), "qzeros": np.zeros((groups, n * bits // 32), np.int32),
         "scales": np.ones((groups, n), np.float16)}
    return t | extra


# -- layer_dims (GPTQ-2.1, 2.2) --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["qweight", "qzeros"])
def test_a_missing_packed_tensor_is_named(name):
    """GPTQ-2.1: qweight, qzeros and scales MUST be present."""
    t = layer()
    del t[name]
    assert whole(lambda: checks.layer_dims(t, 4)) == refusal("tensor.missing", name, "present in the layer", "absent")


@pytest.mark.parametrize("name", ["qweight", "qzeros"])
def test_a_one_dimensional_packed_tensor_is_named(name):
    """GPTQ-2.2: qweight and qzeros are two-dimensional."""
    t = layer()
    t[name] = t[name].reshape(-1)
    assert whole(lambda: checks.layer_dims(t, 4)) == refusal("tensor.shape", name, "two-dimensional", (t[name].size,))


@pytest.mark.parametrize(("name", "shape"), [("qweight", (0, 16)), ("qzeros", (2, 0))])
def test_an_empty_packed_tensor_is_named(name, shape):
    """GPTQ-2.2: K, N and G are at least 1."""
    t = layer() | {name: np.zeros(shape, np.int32)}
    assert whole(lambda: checks.layer_dims(t, 4)) == refusal(
        "tensor.shape", name, "non-empty (a layer has K, N and G of at least 1)", shape)


def test_empty_qzeros_beside_a_one_row_qweight_is_named():
    """GPTQ-2.2: the empty tensor is named, also when the other has a dimension of 1."""
    t = layer(k=8, groups=1) | {"qzeros": np.zeros((1, 0), np.int32)}
    assert whole(lambda: checks.layer_dims(t, 4)) == refusal(
        "tensor.shape", "qzeros", "non-empty (a layer has K, N and G of at least 1)", (1, 0))


@pytest.mark.parametrize(("name", "dtype"), [("qweight", np.uint32), ("qzeros", np.int64)])
def test_a_packed_tensor_of_another_dtype_is_named(name, dtype):
    """GPTQ-2.1: qweight and qzeros are int32."""
    t = layer()
    t[name] = t[name].astype(dtype)
    assert whole(lambda: checks.layer_dims(t, 4)) == refusal("tensor.dtype", name, "int32", np.dtype(dtype).name)


def test_layer_dims_reads_a_short_last_group_off_g_idx():
    """GPTQ-5.2: K = 40 in G = 2 groups with the trivial g_idx of gs 32 (32 + 8 rows) is gs 32, not 40/2 = 20."""
    t = layer(k=40, g_idx=np.array([0] * 32 + [1] * 8, np.int32))
    assert checks.layer_dims(t, 4) == checks.LayerDims(40, 16, 2, 32)


def test_three_bit_qweight_rows_must_give_a_whole_k():
    """GPTQ-2.2: qweight has K*3/32 rows; 1 row would be K = 32/3."""
    t = layer(k=32, bits=3, groups=1) | {"qweight": np.zeros((1, 16), np.int32)}
    assert whole(lambda: checks.layer_dims(t, 3)) == refusal(
        "tensor.shape", "qweight", "(K * 3 / 32, N) for an integer K", (1, 16))


def test_three_bit_qweight_of_three_rows_is_k_32():
    """GPTQ-2.2: 3 rows of 3-bit words hold K = 3*32/3 = 32 rows, here one group of 32."""
    t = layer(k=32, bits=3, groups=1, n=32)
    assert checks.layer_dims(t, 3, 32) == checks.LayerDims(32, 32, 1, 32)


def test_qzeros_rows_must_be_ceil_k_over_group_size():
    """GPTQ-2.2: with K = 64 and gs = 32, qzeros holds ceil(64 / 32) = 2 rows, not 3."""
    t = layer(groups=3)
    assert whole(lambda: checks.layer_dims(t, 4, 32)) == refusal(
        "tensor.shape", "qzeros", "2 rows (ceil(K=64 / group_size=32))", 3)


def test_layer_dims_reads_an_object_with_attributes():
    """GPTQ-2.1: a layer may be an object with the tensors as attributes; K=64, N=16, G=2, gs inferred 32."""
    assert checks.layer_dims(SimpleNamespace(**layer()), 4) == checks.LayerDims(64, 16, 2, 32)


# -- infer_group_size (GPTQ-5.2, 5.5) --------------------------------------------------------------------------------


def test_one_group_is_group_size_minus_one():
    """GPTQ-5.5: G = 1 is gs = -1."""
    assert checks.infer_group_size(None, 64, 1) == -1


def test_a_short_last_group_is_read_off_g_idx():
    """GPTQ-5.2: K = 8 with the act-order g_idx of GPTQ-5.3: the largest group holds 3 rows, so gs = 3, not 8/3."""
    assert checks.infer_group_size(ACT_ORDER, 8, 3) == 3


def test_without_g_idx_the_group_size_is_ceil_k_over_g():
    """GPTQ-5.2: with no g_idx, K = 8 in G = 3 groups reads as ceil(8 / 3) = 3; K = 160 in 2 as 80."""
    assert (checks.infer_group_size(None, 8, 3), checks.infer_group_size(None, 160, 2)) == (3, 80)


def test_an_inconsistent_g_idx_falls_back_to_ceil_k_over_g():
    """GPTQ-5.2: a largest group of 4 (the GPTQ-5.3 counter-example) gives ceil(8/4) = 2 != 3 groups: ceil(8/3) = 3."""
    assert checks.infer_group_size(np.array([0, 0, 0, 0, 1, 1, 2, 2], np.int32), 8, 3) == 3


def test_a_consistent_largest_group_is_the_group_size():
    """GPTQ-5.2: K = 8, G = 2 with a largest group of 7 (ceil(8/7) = 2 groups, consistent): gs 7, not ceil(8/2) = 4."""
    assert checks.infer_group_size(np.array([0] * 7 + [1], np.int32), 8, 2) == 7


def test_infer_reads_an_int64_g_idx():
    """GPTQ-2.1: a reader MAY accept an int64 g_idx holding the same values."""
    assert checks.infer_group_size(ACT_ORDER.astype(np.int64), 8, 3) == 3


def test_infer_refuses_a_g_idx_of_another_length():
    """GPTQ-2.2: g_idx is (K,)."""
    assert whole(lambda: checks.infer_group_size(ACT_ORDER[:7], 8, 3)) == refusal(
        "tensor.shape", "g_idx", "of shape (8,)", (7,))


def test_infer_refuses_an_out_of_range_g_idx():
    """GPTQ-5.1: g_idx is checked against [0, G) before it is counted."""
    g_idx = ACT_ORDER.copy()
    g_idx[4] = 3
    assert whole(lambda: checks.infer_group_size(g_idx, 8, 3)) == refusal(
        "gptq.g_idx.range", "g_idx", "in [0, 3) for 3 groups", "3 at [4]")


def test_infer_refuses_a_float_g_idx():
    """GPTQ-2.1: g_idx is int32 (int64 accepted)."""
    assert whole(lambda: checks.infer_group_size(ACT_ORDER.astype(np.float32), 8, 3)) == refusal(
        "tensor.dtype", "g_idx", "int32 or int64", "float32")


# -- checked_tensors (GPTQ-2.1, 2.2, 3.5) ----------------------------------------------------------------------------


def test_out_features_must_fill_whole_qzeros_words():
    """GPTQ-2.2: qzeros is (G, N*b/32): N = 4 at 4 bits is half a word; N must be a multiple of 8."""
    t = layer(n=8) | {"qweight": np.zeros((8, 4), np.int32), "qzeros": np.zeros((2, 1), np.int32),
                      "scales": np.ones((2, 4), np.float16)}
    assert whole(lambda: checks.checked_tensors(t, 4)) == refusal(
        "bits.length", "out_features", "a multiple of 8 for 4-bit qzeros", 4)


def test_three_bit_out_features_must_be_a_multiple_of_32():
    """GPTQ-2.2: at 3 bits N*3/32 is whole only for N a multiple of 32; N = 16 is refused."""
    t = layer(k=32, bits=3, groups=1, n=16) | {"qzeros": np.zeros((1, 2), np.int32)}
    assert whole(lambda: checks.checked_tensors(t, 3)) == refusal(
        "bits.length", "out_features", "a multiple of 32 for 3-bit qzeros", 16)


def test_missing_scales_are_named():
    """GPTQ-2.1: scales MUST be present."""
    t = layer()
    del t["scales"]
    assert whole(lambda: checks.checked_tensors(t, 4)) == refusal("tensor.missing", "scales", "present in the layer",
                                                                   "absent")


def test_qzeros_of_another_width_is_refused():
    """GPTQ-2.2: qzeros is (G, N*b/32) = (2, 2) for N = 16 at 4 bits."""
    t = layer() | {"qzeros": np.zeros((2, 3), np.int32)}
    assert whole(lambda: checks.checked_tensors(t, 4)) == refusal("tensor.shape", "qzeros", "of shape (2, 2)", (2, 3))


def test_qweight_of_another_dtype_is_refused():
    """GPTQ-2.1: qweight is int32."""
    t = layer() | {"qweight": np.zeros((8, 16), np.uint32)}
    assert whole(lambda: checks.checked_tensors(t, 4)) == refusal("tensor.dtype", "qweight", "int32", "uint32")


def test_scales_of_another_shape_are_refused():
    """GPTQ-2.2: scales is (G, N) = (2, 16)."""
    t = layer() | {"scales": np.ones((2, 15), np.float16)}
    assert whole(lambda: checks.checked_tensors(t, 4)) == refusal("tensor.shape", "scales", "of shape (2, 16)", (2, 15))


def test_scales_of_another_dtype_are_refused():
    """GPTQ-2.1: scales is float16 (an AutoGPTQ bfloat16 or float32 export does not conform)."""
    t = layer() | {"scales": np.ones((2, 16), np.float32)}
    assert whole(lambda: checks.checked_tensors(t, 4)) == refusal("tensor.dtype", "scales", "float16", "float32")


def test_nonfinite_scales_are_gptq_scales_nonfinite():
    """GPTQ-3.5: scales are finite; the first non-finite one is named."""
    t = layer()
    t["scales"][1, 3] = np.inf
    assert whole(lambda: checks.checked_tensors(t, 4)) == refusal(
        "gptq.scales.nonfinite", "scales", "finite float16", "inf at [1, 3]")


def test_a_missing_g_idx_is_the_trivial_one():
    """GPTQ-2.1, 5.3: a layer without g_idx reads as g_idx[k] = k // gs (K = 64, gs = 32)."""
    dims, t = checks.checked_tensors(layer(), 4)
    assert dims == checks.LayerDims(64, 16, 2, 32)
    assert t["g_idx"].tolist() == [0] * 32 + [1] * 32 and sorted(t) == ["g_idx", "qweight", "qzeros", "scales"]


def test_a_given_g_idx_is_kept():
    """GPTQ-5: a stored g_idx is used as stored (here groups reversed, a valid act-order one)."""
    g_idx = np.array([1] * 32 + [0] * 32, np.int32)
    _, t = checks.checked_tensors(layer(g_idx=g_idx), 4, 32)
    assert t["g_idx"].tolist() == g_idx.tolist()


def test_an_int64_g_idx_is_read():
    """GPTQ-2.1: a reader MAY accept an int64 g_idx holding the same values."""
    g_idx = np.array([0] * 32 + [1] * 32, np.int64)
    _, t = checks.checked_tensors(layer(g_idx=g_idx), 4, 32)
    assert t["g_idx"].tolist() == g_idx.tolist()


def test_a_float_g_idx_is_refused():
    """GPTQ-2.1: g_idx is int32 (int64 accepted)."""
    g_idx = np.zeros(64, np.float32)
    assert whole(lambda: checks.checked_tensors(layer(g_idx=g_idx), 4, 32)) == refusal(
        "tensor.dtype", "g_idx", "int32 or int64", "float32")


def test_an_out_of_range_g_idx_is_refused():
    """GPTQ-5.1: g_idx[k] < G; 2 with G = 2 is one past."""
    g_idx = np.array([0] * 32 + [1] * 31 + [2], np.int32)
    assert whole(lambda: checks.checked_tensors(layer(g_idx=g_idx), 4, 32)) == refusal(
        "gptq.g_idx.range", "g_idx", "in [0, 2) for 2 groups", "2 at [63]")


def test_a_g_idx_of_another_length_is_refused():
    """GPTQ-2.2: g_idx is (K,)."""
    assert whole(lambda: checks.checked_tensors(layer(g_idx=np.zeros(63, np.int32)), 4, 32)) == refusal(
        "tensor.shape", "g_idx", "of shape (64,)", (63,))


def test_bias_is_checked_and_kept():
    """GPTQ-2.1, 2.2: an optional bias is float16 (N,) and kept."""
    bias = np.arange(16, dtype=np.float16)
    _, t = checks.checked_tensors(layer(bias=bias), 4)
    assert t["bias"].tolist() == bias.tolist()


def test_bias_of_another_shape_is_refused():
    """GPTQ-2.2: bias is (N,)."""
    assert whole(lambda: checks.checked_tensors(layer(bias=np.zeros(15, np.float16)), 4)) == refusal(
        "tensor.shape", "bias", "of shape (16,)", (15,))


def test_nonfinite_bias_is_refused():
    """GPTQ-3.6 (QF-2.4): the bias is finite."""
    bias = np.zeros(16, np.float16)
    bias[5] = np.nan
    assert whole(lambda: checks.checked_tensors(layer(bias=bias), 4)) == refusal(
        "tensor.nonfinite", "bias", "finite float16", "NaN at [5]")


# -- check_codes, check_zeros, _check_range (GPTQ-3.1, 3.3) ----------------------------------------------------------


def test_float_codes_are_refused():
    """GPTQ-3.1: codes are integers."""
    assert whole(lambda: checks.check_codes(np.zeros((2, 2)), 4)) == refusal(
        "tensor.dtype", "codes", "an integer array (in_features, out_features)", "float64")


@pytest.mark.parametrize("shape", [(4,), (0, 4), (4, 0)])
def test_codes_are_a_non_empty_matrix(shape):
    """GPTQ-3.1: codes are (in_features, out_features), neither empty."""
    assert whole(lambda: checks.check_codes(np.zeros(shape, np.int32), 4)) == refusal(
        "tensor.shape", "codes", "non-empty (in_features, out_features)", shape)


@pytest.mark.parametrize(("check", "name"), [(checks.check_codes, "codes"), (checks.check_zeros, "zeros")])
def test_ragged_codes_or_zeros_are_refused_by_name(check, name):
    """QF-2: a value that is no array is refused by its name."""
    assert whole(lambda: check([[0], [0, 1]], 4)) == refusal("tensor.dtype", name, "an array", "list")


def test_code_sixteen_is_refused_at_four_bits_at_its_first_position():
    """GPTQ-3.1: codes lie in [0, 2^b - 1]; 16 is one past 15, and the first bad position is named."""
    codes = np.zeros((3, 4), np.int32)
    codes[1, 2] = codes[2, 0] = 16
    assert whole(lambda: checks.check_codes(codes, 4)) == refusal(
        "gptq.codes.range", "codes", "in [0, 15] for 4-bit", "16 at [1, 2]")


def test_negative_code_is_refused():
    """GPTQ-3.1: codes lie in [0, 2^b - 1]; -1 is one below."""
    codes = np.zeros((3, 4), np.int32)
    codes[0, 3] = -1
    assert whole(lambda: checks.check_codes(codes, 2)) == refusal(
        "gptq.codes.range", "codes", "in [0, 3] for 2-bit", "-1 at [0, 3]")


def test_codes_at_the_limits_are_accepted():
    """GPTQ-3.1: 0 and 2^b - 1 are codes (8 bits: 255)."""
    codes = np.array([[0, 255]], np.int32)
    assert checks.check_codes(codes, 8).tolist() == [[0, 255]]


def test_float_zeros_are_refused():
    """GPTQ-3.3: zero points are integers."""
    assert whole(lambda: checks.check_zeros(np.zeros((1, 2)), 4)) == refusal(
        "tensor.dtype", "zeros", "an integer array", "float64")


def test_one_dimensional_zeros_are_refused():
    """GPTQ-3.3: zero points are (groups, out_features)."""
    assert whole(lambda: checks.check_zeros(np.zeros(4, np.int32), 4)) == refusal(
        "tensor.shape", "zeros", "of shape (groups, out_features)", (4,))


def test_zeros_of_another_shape_are_refused():
    """GPTQ-3.3: zero points have the shape asked for."""
    assert whole(lambda: checks.check_zeros(np.zeros((2, 3), np.int32), 4, (2, 4))) == refusal(
        "tensor.shape", "zeros", "of shape (2, 4)", (2, 3))


def test_zero_point_past_the_width_is_refused():
    """GPTQ-3.3: zero points lie in [0, 2^b - 1]; 8 is one past 7 at 3 bits."""
    zeros = np.array([[7, 8]], np.int64)
    assert whole(lambda: checks.check_zeros(zeros, 3, (1, 2))) == refusal(
        "gptq.zero.range", "zeros", "in [0, 7] for 3-bit", "8 at [0, 1]")


# -- check_qzeros (GPTQ-2.1, 2.2) ------------------------------------------------------------------------------------


def test_qzeros_of_another_dtype_is_refused():
    """GPTQ-2.1: qzeros is int32."""
    assert whole(lambda: checks.check_qzeros(np.zeros((1, 2), np.int64), 4)) == refusal(
        "tensor.dtype", "qzeros", "int32", "int64")


@pytest.mark.parametrize(("shape", "bits"), [((4,), 4), ((0, 2), 4), ((1, 0), 4), ((1, 1), 3)])
def test_qzeros_must_be_a_non_empty_matrix_of_whole_fields(shape, bits):
    """GPTQ-2.2: qzeros is (G, N*b/32) with G, N >= 1; at 3 bits a single word holds no whole number of fields."""
    assert whole(lambda: checks.check_qzeros(np.zeros(shape, np.int32), bits)) == refusal(
        "tensor.shape", "qzeros", "non-empty (G, N * bits / 32)", shape)


def test_three_bit_qzeros_of_three_words_are_32_fields():
    """GPTQ-2.2: 3 words of 3-bit fields hold N = 32 (the limit of whole fields)."""
    assert checks.check_qzeros(np.zeros((1, 3), np.int32), 3, 32).shape == (1, 3)


def test_qzeros_width_must_match_out_features():
    """GPTQ-2.2: N = 12 at 4 bits needs 1.5 words: no qzeros fits."""
    assert whole(lambda: checks.check_qzeros(np.zeros((1, 2), np.int32), 4, 12)) == refusal(
        "tensor.shape", "qzeros", "non-empty (G, 1.5)", (1, 2))


# -- g_idx (GPTQ-5) --------------------------------------------------------------------------------------------------


def test_trivial_g_idx_is_int32():
    """GPTQ-2.1, 5.3: g_idx is int32, k // gs."""
    g = checks.trivial_g_idx(8, 3)
    assert (g.dtype, g.tolist()) == (np.int32, TRIVIAL.tolist())


def test_the_worked_act_order_g_idx_is_valid_and_not_trivial():
    """GPTQ-5.2, 5.3: the worked example's g_idx holds 3, 3, 2 rows."""
    checks.check_g_idx(ACT_ORDER, 3, 3)
    assert (checks.is_trivial_g_idx(ACT_ORDER, 3), checks.is_trivial_g_idx(TRIVIAL, 3)) == (False, True)


def test_the_worked_counter_example_violates_group_sizes():
    """GPTQ-5.3: [0, 0, 0, 0, 1, 1, 2, 2] violates GPTQ-5.2 (group 0 holds 4 rows)."""
    assert whole(lambda: checks.check_g_idx(np.array([0, 0, 0, 0, 1, 1, 2, 2]), 3, 3)) == refusal(
        "gptq.g_idx.group_sizes", "g_idx", "3 rows in group 0", "4 rows")


def test_a_full_last_group_where_a_short_one_belongs_is_refused():
    """GPTQ-5.2: with K = 8, gs = 3 the last group holds 8 - 3*2 = 2 rows; 3 there (group 1 short) is refused."""
    assert whole(lambda: checks.check_g_idx(np.array([0, 0, 0, 1, 1, 2, 2, 2]), 3, 3)) == refusal(
        "gptq.g_idx.group_sizes", "g_idx", "3 rows in group 1", "2 rows")


def test_an_empty_last_group_is_refused_where_a_middle_one_overflows():
    """GPTQ-5.2: K = 8, gs = 3 with rows 3..7 all in group 1 (none in group 2): group 1 holds 5, not 3."""
    assert whole(lambda: checks.check_g_idx(np.array([0, 0, 0, 1, 1, 1, 1, 1]), 3, 3)) == refusal(
        "gptq.g_idx.group_sizes", "g_idx", "3 rows in group 1", "5 rows")


def test_the_worked_counter_example_violates_the_range():
    """GPTQ-5.3: [1, 0, 3, 0, 1, 1, 2, 0] violates GPTQ-5.1 (3 is not below G = 3)."""
    assert whole(lambda: checks.check_g_idx(np.array([1, 0, 3, 0, 1, 1, 2, 0]), 3, 3)) == refusal(
        "gptq.g_idx.range", "g_idx", "in [0, 3) for 3 groups", "3 at [2]")


def test_a_negative_g_idx_is_out_of_range():
    """GPTQ-5.1: 0 <= g_idx[k]; -1 is one below."""
    assert whole(lambda: checks.check_g_idx_range(np.array([0, -1, 0]), 1)) == refusal(
        "gptq.g_idx.range", "g_idx", "in [0, 1) for 1 groups", "-1 at [1]")


def test_group_size_minus_one_is_one_group_of_k_rows():
    """GPTQ-5.5: gs = -1 is one group; g_idx all zeros is valid and trivial."""
    checks.check_g_idx(np.zeros(8, np.int32), 1, -1)
    assert checks.is_trivial_g_idx(np.zeros(8, np.int32), -1)


def test_act_order_without_desc_act_is_one_warning_counting_rows():
    """GPTQ-5.4: [1, 1, 1, 0, 0, 0, 2, 2] (groups 0 and 1 swapped) differs from k // 3 in rows 0..5: six of eight."""
    (f,) = checks.g_idx_findings(np.array([1, 1, 1, 0, 0, 0, 2, 2], np.int32), 3, desc_act=False)
    assert (f.code, f.severity, f.clause, f.tensor, f.message) == (
        "gptq.g_idx.ignored_without_desc_act", "warning", "GPTQ-5.4", "g_idx",
        "g_idx is not k // group_size in 6 rows but desc_act is false: vLLM ignores it, GPTQModel honours it")


@pytest.mark.parametrize(("g_idx", "desc_act"), [(ACT_ORDER, None), (ACT_ORDER, True), (TRIVIAL, False)])
def test_no_warning_without_the_conflict(g_idx, desc_act):
    """GPTQ-5.4: no config (None), desc_act true, or a trivial g_idx say nothing."""
    assert checks.g_idx_findings(g_idx, 3, desc_act=desc_act) == []
