"""The legacy types q4_0, q4_1, q5_0, q5_1, q8_0 and q8_1 (spec/ggml_legacy.md, LEG-1 .. LEG-8).

The worked examples of the chapter are executed here with the bytes and values it quotes; the rest are
properties of the layout and of the encoders. Comparisons with ggml itself are in test_oracle.py; the few
here that also ask the oracle run only where QFORMATS_GGML_LIB names it.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml import legacy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mutants"))
import legacy_bugs  # noqa: E402

F32 = np.float32
LIB = os.environ.get("QFORMATS_GGML_LIB")
needs_oracle = pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to run")


def block(hexbytes: str) -> np.ndarray:
    """One row of one block from the spaced hex the spec quotes (``|`` separates fields)."""
    return np.frombuffer(bytes.fromhex(hexbytes.replace("|", " ")), np.uint8)[None, :].copy()


def row(values, n: int = 32) -> np.ndarray:
    x = np.zeros((1, n), F32)
    x[0, :len(values)] = values
    return x


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


# ------------------------------------------------------------------------------------------- LEG-1


def test_block_sizes_are_the_struct_arithmetic():
    """LEG-1.1: q4_0 2 + 32/2 = 18, q4_1 20, q5_0 2 + 4 + 32/2 = 22, q5_1 24, q8_0 2 + 32 = 34, q8_1 36."""
    sizes = {name: ggml.TYPES[name].type_size for name in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1")}
    assert sizes == {"q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "q8_0": 34, "q8_1": 36}
    assert {ggml.TYPES[name].block_size for name in sizes} == {32}


def test_nibble_order_low_is_weight_j_high_is_weight_j_plus_16():
    """LEG-1.2: "byte j of qs holds weight j in its low nibble and weight j + 16 in its high nibble"."""
    for j in range(16):
        for nibble, weight in ((0x0F, j), (0xF0, j + 16)):
            qs = np.zeros((1, 16), np.uint8)
            qs[0, j] = nibble
            codes = legacy.unpack_nibbles(qs)[0]
            assert np.flatnonzero(codes).tolist() == [weight] and codes[weight] == 15


def test_fifth_bit_e_is_bit_e_of_the_little_endian_u32():
    """LEG-1.3: "bit e of that u32 (byte e / 8, bit e % 8) is bit 4 of weight e's code"."""
    for e in range(32):
        qh = np.array([[(1 << e) >> (8 * k) & 0xFF for k in range(4)]], np.uint8)
        high = legacy.unpack_fifth_bits(qh)[0]
        assert np.flatnonzero(high).tolist() == [e] and high[e] == 16


def test_pack_and_unpack_are_inverse():
    """LEG-1.2, LEG-1.3: packing 5-bit codes and unpacking them gives them back."""
    codes = np.random.default_rng(0).integers(0, 32, (64, 32))
    qs = legacy.pack_nibbles(codes[:, :16] & 15, codes[:, 16:] & 15)
    got = legacy.unpack_nibbles(qs) | legacy.unpack_fifth_bits(legacy.pack_fifth_bits(codes))
    np.testing.assert_array_equal(got, codes)


def test_c_conversions():
    """LEG-1.4: truncation through int32 with NaN / out of range giving byte 0; roundf ties away from zero,
    and not floor(|v| + 0.5); NaN to float16 as sign | 0x7e00."""
    with np.errstate(all="ignore"):
        _conversions()


def _conversions():
    v = np.array([2.9, -2.9, -0.5, 127.9, 200.7, 3e9, -3e9, np.inf, np.nan], F32)
    assert legacy.c_int8(v).tolist() == [2, -2, 0, 127, 200 - 256, 0, 0, 0, 0]
    half = np.array([2.5, -2.5, 0.5, -0.5, 1.5, np.nextafter(F32(0.5), F32(0)), 8388609.0, -np.inf], F32)
    np.testing.assert_array_equal(legacy.roundf(half), np.array([3, -3, 1, -1, 2, 0, 8388609.0, -np.inf], F32))
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7FE00001, 0x7F800001], np.uint32).view(F32)
    assert legacy.fp16_bits_ggml(nans).tolist() == [0x7E00, 0xFE00, 0x7E00, 0x7E00]
    assert legacy.fp16_bits_ggml(np.array([65520.0, 65519.0, 2.0 ** -25, -0.0], F32)).tolist() == [
        0x7C00, 0x7BFF, 0x0000, 0x8000]


# ------------------------------------------------------------------------------------------- q4_0


def test_q4_0_decode_example():
    """LEG-2.6 (1): d = 0.5, qs[0] = 0x1f, qs[1..15] = 0x80: y[0] = 3.5, y[16] = -3.5, 1..15 -4, 17..31 0."""
    y = ggml.dequantize("q4_0", block("00 38 | 1f" + " 80" * 15))[0]
    want = np.array([3.5] + [-4.0] * 15 + [-3.5] + [0.0] * 15, F32)
    np.testing.assert_array_equal(bits(y), bits(want))


def test_q4_0_encode_examples():
    """LEG-2.6 (2)-(3), LEG-2.4: "d = max / -8"; the largest-magnitude weight gets code 0."""
    b = ggml.quantize("q4_0", row([-2, 1, 0.1]))
    assert b.tobytes().hex(" ") == "00 34 80 8c" + " 88" * 14
    np.testing.assert_array_equal(ggml.dequantize("q4_0", b)[0, :3], [-2, 1, 0])
    b = ggml.quantize("q4_0", row([2]))
    assert b[0, :3].tobytes().hex(" ") == "00 b4 80"
    y = ggml.dequantize("q4_0", b)[0]
    assert y[0] == 2 and np.all(np.signbit(y[1:])) and np.all(y[1:] == 0)


def test_q4_0_all_zero_block_has_d_minus_zero():
    """LEG-2.4: "An all-zero block has max = +0, so d = 0 / -8 = -0.0 (0x8000) and every code 8"."""
    for zero in (0.0, -0.0):
        assert ggml.quantize("q4_0", np.full((1, 32), zero, F32)).tobytes().hex(" ") == "00 80" + " 88" * 16


def test_q4_0_importance_zero_weights_keep_first_trial_codes():
    """LEG-2.6 (4): all-zero importance, x[0] = -2, x[1] = 1: bytes 00 00 | 80 8c 88 ...: codes under d = +0."""
    b = ggml.quantize("q4_0", row([-2, 1]), importance=np.zeros(32, F32))
    assert b.tobytes().hex(" ") == "00 00 80 8c" + " 88" * 14


# ------------------------------------------------------------------------------------------- q4_1


def test_q4_1_example_round_trips():
    """LEG-3.6: x = j - 4 then 11 - j: d = 1, m = -4, codes j and 15 - j; decode gives x back."""
    x = row([j - 4 for j in range(16)] + [11 - j for j in range(16)])
    b = ggml.quantize("q4_1", x)
    assert b.tobytes().hex(" ") == "00 3c 00 c4 f0 e1 d2 c3 b4 a5 96 87 78 69 5a 4b 3c 2d 1e 0f"
    np.testing.assert_array_equal(ggml.dequantize("q4_1", b), x)


def test_q4_1_adds_m():
    """LEG-3.2: "y[e] = (float)q[e] * D + M": the offset is added, with one rounding."""
    blk = block("00 3c | 00 bc" + " 21" * 16)         # d = 1, m = -1, codes 1 (low) and 2 (high)
    np.testing.assert_array_equal(ggml.dequantize("q4_1", blk)[0], [0.0] * 16 + [1.0] * 16)
    blk = block("01 00 | 00 3c" + " ff" * 16)         # d = 2^-24, m = 1: 15 * 2^-24 + 1 rounds to 1 + 2^-23 * 8
    assert ggml.dequantize("q4_1", blk)[0, 0] == F32(1) + F32(15 * 2.0 ** -24)


def test_q4_1_importance_path_writes_a_negative_d():
    """LEG-3.5: "[this block] with importance 3 at weight 14, 2 at weight 19 and 0 elsewhere ... is written
    by ggml with d = -3.6132812 (0xc33a) and m = 0" (hence q4_1 has no never-negative field, LEG-1.7)."""
    x = np.array([[20, -6, -8, 14, 19, 14, 11, -13, -5, -3, 13, -19, -10, -16, -10, 19, 1, 11, -10, -12, 15, -8,
                   2, -7, 3, 20, 7, 16, -16, 15, 13, -4]], F32)
    w = np.zeros(32, F32)
    w[14], w[19] = 3, 2
    b = ggml.quantize("q4_1", x, importance=w)
    assert b[0, :4].tobytes().hex(" ") == "3a c3 00 00"
    assert ggml.TYPES["q4_1"].never_negative == ()


