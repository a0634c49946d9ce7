"""q1_0, q2_0 (spec/ggml_legacy.md LEG-9, LEG-10) and nvfp4 (spec/ggml_ternary_fp4.md MX-2).

The chapters' worked examples are executed here with the bytes and values they quote; the rest are properties
of the layouts, the UE4M3 conversions and the encoders, the error branches, and a GGUF file holding all three
types. These run without any ggml build. Comparisons with ggml: nvfp4 and q1_0 against the pinned oracle in
test_oracle.py (and the one sum-order test below), all three against ggml 0.25.3 in
tests/llama_cpp/test_new_types.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml.checks import scale_findings
from qformats.formats.ggml.nvfp4 import UE4M3_HALF, fp32_to_ue4m3, ue4m3

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "containers"))
import gguf_builder as gb  # noqa: E402

F32 = np.float32
LIB = os.environ.get("QFORMATS_GGML_LIB")
needs_oracle = pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to run")


def block(hexbytes: str) -> np.ndarray:
    """One row of one block from spaced hex (``|`` separates fields)."""
    return np.frombuffer(bytes.fromhex(hexbytes.replace("|", " ")), np.uint8)[None, :].copy()


def row(values: dict[int, float], n: int) -> np.ndarray:
    x = np.zeros((1, n), F32)
    for i, v in values.items():
        x[0, i] = v
    return x


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def same_bits(got: np.ndarray, want) -> bool:
    return np.array_equal(bits(got), bits(np.asarray(want, F32)))


# ------------------------------------------------------------------------------------------------ geometry


@pytest.mark.parametrize(("name", "type_id", "block_size", "type_size"),
                         [("nvfp4", 40, 64, 36), ("q1_0", 41, 128, 18), ("q2_0", 42, 64, 18)])
def test_geometry_is_the_struct_arithmetic(name, type_id, block_size, type_size):
    """LEG-9.1, LEG-10.1, MX-2.1: ids and sizes as ggml-common.h's static_asserts state them."""
    bt = ggml.TYPES[name]
    assert (bt.ggml.type_id, bt.block_size, bt.type_size) == (type_id, block_size, type_size)


def test_only_q2_0_is_newer_than_the_pinned_oracle():
    """spec/ggml.md type table: ggml 0.10.1 has nvfp4 and q1_0; q2_0 is judged against ggml 0.25.3."""
    assert {n: ggml.TYPES[n].since for n in ("nvfp4", "q1_0", "q2_0")} == {"nvfp4": None, "q1_0": None, "q2_0": "0.25.3"}


# ------------------------------------------------------------------------------------------------ q1_0

Q1_0_ENCODED = "80 28 | fd" + " ff" * 15


def test_q1_0_worked_example_decodes_to_the_spec_values():
    """LEG-9.6: "bytes 00 38 | A5 FF … FF: weights 0..7 are +0.5, −0.5, +0.5, −0.5, −0.5, +0.5, −0.5, +0.5;
    weights 8..127 are +0.5"."""
    y = ggml.dequantize("q1_0", block("00 38 | a5" + " ff" * 15))[0]
    assert same_bits(y, [0.5, -0.5, 0.5, -0.5, -0.5, 0.5, -0.5, 0.5] + [0.5] * 120)


def test_q1_0_worked_example_encodes_to_the_spec_bytes():
    """LEG-9.6: "x[0..3] = 3.0, −1.0, −0.0, 0.5 ... Bytes 80 28 | FD FF … FF"."""
    assert ggml.quantize("q1_0", row({0: 3.0, 1: -1.0, 2: -0.0, 3: 0.5}, 128)).tobytes() == bytes.fromhex(
        Q1_0_ENCODED.replace("|", " "))


def test_q1_0_worked_example_round_trip():
    """LEG-9.6: "decoded: d, −d, d, d, … with d = 0.03515625" (9 * 2^-8)."""
    y = ggml.dequantize("q1_0", block(Q1_0_ENCODED))[0]
    d = 9 * 2.0 ** -8
    assert same_bits(y, [d, -d] + [d] * 126)


