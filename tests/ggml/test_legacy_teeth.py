"""Tests with teeth for the legacy block types q4_0, q4_1, q5_0, q5_1, q8_0 and q8_1 (issue 33 item 3:
``qformats/formats/ggml/legacy.py``, spec/ggml_legacy.md).

Expected values come from routes independent of the code under test: bytes and values ggml 0.10.1's C code
wrote for rows and blocks chosen to reach every branch (``legacy_teeth_ggml.npz``, recorded by
``record_legacy_teeth.py`` and checked against the live library when QFORMATS_GGML_LIB is set), the spec's
worked examples, and values worked by hand from the spec's pseudocode.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import legacy

F32 = np.float32
TEETH = Path(__file__).with_name("legacy_teeth_ggml.npz")
LIB = os.environ.get("QFORMATS_GGML_LIB")
REF_TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1"]
IMP_TYPES = ["q4_0", "q4_1", "q5_0", "q5_1"]
DEC_TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]


def _case(key: str) -> tuple[str, np.ndarray, np.ndarray | None, np.ndarray]:
    """(type, x, importance or None, the bytes ggml wrote) of one recorded encoder case."""
    with np.load(TEETH) as data:
        w = data[f"{key}.w"] if f"{key}.w" in data.files else None
        return str(data[f"{key}.type"]), data[f"{key}.x"], w, data[f"{key}.expected"]


def _decode_case(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(one row of blocks, the float32 values ggml's dequantize_row_<name> gave for it)."""
    with np.load(TEETH) as data:
        return data[f"dec_{name}.blocks"], data[f"dec_{name}.expected"]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def _encode_matches(key: str) -> None:
    name, x, w, expected = _case(key)
    np.testing.assert_array_equal(ggml.quantize(name, x, importance=w), expected)


# ---------------------------------------------------------------------------------------------
# decoders (LEG-2.2 .. LEG-6.2): ggml's values on every class of float16 field
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DEC_TYPES)
def test_decoder_is_ggml_on_every_scale_class(name):
    """GGML-2.2, LEG-2.2 .. LEG-6.2: ``dequantize_row_<type>`` bit for bit on random codes under d (and m) zero,
    subnormal, negative, largest, inf and NaN."""
    blocks, expected = _decode_case(name)
    np.testing.assert_array_equal(_bits(ggml.dequantize(name, blocks)), _bits(expected))


@pytest.mark.parametrize("name", DEC_TYPES)
def test_decoder_over_several_passes(name):
    """LEG-1.1: "a row of n weights is n / 32 blocks back to back", each decoded on its own: 8256 blocks (more
    than one decoder pass) give ggml's values of their 48-block period, in place."""
    blocks, expected = _decode_case(name)
    assert blocks.shape[1] == 48 * ggml.TYPES[name].type_size
    got = ggml.dequantize(name, np.tile(blocks, (172, 1)))
    np.testing.assert_array_equal(_bits(got), _bits(np.tile(expected, (172, 1))))


@pytest.mark.parametrize("name", DEC_TYPES)
def test_decoder_reads_a_column_major_array(name):
    """GGML-2.2: the decode depends on the bytes only, not on how the array holding them is laid out in memory
    (a Fortran-order copy gives ggml's values too)."""
    blocks, expected = _decode_case(name)
    size = ggml.TYPES[name].type_size
    for count in (2, 48):                       # byte columns 2 and 48 bytes apart
        rows = np.asfortranarray(blocks.reshape(-1, size)[:count])
        np.testing.assert_array_equal(_bits(ggml.dequantize(name, rows)), _bits(expected.reshape(-1, 32)[:count]))


def test_q8_1_decodes_qs_times_d():
    """LEG-7.2: "What a value means is y[e] = (float)qs[e] * fp32(d)" (s is not used): d = 0.5, s = 7."""
    blk = np.zeros((1, 36), np.uint8)
    blk[0, :4] = [0x00, 0x38, 0x00, 0x47]
    blk[0, 4:8] = [0xFF, 0x80, 0x7F, 0x03]
    y = ggml.dequantize("q8_1", blk)[0]
    assert y[:4].tolist() == [-0.5, -64.0, 63.5, 1.5] and not y[4:].any()


