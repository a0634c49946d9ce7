"""The FP8 codec's grids, cells, refusals and roundings asserted whole, limits at the limit and one past (issue 33:
tests with teeth; `make mutation MODULE=qformats/formats/fp8/codec.py`).

Every expected value is worked by hand from spec/fp8.md and spec/float_elements.md FE-2 (E4M3FN: bias 7, 3 mantissa
bits; 0x38 = 1, 0x3C = 1.5, 0x40 = 2, 0x7E = 448, 0x01 = 2^-9, 0xB8 = -1, 0x7F NaN) or is a property (the cell of
(r, c) looked up one weight at a time); none comes from the code under test.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats.fp8 import codec
from whole_error import refusal, whole

ONE, ONE_HALF, TWO, MAX, TINY, MINUS_ONE, NAN = 0x38, 0x3C, 0x40, 0x7E, 0x01, 0xB8, 0x7F


def codes(*rows):
    return np.array(rows, np.uint8)


def cell_by_cell(values, scale, cell):
    """FP8-5.1 one weight at a time: ``values[r, c] * scale[cell(r, c)]`` in float64 (exact for these values)."""
    n, k = values.shape
    return np.array([[values[r, c] * float(scale[cell(r, c)]) for c in range(k)] for r in range(n)])


# -- grid (FP8-1.2, FP8-1.3) ------------------------------------------------------------------------


def test_tensor_grid_is_one_scale():
    """FP8-1.2: strategy tensor, scale shape (1,)."""
    assert codec.grid(3, 5, "tensor") == (1,)


def test_channel_grid_is_one_scale_a_row():
    """FP8-1.2: strategy channel, scale shape (N, 1)."""
    assert codec.grid(3, 5, "channel") == (3, 1)


@pytest.mark.parametrize(("n", "k", "block", "want"), [
    ((128), (256), (128, 128), (1, 2)),        # at the limit: the sides fill their blocks
    ((129), (257), (128, 128), (2, 3)),        # one past: a ragged last row and column of blocks
    ((5), (7), (2, 3), (3, 3)),                # rows and columns ceil'd with different block sides
])
def test_block_grid_is_the_ceil_grid(n, k, block, want):
    """FP8-1.2 / FP8-1.3: block [bn, bk] has scale shape (ceil(N / bn), ceil(K / bk))."""
    assert codec.grid(n, k, "block", block=block) == want


def test_block_grid_without_a_block_is_one_block():
    """FP8-1.2: with no block size given, the whole weight is one cell."""
    assert codec.grid(130, 200, "block") == (1, 1)


@pytest.mark.parametrize(("k", "group_size", "want"), [(96, 32, (4, 3)), (32, 32, (4, 1)), (33, 32, None),
                                                       (31, 32, None), (96, None, None)])
def test_group_grid_needs_a_group_size_that_divides_k(k, group_size, want):
    """FP8-1.2: group g has scale shape (N, K / g), "g divides K"; no grid otherwise."""
    assert codec.grid(4, k, "group", group_size=group_size) == want


@pytest.mark.parametrize(("strategy", "kw"), [("block", {"block": (2, 3)}), ("group", {"group_size": 4})])
def test_grid_sides_are_integers(strategy, kw):
    """FP8-1.2: a scale shape is counted in whole scales (a shape of floats is no shape)."""
    assert all(type(side) is int for side in codec.grid(5, 8, strategy, **kw))


# -- expand: the cell of every weight (FP8-1.2, FP8-1.3) ----------------------------------------------


def test_expand_gives_every_weight_the_one_tensor_scale():
    """FP8-1.2: tensor, one scale covers "all of it"; the scale of every weight as float64."""
    got = codec.expand(np.array([0.5], np.float32), 2, 3, "tensor")
    assert (got.shape, got.dtype, got.tolist()) == ((2, 3), np.float64, [[0.5] * 3] * 2)


def test_expand_never_spreads_several_values_as_the_tensor_scale():
    """FP8-1.2: tensor, one scale for "all of it": three values for a (2, 3) weight are no tensor scale, and are
    never broadcast along the columns as if they were one scale a column."""
    with pytest.raises(ValueError):
        codec.expand(np.array([1.0, 2.0, 3.0], np.float32), 2, 3, "tensor")


def test_expand_gives_each_row_its_channel_scale():
    """FP8-1.2: channel, a scale covers "one row"."""
    got = codec.expand(np.array([[1.0], [2.0], [4.0]], np.float32), 3, 2, "channel")
    assert (got.dtype, got.tolist()) == (np.float64, [[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]])


def test_expand_crops_the_last_block_row_and_column():
    """FP8-1.3: the last block row (column) covers the N mod bn rows (K mod bk columns) left."""
    s = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], np.float32)     # grid of 5 x 7, block (2, 3)
    got = codec.expand(s, 5, 7, "block", block=(2, 3))
    want = [[float(s[r // 2, c // 3]) for c in range(7)] for r in range(5)]
    assert (got.shape, got.dtype, got.tolist()) == ((5, 7), np.float64, want)


def test_expand_of_a_block_strategy_without_a_block_is_one_cell():
    """FP8-1.2: no block size given, the whole weight is one block."""
    assert codec.expand(np.array([[3.0]], np.float32), 2, 3, "block").tolist() == [[3.0] * 3] * 2


def test_expand_gives_each_group_its_columns():
    """FP8-1.2: group g, a scale covers "g consecutive columns of one row"."""
    s = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    got = codec.expand(s, 2, 6, "group", group_size=3)
    assert (got.dtype, got.tolist()) == (np.float64, [[1.0, 1.0, 1.0, 2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 4.0, 4.0, 4.0]])


# -- stored_shape and as_grid: ModelOpt's stored scales (FP8-3.2) ----------------------------------------


@pytest.mark.parametrize(("layout", "strategy", "want", "stored"), [
    ("modelopt", "channel", (6, 1), (6,)),
    ("modelopt", "block", (2, 3), (2, 1, 3, 1)),
    ("modelopt", "tensor", (1,), (1,)),
    ("modelopt", "group", None, None),
    ("ct", "channel", (6, 1), (6, 1)),
    ("ct", "block", (2, 3), (2, 3)),
    ("deepseek", "block", (2, 3), (2, 3)),
])
def test_stored_shape_is_modelopt_s_own_only_under_modelopt(layout, strategy, want, stored):
    """FP8-3.2: ModelOpt stores a channel scale (N,) and a block scale (ceil(N/128), 1, ceil(K/128), 1); the other
    layouts store the grid of FP8-1.2 itself."""
    assert codec.stored_shape(layout, strategy, want) == stored


def test_as_grid_reads_modelopt_s_channel_scale_per_row():
    """FP8-3.2: "a reader must take it per row": (N,) becomes (N, 1)."""
    got = codec.as_grid(np.array([1.0, 2.0, 3.0], np.float32), "modelopt", "channel", 3, 4)
    assert (got.shape, got.ravel().tolist()) == ((3, 1), [1.0, 2.0, 3.0])


def test_as_grid_reads_modelopt_s_4d_block_scale_as_the_grid():
    """FP8-3.2: (ceil(N/128), 1, ceil(K/128), 1) holds the ceil grid of FP8-1.3."""
    stored = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 1, 3, 1)
    got = codec.as_grid(stored, "modelopt", "block", 200, 300, block=(128, 128))
    assert got.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_as_grid_leaves_a_shape_modelopt_does_not_write_as_it_is():
    """FP8-3.2: "the stored shapes above are the only ones a ModelOpt module may have": a channel scale (1, N)
    is left for the checks to refuse, never reshaped into (N, 1)."""
    wrong = np.array([[1.0, 2.0, 3.0]], np.float32)
    assert codec.as_grid(wrong, "modelopt", "channel", 3, 4).shape == (1, 3)


def test_as_grid_leaves_other_layouts_as_stored():
    """FP8-1.2: compressed-tensors stores the grid itself; a (2, 3) block scale for a (3, 6) weight with block
    (1, 2) is three rows short, and stays so for the checks."""
    s = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    assert codec.as_grid(s, "ct", "block", 3, 6, block=(1, 2)).shape == (2, 3)


# -- modelopt_reading (FP8-3.3) ----------------------------------------------------------------------


def test_modelopt_reading_rounds_the_scale_to_bfloat16_first():
    """FP8-3.3: "the scale is first rounded to bfloat16 and the product then rounded to bfloat16". By hand:
    s = 1 + 2^-8 + 2^-20 rounds to 1 + 2^-7; 1.5 * (1 + 2^-7) = 1.5 + 3 * 2^-8 is a tie between 1.5 + 2^-7 and
    1.5 + 2^-6 and goes to the even one, 1.515625 (FP8-5.1's value rounded once would be 1.5078125)."""
    s = np.float32(1 + 2.0 ** -8 + 2.0 ** -20)
    got = codec.modelopt_reading(codes([ONE_HALF, ONE]), np.array([s]), "tensor")
    assert (got.dtype, got.tolist()) == (np.float32, [[1.515625, 1.0078125]])


def test_modelopt_reading_takes_the_float32_scale_not_a_wider_one():
    """FP8-3.2 / FP8-3.3: ModelOpt's weight_scale is float32; a float64 grid is read as that float32 scale first.
    By hand: 1 + 2^-8 + 2^-30 is float32 1 + 2^-8, a tie in bfloat16 that goes to even, 1.0; read unrounded it
    would go up to 1 + 2^-7."""
    got = codec.modelopt_reading(codes([ONE]), np.array([1 + 2.0 ** -8 + 2.0 ** -30]), "tensor")
    assert got.tolist() == [[1.0]]


def test_modelopt_reading_puts_each_block_scale_on_its_block():
    """FP8-3.3 over FP8-1.3's ceil grid: a (3, 3) weight in (2, 2) blocks, scales 1, 2, 4, 8 (bfloat16 values)."""
    got = codec.modelopt_reading(np.full((3, 3), ONE, np.uint8), np.array([[1.0, 2.0], [4.0, 8.0]], np.float32),
                                 "block", block=(2, 2))
    assert got.tolist() == [[1.0, 1.0, 2.0], [1.0, 1.0, 2.0], [4.0, 4.0, 8.0]]


def test_modelopt_reading_of_a_nan_byte_is_nan_without_a_warning():
    """FP8-3.3: ModelOpt's own dequantize multiplies NaN like any value; an inf scale times 0 is NaN too."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = codec.modelopt_reading(codes([NAN, 0x00]), np.array([np.inf], np.float32), "tensor")
    assert np.isnan(got).tolist() == [[True, True]]


# -- bf16_to_f32 ----------------------------------------------------------------------------------------


def test_bfloat16_bits_widen_to_their_float32_values():
    """FP8-1.2: a BF16 scale is the top half of a float32: 0x3F80 = 1, 0xC000 = -2, 0x3E80 = 0.25, 0x7F80 = inf."""
    got = codec.bf16_to_f32(np.array([0x3F80, 0xC000, 0x3E80, 0x7F80], np.uint16))
    assert (got.dtype, got.tolist()) == (np.float32, [1.0, -2.0, 0.25, np.inf])


# -- dequantize: the value (FP8-5.1) ---------------------------------------------------------------------


def test_tensor_decode_multiplies_every_byte_by_the_scale():
    """FP8-5.1: W = e4m3(weight) * s; FE-2 values 1, 1.5, 2, 448, 2^-9, -1 times 0.5."""
    layer = {"weight": codes([ONE, ONE_HALF, TWO], [MAX, TINY, MINUS_ONE]), "weight_scale": np.array([0.5], np.float32)}
    got = codec.dequantize(layer, strategy="tensor")
    assert (got.dtype, got.tolist()) == (np.float32, [[0.5, 0.75, 1.0], [224.0, 2.0 ** -10, -0.5]])


def test_a_weight_refusal_cites_the_fp8_clause_of_the_weight_s_shape():
    """FP8-1.2: "Every FP8 module holds weight, safetensors dtype F8_E4M3, shape (N, K)": the shape refusal cites
    FP8-1.2, not the generic clause of tensor.shape."""
    layer = {"weight": np.zeros(3, np.uint8), "weight_scale": np.ones(1, np.float32)}
    with pytest.raises(QFormatsError) as info:
        codec.dequantize(layer, strategy="tensor")
    assert (info.value.code, info.value.clause) == ("tensor.shape", "FP8-1.2")


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_a_tensor_scale_may_be_stored_in_any_one_element_shape(shape):
    """FP8-1.2: tensor scale shape "(1,), () or (1, 1)"."""
    layer = {"weight": codes([TWO, ONE]), "weight_scale": np.full(shape, 3.0, np.float32)}
    assert codec.dequantize(layer, strategy="tensor").tolist() == [[6.0, 3.0]]


def test_channel_decode_takes_each_row_s_scale():
    """FP8-5.1 / FP8-1.2: channel, "one row" per scale."""
    layer = {"weight": codes([ONE, TWO], [ONE, TWO]), "weight_scale": np.array([[0.25], [8.0]], np.float32)}
    assert codec.dequantize(layer, strategy="channel").tolist() == [[0.25, 0.5], [8.0, 16.0]]


def test_block_decode_uses_the_cropped_ceil_grid():
    """FP8-5.1 over FP8-1.3: a (5, 7) weight in (2, 3) blocks has a 3 x 3 grid; weight (r, c) takes scale
    [r // 2, c // 3]."""
    rng = np.random.default_rng(7)
    weight = rng.choice(np.array([ONE, ONE_HALF, TWO, MAX, TINY, MINUS_ONE], np.uint8), (5, 7))
    scale = np.ldexp(1.0, np.arange(9) - 4).reshape(3, 3).astype(np.float32)
    values = np.select([weight == b for b in (ONE, ONE_HALF, TWO, MAX, TINY, MINUS_ONE)],
                       [1.0, 1.5, 2.0, 448.0, 2.0 ** -9, -1.0])
    got = codec.dequantize({"weight": weight, "weight_scale": scale}, strategy="block", block=(2, 3))
    assert np.array_equal(got, cell_by_cell(values, scale, lambda r, c: (r // 2, c // 3)))


def test_group_decode_takes_each_group_of_columns_its_scale():
    """FP8-5.1 / FP8-1.2: group g, "g consecutive columns of one row"."""
    layer = {"weight": codes([ONE, ONE, TWO, TWO], [ONE, ONE, ONE, ONE]),
             "weight_scale": np.array([[1.0, 4.0], [0.5, 16.0]], np.float32)}
    got = codec.dequantize(layer, strategy="group", group_size=2)
    assert got.tolist() == [[1.0, 1.0, 8.0, 8.0], [0.5, 0.5, 16.0, 16.0]]


def test_decode_reads_the_scale_the_scale_name_names():
    """FP8-2.1: the fp8 layout's scale is weight_scale_inv, multiplied despite its name."""
    layer = {"weight": codes([TWO]), "weight_scale_inv": np.array([[0.25]], np.float32)}
    got = codec.dequantize(layer, strategy="block", block=(128, 128), scale_name="weight_scale_inv")
    assert got.tolist() == [[0.5]]


def test_a_float32_scale_s_product_is_rounded_once_to_float32():
    """FP8-5.1: "with a float32 scale it is rounded once to float32". By hand: 1.5 * (1 + 2^-23) = 1.5 + 1.5 * 2^-23,
    a tie between 1.5 + 2^-23 and 1.5 + 2^-22 that goes to the even one, 1.5 + 2^-22."""
    layer = {"weight": codes([ONE_HALF]), "weight_scale": np.array([1 + 2.0 ** -23], np.float32)}
    assert codec.dequantize(layer, strategy="tensor").tolist() == [[1.5 + 2.0 ** -22]]


def test_a_wider_scale_is_read_as_float32_first():
    """FP8-1.2 / FP8-5.1: a scale is F32, BF16 or F16, so the decode reads a float64 scale as float32 before the
    product. By hand: 1 + 2^-24 + 2^-40 is float32 1 + 2^-23, and 1.5 times that rounds to 1.5 + 2^-22; the
    unrounded product 1.5 + 0.75 * 2^-23 + .. would round to 1.5 + 2^-23."""
    layer = {"weight": codes([ONE_HALF]), "weight_scale": np.array([1 + 2.0 ** -24 + 2.0 ** -40])}
    assert codec.dequantize(layer, strategy="tensor").tolist() == [[1.5 + 2.0 ** -22]]


def test_a_16_bit_scale_s_product_is_exact():
    """FP8-5.1: "the product of an E4M3 value and a float16/bfloat16 scale is exact in float32": 448 * (1 + 2^-10)."""
    layer = {"weight": codes([MAX]), "weight_scale": np.array([[1 + 2.0 ** -10]], np.float16)}
    assert codec.dequantize(layer, strategy="channel").tolist() == [[448.0 + 448.0 * 2.0 ** -10]]


def test_nan_bytes_and_bad_scales_decode_silently():
    """FP8-5.1 / FP8-6.4: values are not checked: a NaN byte is NaN, 0 times an inf scale is NaN, and a product
    past float32's range is inf, all without a warning (every real reader decodes them silently)."""
    layer = {"weight": codes([NAN, 0x00], [MAX, ONE]), "weight_scale": np.array([[np.inf], [3e38]], np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = codec.dequantize(layer, strategy="channel")
    assert np.isnan(got).tolist() == [[True, True], [False, False]]
    assert got[1].tolist() == [np.inf, float(np.float32(3e38))]


# -- dequantize: refusals (FP8-1.2, FP8-6.1, FP8-6.2, FP8-6.3) ---------------------------------------------


def test_a_layer_without_weight_is_refused():
    """FP8-6.1: "A module holding an FP8 scale holds weight"."""
    assert whole(lambda: codec.dequantize({"weight_scale_inv": np.ones((1, 1), np.float32)}, strategy="block",
                                          scale_name="weight_scale_inv")) == refusal(
        "fp8.weight.missing", "weight", "present beside weight_scale_inv", "absent")


def test_a_weight_of_rank_three_is_refused():
    """FP8-1.2: the weight is (N, K)."""
    layer = {"weight": np.zeros((1, 2, 3), np.uint8), "weight_scale": np.ones(1, np.float32)}
    assert whole(lambda: codec.dequantize(layer, strategy="tensor")) == refusal(
        "tensor.shape", "weight", "uint8 E4M3FN bytes (out, in)", "uint8 (1, 2, 3)")


def test_a_weight_of_int8_bytes_is_refused():
    """FP8-1.2 / FP8-6.1: the weight is E4M3FN bytes (uint8 here), not int8."""
    layer = {"weight": np.zeros((2, 3), np.int8), "weight_scale": np.ones(1, np.float32)}
    assert whole(lambda: codec.dequantize(layer, strategy="tensor")) == refusal(
        "tensor.shape", "weight", "uint8 E4M3FN bytes (out, in)", "int8 (2, 3)")


def test_a_weight_without_its_scale_is_refused():
    """FP8-6.2: "An FP8 weight without its scale tensor is an error"."""
    assert whole(lambda: codec.dequantize({"weight": codes([ONE])}, strategy="tensor", scale_name="weight_scale_inv")
                 ) == refusal("fp8.scale.missing", "weight_scale_inv", "present beside an FP8 weight", "absent")


def test_a_block_grid_one_row_short_is_refused():
    """FP8-6.3: "A block grid with too few rows is an error": (5, 7) in (2, 3) blocks needs (3, 3)."""
    layer = {"weight": np.full((5, 7), ONE, np.uint8), "weight_scale": np.ones((2, 3), np.float32)}
    assert whole(lambda: codec.dequantize(layer, strategy="block", block=(2, 3))) == refusal(
        "fp8.scale.shape", "weight_scale", "shape (3, 3) for weight (5, 7), strategy block", (2, 3))


def test_a_channel_scale_stored_across_is_refused():
    """FP8-1.2: channel scale shape (N, 1); (1, N) is not it."""
    layer = {"weight": codes([ONE, ONE], [ONE, ONE]), "weight_scale": np.ones((1, 2), np.float32)}
    assert whole(lambda: codec.dequantize(layer, strategy="channel")) == refusal(
        "fp8.scale.shape", "weight_scale", "shape (2, 1) for weight (2, 2), strategy channel", (1, 2))


def test_a_group_size_that_does_not_divide_k_is_refused():
    """FP8-1.2: group g needs "g divides K": K = 5 with g = 2 has no grid."""
    layer = {"weight": np.full((2, 5), ONE, np.uint8), "weight_scale": np.ones((2, 2), np.float32)}
    assert whole(lambda: codec.dequantize(layer, strategy="group", group_size=2)) == refusal(
        "fp8.scale.shape", "weight_scale", "shape None for weight (2, 5), strategy group", (2, 2))


@pytest.mark.parametrize(("shape", "strategy"), [((1, 1, 1), "tensor"), ((2,), "tensor"), ((1,), "channel")])
def test_one_scale_only_in_the_shapes_its_strategy_allows(shape, strategy):
    """FP8-1.2: a tensor scale is "(1,), () or (1, 1)" (rank 2 at most, one element); a one-row weight's channel
    scale is (1, 1), never (1,)."""
    layer = {"weight": codes([ONE, ONE]), "weight_scale": np.ones(shape, np.float32)}
    want = {"tensor": (1,), "channel": (1, 1)}[strategy]
    assert whole(lambda: codec.dequantize(layer, strategy=strategy)) == refusal(
        "fp8.scale.shape", "weight_scale", f"shape {want} for weight (1, 2), strategy {strategy}", shape)
