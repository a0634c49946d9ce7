"""q2_K, q5_K and q8_K (spec/ggml_kquants.md KQ-1.3 .. KQ-1.5, KQ-2, KQ-5, KQ-7).

Worked examples of the spec executed, layout facts checked against the spec's formulas (written out
here independently of the codec), encoder properties, and q8_K against the oracle: the shared
oracle test (tests/ggml/test_oracle.py) skips informative types, and ggml exports no ``quantize_q8_K``,
so ``quantize_row_q8_K_ref`` is called directly here.
"""

from __future__ import annotations

import ctypes
import os
import zlib

import gguf
import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml import kquants_qkx as kq
from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks
from qformats.formats.ggml.kmachinery_qkx import DECODE_BLOCKS, SCALE_BLOCKS, unpack_scales

LIB_PATH = os.environ.get("QFORMATS_GGML_LIB")
needs_oracle = pytest.mark.skipif(not LIB_PATH, reason="set QFORMATS_GGML_LIB to a ggml build to run")
F32 = np.float32


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def _rows(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """Gaussian, heavy-tailed, one-signed and coarse-grid (tie) rows, one kind per row."""
    kinds = [lambda: rng.standard_normal(n), lambda: rng.standard_t(2, n), lambda: rng.uniform(0, 1, n),
             lambda: -rng.exponential(1, n), lambda: (rng.integers(-16, 16, n) + 0.5) / 4]
    return np.stack([kinds[i % len(kinds)]() for i in range(rows)]).astype(F32)


# ---------------------------------------------------------------------------------------------
# layout (KQ-2.1, KQ-5.1, KQ-7.1)
# ---------------------------------------------------------------------------------------------


def test_block_geometry():
    """KQ-2.1, KQ-5.1, KQ-7.1: 16 + 64 + 2 + 2 = 84, 2 + 2 + 12 + 32 + 128 = 176, 4 + 256 + 32 = 292 bytes
    for 256 weights; type ids 10, 13, 15; gguf-py's GGML_QUANT_SIZES agree."""
    for name, size, type_id in (("q2_k", 84, 10), ("q5_k", 176, 13), ("q8_k", 292, 15)):
        bt = ggml.TYPES[name]
        assert (bt.block_size, bt.type_size, bt.ggml.type_id) == (256, size, type_id)
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)] == (256, size)
    assert ggml.TYPES["q2_k"].fp16_offsets == {"d": 80, "dmin": 82}      # KQ-2.1: d and dmin come last
    assert ggml.TYPES["q5_k"].fp16_offsets == {"d": 0, "dmin": 2}
    assert ggml.TYPES["q8_k"].informative and not ggml.TYPES["q8_k"].importance


