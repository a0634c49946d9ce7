"""`qformats audit summarize DIR` (spec/audit.md AUDIT-3.3): counts from the table, and the page drawn from them."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qformats.audit import audit, page, summarize
from qformats.cli import main
from qformats.errors import QFormatsError

from .conftest import fixture_units


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("summary") / "out"
    audit([*fixture_units(), "/nonexistent/unit"], out, deep=True)
    return out


def _table(out: Path) -> list[dict]:
    """The table read with pyarrow directly, not through qformats.audit."""
    return pa.concat_tables([pq.read_table(p) for p in sorted(out.glob("part-*.parquet"))]).to_pylist()


def test_counts_match_the_table(table_dir):
    """AUDIT-3.3: units by verdict, by format, by finding code and by error, and the totals, are the table's."""
    rows, doc = _table(table_dir), summarize(table_dir)
    assert doc["units"] == len(rows) == 20
    assert doc["by_verdict"] == {"valid": 11, "invalid": 8, "could-not-run": 1}
    assert doc["by_verdict"] == {v: sum(r["verdict"] == v for r in rows) for v in ("valid", "invalid", "could-not-run")}
    assert doc["by_format"] == dict(Counter(r["format"] for r in rows if r["format"]))
    assert doc["by_code"] == dict(Counter(c for r in rows for c in r["finding_codes"]))
    assert doc["by_error"] == {"ckpt.path.missing": 1}
    assert doc["bytes"] == sum(r["bytes"] or 0 for r in rows)
    assert doc["not_valid_total"] == 9 and {r["unit"] for r in doc["not_valid"]} == \
        {r["unit"] for r in rows if r["verdict"] != "valid"}


def test_cli_summarize_json_is_the_summary_and_writes_the_page(table_dir, tmp_path, capsys):
    """AUDIT-3.3: `audit summarize DIR --json --html FILE` prints the summary document and writes the page."""
    html = tmp_path / "page.html"
    assert main(["audit", "summarize", str(table_dir), "--json", "--html", str(html)]) == 0
    assert json.loads(capsys.readouterr().out) == summarize(table_dir)
    assert html.read_text(encoding="utf-8") == page(summarize(table_dir))


def test_page_bars_are_the_summary_counts(table_dir):
    """AUDIT-3.3: each inline SVG bar's title is a label and the count the summary gives it; nothing is fetched."""
    doc = summarize(table_dir)
    text = page(doc)
    bars = {}
    for svg in re.findall(r"<svg\b.*?</svg>", text, flags=re.S):
        for title in ET.fromstring(svg).iter("title"):
            label, _, n = title.text.rpartition(": ")
            bars.setdefault(label, set()).add(int(n))
    assert bars["valid"] == {11} and bars["invalid"] == {8} and bars["could-not-run"] == {1}
    for code, n in doc["by_code"].items():
        assert n in bars[code]
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    embedded = re.search(r'<script type="application/json" id="summary-data">(.*?)</script>', text, re.S).group(1)
    assert json.loads(embedded) == doc


def test_summarize_a_directory_without_parts_is_could_not_run(tmp_path):
    """AUDIT-3.3: no part files: audit.table.invalid."""
    with pytest.raises(QFormatsError) as err:
        summarize(tmp_path)
    assert str(err.value) == (f"{tmp_path}: 'DIR' must be a directory holding audit part files (part-*.parquet) "
                              "(got none) [audit.table.invalid, AUDIT-3.3]")


def test_summarize_a_foreign_parquet_file_is_could_not_run(tmp_path):
    """AUDIT-3.3: a part-*.parquet file with other columns is not an audit table."""
    pq.write_table(pa.table({"a": [1]}), tmp_path / "part-x.parquet")
    with pytest.raises(QFormatsError) as err:
        summarize(tmp_path)
    assert str(err.value) == (f"{tmp_path / 'part-x.parquet'}: 'part-x.parquet' must be a part file of the audit "
                              "table's columns (got a) [audit.table.invalid, AUDIT-3.3]")


# -- AUDIT-3.3: a part file is one unit's row as write_part writes it (the fuzz flipped bytes of one) ------------

@pytest.fixture
def one_part(tmp_path) -> tuple[Path, pa.Table]:
    out = tmp_path / "one"
    audit(fixture_units()[:1], out)
    (part,) = out.glob("part-*.parquet")
    return part, pq.read_table(part)


def _refusal(part: Path, constraint: str, actual: str) -> str:
    return f"{part}: '{part.name}' must be {constraint} (got {actual}) [audit.table.invalid, AUDIT-3.3]"


def _summarize_error(out: Path) -> str:
    with pytest.raises(QFormatsError) as err:
        summarize(out)
    return str(err.value)


def _with(table: pa.Table, column: str, value: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(column), table.schema.field(column), value)


def test_a_part_whose_string_is_not_utf8_is_not_a_table(one_part):
    """A byte flipped inside a string column: Arrow's full validation names it, not a UnicodeDecodeError."""
    part, table = one_part
    bad = pa.array([b"gptq\xd7"], pa.binary()).view(pa.string())      # bytes as a string, unchecked
    pq.write_table(_with(table, "format", bad), part)
    with pytest.raises(QFormatsError) as err:
        summarize(part.parent)
    e = err.value
    assert (e.code, e.tensor, e.constraint, e.file) == ("audit.table.invalid", part.name,
                                                        "valid Arrow data (strings in UTF-8)", str(part))
    assert e.actual.startswith("ArrowInvalid: ") and "Invalid UTF8" in e.actual     # pyarrow's own words follow


def test_a_part_of_two_rows_is_not_a_table(one_part):
    part, table = one_part
    pq.write_table(pa.concat_tables([table, table]), part)
    assert _summarize_error(part.parent) == _refusal(part, "one row: one unit per part file", "2")


def test_a_part_without_its_verdict_is_not_a_table(one_part):
    part, table = one_part
    pq.write_table(_with(_with(table, "verdict", pa.nulls(1, pa.string())), "seconds", pa.nulls(1, pa.float64())), part)
    assert _summarize_error(part.parent) == _refusal(
        part, "a row with its key fields, verdict, codes and seconds set", "null verdict, seconds")


def test_a_part_with_an_unknown_verdict_is_not_a_table(one_part):
    part, table = one_part
    pq.write_table(_with(table, "verdict", pa.array(["probably fine"])), part)
    assert _summarize_error(part.parent) == _refusal(part, "a verdict of valid, invalid or could-not-run",
                                                     "probably fine")


def test_a_part_under_another_key_s_name_is_not_a_table(one_part):
    """--resume decides by the name alone (AUDIT-3.2): a part file renamed would stand for a unit it is not."""
    part, table = one_part
    moved = part.with_name("part-0123456789abcdef01234567.parquet")
    part.rename(moved)
    assert _summarize_error(part.parent) == _refusal(moved, "the part file its row's key names", table["key"][0].as_py())


def test_a_part_whose_column_name_is_not_utf8_is_named_as_such(one_part):
    """A flipped byte in a column name: pyarrow raises UnicodeDecodeError when it opens the file (the fuzz met it,
    then raised later, inside the foreign-columns refusal); the refusal says what the names are instead."""
    part, table = one_part
    pq.write_table(table, part, store_schema=False)          # names from the Parquet schema alone (no Arrow copy)
    blob = part.read_bytes()
    at = blob.index(b"finding_codes")                        # the footer's schema element (its column chunk follows)
    part.write_bytes(blob[:at] + b"\xaa" + blob[at + 1:])
    assert _summarize_error(part.parent) == _refusal(part, "a part file of the audit table's columns",
                                                     "columns whose names are not UTF-8")
