"""Tests with teeth for q4_K's codec in the GGUF family and the affine K-quant machinery it shares with q5_K
and q2_K (issue 33 item 3: ``qformats/formats/ggml/q4k.py``, ``qformats/formats/ggml/kmachinery_qkx.py``).

Expected values come from routes independent of the code under test: llama.cpp's golden q4_K data
(fixtures/third_party/llama.cpp/q4_k), bytes ggml 0.10.1's C encoders wrote for rows chosen to reach
rarely taken branches (``kmachinery_teeth_ggml.npz``, recorded by ``record_kmachinery_teeth.py`` and
checked against the live library when QFORMATS_GGML_LIB is set), the spec's worked examples, and
values worked by hand from the spec's pseudocode.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml, q4_k
from qformats.formats.ggml import kmachinery_qkx as km
from q4k_golden import bits, load
from whole_error import refusal, whole

F32 = np.float32
TEETH = Path(__file__).with_name("kmachinery_teeth_ggml.npz")

# Q4K-7.1: d = 0.25, dmin = 0.5, sc = [1, 2, 3, 4, 17, 33, 63, 0], m = [0, 1, 2, 3, 16, 32, 63, 5]
SPEC_SC = [1, 2, 3, 4, 17, 33, 63, 0]
SPEC_M = [0, 1, 2, 3, 16, 32, 63, 5]
SPEC_SCALES = [0x41, 0x82, 0xC3, 0x04, 0x40, 0x81, 0xC2, 0x03, 0x01, 0x01, 0xFF, 0x50]


def _teeth(case: str) -> tuple[str, np.ndarray, np.ndarray | None, np.ndarray]:
    """(type, x (1, 256), importance or None, the bytes ggml's quantize_<type> wrote) of one recorded case."""
    with np.load(TEETH) as data:
        w = data[f"{case}.w"] if f"{case}.w" in data.files else None
        return str(data[f"{case}.type"]), data[f"{case}.x"], w, data[f"{case}.expected"]


def _header(blk: np.ndarray) -> tuple[F32, F32, np.ndarray, np.ndarray]:
    """d, dmin (widened float16) and the unpacked sc, m of one q4_K block, read per Q4K-1.4 written out here."""
    d, dmin = blk[0:4].view("<f2").astype(F32)
    s = blk[4:16].astype(np.int64)
    sc = [s[j] & 63 if j < 4 else (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4) for j in range(8)]
    m = [s[j + 4] & 63 if j < 4 else (s[j + 4] >> 4) | ((s[j] >> 6) << 4) for j in range(8)]
    return d, dmin, np.array(sc), np.array(m)


# ---------------------------------------------------------------------------------------------
# q4_K through the family (qformats.formats.ggml): encoders, validity fields
# ---------------------------------------------------------------------------------------------


def test_family_reference_encoder_is_llama_cpp():
    """Q4K-4.3, GGML-4.4: ``ggml.quantize("q4_k", x)`` without an importance vector is
    ``quantize_row_q4_K_ref``: the 64 golden rows byte for byte."""
    np.testing.assert_array_equal(ggml.quantize("q4_k", load("main_input_f32.npy")), load("main_q4k_blocks_u8.npy"))


def test_family_importance_encoder_is_llama_cpp():
    """Q4K-4.6: ``ggml.quantize("q4_k", x, importance=w)`` is ``quantize_row_q4_K_impl`` with the same w
    for every row: the 32 golden importance rows byte for byte."""
    got = ggml.quantize("q4_k", load("importance_input_f32.npy"), importance=load("importance_weights_f32.npy"))
    np.testing.assert_array_equal(got, load("importance_q4k_blocks_u8.npy"))


def test_importance_encoder_over_several_passes_keeps_each_rows_importance():
    """Q4K-4.6: "runs quantize_row_q4_K_impl row by row with the same w for every row" -- also when the
    blocks of many rows are encoded in more than one pass (288 golden rows of 2 blocks: 576 blocks)."""
    x = np.tile(load("importance_input_f32.npy"), (9, 1))
    got = ggml.quantize("q4_k", x, importance=load("importance_weights_f32.npy"))
    np.testing.assert_array_equal(got, np.tile(load("importance_q4k_blocks_u8.npy"), (9, 1)))


def _with_fp16(blocks: np.ndarray, offset: int, value: float) -> np.ndarray:
    out = blocks.copy()
    out[0, offset:offset + 2] = np.array([value], "<f2").view(np.uint8)
    return out


def test_family_validity_names_a_nonfinite_dmin():
    """GGML-3.1, Q4K-5.4: dmin (bytes 2..3, Q4K-1.1) is a checked field: +inf there in block 1 of row 0 is
    refused, and the refusal names dmin."""
    blocks = _with_fp16(load("main_q4k_blocks_u8.npy")[:2].copy(), 144 + 2, np.inf)
    assert whole(lambda: ggml.check_blocks("q4_k", blocks)) == refusal(
        "ggml.scale.nonfinite", "blocks", "q4_k blocks with finite dmin", "dmin = inf in block 1 of row 0")


def test_family_validity_names_a_nonfinite_d():
    """GGML-3.1, Q4K-5.4: d (bytes 0..1, Q4K-1.1) is a checked field: NaN there in block 2 of row 0 is
    refused, and the refusal names d."""
    blocks = _with_fp16(load("main_q4k_blocks_u8.npy")[:2].copy(), 2 * 144, np.nan)
    assert whole(lambda: ggml.check_blocks("q4_k", blocks)) == refusal(
        "ggml.scale.nonfinite", "blocks", "q4_k blocks with finite d", "d = NaN in block 2 of row 0")


def test_requantized_codes_round_the_float32_sum():
    """Q4K-4.1, Q4K-4.3 step 5: ``L[i] = clamp(nearest_int((x[i] + dmj) / dj), 0, 15)`` evaluated in float32,
    "each operation in source order". In this row x[12] + dmj rounds in float32 to exactly 8.5 * dj, a tie
    that nearest_int sends to the even code 8, while the exact sum lies above it (code 9 in wider
    arithmetic). Every code of the block is checked against the formula on its own stored scales, and the
    block against ggml's bytes."""
    t, x, _, expected = _teeth("q4k_ref_float32_requant_sum")
    blk = ggml.quantize(t, x)[0]
    np.testing.assert_array_equal(blk, expected[0])
    d, dmin, sc, m = _header(blk)
    dj, dmj = F32(d) * sc.astype(F32), F32(dmin) * m.astype(F32)
    sub = x[0].reshape(8, 32)
    q = np.rint(((sub + dmj[:, None]).astype(F32) / dj[:, None]).astype(F32)).clip(0, 15)
    codes = np.concatenate([[blk[16 + 32 * c:48 + 32 * c] & 15, blk[16 + 32 * c:48 + 32 * c] >> 4] for c in range(4)])
    np.testing.assert_array_equal(codes, q)
    assert F32(x[0, 12] + dmj[0]) == F32(8.5) * dj[0] and q[0, 12] == 8
    assert (np.float64(x[0, 12]) + np.float64(dmj[0])) / np.float64(dj[0]) > 8.5


def test_reference_search_runs_exactly_twenty_one_trials():
    """Q4K-4.2: the reference path runs trials ``is = 0..nstep`` with nstep = 20, i.e. 21 of them. On this
    row (sub-blocks of small values, each with one large outlier) a 22nd trial would fit better; ggml's
    bytes show it is not run."""
    t, x, _, expected = _teeth("q4k_ref_outlier_trials")
    np.testing.assert_array_equal(ggml.quantize(t, x), expected)


# ---------------------------------------------------------------------------------------------
# the shared machinery through q2_K, q4_K and q5_K: rows recorded from ggml
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [
    "q2k_ref_abs_error_search",        # KQ-1.3, KQ-2.4: use_mad = true, error w * |e|
    "q5k_imp_minus_inf_sub_block",     # KQ-1.3, Q4K-4.2: a sub-block of -inf: max <= min, the degenerate result
    "q5k_imp_scale_trials",            # KQ-1.4, Q4K-4.6: make_qp_quants' trials is = -4..-1, 1..4
    "q4k_imp_zero_importance",         # Q4K-4.6: all-zero importance: suml2 = 0, "suml2 > 0 ? ... : 0"
    "q4k_imp_tiny_importance_a",       # Q4K-4.1, Q4K-4.6: float32 error sums of the scale trials
    "q4k_imp_tiny_importance_b",
    "q2k_imp_tiny_importance",         # KQ-1.4: suml2 below 1 (weights ~1e-7)
    "q2k_imp_signed_importance",       # KQ-1.4, GGML-4.2: mixed-sign importance, scales below GROUP_MAX_EPS
    # Q4K-4.6 make_qp_quants' descent, sub-block importances from 1e-29 to 1e4 (and 0): "repeat up to 5
    # times", "if slx > 0 and sl2 > 0" (both strict)
    "q4k_imp_descent_pass_limit",
    "q4k_imp_descent_positive_slx",
    "q4k_imp_descent_positive_sl2",
])
def test_encoder_matches_ggml_on_a_recorded_row(case):
    """KQ-1.3, KQ-1.4, Q4K-4.6: the encoder reproduces ggml's quantize_<type> byte for byte on rows that reach
    the rarely taken branches of the affine search and of make_qp_quants (the bytes ggml 0.10.1 wrote)."""
    t, x, w, expected = _teeth(case)
    with np.errstate(all="ignore"):     # the recorded rows are valid input; the encoders silence C's 0/0 anyway
        got = ggml.quantize(t, x, importance=w)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.skipif(not os.environ.get("QFORMATS_GGML_LIB"), reason="set QFORMATS_GGML_LIB to a ggml build to run")