# ------------------------------------------------------------------------------------------- q5_0


def test_q5_0_decode_example():
    """LEG-4.6 (1): d = 1, qh = 01 00 01 80, qs[0] = 0x21, qs[15] = 0xf0: y[0] = 1, y[16] = 2, y[31] = 15,
    every other weight -16."""
    y = ggml.dequantize("q5_0", block("00 3c | 01 00 01 80 | 21" + " 00" * 14 + " f0"))[0]
    want = np.full(32, -16.0, F32)
    want[[0, 16, 31]] = [1.0, 2.0, 15.0]
    np.testing.assert_array_equal(bits(y), bits(want))


def test_q5_0_encode_example():
    """LEG-4.6 (2): x = [8, -7.5, 0, ...]: d = -0.5, codes 0, 31 and 16: bytes 00 b8 | fe ff ff ff | 00 0f 00 ..."""
    b = ggml.quantize("q5_0", row([8, -7.5]))
    assert b.tobytes().hex(" ") == "00 b8 fe ff ff ff 00 0f" + " 00" * 14
    y = ggml.dequantize("q5_0", b)[0]
    assert y[:2].tolist() == [8.0, -7.5] and np.all(y[2:] == 0) and np.all(np.signbit(y[2:]))


def test_q5_0_all_zero_block():
    """LEG-4.4: "an all-zero block is d = -0.0 (0x8000), qh = ff ff ff ff, qs all 0"."""
    assert ggml.quantize("q5_0", np.zeros((1, 32), F32)).tobytes().hex(" ") == "00 80" + " ff" * 4 + " 00" * 16


