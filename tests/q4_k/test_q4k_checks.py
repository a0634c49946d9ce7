"""Q4K-4.1, Q4K-4.6, Q4K-5: bad input is rejected with the exact code, never a traceback."""

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import q4_k
from qformats.formats.q4_k.layout import blocks_per_row, row_bytes


def _zero_blocks(rows=2, nb=3):
    return np.zeros((rows, nb * q4_k.BLOCK_BYTES), np.uint8)


def _with_half(blocks, row, block, offset, bits16):
    out = blocks.copy()
    base = block * q4_k.BLOCK_BYTES + offset
    out[row, base:base + 2] = np.array([bits16], "<u2").view(np.uint8)
    return out


@pytest.mark.parametrize(
    ("blocks", "kwargs", "code"),
    [
        pytest.param(np.zeros((2, 288), np.int8), {}, "q4k.blocks.dtype", id="int8-blocks"),
        pytest.param(np.zeros((2, 288), np.float32), {}, "q4k.blocks.dtype", id="float32-blocks"),
        pytest.param(np.zeros(288, np.uint8), {}, "q4k.blocks.shape", id="1d-blocks"),
        pytest.param(np.zeros((2, 2, 144), np.uint8), {}, "q4k.blocks.shape", id="3d-blocks"),
        pytest.param(np.zeros((2, 143), np.uint8), {}, "q4k.blocks.shape", id="143-bytes-per-row"),
        pytest.param(np.zeros((2, 0), np.uint8), {}, "q4k.blocks.shape", id="0-bytes-per-row"),
        pytest.param(np.zeros((2, 288), np.uint8), {"n": 256}, "q4k.blocks.shape", id="n-disagrees-with-width"),
        pytest.param(np.zeros((2, 288), np.uint8), {"n": 500}, "q4k.n.not_multiple_of_256", id="n-500"),
        pytest.param(np.zeros((2, 288), np.uint8), {"n": 0}, "q4k.n.not_multiple_of_256", id="n-0"),
    ],
)
def test_check_blocks_structure(blocks, kwargs, code):
    """Q4K-5.1 .. Q4K-5.3: block data is uint8 (rows, n // 256 * 144) with n a multiple of 256."""
    with pytest.raises(QFormatsError) as exc:
        q4_k.check_blocks(blocks, **kwargs)
    assert exc.value.code == code


@pytest.mark.parametrize(
    ("offset", "bits16", "field", "label"),
    [
        pytest.param(0, 0x7C00, "d", "inf", id="d-plus-inf"),
        pytest.param(0, 0xFC00, "d", "-inf", id="d-minus-inf"),
        pytest.param(0, 0x7E00, "d", "NaN", id="d-nan"),
        pytest.param(2, 0x7C00, "dmin", "inf", id="dmin-plus-inf"),
        pytest.param(2, 0xFE01, "dmin", "NaN", id="dmin-negative-nan"),
    ],
)
def test_nonfinite_scale_rejected_naming_block(offset, bits16, field, label):
    """Q4K-5.4: a block whose fp16 d or dmin is inf/NaN is invalid; the message names the block."""
    bad = _with_half(_zero_blocks(), 1, 2, offset, bits16)
    with pytest.raises(QFormatsError) as exc:
        q4_k.check_blocks(bad, tensor="blk.0.attn_q.weight")
    err = exc.value
    assert err.code == "q4k.d.nonfinite" and err.clause == "Q4K-5.4"
    assert err.message == (f"'blk.0.attn_q.weight' must be blocks with finite float16 {field} "
                           f"(got {field} = {label} in block 2 of row 1)")


def test_first_bad_block_is_reported():
    """Q4K-5.4: with several bad blocks the earliest (row-major) one is named."""
    bad = _with_half(_with_half(_zero_blocks(), 1, 0, 0, 0x7C00), 0, 2, 2, 0x7C00)
    with pytest.raises(QFormatsError) as exc:
        q4_k.check_blocks(bad)
    assert exc.value.actual == ("dmin = inf in block 2 of row 0; 2 blocks in 2 rows are non-finite, "
                                "(row, block): (0, 2), (1, 0)")


@pytest.mark.parametrize("bits16", [0x7BFF, 0x0001, 0x8001, 0x8000, 0xFBFF], ids=lambda b: f"0x{b:04x}")
def test_finite_extremes_are_valid(bits16):
    """Q4K-5.4: every finite d (max, subnormal, -0, negative max) is valid."""
    q4_k.check_blocks(_with_half(_with_half(_zero_blocks(), 0, 0, 0, bits16), 0, 1, 2, bits16))


def test_dequantize_strict_rejects_and_default_decodes():
    """Q4K-3.3: the decoder evaluates inf-d blocks as llama.cpp does unless asked to validate."""
    bad = _with_half(_zero_blocks(1, 1), 0, 0, 0, 0x7C00)
    with pytest.raises(QFormatsError) as exc:
        q4_k.dequantize(bad, strict=True)
    assert exc.value.code == "q4k.d.nonfinite"
    assert np.isnan(q4_k.dequantize(bad)).all()  # inf * sc(=0) -> NaN, as in C


