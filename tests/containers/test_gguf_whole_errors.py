"""The GGUF reader's refusals asserted whole (code, clause, field or tensor, constraint, actual, message, file), each
limit at the limit and one past, and the remote header's growing prefix (issue 33: tests with teeth;
`make mutation MODULE=qformats/containers/gguf.py`).

Every file is hand-built by gguf_builder (``struct`` field by field, spec/containers.md GGUF-1..5); every offset,
size and expected value below is worked by hand from that layout: the header is 24 bytes (magic, u32 version,
u64 tensor_count, u64 kv_count), a string is a u64 length then its bytes, a KV is key string + u32 type + value, a
tensor info is name string + u32 n_dims + n_dims x u64 ne + u32 type + u64 offset.
"""

from __future__ import annotations

import errno
import mmap
import struct

import numpy as np
import pytest

import gguf_builder as gb
from qformats.containers import gguf as G
from qformats.errors import QFormatsError

FILE = "m.gguf"
INT64_MAX = (1 << 63) - 1
KEY_FORM = ("an ASCII key of dot-separated lower_snake_case segments of at most 65535 bytes, as the GGUF "
            "specification requires (ggml would load this file)")


def whole(call):
    """Everything a refusal carries, the clause and the file included."""
    with pytest.raises(QFormatsError) as info:
        call()
    e = info.value
    return e.code, e.clause, e.tensor, e.constraint, e.actual, e.message, e.file


def refusal(code, clause, tensor, constraint, actual, shown=None, file=FILE):
    """The expected refusal; ``shown`` is the actual value as the message prints it (default ``str(actual)``)."""
    shown = str(actual) if shown is None else shown
    return code, clause, tensor, constraint, actual, f"'{tensor}' must be {constraint} (got {shown})", file


def truncated(what, n, at, left, clause="GGUF-1.4"):
    return refusal("gguf.truncated", clause, what, f"complete: {n} bytes at offset {at}", f"{left} bytes before end of file")


def read(blob: bytes) -> G.GGUFFile:
    return G.read_gguf_bytes(blob, name=FILE)


def one_kv(entry: bytes) -> bytes:
    return gb.gguf([entry], [])


def one_tensor(info: bytes, data: bytes = b"") -> bytes:
    return gb.gguf([], [info], data)


HEAD = gb.gguf([], [])[:8]           # magic + version 3; the counts follow


def head(n_tensors: int, n_kv: int) -> bytes:
    return HEAD + gb.u64(n_tensors) + gb.u64(n_kv)


TWO_TENSORS = gb.gguf(gb.base_kvs(), gb.base_infos(), gb.base_data())   # data at 224: a.weight 64 bytes, b.weight 288


