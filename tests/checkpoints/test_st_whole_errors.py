"""The safetensors reader's refusals asserted whole (code, tensor, constraint, actual, message, file), its limits at the
limit and one past, and its JSON subset (issue 33: tests with teeth; `make mutation MODULE=qformats/containers/safetensors.py`).

Every file is hand-built by st_builder (JSON text pair by pair, ``struct.pack("<Q")``), every expected value worked by
hand from spec/checkpoints.md.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import st_builder as sb
from qformats.containers.safetensors import (
    JsonObject,
    load_json,
    open_tensor,
    parse_json,
    read_header,
    read_header_bytes,
    read_header_source,
)
from qformats.errors import QFormatsError

FILE = "m.safetensors"
SPEC_DTYPES = ("BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, "
               "I64, U64, F64, C64, F4, F6_E2M3, F6_E3M2")   # ST-3.3, in the library's enum order
NUMPY_MAXDIMS = 64 if int(np.__version__.split(".")[0]) >= 2 else 32   # NPY_MAXDIMS (ST-5.3)
NUMPY_CONSTRAINT = f"a shape NumPy can hold (at most {NUMPY_MAXDIMS} dims, byte size of its non-zero dims < 2^63)"


def whole(call):
    """Everything a refusal carries, the file included."""
    with pytest.raises(QFormatsError) as info:
        call()
    e = info.value
    return e.code, e.tensor, e.constraint, e.actual, e.message, e.file


def refusal(code, tensor, constraint, actual, file=FILE):
    return code, tensor, constraint, actual, f"'{tensor}' must be {constraint} (got {actual})", file


def header_of(text: str, data: bytes = b"") -> bytes:
    return sb.st_bytes(text, data)


def n_of(blob: bytes) -> int:
    return struct.unpack("<Q", blob[:8])[0]


A = '"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}'
SURROGATES = "\\ud800" * 30          # 30 lone surrogate escapes: ascii() renders each as 6 characters


@pytest.mark.parametrize(("blob", "expected"), [
    # ST-1: the length prefix, its cap and the file size
    pytest.param(b"\x01\x02\x03", refusal("st.truncated", "header length", "8 bytes (u64 little-endian)", "3 bytes"),
                 id="ST-1.1-prefix-3-bytes"),
    pytest.param(struct.pack("<Q", 100_000_001), refusal("st.header.too_large", "header length",
                                                         "at most 100000000 bytes", 100_000_001), id="ST-1.2-cap-plus-1"),
    pytest.param(struct.pack("<Q", 100_000_000) + b"{}", refusal(
        "st.header.length", "header length", "at most the 2 bytes after the length prefix",
        "100000000; the file may be truncated"), id="ST-1.2-at-the-cap-then-ST-1.3"),
    pytest.param(struct.pack("<Q", 3) + b"{}", refusal(
        "st.header.length", "header length", "at most the 2 bytes after the length prefix",
        "3; the file may be truncated"), id="ST-1.3-one-past-the-file"),
    # ST-2: UTF-8, JSON, one object, whitespace only after it
    pytest.param(header_of(b'{"\xff":1}'), refusal("st.header.utf8", "header", "valid UTF-8",
                                                   "byte 0xff at header offset 2"), id="ST-2.1-byte-ff"),
    pytest.param(header_of("{"), refusal("st.header.json", "header", "JSON",
                                         "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
                 id="ST-2.2-unclosed"),
    pytest.param(header_of("{}X"), refusal("st.header.json", "header", "one JSON object followed only by whitespace",
                                           "'X' after the object at header offset 2"), id="ST-2.2-X-after"),
    pytest.param(header_of("{} " + "y" * 30), refusal("st.header.json", "header",
                                                      "one JSON object followed only by whitespace",
                                                      f"'{'y' * 20}' after the object at header offset 2"),
                 id="ST-2.2-first-20-characters-after"),
    pytest.param(header_of("{}\x0c"), refusal("st.header.json", "header", "one JSON object followed only by whitespace",
                                              "'\\x0c' after the object at header offset 2"), id="ST-2.2-form-feed-is-no-json-space"),
    pytest.param(header_of("{}\x00\x00\x00\x00\x00"), refusal("st.header.json", "header",
                                                            "one JSON object followed only by whitespace",
                                                            "5 NUL bytes after the object at header offset 2"),
                 id="ST-2.2-NUL-padding"),
    pytest.param(header_of("[]"), refusal("st.header.not_object", "header", "a JSON object", "list"), id="ST-2.4-list"),
    pytest.param(header_of('{"' + SURROGATES + '":1}'), refusal(
        "st.header.json", "header", "a string without lone surrogate escapes", ("'" + SURROGATES)[:80]),
        id="ST-2.2-surrogate-name-first-80"),
    # ST-2.5, ST-2.6: names once; __metadata__ null or an object of strings
    pytest.param(sb.base([("a", sb.A), ("a", sb.A)]), refusal("st.name.duplicate", "a",
                                                             "a name that occurs once in the header", "duplicate"),
                 id="ST-2.5-duplicate-name"),
    pytest.param(header_of('{"__metadata__":[]}'), refusal("st.metadata.invalid", "__metadata__",
                                                           "an object of strings", "list"), id="ST-2.6-list"),
    pytest.param(header_of('{"__metadata__":{"k":"x","k":"y"}}'), refusal(
        "st.metadata.invalid", "__metadata__.k", "a key that occurs once", "duplicate"), id="ST-2.6-duplicate-key"),
    pytest.param(header_of('{"__metadata__":{"k":1}}'), refusal("st.metadata.invalid", "__metadata__.k", "a string", "int"),
                 id="ST-2.6-int-value"),
    pytest.param(header_of('{"__metadata__":{"\\ud800":"x"}}'), refusal(
        "st.header.json", "__metadata__", "a string without lone surrogate escapes", "'\\ud800'"),
        id="ST-2.6-surrogate-key"),
    pytest.param(header_of('{"__metadata__":{"k":"\\ud800"}}'), refusal(
        "st.header.json", "__metadata__.k", "a string without lone surrogate escapes", "'\\ud800'"),
        id="ST-2.6-surrogate-value"),
    # ST-3: one entry, field by field
    pytest.param(header_of('{"a":[]}'), refusal("st.tensor.invalid", "a", "an object {dtype, shape, data_offsets}", "list"),
                 id="ST-3.1-list"),
    pytest.param(header_of('{"a":{"dtype":"F16","dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}'), refusal(
        "st.tensor.invalid", "a", "each field once", "duplicate field 'dtype'"), id="ST-3.1-duplicate-field"),
    pytest.param(header_of('{"a":{"dtype":"F16","shape":[2,2]}}'), refusal(
        "st.tensor.invalid", "a", "an object {dtype, shape, data_offsets}", "missing ['data_offsets']"),
        id="ST-3.1-missing-offsets"),
    pytest.param(sb.with_b(dtype="F128"), refusal("st.dtype.unknown", "b", f"a safetensors dtype ({SPEC_DTYPES})", "'F128'"),
                 id="ST-3.3-F128"),
    pytest.param(sb.with_b(dtype="Q" * 100), refusal("st.dtype.unknown", "b", f"a safetensors dtype ({SPEC_DTYPES})",
                                                     "'" + "Q" * 59), id="ST-3.3-first-60-characters"),
    pytest.param(sb.with_b(shape=[2, -1]), refusal("st.shape.invalid", "b", "a list of integers in [0, 2^64)", "[2, -1]"),
                 id="ST-3.4-negative"),
    pytest.param(sb.with_b(shape=[-123456789] * 12), refusal(
        "st.shape.invalid", "b", "a list of integers in [0, 2^64)", ("[" + ", ".join(["-123456789"] * 12) + "]")[:80]),
        id="ST-3.4-first-80-characters"),
    pytest.param(sb.with_b(data_offsets=[8]), refusal("st.offsets.invalid", "b", "[BEGIN, END], two integers in [0, 2^64)",
                                                      "[8]"), id="ST-3.5-one-offset"),
    pytest.param(sb.with_b(data_offsets=[-123456789] * 12), refusal(
        "st.offsets.invalid", "b", "[BEGIN, END], two integers in [0, 2^64)",
        ("[" + ", ".join(["-123456789"] * 12) + "]")[:80]), id="ST-3.5-first-80-characters"),
    pytest.param(sb.with_b(data_offsets=[20, 8]), refusal("st.offsets.out_of_order", "b", "BEGIN <= END", "[20, 8]"),
                 id="ST-3.5-end-before-begin"),
    pytest.param(sb.with_b(shape=[2 ** 32, 2 ** 32, 0]), refusal(
        "st.shape.invalid", "b", "dimensions whose running product stays below 2^64",
        "overflow at dimension 1 of [4294967296, 4294967296, 0]"), id="ST-3.4-product-2^64"),
    pytest.param(sb.with_b(shape=[2] * 70), refusal(
        "st.shape.invalid", "b", "dimensions whose running product stays below 2^64",
        "overflow at dimension 63 of [2, 2, 2, 2, 2, 2, 2, 2, ...] (70 dims)"), id="ST-3.4-long-shape-cut"),
    pytest.param(sb.with_b(dtype="F4", shape=[1] * 8), refusal(
        "st.shape.partial_byte", "b", "a whole number of bytes (F4 is 4 bits)", "4 bits for shape [1, 1, 1, 1, 1, 1, 1, 1]"),
        id="ST-3.6-8-dims-whole"),
    pytest.param(sb.with_b(dtype="F4", shape=[1] * 9), refusal(
        "st.shape.partial_byte", "b", "a whole number of bytes (F4 is 4 bits)",
        "4 bits for shape [1, 1, 1, 1, 1, 1, 1, 1, ...] (9 dims)"), id="ST-3.6-9-dims-cut"),
    pytest.param(sb.with_b(data_offsets=[8, 18]), refusal("st.offsets.size_mismatch", "b", "END - BEGIN = 12 bytes (I32 [3])",
                                                          "10 bytes ([8, 18])"), id="ST-3.7-10-of-12"),
    pytest.param(sb.with_b(dtype="U8", shape=[2 ** 60 + 1], data_offsets=[8, 8 + 2 ** 60]), refusal(
        "st.offsets.size_mismatch", "b", f"END - BEGIN = {2 ** 60 + 1} bytes (U8 [{2 ** 60 + 1}])",
        f"{2 ** 60} bytes ([8, {8 + 2 ** 60}])"), id="ST-3.7-exact-beyond-2^53"),
    # ST-4: the tensors tile the buffer; the file ends where the buffer does
    pytest.param(sb.base([("a", sb.A), ("b", {**sb.B, "data_offsets": [4, 16]})]), refusal(
        "st.offsets.overlap", "b", "BEGIN >= 8, the end of 'a'", "[4, 16]"), id="ST-4.1-overlap"),
    pytest.param(sb.base([("a", sb.A), ("b", {**sb.A, "data_offsets": [0, 8]})]), refusal(
        "st.offsets.overlap", "b", "BEGIN >= 8, the end of 'a'", "[0, 8]"), id="ST-4.1-same-offsets-by-name"),
    pytest.param(sb.base([("a", {**sb.A, "data_offsets": [4, 12]})], bytes(12)), refusal(
        "st.offsets.hole", "a", "BEGIN = 0, the start of the byte buffer (no unreferenced bytes)",
        "[4, 12], leaving 4 bytes unreferenced"), id="ST-4.2-hole-at-start"),
    pytest.param(sb.base([("a", sb.A), ("b", {**sb.B, "data_offsets": [12, 24]})], bytes(24)), refusal(
        "st.offsets.hole", "b", "BEGIN = 8, the end of 'a' (no unreferenced bytes)",
        "[12, 24], leaving 4 bytes unreferenced"), id="ST-4.2-hole-after-a"),
])
def test_refusal_whole(blob, expected):
    """ST-1..ST-4: each malformed file is refused with its code, the tensor, the constraint and the value, naming the file."""
    assert whole(lambda: read_header_bytes(blob, name=FILE)) == expected


def test_truncated_data_whole():
    """ST-4.3: a buffer 4 bytes short of b's END names b, the file size and the bytes missing."""
    blob = sb.base(data=sb.DATA[:16])
    n, size = n_of(blob), len(blob)
    assert whole(lambda: read_header_bytes(blob, name=FILE)) == refusal(
        "st.truncated", "b", f"within the file ({size} bytes)",
        f"data ending at file offset {8 + n + 20}; 4 bytes missing")


