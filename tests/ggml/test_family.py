"""The family's row-level entry points and checks (spec/ggml.md GGML-1, GGML-3, GGML-4): every error
branch with its whole error, each limit at the limit and one past it, and the findings' counts."""

from __future__ import annotations

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml.checks import SHOWN_BLOCKS, scale_findings

Q8_0 = ggml.TYPES["q8_0"]            # 34-byte blocks of 32: fp16 d at byte 0 (LEG-6.1)


def _raises(fn, *args, **kwargs) -> QFormatsError:
    with pytest.raises(QFormatsError) as err:
        fn(*args, **kwargs)
    return err.value


def _q8_0_blocks(rows: int, blocks: int, d: float = 0.5) -> np.ndarray:
    blk = np.zeros((rows * blocks, 34), np.uint8)
    blk[:, 0:2] = np.array([d], "<f2").view(np.uint8)
    return blk.reshape(rows, blocks * 34)


def test_unknown_type_is_refused_naming_the_registry():
    """block_type: a name that is no registered ggml type is an argument error listing the types."""
    err = _raises(ggml.block_type, "q4_2")
    assert (err.code, err.tensor, err.actual) == ("argument.invalid", "type", "q4_2")
    assert "q6_k" in err.constraint and "iq4_xs" in err.constraint


def test_type_names_are_case_insensitive():
    """ggml spells its types Q6_K and q6_K; both name the same type."""
    assert ggml.block_type("Q6_K") is ggml.block_type("q6_k") is ggml.TYPES["q6_k"]


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
def test_block_data_must_be_uint8(dtype):
    """GGML-1.1: block data of another dtype is ggml.blocks.dtype."""
    err = _raises(ggml.check_blocks, "q8_0", np.zeros((1, 34), dtype))
    assert (err.code, err.tensor, err.actual) == ("ggml.blocks.dtype", "blocks", np.dtype(dtype).name)
    assert str(err) == f"'blocks' must be uint8 q8_0 blocks (got {np.dtype(dtype).name}) [ggml.blocks.dtype, GGML-1.1]"


@pytest.mark.parametrize("shape", [(34,), (1, 1, 34)])
def test_block_data_must_be_two_dimensional(shape):
    """GGML-1.1: rows of blocks are a 2-D array."""
    err = _raises(ggml.check_blocks, "q8_0", np.zeros(shape, np.uint8))
    assert (err.code, err.actual) == ("ggml.blocks.shape", shape)


@pytest.mark.parametrize(("nbytes", "ok"), [(34, True), (68, True), (33, False), (35, False), (0, False)])
def test_rows_must_be_whole_blocks(nbytes, ok):
    """GGML-1.1: a row is a positive whole number of blocks: 34 and 68 bytes are, 0, 33 and 35 are not."""
    arr = np.zeros((2, nbytes), np.uint8)
    if ok:
        assert ggml.check_blocks("q8_0", arr).shape == (2, nbytes)
    else:
        err = _raises(ggml.check_blocks, "q8_0", arr)
        assert (err.code, err.actual) == ("ggml.blocks.shape", (2, nbytes))
        assert "positive multiple of 34 bytes (q8_0)" in err.constraint


@pytest.mark.parametrize(("n", "code"), [(32, None), (64, None), (31, "ggml.n.not_multiple"),
                                         (33, "ggml.n.not_multiple"), (0, "ggml.n.not_multiple"),
                                         (-32, "ggml.n.not_multiple"), (True, "ggml.n.not_multiple")])
def test_declared_row_length_is_a_positive_multiple_of_the_block(n, code):
    """GGML-1.2: n must be a positive multiple of the block size (32 for q8_0); bool is not a length."""
    arr = np.zeros((1, 34), np.uint8)
    if code is None:
        if n == 32:
            assert ggml.check_blocks("q8_0", arr, n=32).shape == (1, 34)
        else:
            err = _raises(ggml.check_blocks, "q8_0", arr, n=n)          # 64 is legal but not this array's
            assert (err.code, err.actual) == ("ggml.blocks.shape", (1, 34))
            assert err.constraint == "of shape (1, 68) for q8_0 and n = 64"
    else:
        err = _raises(ggml.check_blocks, "q8_0", arr, n=n)
        assert (err.code, err.tensor, err.actual) == (code, "n", n)


def test_a_nonfinite_scale_names_field_block_row_and_spread():
    """GGML-3.1: the first non-finite d is named with its block and row, and the spread counts the rest."""
    blocks = _q8_0_blocks(3, 4)
    for r, b in ((1, 2), (2, 0), (2, 3)):
        blocks[r, b * 34:b * 34 + 2] = np.array([np.inf], "<f2").view(np.uint8)
    err = _raises(ggml.check_blocks, "q8_0", blocks, tensor="w")
    assert (err.code, err.tensor) == ("ggml.scale.nonfinite", "w")
    assert err.actual == "d = inf in block 2 of row 1; 3 blocks in 2 rows are non-finite, (row, block): " \
                         "(1, 2), (2, 0), (2, 3)"