REFUSALS = [
    # GGUF-1: magic, version, counts
    pytest.param(b"GGU", truncated("magic", 4, 0, 3), id="GGUF-1.4-3-bytes"),
    pytest.param(b"FUGG" + TWO_TENSORS[4:], refusal("gguf.magic", "GGUF-1.1", "magic", "b'GGUF' (47 47 55 46)", b"FUGG",
                                                    "b'FUGG'"), id="GGUF-1.1-magic"),
    pytest.param(gb.gguf([], [], version=1), refusal("gguf.version", "GGUF-1.2", "version", "2 or 3", 1), id="GGUF-1.2-v1"),
    pytest.param(gb.gguf([], [], version=0), refusal("gguf.version", "GGUF-1.2", "version", "2 or 3", 0), id="GGUF-1.2-v0"),
    pytest.param(gb.gguf([], [], version=4), refusal("gguf.version", "GGUF-1.2", "version", "2 or 3", 4), id="GGUF-1.2-v4"),
    pytest.param(gb.gguf([], [], version=0x00010001), refusal("gguf.version", "GGUF-1.2", "version", "2 or 3", 65537),
                 id="GGUF-1.2-low-bits-1"),
    pytest.param(gb.gguf([], [], version=0x00018000), refusal("gguf.version", "GGUF-1.2", "version", "2 or 3", 98304),
                 id="GGUF-1.2-low-bits-0x8000"),
    pytest.param(gb.gguf([], [], version=0x03000000), refusal(
        "gguf.version", "GGUF-1.3", "version", "2 or 3, little-endian", "50331648 (0x03000000, byte-swapped?)"),
        id="GGUF-1.3-v3-byteswapped"),
    pytest.param(gb.gguf([], [], version=0x00010000), refusal(
        "gguf.version", "GGUF-1.3", "version", "2 or 3, little-endian", "65536 (0x00010000, byte-swapped?)"),
        id="GGUF-1.3-low-16-bits-zero"),
    pytest.param(head(2**20 + 1, 0), refusal("gguf.count.too_large", "GGUF-1.5", "tensor_count", "at most 1048576",
                                             1048577), id="GGUF-1.5-tensors-one-past"),
    pytest.param(head(2**20, 0), truncated("1048576 tensor infos", 26214400, 24, 0, "GGUF-1.5"),
                 id="GGUF-1.5-tensors-at-limit"),
    pytest.param(head(2**64 - 1, 0), refusal("gguf.count.too_large", "GGUF-1.5", "tensor_count", "at most 1048576",
                                             2**64 - 1), id="GGUF-1.5-tensors-u64-max"),
    pytest.param(head(0, 2**20 + 1), refusal("gguf.count.too_large", "GGUF-1.5", "metadata_kv_count", "at most 1048576",
                                             1048577), id="GGUF-1.5-kvs-one-past"),
    pytest.param(head(0, 2**20), truncated("1048576 metadata entries", 14680064, 24, 0, "GGUF-1.5"),
                 id="GGUF-1.5-kvs-at-limit"),
    # 14 bytes is the smallest KV (u64 1 + "k" + u32 type + one U8 byte): 13 left cannot hold one
    pytest.param(head(0, 1) + bytes(13), truncated("1 metadata entries", 14, 24, 13, "GGUF-1.5"), id="GGUF-1.5-kv-13-bytes"),
    # 25 bytes is the smallest tensor info (u64 1 + "s" + n_dims 0 + type + offset)
    pytest.param(head(1, 0) + bytes(24), truncated("1 tensor infos", 25, 24, 24, "GGUF-1.5"), id="GGUF-1.5-info-24-bytes"),
    pytest.param(head(1, 0) + gb.tinfo("s", [], gb.T_F32, 0), refusal(
        "gguf.truncated", "GGUF-5.1", "tensor data", "a data section starting at offset 64", "end of file at 49"),
        id="GGUF-1.5-info-25-bytes-then-GGUF-5.1"),
    # GGUF-2.1: string lengths (key at 24: its bytes start at 32)
    pytest.param(head(0, 1) + gb.u64(2**30) + b"kkkkkk", truncated("kv[0].key", 2**30, 32, 6), id="GGUF-2.1-key-at-limit"),
    pytest.param(head(0, 1) + gb.u64(2**30 + 1) + b"kkkkkk", refusal(
        "gguf.string.length", "GGUF-2.1", "kv[0].key", "a string of 0..1073741824 bytes", 1073741825),
        id="GGUF-2.1-key-one-past"),
    pytest.param(head(0, 1) + gb.u64(2**64 - 1) + b"kkkkkk", refusal(
        "gguf.string.length", "GGUF-2.1", "kv[0].key", "a string of 0..1073741824 bytes", 2**64 - 1),
        id="GGUF-2.1-key-u64-max"),
    pytest.param(one_kv(gb.kv("k", gb.STRING, gb.gstr("x", 2**30))), truncated("k", 2**30, 45, 1),
                 id="GGUF-2.1-value-at-limit"),
    pytest.param(one_kv(gb.kv("k", gb.STRING, gb.gstr("x", 2**30 + 1))), refusal(
        "gguf.string.length", "GGUF-2.1", "k", "a string of 0..1073741824 bytes", 1073741825), id="GGUF-2.1-value-one-past"),
    # GGUF-2.2: UTF-8 of keys, values, names
    pytest.param(one_kv(gb.kv(b"k\xff", gb.U32, gb.u32(1))), refusal(
        "gguf.string.utf8", "GGUF-2.2", "kv[0].key", "valid UTF-8", "invalid byte at 1 of 2"), id="GGUF-2.2-key"),
    pytest.param(gb.gguf([gb.kv_u32("a", 1), gb.kv(b"\xc3", gb.U32, gb.u32(1))], []), refusal(
        "gguf.string.utf8", "GGUF-2.2", "kv[1].key", "valid UTF-8", "invalid byte at 0 of 1"), id="GGUF-2.2-second-key"),
    pytest.param(one_kv(gb.kv("k", gb.STRING, gb.gstr(b"ab\xff"))), refusal(
        "gguf.string.utf8", "GGUF-2.2", "k", "valid UTF-8", "invalid byte at 2 of 3"), id="GGUF-2.2-value"),
    pytest.param(one_tensor(gb.tinfo(b"t\xff", [8], gb.T_F32, 0), gb.f32_payload(8)), refusal(
        "gguf.string.utf8", "GGUF-2.2", "tensor[0].name", "valid UTF-8", "invalid byte at 1 of 2"), id="GGUF-2.2-name"),
    # GGUF-2.3, 2.4: keys
    pytest.param(one_kv(gb.kv("", gb.U32, gb.u32(1))), refusal("gguf.key.empty", "GGUF-2.3", "kv[0].key", "a non-empty key",
                                                            "''"), id="GGUF-2.3-empty"),
    pytest.param(gb.gguf([gb.kv_u32("a", 1), gb.kv("", gb.U32, gb.u32(1))], []), refusal(
        "gguf.key.empty", "GGUF-2.3", "kv[1].key", "a non-empty key", "''"), id="GGUF-2.3-second-empty"),
    pytest.param(gb.gguf([gb.kv_u32("a", 1), gb.kv_u32("a", 1)], []), refusal(
        "gguf.key.duplicate", "GGUF-2.4", "a", "a key that occurs once", "a second occurrence"), id="GGUF-2.4-duplicate"),
    # GGUF-2.5, 2.7, 2.8: value and element types, nesting, array counts (array "a": its count ends at 49)
    pytest.param(one_kv(gb.kv("k", 13, gb.u32(0))), refusal("gguf.value_type", "GGUF-2.5", "k", "a value type in 0..12", 13),
                 id="GGUF-2.5-value-13"),
    pytest.param(one_kv(gb.kv("K", 13, gb.u32(0))), refusal("gguf.value_type", "GGUF-2.5", "K", "a value type in 0..12", 13),
                 id="GGUF-2.5-type-before-key-form"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(13, 1, gb.u32(0)))), refusal(
        "gguf.value_type", "GGUF-2.5", "a element type", "a value type in 0..12", 13), id="GGUF-2.5-element-13"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.ARRAY, 1, gb.arr(gb.U8, 1, gb.u8(0))))), refusal(
        "gguf.array.nested", "GGUF-2.7", "a", "an array of scalars or strings", "ARRAY of ARRAY"), id="GGUF-2.7-nested"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.U8, 2**30 + 1, b""))), refusal(
        "gguf.array.length", "GGUF-2.8", "a", "at most 1073741824 elements", 1073741825), id="GGUF-2.8-one-past"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.U8, 2**30, b""))),
                 truncated("a (1073741824 x UINT8)", 2**30, 49, 0), id="GGUF-2.8-at-limit"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.U32, 3, gb.u32(1) * 2 + b"\0\0\0"))),
                 truncated("a (3 x UINT32)", 12, 49, 11), id="GGUF-1.4-u32-array-one-byte-short"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2**30, b""))),
                 truncated("a (1073741824 strings)", 2**33, 49, 0), id="GGUF-2.8-strings-at-limit"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, bytes(15)))), truncated("a (2 strings)", 16, 49, 15),
                 id="GGUF-1.4-two-strings-in-15-bytes"),
    # strings of an ARRAY[STRING]: "a[0]" = "x" at 49..58, "a[1]"'s length at 58, its bytes at 66
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, gb.gstr("x") + gb.u64(2**30 + 1)))), refusal(
        "gguf.string.length", "GGUF-2.1", "a[1]", "a string of 0..1073741824 bytes", 1073741825),
        id="GGUF-2.1-array-string-one-past"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, gb.gstr("x") + gb.u64(2**64 - 1)))), refusal(
        "gguf.string.length", "GGUF-2.1", "a[1]", "a string of 0..1073741824 bytes", 2**64 - 1),
        id="GGUF-2.1-array-string-u64-max"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, gb.gstr("x") + gb.u64(2**30)))),
                 truncated("a[1]", 2**30, 66, 0), id="GGUF-2.1-array-string-at-limit"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, gb.gstr("x") + gb.gstr("yz", 3)))),
                 truncated("a[1]", 3, 66, 2), id="GGUF-1.4-array-string-one-byte-short"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, gb.gstr("x") + bytes(7)))),
                 truncated("a[1] length", 8, 58, 7), id="GGUF-1.4-array-length-7-bytes"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, gb.gstr("ok") + gb.gstr(b"ab\xff")))), refusal(
        "gguf.string.utf8", "GGUF-2.2", "a[1]", "valid UTF-8", "invalid byte at 2 of 3"), id="GGUF-2.2-array-string"),
    # GGUF-2.6: BOOL
    pytest.param(one_kv(gb.kv("b", gb.BOOL, gb.u8(2))), refusal("gguf.bool", "GGUF-2.6", "b", "a BOOL of 0 or 1", 2),
                 id="GGUF-2.6-scalar-2"),
    pytest.param(one_kv(gb.kv("b", gb.ARRAY, gb.arr(gb.BOOL, 3, gb.u8(0) + gb.u8(2) + gb.u8(3)))), refusal(
        "gguf.bool", "GGUF-2.6", "b[1]", "a BOOL of 0 or 1", 2), id="GGUF-2.6-array-first-bad"),
    # GGUF-2.9: general.alignment
    pytest.param(one_kv(gb.kv("general.alignment", gb.I32, struct.pack("<i", 32))), refusal(
        "gguf.alignment", "GGUF-2.9", "general.alignment", "of type UINT32", "INT32"), id="GGUF-2.9-int32"),
    *[pytest.param(one_kv(gb.kv_u32("general.alignment", a)), refusal(
        "gguf.alignment", "GGUF-2.9", "general.alignment", "a power of two in 1..16777216", a), id=f"GGUF-2.9-{a}")
      for a in (0, 24, 2**25, 3 << 24)],
    pytest.param(one_kv(gb.kv_u32("general.alignment", 4)), refusal(
        "gguf.alignment", "GGUF-2.9", "general.alignment",
        "a multiple of 8, as the GGUF specification requires (ggml would load this file)", 4), id="GGUF-2.9-4"),
    # GGUF-2.10: key form; the key is shown ASCII-escaped, cut to 80 characters
    pytest.param(one_kv(gb.kv_str("General.Name", "x")), refusal("gguf.key.form", "GGUF-2.10", "General.Name", KEY_FORM,
                                                                "'General.Name'"), id="GGUF-2.10-uppercase"),
    pytest.param(one_kv(gb.kv_str("general.n\u00e4me", "x")), refusal(
        "gguf.key.form", "GGUF-2.10", "general.n\\xe4me", KEY_FORM, "'general.n\\\\xe4me'"), id="GGUF-2.10-not-ascii"),
    pytest.param(one_kv(gb.kv_u32("a\nb", 1)), refusal("gguf.key.form", "GGUF-2.10", "a\\nb", KEY_FORM, "'a\\\\nb'"),
                 id="GGUF-2.10-newline"),
    *[pytest.param(one_kv(gb.kv_u32(key, 1)), refusal("gguf.key.form", "GGUF-2.10", key, KEY_FORM, f"'{key}'"),
                   id=f"GGUF-2.10-{key}") for key in ("general..name", ".a", "a.", "my key", "a-b")],
    pytest.param(one_kv(gb.kv_u32("A" * 80, 1)), refusal("gguf.key.form", "GGUF-2.10", "A" * 80, KEY_FORM, f"'{'A' * 80}'"),
                 id="GGUF-2.10-shown-80"),
    pytest.param(one_kv(gb.kv_u32("A" * 81, 1)), refusal(
        "gguf.key.form", "GGUF-2.10", "A" * 77 + "...", KEY_FORM, f"'{'A' * 77}...'"), id="GGUF-2.10-shown-81-cut"),
    pytest.param(one_kv(gb.kv_u32("k" * 65536, 1)), refusal(
        "gguf.key.form", "GGUF-2.10", "k" * 77 + "...", KEY_FORM, f"'{'k' * 77}...'"), id="GGUF-2.10-65536-bytes"),
    # GGUF-2.11: general.* types
    pytest.param(one_kv(gb.kv_u32("general.architecture", 1)), refusal(
        "gguf.key.type", "GGUF-2.11", "general.architecture",
        "of type STRING, as the GGUF specification requires (ggml would load this file)", "UINT32"),
        id="GGUF-2.11-architecture-u32"),
    pytest.param(one_kv(gb.kv_str("general.quantization_version", "2")), refusal(
        "gguf.key.type", "GGUF-2.11", "general.quantization_version",
        "of type UINT32, as the GGUF specification requires (ggml would load this file)", "STRING"),
        id="GGUF-2.11-quantization-version-str"),
    # GGUF-3: tensor infos ("t" [8] F32 at 24: name 9 bytes, n_dims 4, ne 8, type 4, offset 8)
    pytest.param(one_tensor(gb.tinfo("n" * 64, [8], gb.T_F32, 0), gb.f32_payload(8)), refusal(
        "gguf.tensor.name_length", "GGUF-3.1", "tensor[0].name", "a string of 1..63 bytes", 64), id="GGUF-3.1-64"),
    pytest.param(one_tensor(gb.tinfo("", [8], gb.T_F32, 0), gb.f32_payload(8)), refusal(
        "gguf.tensor.name_length", "GGUF-3.1", "tensor[0].name", "a string of 1..63 bytes", 0), id="GGUF-3.1-empty"),
    pytest.param(gb.gguf([], [gb.tinfo("t", [8], gb.T_F32, 0), gb.tinfo("", [8], gb.T_F32, 32)], gb.f32_payload(16)), refusal(
        "gguf.tensor.name_length", "GGUF-3.1", "tensor[1].name", "a string of 1..63 bytes", 0), id="GGUF-3.1-second-empty"),
    pytest.param(gb.gguf([], [gb.tinfo("t", [8], gb.T_F32, 0), gb.tinfo("t", [8], gb.T_F32, 32)], gb.f32_payload(16)),
                 refusal("gguf.tensor.duplicate", "GGUF-3.2", "t", "a tensor name that occurs once", "a second occurrence"),
                 id="GGUF-3.2-duplicate"),
    pytest.param(one_tensor(gb.tinfo("t", [8, 1, 1, 1, 1], gb.T_F32, 0)), refusal(
        "gguf.tensor.n_dims", "GGUF-3.3", "t", "of rank n_dims <= 4", 5), id="GGUF-3.3-rank-5"),
    pytest.param(one_tensor(gb.tinfo("t", [8, 0], gb.T_F32, 0)), refusal(
        "gguf.tensor.dims", "GGUF-3.4", "t", "ne[1] in 1..2^63-1", 0), id="GGUF-3.4-ne1-zero"),
    pytest.param(one_tensor(gb.tinfo("t", [2**63], gb.T_I8, 0)), refusal(
        "gguf.tensor.dims", "GGUF-3.4", "t", "ne[0] in 1..2^63-1", 2**63), id="GGUF-3.4-ne0-2p63"),
    pytest.param(one_tensor(gb.tinfo("t", [2**62, 2], gb.T_I8, 0)), refusal(
        "gguf.tensor.dims", "GGUF-3.4", "t", "a product of ne below 2^63", 2**63), id="GGUF-3.4-product-2p63"),
    # at the limits: ne = 2^63-1 and the product 7 x (2^63-1)/7 of I8 are 2^63-1 bytes, read as far as GGUF-5.2
    pytest.param(one_tensor(gb.tinfo("t", [INT64_MAX], gb.T_I8, 0)), refusal(
        "gguf.data.past_end", "GGUF-5.2", "t", f"stored within the file (its data ends at {64 + INT64_MAX})", "file size 64"),
        id="GGUF-3.4-ne-2p63-minus-1"),
    pytest.param(one_tensor(gb.tinfo("t", [7, INT64_MAX // 7], gb.T_I8, 0)), refusal(
        "gguf.data.past_end", "GGUF-5.2", "t", f"stored within the file (its data ends at {96 + INT64_MAX})", "file size 96"),
        id="GGUF-3.4-product-2p63-minus-1"),
    pytest.param(one_tensor(gb.tinfo("t", [8], 43, 0)), refusal(
        "gguf.tensor.type", "GGUF-3.5", "t", "a ggml type id of the type table", "43 (unknown)"), id="GGUF-3.5-43"),
    pytest.param(one_tensor(gb.tinfo("t", [32], 4, 0)), refusal(
        "gguf.tensor.type", "GGUF-3.5", "t", "a ggml type id of the type table", "4 (removed)"), id="GGUF-3.5-removed-4"),
    pytest.param(one_tensor(gb.tinfo("t", [255], gb.T_Q4_K, 0)), refusal(
        "gguf.tensor.shape_block", "GGUF-3.6", "t", "ne[0] a multiple of the Q4_K block size 256", 255), id="GGUF-3.6-255"),
    pytest.param(one_tensor(gb.tinfo("t", [], gb.T_Q4_K, 0)), refusal(
        "gguf.tensor.shape_block", "GGUF-3.6", "t", "ne[0] a multiple of the Q4_K block size 256", 1), id="GGUF-3.6-rank-0"),
    pytest.param(one_tensor(gb.tinfo("t", [2**61], gb.T_F32, 0)), refusal(
        "gguf.tensor.nbytes", "GGUF-3.7", "t", "a byte size below 2^63", 2**63), id="GGUF-3.7-2p63"),
    pytest.param(gb.CASES["offset_misaligned"][0](), refusal(
        "gguf.tensor.misaligned", "GGUF-3.8", "b.weight", "an offset that is a multiple of 32", 65), id="GGUF-3.8-65"),
    pytest.param(gb.CASES["offset_overlap"][0](), refusal(
        "gguf.tensor.overlap", "GGUF-3.9", "b.weight", "at offset 64, after the previous tensor's padded bytes", 32),
        id="GGUF-3.9-overlap"),
    pytest.param(gb.CASES["offset_gap"][0](), refusal(
        "gguf.tensor.offset", "GGUF-3.9", "b.weight", "at offset 64, contiguous with the previous tensor", 96),
        id="GGUF-3.9-gap"),
    # GGUF-5: the data section of TWO_TENSORS ends at 224 + 64 + 288 = 576
    pytest.param(TWO_TENSORS[:-1], refusal("gguf.data.past_end", "GGUF-5.2", "b.weight",
                                           "stored within the file (its data ends at 576)", "file size 575"),
                 id="GGUF-5.2-one-byte-short"),
    pytest.param(TWO_TENSORS[:224 + 63], refusal("gguf.data.past_end", "GGUF-5.2", "a.weight",
                                                 "stored within the file (its data ends at 288)", "file size 287"),
                 id="GGUF-5.2-first-tensor-short"),
    pytest.param(TWO_TENSORS + bytes(32), refusal("gguf.data.trailing", "GGUF-5.3", "file",
                                                  "ending at offset 576, the last tensor's padded end", "32 trailing bytes"),
                 id="GGUF-5.3-32-trailing"),
    # one F32 [3] tensor: 12 bytes at 64, padded to 32: 20 bytes of padding may follow, not 21
    pytest.param(one_tensor(gb.tinfo("t", [3], gb.T_F32, 0), gb.f32_payload(3) + bytes(21)), refusal(
        "gguf.data.trailing", "GGUF-5.3", "file", "ending at offset 96, the last tensor's padded end", "1 trailing bytes"),
        id="GGUF-5.3-padding-plus-1"),
    # no tensors: the 110-byte metadata may be padded to 128, not further
    pytest.param(gb.gguf(gb.base_kvs(), []) + bytes(19), refusal(
        "gguf.data.trailing", "GGUF-5.3", "file", "ending at offset 128, the last tensor's padded end", "1 trailing bytes"),
        id="GGUF-5.3-no-tensors-padding-plus-1"),
    # GGUF-1.4: each fixed-width field cut short names itself (a KV "k" STRING of 20 bytes takes 41 bytes)
    pytest.param(HEAD[:6], truncated("version", 4, 4, 2), id="GGUF-1.4-version"),
    pytest.param(HEAD + b"\0\0", truncated("tensor_count", 8, 8, 2), id="GGUF-1.4-tensor-count"),
    pytest.param(HEAD + gb.u64(0) + b"\0\0\0", truncated("metadata_kv_count", 8, 16, 3), id="GGUF-1.4-kv-count"),
    pytest.param(head(0, 2) + gb.kv_str("k", "x" * 20) + b"\0\0\0", truncated("kv[1].key length", 8, 65, 3),
                 id="GGUF-1.4-second-key-length"),
    pytest.param(head(0, 2) + gb.kv_str("k", "x" * 20) + gb.gstr("b") + b"\0\0", truncated("b value type", 4, 74, 2),
                 id="GGUF-1.4-value-type"),
    pytest.param(one_kv(gb.kv("k", gb.STRING, b"\0\0\0")), truncated("k length", 8, 37, 3), id="GGUF-1.4-value-length"),
    pytest.param(one_kv(gb.kv("k", gb.U32, b"\0\0")), truncated("k", 4, 37, 2), id="GGUF-1.4-u32-value"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, b"\0\0")), truncated("a element type", 4, 37, 2), id="GGUF-1.4-element-type"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.u32(gb.U8) + b"\0\0\0")), truncated("a element count", 8, 41, 3),
                 id="GGUF-1.4-element-count"),
    # tensor infos: 95 bytes for a 63-byte name, [8], F32; a second info's length cut at 119
    pytest.param(head(2, 0) + gb.tinfo("n" * 63, [8], gb.T_F32, 0) + b"\0\0\0", truncated("tensor[1].name length", 8, 119, 3),
                 id="GGUF-1.4-second-name-length"),
    pytest.param(head(1, 0) + gb.gstr("t" * 15) + b"\0\0", truncated("t" * 15 + " n_dims", 4, 47, 2), id="GGUF-1.4-n-dims"),
    pytest.param(head(1, 0) + gb.gstr("t") + gb.u32(2) + gb.u64(8) + bytes(4), truncated("t ne[1]", 8, 45, 4),
                 id="GGUF-1.4-ne1"),
    pytest.param(head(1, 0) + gb.gstr("tt") + gb.u32(1) + gb.u64(8) + bytes(3), truncated("tt type", 4, 46, 3),
                 id="GGUF-1.4-type"),
    pytest.param(head(1, 0) + gb.gstr("t") + gb.u32(1) + gb.u64(8) + gb.u32(0) + bytes(4), truncated("t offset", 8, 49, 4),
                 id="GGUF-1.4-offset"),
]


