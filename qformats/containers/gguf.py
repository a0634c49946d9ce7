"""Hardened GGUF v2/v3 reader (spec/containers.md, clauses GGUF-1 to GGUF-6).

Why our own reader: gguf-py's ``GGUFReader`` (PyPI ``gguf`` 0.19.0) trusts length fields -- a
43-byte crafted file whose array claims 2^63 elements hangs it while memory grows (llama.cpp PR
#27188) -- raises bare ``ValueError``/``KeyError``/``IndexError``/``RecursionError`` on other
malformed files, and accepts overlapping offsets, zero dimensions and BOOL values of 2. A validator
must treat every file as hostile, so this module checks every count, length, dimension and offset
against the file size and fixed limits *before* anything is allocated or read, uses Python integers
for all size arithmetic (no wrap-around), never unpickles, maps the file read-only and never writes
to it. Work and memory are O(file size): string arrays (tokenizer vocabularies) are held as one blob
plus offsets (:class:`StringArray`), about the file's own bytes, instead of a Python object per
string (a 200 MB array of 2-byte strings took 1.65 GB as a list).

API::

    with read_gguf("model.gguf") as f:          # -> GGUFFile; raises QFormatsError (gguf.*)
        f.version, f.alignment, f.data_offset   # header facts
        f.metadata["general.architecture"]      # read-only mapping: int, float, bool, str,
                                                #   StringArray (a compact Sequence[str]),
                                                #   or a read-only NumPy array
        f.metadata_types["general.alignment"]   # "UINT32", "ARRAY[STRING]", ...
        info = f.tensor("blk.0.attn_q.weight")  # GGUFTensorInfo (frozen pydantic model)
        raw = f.tensor_bytes(info.name)         # uint8 (n_bytes,), memory-mapped, read-only
        rows = f.tensor_rows(info.name)         # uint8 (rows, row_bytes): q4_k.dequantize input
        w = f.tensor_array("token_embd.weight") # F32/F16/BF16/F64/I8..I64 as NumPy, C order

Malformed input is fatal: the reader raises on the first structural error, with a ``gguf.*`` code,
the file name, the field or tensor, the constraint and the actual value. Tensor payloads are not
interpreted here: the validity of a type's blocks (q4_K: finite ``d``/``dmin``) is the format
layer's rule, checked per tensor on :meth:`GGUFFile.tensor_rows`
(:func:`qformats.formats.q4_k.checks.check_blocks`).
"""

from __future__ import annotations

import codecs
import errno
import mmap
import os
import re
import stat
import struct
from array import array
from collections.abc import Iterator, Sequence
from enum import IntEnum
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import fail
from .ggml_types import GGML_REMOVED_TYPE_IDS, GGML_TYPES
from .source import ByteSource

__all__ = [
    "GGUF_MAGIC", "SUPPORTED_VERSIONS", "DEFAULT_ALIGNMENT", "MAX_ALIGNMENT", "MAX_STRING_LENGTH",
    "MAX_ARRAY_ELEMENTS", "MAX_TENSORS", "MAX_KV", "GGML_MAX_DIMS", "GGML_MAX_NAME",
    "ValueType", "GGUFTensorInfo", "GGUFHeader", "GGUFFile", "read_gguf", "read_gguf_bytes",
    "PLAIN_TYPES", "SCHEMA_MODELS", "read_gguf_source",
]

GGUF_SPEC_VERSION = "0.1"
GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)          # ggml gguf.cpp: 1 is obsolete (u32 counts), > 3 unknown
DEFAULT_ALIGNMENT = 32               # GGUF_DEFAULT_ALIGNMENT
MAX_ALIGNMENT = 1 << 24              # ours: ggml accepts any power of two; 2^31 broke 32-bit GGML_PAD
MAX_STRING_LENGTH = 1 << 30          # GGUF_MAX_STRING_LENGTH (1 GiB)
MAX_ARRAY_ELEMENTS = 1 << 30         # GGUF_MAX_ARRAY_ELEMENTS (1 Gi)
# ours: ggml's bound is SIZE_MAX / sizeof(gguf_tensor_info). A tensor info or key costs ~1.4 KB here
# (200k 48-byte infos: 333 MB, 3.3 s), so 2^20 bounds a hostile file at ~1.5 GB; real files hold
# thousands of tensors (experts merged) and hundreds of keys.
MAX_TENSORS = 1 << 20
MAX_KV = 1 << 20
GGML_MAX_DIMS = 4
GGML_MAX_NAME = 64                   # ggml: strlen(name) < GGML_MAX_NAME, so at most 63 bytes
INT64_MAX = (1 << 63) - 1            # ggml keeps ne and byte sizes in int64_t / size_t