def test_trailing_bytes_whole():
    """ST-4.3: 4 bytes past the last tensor's END are refused, the expected size spelled out."""
    blob = sb.base(data=sb.DATA + b"\x00" * 4)
    n, size = n_of(blob), len(blob)
    assert whole(lambda: read_header_bytes(blob, name=FILE)) == refusal(
        "st.file.size", "file size", f"{8 + n + 20} bytes (8 + header {n} + buffer 20)",
        f"{size} bytes: 4 trailing bytes no tensor references")


def test_header_exactly_filling_the_file_is_valid():
    """ST-1.3 at the limit: 8 + N equal to the file size (an empty header object, no data) is a valid file."""
    header = read_header_bytes(struct.pack("<Q", 2) + b"{}")
    assert (header.tensors, header.metadata, header.header_size, header.file_size) == ({}, None, 2, 10)


def test_bytes_are_named_by_default():
    """ST-1: content read from memory is named <bytes> in its refusals unless a name is given."""
    assert whole(lambda: read_header_bytes(b"\x00"))[-1] == "<bytes>"


def test_empty_tensors_at_one_offset_are_valid():
    """ST-4: zero-byte tensors sharing [0, 0] neither overlap nor leave a hole."""
    blob = sb.base([("b", {"dtype": "F16", "shape": [0], "data_offsets": [0, 0]}),
                    ("a", {"dtype": "F16", "shape": [2, 0], "data_offsets": [0, 0]})], b"")
    assert list(read_header_bytes(blob).tensors) == ["b", "a"]


