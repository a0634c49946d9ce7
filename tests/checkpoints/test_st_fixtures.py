"""Safetensors and sharded-checkpoint fixtures: each gets exactly its verdict, code and warnings.

The files in fixtures/containers/safetensors/ are hand-built by st_builder.py, one defect each;
the builder must regenerate them byte for byte and the manifest fragment must list them.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

import st_builder as sb
from qformats.containers.checkpoint import COULD_NOT_RUN_CODES, open_checkpoint
from qformats.containers.safetensors import read_header
from qformats.errors import CODES, QFormatsError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ST_DIR = FIXTURES / sb.FIXTURE_DIR

CASE_PARAMS = [pytest.param(name, code, clause, warns, id=name)
               for name, (_fn, code, clause, warns) in sb.CASES.items()]


@pytest.mark.parametrize(("name", "code", "clause", "warns"), CASE_PARAMS)
def test_fixture_verdict(name, code, clause, warns):
    """Each fixture is rejected with the code of its one defect (naming the file), or opens with its warnings."""
    path = ST_DIR / sb.fixture_path(name)
    tracemalloc.start()
    try:
        if code is None:
            with open_checkpoint(path) as ckpt:
                assert ckpt.tensor_names()
                # a lone file's folder here holds no quantization config: CKPT-4.3 says so, besides the ST codes
                expected = sorted(set(warns) | ({"ckpt.config.none"} if path.is_file() else set()))
                assert sorted({f.code for f in ckpt.findings}) == expected
        else:
            with pytest.raises(QFormatsError) as exc:
                open_checkpoint(path)
            assert exc.value.code == code
            assert exc.value.file is not None and exc.value.file.startswith(str(path))
            assert exc.value.constraint and code not in COULD_NOT_RUN_CODES
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # ST-1.2: a claimed 2^64-byte header is refused before any allocation; every case is tiny.
    assert peak < 1 << 20


@pytest.mark.parametrize(("name", "code", "clause", "warns"),
                         [p for p in CASE_PARAMS if not p.values[0].startswith("sharded")])
def test_file_fixture_direct_reader_agrees(name, code, clause, warns):
    """read_header (the ST layer alone) gives the same verdict and code as open_checkpoint for single files."""
    path = ST_DIR / f"{name}.safetensors"
    if code is None:
        assert sorted(f.code for f in read_header(path).findings) == sorted(warns)
    else:
        with pytest.raises(QFormatsError) as exc:
            read_header(path)
        assert (exc.value.code, exc.value.clause, exc.value.file) == (code, clause, str(path))


@pytest.mark.parametrize("rel", sorted(sb.fixture_files()))
def test_fixture_regenerates_byte_identically(rel):
    """fixtures-check: the builder reproduces every committed fixture file byte for byte."""
    assert (ST_DIR / rel).read_bytes() == sb.fixture_files()[rel]


def test_no_stray_fixture_files():
    """Every file under fixtures/containers/safetensors is a builder output (and vice versa)."""
    on_disk = {p.relative_to(ST_DIR).as_posix() for p in ST_DIR.rglob("*") if p.is_file()}
    assert on_disk == set(sb.fixture_files())


def test_manifest_fragment_matches_files():
    """fixtures/manifest.json holds exactly the builder's cases (hashes: tests/test_manifest.py)."""
    cases = {c["id"]: c for c in json.loads((FIXTURES / "manifest.json").read_text())["cases"]}
    built = sb.manifest_entries()
    assert [cases.get(entry["id"]) for entry in built] == built


def test_every_st_error_code_has_a_negative_fixture():
    """Every st.* error code (warnings aside) is the expected code of at least one fixture."""
    used = {code for _fn, code, _clause, _w in sb.CASES.values() if code}
    warned = {w for *_x, warns in sb.CASES.values() for w in warns}
    assert {c for c in CODES if c.startswith("st.")} <= used | warned


def test_fixture_clauses_are_registered_clauses():
    """Each case names the clause its code (or warning) is registered under."""
    for name, (_fn, code, clause, warns) in sb.CASES.items():
        registered = {CODES[c][0] for c in ((code,) if code else warns)}
        assert clause in registered or (code is None and not warns), name
