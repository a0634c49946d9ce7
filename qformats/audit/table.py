"""The audit table (spec/audit.md AUDIT-3): one Parquet part file per unit, written whole or not at all.

Part files are ``part-<key>.parquet`` in the output directory, all of one :func:`schema`; the table is
their concatenation, in key order. pyarrow is the optional extra ``qformats[audit]`` (AUDIT-1.2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import fail
from ..executor import require

__all__ = ["COLUMNS", "schema", "part_path", "parts", "write_part", "read_table", "read_parts", "rows", "clear_temporaries"]

PREFIX, SUFFIX = "part-", ".parquet"

# (column, pyarrow type name, meaning); the key fields first (AUDIT-2.1)
COLUMNS = (
    ("key", "string", "hash of the key fields: the part file's name"),
    ("repo", "string", "a local directory (absolute), or a remote repository"),
    ("revision", "string", "a remote revision; empty for local units"),
    ("file", "string", "a file within repo; empty for a whole directory"),
    ("qformats_version", "string", "the qformats that judged it"),
    ("options", "string", "the validation options, canonical JSON"),
    ("unit", "string", "what validate was given"),
    ("verdict", "string", "valid, invalid or could-not-run"),
    ("format", "string", "the formats found (validate's format), null when it could not run"),
    ("container", "string", "safetensors, sharded, gguf, unreadable"),
    ("errors", "int64", "findings of severity error"),
    ("warnings", "int64", "findings of severity warning"),
    ("info", "int64", "findings of severity info"),
    ("finding_codes", "list<string>", "the distinct finding codes, sorted"),
    ("layers", "int64", "rows of the report: quantized modules or checked GGUF tensors"),
    ("tensors", "int64", "tensors in the checkpoint"),
    ("tensors_checked", "int64", "tensors a check reached (CKPT-5.1)"),
    ("tensors_unchecked", "int64", "tensors named as not checked, with their reasons in the report"),
    ("bytes", "int64", "the unit's bytes (its files)"),
    ("bytes_read", "int64", "bytes read where the reader counts them (remote sources); null for local files, "
                            "which are memory-mapped"),
    ("seconds", "double", "wall time of the unit"),
    ("error_code", "string", "could-not-run: the error's code"),
    ("error", "string", "could-not-run: the error's text"),
)


def schema() -> Any:
    pa = require("pyarrow", "the audit table")
    types = {"string": pa.string(), "int64": pa.int64(), "double": pa.float64(), "list<string>": pa.list_(pa.string())}
    return pa.schema([pa.field(name, types[kind]) for name, kind, _ in COLUMNS])


def part_path(out: Path, key: str) -> Path:
    return Path(out) / f"{PREFIX}{key}{SUFFIX}"


def parts(out: str | Path) -> list[Path]:
    return sorted(p for p in Path(out).glob(f"{PREFIX}*{SUFFIX}") if p.is_file())


def write_part(out: Path, row: dict[str, Any]) -> Path:
    """AUDIT-3.1: write to a temporary name in ``out``, then rename: a part file is whole or absent."""
    pa = require("pyarrow", "the audit table")
    pq = require("pyarrow.parquet", "the audit table")
    final = part_path(out, row["key"])
    temporary = out / f".{final.name}.{os.getpid()}.tmp"
    table = pa.Table.from_pylist([row], schema=schema())
    pq.write_table(table, temporary, use_dictionary=False, write_statistics=False)   # one row: neither helps
    os.replace(temporary, final)
    return final


def clear_temporaries(out: Path) -> None:
    """Part files an interrupted audit had not finished writing (never renamed into place). A directory of that
    name is not one of them and is left alone; one that cannot be removed is could-not-run (AUDIT-3.1)."""
    for stale in out.glob(f".{PREFIX}*{SUFFIX}.*.tmp"):
        if stale.is_dir() and not stale.is_symlink():
            continue
        try:
            stale.unlink(missing_ok=True)
        except OSError as exc:
            raise fail("argument.invalid", "out", "a directory whose unfinished part files can be removed",
                       f"{type(exc).__name__}: {exc.strerror or exc}", file=str(stale)) from None


def read_table(out: str | Path) -> Any:
    """The whole table, rows in key order (AUDIT-3.3: no part files, or a foreign one, is could-not-run)."""
    pa = require("pyarrow", "the audit table")
    require("pyarrow.parquet", "the audit table")             # the extra before the directory (AUDIT-1.2)
    out, files = Path(out), parts(out)
    if not files:
        raise fail("audit.table.invalid", "DIR", f"a directory holding audit part files ({PREFIX}*{SUFFIX})",
                   "none" if out.is_dir() else "not a directory", file=str(out))
    return pa.concat_tables(read_parts(files)).sort_by("key")


def read_parts(files: list[Path]) -> list[Any]:
    """Each part file's one-row table, checked (AUDIT-3.3). Read whole, in this thread: a part file is one row,
    and pyarrow's pre-buffering and thread pool cost more than the read (half the time of ``pq.read_table``)."""
    pa = require("pyarrow", "the audit table")
    pq = require("pyarrow.parquet", "the audit table")
    tables = []
    want = schema()
    for file in files:
        table = _read_part(file, pa, pq)
        if not table.schema.equals(want, check_metadata=False):
            raise fail("audit.table.invalid", file.name, "a part file of the audit table's columns",
                       _column_names(table.schema), file=str(file))
        _check_part(file, table, pa)
        tables.append(table)
    return tables