def test_recorded_rows_are_what_ggml_writes():
    """GGML-4.4: the recorded expectations are the live ggml's output (provenance of kmachinery_teeth_ggml.npz)."""
    from conformance.adapters import ggml as ggml_lib

    with np.load(TEETH) as data:
        cases = sorted({k.rsplit(".", 1)[0] for k in data.files})
    for case in cases:
        t, x, w, expected = _teeth(case)
        np.testing.assert_array_equal(ggml_lib.quantize(t, x, w), expected, err_msg=case)


# ---------------------------------------------------------------------------------------------
# make_qp_quants' GROUP_MAX_EPS (Q4K-4.6, KQ-1.4), worked by hand
# ---------------------------------------------------------------------------------------------


def test_scales_below_group_max_eps_pack_as_zero():
    """Q4K-4.6: "if max < 1e-15: return (0, all zeros)". With every |x| near 1e-17 all eight sub-block
    scales and mins are below 1e-15, so d = dmin = 0 and all 12 scale bytes are 0: the block's first
    16 bytes are zero."""
    x = (np.random.default_rng(11).standard_normal((1, 256)) * 1e-17).astype(F32)
    blk = ggml.quantize("q4_k", x, importance=np.ones(256, F32))
    assert blk.shape == (1, 144) and not blk[0, :16].any()


