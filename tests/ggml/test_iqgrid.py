"""The grid i-quants (spec/ggml_iquants.md IQ-1.2 .. IQ-1.6, IQ-4 .. IQ-10): tables, worked examples, properties.

The tables are checked against ggml-common.h itself (parsed here, independently of the transcription)
and against the digests the spec pins; the worked examples are built from the spec's words and their
values are the spec's hand-worked numbers; the layouts are checked by a float64 decoder written from
the spec's bit diagrams in this file (IQ-1.6 says every step is exact, so float64 must agree bit for
bit); where ``QFORMATS_GGML_LIB`` names a ggml build, the oracle is asked too.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml import iq_tables as T
from qformats.formats.ggml.cases import random_blocks
from qformats.formats.ggml.checks import scale_findings
from qformats.formats.ggml.iqgrid import iq1m_scale_bits

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / ".venv/ggml/ggml_py-0.10.1/vendor/ggml/src"
SPEC = ROOT / "spec/ggml_iquants.md"
GRID_TYPES = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m")
C_WIDTH = {"uint8_t": "<u1", "uint32_t": "<u4", "uint64_t": "<u8"}


def _oracle():
    if not os.environ.get("QFORMATS_GGML_LIB"):
        return None
    from conformance.adapters import ggml as lib

    return lib


def _source(name: str) -> str:
    path = SRC / name
    if not path.exists():
        pytest.skip(f"ggml 0.10.1 sources not unpacked at {SRC} (make ggml-oracle unpacks the sdist)")
    return path.read_text()


def _entries(table: tuple[int, ...], ctype: str) -> bytes:
    return np.array(table, dtype=np.uint64).astype(C_WIDTH[ctype]).tobytes()


# ---------------------------------------------------------------------------------------------
# IQ-1: the tables
# ---------------------------------------------------------------------------------------------


def test_tables_are_ggml_common_h_entry_by_entry():
    """IQ-1.5: "Every table ... is transcribed, entry by entry in ggml's order, from ggml 0.10.1
    src/ggml-common.h ... the GGML_TABLE_BEGIN(type, name, size) blocks of the same names"."""
    text = _source("ggml-common.h")
    found = {m.group(2): (m.group(1), m.group(3), m.group(4)) for m in re.finditer(
        r"GGML_TABLE_BEGIN\((\w+),\s*(\w+),\s*(\w+)\)(.*?)GGML_TABLE_END\(\)", text, re.S)}
    for py_name, (c_name, ctype, size) in T.C_TYPES.items():
        c_type, c_size, body = found[c_name]
        values = [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\d+", re.sub(r"//[^\n]*", "", body))]
        ours = getattr(T, py_name)
        assert c_type == ctype and len(values) == len(ours) == size, c_name
        assert c_size in (str(size), "NGRID_IQ1S"), c_name
        mismatched = [i for i, (a, b) in enumerate(zip(ours, values)) if a != b]
        assert not mismatched, f"{c_name}: entries {mismatched[:5]} differ"
    defines = dict(re.findall(r"#define\s+(NGRID_IQ1S|IQ1S_DELTA|IQ1M_DELTA)\s+(\S+)", text))
    assert defines == {"NGRID_IQ1S": "2048", "IQ1S_DELTA": "0.125f", "IQ1M_DELTA": "0.125f"}
    assert (T.NGRID_IQ1S, T.IQ1S_DELTA, T.IQ1M_DELTA) == (2048, 0.125, 0.125)


def test_table_digests_are_the_ones_the_spec_pins():
    """IQ-1.5: "A table's digest is the sha256 of its entries as little-endian bytes of its C type, in
    index order" and the spec's table lists one per table."""
    section = re.search(r"^### IQ-1\.5 .*?(?=^### )", SPEC.read_text(), re.M | re.S).group(0)
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \| (\d+) \| `([0-9a-f]{64})` \|$", section, re.M)
    pinned = {name: (ctype, int(n), digest) for name, ctype, n, digest in rows}
    assert set(pinned) == {c for c, _, _ in T.C_TYPES.values()}
    for py_name, (c_name, ctype, size) in T.C_TYPES.items():
        digest = hashlib.sha256(_entries(getattr(T, py_name), ctype)).hexdigest()
        assert pinned[c_name] == (ctype, size, digest), c_name


def test_ggml_common_h_is_the_pinned_file():
    """IQ-1.5: ggml-common.h "file sha256 33667042e675da25..."."""
    _source("ggml-common.h")
    digest = hashlib.sha256((SRC / "ggml-common.h").read_bytes()).hexdigest()
    assert digest == "33667042e675da25d8ea0c6d5d0999506f1edfce2b7d97c2d78830ac5fb3fa46"


def test_sign_tables():
    """IQ-1.3: "kmask_iq2xs[j] = 1 << j" and "ksigns_iq2xs[k] ... is k | parity(k) << 7: the eighth sign
    makes the number of negative weights in the group even"."""
    assert T.KMASK_IQ2XS == tuple(1 << j for j in range(8))
    assert T.KSIGNS_IQ2XS == tuple(k | (bin(k).count("1") & 1) << 7 for k in range(128))
    assert all(bin(s).count("1") % 2 == 0 for s in T.KSIGNS_IQ2XS)


@pytest.mark.parametrize(("name", "width", "values"), [
    ("IQ2XXS_GRID", 8, {8, 25, 43}), ("IQ2XS_GRID", 8, {8, 25, 43}), ("IQ2S_GRID", 8, {8, 25, 43}),
    ("IQ3XXS_GRID", 4, {4, 12, 20, 28, 36, 44, 52, 62}), ("IQ3S_GRID", 4, {1, 3, 5, 7, 9, 11, 13, 15}),
    ("IQ1S_GRID", 8, {0x00, 0x01, 0xFF}),
])
def test_grid_values(name, width, values):
    """IQ-1.2 table, "byte values" column; every entry of a grid is distinct, and each grid has
    2^(index bits) entries, so every index field names an entry."""
    table = getattr(T, name)
    raw = set(np.array(table, np.uint64).astype(f"<u{width}").view(np.uint8).tolist())
    assert raw == values
    assert len(set(table)) == len(table) and len(table) & (len(table) - 1) == 0


# ---------------------------------------------------------------------------------------------
# Worked examples (IQ-4.5 .. IQ-10.5), each block built from the spec's words
# ---------------------------------------------------------------------------------------------

# name: ({byte offset: bytes}, [(first weight, last weight, values)]) exactly as the spec states them
EXAMPLES = {
    "iq2_xxs": ({0: "00 38 01 00 00 00 01 00 00 30"},
                [(0, 7, [-18.8125, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, -3.5]), (8, 31, [3.5]), (32, 255, [0.5])]),
    "iq2_xs": ({0: "00 3c 02 0a", 66: "21"},
               [(0, 7, [-9.375, 9.375, -3, 3, 3, 3, 3, 3]), (8, 15, [3]), (16, 31, [5]), (32, 255, [1])]),
    "iq2_s": ({0: "00 3c 03", 34: "80", 66: "02"},
              [(0, 7, [5.375, 3.125, 1, 3.125, 3.125, 1, 1, -3.125]), (8, 255, [1])]),
    "iq3_xxs": ({0: "00 3c 01 02", 66: "7f 00 00 10"},
                [(0, 7, [-15, -3, -3, -3, -27, -3, -3, -3]), (8, 31, [3]), (32, 255, [1])]),
    "iq3_s": ({0: "00 38 01", 66: "02", 74: "01", 106: "01"},
              [(0, 7, [-4.5, 1.5, 1.5, 1.5, 10.5, 7.5, 13.5, 7.5]), (8, 31, [1.5]), (32, 255, [0.5])]),
    "iq1_s": ({0: "00 3c 05", 34: "01 a0"},
              [(0, 7, [4.375, -0.625, -0.625, 4.375, 4.375, -5.625, -0.625, -5.625]), (8, 31, [-5.625]),
               (32, 255, [-0.875])]),
    "iq1_m": ({0: "07", 32: "09", 48: "19 00 00 00 00 40 00 30"},
              [(0, 7, [-0.09375, -0.84375, -0.84375, -0.84375, -0.84375, -0.09375, -0.09375, -0.84375]),
               (8, 15, [-0.65625]), (16, 31, [-1.53125]), (32, 255, [-0.21875])]),
}


def _example(name: str) -> tuple[np.ndarray, np.ndarray]:
    placed, runs = EXAMPLES[name]
    blk = np.zeros((1, ggml.TYPES[name].type_size), np.uint8)
    for offset, text in placed.items():
        raw = bytes.fromhex(text)
        blk[0, offset:offset + len(raw)] = np.frombuffer(raw, np.uint8)
    want = np.full(256, np.nan, np.float32)
    for first, last, values in runs:
        want[first:last + 1] = values if len(values) > 1 else values[0]
    assert not np.isnan(want).any()
    return blk, want


@pytest.mark.parametrize("name", GRID_TYPES)
def test_worked_example(name):
    """IQ-4.5 .. IQ-10.5: each type's worked example ("every other byte 0") decodes to the values the
    spec works out by hand; the oracle agrees where it is available."""
    blk, want = _example(name)
    got = ggml.dequantize(name, blk)[0]
    np.testing.assert_array_equal(got, want)
    oracle = _oracle()
    if oracle is not None:
        np.testing.assert_array_equal(oracle.dequantize(name, blk)[0].view(np.uint32), got.view(np.uint32))


def test_iq1m_example_scale_is_assembled_from_top_nibbles():
    """IQ-10.5: "Assembled: (0x0019 >> 12) | ((0 >> 8) & 0xf0) | ((0x4000 >> 4) & 0xf00) | (0x3000 & 0xf000)
    = 0x3400, D = 0.25"."""
    blk, _ = _example("iq1_m")
    assert int(iq1m_scale_bits(blk)[0, 0]) == 0x3400
    assert ggml.TYPES["iq1_m"].scales(blk)["d"].tolist() == [[0.25]]


@pytest.mark.parametrize(("name", "negative"), [("iq2_xxs", (0, 7)), ("iq2_s", (7,))])
def test_nan_scale_flips_the_nan_sign_bit(name, negative):
    """IQ-1.3: "ggml returns 0xFFC00000 for a negative-signed weight and 0x7FC00000 for a positive one of a
    block whose d is the float16 NaN 0x7E00" (the worked example blocks, d replaced)."""
    blk, _ = _example(name)
    blk[0, 0:2] = (0x00, 0x7E)
    bits = ggml.dequantize(name, blk)[0, :8].view(np.uint32)
    want = [0xFFC00000 if j in negative else 0x7FC00000 for j in range(8)]
    assert bits.tolist() == want
    oracle = _oracle()
    if oracle is not None:
        assert oracle.dequantize(name, blk)[0, :8].view(np.uint32).tolist() == want


# ---------------------------------------------------------------------------------------------
# IQ-1.6 exactness: a float64 decoder written from the spec's diagrams, one block at a time
# ---------------------------------------------------------------------------------------------


def _g(table, width, index, signed=False):
    raw = [(table[index] >> (8 * j)) & 0xFF for j in range(width)]
    return [b - 256 if signed and b > 127 else b for b in raw]


def _f16(bits: int) -> float:
    return float(np.array([bits], np.uint16).view(np.float16)[0])


def _u(b: bytes, offset: int, size: int) -> int:
    return int.from_bytes(b[offset:offset + size], "little")


def _signed(values, sign_byte):
    return [-v if sign_byte >> j & 1 else v for j, v in enumerate(values)]


def _spec_decode(name: str, b: bytes) -> list[float]:
    """One block, in float64, from the IQ-4.1 .. IQ-10.1 diagrams and IQ-x.2 formulas."""
    y: list[float] = []
    d = _f16(_u(b, 0, 2))
    for ib in range(8):
        if name == "iq2_xxs":
            aux0, aux1 = _u(b, 2 + 8 * ib, 4), _u(b, 6 + 8 * ib, 4)
            db = d * ((aux1 >> 28) + 0.5) / 4
            for l in range(4):
                g = _g(T.IQ2XXS_GRID, 8, aux0 >> 8 * l & 255)
                y += [db * v for v in _signed(g, T.KSIGNS_IQ2XS[aux1 >> 7 * l & 127])]
        elif name == "iq2_xs":
            for l in range(4):
                q = _u(b, 2 + 2 * (4 * ib + l), 2)
                db = d * ((b[66 + ib] >> 4 * (l // 2) & 15) + 0.5) / 4
                y += [db * v for v in _signed(_g(T.IQ2XS_GRID, 8, q & 511), T.KSIGNS_IQ2XS[q >> 9])]
        elif name == "iq2_s":
            for l in range(4):
                idx = b[2 + 4 * ib + l] | (b[66 + ib] >> 2 * l & 3) << 8
                db = d * ((b[74 + ib] >> 4 * (l // 2) & 15) + 0.5) / 4
                y += [db * v for v in _signed(_g(T.IQ2S_GRID, 8, idx), b[34 + 4 * ib + l])]
        elif name == "iq3_xxs":
            aux = _u(b, 66 + 4 * ib, 4)
            db = d * ((aux >> 28) + 0.5) / 2
            for l in range(4):
                g = _g(T.IQ3XXS_GRID, 4, b[2 + 8 * ib + 2 * l]) + _g(T.IQ3XXS_GRID, 4, b[3 + 8 * ib + 2 * l])
                y += [db * v for v in _signed(g, T.KSIGNS_IQ2XS[aux >> 7 * l & 127])]
        elif name == "iq3_s":
            db = d * (1 + 2 * (b[106 + ib // 2] >> 4 * (ib % 2) & 15))
            idx = [b[2 + 8 * ib + k] | (b[66 + ib] >> k & 1) << 8 for k in range(8)]
            for l in range(4):
                g = _g(T.IQ3S_GRID, 4, idx[2 * l]) + _g(T.IQ3S_GRID, 4, idx[2 * l + 1])
                y += [db * v for v in _signed(g, b[74 + 4 * ib + l])]
        elif name == "iq1_s":
            qh = _u(b, 34 + 2 * ib, 2)
            dl, delta = d * (2 * (qh >> 12 & 7) + 1), -0.125 if qh >> 15 else 0.125
            for l in range(4):
                g = _g(T.IQ1S_GRID, 8, b[2 + 4 * ib + l] | (qh >> 3 * l & 7) << 8, signed=True)
                y += [dl * (v + delta) for v in g]
        else:                                   # iq1_m
            sc = [_u(b, 48 + 2 * w, 2) for w in range(4)]
            dm = _f16(sc[0] >> 12 | (sc[1] >> 12) << 4 | (sc[2] >> 12) << 8 | (sc[3] >> 12) << 12)
            for l in range(4):
                nib = b[32 + 2 * ib + l // 2] >> 4 * (l % 2) & 15
                dl = dm * (2 * (sc[ib // 2] >> (6 * (ib % 2) + 3 * (l // 2)) & 7) + 1)
                g = _g(T.IQ1S_GRID, 8, b[4 * ib + l] | (nib & 7) << 8, signed=True)
                y += [dl * (v + (-0.125 if nib & 8 else 0.125)) for v in g]
    return y


@pytest.mark.parametrize("name", GRID_TYPES)
@pytest.mark.parametrize("scale_class", ["random_bits", "subnormal", "max", "zero"])
def test_decode_is_the_exact_value_of_the_diagrams(name, scale_class):
    """IQ-1.6: "For a finite d, every float32 operation of their decode formulas is exact ... a decoder
    MAY evaluate it in any order or precision": float64 from the bit diagrams agrees bit for bit."""
    bt = ggml.TYPES[name]
    blocks = random_blocks(bt, np.random.default_rng(len(name) * 7 + len(scale_class)), 1, 1024, scale_class)
    if name == "iq1_m":                         # no fp16_offsets: keep the assembled scale finite
        blocks.reshape(-1, 56)[:, 55] = (blocks.reshape(-1, 56)[:, 55] & 0x0F) | 0x30
    got = ggml.dequantize(name, blocks).reshape(-1, 256)
    for b, row in zip(blocks.reshape(-1, bt.type_size), got):
        want = np.array(_spec_decode(name, bytes(b)), np.float64)
        assert np.isfinite(want).all()
        np.testing.assert_array_equal(row.astype(np.float64), want)
        assert np.array_equal(np.signbit(row), np.signbit(want.astype(np.float32)))


# ---------------------------------------------------------------------------------------------
# Validity (IQ-x.3)
# ---------------------------------------------------------------------------------------------

IQ1M_CLASSES = {"subnormal": 0x0001, "zero": 0x0000, "negative_zero": 0x8000, "negative": 0xB800,
                "max": 0x7BFF, "inf": 0x7C00, "-inf": 0xFC00, "nan": 0x7E00, "signaling_nan": 0x7C01}


def _iq1m_with_scale(bits: int, rng: np.random.Generator, nb: int = 16) -> np.ndarray:
    blk = rng.integers(0, 256, (nb, 56), dtype=np.uint8)
    words = np.ascontiguousarray(blk[:, 48:56]).view("<u2") & 0x0FFF       # keep the 3-bit scales
    for w in range(4):
        words[:, w] |= ((bits >> 4 * w) & 15) << 12
    blk[:, 48:56] = words.view(np.uint8)
    return blk.reshape(1, -1)


@pytest.mark.parametrize("label", list(IQ1M_CLASSES))
def test_iq1m_assembled_scale_in_every_class(label):
    """IQ-10.3: ggml_validate_row_data "reassembles D exactly as the decoder does ... a block whose
    assembled D is inf or NaN is ggml.scale.nonfinite"; the low 12 bits do not take part."""
    bits = IQ1M_CLASSES[label]
    blocks = _iq1m_with_scale(bits, np.random.default_rng(bits))
    assert set(iq1m_scale_bits(blocks.reshape(-1, 56)).ravel().tolist()) == {bits}
    finite = (bits & 0x7C00) != 0x7C00
    if finite:
        ggml.check_blocks("iq1_m", blocks)
    else:
        with pytest.raises(QFormatsError) as err:
            ggml.check_blocks("iq1_m", blocks)
        assert err.value.code == "ggml.scale.nonfinite" and "d = " in str(err.value)
    oracle = _oracle()
    if oracle is not None:
        assert oracle.validate_row_data(29, blocks[0]) == finite
        np.testing.assert_array_equal(ggml.dequantize("iq1_m", blocks).view(np.uint32),
                                      oracle.dequantize("iq1_m", blocks).view(np.uint32))


@pytest.mark.parametrize("name", GRID_TYPES)
def test_negative_scale_warning_only_where_no_encoder_writes_one(name):
    """IQ-4.3 .. IQ-9.3: d is never negative (a ggml.scale.negative warning); IQ-10.3: iq1_m's D is not
    covered. A negative scale is never an error (GGML-3.2)."""
    blk, _ = _example(name)
    if name == "iq1_m":
        blk[0, 55] |= 0x80                      # sign bit of D: top bit of sc[3]
    else:
        blk[0, 1] |= 0x80
    assert float(ggml.TYPES[name].scales(blk)["d"][0, 0]) < 0
    codes = [f.code for f in scale_findings(ggml.TYPES[name], blk, "w")]
    assert codes == ([] if name == "iq1_m" else ["ggml.scale.negative"])


# ---------------------------------------------------------------------------------------------
# Encoders (IQ-4.4 .. IQ-10.4): informative
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GRID_TYPES)
def test_encoders_are_informative(name):
    """GGML-4.3 and IQ-1.6: "qformats.formats.ggml.quantize refuses them with ggml.encoder.missing"."""
    with pytest.raises(QFormatsError) as err:
        ggml.quantize(name, np.zeros((1, 256), np.float32))
    assert err.value.code == "ggml.encoder.missing"


def test_requires_importance_is_ggml_quantize_requires_imatrix():
    """IQ-4.4, IQ-5.4, IQ-9.4 (true) and IQ-10.4 ("lists iq1_m only in a comment"): requires_importance is
    what ggml.c's ggml_quantize_requires_imatrix returns, comments stripped."""
    source = _source("ggml.c")
    body = re.search(r"bool ggml_quantize_requires_imatrix\(enum ggml_type type\) \{(.*?)\n\}", source, re.S).group(1)
    required = {t.lower() for t in re.findall(r"GGML_TYPE_(\w+)", re.sub(r"//[^\n]*", "", body))}
    assert required == {"iq2_xxs", "iq2_xs", "iq1_s"}
    assert {n for n in GRID_TYPES if ggml.TYPES[n].requires_importance} == required
