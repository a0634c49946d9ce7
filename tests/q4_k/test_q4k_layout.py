"""Q4K-1, Q4K-2, Q4K-3 and the worked examples of spec/q4_k.md §7."""

import gguf
import numpy as np
import pytest
from pydantic import ValidationError

from qformats.formats import q4_k
from qformats.formats.q4_k import codec, layout
from q4k_golden import load

# spec/q4_k.md §7.1, the hand-worked block:
#   d = 0x3400 (0.25), dmin = 0x3800 (0.5)
#   sc = [1, 2, 3, 4, 17, 33, 63, 0], m = [0, 1, 2, 3, 16, 32, 63, 5]
#   scales = 41 82 c3 04 40 81 c2 03 01 01 ff 50
#   qs[0] = 0x5a, every other qs byte = 0xf3
SPEC_SC = [1, 2, 3, 4, 17, 33, 63, 0]
SPEC_M = [0, 1, 2, 3, 16, 32, 63, 5]
SPEC_SCALES = bytes.fromhex("4182c304" "4081c203" "0101ff50")
SPEC_VALUES = {0: 2.5, 1: 0.75, 32: 2.0, 33: 7.0, 64: 1.25, 96: 13.5, 128: 4.75, 160: 107.75,
               192: 15.75, 224: -2.5}


def _spec_block() -> np.ndarray:
    qs = bytearray(b"\xf3" * 128)
    qs[0] = 0x5A
    raw = bytes.fromhex("0034" "0038") + SPEC_SCALES + bytes(qs)
    return np.frombuffer(raw, np.uint8).reshape(1, 144)


def test_block_geometry():
    """Q4K-1.1: QK_K = 256, K_SCALE_SIZE = 12, block = 2 + 2 + 12 + 128 = 144 bytes."""
    assert (q4_k.QK_K, q4_k.K_SCALE_SIZE, q4_k.BLOCK_BYTES) == (256, 12, 144)
    assert (layout.D_OFFSET, layout.DMIN_OFFSET, layout.SCALES_OFFSET, layout.QS_OFFSET) == (0, 2, 4, 16)
    assert q4_k.GGML_TYPE_Q4_K == 12


def test_block_geometry_agrees_with_gguf_py():
    """Q4K-1.1: gguf-py's GGML_QUANT_SIZES[Q4_K] is (256, 144)."""
    assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q4_K] == (q4_k.QK_K, q4_k.BLOCK_BYTES)
    assert int(gguf.GGMLQuantizationType.Q4_K) == q4_k.GGML_TYPE_Q4_K


def test_tensor_model_is_frozen_and_gives_the_block_tensor():
    """Q4K-2.1: a (rows, n) q4_K tensor is uint8 (rows, n // 256 * 144)."""
    t = q4_k.Q4KTensor(rows=64, n=1024)
    (spec,) = t.tensor_specs()
    assert (spec.dtype, spec.shape) == ("uint8", (64, 576))
    with pytest.raises(ValidationError):
        t.rows = 3
    with pytest.raises(ValidationError):
        q4_k.Q4KTensor(rows=1, n=300)
    assert q4_k.SCHEMA_MODELS == (q4_k.Q4KTensor,)
    assert "multipleOf" in str(q4_k.Q4KTensor.model_json_schema())


def test_spec_example_scale_packing():
    """Q4K-1.4 (§7.1): sc/m of the worked example pack to 41 82 c3 04 40 81 c2 03 01 01 ff 50."""
    assert codec.pack_scales(np.array([SPEC_SC]), np.array([SPEC_M])).tobytes() == SPEC_SCALES
    sc, m = codec.unpack_scales(np.frombuffer(SPEC_SCALES, np.uint8))
    assert sc.tolist() == SPEC_SC and m.tolist() == SPEC_M


def test_spec_example_decodes_to_hand_worked_values():
    """Q4K-3.1 (§7.1): y = fp32(d)*sc*q - fp32(dmin)*m gives the hand-worked values."""
    y = q4_k.dequantize(_spec_block())[0]
    for i, v in SPEC_VALUES.items():
        assert y[i] == np.float32(v), i
    # every other weight of a sub-block repeats the low/high-nibble code 3/15
    assert (y[2:32] == np.float32(0.75)).all() and (y[225:256] == np.float32(-2.5)).all()


def test_spec_example_nibble_order():
    """Q4K-1.5: qs[32c + l] low nibble is weight 64c + l, high nibble is weight 64c + 32 + l."""
    codes = codec.unpack_codes(_spec_block()[0, 16:])
    assert codes[0] == 10 and codes[32] == 5 and codes[1] == 3 and codes[33] == 15
    np.testing.assert_array_equal(codec.pack_codes(codes), _spec_block()[0, 16:])


def test_spec_example_zero_row_encodes_to_zero_bytes():
    """Q4K-4.3 (§7.2): an all-zero row is degenerate everywhere and encodes to 144 zero bytes."""
    assert not q4_k.quantize(np.zeros((1, 256), np.float32)).any()
    assert not q4_k.quantize(np.full((1, 256), -0.0, np.float32)).any()


def test_producer_worked_example_row0_block0():
    """Q4K-3.1 (§7.3): golden row 0 block 0 decodes weight 0 to 2.4787674 (producer's README)."""
    blk = load("main_q4k_blocks_u8.npy")[0:1, :144]
    assert blk[0, :16].tobytes().hex(" ") == "47 1e 2a 2a f2 e6 aa aa ec a9 a7 b0 ff fc 8c 06"
    sc, m = codec.unpack_scales(blk[0, 4:16])
    assert sc.tolist() == [50, 38, 42, 42, 63, 60, 44, 38]
    assert m.tolist() == [44, 41, 39, 48, 63, 47, 40, 32]
    y0 = q4_k.dequantize(blk)[0, 0]
    assert f"{y0:.7f}" == "2.4787674"
