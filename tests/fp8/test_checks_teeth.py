"""The FP8 checks' findings asserted whole (code, severity, clause, tensor, message, count), each limit at the limit
and one past (issue 33: tests with teeth; `make mutation MODULE=qformats/formats/fp8/checks.py`).

Expected grids are worked by hand from spec/fp8.md (FP8-1.2's shapes, FP8-1.3's ceil grids, FP8-3.2's ModelOpt
shapes); E4M3FN NaN bytes 0x7F / 0xFF from spec/float_elements.md FE-2; clauses as spec/fp8.md places each code.
None comes from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.findings import Finding
from qformats.formats.fp8 import checks
from qformats.formats.fp8.layout import ModuleScheme

M = "model.layers.0.mlp.down_proj"
CT_TENSOR = ModuleScheme(layout="ct", strategy="tensor", scale="weight_scale")
CT_CHANNEL = ModuleScheme(layout="ct", strategy="channel", scale="weight_scale")
CT_BLOCK = ModuleScheme(layout="ct", strategy="block", scale="weight_scale", block=(2, 3))
CT_GROUP = ModuleScheme(layout="ct", strategy="group", scale="weight_scale", group_size=4)
DS_BLOCK = ModuleScheme(layout="deepseek", strategy="block", scale="weight_scale_inv", block=(128, 128))
DS_TENSOR = ModuleScheme(layout="deepseek", strategy="tensor", scale="weight_scale_inv")
MO_CHANNEL = ModuleScheme(layout="modelopt", strategy="channel", scale="weight_scale")
MO_BLOCK = ModuleScheme(layout="modelopt", strategy="block", scale="weight_scale", block=(128, 128))


def error(code, clause, tensor, message, count=None):
    return Finding(code=code, severity="error", clause=clause, tensor=tensor, message=message, count=count)


def warning(code, clause, tensor, message):
    return Finding(code=code, severity="warning", clause=clause, tensor=tensor, message=message)


def structure(weight=("F8_E4M3", (5, 7)), scale=("F32", (3, 3)), scheme=CT_BLOCK):
    """structure() of one module: ``weight`` / ``scale`` as (dtype, shape), None for an absent tensor."""
    dtypes, shapes = {}, {}
    for key, entry in (("weight", weight), (scheme.scale, scale)):
        if entry is not None:
            dtypes[key], shapes[key] = entry[0], tuple(entry[1])
    return checks.structure(M, dtypes, shapes, scheme)


def shape_error(want, got, tail, note="", tensor=f"{M}.weight_scale"):
    return [error("fp8.scale.shape", "FP8-6.3", tensor,
                  f"'{tensor}' must be {want} for weight {tail} (got {got}){note}")]


# -- structure: the weight (FP8-6.1) ------------------------------------------------------------------


def test_a_scale_without_its_weight_is_named():
    """FP8-6.1: "A module holding an FP8 scale holds weight"."""
    assert structure(weight=None, scheme=DS_BLOCK, scale=("F32", (1, 1))) == [error(
        "fp8.weight.missing", "FP8-6.1", f"{M}.weight", f"'{M}' holds weight_scale_inv but no weight")]


@pytest.mark.parametrize(("dtype", "shape"), [("F8_E5M2", (5, 7)), ("U8", (5, 7)), ("F8_E4M3", (5, 7, 1)),
                                              ("F8_E4M3", (35,))])
def test_a_weight_not_e4m3_of_rank_two_is_named(dtype, shape):
    """FP8-6.1: the weight is "F8_E4M3 of rank 2"."""
    assert structure(weight=(dtype, shape)) == [error(
        "fp8.weight.dtype", "FP8-6.1", f"{M}.weight",
        f"'{M}.weight' must be F8_E4M3 (out, in) (got {dtype} {list(shape)})")]


# -- structure: the scale is present, of a float dtype (FP8-6.2, FP8-6.3, FP8-2.2) -------------------------


def test_a_weight_without_its_scale_is_named_with_the_silent_read():
    """FP8-6.2: "An FP8 weight without its scale tensor is an error"; readers "decode the bare E4M3 values, up
    to 448" (NVIDIA/TensorRT-Model-Connect#1115)."""
    assert structure(scale=None, scheme=DS_BLOCK) == [error(
        "fp8.scale.missing", "FP8-6.2", f"{M}.weight_scale_inv",
        f"'{M}.weight' is FP8 but '{M}.weight_scale_inv' is absent: a reader that goes on decodes the bare E4M3 "
        "values, up to 448 (NVIDIA/TensorRT-Model-Connect#1115)")]


