"""Hardened safetensors reader (spec/checkpoints.md, clauses ST-1 to ST-5).

Why our own header parser: the ``safetensors`` library (0.8.0) is safe, but its errors are one
string per class ("invalid JSON in header: ...") and it silently keeps the last of two tensors with
the same name. A validator needs a stable code per defect and must say which tensor is wrong, so
this module checks the raw bytes itself *before* any library or memory map touches them:

1. ``os.stat`` size first; the 8-byte little-endian header length ``N`` is compared with the
   100,000,000-byte cap (the library's ``MAX_HEADER_SIZE``) and with the file size *before* the
   header is read, so a hostile ``N`` never becomes an allocation (ST-1).
2. The header is decoded as strict UTF-8 and parsed as JSON with duplicate-key detection
   (``object_pairs_hook``), in the subset serde_json accepts: no ``NaN``/``Infinity``, no lone
   surrogate escapes, no out-of-range floats, JSON whitespace allowed around the object (ST-2).
3. Every tensor entry is checked: known dtype, shape of non-negative integers, ``[BEGIN, END]``
   offsets, ``END - BEGIN`` equal to the byte size the dtype and shape need (ST-3).
4. Sorted by offsets (writers used any order), the tensors must tile the byte buffer exactly: no
   overlap, no hole, and the file ends exactly where the last tensor ends (ST-4).

Where we are stricter than the library, the spec says so (duplicate tensor names and duplicate
``__metadata__`` keys are rejected). Conditions the library accepts but the format README
discourages are *warnings* (``findings``), not errors. All size arithmetic uses Python integers.

Tensor data is read by read-only memory map, one tensor at a time, never the whole file, and the
file is never written (ST-5)::

    header = read_header("model.safetensors")     # -> SafetensorsHeader; raises QFormatsError (st.*)
    header.tensors["qweight"]                      # TensorInfo(dtype="I32", shape=(16, 64), ...)
    w = open_tensor(header, "qweight")             # read-only np.memmap-backed array

``open_tensor`` returns BF16 as its raw ``uint16`` bits, the F8 types as ``uint8`` and the
sub-byte types (F4, F6_E2M3, F6_E3M2) as their packed bytes, 1-D ``uint8``: NumPy has no such
dtypes, and reinterpretation is the format layer's job (``TensorInfo.dtype`` says what they are).
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import brief_ascii, fail
from ..findings import Finding, finding
from .source import ByteSource, FileSource

__all__ = [
    "MAX_HEADER_SIZE", "DTYPES", "TensorInfo", "SafetensorsHeader", "read_header", "read_header_bytes", "read_header_source",
    "open_tensor", "numpy_dtype", "WARNING_CODES", "SCHEMA_MODELS", "JsonObject", "parse_json", "load_json", "is_text",
]

ST_SPEC_VERSION = "0.1"
MAX_HEADER_SIZE = 100_000_000         # safetensors tensor.rs MAX_HEADER_SIZE
_U64_LIMIT = 1 << 64                  # shape dims and offsets are Rust usize (64-bit)
_INTP_LIMIT = 1 << 63                 # NumPy sizes are npy_intp (signed 64-bit)
_NUMPY_MAX_DIMS = 64 if int(np.__version__.split(".")[0]) >= 2 else 32   # NPY_MAXDIMS
_JSON_WS = " \t\n\r"                  # the four JSON whitespace characters (RFC 8259)
_HEADER_KEYS = ("dtype", "shape", "data_offsets")

# dtype -> (bits per element, NumPy dtype handed out by open_tensor). Same set as safetensors
# 0.8.0 tensor.rs `enum Dtype`; BF16/F8 are raw-bit views, sub-byte types packed bytes.
DTYPES: dict[str, tuple[int, str]] = {
    "BOOL": (8, "|b1"), "U8": (8, "|u1"), "I8": (8, "|i1"),
    "F8_E5M2": (8, "|u1"), "F8_E4M3": (8, "|u1"), "F8_E8M0": (8, "|u1"),
    "F8_E4M3FNUZ": (8, "|u1"), "F8_E5M2FNUZ": (8, "|u1"),
    "I16": (16, "<i2"), "U16": (16, "<u2"), "F16": (16, "<f2"), "BF16": (16, "<u2"),
    "I32": (32, "<i4"), "U32": (32, "<u4"), "F32": (32, "<f4"),
    "I64": (64, "<i8"), "U64": (64, "<u8"), "F64": (64, "<f8"), "C64": (64, "<c8"),
    "F4": (4, "|u1"), "F6_E2M3": (6, "|u1"), "F6_E3M2": (6, "|u1"),
}
_SUB_BYTE = frozenset(name for name, (bits, _) in DTYPES.items() if bits < 8)

# Codes that report a file the library reads but the format README discourages (ST-2.3, ST-3.2).
WARNING_CODES = frozenset({"st.header.padding", "st.tensor.unknown_key"})


class TensorInfo(BaseModel):
    """One validated header entry: ``data_offsets`` are relative to the start of the byte buffer."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = ST_SPEC_VERSION

    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.data_offsets[1] - self.data_offsets[0]