# Smallest possible encodings, used to refuse counts the remaining bytes cannot hold.
_MIN_KV_BYTES = 8 + 1 + 4 + 1        # key length, >= 1 key byte, value type, >= 1 value byte
_MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 4 + 8   # name length, >= 1 name byte, n_dims, type, offset


class ValueType(IntEnum):
    """GGUF metadata value types (``enum gguf_type``); BOOL is one byte, STRING is u64 len + bytes."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# Little-endian, standard sizes: both the scalar values and the arrays of them are read through these.
_SCALAR_DTYPES: dict[ValueType, np.dtype] = {
    ValueType.UINT8: np.dtype("u1"), ValueType.INT8: np.dtype("i1"),
    ValueType.UINT16: np.dtype("<u2"), ValueType.INT16: np.dtype("<i2"),
    ValueType.UINT32: np.dtype("<u4"), ValueType.INT32: np.dtype("<i4"),
    ValueType.FLOAT32: np.dtype("<f4"), ValueType.BOOL: np.dtype("u1"),
    ValueType.UINT64: np.dtype("<u8"), ValueType.INT64: np.dtype("<i8"),
    ValueType.FLOAT64: np.dtype("<f8"),
}

_PLAIN_TENSOR_DTYPES: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"), "I8": np.dtype("i1"),
    "I16": np.dtype("<i2"), "I32": np.dtype("<i4"), "I64": np.dtype("<i8"),
}
# Types GGUFFile.tensor_array returns as NumPy (BF16 widened to float32); the rest are block rows.
PLAIN_TYPES: frozenset[str] = frozenset(_PLAIN_TENSOR_DTYPES) | {"BF16"}


def _pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


class GGUFTensorInfo(BaseModel):
    """One tensor-info record, validated: name, shape in ggml ``ne`` order, type, data placement.

    ``dims`` is innermost first (``ne[0]`` is the contiguous row length); the NumPy shape is
    ``dims[::-1]``. ``offset`` is relative to ``GGUFFile.data_offset``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = GGUF_SPEC_VERSION

    name: str
    n_dims: int                  # the on-disk rank field (GGUF-3.3), recorded as read; == len(dims)
    dims: tuple[int, ...]
    ggml_type: int
    type_name: str
    offset: int
    n_bytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def shape(self) -> tuple[int, ...]:
        """NumPy (row-major) shape: ``ne`` reversed."""
        return tuple(reversed(self.dims))


