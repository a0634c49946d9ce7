"""The SPQR-DELTA v1 stream's bytes, limits and refusals asserted whole (issue 33: tests with teeth;
`make mutation MODULE=qformats/formats/spqr/outliers.py`).

Streams are built here byte by byte from SPQR-9.3's table (magic "SQD1", uint32 m, n, E, row_ptr[m+1], delta[E], a pad
byte when E is odd, uint16 value[E], all little-endian: 16 + 4(m+1) + E + E mod 2 + 2E bytes); float16 bits by hand
(0x3C00 = 1.0, 0x4000 = 2.0, 0xC000 = -2.0). Expected values come from SPQR-9.3 .. 9.6, none from the code under test.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from qformats.formats.spqr import codec, outliers
from whole_error import refusal, whole

ONE, TWO = 0x3C00, 0x4000


def stream(m: int, n: int, row_ptr: list[int], deltas: list[int], values: list[int]) -> bytes:
    """SPQR-9.3's layout, field by field."""
    e = len(deltas)
    return (b"SQD1" + struct.pack("<3I", m, n, e) + struct.pack(f"<{m + 1}I", *row_ptr) + bytes(deltas)
            + b"\0" * (e % 2) + struct.pack(f"<{e}H", *values))


def layer(m: int, n: int, rows_cols_vals: list[tuple[int, int, float]]) -> dict:
    """A release CSR layer of zero dense weights holding the given outliers, in the given order."""
    rows = [r for r, _, _ in rows_cols_vals]
    ro = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int32)
    cv = codec.merge_col_vals([c for _, c, _ in rows_cols_vals], [v for _, _, v in rows_cols_vals])
    return {"dense_weights": np.zeros(m * n // 16, np.int64), "row_offsets": ro, "col_vals": cv,
            "in_perm": codec.pack_perm(np.arange(n))}


# -- encoding (SPQR-9.4, SPQR-9.5) --------------------------------------------------------------------

def test_to_compact_writes_the_table_of_spqr_9_3():
    """SPQR-9.4: row 0 holds columns 0 and 300 (a first delta 0, then a gap of 300: one virtual 255 and 45),
    row 1 column 7; E = 4 is even, so no pad byte."""
    data = outliers.to_compact(layer(16, 512, [(0, 0, 1.0), (0, 300, 2.0), (1, 7, -2.0)]))
    assert data == stream(16, 512, [0, 3] + [4] * 15, [0, 255, 45, 7], [ONE, 0, TWO, 0xC000])


def test_to_compact_pads_an_odd_entry_count():
    """SPQR-9.3: E = 1 takes one zero byte before the values; 16 + 68 + 1 + 1 + 2 = 88 bytes."""
    data = outliers.to_compact(layer(16, 32, [(2, 31, 1.0)]))
    assert data == stream(16, 32, [0, 0, 0] + [1] * 14, [31], [ONE]) and len(data) == 88


def test_to_compact_takes_m_and_n_for_a_mapping():
    """SPQR-9.5 on a mapping: the given m and n are checked (m = 32 would need 64 dense words, n = 16 an in_perm
    of 8 words)."""
    lay = layer(16, 32, [(0, 3, 1.0)])
    assert outliers.to_compact(lay, m=16, n=32) == stream(16, 32, [0] + [1] * 16, [3], [ONE])
    assert whole(lambda: outliers.to_compact(lay, m=32))[:4] == ("tensor.shape", "dense_weights",
                                                                 "of shape (64,) = m*n/16", (32,))
    assert whole(lambda: outliers.to_compact(lay, n=16))[:4] == ("tensor.shape", "in_perm",
                                                                 "of shape (8,) for n = 16", (16,))


def test_a_repeated_column_is_unrepresentable_whole():
    """SPQR-9.5: columns strictly ascend in a row; column 3 twice (entry 1) cannot be coded."""
    assert whole(lambda: outliers.to_compact(layer(16, 32, [(0, 3, 1.0), (0, 3, 2.0)]))) == refusal(
        "spqr.compact.unrepresentable", "col_vals",
        "strictly ascending columns per row and no +0.0 values (+0.0 marks a virtual outlier)",
        "column 3 value 2.0 at entry 1")


# -- decoding (SPQR-9.4) ------------------------------------------------------------------------------

def test_a_row_with_one_entry_in_column_0_decodes():
    """SPQR-9.4: a row's first entry is its column (delta 0 is column 0), even when the row holds one entry."""
    ro, cv = outliers.from_compact(stream(16, 32, [0, 1, 1, 2] + [2] * 13, [0, 0], [ONE, TWO]))
    assert ro.tolist() == [0, 1, 1, 2] + [2] * 13
    assert cv.tolist() == codec.merge_col_vals([0, 0], [1.0, 2.0]).tolist()


def test_a_zero_delta_after_a_first_entry_is_refused_whole():
    """SPQR-9.4: row 0 holds deltas 5, 3, 0; the 0 at entry 2 repeats column 8."""
    data = stream(16, 32, [0] + [3] * 16, [5, 3, 0], [ONE, ONE, ONE])
    assert whole(lambda: outliers.from_compact(data)) == refusal(
        "spqr.compact.delta", "delta", "in [1, 255] after a row's first entry", "0 at entry 2")


def test_a_column_at_n_is_refused_whole():
    """SPQR-9.4: columns stay below n = 32; deltas 20, 12 reach column 32 at entry 1."""
    data = stream(16, 32, [0] + [2] * 16, [20, 12], [ONE, ONE])
    assert whole(lambda: outliers.from_compact(data)) == refusal(
        "spqr.compact.delta", "delta", "columns below n = 32", "32 at entry 1")


# -- stream structure (SPQR-9.3) ----------------------------------------------------------------------

def test_a_str_stream_is_refused_whole():
    """SPQR-9.3: the stream is bytes."""
    assert whole(lambda: outliers.from_compact("SQD1")) == refusal(
        "argument.invalid", "stream", "bytes, bytearray or memoryview", "str")


def test_a_wrong_magic_is_refused_whole():
    """SPQR-9.3: the stream starts with "SQD1"."""
    data = b"SQD2" + stream(16, 32, [0] * 17, [], [])[4:]
    assert whole(lambda: outliers.from_compact(data)) == refusal(
        "spqr.compact.malformed", "stream", "a stream starting with b'SQD1'", b"SQD2")


def test_a_bare_header_is_refused_for_its_length():
    """SPQR-9.3: the 16-byte header alone (m = 1, n = 16, E = 0) is short of the 24 bytes it announces."""
    data = b"SQD1" + struct.pack("<3I", 1, 16, 0)
    assert whole(lambda: outliers.from_compact(data)) == refusal(
        "spqr.compact.malformed", "stream", "24 bytes for m = 1, E = 0", 16)


def test_no_rows_is_refused():
    """SPQR-9.3: m = 0 is malformed even when the 20 bytes agree with it."""
    assert whole(lambda: outliers.from_compact(stream(0, 16, [0], [], []))) == refusal(
        "spqr.compact.malformed", "stream", "20 bytes for m = 0, E = 0", 20)


@pytest.mark.parametrize("n", [0, 65537])
def test_n_outside_1_to_65536_is_refused_whole(n):
    """SPQR-9.3: n is in 1 .. 65536."""
    assert whole(lambda: outliers.from_compact(stream(16, n, [0] * 17, [], []))) == refusal(
        "spqr.compact.malformed", "n", "in [1, 65536]", n)


@pytest.mark.parametrize("n", [1, 65536])
def test_n_at_its_limits_and_one_row_decode(n):
    """SPQR-9.3: n = 1 and n = 65536 are allowed, m = 1 too; the last column n - 1 is a legal first delta only
    below 256, so n = 1 holds column 0 and n = 65536 column 255."""
    col = min(n - 1, 255)
    ro, cv = outliers.from_compact(stream(1, n, [0, 1], [col], [ONE]))
    assert ro.tolist() == [0, 1] and cv.tolist() == codec.merge_col_vals([col], [1.0]).tolist()


@pytest.mark.parametrize("row_ptr,shown", [([1, 2, 2, 3], "1 .. 3"), ([0, 1, 1, 2], "0 .. 2"),
                                           ([0, 2, 1, 3], "0 .. 3")])
def test_row_ptr_not_from_0_to_e_non_decreasing_is_refused_whole(row_ptr, shown):
    """SPQR-9.3: row_ptr runs non-decreasing from 0 to E = 3: one starting at 1, one ending at 2, one going down."""
    data = stream(3, 16, row_ptr, [1, 2, 3], [ONE, ONE, ONE])
    assert whole(lambda: outliers.from_compact(data)) == refusal(
        "spqr.compact.malformed", "row_ptr", "non-decreasing from 0 to E = 3", shown)


# -- statistics (SPQR-9.6) ----------------------------------------------------------------------------

def test_compact_stats_of_two_real_and_two_virtual_entries():
    """SPQR-9.6 on m = 16, E = 4 (2 real): index 8*4/2 = 16 bits, values 16*4/2 = 32, row_ptr 32*17/2 = 272,
    the stream's 16 + 68 + 4 + 8 = 96 bytes 8*96/2 = 384 bits per real outlier, CSR's index 16."""
    data = stream(16, 1024, [0, 4] + [4] * 15, [10, 255, 255, 90], [ONE, 0, 0, TWO])
    assert outliers.compact_stats(data) == {
        "real": 2, "virtual": 2, "index_bits_per_outlier": 16.0, "csr_index_bits_per_outlier": 16.0,
        "value_bits_per_outlier": 32.0, "row_pointer_bits_per_outlier": 272.0, "stream_bits_per_outlier": 384.0}


def test_compact_stats_without_real_outliers_are_nan_per_outlier():
    """SPQR-9.6: with no real outlier there is nothing to divide by: every per-outlier figure is NaN."""
    stats = outliers.compact_stats(stream(16, 32, [0] * 17, [], []))
    assert (stats["real"], stats["virtual"], stats["csr_index_bits_per_outlier"]) == (0, 0, 16.0)
    per = [v for k, v in stats.items() if k.endswith("_per_outlier") and not k.startswith("csr")]
    assert len(per) == 4 and all(isinstance(v, float) and math.isnan(v) for v in per)
