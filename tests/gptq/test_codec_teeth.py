"""The GPTQ codec's refusals asserted whole, its limits at the limit and one past, and the parameters it must not
ignore (issue 33: tests with teeth; `make mutation MODULE=qformats/formats/gptq/codec.py`).

Every expected value is worked by hand from spec/gptq.md (the words of the GPTQ-4.1 and GPTQ-7 worked examples, the
GPTQ-9 quantizer steps, float16's largest finite value 65504) or is a property; none comes from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import gptq
from whole_error import refusal, whole

F16_MAX = 65504.0   # largest finite float16; 65520, halfway to 2^16, rounds to even: to inf


def words(*rows):
    """qzeros rows of uint32 words as the stored int32 tensor."""
    return np.array(rows, np.uint32).view(np.int32)


def hand_layer(qzeros, k, n, *, g_idx=None, bias=None):
    """A 4-bit layer of all-zero codes, unit scales and the given qzeros words."""
    t = {"qweight": np.zeros((k * 4 // 32, n), np.int32), "qzeros": qzeros,
         "scales": np.ones((qzeros.shape[0], n), np.float16)}
    if g_idx is not None:
        t["g_idx"] = np.asarray(g_idx, np.int32)
    if bias is not None:
        t["bias"] = bias
    return t


def pack_args(rng_seed=0, k=64, n=64, groups=2):
    rng = np.random.default_rng(rng_seed)
    codes = rng.integers(0, 16, (k, n))
    zeros = rng.integers(1, 15, (groups, n))
    scales = np.full((groups, n), 0.25, np.float16)
    return codes, zeros, scales


# -- pack (GPTQ-2, GPTQ-3) -----------------------------------------------------------------------


def test_v1_writer_refusal_names_zeros_position_and_count():
    """GPTQ-3.4: "a v1 writer refuses a zero point of 0 (use v2 instead)"."""
    codes, zeros, scales = pack_args()
    zeros[1, 2] = zeros[1, 9] = 0
    assert whole(lambda: gptq.pack(codes, zeros, scales, bits=4, version="v1")) == refusal(
        "gptq.zero.v1_unrepresentable", "zeros", "in [1, 2^b - 1] for a v1 writer: zero 0 has no v1 field",
        "0 at [1, 2] (2 zero points are 0; use version='v2')")


def test_pack_refuses_zeros_with_other_groups_than_group_size_gives():
    """GPTQ-2.2: qzeros (and so the zero points) have ceil(K / gs) rows."""
    codes, zeros, scales = pack_args(groups=3)
    assert whole(lambda: gptq.pack(codes, zeros, scales, bits=4, group_size=32)) == refusal(
        "tensor.shape", "zeros", "of shape (2, 64) (groups, out_features)", (3, 64))


def test_pack_refuses_a_float_g_idx():
    """GPTQ-2.1: g_idx is int32 (int64 accepted on input)."""
    codes, zeros, scales = pack_args()
    g_idx = (np.arange(64) // 32).astype(np.float32)
    assert whole(lambda: gptq.pack(codes, zeros, scales, bits=4, group_size=32, g_idx=g_idx)) == refusal(
        "tensor.dtype", "g_idx", "int32 or int64", "float32")


def test_pack_refuses_a_g_idx_one_row_short():
    """GPTQ-2.2: g_idx has K entries."""
    codes, zeros, scales = pack_args()
    g_idx = (np.arange(63) // 32).astype(np.int32)
    assert whole(lambda: gptq.pack(codes, zeros, scales, bits=4, group_size=32, g_idx=g_idx)) == refusal(
        "tensor.shape", "g_idx", "of shape (64,)", (63,))


def test_pack_accepts_an_int64_g_idx_and_stores_int32():
    """GPTQ-2.1: the stored g_idx is int32 whatever integer width it came in."""
    codes, zeros, scales = pack_args()
    layer = gptq.pack(codes, zeros, scales, bits=4, group_size=32, g_idx=np.arange(64, dtype=np.int64) // 32)
    assert layer.g_idx.dtype == np.int32 and layer.g_idx.tolist() == [0] * 32 + [1] * 32


def test_pack_stores_the_bias_it_is_given():
    """GPTQ-3.6: the bias of output n is stored as float16 beside the layer."""
    codes, zeros, scales = pack_args()
    bias = np.arange(64, dtype=np.float16) / 4
    layer = gptq.pack(codes, zeros, scales, bits=4, bias=bias)
    assert layer.bias.dtype == np.float16 and layer.bias.tolist() == [i / 4 for i in range(64)]


def test_a_layer_without_bias_reads_bias_as_none():
    """GPTQ-2.1: bias is present "only if the Linear has a bias"."""
    codes, zeros, scales = pack_args()
    layer = gptq.pack(codes, zeros, scales, bits=4)
    assert "bias" not in layer and layer.bias is None


@pytest.mark.parametrize(("bias", "expected"), [
    pytest.param(np.zeros(64, np.float32), refusal("tensor.dtype", "bias", "float16", "float32"), id="float32"),
    pytest.param(np.zeros(63, np.float16), refusal("tensor.shape", "bias", "of shape (64,)", (63,)), id="63-of-64"),
])
def test_pack_refuses_a_bad_bias(bias, expected):
    """GPTQ-3.6: bias is float16 of shape (out_features,)."""
    codes, zeros, scales = pack_args()
    assert whole(lambda: gptq.pack(codes, zeros, scales, bits=4, bias=bias)) == expected


def test_pack_records_bits_version_and_group_size():
    """GPTQ-2: bits, version and group_size travel with the tensors."""
    codes, zeros, scales = pack_args()
    layer = gptq.pack(codes % 8, zeros % 7 + 1, scales, bits=3, version="v2", group_size=32)
    assert (layer.bits, layer.version, layer.group_size) == (3, "v2", 32)


def test_pack_refuses_a_quirk_writer_for_v2():
    """GPTQ-4.1: the emulated writers write v1 qzeros only."""
    codes, zeros, scales = pack_args()
    assert whole(lambda: gptq.pack(codes, zeros, scales, bits=4, version="v2", writer="masked")) == refusal(
        "argument.invalid", "writer", "None for v2 (the quirk writers emulate v1 qzeros)", "masked")


# -- unpack and dequantize (GPTQ-3.2, GPTQ-3.4, GPTQ-5) ----------------------------------------------


def test_spec_reader_refusal_counts_all_ones_fields_and_names_the_first():
    """GPTQ-3.4: "a conforming reader MUST reject a v1 layer containing" an all-ones field."""
    codes, zeros, scales = pack_args()
    zeros[1, 2] = zeros[0, 5] = 15             # v2 fields of 15 are all ones when read as v1
    layer = gptq.pack(codes, zeros, scales, bits=4, version="v2")
    assert whole(lambda: gptq.dequantize(layer, bits=4, version="v1")) == refusal(
        "gptq.zero.v1_unrepresentable", "qzeros", "free of all-ones v1 fields (15): zero 0 is not representable in v1",
        "2 such fields, first at [0, 5]; choose a real-tool reader to emulate it")


SHORT_LAST = {"k": 160, "n": 32, "gs": 128}   # GPTQ-3.2 worked example: G = 2, the last group 32 rows


def short_last_group_mapping():
    """The GPTQ-3.2 short-last-group example as a mapping without g_idx: codes 9, zeros 8 and 3, scales 0.5, 0.25."""
    k, n = SHORT_LAST["k"], SHORT_LAST["n"]
    return {"qweight": np.full((k * 4 // 32, n), 0x99999999, np.uint32).view(np.int32),
            "qzeros": words([0x77777777] * 4, [0x22222222] * 4),             # v1 fields Z - 1
            "scales": np.array([[0.5] * n, [0.25] * n], np.float16)}


def test_dequantize_honours_group_size_for_a_short_last_group_without_g_idx():
    """GPTQ-3.2 worked example: "W[n, 0:128] = 0.5 * (9 - 8) = 0.5 and W[n, 128:160] = 0.25 * (9 - 3) = 1.5"."""
    w = gptq.dequantize(short_last_group_mapping(), bits=4, version="v1", group_size=128)
    assert w.shape == (32, 160) and (w[:, :128] == 0.5).all() and (w[:, 128:] == 1.5).all()


def test_unpack_honours_group_size():
    """GPTQ-2.2: a group_size whose ceil(K / gs) is not the qzeros rows is refused, not replaced by a guess."""
    mapping = short_last_group_mapping()
    assert whole(lambda: gptq.unpack(mapping, bits=4, version="v1", group_size=64)) == refusal(
        "tensor.shape", "qzeros", "3 rows (ceil(K=160 / group_size=64))", 2)


def test_dequantize_a_short_last_group_of_uneven_size():
    """GPTQ-3.2, GPTQ-5.2: K = 40, gs = 14 gives groups of 14, 14 and 12 rows, each row scaled by its own group."""
    k, n = 40, 8
    codes = np.arange(k * n).reshape(k, n) % 16
    zeros = np.array([[1] * n, [4] * n, [9] * n])
    scales = np.array([[0.5] * n, [0.25] * n, [2.0] * n], np.float16)
    w = gptq.dequantize(gptq.pack(codes, zeros, scales, bits=4, group_size=14), bits=4, version="v1", group_size=14)
    group = np.arange(k) // 14
    expected = (scales.astype(np.float64)[group] * (codes - zeros[group])).T   # GPTQ-3.2 written out
    np.testing.assert_array_equal(w, expected.astype(np.float32))


# -- convert (GPTQ-7) ------------------------------------------------------------------------------


def hand_decode_layer():
    """The GPTQ-3.2 hand-decode layer: K = N = 32, gs = 16, qzeros rows 0x76543210 and 0x77777777."""
    t = hand_layer(words([0x76543210] * 4, [0x77777777] * 4), 32, 32)
    t["qweight"] = np.full((4, 32), 0x9C3A5F07, np.uint32).view(np.int32)
    return t


def test_convert_defaults_to_v2():
    """GPTQ-7.1 worked example: row 0 0x76543210 "becomes 0x87654321", row 1 0x77777777 "becomes 0x88888888"."""
    out = gptq.convert(hand_decode_layer(), bits=4)
    assert out.qzeros.view(np.uint32).tolist() == [[0x87654321] * 4, [0x88888888] * 4]
    assert (out.bits, out.version, out.group_size) == (4, "v2", 16)


def test_convert_leaves_every_other_tensor_unchanged():
    """GPTQ-7: "conversion rewrites qzeros only; qweight, scales, g_idx and bias are unchanged"."""
    t = hand_decode_layer()
    t["bias"] = np.arange(32, dtype=np.float16)
    out = gptq.convert(t, bits=4, to="v2")
    for name in ("qweight", "scales", "bias"):
        np.testing.assert_array_equal(getattr(out, name), t[name])
    assert out.g_idx.tolist() == [0] * 16 + [1] * 16


def test_convert_refuses_an_unknown_target():
    """GPTQ-1: the versions are 'v1' and 'v2'."""
    assert whole(lambda: gptq.convert(hand_decode_layer(), bits=4, to="v3")) == refusal(
        "argument.invalid", "to", "'v1' or 'v2'", "v3")


def test_v2_to_v1_refusal_counts_the_zero_points_of_zero():
    """GPTQ-7.2 worked example: the row of four words 0x1f900350 "has 12 zero points of 0 and is refused"."""
    t = hand_layer(words([0x1F900350] * 4), 8, 32)
    assert whole(lambda: gptq.convert(t, bits=4, to="v1")) == refusal(
        "gptq.zero.v2_not_representable_in_v1", "qzeros", "free of zero points 0 to convert to v1",
        "12 zero points of 0, first at [0, 0]")


def test_convert_honours_group_size_for_a_short_last_group_without_g_idx():
    """GPTQ-5.3: the filled-in trivial g_idx is k // group_size of the group size given (rows 128..159 in group 1)."""
    out = gptq.convert(short_last_group_mapping(), bits=4, to="v2", group_size=128)
    assert out.g_idx.tolist() == [0] * 128 + [1] * 32 and out.group_size == 128


