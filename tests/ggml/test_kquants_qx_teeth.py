"""Tests with teeth for q3_K and q6_K (issue 33 item 3: ``qformats/formats/ggml/kquants_qx.py``;
spec/ggml_kquants.md KQ-3, KQ-6).

Expected values come from routes independent of the code under test: what ggml 0.10.1's C code wrote for fixed
inputs (``kquants_qx_teeth_ggml.npz``, recorded by ``record_kquants_qx_teeth.py`` and checked against the live
library when QFORMATS_GGML_LIB is set), the block independence of both formats (every super-block is encoded and
decoded on its own, so a long input is the recorded bytes repeated), and the bit layouts of KQ-3.1 / KQ-6.1 worked
by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import kquants_qx as qx

F32 = np.float32
TEETH = Path(__file__).with_name("kquants_qx_teeth_ggml.npz")
TYPES = ["q3_k", "q6_k"]


def recorded(name: str, case: str) -> dict[str, np.ndarray]:
    """The arrays of one recorded case (``ref``, ``imp`` or ``dec``) of ``name``."""
    with np.load(TEETH) as data:
        prefix = f"{name}.{case}."
        return {k[len(prefix):]: data[k] for k in data.files if k.startswith(prefix)}


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


# -- byte identity with ggml on the recorded rows --------------------------------------------------------------------

@pytest.mark.parametrize("name", TYPES)
def test_reference_encoder_is_ggmls(name):
    """KQ-3.4 / KQ-6.4: without an importance vector the encoder writes what ggml's quantize_<type> wrote."""
    case = recorded(name, "ref")
    np.testing.assert_array_equal(ggml.quantize(name, case["x"]), case["expected"])


@pytest.mark.parametrize("name", TYPES)
def test_importance_encoder_is_ggmls(name):
    """KQ-3.5 / KQ-6.5: with an importance vector (zeros among it) the encoder writes what ggml wrote."""
    case = recorded(name, "imp")
    np.testing.assert_array_equal(ggml.quantize(name, case["x"], importance=case["w"]), case["expected"])


@pytest.mark.parametrize("name", TYPES)
def test_decoder_is_ggmls(name):
    """KQ-3.2 / KQ-6.2: the decoder is dequantize_row_<type> bit for bit on random bytes, every scale class."""
    case = recorded(name, "dec")
    np.testing.assert_array_equal(bits(ggml.dequantize(name, case["blocks"])), bits(case["expected"]))


@pytest.mark.skipif(not os.environ.get("QFORMATS_GGML_LIB"), reason="set QFORMATS_GGML_LIB to check the recording")
@pytest.mark.parametrize("name", TYPES)
def test_recording_is_the_live_librarys(name):
    """The recorded bytes are what the live ggml build writes now (the recording is not stale)."""
    lib = pytest.importorskip("conformance.adapters.ggml")    # the repository root (absent in make mutation's copy)

    ref, imp, dec = (recorded(name, c) for c in ("ref", "imp", "dec"))
    np.testing.assert_array_equal(lib.quantize(name, ref["x"]), ref["expected"])
    np.testing.assert_array_equal(lib.quantize(name, imp["x"], imp["w"]), imp["expected"])
    np.testing.assert_array_equal(bits(lib.dequantize(name, dec["blocks"])), bits(dec["expected"]))
    if name == "q6_k":
        eps = recorded(name, "eps")
        np.testing.assert_array_equal(lib.quantize(name, eps["x"], eps["w"]), eps["expected"])


# -- the encoders as the factory builds them, long inputs: every super-block on its own ---------------------------

def built(name: str):
    """``quantize(x, importance)`` as ``_encoder`` builds it for ``name`` now (the BlockType holds one built at
    import), under the codec's ``errstate`` (0/0 and inf * 0 are part of the C encoders' behaviour)."""
    if name == "q3_k":
        quantize = qx._encoder(qx._q3k_impl, qx._q3k_ref, qx.Q3K_BYTES, qx._Q3_REF_CHUNK_BLOCKS)
    else:
        quantize = qx._encoder(qx._q6k, qx._q6k, qx.Q6K_BYTES)

    def call(x, importance):
        with np.errstate(all="ignore"):
            return quantize(x, importance)
    return call


def tiled(a: np.ndarray, rows: int) -> np.ndarray:
    return np.resize(a, (rows,) + a.shape[1:])


@pytest.mark.parametrize("name", TYPES)
def test_built_encoder_is_ggmls(name):
    """KQ-3.4 / KQ-3.5 / KQ-6.4 / KQ-6.5: the encoder `_encoder` builds writes ggml's bytes, with and without
    an importance vector (two super-blocks a row: block i weighted by w[256 (i % 2) ...])."""
    ref, imp = recorded(name, "ref"), recorded(name, "imp")
    np.testing.assert_array_equal(built(name)(ref["x"], None), ref["expected"])
    np.testing.assert_array_equal(built(name)(imp["x"], imp["w"]), imp["expected"])


