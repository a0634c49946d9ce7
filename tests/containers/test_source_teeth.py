"""Tests with teeth for the byte source (issue 33 item 3: ``qformats/containers/source.py``; spec/remote.md REMOTE-1).

Expected values are the file's own bytes as written here, the bounds of REMOTE-1.1 worked at the limit and one past,
and refusals written out whole by hand (QF-2.6's ``argument.invalid``, ERR-1's message form).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from qformats.containers.source import ByteSource, FileSource, check_read
from qformats.errors import QFormatsError
from whole_error import refusal, whole

DATA = bytes(range(10, 20))   # ten bytes whose values name their offsets: byte i is 10 + i


@pytest.fixture
def ten(tmp_path) -> Path:
    path = tmp_path / "ten.bin"
    path.write_bytes(DATA)
    return path


def outside(size: int, n: int, offset: int) -> tuple:
    """REMOTE-1.1's refusal of a read outside a file of ``size`` bytes."""
    return refusal("argument.invalid", "read", f"a byte range inside the file's {size} bytes",
                   f"{n} bytes at offset {offset}")


def where(call) -> tuple[str, str | None]:
    """The clause and the file a refusal names (whole() covers the rest)."""
    with pytest.raises(QFormatsError) as info:
        call()
    return info.value.clause, info.value.file


class Stub:
    """A byte source of the REMOTE-1 shape that is no file: check_read must use only its name and size."""

    def __init__(self, size: int) -> None:
        self.name, self.size = "hf://org/repo@abc/model.safetensors", size

    def read(self, offset: int, n: int) -> bytes:
        check_read(self, offset, n)
        return bytes(n)


# -- FileSource: name, size, the exact bytes ------------------------------------------------------------------------

def test_name_is_the_path_as_a_string(ten):
    """REMOTE-1: `src.name` is what findings name as the file: the path given, as a string."""
    assert FileSource(ten).name == str(ten)
    assert type(FileSource(ten).name) is str


def test_size_is_known_before_any_read(ten):
    """REMOTE-1: `src.size` is the file's size in bytes, known before anything is read."""
    assert FileSource(ten).size == 10
    assert FileSource(str(ten)).size == 10


def test_read_returns_exactly_the_bytes_at_offset(ten):
    """REMOTE-1: `read(offset, n)` returns exactly `n` bytes at `offset`."""
    src = FileSource(ten)
    assert src.read(3, 4) == bytes([13, 14, 15, 16])
    assert src.read(0, 1) == bytes([10])


def test_read_up_to_the_last_byte(ten):
    """REMOTE-1.1 at the limit: `offset + n == size` lies inside the file."""
    assert FileSource(ten).read(6, 4) == bytes([16, 17, 18, 19])
    assert FileSource(ten).read(0, 10) == DATA


def test_empty_read_at_the_end(ten):
    """REMOTE-1.1 at the limit: `n == 0` at `offset == size` is inside the file and reads nothing."""
    assert FileSource(ten).read(10, 0) == b""
    assert FileSource(ten).read(0, 0) == b""


def test_a_file_that_shrank_reads_short(ten):
    """REMOTE-1: the callers compare lengths: a file cut after its size was taken reads what is left, no padding."""
    src = FileSource(ten)
    ten.write_bytes(DATA[:5])
    assert src.read(3, 4) == bytes([13, 14])


def test_file_source_is_a_byte_source(ten):
    """REMOTE-1: FileSource has the byte-source shape (name, size, read); an object without `read` has not."""
    assert isinstance(FileSource(ten), ByteSource)
    assert isinstance(Stub(3), ByteSource)
    assert not isinstance(object(), ByteSource)


# -- REMOTE-1.1: reads outside the file ------------------------------------------------------------------------------

def test_one_byte_past_the_end_is_refused(ten):
    """REMOTE-1.1 one past the limit: `offset + n == size + 1` is a read outside the file."""
    assert whole(lambda: FileSource(ten).read(7, 4)) == outside(10, 4, 7)


