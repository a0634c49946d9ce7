"""The safetensors reader's behaviour beyond verdicts: memory maps, dtypes, bounds, error fields."""

from __future__ import annotations

import os
import struct
import tracemalloc

import numpy as np
import pytest

import st_builder as sb
from qformats.containers.safetensors import (
    DTYPES,
    MAX_HEADER_SIZE,
    numpy_dtype,
    open_tensor,
    read_header,
    read_header_bytes,
)
from qformats.errors import QFormatsError


@pytest.fixture
def st_file(tmp_path):
    def write(blob: bytes, name: str = "m.safetensors"):
        path = tmp_path / name
        path.write_bytes(blob)
        return path
    return write


def test_header_geometry(st_file):
    """ST-1: data_start = 8 + N, and tensor bytes sit at data_start + BEGIN."""
    blob = sb.base()
    header = read_header(st_file(blob))
    n = struct.unpack("<Q", blob[:8])[0]
    assert (header.header_size, header.data_start, header.file_size) == (n, 8 + n, len(blob))
    assert header.tensors["b"].data_offsets == (8, 20) and header.tensors["b"].nbytes == 12


def test_open_tensor_is_read_only_memmap_with_little_endian_values(st_file):
    """ST-5.1: a tensor is memory-mapped read-only; I32 bytes 8..19 read as little-endian words."""
    header = read_header(st_file(sb.base()))
    b = open_tensor(header, "b")
    assert isinstance(b.base, np.memmap) or isinstance(b, np.memmap)
    assert not b.flags.writeable
    np.testing.assert_array_equal(b, np.array([0x0B0A0908, 0x0F0E0D0C, 0x13121110], np.int32), strict=False)
    with pytest.raises(ValueError):
        b[0] = 1


def test_open_tensor_never_writes(st_file):
    """QF-1.2: reading every tensor leaves the file's bytes and mtime unchanged."""
    path = st_file(sb.CASES["valid_bf16_f8_scalar"][0]())
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    header = read_header(path)
    for name in header.tensors:
        open_tensor(header, name).sum()
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before


def test_bf16_and_f8_come_back_as_raw_bits(st_file):
    """ST-5.2: BF16 is returned as uint16 bits, F8_E4M3 as uint8, a 0-rank F32 as a scalar array."""
    header = read_header(st_file(sb.CASES["valid_bf16_f8_scalar"][0]()))
    h, f, s = (open_tensor(header, n) for n in ("h", "f", "s"))
    assert (h.dtype, h.shape, h.tolist()) == (np.dtype("<u2"), (3,), [0x0100, 0x0302, 0x0504])
    assert (f.dtype, f.shape, f[1, 4]) == (np.dtype("u1"), (2, 5), 15)
    assert (s.shape, s.tobytes()) == ((), bytes([16, 17, 18, 19]))


def test_sub_byte_dtype_comes_back_as_packed_bytes(st_file):
    """ST-5.2: F4 [4] (two bytes) is returned as its 2 packed bytes, 1-D uint8."""
    blob = sb.base([("q", {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]})], b"\x21\x43")
    header = read_header(st_file(blob))
    q = open_tensor(header, "q")
    assert (q.dtype, q.tolist()) == (np.dtype("u1"), [0x21, 0x43])


def test_empty_tensor_reads_as_empty_array(st_file):
    """ST-3.7: a tensor with a 0 dimension has BEGIN == END and reads as an empty array of its shape."""
    header = read_header(st_file(sb.CASES["valid_empty_tensor"][0]()))
    e = open_tensor(header, "e")
    assert (e.shape, e.dtype, e.flags.writeable) == ((0, 3), np.dtype("<f4"), False)


def _one_tensor(dtype: str, shape: list[int], nbytes: int) -> bytes:
    return sb.base([("t", {"dtype": dtype, "shape": shape, "data_offsets": [0, nbytes]})], bytes(nbytes))


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_dtype_byte_size_agrees_with_library(dtype, st_file):
    """ST-3.3, ST-3.7: for each of the 22 dtypes, [8] elements take the one byte size the library accepts;
    one byte more or less is rejected by both; the NumPy view covers exactly those bytes."""
    sizes = [k for k in range(0, 66) if sb.library_accepts(_one_tensor(dtype, [8], k))]
    assert len(sizes) == 1, sizes
    (size,) = sizes
    for wrong in (size - 1, size + 1):
        with pytest.raises(QFormatsError) as exc:
            read_header_bytes(_one_tensor(dtype, [8], wrong))
        assert exc.value.code == "st.offsets.size_mismatch"
    arr = open_tensor(read_header(st_file(_one_tensor(dtype, [8], size))), "t")
    assert arr.nbytes == size and arr.dtype == numpy_dtype(dtype)


