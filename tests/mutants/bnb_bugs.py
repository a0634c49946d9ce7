"""Deliberately wrong bitsandbytes 4-bit and LLM.int8 decoders, each imitating a real bug class
(tests/mutants/README.md; spec/bnb.md BNB-9.2). Each has the bnb_4bit or bnb_int8 call contract (spec/kernels.md
KC-1.10) and must fail the case named in ``MUTANTS``. They decode without checking anything, as the readers
they imitate do.
"""

from __future__ import annotations

import numpy as np

from qformats.elements import E2M1, table
from qformats.formats.bnb import codec


def _scales(absmax, nested_absmax, nested_quant_map, nested_offset, *, offset=True):
    if nested_absmax is None:
        return np.asarray(absmax, np.float32)
    added = float(np.asarray(nested_offset).reshape(())) if offset else 0.0
    return codec.scales(absmax, nested_absmax, nested_quant_map, added)


def _decode(codes, table_, scales, block, dtype, shape):
    w = np.asarray(table_, np.float32)[codes] * np.take(scales, block, mode="clip")
    return codec.to_dtype(w, dtype).reshape(tuple(shape))


def _codes(packed, n, *, low_first=False):
    b = np.asarray(packed, np.uint8).reshape(-1)
    first, second = (b & 0xF, b >> 4) if low_first else (b >> 4, b & 0xF)
    return np.stack([first, second], axis=1).reshape(-1)[:n]


def _mutant(*, low_first=False, e2m1=False, offset=True, per_row=False, trust_map=False):
    def dequantize(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, nested_absmax=None,
                   nested_quant_map=None, nested_offset=None):
        n_out, k = shape
        codes = _codes(packed, n_out * k, low_first=low_first)
        if trust_map:
            t = quant_map
        elif e2m1 and quant_type == "fp4":
            t = table(E2M1)
        else:
            t = codec.TABLES[quant_type]
        if per_row:       # blocks restart at each row: block r * ceil(K / B) + k // B
            block = (np.arange(n_out)[:, None] * -(-k // blocksize) + np.arange(k)[None, :] // blocksize).reshape(-1)
        else:
            block = np.arange(n_out * k) // blocksize
        s = _scales(absmax, nested_absmax, nested_quant_map, nested_offset, offset=offset)
        return _decode(codes, t, s, block, dtype, shape)
    return dequantize


# element 2i taken from the low nibble (the GGUF q4_0 / gpt-oss convention applied to bitsandbytes bytes)
nibbles_low_first = _mutant(low_first=True)
# FP4 codes decoded with the OCP E2M1 element (the MXFP4 / NVFP4 table) instead of bitsandbytes' own FP4
fp4_as_e2m1 = _mutant(e2m1=True)
# double quantization decoded as map[code] * nested_absmax, the offset (mean absmax) never added back
nested_offset_dropped = _mutant(offset=False)
# blocks counted per row of the (N, K) weight, as group-wise formats do, not over the flattened tensor
absmax_per_row = _mutant(per_row=True)
# the stored quant_map used as the code table; bitsandbytes rebuilds it from quant_type (BNB-2.4)
quant_map_trusted = _mutant(trust_map=True)



def _int8_mutant(*, reciprocal=True, per_column=False):
    def dequantize(*, weight, SCB, dtype):  # noqa: N803 (the stored name)
        w = np.asarray(weight).astype(np.float32)
        scb = np.asarray(SCB, np.float32)
        w = w * (scb[None, :] if per_column else scb[:, None])    # per column: numpy broadcasts only a square W
        return codec.to_dtype(w * codec.INT8_RECIPROCAL if reciprocal else w, dtype)
    return dequantize


# LLM.int8 decoded as weight * SCB, the division by 127 forgotten: every value 127 times too large
int8_scb_not_divided = _int8_mutant(reciprocal=False)
# SCB applied per column (weight * SCB without the (-1, 1) view): runs on a square W, q_proj or o_proj, only
int8_scb_per_column = _int8_mutant(per_column=True)

MUTANTS = [
    ("bnb_bugs:nibbles_low_first", "bnb_4bit", "dequantize",
     "bitsandbytes bytes read low nibble first (element 2i from bits 0-3: the q4_0 / gpt-oss order)",
     r"bnb_4bit/read/nf4_b64"),
    ("bnb_bugs:fp4_as_e2m1", "bnb_4bit", "dequantize",
     "bitsandbytes FP4 codes decoded as the OCP E2M1 element of MXFP4 / NVFP4 (another table, another code order)",
     r"bnb_4bit/read/fp4_b64"),
    ("bnb_bugs:nested_offset_dropped", "bnb_4bit", "dequantize",
     "double-quantized absmax decoded without adding nested_offset back (map[code] * nested_absmax only)",
     r"bnb_4bit/read/nf4_b64_dq"),
    ("bnb_bugs:absmax_per_row", "bnb_4bit", "dequantize",
     "absmax blocks counted per row of (N, K), as group-wise formats do, instead of over the flattened tensor",
     r"bnb_4bit/read/nf4_b64"),
    ("bnb_bugs:quant_map_trusted", "bnb_4bit", "dequantize",
     "the stored quant_map used as the code table where bitsandbytes rebuilds it from quant_type",
     r"bnb_4bit/read/invalid/quant_map_mismatch"),
    ("bnb_bugs:int8_scb_not_divided", "bnb_int8", "dequantize",
     "LLM.int8 decoded as weight * SCB, the division by 127 (the int8 range) forgotten",
     r"bnb_int8/read/int8_7x33_float16"),
    ("bnb_bugs:int8_scb_per_column", "bnb_int8", "dequantize",
     "LLM.int8 SCB applied per column (weight * SCB without the (-1, 1) view), which runs on a square weight only",
     r"bnb_int8/read/int8_48x48_float16"),
]
