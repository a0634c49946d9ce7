"""Tests with teeth for the plain element types (issue 33 item 3: ``qformats/formats/ggml/floats.py``, spec/ggml.md
GGML-6, GGML-3.3).

Expected values come from an independent route: elements packed and read back by Python's ``struct`` (IEEE
binary32/binary64 and two's-complement integers, little-endian), float16 and bfloat16 values worked by hand from
their bit patterns. floats.py builds its decoders once, at import (``_view`` and ``_elements`` return closures); the
mutation runner (tests/mutation/run.py) switches a mutant on only for calls made at test time, so the types are
also built afresh here by executing the module's file again, under its own name and without registering it.
"""

from __future__ import annotations

import importlib.util
import struct

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml import floats

F32 = np.float32
INF = float("inf")

# name -> (struct format of one element, values, dtype decode returns): GGML-6.1, GGML-6.3
PACKED = {
    "f32": ("<f", [1.5, -0.0, (2 - 2.0 ** -23) * 2.0 ** 127, -INF, 2.0 ** -149], "float32"),
    "f64": ("<d", [1.5, -0.0, 1e300, INF, 2.0 ** -1074], "float64"),
    "i8": ("<b", [-128, -1, 0, 1, 127], "int8"),
    "i16": ("<h", [-32768, -1, 0, 1, 32767], "int16"),
    "i32": ("<i", [-2 ** 31, -1, 0, 1, 2 ** 31 - 1], "int32"),
    "i64": ("<q", [-2 ** 63, -1, 0, 1, 2 ** 63 - 1], "int64"),
}
# float16 / bfloat16 bit patterns -> the float32 value each widens to, worked by hand (GGML-1.3, GGML-6.2)
HALVES = {
    "f16": ([0x3C00, 0xC000, 0x0001, 0x7BFF, 0xFC00, 0x8000], [1.0, -2.0, 2.0 ** -24, 65504.0, -INF, -0.0]),
    "bf16": ([0x3FC0, 0xC000, 0x0001, 0x7F7F, 0x7F80, 0x8000],
             [1.5, -2.0, 2.0 ** -133, (2 - 2.0 ** -7) * 2.0 ** 127, INF, -0.0]),
}


@pytest.fixture                 # per test: the mutation runner credits a fixture's calls to the test that built it
def fresh() -> dict:
    spec = importlib.util.spec_from_file_location(floats.__name__, floats.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {bt.name: bt for bt in module.TYPES}


def _blocks(raw: bytes, size: int) -> np.ndarray:
    """(elements, size) uint8: one block per element, as the family hands blocks to a decoder (GGML-2.2)."""
    return np.frombuffer(raw, np.uint8).reshape(-1, size).copy()


def _packed(name: str) -> tuple[np.ndarray, list, str]:
    fmt, values, dtype = PACKED[name]
    return _blocks(b"".join(struct.pack(fmt, v) for v in values), struct.calcsize(fmt)), values, dtype


def _halves(name: str) -> tuple[np.ndarray, list]:
    bits, values = HALVES[name]
    return _blocks(b"".join(struct.pack("<H", b) for b in bits), 2), values


def _same(got: np.ndarray, values: list, dtype: str) -> None:
    """dtype, shape (one element per block), values and signs of zero."""
    assert got.dtype == np.dtype(dtype) and got.shape == (len(values), 1)
    assert got.ravel().tolist() == values
    if got.dtype.kind == "f":
        assert np.signbit(got.ravel()).tolist() == [np.signbit(v) for v in values]


@pytest.mark.parametrize("name", list(PACKED))
def test_fresh_views_read_elements_as_stored(fresh, name):
    """GGML-6.1, GGML-6.3: F32 and F64 decode to their own values, the integer types keep their own dtype."""
    blk, values, dtype = _packed(name)
    _same(fresh[name].decode(blk), values, dtype)


@pytest.mark.parametrize("name", list(HALVES))
def test_fresh_halves_widen_exactly_to_float32(fresh, name):
    """GGML-6.1 (F16 widens exactly to float32) and GGML-6.2 (BF16 is the upper 16 bits of a float32): +-1.5/2,
    the smallest subnormal, the largest finite, an infinity and -0."""
    blk, values = _halves(name)
    _same(fresh[name].decode(blk), values, "float32")


@pytest.mark.parametrize("name", ["f32", "f64", "f16", "bf16"])
def test_fresh_float_types_check_every_element(fresh, name):
    """GGML-3.3: every element of an F32, F16, BF16 or F64 tensor is checked (``scales`` returns them all, under
    the one name ``element``), each as decoded."""
    blk, values = _halves(name) if name in HALVES else _packed(name)[:2]
    got = fresh[name].scales(blk)
    assert list(got) == ["element"]
    _same(got["element"], values, "float64" if name == "f64" else "float32")


@pytest.mark.parametrize("name", ["i8", "i16", "i32", "i64"])
def test_integer_types_check_nothing(fresh, name):
    """GGML-6.3: integer tensors have no content rule: no field to check."""
    blk, _, _ = _packed(name)
    assert fresh[name].scales(blk) == {} and ggml.TYPES[name].scales(blk) == {}


@pytest.mark.parametrize("name", list(PACKED) + list(HALVES))
def test_registered_types_decode_as_the_fresh_ones(fresh, name):
    """GGML-6: the registered types (built at import) decode as the ones built here."""
    blk = _halves(name)[0] if name in HALVES else _packed(name)[0]
    np.testing.assert_array_equal(ggml.TYPES[name].decode(blk), fresh[name].decode(blk))
    assert ggml.TYPES[name].decode(blk).dtype == fresh[name].decode(blk).dtype
