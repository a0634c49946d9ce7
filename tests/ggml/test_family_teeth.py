"""Tests with teeth for the family's generic modules (issue 33 item 3): ``ggml/checks.py`` and ``ggml/codec.py``.

Each test pins one behaviour the mutation run (``make mutation MODULE=qformats/formats/ggml/checks.py``, and
``.../codec.py``) found unobserved: whole refusals (tests/whole_error.py), findings' whole messages, the labels
and counts of non-finite scales, and the pass sizes that bound memory. Expected values come from the spec's
block layouts (fp16 ``d`` at byte 0; q4_K's ``dmin`` at byte 2, Q4K-1; q8_1's ``s`` at byte 2, LEG-7.2), NumPy's
own float16 widening (GGML-1.3), or the documented pass rule; never from the code under test. Where a test
needs a type the registry does not have (a scale that overflows when computed, a spy decoder), it derives one
from a registered type with ``dataclasses.replace``: the modules take any :class:`BlockType`.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from whole_error import refusal, whole

from qformats.formats import ggml
from qformats.formats.ggml import checks, codec
from qformats.formats.ggml.base import fp16_field
from qformats.formats.ggml.checks import first_bad_scale, scale_findings

Q8_0 = ggml.TYPES["q8_0"]      # 34 bytes: fp16 d at byte 0, 32 int8 (LEG-6.1)
Q8_1 = ggml.TYPES["q8_1"]      # 36 bytes: fp16 d at 0, fp16 s at 2, 32 int8 (LEG-7.2)
Q4_K = ggml.TYPES["q4_k"]      # 144 bytes: fp16 d at 0, fp16 dmin at 2 (Q4K-1)
F16 = ggml.TYPES["f16"]        # plain float16 elements, 2 bytes each (GGML-6.1)
TAIL = ("no ggml encoder writes one (the blocks decode, but the file was not written by llama.cpp's "
        "quantizer as is)")


def _blocks(rows: int, nb: int, size: int, **fp16_at: list) -> np.ndarray:
    """(rows, nb * size) zero blocks with the float16 fields at the byte offsets given, row-major per block."""
    blk = np.zeros((rows * nb, size), np.uint8)
    for offset, values in fp16_at.items():
        at = int(offset.lstrip("o"))
        blk[:, at:at + 2] = np.asarray(values, "<f2").reshape(-1, 1).view(np.uint8)
    return blk.reshape(rows, nb * size)


def _silently(fn, *args, **kwargs):
    """fn(...) with every warning an error: a floating-point warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


# ---- checks.py: labels, spread, counts (GGML-3.1, GGML-3.2, GGML-3.3) -------------------------------------

def test_a_negative_infinite_scale_is_labelled_minus_inf():
    """GGML-3.1: the refusal names the first bad field with its value; -inf is "-inf", not "inf"."""
    blocks = _blocks(1, 1, 34, o0=[-np.inf])
    assert whole(lambda: ggml.check_blocks("q8_0", blocks, tensor="w")) == refusal(
        "ggml.scale.nonfinite", "w", "q8_0 blocks with finite d", "d = -inf in block 0 of row 0")


def test_two_bad_blocks_are_a_spread():
    """GGML-3.1: "how many blocks and rows are affected": two bad blocks are counted and listed (one is not)."""
    blocks = _blocks(1, 2, 34, o0=[np.nan, np.nan])
    assert whole(lambda: ggml.check_blocks("q8_0", blocks, tensor="w")) == refusal(
        "ggml.scale.nonfinite", "w", "q8_0 blocks with finite d",
        "d = NaN in block 0 of row 0; 2 blocks in 1 rows are non-finite, (row, block): (0, 0), (0, 1)")


def test_a_bad_first_field_is_found_when_the_second_is_finite():
    """GGML-3.1: q4_K's d = inf makes the block invalid even though its dmin (checked after it) is finite."""
    (f,) = scale_findings(Q4_K, _blocks(1, 1, 144, o0=[np.inf], o2=[1.0]), "w")
    assert (f.code, f.tensor, f.count) == ("ggml.scale.nonfinite", "w", 1)
    assert f.message == ("'w' (q4_k) has non-finite scales in 1 of 1 blocks in 1 of 1 rows (1 inf); first d = inf "
                         "in block 0 of row 0; (row, block): (0, 0); ggml_validate_row_data refuses such a row")


