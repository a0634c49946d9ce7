"""GGUF reader API on valid hand-built files: header facts, metadata, tensor infos and bytes."""

from __future__ import annotations

import hashlib
import os
import struct
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from pydantic import ValidationError

import gguf_builder as gb
from qformats.containers import gguf as G
from qformats.containers.ggml_types import GGML_TYPES
from qformats.errors import QFormatsError
from qformats.formats.q4_k import check_blocks


@pytest.fixture
def v3_path(tmp_path):
    path = tmp_path / "valid_v3.gguf"
    path.write_bytes(gb.valid_v3())
    return path


def test_header_facts(v3_path):
    """GGUF-1.2, GGUF-5.1: version, alignment and data offset = PAD(end of tensor infos, 32)."""
    with G.read_gguf(v3_path) as f:
        # 24 header + 53 (architecture KV) + 33 (alignment KV) + 2 x 48 (infos) = 206 -> 224.
        assert (f.version, f.alignment, f.data_offset) == (3, 32, 224)
        assert f.header.file_size == 224 + 64 + 288
        assert dict(f.metadata) == {"general.architecture": "qformats-test", "general.alignment": 32}
        assert dict(f.metadata_types) == {"general.architecture": "STRING", "general.alignment": "UINT32"}


def test_tensor_infos(v3_path):
    """GGUF-3: name, ne order, type, offset relative to the data section, exact byte size."""
    with G.read_gguf(v3_path) as f:
        a, b = f.tensors
        assert (a.name, a.n_dims, a.dims, a.type_name, a.offset, a.n_bytes) == ("a.weight", 2, (8, 2), "F32", 0, 64)
        assert (b.name, b.dims, b.ggml_type, b.type_name, b.offset, b.n_bytes) == ("b.weight", (256, 2), 12, "Q4_K", 64, 288)
        assert b.shape == (2, 256)
        with pytest.raises(ValidationError):
            a.name = "x"  # frozen model


def test_tensor_data_views(v3_path):
    """GGUF-5.2: tensor bytes are the file bytes at data_offset + offset, read-only."""
    blob = v3_path.read_bytes()
    with G.read_gguf(v3_path) as f:
        raw = f.tensor_bytes("b.weight")
        assert raw.tobytes() == blob[224 + 64:224 + 64 + 288] == gb.q4k_block() * 2
        assert not raw.flags.writeable
        rows = f.tensor_rows("b.weight")
        assert rows.shape == (2, 144)
        w = f.tensor_array("a.weight")
        assert w.dtype == np.float32 and w.shape == (2, 8)
        np.testing.assert_array_equal(w.ravel(), np.arange(16, dtype=np.float32) * 0.5)
        with pytest.raises(ValueError):
            w[0, 0] = 1.0


def test_quantized_tensor_has_no_plain_array(v3_path):
    """tensor_array refuses quantized types with a coded error instead of reinterpreting bytes."""
    with G.read_gguf(v3_path) as f, pytest.raises(QFormatsError) as exc:
        f.tensor_array("b.weight")
    assert exc.value.code == "argument.invalid"


def test_unknown_tensor_name(v3_path):
    """Looking up a tensor the file does not hold raises tensor.missing."""
    with G.read_gguf(v3_path) as f, pytest.raises(QFormatsError) as exc:
        f.tensor("nope")
    assert exc.value.code == "tensor.missing"


def test_never_writes_input(v3_path):
    """GGUF-6.3: reading, viewing and closing leaves the file's bytes and mtime unchanged."""
    before = (hashlib.sha256(v3_path.read_bytes()).hexdigest(), os.stat(v3_path).st_mtime_ns)
    f = G.read_gguf(v3_path)
    raw = f.tensor_bytes("a.weight")
    with pytest.raises(ValueError):
        raw[0] = 1
    f.close()
    assert (hashlib.sha256(v3_path.read_bytes()).hexdigest(), os.stat(v3_path).st_mtime_ns) == before


