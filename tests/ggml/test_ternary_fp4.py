"""tq1_0, tq2_0 and mxfp4 (spec/ggml_ternary_fp4.md): worked examples, properties and oracle edge cases.

The shared oracle test (tests/ggml/test_oracle.py) covers random blocks and 104 random encoder rows per type;
this file adds the hand-worked spec examples, exhaustive properties of the packing, and oracle runs on the
edges random data rarely reaches: every E8M0 byte, every tq1_0 byte value, the log2f floor at every binade
boundary, and rows whose NaN resets ggml's running MAX.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml.checks import scale_findings
from qformats.formats.ggml.mxfp4 import E8M0_HALF, KVALUES_MXFP4, e8m0, mxfp4_exponent
from qformats.formats.ggml.ternary import lround_low_byte, trit

F32 = np.float32
LIB = os.environ.get("QFORMATS_GGML_LIB")
needs_oracle = pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to run")


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


@pytest.fixture(scope="module")
def oracle():
    from conformance.adapters import ggml as ggml_lib

    return ggml_lib


# ------------------------------------------------------------------------------------------------ tq1_0


def tq1_0_example_input() -> np.ndarray:
    x = np.zeros((1, 256), F32)
    for i, v in {0: 2.0, 32: -2.0, 64: 0.4, 96: 1.2, 128: -1.0, 240: 1.5, 248: 0.25, 252: -1.9}.items():
        x[0, i] = v
    return x


TQ1_0_EXAMPLE_BLOCK = bytes([0xBB] + [0x80] * 47 + [0xD1, 0x7F, 0x7F, 0x7F, 0x00, 0x40])


def test_tq1_0_worked_example_encodes_to_the_spec_bytes():
    """TQ-1.6: "qs[0] = (177·256 + 242) / 243 = 187 = 0xBB" ... "qh[0] = 209 = 0xD1". Every other byte holds
    only zeros: qs = 0x80, qh = 0x7F; d = 0x4000."""
    assert ggml.quantize("tq1_0", tq1_0_example_input()).tobytes() == TQ1_0_EXAMPLE_BLOCK


def test_tq1_0_worked_example_decodes_to_the_spec_values():
    """TQ-1.6: "y[0] = 2, y[32] = −2, y[64] = 0, y[96] = 2, y[128] = −2; ... y[240] = 2, y[244] = 0,
    y[248] = 0, y[252] = −2; every other y is 0"."""
    y = ggml.dequantize("tq1_0", np.frombuffer(TQ1_0_EXAMPLE_BLOCK, np.uint8)[None, :])[0]
    want = np.zeros(256, F32)
    want[[0, 96, 240]] = 2.0
    want[[32, 128, 252]] = -2.0
    np.testing.assert_array_equal(bits(y), bits(want))


