"""nvfp4: 64 E2M1 codes in four 16-weight sub-blocks, each with a UE4M3 scale (spec/ggml_ternary_fp4.md, MX-2).

ggml stores E2M1 values doubled (``kvalues_fp4``, shared with mxfp4) and halves the scale instead
(``ggml_ue4m3_to_fp32`` returns half the UE4M3 value), so a weight is ``kvalues[c] * D(d[s])``: one float32
product, always exact and finite. ``D`` ignores bit 7 of the scale byte and maps 0x00 and 0x7F to 0, so
0xFF reads as 240 while 0x7F reads as 0 (MX-2.2). ``ggml_validate_row_data`` accepts every byte (MX-2.4).
Facts are from ggml 0.25.3 ``src/ggml-common.h`` (``block_nvfp4``, ``kvalues_fp4``), ``src/ggml-impl.h``
(``ggml_ue4m3_to_fp32``, ``ggml_fp32_to_ue4m3``) and ``src/ggml-quants.c`` (``dequantize_row_nvfp4``,
``quantize_row_nvfp4_ref``, ``best_index_mxfp4``); ggml 0.10.1 has the same text. The code is qformats' own; the
UE4M3 values come from the shared element table (``qformats.elements``, spec/float_elements.md FE-7).
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import GGML_TYPES
from ...elements import UE4M3, decode as decode_element
from .base import F32, BlockType
from .kmachinery_qkx import bounded_passes
from .mxfp4 import KVALUES_MXFP4, _best_index as best_index_fp4

__all__ = ["TYPES", "UE4M3_HALF", "ue4m3", "fp32_to_ue4m3", "unpack_codes"]

_T = next(t for t in GGML_TYPES.values() if t.name == "NVFP4")
QK = _T.block_size              # 64 weights: d[4] (4 bytes) | qs[32]
SUB = 16                        # QK_NVFP4_SUB: weights per UE4M3 scale
NSUB = QK // SUB
assert _T.type_size == NSUB + QK // 2
_CHUNK = 8192                   # blocks per encoder pass
_KF = KVALUES_MXFP4.astype(F32)


def _ue4m3_half_table() -> np.ndarray:
    """``ggml_ue4m3_to_fp32(x)`` for every byte (MX-2.2): half the UE4M3 value (FE-7.3) of x with bit 7 ignored,
    exact in float32, except for E4M3's NaN pattern (FE-7.2): ggml tests ``x == 0x7F`` before dropping bit 7, so
    0x7F reads as 0 while 0xFF reads as exponent 15, mantissa 7 by the plain field formula (FE-1.2): 480 / 2."""
    half = decode_element(np.arange(256) & 0x7F, UE4M3) * F32(0.5)
    half[0x7F] = 0.0
    half[0xFF] = np.ldexp(1 + 7 / 8, 15 - 7) * 0.5
    return half


UE4M3_HALF = _ue4m3_half_table()


def ue4m3(d: np.ndarray) -> np.ndarray:
    """The UE4M3 value ggml reads from scale bytes ``d`` (twice ``UE4M3_HALF``): finite, never negative."""
    return UE4M3_HALF[d] * F32(2)


# qs[32], sub-block s = 0..3 owns bytes 8s .. 8s+7 (MX-2.1):
#
#   byte 4 + 8s + j:  [ c(16s + 8 + j) 7:4 | c(16s + j) 3:0 ]      j = 0..7


def unpack_codes(qs: np.ndarray) -> np.ndarray:
    """(nb, 32) uint8 -> (nb, 64) codes in weight order."""
    q = qs.reshape(qs.shape[0], NSUB, SUB // 2)
    return np.concatenate([q & 0x0F, q >> 4], axis=2).reshape(qs.shape[0], QK)


# Every weight is one exact float32 product kvalues[c] * D(d) of a scale byte and a nibble, so a qs byte and its
# sub-block's scale byte name both of their weights' values: one table, built from that same product, of the
# (low-nibble weight, high-nibble weight) float32 pair for each index (scale byte << 8 | qs byte), 512 KiB,
# stored as one uint64 a pair so one gather fetches both.
_pair = np.arange(1 << 16)
_PAIRS = np.stack([_KF[_pair & 0x0F] * UE4M3_HALF[_pair >> 8],
                   _KF[(_pair >> 4) & 0x0F] * UE4M3_HALF[_pair >> 8]], axis=1).astype(F32).view(np.uint64).reshape(-1)
del _pair
_DECODE_BLOCKS = 4096           # blocks per decode pass: the index, the pairs and the output stay in cache


@bounded_passes
def _decode(blk: np.ndarray) -> np.ndarray:
    """``y = kvalues[c] * D(d[s])`` (MX-2.3), read from ``_PAIRS``: per pass, each qs byte's index (its scale
    byte repeated over the sub-block's 8 bytes), one gather of (low, high) pairs, then the pairs' two halves
    written as the sub-block's first and last 8 weights (MX-2.1). Measured on 4.2M weights: 6.0 ms, where
    widening the codes and multiplying by the repeated scales took 12.9 ms (the product is the same float32
    value either way: -0.0 for negative codes times a zero scale, as in C)."""
    nb = blk.shape[0]
    out = np.empty((nb, QK), F32)
    for start in range(0, nb, _DECODE_BLOCKS):
        part = blk[start:start + _DECODE_BLOCKS]
        n = part.shape[0]
        index = np.repeat(part[:, :NSUB].astype(np.intp) << 8, SUB // 2).reshape(n, NSUB, SUB // 2)
        index |= part[:, NSUB:].reshape(n, NSUB, SUB // 2)
        pairs = _PAIRS.take(index).view(F32).reshape(n, NSUB, SUB // 2, 2)
        out[start:start + n].reshape(n, NSUB, 2, SUB // 2)[...] = pairs.transpose(0, 1, 3, 2)
    return out


def _scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": ue4m3(blk[:, :NSUB])}


# ---------------------------------------------------------------------------------------------
# reference encoder (MX-2.5)
# ---------------------------------------------------------------------------------------------


def fp32_to_ue4m3(x: np.ndarray) -> np.ndarray:
    """``ggml_fp32_to_ue4m3(x)`` for float32 ``x`` (MX-2.5 step 2), uint8.

    ``!(x > 0)`` (NaN included) -> 0; ``x > 448`` clamps to 448; below 2^-6 (UE4M3 exponent field <= 0) the
    subnormal mantissa ``(int)(x * 512.0f + 0.5f)`` capped at 7 (so [15/1024, 2^-6) gives 7, not 2^-6's 0x08);
    otherwise the top three mantissa bits plus bit 19 (ties away from zero), carrying into the exponent;
    any exponent field >= 15 gives 0x7E (448), so 0x78 .. 0x7D are never written.
    """
    x = np.asarray(x, F32)
    pos = x > 0
    x = np.where(x > F32(448), F32(448), np.where(pos, x, F32(1)))   # placeholder 1 where the answer is 0
    bits = x.view(np.uint32).astype(np.int64)
    exp = ((bits >> 23) & 0xFF) - 127 + 7                 # the subnormal test comes before the rounding
    man = ((bits >> 20) & 7) + ((bits >> 19) & 1)
    carry = man > 7
    up, man = np.where(carry, exp + 1, exp), np.where(carry, 0, man)
    normal = np.where(up >= 15, 0x7E, (up << 3) | man)
    sub = np.floor(np.add(np.multiply(x, F32(512)), F32(0.5))).astype(np.int64)   # x * 512 < 8.5: (int) truncates
    sub = np.where(sub > 7, 7, np.where(sub < 1, 0, sub))
    out = np.where(exp <= 0, sub, normal)
    return np.where(pos, out, 0).astype(np.uint8)


def _encode(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_nvfp4_ref`` on (nb, 64) float32 blocks."""
    nb = xb.shape[0]
    sub = xb.reshape(nb, NSUB, SUB)
    amax = np.fmax(np.fmax.reduce(np.abs(sub), axis=2), F32(0))   # `if (amax < fabsf(x))`: NaN never enters
    ue = fp32_to_ue4m3(np.divide(amax, F32(6)))                    # amax / 6.0f: one float32 division
    codes = best_index_fp4(sub, UE4M3_HALF[ue][:, :, None])      # the first of the 16 least errors
    out = np.empty((nb, NSUB + QK // 2), np.uint8)
    out[:, :NSUB] = ue
    out[:, NSUB:] = (codes[:, :, :SUB // 2] | (codes[:, :, SUB // 2:] << 4)).reshape(nb, QK // 2)
    return out


def _quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
    rows, n = x.shape
    xb = x.reshape(-1, QK)
    out = np.empty((xb.shape[0], _T.type_size), np.uint8)
    for start in range(0, xb.shape[0], _CHUNK):
        out[start:start + _CHUNK] = _encode(xb[start:start + _CHUNK])
    return out.reshape(rows, n // QK * _T.type_size)


def _set_scale(blk: np.ndarray, values: np.ndarray) -> None:
    """Case classes for the four UE4M3 bytes (GGML-5.1): each sub-block takes one of the class's float16 values
    (rotated, so the four differ), written as the nearest byte the encoder could write, bit 7 the value's sign
    (ggml ignores it, MX-2.2); zero -> 0x00 / 0x80, float16 subnormals -> the UE4M3 subnormals 0x01 .. 0x07,
    +-65504 -> the exponent-15 bytes 0x78 .. 0x7F (0x7F reads as 0, 0xFF as 240: valid blocks, MX-2.2), inf and
    NaN -> 0x7F / 0xFF (E4M3's NaN patterns; ggml has no non-finite scale, so that class is plain values too)."""
    v = np.asarray(values, np.float32)
    nb = blk.shape[0]
    idx = np.arange(nb)
    for s in range(NSUB):
        vs = np.roll(v, s)
        mag = np.abs(vs)
        byte = fp32_to_ue4m3(np.where(np.isfinite(mag), mag, F32(0)))
        byte = np.where((mag > 0) & (mag < 2.0 ** -14), 1 + (idx + s) % 7, byte)
        byte = np.where(np.isfinite(mag) & (mag >= 65504), 0x78 + (idx + s) % 8, byte)
        byte = np.where(np.isfinite(mag), byte, 0x7F)
        sign = np.signbit(vs) | ~np.isfinite(mag) & ((idx + s) % 2 == 1)
        blk[:, s] = (byte | (sign.astype(np.int64) << 7)).astype(np.uint8)


# Every scale byte is valid to ggml (MX-2.4) and decodes finite and non-negative: ``scales`` reports the
# UE4M3 values for --deep and inspect, and GGML-3.1 / GGML-3.2 have nothing to find. The encoder has no
# importance path (quantize_nvfp4 ignores quant_weights, MX-2.5).
TYPES = (BlockType("nvfp4", "MX-2", _decode, _scales, quantize=_quantize, set_scale=_set_scale, bits=4, group=SUB),)
