"""fixtures/manifest.json: every fixture listed, hashed and attributed (DESIGN.md §5)."""

import re
from pathlib import Path

from qformats import fixtures
from qformats.errors import CODES

SPEC = Path(__file__).resolve().parents[1] / "spec"
# a clause is defined by a heading that starts with its ID, or a bold ID opening a paragraph (spec/README.md)
DEFINITION = re.compile(r"^(?:#{1,6}\s+|\s*(?:[-*]\s+)?\*\*)([A-Z][A-Z0-9]*-\d+(?:\.\d+)?)\b", re.MULTILINE)


def _defined_clauses() -> set[str]:
    return {c for p in SPEC.glob("*.md") for c in DEFINITION.findall(p.read_text(encoding="utf-8"))}


def test_every_fixture_file_is_listed_with_its_hash():
    """"A test fails on any fixture file without a manifest entry" -- and on any stale hash."""
    assert fixtures.manifest_problems() == []


def test_every_case_names_known_clauses_and_codes():
    """Each case cites the clauses it exercises, each defined in a spec chapter; negative cases expect
    registered codes."""
    defined = _defined_clauses()
    for case in fixtures.load_manifest().cases:
        assert case.clauses and set(case.clauses) <= defined, (case.id, sorted(set(case.clauses) - defined))
        for code in case.expect.get("codes", []):
            assert code in CODES, (case.id, code)


def test_every_case_has_provenance():
    """Provenance is a real upstream tool (with version) or the qformats reference generator."""
    for case in fixtures.load_manifest().cases:
        source = case.provenance.get("source")
        assert source in ("third-party", "qformats-reference"), case.id
        if source == "third-party":
            assert case.provenance.get("tool") and case.provenance.get("version"), case.id
        else:
            assert case.provenance.get("generator"), case.id