# ---------------------------------------------------------------------------------------------
# reference encoders (LEG-2.4 .. LEG-7.3)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REF_TYPES)
def test_reference_encoder_is_ggml_on_finite_rows(name):
    """GGML-4.4, LEG-2.4 .. LEG-7.3: quantize_<type> without importance, byte for byte, on gaussian rows of
    six magnitudes and rows of exact ties (x*id + 0.5 on an integer)."""
    _encode_matches(f"clean_{name}")


@pytest.mark.parametrize("name", REF_TYPES)
def test_reference_encoder_is_ggml_on_ties_and_zeros(name):
    """LEG-2.4 "strict, the first wins", LEG-3.4 (the first zero is min or max), LEG-8.3: blocks holding +a and
    -a in either order, +0 and -0 in either order, constant blocks and blocks of tiny weights, byte for byte."""
    _encode_matches(f"signs_{name}")


@pytest.mark.parametrize("name", REF_TYPES)
def test_reference_encoder_is_ggml_on_special_values(name):
    """GGML-4.1, LEG-1.4, LEG-3.4, LEG-6.4: NaN first, inside, last and everywhere, +-inf, float32 subnormal
    blocks (id = 1/d overflows), and huge weights (max - min overflows), byte for byte."""
    _encode_matches(f"special_{name}")


@pytest.mark.parametrize("name", REF_TYPES)
def test_reference_encoder_over_several_passes(name):
    """LEG-1.6: "quantize_<type> runs the reference encoder on the input as one flat sequence of blocks": 16512
    blocks (more than one encoder pass) are the 48-block period's bytes in place."""
    name, x, _, expected = _case(f"clean_{name}")
    assert x.shape == (2, 768)
    got = ggml.quantize(name, np.tile(x, (344, 1)))
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.tile(expected, (344, 1)))


def test_q8_0_nan_restarts_the_running_max():
    """LEG-6.4: "a NaN weight replaces amax ... and the next weight replaces the NaN": x = [100, NaN, 2, 1] has
    amax = 2 (d = 2/127), not 100, and id = 63.5; the codes are roundf(x * 63.5) through (int8_t) (LEG-1.4):
    6350 -> low byte 0xce, NaN -> 0, 127, 64 (63.5 ties away from zero). ggml writes these bytes too."""
    x = np.zeros((1, 32), F32)
    x[0, :4] = [100, np.nan, 2, 1]
    b = ggml.quantize("q8_0", x)[0]
    assert b[:2].view("<f2")[0] == np.float16(F32(2) / F32(127))
    assert b[2:6].tolist() == [0xCE, 0, 127, 64] and not b[6:].any()


def test_q4_0_codes_of_the_far_side_saturate_at_15():
    """LEG-2.4: "the other side saturates at code 15": x = [-2, 2]: d = 0.25, codes 0 and MIN(15, 16) = 15."""
    x = np.zeros((1, 32), F32)
    x[0, :2] = [-2, 2]
    b = ggml.quantize("q4_0", x)[0]
    assert b[:4].tolist() == [0x00, 0x34, 0x80, 0x8F] and b[4:].tolist() == [0x88] * 14


def test_q4_0_tie_of_small_magnitude_keeps_the_first():
    """LEG-2.4: "if amax < |x[j]|: amax = |x[j]|; max = x[j]  # strict, the first wins": x = [-0.5, 0.5]: max = -0.5,
    d = 0.0625 (0x2c00), id = 16; codes -8 + 8.5 -> 0, MIN(15, 8 + 8.5 -> 16) = 15, zeros 8."""
    x = np.zeros((1, 32), F32)
    x[0, :2] = [-0.5, 0.5]
    b = ggml.quantize("q4_0", x)[0]
    assert b[:4].tolist() == [0x00, 0x2C, 0x80, 0x8F] and b[4:].tolist() == [0x88] * 14


