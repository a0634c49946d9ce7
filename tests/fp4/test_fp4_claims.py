"""FP4-5.3: which room a module goes to, from the config and the module's own config group."""

from __future__ import annotations

from qformats.validate import group_layers

NAMES = [f"model.layers.0.{m}.{s}" for m in ("self_attn.q_proj", "mlp.down_proj")
         for s in ("weight_packed", "weight_scale")]


def _config(q_format: str, down_format: str) -> dict:
    def group(targets, fmt, weights):
        return {"targets": targets, "format": fmt, "weights": weights}
    fp4 = {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group", "group_size": 16}
    int4 = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}
    return {"quant_method": "compressed-tensors", "format": "mixed-precision",
            "config_groups": {"group_0": group(["re:.*q_proj$"], q_format, fp4 if "nvfp4" in q_format else int4),
                              "group_1": group(["re:.*down_proj$"], down_format,
                                               fp4 if "nvfp4" in down_format else int4)}}


def test_mixed_config_sends_each_module_to_its_groups_format():
    """FP4-5.3: in a config mixing NVFP4 and pack-quantized int groups, each weight_packed module goes to the
    room of its own group's format."""
    layers, foreign = group_layers(NAMES, _config("nvfp4-pack-quantized", "pack-quantized"))
    assert {g.name: g.format for g in layers} == {"model.layers.0.self_attn.q_proj": "fp4",
                                                  "model.layers.0.mlp.down_proj": "ctensors"}
    assert foreign == {}


def test_int_only_config_leaves_weight_packed_to_ctensors():
    """FP4-5.3: without an FP4 group the FP4 room claims nothing."""
    layers, _ = group_layers(NAMES, _config("pack-quantized", "pack-quantized"))
    assert {g.format for g in layers} == {"ctensors"}


def test_gpt_oss_experts_are_claimed_with_all_their_tensors():
    """FP4-5.3, FP4-2.5: gate_up_proj_blocks claims the experts module, with both projections' tensors."""
    names = [f"model.layers.0.mlp.experts.{p}_{s}" for p in ("gate_up_proj", "down_proj")
             for s in ("blocks", "scales", "bias")]
    layers, foreign = group_layers(names, {"quant_method": "mxfp4"})
    assert [(g.name, g.format, sorted(g.tensors)) for g in layers] == [
        ("model.layers.0.mlp.experts", "gpt_oss_mxfp4", sorted(n.rpartition(".")[2] for n in names))]
    assert foreign == {}


def test_nvfp4_and_fp8_groups_each_keep_their_modules():
    """FP4-5.3: NVFP4 modules (weight_packed, weight_scale) go to the FP4 room even where the FP8 room claims
    the checkpoint's weight_scale modules; the FP8 module stays with FP8."""
    config = _config("nvfp4-pack-quantized", "pack-quantized")
    config["config_groups"]["group_1"] = {"targets": ["re:.*down_proj$"], "format": "float-quantized",
                                          "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
    names = ["model.layers.0.self_attn.q_proj." + s for s in ("weight_packed", "weight_scale", "weight_global_scale")]
    names += ["model.layers.0.mlp.down_proj." + s for s in ("weight", "weight_scale")]
    layers, foreign = group_layers(names, config)
    assert {g.name: g.format for g in layers} == {"model.layers.0.self_attn.q_proj": "fp4",
                                                  "model.layers.0.mlp.down_proj": "fp8"}
    assert foreign == {}
