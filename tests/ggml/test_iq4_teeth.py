"""Tests with teeth for iq4_nl and iq4_xs (issue 33 item 3: ``qformats/formats/ggml/iq4.py``,
spec/ggml_iquants.md IQ-1.1, IQ-2, IQ-3).

Expected values come from routes independent of the code under test: bytes and values ggml 0.10.1's C code
wrote for rows and blocks chosen to reach every branch (``iq4_teeth_ggml.npz``, recorded by
``record_iq4_teeth.py`` and checked against the live library when QFORMATS_GGML_LIB is set), and values
worked by hand from the spec's pseudocode and tables.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import iq4

F32 = np.float32
TEETH = Path(__file__).with_name("iq4_teeth_ggml.npz")
LIB = os.environ.get("QFORMATS_GGML_LIB")
TYPES = ["iq4_nl", "iq4_xs"]


def _case(key: str) -> tuple[str, np.ndarray, np.ndarray | None, np.ndarray]:
    """(type, x, importance or None, the bytes ggml wrote) of one recorded encoder case."""
    with np.load(TEETH) as data:
        w = data[f"{key}.w"] if f"{key}.w" in data.files else None
        return str(data[f"{key}.type"]), data[f"{key}.x"], w, data[f"{key}.expected"]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def _encode_matches(key: str) -> None:
    name, x, w, expected = _case(key)
    np.testing.assert_array_equal(ggml.quantize(name, x, importance=w), expected)


# ---------------------------------------------------------------------------------------------
# decoders (IQ-2.2, IQ-3.3)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TYPES)
def test_decoder_is_ggml_on_every_scale_class(name):
    """GGML-2.2, IQ-2.2, IQ-3.3: ``dequantize_row_<type>`` bit for bit on random codes and sub-scales under d
    zero, subnormal, negative, largest, inf and NaN."""
    with np.load(TEETH) as data:
        blocks, expected = data[f"dec_{name}.blocks"], data[f"dec_{name}.expected"]
    np.testing.assert_array_equal(_bits(ggml.dequantize(name, blocks)), _bits(expected))


def test_iq4_xs_decode_groups_use_their_own_sub_scale():
    """IQ-3.3: "dl = D * float(ls[ib] - 32)", "y[32 ib + j] = dl * float(kv[q[32 ib + j]])": d = 1, ls = ib + 33
    (sub-scale ib + 1), group ib's weight j has code j % 16: y = (ib + 1) * kv[j % 16]."""
    ls = np.arange(8) + 33
    blk = np.zeros((1, 136), np.uint8)
    blk[0, :2] = [0x00, 0x3C]
    blk[0, 2:4] = np.array([sum(((v >> 4) & 3) << (2 * i) for i, v in enumerate(ls))], "<u2").view(np.uint8)
    blk[0, 4:8] = [(ls[2 * k] & 15) | ((ls[2 * k + 1] & 15) << 4) for k in range(4)]
    blk[0, 8:] = np.tile(np.arange(16, dtype=np.uint8) * 17, 8)        # low and high nibble both j
    kv = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], F32)
    want = np.concatenate([(ib + 1) * np.tile(kv, 2) for ib in range(8)]).astype(F32)
    np.testing.assert_array_equal(ggml.dequantize("iq4_xs", blk)[0], want)


# ---------------------------------------------------------------------------------------------
# encoders (IQ-2.4 .. IQ-2.7, IQ-3.5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TYPES)
def test_encoder_is_ggml_on_finite_rows(name):
    """GGML-4.4, IQ-2.7, IQ-3.5: quantize_<type> without importance, byte for byte, on gaussian rows of several
    magnitudes, rows of small integers (exact products and ties) and rows whose groups differ in magnitude."""
    _encode_matches(f"clean_{name}")


@pytest.mark.parametrize("name", TYPES)
def test_encoder_is_ggml_on_ties_zeros_and_tiny_groups(name):
    """IQ-2.5 "strict: the first largest |x| wins", "if amax < 1e-15: return s = 0" (at 1e-15 and just under),
    IQ-3.5 (groups whose l rounds to 0, all-zero groups beside others): byte for byte."""
    _encode_matches(f"signs_{name}")


@pytest.mark.parametrize("name", TYPES)
def test_encoder_is_ggml_next_to_midpoints(name):
    """IQ-2.4, IQ-2.5, IQ-3.5: every scaled value id * x is one float32 product of float32 operands (trial ids from
    max, the final 1 / s, 1 / dl with dl = d * l in float32): weights whose scaled value lies within an ulp of a
    midpoint, where any float64 step would round to the other table value, give ggml's bytes."""
    _encode_matches(f"edge_{name}")


