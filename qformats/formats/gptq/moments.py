"""Statistics of the GPTQ reference decode without materializing it (spec/gptq.md GPTQ-3.7).

The decode ``W[n, k] = s[g, n] * (q[k, n] - Z[g, n])`` (g = g_idx[k]) is exact in float32
(GPTQ-3.2), so its sums follow from per-(group, column) sums of the codes::

    sum W    = sum_{g,n} s * (S1 - c_g * Z)
    sum W^2  = sum_{g,n} s^2 * (S2 - 2 * Z * S1 + c_g * Z^2)
    max |W|  = max_{g,n} |s| * max(|hi - Z|, |lo - Z|)

with ``c_g`` rows in group g and ``S1, S2, lo, hi`` the sum, sum of squares, minimum and maximum
of its codes in column n. Every code is read; no float weight is written. ``--deep`` uses this:
writing 4 bytes per weight cannot keep pace with reading half a byte.

Fast path (bits 2, 4, 8; groups of whole words in k order): every byte of a ``qweight`` word
holds ``8 / bits`` codes of one column, so the codes of a group are the fields of the bytes in
its rows::

    qweight as uint8 (K * b / 32, 4 * N):  row r, bytes 4n .. 4n + 3 = column n, words of group r // R
    byte: [ f_{8/b - 1} | ... | f_1 | f_0 ]   f_j = (byte >> (b * j)) & (2^b - 1)

so field planes, reductions over rows and a sum over each column's 4 bytes give the sums, in
uint8/uint16 lanes, a cache-sized block of groups at a time.
Anything else (3-bit, act-order g_idx, groups that split a word) unpacks column slices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import bits as bitpack
from ...stats import Moments
from . import checks
from .codec import zeros_from_fields
from .layout import Version, check_bits, check_version

__all__ = ["decode_moments", "checked_moments"]

FAST_BITS = (2, 4, 8)
BLOCK_BYTES = 1 << 20  # qweight bytes reduced at once on the fast path: field planes stay in cache
SLICE_COLUMNS = 256  # columns unpacked at once on the general path


def decode_moments(layer: Any, *, bits: int, version: str, group_size: int | None = None) -> Moments:
    """The :class:`Moments` of ``dequantize(layer, ...)`` (spec reader), computed from the codes.

    Equal to folding the decoded array up to float64 summation order; ``max_abs`` is exact. The
    decode is finite: scales are checked finite (GPTQ-3.5) and ``|s * (q - Z)| < 2^24`` (GPTQ-3.2).
    """
    bits, version = check_bits(bits), check_version(version)
    dims, t = checks.checked_tensors(layer, bits, group_size)
    checks.check_g_idx(t["g_idx"], dims.n_groups, dims.group_size)
    return checked_moments(t, bits=bits, version=version)


def checked_moments(t: Mapping[str, np.ndarray], *, bits: int, version: Version) -> Moments:
    """:func:`decode_moments` of tensors that ``checks.checked_tensors`` and ``check_g_idx`` passed."""
    zeros = zeros_from_fields(bitpack.unpack(t["qzeros"], bits, axis=1), bits, version)
    g_idx = t["g_idx"].astype(np.intp)
    rows = _word_rows_per_group(g_idx, bits, t["scales"].shape[0])
    if rows is None:
        return _unpacked_moments(t["qweight"], g_idx, zeros, t["scales"], bits)
    return _PackedMoments(t["qweight"], zeros, t["scales"], bits, rows).run()


def _moments(count: np.ndarray, s1: np.ndarray, s2: np.ndarray, low: np.ndarray, high: np.ndarray,
             zeros: np.ndarray, scales: np.ndarray) -> Moments:
    """Sums of the decode over (group, column) cells from their code sums (the formulas above).

    ``count`` (rows per group) broadcasts against the ``(groups, columns)`` arrays. Plain NumPy
    products, not ``np.dot``: a threaded BLAS spinning in every worker process would contend for
    the CPUs that ``--jobs`` hands out.
    """
    s = scales.astype(np.float64)
    d1 = s1 - count * zeros  # sum of (q - Z)
    d2 = s2 - zeros * (s1 + d1)  # sum of (q - Z)^2 = S2 - 2 Z S1 + c Z^2
    reach = np.maximum(high - zeros, zeros - low)  # max |q - Z|, as low <= high
    return Moments(count=int(np.sum(count * np.ones_like(zeros))), total=float(np.sum(s * d1)),
                   squares=float(np.sum(s * s * d2)),
                   max_abs=float(np.max(np.abs(scales).astype(np.float32) * reach)))  # exact: |s * reach| < 2^24


def _word_rows_per_group(g_idx: np.ndarray, bits: int, groups: int) -> int | None:
    """Words per column in each group when the fast path applies (groups of whole words in order)."""
    k = len(g_idx)
    if bits not in FAST_BITS or k % groups:
        return None
    size = k // groups
    if (size * bits) % 32 or not np.array_equal(g_idx, np.arange(k) // size):
        return None
    return size * bits // 32


class _PackedMoments:
    """Fast path: blocks of whole groups x a span of columns, each folded to partial moments.

    Scratch planes are allocated once per layer, so the loop allocates nothing large.
    """

    def __init__(self, qweight: np.ndarray, zeros: np.ndarray, scales: np.ndarray, bits: int, rows: int) -> None:
        groups, n = scales.shape
        self.planes = qweight.view(np.uint8).reshape(groups, rows, n * 4)
        self.zeros, self.scales, self.bits, self.rows = zeros, scales, bits, rows
        self.maxq, self.fields = (1 << bits) - 1, 8 // bits
        self.mask = np.uint8(self.maxq)
        # Narrowest lane that cannot overflow: a column sums 4 * (8 / b) * rows squares <= maxq^2.
        bound = self.maxq ** 2 * 4 * self.fields * rows
        self.wide = next(dt for dt in (np.uint16, np.uint32, np.uint64) if bound < 1 << (8 * np.dtype(dt).itemsize))
        self.span = min(n, max(1, BLOCK_BYTES // (4 * rows)))  # columns per block
        self.block_groups = max(1, min(groups, BLOCK_BYTES // (4 * self.span * rows)))

    def run(self) -> Moments:
        groups, n = self.scales.shape
        shape = (self.block_groups, self.rows, 4 * self.span)
        self.planes_scratch = [np.empty(shape, np.uint8) for _ in range(self.fields + 1)]
        self.sums_scratch = [np.empty(shape[::2], dt) for dt in (self.wide, self.wide, self.wide, np.uint8, np.uint8,
                                                                 np.uint8)]
        parts = [self._block(g, min(groups, g + self.block_groups), c, min(n, c + self.span))
                 for g in range(0, groups, self.block_groups) for c in range(0, n, self.span)]
        return Moments(count=sum(p.count for p in parts), total=math.fsum(p.total for p in parts),
                       squares=math.fsum(p.squares for p in parts), max_abs=max(p.max_abs for p in parts))

    def _block(self, g0: int, g1: int, n0: int, n1: int) -> Moments:
        gc, width = g1 - g0, 4 * (n1 - n0)
        block = self.planes[g0:g1, :, 4 * n0:4 * n1]
        fields = [p[:gc, :, :width] for p in self.planes_scratch[:self.fields]]
        for j, f in enumerate(fields):
            self._field(block, j, f)
        total, squares, part, low, high, part8 = (a[:gc, :width] for a in self.sums_scratch)
        if self.fields > 1:
            per_byte = np.add(fields[0], fields[1], out=self.planes_scratch[-1][:gc, :, :width])
            for f in fields[2:]:
                per_byte += f  # <= (8 / b) * maxq <= 255: stays uint8
        else:
            per_byte = fields[0]
        np.add.reduce(per_byte, axis=1, dtype=self.wide, out=total)
        np.minimum.reduce(fields[0], axis=1, out=low)
        np.maximum.reduce(fields[0], axis=1, out=high)
        for f in fields[1:]:
            np.minimum(low, np.minimum.reduce(f, axis=1, out=part8), out=low)
            np.maximum(high, np.maximum.reduce(f, axis=1, out=part8), out=high)
        for i, f in enumerate(fields):
            # maxq^2 fits uint8 below 8 bits (square the scratch plane in place); 8-bit codes are
            # the file's own bytes, squared into wide lanes.
            square = np.multiply(f, f, dtype=self.wide) if self.bits == 8 else np.multiply(f, f, out=f)
            np.add.reduce(square, axis=1, dtype=self.wide, out=squares if i == 0 else part)
            if i:
                squares += part
        cells = (slice(g0, g1), slice(n0, n1))
        return _moments(np.int64(self.rows * 32 // self.bits), _fold(total, np.add), _fold(squares, np.add),
                        _fold(low, np.minimum), _fold(high, np.maximum), self.zeros[cells], self.scales[cells])

    def _field(self, block: np.ndarray, j: int, out: np.ndarray) -> None:
        shift = self.bits * j
        if self.bits == 8:
            np.copyto(out, block)
        elif shift == 0:
            np.bitwise_and(block, self.mask, out=out)
        else:
            np.right_shift(block, np.uint8(shift), out=out)
            if shift + self.bits < 8:  # the top field needs no mask
                out &= self.mask


def _fold(a: np.ndarray, op: np.ufunc) -> np.ndarray:
    """Combine each column's 4 byte columns (strided: a short last-axis reduction is slow in NumPy)."""
    return op(op(a[:, 0::4], a[:, 1::4]), op(a[:, 2::4], a[:, 3::4]))