@pytest.mark.parametrize(("blob", "expected"), REFUSALS)
def test_refusal_is_whole(blob, expected):
    """GGUF-6.6: every refusal carries its code, clause, field or tensor, constraint, actual value and the file."""
    assert whole(lambda: read(blob)) == expected


ACCEPTED = [
    pytest.param(gb.gguf([gb.kv("k", gb.U8, gb.u8(1))], []), {"k": 1}, id="GGUF-1.5-kv-of-14-bytes"),
    pytest.param(one_kv(gb.kv("k", gb.F64, struct.pack("<d", -1.5))), {"k": -1.5}, id="GGUF-2.5-value-12"),
    pytest.param(one_kv(gb.kv("b", gb.BOOL, gb.u8(0))), {"b": False}, id="GGUF-2.6-scalar-0"),
    pytest.param(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 2, bytes(16)))), {"a": ["", ""]},
                 id="GGUF-1.4-two-empty-strings-in-16-bytes"),
    pytest.param(one_kv(gb.kv_u32("general.alignment", 2**24)), {"general.alignment": 2**24}, id="GGUF-2.9-2p24"),
    pytest.param(one_kv(gb.kv_u32("general.alignment", 8)), {"general.alignment": 8}, id="GGUF-2.9-8"),
    pytest.param(one_kv(gb.kv_u32("a_1.b2.c_", 1)), {"a_1.b2.c_": 1}, id="GGUF-2.10-snake-segments"),
    pytest.param(one_kv(gb.kv_u32("k" * 65535, 1)), {"k" * 65535: 1}, id="GGUF-2.10-65535-bytes"),
    pytest.param(one_kv(gb.kv_u32("general.file_type", 1)), {"general.file_type": 1}, id="GGUF-2.11-file-type-u32"),
    pytest.param(one_kv(gb.kv_str("general.file_type", "1")), {"general.file_type": "1"}, id="GGUF-2.11-file-type-str"),
    pytest.param(one_kv(gb.kv_u32("general.quantization_version", 2)), {"general.quantization_version": 2},
                 id="GGUF-2.11-quantization-version-u32"),
]