# ------------------------------------------------------------------------------------------- q5_1


def test_q5_1_example():
    """LEG-5.6: x = j: d = 1, m = 0, qh = 00 00 ff ff, qs[j] = j | j << 4; decode gives x back."""
    x = np.arange(32, dtype=F32)[None, :]
    b = ggml.quantize("q5_1", x)
    assert b.tobytes().hex(" ") == "00 3c 00 00 00 00 ff ff " + " ".join(f"{j:x}{j:x}" for j in range(16))
    np.testing.assert_array_equal(ggml.dequantize("q5_1", b), x)


# ------------------------------------------------------------------------------------------- q8_0, q8_1


def test_q8_0_example_rounds_ties_away_from_zero():
    """LEG-6.6: x = [127, 2.5, -2.5, 0.5, -0.5, 1.5]: d = 1, codes 127, 3, -3, 1, -1, 2."""
    x = row([127, 2.5, -2.5, 0.5, -0.5, 1.5])
    b = ggml.quantize("q8_0", x)
    assert b.tobytes().hex(" ") == "00 3c 7f 03 fd 01 ff 02" + " 00" * 26
    np.testing.assert_array_equal(ggml.dequantize("q8_0", b)[0, :6], [127, 3, -3, 1, -1, 2])


def test_q8_0_codes_are_signed():
    """LEG-6.2: qs is int8: byte 0xff is -1, 0x80 is -128."""
    y = ggml.dequantize("q8_0", block("00 40 | ff 80 7f 01" + " 00" * 28))[0]
    assert y[:4].tolist() == [-2.0, -256.0, 254.0, 2.0]


