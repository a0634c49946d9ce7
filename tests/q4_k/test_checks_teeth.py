"""The q4_K validity rules' refusals asserted whole, at each limit and one past (issue 33: tests with teeth;
`make mutation MODULE=qformats/formats/q4_k/checks.py`).

Blocks are built by hand from the Q4K-1.1 layout (d at bytes 0-1, dmin at 2-3 of each 144-byte block); every
expected refusal is worked from spec/q4_k.md (Q4K-4.1, Q4K-4.6, Q4K-5), never computed by the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.formats.q4_k.checks import check_blocks, check_importance, check_input
from whole_error import refusal, whole

F16_INF = 0x7C00        # float16 +inf: exponent all ones, mantissa 0
F16_NAN_LOW = 0x7C01    # float16 NaN whose only mantissa bit is bit 0 (the exponent field alone makes it non-finite)


def blocks_with_d(rows: int, per_row: int, bad: list[tuple[int, int]], bits16: int = F16_INF) -> np.ndarray:
    """``rows`` rows of ``per_row`` zero blocks, the blocks at (row, block) in ``bad`` with d = ``bits16``."""
    blocks = np.zeros((rows, per_row * 144), np.uint8)
    for r, b in bad:
        blocks[r, b * 144:b * 144 + 2] = np.array([bits16], "<u2").view(np.uint8)
    return blocks


# Q4K-5.1 .. Q4K-5.3: structure


def test_check_blocks_names_the_tensor_blocks_by_default():
    """Q4K-5.1: "Block data MUST be uint8"; unnamed, the refused tensor is called 'blocks'."""
    assert whole(lambda: check_blocks(np.zeros((1, 144), np.float32))) == refusal(
        "q4k.blocks.dtype", "blocks", "uint8", "float32")


def test_check_blocks_refuses_what_is_no_array_by_its_name():
    """Q4K-5.1: block data is an array of bytes; a ragged list is none, refused under the caller's name."""
    assert whole(lambda: check_blocks([[1, 2], [3]], tensor="w")) == refusal("tensor.dtype", "w", "an array", "list")


def test_check_blocks_refuses_one_dimensional_blocks():
    """Q4K-5.2: "Block data MUST be 2-D (rows, n / 256 * 144)"; a flat run of 288 bytes is not."""
    assert whole(lambda: check_blocks(np.zeros(288, np.uint8), tensor="w")) == refusal(
        "q4k.blocks.shape", "w", "2-D (rows, n // 256 * 144)", (288,))


@pytest.mark.parametrize("n", [255, 257])
def test_declared_n_off_a_multiple_of_256_is_refused_as_n(n):
    """Q4K-5.3: "n MUST be a positive multiple of 256" -- one under and one over 256, refused under the name 'n'."""
    assert whole(lambda: check_blocks(np.zeros((1, 144), np.uint8), tensor="w", n=n)) == refusal(
        "q4k.n.not_multiple_of_256", "n", "a positive multiple of 256", n)


def test_declared_n_at_256_accepts_one_block_per_row():
    """Q4K-5.2, Q4K-5.3: n = 256 is the smallest row, one 144-byte block per row."""
    check_blocks(np.zeros((3, 144), np.uint8), tensor="w", n=256)


def test_rows_wider_than_the_declared_n_are_refused():
    """Q4K-5.2: with n = 256 a row is 256 / 256 * 144 = 144 bytes; 2 rows of 288 bytes are refused, rows kept."""
    assert whole(lambda: check_blocks(np.zeros((2, 288), np.uint8), tensor="w", n=256)) == refusal(
        "q4k.blocks.shape", "w", "of shape (2, 144) for n = 256", (2, 288))


@pytest.mark.parametrize("width", [0, 143, 145])
def test_undeclared_row_length_off_a_multiple_of_144_is_refused(width):
    """Q4K-5.2: "without a declared n, the row length MUST be a positive multiple of 144" -- 0, 143 and 145 are not."""
    assert whole(lambda: check_blocks(np.zeros((2, width), np.uint8), tensor="w")) == refusal(
        "q4k.blocks.shape", "w", "rows of a positive multiple of 144 bytes", (2, width))


def test_undeclared_row_length_of_144_is_valid():
    """Q4K-5.2: 144 bytes, one block, is the shortest positive multiple of 144."""
    check_blocks(np.zeros((2, 144), np.uint8), tensor="w")


# Q4K-5.4: finite scales, and the count of the blocks that break it