def test_one_nonfinite_scale_has_no_spread():
    """GGML-3.1: a single bad block is named alone."""
    blocks = _q8_0_blocks(1, 2)
    blocks[0, 34:36] = np.array([np.nan], "<f2").view(np.uint8)
    assert _raises(ggml.check_blocks, "q8_0", blocks).actual == "d = NaN in block 1 of row 0"


def test_decoding_is_not_refused_for_nonfinite_scales_unless_strict():
    """GGML-2.4: a decoder may evaluate invalid blocks as ggml does; strict=True rejects them first."""
    blocks = _q8_0_blocks(1, 1)
    blocks[0, 0:2] = np.array([np.inf], "<f2").view(np.uint8)
    blocks[0, 2] = 1
    y = ggml.dequantize("q8_0", blocks)
    assert y[0, 0] == np.inf and np.isnan(y[0, 1])          # inf * 1, inf * 0
    assert _raises(ggml.dequantize, "q8_0", blocks, strict=True).code == "ggml.scale.nonfinite"


def test_findings_count_blocks_rows_and_kinds():
    """GGML-3.1 in files: one error per tensor with the count of bad blocks and rows and of each kind."""
    blocks = _q8_0_blocks(4, 2)
    for (r, b), v in zip(((0, 1), (3, 0), (3, 1)), (np.nan, np.inf, -np.inf)):
        blocks[r, b * 34:b * 34 + 2] = np.array([v], "<f2").view(np.uint8)
    (f,) = scale_findings(Q8_0, blocks, "blk.0.attn_k.weight")
    assert (f.code, f.severity, f.clause, f.tensor, f.count) == ("ggml.scale.nonfinite", "error", "GGML-3.1",
                                                                  "blk.0.attn_k.weight", 3)
    assert f.message == ("'blk.0.attn_k.weight' (q8_0) has non-finite scales in 3 of 8 blocks in 2 of 4 rows "
                         "(1 NaN, 1 inf, 1 -inf); first d = NaN in block 1 of row 0; (row, block): (0, 1), (3, 0), "
                         "(3, 1); ggml_validate_row_data refuses such a row")


@pytest.mark.parametrize("bad", [SHOWN_BLOCKS, SHOWN_BLOCKS + 1])
def test_where_lists_at_most_the_shown_blocks(bad):
    """Findings show the first SHOWN_BLOCKS blocks, and '...' only when there are more."""
    blocks = _q8_0_blocks(1, bad)
    blocks[0, 0:bad * 34].reshape(bad, 34)[:, 0:2] = np.array([-1.0], "<f2").view(np.uint8)
    (f,) = scale_findings(Q8_0, blocks, "t")
    assert f.code == "ggml.scale.negative" and f.count == bad
    assert f.message.endswith(", ...; no ggml encoder writes one (the blocks decode, but the file was not "
                              "written by llama.cpp's quantizer as is)") == (bad > SHOWN_BLOCKS)


def test_negative_zero_is_not_negative():
    """GGML-3.2: -0.0 is not negative."""
    assert scale_findings(Q8_0, _q8_0_blocks(1, 2, d=-0.0), "t") == []


def test_a_negative_scale_only_warns_where_the_encoders_never_write_one():
    """GGML-3.2: q4_0's d is signed (d = max / -8), so a negative d is no finding; q8_0's is a warning."""
    q4_0 = ggml.TYPES["q4_0"]
    blk = np.zeros((1, 18), np.uint8)
    blk[0, 0:2] = np.array([-1.0], "<f2").view(np.uint8)
    assert scale_findings(q4_0, blk, "t") == []
    (f,) = scale_findings(Q8_0, _q8_0_blocks(1, 1, d=-1.0), "t")
    assert (f.code, f.severity, f.clause) == ("ggml.scale.negative", "warning", "GGML-3.2")


def test_plain_tensors_count_nonfinite_elements():
    """GGML-3.3: an F16 tensor's NaN, inf and -inf are counted, the first named by [row, column]."""
    f16 = ggml.TYPES["f16"]
    values = np.zeros((3, 8), np.float16)
    values[1, 5], values[2, 0], values[2, 7] = np.nan, np.inf, -np.inf
    (f,) = scale_findings(f16, values.view(np.uint8), "norm")
    assert (f.code, f.count) == ("ggml.float.nonfinite", 3)
    assert f.message == ("'norm' (f16) has 3 non-finite elements (1 NaN, 1 inf, 1 -inf) in 2 of 3 rows; "
                         "first NaN at [1, 5]; ggml_validate_row_data refuses such a tensor")