@pytest.mark.parametrize("name", TYPES)
def test_encoder_is_ggml_on_special_values(name):
    """GGML-4.1, IQ-2.4 "A NaN ... gets 15", IQ-2.7 "|s| >= 65520 stores d = +-inf": NaN, +-inf, subnormal,
    huge and fp16-overflowing groups, byte for byte."""
    _encode_matches(f"special_{name}")


@pytest.mark.parametrize("weights", ["gamma", "sparse", "signs", "special", "mixed"])
@pytest.mark.parametrize("name", TYPES)
def test_importance_encoder_is_ggml(name, weights):
    """GGML-4.4, IQ-2.6: "w[j] = qw[j] * sqrt(sigma2 + x[j] * x[j])", sigma2 over the block (32) or super-block
    (256): quantize_<type> with gamma importance, importance zero on 90 % of the columns, importance of both
    signs (IQ-2.5 "d = sumq2 > 0 ? sumqx / sumq2 : 0" of the first trial's own sums), and on the tie, zero and
    special rows, byte for byte."""
    _encode_matches(f"imp_{weights}_{name}")


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("importance", [False, True])
def test_encoder_over_several_passes(name, importance):
    """IQ-2.7: "Block b of every row uses qw = quant_weights[32b .. 32b+31]": 24 rows of 48 groups (more than
    one encoder pass, the pass boundary inside a row) are the 4-row period's bytes in place."""
    name, x, w, expected = _case(f"{'imp_gamma' if importance else 'clean'}_{name}")
    got = ggml.quantize(name, np.tile(x, (6, 1)), importance=w)
    np.testing.assert_array_equal(got, np.tile(expected, (6, 1)))


def test_iq4_xs_sub_scale_clamps_at_31():
    """IQ-3.5: "l = max(-32, min(31, nearest_int(id * s[ib])))". Negating a group negates its scale exactly (IQ-2.5:
    every trial's id flips sign with max, so id * x, the codes and sumq2 stay, sumqx and d flip). Group 0 =
    [1, 0.5] (s0 = -0.007862847, IQ-2.8), group 1 = [-1, -0.5] (s1 = -s0): the first of equal |s| wins, so
    d = -s0 / 32 (fp16 0x0c07), group 0 gets l = -32 (ls 0) and group 1 id * s1 = 32, clamped to 31 (ls 63);
    the empty groups ls 32: scales_h 0xaaac, scales_l f0 00 00 00 (ggml writes these bytes too)."""
    x = np.zeros((1, 256), F32)
    x[0, :2] = [1, 0.5]
    x[0, 32:34] = [-1, -0.5]
    b = ggml.quantize("iq4_xs", x)[0]
    assert b[:8].tolist() == [0x07, 0x0C, 0xAC, 0xAA, 0xF0, 0x00, 0x00, 0x00]


def test_trials_with_zero_sumq2_never_win():
    """IQ-2.5: "if sumq2 > 0 and sumqx * sumqx > best * sumq2" (strict). x = [100, 0.5, 0.5 + 2^-24, 0, ...] with
    importance [0, 1, -1, 0, ...]: sigma2 ~ 625 absorbs the two x^2, so w[1] = -w[2] exactly, weights 1 and 2 get
    the same code in every trial, and every trial has sumq2 = 0 with sumqx != 0. No trial wins: s = 0, d = 0, codes
    best_index(0) = 8 (ggml writes 00 00 and sixteen 88 too; taking sumq2 = 0 would make d = -inf)."""
    x = np.zeros((1, 32), F32)
    x[0, :3] = [100, 0.5, np.nextafter(F32(0.5), F32(1))]
    w = np.zeros(32, F32)
    w[1], w[2] = 1, -1
    assert ggml.quantize("iq4_nl", x, w).tobytes().hex() == "0000" + "88" * 16


def test_iq4_xs_scale_of_exactly_one():
    """IQ-3.5: "id = d != 0 ? 1 / d : 0" also at d = 1. Group 0 = [-3616, 0, ...] (-3616 = -32 * 113), the rest
    zero: one weighted weight, so trial 0 (q = 113) gives s = sumqx / sumq2 = -3616 / 113 = -32 exactly (both
    sums round the same significand 113^3 * 12769) and no itry trial is strictly better; d = 32 / 32 = 1
    (0x3c00), l = nearest_int(1 * -32) = -32 (ls 0), the empty groups ls 32 (scales_h 0xaaa8), and weight 0
    gets best_index(-3616 / -32 = 113) = 15: ggml writes 00 3c a8 aa 00 00 00 00 | 8f 88 ... too."""
    x = np.zeros((1, 256), F32)
    x[0, 0] = -3616
    b = ggml.quantize("iq4_xs", x)[0]
    assert b[:8].tolist() == [0x00, 0x3C, 0xA8, 0xAA, 0, 0, 0, 0] and b[8] == 0x8F and b[9:].tolist() == [0x88] * 127


