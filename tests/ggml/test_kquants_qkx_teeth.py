"""Tests with teeth for q2_K, q5_K and q8_K (spec/ggml_kquants.md KQ-2, KQ-5, KQ-7; issue 33 item 3).

The expected bytes and values are ggml 0.10.1's own, recorded by ``record_kquants_qkx_teeth.py`` into
``kquants_qkx_teeth_ggml.npz`` (inputs from a fixed seed, outputs only from ggml's C code), so these run without
the library; with QFORMATS_GGML_LIB set the recording itself is checked against the live library. The rest
are spec facts written out here: the field offsets, the ``scales`` readers, the per-type metadata.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import kquants_qkx as kq

F32 = np.float32
DATA = np.load(Path(__file__).with_name("kquants_qkx_teeth_ggml.npz"))
LIB = os.environ.get("QFORMATS_GGML_LIB")


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def pass_rows() -> np.ndarray:
    """As record_kquants_qkx_teeth.pass_rows: 171 rows of 768 (513 super-blocks), seed 33."""
    rng = np.random.default_rng(33)
    return (rng.standard_normal((171, 768)) * 10.0 ** rng.uniform(-2, 2, (171, 1))).astype(F32)


def pass_w() -> np.ndarray:
    """As record_kquants_qkx_teeth.pass_w: three super-blocks of importance 1, 100 and 0.01 times gamma(2)."""
    rng = np.random.default_rng(34)
    return (rng.gamma(2.0, 1.0, 768) * np.repeat([1.0, 100.0, 0.01], 256)).astype(F32)


def digest(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(np.ascontiguousarray(a, np.uint8).tobytes()).digest(), np.uint8)


# ---------------------------------------------------------------------------------------------
# encoders against ggml's recorded bytes (KQ-2.4, KQ-2.5, KQ-5.4, KQ-5.5, KQ-7.3)
# ---------------------------------------------------------------------------------------------


def test_q2k_reference_encoder_is_ggmls_bytes():
    """KQ-2.4: "quantize_q2_K(src, dst, rows, n, NULL) runs quantize_row_q2_K_ref": ggml's bytes on 36 rows of
    every kind (ties, zero and one-weight rows, all-zero sub-blocks, tiny, huge, NaN and inf)."""
    np.testing.assert_array_equal(ggml.quantize("q2_k", DATA["q2_k.ref.x"]), DATA["q2_k.ref.expected"])


def test_q2k_importance_encoder_is_ggmls_bytes():
    """KQ-2.5: "quantize(x, importance=w) is ggml quantize_q2_K(src, dst, rows, n, w)": block b of a row takes
    w[256b .. 256b+255], zero weights included."""
    x, w = DATA["q2_k.imp.x"], DATA["q2_k.imp.w"]
    np.testing.assert_array_equal(ggml.quantize("q2_k", x, importance=w), DATA["q2_k.imp.expected"])


def test_q5k_reference_encoder_is_ggmls_bytes():
    """KQ-5.4: q5_K's reference path (make_qkx2_quants(32, 31, ..., -0.5, 0.1, 15), codes clamped to 0..31) is
    ggml's quantize_q5_K with a NULL importance, byte for byte."""
    np.testing.assert_array_equal(ggml.quantize("q5_k", DATA["q5_k.ref.x"]), DATA["q5_k.ref.expected"])


def test_q5k_importance_encoder_is_ggmls_bytes():
    """KQ-5.5: "ls = MIN(63, Ls[j]), lm = MIN(63, Lm[j]) before packing", sigma2 = (2 * s2) / 256: ggml's
    quantize_q5_K with an importance vector, byte for byte."""
    x, w = DATA["q5_k.imp.x"], DATA["q5_k.imp.w"]
    np.testing.assert_array_equal(ggml.quantize("q5_k", x, importance=w), DATA["q5_k.imp.expected"])


