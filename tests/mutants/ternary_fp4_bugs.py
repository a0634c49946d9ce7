"""Deliberately wrong tq1_0 / tq2_0 / mxfp4 decoders, each imitating a real bug class (tests/mutants/README.md).

Each is called as a conformance subject ``fn(blocks=, rows=, n=)`` and must fail the case named in ``MUTANTS``.
"""

from __future__ import annotations

import numpy as np

from qformats.formats.ggml.mxfp4 import KVALUES_MXFP4

F32 = np.float32
E2M1 = KVALUES_MXFP4.astype(F32) / F32(2)      # the OCP E2M1 values: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives


def _blocks(blocks, size):
    return np.asarray(blocks, np.uint8).reshape(-1, size)


def _fp16(blk, offset):
    return np.ascontiguousarray(blk[:, offset:offset + 2]).view("<f2").astype(F32)


# ------------------------------------------------------------------------------------------ mxfp4 (MX-1)

def _mxfp4(blocks, rows, scale_of_e, *, pairs=False, values=None):
    blk = _blocks(blocks, 17)
    qs = blk[:, 1:]
    if pairs:
        codes = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 32)
    else:
        codes = np.concatenate([qs & 15, qs >> 4], axis=1)
    table = KVALUES_MXFP4.astype(F32) if values is None else values
    with np.errstate(all="ignore"):
        y = table[codes] * scale_of_e(blk[:, 0])[:, None]
    return y.reshape(rows, -1)


def _ggml_half(e):
    return np.ldexp(1.0, e.astype(np.int32) - 128).astype(F32)


def mxfp4_e8m0_without_half(*, blocks, rows, n):
    """``kvalues_mxfp4[c] * 2^(e - 127)``: ggml's doubled E2M1 table with the OCP scale (ggml_e8m0_to_fp32,
    not ggml_e8m0_to_fp32_half): every weight twice its value (MX-1.2)."""
    return _mxfp4(blocks, rows, lambda e: np.ldexp(1.0, e.astype(np.int32) - 127).astype(F32))


def mxfp4_e8m0_as_ieee_bits(*, blocks, rows, n):
    """E8M0 read as a float32 exponent field, ``bits = e << 23`` (a port of ggml_e8m0_to_fp32 without its
    ``x == 0`` branch): e = 0 becomes +0.0 instead of 2^-127, and e = 0xFF inf (MX-1.2)."""
    return _mxfp4(blocks, rows, lambda e: (e.astype(np.uint32) << 23).view(F32), values=E2M1)


def mxfp4_nibbles_as_consecutive_pairs(*, blocks, rows, n):
    """Weight 2j in the low nibble of qs[j], 2j+1 in the high one: the gpt-oss safetensors order
    (transformers ``convert_moe_packed_tensors``: ``out[:, 0::2] = lut[lo]; out[:, 1::2] = lut[hi]``),
    not ggml's low = 0..15 / high = 16..31 (MX-1.1)."""
    return _mxfp4(blocks, rows, _ggml_half, pairs=True)


# ------------------------------------------------------------------------------------------ tq2_0 (TQ-2)

def _tq2_codes(blk, *, pairs=False):
    qs = blk[:, :64]
    shifts = np.array([0, 2, 4, 6], np.uint8)
    if pairs:
        return ((qs[:, :, None] >> shifts) & 3).reshape(-1, 256)
    return ((qs.reshape(-1, 2, 1, 32) >> shifts[:, None]) & 3).reshape(-1, 256)


def tq2_0_code_not_minus_one(*, blocks, rows, n):
    """``q * d`` instead of ``(q - 1) * d``: codes read as unsigned 0..3, the offset of the ternary
    encoding forgotten (TQ-2.2)."""
    blk = _blocks(blocks, 66)
    with np.errstate(all="ignore"):
        return (_tq2_codes(blk).astype(F32) * _fp16(blk, 64)).reshape(rows, -1)