@pytest.mark.parametrize("name", TYPES)
def test_built_encoder_writes_bytes(name):
    """GGML-4.4: an encoder's output is the tensor's bytes: uint8, one row of blocks per input row."""
    case = recorded(name, "ref")
    got = built(name)(case["x"][:3], None)
    assert got.dtype == np.uint8 and got.shape == (3, case["expected"].shape[1])


@pytest.mark.parametrize(("name", "rows"), [("q3_k", 515), ("q6_k", 131)])
def test_long_reference_input_is_the_rows_repeated(name, rows):
    """KQ-3.4 / KQ-6.4: each super-block is quantized on its own, so over 1,030 (q3_K) or 262 (q6_K) blocks the
    bytes are ggml's recorded rows, repeated."""
    case = recorded(name, "ref")
    np.testing.assert_array_equal(built(name)(tiled(case["x"], rows), None), tiled(case["expected"], rows))


@pytest.mark.parametrize("name", TYPES)
def test_long_importance_input_is_the_rows_repeated(name):
    """KQ-3.5 / KQ-6.5: block i of a row is weighted by w[256 (i % 2) ...] however many rows come: over 262 blocks
    the bytes are ggml's recorded rows, repeated."""
    case = recorded(name, "imp")
    got = built(name)(tiled(case["x"], 131), case["w"])
    np.testing.assert_array_equal(got, tiled(case["expected"], 131))


@pytest.mark.parametrize("name", TYPES)
def test_long_decode_is_the_blocks_repeated(name):
    """KQ-3.2 / KQ-6.2: each super-block decodes on its own: over 2,050 blocks the values are ggml's, repeated."""
    case = recorded(name, "dec")
    got = ggml.dequantize(name, tiled(case["blocks"], 1025))
    np.testing.assert_array_equal(bits(got), bits(tiled(case["expected"], 1025)))


def test_q6k_group_max_eps_limit():
    """KQ-6.4: `if (max_abs_scale < GROUP_MAX_EPS)` zeroes the block: a largest sub-block scale of exactly
    1e-15f keeps its codes, one float32 step below is all zero bytes, as ggml wrote them."""
    case = recorded("q6_k", "eps")
    got = built("q6_k")(case["x"], case["w"])
    np.testing.assert_array_equal(got, case["expected"])
    assert got[0].any() and not got[1].any()


# -- the d field, the scale and code helpers -----------------------------------------------------------------------

@pytest.mark.parametrize(("name", "offset"), [("q3_k", 108), ("q6_k", 208)])
def test_d_field_reads_the_last_two_bytes(name, offset):
    """KQ-3.1 / KQ-6.1: `d` is the little-endian float16 stored last (0x00 0xC1 is -2.5; 0x00 0x3C is 1.0)."""
    blk = np.zeros((2, offset + 2), np.uint8)
    blk[:, offset:] = [[0x00, 0xC1], [0x00, 0x3C]]
    fields = qx._d_field(offset)(blk)
    assert list(fields) == ["d"]
    assert fields["d"].dtype == F32 and fields["d"].tolist() == [[-2.5], [1.0]]


def test_q3_scales_unpack_to_int32():
    """KQ-3.1: the stored six-bit values come back as int32 (byte 0 = 0x21: s0 low bits 1, s8 low bits 2)."""
    s12 = np.zeros(12, np.uint8)
    s12[0] = 0x21
    got = qx.unpack_q3_scales(s12)
    assert got.dtype == np.int32 and got.tolist() == [1] + [0] * 7 + [2] + [0] * 7


def test_q3_scales_read_bytes_as_unsigned():
    """KQ-3.1: the 12 scale bytes are unsigned: an int8 array of the same bits (0xFF as -1) unpacks to all 63."""
    got = qx.unpack_q3_scales(np.full(12, -1, np.int8))
    assert got.tolist() == [63] * 16


def test_q3_scales_pack_any_integer_valued_array():
    """KQ-3.1: sixteen six-bit values 0..63 pack the same from float storage: all 63 is twelve 0xFF bytes."""
    assert qx.pack_q3_scales(np.full(16, 63.0)).tolist() == [0xFF] * 12


def test_q3k_codes_are_int8():
    """KQ-3.1: q3_K codes are signed -4..3 as int8 (all bits clear: low 0, high bit clear, q = -4)."""
    got = qx.q3k_codes(np.zeros((1, 32), np.uint8), np.zeros((1, 64), np.uint8))
    assert got.dtype == np.int8 and got.tolist() == [[-4] * 256]


def test_q6k_codes_are_int8():
    """KQ-6.1: q6_K codes are signed -32..31 as int8 (all bits clear: q = 0 - 32)."""
    got = qx.q6k_codes(np.zeros((1, 128), np.uint8), np.zeros((1, 64), np.uint8))
    assert got.dtype == np.int8 and got.tolist() == [[-32] * 256]
