"""Tests with teeth for tq1_0 and tq2_0 (spec/ggml_ternary_fp4.md TQ-1, TQ-2; issue 33 item 3).

The expected bytes and values are ggml 0.10.1's own, recorded by ``record_ternary_teeth.py`` into
``ternary_teeth_ggml.npz`` (inputs from a fixed seed, outputs only from ggml's C code), so these run without the
library; with QFORMATS_GGML_LIB set the recording itself is checked against the live library. The rest are
spec facts written out here (the layout table, ggml's MAX, the field offsets) and properties (blocks are
encoded and decoded independently, so one call over many blocks equals calls over its pieces).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import ternary
from qformats.formats.ggml.ternary import ggml_max_abs, lround_low_byte, tq1_0_layout

F32 = np.float32
DATA = np.load(Path(__file__).with_name("ternary_teeth_ggml.npz"))
LIB = os.environ.get("QFORMATS_GGML_LIB")
SIZE = {"tq1_0": 54, "tq2_0": 66}


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


@pytest.mark.parametrize("name", ["tq1_0", "tq2_0"])
def test_reference_encoder_is_ggmls_bytes(name):
    """TQ-1.4, TQ-2.4: "quantize(x) ... is quantize_<type> = quantize_row_<type>_ref on every block,
    byte-identical": ties at +-0.5 amax, NaN resetting the running MAX, NaN last (0x7E00), 1/d = inf, d
    overflowing float16, +-inf, subnormal, one-weight and all-zero blocks."""
    np.testing.assert_array_equal(ggml.quantize(name, DATA[f"{name}.ref.x"]), DATA[f"{name}.ref.expected"])


@pytest.mark.parametrize("name", ["tq1_0", "tq2_0"])
def test_decoder_is_ggmls_values(name):
    """TQ-1.3, TQ-2.2: dequantize_row_<type> of random bytes under every class of d (subnormal, zero, negative,
    max, non-finite), bit for bit."""
    got = ggml.dequantize(name, DATA[f"{name}.dec.blocks"])
    np.testing.assert_array_equal(bits(got), bits(DATA[f"{name}.dec.expected"]))


@pytest.mark.parametrize("name", ["tq1_0", "tq2_0"])
def test_encoding_many_blocks_is_encoding_each(name):
    """TQ-1.4, TQ-2.4: the encoder works "per block", so 4097 blocks in one call (past any pass of 4096) give
    ggml's bytes of each block; fast and NaN/inf blocks mixed."""
    one = DATA[f"{name}.ref.expected"].reshape(-1, SIZE[name])                     # ggml, per block
    reps = -(-4097 // one.shape[0])
    x = np.tile(DATA[f"{name}.ref.x"].reshape(-1, 256), (reps, 1))[:4097]
    got = ggml.quantize(name, x.reshape(1, -1)).reshape(-1, SIZE[name])
    np.testing.assert_array_equal(got, np.tile(one, (reps, 1))[:4097])


@pytest.mark.parametrize("name", ["tq1_0", "tq2_0"])
def test_decoding_many_blocks_is_decoding_each(name):
    """TQ-1.3, TQ-2.2: decode is per block, so 2049 blocks in one call (past a pass of 2048) give the values of
    the blocks decoded one call per row of the recording."""
    blocks = DATA[f"{name}.dec.blocks"].reshape(-1, SIZE[name])
    many = np.tile(blocks, (-(-2049 // blocks.shape[0]), 1))[:2049]
    want = np.tile(DATA[f"{name}.dec.expected"].reshape(-1, 256), (-(-2049 // blocks.shape[0]), 1))[:2049]
    np.testing.assert_array_equal(bits(ggml.dequantize(name, many)), bits(want))


@pytest.mark.parametrize("name", ["tq1_0", "tq2_0"])
def test_no_blocks_decode_and_encode_to_nothing(name):
    """GGML-2.2, GGML-4.4: zero rows of blocks decode to zero rows of 256 weights, and zero rows encode to
    zero rows of blocks."""
    y = ggml.dequantize(name, np.zeros((0, SIZE[name]), np.uint8))
    assert y.shape == (0, 256) and y.dtype == F32
    assert ggml.quantize(name, np.zeros((0, 256), F32)).shape == (0, SIZE[name])


@pytest.mark.parametrize(("name", "offset"), [("tq1_0", 52), ("tq2_0", 64)])
def test_row_encoder_and_scales_built_afresh_are_ggmls(name, offset):
    """TQ-1.4, TQ-2.4: the row-level encoder (rows of n weights to rows of n / 256 blocks, in passes of blocks)
    and the d reader (TQ-1.1, TQ-2.1: d at offset 52 / 64), built again from their parts, give ggml's bytes on
    the recorded rows and on 4097 blocks in one row. (BlockType's are built when the module is imported;
    building them here puts the row logic itself under test.)"""
    encode = {"tq1_0": ternary._encode_tq1_0, "tq2_0": ternary._encode_tq2_0}[name]
    quantize = ternary._rows(encode, SIZE[name])
    one = DATA[f"{name}.ref.expected"].reshape(-1, SIZE[name])
    reps = -(-4097 // one.shape[0])
    with np.errstate(all="ignore"):                     # as ggml.quantize: inf * 0 in the rows with specials
        got = quantize(DATA[f"{name}.ref.x"], None)
        x = np.tile(DATA[f"{name}.ref.x"].reshape(-1, 256), (reps, 1))[:4097].reshape(1, -1)
        many = quantize(x, None)
    assert got.dtype == np.uint8 and got.shape == (DATA[f"{name}.ref.x"].shape[0], 2 * SIZE[name])
    assert many.shape == (1, 4097 * SIZE[name])
    np.testing.assert_array_equal(got, DATA[f"{name}.ref.expected"])
    np.testing.assert_array_equal(many.reshape(-1, SIZE[name]), np.tile(one, (reps, 1))[:4097])
    d = ternary._scales(offset)(one)
    assert list(d) == ["d"]
    np.testing.assert_array_equal(d["d"].reshape(-1), one[:, offset:offset + 2].copy().view("<f2").astype(F32).reshape(-1))


def test_tq1_0_layout_is_the_spec_table():
    """TQ-1.1: "weights 0..159: qs[m] trit n, weight 32n + m; 160..239: qs[32 + m] trit n, weight 160 + 16n + m;
    240..255: qh[j] (byte 48 + j) trit n, weight 240 + 4n + j"."""
    byte, pos = tq1_0_layout()
    assert byte.dtype.kind == "i" and pos.dtype.kind == "i"          # "(byte index, trit position n) ... int"
    want_byte, want_pos = np.empty(256, int), np.empty(256, int)
    for n in range(5):
        for m in range(32):
            want_byte[32 * n + m], want_pos[32 * n + m] = m, n
        for m in range(16):
            want_byte[160 + 16 * n + m], want_pos[160 + 16 * n + m] = 32 + m, n
    for n in range(4):
        for j in range(4):
            want_byte[240 + 4 * n + j], want_pos[240 + 4 * n + j] = 48 + j, n
    np.testing.assert_array_equal(byte, want_byte)
    np.testing.assert_array_equal(pos, want_pos)


def test_lround_low_byte_is_quiet_past_the_long_range():
    """TQ-1.4 step 3: "glibc returns LONG_MIN for NaN, +-inf and |v| >= 2^63", whose low byte is 0: computed without a
    floating-point warning, at 2^63, one float32 step below it, and far beyond."""
    below = np.nextafter(F32(2.0 ** 63), F32(0))
    v = np.array([2.0 ** 63, -(2.0 ** 63), 1e20, -1e20, 3e38, np.inf, np.nan, below, -below], F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = lround_low_byte(v)
    assert got.tolist() == [0] * 7 + [0, 0]                            # 2^63 - 2^39: its low byte is 0 too
    assert lround_low_byte(np.array([255.5, -1.5], F32)).tolist() == [0, 254]


def test_ceil_256_243_is_the_uint8_store():
    """TQ-1.2: "ceil256(q) = (uint8)(((uint16_t)q * 256 + 242) / 243)": the byte written, as uint8."""
    q = np.arange(256)
    got = ternary._ceil_256_243(q)
    assert got.dtype == np.uint8
    assert got.tolist() == [((int(v) * 256 + 242) // 243) % 256 for v in q]


def test_ggml_max_abs_without_nan_is_the_largest_magnitude():
    """TQ-1.4 step 1: "amax = MAX(amax, fabsf(x[j]))" from amax = 0: the largest |x| of each row."""
    x = np.array([[1.0, -3.0, 2.0], [0.0, -0.0, 0.0], [-1e-45, 0.0, 0.0]], F32)
    assert ggml_max_abs(x).tolist() == [3.0, 0.0, F32(1e-45)]


def test_ggml_max_abs_restarts_after_a_nan():
    """TQ-1.4 step 1: "a NaN element sets amax to NaN and the next element replaces it", so amax is the
    largest magnitude after the last NaN, or NaN when the last element is NaN."""
    nan = np.nan
    x = np.array([[5.0, nan, 1.0, -2.0], [nan, 4.0, 1.0, 3.0], [1.0, 2.0, 7.0, nan], [9.0, nan, nan, 0.5]], F32)
    got = ggml_max_abs(x)
    assert got[:2].tolist() == [2.0, 4.0] and np.isnan(got[2]) and got[3] == F32(0.5)


@pytest.mark.parametrize(("name", "offset"), [("tq1_0", 52), ("tq2_0", 64)])
def test_scale_is_the_fp16_d_last(name, offset):
    """TQ-1.1, TQ-2.1: d is the float16 at offset 52 (tq1_0) or 64 (tq2_0), the block's last two bytes."""
    blk = np.arange(2 * SIZE[name], dtype=np.uint8).reshape(2, -1) | 0x10
    blk[:, offset:offset + 2] = np.array([[0x00, 0xBC], [0x00, 0x40]], np.uint8)          # -1.0, 2.0
    s = ggml.TYPES[name].scales(blk)
    assert list(s) == ["d"] and s["d"].reshape(-1).tolist() == [-1.0, 2.0]


def test_type_metadata_is_the_specs():
    """TQ-1, TQ-2: one float16 d per 256-weight block, never negative as written (TQ-1.5, TQ-2.5); tq2_0 stores
    each trit in 2 bits, tq1_0 five trits a byte (no whole bit count); no importance path."""
    t1, t2 = ggml.TYPES["tq1_0"], ggml.TYPES["tq2_0"]
    assert (t1.clause, t2.clause) == ("TQ-1", "TQ-2")
    assert t1.never_negative == ("d",) and t2.never_negative == ("d",)
    assert t1.fp16_offsets == {"d": 52} and t2.fp16_offsets == {"d": 64}
    assert (t1.group, t2.group, t1.bits, t2.bits) == (256, 256, None, 2)
    assert not t1.importance and not t2.importance
    assert (t1.block_size, t1.type_size, t2.block_size, t2.type_size) == (256, 54, 256, 66)


@pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to check the recording")
def test_recording_is_the_live_librarys():
    """TQ-1.4, TQ-2.4 [run]: ternary_teeth_ggml.npz is what the pinned ggml writes for its inputs."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import record_ternary_teeth as rec
    from conformance.adapters import ggml as ggml_lib

    inputs = {k: DATA[k] for k in DATA.files if k.endswith((".x", ".blocks"))}
    live = rec.record(inputs, ggml_lib)
    for key in DATA.files:
        np.testing.assert_array_equal(live[key].view(np.uint8), DATA[key].view(np.uint8), err_msg=key)