@pytest.mark.parametrize("name", ["q2_k", "q5_k"])
def test_importance_encoder_with_signed_importance_is_ggmls_bytes(name):
    """KQ-2.5: "no clamp: an Ls above 15 spills into the min nibble"; KQ-5.5: "ls = MIN(63, Ls[j])": a signed
    importance vector makes some sub-block scales negative, whose make_qp_quants codes are stored mod 256."""
    x, w = DATA[f"{name}.signed.x"], DATA[f"{name}.signed.w"]
    np.testing.assert_array_equal(ggml.quantize(name, x, importance=w), DATA[f"{name}.signed.expected"])


@pytest.mark.parametrize("name", ["q2_k", "q5_k"])
@pytest.mark.parametrize("path", ["ref", "imp"])
def test_encoders_are_ggmls_bytes_across_encoder_passes(name, path):
    """GGML-4.4, KQ-2.5, KQ-5.5: 171 rows of 3 super-blocks (513, one past a 512-block pass, which 3 does not
    divide): block i of every row takes w[256i .. 256i+255]; the SHA-256 of ggml's output."""
    got = ggml.quantize(name, pass_rows(), importance=pass_w() if path == "imp" else None)
    assert got.shape == (171, 3 * ggml.TYPES[name].type_size)
    np.testing.assert_array_equal(digest(got), DATA[f"{name}.pass.{path}"])


@pytest.mark.parametrize(("name", "weight", "code"), [("q2_k", 1, 2), ("q5_k", 5, 6)])
def test_requantization_rounds_x_plus_mj_in_float32(name, weight, code):
    """KQ-2.4 step 5, KQ-5.4: "L[i] = clamp(nearest_int((x[i] + mj) / dj), 0, nmax)" in float32. q2_K: dj = 3.75,
    mj = 5.625, x = -3.875 * 2^-24: x + mj rounds to 5.625 (within half an ulp, 2^-22), 5.625 / 3.75 = 1.5,
    nearest_int (half to even) 2, where exact arithmetic gives 1.49999997 -> 1. q5_K: dj = 3.9375,
    mj = 21.65625, x = -2^-20: a tie at ulp 2^-19 rounds to the even 21.65625, / 3.9375 = 5.5 -> 6 (exact: 5)."""
    x = DATA[f"{name}.tie.x"]
    blk = ggml.quantize(name, x)
    if name == "q2_k":
        assert blk[0, 80:84].view("<f2").tolist() == [0.25, 0.375] and (blk[0, :16] == 0xFF).all()
        got = kq.q2k_unpack_codes(blk[:, 16:80])[0, weight]
    else:
        assert blk[0, 0:4].view("<f2").tolist() == [0.0625, 0.34375]
        got = kq.q5k_unpack_codes(blk[:, 16:48], blk[:, 48:176])[0, weight]
    assert got == code
    np.testing.assert_array_equal(blk, DATA[f"{name}.tie.expected"])


@pytest.mark.parametrize("name", ["q2_k", "q5_k"])
def test_row_encoder_built_afresh_is_ggmls_bytes(name):
    """GGML-4.4, KQ-2.4, KQ-2.5, KQ-5.4, KQ-5.5: the row-level encoder (reference path over the rows as one run of
    super-blocks, importance path with block i of a row weighted by w[256i ..]) built again from its parts gives
    ggml's bytes in (rows, n / 256 * type_size), across encoder passes. (BlockType's encoder is built when the
    module is imported; building it here puts the row logic itself under test.)"""
    size = ggml.TYPES[name].type_size
    ref, impl = {"q2_k": (kq._q2k_ref_chunk, kq._q2k_impl_chunk), "q5_k": (kq._q5k_ref_chunk, kq._q5k_impl_chunk)}[name]
    quantize = kq._encoder(size, ref, impl)
    with np.errstate(all="ignore"):             # as ggml.quantize: inf - inf in the rows with specials
        got = quantize(DATA[f"{name}.ref.x"], None)
        imp = quantize(DATA[f"{name}.imp.x"], DATA[f"{name}.imp.w"])
        passes = quantize(pass_rows(), None), quantize(pass_rows(), pass_w())
    assert got.shape == (36, 2 * size)
    np.testing.assert_array_equal(got, DATA[f"{name}.ref.expected"])
    np.testing.assert_array_equal(imp, DATA[f"{name}.imp.expected"])
    np.testing.assert_array_equal(digest(passes[0]), DATA[f"{name}.pass.ref"])
    np.testing.assert_array_equal(digest(passes[1]), DATA[f"{name}.pass.imp"])