def test_nan_with_only_the_lowest_mantissa_bit_counts_as_non_finite():
    """Q4K-5.4: d is non-finite when its "exponent field [is] all ones"; 0x7C01 is a NaN, so two such blocks are two."""
    blocks = blocks_with_d(1, 2, [(0, 0), (0, 1)], F16_NAN_LOW)
    assert whole(lambda: check_blocks(blocks, tensor="w")) == refusal(
        "q4k.d.nonfinite", "w", "blocks with finite float16 d",
        "d = NaN in block 0 of row 0; 2 blocks in 1 rows are non-finite, (row, block): (0, 0), (0, 1)")


def test_three_bad_blocks_are_all_shown_without_an_ellipsis():
    """Q4K-5.4: the first few offending blocks (three) are listed; with exactly three there is nothing more to elide."""
    blocks = blocks_with_d(3, 1, [(0, 0), (1, 0), (2, 0)])
    assert whole(lambda: check_blocks(blocks, tensor="w")) == refusal(
        "q4k.d.nonfinite", "w", "blocks with finite float16 d",
        "d = inf in block 0 of row 0; 3 blocks in 3 rows are non-finite, (row, block): (0, 0), (1, 0), (2, 0)")


def test_four_bad_blocks_show_three_and_an_ellipsis():
    """Q4K-5.4: one past the three shown, the fourth offending block is elided."""
    blocks = blocks_with_d(2, 2, [(0, 0), (0, 1), (1, 0), (1, 1)])
    assert whole(lambda: check_blocks(blocks, tensor="w")) == refusal(
        "q4k.d.nonfinite", "w", "blocks with finite float16 d",
        "d = inf in block 0 of row 0; 4 blocks in 2 rows are non-finite, (row, block): (0, 0), (0, 1), (1, 0), ...")


# Q4K-4.1: encoder input


def test_check_input_names_the_tensor_x_by_default():
    """Q4K-4.1: the encoder input is float32; unnamed, an int64 input is refused as 'x'."""
    assert whole(lambda: check_input(np.zeros((1, 256), np.int64))) == refusal(
        "q4k.input.dtype", "x", "float32", "int64")


def test_check_input_refuses_what_is_no_array():
    """Q4K-4.1: the input is an array; a ragged list is none."""
    assert whole(lambda: check_input([[1.0, 2.0], [3.0]])) == refusal("tensor.dtype", "x", "an array", "list")


def test_check_input_refuses_one_dimensional_input():
    """Q4K-4.1: the input is float32 (rows, n); a flat vector of 256 weights has no rows."""
    assert whole(lambda: check_input(np.zeros(256, np.float32))) == refusal(
        "q4k.input.shape", "x", "2-D (rows, n)", (256,))


@pytest.mark.parametrize("n", [255, 257])
def test_check_input_refuses_rows_off_a_multiple_of_256(n):
    """Q4K-4.1: "n a positive multiple of 256" -- one under and one over, the row length shown."""
    assert whole(lambda: check_input(np.zeros((2, n), np.float32))) == refusal(
        "q4k.n.not_multiple_of_256", "x", "rows of a positive multiple of 256 weights", n)


def test_check_input_converts_big_endian_float32_to_native_float32():
    """Q4K-4.1: float32 in either byte order is the same values; the encoder gets native float32, not a wider type."""
    x = np.array([[1.5, -2.25] * 128], ">f4")
    got = check_input(x)
    assert got.dtype == np.dtype("<f4") and got.tolist() == x.tolist()


def test_check_input_hands_native_float32_through_without_a_copy():
    """Q4K-4.1: input "MUST be a float32 array"; one already native float32 is used as it is, never copied."""
    x = np.zeros((2, 256), np.float32)
    assert check_input(x) is x


# Q4K-4.6: importance


def test_check_importance_names_the_tensor_importance_by_default():
    """Q4K-4.6: the importance vector is float32; unnamed, a float64 one is refused as 'importance'."""
    assert whole(lambda: check_importance(np.ones(256, np.float64), 256)) == refusal(
        "q4k.input.dtype", "importance", "float32", "float64")


@pytest.mark.parametrize("shape", [(255,), (257,), (1, 256)])
def test_check_importance_refuses_any_shape_but_n(shape):
    """Q4K-4.6: "one weight per column", shape (n,): one short, one long, and a (1, n) row are refused."""
    assert whole(lambda: check_importance(np.ones(shape, np.float32), 256)) == refusal(
        "q4k.importance.shape", "importance", "of shape (256,)", shape)


def test_check_importance_of_shape_n_is_accepted_as_float32():
    """Q4K-4.6: a float32 (n,) vector, here big-endian, is the importance vector, returned as native float32."""
    got = check_importance(np.ones(256, ">f4"), 256)
    assert got.dtype == np.dtype("<f4") and got.shape == (256,)
