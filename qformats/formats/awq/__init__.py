"""AWQ GEMM ("zero stored as it is", codes packed along the output axis): spec/awq.md.

    from qformats.formats import awq
    layer = awq.pack(codes, zeros, scales, group_size=128)     # codes (in, out), zeros/scales (G, out)
    w = awq.dequantize(layer)                                  # (out, in) float32
    g = awq.to_gptq(layer)                                     # the same weights as a GPTQ v2 layer
"""

from .codec import AWQLayer, dequantize, from_gptq, pack, to_gptq, unpack
from .layout import AWQConfig, parse_config, tensor_specs

__all__ = ["AWQLayer", "AWQConfig", "dequantize", "from_gptq", "pack", "parse_config", "tensor_specs", "to_gptq",
           "unpack"]