@pytest.mark.parametrize(("blob", "metadata"), ACCEPTED)
def test_at_the_limit_is_accepted(blob, metadata):
    """Each limit of GGUF-1.5 and GGUF-2 at the limit: the file reads, with exactly these values."""
    f = read(blob)
    assert dict(f.metadata) == metadata
    scalars = {k: type(v) for k, v in metadata.items() if not isinstance(v, list)}     # bool is not int 0 or 1
    assert {k: type(f.metadata[k]) for k in scalars} == scalars


def test_array_values_keep_type_and_are_read_only():
    """GGUF-2.5, 2.6: an ARRAY[FLOAT64] (element type 12) and an ARRAY[BOOL] of 0 and 1 read as read-only NumPy."""
    f = read(gb.gguf([gb.kv("d", gb.ARRAY, gb.arr(gb.F64, 2, struct.pack("<2d", 0.5, -2.0))),
                      gb.kv("b", gb.ARRAY, gb.arr(gb.BOOL, 2, gb.u8(0) + gb.u8(1)))], []))
    d, b = f.metadata["d"], f.metadata["b"]
    assert (d.dtype, d.tolist(), b.dtype, b.tolist()) == (np.dtype("<f8"), [0.5, -2.0], np.dtype(bool), [False, True])
    assert not d.flags.writeable and not b.flags.writeable
    assert dict(f.metadata_types) == {"d": "ARRAY[FLOAT64]", "b": "ARRAY[BOOL]"}


