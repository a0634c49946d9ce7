"""GPTQ v1 ("zero stored minus one") and v2 ("zero stored exactly"): spec/gptq.md.

    from qformats.formats import gptq
    layer = gptq.pack(codes, zeros, scales, bits=4, version="v1")
    w = gptq.dequantize(layer, bits=4, version="v1")        # (out, in) float32
"""

from .codec import GPTQLayer, convert, dequantize, pack, quantize, unpack
from .layout import GPTQConfig, parse_config, tensor_specs

__all__ = ["GPTQLayer", "GPTQConfig", "convert", "dequantize", "pack", "parse_config", "quantize",
           "tensor_specs", "unpack"]
