"""GGUF cross-check: files written by gguf-py's GGUFWriter read identically by gguf-py and by us.

gguf-py (PyPI ``gguf`` 0.19.0) is the independent route: its writer produces the files, its reader
gives the expected metadata, tensor infos and bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

from qformats.containers.gguf import read_gguf


def _q4k_blocks(rows: int, blocks_per_row: int, seed: int) -> np.ndarray:
    """Random q4_K bytes whose fp16 d and dmin are finite (random scales and codes are all legal)."""
    rng = np.random.default_rng(seed)
    b = rng.integers(0, 256, size=(rows * blocks_per_row, 144), dtype=np.uint8)
    dm = rng.uniform(-2, 2, size=(rows * blocks_per_row, 2)).astype("<f2")
    b[:, :4] = dm.view(np.uint8)
    return b.reshape(rows, blocks_per_row * 144)


def _write(path, alignment: int | None) -> None:
    w = GGUFWriter(path, "qformats-test")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -300)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 1e300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo wörld")
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, 1.5])
    w.add_array("t.arr_str", ["a", "", "ünï"])
    w.add_array("t.arr_bool", [True, False, True])
    w.add_key_value("t.arr_u64", [1, 2**63], GGUFValueType.ARRAY, sub_type=GGUFValueType.UINT64)
    rng = np.random.default_rng(1)
    w.add_tensor("f32.weight", rng.standard_normal((3, 40)).astype(np.float32))
    w.add_tensor("f16.weight", rng.standard_normal((5, 7)).astype(np.float16))
    w.add_tensor("q4k.weight", _q4k_blocks(4, 2, seed=2), raw_dtype=GGMLQuantizationType.Q4_K)
    w.add_tensor("bias", rng.standard_normal(11).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _their_metadata(reader: GGUFReader) -> dict:
    out = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        out[name] = field.contents()
    return out


def _plain(value):
    return value.tolist() if isinstance(value, np.ndarray) else value


@pytest.mark.parametrize("alignment", [pytest.param(None, id="align-default"), pytest.param(64, id="align-64")])
def test_gguf_py_files_read_identically(tmp_path, alignment):
    """GGUF-1..5: metadata, tensor infos (ne order, type, offsets, sizes) and bytes equal gguf-py's view."""
    path = tmp_path / "x.gguf"
    _write(path, alignment)
    theirs = GGUFReader(path)
    with read_gguf(path) as ours:
        assert ours.version == 3
        assert ours.alignment == (alignment or 32)
        assert ours.data_offset == theirs.data_offset
        assert {k: _plain(v) for k, v in ours.metadata.items()} == _their_metadata(theirs)
        assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
        for t_ours, t_theirs in zip(ours.tensors, theirs.tensors):
            assert t_ours.dims == tuple(int(x) for x in t_theirs.shape)
            assert t_ours.ggml_type == int(t_theirs.tensor_type)
            assert t_ours.n_bytes == int(t_theirs.n_bytes)
            assert ours.data_offset + t_ours.offset == int(t_theirs.data_offset)
            assert ours.tensor_bytes(t_ours.name).tobytes() == np.asarray(t_theirs.data).tobytes()
        np.testing.assert_array_equal(ours.tensor_array("f16.weight"), np.asarray(theirs.tensors[1].data))
        assert ours.tensor_rows("q4k.weight").shape == (4, 288)


def test_gguf_py_dequantize_of_our_rows(tmp_path):
    """Q4_K rows handed out by our reader are valid gguf.quants.dequantize input (shape (rows, ne[0]))."""
    from gguf.quants import dequantize

    path = tmp_path / "x.gguf"
    _write(path, None)
    with read_gguf(path) as ours:
        x = dequantize(ours.tensor_rows("q4k.weight"), GGMLQuantizationType.Q4_K)
        assert x.shape == (4, 512) and np.isfinite(x).all()