def test_a_min_of_exactly_group_max_eps_is_quantized():
    """Q4K-4.6: the all-zero test is strict (``max < 1e-15``). Sub-block 0 all -1e-15f, the rest 0: the
    search is degenerate everywhere (max <= min), so scales are 0 and mins [1e-15f, 0, ...]; the mins'
    max is exactly GROUP_MAX_EPS, so they are quantized: Lm[0] = nearest_int(63 / 1e-15f * 1e-15f) = 63,
    m_block = 1e-15f / 63, fp16 0. Every dj is 0, so codes stay 0. Scale byte 4 (block byte 8, Q4K-1.1) is
    m[0] = 63 = 0x3f (Q4K-1.4); every other byte is 0."""
    x = np.zeros((1, 256), F32)
    x[0, :32] = -F32(1e-15)
    want = np.zeros((1, 144), np.uint8)
    want[0, 4 + 4] = 0x3F
    np.testing.assert_array_equal(ggml.quantize("q4_k", x, importance=np.ones(256, F32)), want)


# ---------------------------------------------------------------------------------------------
# decode and field helpers on the shapes their docstrings promise
# ---------------------------------------------------------------------------------------------


def test_decoder_reads_blocks_that_are_a_strided_view():
    """Q4K-3.1, GGML-2.2: the decode depends on the block bytes only, not on how they are laid out in
    memory: the first block of each golden row, read through a strided view, decodes to llama.cpp's values."""
    view = load("main_q4k_blocks_u8.npy")[:, :144]
    assert not view.flags.c_contiguous
    with np.errstate(all="ignore"):                   # golden rows 45..47 hold inf * 0
        got = ggml.dequantize("q4_k", view)
    np.testing.assert_array_equal(bits(got), bits(load("main_dequant_f32.npy")[:, :256]))