def test_q8_0_nan_in_last_position_makes_d_nan():
    """LEG-6.4: "a NaN in the last position makes d NaN and any other NaN is forgotten"."""
    x = np.tile(np.linspace(-1, 1, 32, dtype=F32), (2, 1))
    x[0, 5] = np.nan
    x[1, 31] = np.nan
    d = ggml.quantize("q8_0", x).reshape(2, 34)[:, :2].copy().view("<f2")[:, 0]
    assert d[0] == np.float16(1 / 127) and np.isnan(d[1])


def test_q8_0_refuses_an_importance_vector():
    """LEG-6.5: quantize_q8_0 ignores quant_weights, so qformats refuses one (ggml.importance.unsupported)."""
    with pytest.raises(QFormatsError) as err:
        ggml.quantize("q8_0", np.zeros((1, 32), F32), importance=np.ones(32, F32))
    assert err.value.code == "ggml.importance.unsupported"


def test_q8_1_example():
    """LEG-7.3: q8_0's encoder plus s = fp16(sum * d): for LEG-6.6's x, s = 129 (0x5808)."""
    b = ggml.quantize("q8_1", row([127, 2.5, -2.5, 0.5, -0.5, 1.5]))
    assert b.tobytes().hex(" ") == "00 3c 08 58 7f 03 fd 01 ff 02" + " 00" * 26
    assert ggml.TYPES["q8_1"].informative


# ------------------------------------------------------------------------------------------- validity, encoders


def test_validity_fields():
    """LEG-1.7: d (and m for q4_1 / q5_1) must be finite; q8_0's d is never negative; nothing else matters."""
    for name, fields in (("q4_0", {"d"}), ("q4_1", {"d", "m"}), ("q5_0", {"d"}), ("q5_1", {"d", "m"}),
                         ("q8_0", {"d"})):
        bt = ggml.TYPES[name]
        assert set(bt.scales(np.zeros((1, bt.type_size), np.uint8))) == fields
        assert bt.never_negative == (("d",) if name == "q8_0" else ())
        for field, offset in bt.fp16_offsets.items():
            blk = np.full((1, bt.type_size), 0xFF, np.uint8)
            blk[0, :4] = [0, 0x3C, 0, 0x3C]
            ggml.check_blocks(name, blk)                                  # every code pattern is valid
            blk[0, offset:offset + 2] = [0, 0x7C]                         # +inf
            with pytest.raises(QFormatsError) as err:
                ggml.check_blocks(name, blk)
            assert err.value.code == "ggml.scale.nonfinite" and field in str(err.value)


def test_q8_0_d_is_never_negative_and_q4_0_d_often_is():
    """LEG-6.3 (d = amax / 127 >= 0) and LEG-2.3 (d = max / -8 takes either sign), on random rows."""
    x = np.random.default_rng(1).standard_normal((64, 512)).astype(F32)
    d8 = ggml.quantize("q8_0", x).reshape(-1, 34)[:, :2].copy().view("<f2")
    d4 = ggml.quantize("q4_0", x).reshape(-1, 18)[:, :2].copy().view("<f2")
    assert (d8 >= 0).all() and (d4 < 0).any() and (d4 > 0).any()


@pytest.mark.parametrize(("name", "half_steps", "qmax"), [("q4_1", 0.5, 15), ("q5_1", 0.5, 31), ("q8_0", 0.5, 127),
                                                         ("q4_0", 1.0, 8), ("q5_0", 1.0, 16)])
def test_reference_encoders_error_bound(name, half_steps, qmax):
    """LEG-2.4 .. LEG-6.4: each weight decodes within half a step of its input (a whole step where q4_0 / q5_0
    saturate the side opposite the largest weight), plus the float16 rounding of d (times a code of at most
    qmax) and of m."""
    x = np.random.default_rng(2).standard_normal((32, 512)).astype(F32)
    bt = ggml.TYPES[name]
    b = ggml.quantize(name, x)
    y = ggml.dequantize(name, b).astype(np.float64)
    fields = bt.scales(b.reshape(-1, bt.type_size))
    d = np.abs(fields["d"]).astype(np.float64)
    m = np.abs(fields.get("m", np.zeros_like(fields["d"]))).astype(np.float64)
    bound = half_steps * d + 2.0 ** -11 * (qmax * d + m) + 1e-6
    assert (np.abs(y - x.astype(np.float64)).reshape(-1, 32) <= bound).all()