class SafetensorsHeader(BaseModel):
    """A validated safetensors file: tensor entries in header order, ``__metadata__``, geometry.

    ``data_start = 8 + header_size``; tensor ``name`` occupies file bytes
    ``data_start + data_offsets[0] .. data_start + data_offsets[1]``. ``findings`` holds warnings.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = ST_SPEC_VERSION

    path: str
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] | None
    header_size: int
    data_start: int
    file_size: int
    findings: tuple[Finding, ...] = ()


SCHEMA_MODELS = (SafetensorsHeader, TensorInfo)


# -- JSON in the serde_json subset (also used for index and config files, spec CKPT-3.1, CKPT-4.2) --

class JsonObject(list):
    """A JSON object kept as its (key, value) pairs, so duplicate keys stay visible."""


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")  # Python accepts NaN/Infinity; serde_json does not


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {token[:40]}")
    return value


def _unique_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # Python's json would keep the last value silently
            raise ValueError(f"duplicate key {key[:80]!r}")
        out[key] = value
    return out


_DECODERS = {
    (dicts, allow_nan): json.JSONDecoder(object_pairs_hook=_unique_dict if dicts else JsonObject,
                                         parse_float=_finite_float,
                                         **({} if allow_nan else {"parse_constant": _no_constant}))
    for dicts in (False, True) for allow_nan in (False, True)
}


def parse_json(text: str, start: int = 0, *, dicts: bool = False, allow_nan: bool = False) -> tuple[Any, int]:
    """One JSON value of ``text`` from ``start``: ``(value, end)``; raises ValueError.

    The subset serde_json accepts: no ``NaN``/``Infinity`` (unless ``allow_nan``, for files only
    Python readers consume), no float that overflows a double. Objects come back as
    :class:`JsonObject` pairs, or with ``dicts=True`` as dicts, a duplicate key being an error.
    """
    try:
        return _DECODERS[dicts, allow_nan].raw_decode(text, start)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def load_json(raw: bytes, *, dicts: bool = False, allow_nan: bool = False) -> Any:
    """A whole document: strict UTF-8, one JSON value (:func:`parse_json`), JSON whitespace around it."""
    text = raw.decode("utf-8", errors="strict")
    value, end = parse_json(text, len(text) - len(text.lstrip(_JSON_WS)), dicts=dicts, allow_nan=allow_nan)
    if text[end:].strip(_JSON_WS):
        raise ValueError(f"extra data after the JSON value at character {end}")
    return value


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype :func:`open_tensor` returns for a safetensors dtype (see module docstring)."""
    return np.dtype(DTYPES[dtype][1])


# -- header checks ---------------------------------------------------------------------------

def _header_length(prefix: bytes, size: int, file: str) -> int:
    """ST-1.1..1.3: the 8-byte length, capped and bounded by the file size before any read."""
    if len(prefix) < 8:
        raise fail("st.truncated", "header length", "8 bytes (u64 little-endian)", f"{len(prefix)} bytes", file=file)
    n = struct.unpack("<Q", prefix)[0]
    if n > MAX_HEADER_SIZE:
        raise fail("st.header.too_large", "header length", f"at most {MAX_HEADER_SIZE} bytes", n, file=file)
    if 8 + n > size:
        raise fail("st.header.length", "header length",
                   f"at most the {size - 8} bytes after the length prefix", f"{n}; the file may be truncated",
                   file=file)
    return n