# -- convert as a real reader reads (GPTQ-4.2, GPTQ-7) -------------------------------------------


@pytest.mark.parametrize(("word", "reader"), [
    pytest.param(0x0E7EF23F, "gptqmodel", id="gptqmodel-word-by-gptqmodel"),
    pytest.param(0x0E8FF24F, "autogptq_cuda_old", id="masked-word-by-cuda-old"),
])
def test_convert_as_read_stores_the_zero_points_the_reader_recovers(word, reader):
    """GPTQ-4.1 worked example: both readers recover "0, 5, 3, 0, 0, 9, 15, 1", whose v2 word is 0x1f900350."""
    t = hand_layer(words([word]), 8, 8, bias=np.arange(8, dtype=np.float16))
    out = gptq.convert(t, bits=4, reader=reader)
    assert out.qzeros.view(np.uint32).tolist() == [[0x1F900350]]
    assert (out.bits, out.version, out.group_size) == (4, "v2", -1)
    for name in ("qweight", "scales", "g_idx", "bias"):
        np.testing.assert_array_equal(getattr(out, name), t.get(name, np.zeros(8, np.int32)))


@pytest.mark.parametrize(("word", "reader", "actual"), [
    pytest.param(0x0E8FF24F, "autogptq_cuda", "3 outside, first 16 at [0, 0]", id="masked-word-by-cuda"),
    pytest.param(0x0E7EF23F, "vllm_gptq_gemm", "2 outside, first 16 at [0, 0]", id="gptqmodel-word-by-vllm"),
])
def test_convert_as_read_refuses_zero_points_one_past_the_field(word, reader, actual):
    """GPTQ-4.1 worked example: "f + 1, no wrap" reads 16 where a field is all ones; a 4-bit v2 field holds 0..15."""
    assert whole(lambda: gptq.convert(hand_layer(words([word]), 8, 8), bits=4, reader=reader)) == refusal(
        "gptq.quirk.unsupported", "qzeros", f"zero points in [0, 15] as {reader} reads them, to store them as v2", actual)


