"""Tests with teeth for nvfp4 (MX-2), mxfp4 (MX-1), q1_0 and q2_0 (LEG-9, LEG-10): issue 33 item 3.

Each test pins one behaviour that ``make mutation`` showed unchecked. Expected values come from the spec's
formulas worked by hand or recomputed here by a different route (bit fields read one at a time, plain Python
loops over the C statements), never from the module under test.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import lowbit, mxfp4, nvfp4

F32 = np.float32


def bits(a) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


# ------------------------------------------------------------------------------------------------ nvfp4 (MX-2)


def ue4m3_half_by_hand(u: int) -> float:
    """MX-2.2's table, field by field: 0x00 and 0x7F read 0; bit 7 ignored; exp 0 subnormal; else normal; halved."""
    if u in (0x00, 0x7F):
        return 0.0
    exp, man = (u >> 3) & 0xF, u & 7
    value = man * 2.0 ** -9 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7)
    return value * 0.5


def test_nvfp4_half_table_is_the_field_formula_for_every_byte():
    """MX-2.2: "u == 0x00 or u == 0x7F : 0 ... exp == 0 : man * 2^-9 * 0.5 ... exp >= 1 : (1 + man / 8) *
    2^(exp - 7) * 0.5" with bit 7 ignored (0xFF reads as 240): the table builder, for all 256 bytes."""
    want = np.array([ue4m3_half_by_hand(u) for u in range(256)], F32)
    got = nvfp4._ue4m3_half_table()
    assert got.dtype == F32 and got.shape == (256,)
    assert np.array_equal(bits(got), bits(want))
    assert (got[0x7F], got[0xFF], got[0x7E]) == (0.0, 240.0, 224.0)


def test_nvfp4_unpack_codes_of_several_blocks():
    """MX-2.1: "qs[8s + j] = [ c(16s + 8 + j) 7:4 | c(16s + j) 3:0 ]", block by block (three blocks)."""
    rng = np.random.default_rng(7)
    qs = rng.integers(0, 256, (3, 32), dtype=np.uint8)
    want = np.empty((3, 64), np.uint8)
    for b in range(3):
        for s in range(4):
            for j in range(8):
                want[b, 16 * s + j] = qs[b, 8 * s + j] % 16
                want[b, 16 * s + 8 + j] = qs[b, 8 * s + j] // 16
    got = nvfp4.unpack_codes(qs)
    assert got.shape == (3, 64) and np.array_equal(got, want)


def test_nvfp4_scales_report_d_as_the_ue4m3_values():
    """MX-2.4: "`scales` reports `d` as the UE4M3 values ggml reads (`2·D`)": field name d, one per sub-block."""
    blk = np.zeros((2, 36), np.uint8)
    blk[0, :4] = [0x38, 0x7F, 0xFF, 0x01]                    # 1.0, 0 (ggml's reading), 480, 2^-9
    blk[1, :4] = [0xB8, 0x7E, 0x00, 0x80]                    # bit 7 ignored: 1.0; 448; 0; 0
    got = ggml.TYPES["nvfp4"].scales(blk)
    assert list(got) == ["d"]
    assert np.array_equal(got["d"], np.array([[1.0, 0.0, 480.0, 2.0 ** -9], [1.0, 448.0, 0.0, 0.0]], F32))


def test_fp32_to_ue4m3_reads_a_double_as_its_float():
    """MX-2.5 step 2: ggml_fp32_to_ue4m3 takes a float: a float64 argument converts as its float32 value."""
    x = np.array([1.0, 0.5, 448.0, 0.05 / 6, 1.3166666666666667], np.float64)
    assert np.array_equal(nvfp4.fp32_to_ue4m3(x), nvfp4.fp32_to_ue4m3(x.astype(F32)))
    assert nvfp4.fp32_to_ue4m3(x).tolist() == [0x38, 0x30, 0x7E, 0x04, 0x3B]