def tq2_0_codes_as_consecutive_quads(*, blocks, rows, n):
    """Weight 4i + l in bits 2l of qs[i] (the q2-style dense order) instead of ggml's weight 128h + 32l + m
    in bits 2l of qs[32h + m] (TQ-2.1)."""
    blk = _blocks(blocks, 66)
    with np.errstate(all="ignore"):
        return ((_tq2_codes(blk, pairs=True).astype(F32) - F32(1)) * _fp16(blk, 64)).reshape(rows, -1)


# ------------------------------------------------------------------------------------------ tq1_0 (TQ-1)

def _tq1_layout():
    byte = np.empty(256, np.intp)
    pos = np.empty(256, np.intp)
    for k in range(5):
        byte[32 * k:32 * k + 32], pos[32 * k:32 * k + 32] = np.arange(32), k
        byte[160 + 16 * k:176 + 16 * k], pos[160 + 16 * k:176 + 16 * k] = 32 + np.arange(16), k
    for k in range(4):
        byte[240 + 4 * k:244 + 4 * k], pos[240 + 4 * k:244 + 4 * k] = 48 + np.arange(4), k
    return byte, pos


def _tq1(blocks, rows, trit):
    blk = _blocks(blocks, 54)
    byte, pos = _tq1_layout()
    t = trit(blk[:, byte].astype(np.int32), pos)
    with np.errstate(all="ignore"):
        return ((t - 1).astype(F32) * _fp16(blk, 52)).reshape(rows, -1)


def tq1_0_plain_base3_digits(*, blocks, rows, n):
    """Trits read as the plain base-3 digits of the byte, ``(b // 3^(4 - n)) % 3``, without the
    fixed-point step (ggml stores ``ceil(q * 256 / 243)`` and extracts ``((b * 3^n mod 256) * 3) >> 8``,
    TQ-1.2): right only for bytes 0 and 1."""
    return _tq1(blocks, rows, lambda b, k: (b // 3 ** (4 - k)) % 3)


def tq1_0_trit_without_uint8_wrap(*, blocks, rows, n):
    """``(b * 3^n * 3) >> 8`` with the product kept in a wide integer: the ``uint8_t q`` store that drops
    the trits above n is lost (TQ-1.2), so trits 1..4 come out as 0..728 and decode to big multiples of d."""
    return _tq1(blocks, rows, lambda b, k: (b * 3 ** k * 3) >> 8)


MUTANTS = [
    ("ternary_fp4_bugs:mxfp4_e8m0_without_half", "mxfp4", "dequantize",
     "kvalues_mxfp4 (doubled E2M1) times 2^(e-127): ggml_e8m0_to_fp32 where ggml uses the _half variant",
     r"mxfp4/read/random_bits_\d"),
    ("ternary_fp4_bugs:mxfp4_e8m0_as_ieee_bits", "mxfp4", "dequantize",
     "E8M0 read as a float32 exponent field (bits = e << 23): e = 0 decodes to +0 instead of 2^-127",
     r"mxfp4/read/random_bits_0"),
    ("ternary_fp4_bugs:mxfp4_nibbles_as_consecutive_pairs", "mxfp4", "dequantize",
     "gpt-oss safetensors nibble order (transformers convert_moe_packed_tensors: lo -> 0::2, hi -> 1::2)",
     r"mxfp4/read/random_bits_\d"),
    ("ternary_fp4_bugs:tq2_0_code_not_minus_one", "tq2_0", "dequantize",
     "tq2_0 codes decoded as q * d instead of (q - 1) * d", r"tq2_0/read/random_bits_\d"),
    ("ternary_fp4_bugs:tq2_0_codes_as_consecutive_quads", "tq2_0", "dequantize",
     "tq2_0 2-bit codes in dense order (weight 4i + l in qs[i]) instead of ggml's 32-byte groups",
     r"tq2_0/read/random_bits_\d"),
    ("ternary_fp4_bugs:tq1_0_plain_base3_digits", "tq1_0", "dequantize",
     "tq1_0 trits as plain base-3 digits of the byte, without the 256/243 fixed-point rounding step",
     r"tq1_0/read/random_bits_\d"),
    ("ternary_fp4_bugs:tq1_0_trit_without_uint8_wrap", "tq1_0", "dequantize",
     "tq1_0 trit extraction with the byte * 3^n product not truncated to uint8", r"tq1_0/read/random_bits_\d"),
]