class GGUFHeader(BaseModel):
    """File-level facts of a validated GGUF file (everything but metadata values and tensor data)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = GGUF_SPEC_VERSION

    version: int
    tensor_count: int
    kv_count: int
    alignment: int
    data_offset: int
    file_size: int
    metadata_types: dict[str, str]


SCHEMA_MODELS = (GGUFHeader, GGUFTensorInfo)


class _NeedMore(Exception):
    """The parse reached the end of the bytes fetched so far, not of the file: fetch up to ``upto`` and retry."""

    def __init__(self, upto: int) -> None:
        super().__init__(upto)
        self.upto = upto


class _Cursor:
    """Bounds-checked little-endian reads over the mapped file; every overrun is ``gguf.truncated``.

    ``avail`` bytes of the file's ``size`` are in ``buf`` (all of them for a local file). A read past
    ``size`` is ``gguf.truncated``; one inside the file but past ``avail`` raises :class:`_NeedMore`, so a
    remote reader fetches more of the header and parses again (REMOTE-1.2) instead of failing.
    """

    def __init__(self, buf: Any, size: int, file: str, avail: int | None = None) -> None:
        self.buf = buf
        self.size = size
        self.avail = size if avail is None else avail
        self.pos = 0
        self.file = file

    def need(self, n: int, what: str, clause: str | None = None, *, fetch: bool = True) -> None:
        """``n`` bytes at ``pos`` exist in the file; ``fetch`` (not for the "can the rest hold
        these counts" checks, GGUF-1.5) also that they are in ``buf``."""
        if n > self.size - self.pos:
            raise fail("gguf.truncated", what, f"complete: {n} bytes at offset {self.pos}",
                       f"{self.size - self.pos} bytes before end of file", clause=clause, file=self.file)
        if fetch and n > self.avail - self.pos:
            raise _NeedMore(self.pos + n)

    def scalar(self, fmt: str, n: int, what: str) -> Any:
        self.need(n, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return value

    def u32(self, what: str) -> int:
        return self.scalar("<I", 4, what)

    def u64(self, what: str) -> int:
        return self.scalar("<Q", 8, what)

    def array(self, dt: np.dtype, count: int, what: str) -> np.ndarray:
        """``count`` values of ``dt``, copied out of the mapping (a Python-side record, not a view)."""
        self.need(count * dt.itemsize, what)
        out = np.frombuffer(self.buf, dtype=dt, count=count, offset=self.pos).copy()
        self.pos += count * dt.itemsize
        return out

    def raw(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self, what: str, *, max_len: int = MAX_STRING_LENGTH, min_len: int = 0,
               code: str = "gguf.string.length") -> str:
        length = self.u64(f"{what} length")
        if not min_len <= length <= max_len:
            raise fail(code, what, f"a string of {min_len}..{max_len} bytes", length, file=self.file)
        data = self.raw(length, what)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise fail("gguf.string.utf8", what, "valid UTF-8",
                       f"invalid byte at {exc.start} of {length}", file=self.file) from None


def _read_value(cur: _Cursor, vtype: int, what: str) -> tuple[Any, str]:
    """One metadata value of type ``vtype`` and its type label ("UINT32", "ARRAY[STRING]")."""
    if vtype == ValueType.STRING:
        return cur.string(what), "STRING"
    if vtype == ValueType.ARRAY:
        return _read_array(cur, what)
    value = cur.array(_SCALAR_DTYPES[ValueType(vtype)], 1, what)[0].item()
    if vtype == ValueType.BOOL:
        if value not in (0, 1):
            raise fail("gguf.bool", what, "a BOOL of 0 or 1", value, file=cur.file)
        value = bool(value)
    return value, ValueType(vtype).name


def _read_array(cur: _Cursor, what: str) -> tuple[Any, str]:
    etype = cur.u32(f"{what} element type")
    if etype == ValueType.ARRAY:
        raise fail("gguf.array.nested", what, "an array of scalars or strings", "ARRAY of ARRAY", file=cur.file)
    if etype > ValueType.FLOAT64:
        raise fail("gguf.value_type", f"{what} element type", "a value type in 0..12", etype, file=cur.file)
    count = cur.u64(f"{what} element count")
    if count > MAX_ARRAY_ELEMENTS:
        raise fail("gguf.array.length", what, f"at most {MAX_ARRAY_ELEMENTS} elements", count, file=cur.file)
    label = f"ARRAY[{ValueType(etype).name}]"
    if etype == ValueType.STRING:
        cur.need(count * 8, f"{what} ({count} strings)", fetch=False)  # each string takes >= 8 bytes
        return _read_strings(cur, count, what), label
    arr = cur.array(_SCALAR_DTYPES[ValueType(etype)], count, f"{what} ({count} x {ValueType(etype).name})")
    if etype == ValueType.BOOL:
        bad = np.flatnonzero(arr > 1)
        if bad.size:
            raise fail("gguf.bool", f"{what}[{int(bad[0])}]", "a BOOL of 0 or 1", int(arr[bad[0]]), file=cur.file)
        arr = arr.astype(np.bool_)
    arr.flags.writeable = False
    return arr, label


class StringArray(Sequence):
    """An ARRAY[STRING] value: the strings' UTF-8 bytes in one blob and their end offsets.

    Indexing decodes one string; ``==`` compares with any sequence of ``str``. A vocabulary of n
    strings costs its bytes plus 8n bytes, not n Python objects of ~60 bytes each.
    """

    __slots__ = ("_blob", "_ends")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, blob: bytes, ends: array) -> None:
        self._blob, self._ends = blob, ends

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]                                  # IndexError and negatives as for a list
        return self._blob[self._ends[i - 1] if i else 0:self._ends[i]].decode("utf-8")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Sequence, np.ndarray)) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        head = ", ".join(map(repr, self[:3]))
        return f"StringArray([{head}{', ...' if len(self) > 3 else ''}], {len(self)} strings)"