def test_kinds_are_counted_over_every_field():
    """GGML-3.1: a block whose d and dmin are both NaN is one bad block holding two NaN values."""
    (f,) = scale_findings(Q4_K, _blocks(1, 1, 144, o0=[np.nan], o2=[np.nan]), "w")
    assert f.message == ("'w' (q4_k) has non-finite scales in 1 of 1 blocks in 1 of 1 rows (2 NaN); first d = NaN "
                         "in block 0 of row 0; (row, block): (0, 0); ggml_validate_row_data refuses such a row")


def test_a_plain_tensor_finding_names_its_tensor():
    """GGML-3.3: the ggml.float.nonfinite finding carries the tensor's name."""
    values = np.array([[1.0, np.inf]], np.float16)
    (f,) = scale_findings(F16, values.view(np.uint8), "output_norm.weight")
    assert (f.code, f.tensor, f.count) == ("ggml.float.nonfinite", "output_norm.weight", 1)


def test_negative_scales_are_counted_by_block_and_row_with_every_field_named():
    """GGML-3.2: q4_K's d and dmin are never negative from ggml's encoders; one negative d in row 0 and one
    negative dmin in row 1 are two blocks in two rows, and the warning names both fields."""
    blocks = _blocks(2, 1, 144, o0=[-1.0, 1.0], o2=[1.0, -2.0])
    (f,) = scale_findings(Q4_K, blocks, "blk.3.ffn_up.weight")
    assert (f.code, f.severity, f.tensor, f.count) == ("ggml.scale.negative", "warning", "blk.3.ffn_up.weight", 2)
    assert f.message == ("'blk.3.ffn_up.weight' (q4_k) has a negative d/dmin in 2 of 2 blocks in 2 rows, "
                         f"(row, block): (0, 0), (1, 0); {TAIL}")


def test_a_negative_field_outside_never_negative_is_no_finding():
    """GGML-3.2 covers only the fields a type lists: q8_1's s = d * sum(qs) is signed, so a negative s is fine."""
    assert scale_findings(Q8_1, _blocks(1, 2, 36, o0=[1.0, 1.0], o2=[-3.0, -0.5]), "t") == []


def test_never_negative_fields_are_checked_whatever_their_order():
    """GGML-3.2: a type whose listed field comes after an unlisted one still has that field checked."""
    s_only = dataclasses.replace(Q8_1, never_negative=("s",))
    (f,) = scale_findings(s_only, _blocks(1, 1, 36, o0=[-1.0], o2=[-2.0]), "t")
    assert (f.code, f.tensor, f.count) == ("ggml.scale.negative", "t", 1)
    assert f.message == f"'t' (q8_1) has a negative s in 1 of 1 blocks in 1 rows, (row, block): (0, 0); {TAIL}"


def test_nvfp4_blocks_have_no_invalid_scale():
    """GGML-3.1: nvfp4 has no field ggml_validate_row_data checks (its UE4M3 scales, four a block, have no
    non-finite value, MX-2.4): any bytes pass the check and give no finding."""
    blocks = np.random.default_rng(7).integers(0, 256, (3, 2 * 36), dtype=np.uint8)
    assert ggml.check_blocks("nvfp4", blocks).shape == (3, 72)
    assert scale_findings(ggml.TYPES["nvfp4"], blocks, "t") == []


def test_checking_is_silent_when_a_scale_overflows_as_it_is_computed():
    """GGML-3.1: a scale the type computes (as mxfp4 reads E8M0 as 2^127) that overflows to inf is a finding,
    not a floating-point warning."""
    huge = dataclasses.replace(Q8_0, scales=lambda blk: {"d": fp16_field(blk, 0) * np.float32(2.0 ** 127)})
    blocks = _blocks(1, 1, 34, o0=[2.0])
    (f,) = _silently(scale_findings, huge, blocks, "t")
    assert (f.code, f.count) == ("ggml.scale.nonfinite", 1)


