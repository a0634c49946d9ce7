"""FP8 checkpoints (E4M3FN weights, float scales): spec/fp8.md.

    from qformats.formats import fp8
    config = fp8.parse_config(quantization_config)          # compressed-tensors float-quantized, fp8, fbgemm_fp8
    scheme = fp8.module_schemes(config, ["model.layers.0.mlp.down_proj"])["model.layers.0.mlp.down_proj"]
    w = fp8.dequantize(layer, strategy=scheme.strategy, block=scheme.block, group_size=scheme.group_size,
                       scale_name=scheme.scale)                # (out, in) float32
"""

from .codec import dequantize, expand, grid
from .layout import FbgemmConfig, FP8Config, ModuleScheme, layout_of, module_schemes, parse_config

__all__ = ["FP8Config", "FbgemmConfig", "ModuleScheme", "dequantize", "expand", "grid", "layout_of",
           "module_schemes", "parse_config"]
