"""GPTQ config models and tensor specs (spec/gptq.md GPTQ-2.2, GPTQ-6)."""

import json
from pathlib import Path

import pytest

from qformats.errors import QFormatsError
from qformats.formats.gptq import layout

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "gptq" / "checkpoints"

# Real configs quoted in ../shared/notes/gptq.md §6.2 (TheBloke/Trurl-2-7B-GPTQ; GPTQModel to_dict).
THEBLOKE = {"bits": 8, "group_size": -1, "damp_percent": 0.1, "desc_act": True, "sym": True,
            "true_sequential": True, "model_name_or_path": None, "model_file_base_name": "model",
            "quant_method": "gptq"}
GPTQMODEL = {"bits": 4, "dynamic": {"+:.*down_proj": {"bits": 8}}, "group_size": 128, "desc_act": False,
             "sym": True, "lm_head": False, "method": "gptq", "quant_method": "gptq", "format": "gptq",
             "checkpoint_format": "gptq", "pack_dtype": "int32",
             "meta": {"quantizer": ["gptqmodel:7.7.0"], "damp_percent": 0.05, "static_groups": False}}


def test_thebloke_config_without_checkpoint_format_is_v1():
    """GPTQ-6.3: "absent or 'gptq' -> v1" -- AutoGPTQ 0.7 era configs carry no checkpoint_format."""
    config, findings = layout.parse_config(THEBLOKE)
    assert (config.version, config.bits, config.group_size, findings) == ("v1", 8, -1, [])


def test_gptqmodel_config_with_both_alias_spellings():
    """GPTQ-6.2: 'format'/'checkpoint_format' and 'method'/'quant_method' are one key each."""
    config, findings = layout.parse_config(GPTQMODEL)
    assert config.version == "v1" and findings == []
    assert config.meta.quantizer == ("gptqmodel:7.7.0",)
    assert {k: v.model_dump(exclude_none=True) for k, v in config.dynamic.items()} == {"+:.*down_proj": {"bits": 8}}


def test_meta_quantizer_may_be_a_string():
    """GPTQ-6.2: gptqmodel 1.4.5 writes meta.quantizer as a string, later versions as a list."""
    config, _ = layout.parse_config({"bits": 4, "meta": {"quantizer": "gptqmodel:1.4.5"}})
    assert config.meta.quantizer == ("gptqmodel:1.4.5",)


def test_gptq_v2_format_alias():
    """GPTQ-6.3: 'gptq_v2' -> v2, also when spelled with the 'format' key."""
    config, _ = layout.parse_config({"bits": 4, "format": "gptq_v2", "sym": False})
    assert config.version == "v2"


@pytest.mark.parametrize(("alias", "value"), [("w_bit", 3), ("wbits", 3)])
def test_bit_synonyms(alias, value):
    """GPTQ-6.2: GPTQModel and AutoGPTQ accept w_bit / wbits for bits."""
    config, _ = layout.parse_config({alias: value, "q_group_size": 64})
    assert (config.bits, config.group_size) == (3, 64)


def test_conflicting_aliases_are_refused():
    """GPTQ-6.2: both spellings present with different values cannot both be honoured."""
    with pytest.raises(QFormatsError) as info:
        layout.parse_config({"bits": 4, "format": "gptq_v2", "checkpoint_format": "gptq"})
    assert info.value.code == "gptq.config.invalid"
    assert info.value.tensor == "format"


def test_unknown_keys_are_kept_and_reported_as_warnings():
    """GPTQ-6.4: "unknown keys kept and reported as warnings", never a crash."""
    config, findings = layout.parse_config({"bits": 4, "hyb_act": False, "autoround_version": "0.5"})
    assert config.model_extra == {"hyb_act": False, "autoround_version": "0.5"}
    assert [(f.code, f.severity) for f in findings] == [("gptq.config.unknown_key", "warning")] * 2
    assert "'autoround_version'" in findings[0].message


