"""q1_0 and q2_0: one float16 scale and 1- or 2-bit codes (spec/ggml_legacy.md, LEG-9 and LEG-10).

q1_0 (ggml 0.10.1 and 0.25.3, type id 41) stores the sign of each of 128 weights and decodes ``bit ? d : -d``
with ``d`` the block's mean absolute value; q2_0 (ggml 0.25.3, id 42, absent from 0.10.1) stores 64
two-bit codes and decodes ``(q - 1) * d`` with ``d`` the block's largest magnitude: the values -d, 0, d, 2d,
of which the reference encoder never writes 2d. Facts (structs, formulas, operation order) are from ggml
0.25.3 (llama-cpp-python 0.3.36's vendored llama.cpp) ``src/ggml-common.h`` (``block_q1_0``, ``block_q2_0``)
and ``src/ggml-quants.c`` (``dequantize_row_q1_0`` / ``_q2_0``, ``quantize_row_q1_0_ref`` / ``_q2_0_ref``,
``quantize_q1_0`` / ``_q2_0``, ``ggml_validate_row_data``); ggml 0.10.1's q1_0 functions are the same text.
The code is qformats' own, vectorized over blocks, with C's float32 operations in C's order (LEG-1.4).
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import GGML_TYPES
from .base import F32, BlockType, fp16_field
from .legacy import fp16_bits_ggml, roundf

__all__ = ["TYPES", "unpack_signs", "unpack_crumbs", "c_int"]

_GEOMETRY = {t.name.lower(): t for t in GGML_TYPES.values()}
QK1_0 = _GEOMETRY["q1_0"].block_size          # 128
QK2_0 = _GEOMETRY["q2_0"].block_size          # 64
assert (_GEOMETRY["q1_0"].type_size, _GEOMETRY["q2_0"].type_size) == (2 + QK1_0 // 8, 2 + QK2_0 // 4)
_CHUNK = 16384                                # blocks per encoder pass

# ---------------------------------------------------------------------------------------------
# bit fields (LEG-9.1, LEG-10.1)
# ---------------------------------------------------------------------------------------------
#
# q1_0 qs[16]: bit b of byte j is weight 8j + b (least significant bit first)
#
#     qs[j] = [ w(8j+7) | w(8j+6) | ... | w(8j+1) | w(8j) ]       1 = non-negative (+d), 0 = -d
#               bit 7                                 bit 0
#
# q2_0 qs[16]: bits 2k+1:2k of byte j are weight 4j + k
#
#     qs[j] = [ q(4j+3) 7:6 | q(4j+2) 5:4 | q(4j+1) 3:2 | q(4j) 1:0 ]


def unpack_signs(qs: np.ndarray) -> np.ndarray:
    """(nb, 16) uint8 -> (nb, 128) uint8 bits in weight order (LEG-9.1)."""
    return np.unpackbits(qs, axis=1, bitorder="little")


def unpack_crumbs(qs: np.ndarray) -> np.ndarray:
    """(nb, 16) uint8 -> (nb, 64) uint8 codes 0..3 in weight order (LEG-10.1)."""
    shifts = np.array([0, 2, 4, 6], np.uint8)
    return ((qs[:, :, None] >> shifts) & 3).reshape(qs.shape[0], -1)


def _pack_crumbs(codes: np.ndarray) -> np.ndarray:
    """(nb, 64) codes 0..3 -> (nb, 16) uint8, the inverse of :func:`unpack_crumbs`."""
    c = codes.astype(np.uint8).reshape(codes.shape[0], -1, 4)
    return c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)


# ---------------------------------------------------------------------------------------------
# decoders (LEG-9.2, LEG-10.2)
# ---------------------------------------------------------------------------------------------


def _decode_q1_0(blk: np.ndarray) -> np.ndarray:
    """``y = bit ? d : neg_d`` with ``neg_d = -d``: a sign flip, no rounding (NaN payloads kept, sign flipped)."""
    d = fp16_field(blk, 0)                                  # (nb, 1)
    return np.where(unpack_signs(blk[:, 2:]).astype(bool), d, np.negative(d))


_Q2_0_FACTOR = np.array([-1, 0, 1, 2], F32)             # (int)q - 1, widened exactly


def _decode_q2_0(blk: np.ndarray) -> np.ndarray:
    """``y = ((int)q - 1) * d``: one float32 multiply (exact for finite d; ``0 * inf`` is NaN, as in C)."""
    d = fp16_field(blk, 0)
    return np.multiply(_Q2_0_FACTOR[unpack_crumbs(blk[:, 2:])], d)


def _d(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, 0)}


# ---------------------------------------------------------------------------------------------
# reference encoders (LEG-9.4, LEG-10.4)
# ---------------------------------------------------------------------------------------------


def c_int(v: np.ndarray) -> np.ndarray:
    """``(int)v`` for float32 ``v`` as gcc x86-64 compiles it (``cvttss2si``), as int64: truncation toward
    zero; NaN and values outside int32 give INT_MIN (LEG-1.4)."""
    t = np.trunc(v)
    inside = (t >= F32(-2.0 ** 31)) & (t < F32(2.0 ** 31))
    return np.where(inside, t, F32(-2.0 ** 31)).astype(np.int64)


def _ref_q1_0(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_q1_0_ref``: ``d = (sum of fabsf(x), in order) / 128``; bit = ``x >= 0.0f``."""
    sum_abs = np.add.accumulate(np.abs(xb), axis=1, dtype=F32)[:, -1]   # C's in-order float32 sum
    d = np.divide(sum_abs, F32(QK1_0))
    out = np.empty((xb.shape[0], 2 + QK1_0 // 8), np.uint8)
    out[:, :2] = fp16_bits_ggml(d).astype("<u2")[:, None].view(np.uint8)
    out[:, 2:] = np.packbits(xb >= F32(0), axis=1, bitorder="little")  # -0.0 counts as >= 0; NaN does not
    return out


def _ref_q2_0(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_q2_0_ref``: ``d = amax``, ``id = d > 0 ? 1/d : 0``, ``q = clamp((int)roundf(x*id) + 1, 0, 3)``."""
    amax = np.fmax.reduce(np.abs(xb), axis=1)               # `if (a > amax) amax = a`: a NaN never enters
    amax = np.fmax(amax, F32(0))                            # ... and the running max starts at 0
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.where(amax > 0, np.divide(F32(1), np.where(amax > 0, amax, F32(1))), F32(0)).astype(F32)
    q = np.clip(c_int(roundf(np.multiply(xb, inv[:, None]))) + 1, 0, 3)
    out = np.empty((xb.shape[0], 2 + QK2_0 // 4), np.uint8)
    out[:, :2] = fp16_bits_ggml(amax).astype("<u2")[:, None].view(np.uint8)
    out[:, 2:] = _pack_crumbs(q)
    return out


def _encoder(qk: int, size: int, ref):
    """``quantize_<type>(x, y, rows, n, NULL)``: the reference encoder on the rows as one flat sequence of blocks."""
    def quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
        rows, n = x.shape
        xb = x.reshape(-1, qk)
        out = np.empty((xb.shape[0], size), np.uint8)
        for start in range(0, xb.shape[0], _CHUNK):
            out[start:start + _CHUNK] = ref(xb[start:start + _CHUNK])
        return out.reshape(rows, n // qk * size)
    return quantize


# quantize_q1_0 / quantize_q2_0 with quant_weights run the same _ref row by row: the weights are ignored, so
# qformats refuses an importance vector rather than pretend to use it (LEG-9.5, LEG-10.5). d is a sum of
# magnitudes (q1_0) or the largest magnitude (q2_0), starting at +0: never negative (GGML-3.2).
TYPES = (
    BlockType("q1_0", "LEG-9", _decode_q1_0, _d, never_negative=("d",), fp16_offsets={"d": 0},
              quantize=_encoder(QK1_0, _GEOMETRY["q1_0"].type_size, _ref_q1_0), bits=1, group=QK1_0),
    BlockType("q2_0", "LEG-10", _decode_q2_0, _d, never_negative=("d",), fp16_offsets={"d": 0},
              quantize=_encoder(QK2_0, _GEOMETRY["q2_0"].type_size, _ref_q2_0), bits=2, group=QK2_0,
              since="0.25.3"),
)