def test_bf16_widens_exactly():
    """GGML-6.2: a BF16 element is the upper half of a float32."""
    x = np.array([[1.5, -0.0, 3.0e38, 1e-40]], np.float32)
    raw = (x.view(np.uint32) >> 16).astype("<u2").view(np.uint8)
    y = ggml.dequantize("bf16", raw)
    assert np.array_equal(y.view(np.uint32), (x.view(np.uint32) & 0xFFFF0000))


def test_large_inputs_decode_in_chunks_identically():
    """The decoder's chunking (DECODE_CHUNK_BYTES) is invisible: a multi-chunk decode equals per-row decodes. iq4_nl
    (18-byte blocks: d, then 16 bytes of codes) decodes through the family's passes, not passes of its own."""
    from qformats.formats.ggml import codec

    assert not getattr(ggml.TYPES["iq4_nl"].decode, "bounded_passes", False)
    rng = np.random.default_rng(3)
    blocks = rng.integers(0, 256, (64, 4 * 18), dtype=np.uint8)
    blocks.reshape(-1, 18)[:, 1] &= 0x3B                       # finite d
    old = codec.DECODE_CHUNK_BYTES
    codec.DECODE_CHUNK_BYTES = 18 * 5                          # 5 blocks a pass: 52 passes, a ragged last
    try:
        chunked = ggml.dequantize("iq4_nl", blocks)
    finally:
        codec.DECODE_CHUNK_BYTES = old
    whole = np.concatenate([ggml.dequantize("iq4_nl", row[None]) for row in blocks])
    assert np.array_equal(chunked.view(np.uint32), whole.view(np.uint32))


@pytest.mark.parametrize(("x", "code", "actual"), [
    (np.zeros((2, 32), np.float64), "ggml.input.dtype", "float64"),
    (np.zeros(32, np.float32), "ggml.input.shape", (32,)),
    (np.zeros((2, 31), np.float32), "ggml.n.not_multiple", 31),
    (np.zeros((2, 0), np.float32), "ggml.n.not_multiple", 0),
])
def test_encoder_input_is_checked_first(x, code, actual):
    """GGML-4.1: float32 (rows, n) with n a positive multiple of the block size."""
    err = _raises(ggml.quantize, "q8_0", x)
    assert (err.code, err.actual) == (code, actual)


def test_encoder_accepts_the_block_size_exactly():
    """GGML-1.2 at the limit: one block of 32 encodes to 34 bytes."""
    assert ggml.quantize("q8_0", np.ones((1, 32), np.float32)).shape == (1, 34)


@pytest.mark.parametrize(("w", "code", "actual"), [
    (np.ones(256, np.float64), "ggml.input.dtype", "float64"),
    (np.ones(255, np.float32), "ggml.importance.shape", (255,)),
    (np.ones((1, 256), np.float32), "ggml.importance.shape", (1, 256)),
])
def test_importance_vectors_are_checked(w, code, actual):
    """GGML-4.2: one float32 weight per column."""
    err = _raises(ggml.quantize, "q6_k", np.ones((1, 256), np.float32), importance=w)
    assert (err.code, err.tensor, err.actual) == (code, "importance", actual)


def test_a_type_without_an_importance_path_refuses_a_vector():
    """GGML-4.2: q8_0's ggml encoder ignores imatrix, so qformats refuses one instead of pretending."""
    err = _raises(ggml.quantize, "q8_0", np.ones((1, 32), np.float32), importance=np.ones(32, np.float32))
    assert (err.code, err.tensor) == ("ggml.importance.unsupported", "importance")


def test_a_type_that_needs_an_importance_vector_refuses_to_encode_without_one():
    """GGML-4.2 / GGML-4.3: iq2_xxs needs an imatrix in ggml, and its encoder is informative here."""
    err = _raises(ggml.quantize, "iq2_xxs", np.ones((1, 256), np.float32))
    assert err.code == "ggml.encoder.missing"


def test_required_importance_is_refused_before_encoding(monkeypatch):
    """GGML-4.2: a type whose ggml encoder requires an imatrix refuses to encode without one."""
    import dataclasses

    strict = dataclasses.replace(ggml.TYPES["q6_k"], requires_importance=True)
    err = _raises(ggml.quantize, strict, np.ones((1, 256), np.float32))
    assert (err.code, err.tensor) == ("ggml.importance.required", "importance")
    assert ggml.quantize(strict, np.ones((1, 256), np.float32), importance=np.ones(256, np.float32)).shape == (1, 210)
