"""Statistics of the GPTQ reference decode without materializing it (spec/gptq.md GPTQ-3.7).

The decode ``W[n, k] = s[g, n] * (q[k, n] - Z[g, n])`` (g = g_idx[k]) is exact in float32
(GPTQ-3.2), so its statistics follow from per-(group, column) "cell" statistics of the codes::

    sum W    = sum_cells s * S1 - c * s * Z
    sum W^2  = sum_cells s^2 * S2 - 2 * s^2 * Z * S1 + c * s^2 * Z^2
    max |W|  = max_cells |s| * max(hi - Z, Z - lo)

with ``c`` rows in the cell's group and ``S1, S2, lo, hi`` the sum, sum of squares, minimum and
maximum of its codes. Every code is read; no float weight is written (``--deep`` on a 7B
checkpoint would otherwise write 26 GB of float32).

Fast path (bits 2, 4, 8; groups of whole words in k order). Every byte of a ``qweight`` word
holds ``8 / b`` codes of one column, so a cell's codes are the fields of its column's bytes in
the group's word rows::

    qweight as uint8 (K * b / 32, 4 * N):  bytes 4n .. 4n + 3 of a row = column n
    one byte: [ f_(8/b - 1) | ... | f_1 | f_0 ],  f_j = (byte >> b*j) & (2^b - 1)

Field planes, reductions over the rows and a fold of each column's 4 bytes give the cell
statistics, a cache-sized block of groups at a time. Anything else (3-bit, act-order g_idx,
groups that split a word) unpacks column slices.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import bits as bitpack
from ...stats import Moments
from . import checks
from .codec import zeros_from_fields
from .layout import Version, check_bits, check_version

__all__ = ["decode_moments", "checked_moments", "cell_sums"]

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
    """:func:`decode_moments` of tensors that passed ``checks.checked_tensors`` and ``check_g_idx``."""
    zeros = zeros_from_fields(bitpack.unpack(t["qzeros"], bits, axis=1), bits, version)
    g_idx = t["g_idx"].astype(np.intp)
    groups, n = t["scales"].shape
    rows = _word_rows_per_group(g_idx, bits, groups)
    if rows is None:
        cells = _unpacked_cells(t["qweight"], g_idx, bits, groups)
    else:
        cells = _PackedCells(t["qweight"], bits, groups, rows).run()
    return _moments(*cells, zeros, t["scales"], k=len(g_idx))


def cell_sums(qweight: np.ndarray, g_idx: np.ndarray, bits: int, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows per group (G,), sum of the codes of each (group, column) cell (G, N)): what the label
    evidence needs (GPTQ-8.2), by the fast path where it applies, computing nothing else."""
    rows = _word_rows_per_group(g_idx, bits, groups)
    if rows is None:
        count, s1, *_ = _unpacked_cells(qweight, g_idx, bits, groups, sums_only=True)
    else:
        count, s1, *_ = _PackedCells(qweight, bits, groups, rows, sums_only=True).run()
    return count, s1


def _moments(count: np.ndarray, s1: np.ndarray, s2: np.ndarray, low: np.ndarray, high: np.ndarray,
             zeros: np.ndarray, scales: np.ndarray, *, k: int) -> Moments:
    """Fold cell statistics ``(G, N)`` (``count`` is ``(G,)``) into the layer's moments.

    Sums are exact products in float64 added by ``einsum``, not ``np.dot``: a threaded BLAS
    spinning in every ``--jobs`` worker would contend for the CPUs the workers were given.
    """
    s = scales.astype(np.float64)  # float16 -> float64 directly: faster than via float32
    z = zeros.astype(np.float64)
    c = count.astype(np.float64)[:, None]
    d1 = s1 - c * z  # sum of (q - Z) per cell
    d2 = s2 - z * (s1 + d1)  # sum of (q - Z)^2 = S2 - 2 Z S1 + c Z^2
    reach = np.maximum(high - zeros, zeros - low)  # max |q - Z|, as low <= high
    return Moments(count=k * scales.shape[1], total=_dot(s, d1), squares=_dot(s * s, d2),
                   max_abs=float(np.max(np.abs(s) * reach)))  # exact: |s * reach| < 2^24


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.einsum("ij,ij->", a, b))


