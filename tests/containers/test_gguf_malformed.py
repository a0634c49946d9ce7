"""GGUF negative and positive fixtures: each file is rejected with its exact code, or read cleanly.

The files in fixtures/containers/gguf/ are hand-built by gguf_builder.py, one defect each (the
malformed-input classes of notes q4_k.md §5.4); the builder must regenerate them byte for byte.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

import gguf_builder as gb
from qformats.containers.gguf import read_gguf
from qformats.errors import CODES, QFormatsError
from qformats.formats.q4_k import check_blocks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GGUF_DIR = FIXTURES / gb.FIXTURE_DIR

CASE_PARAMS = [pytest.param(name, code, clause, id=name) for name, (_fn, code, clause) in gb.CASES.items()]


def _q4k_blocks_of(path: Path) -> None:
    """Read a container-valid file and run the q4_K block rule on each Q4_K tensor, as the validator does."""
    with read_gguf(path) as f:
        for info in f.tensors:
            if info.type_name == "Q4_K":
                check_blocks(f.tensor_rows(info.name), tensor=info.name, n=info.dims[0])


CONTAINER_PARAMS = [p for p in CASE_PARAMS if not (p.values[1] or "").startswith("q4k.")]
PAYLOAD_PARAMS = [p for p in CASE_PARAMS if (p.values[1] or "").startswith("q4k.")]


@pytest.mark.parametrize(("name", "code", "clause"), CONTAINER_PARAMS)
def test_fixture_verdict(name, code, clause):
    """Each fixture file gets exactly its expected verdict: the code and clause of its one defect, or valid."""
    path = GGUF_DIR / f"{name}.gguf"
    tracemalloc.start()
    try:
        if code is None:
            with read_gguf(path) as f:
                assert f.header.file_size == path.stat().st_size
        else:
            with pytest.raises(QFormatsError) as exc:
                read_gguf(path)
            assert (exc.value.code, exc.value.clause, exc.value.file) == (code, clause, str(path))
            assert exc.value.tensor and exc.value.constraint
        # GGUF-6.2, O(file size): every fixture is a few hundred bytes, whatever sizes it claims.
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize(("name", "code", "clause"), PAYLOAD_PARAMS)
def test_payload_fixture_is_a_valid_container_with_invalid_blocks(name, code, clause):
    """Q4K-5.4: "d and dmin MUST be finite" -- the reader accepts the file; check_blocks on its rows rejects it."""
    path = GGUF_DIR / f"{name}.gguf"
    read_gguf(path).close()
    with pytest.raises(QFormatsError) as exc:
        _q4k_blocks_of(path)
    assert (exc.value.code, exc.value.clause, exc.value.tensor) == (code, clause, "b.weight")


@pytest.mark.parametrize(("name", "code", "clause"), CASE_PARAMS)
def test_fixture_regenerates_byte_identically(name, code, clause):
    """fixtures-check: the builder reproduces every committed fixture byte for byte."""
    assert (GGUF_DIR / f"{name}.gguf").read_bytes() == gb.CASES[name][0]()


def test_no_stray_fixture_files():
    """Every file in fixtures/containers/gguf is a builder case (and vice versa)."""
    on_disk = {p.name for p in GGUF_DIR.iterdir()}
    assert on_disk == set(gb.fixture_files())


def test_manifest_fragment_matches_files():
    """fixtures/manifest.json holds exactly the builder's cases (hashes: tests/test_manifest.py)."""
    cases = {c["id"]: c for c in json.loads((FIXTURES / "manifest.json").read_text())["cases"]}
    built = gb.manifest_entries()
    assert [cases.get(entry["id"]) for entry in built] == built


def test_expected_codes_cover_every_gguf_code():
    """Every gguf.* code has at least one negative fixture."""
    used = {code for _fn, code, _clause in gb.CASES.values() if code}
    assert {c for c in CODES if c.startswith("gguf.")} <= used


def test_byteswapped_version_names_its_own_clause():
    """GGUF-1.3: "ggml takes a version whose low 16 bits are zero ... as a byte-swapped file and refuses it"."""
    with pytest.raises(QFormatsError) as exc:
        read_gguf(GGUF_DIR / "version_byteswapped.gguf")
    assert (exc.value.code, exc.value.clause) == ("gguf.version", "GGUF-1.3")
    assert "byte-swapped" in exc.value.message