def test_convert_as_read_refusal_names_the_first_bad_group():
    """GPTQ-4.2: the first out-of-range zero point is reported by position, here in the second group."""
    t = hand_layer(words([0x76543210], [0x0E8FF24F]), 16, 8, g_idx=[0] * 8 + [1] * 8)
    assert whole(lambda: gptq.convert(t, bits=4, reader="autogptq_cuda")) == refusal(
        "gptq.quirk.unsupported", "qzeros", "zero points in [0, 15] as autogptq_cuda reads them, to store them as v2",
        "3 outside, first 16 at [1, 0]")


def test_convert_as_read_refuses_a_target_of_v1():
    """GPTQ-7: a reader's zero points (0 included) are stored exactly only in v2."""
    assert whole(lambda: gptq.convert(hand_layer(words([0x0E7EF23F]), 8, 8), bits=4, to="v1", reader="gptqmodel")) == \
        refusal("argument.invalid", "reader",
                "given only to convert v1 to v2 (the zero points a reader uses are stored exactly only in v2)", "gptqmodel")


INTERLEAVED = [0, 1] * 8   # K = 16, gs = 8: two groups of 8 rows, not k // 8


def test_convert_as_read_refuses_a_g_idx_the_reader_ignores():
    """GPTQ-4.2: autogptq_cuda_old "assumes k // gs", so its reading of a non-trivial g_idx is not this layer's."""
    t = hand_layer(words([0x76543210], [0x76543210]), 16, 8, g_idx=INTERLEAVED)
    assert whole(lambda: gptq.convert(t, bits=4, reader="autogptq_cuda_old")) == refusal(
        "gptq.quirk.unsupported", "g_idx", "the k // group_size layout that autogptq_cuda_old assumes (it ignores g_idx)",
        "a non-trivial g_idx")