def test_fp32_to_ue4m3_of_non_finite_and_negative_inputs_warns_nothing():
    """MX-2.5 step 2: "!(t > 0) -> 0; t > 448 -> t = 448": NaN, -inf, negatives give 0 and +inf 0x7E, as plain
    comparisons, without an invalid-cast warning."""
    x = np.array([np.nan, -np.inf, -1.0, -0.0, 0.0, np.inf, 3e38], F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = nvfp4.fp32_to_ue4m3(x)
    assert got.tolist() == [0, 0, 0, 0, 0, 0x7E, 0x7E]


def quantize_blocks(nb: int) -> np.ndarray:
    """nb blocks whose sub-blocks' magnitudes differ block by block (a different scale byte in each)."""
    rng = np.random.default_rng(nb)
    x = rng.standard_normal((nb, 64)).astype(F32)
    return x * F32(2.0) ** rng.integers(-8, 8, (nb, 1)).astype(F32)


def test_nvfp4_quantize_past_one_encoder_pass_matches_block_by_block():
    """MX-2.5: "Per sub-block": a row of one pass plus one block (8193 blocks) encodes each block as alone."""
    nb = 8193
    x = quantize_blocks(nb)
    whole = ggml.quantize("nvfp4", x.reshape(1, -1)).reshape(nb, 36)
    for b in (0, 1, 8191, 8192):
        assert np.array_equal(whole[b], ggml.quantize("nvfp4", x[b:b + 1]).reshape(36)), b
    assert np.array_equal(whole[-2:], ggml.quantize("nvfp4", x[-2:].reshape(1, -1)).reshape(2, 36))


# _set_scale (GGML-5.1): block b, sub-block s takes value v[(b - s) % nb] (rotated); the byte rules of its
# docstring, worked by hand per class.
SET_SCALE_VALUES = [0.0, -0.0, 2.0 ** -20, -(2.0 ** -15), 2.0 ** -14, 65504.0, -65504.0, np.inf, np.nan,
                    -np.inf, 1.0, -3.0, 0.05, 448.0, 2.0 ** -16 * 3, 1.5]


def set_scale_byte_by_hand(v: float, b: int, s: int) -> int:
    k = b + s
    if not np.isfinite(v):
        return 0x7F | (0x80 if (np.signbit(v) or k % 2 == 1) else 0)
    sign = 0x80 if np.signbit(v) else 0
    m = abs(v)
    if 0 < m < 2.0 ** -14:
        return (1 + k % 7) | sign
    if m >= 65504:
        return (0x78 + k % 8) | sign
    # the encoder's byte (MX-2.5 step 2): 0.05 = 1.1001 1001...b * 2^-5 -> exponent field 2, mantissa 100b + the
    # next bit 1 -> 101b: 0x15; 1.5 = 1.1b -> 0x3C; 3.0 = 1.1b * 2 -> 0x44; 2^-14 * 512 + 0.5 truncates to 0
    nearest = {0.0: 0x00, 2.0 ** -14: 0x00, 1.0: 0x38, 3.0: 0x44, float(F32(0.05)): 0x15, 448.0: 0x7E, 1.5: 0x3C}
    return nearest[m] | sign


def test_nvfp4_set_scale_writes_each_class_byte_by_hand():
    """GGML-5.1 for nvfp4 (MX-2.2): zero -> 0x00 / 0x80, float16 subnormals -> 0x01 .. 0x07 by position,
    +-65504 -> 0x78 .. 0x7F by position, inf and NaN -> 0x7F / 0xFF, others the encoder's byte; bit 7 the sign."""
    v = np.array(SET_SCALE_VALUES, np.float32)
    nb = v.size
    blk = np.zeros((nb, 36), np.uint8)
    ggml.TYPES["nvfp4"].set_scale(blk, v)
    want = [[set_scale_byte_by_hand(float(v[(b - s) % nb]), b, s) for s in range(4)] for b in range(nb)]
    assert blk[:, :4].tolist() == want
    assert not blk[:, 4:].any()


def test_nvfp4_zero_sub_blocks_get_scale_0_and_code_0():
    """MX-2.5 step 2 "!(t > 0) -> 0" and step 4 at D = 0: every error |k * 0 - 0| ties code 0's, so an all-zero
    sub-block is u = 0 and codes 0, beside a sub-block of ones (1/6 = 1.0101..b * 2^-3: field 4, 010b + 1)."""
    x = np.zeros((1, 64), F32)
    x[0, 16:32] = 1.0
    got = ggml.quantize("nvfp4", x).reshape(36)
    assert got[:4].tolist() == [0x00, 0x23, 0x00, 0x00]
    assert not got[4:12].any() and not got[20:].any()


# ------------------------------------------------------------------------------------------------ mxfp4 (MX-1)

KV = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]          # MX-1.2's table of kvalues