@pytest.mark.parametrize("dtype", ["F32", "BF16", "F16"])
def test_each_float_scale_dtype_is_accepted(dtype):
    """FP8-6.3: "The scale's dtype is F32, BF16 or F16"."""
    assert structure(scale=(dtype, (3, 3))) == []


def test_a_ue8m0_scale_is_accepted_in_the_fp8_layout():
    """FP8-6.3 / FP8-2.2: "or F8_E8M0 in the fp8 layout"."""
    assert structure(weight=("F8_E4M3", (256, 128)), scale=("F8_E8M0", (2, 1)), scheme=DS_BLOCK) == []


def test_a_ue8m0_scale_is_refused_outside_the_fp8_layout():
    """FP8-6.3: F8_E8M0 only "in the fp8 layout" (FP8-2.2); compressed-tensors' scales are F32, BF16 or F16."""
    assert structure(scale=("F8_E8M0", (3, 3))) == [error(
        "fp8.scale.dtype", "FP8-6.3", f"{M}.weight_scale", f"'{M}.weight_scale' must be one of F32, BF16, F16 "
        "(got F8_E8M0)")]


def test_a_float64_scale_is_refused_in_the_fp8_layout_naming_e8m0_too():
    """FP8-6.3: the fp8 layout's scale is F32, BF16, F16 or F8_E8M0; F64 is none of them."""
    assert structure(weight=("F8_E4M3", (256, 128)), scale=("F64", (2, 1)), scheme=DS_BLOCK) == [error(
        "fp8.scale.dtype", "FP8-6.3", f"{M}.weight_scale_inv", f"'{M}.weight_scale_inv' must be one of F32, BF16, "
        "F16, F8_E8M0 (got F64)")]


# -- structure: the scale's shape (FP8-6.3, FP8-1.2, FP8-1.3, FP8-3.2) -------------------------------------


@pytest.mark.parametrize("shape", [(1,), (), (1, 1)])
def test_a_tensor_scale_may_be_any_one_element_shape_of_rank_two_at_most(shape):
    """FP8-1.2: a tensor scale's shape is "(1,), () or (1, 1)"."""
    assert structure(scale=("F32", shape), scheme=CT_TENSOR) == []


@pytest.mark.parametrize("shape", [(1, 1, 1), (2,), (1, 2)])
def test_a_tensor_scale_of_rank_three_or_two_values_is_named(shape):
    """FP8-1.2: one element, rank 2 at most; (1, 1, 1) is one past the rank, (2,) and (1, 2) one past the size."""
    assert structure(scale=("F32", shape), scheme=CT_TENSOR) == shape_error([1], list(shape),
                                                                            "(5, 7), strategy tensor")


def test_a_one_row_channel_scale_is_n_by_one_not_a_tensor_shape():
    """FP8-1.2: channel's shape is (N, 1); for N = 1 that is (1, 1), and (1,) is not it."""
    assert structure(weight=("F8_E4M3", (1, 7)), scale=("F32", (1,)), scheme=CT_CHANNEL) == shape_error(
        [1, 1], [1], "(1, 7), strategy channel")


def test_a_channel_scale_is_one_a_row():
    """FP8-1.2: channel, (N, 1)."""
    assert structure(scale=("F32", (5, 1)), scheme=CT_CHANNEL) == []


def test_a_ragged_block_grid_is_the_ceil_grid():
    """FP8-1.3: (5, 7) in (2, 3) blocks: ceil(5 / 2) = 3 rows and ceil(7 / 3) = 3 columns."""
    assert structure(scale=("F32", (3, 3))) == []


def test_a_block_grid_one_row_short_says_the_rows_are_reused():
    """FP8-6.3: "A block grid with too few rows is an error: compressed-tensors 0.20.0 broadcasts the rows it
    has and decodes without an error"."""
    assert structure(scale=("F32", (2, 3))) == shape_error(
        [3, 3], [2, 3], "(5, 7), strategy block [2, 3] (ceil grid)",
        "; too few rows: compressed-tensors 0.20.0 reuses the rows it has and decodes without an error")


@pytest.mark.parametrize("got", [(3, 2), (4, 3), (3, 4)])
def test_a_block_grid_with_all_its_rows_has_no_rows_note(got):
    """FP8-6.3: only a grid with too few rows is read on silently; a column short or a row or column too many
    is named without the note (at the limit: all three rows there)."""
    assert structure(scale=("F32", got)) == shape_error([3, 3], list(got), "(5, 7), strategy block [2, 3] (ceil grid)")