# KQ-2.6: d = 0x3400 (0.25), dmin = 0x3800 (0.5) at bytes 80..83, scales[j] = j | (15 - j) << 4,
# qs[0] = 0xe4, qs[16] = 0x1b, qs[32] = 0xe4, qs[63] = 0xff, every other qs byte 0: y at some weights.
Q2K_SPEC_VALUES = {0: -7.5, 16: -6.25, 32: -6.0, 48: -4.5, 96: 0.0, 112: -4.0, 159: 3.75, 192: 4.5, 224: 10.0,
                   255: 11.25}


def test_q2k_worked_example_decodes_through_a_strided_view():
    """KQ-2.6, GGML-2.2: the hand-built q2_K block decodes to the spec's values (weight 0 -> -7.5, ..., 255 ->
    11.25) also when it is read through a strided view (every other 84 bytes of a wider array)."""
    qs = bytearray(64)
    qs[0], qs[16], qs[32], qs[63] = 0xE4, 0x1B, 0xE4, 0xFF
    block = bytes(j | (15 - j) << 4 for j in range(16)) + bytes(qs) + bytes.fromhex("00340038")
    wide = np.zeros((2, 168), np.uint8)
    wide[:, :84] = np.frombuffer(block, np.uint8)
    view = wide[:, :84]
    assert not view.flags.c_contiguous
    y = ggml.dequantize("q2_k", view)
    for i, v in Q2K_SPEC_VALUES.items():
        assert y[0, i] == y[1, i] == F32(v), (i, y[:, i], v)