def test_q8k_row_encoder_built_afresh_is_ggmls_bytes():
    """KQ-7.3: "quantize(x) is quantize_row_q8_K_ref over the rows as one sequence of blocks", (rows, n / 256 * 292)."""
    with np.errstate(all="ignore"):
        got = kq._encoder(kq.Q8K_BYTES, kq._q8k_chunk)(DATA["q8_k.ref.x"], None)
    assert got.shape == (12, 584)
    np.testing.assert_array_equal(got, DATA["q8_k.ref.expected"])


def test_q8k_encoder_is_ggmls_bytes():
    """KQ-7.3: "if |x[j]| > amax: amax = |x[j]|; max = x[j]  # strict: the first largest wins, NaN never";
    qs = min(127, nearest_int(iscale * x)) as int8, bsums their sums, d = 1 / iscale; an all-zero block is
    zeros (ggml's output into a zeroed buffer)."""
    np.testing.assert_array_equal(ggml.quantize("q8_k", DATA["q8_k.ref.x"]), DATA["q8_k.ref.expected"])


def test_q8k_encoder_shape_is_292_bytes_per_256():
    """KQ-7.1: 292 bytes for 256 values, so a (3, 512) input is (3, 584) bytes."""
    assert ggml.quantize("q8_k", np.ones((3, 512), F32)).shape == (3, 584)


# ---------------------------------------------------------------------------------------------
# decoders against ggml's recorded values (KQ-2.2, KQ-5.2, KQ-7.2)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["q2_k", "q5_k", "q8_k"])
def test_decoder_is_ggmls_values(name):
    """KQ-2.2, KQ-5.2, KQ-7.2: dequantize_row_<type> of random bytes with every class of super-scale
    (subnormal, zero, negative, max, non-finite), bit for bit."""
    got = ggml.dequantize(name, DATA[f"{name}.dec.blocks"])
    np.testing.assert_array_equal(bits(got), bits(DATA[f"{name}.dec.expected"]))


# ---------------------------------------------------------------------------------------------
# field readers and metadata (KQ-2.1, KQ-5.1, KQ-7.1)
# ---------------------------------------------------------------------------------------------


def _block(size: int, fields: dict[int, bytes]) -> np.ndarray:
    raw = bytearray(range(size)) if size <= 256 else bytearray(i % 251 for i in range(size))
    for off, b in fields.items():
        raw[off:off + len(b)] = b
    return np.frombuffer(bytes(raw), np.uint8).reshape(1, size)


def test_q2k_scales_are_the_fp16_at_80_and_82():
    """KQ-2.1: "80 2 d fp16", "82 2 dmin fp16" (the float16 scales come last)."""
    blk = _block(84, {80: bytes.fromhex("0034"), 82: bytes.fromhex("00b8")})       # 0.25, -0.5
    s = ggml.TYPES["q2_k"].scales(blk)
    assert sorted(s) == ["d", "dmin"]
    assert s["d"].reshape(-1).tolist() == [0.25] and s["dmin"].reshape(-1).tolist() == [-0.5]


def test_q5k_scales_are_the_fp16_at_0_and_2():
    """KQ-5.1: "0 2 d fp16", "2 2 dmin fp16"."""
    blk = _block(176, {0: bytes.fromhex("0040"), 2: bytes.fromhex("00c2")})        # 2.0, -3.0
    s = ggml.TYPES["q5_k"].scales(blk)
    assert sorted(s) == ["d", "dmin"]
    assert s["d"].reshape(-1).tolist() == [2.0] and s["dmin"].reshape(-1).tolist() == [-3.0]


def test_q8k_scale_is_the_fp32_at_0():
    """KQ-7.1: "0 4 d fp32 LE"; KQ-7.4: only d is checked."""
    blk = _block(292, {0: np.array([-1.5], "<f4").tobytes()})
    s = ggml.TYPES["q8_k"].scales(blk)
    assert list(s) == ["d"]
    assert s["d"].dtype == F32 and s["d"].reshape(-1).tolist() == [-1.5]