def test_close_releases_and_views_survive(v3_path):
    """Views handed out stay readable after close(); the closed file refuses new views."""
    f = G.read_gguf(v3_path)
    raw = f.tensor_bytes("a.weight")
    f.close()
    assert raw.tobytes() == gb.f32_payload(16)
    with pytest.raises(ValueError):
        f.tensor_bytes("a.weight")
    with G.read_gguf(v3_path) as g:
        pass
    assert g._mm is None


def test_all_value_types():
    """GGUF-2.5: every scalar type, strings, bool, and arrays of scalars/strings/bools are decoded."""
    f = G.read_gguf_bytes(gb.valid_all_value_types())
    m = f.metadata
    assert (m["t.u8"], m["t.i8"], m["t.u16"], m["t.i16"]) == (200, -7, 65535, -300)
    assert (m["t.u32"], m["t.i32"], m["t.u64"], m["t.i64"]) == (4_000_000_000, -2_000_000_000, 2**64 - 1, -(2**62))
    assert (m["t.f32"], m["t.f64"], m["t.bool"], m["t.str"]) == (0.25, -1.5, True, "héllo")
    assert m["t.arr_u32"].tolist() == [1, 2, 3] and not m["t.arr_u32"].flags.writeable
    assert m["t.arr_str"] == ["a", ""]
    assert m["t.arr_bool"].tolist() == [False, True]
    assert m["t.arr_empty"].shape == (0,)
    assert f.metadata_types["t.arr_str"] == "ARRAY[STRING]" and f.metadata_types["t.bool"] == "BOOL"


def test_rank_zero_tensor_accepted():
    """GGUF-3.3: n_dims = 0 is a one-element tensor (as ggml)."""
    blob = gb.gguf([gb.kv_u32("general.alignment", 8)], [gb.tinfo("s", [], gb.T_F32, 0)], gb.f32_payload(1), alignment=8)
    f = G.read_gguf_bytes(blob)
    (s,) = f.tensors
    assert (f.alignment, s.n_dims, s.dims, s.n_bytes) == (8, 0, (), 4)
    assert f.tensor_array("s").shape == ()


def test_alignment_one_is_a_power_of_two_but_not_a_multiple_of_8():
    """GGUF-2.9: docs/gguf.md asks for a multiple of 8; ggml loads alignment 1, the finding says so."""
    blob = gb.gguf([gb.kv_u32("general.alignment", 1)], [gb.tinfo("s", [], gb.T_F32, 0)], gb.f32_payload(1), alignment=1)
    with pytest.raises(QFormatsError) as exc:
        G.read_gguf_bytes(blob)
    assert exc.value.code == "gguf.alignment" and "ggml would load this file" in str(exc.value)


def test_bf16_widens_exactly():
    """BF16 tensors widen to float32 by a 16-bit shift (exact)."""
    vals = np.array([1.0, -2.5, 3.140625, 0.0], np.float32)
    bf16 = (vals.view(np.uint32) >> 16).astype("<u2").tobytes()
    f = G.read_gguf_bytes(gb.gguf([], [gb.tinfo("w", [4], 30, 0)], bf16))
    np.testing.assert_array_equal(f.tensor_array("w"), vals)


def test_no_tensors_no_padding_required():
    """GGUF-5.1: with zero tensors the file may end right after the metadata (ggml pads only with tensors)."""
    f = G.read_gguf_bytes(gb.valid_no_tensors())
    assert f.tensors == () and f.data_offset == len(gb.valid_no_tensors())


def test_unpadded_last_tensor_accepted():
    """GGUF-5.3: the last tensor's padding may be absent (file ends at its last byte)."""
    blob = gb.gguf([], [gb.tinfo("t", [3], gb.T_F32, 0)], gb.f32_payload(3))
    assert len(G.read_gguf_bytes(blob).tensor_bytes("t")) == 12