def _shape_text(shape: list[int]) -> str:
    """A shape for a message: long shapes are cut (a header may list thousands of dims)."""
    return str(shape) if len(shape) <= 8 else f"[{', '.join(map(str, shape[:8]))}, ...] ({len(shape)} dims)"


def _decode_json(raw: bytes, file: str, findings: list[Finding]) -> JsonObject:
    """ST-2.1..2.4: strict UTF-8, the serde_json subset, one object, whitespace around it only."""
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise fail("st.header.utf8", "header", "valid UTF-8",
                   f"byte 0x{raw[exc.start]:02x} at header offset {exc.start}", file=file) from None
    start = len(text) - len(text.lstrip(_JSON_WS))
    try:
        top, end = parse_json(text, start)
    except ValueError as exc:
        raise fail("st.header.json", "header", "JSON", str(exc)[:200], file=file) from None
    rest = text[end:]
    if rest.strip(_JSON_WS):
        tail = rest.lstrip(_JSON_WS)
        what = f"{len(tail)} NUL bytes" if not tail.strip("\x00") else repr(tail[:20])
        raise fail("st.header.json", "header", "one JSON object followed only by whitespace",
                   f"{what} after the object at header offset {len(raw) - len(rest.encode())}", file=file)
    if not isinstance(top, JsonObject):
        raise fail("st.header.not_object", "header", "a JSON object", type(top).__name__, file=file)
    if start or rest.strip(" "):
        findings.append(finding("st.header.padding", "warning",
                                f"header has {start} leading and {len(rest)} trailing whitespace bytes; "
                                "the format README requires '{' first and allows only trailing 0x20 padding"))
    return top