def test_q1_0_bits_are_least_significant_first():
    """LEG-9.1: weight e is bit e % 8 of qs[e / 8], for every single set bit."""
    blk = np.zeros((128, 18), np.uint8)
    blk[:, :2] = [0x00, 0x3C]                                 # d = 1
    e = np.arange(128)
    blk[e, 2 + e // 8] = 1 << (e % 8)
    y = ggml.dequantize("q1_0", blk.reshape(1, -1)).reshape(128, 128)
    assert np.array_equal(y, np.where(np.eye(128, dtype=bool), F32(1), F32(-1)))


def test_q1_0_decodes_sign_times_mean_magnitude():
    """LEG-9.4 property: decode(encode(x)) = (x >= 0 ? d : -d), d = fp16(in-order sum |x| / 128)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((16, 512)) * 10.0 ** rng.uniform(-3, 3, (16, 1))).astype(F32)
    y = ggml.dequantize("q1_0", ggml.quantize("q1_0", x)).reshape(-1, 128)
    xb = x.reshape(-1, 128)
    d = (np.add.accumulate(np.abs(xb), axis=1, dtype=F32)[:, -1] / F32(128)).astype(np.float16).astype(F32)
    assert np.array_equal(y, np.where(xb >= 0, d[:, None], -d[:, None]))


def test_q1_0_nan_input_makes_d_nan_and_its_bit_clear():
    """LEG-9.4: "A NaN anywhere makes d NaN (0x7e00, an invalid block)"; NaN >= 0 is false: bit 0."""
    out = ggml.quantize("q1_0", row({5: np.nan, 6: 1.0}, 128))[0]
    assert out[:2].tobytes() == bytes([0x00, 0x7E]) and out[2] == 0xDF


# ------------------------------------------------------------------------------------------------ q2_0

Q2_0_ENCODED = "00 44 | 24 56" + " 55" * 14


def test_q2_0_worked_example_decodes_to_the_spec_values():
    """LEG-10.6: "bytes 00 3C | E4 55 … 55: weights 0..3 codes 0, 1, 2, 3, so y = −1, 0, 1, 2"; the rest 0."""
    y = ggml.dequantize("q2_0", block("00 3c | e4" + " 55" * 15))[0]
    assert same_bits(y, [-1, 0, 1, 2] + [0] * 60)


def test_q2_0_worked_example_encodes_to_the_spec_bytes():
    """LEG-10.6: "x[0..4] = −4.0, 1.9, 2.0, −2.0, 3.0 ... Bytes 00 44 | 24 56 55 … 55"."""
    x = row({0: -4.0, 1: 1.9, 2: 2.0, 3: -2.0, 4: 3.0}, 64)
    assert ggml.quantize("q2_0", x).tobytes() == bytes.fromhex(Q2_0_ENCODED.replace("|", " "))


def test_q2_0_worked_example_round_trip():
    """LEG-10.6: "decoded: −4, 0, 4, −4, 4, 0, …"."""
    assert same_bits(ggml.dequantize("q2_0", block(Q2_0_ENCODED))[0], [-4, 0, 4, -4, 4] + [0] * 59)


def test_q2_0_tiny_block_writes_code_0_everywhere():
    """LEG-10.6: "x[0] = 1e-40 ... every code is 0; fp16(1e-40) = 0. Bytes 00 00 | 00 … 00, decoding to −0.0"."""
    out = ggml.quantize("q2_0", row({0: 1e-40}, 64))
    assert out.tobytes() == bytes(18)
    assert same_bits(ggml.dequantize("q2_0", out)[0], [-0.0] * 64)


def test_q2_0_codes_are_consecutive_crumbs():
    """LEG-10.1: weight e is bits 2(e % 4) + 1 .. 2(e % 4) of qs[e / 4], for code 3 at every position."""
    blk = np.zeros((64, 18), np.uint8)
    blk[:, :2] = [0x00, 0x3C]
    blk[:, 2:] = 0x55                                         # code 1 (0.0) everywhere ...
    e = np.arange(64)
    blk[e, 2 + e // 4] = 0x55 | (3 << (2 * (e % 4)))          # ... but code 3 (+2) at weight e
    y = ggml.dequantize("q2_0", blk.reshape(1, -1)).reshape(64, 64)
    assert np.array_equal(y, np.where(np.eye(64, dtype=bool), F32(2), F32(0)))


def test_q2_0_reference_encoder_never_writes_code_3_and_errs_at_most_half_a_step():
    """LEG-10.4 property: codes 0..2 only; |x - y| <= amax / 2 plus the float16 rounding of d."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((32, 512)) * 10.0 ** rng.uniform(-3, 3, (32, 1))).astype(F32)
    blocks = ggml.quantize("q2_0", x)
    qs = blocks.reshape(-1, 18)[:, 2:]
    assert not any(((qs >> s) & 3 == 3).any() for s in (0, 2, 4, 6))
    y = ggml.dequantize("q2_0", blocks).astype(np.float64).reshape(-1, 64)
    amax = np.abs(x.astype(np.float64)).reshape(-1, 64).max(axis=1, keepdims=True)
    assert np.all(np.abs(y - x.reshape(-1, 64)) <= amax * (0.5 + 2.0 ** -11) * 1.000001)


def test_q2_0_decode_is_a_multiply():
    """LEG-10.2: code 1 of a negative d is −0.0; of an infinite d, NaN (0·inf); code 3 of 65504 is 131008."""
    y = ggml.dequantize("q2_0", np.concatenate([block("00 bc" + " 55" * 16), block("00 7c" + " 55" * 16),
                                                block("ff 7b" + " ff" * 16)], axis=1))[0]
    assert same_bits(y[:64], [-0.0] * 64) and np.isnan(y[64:128]).all() and (y[128:] == 131008).all()


# ------------------------------------------------------------------------------------------------ UE4M3


def test_ue4m3_reading_of_the_special_bytes():
    """MX-2.2: D(u) is half the UE4M3 value; 0x00 and 0x7F read 0, bit 7 is ignored, 0xFF reads 240,
    0x7E is the largest written (UE4M3 448), 0x01 the smallest subnormal (2^-9 / 2)."""
    got = {u: float(UE4M3_HALF[u]) for u in (0x00, 0x7F, 0x80, 0xFF, 0x7E, 0xFE, 0x01, 0x07, 0x08, 0x38)}
    assert got == {0x00: 0.0, 0x7F: 0.0, 0x80: 0.0, 0xFF: 240.0, 0x7E: 224.0, 0xFE: 224.0, 0x01: 2.0 ** -10,
                   0x07: 7 * 2.0 ** -10, 0x08: 2.0 ** -7, 0x38: 0.5}


def test_ue4m3_bit_7_is_ignored_except_for_0x7f():
    """MX-2.2: u | 0x80 reads as u for every u but 0x7F (0x7F: 0; 0xFF: 240)."""
    low = np.arange(0x80)
    differ = np.flatnonzero(UE4M3_HALF[low] != UE4M3_HALF[low | 0x80])
    assert differ.tolist() == [0x7F]


def test_ue4m3_values_are_the_e4m3_grid():
    """MX-2.2: bytes 0x01..0x7E are 0 < v <= 448 in increasing order; exponent field e >= 1: (1 + m/8) 2^(e-7)."""
    v = ue4m3(np.arange(1, 0x7F))
    assert np.all(np.diff(v) > 0) and v[-1] == 448 and v[0] == 2.0 ** -9
    assert ue4m3(np.array([0x3F]))[0] == 1.875 and ue4m3(np.array([0x40]))[0] == 2.0


def test_fp32_to_ue4m3_round_trips_every_written_byte():
    """MX-2.5 step 2: every byte 0x01..0x77 and 0x7E is what the encoder writes for its own value."""
    written = np.concatenate([np.arange(1, 0x78), [0x7E]])
    assert np.array_equal(fp32_to_ue4m3(ue4m3(written)), written)


def test_fp32_to_ue4m3_never_writes_the_rest_of_exponent_15():
    """MX-2.5 step 2: "t >= 248 ... gives 0x7E": the values of 0x78..0x7D (256..416) all become 0x7E, and 240
    (0x77) is the largest value below it that is kept."""
    assert fp32_to_ue4m3(ue4m3(np.arange(0x78, 0x7E))).tolist() == [0x7E] * 6
    assert fp32_to_ue4m3(np.array([240.0, 247.99998, 248.0, 1e30, np.inf], F32)).tolist() == [0x77, 0x77, 0x7E, 0x7E, 0x7E]


@pytest.mark.parametrize(("t", "u"), [
    (np.nan, 0), (-1.0, 0), (0.0, 0), (-0.0, 0),
    (2.0 ** -6, 0x08),                       # the smallest normal
    (15 * 2.0 ** -10, 7),                    # subnormal path: (int)(7.5 + 0.5) = 8, capped at 7
    (np.nextafter(F32(2.0 ** -6), F32(0)), 7),
    (13 * 2.0 ** -10, 7),                    # 6.5 + 0.5: the subnormal tie goes up
    (np.nextafter(F32(13 * 2.0 ** -10), F32(0)), 6),
    (2.0 ** -10, 1), (2.0 ** -11, 0),       # half the smallest subnormal rounds up; a quarter of it is 0
    (np.nextafter(F32(2.0 ** -10), F32(0)), 1),   # 0.49999997 + 0.5f rounds to 1.0f before the (int)
    (1.0625, 0x39), (np.nextafter(F32(1.0625), F32(0)), 0x38),      # normal tie (1 + 1/16): away from zero
    (1.9375, 0x40),                          # 1 + 15/16: the mantissa carries into the exponent
])
def test_fp32_to_ue4m3_edges(t, u):
    """MX-2.5 step 2: NaN and non-positive give 0; the subnormal cap at 7; ties away from zero; the carry."""
    assert int(fp32_to_ue4m3(np.array([t], F32))[0]) == u


# ------------------------------------------------------------------------------------------------ nvfp4

NVFP4_ENCODED = "3b 00 04 7e | a6 70 04 02" + " 00" * 12 + " 07" + " 00" * 15


def test_nvfp4_worked_example_decodes_to_the_spec_values():
    """MX-2.6: "D = 0.5, 0, 0, 240. Element 0 ... −1.0; element 8 ... 6.0; elements 16, 24, 32 and 40 ... −0.0;
    element 48 (code 1) = 240; every other element +0.0"."""
    blk = np.zeros((1, 36), np.uint8)
    blk[0, :4] = [0x38, 0x00, 0x7F, 0xFF]
    blk[0, [4, 12, 20, 28]] = [0x7A, 0x99, 0x99, 0x01]
    want = np.zeros(64, F32)
    want[[0, 8, 48]] = [-1.0, 6.0, 240.0]
    want[[16, 24, 32, 40]] = -0.0
    assert same_bits(ggml.dequantize("nvfp4", blk)[0], want)


def test_nvfp4_worked_example_encodes_to_the_spec_bytes():
    """MX-2.6: "Bytes: 3B 00 04 7E | A6 70 04 02 00 00 00 00 | 00 ×8 | 07 00 00 00 00 00 00 00 | 00 ×8"."""
    x = row({0: 5.0, 1: -0.25, 2: 2.5, 3: 1.71875, 8: -1.3, 9: 7.9, 32: 0.05, 48: np.inf, 49: 1.0, 50: np.nan}, 64)
    assert ggml.quantize("nvfp4", x).tobytes() == bytes.fromhex(NVFP4_ENCODED.replace("|", " "))


def test_nvfp4_worked_example_round_trip():
    """MX-2.6: codes 6, 0, 4, 2 | 10, 7 at D = 0.6875 are 5.5, 0, 2.75, 1.375 | −1.375, 8.25; code 7 at 2^-8."""
    y = ggml.dequantize("nvfp4", block(NVFP4_ENCODED))[0]
    want = np.zeros(64, F32)
    want[[0, 1, 2, 3, 8, 9, 32]] = [5.5, 0.0, 2.75, 1.375, -1.375, 8.25, 0.046875]
    assert same_bits(y, want)


def test_nvfp4_sub_block_nibble_order():
    """MX-2.1: qs[8s + j] holds elements 16s + j (low nibble) and 16s + 8 + j (high nibble)."""
    blk = np.zeros((1, 36), np.uint8)
    blk[0, :4] = 0x38                                         # D = 0.5 in every sub-block
    blk[0, 4:] = np.arange(32, dtype=np.uint8) % 8 | ((np.arange(32, dtype=np.uint8) % 8 + 8) << 4)
    y = ggml.dequantize("nvfp4", blk)[0].reshape(4, 2, 8)
    assert np.array_equal(y[:, 0], np.tile([0, 0.5, 1, 1.5, 2, 3, 4, 6], (4, 1)))
    assert np.array_equal(y[:, 1], -y[:, 0]) and same_bits(y[:, 1, 0], [0.0] * 4)   # code 8: +0.0


def test_nvfp4_encoder_picks_the_nearest_grid_point():
    """MX-2.5 property: each decoded weight is a nearest point of its sub-block's grid k * D (clipped at 12 D)."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((16, 512)) * 10.0 ** rng.uniform(-2, 2, (16, 1))).astype(F32)
    blocks = ggml.quantize("nvfp4", x).reshape(-1, 36)
    y = ggml.dequantize("nvfp4", blocks.reshape(1, -1)).reshape(-1, 4, 16).astype(np.float64)
    d = UE4M3_HALF[blocks[:, :4]].astype(np.float64)[:, :, None, None]
    grid = np.array([0, 1, 2, 3, 4, 6, 8, 12, -1, -2, -3, -4, -6, -8, -12], np.float64) * d    # (nb, 4, 1, 15)
    xs = x.reshape(-1, 4, 16).astype(np.float64)
    best = np.abs(grid - xs[..., None]).min(axis=-1)
    assert np.allclose(np.abs(y - xs), best, rtol=1e-6, atol=0)


def every_nvfp4_scale_and_qs_byte() -> np.ndarray:
    """2048 nvfp4 blocks in which every (scale byte, qs byte) pair of a sub-block occurs once: block b has scale
    byte b // 8 in its four sub-blocks and qs bytes 32 (b % 8) .. 32 (b % 8) + 31."""
    b = np.arange(2048)
    blocks = np.empty((2048, 36), np.uint8)
    blocks[:, :4] = (b // 8)[:, None]
    blocks[:, 4:] = (32 * (b % 8))[:, None] + np.arange(32)
    return blocks.reshape(1, -1)


def test_nvfp4_every_scale_and_qs_byte_decodes_to_the_product():
    """MX-2.3: "y[i] = (float)kvalues_fp4[c(i)] * D   one float32 op", exactly, for every scale byte and every qs
    byte (both nibbles), in MX-2.1's order; kvalues from the chapter's list, D = ue4m3 / 2 (MX-2.2)."""
    kvalues = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], F32)
    blocks = every_nvfp4_scale_and_qs_byte()
    y = ggml.dequantize("nvfp4", blocks).reshape(2048, 4, 2, 8)
    blk = blocks.reshape(2048, 36)
    half = (ue4m3(blk[:, :4]) * F32(0.5))[:, :, None]
    qs = blk[:, 4:].reshape(2048, 4, 8)
    assert same_bits(y[:, :, 0], kvalues[qs & 15] * half) and same_bits(y[:, :, 1], kvalues[qs >> 4] * half)


