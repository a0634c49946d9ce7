"""b-bit unsigned fields packed into little-endian int32 word streams (spec/README.md, QF-3).

One rule covers every width: along the packed axis, each run of 32 values becomes ``b``
consecutive 32-bit words, read together as one little-endian bit stream in which value ``k``
occupies stream bits ``[b*k, b*k + b)``. For b in {2, 4, 8} no field crosses a word; for
b = 3 two fields straddle, which gives GPTQ's "10 | 1 | 10 | 1 | 10" layout::

    w0: v0..v9  at bits 3j      | v10 bits 0-1 at 30-31
    w1: v10 bit 2 at bit 0      | v11..v20 at bits 3j+1 | v21 bit 0 at bit 31
    w2: v21 bits 1-2 at 0-1     | v22..v31 at bits 3j+2

Vectorized over everything but the 32 field positions of a word group (a fixed loop of 32).
"""

from __future__ import annotations

import numpy as np

from .errors import fail

__all__ = ["SUPPORTED_BITS", "pack", "unpack", "packed_length", "field_positions"]

SUPPORTED_BITS = frozenset(range(1, 9))
WORD_BITS = 32


def _check_bits(bits: int) -> None:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or int(bits) not in SUPPORTED_BITS:
        raise fail("bits.unsupported", "bits", "an integer in 1..8", bits)


def _front(arr: np.ndarray, axis: int, name: str) -> tuple[np.ndarray, int]:
    """``arr`` with ``axis`` moved first; a scalar or an axis out of range is an argument error."""
    if arr.ndim == 0:
        raise fail("argument.invalid", name, "an array of at least one dimension", "a scalar")
    if not isinstance(axis, (int, np.integer)) or not -arr.ndim <= axis < arr.ndim:
        raise fail("argument.invalid", "axis", f"an integer in [{-arr.ndim}, {arr.ndim})", axis)
    return np.moveaxis(arr, axis, 0), int(axis) % arr.ndim


def packed_length(n_values: int, bits: int, *, axis_name: str = "axis") -> int:
    """Words needed for ``n_values`` b-bit fields; the fields must fill whole words (QF-3.3)."""
    _check_bits(bits)
    if (n_values * bits) % WORD_BITS:
        raise fail("bits.length", axis_name, f"a length whose {bits}-bit fields fill whole 32-bit words "
                   f"(a multiple of {WORD_BITS // np.gcd(bits, WORD_BITS)})", n_values)
    return n_values * bits // WORD_BITS


def field_positions(bits: int) -> list[tuple[int, int]]:
    """(word, shift) of each of the 32 fields of a word group: field k starts at stream bit b*k."""
    return [divmod(bits * k, WORD_BITS) for k in range(WORD_BITS)]


def pack(values, bits: int, axis: int = 0) -> np.ndarray:
    """Pack unsigned ``bits``-wide values along ``axis`` into int32 words (QF-3).

    ``values`` must be integers in ``[0, 2**bits)``; the axis length times ``bits`` must be a
    multiple of 32. Returns an int32 array whose ``axis`` is ``len * bits / 32`` long.
    """
    _check_bits(bits)
    v = np.asarray(values)
    if v.dtype.kind not in "iu":
        raise fail("bits.value_range", "values", "an integer array", str(v.dtype))
    if v.size and (v.min() < 0 or v.max() >= (1 << bits)):
        bad = v.min() if v.min() < 0 else v.max()
        raise fail("bits.value_range", "values", f"in [0, {(1 << bits) - 1}]", int(bad))
    front, axis = _front(v, axis, "values")
    n = front.shape[0]
    n_words = packed_length(n, bits)
    front = front.astype(np.uint32)
    rest = front.shape[1:]
    n_groups = -(-n // WORD_BITS)
    padded = np.zeros((n_groups * WORD_BITS,) + rest, np.uint32)
    padded[:n] = front
    fields = padded.reshape((n_groups, WORD_BITS) + rest)
    words = np.zeros((n_groups, bits) + rest, np.uint32)
    for k, (w, s) in enumerate(field_positions(bits)):
        words[:, w] |= fields[:, k] << np.uint32(s)  # uint32 shift drops bits past the word
        if s + bits > WORD_BITS:  # straddling field: its high bits open the next word
            words[:, w + 1] |= fields[:, k] >> np.uint32(WORD_BITS - s)
    flat = words.reshape((n_groups * bits,) + rest)[:n_words]
    return np.moveaxis(flat.view(np.int32), 0, axis)


def unpack(words, bits: int, axis: int = 0, *, count: int | None = None) -> np.ndarray:
    """Inverse of :func:`pack`: int32 (or uint32) words -> uint8 fields along ``axis``.

    ``count`` (default: every field the words hold) truncates the unpacked axis.
    """
    _check_bits(bits)
    w = np.asarray(words)
    if w.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
        raise fail("tensor.dtype", "words", "int32 or uint32", str(w.dtype))
    front, axis = _front(w, axis, "words")
    front = front.view(np.uint32)
    rest = front.shape[1:]
    n_words = front.shape[0]
    n_values = n_words * WORD_BITS // bits
    if count is not None:
        if not 0 <= count <= n_values:
            raise fail("bits.length", "count", f"in [0, {n_values}] for {n_words} words", count)
        n_values = count
    n_groups = -(-n_words // bits)
    padded = np.zeros((n_groups * bits + 1,) + rest, np.uint32)  # +1: a straddle never reads past
    padded[:n_words] = front
    groups = padded[:-1].reshape((n_groups, bits) + rest)
    mask = np.uint32((1 << bits) - 1)
    fields = np.empty((n_groups, WORD_BITS) + rest, np.uint8)
    for k, (w_i, s) in enumerate(field_positions(bits)):
        f = groups[:, w_i] >> np.uint32(s)
        if s + bits > WORD_BITS:
            f = f | (groups[:, w_i + 1] << np.uint32(WORD_BITS - s))
        fields[:, k] = f & mask
    flat = fields.reshape((n_groups * WORD_BITS,) + rest)[:n_values]
    return np.moveaxis(flat, 0, axis)