def test_convert_as_read_accepts_the_trivial_g_idx_a_reader_assumes():
    """GPTQ-4.2: autogptq_cuda_old assumes g = k // gs (gs = 8 here, two groups) and reads fields 0..7 as 1..8."""
    t = hand_layer(words([0x76543210], [0x76543210]), 16, 8, g_idx=[0] * 8 + [1] * 8)
    out = gptq.convert(t, bits=4, reader="autogptq_cuda_old")
    assert out.qzeros.view(np.uint32).tolist() == [[0x87654321], [0x87654321]]


def test_convert_as_read_keeps_a_g_idx_the_reader_honours():
    """GPTQ-4.2, GPTQ-7.1: autogptq_cuda honours g_idx and reads fields 0..7 as 1..8, the v2 word 0x87654321."""
    t = hand_layer(words([0x76543210], [0x76543210]), 16, 8, g_idx=INTERLEAVED)
    out = gptq.convert(t, bits=4, reader="autogptq_cuda")
    assert out.g_idx.tolist() == INTERLEAVED and out.group_size == 8
    assert out.qzeros.view(np.uint32).tolist() == [[0x87654321], [0x87654321]]


# -- quantize (GPTQ-9) -----------------------------------------------------------------------------


@pytest.mark.parametrize(("weight", "expected"), [
    pytest.param(np.ones((8, 64), np.int64), refusal("tensor.dtype", "weight", "a two-dimensional float array (out, in)",
                                                      "int64[8, 64]"), id="int"),
    pytest.param(np.ones(64, np.float32), refusal("tensor.dtype", "weight", "a two-dimensional float array (out, in)",
                                                   "float32[64]"), id="1d-float"),
    pytest.param(np.ones((0, 64), np.float32), refusal("tensor.shape", "weight", "non-empty (out, in)", (0, 64)),
                 id="no-rows"),
    pytest.param([[1.0], [1.0, 2.0]], refusal("tensor.dtype", "weight", "an array", "list"), id="ragged"),
])
def test_quantize_refuses_a_weight_that_is_no_float_matrix(weight, expected):
    """GPTQ-9: the quantizer takes a (out, in) float weight."""
    assert whole(lambda: gptq.quantize(weight, bits=4, group_size=32, sym=True)) == expected