@pytest.mark.parametrize(("dims", "n_bytes", "data_offset"), [
    pytest.param([8, 1, 1, 1], 32, 96, id="rank-4"),     # info 9 + 4 + 4 x 8 + 4 + 8 = 57 bytes: 81 -> 96
    pytest.param([], 4, 64, id="rank-0"),                # 25 bytes: 49 -> 64
    pytest.param([1], 4, 64, id="ne-1"),                 # 33 bytes: 57 -> 64
])
def test_tensor_info_at_the_rank_and_ne_limits(dims, n_bytes, data_offset):
    """GGUF-3.3, 3.4: rank 4 and rank 0, and ne = 1, are accepted; an F32 tensor takes 4 bytes per element."""
    f = read(one_tensor(gb.tinfo("t", dims, gb.T_F32, 0), gb.f32_payload(n_bytes // 4)))
    (t,) = f.tensors
    assert (t.n_dims, t.dims, t.n_bytes, t.offset, f.data_offset) == (len(dims), tuple(dims), n_bytes, 0, data_offset)


def test_tensors_are_contiguous_at_padded_offsets():
    """GGUF-3.9: after an F32 [3] tensor (12 bytes) the next sits at PAD(12, 32) = 32; the last may stop unpadded."""
    blob = gb.gguf([], [gb.tinfo("a", [3], gb.T_F32, 0), gb.tinfo("b", [3], gb.T_F32, 32)],
                   gb.f32_payload(3) + bytes(20) + gb.f32_payload(3))
    f = read(blob)
    assert [(t.offset, t.n_bytes) for t in f.tensors] == [(0, 12), (32, 12)]
    assert len(blob) == f.data_offset + 44 and f.data_offset == 96    # 24 + 2 x 33 = 90 -> 96


def test_padding_of_the_last_tensor_may_be_present():
    """GGUF-5.3: an F32 [3] tensor may be followed by its 20 padding bytes (the file ends at its padded end, 96)."""
    f = read(one_tensor(gb.tinfo("t", [3], gb.T_F32, 0), gb.f32_payload(3) + bytes(20)))
    assert (f.header.file_size, f.tensor_bytes("t").tobytes()) == (96, gb.f32_payload(3))


def test_no_tensors_metadata_may_be_padded():
    """GGUF-5.1, 5.3: with no tensors, up to PAD(110, 32) = 128 bytes is accepted; data_offset stays 110."""
    f = read(gb.gguf(gb.base_kvs(), []) + bytes(18))
    assert (f.data_offset, f.header.file_size, f.tensors) == (110, 128, ())


def test_default_name_of_bytes():
    """read_gguf_bytes names its input ``<bytes>`` unless told."""
    assert whole(lambda: G.read_gguf_bytes(b"GGU")) == truncated("magic", 4, 0, 3)[:-1] + ("<bytes>",)


def test_file_names_the_path(tmp_path):
    """GGUF-6.6: read_gguf's refusals name the path it was given."""
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGU")
    assert whole(lambda: G.read_gguf(path))[-1] == str(path)


# -- GGUFFile -------------------------------------------------------------------------------------------------------
def test_missing_tensor_is_whole():
    """QF-2.1: looking up a tensor the file does not hold."""
    f = read(TWO_TENSORS)
    assert whole(lambda: f.tensor("nope")) == refusal("tensor.missing", "QF-2.1", "nope", "a tensor of this file", "absent")


def test_quantized_tensor_array_is_whole():
    """QF-2.6: tensor_array does not reinterpret a block type's bytes."""
    f = read(TWO_TENSORS)
    assert whole(lambda: f.tensor_array("b.weight")) == refusal(
        "argument.invalid", "QF-2.6", "b.weight", "a plain-typed tensor (F32, F16, BF16, F64, I8..I64)",
        "Q4_K; use tensor_rows() and the format's dequantize")


@pytest.mark.parametrize(("type_id", "fmt", "dtype"), [
    pytest.param(1, "<4e", "<f2", id="F16"), pytest.param(28, "<4d", "<f8", id="F64"),
    pytest.param(24, "<4b", "i1", id="I8"), pytest.param(25, "<4h", "<i2", id="I16"),
    pytest.param(26, "<4i", "<i4", id="I32"), pytest.param(27, "<4q", "<i8", id="I64"),
])
def test_plain_tensor_array(type_id, fmt, dtype):
    """GGUF-4: the plain types' element sizes (ggml type table) and NumPy shape ne reversed: [2, 2] of 4 values."""
    values = (1, -2, 3, -4)
    f = read(one_tensor(gb.tinfo("w", [2, 2], type_id, 0), struct.pack(fmt, *values)))
    w = f.tensor_array("w")
    assert (w.dtype, w.shape, w.ravel().tolist()) == (np.dtype(dtype), (2, 2), list(values))


def test_tensor_rows_of_a_block_type():
    """GGUF-4.1: Q4_K [256, 2] is 2 rows of one 144-byte block each."""
    f = read(TWO_TENSORS)
    rows = f.tensor_rows("b.weight")
    assert rows.shape == (2, 144) and rows.tobytes() == gb.q4k_block() * 2


def test_header_facts_and_repr():
    """The header facts as written: version 2, 2 tensors, 2 keys, alignment 32, data at 224."""
    f = read(gb.CASES["valid_v2"][0]())
    assert (f.file, f.version, f.alignment, f.data_offset, len(f.tensors)) == (FILE, 2, 32, 224, 2)
    assert (f.header.tensor_count, f.header.kv_count) == (2, 2)
    assert [t.name for t in f] == ["a.weight", "b.weight"]
    assert repr(f) == "GGUFFile('m.gguf', version=2, tensors=2, kv=2, alignment=32)"


def test_closed_file_refuses_views():
    """A closed file hands out no new views (ValueError naming the file)."""
    f = read(TWO_TENSORS)
    f.close()
    with pytest.raises(ValueError, match=r"^GGUF file m\.gguf is closed$"):
        f.tensor_bytes("a.weight")


def test_string_array_repr_and_comparisons():
    """StringArray: the first three strings in its repr, and it equals only sequences of the same strings."""
    f = read(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 4, b"".join(gb.gstr(s) for s in "wxyz")))))
    a = f.metadata["a"]
    assert repr(a) == "StringArray(['w', 'x', 'y', ...], 4 strings)"
    assert a == np.array(["w", "x", "y", "z"]) and a != "wxyz" and a != ["w", "x", "y", "q"]
    assert a[1:3] == ["x", "y"] and a[-4] == "w"
    with pytest.raises(TypeError):
        hash(a)