@pytest.mark.parametrize(("text", "message"), [
    pytest.param(" {}", "header has 1 leading and 0 trailing whitespace bytes", id="leading-space"),
    pytest.param("{}\n", "header has 0 leading and 1 trailing whitespace bytes", id="trailing-LF"),
])
def test_padding_warning_whole(text, message):
    """ST-2.3: leading whitespace, or trailing padding other than 0x20, is a warning that says what the README requires."""
    (f,) = read_header_bytes(header_of(text)).findings
    assert (f.code, f.severity, f.clause, f.tensor, f.message) == (
        "st.header.padding", "warning", "ST-2.3", None,
        message + "; the format README requires '{' first and allows only trailing 0x20 padding")


def test_trailing_spaces_are_no_warning():
    """ST-2.3: trailing 0x20 padding is what the README allows: no finding."""
    assert read_header_bytes(header_of("{}    ")).findings == ()


def test_unknown_key_warning_whole():
    """ST-3.2: an entry key the format does not define is a warning naming the tensor and the keys."""
    (f,) = read_header_bytes(sb.with_b(zz=1, aa=2)).findings
    assert (f.code, f.severity, f.tensor, f.message) == (
        "st.tensor.unknown_key", "warning", "b", "tensor entry has keys the format does not define: ['aa', 'zz']")