@pytest.mark.parametrize("shape", [
    pytest.param([(1 << 64) - 1] * 230, id="230-dims-of-2^64-1"),
    pytest.param([2] * 5000, id="5000-dims-of-2"),
    pytest.param([1 << 63, 8, 0], id="2^63-8-0"),
    pytest.param([1 << 32, 1 << 32, 0], id="2^32-2^32-0"),
])
def test_shape_product_overflow_is_invalid_like_the_library(shape):
    """ST-3.4: "the running product of the dimensions, taken in order, MUST stay below 2^64" -- even when
    a later 0 makes it empty; the message stays short."""
    blob = _one_tensor("U8", shape, 0)
    assert not sb.library_accepts(blob)
    with pytest.raises(QFormatsError) as exc:
        read_header_bytes(blob)
    assert (exc.value.code, exc.value.clause) == ("st.shape.invalid", "ST-3.4")
    assert len(exc.value.message) < 400


@pytest.mark.parametrize("shape", [
    pytest.param([0, 1 << 63], id="0-then-2^63"),
    pytest.param([(1 << 64) - 1, 0], id="2^64-1-then-0"),
])
def test_running_product_below_2p64_is_valid(shape):
    """ST-3.4: a 0 before the large dimension keeps the running product at 0: valid, as in the library."""
    blob = _one_tensor("U8", shape, 0)
    assert sb.library_accepts(blob)
    assert read_header_bytes(blob).tensors["t"].shape == tuple(shape)


@pytest.mark.parametrize(("shape", "actual"), [
    pytest.param([1 << 63, 0], "[9223372036854775808, 0]", id="2^63-0"),
    pytest.param([0, 1 << 62, 2], "[0, 4611686018427387904, 2]", id="nonzero-bytes-2^63"),
    pytest.param([0] * 65, "65 dims", id="65-dims"),
    pytest.param([1] * 65, "65 dims", id="65-dims-nonempty"),
])
def test_valid_shape_numpy_cannot_hold_is_a_coded_error(shape, actual, st_file):
    """ST-5.3: a shape the library accepts but NumPy cannot hold is tensor.shape from open_tensor, not a
    NumPy ValueError."""
    nbytes = 1 if 1 in shape else 0
    blob = _one_tensor("U8", shape, nbytes)
    assert sb.library_accepts(blob)
    header = read_header(st_file(blob))
    with pytest.raises(QFormatsError) as exc:
        open_tensor(header, "t")
    assert (exc.value.code, exc.value.clause, exc.value.tensor) == ("tensor.shape", "ST-5.3", "t")
    assert exc.value.actual == actual


def test_largest_empty_shape_numpy_holds(st_file):
    """ST-5.3: the byte size counts non-zero dimensions only, so [0, 2^62 - 1] F16 (2^63 - 2 bytes) opens."""
    header = read_header(st_file(_one_tensor("F16", [0, (1 << 62) - 1], 0)))
    assert open_tensor(header, "t").shape == (0, (1 << 62) - 1)


def test_unreadable_paths_are_oserrors(tmp_path):
    """CKPT-1: the reader raises OSError for a path it cannot read (a FIFO, unopened); discovery maps it."""
    with pytest.raises(FileNotFoundError):
        read_header(tmp_path / "absent.safetensors")
    os.mkfifo(tmp_path / "f.safetensors")
    with pytest.raises(OSError, match="not a regular file"):
        read_header(tmp_path / "f.safetensors")


def test_unknown_tensor_name(st_file):
    """QF-2.1: asking for a tensor the file does not hold raises tensor.missing naming the file."""
    path = st_file(sb.base())
    with pytest.raises(QFormatsError) as exc:
        open_tensor(read_header(path), "zz")
    assert (exc.value.code, exc.value.tensor, exc.value.file) == ("tensor.missing", "zz", str(path))


def test_file_shrunk_after_header_read(st_file):
    """ST-4.3: a file that changed size after its header was read is refused, not mapped (no SIGBUS)."""
    path = st_file(sb.base())
    header = read_header(path)
    path.write_bytes(sb.base()[:-4])
    with pytest.raises(QFormatsError) as exc:
        open_tensor(header, "b")
    assert exc.value.code == "st.file.size"


