"""The diagnoses' byte tables against the formats' own decoders (spec/kernels.md KC-5.1 to KC-5.3).

Where one scale covers both runs that share a code byte, reversing the fields of each code byte (KC-5.1, a
rewrite of the input by the byte offsets in ``PLANES``) and swapping the runs in the output (KC-5.2, by the
weight geometry in ``HALVES``) are two routes to the same values: agreeing on random blocks, they check
each other's tables. The mutant catalogue (tests/mutants/test_diagnoses.py) checks the others against
hand-written wrong kernels.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.diagnoses import HALVES, PLANES, SCALE_MIN, _halves, reverse_fields
from qformats.cases import Case
from qformats.formats import ggml
from qformats.containers.ggml_types import GGML_TYPES
from qformats.formats.ggml.cases import subject_types

SIZES = {t.name.lower(): (t.block_size, t.type_size) for t in GGML_TYPES.values()}


def _random_blocks(fmt: str, rows: int = 3, blocks: int = 2) -> np.ndarray:
    _, size = SIZES[fmt]
    return np.random.default_rng(len(fmt)).integers(0, 256, (rows, blocks * size), dtype=np.uint8)


def _decode(fmt: str, blocks: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return ggml.dequantize(fmt, blocks)


def _with_fields_reversed(fmt: str, blocks: np.ndarray, planes) -> np.ndarray:
    blk = blocks.reshape(-1, SIZES[fmt][1]).copy()
    for start, count, bits in planes:
        blk[:, start:start + count] = reverse_fields(blk[:, start:start + count], bits, 8)
    return blk.reshape(blocks.shape)


@pytest.mark.parametrize("fmt", ["q4_0", "q4_1", "iq4_nl", "mxfp4", "nvfp4", "tq2_0", "iq4_xs"])
def test_fields_reversed_is_halves_swapped_where_one_scale_covers_both_runs(fmt):
    """KC-5.2: for these types the two readings give the same values, so PLANES and HALVES agree."""
    blocks = _random_blocks(fmt)
    plane = PLANES[fmt][:1]                                # the weights' codes (iq4_xs: qs, not scales_l)
    case = Case(id="t", format=fmt, ops=("dequantize",), inputs={"blocks": blocks}, params={}, clauses=(), features=())
    np.testing.assert_array_equal(_decode(fmt, _with_fields_reversed(fmt, blocks, plane)),
                                  _halves(case, _decode(fmt, blocks)))


@pytest.mark.parametrize("fmt", sorted(PLANES))
def test_every_plane_holds_codes_the_decoder_reads(fmt):
    """KC-5.1: reversing the fields of each plane changes the decoded values (the bytes are codes, not padding)."""
    blocks = _random_blocks(fmt)
    for plane in PLANES[fmt]:
        assert not np.array_equal(_decode(fmt, _with_fields_reversed(fmt, blocks, (plane,))), _decode(fmt, blocks),
                                  equal_nan=True), plane


@pytest.mark.parametrize("fmt", sorted(SCALE_MIN))
def test_scale_min_rewrites_are_their_own_inverse_and_change_the_values(fmt):
    """KC-5.3: each exchange, done twice, gives the bytes back; done once, other values."""
    blocks = _random_blocks(fmt)
    for what, rewrite in SCALE_MIN[fmt]:
        blk = blocks.reshape(-1, SIZES[fmt][1]).copy()
        rewrite(blk)
        assert not np.array_equal(_decode(fmt, blk.reshape(blocks.shape)), _decode(fmt, blocks), equal_nan=True), what
        rewrite(blk)
        assert np.array_equal(blk.reshape(blocks.shape), blocks), what


def test_tables_name_only_types_the_runner_judges():
    """Every type in the tables is a GGUF block type the runner judges (q4_K has a format of its own)."""
    assert set(PLANES) | set(HALVES) | set(SCALE_MIN) <= {bt.name for bt in subject_types()} | {"q4_k"}


def test_reverse_fields_on_a_worked_word():
    """0x76543210 read with its 4-bit fields reversed is 0x01234567; 2-bit fields of 0b11100100 give 0b00011011."""
    assert reverse_fields(np.array([0x76543210], np.uint32), 4, 32)[0] == 0x01234567
    assert reverse_fields(np.array([0b11100100], np.uint8), 2, 8)[0] == 0b00011011