def _word_rows_per_group(g_idx: np.ndarray, bits: int, groups: int) -> int | None:
    """Words per column in each group when the fast path applies (groups of whole words in order)."""
    k = len(g_idx)
    if bits not in FAST_BITS or k % groups:
        return None
    size = k // groups
    if (size * bits) % 32 or not np.array_equal(g_idx, np.arange(k) // size):
        return None
    return size * bits // 32


class _PackedCells:
    """Fast path: cell statistics by blocks of whole groups x a span of columns.

    Scratch planes are allocated once per layer, so the loop allocates nothing large.
    """

    def __init__(self, qweight: np.ndarray, bits: int, groups: int, rows: int, *, sums_only: bool = False) -> None:
        n = qweight.shape[1]
        self.sums_only = sums_only
        self.planes = qweight.view(np.uint8).reshape(groups, rows, 4 * n)
        self.bits, self.rows = bits, rows
        self.maxq, self.fields = (1 << bits) - 1, 8 // bits
        self.mask = np.uint8(self.maxq)
        # Narrowest lane that cannot overflow: a column sums 4 * (8 / b) * rows squares <= maxq^2.
        bound = self.maxq ** 2 * 4 * self.fields * rows
        self.wide = next(dt for dt in (np.uint16, np.uint32, np.uint64) if bound < 1 << (8 * np.dtype(dt).itemsize))
        self.span = min(n, max(1, BLOCK_BYTES // (4 * rows)))  # columns per block
        self.block_groups = max(1, min(groups, BLOCK_BYTES // (4 * self.span * rows)))
        shape = (self.block_groups, rows, 4 * self.span)
        self.scratch = [np.empty(shape, np.uint8) for _ in range(self.fields + 1)]
        self.sums = [np.empty(shape[::2], self.wide) for _ in range(3)] + [np.empty(shape[::2], np.uint8)]

    def run(self) -> tuple[np.ndarray, ...]:
        groups, _, width = self.planes.shape
        n = width // 4
        out = (np.zeros((groups, n), self.wide), np.zeros((groups, n), self.wide),
               np.zeros((groups, n), np.uint8), np.zeros((groups, n), np.uint8))
        for g in range(0, groups, self.block_groups):
            for c in range(0, n, self.span):
                cells = (slice(g, min(groups, g + self.block_groups)), slice(c, min(n, c + self.span)))
                for dst, src in zip(out, self._block(*cells)):   # sums_only: the first alone
                    dst[cells] = src
        count = np.full(groups, self.rows * 32 // self.bits, np.int64)
        return (count,) + out

    def _block(self, groups: slice, columns: slice) -> tuple[np.ndarray, ...]:
        gc, width = groups.stop - groups.start, 4 * (columns.stop - columns.start)
        block = self.planes[groups, :, 4 * columns.start:4 * columns.stop]
        fields = [self._field(block, j, p[:gc, :, :width]) for j, p in enumerate(self.scratch[:self.fields])]
        total, squares, part, part8 = (a[:gc, :width] for a in self.sums)
        if self.sums_only:
            self._sum_rows(self._per_byte(fields, gc, width), total)
            return (_fold(total, np.add),)
        low, high = np.minimum.reduce(fields[0], axis=1), np.maximum.reduce(fields[0], axis=1)
        for f in fields[1:]:
            np.minimum(low, np.minimum.reduce(f, axis=1, out=part8), out=low)
            np.maximum(high, np.maximum.reduce(f, axis=1, out=part8), out=high)
        self._sum_rows(self._per_byte(fields, gc, width), total)  # (8 / b) * maxq <= 255: stays uint8
        for i, f in enumerate(fields):
            # maxq^2 fits uint8 below 8 bits (square the scratch plane in place); 8-bit codes
            # are squared into wide lanes.
            square = np.multiply(f, f, dtype=self.wide) if self.bits == 8 else np.multiply(f, f, out=f)
            np.add.reduce(square, axis=1, dtype=self.wide, out=squares if i == 0 else part)
            if i:
                squares += part
        return _fold(total, np.add), _fold(squares, np.add), _fold(low, np.minimum), _fold(high, np.maximum)

    def _per_byte(self, fields: list[np.ndarray], gc: int, width: int) -> np.ndarray:
        """The sum of a byte's fields, in a scratch plane (fields[0] itself at 8 bits)."""
        if self.fields == 1:
            return fields[0]
        return functools.reduce(lambda acc, f: np.add(acc, f, out=acc), fields[2:],
                                np.add(fields[0], fields[1], out=self.scratch[-1][:gc, :, :width]))

    def _sum_rows(self, per_byte: np.ndarray, out: np.ndarray) -> None:
        """Sum over rows: halve in place in uint8 while no sum can pass 255, then widen.

        Same-type adds are about twice as fast as one widening reduction over every row.
        """
        rows, top = per_byte.shape[1], self.fields * self.maxq
        while rows % 2 == 0 and rows > 2 and 2 * top <= 255:
            rows //= 2
            per_byte[:, :rows] += per_byte[:, rows:2 * rows]  # a scratch plane: free to overwrite
            top *= 2
        np.add.reduce(per_byte[:, :rows], axis=1, dtype=self.wide, out=out)

    def _field(self, block: np.ndarray, j: int, out: np.ndarray) -> np.ndarray:
        shift = self.bits * j
        if self.bits == 8:
            np.copyto(out, block)
        elif shift == 0:
            np.bitwise_and(block, self.mask, out=out)
        else:
            np.right_shift(block, np.uint8(shift), out=out)
            if shift + self.bits < 8:  # the top field needs no mask
                out &= self.mask
        return out


def _fold(a: np.ndarray, op: np.ufunc) -> np.ndarray:
    """Combine each column's 4 byte columns (strided: a short last-axis reduction is slow in NumPy)."""
    return op(op(a[:, 0::4], a[:, 1::4]), op(a[:, 2::4], a[:, 3::4]))


def _unpacked_cells(qweight: np.ndarray, g_idx: np.ndarray, bits: int, groups: int, *,
                    sums_only: bool = False) -> tuple[np.ndarray, ...]:
    """General path: unpack column slices, sort rows by group, reduce each run of rows.

    Only the non-empty runs are reduced: ``reduceat`` reads one row at an empty run's start (the next group's
    first, or past the end after the last row). ``check_g_idx`` leaves no group empty, but the label evidence
    (GPTQ-8.2) reads layers before it, where a g_idx may leave a group unused; such a cell has count 0 and
    sums, minimum and maximum 0.
    """
    n = qweight.shape[1]
    order = np.argsort(g_idx, kind="stable")
    count = np.bincount(g_idx, minlength=groups)
    used = np.flatnonzero(count)
    starts = (np.cumsum(count) - count)[used]
    out = [np.zeros((groups, n), np.int64) for _ in range(4)]
    for c0 in range(0, n, SLICE_COLUMNS):
        c1 = min(n, c0 + SLICE_COLUMNS)
        codes = bitpack.unpack(qweight[:, c0:c1], bits, axis=0)[order].astype(np.int64)
        if sums_only:
            out[0][used, c0:c1] = np.add.reduceat(codes, starts, axis=0)
            continue
        for dst, ufunc, x in zip(out, (np.add, np.add, np.minimum, np.maximum), (codes, codes * codes, codes, codes)):
            dst[used, c0:c1] = ufunc.reduceat(x, starts, axis=0)
    return (count,) + tuple(out)
