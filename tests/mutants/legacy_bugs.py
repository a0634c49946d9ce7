"""Deliberately wrong q4_0 / q4_1 / q5_0 / q5_1 / q8_0 kernels, each imitating a real bug (tests/mutants/README.md).

Decoders are called as conformance subjects ``fn(blocks=, rows=, n=)``, encoders ``fn(x=)``; each must fail
the case named in ``MUTANTS`` (spec/ggml_legacy.md gives the rule each one breaks).
"""

from __future__ import annotations

import numpy as np

from qformats.formats import ggml
from qformats.formats.ggml import legacy

F32 = np.float32


def _blocks(blocks, size):
    return np.asarray(blocks, np.uint8).reshape(-1, size)


def _fp16(blk, offset):
    return np.ascontiguousarray(blk[:, offset:offset + 2]).view("<f2").astype(F32)


def _pairs(qs):
    """Weight 2j in the low nibble of qs[j], 2j+1 in the high one: the pre-2023-05 order."""
    return np.stack([qs & 15, qs >> 4], axis=2).reshape(qs.shape[0], -1)


def q4_0_nibbles_as_consecutive_pairs(*, blocks, rows, n):
    """q4_0 codes read as neighbouring pairs, as ggml packed them before llama.cpp PR #1405 ("remove bit
    shuffling", 2023-05, GGML_QNT_VERSION 0): a reader of the old layout on a GGUF file (LEG-1.2)."""
    blk = _blocks(blocks, 18)
    with np.errstate(all="ignore"):
        y = (_pairs(blk[:, 2:]).astype(F32) - F32(8)) * _fp16(blk, 0)
    return y.reshape(rows, -1)


def q4_1_minus_m(*, blocks, rows, n):
    """``q*d - m``: q4_K's ``- dmin*m`` convention carried over to q4_1, whose ``m`` is the signed block
    minimum and is added (LEG-3.2)."""
    blk = _blocks(blocks, 20)
    with np.errstate(all="ignore"):
        y = legacy.unpack_nibbles(blk[:, 4:]).astype(F32) * _fp16(blk, 0) - _fp16(blk, 2)
    return y.reshape(rows, -1)


def q5_0_fifth_bit_halves_swapped(*, blocks, rows, n):
    """Weight j takes bit j + 16 of qh and weight j + 16 takes bit j: the two 16-bit halves of the u32
    exchanged, as a port that pairs ``xh_0``/``xh_1`` with the wrong nibble does (LEG-1.3)."""
    blk = _blocks(blocks, 22)
    high = legacy.unpack_fifth_bits(blk[:, 2:6])
    high = np.concatenate([high[:, 16:], high[:, :16]], axis=1)
    codes = legacy.unpack_nibbles(blk[:, 6:]) | high
    with np.errstate(all="ignore"):
        y = (codes.astype(F32) - F32(16)) * _fp16(blk, 0)
    return y.reshape(rows, -1)


def q5_1_qh_big_endian(*, blocks, rows, n):
    """qh read as a big-endian u32 (``struct.unpack('>I')``, or ggml's ``memcpy`` on a big-endian host
    reading a little-endian file): byte 3 holds weights 0..7 (LEG-1.3)."""
    blk = _blocks(blocks, 24)
    codes = legacy.unpack_nibbles(blk[:, 8:]) | legacy.unpack_fifth_bits(blk[:, 4:8][:, ::-1])
    with np.errstate(all="ignore"):
        y = codes.astype(F32) * _fp16(blk, 0) + _fp16(blk, 2)
    return y.reshape(rows, -1)


def q8_0_codes_unsigned(*, blocks, rows, n):
    """q8_0 codes read as uint8 (``np.frombuffer`` without ``.view(np.int8)``): −1 becomes 255 (LEG-6.2)."""
    blk = _blocks(blocks, 34)
    with np.errstate(all="ignore"):
        y = blk[:, 2:].astype(F32) * _fp16(blk, 0)
    return y.reshape(rows, -1)


def _q8_0_encoder(rounding):
    """quantize_row_q8_0_ref with ``roundf`` replaced by ``rounding`` (LEG-6.4)."""
    def quantize(*, x):
        xb = np.asarray(x, F32).reshape(-1, 32)
        with np.errstate(all="ignore"):
            amax = np.zeros(xb.shape[0], F32)
            for j in range(32):
                a = np.abs(xb[:, j])
                amax = np.where(amax > a, amax, a)
            d = amax / F32(127)
            idv = np.where(d != 0, F32(1) / d, F32(0))[:, None]
            q = legacy.c_int8(rounding(xb * idv))
        out = np.empty((xb.shape[0], 34), np.uint8)
        out[:, 0:2] = legacy.fp16_bits_ggml(d).astype("<u2").reshape(-1, 1).view(np.uint8)
        out[:, 2:] = q.astype(np.int8).view(np.uint8)
        return out.reshape(np.shape(x)[0], -1)
    return quantize