def test_bf16_tensor_array_has_the_row_major_shape():
    """GGUF-4: BF16 [2, 2] widens by a 16-bit shift to float32 of NumPy shape (2, 2): 1, -2, 3, -4 are
    0x3F80, 0xC000, 0x4040, 0xC080 (the float32 bit patterns' upper halves)."""
    f = read(one_tensor(gb.tinfo("w", [2, 2], 30, 0), struct.pack("<4H", 0x3F80, 0xC000, 0x4040, 0xC080)))
    w = f.tensor_array("w")
    assert (w.dtype, w.shape, w.ravel().tolist()) == (np.dtype(np.float32), (2, 2), [1.0, -2.0, 3.0, -4.0])


def test_rank_zero_tensor_rows():
    """GGUF-3.3: a rank-0 F32 tensor is one row of one element (ne[0] taken as 1): 4 bytes."""
    f = read(one_tensor(gb.tinfo("s", [], gb.T_F32, 0), gb.f32_payload(1)))
    assert f.tensor_rows("s").shape == (1, 4)


def test_string_array_of_three_has_no_ellipsis():
    """StringArray's repr shows up to three strings and ", ..." only when there are more."""
    a = read(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 3, b"".join(gb.gstr(s) for s in "abc"))))).metadata["a"]
    assert repr(a) == "StringArray(['a', 'b', 'c'], 3 strings)"