def test_q5_0_codes_of_the_far_side_saturate_at_31():
    """LEG-4.4 (as LEG-2.4 with nmax 16): x = [-2, 2]: d = 0.125, codes 0 and MIN(31, 32) = 31."""
    x = np.zeros((1, 32), F32)
    x[0, :2] = [-2, 2]
    b = ggml.quantize("q5_0", x)[0]
    # qh: codes 0 (bit 4 clear), 31 (set), 16 elsewhere (set): byte 0 = 0b11111110
    assert b.tolist() == [0x00, 0x30, 0xFE, 0xFF, 0xFF, 0xFF, 0x00, 0x0F] + [0x00] * 14


def test_affine_subnormal_block_codes_are_zero():
    """LEG-1.4: "finite blocks so small that id = 1 / d overflows to inf ... x * id is +-inf or NaN and every code
    byte becomes 0": x = [-1e-40, 1e-40]: d = 2e-40 / 15 (float16 0), id = inf, (x - min) * inf is NaN (the
    minimum) or inf, (int8_t) of either is 0; m = fp16(-1e-40) = -0 (0x8000)."""
    x = np.zeros((1, 32), F32)
    x[0, :2] = [-1e-40, 1e-40]
    for name, at in (("q4_1", 4), ("q5_1", 8)):
        b = ggml.quantize(name, x)[0]
        assert b[:4].tolist() == [0, 0, 0, 0x80], name
        assert not b[at:].any(), name


def test_q4_1_all_nan_block_keeps_the_initial_extrema():
    """LEG-3.4: "An all-NaN block keeps min = FLT_MAX, max = -FLT_MAX: d = -inf, m = +inf", also when it is the
    only block of the input holding a NaN (a finite block beside it is encoded as usual: x = j, d = 31/15)."""
    x = np.full((1, 64), np.nan, F32)
    x[0, 32:] = np.arange(32)
    b = ggml.quantize("q4_1", x)[0]
    assert b[:4].tolist() == [0x00, 0xFC, 0x00, 0x7C]
    assert b[20:24].tolist() == [0x22, 0x40, 0x00, 0x00]          # fp16(31/15) = 0x4022, m = +0


def test_q8_1_s_is_sum_of_codes_times_d():
    """LEG-7.3: "s = fp16((float)sum * d) with sum the integer sum of the 32 stored codes": x = 127 and 31
    weights of -1: d = 1, sum = 127 - 31 = 96, s = 96 (0x5600)."""
    x = np.full((1, 32), -1, F32)
    x[0, 0] = 127
    b = ggml.quantize("q8_1", x)[0]
    assert b[:4].tolist() == [0x00, 0x3C, 0x00, 0x56] and b[4] == 127 and b[5:].tolist() == [0xFF] * 31


# ---------------------------------------------------------------------------------------------
# importance encoders (LEG-1.5, LEG-1.6, LEG-2.5 .. LEG-5.5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", ["gamma", "sparse", "leg35"])
@pytest.mark.parametrize("name", IMP_TYPES)
def test_importance_encoder_is_ggml(name, weights):
    """GGML-4.4, LEG-1.5, LEG-1.6, LEG-3.5: quantize_<type> with an importance vector, byte for byte: gamma
    weights, weights zero on 90 % of the columns, and LEG-3.5's block (d < 0 for q4_1)."""
    _encode_matches(f"imp_{weights}_{name}")


@pytest.mark.parametrize("name", IMP_TYPES)
def test_importance_encoder_is_ggml_on_ties_zeros_and_specials(name):
    """GGML-4.1, LEG-1.5 "strict: the first wins, NaN never", "amax < 1e-15": the sign, zero and special-value
    blocks of the reference tests, with importance, byte for byte."""
    _encode_matches(f"imp_signs_{name}")
    _encode_matches(f"imp_special_{name}")


@pytest.mark.parametrize("name", IMP_TYPES)
def test_importance_encoder_over_several_passes(name):
    """LEG-1.6: "runs quantize_row_<type>_impl row by row, the same vector for every row": 344 rows of 24
    blocks (8256 blocks: more than one encoder pass) are the 2-row period's bytes in place."""
    name, x, w, expected = _case(f"imp_gamma_{name}")
    assert x.shape == (2, 768)
    got = ggml.quantize(name, np.tile(x, (172, 1)), importance=w)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.tile(expected, (172, 1)))