@pytest.mark.parametrize(("row_bytes", "rows_a_pass"), [(1, 4), (2, 2), (3, 1), (4, 1), (5, 1)])
def test_checks_read_as_many_whole_rows_as_fit_a_pass(monkeypatch, row_bytes, rows_a_pass):
    """CHECK_CHUNK_BYTES bounds a pass over a memory-mapped tensor: as many whole rows as fit, at least one.
    With 4 bytes a pass: rows of 1 byte go 4 at a time, of 2 bytes 2, of 3, 4 or 5 bytes one."""
    seen = []

    def spy(blk):
        seen.append(blk.shape[0])
        return {}

    i8 = dataclasses.replace(ggml.TYPES["i8"], scales=spy)        # 1-byte elements: a row of k bytes is k blocks
    monkeypatch.setattr(checks, "CHECK_CHUNK_BYTES", 4)
    assert first_bad_scale(i8, np.zeros((5, row_bytes), np.uint8)) is None
    full, last = divmod(5, rows_a_pass)
    assert seen == [rows_a_pass * row_bytes] * full + ([last * row_bytes] if last else [])


# ---- codec.py: whole refusals (GGML-1.1, GGML-1.2, GGML-4.1, GGML-4.2) ----------------------------------------

def test_blocks_that_are_no_array_are_refused_by_name():
    """GGML-1.1: block data NumPy cannot read as an array is refused naming the tensor."""
    assert whole(lambda: ggml.check_blocks("q8_0", [[1, 2], [3]], tensor="w")) == refusal(
        "tensor.dtype", "w", "an array", "list")


def test_dequantize_names_its_input_blocks():
    """GGML-1.1: dequantize's refusals name its input "blocks"."""
    assert whole(lambda: ggml.dequantize("q8_0", np.zeros((1, 33), np.uint8))) == refusal(
        "ggml.blocks.shape", "blocks", "rows of a positive multiple of 34 bytes (q8_0)", (1, 33))


def test_one_dimensional_blocks_are_refused_whole():
    """GGML-1.1: block data is 2-D (rows, n // block_size * type_size)."""
    assert whole(lambda: ggml.check_blocks("q8_0", np.zeros(34, np.uint8), tensor="w")) == refusal(
        "ggml.blocks.shape", "w", "2-D (rows, n // 32 * 34)", (34,))


def test_rows_of_the_wrong_length_for_n_are_refused_whole():
    """GGML-1.1: with n = 64, a q8_0 row is 64 // 32 * 34 = 68 bytes."""
    assert whole(lambda: ggml.check_blocks("q8_0", np.zeros((1, 34), np.uint8), tensor="w", n=64)) == refusal(
        "ggml.blocks.shape", "w", "of shape (1, 68) for q8_0 and n = 64", (1, 34))


def test_rows_of_part_blocks_are_refused_whole():
    """GGML-1.1: without n, a row is a positive whole number of 34-byte q8_0 blocks; 33 bytes is not."""
    assert whole(lambda: ggml.check_blocks("q8_0", np.zeros((2, 33), np.uint8), tensor="w")) == refusal(
        "ggml.blocks.shape", "w", "rows of a positive multiple of 34 bytes (q8_0)", (2, 33))


def test_a_declared_n_off_the_block_is_refused_whole():
    """GGML-1.2: n = 33 is no multiple of q8_0's 32."""
    assert whole(lambda: ggml.check_blocks("q8_0", np.zeros((1, 34), np.uint8), n=33)) == refusal(
        "ggml.n.not_multiple", "n", "a positive multiple of 32 (q8_0)", 33)


def test_a_float_n_is_refused_even_when_whole():
    """GGML-1.2: a row length is an integer; 32.0 is not one, though 32.0 % 32 == 0."""
    assert whole(lambda: ggml.check_blocks("q8_0", np.zeros((1, 34), np.uint8), n=32.0)) == refusal(
        "ggml.n.not_multiple", "n", "a positive multiple of 32 (q8_0)", 32.0)


def test_a_numpy_integer_n_is_a_length():
    """GGML-1.2: a NumPy integer (a GGUF header's ne[0]) is a row length like a Python int."""
    assert ggml.check_blocks("q8_0", np.zeros((1, 34), np.uint8), n=np.int64(32)).shape == (1, 34)