def test_q8k_decode_is_d_times_the_int8_codes():
    """KQ-7.2: "y[i] = d * float(qs[i]), one float32 op ... bsums are not read": qs = 0..255 as int8, d = 0.5."""
    blk = _block(292, {0: np.array([0.5], "<f4").tobytes(), 4: bytes(range(256)), 260: b"\xff" * 32})
    want = np.arange(256).astype(np.uint8).view(np.int8).astype(F32) * F32(0.5)
    y = ggml.dequantize("q8_k", blk)
    assert y.dtype == F32
    np.testing.assert_array_equal(y[0], want)


def test_type_metadata_is_the_specs():
    """KQ-2: "16 sub-blocks of 16 with a 4-bit scale ... 2-bit q"; KQ-5: "8 sub-blocks of 32 ... 5-bit q";
    KQ-7: int8 codes under one d per 256; KQ-2.3, KQ-5.3: d and dmin never negative; KQ-7.4: q8_K's d
    takes either sign."""
    q2, q5, q8 = (ggml.TYPES[n] for n in ("q2_k", "q5_k", "q8_k"))
    assert (q2.bits, q2.group, q5.bits, q5.group, q8.bits, q8.group) == (2, 16, 5, 32, 8, 256)
    assert q2.never_negative == ("d", "dmin") and q5.never_negative == ("d", "dmin") and not q8.never_negative
    assert (q2.clause, q5.clause, q8.clause) == ("KQ-2", "KQ-5", "KQ-7")
    assert q2.importance and q5.importance and not q8.importance
    assert not q2.informative and not q5.informative and q8.informative
    assert q8.fp16_offsets in (None, {})


@pytest.mark.parametrize("nb", [1, 3])
def test_q2k_unpack_is_the_bit_pair_formula(nb):
    """KQ-2.1: "weight i is bit pair ((i % 128) / 32) of byte 32(i / 128) + i % 32", for every block of many."""
    rng = np.random.default_rng(2)
    qs = rng.integers(0, 256, (nb, 64), dtype=np.uint8)
    i = np.arange(256)
    want = (qs[:, 32 * (i // 128) + i % 32] >> (2 * ((i % 128) // 32))) & 3
    got = kq.q2k_unpack_codes(qs)
    assert got.shape == (nb, 256)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("nb", [1, 3])
def test_q5k_unpack_is_the_qh_qs_formula(nb):
    """KQ-5.1: "q[i] = lo[i] | ((qh[l] >> j) & 1) << 4", lo from qs[32c + l] = lo[64c + l] | lo[64c + 32 + l] << 4."""
    rng = np.random.default_rng(5)
    qh, qs = rng.integers(0, 256, (nb, 32), dtype=np.uint8), rng.integers(0, 256, (nb, 128), dtype=np.uint8)
    i = np.arange(256)
    j, l, c = i // 32, i % 32, i // 64
    want = ((qs[:, 32 * c + l] >> (4 * (j % 2))) & 15) | (((qh[:, l] >> j) & 1) << 4)
    got = kq.q5k_unpack_codes(qh, qs)
    assert got.shape == (nb, 256)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# the recording against the live library
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to check the recording")
def test_recording_is_the_live_librarys():
    """GGML-4.4: kquants_qkx_teeth_ggml.npz is what the pinned ggml writes for its inputs."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import record_kquants_qkx_teeth as rec
    from conformance.adapters import ggml as ggml_lib

    inputs = {k: DATA[k] for k in DATA.files if k.endswith((".x", ".w", ".blocks"))}
    live = rec.record(inputs, ggml_lib)
    for key in DATA.files:
        np.testing.assert_array_equal(live[key].view(np.uint8), DATA[key].view(np.uint8), err_msg=key)
    np.testing.assert_array_equal(rec.pass_rows(), pass_rows())
    np.testing.assert_array_equal(rec.pass_w(), pass_w())
