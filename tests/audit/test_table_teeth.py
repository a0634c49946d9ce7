"""Tests with teeth for qformats/audit/table.py (spec/audit.md AUDIT-1.2, AUDIT-3.1, AUDIT-3.3; issue 33): the whole
refusal of a table that is not one, the temporaries an interrupted audit left, and the extra pyarrow when it is
missing. Each test calls the module itself on a few hand-made files (no audit is run)."""

from __future__ import annotations

import os
import pathlib
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qformats.audit import table
from qformats.errors import QFormatsError

from whole_error import whole_in_file

INVALID = "audit.table.invalid"


def _refusal(call) -> tuple:
    with pytest.raises(QFormatsError) as err:
        call()
    return whole_in_file(err.value) + (err.value.file,)


# -- AUDIT-3.3: what read_table refuses ----------------------------------------------------------------------

def test_a_table_path_that_is_a_file_is_not_a_directory(tmp_path):
    """AUDIT-3.3: DIR naming a regular file holds no part files, and the refusal says it is not a directory."""
    path = tmp_path / "table.parquet"
    path.write_bytes(b"PAR1")
    assert _refusal(lambda: table.read_table(path)) == (
        INVALID, "DIR", "a directory holding audit part files (part-*.parquet)", "not a directory", path.name,
        str(path))


def test_a_part_file_that_is_not_parquet_is_refused_with_pyarrow_s_words(tmp_path):
    """AUDIT-3.3: a part-*.parquet that is not Parquet at all; the actual value is pyarrow's own error for it."""
    part = tmp_path / "part-0123.parquet"
    part.write_bytes(b"PAR1 these bytes are not a Parquet file PAR1")
    with pytest.raises(pa.ArrowException) as theirs:
        pq.ParquetFile(part)                    # pyarrow's reader of one Parquet file, as the table reads a part
    assert _refusal(lambda: table.read_table(tmp_path)) == (
        INVALID, part.name, "a Parquet file", f"{type(theirs.value).__name__}: {theirs.value}", part.name, str(part))


def test_a_foreign_part_file_names_every_column_it_has(tmp_path):
    """AUDIT-3.3: a Parquet file of other columns is refused naming its columns, comma-separated."""
    part = tmp_path / "part-0123.parquet"
    pq.write_table(pa.table({"unit": ["x"], "score": [0.5]}), part)
    assert _refusal(lambda: table.read_table(tmp_path)) == (
        INVALID, part.name, "a part file of the audit table's columns", "unit, score", part.name, str(part))


def test_the_foreign_columns_refusal_names_columns_it_cannot_decode():
    """AUDIT-3.3: pyarrow decodes a schema's names as UTF-8 when they are asked for. Opening a part file decodes
    its leaf column paths already (test_summarize's flipped name), so this is a schema whose names fail later:
    the refusal still says what they are, it never raises."""
    class Undecodable:
        @property
        def names(self):
            raise UnicodeDecodeError("utf-8", b"\xaa", 0, 1, "invalid start byte")

    assert table._column_names(Undecodable()) == "columns whose names are not UTF-8"
    assert table._column_names(pa.schema([("unit", pa.string()), ("score", pa.float64())])) == "unit, score"


# -- AUDIT-3.1: temporaries an interrupted audit left ---------------------------------------------------------

def _temporaries_after_a_directory(out: pathlib.Path) -> pathlib.Path:
    """A directory named like a temporary, and temporary files of which the directory listing gives at least one
    after it (a listing's order is the file system's: files are added until one follows the directory)."""
    odd = out / ".part-dir.parquet.1.tmp"
    odd.mkdir()
    for i in range(64):
        (out / f".part-{i:02d}.parquet.1.tmp").write_bytes(b"PAR1 half written")
        listed = list(out.glob(".part-*.parquet.*.tmp"))
        if listed.index(odd) < len(listed) - 1:
            return odd
    pytest.fail("the directory listing never put a file after the directory")


def test_a_directory_among_the_temporaries_does_not_stop_their_removal(tmp_path):
    """AUDIT-3.1: a directory of a temporary's name is skipped and stays; the temporary files listed after it are
    removed all the same."""
    odd = _temporaries_after_a_directory(tmp_path)
    table.clear_temporaries(tmp_path)
    assert list(tmp_path.iterdir()) == [odd]


def test_a_temporary_that_vanishes_before_its_removal_is_not_an_error(tmp_path, monkeypatch):
    """AUDIT-3.1: two audits of one DIR starting together both clear its temporaries; one the other removed between
    the listing and the unlink is gone, as wanted, not an error (the race is made here inside Path.is_dir)."""
    stale = tmp_path / ".part-0123.parquet.7.tmp"
    stale.write_bytes(b"PAR1 half written")
    looked = pathlib.Path.is_dir

    def is_dir_while_another_audit_clears(self):
        answer = looked(self)
        if self == stale:
            os.unlink(self)
        return answer

    monkeypatch.setattr(pathlib.Path, "is_dir", is_dir_while_another_audit_clears)
    table.clear_temporaries(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_that_cannot_be_removed_is_argument_invalid(tmp_path, monkeypatch):
    """AUDIT-3.1: a temporary unlink refuses (EACCES for a user who may not write DIR; tests run as root here, so the
    refusal is put in Path.unlink) is argument.invalid naming the file and the system's reason."""
    stale = tmp_path / ".part-0123.parquet.7.tmp"
    stale.write_bytes(b"PAR1 half written")

    def refused(self, missing_ok=False):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(pathlib.Path, "unlink", refused)
    assert _refusal(lambda: table.clear_temporaries(tmp_path)) == (
        "argument.invalid", "out", "a directory whose unfinished part files can be removed",
        "PermissionError: Permission denied", stale.name, str(stale))


# -- AUDIT-1.2: pyarrow is the extra qformats[audit] ---------------------------------------------------------

def _row() -> dict:
    """One hand-made row of the table: the key fields, verdict, codes and seconds set, the rest null."""
    row = dict.fromkeys(name for name, _, _ in table.COLUMNS)
    row.update(key="0123", repo="/r", revision="", file="", qformats_version="0.1.0", options="{}", unit="/r",
               verdict="valid", finding_codes=[], seconds=0.5)
    return row


CALLS = {
    "schema": lambda out: table.schema(),
    "write_part": lambda out: table.write_part(out, _row()),
    "read_table": lambda out: table.read_table(out),
    "read_parts": lambda out: table.read_parts([]),
}
MISSING = ("installed for the audit table (pip install 'qformats[audit]')", "not installed")


@pytest.mark.parametrize("call", CALLS)
def test_without_pyarrow_each_table_call_names_the_extra(call, tmp_path, monkeypatch):
    """AUDIT-1.2: pyarrow not installed: audit.extra.missing naming qformats[audit], never an ImportError."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)          # import pyarrow now raises ImportError
    with pytest.raises(QFormatsError) as err:
        CALLS[call](tmp_path)
    e = err.value
    assert (e.code, e.tensor, e.constraint, e.actual) == ("audit.extra.missing", "pyarrow", *MISSING)


@pytest.mark.parametrize("call", ["write_part", "read_table", "read_parts"])
def test_without_pyarrow_parquet_each_table_call_names_the_extra(call, tmp_path, monkeypatch):
    """AUDIT-1.2: a pyarrow built without Parquet (conda-forge's pyarrow-core is one): audit.extra.missing naming
    qformats[audit], never a traceback."""
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(QFormatsError) as err:
        CALLS[call](tmp_path)
    e = err.value
    assert (e.code, e.tensor, e.constraint, e.actual) == ("audit.extra.missing", "pyarrow.parquet", *MISSING)
