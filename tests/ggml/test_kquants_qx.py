"""q3_K and q6_K (spec/ggml_kquants.md KQ-1.1, KQ-1.2, KQ-3, KQ-6): worked examples, layout and properties.

Byte identity with ggml itself is tests/ggml/test_oracle.py; these tests need no ggml build. Expected
values come from the spec's hand-worked examples or from properties, never from the code under test.
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml import kquants_qx as qx
from qformats.formats.ggml.kmachinery_qx import make_q3_quants, make_qx_quants

F32 = np.float32


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def _one_weight_row() -> np.ndarray:
    x = np.zeros((1, 256), F32)
    x[0, 0] = 1.0
    return x


# ------------------------------------------------------------------------------------------ geometry


@pytest.mark.parametrize(("name", "size", "type_id", "gguf_type"), [
    ("q3_k", 256 // 8 + 256 // 4 + 12 + 2, 11, gguf.GGMLQuantizationType.Q3_K),
    ("q6_k", 256 // 2 + 256 // 4 + 256 // 16 + 2, 14, gguf.GGMLQuantizationType.Q6_K),
])
def test_block_geometry(name, size, type_id, gguf_type):
    """KQ-3.1 / KQ-6.1: `QK_K/8 + QK_K/4 + 12 + 2` = 110 bytes (type 11), `QK_K/2 + QK_K/4 + QK_K/16 + 2`
    = 210 bytes (type 14), for 256 weights; gguf-py agrees."""
    bt = ggml.TYPES[name]
    assert (bt.block_size, bt.type_size, bt.ggml.type_id) == (256, size, type_id)
    assert gguf.GGML_QUANT_SIZES[gguf_type] == (256, size)
    assert (qx.Q3K_BYTES, qx.Q6K_BYTES) == (110, 210)
    assert (qx.Q3K_HMASK, qx.Q3K_QS, qx.Q3K_SCALES, qx.Q3K_D) == (0, 32, 96, 108)
    assert (qx.Q6K_QL, qx.Q6K_QH, qx.Q6K_SCALES, qx.Q6K_D) == (0, 128, 192, 208)


def test_validity_fields_and_signs():
    """KQ-3.3 / KQ-6.3: ggml_validate_row_data checks `d` only; a negative `d` is not a warning
    (GGML-3.2 does not apply), since both encoders write one."""
    for name, offset in (("q3_k", 108), ("q6_k", 208)):
        bt = ggml.TYPES[name]
        assert bt.never_negative == () and dict(bt.fp16_offsets) == {"d": offset}
        blk = np.zeros((1, bt.type_size), np.uint8)
        blk[0, offset:offset + 2] = np.frombuffer(np.array([np.inf], "<f2").tobytes(), np.uint8)
        with pytest.raises(QFormatsError) as err:
            ggml.check_blocks(name, blk)
        assert err.value.code == "ggml.scale.nonfinite"
        blk[0, :offset] = 0xFF                                   # every other byte is valid (GGML-3.4)
        blk[0, offset:offset + 2] = np.frombuffer(np.array([-1.0], "<f2").tobytes(), np.uint8)
        ggml.check_blocks(name, blk)


@pytest.mark.parametrize(("name", "d_bits"), [("q3_k", np.float16(-2.0 ** -7)), ("q6_k", np.float16(-2.0 ** -12))])
def test_reference_encoder_writes_negative_d(name, d_bits):
    """KQ-3.3: `x = [-1, 0, ..., 0]` gives `d = -2^-7`; KQ-6.3: it gives `d = -2^-12` (q6_K)."""
    x = -_one_weight_row()
    blocks = ggml.quantize(name, x)
    offset = ggml.TYPES[name].fp16_offsets["d"]
    assert np.frombuffer(blocks[0, offset:offset + 2].tobytes(), "<f2")[0] == d_bits


# ------------------------------------------------------------------------------------------ q3_K layout


# KQ-3.6 hand-built block: d = 0x3800 (0.5); s = [33, 30, 63, 0, 36, 32, 40, 20, 45, 35, 33, 33, 33, 33,
# 33, 31] packed as d1 3e 1f 10 14 10 18 f4 aa a9 ab 64; hmask[0] = 0x15, qs[0] = 0x1b, qs[32] = 0x02.
Q3_S = [33, 30, 63, 0, 36, 32, 40, 20, 45, 35, 33, 33, 33, 33, 33, 31]
Q3_SCALES = bytes.fromhex("d13e1f10141018f4aaa9ab64")
Q3_VALUES = {0: 1.5, 1: -2.0, 16: 4.0, 32: -31.0, 48: 64.0, 64: 2.0, 80: -0.0, 96: -16.0, 128: 13.0, 255: 2.0}


def _q3_block() -> np.ndarray:
    raw = bytearray(110)
    raw[0] = 0x15
    raw[32] = 0x1B
    raw[64] = 0x02
    raw[96:108] = Q3_SCALES
    raw[108:110] = bytes.fromhex("0038")
    return np.frombuffer(bytes(raw), np.uint8).reshape(1, 110)


def test_q3k_scale_packing_worked_example():
    """KQ-3.6: `s = [33, 30, 63, 0, ...]` is packed as `d1 3e 1f 10 14 10 18 f4 aa a9 ab 64`."""
    assert qx.pack_q3_scales(np.array(Q3_S)).tobytes() == Q3_SCALES
    assert qx.unpack_q3_scales(np.frombuffer(Q3_SCALES, np.uint8)).tolist() == Q3_S


def test_q3k_scale_packing_uses_every_bit():
    """KQ-3.1: "Every 12-byte pattern unpacks; all 96 bits are used": pack(unpack(b)) == b, and the
    per-scale formula `s[j] = (j < 8 ? scales[j] & 15 : scales[j-8] >> 4) | ((scales[8 + j%4] >> 2(j/4)) & 3) << 4`."""
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, (500, 12), dtype=np.uint8)
    s = qx.unpack_q3_scales(raw)
    np.testing.assert_array_equal(qx.pack_q3_scales(s), raw)
    for j in range(16):
        low = raw[:, j] & 15 if j < 8 else raw[:, j - 8] >> 4
        high = (raw[:, 8 + j % 4] >> (2 * (j // 4))) & 3
        np.testing.assert_array_equal(s[:, j], low | (high << 4))


def test_q3k_code_positions():
    """KQ-3.1: weight `128c + 32k + l` has low bits `(qs[32c + l] >> 2k) & 3` and high bit
    `(hmask[l] >> (4c + k)) & 1`, and `q = low - (high ? 0 : 4)`: a clear bit subtracts 4."""
    rng = np.random.default_rng(4)
    hmask = rng.integers(0, 256, (3, 32), dtype=np.uint8)
    qs = rng.integers(0, 256, (3, 64), dtype=np.uint8)
    q = qx.q3k_codes(hmask, qs)
    for i in range(256):
        c, k, l = i // 128, (i % 128) // 32, i % 32
        low = (qs[:, 32 * c + l] >> (2 * k)) & 3
        high = (hmask[:, l] >> (4 * c + k)) & 1
        np.testing.assert_array_equal(q[:, i], low.astype(int) - np.where(high == 1, 0, 4))
    stored = q.astype(int) + 4
    back_h, back_q = qx.pack_q3k_codes(stored)
    np.testing.assert_array_equal(back_h, hmask)
    np.testing.assert_array_equal(back_q, qs)


def test_q3k_hand_built_block():
    """KQ-3.6 hand-built block: the table's values, signed zero included (`0.5·0·(−4) = −0.0`)."""
    y = ggml.dequantize("q3_k", _q3_block())[0]
    for i, want in Q3_VALUES.items():
        assert _bits(y[i]) == _bits(F32(want)), (i, y[i], want)
    # every other weight has code -4 under its sub-block's scale (KQ-3.2)
    sc = np.array(Q3_S) - 32
    rest = [i for i in range(256) if i not in (0, 32, 64, 96, 128)]
    np.testing.assert_array_equal(_bits(y[rest]), _bits((F32(0.5) * sc[np.array(rest) // 16].astype(F32)) * F32(-4)))


# ------------------------------------------------------------------------------------------ q6_K layout


# KQ-6.6 hand-built block: d = 0x3400 (0.25); sc = [1, -2, 3, -4, 127, 6, -128, 5, 7 x 8];
# ql[0] = 0x21, ql[32] = 0x43, qh[0] = 0xe4.
Q6_SC = [1, -2, 3, -4, 127, 6, -128, 5] + [7] * 8
Q6_SCALE_BYTES = bytes.fromhex("01fe03fc7f068005" "0707070707070707")
Q6_VALUES = {0: -7.75, 1: -8.0, 16: 16.0, 32: -9.75, 48: 32.0, 64: 63.5, 80: -48.0, 96: -640.0, 128: -56.0}


def _q6_block() -> np.ndarray:
    raw = bytearray(210)
    raw[0] = 0x21
    raw[32] = 0x43
    raw[128] = 0xE4
    raw[192:208] = Q6_SCALE_BYTES
    raw[208:210] = bytes.fromhex("0034")
    return np.frombuffer(bytes(raw), np.uint8).reshape(1, 210)


def test_q6k_scale_bytes_are_int8():
    """KQ-6.6: `sc = [1, −2, 3, −4, 127, 6, −128, 5, 7, ...]` are the bytes `01 fe 03 fc 7f 06 80 05 07 ...`."""
    assert np.array(Q6_SC, np.int8).view(np.uint8).tobytes() == Q6_SCALE_BYTES


def test_q6k_code_positions():
    """KQ-6.1: weight `128c + 32k + l` has low bits `(ql[64c + 32(k % 2) + l] >> 4(k / 2)) & 15`, high
    bits `(qh[32c + l] >> 2k) & 3`, `q = (low | high << 4) - 32`; a ql byte holds weights 64 apart."""
    rng = np.random.default_rng(5)
    ql = rng.integers(0, 256, (3, 128), dtype=np.uint8)
    qh = rng.integers(0, 256, (3, 64), dtype=np.uint8)
    q = qx.q6k_codes(ql, qh)
    for i in range(256):
        c, k, l = i // 128, (i % 128) // 32, i % 32
        low = (ql[:, 64 * c + 32 * (k % 2) + l] >> (4 * (k // 2))) & 15
        high = (qh[:, 32 * c + l] >> (2 * k)) & 3
        np.testing.assert_array_equal(q[:, i], (low | (high << 4)).astype(int) - 32)
    back_l, back_h = qx.pack_q6k_codes(q.astype(int) + 32)
    np.testing.assert_array_equal(back_l, ql)
    np.testing.assert_array_equal(back_h, qh)


def test_q6k_hand_built_block():
    """KQ-6.6 hand-built block: the table's values; every other code is 0 (q = −32)."""
    y = ggml.dequantize("q6_k", _q6_block())[0]
    for i, want in Q6_VALUES.items():
        assert _bits(y[i]) == _bits(F32(want)), (i, y[i], want)
    sc = np.array(Q6_SC)
    rest = [i for i in range(256) if i not in (0, 32, 64, 96)]
    np.testing.assert_array_equal(_bits(y[rest]), _bits((F32(0.25) * sc[np.array(rest) // 16].astype(F32)) * F32(-32)))


@pytest.mark.parametrize("name", ["q3_k", "q6_k"])
def test_decode_is_the_exact_product(name):
    """KQ-3.2 / KQ-6.2: neither product rounds for a finite `d`, so `y` is the exact real `d·sc·q`
    (float64 products of the decoded fields, rounded once, give the same float32)."""
    rng = np.random.default_rng(6)
    bt = ggml.TYPES[name]
    blk = rng.integers(0, 256, (400, bt.type_size), dtype=np.uint8)
    d = rng.choice([1.0, -1.0], 400) * 2.0 ** rng.uniform(-24, 15.99, 400)   # fp16 subnormals to near max
    blk[:, -2:] = np.frombuffer(d.astype("<f2").tobytes(), np.uint8).reshape(400, 2)
    if name == "q3_k":
        sc = qx.unpack_q3_scales(blk[:, 96:108]) - 32
        q = qx.q3k_codes(blk[:, 0:32], blk[:, 32:96])
    else:
        sc = blk[:, 192:208].view(np.int8)
        q = qx.q6k_codes(blk[:, 0:128], blk[:, 128:192])
    d64 = blk[:, -2:].copy().view("<f2").astype(np.float64)
    exact = (d64 * sc.astype(np.float64))[:, :, None] * q.astype(np.float64).reshape(400, 16, 16)
    np.testing.assert_array_equal(_bits(ggml.dequantize(name, blk)), _bits(exact.reshape(400, 256).astype(F32)))


# ------------------------------------------------------------------------------------------ machinery


def test_make_qx_quants_one_weight_example():
    """KQ-6.6: for `x = [1, 0, ..., 0]`, `iscale = -32`, `sumlx = -32`, `suml2 = 1024`, `scale = -1/32`;
    every trial gives `sumlx'^2 / suml2' = 1`, never `> best`, so the codes stay `[0, 32, ..., 32]`."""
    x = np.zeros((16, 1), F32)
    x[0] = 1
    scale, L = make_qx_quants(x, 32)
    assert scale[0] == F32(-1 / 32) and L[:, 0].tolist() == [0] + [32] * 15


def test_make_q3_quants_one_weight_example():
    """KQ-3.6: for `x = [1, 0, ..., 0]` no descent step has `slx > 0`, so the scale is `-4/16 = -0.25`
    and the codes `[0, 4, ..., 4]`."""
    x = np.zeros((16, 1), F32)
    x[0] = 1
    scale, L = make_q3_quants(x, 4)
    assert scale[0] == F32(-0.25) and L[:, 0].tolist() == [0] + [4] * 15


def test_all_zero_groups_return_zero_codes():
    """KQ-1.1 / KQ-1.2: "if amax < 1e-15: return (0, L = all 0)" — codes 0, not nmax; NaN never wins
    the maximum, so a group of NaN and zeros is all-zero too."""
    x = np.zeros((16, 4), F32)
    x[3, 1] = -1e-16
    x[5, 2] = np.nan
    x[7, 3] = 1e-15                                         # not below GROUP_MAX_EPS
    for search, nmax in ((make_qx_quants, 32), (make_qx_quants, 4), (make_q3_quants, 4)):
        scale, L = search(x, nmax)
        assert _bits(scale[:3]).tolist() == [0, 0, 0] and not L[:, :3].any()
        assert scale[3] != 0


def test_scale_sign_is_opposite_to_the_largest_weight():
    """KQ-1.1: "the returned scale has the opposite sign to `max`"; the first weight of largest
    magnitude decides (`x = [2, -2, ...]` has `max = 2`)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 2000)).astype(F32)
    x[:, 0] = 0
    x[0, 0], x[1, 0] = 2, -2
    big = x[np.argmax(np.abs(x), axis=0), np.arange(x.shape[1])]
    searches = (lambda v: make_qx_quants(v, 32), lambda v: make_qx_quants(v, 4, v * v + 1), lambda v: make_q3_quants(v, 4))
    for search in searches:
        scale, L = search(x)
        assert (np.sign(scale) == -np.sign(big)).all()
        assert scale[0] < 0
        assert L.min() >= 0 and L.max() <= 63


# ------------------------------------------------------------------------------------------ encoders


@pytest.mark.parametrize(("name", "hexbytes"), [
    ("q3_k", "00" + "01" * 15 + "00" * 16 + "00" * 64 + "00" * 8 + "a8aaaaaa" + "0020"),
    ("q6_k", "00" * 128 + "00" + "02" * 15 + "00" * 48 + "80" + "00" * 15 + "000c"),
])
def test_one_weight_row_worked_example(name, hexbytes):
    """KQ-3.6 / KQ-6.6 "One weight": the bytes of `x = [1, 0, ..., 0]`; they decode to `1.0` at weight 0
    and `−0.0` everywhere else."""
    blocks = ggml.quantize(name, _one_weight_row())
    assert blocks[0].tobytes().hex() == hexbytes
    y = ggml.dequantize(name, blocks)[0]
    assert y[0] == 1.0 and _bits(y[1:]).tolist() == [0x80000000] * 255


@pytest.mark.parametrize(("name", "zero_bits"), [("q3_k", 0), ("q6_k", 0x80000000)])
def test_all_zero_row_worked_example(name, zero_bits):
    """KQ-3.6: an all-zero row is 110 zero bytes, which decode to `+0.0`; KQ-6.6: 210 zero bytes,
    which decode to `−0.0`. Both paths, and -0.0 input too."""
    x = np.zeros((2, 512), F32)
    x[1] = -0.0
    for w in (None, np.ones(512, F32)):
        blocks = ggml.quantize(name, x, importance=w)
        assert not blocks.any()
        assert (_bits(ggml.dequantize(name, blocks)) == zero_bits).all()


def test_q6k_importance_of_squares_is_the_reference_path():
    """KQ-6.5: the importance path is KQ-6.4 with `qw` in place of `x[i]*x[i]`, no sigma2 factor: for
    one row, the importance vector `x*x` gives the reference bytes."""
    rng = np.random.default_rng(8)
    for _ in range(5):
        x = (rng.standard_normal((1, 1024)) * 10.0 ** rng.uniform(-3, 3)).astype(F32)
        np.testing.assert_array_equal(ggml.quantize("q6_k", x, importance=x[0] * x[0]), ggml.quantize("q6_k", x))


@pytest.mark.parametrize("name", ["q3_k", "q6_k"])
def test_codes_are_the_nearest_under_the_stored_scales(name):
    """KQ-3.4 step 4 / KQ-6.4 step 5: where `dj != 0`, `L = clamp(nearest_int(x / dj)) + nmax`, so a
    weight inside the code range is within `|dj| / 2` of its decoded value; both paths."""
    rng = np.random.default_rng(9)
    nmax = 4 if name == "q3_k" else 32
    x = (rng.standard_t(4, (16, 1024)) * 10.0 ** rng.uniform(-4, 4, (16, 1))).astype(F32)
    for w in (None, rng.gamma(2.0, 1.0, 1024).astype(F32)):
        blocks = ggml.quantize(name, x, importance=w).reshape(-1, ggml.TYPES[name].type_size)
        if name == "q3_k":
            sc = qx.unpack_q3_scales(blocks[:, 96:108]) - 32
        else:
            sc = blocks[:, 192:208].view(np.int8)
        d = blocks[:, -2:].copy().view("<f2").astype(np.float64)
        dj = np.repeat(d * sc, 16, axis=1).reshape(-1)                  # per weight
        xs = x.reshape(-1).astype(np.float64)
        err = np.abs(ggml.dequantize(name, blocks.reshape(16, -1)).reshape(-1) - xs)
        inside = (dj != 0) & (xs / dj >= -nmax) & (xs / dj <= nmax - 1)
        assert inside.mean() > 0.9
        assert (err[inside] <= np.abs(dj[inside]) * (0.5 + 1e-6)).all()


@pytest.mark.parametrize(("name", "bound"), [("q3_k", 0.2), ("q6_k", 0.025)])
def test_gaussian_reconstruction_error(name, bound):
    """KQ-3 / KQ-6: q3_K (3.4 bits per weight) and q6_K (6.6) reconstruct gaussian weights with a
    relative RMS error of about 0.15 and 0.018 on both paths (a sanity bound, informative)."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((8, 2048)).astype(F32)
    for w in (None, rng.gamma(2.0, 1.0, 2048).astype(F32)):
        y = ggml.dequantize(name, ggml.quantize(name, x, importance=w))
        assert np.sqrt(np.mean((y - x) ** 2) / np.mean(x * x)) < bound


def test_importance_vector_is_checked():
    """GGML-4.2 through the q3_K / q6_K encoders: a wrong-shaped importance vector is `ggml.importance.shape`."""
    x = np.zeros((2, 512), F32)
    for name in ("q3_k", "q6_k"):
        with pytest.raises(QFormatsError) as err:
            ggml.quantize(name, x, importance=np.ones(256, F32))
        assert err.value.code == "ggml.importance.shape"