def is_text(value: str) -> bool:
    """Unicode scalar values only: JSON's lone ``\\udXXX`` escapes are not text (serde_json rejects
    them), cannot be encoded to name a file, and cannot be printed."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(value: str, subject: str, file: str) -> str:
    if not is_text(value):
        raise fail("st.header.json", subject, "a string without lone surrogate escapes", brief_ascii(value)[:80],
                   file=file)
    return value


def _metadata(value: Any, file: str) -> dict[str, str] | None:
    """ST-2.6: ``__metadata__`` is null or a string-to-string map without duplicate keys."""
    if value is None:
        return None
    if not isinstance(value, JsonObject):
        raise fail("st.metadata.invalid", "__metadata__", "an object of strings", type(value).__name__, file=file)
    out: dict[str, str] = {}
    for key, item in value:
        _check_text(key, "__metadata__", file)
        if key in out:
            raise fail("st.metadata.invalid", f"__metadata__.{key}", "a key that occurs once", "duplicate", file=file)
        if not isinstance(item, str):
            raise fail("st.metadata.invalid", f"__metadata__.{key}", "a string", type(item).__name__, file=file)
        out[key] = _check_text(item, f"__metadata__.{key}", file)
    return out


def _u64_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        type(v) is int and 0 <= v < _U64_LIMIT for v in value)  # noqa: E721 - bool is not a dimension


def _tensor_info(name: str, value: Any, file: str, findings: list[Finding]) -> TensorInfo:
    """ST-3: one entry ``{"dtype", "shape", "data_offsets"}`` checked field by field."""
    if not isinstance(value, JsonObject):
        raise fail("st.tensor.invalid", name, "an object {dtype, shape, data_offsets}", type(value).__name__, file=file)
    fields: dict[str, Any] = {}
    for key, item in value:
        if key in fields:
            raise fail("st.tensor.invalid", name, "each field once", f"duplicate field {key!r}", file=file)
        fields[key] = item
    missing = [k for k in _HEADER_KEYS if k not in fields]
    if missing:
        raise fail("st.tensor.invalid", name, "an object {dtype, shape, data_offsets}", f"missing {missing}", file=file)
    extra = sorted(set(fields) - set(_HEADER_KEYS))
    if extra:
        findings.append(finding("st.tensor.unknown_key", "warning",
                                f"tensor entry has keys the format does not define: {extra}", tensor=name))
    dtype, shape, offsets = (fields[k] for k in _HEADER_KEYS)
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise fail("st.dtype.unknown", name, "a safetensors dtype (" + ", ".join(DTYPES) + ")",
                   brief_ascii(dtype)[:60], file=file)
    if not _u64_list(shape):
        raise fail("st.shape.invalid", name, "a list of integers in [0, 2^64)", brief_ascii(shape)[:80], file=file)
    if not (_u64_list(offsets) and len(offsets) == 2):
        raise fail("st.offsets.invalid", name, "[BEGIN, END], two integers in [0, 2^64)", brief_ascii(offsets)[:80],
                   file=file)
    begin, end = offsets
    if end < begin:
        raise fail("st.offsets.out_of_order", name, "BEGIN <= END", f"[{begin}, {end}]", file=file)
    count = 1
    for j, dim in enumerate(shape):
        count *= dim
        if count >= _U64_LIMIT:  # checked in order, as the library's checked_mul: [2^63, 8, 0] overflows
            raise fail("st.shape.invalid", name, "dimensions whose running product stays below 2^64",
                       f"overflow at dimension {j} of {_shape_text(shape)}", file=file)
    nbits = count * DTYPES[dtype][0]
    if nbits % 8:
        raise fail("st.shape.partial_byte", name, f"a whole number of bytes ({dtype} is {DTYPES[dtype][0]} bits)",
                   f"{nbits} bits for shape {_shape_text(shape)}", file=file)
    if end - begin != nbits // 8:
        raise fail("st.offsets.size_mismatch", name,
                   f"END - BEGIN = {nbits // 8} bytes ({dtype} {_shape_text(shape)})",
                   f"{end - begin} bytes ([{begin}, {end}])", file=file)
    return TensorInfo(dtype=dtype, shape=tuple(shape), data_offsets=(begin, end))


def _check_layout(tensors: dict[str, TensorInfo], n: int, size: int, file: str) -> None:
    """ST-4: sorted by (BEGIN, END) the tensors tile [0, buffer end) exactly; the file ends there."""
    running, last = 0, None
    for name, info in sorted(tensors.items(), key=lambda kv: (kv[1].data_offsets, kv[0])):
        begin, end = info.data_offsets
        if begin < running:
            raise fail("st.offsets.overlap", name, f"BEGIN >= {running}, the end of '{last}'",
                       f"[{begin}, {end}]", file=file)
        if begin > running:
            where = f"the end of '{last}'" if last is not None else "the start of the byte buffer"
            raise fail("st.offsets.hole", name, f"BEGIN = {running}, {where} (no unreferenced bytes)",
                       f"[{begin}, {end}], leaving {begin - running} bytes unreferenced", file=file)
        running, last = end, name
    expected = 8 + n + running
    if expected > size:
        raise fail("st.truncated", last, f"within the file ({size} bytes)",
                   f"data ending at file offset {expected}; {expected - size} bytes missing", file=file)
    if expected < size:
        raise fail("st.file.size", "file size", f"{expected} bytes (8 + header {n} + buffer {running})",
                   f"{size} bytes: {size - expected} trailing bytes no tensor references", file=file)


def _parse(raw: bytes, n: int, size: int, file: str) -> SafetensorsHeader:
    findings: list[Finding] = []
    top = _decode_json(raw, file, findings)
    metadata: dict[str, str] | None = None
    seen: set[str] = set()
    tensors: dict[str, TensorInfo] = {}
    for key, value in top:
        _check_text(key, "header", file)
        if key in seen:
            raise fail("st.name.duplicate", key, "a name that occurs once in the header", "duplicate", file=file)
        seen.add(key)
        if key == "__metadata__":
            metadata = _metadata(value, file)
        else:
            tensors[key] = _tensor_info(key, value, file, findings)
    _check_layout(tensors, n, size, file)
    return SafetensorsHeader(path=file, tensors=tensors, metadata=metadata, header_size=n,
                             data_start=8 + n, file_size=size, findings=tuple(findings))


# -- public API ------------------------------------------------------------------------------

def read_header(path: str | os.PathLike[str]) -> SafetensorsHeader:
    """Validate a safetensors file's framing and header (ST-1..ST-4); reads O(header) bytes.

    Raises:
        QFormatsError: ``st.*`` for a malformed file (a finding: the file is invalid); ``file``
            names the path.
        OSError: the path cannot be read at all, or is not a regular file (a FIFO would block);
            :func:`qformats.containers.checkpoint.path_error` maps it to a could-not-run code.
    """
    return read_header_source(FileSource(path))


def read_header_source(src: ByteSource) -> SafetensorsHeader:
    """:func:`read_header` through a byte source (a local file, an HTTP range reader; REMOTE-1.2): two
    bounded reads, the 8-byte length and then the header, each checked against the cap and ``src.size`` first."""
    file, size = src.name, src.size
    n = _header_length(src.read(0, min(8, size)), size, file)
    raw = src.read(8, n)
    if len(raw) != n:  # the file shrank between stat and read
        raise fail("st.truncated", "header", f"{n} bytes", f"{len(raw)} bytes", file=file)
    return _parse(raw, n, size, file)


def read_header_bytes(blob: bytes, *, name: str = "<bytes>") -> SafetensorsHeader:
    """Validate safetensors content held in memory (same rules and codes as :func:`read_header`)."""
    n = _header_length(bytes(blob[:8]), len(blob), name)
    return _parse(bytes(blob[8:8 + n]), n, len(blob), name)


def open_tensor(header: SafetensorsHeader, name: str, source: ByteSource | None = None) -> np.ndarray:
    """One tensor as a read-only array memory-mapped from ``header.path`` (ST-5), or read from ``source``.

    BF16 comes back as ``uint16`` bits, F8 types as ``uint8``, sub-byte types as 1-D packed
    ``uint8`` bytes. Only this tensor's pages are mapped; the file is never written.

    Raises:
        QFormatsError: ``tensor.missing``; ``tensor.shape`` for a valid shape NumPy cannot hold
            (ST-5.3); ``st.file.size`` when the file changed size since its header was read.
        OSError: the file can no longer be read.
    """
    info = header.tensors.get(name)
    if info is None:
        raise fail("tensor.missing", name, f"a tensor of this file ({len(header.tensors)} tensors)", "absent",
                   file=header.path)
    dtype = numpy_dtype(info.dtype)
    out_shape = (info.nbytes,) if info.dtype in _SUB_BYTE else info.shape
    _check_numpy_shape(name, out_shape, dtype.itemsize, header.path)
    if source is not None:       # a remote file: this tensor's bytes only, fetched now (REMOTE-1.3)
        arr = np.frombuffer(source.read(header.data_start + info.data_offsets[0], info.nbytes), np.uint8)
        return arr.view(dtype).reshape(out_shape)
    size = os.stat(header.path).st_size
    if size != header.file_size:  # a shrunk file would fault (SIGBUS) inside the mapping
        raise fail("st.file.size", "file size", f"{header.file_size} bytes, as when the header was read",
                   f"{size} bytes", file=header.path)
    if info.nbytes == 0:
        arr = np.zeros(out_shape, dtype)
        arr.flags.writeable = False
        return arr
    raw = np.memmap(header.path, dtype=np.uint8, mode="r", offset=header.data_start + info.data_offsets[0],
                    shape=(info.nbytes,))
    return raw.view(dtype).reshape(out_shape)


def _check_numpy_shape(name: str, shape: tuple[int, ...], itemsize: int, file: str) -> None:
    """ST-5.3: NumPy's own limits (NPY_MAXDIMS; non-zero dims times itemsize below 2^63, zeros or not)."""
    constraint = f"a shape NumPy can hold (at most {_NUMPY_MAX_DIMS} dims, byte size of its non-zero dims < 2^63)"
    if len(shape) > _NUMPY_MAX_DIMS:
        raise fail("tensor.shape", name, constraint, f"{len(shape)} dims", clause="ST-5.3", file=file)
    nbytes = itemsize
    for dim in shape:
        nbytes *= dim or 1
        if nbytes >= _INTP_LIMIT:
            raise fail("tensor.shape", name, constraint, _shape_text(list(shape)), clause="ST-5.3", file=file)
