"""Bytes from anywhere: the one seam the container readers read through (DESIGN.md §7, spec/remote.md REMOTE-1).

A byte source is a file of known size with one bounded call::

    src.name            # what findings name as the file (a path, or hf://ORG/REPO@SHA/FILE)
    src.size            # its size in bytes, known before anything is read
    src.read(offset, n) # exactly n bytes at offset; 0 <= offset, 0 <= n, offset + n <= size

The bounds are checked before anything is allocated or requested, so a length taken from a hostile header
never becomes an allocation or a request larger than the file (REMOTE-1.1). :class:`FileSource` reads a local
file; :mod:`qformats.remote` supplies the HTTP range source. The local readers keep their memory maps for
tensor data; a source serves the headers and, for remote files, each tensor on demand.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Protocol, runtime_checkable

from ..errors import fail

__all__ = ["ByteSource", "FileSource", "check_read"]


@runtime_checkable
class ByteSource(Protocol):
    name: str
    size: int

    def read(self, offset: int, n: int) -> bytes: ...


def check_read(src: ByteSource, offset: int, n: int) -> None:
    """REMOTE-1.1: a read inside the file, checked before any allocation or request."""
    if isinstance(offset, bool) or isinstance(n, bool) or not (isinstance(offset, int) and isinstance(n, int)):
        raise fail("argument.invalid", "read", "integer offset and length", (offset, n), file=src.name)
    if offset < 0 or n < 0 or offset + n > src.size:
        raise fail("argument.invalid", "read", f"a byte range inside the file's {src.size} bytes",
                   f"{n} bytes at offset {offset}", clause="REMOTE-1.1", file=src.name)


class FileSource:
    """A local regular file as a byte source (a FIFO would block: refused as ``OSError``, as the readers do)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.name = os.fspath(path)
        st = os.stat(self.name)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({stat.filemode(st.st_mode)})", self.name)
        self.size = st.st_size

    def read(self, offset: int, n: int) -> bytes:
        check_read(self, offset, n)
        with open(self.name, "rb") as fh:
            fh.seek(offset)
            return fh.read(n)   # shorter when the file shrank since stat: the callers compare lengths