def test_metadata_read():
    """ST-2.6: __metadata__ is kept as its string map."""
    assert read_header_bytes(header_of('{"__metadata__":{"format":"pt","k":"v"}}')).metadata == {"format": "pt", "k": "v"}


class ShortSource:
    """A byte source whose file shrank after its size was taken: reads return fewer bytes than asked."""

    name, size = FILE, 100

    def __init__(self, blob: bytes):
        self.blob = blob

    def read(self, offset: int, n: int) -> bytes:
        return self.blob[offset:offset + n]


def test_source_that_shrank_is_truncated_whole():
    """ST-1.3: a header read that returns fewer than N bytes (the file shrank) is refused, the byte counts stated."""
    blob = struct.pack("<Q", 50) + b"{}"
    assert whole(lambda: read_header_source(ShortSource(blob))) == refusal("st.truncated", "header", "50 bytes", "2 bytes")


class MemorySource:
    name = FILE

    def __init__(self, blob: bytes):
        self.blob, self.size = blob, len(blob)

    def read(self, offset: int, n: int) -> bytes:
        return self.blob[offset:offset + n]


def test_open_tensor_from_a_source_reads_its_own_bytes():
    """ST-5.2: b (I32 [3] at [8, 20] of bytes 0..19) read through a source is little-endian 0x0b0a0908, ..."""
    blob = sb.base()
    header = read_header_bytes(blob, name=FILE)
    b = open_tensor(header, "b", MemorySource(blob))
    assert (b.dtype, b.shape, b.tolist()) == (np.dtype("<i4"), (3,), [0x0B0A0908, 0x0F0E0D0C, 0x13121110])