def _read_part(file: Path, pa: Any, pq: Any) -> Any:
    try:
        with pq.ParquetFile(file, pre_buffer=False) as opened:
            return opened.read(use_threads=False)
    except UnicodeDecodeError:                 # opening a Parquet file decodes its column paths as UTF-8
        raise fail("audit.table.invalid", file.name, "a part file of the audit table's columns",
                   "columns whose names are not UTF-8", file=str(file)) from None
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise fail("audit.table.invalid", file.name, "a Parquet file", f"{type(exc).__name__}: {exc}",
                   file=str(file)) from None


def _column_names(schema: Any) -> str:
    """The columns of a foreign part file, for its refusal; pyarrow decodes each name as UTF-8 when asked."""
    try:
        return ", ".join(schema.names)
    except UnicodeDecodeError:
        return "columns whose names are not UTF-8"


REQUIRED = ("key", "repo", "revision", "file", "qformats_version", "options", "unit", "verdict", "finding_codes",
            "seconds")                       # bytes may be null: a unit whose worker was lost (AUDIT-1.3)
VERDICTS = ("valid", "invalid", "could-not-run")


def _check_part(file: Path, table: Any, pa: Any) -> None:
    """AUDIT-3.3: a part file as write_part writes it: valid Arrow data (strings UTF-8), one row, the key and
    verdict columns set, a known verdict, and the file named by its row's key. The fuzz flipped bytes of a
    part file into a string that was not UTF-8, which ended summarize with a UnicodeDecodeError."""
    def refuse(constraint: str, actual: Any) -> None:
        raise fail("audit.table.invalid", file.name, constraint, actual, file=str(file))

    try:
        table.validate(full=True)
    except pa.ArrowException as exc:
        refuse("valid Arrow data (strings in UTF-8)", f"{type(exc).__name__}: {exc}")
    if table.num_rows != 1:
        refuse("one row: one unit per part file", table.num_rows)
    row = table.to_pylist()[0]
    unset = [name for name in REQUIRED if row[name] is None]
    if unset:
        refuse("a row with its key fields, verdict, codes and seconds set", "null " + ", ".join(unset))
    if row["verdict"] not in VERDICTS:
        refuse("a verdict of valid, invalid or could-not-run", row["verdict"])
    if file.name != part_path(file.parent, row["key"]).name:
        refuse("the part file its row's key names", row["key"])


def rows(out: str | Path) -> list[dict[str, Any]]:
    return read_table(out).to_pylist()