@needs_oracle
def test_nvfp4_every_scale_and_qs_byte_decodes_as_ggml():
    """GGML-2.2 for nvfp4: bit-identical to ggml 0.10.1's dequantize_row_nvfp4 on every (scale byte, qs byte)."""
    from conformance.adapters import ggml as oracle

    blocks = every_nvfp4_scale_and_qs_byte()
    assert same_bits(ggml.dequantize("nvfp4", blocks), oracle.dequantize("nvfp4", blocks))


def test_nvfp4_every_block_is_valid_and_finite():
    """MX-2.4: every byte pattern is valid (nothing for GGML-3.1 / GGML-3.2) and decodes finite."""
    rng = np.random.default_rng(2)
    blocks = rng.integers(0, 256, (8, 36 * 64), dtype=np.uint8)
    blocks[0, :4] = [0x7F, 0xFF, 0x80, 0xFE]
    assert ggml.check_blocks("nvfp4", blocks) is not None
    assert scale_findings(ggml.TYPES["nvfp4"], blocks, "t") == []
    assert np.isfinite(ggml.dequantize("nvfp4", blocks)).all()


# ------------------------------------------------------------------------------------------------ validity


@pytest.mark.parametrize("name", ["q1_0", "q2_0"])
def test_non_finite_d_is_refused_naming_block_and_row(name):
    """LEG-9.3, LEG-10.3 (GGML-3.1): a NaN d is ggml.scale.nonfinite with the field, value, block and row."""
    bt = ggml.TYPES[name]
    blocks = np.zeros((3, 2 * bt.type_size), np.uint8)
    blocks[2, bt.type_size:bt.type_size + 2] = [0x00, 0x7E]          # row 2, block 1: d = NaN
    with pytest.raises(QFormatsError) as exc:
        ggml.check_blocks(name, blocks, tensor="blk.0.ffn_up.weight")
    err = exc.value
    assert (err.code, err.tensor) == ("ggml.scale.nonfinite", "blk.0.ffn_up.weight")
    assert "d = NaN in block 1 of row 2" in str(err)