def test_tq1_0_trits_round_trip_for_every_packed_value():
    """TQ-1.2: every q in 0..242 (and every qh value q·3, q in 0..80) stored as ceil(q·256/243) gives back its
    base-3 digits, most significant first, through ((byte·3^n mod 256)·3) >> 8."""
    q = np.arange(243)
    byte = (q * 256 + 242) // 243
    for n in range(5):
        np.testing.assert_array_equal(trit(byte, n), (q // 3 ** (4 - n)) % 3)
    q4 = np.arange(81)
    byte = (q4 * 3 * 256 + 242) // 243
    for n in range(4):
        np.testing.assert_array_equal(trit(byte, n), (q4 // 3 ** (3 - n)) % 3)


def test_tq1_0_bytes_never_written_are_the_spec_list():
    """TQ-1.5: the 13 qs byte values no encoder writes, and 81 qh values written."""
    written = {(q * 256 + 242) // 243 for q in range(243)}
    assert sorted(set(range(256)) - written) == [1, 20, 40, 60, 79, 99, 119, 138, 158, 178, 197, 217, 237]
    assert len({(q * 3 * 256 + 242) // 243 for q in range(81)}) == 81


def test_tq1_0_every_byte_decodes_to_a_trit():
    """TQ-1.5 / GGML-3.4: every byte value (written or not) decodes to -d, 0 or d."""
    blocks = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 54, axis=1)
    blocks[:, 52:54] = np.frombuffer(np.float16(1.5).tobytes(), np.uint8)
    y = ggml.dequantize("tq1_0", blocks)
    assert set(np.unique(y).tolist()) == {-1.5, 0.0, 1.5}


# ------------------------------------------------------------------------------------------------ tq2_0


def test_tq2_0_worked_example_decodes_to_the_spec_values():
    """TQ-2.6: "weights 0, 32, 64, 96 have codes 0, 1, 2, 3 → y = −1, 0, 1, 2; weights 128, 160, 192, 224
    codes 3, 2, 1, 0 → y = 2, 1, 0, −1; all other weights 0" (TQ-2.3: code 3 decodes to +2·D)."""
    blk = np.full((1, 66), 0x55, np.uint8)
    blk[0, 0], blk[0, 32] = 0xE4, 0x1B
    blk[0, 64:66] = [0x00, 0x3C]
    y = ggml.dequantize("tq2_0", blk)[0]
    want = np.zeros(256, F32)
    want[[0, 32, 64, 96, 128, 160, 192, 224]] = [-1, 0, 1, 2, 2, 1, 0, -1]
    np.testing.assert_array_equal(bits(y), bits(want))


def test_tq2_0_worked_example_encodes_to_the_spec_bytes():
    """TQ-2.6: "x * id = −1, 0.475, 0.5, −0.5 → lroundf −1, 0, 1, −1 → codes 0, 1, 2, 0 → qs[0] = 0x24;
    every other byte 0x55; d = 0x4400"."""
    x = np.zeros((1, 256), F32)
    x[0, [0, 32, 64, 96]] = [-4.0, 1.9, 2.0, -2.0]
    assert ggml.quantize("tq2_0", x).tobytes() == bytes([0x24] + [0x55] * 63 + [0x00, 0x44])


def test_ternary_all_zero_blocks():
    """TQ-1.4 / TQ-2.4: an all-zero block is 0x80 x48, 0x7F x4 (tq1_0) or 0x55 x64 (tq2_0), with d = 0."""
    x = np.zeros((2, 256), F32)
    x[1] = -0.0
    assert ggml.quantize("tq1_0", x).tobytes() == (bytes([0x80] * 48 + [0x7F] * 4 + [0, 0])) * 2
    assert ggml.quantize("tq2_0", x).tobytes() == (bytes([0x55] * 64 + [0, 0])) * 2


@pytest.mark.parametrize("name", ["tq1_0", "tq2_0"])
def test_ternary_encode_decode_error_is_at_most_half_a_step(name):
    """TQ-1.4 / TQ-2.4: for finite blocks every weight decodes to the nearest of -d, 0, +d (d = fp16(amax)),
    so |x - y| <= amax / 2 plus the float16 rounding of d."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((64, 1024)) * 10.0 ** rng.uniform(-3, 3, (64, 1))).astype(F32)
    y = ggml.dequantize(name, ggml.quantize(name, x)).astype(np.float64)
    amax = np.abs(x.astype(np.float64)).reshape(64, -1, 256).max(axis=2)
    bound = np.repeat(amax * (0.5 + 2.0 ** -10) * 1.000001, 256, axis=1)
    assert np.all(np.abs(y - x) <= bound)
    step = np.repeat(amax.astype(np.float16).astype(np.float64), 256, axis=1)
    assert np.all((y == 0) | (np.abs(y) == step))


def test_lround_low_byte_matches_libm_lroundf():
    """TQ-1.4 step 3: lroundf rounds half away from zero and gives LONG_MIN (low byte 0) for NaN, ±inf and
    |v| >= 2^63; checked against this machine's C library."""
    path = ctypes.util.find_library("m")
    if path is None:
        pytest.skip("no C math library to compare with")
    libm = ctypes.CDLL(path)
    libm.lroundf.argtypes, libm.lroundf.restype = [ctypes.c_float], ctypes.c_long
    specials = [0.5, -0.5, 1.5, -1.5, 2.5, 0.49999997, -0.49999997, 1.0000001, 0.0, -0.0, 255.5, -255.5,
                2.0 ** 31, 2.0 ** 62 * 1.5, 2.0 ** 63, -(2.0 ** 63), 3e38, np.inf, -np.inf, np.nan, 1e-45]
    rng = np.random.default_rng(3)
    spread = rng.standard_normal(2000) * 10.0 ** rng.uniform(-2, 12, 2000)
    v = np.concatenate([np.array(specials, F32), spread.astype(F32)])
    want = np.array([libm.lroundf(float(f)) & 0xFF for f in v])
    np.testing.assert_array_equal(lround_low_byte(v), want)


@pytest.mark.parametrize(("name", "offset"), [("tq1_0", 52), ("tq2_0", 64)])
def test_ternary_negative_d_is_a_warning_and_nan_d_an_error(name, offset):
    """TQ-1.5 / TQ-2.5: a negative d is ggml.scale.negative (warning, GGML-3.2); a NaN d is
    ggml.scale.nonfinite (error, GGML-3.1)."""
    bt = ggml.TYPES[name]
    blk = np.zeros((1, bt.type_size * 2), np.uint8)
    blk[0, offset:offset + 2] = np.frombuffer(np.float16(-0.5).tobytes(), np.uint8)
    found = scale_findings(bt, blk, "t")
    assert [(f.code, f.severity) for f in found] == [("ggml.scale.negative", "warning")]
    blk[0, bt.type_size + offset:bt.type_size + offset + 2] = [0x00, 0x7E]
    with pytest.raises(QFormatsError) as err:
        ggml.check_blocks(name, blk)
    assert err.value.code == "ggml.scale.nonfinite"


# ------------------------------------------------------------------------------------------------ mxfp4


def test_mxfp4_worked_example_decodes_to_the_spec_values():
    """MX-1.6: "kvalues[10]·0.5 = −1.0; element 16 ... 12·0.5 = 6.0; element 1 code 8: +0.0; element 17
    code 5: 3.0"; with e = 0x00 element 16 is 12·2^-128 = 3.5264831e-38; with e = 0xFF element 16 = +inf
    and element 0 = −inf."""
    blk = np.zeros((3, 17), np.uint8)
    blk[:, 0] = [0x7F, 0x00, 0xFF]
    blk[:, 1], blk[:, 2] = 0x7A, 0x58
    y = ggml.dequantize("mxfp4", blk.reshape(1, -1)).reshape(3, 32)
    want = np.zeros(32, F32)
    want[[0, 16, 17]] = [-1.0, 6.0, 3.0]
    np.testing.assert_array_equal(bits(y[0]), bits(want))            # element 1 is +0.0, not -0.0
    assert y[1, 16] == F32(3.5264831e-38) == F32(12 * 2.0 ** -128)
    assert y[2, 16] == np.inf and y[2, 0] == -np.inf and y[2, 1] == 0.0


def test_mxfp4_worked_example_encodes_to_the_spec_bytes():
    """MX-1.6: "Bytes: 7F B6 70 04 00 …" — ties keep the lower code, 7.9 clips to 6.0."""
    x = np.zeros((1, 32), F32)
    x[0, [0, 1, 2, 16, 17]] = [5.0, -0.25, 2.5, -1.3, 7.9]
    assert ggml.quantize("mxfp4", x).tobytes() == bytes([0x7F, 0xB6, 0x70, 0x04] + [0] * 13)


def test_mxfp4_tiny_block_gets_e_0xff_which_is_invalid():
    """MX-1.6: "x[0] = 2^-126: ... e = 0xFF, all codes 0: the reference encoder writes FF 00 … 00", which is
    invalid (MX-1.4)."""
    x = np.zeros((1, 32), F32)
    x[0, 0] = 2.0 ** -126
    blocks = ggml.quantize("mxfp4", x)
    assert blocks.tobytes() == bytes([0xFF] + [0] * 16)
    with pytest.raises(QFormatsError) as err:
        ggml.check_blocks("mxfp4", blocks)
    assert err.value.code == "ggml.scale.nonfinite" and "e = NaN" in str(err.value)


def test_mxfp4_decode_is_e2m1_times_the_ocp_scale():
    """MX-1.2 / MX-1.3: for every e < 0xFF and code c, y = E2M1(c) · 2^(e − 127) rounded once to float32
    (computed here in float64), code 8 giving +0.0; for e = 0xFF ggml's k · 2^127."""
    e = np.repeat(np.arange(256, dtype=np.uint8), 16)
    c = np.tile(np.arange(16, dtype=np.uint8), 256)
    blk = np.zeros((256 * 16, 17), np.uint8)
    blk[:, 0] = e
    blk[:, 1] = c                                  # element 0 gets code c, element 16 code 0
    y = ggml.dequantize("mxfp4", blk.reshape(1, -1)).reshape(-1, 32)[:, 0]
    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6])
    with np.errstate(over="ignore"):
        want = (e2m1[c] * np.ldexp(1.0, e.astype(int) - 127)).astype(F32)
        want[e == 255] = (KVALUES_MXFP4[c[e == 255]] * 2.0 ** 127).astype(F32)
    np.testing.assert_array_equal(bits(y), bits(want))


def test_mxfp4_scales_are_nonfinite_exactly_for_0xff():
    """MX-1.4: scales() reports 2^(e − 127), NaN exactly for e = 0xFF (e = 0 is the finite 2^-127)."""
    e = np.arange(256, dtype=np.uint8)
    blk = np.zeros((256, 17), np.uint8)
    blk[:, 0] = e
    v = ggml.TYPES["mxfp4"].scales(blk)["e"][:, 0]
    np.testing.assert_array_equal(~np.isfinite(v), e == 0xFF)
    assert v[0] == F32(2.0 ** -127) and v[127] == 1.0 and v[254] == F32(2.0 ** 127)
    assert np.isnan(e8m0(np.array([0xFF], np.uint8)))[0]
    for ok in (0, 1, 254):
        ggml.check_blocks("mxfp4", blk[ok][None, :])


def test_mxfp4_exponent_edges():
    """MX-1.5 step 2: (uint8_t)(floorf(log2f(amax)) − 2 + 127) with the low byte kept: +inf → 0,
    [2^-126, 2^-125) → 0xFF except its last float, whose log2f rounds up to −125 (→ 0), 2^-127 → 254,
    1e-45 → 232, FLT_MAX → 253 (log2f rounds to 128), 5.0 → 127, the float below 8 → 128 (rounds up to 3)."""
    amax = np.array([np.inf, 2.0 ** -126, 2.0 ** -125 - 2.0 ** -149, 2.0 ** -125, 2.0 ** -127, 1e-45,
                     np.finfo(F32).max, 5.0, 8.0 * (1 - 2.0 ** -24), 0.0], F32)
    assert mxfp4_exponent(amax).tolist() == [0, 255, 0, 0, 254, 232, 253, 127, 128, 0]
    assert E8M0_HALF[0] == F32(2.0 ** -128) and E8M0_HALF[255] == F32(2.0 ** 127)


def test_mxfp4_encode_error_is_within_the_grid_step():
    """MX-1.5: with e = floor(log2 amax) − 2 + 127 every |x| <= 6·2^(e−127) decodes to a nearest grid value,
    so |x − y| is at most half the widest grid gap (2^(e−127)); larger magnitudes clip to ±6·2^(e−127)."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((32, 1024)) * 10.0 ** rng.uniform(-6, 6, (32, 1))).astype(F32)
    blocks = ggml.quantize("mxfp4", x)
    y = ggml.dequantize("mxfp4", blocks).astype(np.float64).reshape(-1, 32)
    xb = x.astype(np.float64).reshape(-1, 32)
    unit = np.ldexp(1.0, blocks.reshape(-1, 17)[:, 0].astype(int) - 127)[:, None]
    clipped = np.clip(xb, -6 * unit, 6 * unit)
    assert np.all(np.abs(y - clipped) <= unit)
    assert np.all(np.abs(xb) < 8 * unit)


# ------------------------------------------------------------------------------------------------ oracle


@needs_oracle
def test_oracle_mxfp4_every_e_and_code(oracle):
    """MX-1.3 / MX-1.4 [run]: every (e, code) pair decodes bit-identically to dequantize_row_mxfp4, and
    ggml_validate_row_data refuses a block exactly when e = 0xFF (e = 0, 1, 254 accepted), as check_blocks does."""
    rng = np.random.default_rng(5)
    blk = rng.integers(0, 256, (256, 17), dtype=np.uint8)
    blk[:, 0] = np.arange(256)
    blk[:16, 1:9] = np.arange(256, dtype=np.uint8).reshape(16, 16)[:, ::2]     # every nibble in both halves
    np.testing.assert_array_equal(bits(ggml.dequantize("mxfp4", blk.reshape(1, -1))),
                                  bits(oracle.dequantize("mxfp4", blk.reshape(1, -1))))
    for e in (0, 1, 2, 127, 253, 254, 255):
        row = blk[e]
        assert oracle.validate_row_data(39, row) == (e != 255)
        try:
            ggml.check_blocks("mxfp4", row[None, :])
            ours = True
        except QFormatsError as err:
            assert err.code == "ggml.scale.nonfinite"
            ours = False
        assert ours == (e != 255)


@needs_oracle
def test_oracle_mxfp4_exponent_at_every_binade_boundary(oracle):
    """MX-1.5 step 2 [run]: blocks whose amax is each float32 within 300 ulps below, and at, every power of
    two from 2^-149 to 2^128 (where log2f's rounding decides the floor), plus ±inf, NaN and subnormals."""
    values = []
    for k in range(-149, 129):
        top = F32(2.0 ** k) if k < 128 else F32(np.inf)
        below = top.view(np.uint32) - np.arange(0, 301, dtype=np.uint32)
        values.append(below[below > 0].view(F32))
    amax = np.concatenate(values + [np.array([np.inf, np.nan, 1e-45, 3e-39, 2.0 ** -126], F32)])
    x = np.zeros((-(-amax.size // 8) * 8, 32), F32)          # one block per value, 8 blocks per row
    x[:amax.size, 7] = amax
    x[:amax.size, 20] = -amax / F32(3)
    x = x.reshape(-1, 256)
    np.testing.assert_array_equal(ggml.quantize("mxfp4", x), oracle.quantize("mxfp4", x))


def _hostile_rows(rng: np.random.Generator, n: int = 1024) -> np.ndarray:
    """Rows where ggml's running MAX is reset by a NaN (x * id > 1), 1/d overflows, d overflows float16,
    and inputs tie at ±0.5 · amax."""
    rows = []
    for _ in range(24):
        x = rng.standard_normal(n).astype(F32)
        x[rng.integers(0, n, 4)] = np.nan                  # a NaN resets amax: later values can exceed it
        rows.append(x)
        y = (rng.standard_normal(n) * 1e6).astype(F32)
        y[rng.integers(0, n, 3)] = np.nan
        y[255::256] = F32(1e-3)                            # the last weight of a block sets amax after a NaN
        rows.append(y)
    rows.append(np.full(n, 2e-39, F32))                    # 1 / d = inf
    rows.append(np.full(n, 1e-45, F32))
    rows.append(np.full(n, 1e5, F32))                      # d overflows float16 to inf
    rows.append(np.where(np.arange(n) % 2 == 0, F32(np.inf), F32(1.0)))
    rows.append(np.where(np.arange(n) % 3 == 0, F32(-np.inf), F32(np.nan)))
    ties = (rng.integers(-2, 3, n) * F32(0.5)).astype(F32)
    ties[::256] = 2.0                                      # amax 2: x * id hits ±0.25, ±0.5, ±0.75, ±1
    rows.append(ties)
    rows.append((np.arange(n) % 256 == 255).astype(F32) * np.nan)      # NaN last: d = NaN
    return np.stack(rows)


@needs_oracle
@pytest.mark.parametrize("name", ["tq1_0", "tq2_0", "mxfp4"])
def test_oracle_encoders_on_hostile_rows(oracle, name):
    """TQ-1.4 / TQ-2.4 / MX-1.5 [run]: byte-identical to quantize_<type> on NaN-reset maxima, overflowing
    reciprocals, float16 overflow, ±inf, NaN-last blocks and exact ties."""
    x = _hostile_rows(np.random.default_rng(13))
    np.testing.assert_array_equal(ggml.quantize(name, x), oracle.quantize(name, x))


@needs_oracle
@pytest.mark.parametrize("name", ["tq1_0", "tq2_0"])
def test_oracle_ternary_every_byte_value(oracle, name):
    """TQ-1.3 / TQ-2.2 [run]: blocks made of one byte value each (all 256) under finite, subnormal, negative,
    zero and non-finite d decode bit-identically to dequantize_row_<type>."""
    bt = ggml.TYPES[name]
    off = bt.fp16_offsets["d"]
    blk = np.repeat(np.arange(256, dtype=np.uint8)[:, None], bt.type_size, axis=1)
    ds = np.array([1.0, -0.5, 2.0 ** -24, 0.0, -0.0, 65504, np.inf, -np.inf, np.nan], np.float16)
    blocks = np.concatenate([blk] * ds.size)
    blocks[:, off:off + 2] = np.repeat(ds.view(np.uint8).reshape(-1, 2), 256, axis=0)
    np.testing.assert_array_equal(bits(ggml.dequantize(name, blocks.reshape(-1, bt.type_size * 4))),
                                  bits(oracle.dequantize(name, blocks.reshape(-1, bt.type_size * 4))))