def test_empty_read_past_the_end_is_refused(ten):
    """REMOTE-1.1: `offset == size + 1` is outside the file even for `n == 0`."""
    assert whole(lambda: FileSource(ten).read(11, 0)) == outside(10, 0, 11)


def test_negative_offset_is_refused(ten):
    """REMOTE-1.1: `0 <= offset`: offset -1 is refused (offset 0 reads, above)."""
    assert whole(lambda: FileSource(ten).read(-1, 1)) == outside(10, 1, -1)


def test_negative_length_is_refused(ten):
    """REMOTE-1.1: `0 <= n`: n = -1 is refused even where `offset + n` stays inside the file."""
    assert whole(lambda: FileSource(ten).read(5, -1)) == outside(10, -1, 5)


def test_outside_read_names_its_clause_and_file(ten):
    """REMOTE-1.1: the refusal is the reader's bug, cited as REMOTE-1.1, naming the file."""
    assert where(lambda: FileSource(ten).read(7, 4)) == ("REMOTE-1.1", str(ten))


def test_check_read_uses_the_sources_size():
    """REMOTE-1.1 through any byte source: the bound is its `size` (here 3), not a file on disk."""
    assert Stub(3).read(0, 3) == bytes(3)
    assert whole(lambda: Stub(3).read(1, 3)) == outside(3, 3, 1)
    assert where(lambda: Stub(3).read(1, 3)) == ("REMOTE-1.1", "hf://org/repo@abc/model.safetensors")


# -- QF-2.6: offset and length must be integers ----------------------------------------------------------------------

def not_integers(offset, n) -> tuple:
    """QF-2.6's refusal of a non-integer offset or length, the pair as given."""
    return ("argument.invalid", "read", "integer offset and length", (offset, n),
            f"'read' must be integer offset and length (got ({offset!r}, {n!r}))")


@pytest.mark.parametrize(("offset", "n"), [(True, 1), (1, True), (False, False)])
def test_booleans_are_not_integers(ten, offset, n):
    """QF-2.6: a bool is no byte offset or length, though Python counts it an int (either argument alone)."""
    assert whole(lambda: FileSource(ten).read(offset, n)) == not_integers(offset, n)


@pytest.mark.parametrize(("offset", "n"), [(1.0, 1), (1, 1.0), ("1", 1), (1, None)])
def test_non_integers_are_refused(ten, offset, n):
    """QF-2.6: a float, string or None offset or length is refused (either argument alone)."""
    assert whole(lambda: FileSource(ten).read(offset, n)) == not_integers(offset, n)


def test_non_integer_refusal_names_the_file_under_qf_2_6(ten):
    """QF-2.6: the type refusal is `argument.invalid`'s own clause, naming the file."""
    assert where(lambda: FileSource(ten).read(1.0, 1)) == ("QF-2.6", str(ten))


# -- FileSource refuses what is not a regular file -----------------------------------------------------------------

def test_fifo_is_refused_as_os_error(tmp_path):
    """REMOTE-1 / the readers: a FIFO would block: OSError EINVAL naming its mode, before any read."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o600)
    os.chmod(fifo, 0o600)
    with pytest.raises(OSError) as info:
        FileSource(fifo)
    e = info.value
    assert type(e) is OSError
    assert (e.errno, e.strerror, e.filename) == (errno.EINVAL, "not a regular file (prw-------)", str(fifo))


def test_directory_is_refused_as_os_error(tmp_path):
    """REMOTE-1: a directory is no regular file: OSError EINVAL naming its mode."""
    folder = tmp_path / "dir"
    folder.mkdir()
    os.chmod(folder, 0o700)
    with pytest.raises(OSError) as info:
        FileSource(folder)
    assert (info.value.errno, info.value.strerror) == (errno.EINVAL, "not a regular file (drwx------)")


def test_missing_file_is_file_not_found(tmp_path):
    """REMOTE-1: a path that names nothing is the operating system's FileNotFoundError."""
    with pytest.raises(FileNotFoundError):
        FileSource(tmp_path / "absent.bin")
