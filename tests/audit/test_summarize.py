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
