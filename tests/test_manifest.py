"""fixtures/manifest.json: every fixture listed, hashed and attributed (DESIGN.md §5)."""

import re

from qformats import fixtures
from qformats.errors import CODES


def test_every_fixture_file_is_listed_with_its_hash():
    """"A test fails on any fixture file without a manifest entry" -- and on any stale hash."""
    assert fixtures.manifest_problems() == []


def test_every_case_names_known_clauses_and_codes():
    """Each case cites the clauses it exercises; negative cases expect registered codes."""
    clause = re.compile(r"(QF|GPTQ|Q4K|SPQR|GGUF|ST|CKPT)-\d+(\.\d+)*")
    for case in fixtures.load_manifest().cases:
        assert case.clauses and all(clause.fullmatch(c) for c in case.clauses), case.id
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
