"""The runner <-> subject-process wire: length-framed JSON headers and raw little-endian arrays.

Nothing crosses the process boundary as a pickle: the subject is untrusted, so what it sends back
is parsed as bytes with every length checked before it is used (a JSON header of at most 1 MiB,
arrays whose dtype is in a closed list and whose shape product matches their byte count).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import numpy as np

__all__ = ["send", "receive", "pack_arrays", "unpack_arrays", "WireError", "DTYPES"]

MAX_HEADER = 1 << 20
MAX_PAYLOAD = 1 << 34                         # 16 GiB: a realistic weight, never a bogus length
DTYPES = ("|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8")


class WireError(Exception):
    """The peer sent something that is not a well-formed message."""


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise WireError(f"stream closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send(stream: BinaryIO, header: Mapping[str, Any], payload: bytes = b"") -> None:
    head = json.dumps(header).encode()
    stream.write(struct.pack("<IQ", len(head), len(payload)) + head + payload)
    stream.flush()


def receive(stream: BinaryIO, read: Callable[[int], bytes] | None = None) -> tuple[dict[str, Any], bytes]:
    """One message; ``read(n)`` returns exactly ``n`` bytes (default: blocking reads of ``stream``),
    so the runner can read with a deadline through the same length checks."""
    read = read or (lambda n: _read_exact(stream, n))
    n_head, n_payload = struct.unpack("<IQ", read(12))
    if n_head > MAX_HEADER or n_payload > MAX_PAYLOAD:
        raise WireError(f"message lengths out of range ({n_head}, {n_payload})")
    try:
        header = json.loads(read(n_head))
    except ValueError as exc:
        raise WireError(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise WireError("header is not a JSON object")
    return header, read(n_payload)


def pack_arrays(arrays: Mapping[str, np.ndarray]) -> tuple[list[dict[str, Any]], bytes]:
    """(descriptors, bytes): each array as name, little-endian dtype, shape and its place in the bytes."""
    descs, blobs, offset = [], [], 0
    for name, value in arrays.items():
        a = np.ascontiguousarray(value)
        a = a.astype(a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype, copy=False)
        blob = a.tobytes()
        descs.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": offset,
                      "nbytes": len(blob)})
        blobs.append(blob)
        offset += len(blob)
    return descs, b"".join(blobs)


def unpack_arrays(descs: Any, payload: bytes) -> dict[str, np.ndarray]:
    """Inverse of :func:`pack_arrays`, checking every descriptor against the payload first."""
    if not isinstance(descs, list):
        raise WireError("array descriptors are not a list")
    out = {}
    for d in descs:
        if not isinstance(d, dict) or d.get("dtype") not in DTYPES or not isinstance(d.get("name"), str):
            raise WireError(f"bad array descriptor {str(d)[:200]}")
        shape, offset, nbytes = d.get("shape"), d.get("offset"), d.get("nbytes")
        if (not isinstance(shape, list) or len(shape) > 8 or not all(type(s) is int and s >= 0 for s in shape)
                or type(offset) is not int or type(nbytes) is not int or offset < 0 or offset + nbytes > len(payload)):
            raise WireError(f"array descriptor out of range {str(d)[:200]}")
        dtype = np.dtype(d["dtype"])
        count = 1
        for s in shape:
            count *= s
        if count * dtype.itemsize != nbytes:
            raise WireError(f"array {d['name']!r}: shape {shape} needs {count * dtype.itemsize} bytes, got {nbytes}")
        out[d["name"]] = np.frombuffer(payload, dtype, count, offset).reshape(shape)
    return out