def mxfp4_by_hand(blk: np.ndarray) -> np.ndarray:
    """MX-1.3 / MX-1.1 in float64: y[j] = kvalues[qs[j] & 15] * 2^(e - 128), y[j + 16] with qs[j] >> 4; one
    rounding to float32 (the product is exact in float64, so this is C's single float32 product)."""
    e = blk[:, :1].astype(np.float64)
    codes = np.concatenate([blk[:, 1:] % 16, blk[:, 1:] // 16], axis=1)
    with np.errstate(over="ignore"):
        return (np.array(KV, np.float64)[codes] * 2.0 ** (e - 128)).astype(F32)


def test_mxfp4_unpack_codes_of_several_blocks():
    """MX-1.1: "qs[j] = [ c(j + 16) 7:4 | c(j) 3:0 ]", block by block (three blocks)."""
    qs = np.random.default_rng(3).integers(0, 256, (3, 16), dtype=np.uint8)
    want = [[int(qs[b, j % 16]) % 16 if j < 16 else int(qs[b, j % 16]) // 16 for j in range(32)] for b in range(3)]
    assert mxfp4.unpack_codes(qs).tolist() == want


def test_mxfp4_decode_returns_float32():
    """GGML-2 (BlockType.decode: "-> float32 (nb, block_size)") for mxfp4, MX-1.3's one float32 product."""
    blk = np.zeros((2, 17), np.uint8)
    blk[:, 0] = 0x7F
    blk[:, 1] = 0x7A
    got = ggml.TYPES["mxfp4"].decode(blk)
    assert got.dtype == F32 and got.shape == (2, 32)
    assert np.array_equal(bits(got), bits(mxfp4_by_hand(blk)))


def test_mxfp4_decode_of_exactly_one_block():
    """MX-1.6: e = 0x7F, qs[0] = 0x7A, qs[1] = 0x58: element 0 = -1.0, 16 = 6.0, 1 = +0.0, 17 = 3.0: one block
    alone (nb = 1), into a fresh output that held other values before."""
    junk = np.full((1, 32), np.nan, F32)
    del junk
    blk = np.zeros((1, 17), np.uint8)
    blk[0, :3] = [0x7F, 0x7A, 0x58]
    want = np.zeros(32, F32)
    want[[0, 16, 17]] = [-1.0, 6.0, 3.0]
    for _ in range(3):
        assert np.array_equal(bits(ggml.TYPES["mxfp4"].decode(blk)[0]), bits(want))
        blk[0, 4] ^= 0x11                                      # and elements 3 and 19 = 0.5, 0 by turns
        want[[3, 19]] = 0.5 - want[[3, 19]]


def test_mxfp4_decode_past_two_passes_is_the_formula():
    """MX-1.3 on 16385 blocks (two decode passes plus one): every weight kvalues[c] * 2^(e - 128)."""
    rng = np.random.default_rng(5)
    blk = rng.integers(0, 256, (16385, 17), dtype=np.uint8)
    with np.errstate(over="ignore"):
        assert np.array_equal(bits(ggml.TYPES["mxfp4"].decode(blk)), bits(mxfp4_by_hand(blk)))


def test_mxfp4_quantize_past_one_encoder_pass():
    """MX-1.5: "Per block": a row of one encoder pass plus one block (16385 blocks) encodes its last block as
    that block alone: x = 6.0 and 1.0 (e = 2 - 2 + 127 = 127, D = 0.5: codes 7 and 2 in qs[0], qs[1] low nibbles)."""
    x = np.zeros((16385, 32), F32)
    x[:, 0], x[:, 1] = 6.0, 1.0
    got = ggml.quantize("mxfp4", x.reshape(1, -1)).reshape(16385, 17)
    one = np.frombuffer(bytes.fromhex("7f 07 02" + " 00" * 14), np.uint8)
    assert np.array_equal(got, np.tile(one, (16385, 1)))


def test_mxfp4_one_ulp_above_a_half_way_point_takes_the_upper_code():
    """MX-1.5 step 4: strict `err < best_err`: a tie keeps the lower code, one float32 ulp above the half-way
    point between grid values k and k' makes k' strictly nearer. D = 0.5 (amax 6.0): x = 1.25 (half way between
    1.0 and 1.5) -> code 2; nextafter(1.25, inf) -> code 3; the same for the midpoints 0.25, 0.75, 1.75, 2.5, 3.5, 5."""
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], F32)
    x = np.zeros((2, 32), F32)
    x[:, 0] = 6.0
    x[0, 1:8] = mids
    x[1, 1:8] = np.nextafter(mids, F32(np.inf))
    x[:, 17:24] = -x[:, 1:8]
    got = ggml.quantize("mxfp4", x.reshape(1, -1)).reshape(2, 17)
    low = [7, 0, 1, 2, 3, 4, 5, 6] + [0] * 8                 # the lower codes at the ties; 6.0 is code 7
    high = [7, 1, 2, 3, 4, 5, 6, 7] + [0] * 8
    for b, codes in ((0, low), (1, high)):
        neg = [0] + [c + 8 if c else 0 for c in codes[1:8]] + [0] * 8   # code c + 8 mirrors c; -0 is code 0
        assert got[b].tolist() == [0x7F] + [lo | hi << 4 for lo, hi in zip(codes, neg)]


def test_mxfp4_quantize_of_hostile_blocks():
    """MX-1.5 steps 1-4 on zero, NaN, inf, tiny and huge blocks: "a NaN never enters; +inf does", +inf -> e = 0,
    [2^-126, 2^-125) -> 0xFF, 1e-45 wraps to 232, NaN and inf elements code 0, magnitudes past 6 D clip to 7."""
    x = np.zeros((6, 32), F32)
    x[1, 3] = np.nan
    x[2, 5] = np.inf
    x[3, 0] = 2.0 ** -126
    x[4, :] = 3e38
    x[5, 0] = 1e-45
    got = ggml.quantize("mxfp4", x.reshape(1, -1)).reshape(6, 17)
    assert got[:, 0].tolist() == [0, 0, 0, 0xFF, 252, 232]   # MX-1.5 step 2: +inf -> 0, 2^-126 -> 0xFF, 1e-45 -> 232
    assert not got[:4, 1:].any()                           # NaN, inf: code 0 everywhere (step 4)
    assert (got[4, 1:] == 0x77).all()                      # 3e38 / 2^124 = 14.1 clips to code 7 (12 D)


def test_mxfp4_exponent_of_non_positive_and_non_finite_amax_warns_nothing():
    """MX-1.5 step 2: "amax > 0 ? ... : 0" and +inf -> INT_MIN -> low byte 0: 0, -0, negatives, NaN, -inf and
    +inf all give 0, without a divide, invalid or cast warning."""
    amax = np.array([0.0, -0.0, -1.0, np.nan, -np.inf, np.inf, 6.0], F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = mxfp4.mxfp4_exponent(amax)
    assert got.tolist() == [0, 0, 0, 0, 0, 0, 127]


def code_by_search(y: np.float32) -> int:
    """MX-1.5 step 4 at D = 1 in plain float32, one code at a time: the first code of least |kvalues[i] - y|."""
    if np.isnan(y):
        return 0
    errs = [abs(np.float32(k) - y) for k in KV]
    return int(np.argmin(errs))


def test_mxfp4_code_table_is_the_search_at_both_ends_of_every_bucket():
    """MX-1.5 step 4 as a table: entry j serves every float32 y with (bits(y) - 1) >> 21 == j (uint32); for each
    j whose y are below 32 in magnitude (the fast path's range) or NaN, the search gives the entry's code at the
    first and the last y of the bucket."""
    table = mxfp4._code_table()
    assert table.dtype == np.uint8 and table.shape == (2048,)
    for j in range(2048):
        ends = np.array([(j << 21) + 1, ((j + 1) << 21) % 2 ** 32], np.uint32).view(F32)
        if all(np.isnan(y) or abs(y) < 32 for y in ends):
            assert [code_by_search(y) for y in ends] == [int(table[j])] * 2, (j, ends)


def search_block_by_hand(x: np.ndarray, e: int) -> list[int]:
    """MX-1.5 steps 3-5 for one block at the exponent byte e, in plain float32, element by element:
    D = 2^(e - 128) (2^127 for 0xFF, MX-1.2), the first code of least |kvalues[i] * D - x|, then the bytes."""
    d = F32(2.0 ** 127) if e == 0xFF else F32(2.0 ** (e - 128))
    codes = []
    with np.errstate(over="ignore", invalid="ignore"):
        for v in x:
            best, best_err = 0, abs(F32(KV[0]) * d - v)
            for i in range(1, 16):
                err = abs(F32(KV[i]) * d - v)
                if err < best_err:
                    best, best_err = i, err
            codes.append(best)
    return [e] + [codes[j] | codes[j + 16] << 4 for j in range(16)]


def test_mxfp4_blocks_outside_the_table_take_the_search():
    """MX-1.5 on the blocks the code table does not serve, worked as the C search: a NaN element (amax = 6.0
    from the others, e = 127), amax = 2^-125 (e = -125 - 2 + 127 = 0, D = 2^-128) and amax = FLT_MAX (e = 253:
    "FLT_MAX gets e = 253", where 8 D overflows to inf); every code 0..15 in play, high nibbles included."""
    grid = np.array([0, 1, 2, 3, 4, 6, 8, 12], F32)
    x = np.zeros((3, 32), F32)
    x[0, 0], x[0, 1:8], x[0, 17:24] = np.nan, grid[1:] * F32(0.5), -grid[1:] * F32(0.5)
    x[0, 9:12] = [1.25, 5.0, -2.5]                                   # ties: the lower code
    x[1, :8] = grid * F32(2.0 ** -128)
    x[1, 16:24] = -grid * F32(2.0 ** -128) * F32(1.1)
    x[1, 8] = 2.0 ** -125
    x[2, 0] = np.finfo(F32).max
    x[2, 1:6] = grid[1:6] * F32(2.0 ** 125)                         # 8 * 2^125 would be inf itself
    x[2, 17:22] = -grid[1:6] * F32(2.0 ** 125) * F32(0.9)
    got = ggml.quantize("mxfp4", x.reshape(1, -1)).reshape(3, 17)
    want = [search_block_by_hand(x[0], 127), search_block_by_hand(x[1], 0), search_block_by_hand(x[2], 253)]
    assert got.tolist() == want
    assert {c for row in want for b in row[1:] for c in (b & 15, b >> 4)} == set(range(16)) - {8}   # 8 is -0


def test_mxfp4_scales_report_e_as_the_ocp_value():
    """MX-1.4: "`scales` reports `e` as the OCP value 2^(e - 127) ... and NaN for e = 0xFF", one per block."""
    blk = np.zeros((3, 17), np.uint8)
    blk[:, 0] = [0x7F, 0x00, 0xFF]
    blk[:, 1] = 0x80                                                 # a qs byte that is no scale
    got = ggml.TYPES["mxfp4"].scales(blk)
    assert list(got) == ["e"] and got["e"].shape == (3, 1)
    assert got["e"][:2, 0].tolist() == [1.0, 2.0 ** -127] and np.isnan(got["e"][2, 0])


def mxfp4_set_scale_by_hand(v: float, i: int) -> int:
    """MX-1.4 / GGML-5.1 for the E8M0 byte, worked per value: floor(log2 |v|) + 127; float16 zeros and
    subnormals e = i % 3; |v| >= 65504 e = 253 + i % 2; inf and NaN 0xFF."""
    m = abs(v)
    if not np.isfinite(m):
        return 0xFF
    if m < 2.0 ** -14:
        return i % 3
    if m >= 65504:
        return 253 + i % 2
    return {1.0: 127, 0.5: 126, 3.0: 128, 2.0 ** -14: 113, 2.0 ** -15: 112, 32752.0: 141, 1.9990234375: 127}[m]


def test_mxfp4_set_scale_writes_each_class_byte_by_hand():
    """GGML-5.1 for mxfp4 (MX-1.4): each float16 value's exponent as the E8M0 byte, by position for the
    zero/subnormal and overflowing classes, 0xFF for inf and NaN; float16 values read at float32 precision."""
    values = [0.0, 2.0 ** -15, 2.0 ** -24, -(2.0 ** -20), 2.0 ** -14, 65504.0, -65504.0, np.inf, np.nan, 1.0,
              -3.0, 0.5, 32752.0, 1.9990234375, -np.inf, 65504.0]
    v = np.array(values, np.float16)
    blk = np.zeros((v.size, 17), np.uint8)
    ggml.TYPES["mxfp4"].set_scale(blk, v)
    assert blk[:, 0].tolist() == [mxfp4_set_scale_by_hand(float(x), i) for i, x in enumerate(v)]
    assert not blk[:, 1:].any()


# ----------------------------------------------------------------------------------------- q1_0, q2_0 (LEG-9, LEG-10)


def fp16_le(v: float) -> list[int]:
    """LEG-1.4's fp16(d) for non-NaN d (NumPy's float16 conversion agrees there): two little-endian bytes."""
    return list(np.array([v], np.float16).view(np.uint8))


def roundf(v: float) -> int:
    """C roundf, ties away from zero (LEG-1.4), of a finite float."""
    return int(np.sign(v) * np.floor(abs(v) + 0.5))


def q1_0_block_by_hand(x: np.ndarray) -> list[int]:
    """LEG-9.4 for a block whose magnitudes sum exactly: d = sum |x| / 128, s(j) = x[j] >= 0, LSB first."""
    d = float(np.abs(x.astype(np.float64)).sum()) / 128
    return fp16_le(d) + [sum(int(x[8 * j + b] >= 0) << b for b in range(8)) for j in range(16)]


def q2_0_block_by_hand(x: np.ndarray) -> list[int]:
    """LEG-10.4 for a finite block: d = amax, id = 1.0f / d (or 0), q = clamp(roundf(x * id) + 1, 0, 3)."""
    amax = F32(np.abs(x).max())
    inv = F32(1) / amax if amax > 0 else F32(0)
    q = [min(max(roundf(float(F32(v) * inv)) + 1, 0), 3) for v in x]
    return fp16_le(float(amax)) + [q[4 * j] | q[4 * j + 1] << 2 | q[4 * j + 2] << 4 | q[4 * j + 3] << 6
                                   for j in range(16)]


def test_q1_0_encoder_runs_the_rows_as_one_sequence_of_blocks():
    """GGML-4 / LEG-9.4 ("quantize_<type>(x, y, rows, n, NULL)"): 3 rows of 256 weights are 6 blocks, each
    encoded on its own, row by row: the encoder the type's factory builds, called directly."""
    rng = np.random.default_rng(9)
    x = (rng.integers(-8, 9, (3, 256)) / 4).astype(F32)           # quarters: every sum is exact
    quantize = lowbit._encoder(128, 18, lowbit._ref_q1_0)
    got = quantize(x, None)
    assert got.dtype == np.uint8 and got.shape == (3, 36)
    want = [q1_0_block_by_hand(b) for b in x.reshape(6, 128)]
    assert got.reshape(6, 18).tolist() == want


def test_q2_0_encoder_past_one_pass():
    """GGML-4 / LEG-10.4: 5 rows of 3277 blocks (16385 blocks, one encoder pass plus one): every block as alone;
    block b is 2^(b % 5) times a pattern of codes 0, 1, 2 (d = 2^(b % 5) * 2)."""
    pattern = np.resize(np.array([-2.0, 0.0, 2.0, 1.0, -0.5, 0.25], F32), 64)
    scale = F32(2.0) ** (np.arange(16385) % 5).astype(F32)
    x = (scale[:, None] * pattern).reshape(5, 3277 * 64)
    poison = np.full(16385 * 18, 0xA5, np.uint8)                # freed memory of the output's size holds no answer
    del poison
    got = lowbit._encoder(64, 18, lowbit._ref_q2_0)(x, None)
    assert got.dtype == np.uint8 and got.shape == (5, 3277 * 18)
    want = np.array([q2_0_block_by_hand(pattern * F32(2.0 ** k)) for k in range(5)], np.uint8)
    assert np.array_equal(got.reshape(16385, 18), want[np.arange(16385) % 5])


def test_q2_0_all_nan_block_has_d_zero():
    """LEG-10.4: "amax = 0.0f ... a NaN never enters": an all-NaN block keeps amax = +0, so d = 0 (00 00), id = 0,
    and NaN * 0 = NaN converts to INT_MIN, clamped to code 0 everywhere."""
    x = np.full((1, 64), np.nan, F32)
    assert ggml.quantize("q2_0", x).tolist() == [[0] * 18]


def test_q2_0_all_zero_block_is_code_1_everywhere():
    """LEG-10.4: amax = 0 gives id = 0.0f, so x * id = 0 and q = roundf(0) + 1 = 1: d = 00 00, bytes 0x55."""
    assert ggml.quantize("q2_0", np.zeros((1, 64), F32)).tolist() == [[0, 0] + [0x55] * 16]


def test_q2_0_product_is_rounded_to_float32_before_roundf():
    """LEG-10.4 / LEG-1.4: x * id is one float32 product: amax = 1.1f, id = 1.0f / 1.1f, x = 0.55f gives the
    float32 product 0.5 exactly (0.49999999... in float64), which roundf takes to 1: code 2; -0.55f -> code 0."""
    x = np.zeros((1, 64), F32)
    x[0, :3] = [1.1, F32(1.1) / F32(2), -(F32(1.1) / F32(2))]
    assert F32(x[0, 1]) * (F32(1) / F32(1.1)) == F32(0.5)        # the premise, in float32
    assert float(x[0, 1]) * float(F32(1) / F32(1.1)) < 0.5      # ... and not in float64
    assert ggml.quantize("q2_0", x).tolist() == [q2_0_block_by_hand(x[0])]
    assert ggml.quantize("q2_0", x)[0, 2] == 0b01_00_10_10    # codes 2, 2, 0, then 1


@pytest.mark.parametrize(("v", "want"), [
    (-100.0, -100), (100.0, 100), (-2.5, -2), (2.5, 2),
    (-(2.0 ** 31), -(2 ** 31)), (2.0 ** 31, -(2 ** 31)), (2.0 ** 31 - 128, 2 ** 31 - 128),
    (-3e9, -(2 ** 31)), (3e9, -(2 ** 31)), (np.nan, -(2 ** 31)), (np.inf, -(2 ** 31)), (-np.inf, -(2 ** 31)),
])
def test_c_int_is_cvttss2si(v, want):
    """LEG-1.4: "(int)f ... truncate toward zero ... NaN and values outside the int32 range give 0x80000000": at
    the int32 limits and one float32 past them, as int64 without a cast warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = lowbit.c_int(np.array([v], F32))
    assert got.dtype == np.int64 and got.tolist() == [want]


def test_unpack_crumbs_gives_uint8_codes():
    """LEG-10.1: "qs[j] = [ q(4j+3) 7:6 | q(4j+2) 5:4 | q(4j+1) 3:2 | q(4j) 1:0 ]" as uint8 codes 0..3."""
    qs = np.array([[0xE4] + [0x1B] * 15, [0xFF] * 8 + [0x00] * 8], np.uint8)
    got = lowbit.unpack_crumbs(qs)
    assert got.dtype == np.uint8 and got.shape == (2, 64)
    assert got[0].tolist() == [0, 1, 2, 3] + [3, 2, 1, 0] * 15 and got[1].tolist() == [3] * 32 + [0] * 32
