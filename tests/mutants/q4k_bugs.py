"""Deliberately wrong q4_K decoders, each imitating a real bug class (tests/mutants/README.md)."""

from __future__ import annotations

import numpy as np

from qformats.formats import q4_k
from qformats.formats.q4_k.codec import unpack_scales

F32 = np.float32


def _fields(blocks):
    blk = np.asarray(blocks, np.uint8).reshape(-1, 144)
    dm = np.ascontiguousarray(blk[:, 0:4]).view("<f2").astype(F32)
    return blk, dm[:, 0], dm[:, 1]


def _assemble(codes, sc, m, d, dmin, rows, *, plus_min=False):
    """codes (nb, 256) uint8 -> (rows, n) float32 with ``d*sc*q - dmin*m`` (or ``+`` when plus_min)."""
    q = codes.reshape(-1, 8, 32).astype(F32)
    dj = (d[:, None] * sc.astype(F32))[:, :, None]
    mj = (dmin[:, None] * m.astype(F32))[:, :, None]
    with np.errstate(invalid="ignore", over="ignore"):
        y = dj * q + mj if plus_min else dj * q - mj
    return y.reshape(rows, -1)


def _codes_spec(blk):
    qs = blk[:, 16:].reshape(-1, 4, 32)
    return np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 256)


def nibbles_as_consecutive_pairs(*, blocks, rows, n):
    """q[2i] = qs[i] & 15, q[2i+1] = qs[i] >> 4: the q4_0-style order, not q4_K's chunked one (Q4K-1.5)."""
    blk, d, dmin = _fields(blocks)
    qs = blk[:, 16:]
    codes = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 256)
    sc, m = unpack_scales(blk[:, 4:16])
    return _assemble(codes, sc, m, d, dmin, rows)


def scales_4_to_7_nibbles_swapped(*, blocks, rows, n):
    """Sub-blocks 4-7 take sc from the high nibble of bytes 8-11 and m from the low one (Q4K-1.4 swapped)."""
    blk, d, dmin = _fields(blocks)
    sc, m = unpack_scales(blk[:, 4:16])
    s = blk[:, 4:16].astype(np.uint8)
    sc = sc.copy()
    m = m.copy()
    sc[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] & 15) | ((s[:, 4:8] >> 6) << 4)
    return _assemble(_codes_spec(blk), sc, m, d, dmin, rows)


def plus_min(*, blocks, rows, n):
    """``q*scale + min``: torchao's prototype "GGUF Q4_K" dequantization (notes q4_k.md §6), sign of m flipped."""
    blk, d, dmin = _fields(blocks)
    sc, m = unpack_scales(blk[:, 4:16])
    return _assemble(_codes_spec(blk), sc, m, d, dmin, rows, plus_min=True)


def matmul_fp16_accumulation(*, blocks, rows, n, x):
    """A GEMV with a float16 accumulator."""
    w = q4_k.dequantize(blocks).astype(np.float16)
    x = np.asarray(x, np.float16)
    acc = np.zeros((x.shape[0], w.shape[0]), np.float16)
    for k in range(w.shape[1]):
        acc = (acc + x[:, k:k + 1] * w[:, k]).astype(np.float16)
    return acc


def positive_zeros(*, blocks, rows, n):
    """The reference with every -0.0 turned into +0.0: what adding a dense matrix (``w + 0.0``, a
    materialised correction or outlier term) does to a correct decode."""
    return q4_k.dequantize(blocks) + F32(0)


def nibbles_high_first(*, blocks, rows, n):
    """Sub-block 2c takes the high nibbles of chunk c and sub-block 2c + 1 the low ones, each with its own
    scale: the shifts of ``q[l] & 0xF`` and ``q[l] >> 4`` exchanged in the decode loop (Q4K-1.5)."""
    blk, d, dmin = _fields(blocks)
    qs = blk[:, 16:].reshape(-1, 4, 32)
    codes = np.stack([qs >> 4, qs & 15], axis=2).reshape(-1, 256)
    sc, m = unpack_scales(blk[:, 4:16])
    return _assemble(codes, sc, m, d, dmin, rows)


def halves_swapped(*, blocks, rows, n):
    """Each 64-weight chunk written with its two 32-weight halves exchanged (the low-nibble half, with its
    scale, stored where the high-nibble half goes): an output pointer advanced in the wrong order (Q4K-1.5)."""
    blk, d, dmin = _fields(blocks)
    sc, m = unpack_scales(blk[:, 4:16])
    y = _assemble(_codes_spec(blk), sc, m, d, dmin, rows).reshape(-1, 4, 2, 32)
    return np.ascontiguousarray(y[:, :, ::-1]).reshape(rows, -1)


def scale_min_swapped(*, blocks, rows, n):
    """``get_scale_min_k4`` results taken in the wrong order: the 6-bit min used as the scale and the scale
    as the min (Q4K-1.4)."""
    blk, d, dmin = _fields(blocks)
    sc, m = unpack_scales(blk[:, 4:16])
    return _assemble(_codes_spec(blk), m, sc, d, dmin, rows)