def _unpacked_moments(qweight: np.ndarray, g_idx: np.ndarray, zeros: np.ndarray, scales: np.ndarray,
                      bits: int) -> Moments:
    """General path: unpack column slices, sort rows by group, reduce each run of rows."""
    groups, n = scales.shape
    order = np.argsort(g_idx, kind="stable")
    counts = np.bincount(g_idx, minlength=groups)
    present = np.flatnonzero(counts)  # every group is non-empty after check_g_idx; kept for safety
    starts = (np.cumsum(counts) - counts)[present]
    parts = []
    for c0 in range(0, n, SLICE_COLUMNS):
        c1 = min(n, c0 + SLICE_COLUMNS)
        codes = bitpack.unpack(qweight[:, c0:c1], bits, axis=0)[order].astype(np.int64)
        sums = [ufunc.reduceat(x, starts, axis=0) for ufunc, x in
                ((np.add, codes), (np.add, codes * codes), (np.minimum, codes), (np.maximum, codes))]
        parts.append(_moments(counts[present, None], *sums, zeros[present, c0:c1], scales[present, c0:c1]))
    return Moments(count=sum(p.count for p in parts), total=math.fsum(p.total for p in parts),
                   squares=math.fsum(p.squares for p in parts), max_abs=max(p.max_abs for p in parts))