def test_type_table_matches_gguf_py():
    """GGUF-4: our (block size, type size) table equals gguf-py 0.19.0 GGML_QUANT_SIZES, except Q8_1 and Q2_0.

    Q8_1: ggml-common.h has fp16 d + fp16 s + 32 int8 = 36 bytes; gguf-py still lists 40.
    Q2_0 (id 42, ggml 0.25.3 ``block_q2_0``: fp16 d + 64 two-bit codes = 18 bytes) is newer than gguf-py 0.19.0.
    """
    from gguf.constants import GGML_QUANT_SIZES

    theirs = {int(t): size for t, size in GGML_QUANT_SIZES.items()}
    ours = {t.type_id: (t.block_size, t.type_size) for t in GGML_TYPES.values()}
    assert set(ours) - set(theirs) == {42} and ours[42] == (64, 18)
    del ours[42]
    assert set(ours) == set(theirs)
    diff = {k for k in ours if ours[k] != theirs[k]}
    assert diff == {9} and ours[9] == (32, 36) and theirs[9] == (32, 40)


def test_huge_tensor_count_fails_immediately():
    """GGUF-1.5: a file claiming 2^60 tensors is refused before any per-tensor work."""
    blob = gb.gguf([], [], n_tensors=1 << 60)
    with pytest.raises(QFormatsError) as exc:
        G.read_gguf_bytes(blob)
    assert exc.value.code == "gguf.count.too_large"


def test_missing_path_is_oserror(tmp_path):
    """GGUF-6.5: a path that cannot be opened is an OSError (could not run), not a finding."""
    with pytest.raises(OSError):
        G.read_gguf(tmp_path / "absent.gguf")


def test_fifo_is_oserror_without_opening_it(tmp_path):
    """GGUF-6.5: a FIFO is not a regular file: OSError from stat, never an open() that waits for a writer."""
    fifo = tmp_path / "w.gguf"
    os.mkfifo(fifo)
    done = threading.Event()

    def writer_if_stuck() -> None:  # a reader blocked in open() gets EOF: the test then fails instead of hanging
        if not done.wait(5.0):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    helper = threading.Thread(target=writer_if_stuck)
    helper.start()
    try:
        with pytest.raises(OSError, match="not a regular file"):
            G.read_gguf(fifo)
    finally:
        done.set()
        helper.join()


def test_empty_file(tmp_path):
    """GGUF-1.4: an empty file is truncated before the magic."""
    p = tmp_path / "empty.gguf"
    p.write_bytes(b"")
    with pytest.raises(QFormatsError) as exc:
        G.read_gguf(p)
    assert exc.value.code == "gguf.truncated"


@pytest.mark.parametrize(("builder", "data"), [
    pytest.param(gb.valid_v3, gb.base_data(), id="v3"),
    pytest.param(gb.valid_all_value_types, gb.f32_payload(4), id="all-types"),
])
def test_truncation_everywhere(builder, data):
    """GGUF-1.4, GGUF-5.1, GGUF-5.2: a file cut anywhere before its data section is gguf.truncated;
    cut inside the data, gguf.data.past_end.

    The builder wrote ``data`` last and unpadded, so the data section is the file's last len(data) bytes.
    """
    blob = builder()
    assert blob.endswith(data)
    data_start = len(blob) - len(data)
    for cut in range(len(blob)):
        with pytest.raises(QFormatsError) as exc:
            G.read_gguf_bytes(blob[:cut])
        want = "gguf.truncated" if cut < data_start else "gguf.data.past_end"
        assert exc.value.code == want, (cut, str(exc.value))


def test_reader_leaves_q4k_payload_to_the_format_layer():
    """GGUF-5.4: the reader does not judge tensor payloads; Q4K-5.4 (finite d) is check_blocks' rule on tensor_rows."""
    f = G.read_gguf_bytes(gb.CASES["q4k_d_inf"][0]())
    assert struct.unpack_from("<H", f.tensor_bytes("b.weight").tobytes(), 144)[0] == 0x7C00
    with pytest.raises(QFormatsError) as exc:
        check_blocks(f.tensor_rows("b.weight"), tensor="b.weight", n=f.tensor("b.weight").dims[0])
    assert (exc.value.code, exc.value.clause, exc.value.tensor) == ("q4k.d.nonfinite", "Q4K-5.4", "b.weight")
    assert exc.value.actual == "d = inf in block 0 of row 1"