def test_empty_string_array():
    """GGUF-2.5: an ARRAY[STRING] of 0 strings reads as an empty sequence."""
    a = read(one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 0, b"")))).metadata["a"]
    assert (len(a), list(a), repr(a)) == (0, [], "StringArray([], 0 strings)")


# -- GGUF-2.2 past the 16 MiB decoding piece and the 2^20-string split window --------------------------------------
def _strings(items: list[bytes]) -> bytes:
    return one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, len(items), b"".join(gb.gstr(s) for s in items))))


def _first_bad(raw: bytes) -> int:
    """The independent route: where ``bytes.decode`` itself stops."""
    with pytest.raises(UnicodeDecodeError) as exc:
        raw.decode("utf-8")
    return exc.value.start


MIB16 = 1 << 24


def test_utf8_error_cut_by_the_16_mib_piece_names_its_lead_byte():
    """GGUF-2.2: a bad sequence whose lead bytes end one 16 MiB piece (e2 82, then 'A') is reported at its
    lead byte 2^24 - 2, as bytes.decode reports it, not 2 bytes later."""
    raw = b"a" * (MIB16 - 2) + b"\xe2\x82A"
    assert _first_bad(raw) == MIB16 - 2
    assert whole(lambda: read(_strings([raw]))) == refusal(
        "gguf.string.utf8", "GGUF-2.2", "a[0]", "valid UTF-8", f"invalid byte at {MIB16 - 2} of {MIB16 + 1}")


def test_utf8_character_across_the_16_mib_piece_is_valid():
    """GGUF-2.2: 'é' (c3 a9) split by the piece boundary is one valid character."""
    raw = b"a" * (MIB16 - 1) + "é".encode()
    assert read(_strings([raw])).metadata["a"][0] == raw.decode()


def test_utf8_cut_character_at_exactly_16_mib_is_refused():
    """GGUF-2.2: a text of exactly 2^24 bytes ending in a lead byte is incomplete (the last piece is final)."""
    raw = b"a" * (MIB16 - 1) + b"\xc3"
    assert _first_bad(raw) == MIB16 - 1
    assert whole(lambda: read(_strings([raw]))) == refusal(
        "gguf.string.utf8", "GGUF-2.2", "a[0]", "valid UTF-8", f"invalid byte at {MIB16 - 1} of {MIB16}")


def test_utf8_split_after_the_first_million_strings():
    """GGUF-2.2: strings 2^20 - 1 and 2^20 are c3 and a9 (valid together, not each): the split is found in the
    second window of 2^20 strings, and named at the lead byte's string."""
    items = [b""] * (2**20 - 1) + [b"\xc3", b"\xa9"]
    assert whole(lambda: read(_strings(items))) == refusal(
        "gguf.string.utf8", "GGUF-2.2", "a[1048575]", "valid UTF-8", "invalid byte at 0 of 1")


@pytest.mark.parametrize(("items", "where"), [
    # U+1F601 (f0 9f 98 81) cut after 3 bytes: back over 98 and 9f, whose low bit is set
    pytest.param([b"\xf0\x9f\x98", b"\x81"], "a[0]", id="two-continuation-bytes"),
    # U+20AC (e2 82 ac) cut after 2 bytes, after "ok": back over 82 alone, to e2 and not past it
    pytest.param([b"ok", b"\xe2\x82", b"\xac"], "a[1]", id="one-continuation-byte"),
])
def test_utf8_split_walks_back_to_the_lead_byte(items, where):
    """GGUF-2.2: a character cut between two strings makes the first bad from its lead byte, byte 0 of that
    string (bytes.decode says 0 as well)."""
    cut = items[int(where[2:-1])]
    assert _first_bad(cut) == 0
    assert whole(lambda: read(_strings(items))) == refusal(
        "gguf.string.utf8", "GGUF-2.2", where, "valid UTF-8", f"invalid byte at 0 of {len(cut)}")


# -- read_gguf: the path ---------------------------------------------------------------------------------------------
def test_not_a_regular_file_is_einval(tmp_path):
    """GGUF-6.5: a directory is refused from stat, as OSError EINVAL naming the path."""
    with pytest.raises(OSError) as exc:
        G.read_gguf(tmp_path)
    assert (exc.value.errno, exc.value.filename) == (errno.EINVAL, str(tmp_path))
    assert exc.value.strerror.startswith("not a regular file (d")


def test_empty_path_is_truncated_at_the_magic(tmp_path):
    """GGUF-1.4: an empty file (nothing to map) is cut before its magic."""
    path = tmp_path / "e.gguf"
    path.write_bytes(b"")
    assert whole(lambda: G.read_gguf(path)) == truncated("magic", 4, 0, 0)[:-1] + (str(path),)


def test_mapping_is_made_once_and_closed_by_close(tmp_path, monkeypatch):
    """GGUF-6.3: read_gguf maps the file read-only once; close() unmaps it (no view is left)."""
    maps = []

    class Recorded(mmap.mmap):
        def __new__(cls, *args, **kwargs):
            maps.append(super().__new__(cls, *args, **kwargs))
            return maps[-1]

    monkeypatch.setattr(G.mmap, "mmap", Recorded)
    path = tmp_path / "v.gguf"
    path.write_bytes(TWO_TENSORS)
    f = G.read_gguf(path)
    assert len(maps) == 1 and not maps[0].closed and f.file == str(path)
    f.close()
    assert maps[0].closed


# -- read_gguf_source: the header as a growing prefix (REMOTE-1.2) ---------------------------------------------------
NAME = "hf://org/repo@0123abcd/m.gguf"


class Source:
    """A byte source over bytes (REMOTE-1: name, size, read(offset, n)) that records its reads; from offset
    ``short_from`` on it returns one byte less than asked."""

    def __init__(self, blob: bytes, short_from: int | None = None) -> None:
        self.name, self.size, self.blob, self.reads, self.short_from = NAME, len(blob), blob, [], short_from

    def read(self, offset: int, n: int) -> bytes:
        self.reads.append((offset, n))
        cut = 1 if self.short_from is not None and offset >= self.short_from else 0
        return self.blob[offset:offset + n - cut]


