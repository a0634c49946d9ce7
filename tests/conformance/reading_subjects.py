"""Decoders written from spec/ alone that follow one named reading each (spec/kernels.md KC-4.5), and one
without input checks: the issue-21 "done when" subjects. Their unpacking is written here, apart from
qformats.bits, so that agreeing with the suite's readings is evidence, not an echo.
"""

from __future__ import annotations

import numpy as np

from qformats.formats import q4_k

WORD_ADD = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}     # GPTQModel's whole-word v1 -> v2 add (GPTQ-7.3)


def _fields(words: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """QF-3: field k of each run of 32 is stream bits [b k, b k + b) of the run's b words, LSB first."""
    w = np.moveaxis(np.asarray(words).view(np.uint32).astype(np.uint64), axis, 0)
    runs = w.reshape(w.shape[0] // bits, bits, *w.shape[1:])
    padded = np.concatenate([runs, np.zeros_like(runs[:, :1])], axis=1)    # a zero word past the run's end
    out = []
    for k in range(32):
        word, shift = divmod(bits * k, 32)
        pair = padded[:, word] | (padded[:, word + 1] << np.uint64(32))
        out.append((pair >> np.uint64(shift)) & np.uint64((1 << bits) - 1))
    return np.moveaxis(np.stack(out, axis=1).reshape(-1, *w.shape[1:]).astype(np.int64), 0, axis)


def _decode(qweight, zeros, scales, g_idx, bits, group_size) -> np.ndarray:
    q = _fields(qweight, bits, 0)
    k = q.shape[0]
    gi = np.arange(k) // (k if group_size == -1 else group_size) if g_idx is None else np.asarray(g_idx)
    s = np.asarray(scales).astype(np.float32)
    return (s[gi] * (q.astype(np.float32) - zeros.astype(np.float32)[gi])).T


def v1_field_local_wrap(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """Z = (f + 1) & maxq, field by field: an all-ones field is zero point 0 (exllama's reading)."""
    f = _fields(qzeros, bits, 1)
    return _decode(qweight, (f + 1) & ((1 << bits) - 1), scales, g_idx, bits, group_size)


def v1_word_borrow(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """GPTQModel's loader: every whole word plus 0x11111111 (0x55555555, 0x01010101) modulo 2^32, then
    the fields read as v2; at 3 bits per field (f + 1) & 7."""
    if bits == 3:
        return v1_field_local_wrap(qweight=qweight, qzeros=qzeros, scales=scales, g_idx=g_idx, bits=bits,
                                   group_size=group_size)
    words = ((np.asarray(qzeros).view(np.uint32).astype(np.uint64) + WORD_ADD[bits]) & 0xFFFFFFFF).astype(np.uint32)
    return _decode(qweight, _fields(words, bits, 1), scales, g_idx, bits, group_size)


def v1_all_ones_as_2_to_the_bits(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """Z = f + 1 without wrap: an all-ones field read as 2^b (vLLM gptq_gemm's reading)."""
    return _decode(qweight, _fields(qzeros, bits, 1) + 1, scales, g_idx, bits, group_size)


def q4_k_rejecting_nonfinite(*, blocks, rows, n):
    """llama.cpp's decode, but blocks with inf/NaN d or dmin raise (what Q4K-3.3 lets a decoder do)."""
    return q4_k.dequantize(blocks, strict=True)