def _read_strings(cur: _Cursor, count: int, what: str) -> StringArray:
    """``count`` GGUF strings (u64 length + bytes) into a :class:`StringArray`.

    One pass checks every length against the limit and the file (as :meth:`_Cursor.string`), copying
    the bytes into one blob; UTF-8 is then checked on the blob at once: the strings are each valid
    exactly when their concatenation is valid and no non-empty string starts with a continuation
    byte (``10xxxxxx``): each then starts, and so the one before it ends, on a character boundary.
    """
    with memoryview(cur.buf).cast("B") as buf:  # released on any exit: an mmap with exports cannot close
        blob, ends = _walk_strings(cur, buf, count, what)
    _check_utf8_strings(blob, ends, what, cur.file)
    return StringArray(blob, ends)


def _walk_strings(cur: _Cursor, buf: memoryview, count: int, what: str) -> tuple[bytes, array]:
    """The checks of :meth:`_Cursor.string` without its per-string calls and names: a tokenizer of
    20 million strings took 24 s through ``string`` and 6 s here (measured); names are built on error."""
    pos, size = cur.pos, cur.avail      # the bytes at hand: cur.need says truncated or fetch more
    unpack = struct.Struct("<Q").unpack_from
    blob, ends = bytearray(), array("Q")
    for i in range(count):
        if size - pos < 8:
            cur.pos = pos
            cur.need(8, f"{what}[{i}] length")
        (length,) = unpack(buf, pos)
        pos += 8
        if length > MAX_STRING_LENGTH:
            raise fail("gguf.string.length", f"{what}[{i}]", f"a string of 0..{MAX_STRING_LENGTH} bytes", length,
                       file=cur.file)
        if length > size - pos:
            cur.pos = pos
            cur.need(length, f"{what}[{i}]")
        blob += buf[pos:pos + length]
        pos += length
        ends.append(len(blob))
    cur.pos = pos
    return bytes(blob), ends


def _check_utf8_strings(blob: bytes, ends: array, what: str, file: str) -> None:
    bad_at = None
    decoder = codecs.getincrementaldecoder("utf-8")()
    chunk = 1 << 24                     # decode in 16 MiB pieces: the text is never held whole
    for start in range(0, max(len(blob), 1), chunk):
        held = len(decoder.getstate()[0])   # a character cut by the last piece: the error's offsets count it
        try:
            decoder.decode(blob[start:start + chunk], final=start + chunk >= len(blob))
        except UnicodeDecodeError as exc:
            bad_at = start - held + exc.start
            break
    data = np.frombuffer(blob, np.uint8)
    end = np.frombuffer(ends, np.uint64) if ends else np.zeros(0, np.uint64)
    split = _first_split_start(data, end)
    if split is not None and (bad_at is None or split < bad_at):
        # the text is valid past `split`, so the character holding byte `split` began in an earlier
        # string, which is the first invalid one: it ends inside that character, at its lead byte
        bad_at = split - 1
        while data[bad_at] & 0xC0 == 0x80:
            bad_at -= 1
    if bad_at is not None:
        i = int(np.searchsorted(end, bad_at, side="right"))
        begin = int(end[i - 1]) if i else 0
        raise fail("gguf.string.utf8", f"{what}[{i}]", "valid UTF-8",
                   f"invalid byte at {bad_at - begin} of {int(end[i]) - begin}", file=file)


def _first_split_start(data: np.ndarray, end: np.ndarray, chunk: int = 1 << 20) -> int | None:
    """The first start of a non-empty string that is a UTF-8 continuation byte, in bounded pieces."""
    for c in range(0, len(end), chunk):
        e = end[c:c + chunk]
        b = np.empty_like(e)
        b[0] = end[c - 1] if c else 0
        b[1:] = e[:-1]
        starts = b[e > b]
        split = starts[(data[starts] & 0xC0) == 0x80]
        if split.size:
            return int(split[0])
    return None