@pytest.mark.parametrize("name", ["q1_0", "q2_0"])
def test_negative_d_is_a_warning(name):
    """LEG-9.3, LEG-10.3 (GGML-3.2): no encoder writes d < 0, so a negative d is ggml.scale.negative."""
    bt = ggml.TYPES[name]
    blocks = np.zeros((1, 2 * bt.type_size), np.uint8)
    blocks[0, :2] = [0x00, 0xBC]                                      # d = -1.0
    found = scale_findings(bt, blocks, "t")
    assert [(f.code, f.severity, f.count) for f in found] == [("ggml.scale.negative", "warning", 1)]


# ------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(("name", "n"), [("q1_0", 128), ("q2_0", 64), ("nvfp4", 64)])
def test_row_length_at_the_block_and_one_past(name, n):
    """GGML-1.2: n = block_size encodes; n + 1 and n - 1 are ggml.n.not_multiple naming the length."""
    assert ggml.quantize(name, np.zeros((1, n), F32)).shape == (1, ggml.TYPES[name].type_size)
    for bad in (n - 1, n + 1):
        with pytest.raises(QFormatsError) as exc:
            ggml.quantize(name, np.zeros((1, bad), F32))
        assert (exc.value.code, exc.value.actual) == ("ggml.n.not_multiple", bad)


