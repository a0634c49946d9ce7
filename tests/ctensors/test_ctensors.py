"""compressed-tensors pack-quantized (spec/compressed_tensors.md): dense packing, offset codes, zero points
along dimension 0, conversion, and checkpoints written by compressed-tensors 0.20.0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import awq, ctensors, gptq
from qformats.formats.ctensors.codec import checked_tensors, pack_dense, unpack_dense
from qformats.validate import validate
from ct_expected import as_bits, expected_bits

ROOT = Path(__file__).resolve().parents[2]
THIRD = ROOT / "fixtures/third_party/compressed_tensors"
CHECKPOINTS = {"w4_sym_group32": 4, "w4_asym_group32": 4, "w8_sym_channel": 8, "w3_asym_group16": 3}


def _words(values, bits):
    return [int(w) & 0xFFFFFFFF for w in pack_dense(np.asarray(values)[None, :], bits)[0]]


def test_ct_2_3_vector_4_bits():
    """CT-2.3: stored k mod 16 for k = 0..31 (compressed-tensors 0.20.0 pack_to_int32 [run])."""
    assert _words(np.arange(32) % 16, 4) == [0x76543210, 0xFEDCBA98, 0x76543210, 0xFEDCBA98]


def test_ct_2_3_vector_3_bits_straddles():
    """CT-2.3: stored k mod 8; values 10 and 21 straddle words (compressed-tensors 0.20.0 [run])."""
    assert _words(np.arange(32) % 8, 3) == [0x88FAC688, 0xC688FAC6, 0xFAC688FA]


def test_ct_2_3_vector_5_bits():
    assert _words(np.arange(32), 5) == [0x8A418820, 0xC5A92839, 0xCA307B9A, 0x38BDAB49, 0xFFBBCDEB]


@pytest.mark.parametrize("bits", range(1, 9))
def test_unpack_inverts_pack_with_a_partial_last_word(bits):
    values = np.random.default_rng(bits).integers(0, 1 << bits, (3, 37))
    packed = pack_dense(values, bits)
    assert packed.shape == (3, -(-37 * bits // 32))
    assert np.array_equal(unpack_dense(packed, bits, 37), values)


def test_ct_3_1_worked_example():
    """CT-3.1: 4-bit symmetric, stored field 3 -> code -5, scale 0.25 -> -1.25; asymmetric zp -2 -> -0.75."""
    q = np.array([[-5] + [0] * 7], np.int8)
    s = np.array([[0.25]], np.float16)
    assert ctensors.dequantize(ctensors.pack(q, s, num_bits=4), num_bits=4)[0, 0] == -1.25
    layer = ctensors.pack(q, s, num_bits=4, zero_points=np.array([[-2]], np.int8))
    assert ctensors.dequantize(layer, num_bits=4)[0, 0] == -0.75
    assert int(layer.weight_packed.view(np.uint32)[0, 0]) == 0x88888883


def test_pack_refuses_a_code_outside_the_signed_range():
    """CT-2.3 at the limit (7 for 4 bits) and one past it (8)."""
    s = np.ones((1, 1), np.float16)
    ctensors.pack(np.array([[7] * 8], np.int8), s, num_bits=4)
    with pytest.raises(QFormatsError) as err:
        ctensors.pack(np.array([[8] * 8], np.int8), s, num_bits=4)
    assert (err.value.code, err.value.tensor) == ("ctensors.value.range", "codes") and "[0, 0]" in str(err.value)


def test_group_size_must_divide_in_features():
    with pytest.raises(QFormatsError) as err:
        ctensors.pack(np.zeros((2, 48), np.int8), np.ones((2, 2), np.float16), num_bits=4, group_size=32)
    assert (err.value.code, err.value.tensor, err.value.actual) == ("ctensors.group.shape", "group_size", 32)


def test_round_trip_through_gptq_and_awq():
    """CT-4: pack-quantized int4 asym -> GPTQ v2 -> pack-quantized, and -> AWQ -> pack-quantized, bit for bit."""
    rng = np.random.default_rng(3)
    layer = ctensors.pack(rng.integers(-8, 8, (16, 64)), rng.uniform(0.01, 1, (16, 2)).astype(np.float16),
                          num_bits=4, group_size=32, zero_points=rng.integers(-8, 8, (16, 2)))
    w = ctensors.dequantize(layer, num_bits=4)
    g = ctensors.to_gptq(layer, num_bits=4)
    assert np.array_equal(np.ascontiguousarray(gptq.dequantize(g, bits=4, version="v2")), w)
    for back in (ctensors.from_gptq(g, bits=4, version="v2"), ctensors.from_awq(ctensors.to_awq(layer, num_bits=4))):
        assert all(np.array_equal(getattr(back, t), getattr(layer, t)) for t in
                   ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point"))


def test_symmetric_gptq_becomes_symmetric_pack_quantized():
    rng = np.random.default_rng(4)
    g = gptq.pack(rng.integers(0, 16, (64, 16)), np.full((2, 16), 8), np.ones((2, 16), np.float16), bits=4,
                  version="v2", group_size=32)
    assert ctensors.from_gptq(g, bits=4, version="v2").weight_zero_point is None


def test_to_gptq_refuses_five_bits():
    layer = ctensors.pack(np.zeros((4, 32), np.int8), np.ones((4, 1), np.float16), num_bits=5)
    with pytest.raises(QFormatsError) as err:
        ctensors.to_gptq(layer, num_bits=5)
    assert (err.value.code, err.value.tensor, err.value.actual) == ("ctensors.convert.unrepresentable", "num_bits", 5)


def test_to_awq_refuses_scales_float16_cannot_hold():
    layer = ctensors.pack(np.zeros((8, 32), np.int8), np.full((8, 1), 1 + 2.0 ** -20, np.float32), num_bits=4)
    with pytest.raises(QFormatsError) as err:
        ctensors.to_awq(layer, num_bits=4)
    assert (err.value.code, err.value.tensor) == ("ctensors.convert.unrepresentable", "weight_scale")


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_checkpoint_decodes_as_compressed_tensors_does(name, tmp_path):
    """ModelCompressor.decompress_model's weights (bfloat16 / float16) are the reference decode rounded once."""
    from safetensors.numpy import load_file
    from qformats.tools import decode

    modules = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj")
    out = tmp_path / "dec.safetensors"
    decode(str(THIRD / "checkpoints" / name), list(modules), str(out))
    decoded = load_file(str(out))
    for module in modules:
        want, dtype = expected_bits(name, module)
        assert np.array_equal(as_bits(decoded[f"{module}.weight"], dtype), want), module


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_checkpoint_validates(name):
    report = validate(str(THIRD / "checkpoints" / name), deep=True)
    assert (report.verdict, report.format, report.summary["layers"], report.findings) == ("valid", "ctensors", 3, [])


