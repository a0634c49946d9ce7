"""The paper's compact outlier coding (SpQR §4.2) as a byte stream: "SPQR-DELTA v1" (spec/spqr.md §9).

The paper stores each outlier column as an 8-bit shift from the previous outlier of its row and
inserts zero-valued "virtual" outliers where a gap exceeds 255; it gives no bytes. Ours, all
little-endian::

    offset            size       field
    0                 4          magic b"SQD1"
    4                 4          uint32 m                rows
    8                 4          uint32 n                columns
    12                4          uint32 E                entries, real + virtual
    16                4*(m+1)    uint32 row_ptr[m+1]     row r owns entries row_ptr[r] .. row_ptr[r+1]-1
    16+4(m+1)         E          uint8  delta[E]         column shifts
    ...               E % 2      zero pad byte           keeps the values 2-byte aligned
    ...               2*E        uint16 value[E]         float16 bits; 0x0000 marks a virtual outlier

In row r the first entry's column is ``delta`` (base 0) and every later one is the previous
column plus ``delta`` with ``1 <= delta <= 255``; columns strictly ascend and stay below n. A gap
g > 255 takes ``(g - 1) // 255`` virtual entries with delta 255 in front of the real one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import fail
from ...numerics import fp16_bits, fp16_from_bits
from .codec import as_layer, csr_offsets, entry_rows, merge_col_vals, split_col_vals, to_csr
from .layout import MAX_N

__all__ = ["MAGIC", "MAX_DELTA", "to_compact", "from_compact", "compact_stats", "compact_size"]

MAGIC = b"SQD1"
MAX_DELTA = 255
HEADER = 4 + 4 + 4 + 4


def compact_size(m: int, entries: int) -> int:
    """Bytes of a stream with m rows and ``entries`` deltas (real + virtual)."""
    return HEADER + 4 * (m + 1) + entries + (entries & 1) + 2 * entries


def to_compact(layer: Any, *, m: int | None = None, n: int | None = None) -> bytes:
    """Release layer (CSR or PTCSR) -> SPQR-DELTA v1 bytes, lossless (SPQR-9.5)."""
    lay = as_layer(layer, m=m, n=n)
    m, n = lay.m, lay.n
    ro, cv = to_csr(lay)
    cols, vals = split_col_vals(cv)
    rows = entry_rows(ro, cols.size, m)
    first = np.ones(cols.size, bool)
    first[1:] = rows[1:] != rows[:-1]
    gap = cols - np.where(first, 0, np.concatenate([[0], cols[:-1]]))
    bad = (~first & (gap <= 0)) | (fp16_bits(vals) == 0)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise fail("spqr.compact.unrepresentable", "col_vals",
                   "strictly ascending columns per row and no +0.0 values (+0.0 marks a virtual outlier)",
                   f"column {int(cols[j])} value {float(vals[j])} at entry {j}")
    virtual = np.maximum(gap - 1, 0) // MAX_DELTA
    pos = np.arange(cols.size) + np.cumsum(virtual)          # slot of each real entry
    total = int(cols.size + virtual.sum())
    delta = np.full(total, MAX_DELTA, np.uint8)
    value = np.zeros(total, np.uint16)
    delta[pos] = gap - MAX_DELTA * virtual
    value[pos] = fp16_bits(vals)
    per_row = np.bincount(rows, weights=1 + virtual, minlength=m).astype(np.int64)
    row_ptr = np.concatenate([[0], np.cumsum(per_row)]).astype("<u4")
    head = MAGIC + np.array([m, n, total], "<u4").tobytes()
    return head + row_ptr.tobytes() + delta.tobytes() + b"\0" * (total & 1) + value.astype("<u2").tobytes()


def _parse(data: bytes) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(data, (bytes, bytearray, memoryview)):   # bytes(int) would allocate that many zeros
        raise fail("argument.invalid", "stream", "bytes, bytearray or memoryview", type(data).__name__)
    buf = memoryview(bytes(data))
    if len(buf) < HEADER or bytes(buf[:4]) != MAGIC:
        raise fail("spqr.compact.malformed", "stream", f"a stream starting with {MAGIC!r}", bytes(buf[:4]))
    m, n, total = (int(v) for v in np.frombuffer(buf[4:HEADER], "<u4"))
    if not 0 < n <= MAX_N:
        raise fail("spqr.compact.malformed", "n", f"in [1, {MAX_N}]", n)
    if m == 0 or len(buf) < HEADER + 4 * (m + 1) or len(buf) != compact_size(m, total):
        raise fail("spqr.compact.malformed", "stream", f"{compact_size(m, total)} bytes for m = {m}, E = {total}",
                   len(buf))
    at = HEADER + 4 * (m + 1)
    row_ptr = np.frombuffer(buf[HEADER:at], "<u4").astype(np.int64)
    if row_ptr[0] != 0 or row_ptr[-1] != total or (np.diff(row_ptr) < 0).any():
        raise fail("spqr.compact.malformed", "row_ptr", f"non-decreasing from 0 to E = {total}",
                   f"{int(row_ptr[0])} .. {int(row_ptr[-1])}")
    delta = np.frombuffer(buf[at:at + total], np.uint8).astype(np.int64)
    value = np.frombuffer(buf[at + total + (total & 1):], "<u2").astype(np.uint16)
    return m, n, row_ptr, delta, value


def from_compact(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """SPQR-DELTA v1 bytes -> release CSR ``(row_offsets int32 [m+1], col_vals int32 [nnz])``."""
    m, n, row_ptr, delta, value = _parse(data)
    rows = entry_rows(row_ptr, delta.size, m)
    first = np.zeros(delta.size, bool)
    first[row_ptr[:-1][np.diff(row_ptr) > 0]] = True
    if (~first & (delta == 0)).any():
        j = int(np.flatnonzero(~first & (delta == 0))[0])
        raise fail("spqr.compact.delta", "delta", "in [1, 255] after a row's first entry", f"0 at entry {j}")
    run = np.cumsum(delta)
    cols = run - (run - delta)[row_ptr[:-1][rows]]           # segmented prefix sum: restart at each row
    if (cols >= n).any():
        j = int(np.flatnonzero(cols >= n)[0])
        raise fail("spqr.compact.delta", "delta", f"columns below n = {n}", f"{int(cols[j])} at entry {j}")
    real = value != 0
    return csr_offsets(rows[real], m), merge_col_vals(cols[real], fp16_from_bits(value[real]))


def compact_stats(data: bytes) -> dict[str, float]:
    """Bits per real outlier, as the paper counts them (SPQR-9.6), next to 16-bit CSR columns."""
    m, _, row_ptr, _, value = _parse(data)
    real = int(np.count_nonzero(value))
    total = int(value.size)
    per = (lambda bits: bits / real) if real else (lambda bits: float("nan"))
    return {
        "real": real, "virtual": total - real,
        "index_bits_per_outlier": per(8 * total),              # the paper's 8-9 bits
        "csr_index_bits_per_outlier": 16.0,
        "value_bits_per_outlier": per(16 * total),
        "row_pointer_bits_per_outlier": per(32 * (m + 1)),     # same as CSR's int32 row_offsets
        "stream_bits_per_outlier": per(8 * compact_size(m, total)),
    }