def test_source_header_doubles_until_it_parses(monkeypatch):
    """REMOTE-1.2 on TWO_TENSORS with a first read of 64: the architecture string (64..77) asks for 128, the
    first tensor's n_dims (126..130) for 256; the infos end at 206. Tensor bytes are then fetched one by one."""
    monkeypatch.setattr(G, "FIRST_READ", 64)
    src = Source(TWO_TENSORS)
    f = G.read_gguf_source(src)
    assert src.reads == [(0, 64), (64, 64), (128, 128)]
    assert (f.file, f.data_offset, [(t.name, t.offset) for t in f]) == (NAME, 224, [("a.weight", 0), ("b.weight", 64)])
    assert dict(f.metadata) == {"general.architecture": "qformats-test", "general.alignment": 32}
    raw = f.tensor_bytes("b.weight")
    assert (raw.dtype, raw.shape, raw.tobytes(), src.reads[-1]) == (np.uint8, (288,), gb.q4k_block() * 2, (288, 288))
    assert f.tensor_array("a.weight").ravel().tolist() == [i * 0.5 for i in range(16)] and src.reads[-1] == (224, 64)


def test_source_header_grows_to_what_the_parse_needs(monkeypatch):
    """REMOTE-1.2: a 200-byte string at 45 needs 245 bytes, more than twice 64: the second read takes all of it."""
    monkeypatch.setattr(G, "FIRST_READ", 64)
    src = Source(one_kv(gb.kv_str("k", "x" * 200)))
    assert dict(G.read_gguf_source(src).metadata) == {"k": "x" * 200}
    assert src.reads == [(0, 64), (64, 181)]


def test_source_first_read_is_64_kib():
    """REMOTE-1.2: the first read is min(size, 64 KiB): all of a 576-byte file, 65536 bytes of a 70064-byte one."""
    small = Source(TWO_TENSORS)
    G.read_gguf_source(small)
    big = Source(one_tensor(gb.tinfo("t", [70000], gb.T_I8, 0), bytes(70000)))
    G.read_gguf_source(big)
    assert (small.reads, big.reads) == ([(0, 576)], [(0, 65536)])


@pytest.mark.parametrize(("first", "cap", "reads"), [
    pytest.param(64, 206, [(0, 64), (64, 64), (128, 78)], id="at-the-cap"),
    # the last field, b.weight's offset (198..206), asks for exactly the cap
    pytest.param(200, 206, [(0, 200), (200, 6)], id="asked-for-exactly-the-cap"),
    pytest.param(64, 205, [(0, 64), (64, 64), (128, 77)], id="one-past"),
])
def test_source_header_cap(monkeypatch, first, cap, reads):
    """REMOTE-1.2: TWO_TENSORS' header ends at byte 206: a cap of 206 bytes reads it, 205 is refused (could not run)."""
    monkeypatch.setattr(G, "FIRST_READ", first)
    monkeypatch.setattr(G, "MAX_REMOTE_HEADER", cap)
    src = Source(TWO_TENSORS)
    if cap == 206:
        assert G.read_gguf_source(src).data_offset == 224
    else:
        assert whole(lambda: G.read_gguf_source(src)) == refusal(
            "remote.header.too_large", "REMOTE-1.2", "header", "at most 205 bytes of metadata and tensor infos fetched "
            "(download the file to validate it)", "206 bytes needed", file=NAME)
    assert src.reads == reads


@pytest.mark.parametrize(("first", "short_from", "expected"), [
    pytest.param(65536, 0, ("576 bytes at offset 0", "575 bytes"), id="first-read"),
    pytest.param(64, 64, ("64 bytes at offset 64", "63 bytes"), id="second-read"),
])
def test_source_short_read_is_truncated(monkeypatch, first, short_from, expected):
    """REMOTE-1.2: a source that returns fewer bytes than asked: gguf.truncated naming the read."""
    monkeypatch.setattr(G, "FIRST_READ", first)
    assert whole(lambda: G.read_gguf_source(Source(TWO_TENSORS, short_from))) == refusal(
        "gguf.truncated", "GGUF-1.4", "header", *expected, file=NAME)


def test_empty_source_reads_nothing():
    """REMOTE-1.2: a 0-byte source is cut before its magic, without a read."""
    src = Source(b"")
    assert whole(lambda: G.read_gguf_source(src)) == truncated("magic", 4, 0, 0)[:-1] + (NAME,)
    assert src.reads == []


@pytest.mark.parametrize(("blob", "expected"), [p for p in REFUSALS if p.id in (
    "GGUF-5.2-one-byte-short", "GGUF-3.9-gap", "GGUF-1.5-tensors-at-limit", "GGUF-2.8-strings-at-limit")])
def test_source_refusals_are_the_local_ones(monkeypatch, blob, expected):
    """REMOTE-1.2: through a source (first read 64 bytes) a file gets the refusal it gets locally, naming the source."""
    monkeypatch.setattr(G, "FIRST_READ", 64)
    assert whole(lambda: G.read_gguf_source(Source(blob))) == expected[:-1] + (NAME,)


TEN_KVS = gb.gguf([gb.kv(k, gb.U8, gb.u8(1)) for k in "abcdefghij"], [])        # 10 x 14 bytes: 164 bytes
TEN_TENSORS = gb.gguf([], [gb.tinfo(k, [], gb.T_F32, 32 * i) for i, k in enumerate("abcdefghij")],
                      b"".join(gb.f32_payload(1) + bytes(28) for _ in range(9)) + gb.f32_payload(1))   # infos end at 274


TEN_STRINGS = one_kv(gb.kv("a", gb.ARRAY, gb.arr(gb.STRING, 10, bytes(80))))   # 10 empty strings at 49: 129 bytes


@pytest.mark.parametrize(("blob", "reads"), [
    # string 1's length (57..65) crosses 64, string 9's (121..129) crosses 128
    pytest.param(TEN_STRINGS, [(0, 64), (64, 64), (128, 1)], id="strings"),
    # KV 2 (52..66) crosses 64 at its type (61..65); KV 7 (122..136) crosses 128 at its key length
    pytest.param(TEN_KVS, [(0, 64), (64, 64), (128, 36)], id="kvs"),
    # infos of 25 bytes at 24 + 25 i: info 1 crosses 64 at its type (62..66), info 4 (124) and info 9 (249) at their names
    pytest.param(TEN_TENSORS, [(0, 64), (64, 64), (128, 128), (256, 256)], id="tensor-infos"),
])
def test_source_count_checks_do_not_fetch(monkeypatch, blob, reads):
    """REMOTE-1.2 with GGUF-1.5: "can the rest of the file hold these counts" is checked against the file size, not
    the prefix: the prefix grows (doubling) only where the parse itself reaches its end."""
    monkeypatch.setattr(G, "FIRST_READ", 64)
    src = Source(blob)
    f = G.read_gguf_source(src)
    local = read(blob)
    assert (src.reads, dict(f.metadata), f.tensors) == (reads, dict(local.metadata), local.tensors)
