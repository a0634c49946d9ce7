"""GGUF negative and positive fixtures: each file is rejected with its exact code, or read cleanly.

The files in fixtures/containers/gguf/ are hand-built by gguf_builder.py, one defect each (the
malformed-input classes of notes q4_k.md §5.4); the builder must regenerate them byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import time
import tracemalloc
from pathlib import Path

import pytest

import gguf_builder as gb
from qformats.containers.gguf import read_gguf
from qformats.errors import CODES, QFormatsError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GGUF_DIR = FIXTURES / gb.FIXTURE_DIR

CASE_PARAMS = [pytest.param(name, code, clause, id=name) for name, (_fn, code, clause) in gb.CASES.items()]


@pytest.mark.parametrize(("name", "code", "clause"), CASE_PARAMS)
def test_fixture_verdict(name, code, clause):
    """Each fixture file gets exactly its expected verdict: the code of its one defect, or valid."""
    path = GGUF_DIR / f"{name}.gguf"
    t0 = time.perf_counter()
    tracemalloc.start()
    if code is None:
        with read_gguf(path) as f:
            assert f.header.file_size == path.stat().st_size
    else:
        with pytest.raises(QFormatsError) as exc:
            read_gguf(path)
        assert exc.value.code == code
        assert exc.value.file == str(path)
        assert exc.value.tensor and exc.value.constraint
        assert code in CODES and clause.startswith("GGUF-")
    # GGUF-6.2, O(file size): every fixture is a few hundred bytes, whatever sizes it claims.
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert time.perf_counter() - t0 < 1.0
    assert peak < 1 << 20


@pytest.mark.parametrize(("name", "code", "clause"), CASE_PARAMS)
def test_fixture_regenerates_byte_identically(name, code, clause):
    """fixtures-check: the builder reproduces every committed fixture byte for byte."""
    assert (GGUF_DIR / f"{name}.gguf").read_bytes() == gb.CASES[name][0]()


def test_no_stray_fixture_files():
    """Every file in fixtures/containers/gguf is a builder case (and vice versa)."""
    on_disk = {p.name for p in GGUF_DIR.iterdir()}
    assert on_disk == set(gb.fixture_files())


def test_manifest_fragment_matches_files():
    """fixtures/manifest.json holds exactly the builder's cases, with the sha256 of each committed file."""
    cases = {c["id"]: c for c in json.loads((FIXTURES / "manifest.json").read_text())["cases"]}
    built = gb.manifest_entries()
    assert [cases.get(entry["id"]) for entry in built] == built
    for entry in built:
        (f,) = entry["files"]
        assert hashlib.sha256((FIXTURES / f["path"]).read_bytes()).hexdigest() == f["sha256"]
        assert set(entry["expect"]["codes"]) <= set(CODES)


def test_expected_codes_cover_every_gguf_code():
    """Every gguf.* code has at least one negative fixture."""
    used = {code for _fn, code, _clause in gb.CASES.values() if code}
    assert {c for c in CODES if c.startswith("gguf.")} <= used


def test_clause_of_error_matches_fixture_clause():
    """GGUF-1.5 / GGUF-5.1: truncation found by a count or data-start check names that clause."""
    with pytest.raises(QFormatsError) as exc:
        read_gguf(GGUF_DIR / "kv_count_beyond_file.gguf")
    assert exc.value.clause == "GGUF-1.5"
    with pytest.raises(QFormatsError) as exc:
        read_gguf(GGUF_DIR / "cut_in_padding.gguf")
    assert exc.value.clause == "GGUF-5.1"