@pytest.mark.parametrize("fmt", ["marlin", "bitblas", "gptq_p"])
def test_other_layouts_are_refused_not_misparsed(fmt):
    """GPTQ-6.3: marlin, bitblas and gptq_p are other layouts, refused clearly."""
    with pytest.raises(QFormatsError) as info:
        layout.parse_config({"bits": 4, "checkpoint_format": fmt})
    assert info.value.code == "gptq.config.other_layout"
    assert fmt in info.value.message


def test_legacy_is_marlin_format_is_refused():
    """GPTQ-6.3: the removed key is_marlin_format=true announces the Marlin tile layout."""
    with pytest.raises(QFormatsError) as info:
        layout.parse_config({"bits": 4, "is_marlin_format": True})
    assert info.value.code == "gptq.config.other_layout"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param({"bits": 5}, "bits", id="bits-5"),
        pytest.param({"bits": 4, "group_size": 0}, "group_size", id="group-size-0"),
        pytest.param({"bits": 4, "group_size": -2}, "group_size", id="group-size-minus-2"),
        pytest.param({"bits": 4, "damp_percent": 1.5}, "damp_percent", id="damp-1.5"),
        pytest.param({"bits": 4, "pack_dtype": "int64"}, "pack_dtype", id="pack-dtype-int64"),
        pytest.param({"bits": 4, "quant_method": "awq"}, "quant_method", id="awq"),
        pytest.param({"bits": 4, "checkpoint_format": "gptq_v3"}, "checkpoint_format", id="format-gptq_v3"),
        pytest.param({"group_size": 128}, "bits", id="bits-missing"),
    ],
)
def test_config_values_outside_their_domain(raw, field):
    """GPTQ-6.1: bits in {2,3,4,8}, group_size -1 or > 0, damp_percent in (0, 1), pack_dtype int32."""
    with pytest.raises(QFormatsError) as info:
        layout.parse_config(raw)
    assert (info.value.code, info.value.tensor) == ("gptq.config.invalid", field)


@pytest.mark.parametrize("name", ["e2e_b4_sym_g32_gptq", "neg_b4_sym_v2_zeros_labelled_gptq"])
def test_real_gptqmodel_configs_parse(name):
    """GPTQ-6: the configs GPTQModel 7.7.0 wrote for the golden checkpoints parse as v1, 4-bit, gs 32."""
    for file in ("quantize_config.json", "config.json"):
        raw = json.loads((GOLDEN / name / file).read_text())
        raw = raw.get("quantization_config", raw)
        config, findings = layout.parse_config(raw, source=file)
        assert (config.version, config.bits, config.group_size, config.sym) == ("v1", 4, 32, True)
        assert all(f.severity == "warning" for f in findings)


@pytest.mark.parametrize(
    ("k", "n", "bits", "gs", "expected"),
    [
        pytest.param(128, 64, 4, 32, {"qweight": (16, 64), "qzeros": (4, 8), "scales": (4, 64), "g_idx": (128,)},
                     id="4bit-gs32"),
        pytest.param(160, 64, 3, 128, {"qweight": (15, 64), "qzeros": (2, 6), "scales": (2, 64), "g_idx": (160,)},
                     id="3bit-short-last-group"),
        pytest.param(128, 64, 8, -1, {"qweight": (32, 64), "qzeros": (1, 16), "scales": (1, 64), "g_idx": (128,)},
                     id="8bit-one-group"),
    ],
)
def test_tensor_shapes_are_functions_of_the_dimensions(k, n, bits, gs, expected):
    """GPTQ-2.2: qweight (K*b/32, N), qzeros (G, N*b/32), scales (G, N), g_idx (K,)."""
    specs = layout.tensor_specs(k, n, bits, gs)
    assert {name: spec.shape for name, spec in specs.items() if name != "bias"} == expected
    assert specs["qweight"].dtype == "int32" and specs["scales"].dtype == "float16"


def test_3bit_needs_whole_words():
    """GPTQ-2.4: K * bits must fill whole 32-bit words (K % 32 == 0 at 3 bits)."""
    with pytest.raises(QFormatsError) as info:
        layout.tensor_specs(48, 64, 3, 16)
    assert info.value.code == "bits.length"