def _check_alignment(cur: _Cursor, label: str, value: Any) -> int:
    if label != "UINT32":
        raise fail("gguf.alignment", "general.alignment", "of type UINT32", label, file=cur.file)
    if value == 0 or value & (value - 1) or value > MAX_ALIGNMENT:
        raise fail("gguf.alignment", "general.alignment",
                   f"a power of two in 1..{MAX_ALIGNMENT}", value, file=cur.file)
    if value % 8:   # docs/gguf.md: "a multiple of 8"; ggml loads 1, 2 and 4 all the same
        raise fail("gguf.alignment", "general.alignment", "a multiple of 8, as the GGUF specification requires "
                   "(ggml would load this file)", value, file=cur.file)
    return value


# docs/gguf.md, gguf_metadata_kv_t.key: "It must be a valid ASCII string. It must be a hierarchical key,
# where each segment is lower_snake_case and separated by a `.`. It must be at most 2^16-1 bytes long."
_KEY_FORM = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")   # linear: no nested repetition over overlapping text
MAX_KEY_BYTES = (1 << 16) - 1
# The standard general.* keys whose type both versions of docs/gguf.md agree on (general.file_type does
# not: string in the first spec, uint32 since).
GENERAL_TYPES = {"general.architecture": "STRING", "general.quantization_version": "UINT32",
                 "general.name": "STRING", "general.author": "STRING", "general.url": "STRING",
                 "general.description": "STRING", "general.license": "STRING", "general.source.url": "STRING",
                 "general.source.huggingface.repository": "STRING"}


def _check_key(cur: _Cursor, key: str) -> None:
    """GGUF-2.10: ASCII, dot-separated lower_snake_case segments, at most 65535 bytes."""
    if len(key.encode("utf-8")) > MAX_KEY_BYTES or not key.isascii() or not _KEY_FORM.fullmatch(key):
        shown = ascii(key)[1:-1]                # a newline or control byte would break the one-line message
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise fail("gguf.key.form", shown, "an ASCII key of dot-separated lower_snake_case segments of at most "
                   f"{MAX_KEY_BYTES} bytes, as the GGUF specification requires (ggml would load this file)",
                   repr(shown), file=cur.file)


def _check_general_type(cur: _Cursor, key: str, label: str) -> None:
    """GGUF-2.11: a standard general.* key has the type the specification gives it."""
    want = GENERAL_TYPES.get(key)
    if want is not None and label != want:
        raise fail("gguf.key.type", key, f"of type {want}, as the GGUF specification requires (ggml would "
                   "load this file)", label, file=cur.file)


def _read_kvs(cur: _Cursor, kv_count: int) -> tuple[dict[str, Any], dict[str, str], int]:
    metadata: dict[str, Any] = {}
    types: dict[str, str] = {}
    alignment = DEFAULT_ALIGNMENT
    for i in range(kv_count):
        key = cur.string(f"kv[{i}].key")
        if not key:
            raise fail("gguf.key.empty", f"kv[{i}].key", "a non-empty key", "''", file=cur.file)
        if key in metadata:
            raise fail("gguf.key.duplicate", key, "a key that occurs once", "a second occurrence", file=cur.file)
        vtype = cur.u32(f"{key} value type")
        if vtype > ValueType.FLOAT64:
            raise fail("gguf.value_type", key, "a value type in 0..12", vtype, file=cur.file)
        _check_key(cur, key)
        metadata[key], types[key] = _read_value(cur, vtype, key)
        _check_general_type(cur, key, types[key])
        if key == "general.alignment":
            alignment = _check_alignment(cur, types[key], metadata[key])
    return metadata, types, alignment