@pytest.mark.parametrize(
    ("blocks", "code"),
    [
        pytest.param(np.zeros((1, 144), np.uint16), "q4k.blocks.dtype", id="uint16"),
        pytest.param(np.zeros((1, 100), np.uint8), "q4k.blocks.shape", id="100-bytes"),
        pytest.param(np.zeros(144, np.uint8), "q4k.blocks.shape", id="1d"),
    ],
)
def test_dequantize_rejects_bad_blocks(blocks, code):
    """Q4K-5.1, Q4K-5.2: the decoder checks structure before touching bytes."""
    with pytest.raises(QFormatsError) as exc:
        q4_k.dequantize(blocks)
    assert exc.value.code == code


@pytest.mark.parametrize(
    ("x", "code"),
    [
        pytest.param(np.zeros((1, 256), np.float64), "q4k.input.dtype", id="float64"),
        pytest.param(np.zeros((1, 256), np.float16), "q4k.input.dtype", id="float16"),
        pytest.param(np.zeros((1, 256), np.int32), "q4k.input.dtype", id="int32"),
        pytest.param(np.zeros(256, np.float32), "q4k.input.shape", id="1d"),
        pytest.param(np.zeros((1, 1, 256), np.float32), "q4k.input.shape", id="3d"),
        pytest.param(np.zeros((1, 255), np.float32), "q4k.n.not_multiple_of_256", id="n-255"),
        pytest.param(np.zeros((1, 257), np.float32), "q4k.n.not_multiple_of_256", id="n-257"),
        pytest.param(np.zeros((1, 0), np.float32), "q4k.n.not_multiple_of_256", id="n-0"),
    ],
)
def test_quantize_rejects_bad_input(x, code):
    """Q4K-4.1: encoder input is float32 (rows, n) with n a positive multiple of 256."""
    with pytest.raises(QFormatsError) as exc:
        q4_k.quantize(x)
    assert exc.value.code == code


@pytest.mark.parametrize(
    ("w", "code"),
    [
        pytest.param(np.ones(256, np.float64), "q4k.input.dtype", id="float64"),
        pytest.param(np.ones(512, np.float32), "q4k.importance.shape", id="too-long"),
        pytest.param(np.ones((1, 256), np.float32), "q4k.importance.shape", id="2d"),
    ],
)
def test_quantize_rejects_bad_importance(w, code):
    """Q4K-4.6: the importance vector is float32 (n,)."""
    with pytest.raises(QFormatsError) as exc:
        q4_k.quantize(np.zeros((2, 256), np.float32), importance=w)
    assert exc.value.code == code


def test_quantize_does_not_write_to_input():
    """Q4K-4.1: the encoder reads its input only."""
    x = np.linspace(-1, 1, 512, dtype=np.float32).reshape(1, 512)
    x.flags.writeable = False
    q4_k.quantize(x)
    q4_k.quantize(x, importance=np.ones(512, np.float32))


@pytest.mark.parametrize("n", [True, 256.0, -256, 384, np.float64(512)])
def test_blocks_per_row_rejects_non_multiples(n):
    """Q4K-5.3: n must be a positive integer multiple of 256."""
    with pytest.raises(QFormatsError) as exc:
        blocks_per_row(n)
    assert exc.value.code == "q4k.n.not_multiple_of_256"


@pytest.mark.parametrize("n", [np.int64(512), np.uint32(512), np.int16(512)], ids=lambda n: type(n).__name__)
def test_numpy_integer_row_length_is_an_integer(n):
    """Q4K-5.3: "n a positive multiple of 256" -- any integer type counts, such as a dimension read from a shape."""
    assert (blocks_per_row(n), row_bytes(n)) == (2, 288)
    q4_k.check_blocks(_zero_blocks(1, 2), n=n)


def test_big_endian_and_strided_float32_input_encode_like_native():
    """Q4K-4.1: float32 means the values; byte order and memory layout do not change the bytes."""
    x = np.random.default_rng(5).standard_normal((3, 512)).astype(np.float32)
    want = q4_k.quantize(x)
    np.testing.assert_array_equal(q4_k.quantize(x.astype(">f4")), want)
    np.testing.assert_array_equal(q4_k.quantize(np.asfortranarray(x)), want)
    np.testing.assert_array_equal(q4_k.dequantize(np.asfortranarray(want)), q4_k.dequantize(want))


def test_zero_rows_round_trip():
    """Q4K-2.1: a tensor with no rows is valid and encodes/decodes to empty arrays."""
    assert q4_k.quantize(np.zeros((0, 512), np.float32)).shape == (0, 288)
    assert q4_k.dequantize(np.zeros((0, 288), np.uint8)).shape == (0, 512)


def test_nonfinite_scales_are_counted_per_tensor():
    """Q4K-5.4 finding: the count of bad blocks and rows and the first few positions, not only the first."""
    blocks = np.zeros((4, 3 * 144), np.uint8)
    for row, block in ((0, 2), (2, 0), (2, 1), (3, 2)):               # d = inf (0x7C00, little-endian)
        blocks[row, block * 144 + 1] = 0x7C
    with pytest.raises(QFormatsError) as exc:
        q4_k.check_blocks(blocks, tensor="w")
    assert exc.value.actual == ("d = inf in block 2 of row 0; 4 blocks in 3 rows are non-finite, "
                                "(row, block): (0, 2), (2, 0), (2, 1), ...")