@pytest.mark.parametrize("name", ["q4_0", "q4_1", "q5_0", "q5_1"])
def test_importance_encoders_take_one_vector_per_row(name):
    """LEG-1.6: the importance path runs row by row with the same vector: encoding rows one at a time gives
    the same bytes, and a vector that differs only on block 1 leaves block 0 unchanged."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 64)).astype(F32)
    w = rng.gamma(2.0, 1.0, 64).astype(F32)
    whole = ggml.quantize(name, x, importance=w)
    np.testing.assert_array_equal(whole, np.concatenate([ggml.quantize(name, x[r:r + 1], importance=w)
                                                         for r in range(4)]))
    w2 = w.copy()
    w2[32:] *= 3
    size = ggml.TYPES[name].type_size
    np.testing.assert_array_equal(ggml.quantize(name, x, importance=w2)[:, :size], whole[:, :size])


def test_encoder_mutants_fail_the_worked_examples():
    """LEG-6.4, LEG-1.4: ties to even and floor(|v| + 0.5) are not roundf (the pending encoder mutants)."""
    x = row([127, 2.5, -2.5, 0.5, -0.5, 1.5])
    assert not np.array_equal(legacy_bugs.q8_0_ties_to_even(x=x), ggml.quantize("q8_0", x))
    x = row([127, np.nextafter(F32(0.5), F32(0))])
    assert not np.array_equal(legacy_bugs.q8_0_floor_plus_half(x=x), ggml.quantize("q8_0", x))
    x = np.random.default_rng(4).standard_normal((4, 64)).astype(F32)    # and agree elsewhere
    np.testing.assert_array_equal(legacy_bugs.q8_0_ties_to_even(x=x), ggml.quantize("q8_0", x))


# ------------------------------------------------------------------------------------------- against ggml


@needs_oracle
def test_q8_1_encoder_is_byte_identical_to_ggml():
    """LEG-7.3: "qformats' q8_1 encoder is byte-identical to [quantize_row_q8_1_ref] [run]"."""
    from conformance.adapters import ggml as oracle

    fn = oracle.library().quantize_row_q8_1_ref
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 256)) * 10.0 ** rng.uniform(-6, 6, (64, 1))).astype(F32)
    x[::7] = np.round(x[::7] * 4) / 4
    out = np.zeros((64, 8 * 36), np.uint8)
    fn(x.ctypes.data, out.ctypes.data, x.size)
    np.testing.assert_array_equal(ggml.quantize("q8_1", x), out)


@needs_oracle
def test_spec_examples_agree_with_ggml():
    """LEG-2.6, LEG-3.5, LEG-3.6, LEG-4.6, LEG-5.6, LEG-6.6: the encoded examples are ggml's bytes."""
    from conformance.adapters import ggml as oracle

    examples = [("q4_0", row([-2, 1, 0.1]), None), ("q4_0", row([2]), None), ("q4_0", row([-2, 1]), np.zeros(32, F32)),
                ("q4_1", row([j - 4 for j in range(16)] + [11 - j for j in range(16)]), None),
                ("q5_0", row([8, -7.5]), None), ("q5_1", np.arange(32, dtype=F32)[None, :], None),
                ("q8_0", row([127, 2.5, -2.5, 0.5, -0.5, 1.5]), None)]
    for name, x, w in examples:
        np.testing.assert_array_equal(ggml.quantize(name, x, importance=w), oracle.quantize(name, x, importance=w))
    assert not oracle.validate_row_data(9, np.zeros(36, np.uint8))        # LEG-7.3: ggml refuses q8_1 rows