def test_open_tensor_reads_only_that_tensor(st_file):
    """ST-5.1: opening one tensor of a 64 MiB file allocates far less than the file (memory map, not read)."""
    big = 16 * 1024 * 1024
    blob = sb.base([("small", {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}),
                    ("big", {"dtype": "F32", "shape": [big], "data_offsets": [4, 4 + 4 * big]})],
                   bytes(4 + 4 * big))
    path = st_file(blob)
    del blob
    tracemalloc.start()
    header = read_header(path)
    arr = open_tensor(header, "big")
    total = float(arr[::4096].sum())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total == 0.0 and peak < 1 << 20


def test_header_too_large_checked_before_reading(st_file):
    """ST-1.2: N = 100,000,001 with a short file is header.too_large, without reading or allocating N bytes."""
    path = st_file(struct.pack("<Q", MAX_HEADER_SIZE + 1) + b"{}")
    tracemalloc.start()
    with pytest.raises(QFormatsError) as exc:
        read_header(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert exc.value.code == "st.header.too_large" and exc.value.actual == MAX_HEADER_SIZE + 1
    assert peak < 1 << 20


def test_header_at_cap_is_allowed():
    """ST-1.2: the cap is inclusive, like the library's `n > MAX_HEADER_SIZE` test (length checked, not content)."""
    with pytest.raises(QFormatsError) as exc:
        read_header_bytes(struct.pack("<Q", MAX_HEADER_SIZE) + b"{}")
    assert exc.value.code == "st.header.length"


@pytest.mark.parametrize(("cut", "code"), [
    pytest.param(0, "st.truncated", id="empty-file"),
    pytest.param(7, "st.truncated", id="inside-length-prefix"),
    pytest.param(8, "st.header.length", id="after-length-prefix"),
    pytest.param(60, "st.header.length", id="inside-header"),
    pytest.param(-12, "st.truncated", id="at-tensor-b-start"),
    pytest.param(-1, "st.truncated", id="one-byte-short"),
])
def test_truncation_points(cut, code):
    """ST-1.1, ST-1.3: a valid file cut anywhere is rejected with the code for where the cut falls."""
    blob = sb.base()
    with pytest.raises(QFormatsError) as exc:
        read_header_bytes(blob[:cut] if cut >= 0 else blob[:len(blob) + cut])
    assert exc.value.code == code


def test_error_names_tensor_constraint_and_actual():
    """Messages read "'b' must be END - BEGIN = 8 bytes ... (got 12 bytes ...)" with structured fields."""
    with pytest.raises(QFormatsError) as exc:
        read_header_bytes(sb.with_b(shape=[2]), name="x.safetensors")
    err = exc.value
    assert (err.code, err.clause, err.tensor, err.file) == ("st.offsets.size_mismatch", "ST-3.7", "b", "x.safetensors")
    assert err.message == "'b' must be END - BEGIN = 8 bytes (I32 [2]) (got 12 bytes ([8, 20]))"


def test_nul_padding_message_says_nul():
    """ST-2.2: NUL padding (accepted by some hand-rolled readers) is named as such in the message."""
    with pytest.raises(QFormatsError) as exc:
        read_header_bytes(sb.CASES["header_nul_padded"][0]())
    assert "3 NUL bytes" in exc.value.message


@pytest.mark.parametrize(("text", "code"), [
    pytest.param('{"a":1e400}', "st.header.json", id="float-out-of-range"),
    pytest.param('{"\\ud800":{}}', "st.header.json", id="lone-surrogate"),
    pytest.param("[" * 100_000 + "]" * 100_000, "st.header.json", id="deep-nesting"),
    pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"dtype":"U8"}}', "st.tensor.invalid",
                 id="duplicate-field"),
    pytest.param('{"a":{"dtype":"U8","shape":[true],"data_offsets":[0,1]}}', "st.shape.invalid", id="bool-dim"),
    pytest.param('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}}', "st.offsets.invalid",
                 id="offset-2^64"),
    pytest.param('{"__metadata__":null,"__metadata__":null}', "st.name.duplicate", id="metadata-twice"),
])
def test_json_subset_edges(text, code):
    """ST-2.2..ST-3.5: inputs Python's json accepts but serde_json (or the schema) rejects get our codes."""
    with pytest.raises(QFormatsError) as exc:
        read_header_bytes(sb.st_bytes(text, b"\0"))
    assert exc.value.code == code
