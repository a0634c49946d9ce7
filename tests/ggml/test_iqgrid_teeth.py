"""Tests with teeth for the grid i-quants (issue 33 item 3: ``qformats/formats/ggml/iqgrid.py``,
spec/ggml_iquants.md IQ-1.2 .. IQ-1.4, IQ-4 .. IQ-10).

Expected values come from routes independent of the code under test: the float32 values ggml 0.10.1's
``dequantize_row_<type>`` returned for blocks under every class of super-scale (``iqgrid_teeth_ggml.npz``, recorded
by ``record_iqgrid_teeth.py`` and checked against the live library when QFORMATS_GGML_LIB is set), the grid tables'
entries taken apart byte by byte with Python integers, and bytes worked by hand from the IQ-10.1 diagram.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import iq_tables as T
from qformats.formats.ggml import iqgrid

F32 = np.float32
TEETH = Path(__file__).with_name("iqgrid_teeth_ggml.npz")
LIB = os.environ.get("QFORMATS_GGML_LIB")
TYPES = ["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"]
# grid name -> (table, bytes per entry, signed bytes), IQ-1.2
GRID_TABLES = {"iq2xxs": (T.IQ2XXS_GRID, 8, False), "iq2xs": (T.IQ2XS_GRID, 8, False), "iq2s": (T.IQ2S_GRID, 8, False),
               "iq3xxs": (T.IQ3XXS_GRID, 4, False), "iq3s": (T.IQ3S_GRID, 4, False), "iq1s": (T.IQ1S_GRID, 8, True)}


def _recorded(name: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(TEETH) as data:
        return data[f"dec_{name}.blocks"], data[f"dec_{name}.expected"]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def _entry_bytes(table: tuple[int, ...], width: int, signed: bool) -> list[list[int]]:
    """Byte j of each little-endian entry, by integer shifts: what ``(const uint8_t *)(grid + i)`` reads."""
    rows = [[(v >> (8 * j)) & 0xFF for j in range(width)] for v in table]
    return [[b - 256 if signed and b > 127 else b for b in row] for row in rows]


# ---------------------------------------------------------------------------------------------
# decoders (IQ-4.2 .. IQ-10.2)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TYPES)
def test_decoder_is_ggml_on_every_scale_class(name):
    """GGML-2.2, IQ-4.2 .. IQ-10.2, IQ-1.3: ``dequantize_row_<type>`` bit for bit on random codes under a super-scale
    of zero, +-0, subnormal, negative, largest, +-inf and NaN (a NaN's sign flipped by the sign byte)."""
    blocks, expected = _recorded(name)
    with np.errstate(all="ignore"):
        got = ggml.dequantize(name, blocks)
    np.testing.assert_array_equal(_bits(got), _bits(expected))


def test_iq1m_scale_is_a_float32_d():
    """IQ-10.1, IQ-10.3: D is the float16 with bits D_0 | D_1 << 4 | D_2 << 8 | D_3 << 12, read as ggml reads it
    (GGML_FP16_TO_FP32: a float32): sc = 0x2000, 0xD000, 0x4000, 0xC000 give 0xC4D2 = -(1 + 210/1024) * 4."""
    blk = np.zeros((1, 56), np.uint8)
    blk[0, 48:56] = [0x00, 0x20, 0x00, 0xD0, 0x00, 0x40, 0x00, 0xC0]
    d = ggml.TYPES["iq1_m"].scales(blk)["d"]
    assert d.dtype == F32 and d.tolist() == [[-4.8203125]]


# ---------------------------------------------------------------------------------------------
# iq1_m's set_scale (IQ-10.1): nibble w of the float16 into the top of scale word w
# ---------------------------------------------------------------------------------------------


def test_iq1m_set_scale_writes_only_the_top_nibbles():
    """IQ-10.1 ``sc[w]: [D_w 4][...12 bits of sub-block scales]``: setting 0.25 (0x3400), -65504 (0xFBFF) and 0.1
    (nearest float16 0x2E66) rewrites the high nibble of bytes 49, 51, 53, 55 to D_0 .. D_3 and nothing else."""
    rng = np.random.default_rng(10)
    blk = rng.integers(0, 256, (3, 56), dtype=np.uint8)
    want = blk.copy()
    for row, bits in enumerate([0x3400, 0xFBFF, 0x2E66]):
        for w in range(4):
            want[row, 49 + 2 * w] = (want[row, 49 + 2 * w] & 0x0F) | (((bits >> (4 * w)) & 0xF) << 4)
    ggml.TYPES["iq1_m"].set_scale(blk, [0.25, -65504.0, 0.1])
    np.testing.assert_array_equal(blk, want)


def test_iq1m_set_scale_takes_float32_values():
    """GGML-5.1 (set_scale writes float16 values "as near as the field can hold them"): float32 input is narrowed to
    float16 first (1 + 2^-11 + 2^-20 -> 0x3C01, 1e5 -> inf 0x7C00), not reinterpreted."""
    blk = np.zeros((2, 56), np.uint8)
    with np.errstate(over="ignore"):                    # 1e5 -> inf: the defined result
        ggml.TYPES["iq1_m"].set_scale(blk, np.array([1 + 2.0 ** -11 + 2.0 ** -20, 1e5], F32))
    assert blk[:, 49:56:2].tolist() == [[0x10, 0x00, 0xC0, 0x30], [0x00, 0x00, 0xC0, 0x70]]
    assert not blk[:, :49].any() and not blk[:, 48:56:2].any()


# ---------------------------------------------------------------------------------------------
# the grids as the module builds them, built at test time
# ---------------------------------------------------------------------------------------------
#
# iqgrid.py builds its grids once, at import; the mutation runner (tests/mutation/run.py) switches a mutant on only
# for calls made at test time. Executing the module's file anew, under its own name and without registering it,
# builds the same grids and decoders at test time.


@pytest.fixture
def fresh():
    spec = importlib.util.spec_from_file_location(iqgrid.__name__, iqgrid.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("grid", list(GRID_TABLES))
def test_fresh_grids_are_the_tables_bytes(fresh, grid):
    """IQ-1.2, IQ-1.4: weight j of grid entry i is byte j of the little-endian entry, unsigned (0 .. 62) for the
    iq2/iq3 grids and signed (-1, 0, 1) for iq1s_grid, as float32."""
    table, width, signed = GRID_TABLES[grid]
    got = fresh.GRIDS[grid]
    assert got.dtype == F32 and got.shape == (len(table), width)
    assert got.tolist() == _entry_bytes(table, width, signed)


@pytest.mark.parametrize("name", TYPES)
def test_fresh_decoders_are_ggml(fresh, name):
    """GGML-2.2, IQ-4.2 .. IQ-10.2: the decoders over grids built at test time are ggml's, bit for bit."""
    bt = {t.name: t for t in fresh.TYPES}[name]
    blocks, expected = _recorded(name)
    with np.errstate(all="ignore"):
        got = bt.decode(blocks.reshape(-1, bt.type_size))
    np.testing.assert_array_equal(_bits(got.reshape(expected.shape)), _bits(expected))


def test_grid_bytes_are_unsigned_unless_asked():
    """IQ-1.2, IQ-1.4: an entry's bytes are uint8 weights (``(const uint8_t *)``) unless the grid is signed
    (``(const int8_t *)``, iq1s_grid): entries 0x80FF and 0x017F, two bytes each."""
    assert iqgrid._grid((0x80FF, 0x017F), 2).tolist() == [[255, 128], [127, 1]]
    assert iqgrid._grid((0x80FF, 0x017F), 2, signed=True).tolist() == [[-1, -128], [127, 1]]


# ---------------------------------------------------------------------------------------------
# the recorded values are ggml's (when the oracle is at hand)
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to run")
def test_recorded_values_are_the_live_librarys():
    """GGML-2.2: every recorded block row decodes in the live ggml build to the recorded values."""
    spec = importlib.util.spec_from_file_location("record_iqgrid_teeth",
                                                  Path(__file__).with_name("record_iqgrid_teeth.py"))
    rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rec)
    from conformance.adapters import ggml as oracle

    with np.errstate(all="ignore"):
        live = rec.record(oracle)
    with np.load(TEETH) as data:
        assert sorted(data.files) == sorted(live)
        for key in data.files:
            np.testing.assert_array_equal(np.atleast_1d(data[key]).view(np.uint8),
                                          np.atleast_1d(live[key]).view(np.uint8), err_msg=key)
