"""compressed-tensors ``pack-quantized`` (int 1..8 bits, dense LSB-first packing, offset codes):
spec/compressed_tensors.md.

    from qformats.formats import ctensors
    layer = ctensors.pack(q, scales, num_bits=4, group_size=128, zero_points=None)   # q signed (out, in)
    w = ctensors.dequantize(layer, num_bits=4)                                       # (out, in) float32
    g = ctensors.to_gptq(layer, num_bits=4)                                          # GPTQ v2, where representable
    d = ctensors.to_dense(old_layer, num_bits=3)      # compressed-tensors <= 0.17's per-word bytes repacked dense
"""

from .codec import CTLayer, dequantize, pack, unpack
from .convert import from_awq, from_gptq, to_awq, to_dense, to_gptq
from .layout import CTConfig, parse_config

__all__ = ["CTLayer", "CTConfig", "dequantize", "from_awq", "from_gptq", "pack", "parse_config", "to_awq", "to_dense",
           "to_gptq", "unpack"]