@pytest.mark.parametrize("name", ["q1_0", "q2_0", "nvfp4"])
def test_an_importance_vector_is_refused(name):
    """LEG-9.5, LEG-10.5, MX-2.5 (GGML-4.2): ggml ignores quant_weights for these types; qformats refuses them."""
    n = ggml.TYPES[name].block_size
    with pytest.raises(QFormatsError) as exc:
        ggml.quantize(name, np.zeros((1, n), F32), importance=np.ones(n, F32))
    assert (exc.value.code, exc.value.tensor) == ("ggml.importance.unsupported", "importance")


@pytest.mark.parametrize("name", ["q1_0", "q2_0", "nvfp4"])
def test_blocks_of_a_wrong_size_are_refused(name):
    """GGML-1.1: rows that are not whole blocks are ggml.blocks.shape."""
    size = ggml.TYPES[name].type_size
    with pytest.raises(QFormatsError) as exc:
        ggml.dequantize(name, np.zeros((2, size + 1), np.uint8))
    assert (exc.value.code, exc.value.actual) == ("ggml.blocks.shape", (2, size + 1))


# ------------------------------------------------------------------------------------------------ GGUF


def _gguf_with_new_types(path: Path, q2_0_d: bytes | None = None) -> None:
    """A hand-built GGUF (gguf-py 0.19.0 cannot name q2_0) with one tensor of each type, 2 rows of 128."""
    tensors = {"blk.0.ffn_up.weight": ("nvfp4", 40), "blk.0.ffn_gate.weight": ("q1_0", 41),
               "blk.0.ffn_down.weight": ("q2_0", 42)}
    rng = np.random.default_rng(0)
    infos, data = [], b""
    for name, (type_name, type_id) in tensors.items():
        blob = bytearray(ggml.quantize(type_name, rng.standard_normal((2, 128)).astype(F32)).tobytes())
        if type_name == "q2_0" and q2_0_d is not None:
            blob[18 * 3:18 * 3 + 2] = q2_0_d                            # row 1, block 1
        infos.append(gb.tinfo(name, [128, 2], type_id, len(data)))
        data += bytes(blob) + bytes(gb.pad(len(blob), 32) - len(blob))
    path.write_bytes(gb.gguf(gb.base_kvs(), infos, data))