def _copy(tmp_path, name):
    ckpt = tmp_path / name
    shutil.copytree(THIRD / "checkpoints" / name, ckpt)
    return ckpt, json.loads((ckpt / "config.json").read_text())


def test_num_bits_contradicting_the_bytes_names_the_widths_that_fit(tmp_path):
    """CT-6.1: config says 4 bits, weight_packed is 3-bit wide: the finding names the widths the bytes fit."""
    ckpt, config = _copy(tmp_path, "w3_asym_group16")
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 4
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert report.verdict == "invalid"
    first = report.findings[0]
    assert (first.code, first.tensor) == ("tensor.shape", "model.layers.0.mlp.down_proj.weight_packed")
    assert "fit num_bits [3]" in first.message


def test_ignored_module_holding_packed_weights_is_an_error(tmp_path):
    """CT-5.4: ignore names a module that holds weight_packed; an ignore name matching nothing is a warning (CT-5.2)."""
    ckpt, config = _copy(tmp_path, "w4_sym_group32")
    config["quantization_config"]["ignore"] = ["lm_head", "model.layers.0.mlp.up_proj", "model.layers.9.mlp.gate"]
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert sorted((f.code, f.tensor) for f in report.findings) == [
        ("ctensors.config.ignore_unmatched", "model.layers.9.mlp.gate"),
        ("ctensors.config.tensor_mismatch", "model.layers.0.mlp.up_proj")]


def test_int_modules_under_a_float_quantized_config_contradict_it(tmp_path):
    """CT-5.4 (float-quantized is covered by spec/fp8.md FP8-4.3): pack-quantized tensors under a config whose
    only group is float-quantized are each named as contradicting their group."""
    ckpt, config = _copy(tmp_path, "w4_sym_group32")
    config["quantization_config"]["format"] = "float-quantized"
    config["quantization_config"]["config_groups"]["group_0"]["format"] = "float-quantized"
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert report.verdict == "invalid"
    assert sorted(f.tensor for f in report.findings if f.code == "ctensors.config.tensor_mismatch") == [
        "model.layers.0.mlp.down_proj", "model.layers.0.mlp.up_proj", "model.layers.0.self_attn.q_proj"]


def test_awq_and_ct_checkpoints_agree_after_conversion():
    """The AutoAWQ fixture's layers converted to pack-quantized decode to the same float32 weights."""
    from safetensors.numpy import load_file

    tensors = load_file(str(ROOT / "fixtures/third_party/autoawq/checkpoints/gemm_w4_g32/model.safetensors"))
    layer = {t: tensors[f"model.layers.0.mlp.up_proj.{t}"] for t in ("qweight", "qzeros", "scales")}
    assert np.array_equal(ctensors.dequantize(ctensors.from_awq(layer), num_bits=4), awq.dequantize(layer))


