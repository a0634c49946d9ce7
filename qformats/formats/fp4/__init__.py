"""NVFP4 and MXFP4 safetensors layouts (spec/fp4.md): compressed-tensors ``nvfp4-pack-quantized`` and
``mxfp4-pack-quantized``, gpt-oss MXFP4 experts.

    from qformats.formats import fp4
    w = fp4.nvfp4_dequantize(weight_packed, weight_scale, weight_global_scale)   # (out, in) float32, bf16 values
    w = fp4.mxfp4_dequantize(weight_packed, weight_scale)                       # (out, in)
    w = fp4.gpt_oss_dequantize(blocks, scales)                                  # (experts, out, in)
"""

from .codec import gpt_oss_dequantize, mxfp4_dequantize, nvfp4_dequantize, pack, unpack
from .layers import decode_module
from .layout import FP4Scheme, GptOssConfig

__all__ = ["FP4Scheme", "GptOssConfig", "decode_module", "gpt_oss_dequantize", "mxfp4_dequantize",
           "nvfp4_dequantize", "pack", "unpack"]