def test_gguf_tensors_of_the_new_types_are_checked(tmp_path):
    """GGML-3.5: nvfp4, q1_0 and q2_0 tensors are checked (no ggml.type.unchecked) and decoded by --deep."""
    from qformats.validate import validate

    path = tmp_path / "new.gguf"
    _gguf_with_new_types(path)
    report = validate(str(path), deep=True)
    assert (report.verdict, report.findings) == ("valid", [])
    assert report.summary["tensors_checked"] == report.summary["tensors"] == 3
    assert {r["layer"]: (r["format"], r["bits"], r["group_size"]) for r in report.layers} == {
        "blk.0.ffn_up.weight": ("nvfp4", 4, 16), "blk.0.ffn_gate.weight": ("q1_0", 1, 128),
        "blk.0.ffn_down.weight": ("q2_0", 2, 64)}


def test_gguf_q2_0_tensor_with_an_infinite_d_is_invalid(tmp_path):
    """LEG-10.3 (GGML-3.1) in a file: the finding names the tensor, the block and the row."""
    from qformats.validate import validate

    path = tmp_path / "bad.gguf"
    _gguf_with_new_types(path, q2_0_d=bytes([0x00, 0xFC]))             # d = -inf
    report = validate(str(path))
    assert report.verdict == "invalid"
    assert [(f.code, f.severity, f.tensor) for f in report.findings] == [
        ("ggml.scale.nonfinite", "error", "blk.0.ffn_down.weight")]
    assert "first d = -inf in block 1 of row 1" in report.findings[0].message


# ------------------------------------------------------------------------------------------------ oracle


@needs_oracle
def test_q1_0_sum_is_in_order_where_the_order_shows():
    """LEG-9.4 [run]: on the blocks where a pairwise or float64 sum would store another float16 d, ggml 0.10.1
    (the pinned oracle) stores the in-order float32 sum's, and so does qformats."""
    from conformance.adapters import ggml as oracle

    rng = np.random.default_rng(1)
    x = rng.standard_normal((40000, 128)).astype(F32)
    a = np.abs(x)

    def fp16(total):
        return (total.astype(F32) / F32(128)).astype(np.float16).view(np.uint16)

    seq = fp16(np.add.accumulate(a, axis=1, dtype=F32)[:, -1])
    shows = (seq != fp16(a.sum(axis=1, dtype=F32))) | (seq != fp16(a.astype(np.float64).sum(axis=1)))
    assert shows.sum() >= 4
    rows = x[shows].reshape(1, -1)
    ours = ggml.quantize("q1_0", rows)
    assert np.array_equal(ours, oracle.quantize("q1_0", rows))
    assert np.array_equal(ours.reshape(-1, 18)[:, :2].copy().view("<u2")[:, 0], seq[shows])