@pytest.mark.parametrize("name", [*CHECKPOINTS, "ct0171_w3_asym_group32", "ct0171_w6_sym_channel"])
def test_checkpoint_validates_and_decodes_from_the_command_line(name, tmp_path, capsys):
    """Issue 23, done when: `qformats validate` exits 0 and `qformats decode` writes decompress_model's weights
    (rounded once to the model dtype) for every module of each ModelCompressor checkpoint; the ct0171 ones
    written and decoded by compressed-tensors 0.17.1 in its per-word layout (CT-2.6)."""
    from safetensors.numpy import load_file
    from qformats.cli import main

    ckpt = str(THIRD / "checkpoints" / name)
    modules = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj")
    assert main(["validate", ckpt]) == 0
    out = tmp_path / "w.safetensors"
    assert main(["decode", ckpt, *[a for m in modules for a in ("--tensor", m)], "-o", str(out)]) == 0
    decoded = load_file(str(out))
    for module in modules:
        want, dtype = expected_bits(name, module)
        assert np.array_equal(as_bits(decoded[f"{module}.weight"], dtype), want), module


# -- checked_tensors: each CT-2.1/2.2/2.4 check at its limit and one past it (found by mutation testing) ---------

def _small_layer(**changed) -> dict:
    """4 x 32 at 4 bits, group 16 (G = 2), asymmetric, act-order g_idx; ``changed`` replaces (None: drops) tensors."""
    layer = dict(ctensors.pack(np.zeros((4, 32), np.int8), np.ones((4, 2), np.float16), num_bits=4, group_size=16,
                               zero_points=np.zeros((4, 2), np.int8), g_idx=np.repeat([1, 0], 16)).tensors)
    layer.update(changed)
    return {k: v for k, v in layer.items() if v is not None}


def _refusal(layer, group_size=None) -> tuple:
    with pytest.raises(QFormatsError) as err:
        checked_tensors(layer, 4, group_size=group_size)
    return err.value.code, err.value.tensor, err.value.constraint, err.value.actual


@pytest.mark.parametrize("name", ["weight_packed", "weight_scale", "weight_shape"])
def test_checked_tensors_refuses_a_missing_tensor(name):
    assert _refusal(_small_layer(**{name: None})) == ("tensor.missing", name, "present (CT-2.1)", "absent")


@pytest.mark.parametrize("shape", [[0, 32], [4, 0]], ids=["out-0", "in-0"])
def test_checked_tensors_refuses_a_zero_size(shape):
    assert _refusal(_small_layer(weight_shape=np.array(shape))) == \
        ("tensor.shape", "weight_shape", "two positive sizes [out, in]", shape)


def test_checked_tensors_accepts_one_by_one_and_an_int32_weight_shape():
    layer = {"weight_packed": np.zeros((1, 1), np.int32), "weight_scale": np.ones((1, 1), np.float16),
             "weight_shape": np.array([1, 1], np.int32)}
    t = checked_tensors(layer, 4)
    assert (t["out"], t["in"], t["groups"], t["group_size"]) == (1, 1, 1, -1)


def test_checked_tensors_refuses_a_weight_shape_of_three_sizes():
    assert _refusal(_small_layer(weight_shape=np.array([4, 32, 1]))) == \
        ("tensor.shape", "weight_shape", "of shape (2,)", (3,))


@pytest.mark.parametrize("columns", [3, 0], ids=["3-does-not-divide-32", "none"])
def test_checked_tensors_refuses_scale_columns_not_dividing_in_features(columns):
    assert _refusal(_small_layer(weight_scale=np.ones((4, columns), np.float16))) == \
        ("tensor.shape", "weight_scale", "of shape (4, G) with G dividing in_features 32 (CT-2.2)", (4, columns))


def test_checked_tensors_refuses_scales_of_other_rows():
    assert _refusal(_small_layer(weight_scale=np.ones((3, 2), np.float16))) == \
        ("tensor.shape", "weight_scale", "of shape (4, G) with G dividing in_features 32 (CT-2.2)", (3, 2))


def test_checked_tensors_group_size_fixes_the_scale_columns():
    """CT-2.2: group 32 over K 32 is one column; the layer's two (group 16) are refused, not re-read as group 16."""
    assert _refusal(_small_layer(), group_size=32) == ("tensor.shape", "weight_scale", "of shape (4, 1)", (4, 2))
    assert checked_tensors(_small_layer(), 4, group_size=16)["groups"] == 2