def test_encoding_an_all_zero_row_raises_no_float_warning():
    """Q4K-7.2: the all-zero row is a worked example of valid input (max == min in every sub-block, 0/0 in
    C's arithmetic); ``q4_k.quantize`` reproduces C's arithmetic without RuntimeWarnings, on both paths."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = q4_k.quantize(np.zeros((1, 256), F32))
        imp = q4_k.quantize(np.zeros((1, 256), F32), importance=np.ones(256, F32))
    assert ref.shape == imp.shape == (1, 144) and not ref.any() and not imp.any()


def test_affine_decode_asks_for_each_super_block_once_in_bounded_passes():
    """affine_decode's contract (kmachinery_qkx): ``scales(part)`` gets slices of at most SCALE_BLOCKS and
    ``codes(part, dj)`` of at most DECODE_BLOCKS super-blocks (nibble_codes' mask holds DECODE_BLOCKS), each
    super-block once; the output is ``dj * q - mj`` (Q4K-3.1) for every one of them."""
    nb = km.SCALE_BLOCKS + 3
    seen_scales, seen_codes = [], []

    def scales(part):
        seen_scales.append((part.start, part.stop))
        k = part.stop - part.start
        return np.full((k, 8), 2, F32), np.full((k, 8), 1, F32)

    def codes(part, dj):
        seen_codes.append((part.start, part.stop))
        return np.full((part.stop - part.start, 256), 3, np.uint8)

    y = km.affine_decode(nb, scales, codes)
    assert y.shape == (nb, 256) and (y == F32(2 * 3 - 1)).all()
    for seen, bound in ((seen_scales, km.SCALE_BLOCKS), (seen_codes, km.DECODE_BLOCKS)):
        covered = np.concatenate([np.arange(a, b) for a, b in seen])
        assert max(b - a for a, b in seen) <= bound
        np.testing.assert_array_equal(np.sort(covered), np.arange(nb))


def test_encode_chunks_encodes_each_super_block_once():
    """encode_chunks' contract (kmachinery_qkx): ``encode(part)`` runs on slices of super-blocks that together
    cover every block exactly once, and its rows land at those blocks."""
    seen = []

    def encode(part):
        seen.append((part.start, part.stop))
        return (np.arange(part.start, part.stop) % 256).astype(np.uint8)[:, None].repeat(3, axis=1)

    out = km.encode_chunks(1100, 3, encode)
    covered = np.concatenate([np.arange(a, b) for a, b in seen])
    np.testing.assert_array_equal(np.sort(covered), np.arange(1100))
    np.testing.assert_array_equal(out[:, 0], np.arange(1100) % 256)


def test_pack_scales_packs_one_blocks_eight_pairs():
    """Q4K-1.4, Q4K-7.1: (8,) scales and (8,) mins pack to the 12 bytes 41 82 c3 04 40 81 c2 03 01 01 ff 50."""
    got = km.pack_scales(np.array(SPEC_SC), np.array(SPEC_M))
    assert got.dtype == np.uint8 and got.tolist() == SPEC_SCALES


def test_unpack_scales_takes_the_bytes_in_any_integer_dtype():
    """Q4K-1.4, Q4K-7.1: the 12 byte values held in an int64 array unpack to sc = [1, 2, 3, 4, 17, 33, 63, 0],
    m = [0, 1, 2, 3, 16, 32, 63, 5]."""
    sc, m = km.unpack_scales(np.array(SPEC_SCALES))
    assert (sc.tolist(), m.tolist()) == (SPEC_SC, SPEC_M)


@pytest.mark.parametrize("lead", [(), (1,), (2, 3)])
def test_unpack_codes_of_one_block_under_any_leading_shape(lead):
    """Q4K-1.5, Q4K-7.1: qs[0] = 0x5a, every other byte 0xf3: weight 0 has code 10, weight 32 code 5, other
    low nibbles (weights 64c + l) 3 and high nibbles (64c + 32 + l) 15 -- for (..., 128) bytes of any
    leading shape."""
    qs = np.full(128, 0xF3, np.uint8)
    qs[0] = 0x5A
    want = np.tile(np.repeat([3, 15], 32), 4)
    want[0], want[32] = 10, 5
    got = km.unpack_codes(np.broadcast_to(qs, lead + (128,)).copy())
    np.testing.assert_array_equal(got, np.broadcast_to(want, lead + (256,)))


def test_running_max_is_over_the_last_axis_with_nan_never_winning():
    """Q4K-4.3 step 2: ``max = 0; for j: if v[j] > max: max = v[j]`` over the last axis, whatever the leading
    shape; NaN never wins and negatives leave 0."""
    v = np.zeros((2, 3, 8), F32)
    v[0, 0] = [1, 5, 2, np.nan, 7, 0, 3, 6]
    v[0, 1] = [-1, -2, -3, -4, -5, -6, -7, -8]
    v[1, 2] = [0, 0, 0, 0, 0, 0, 0, 9]
    v[1, 0] = [np.nan] * 8
    want = np.array([[7, 0, 0], [0, 0, 9]], F32)
    got = km.running_max(v)
    assert got.dtype == F32
    np.testing.assert_array_equal(got, want)


def test_scaled_is_a_float32_product():
    """GGML-2.3: small integer codes times a float32 scale is an exact float32 product, per row of codes."""
    got = km.scaled(np.array([[1, 2, 15], [3, 0, 7]], np.uint8), np.array([0.25, -3], F32))
    assert got.dtype == F32
    np.testing.assert_array_equal(got, np.array([[0.25, 0.5, 3.75], [-9, 0, -21]], F32))