# ---------------------------------------------------------------------------------------------
# the exported helpers (IQ-1.1, IQ-2.1, IQ-2.4, IQ-3.2)
# ---------------------------------------------------------------------------------------------


def test_best_index_at_the_ends_and_midpoints():
    """IQ-2.4: "if v <= kv[0]: return 0", "if v >= kv[15]: return 15", a NaN gets 15, and a tie at a midpoint
    goes to the larger value: -200 -> 0, -127 -> 0, -115.5 -> 1, -115.50001 -> 0, 112.9 -> 15 (101 <= v),
    100.99999 -> 14, 113 -> 15, 1e30 -> 15, -inf -> 0, NaN -> 15, 7 -> 9, 6.9999995 -> 8."""
    v = np.array([-200, -127, -115.5, np.nextafter(F32(-115.5), F32(-200)), 112.9, np.nextafter(F32(101), F32(0)),
                  113, 1e30, -np.inf, np.nan, 7, np.nextafter(F32(7), F32(0))], F32)
    got = iq4.best_index(v)
    assert got.dtype == np.uint8 and got.tolist() == [0, 0, 1, 0, 15, 14, 15, 15, 0, 15, 9, 8]


def test_pack_codes_is_low_then_high_nibble():
    """IQ-2.1: "qs[j] = q[j] | q[j + 16] << 4": codes j % 16 in weights 0..15 and 15 - j in 16..31 pack to bytes
    0xf0, 0xe1, ..., 0x0f, as uint8 over any leading shape."""
    codes = np.concatenate([np.arange(16), 15 - np.arange(16)])[None, None, :]
    got = iq4.pack_codes(codes)
    assert got.dtype == np.uint8 and got.shape == (1, 1, 16)
    assert got[0, 0].tolist() == [(15 - j) << 4 | j for j in range(16)]


def test_pack_xs_scales_spec_example():
    """IQ-3.6: ls = [0, 32, 33, 63, 31, 1, 48, 16] packs to scales_h 0x71e8 and scales_l 00 f1 1f 00; IQ-3.6's
    encode example ls = [32, 32, 31, 30, 28, 24, 16, 0] to 0x155a and 00 ef 8c 00."""
    ls = np.array([[0, 32, 33, 63, 31, 1, 48, 16], [32, 32, 31, 30, 28, 24, 16, 0]])
    for dtype in (np.int64, np.uint8):                 # any integer array: the 16-bit scales_h is built wide
        h, lo = iq4.pack_xs_scales(ls.astype(dtype))
        assert h.dtype == np.uint16 and lo.dtype == np.uint8
        assert h.tolist() == [0x71E8, 0x155A] and lo.tolist() == [[0x00, 0xF1, 0x1F, 0x00], [0x00, 0xEF, 0x8C, 0x00]]


def test_xs_sub_scales_spec_example():
    """IQ-3.2, IQ-3.6: scales_h bytes e8 71 and scales_l 00 f1 1f 00 read as ls = [0, 32, 33, 63, 31, 1, 48, 16]."""
    blk = np.zeros((2, 136), np.uint8)
    blk[0, 2:8] = [0xE8, 0x71, 0x00, 0xF1, 0x1F, 0x00]
    blk[1, 2:8] = 0xFF
    assert iq4.xs_sub_scales(blk).tolist() == [[0, 32, 33, 63, 31, 1, 48, 16], [63] * 8]


def test_fp16_ggml_rounds_to_nearest_even_and_overflows_to_inf():
    """IQ-2 notation: "fp16(v) is ggml GGML_FP32_TO_FP16: round to nearest even, overflow to +-inf": 65519 ->
    0x7bff, 65520 -> 0x7c00, -65520 -> 0xfc00, 1 + 2^-11 -> 0x3c00, 2^-25 -> 0, 3 * 2^-26 -> 0x0001, as uint16."""
    v = np.array([65519, 65520, -65520, 1 + 2.0 ** -11, 2.0 ** -25, 3 * 2.0 ** -26], F32)
    got = iq4.fp16_ggml(v)
    assert got.dtype == np.uint16 and got.tolist() == [0x7BFF, 0x7C00, 0xFC00, 0x3C00, 0x0000, 0x0001]