def test_make_qx_quants_zero_weights_keep_the_first_trial():
    """LEG-1.5, LEG-2.6 (4): all-zero weights, x = [-2, 1, 0, ...], nmax 8: suml2 = 0, so scale 0 and the
    first trial's codes nearest_int(4x) + 8: 0, 12, 8, ..."""
    x = np.zeros((32, 1), F32)
    x[:2, 0] = [-2, 1]
    scale, L = legacy.make_qx_quants(x, np.zeros((32, 1), F32), 8)
    assert scale.tolist() == [0.0] and L[:, 0].tolist() == [0, 12] + [8] * 30


def test_make_qx_quants_is_ggml_search():
    """LEG-1.5, LEG-2.5: make_qx_quants on a block and its weights (LEG-1.6) gives the scale whose float16 ggml
    stored and the codes ggml stored (q4_0 with gamma importance, the first row's 48 blocks)."""
    _, x, w, expected = _case("imp_gamma_q4_0")
    row = x[:1]
    sigma2 = np.add.accumulate(row[0] * row[0], dtype=F32)[-1] / F32(row.shape[1])
    weights = w * np.sqrt(sigma2 + row[0] * row[0])
    scale, L = legacy.make_qx_quants(row.reshape(-1, 32).T.copy(), weights.reshape(-1, 32).T.copy(), 8)
    blocks = expected[0].reshape(-1, 18)
    np.testing.assert_array_equal(scale.astype("<f2").view(np.uint16), blocks[:, :2].copy().view("<u2")[:, 0])
    np.testing.assert_array_equal(L.T, legacy.unpack_nibbles(blocks[:, 2:]))


# ---------------------------------------------------------------------------------------------
# the exported bit-field and C-conversion helpers (LEG-1.2 .. LEG-1.4)
# ---------------------------------------------------------------------------------------------


def test_pack_nibbles_keeps_low_bits_unmasked_and_drops_high_overflow():
    """LEG-2.4: "The C source stores q[j] unmasked (y[i].qs[j] = xi0; y[i].qs[j] |= xi1 << 4)", as uint8:
    lo = 0x1f, hi = 0x01 -> 0x1f; lo = 0x02, hi = 0x1f -> 0xf2 (bit 8 of hi << 4 falls off the byte)."""
    lo = np.zeros((1, 16), np.int64)
    hi = np.zeros((1, 16), np.int64)
    lo[0, :2], hi[0, :2] = [0x1F, 0x02], [0x01, 0x1F]
    got = legacy.pack_nibbles(lo, hi)
    assert got.dtype == np.uint8 and got[0, :2].tolist() == [0x1F, 0xF2] and not got[0, 2:].any()


def test_pack_fifth_bits_sets_bit_e_for_bit_4_of_code_e():
    """LEG-1.3: "bit e of that u32 (byte e / 8, bit e % 8) is bit 4 of weight e's code": codes 16 at e = 0, 9,
    31, code 49 (bit 4 set) at e = 20, codes 15 and 32 (bit 4 clear) elsewhere: qh = 01 02 10 80."""
    codes = np.where(np.arange(32) % 2, 15, 32)[None, :]
    codes[0, [0, 9, 31]] = 16
    codes[0, 20] = 49
    qh = legacy.pack_fifth_bits(codes)
    assert qh.dtype == np.uint8 and qh.tolist() == [[0x01, 0x02, 0x10, 0x80]]


def test_c_int8_edges():
    """LEG-1.4: truncation toward zero through int32, the low byte read signed; NaN and values outside int32
    give 0x80000000, low byte 0: -128.9 -> -128, 128.5 -> 128 - 256, 255.9 -> -1, 256 -> 0, -2^31 -> 0
    (low byte of 0x80000000), 2^31 -> 0 (outside), -2^31 - 256 (outside) -> 0, 2^31 - 128 -> -128."""
    v = np.array([-128.9, 128.5, 255.9, 256.0, -2.0 ** 31, 2.0 ** 31, -2.0 ** 31 - 256, 2.0 ** 31 - 128, 0.99,
                  -0.99], F32)
    got = legacy.c_int8(v)
    assert got.dtype == np.int32
    assert got.tolist() == [-128, -128, -1, 0, 0, 0, 0, -128, 0, 0]


