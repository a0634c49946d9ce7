"""Tests with teeth for the block type record (issue 33 item 3: ``qformats/formats/ggml/base.py``; spec/ggml.md
GGML-1.3, GGML-2).

Expected values from independent routes: each type's id and geometry from gguf-py's own tables
(``GGMLQuantizationType``, ``GGML_QUANT_SIZES``), and float16 fields worked by hand from IEEE 754 binary16
bit patterns (GGML-1.3: little-endian, widened exactly).
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml.base import F32, fp16_field

gguf = pytest.importorskip("gguf")
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

IN_GGUF_PY = sorted(n for n in ggml.TYPES if n.upper() in gguf.GGMLQuantizationType.__members__)
SIZED_BY_GGUF_PY = [n for n in IN_GGUF_PY if n != "q8_1"]    # gguf-py 0.19 sizes q8_1 by its pre-2024 struct


@pytest.mark.parametrize("name", SIZED_BY_GGUF_PY)
def test_geometry_and_id_are_gguf_pys(name):
    """GGML-2: a type's id, block_size and type_size are gguf-py's (q2_0, newer than gguf-py 0.19, aside)."""
    bt, qtype = ggml.TYPES[name], gguf.GGMLQuantizationType[name.upper()]
    assert bt.ggml.type_id == qtype.value and bt.ggml.name.lower() == name
    assert (bt.block_size, bt.type_size) == GGML_QUANT_SIZES[qtype]


def test_q8_1_is_ggmls_struct():
    """LEG-7: q8_1 is id 9 (gguf-py) and ggml's block_q8_1 {fp16 d, fp16 s, int8 qs[32]}: 32 weights in
    2 + 2 + 32 = 36 bytes (gguf-py 0.19 still says 40, the old float32 d and s)."""
    bt = ggml.TYPES["q8_1"]
    assert (bt.ggml.type_id, bt.block_size, bt.type_size) == (gguf.GGMLQuantizationType.Q8_1.value, 32, 36)


def test_every_type_but_q2_0_is_in_gguf_py():
    """The geometry test above covers the registry: only q2_0 (since 0.25.3) is missing from gguf-py 0.19."""
    assert sorted(set(ggml.TYPES) - set(IN_GGUF_PY)) == ["q2_0"]


def _blocks(*halves: int, lead: int = 1, tail: int = 1) -> np.ndarray:
    """One block per row: ``lead`` 0xAA bytes, the binary16 patterns little-endian, ``tail`` 0x55 bytes."""
    rows = []
    for pats in halves if isinstance(halves[0], tuple) else (halves,):
        body = np.array(pats, "<u2").view(np.uint8)
        rows.append(np.concatenate([np.full(lead, 0xAA, np.uint8), body, np.full(tail, 0x55, np.uint8)]))
    return np.stack(rows)


def test_fp16_field_reads_little_endian_binary16_exactly():
    """GGML-1.3 by hand: 0x3C00 = 1, 0xC000 = -2, 0x3555 = 0.333251953125, 0x0001 = 2^-24 (subnormal),
    0x8000 = -0, 0x7C00 = inf, each at byte 1 + 2k of a block, as float32 (nb, count)."""
    blk = _blocks((0x3C00, 0xC000, 0x3555), (0x0001, 0x8000, 0x7C00))
    got = fp16_field(blk, 1, 3)
    assert got.dtype == F32 and got.shape == (2, 3)
    expected = np.array([[1.0, -2.0, 0.333251953125], [2.0 ** -24, -0.0, np.inf]], F32)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_fp16_field_reads_one_value_by_default():
    """``count`` defaults to one field: 0x3555 at byte 3 is 0.333251953125 alone (not its neighbour)."""
    blk = _blocks(0x3C00, 0x3555, 0xC000)
    np.testing.assert_array_equal(fp16_field(blk, 3), np.array([[0.333251953125]], F32))


def test_fp16_field_of_a_sliced_block_array():
    """A strided view of the blocks (every other row) reads the same fields as a contiguous copy."""
    blk = _blocks((0x3C00, 0x4000), (0xBC00, 0xC000), (0x4200, 0x4400))
    np.testing.assert_array_equal(fp16_field(blk[::2], 1, 2), np.array([[1.0, 2.0], [3.0, 4.0]], F32))