def test_checked_tensors_refuses_a_nonfinite_scale():
    scale = np.ones((4, 2), np.float16)
    scale[1, 0] = np.inf
    code, tensor, _, _ = _refusal(_small_layer(weight_scale=scale))
    assert (code, tensor) == ("ctensors.scales.nonfinite", "weight_scale")


def test_checked_tensors_returns_the_group_size_as_an_int():
    t = checked_tensors(_small_layer(), 4)
    assert type(t["group_size"]) is int and t["group_size"] == 16


def test_checked_tensors_refuses_zero_points_of_another_shape():
    assert _refusal(_small_layer(weight_zero_point=np.zeros((1, 3), np.int32))) == \
        ("tensor.shape", "weight_zero_point", "of shape (1, 2)", (1, 3))


def test_checked_tensors_returns_g_idx_at_its_limits_0_and_g_minus_1():
    t = checked_tensors(_small_layer(), 4)
    np.testing.assert_array_equal(t["weight_g_idx"], np.repeat([1, 0], 16))


@pytest.mark.parametrize(("bad", "actual"), [(-1, "-1 at [20]"), (2, "2 at [20]")], ids=["minus-1", "g"])
def test_checked_tensors_refuses_g_idx_one_past_each_limit(bad, actual):
    """The first index out of [0, G) is named, not the first 0 (index 0 here) or G - 1 before it."""
    g_idx = np.repeat([0, 1], 16)
    g_idx[20] = bad
    assert _refusal(_small_layer(weight_g_idx=g_idx)) == \
        ("ctensors.g_idx.range", "weight_g_idx", "in [0, 2) (CT-2.4)", actual)


@pytest.mark.parametrize(("g_idx", "expected"), [
    pytest.param(np.zeros(32, np.float32), ("tensor.dtype", "weight_g_idx", "int32 or int64", "float32"), id="float"),
    pytest.param(np.zeros(31, np.int32), ("tensor.shape", "weight_g_idx", "of shape (32,)", (31,)), id="short"),
])
def test_checked_tensors_refuses_a_g_idx_of_another_dtype_or_length(g_idx, expected):
    assert _refusal(_small_layer(weight_g_idx=g_idx)) == expected


# -- strategies outside CT-2.2: not checked, said (QF-5.2), never a contradiction -------------------------------

def _with_tensor_strategy(tmp_path, targets):
    ckpt, config = _copy(tmp_path, "w4_sym_group32")
    groups = config["quantization_config"]["config_groups"]
    groups["group_0"]["targets"] = ["re:.*q_proj$", "re:.*up_proj$"]
    groups["group_1"] = {"targets": targets, "format": "pack-quantized", "weights": {
        "num_bits": 4, "type": "int", "symmetric": True, "strategy": "tensor", "group_size": None}}
    (ckpt / "config.json").write_text(json.dumps(config))
    return ckpt


def test_module_of_an_uncovered_strategy_is_not_checked_and_said(tmp_path):
    """CT-2.2 'Other strategies (tensor, block, token, tensor_group) are not covered': the module is a warning
    counted in modules_not_checked, the verdict line says so, the other modules are checked."""
    report = validate(str(_with_tensor_strategy(tmp_path, ["re:.*down_proj$"])))
    assert (report.verdict, report.summary["layers"], report.summary["modules_not_checked"]) == ("valid", 2, 1)
    assert [(f.code, f.severity, f.tensor, f.message) for f in report.findings] == [(
        "ctensors.scheme.uncovered", "warning", "model.layers.0.mlp.down_proj",
        "'model.layers.0.mlp.down_proj' holds weight_packed but config group 'group_1' has strategy 'tensor' "
        "(covered: group, channel); not checked")]
    from qformats.report import to_text
    assert to_text(report).splitlines()[0].endswith("(ctensors, 2 layers, 6 of 10 tensors checked (not checked: 3 quantized, 1 float; "
                                                "-v names them), 0 errors, 1 warning, 1 module not checked)")


def test_checkpoint_of_uncovered_strategies_only_is_not_covered(tmp_path):
    """QF-5.2: no module qformats could check: exit 2 naming the strategy, not a verdict."""
    ckpt = _with_tensor_strategy(tmp_path, ["Linear"])
    config = json.loads((ckpt / "config.json").read_text())
    del config["quantization_config"]["config_groups"]["group_0"]
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(QFormatsError) as err:
        validate(str(ckpt))
    assert str(err.value) == ("'strategy' must be group or channel (CT-2.2) (got compressed-tensors pack-quantized, "
                              "strategy tensor) [checkpoint.format.unsupported, QF-5.2]")