def test_roundf_edges():
    """LEG-1.4: "roundf rounds halfway cases away from zero": -1.5 -> -2, 0.5 -> 1, -0.49999997 -> -0, 1e30 stays,
    NaN stays NaN, and the result is float32."""
    v = np.array([-1.5, 0.5, -np.nextafter(F32(0.5), F32(0)), 1e30, 3.5, -3.49], F32)
    got = legacy.roundf(v)
    assert got.dtype == F32 and got.tolist() == [-2.0, 1.0, -0.0, F32(1e30), 4.0, -3.0]
    assert np.signbit(got[2]) and np.isnan(legacy.roundf(np.array([np.nan], F32)))[0]


def test_fp16_bits_ggml_takes_its_input_as_float32():
    """LEG-1.4: GGML_FP32_TO_FP16 converts a float: a list or a float64 value is a float32 first, so
    1 + 2^-11 + 2^-40 becomes the tie 1 + 2^-11 and rounds to even (0x3c00), not up to 0x3c01."""
    assert legacy.fp16_bits_ggml([1 + 2.0 ** -11 + 2.0 ** -40, -2.0]).tolist() == [0x3C00, 0xC000]
    assert legacy.fp16_bits_ggml(np.array([1 + 2.0 ** -11 + 2.0 ** -40])).tolist() == [0x3C00]


def test_make_qx_quants_is_quiet_on_degenerate_blocks():
    """LEG-1.5, GGML-4.1: 0/0 and inf - inf are part of the search's C arithmetic, not faults: an all-zero
    block, one of NaN and one with +inf give (scale, codes) without a floating-point warning."""
    x = np.zeros((32, 3), F32)
    x[:, 1] = np.nan
    x[0, 2] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scale, L = legacy.make_qx_quants(x, np.ones((32, 3), F32), 8)
    assert scale[0] == 0 and L[:, 0].tolist() == [0] * 32          # "if amax < 1e-15: return (0, all L = 0)"