def _floor_half(v):
    return np.copysign(np.floor(np.abs(v) + F32(0.5)), v)


def q8_0_ties_to_even(*, x):
    """q8_0 codes rounded half to even (NumPy ``round``/``rint``, ``torch.round``) instead of C ``roundf``'s
    half away from zero: a NumPy GGUF writer (LEG-6.4). Differs only on exact ties (LEG-6.6)."""
    return _q8_0_encoder(np.rint)(x=x)


def q8_0_floor_plus_half(*, x):
    """q8_0 codes as ``sign(v) * floor(|v| + 0.5)`` in float32: the addition rounds 0.49999997 up to 1
    (GPTQModel's ``_gguf_roundf``, reviewed in GPTQModel PR #3058) (LEG-1.4)."""
    return _q8_0_encoder(_floor_half)(x=x)


def q8_0_positive_zeros(*, blocks, rows, n):
    """q8_0 decoded right, then ``+ 0.0``: every -0.0 (a negative d times code 0) becomes +0.0 (GGML-2.2)."""
    return ggml.dequantize("q8_0", blocks) + np.float32(0)


def q4_1_d_m_swapped(*, blocks, rows, n):
    """q4_1 read with ``m`` at byte 0 and ``d`` at byte 2: block_q4_1's ``ggml_half2 dm`` unpacked in the
    wrong order (LEG-3.1)."""
    blk = _blocks(blocks, 20)
    with np.errstate(all="ignore"):
        y = legacy.unpack_nibbles(blk[:, 4:]).astype(F32) * _fp16(blk, 2) + _fp16(blk, 0)
    return y.reshape(rows, -1)


def q5_0_nibbles_high_first(*, blocks, rows, n):
    """q5_0 weight j takes the high nibble of qs[j] and weight j + 16 the low one, while the fifth bits stay
    where they belong (bit j, bit j + 16 of qh): the nibble shifts exchanged (LEG-1.2)."""
    blk = _blocks(blocks, 22)
    qs = blk[:, 6:]
    low = np.concatenate([qs >> 4, qs & 15], axis=1)
    codes = low | legacy.unpack_fifth_bits(blk[:, 2:6])
    with np.errstate(all="ignore"):
        y = (codes.astype(F32) - F32(16)) * _fp16(blk, 0)
    return y.reshape(rows, -1)


MUTANTS = [
    ("legacy_bugs:q4_0_nibbles_as_consecutive_pairs", "q4_0", "dequantize",
     "q4_0 codes read as neighbouring nibble pairs (ggml's layout before llama.cpp PR #1405, GGML_QNT_VERSION 0)",
     r"q4_0/read/random_bits_0"),
    ("legacy_bugs:q4_1_minus_m", "q4_1", "dequantize",
     "q*d - m: q4_K's subtracted-min convention applied to q4_1, whose m is added", r"q4_1/read/random_bits_0"),
    ("legacy_bugs:q5_0_fifth_bit_halves_swapped", "q5_0", "dequantize",
     "q5_0 fifth bits of weights j and j+16 exchanged (qh bit j+16 read for weight j)", r"q5_0/read/random_bits_0"),
    ("legacy_bugs:q5_1_qh_big_endian", "q5_1", "dequantize",
     "q5_1 qh read as a big-endian u32 (a big-endian host's memcpy, struct '>I')", r"q5_1/read/random_bits_0"),
    ("legacy_bugs:q8_0_codes_unsigned", "q8_0", "dequantize",
     "q8_0 int8 codes read as uint8 (np.frombuffer without the int8 view)", r"q8_0/read/random_bits_0"),
    ("legacy_bugs:q8_0_positive_zeros", "q8_0", "dequantize",
     "-0.0 turned into +0.0 by adding a dense zero matrix (w + 0.0) after a correct decode", r"q8_0/read/zero_[01]"),
    # encoders: killed on exact ties (every x * id = k + 0.5) when judged at the level they claim (GGML-5.3)
    ("legacy_bugs:q8_0_ties_to_even", "q8_0", "quantize",
     "q8_0 encoder rounding ties to even (NumPy round / torch.round) instead of roundf's ties away from zero",
     r"q8_0/quantize/exact_ties"),
    ("legacy_bugs:q8_0_floor_plus_half", "q8_0", "quantize",
     "q8_0 encoder rounding by floor(|v| + 0.5) in float32 (GPTQModel _gguf_roundf, PR #3058 review)",
     r"q8_0/quantize/exact_ties"),
    ("legacy_bugs:q4_1_d_m_swapped", "q4_1", "dequantize",
     "q4_1 d and m read in each other's place (block_q4_1's half2 dm unpacked as m, d)", r"q4_1/read/random_bits_0"),
    ("legacy_bugs:q5_0_nibbles_high_first", "q5_0", "dequantize",
     "q5_0 nibble shifts exchanged: weight j from the high nibble, j + 16 from the low, fifth bits in place",
     r"q5_0/read/random_bits_0"),
]