@pytest.mark.parametrize(("n", "ok"), [(1, True), (0, False)])
def test_a_plain_type_takes_rows_of_one_element(n, ok):
    """GGML-1.2 at the limit: block_size(f32) is 1, so n = 1 is a row length and n = 0 is not."""
    arr = np.zeros((2, 4 * n), np.uint8)
    if ok:
        assert ggml.check_blocks("f32", arr, n=n).shape == (2, 4)
    else:
        assert whole(lambda: ggml.check_blocks("f32", arr, n=n)) == refusal(
            "ggml.n.not_multiple", "n", "a positive multiple of 1 (f32)", 0)


def test_encoder_input_that_is_no_array_is_refused_by_name():
    """GGML-4.1: encoder input NumPy cannot read as an array is refused naming it "x"."""
    assert whole(lambda: ggml.quantize("q8_0", [[1.0, 2.0], [3.0]])) == refusal("tensor.dtype", "x", "an array", "list")


def test_encoder_input_of_another_dtype_is_refused_whole():
    """GGML-4.1: other dtypes are refused with ggml.input.dtype, naming the input "x"."""
    assert whole(lambda: ggml.quantize("q8_0", np.zeros((1, 32), np.float64))) == refusal(
        "ggml.input.dtype", "x", "float32", "float64")


def test_encoder_input_of_another_rank_is_refused_whole():
    """GGML-4.1: other ranks are refused with ggml.input.shape."""
    assert whole(lambda: ggml.check_input("q8_0", np.zeros(32, np.float32), tensor="h")) == refusal(
        "ggml.input.shape", "h", "2-D (rows, n)", (32,))


def test_encoder_input_off_the_block_is_refused_naming_the_input():
    """GGML-4.1 / GGML-1.2: n = 31 is refused as the input's, not as a declared n."""
    assert whole(lambda: ggml.quantize("q8_0", np.zeros((1, 31), np.float32))) == refusal(
        "ggml.n.not_multiple", "x", "a positive multiple of 32 (q8_0)", 31)


def test_checked_encoder_input_is_native_contiguous_float32():
    """GGML-4.1 / GGML-1.3: big-endian float32 (a '>f4' array) is float32 and accepted; the encoder gets it in
    the host's order, contiguous, with the same values."""
    x = np.arange(64, dtype=">f4").reshape(1, 64)[:, ::2]
    got = ggml.check_input("q8_0", x)
    assert got.dtype == np.dtype("=f4") and got.flags.c_contiguous
    assert np.array_equal(got, np.arange(0, 64, 2, dtype=np.float32)[None])


def test_a_type_without_an_encoder_is_refused_whole():
    """GGML-4.3: iq2_xxs has no reference encoder in qformats."""
    assert whole(lambda: ggml.quantize("iq2_xxs", np.ones((1, 256), np.float32))) == refusal(
        "ggml.encoder.missing", "type", "a type with a reference encoder (spec says which)", "iq2_xxs")


def test_an_importance_vector_for_a_type_without_the_path_is_refused_whole():
    """GGML-4.2: q8_0's ggml encoder has no importance path."""
    x, w = np.ones((1, 32), np.float32), np.ones(32, np.float32)
    assert whole(lambda: ggml.quantize("q8_0", x, importance=w)) == refusal(
        "ggml.importance.unsupported", "importance", "None: q8_0 has no importance path", "an importance vector")


def test_an_importance_vector_that_is_no_array_is_refused_by_name():
    """GGML-4.2: an importance vector NumPy cannot read is refused naming "importance"."""
    x = np.ones((1, 256), np.float32)
    assert whole(lambda: ggml.quantize("q6_k", x, importance=[[1.0], [1.0, 2.0]])) == refusal(
        "tensor.dtype", "importance", "an array", "list")


def test_an_importance_vector_of_another_dtype_is_refused_whole():
    """GGML-4.2: the importance vector is float32."""
    x = np.ones((1, 256), np.float32)
    assert whole(lambda: ggml.quantize("q6_k", x, importance=np.ones(256, np.float64))) == refusal(
        "ggml.input.dtype", "importance", "float32", "float64")


def test_an_importance_vector_of_another_length_is_refused_whole():
    """GGML-4.2: one weight per column: (256,) for n = 256, and (255,) is refused."""
    x = np.ones((1, 256), np.float32)
    assert whole(lambda: ggml.quantize("q6_k", x, importance=np.ones(255, np.float32))) == refusal(
        "ggml.importance.shape", "importance", "of shape (256,)", (255,))