@pytest.mark.skipif(not ctypes.util.find_library("m"), reason="no C math library to compare with")
def test_roundf_is_the_c_librarys():
    """LEG-1.4: roundf is C99's roundf (7.12.9.6): bit-equal to the C library's on ties, zeros of both signs
    (roundf(-0.3f) is -0.0), huge values and a spread of magnitudes."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.roundf.restype, libm.roundf.argtypes = ctypes.c_float, [ctypes.c_float]
    rng = np.random.default_rng(6)
    v = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.uniform(-3, 9, 2000), np.arange(-40, 40) / 4,
                        [0.0, -0.0, 2.0 ** 23 + 1, -(2.0 ** 23) - 1, 0.49999997, -0.49999997]]).astype(F32)
    want = np.array([libm.roundf(float(a)) for a in v], F32)
    np.testing.assert_array_equal(_bits(legacy.roundf(v)), _bits(want))


def test_fp16_bits_ggml_dtype_and_finite_values():
    """LEG-1.4: GGML_FP32_TO_FP16 rounds to nearest even (1 + 2^-11 -> 1.0, 1 + 3*2^-11 -> 1 + 2^-9) and returns
    uint16 bits; a negative NaN of any payload is 0xfe00."""
    v = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -2.0, np.nan], F32)
    v[3] = np.array([0xFF812345], np.uint32).view(F32)[0]
    got = legacy.fp16_bits_ggml(v)
    assert got.dtype == np.uint16 and got.tolist() == [0x3C00, 0x3C02, 0xC000, 0xFE00]


# ---------------------------------------------------------------------------------------------
# the recorded bytes are ggml's (when the oracle is at hand)
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to run")
def test_recorded_bytes_are_the_live_librarys():
    """GGML-4.4, GGML-2.2: every recorded case is what the live ggml build writes today."""
    spec = importlib.util.spec_from_file_location("record_legacy_teeth", Path(__file__).with_name("record_legacy_teeth.py"))
    rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rec)
    from conformance.adapters import ggml as oracle

    with np.errstate(all="ignore"):
        live = rec.record(oracle)
    with np.load(TEETH) as data:
        assert sorted(data.files) == sorted(live)
        for key in data.files:
            np.testing.assert_array_equal(np.asarray(data[key]).view(np.uint8) if data[key].dtype.kind == "f"
                                          else data[key], np.asarray(live[key]).view(np.uint8)
                                          if live[key].dtype.kind == "f" else live[key], err_msg=key)


# ---------------------------------------------------------------------------------------------
# the block types as the module builds them, built at test time
# ---------------------------------------------------------------------------------------------
#
# legacy.py builds its decoders and encoders once, at import (factories returning closures); the mutation
# runner (tests/mutation/run.py) switches a mutant on only for calls made at test time. Executing the
# module's file anew, under its own name and without registering it, builds the same types at test time.


@pytest.fixture
def fresh() -> dict:
    spec = importlib.util.spec_from_file_location(legacy.__name__, legacy.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {bt.name: bt for bt in module.TYPES}


def test_fresh_decoders_are_ggml(fresh):
    """GGML-2.2, LEG-2.2 .. LEG-6.2: the decoders, built at test time, are dequantize_row_<type> on every scale
    class, over several passes and from column-major arrays; q8_1's is qs * d (LEG-7.2)."""
    with np.errstate(all="ignore"):
        for name in DEC_TYPES:
            blocks, expected = _decode_case(name)
            size = ggml.TYPES[name].type_size
            rows = blocks.reshape(-1, size)
            want = _bits(expected.reshape(-1, 32))
            y = fresh[name].decode(np.tile(rows, (172, 1)))
            assert y.dtype == F32, name
            np.testing.assert_array_equal(_bits(y), np.tile(want, (172, 1)))
            np.testing.assert_array_equal(_bits(fresh[name].decode(np.asfortranarray(rows[:2]))), want[:2])
        blk = np.zeros((1, 36), np.uint8)
        blk[0, :6] = [0x00, 0x38, 0x00, 0x47, 0xFF, 0x80]
        assert fresh["q8_1"].decode(blk)[0, :3].tolist() == [-0.5, -64.0, 0.0]


def test_fresh_encoders_are_ggml(fresh):
    """GGML-4.4, LEG-1.6, LEG-2.4 .. LEG-7.3: the encoders, built at test time, write ggml's bytes on every
    recorded case, and on the long inputs of several passes (reference and importance paths)."""
    with np.load(TEETH) as data:
        keys = sorted({k.rsplit(".", 1)[0] for k in data.files if not k.startswith("dec_")})
    with np.errstate(all="ignore"):
        for key in keys:
            name, x, w, expected = _case(key)
            np.testing.assert_array_equal(fresh[name].quantize(x, w), expected, err_msg=key)
            if key.startswith(("clean_", "imp_gamma_")):
                reps = 344 if w is None else 172
                got = fresh[name].quantize(np.tile(x, (reps, 1)), w)
                assert got.dtype == np.uint8, key
                np.testing.assert_array_equal(got, np.tile(expected, (reps, 1)), err_msg=key)


def test_fresh_scale_fields(fresh):
    """LEG-1.7, LEG-7.2: d at byte 0 for every type; m at byte 2 for q4_1 and q5_1, s at byte 2 for q8_1."""
    blk = np.zeros((1, 36), np.uint8)
    blk[0, :4] = [0x00, 0x3C, 0x00, 0xC0]             # 1.0, -2.0
    for name, second in (("q4_0", None), ("q4_1", "m"), ("q5_0", None), ("q5_1", "m"), ("q8_0", None),
                         ("q8_1", "s")):
        got = fresh[name].scales(blk[:, :ggml.TYPES[name].type_size])
        want = {"d": [[1.0]]} if second is None else {"d": [[1.0]], second: [[-2.0]]}
        assert {k: v.tolist() for k, v in got.items()} == want, name