@pytest.mark.parametrize("name", TYPES)
def test_decoder_output_is_float32(name):
    """IQ-2.2, IQ-3.3: y is float32 ("one float32 op"): the type's decoder returns float32 values."""
    with np.load(TEETH) as data:
        blocks = data[f"dec_{name}.blocks"]
    size = ggml.TYPES[name].type_size
    with np.errstate(all="ignore"):
        y = ggml.TYPES[name].decode(blocks.reshape(-1, size))
    assert y.dtype == F32 and y.shape == (48, ggml.TYPES[name].block_size)


@pytest.mark.parametrize("name", TYPES)
def test_scale_field_is_d(name):
    """IQ-2.3, IQ-3.4: validity covers one field, d, the float16 at byte 0."""
    blk = np.zeros((1, ggml.TYPES[name].type_size), np.uint8)
    blk[0, :2] = [0x00, 0xC0]                          # -2.0
    got = ggml.TYPES[name].scales(blk)
    assert list(got) == ["d"] and got["d"].tolist() == [[-2.0]]


def test_fp16_ggml_takes_float32_quietly():
    """IQ-2 notation, GGML_FP32_TO_FP16 of a float: a list or float64 value is a float32 first (1 + 2^-11 + 2^-40
    -> the tie 1 + 2^-11 -> 0x3c00), overflow to inf is the defined result (no warning), and a NaN whose payload
    has bit 16 set is still 0x7e00."""
    nan = np.array([0x7FC10000, 0xFFC10000], np.uint32).view(F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = iq4.fp16_ggml([1 + 2.0 ** -11 + 2.0 ** -40, 1e5, -1e6])
        assert got.tolist() == [0x3C00, 0x7C00, 0xFC00]
        assert iq4.fp16_ggml(nan).tolist() == [0x7E00, 0xFE00]


def test_constants():
    """IQ-2.5: "#define GROUP_MAX_EPS 1e-15f" and "quantize_iq4_nl and quantize_iq4_xs pass ntry = 7"."""
    assert iq4.GROUP_MAX_EPS == F32(1e-15) and iq4.GROUP_MAX_EPS.dtype == F32 and iq4.NTRY == 7


# ---------------------------------------------------------------------------------------------
# the recorded bytes are ggml's (when the oracle is at hand)
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to run")
def test_recorded_bytes_are_the_live_librarys():
    """GGML-4.4, GGML-2.2: every recorded case is what the live ggml build writes today."""
    spec = importlib.util.spec_from_file_location("record_iq4_teeth", Path(__file__).with_name("record_iq4_teeth.py"))
    rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rec)
    from conformance.adapters import ggml as oracle

    with np.errstate(all="ignore"):
        live = rec.record(oracle)
    with np.load(TEETH) as data:
        assert sorted(data.files) == sorted(live)
        for key in data.files:
            np.testing.assert_array_equal(np.atleast_1d(data[key]).view(np.uint8),
                                          np.atleast_1d(live[key]).view(np.uint8), err_msg=key)


# ---------------------------------------------------------------------------------------------
# the block types as the module builds them, built at test time
# ---------------------------------------------------------------------------------------------
#
# iq4.py builds its row encoders once, at import (``_quantizer`` returns a closure); the mutation runner
# (tests/mutation/run.py) switches a mutant on only for calls made at test time. Executing the module's file
# anew, under its own name and without registering it, builds the same types at test time.


@pytest.fixture
def fresh() -> dict:
    spec = importlib.util.spec_from_file_location(iq4.__name__, iq4.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {bt.name: bt for bt in module.TYPES}


def test_fresh_encoders_are_ggml(fresh):
    """GGML-4.4, IQ-2.7, IQ-3.5: the row encoders, built at test time, write ggml's bytes on every recorded case,
    and on the long inputs of several passes with and without importance."""
    with np.load(TEETH) as data:
        keys = sorted({k.rsplit(".", 1)[0] for k in data.files if not k.startswith("dec_")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # 0/0, inf * 0: C's arithmetic, not a fault (GGML-4.1)
        for key in keys:
            name, x, w, expected = _case(key)
            got = fresh[name].quantize(x, w)
            assert got.dtype == np.uint8, key
            np.testing.assert_array_equal(got, expected, err_msg=key)
            if key.startswith(("clean_", "imp_gamma_")):
                got = fresh[name].quantize(np.tile(x, (6, 1)), w)
                np.testing.assert_array_equal(got, np.tile(expected, (6, 1)), err_msg=key)
