"""The q4_K codec's refusals asserted whole and its llama.cpp evaluation of invalid blocks made without NumPy warnings
(issue 33: tests with teeth; `make mutation MODULE=qformats/formats/q4_k/codec.py`).

Every block is built by hand from the Q4K-2 layout (d at bytes 0-1, dmin at 2-3, scales at 4-15, codes at 16-143);
expected values are worked from spec/q4_k.md, never computed by the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.formats import q4_k
from whole_error import refusal, whole

F16_INF = 0x7C00   # float16 +inf: exponent all ones, mantissa 0


def block_with_inf_d() -> np.ndarray:
    """One row of one block: d = +inf, dmin = 0, every 6-bit scale and min 0, every code 0."""
    blocks = np.zeros((1, 144), np.uint8)
    blocks[0, 0:2] = np.array([F16_INF], "<u2").view(np.uint8)
    return blocks


def test_dequantize_refuses_what_is_no_array():
    """Q4K-5.1: the blocks are an array of uint8 bytes; a ragged list is none."""
    assert whole(lambda: q4_k.dequantize([[1, 2], [3]])) == refusal("tensor.dtype", "blocks", "an array", "list")


def test_dequantize_refusal_names_the_blocks():
    """Q4K-5.1: "blocks are uint8"; float32 ones are refused under the name 'blocks'."""
    assert whole(lambda: q4_k.dequantize(np.zeros((1, 144), np.float32))) == refusal(
        "q4k.blocks.dtype", "blocks", "uint8", "float32")


def test_strict_dequantize_refusal_names_field_block_and_row():
    """Q4K-5.4: a block whose d is inf is invalid; strict decoding refuses it by field, block and row."""
    assert whole(lambda: q4_k.dequantize(block_with_inf_d(), strict=True)) == refusal(
        "q4k.d.nonfinite", "blocks", "blocks with finite float16 d", "d = inf in block 0 of row 0")


@pytest.mark.filterwarnings("error")
def test_lenient_dequantize_evaluates_inf_times_zero_without_warnings():
    """Q4K-3.3: "a decoder MAY still evaluate Q4K-3.1 on it, as llama.cpp does (inf * 0 gives NaN)", silently."""
    y = q4_k.dequantize(block_with_inf_d())
    assert y.shape == (1, 256) and np.isnan(y).all()   # dj = inf * sc(0) = NaN, y = NaN * q - 0 * m


def test_quantize_refusal_names_the_input_x():
    """Q4K-4.1: the encoder's input is float32; int64 is refused under the name 'x'."""
    assert whole(lambda: q4_k.quantize(np.zeros((1, 256), np.int64))) == refusal(
        "q4k.input.dtype", "x", "float32", "int64")