def test_a_flat_block_scale_has_no_rows_note():
    """FP8-6.3: the rows note is for a grid (2-D) with fewer rows; a flat (2,) scale is only the wrong shape."""
    assert structure(scale=("F32", (2,))) == shape_error([3, 3], [2], "(5, 7), strategy block [2, 3] (ceil grid)")


def test_a_group_scale_names_its_group_size():
    """FP8-1.2: group g has shape (N, K / g): (5, 8) with g = 4 needs (5, 2)."""
    assert structure(weight=("F8_E4M3", (5, 8)), scale=("F32", (5, 4)), scheme=CT_GROUP) == shape_error(
        [5, 2], [5, 4], "(5, 8), strategy group group_size 4")


def test_a_group_size_that_does_not_divide_k_has_no_shape():
    """FP8-1.2: group g needs "g divides K"; K = 7 with g = 4 leaves no shape that fits."""
    assert structure(weight=("F8_E4M3", (5, 7)), scale=("F32", (5, 1)), scheme=CT_GROUP) == shape_error(
        "impossible", [5, 1], "(5, 7), strategy group group_size 4")


def test_a_group_scale_at_its_grid_is_accepted():
    """FP8-1.2: (5, 8) with g = 4, shape (5, 2)."""
    assert structure(weight=("F8_E4M3", (5, 8)), scale=("F32", (5, 2)), scheme=CT_GROUP) == []


def test_modelopt_s_channel_scale_is_n_flat():
    """FP8-3.2: ModelOpt's FP8_PER_CHANNEL_PER_TOKEN stores weight_scale (N,)."""
    assert structure(scale=("F32", (5,)), scheme=MO_CHANNEL) == []


def test_modelopt_s_channel_scale_as_the_grid_is_named():
    """FP8-3.2: "The stored shapes above are the only ones a ModelOpt module may have": (N, 1) is not (N,)."""
    assert structure(scale=("F32", (5, 1)), scheme=MO_CHANNEL) == shape_error([5], [5, 1], "(5, 7), strategy channel")


def test_modelopt_s_block_scale_is_four_dimensional():
    """FP8-3.2: fp8_pb_wo stores (ceil(N/128), 1, ceil(K/128), 1): (200, 300) gives (2, 1, 3, 1)."""
    assert structure(weight=("F8_E4M3", (200, 300)), scale=("F32", (2, 1, 3, 1)), scheme=MO_BLOCK) == []


def test_modelopt_s_block_scale_of_the_wrong_side_is_named():
    """FP8-3.2: "the 4-D grid's sides ceil(N/128), ceil(K/128) must agree with" the 128 block."""
    assert structure(weight=("F8_E4M3", (200, 300)), scale=("F32", (2, 1, 2, 1)), scheme=MO_BLOCK) == shape_error(
        [2, 1, 3, 1], [2, 1, 2, 1], "(200, 300), strategy block [128, 128] (ceil grid)")


# -- scale_fmt (FP8-2.2) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "fmt"), [("F8_E8M0", "ue8m0"), ("F32", "float"), ("BF16", None)])
def test_a_scale_dtype_that_agrees_with_scale_fmt_is_quiet(dtype, fmt):
    """FP8-2.2: ue8m0 scales are F8_E8M0, float (the default) scales a float dtype."""
    assert checks.scale_fmt_findings(M, dtype, DS_BLOCK.model_copy(update={"scale_fmt": fmt})) == []


def fmt_mismatch(dtype, fmt):
    t = f"{M}.weight_scale_inv"
    return [warning("fp8.scale.fmt_mismatch", "FP8-2.2", t, f"'{t}' is {dtype} but the config says scale_fmt "
                    f"'{fmt}'; transformers decodes by the dtype, a reader that trusts scale_fmt reads other scales")]


def test_a_one_byte_scale_under_the_default_float_fmt_is_named():
    """FP8-2.2: "F8_E8M0 under "float"" is fp8.scale.fmt_mismatch, a warning; no scale_fmt means float."""
    assert checks.scale_fmt_findings(M, "F8_E8M0", DS_BLOCK) == fmt_mismatch("F8_E8M0", "float")


def test_a_float_scale_under_ue8m0_is_named():
    """FP8-2.2: "a float dtype under "ue8m0"" is fp8.scale.fmt_mismatch."""
    scheme = DS_TENSOR.model_copy(update={"scale_fmt": "ue8m0"})
    assert checks.scale_fmt_findings(M, "F32", scheme) == fmt_mismatch("F32", "ue8m0")