def test_open_tensor_from_a_source_keeps_its_shape():
    """ST-5.2: a (F16 [2, 2] at [0, 8] of bytes 0..19) read through a source is row-major [2, 2], bits 0x0100, 0x0302, ..."""
    blob = sb.base()
    a = open_tensor(read_header_bytes(blob, name=FILE), "a", MemorySource(blob))
    assert (a.dtype, a.view(np.uint16).tolist()) == (np.dtype("<f2"), [[0x0100, 0x0302], [0x0504, 0x0706]])


def test_open_tensor_missing_whole():
    """QF-2.1: a name the file does not hold is tensor.missing, with the file's tensor count."""
    header = read_header_bytes(sb.base(), name=FILE)
    assert whole(lambda: open_tensor(header, "zz")) == refusal("tensor.missing", "zz", "a tensor of this file (2 tensors)",
                                                               "absent")


def test_open_tensor_after_the_file_grew_whole(tmp_path):
    """ST-5.1: a file whose size changed since its header was read is refused before any mapping."""
    path = tmp_path / FILE
    path.write_bytes(sb.base())
    header = read_header(path)
    with open(path, "ab") as f:
        f.write(b"\x00")
    size = len(sb.base())
    assert whole(lambda: open_tensor(header, "b")) == refusal(
        "st.file.size", "file size", f"{size} bytes, as when the header was read", f"{size + 1} bytes", str(path))


def test_open_one_byte_tensor(tmp_path):
    """ST-5.1: a one-byte tensor is mapped from the file (U8 [1] holding 7)."""
    path = tmp_path / FILE
    path.write_bytes(sb.base([("u", {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]})], b"\x07"))
    assert open_tensor(read_header(path), "u").tolist() == [7]


@pytest.mark.parametrize(("dtype", "shape", "actual"), [
    pytest.param("U8", [1] * NUMPY_MAXDIMS + [0], f"{NUMPY_MAXDIMS + 1} dims", id="maxdims-plus-1"),
    pytest.param("U8", [2 ** 62, 2, 0], "[4611686018427387904, 2, 0]", id="U8-2^63-bytes"),
    pytest.param("I32", [2 ** 60, 2, 0], "[1152921504606846976, 2, 0]", id="I32-2^63-bytes"),
])
def test_open_tensor_numpy_cannot_hold_whole(tmp_path, dtype, shape, actual):
    """ST-5.3: a valid empty tensor NumPy cannot hold (too many dims, 2^63 bytes of non-zero dims) is tensor.shape."""
    path = tmp_path / FILE
    path.write_bytes(sb.base([("e", {"dtype": dtype, "shape": shape, "data_offsets": [0, 0]})], b""))
    err = whole(lambda: open_tensor(read_header(path), "e"))
    assert err == refusal("tensor.shape", "e", NUMPY_CONSTRAINT, actual, str(path))