def test_a_required_importance_vector_is_refused_whole_when_missing():
    """GGML-4.2: a type ggml refuses to encode without an imatrix (ggml_quantize_requires_imatrix)."""
    needy = dataclasses.replace(ggml.TYPES["q6_k"], requires_importance=True)
    assert whole(lambda: ggml.quantize(needy, np.ones((1, 256), np.float32))) == refusal(
        "ggml.importance.required", "importance",
        "an importance vector (q6_k cannot be encoded without one, ggml_quantize_requires_imatrix)", None)


def test_the_encoder_gets_the_importance_vector_as_native_contiguous_float32():
    """GGML-4.2: the type's encoder receives x and the importance vector, each float32 in the host's order."""
    seen = {}

    def spy(x, w):
        seen.update(x=x, w=w)
        return np.zeros((x.shape[0], x.shape[1] // 32 * 18), np.uint8)

    q4_0 = dataclasses.replace(ggml.TYPES["q4_0"], quantize=spy)
    w = np.arange(64, dtype=">f4")[::2]
    assert ggml.quantize(q4_0, np.ones((1, 32), np.float32), importance=w).shape == (1, 18)
    assert seen["w"].dtype == np.dtype("=f4") and seen["w"].flags.c_contiguous
    assert np.array_equal(seen["w"], np.arange(0, 64, 2, dtype=np.float32))


def test_encoding_non_finite_input_is_silent():
    """GGML-4.1: non-finite input is accepted and gives ggml's bytes, without a floating-point warning."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = np.inf, np.nan
    assert _silently(ggml.quantize, "q8_0", x).shape == (1, 34)


def test_decoding_an_invalid_block_is_silent():
    """GGML-2.4: a block with d = inf decodes as ggml does (inf * 0 = NaN) without a floating-point warning."""
    blocks = _blocks(1, 1, 34, o0=[np.inf])
    y = _silently(ggml.dequantize, "q8_0", blocks)
    assert np.isnan(y).all()


# ---- codec.py: decode passes (DECODE_CHUNK_BYTES bounds one pass's temporaries) -------------------------------

def _spy_f16(bounded: bool):
    """f16 with a decoder that records the blocks of each call and the arrays it returns."""
    calls, outs = [], []

    def decode(blk):
        calls.append(blk.shape[0])
        outs.append(F16.decode(blk))
        return outs[-1]

    if bounded:
        decode.bounded_passes = True
    return dataclasses.replace(F16, decode=decode), calls, outs


def _halves(rows: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random float16 (rows, n) as bytes, and their float32 widening by NumPy (exact, GGML-1.3)."""
    v = np.random.default_rng(rows * 100 + n).standard_normal((rows, n)).astype(np.float16) + np.float16(1)
    return v.view(np.uint8), v.astype(np.float32)


@pytest.mark.parametrize(("bounded", "shape", "chunk", "calls", "own_output"), [
    pytest.param(False, (3, 7), 10, [5, 5, 5, 5, 1], False, id="passes-of-5-blocks-ragged-last"),
    pytest.param(False, (1, 3), 1, [1, 1, 1], False, id="a-chunk-under-one-block-still-takes-one"),
    pytest.param(False, (1, 5), 10, [5], True, id="one-pass-at-the-limit-no-copy"),
    pytest.param(True, (3, 7), 10, [21], True, id="bounded-passes-one-call-no-copy"),
])
def test_decoding_goes_in_passes_of_the_chunk(monkeypatch, bounded, shape, chunk, calls, own_output):
    """DECODE_CHUNK_BYTES bounds one pass: a decoder without bounded_passes sees max(1, chunk // type_size)
    blocks a call, each block once, in order (21 float16 in 10-byte passes: 5, 5, 5, 5, 1); when all fits one
    pass, or the decoder is marked bounded_passes (kmachinery_qkx.py), it is called once and its own output
    is returned, not copied. The values are NumPy's float16 widening either way (GGML-1.3)."""
    bt, seen, outs = _spy_f16(bounded)
    raw, want = _halves(*shape)
    monkeypatch.setattr(codec, "DECODE_CHUNK_BYTES", chunk)
    y = ggml.dequantize(bt, raw)
    assert seen == calls
    assert np.shares_memory(y, outs[0]) == own_output
    assert y.dtype == np.float32 and y.shape == shape
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