def _read_tensor_info(cur: _Cursor, i: int, alignment: int, expected_offset: int,
                      seen: set[str]) -> GGUFTensorInfo:
    name = cur.string(f"tensor[{i}].name", min_len=1, max_len=GGML_MAX_NAME - 1,
                      code="gguf.tensor.name_length")
    if name in seen:
        raise fail("gguf.tensor.duplicate", name, "a tensor name that occurs once", "a second occurrence",
                   file=cur.file)
    n_dims = cur.u32(f"{name} n_dims")
    if n_dims > GGML_MAX_DIMS:
        raise fail("gguf.tensor.n_dims", name, f"of rank n_dims <= {GGML_MAX_DIMS}", n_dims, file=cur.file)
    dims = tuple(cur.u64(f"{name} ne[{j}]") for j in range(n_dims))
    n_elements = 1
    for j, ne in enumerate(dims):
        if not 1 <= ne <= INT64_MAX:
            raise fail("gguf.tensor.dims", name, f"ne[{j}] in 1..2^63-1", ne, file=cur.file)
        n_elements *= ne
    if n_elements > INT64_MAX:
        raise fail("gguf.tensor.dims", name, "a product of ne below 2^63", n_elements, file=cur.file)
    type_id = cur.u32(f"{name} type")
    gtype = GGML_TYPES.get(type_id)
    if gtype is None:
        why = "removed" if type_id in GGML_REMOVED_TYPE_IDS else "unknown"
        raise fail("gguf.tensor.type", name, "a ggml type id of the type table", f"{type_id} ({why})", file=cur.file)
    ne0 = dims[0] if dims else 1
    if ne0 % gtype.block_size:
        raise fail("gguf.tensor.shape_block", name,
                   f"ne[0] a multiple of the {gtype.name} block size {gtype.block_size}", ne0, file=cur.file)
    n_bytes = gtype.row_bytes(ne0) * (n_elements // ne0)
    if n_bytes > INT64_MAX:
        raise fail("gguf.tensor.nbytes", name, "a byte size below 2^63", n_bytes, file=cur.file)
    offset = cur.u64(f"{name} offset")
    if offset % alignment:
        raise fail("gguf.tensor.misaligned", name, f"an offset that is a multiple of {alignment}", offset,
                   file=cur.file)
    if offset < expected_offset:
        raise fail("gguf.tensor.overlap", name,
                   f"at offset {expected_offset}, after the previous tensor's padded bytes", offset, file=cur.file)
    if offset > expected_offset:
        raise fail("gguf.tensor.offset", name,
                   f"at offset {expected_offset}, contiguous with the previous tensor", offset, file=cur.file)
    return GGUFTensorInfo(name=name, n_dims=n_dims, dims=dims, ggml_type=type_id,
                          type_name=gtype.name, offset=offset, n_bytes=n_bytes)


def _parse(buf: Any, size: int, file: str,
           avail: int | None = None) -> tuple[GGUFHeader, dict[str, Any], list[GGUFTensorInfo]]:
    cur = _Cursor(buf, size, file, avail)
    magic = cur.raw(4, "magic")
    if magic != GGUF_MAGIC:
        raise fail("gguf.magic", "magic", "b'GGUF' (47 47 55 46)", magic, file=cur.file)
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        if version and not version & 0xFFFF:  # ggml's byte-swap test: a big-endian file (GGUF-1.3)
            raise fail("gguf.version", "version", "2 or 3, little-endian",
                       f"{version} (0x{version:08x}, byte-swapped?)", clause="GGUF-1.3", file=cur.file)
        raise fail("gguf.version", "version", "2 or 3", version, file=cur.file)
    tensor_count = cur.u64("tensor_count")
    if tensor_count > MAX_TENSORS:
        raise fail("gguf.count.too_large", "tensor_count", f"at most {MAX_TENSORS}", tensor_count, file=cur.file)
    kv_count = cur.u64("metadata_kv_count")
    if kv_count > MAX_KV:
        raise fail("gguf.count.too_large", "metadata_kv_count", f"at most {MAX_KV}", kv_count, file=cur.file)
    cur.need(kv_count * _MIN_KV_BYTES, f"{kv_count} metadata entries", "GGUF-1.5", fetch=False)
    metadata, types, alignment = _read_kvs(cur, kv_count)
    cur.need(tensor_count * _MIN_TENSOR_INFO_BYTES, f"{tensor_count} tensor infos", "GGUF-1.5", fetch=False)
    tensors: list[GGUFTensorInfo] = []
    seen: set[str] = set()
    expected = 0
    for i in range(tensor_count):
        info = _read_tensor_info(cur, i, alignment, expected, seen)
        seen.add(info.name)
        tensors.append(info)
        expected = info.offset + _pad(info.n_bytes, alignment)
    data_offset = _pad(cur.pos, alignment) if tensors else cur.pos
    _check_data_bounds(cur, tensors, data_offset, expected, alignment)
    header = GGUFHeader(version=version, tensor_count=tensor_count, kv_count=kv_count,
                        alignment=alignment, data_offset=data_offset, file_size=size,
                        metadata_types=types)
    return header, metadata, tensors


def _check_data_bounds(cur: _Cursor, tensors: list[GGUFTensorInfo], data_offset: int,
                       padded_end: int, alignment: int) -> None:
    if tensors and data_offset > cur.size:
        raise fail("gguf.truncated", "tensor data", f"a data section starting at offset {data_offset}",
                   f"end of file at {cur.size}", clause="GGUF-5.1", file=cur.file)
    for t in tensors:
        end = data_offset + t.offset + t.n_bytes
        if end > cur.size:
            raise fail("gguf.data.past_end", t.name, f"stored within the file (its data ends at {end})",
                       f"file size {cur.size}", file=cur.file)
    limit = data_offset + padded_end if tensors else _pad(cur.pos, alignment)
    if cur.size > limit:
        raise fail("gguf.data.trailing", "file", f"ending at offset {limit}, the last tensor's padded end",
                   f"{cur.size - limit} trailing bytes", file=cur.file)


class GGUFFile:
    """A validated GGUF file: header facts, metadata, tensor infos, memory-mapped tensor data.

    Immutable; close it (or use ``with``) to release the mapping. Arrays handed out stay valid
    after ``close()``: the mapping is then released when the last of them is dropped.
    """

    def __init__(self, file: str, header: GGUFHeader, metadata: dict[str, Any],
                 tensors: list[GGUFTensorInfo], data: np.ndarray, mm: mmap.mmap | None,
                 source: ByteSource | None = None) -> None:
        self._file = file
        self._header = header
        self._metadata = MappingProxyType(metadata)
        self._tensors = tuple(tensors)
        self._by_name = {t.name: t for t in tensors}
        self._data: np.ndarray | None = data
        self._mm = mm
        self._source = source     # a remote file: ``data`` holds its header only, tensors are fetched

    # -- header facts ------------------------------------------------------------------------
    file = property(lambda self: self._file)
    header = property(lambda self: self._header)
    version = property(lambda self: self._header.version)
    alignment = property(lambda self: self._header.alignment)
    data_offset = property(lambda self: self._header.data_offset)
    metadata = property(lambda self: self._metadata)
    metadata_types = property(lambda self: MappingProxyType(self._header.metadata_types))
    tensors = property(lambda self: self._tensors)

    def tensor(self, name: str) -> GGUFTensorInfo:
        try:
            return self._by_name[name]
        except KeyError:
            raise fail("tensor.missing", name, "a tensor of this file", "absent", file=self._file) from None

    # -- tensor data -------------------------------------------------------------------------
    def tensor_bytes(self, name: str) -> np.ndarray:
        """The tensor's bytes as a read-only uint8 view of the mapping, shape ``(n_bytes,)``."""
        info = self.tensor(name)
        if self._data is None:
            raise ValueError(f"GGUF file {self._file} is closed")
        start = self._header.data_offset + info.offset
        if self._source is not None:     # REMOTE-1.3: this tensor's bytes only, fetched now
            return np.frombuffer(self._source.read(start, info.n_bytes), np.uint8)
        return self._data[start:start + info.n_bytes]

    def tensor_rows(self, name: str) -> np.ndarray:
        """The bytes as ``(rows, row_bytes)`` with ``rows = ne[1]*ne[2]*ne[3]`` (q4_K: blocks input)."""
        info = self.tensor(name)
        ne0 = info.dims[0] if info.dims else 1
        row_bytes = GGML_TYPES[info.ggml_type].row_bytes(ne0)
        return self.tensor_bytes(name).reshape(info.n_elements // ne0, row_bytes)

    def tensor_array(self, name: str) -> np.ndarray:
        """Plain-typed tensors as NumPy in row-major shape ``ne[::-1]``; BF16 widens exactly to float32."""
        info = self.tensor(name)
        raw = self.tensor_bytes(name)
        if info.type_name == "BF16":
            wide = raw.view("<u2").astype(np.uint32) << 16
            return wide.view(np.float32).reshape(info.shape)
        dt = _PLAIN_TENSOR_DTYPES.get(info.type_name)
        if dt is None:
            raise fail("argument.invalid", name, "a plain-typed tensor (F32, F16, BF16, F64, I8..I64)",
                       f"{info.type_name}; use tensor_rows() and the format's dequantize", file=self._file)
        return raw.view(dt).reshape(info.shape)

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        self._data = None
        _release(self._mm)
        self._mm = None

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[GGUFTensorInfo]:
        return iter(self._tensors)

    def __repr__(self) -> str:
        h = self._header
        return (f"GGUFFile({self._file!r}, version={h.version}, tensors={h.tensor_count}, "
                f"kv={h.kv_count}, alignment={h.alignment})")


def _release(mm: mmap.mmap | None) -> None:
    if mm is None:
        return
    try:
        mm.close()
    except BufferError:  # views are still alive (caller's arrays, a traceback); they keep it mapped
        pass


def read_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Validate and open a GGUF v2/v3 file. Raises QFormatsError (``gguf.*``) on malformed input.

    A missing or unreadable path, or one that is not a regular file (a FIFO would block the
    open), raises ``OSError`` (GGUF-6.5: not a finding, the file could not be read).
    """
    file = os.fspath(path)
    mode = os.stat(file).st_mode
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, f"not a regular file ({stat.filemode(mode)})", file)
    with open(file, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            mm = None
            data = np.zeros(0, np.uint8)
        else:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            data = np.frombuffer(mm, dtype=np.uint8)  # read-only: ACCESS_READ buffer
    try:
        header, metadata, tensors = _parse(data, size, file)
    except BaseException:
        _release(mm)  # the traceback still holds views of the mapping: it is unmapped when they go
        raise
    return GGUFFile(file, header, metadata, tensors, data, mm)


FIRST_READ = 1 << 16            # a remote header's first request; more is asked for as the parse needs it
MAX_REMOTE_HEADER = 1 << 28     # ours: the bytes a remote header (metadata + tensor infos) may take


def read_gguf_source(src: ByteSource) -> GGUFFile:
    """Validate a GGUF file read through a byte source (REMOTE-1.2): the same rules and codes as
    :func:`read_gguf`. The header is fetched as a growing prefix: when the parse reaches the end of the bytes
    fetched (not of the file) the prefix grows (at least doubling, up to :data:`MAX_REMOTE_HEADER`) and
    the parse starts again, so the work stays within twice one parse. Tensor data is fetched on demand."""
    have = bytearray()
    want = min(src.size, FIRST_READ)
    while True:
        if want > len(have):
            more = src.read(len(have), want - len(have))
            if len(more) != want - len(have):
                raise fail("gguf.truncated", "header", f"{want - len(have)} bytes at offset {len(have)}",
                           f"{len(more)} bytes", file=src.name)
            have += more
        data = np.frombuffer(bytes(have), dtype=np.uint8)
        try:
            header, metadata, tensors = _parse(data, src.size, src.name, avail=len(have))
        except _NeedMore as need:
            want = min(src.size, max(need.upto, min(2 * len(have), MAX_REMOTE_HEADER)))
            if need.upto > MAX_REMOTE_HEADER:
                raise fail("remote.header.too_large", "header", f"at most {MAX_REMOTE_HEADER} bytes of metadata and "
                           "tensor infos fetched (download the file to validate it)", f"{need.upto} bytes needed",
                           file=src.name) from None
            continue
        return GGUFFile(src.name, header, metadata, tensors, data, None, source=src)


def read_gguf_bytes(blob: bytes, *, name: str = "<bytes>") -> GGUFFile:
    """Validate GGUF content held in memory (same rules as :func:`read_gguf`)."""
    data = np.frombuffer(bytes(blob), dtype=np.uint8)
    header, metadata, tensors = _parse(data, data.size, name)
    return GGUFFile(name, header, metadata, tensors, data, None)