def test_quantize_refuses_a_nonfinite_weight():
    """QF-2.4: no NaN or infinity, the first one named by position."""
    w = np.ones((4, 64), np.float32)
    w[1, 2] = np.nan
    assert whole(lambda: gptq.quantize(w, bits=4, group_size=32, sym=True)) == refusal(
        "tensor.nonfinite", "weight", "finite float32", "NaN at [1, 2]")


def test_quantize_takes_a_single_row_past_the_emptiness_check():
    """GPTQ-2.4: one output row is non-empty but not a whole qzeros word at 4 bits (N a multiple of 8)."""
    w = np.linspace(-1, 1, 64, dtype=np.float32)[None, :]
    with pytest.raises(QFormatsError) as info:
        gptq.quantize(w, bits=4, group_size=32, sym=True)
    e = info.value   # the tensor is named 'axis' by qformats.bits.pack (reported in issue 33's notes)
    assert (e.code, e.constraint, e.actual) == (
        "bits.length", "a length whose 4-bit fields fill whole 32-bit words (a multiple of 8)", 1)


def test_quantize_accepts_eight_rows():
    """GPTQ-2.4: eight output rows fill one 4-bit qzeros word."""
    w = np.linspace(-1, 1, 8 * 64, dtype=np.float32).reshape(8, 64)
    assert gptq.quantize(w, bits=4, group_size=32, sym=True).qzeros.shape == (2, 1)


def test_quantize_works_in_float32():
    """GPTQ-9 "in float32": 2.5 + 1e-12 is 2.5 in float32, a tie that rounds to even: code 2 + zero 5 = 7, not 8."""
    w = np.zeros((8, 32), np.float64)
    w[0, :3] = [-5.0, 10.0, 2.5 + 1e-12]          # xmin -5, xmax 10: scale 15 / 15 = 1, zero round(5 / 1) = 5
    layer = gptq.quantize(w, bits=4, group_size=32, sym=False, version="v2")
    codes, zeros = gptq.unpack(layer, bits=4, version="v2")
    assert float(layer.scales[0, 0]) == 1.0 and int(zeros[0, 0]) == 5
    assert codes[:3, 0].tolist() == [0, 15, 7]


def test_symmetric_range_mirrors_the_larger_magnitude():
    """GPTQ-9 step 2: weights -1 .. 3 give xmax = 3, xmin = -3, scale float16(6 / 15) = 0.39990234375, zero 8."""
    w = np.zeros((8, 32), np.float32)
    w[0, :2] = [-1.0, 3.0]
    layer = gptq.quantize(w, bits=4, group_size=32, sym=True, version="v2")
    assert float(layer.scales[0, 0]) == 0.39990234375
    assert gptq.unpack(layer, bits=4, version="v2")[1].tolist() == [[8] * 8]


@pytest.mark.parametrize("group_size", [64, 128], ids=lambda g: f"gs{g}")
def test_quantize_keeps_the_group_size_of_a_single_group(group_size):
    """GPTQ-2, GPTQ-5.5: K = 64 makes one group for gs 64 or 128, and the layer still says the gs it was given."""
    w = np.linspace(-1, 1, 8 * 64, dtype=np.float32).reshape(8, 64)
    assert gptq.quantize(w, bits=4, group_size=group_size, sym=True).group_size == group_size