def _strings_file(items: list[bytes]) -> bytes:
    body = b"".join(gb.gstr(s) for s in items)
    return gb.gguf([gb.kv("t.strs", gb.ARRAY, gb.arr(gb.STRING, len(items), body))], [])


def test_string_array_is_a_compact_sequence():
    """GGUF-2.5: an ARRAY[STRING] reads as a sequence of str: indexing, slicing, negatives, equality."""
    strs = G.read_gguf_bytes(_strings_file([b"a", b"", "ünï".encode(), b"tok"])).metadata["t.strs"]
    assert len(strs) == 4 and strs[2] == "ünï" and strs[-1] == "tok" and strs[1:3] == ["", "ünï"]
    assert strs == ["a", "", "ünï", "tok"] and strs != ["a", "", "ünï"] and list(strs) == ["a", "", "ünï", "tok"]
    with pytest.raises(IndexError):
        strs[4]


@pytest.mark.parametrize(("items", "where", "actual"), [
    pytest.param([b"ok", b"\xc3", b"\xa9"], "[1]", "invalid byte at 0 of 1", id="character-split-across-strings"),
    pytest.param([b"ok", b"", b"\xa9x"], "[2]", "invalid byte at 0 of 2", id="starts-with-continuation"),
    pytest.param([b"ok", b"ab\xff"], "[1]", "invalid byte at 2 of 3", id="invalid-byte"),
    pytest.param([b"ok", b"\xed\xa0\x80"], "[1]", "invalid byte at 0 of 3", id="surrogate"),
    pytest.param([b"a\xc3"], "[0]", "invalid byte at 1 of 2", id="cut-at-the-end"),
])
def test_each_string_of_an_array_must_be_utf8(items, where, actual):
    """GGUF-2.2: every string is UTF-8 on its own: a character split between two strings (whose
    concatenation is valid) is refused, naming the string and the byte."""
    with pytest.raises(QFormatsError) as exc:
        G.read_gguf_bytes(_strings_file(items))
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("gguf.string.utf8", "t.strs" + where, actual)


_FRAGMENTS = [b"a", b"", b"\xc3", b"\xa9", b"\xe2\x82", b"\xac", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xff", b"z\xc3\xa9"]


@settings(max_examples=300, deadline=None)
@given(hs.lists(hs.lists(hs.sampled_from(_FRAGMENTS), max_size=4).map(b"".join), max_size=8))
def test_string_array_utf8_verdict_equals_decoding_each_string(items):
    """GGUF-2.2, checked against the obvious route: the array is refused exactly when some string fails
    ``bytes.decode("utf-8")`` on its own, naming the first such string and its first bad byte."""
    first_bad = None
    for i, raw in enumerate(items):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            first_bad = (f"t.strs[{i}]", f"invalid byte at {exc.start} of {len(raw)}")
            break
    try:
        strs = G.read_gguf_bytes(_strings_file(items)).metadata["t.strs"]
    except QFormatsError as exc:
        assert exc.code == "gguf.string.utf8"
        assert (exc.tensor, exc.actual) == first_bad
    else:
        assert first_bad is None and list(strs) == [s.decode() for s in items]


@pytest.mark.parametrize(("field", "kwargs"), [
    pytest.param("tensor_count", {"n_tensors": 2**20 + 1}, id="tensors"),
    pytest.param("metadata_kv_count", {"n_kv": 2**20 + 1}, id="keys"),
])
def test_counts_above_two_to_the_twenty_are_refused_before_reading(field, kwargs):
    """GGUF-1.5 and its limits table: `MAX_TENSORS`, `MAX_KV` are 2^20 each; one more is refused from the
    header alone (the file holds no tensor infos or keys at all)."""
    with pytest.raises(QFormatsError) as exc:
        G.read_gguf_bytes(gb.gguf([], [], **kwargs))
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("gguf.count.too_large", field, 2**20 + 1)