@pytest.mark.parametrize(("dtype", "shape"), [
    pytest.param("U8", [1] * (NUMPY_MAXDIMS - 1) + [0], id="maxdims"),
    pytest.param("U8", [2 ** 62, 1, 0], id="U8-2^62-bytes"),
])
def test_open_tensor_numpy_limits_at_the_limit(tmp_path, dtype, shape):
    """ST-5.3 at the limit: NPY_MAXDIMS dims, or non-zero dims of 2^62 bytes, is an (empty) array."""
    path = tmp_path / FILE
    path.write_bytes(sb.base([("e", {"dtype": dtype, "shape": shape, "data_offsets": [0, 0]})], b""))
    arr = open_tensor(read_header(path), "e")
    assert (arr.shape, arr.size, arr.flags.writeable) == (tuple(shape), 0, False)


# -- the JSON subset (ST-2.2; CKPT-3.1 and CKPT-4.2 read index and config files with it) --

def test_parse_json_reads_from_the_start_by_default():
    """ST-2.2: parse_json returns one value and where it ends; objects as their (key, value) pairs."""
    value, end = parse_json('{"a":1} ')
    assert (type(value), list(value), end) == (JsonObject, [("a", 1)], 7)


def test_parse_json_too_deep():
    """ST-2.2: nesting deep enough to exhaust the parser is a ValueError saying so."""
    with pytest.raises(ValueError) as info:
        parse_json("[" * 200_000)
    assert str(info.value) == "JSON nested too deeply"


def test_load_json_keeps_pairs_by_default():
    """CKPT-3.1: load_json gives objects as pairs unless dicts=True."""
    assert (load_json(b'{"a":1,"a":2}'), load_json(b'{"a":1,"b":2}', dicts=True)) == ([("a", 1), ("a", 2)], {"a": 1, "b": 2})


def test_load_json_duplicate_key_message():
    """CKPT-3.1: with dicts=True a duplicate key is an error naming the key's first 80 characters."""
    key = "k" * 100
    with pytest.raises(ValueError) as info:
        load_json(json.dumps({key: 1})[:-1].encode() + b"," + json.dumps(key).encode() + b":2}", dicts=True)
    assert str(info.value) == f"duplicate key '{'k' * 80}'"


@pytest.mark.parametrize(("raw", "message"), [
    pytest.param(b"NaN", "NaN is not JSON", id="NaN"),
    pytest.param(b"1" + b"0" * 400 + b".0", "number out of range: " + "1" + "0" * 39, id="1e400"),
    pytest.param(b"[1]\x0c", "extra data after the JSON value at character 3", id="form-feed-after"),
])
def test_load_json_refusal_message(raw, message):
    """ST-2.2: outside serde_json's subset (NaN, a float past a double, non-JSON whitespace) is a ValueError saying what."""
    with pytest.raises(ValueError) as info:
        load_json(raw)
    assert str(info.value) == message


def test_load_json_allows_nan_only_when_asked():
    """ST-2.2: allow_nan (files only Python readers consume) admits NaN."""
    assert np.isnan(load_json(b"NaN", allow_nan=True))


def test_load_json_json_whitespace_around():
    """ST-2.2: JSON whitespace (space, tab, LF, CR) before and after the value is allowed."""
    assert load_json(b" \n\t\r[1] \t") == [1]


def test_load_json_invalid_utf8_is_a_decode_error():
    """ST-2.1: strict UTF-8: a byte 0xff is a UnicodeDecodeError, not replaced or skipped."""
    with pytest.raises(UnicodeDecodeError):
        load_json(b'"\xff"')
