"""bitsandbytes NF4 / FP4 (4-bit, optional double quantization) and LLM.int8 checkpoints: spec/bnb.md.

    from qformats.formats import bnb
    w = bnb.dequantize_4bit(packed, absmax, quant_type="nf4", blocksize=64, shape=(n, k), dtype="bfloat16")
    packed, absmax = bnb.quantize_4bit(x, quant_type="nf4", blocksize=64)     # byte-exact with bitsandbytes
    codes, nested_absmax, offset = bnb.quantize_absmax(absmax)                # double quantization
    absmax = bnb.scales(codes, nested_absmax, offset=offset)                   # its float32 decode
    w = bnb.dequantize_int8(weight, scb, dtype="float16")                      # LLM.int8
"""

from .codec import (FP4, NF4, dequantize_4bit, dequantize_int8, dynamic_map, quantize_4bit, quantize_absmax,
                    scales)

__all__ = ["FP4", "NF4", "dequantize_4bit", "dequantize_int8", "dynamic_map", "quantize_4bit", "quantize_absmax",
           "scales"]