def test_q2k_code_positions_follow_the_formula():
    """KQ-2.1: "weight i is bit pair ((i % 128) / 32) of byte 32(i / 128) + i % 32"."""
    for i in range(256):
        codes = np.zeros((1, 256), np.uint8)
        codes[0, i] = 3
        qs = kq.q2k_pack_codes(codes)[0]
        byte, pair = 32 * (i // 128) + i % 32, (i % 128) // 32
        expected = np.zeros(64, np.uint8)
        expected[byte] = 3 << (2 * pair)
        np.testing.assert_array_equal(qs, expected, err_msg=f"weight {i}")


def test_q5k_code_positions_follow_the_formula():
    """KQ-5.1: "q[i] = lo[i] | ((qh[l] >> j) & 1) << 4" with j = i / 32, l = i % 32, and lo in q4_K's order
    (qs[32c + l] = lo[64c + l] | lo[64c + 32 + l] << 4)."""
    for i in range(256):
        codes = np.zeros((1, 256), np.uint8)
        codes[0, i] = 31
        qh, qs = (a[0] for a in kq.q5k_pack_codes(codes))
        j, l, c = i // 32, i % 32, i // 64
        expected_qh = np.zeros(32, np.uint8)
        expected_qh[l] = 1 << j
        expected_qs = np.zeros(128, np.uint8)
        expected_qs[32 * c + l] = 0x0F if (i // 32) % 2 == 0 else 0xF0
        np.testing.assert_array_equal(qh, expected_qh, err_msg=f"weight {i}")
        np.testing.assert_array_equal(qs, expected_qs, err_msg=f"weight {i}")


def test_code_packing_round_trips_every_byte_pattern():
    """KQ-2.1, KQ-5.1: every qs / qh byte pattern is some code vector (all bits are used), so unpack then
    pack returns the bytes."""
    rng = _rng("roundtrip")
    qs2 = rng.integers(0, 256, (64, 64), dtype=np.uint8)
    np.testing.assert_array_equal(kq.q2k_pack_codes(kq.q2k_unpack_codes(qs2)), qs2)
    qh, qs5 = rng.integers(0, 256, (64, 32), dtype=np.uint8), rng.integers(0, 256, (64, 128), dtype=np.uint8)
    got_qh, got_qs = kq.q5k_pack_codes(kq.q5k_unpack_codes(qh, qs5))
    np.testing.assert_array_equal(got_qh, qh)
    np.testing.assert_array_equal(got_qs, qs5)


# ---------------------------------------------------------------------------------------------
# worked examples (KQ-2.6, KQ-5.6, KQ-7.5)
# ---------------------------------------------------------------------------------------------

# KQ-2.6: d = 0x3400 (0.25), dmin = 0x3800 (0.5); scales[j] = j | (15 - j) << 4;
# qs[0] = 0xe4, qs[16] = 0x1b, qs[32] = 0xe4, qs[63] = 0xff, every other qs byte 0.
Q2K_SCALES = bytes.fromhex("f0e1d2c3b4a5968778695a4b3c2d1e0f")
Q2K_VALUES = {0: -7.5, 16: -6.25, 32: -6.0, 48: -4.5, 96: 0.0, 112: -4.0, 159: 3.75, 192: 4.5, 224: 10.0, 255: 11.25}


def _q2k_spec_block() -> np.ndarray:
    qs = bytearray(64)
    qs[0], qs[16], qs[32], qs[63] = 0xE4, 0x1B, 0xE4, 0xFF
    return np.frombuffer(Q2K_SCALES + bytes(qs) + bytes.fromhex("00340038"), np.uint8).reshape(1, 84)


def test_q2k_worked_example():
    """KQ-2.6: "scales[j] = j | (15 - j) << 4, so sc[j] = j and m[j] = 15 - j (bytes f0 e1 d2 ... 1e 0f)";
    y = 0.25·j·q − 0.5·(15 − j): weight 0 → −7.5, 16 → −6.25, ..., 255 → 11.25."""
    assert bytes(j | (15 - j) << 4 for j in range(16)) == Q2K_SCALES
    y = ggml.dequantize("q2_k", _q2k_spec_block())[0]
    for i, v in Q2K_VALUES.items():
        assert y[i] == F32(v), (i, y[i], v)
    assert y[1] == F32(-7.5)                      # qs[1] = 0: code 0 in sub-block 0


# KQ-5.6: Q4K-7.1's block with qh[0] = 0xa5.
Q5K_SCALES = bytes.fromhex("4182c304" "4081c203" "0101ff50")
Q5K_VALUES = {0: 6.5, 1: 0.75, 32: 2.0, 64: 13.25, 96: 13.5, 128: 4.75, 160: 239.75, 192: 15.75, 224: -2.5}


def _q5k_spec_block() -> np.ndarray:
    qh = bytearray(32)
    qh[0] = 0xA5
    qs = bytearray(b"\xf3" * 128)
    qs[0] = 0x5A
    return np.frombuffer(bytes.fromhex("00340038") + Q5K_SCALES + bytes(qh) + bytes(qs), np.uint8).reshape(1, 176)


def test_q5k_worked_example():
    """KQ-5.6: "qh[0] = 0xa5 (bits 0, 2, 5, 7)": weight 0 has code 26 → 6.5, weight 64 code 19 → 13.25,
    weight 160 code 31 → 239.75, weight 224 code 31 under sc = 0 → −2.5."""
    sc, m = unpack_scales(np.frombuffer(Q5K_SCALES, np.uint8))
    assert (sc.tolist(), m.tolist()) == ([1, 2, 3, 4, 17, 33, 63, 0], [0, 1, 2, 3, 16, 32, 63, 5])
    y = ggml.dequantize("q5_k", _q5k_spec_block())[0]
    for i, v in Q5K_VALUES.items():
        assert y[i] == F32(v), (i, y[i], v)


def _q8k_spec_input() -> np.ndarray:
    x = np.zeros((1, 256), F32)
    x[0, 0], x[0, 1], x[0, 255] = 2, -1, 1
    return x


def test_q8k_worked_example():
    """KQ-7.5: "qs[0] = -127 (0x81), qs[1] = 64, qs[255] = -64 (0xc0); bsums[0] = -63, bsums[15] = -64;
    d = 1 / -63.5 (float32 bits 0xbc810204). Decoding gives y[0] = 2.0, y[1] = -1.007874"."""
    blk = ggml.quantize("q8_k", _q8k_spec_input())[0]
    assert blk[0:4].view("<u4")[0] == 0xBC810204
    qs = blk[4:260].view(np.int8)
    assert (qs[0], qs[1], qs[255]) == (-127, 64, -64) and not qs[2:255].any()
    assert blk[260:].view("<i2").tolist() == [-63] + [0] * 14 + [-64]
    y = ggml.dequantize("q8_k", blk[None])[0]
    assert y[0] == F32(2.0) and y[1] == F32(-1.007874) and y[255] == F32(1.007874)


@pytest.mark.parametrize("name", ["q2_k", "q5_k"])
def test_all_zero_row_is_zero_bytes(name):
    """KQ-2.6, KQ-5.6: "An all-zero row ... The block is 84 zero bytes, on both paths" (176 for q5_K)."""
    x = np.zeros((2, 512), F32)
    size = ggml.TYPES[name].type_size
    assert not ggml.quantize(name, x).any() and ggml.quantize(name, x).shape == (2, 2 * size)
    assert not ggml.quantize(name, x, importance=np.ones(512, F32)).any()


# ---------------------------------------------------------------------------------------------
# encoder properties (KQ-2.3 .. KQ-2.5, KQ-5.3 .. KQ-5.5)
# ---------------------------------------------------------------------------------------------


def _q2k_fields(blk):
    """(codes (nb, 16, 16), dj (nb, 16), mj (nb, 16)) per KQ-2.1 and KQ-2.2, written from the spec."""
    i = np.arange(256)
    byte, shift = 32 * (i // 128) + i % 32, 2 * ((i % 128) // 32)
    codes = ((blk[:, 16 + byte] >> shift) & 3).reshape(-1, 16, 16)
    d, dmin = (np.ascontiguousarray(blk[:, o:o + 2]).view("<f2").astype(F32) for o in (80, 82))
    return codes, d * (blk[:, :16] & 15).astype(F32), dmin * (blk[:, :16] >> 4).astype(F32)


def _q5k_fields(blk):
    """(codes (nb, 8, 32), dj (nb, 8), mj (nb, 8)) per KQ-5.1 and KQ-5.2, written from the spec."""
    i = np.arange(256)
    j, l, c = i // 32, i % 32, i // 64
    lo = (blk[:, 48 + 32 * c + l] >> (4 * (j % 2))) & 15
    hi = (blk[:, 16 + l] >> j) & 1
    codes = (lo | hi << 4).reshape(-1, 8, 32)
    sc, m = unpack_scales(blk[:, 4:16])
    d, dmin = (np.ascontiguousarray(blk[:, o:o + 2]).view("<f2").astype(F32) for o in (0, 2))
    return codes, d * sc.astype(F32), dmin * m.astype(F32)


FIELDS = {"q2_k": (_q2k_fields, 16, 3), "q5_k": (_q5k_fields, 32, 31)}


@pytest.mark.parametrize("importance", [False, True], ids=["ref", "importance"])
@pytest.mark.parametrize("name", ["q2_k", "q5_k"])
def test_codes_are_requantized_against_the_stored_scales(name, importance):
    """KQ-2.4 step 5 (and KQ-5.4, KQ-2.5, KQ-5.5): where dj != 0 every code is
    clamp(nearest_int((x + mj) / dj), 0, nmax) with dj, mj from the stored bytes."""
    rng = _rng("requant", name, importance)
    x = _rows(rng, 20, 1024)
    w = rng.gamma(2.0, 1.0, 1024).astype(F32) if importance else None
    fields, per, nmax = FIELDS[name]
    codes, dj, mj = fields(ggml.quantize(name, x, importance=w).reshape(-1, ggml.TYPES[name].type_size))
    xs = x.reshape(-1, 256 // per, per)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.clip(np.rint((xs + mj[..., None]) / dj[..., None]), 0, nmax)
    live = np.broadcast_to(dj[..., None] != 0, codes.shape)
    assert live.mean() > 0.9
    np.testing.assert_array_equal(codes[live], want[live])


@pytest.mark.parametrize("name", ["q2_k", "q5_k"])
def test_encoders_never_write_negative_super_scales(name):
    """KQ-2.3, KQ-5.3 (GGML-3.2): d and dmin are never negative, on the reference path and with a
    non-negative importance vector (zeros included)."""
    rng = _rng("nonneg", name)
    x = _rows(rng, 40, 512) * (10.0 ** rng.uniform(-6, 6, (40, 1))).astype(F32)
    w = (rng.gamma(0.5, 1.0, 512) * (rng.random(512) < 0.7)).astype(F32)
    for blocks in (ggml.quantize(name, x), ggml.quantize(name, x, importance=w)):
        scales = ggml.TYPES[name].scales(blocks.reshape(-1, ggml.TYPES[name].type_size))
        for field in ("d", "dmin"):
            assert not (scales[field] < 0).any(), field


@pytest.mark.parametrize(("name", "bound"), [("q2_k", 0.40), ("q5_k", 0.05)])
def test_reconstruction_error_is_that_of_the_bit_width(name, bound):
    """KQ-2, KQ-5 (sanity): on gaussian rows the RMS error relative to the RMS input is that of a 2-bit
    (about 0.3) and a 5-bit (about 0.04) affine code, on both paths."""
    rng = _rng("rms", name)
    x = rng.standard_normal((16, 1024)).astype(F32)
    for w in (None, rng.gamma(2.0, 1.0, 1024).astype(F32)):
        y = ggml.dequantize(name, ggml.quantize(name, x, importance=w))
        assert np.sqrt(np.mean((y - x) ** 2)) < bound * np.sqrt(np.mean(x ** 2))


def test_q8k_error_is_at_most_half_a_step():
    """KQ-7.3: codes are nearest_int(x / d) with |x / d| <= 127, so |y - x| <= |d| / 2 (plus rounding)."""
    x = _rows(_rng("q8k"), 10, 1024)
    blocks = ggml.quantize("q8_k", x)
    d = np.abs(ggml.TYPES["q8_k"].scales(blocks.reshape(-1, 292))["d"])            # (nb, 1)
    err = np.abs(ggml.dequantize("q8_k", blocks) - x).reshape(-1, 256)
    assert (err <= d * F32(0.5 + 1e-5) + np.abs(x.reshape(-1, 256)) * F32(1e-6)).all()


def test_q8k_refuses_an_importance_vector():
    """KQ-7.3, GGML-4.2: quantize_row_q8_K_ref has no importance path."""
    with pytest.raises(QFormatsError) as err:
        ggml.quantize("q8_k", np.zeros((1, 256), F32), importance=np.ones(256, F32))
    assert err.value.code == "ggml.importance.unsupported"


# ---------------------------------------------------------------------------------------------
# q8_K against the oracle (informative type: not in the shared oracle test)
# ---------------------------------------------------------------------------------------------


def _oracle_q8k_quantize(x: np.ndarray) -> np.ndarray:
    from conformance.adapters import ggml as ggml_lib

    x = np.ascontiguousarray(x, F32)
    out = np.zeros((x.shape[0], x.shape[1] // 256 * 292), np.uint8)     # zeroed: bsums of zero blocks (KQ-7.3)
    fn = ggml_lib.library().quantize_row_q8_K_ref
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out


@needs_oracle
def test_q8k_encoder_is_byte_identical_to_ggml():
    """KQ-7.3: quantize(x) is quantize_row_q8_K_ref byte for byte, on every row kind, zero rows, ties,
    NaN/inf and subnormal entries included."""
    rng = _rng("q8k-oracle")
    x = _rows(rng, 60, 1024) * (10.0 ** rng.uniform(-30, 30, (60, 1))).astype(F32)
    x[::7] = 0
    x[3, :256] = (rng.integers(-3, 4, 256) * 0.5).astype(F32)           # several elements of largest magnitude
    mask = rng.random(x.shape) < 0.002
    x[mask] = rng.choice(np.array([np.nan, np.inf, -np.inf, 1e-45, -0.0], F32), int(mask.sum()))
    np.testing.assert_array_equal(ggml.quantize("q8_k", x), _oracle_q8k_quantize(x))
    np.testing.assert_array_equal(ggml.quantize("q8_k", _q8k_spec_input()), _oracle_q8k_quantize(_q8k_spec_input()))


@needs_oracle
def test_q8k_decoder_and_validity_agree_with_ggml():
    """KQ-7.2, KQ-7.4: dequantize_row_q8_K bit for bit on random bytes with every class of fp32 d; a row is
    refused by ggml_validate_row_data exactly when d is not finite."""
    from conformance.adapters import ggml as ggml_lib

    rng = _rng("q8k-decode")
    blocks = rng.integers(0, 256, (48, 292), dtype=np.uint8)
    d = np.concatenate([rng.standard_normal(24), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e38, 3e38]])
    d = np.resize(d, 48).astype("<f4")
    blocks[:, 0:4] = d.view(np.uint8).reshape(48, 4)
    np.testing.assert_array_equal(bits(ggml.dequantize("q8_k", blocks)), bits(ggml_lib.dequantize("q8_K", blocks)))
    for row in blocks:
        try:
            ggml.check_blocks("q8_k", row[None])
            ours = True
        except QFormatsError as err:
            assert err.code == "ggml.scale.nonfinite"
            ours = False
        assert ours == ggml_lib.validate_row_data(15, row)


@needs_oracle
@pytest.mark.parametrize(("name", "block"), [("q2_k", _q2k_spec_block), ("q5_k", _q5k_spec_block)])
def test_worked_examples_agree_with_ggml(name, block):
    """KQ-2.6, KQ-5.6: the hand-worked blocks decode the same in ggml's dequantize_row_q2_K / _q5_K."""
    from conformance.adapters import ggml as ggml_lib

    np.testing.assert_array_equal(bits(ggml.dequantize(name, block())), bits(ggml_lib.dequantize(name, block())))


@needs_oracle
@pytest.mark.parametrize("name", ["q2_k", "q5_k"])
def test_encoders_agree_with_ggml_across_encoder_passes(name):
    """GGML-4.4, KQ-2.5, KQ-5.5: 171 rows of 3 blocks (513 super-blocks, more than one vectorized pass):
    block i of every row takes importance w[256i .. 256i+255], on both paths byte for byte."""
    from conformance.adapters import ggml as ggml_lib

    rng = _rng("passes", name)
    x = _rows(rng, 171, 768)
    w = rng.gamma(2.0, 1.0, 768).astype(F32)
    for importance in (None, w):
        np.testing.assert_array_equal(ggml.quantize(name, x, importance=importance),
                                      ggml_lib.quantize(name, x, importance))


@needs_oracle
@pytest.mark.parametrize("name", ["q2_k", "q4_k", "q5_k"])
def test_decoders_agree_with_ggml_across_decode_passes(name):
    """GGML-2.2, Q4K-3.1, KQ-2.2, KQ-5.2: more super-blocks than one group of scales and several decode passes
    hold (SCALE_BLOCKS + DECODE_BLOCKS + 5, the last pass partial), every scale class in turn so that passes
    start inside a class, non-finite d and dmin included: dequantize_row_<type>'s values bit for bit."""
    from conformance.adapters import ggml as ggml_lib

    bt, rng = ggml.TYPES[name], _rng("decode-passes", name)
    rows = -(-(SCALE_BLOCKS + DECODE_BLOCKS + 5) // len(SCALE_CLASSES))
    blocks = np.concatenate([random_blocks(bt, rng, rows, 256, c) for c in SCALE_CLASSES])
    assert blocks.shape[0] > SCALE_BLOCKS + DECODE_BLOCKS
    np.testing.assert_array_equal(bits(ggml.dequantize(name, blocks)), bits(ggml_lib.dequantize(name, blocks)))