def test_scale_fmt_is_the_fp8_layout_s_alone():
    """FP8-2.2: scale_fmt is transformers' fp8 config's; another layout's scale is not judged by it."""
    scheme = CT_BLOCK.model_copy(update={"scale_fmt": "ue8m0"})
    assert checks.scale_fmt_findings(M, "F32", scheme) == []


# -- values: scales, NaN bytes, input scales (FP8-6.4 .. 6.6) -------------------------------------------------


def tensors(scale, weight=None, **more):
    w = np.full((2, 3), 0x38, np.uint8) if weight is None else np.asarray(weight, np.uint8)
    return {"weight": w, "weight_scale": np.asarray(scale, np.float32), **more}


def test_good_scales_and_bytes_give_no_finding():
    """FP8-6.4 .. 6.6: finite positive scales, no NaN byte, a finite positive input_scale."""
    assert checks.values(M, tensors([[1.0], [2.0 ** -20]], input_scale=np.float32(0.5)), CT_CHANNEL) == []


@pytest.mark.parametrize(("bad", "shown"), [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")])
def test_a_non_finite_scale_is_named_with_the_first_and_the_count(bad, shown):
    """FP8-6.4: "Every weight scale is finite"; the first non-finite value, where, and how many."""
    s = np.array([[1.0, 2.0, 3.0], [bad, 1.0, bad]])
    assert checks.values(M, tensors(s), CT_BLOCK) == [error(
        "fp8.scale.nonfinite", "FP8-6.4", f"{M}.weight_scale",
        f"'{M}.weight_scale' must be finite (got {shown} at [1, 0], 2 non-finite)", count=2)]


@pytest.mark.parametrize(("bad", "shown"), [(0.0, "0.0"), (-0.0, "-0.0"), (-2.0, "-2.0")])
def test_a_scale_not_positive_is_named_with_the_first_and_the_count(bad, shown):
    """FP8-6.4: "Every weight scale is ... positive": zero, minus zero and negative are not (at the limit: 0)."""
    s = np.array([[1.0, 2.0 ** -149, 3.0], [4.0, bad, -1.0]])
    assert checks.values(M, tensors(s), CT_BLOCK) == [error(
        "fp8.scale.nonpositive", "FP8-6.4", f"{M}.weight_scale",
        f"'{M}.weight_scale' must be positive (got {shown} at [1, 1], 2 not positive)", count=2)]


def test_a_non_finite_scale_is_named_before_a_negative_one():
    """FP8-6.4: one finding a tensor, the non-finite first (a NaN is no sign to judge)."""
    s = np.array([[-1.0], [np.nan]])
    assert [f.code for f in checks.values(M, tensors(s), CT_CHANNEL)] == ["fp8.scale.nonfinite"]


def test_a_scale_is_judged_as_the_float32_the_decode_multiplies_by():
    """FP8-6.4 / FP8-5.1: the decode reads a scale as float32 (F16 and BF16 widen exactly), so the check judges
    that value: a float64 2^-150, a tie between float32's 0 and 2^-149, rounds to even, to 0, which is not
    positive."""
    t = {"weight": np.full((2, 3), 0x38, np.uint8), "weight_scale": np.array([[1.0], [2.0 ** -150]])}
    assert checks.values(M, t, CT_CHANNEL) == [error(
        "fp8.scale.nonpositive", "FP8-6.4", f"{M}.weight_scale",
        f"'{M}.weight_scale' must be positive (got 0.0 at [1, 0], 1 not positive)", count=1)]


@pytest.mark.parametrize("byte", [0x7F, 0xFF])
def test_nan_weight_bytes_are_named_with_the_first_byte_where_and_how_many(byte):
    """FP8-6.5: "No weight byte is an E4M3FN NaN, 0x7F or 0xFF"; 0x7E (448) and 0xFE (-448), one below, are
    values."""
    w = np.array([[0x7E, 0xFE, 0x38], [0x38, byte, 0x7F]])
    assert checks.values(M, tensors([[1.0], [1.0]], weight=w), CT_CHANNEL) == [error(
        "fp8.weight.nan", "FP8-6.5", f"{M}.weight", f"'{M}.weight' holds 2 NaN E4M3FN bytes (first 0x{byte:02X} at "
        "[1, 1]); writers clamp to +-448", count=2)]


@pytest.mark.parametrize(("value", "code", "message"), [
    (np.nan, "fp8.input_scale.nonfinite", "must be finite (got nan at [0], 1 non-finite)"),
    (0.0, "fp8.input_scale.nonpositive", "must be positive (got 0.0 at [0], 1 not positive)")])
def test_a_bad_input_scale_is_named_after_the_weight_s_findings(value, code, message):
    """FP8-6.6: "A module's input_scale ... is finite ... and positive"; FP8-6.4 and 6.5's findings come first."""
    t = tensors([[-1.0], [1.0]], weight=[[0x38, 0xFF, 0x38], [0x38] * 3], input_scale=np.array([value], np.float32))
    assert [(f.code, f.clause, f.tensor, f.message) for f in checks.values(M, t, CT_CHANNEL)] == [
        ("fp8.scale.nonpositive", "FP8-6.4", f"{M}.weight_scale",
         f"'{M}.weight_scale' must be positive (got -1.0 at [0, 0], 1 not positive)"),
        ("fp8.weight.nan", "FP8-6.5", f"{M}.weight",
         f"'{M}.weight' holds 1 NaN E4M3FN bytes (first 0xFF at [0, 1]); writers clamp to +-448"),
        (code, "FP8-6.6", f"{M}.input_scale", f"'{M}.input_scale' {message}")]


def test_the_scale_the_scheme_names_is_the_one_judged():
    """FP8-2.1: the fp8 layout's scale is weight_scale_inv."""
    t = {"weight": np.full((2, 3), 0x38, np.uint8), "weight_scale_inv": np.array([[0.0]], np.float32),
         "weight_scale": np.array([[1.0]], np.float32)}
    assert [f.tensor for f in checks.values(M, t, DS_BLOCK)] == [f"{M}.weight_scale_inv"]


# -- block_reader_findings (FP8-6.8) ----------------------------------------------------------------------


def ragged(n, k, grid, scheme=DS_BLOCK):
    return checks.block_reader_findings(M, n, k, grid, scheme)


def ragged_warning(n, k, grid, what, block="128 x 128"):
    t = f"{M}.weight_scale_inv"
    return [warning("fp8.block.ragged", "FP8-6.8", t, f"'{t}': weight ({n}, {k}) does not fill its {block} block "
                    f"grid {list(grid)}; transformers 5.24.0's CPU Fp8Dequantize {what}")]


DS_TALL = ModuleScheme(layout="deepseek", strategy="block", scale="weight_scale_inv", block=(64, 128))


@pytest.mark.parametrize(("n", "k", "grid"), [(256, 128, (2, 1)), (128, 384, (1, 3))])
def test_a_grid_the_weight_fills_is_quiet(n, k, grid):
    """FP8-6.8: transformers derives the block as rows // scale_rows: where the weight fills the grid that is
    the config's block."""
    assert ragged(n, k, grid) == []


def test_ragged_rows_the_grid_divides_are_read_as_other_blocks():
    """FP8-6.8: "a 130-row weight with a 2-row grid gets 65-row blocks where the format means 128"."""
    assert ragged(130, 128, (2, 1)) == ragged_warning(130, 128, (2, 1), "derives 65 x 128 blocks where the format "
                                                      "means 128 x 128, and decodes other weights without an error")


def test_ragged_columns_the_grid_divides_are_read_as_other_blocks():
    """FP8-6.8: columns as rows: 200 columns in a 2-column grid make 100-column blocks."""
    assert ragged(128, 200, (1, 2)) == ragged_warning(128, 200, (1, 2), "derives 128 x 100 blocks where the format "
                                                      "means 128 x 128, and decodes other weights without an error")


def test_a_grid_the_weight_fills_in_blocks_of_unequal_sides_is_quiet():
    """FP8-6.8 / FP8-2.1: weight_block_size [64, 128]: a (128, 256) weight fills its (2, 2) grid, rows by 64 and
    columns by 128."""
    assert ragged(128, 256, (2, 2), DS_TALL) == []


def test_ragged_rows_in_blocks_of_unequal_sides_name_the_config_s_block():
    """FP8-6.8: "ignoring weight_block_size": 129 rows in a 3-row grid of [64, 128] blocks are read as 43-row
    blocks where the format means 64 x 128."""
    assert ragged(129, 128, (3, 1), DS_TALL) == ragged_warning(
        129, 128, (3, 1), "derives 43 x 128 blocks where the format means 64 x 128, and decodes other weights without "
        "an error", block="64 x 128")


@pytest.mark.parametrize(("n", "k", "grid"), [(129, 128, (2, 1)), (128, 201, (1, 2))])
def test_a_side_the_grid_does_not_divide_raises_in_transformers(n, k, grid):
    """FP8-6.8: "a weight whose rows the grid does not divide raises ValueError" (rows or columns alike)."""
    assert ragged(n, k, grid) == ragged_warning(n, k, grid, "raises ValueError (weight shape not divisible by the "
                                                "scale grid)")


@pytest.mark.parametrize(("scheme", "grid"), [
    (ModuleScheme(layout="ct", strategy="block", scale="weight_scale", block=(128, 128)), (2, 1)),
    (DS_TENSOR, (1, 1)),
    (DS_BLOCK, (2,)),
])
def test_the_ragged_note_is_the_fp8_block_layout_s_alone(scheme, grid):
    """FP8-6.8: the note is for transformers' fp8 reader of a block grid; compressed-tensors pads and crops
    (FP8-1.3), a tensor scale has no block, and a grid of another rank is FP8-6.3's to refuse."""
    assert ragged(130, 128, grid, scheme) == []


# -- fused_findings (FP8-6.7) ---------------------------------------------------------------------------------


def fused(parent, listed):
    return warning("fp8.fused.scales_differ", "FP8-6.7", f"{parent}.{listed.split()[0]}",
                   f"'{parent}': the per-tensor weight scales of the shards vLLM fuses differ ({listed}); vLLM "
                   "re-quantizes them to the largest (requantize_with_max_scale), rounding the others' weights again "
                   "(vllm#54974)")


def test_qkv_shards_with_different_scales_are_named_in_family_order():
    """FP8-6.7: "Shards of one parent whose per-tensor scales differ are named", q, k, v as vLLM fuses them."""
    a = "model.layers.0.self_attn"
    scales = {f"{a}.v_proj": 0.5, f"{a}.q_proj": 0.25, f"{a}.k_proj": 0.125, f"{a}.o_proj": 1.0}
    assert checks.fused_findings(scales) == [fused(a, "q_proj 0.25, k_proj 0.125, v_proj 0.5")]


def test_two_of_three_shards_are_enough_and_values_show_six_digits():
    """FP8-6.7: gate/up is a family of two; each scale is shown to 6 significant digits."""
    m = "model.layers.3.mlp"
    scales = {f"{m}.up_proj": 0.1234567, f"{m}.gate_proj": 0.001234567}
    assert checks.fused_findings(scales) == [fused(m, "gate_proj 0.00123457, up_proj 0.123457")]


def test_equal_scales_and_lone_shards_are_quiet():
    """FP8-6.7: shards "whose per-tensor scales differ": equal q/k/v, a lone gate_proj, and o_proj / down_proj
    (fused into nothing) are not named."""
    scales = {"m.a.q_proj": 0.5, "m.a.k_proj": 0.5, "m.a.v_proj": 0.5, "m.b.gate_proj": 0.5,
              "m.b.down_proj": 2.0, "m.a.o_proj": 4.0}
    assert checks.fused_findings(scales) == []


def test_shards_of_different_parents_are_not_compared():
    """FP8-6.7: shards "of one parent": layer 0's q_proj and layer 1's k_proj are two lone shards."""
    assert checks.fused_findings({"model.layers.0.attn.q_proj": 0.5, "model.layers.1.attn.k_proj": 2.0}) == []


def test_each_parent_and_family_is_named_once_in_order():
    """FP8-6.7: one warning a fused weight, parents in order; a parent's q/k/v and gate/up are two weights."""
    scales = {"m.2.mlp.gate_proj": 1.0, "m.2.mlp.up_proj": 2.0, "m.1.attn.q_proj": 1.0, "m.1.attn.v_proj": 3.0,
              "m.1.attn.gate_proj": 1.0, "m.1.attn.up_proj": 1.5}
    assert checks.fused_findings(scales) == [fused("m.1.attn", "gate_proj 1, up_proj 1.5"),
                                             fused("m.1.attn", "q_proj 1, v_proj 3"),
                                             fused("m.2.mlp", "gate_proj 1, up_proj 2")]


def test_top_level_shards_have_the_empty_parent():
    """FP8-6.7: a module named q_proj alone has the parent "" (the model itself)."""
    assert checks.fused_findings({"q_proj": 1.0, "k_proj": 2.0}) == [fused("", "q_proj 1, k_proj 2")]