@pytest.mark.filterwarnings("error")
def test_a_scale_that_underflows_float16_decodes_to_zero_without_warnings():
    """GPTQ-3.5, GPTQ-9: range 1e-9 gives scale 6.7e-11, float16 0; codes sit at the zero point and decode to 0."""
    w = np.zeros((8, 32), np.float32)
    w[1, :3] = [1e-9, 5e-10, 0.25e-9]              # sym: xmin stays 0, xmax 1e-9
    w[0, :3] = [-1.5, 0.0, 1.5]                    # a normal row beside it: xmax 1.5, scale 3 / 15 -> 0.199951171875
    layer = gptq.quantize(w, bits=4, group_size=32, sym=True)
    assert layer.scales[0, :2].tolist() == [0.199951171875, 0.0]
    codes, _ = gptq.unpack(layer, bits=4, version="v1")
    assert codes[:, 1].tolist() == [8] * 32
    assert (gptq.dequantize(layer, bits=4, version="v1")[1] == 0).all()


@pytest.mark.filterwarnings("error")
def test_largest_finite_float16_scale_is_kept():
    """GPTQ-3.5 at the limit: xmax 65504 * 15 gives the scale 65504, the largest finite float16."""
    w = np.zeros((8, 32), np.float32)
    w[1, 0] = F16_MAX * 15
    layer = gptq.quantize(w, bits=4, group_size=32, sym=False, version="v2")
    assert float(layer.scales[0, 1]) == F16_MAX


@pytest.mark.filterwarnings("error")
def test_a_scale_one_past_float16_is_refused_without_warnings():
    """GPTQ-3.5 one past the limit: scale 65520 rounds to float16 inf, refused as a non-finite scale."""
    w = np.zeros((8, 32), np.float32)
    w[1, 0] = 65520.0 * 15
    assert whole(lambda: gptq.quantize(w, bits=4, group_size=32, sym=False, version="v2")) == refusal(
        "gptq.scales.nonfinite", "scales", "finite float16", "inf at [1, 0]")


# -- act-order (GPTQ-5.3) ----------------------------------------------------------------------------


W32 = np.linspace(-2, 2, 8 * 32, dtype=np.float32).reshape(8, 32)


def test_act_order_false_is_no_act_order():
    """GPTQ-5.3: without act-order g_idx is trivial, k // gs."""
    layer = gptq.quantize(W32, bits=4, group_size=8, sym=True, act_order=False)
    assert layer.g_idx.tolist() == [k // 8 for k in range(32)]


def test_act_order_ties_go_by_column_index():
    """GPTQ-5.3: importance k % 2 ranks the 16 odd columns first, each tie in column order, then the even ones."""
    layer = gptq.quantize(W32, bits=4, group_size=4, sym=True, act_order=np.arange(32) % 2)
    expected = [j // 4 if k % 2 else 4 + j // 4 for k in range(32) for j in [k // 2]]   # rank // gs, by hand
    assert layer.g_idx.tolist() == expected


@pytest.mark.parametrize(("act_order", "expected"), [
    pytest.param(True, refusal("argument.invalid", "act_order", "a numeric importance vector of shape (32,)", "bool[]"),
                 id="True"),
    pytest.param(np.ones(32, bool), refusal("argument.invalid", "act_order",
                                            "a numeric importance vector of shape (32,)", "bool[32]"), id="bool-vector"),
    pytest.param(np.ones(31), refusal("argument.invalid", "act_order", "a numeric importance vector of shape (32,)",
                                      "float64[31]"), id="one-short"),
    pytest.param([[1.0], [1.0, 2.0]], refusal("tensor.dtype", "act_order", "an array", "list"), id="ragged"),
    pytest.param(np.where(np.arange(32) == 3, np.nan, 1.0), refusal("tensor.nonfinite", "act_order", "finite float64",
                                                                    "NaN at [3]"), id="NaN"),
])
def test_act_order_refuses_what_is_no_importance_vector(act_order, expected):
    """GPTQ-5.3: act-order takes one finite numeric importance per input column."""
    assert whole(lambda: gptq.quantize(W32, bits=4, group_size=8, sym=True, act_order=act_order)) == expected
