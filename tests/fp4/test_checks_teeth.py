"""The FP4 checks' refusals asserted whole, on modules built in memory: each structural rule at the limit and one
past, the prefix and tensor each refusal names, the optional tensors left optional, and the value rules' byte
limits (issue 33: tests with teeth; `make mutation MODULE=qformats/formats/fp4/checks.py`).

Expected refusals are written from spec/fp4.md's tables and rules (FP4-2.1 .. FP4-2.5, FP4-3.2 .. FP4-3.4, FP4-4.1);
none comes from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.formats.fp4 import checks
from whole_error import refusal, whole

ONE = 0x38                      # UE4M3 1.0 (FE-7.4)
PACKED_RANK = "2-D (out_features, in_features / 2) (FP4-2.1)"
BLOCKS_RANK = "4-D (experts, out, in / 32, 16) (FP4-2.5)"


def nvfp4(n: int = 2, k: int = 32) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """A compressed-tensors NVFP4 module (FP4-2.1's table) with static activations, and its stored dtypes."""
    t = {"weight_packed": np.zeros((n, k // 2), np.uint8), "weight_scale": np.full((n, k // 16), ONE, np.uint8),
         "weight_global_scale": np.array([1.0], np.float32), "input_global_scale": np.array([1.0], np.float32)}
    return t, {"weight_packed": "U8", "weight_scale": "F8_E4M3", "weight_global_scale": "F32",
               "input_global_scale": "F32"}


def mxfp4(n: int = 2, k: int = 64) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """A compressed-tensors MXFP4 module (FP4-2.1): no global scale, E8M0 bytes."""
    t = {"weight_packed": np.zeros((n, k // 2), np.uint8), "weight_scale": np.full((n, k // 32), 127, np.uint8)}
    return t, {"weight_packed": "U8", "weight_scale": "U8"}


def modelopt(n: int = 2, k: int = 32) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """A ModelOpt NVFP4 module (FP4-4.1): ``weight``, ``weight_scale``, ``weight_scale_2`` and ``input_scale`` ()."""
    t = {"weight": np.zeros((n, k // 2), np.uint8), "weight_scale": np.full((n, k // 16), ONE, np.uint8),
         "weight_scale_2": np.array(1.0, np.float32), "input_scale": np.array(1.0, np.float32)}
    return t, {"weight": "U8", "weight_scale": "F8_E4M3", "weight_scale_2": "F32", "input_scale": "F32"}


def experts(e: int = 2, r: int = 3, g: int = 2) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """One gpt-oss projection (FP4-2.5): ``down_proj_blocks`` (E, R, G, 16), ``_scales`` (E, R, G), ``_bias``."""
    t = {"down_proj_blocks": np.zeros((e, r, g, 16), np.uint8), "down_proj_scales": np.full((e, r, g), 127, np.uint8),
         "down_proj_bias": np.zeros((e, r), np.float32)}
    return t, {"down_proj_blocks": "U8", "down_proj_scales": "U8", "down_proj_bias": "F32"}


def dumped(findings) -> list[dict]:
    return [f.model_dump() for f in findings]


# -- compressed-tensors and ModelOpt structure (FP4-2.1 .. FP4-2.3, FP4-4.1) ---------------------------


def test_structure_gives_out_and_in_features():
    """FP4-2.1: "K is 2 x the columns of weight_packed"; N its rows."""
    t, dtypes = nvfp4(n=3, k=48)
    assert checks.structure_ct(t, dtypes, "ct_nvfp4", "m.") == {"out": 3, "in": 48}


def test_missing_packed_weight_is_tensor_missing_under_the_prefix():
    """FP4-2.1: "A missing required tensor is tensor.missing"."""
    t, dtypes = nvfp4()
    del t["weight_packed"]
    assert whole(lambda: checks.structure_ct(t, dtypes, "ct_nvfp4", "m.")) == refusal(
        "tensor.missing", "m.weight_packed", "present (FP4-2.1)", "missing")


def test_refusals_without_a_prefix_name_the_bare_tensor():
    """FP4-2.1: a module read on its own names its tensors as stored."""
    t, dtypes = modelopt()
    del t["weight"]
    assert whole(lambda: checks.structure_ct(t, dtypes, "modelopt_nvfp4")) == refusal(
        "tensor.missing", "weight", "present (FP4-2.1)", "missing")


def test_missing_block_scale_is_tensor_missing():
    """FP4-2.1: weight_scale is required in every layout."""
    t, dtypes = mxfp4()
    del t["weight_scale"]
    assert whole(lambda: checks.structure_ct(t, dtypes, "ct_mxfp4", "m.")) == refusal(
        "tensor.missing", "m.weight_scale", "present (FP4-2.1)", "missing")


def test_missing_global_scale_names_what_the_reader_does_with_it():
    """FP4-3.2: "weight_global_scale MUST be present (fp4.global_scale.missing)"."""
    t, dtypes = nvfp4()
    del t["weight_global_scale"]
    assert whole(lambda: checks.structure_ct(t, dtypes, "ct_nvfp4", "m.")) == refusal(
        "fp4.global_scale.missing", "m.weight_global_scale",
        "present: NVFP4 decodes w = e2m1 * weight_scale / weight_global_scale (FP4-3.2)", "missing")


@pytest.mark.parametrize(("make", "layout", "tensor", "stored", "allowed"), [
    pytest.param(nvfp4, "ct_nvfp4", "weight_packed", "I8", "U8", id="packed"),
    pytest.param(nvfp4, "ct_nvfp4", "weight_scale", "U8", "F8_E4M3", id="nvfp4_scale"),
    pytest.param(mxfp4, "ct_mxfp4", "weight_scale", "F8_E4M3", "U8", id="mxfp4_scale"),
    pytest.param(nvfp4, "ct_nvfp4", "weight_global_scale", "F16", "F32", id="global"),
    pytest.param(nvfp4, "ct_nvfp4", "input_global_scale", "BF16", "F32", id="input_global"),
    pytest.param(modelopt, "modelopt_nvfp4", "weight_scale_2", "F64", "F32", id="modelopt_global")])
def test_a_dtype_outside_the_table_is_tensor_dtype(make, layout, tensor, stored, allowed):
    """FP4-2.1, FP4-4.1: "a dtype outside the table is tensor.dtype"."""
    t, dtypes = make()
    dtypes[tensor] = stored
    assert whole(lambda: checks.structure_ct(t, dtypes, layout, "m.")) == refusal(
        "tensor.dtype", f"m.{tensor}", allowed, stored)


def test_tensors_of_unknown_dtype_are_judged_by_shape_only():
    """FP4-2.1: the dtype rule reads the stored dtype; arrays with none recorded are not refused for it."""
    t, _ = nvfp4()
    assert checks.structure_ct(t, {}, "ct_nvfp4", "m.") == {"out": 2, "in": 32}


@pytest.mark.parametrize("shape", [pytest.param((32,), id="1-D"), pytest.param((2, 2, 8), id="3-D")])
def test_packed_weight_not_2d_is_tensor_shape(shape):
    """FP4-2.1: weight_packed is (N, K/2); "a rank ... that is not ... is tensor.shape"."""
    t, dtypes = nvfp4()
    t["weight_packed"] = np.zeros(shape, np.uint8)
    assert whole(lambda: checks.structure_ct(t, dtypes, "ct_nvfp4", "m.")) == refusal(
        "tensor.shape", "m.weight_packed", PACKED_RANK, shape)


def test_k_at_a_multiple_of_the_group_passes_and_one_byte_more_is_refused():
    """FP4-2.2: K MUST be a multiple of 16 for NVFP4: K = 16 passes, K = 18 (9 bytes a row) does not."""
    t, dtypes = nvfp4(k=16)
    assert checks.structure_ct(t, dtypes, "ct_nvfp4", "m.") == {"out": 2, "in": 16}
    t["weight_packed"] = np.zeros((2, 9), np.uint8)
    assert whole(lambda: checks.structure_ct(t, dtypes, "ct_nvfp4", "m.")) == refusal(
        "fp4.group.shape", "m.weight_scale", "in_features a multiple of 16 (FP4-2.2)", 18)


def test_scale_grid_of_another_shape_is_refused():
    """FP4-2.3: the grid MUST be (N, K/g): (2, 2) for K = 64, g = 32, not one column."""
    t, dtypes = mxfp4()
    t["weight_scale"] = np.full((2, 1), 127, np.uint8)
    assert whole(lambda: checks.structure_ct(t, dtypes, "ct_mxfp4", "m.")) == refusal(
        "fp4.grid.shape", "m.weight_scale", "shape (2, 2): one scale per 32 weights of each row (FP4-2.3)", (2, 1))


@pytest.mark.parametrize(("make", "layout", "tensor", "want"), [
    pytest.param(nvfp4, "ct_nvfp4", "weight_global_scale", "shape (1,)", id="ct_global"),
    pytest.param(nvfp4, "ct_nvfp4", "input_global_scale", "shape (1,)", id="ct_input"),
    pytest.param(modelopt, "modelopt_nvfp4", "weight_scale_2", "shape ()", id="modelopt_global"),
    pytest.param(modelopt, "modelopt_nvfp4", "input_scale", "shape ()", id="modelopt_input")])
def test_a_global_scale_of_two_values_is_tensor_shape(make, layout, tensor, want):
    """FP4-2.1: "a global scale that is not one value is tensor.shape"; FP4-4.1: ModelOpt's are shape ()."""
    t, dtypes = make()
    t[tensor] = np.ones(2, np.float32)
    assert whole(lambda: checks.structure_ct(t, dtypes, layout, "m.")) == refusal(
        "tensor.shape", f"m.{tensor}", f"one value, {want} (FP4-2.1)", (2,))


@pytest.mark.parametrize(("make", "layout", "tensor"), [
    pytest.param(nvfp4, "ct_nvfp4", "input_global_scale", id="ct"),
    pytest.param(modelopt, "modelopt_nvfp4", "input_scale", id="modelopt")])
def test_activation_scale_is_optional(make, layout, tensor):
    """FP4-2.1: input_global_scale only with static activations (`input_activations.dynamic` not true); FP4-4.1."""
    t, dtypes = make()
    del t[tensor]
    assert checks.structure_ct(t, dtypes, layout, "m.") == {"out": 2, "in": 32}


# -- gpt-oss structure (FP4-2.5) -------------------------------------------------------------------


def test_gpt_oss_structure_gives_experts_out_and_in():
    """FP4-2.5: blocks (E, N, K/32, 16): K is 32 per block column."""
    t, dtypes = experts(e=2, r=3, g=2)
    assert checks.structure_gpt_oss(t, dtypes, "down_proj", "x.") == {"experts": 2, "out": 3, "in": 64}


@pytest.mark.parametrize("shape", [pytest.param((2, 3, 2, 8), id="8-byte-blocks"),
                                   pytest.param((2, 3, 32), id="3-D")])
def test_gpt_oss_blocks_not_4d_of_16_bytes_are_tensor_shape(shape):
    """FP4-2.5: "(E, N, K/32, 16): 16 bytes = 32 E2M1 codes a block"."""
    t, dtypes = experts()
    t["down_proj_blocks"] = np.zeros(shape, np.uint8)
    assert whole(lambda: checks.structure_gpt_oss(t, dtypes, "down_proj", "x.")) == refusal(
        "tensor.shape", "x.down_proj_blocks", BLOCKS_RANK, shape)


@pytest.mark.parametrize("tensor", ["down_proj_blocks", "down_proj_scales"])
def test_gpt_oss_missing_tensor_is_tensor_missing_by_its_bare_name(tensor):
    """FP4-2.5: blocks and scales are required; without a prefix the tensor is named as stored."""
    t, dtypes = experts()
    del t[tensor]
    assert whole(lambda: checks.structure_gpt_oss(t, dtypes, "down_proj")) == refusal(
        "tensor.missing", tensor, "present (FP4-2.1)", "missing")


@pytest.mark.parametrize("tensor", ["down_proj_blocks", "down_proj_scales"])
def test_gpt_oss_blocks_and_scales_are_uint8(tensor):
    """FP4-2.5: both tensors are uint8."""
    t, dtypes = experts()
    dtypes[tensor] = "I8"
    assert whole(lambda: checks.structure_gpt_oss(t, dtypes, "down_proj", "x.")) == refusal(
        "tensor.dtype", f"x.{tensor}", "U8", "I8")


def test_gpt_oss_scales_grid_of_another_shape_is_refused():
    """FP4-2.3: the gpt-oss grid is (E, N, K/32)."""
    t, dtypes = experts()
    t["down_proj_scales"] = np.full((2, 3, 1), 127, np.uint8)
    assert whole(lambda: checks.structure_gpt_oss(t, dtypes, "down_proj", "x.")) == refusal(
        "fp4.grid.shape", "x.down_proj_scales", "shape (2, 3, 2): one scale per 32 weights of each row (FP4-2.3)",
        (2, 3, 1))


def test_gpt_oss_bias_is_optional():
    """FP4-2.5: the bias is checked where present; a projection without one is not refused."""
    t, dtypes = experts()
    del t["down_proj_bias"]
    assert checks.structure_gpt_oss(t, dtypes, "down_proj", "x.") == {"experts": 2, "out": 3, "in": 64}


def test_gpt_oss_bias_of_another_shape_is_tensor_shape():
    """FP4-2.5: {p}_bias is (E, N): one bias per expert and output."""
    t, dtypes = experts()
    t["down_proj_bias"] = np.zeros((3, 2), np.float32)
    assert whole(lambda: checks.structure_gpt_oss(t, dtypes, "down_proj", "x.")) == refusal(
        "tensor.shape", "x.down_proj_bias", "(2, 3): one bias per expert and output (FP4-2.5)", (3, 2))


# -- values (FP4-3.2 .. FP4-3.4) -----------------------------------------------------------------------


def test_global_scale_value_is_the_float32_value():
    """FP4-3.2: the global scale is a float32: a float64 0.1 is judged as float32(0.1)."""
    assert checks.global_scale_value(np.array([0.1])) == float(np.float32(0.1))


def test_global_scale_value_reads_the_first_value():
    """FP4-2.1: one value (the structure rules refuse more); the value read is the first."""
    assert checks.global_scale_value(np.array([2.0, 3.0], np.float32)) == 2.0


def test_value_findings_without_a_prefix_name_the_bare_tensor():
    """FP4-3.3: a 0x7F block-scale byte is NaN; a module read on its own names weight_scale as stored."""
    t, _ = nvfp4()
    t["weight_scale"][1, 0] = 0x7F
    assert dumped(checks.value_findings(t, "ct_nvfp4")) == [{
        "code": "fp4.scale.nan", "severity": "error", "clause": "FP4-3.3", "tensor": "weight_scale", "count": 1,
        "message": "'weight_scale' holds 1 UE4M3 NaN bytes (0x7F, 0xFF); compressed-tensors decodes their blocks "
                   "to NaN (first 0x7F at [1, 0])"}]


def test_sign_rule_starts_at_0x80_and_0x7e_is_a_scale():
    """FP4-3.3: "0x00 .. 0x7E" are UE4M3 values; "0x80 .. 0xFE have the sign bit set" (fp4.scale.sign)."""
    t, _ = nvfp4()
    t["weight_scale"][:] = [[0x7E, 0x7E], [0x7E, 0x80]]
    assert dumped(checks.value_findings(t, "ct_nvfp4", "m.")) == [{
        "code": "fp4.scale.sign", "severity": "error", "clause": "FP4-3.3", "tensor": "m.weight_scale", "count": 1,
        "message": "'m.weight_scale' holds 1 block-scale bytes with the sign bit set, which UE4M3 does not have; "
                   "torch reads them as negative E4M3FN scales and flips the block's signs, ggml as their magnitude "
                   "(first 0x80 at [1, 1])"}]


def test_only_the_layouts_global_scales_are_judged():
    """FP4-3.2: weight_global_scale and input_global_scale are judged; another tensor of the module, whatever
    its name, is not taken for a global scale."""
    t, _ = nvfp4()
    t[checks.NAMES["ct_nvfp4"][3]] = np.array([0.0], np.float32)
    t["weight_scale_2"] = np.array(0.0, np.float32)
    assert checks.value_findings(t, "ct_nvfp4", "m.") == []
