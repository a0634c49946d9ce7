"""spec/README.md "Clause IDs and error codes": the spec and qformats/errors.py name the same codes.

Chapters are written independently; a code whose chapter does not exist yet is skipped with a
reason rather than passed, so the gap stays visible in ``pytest -ra``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from conformance.clauses import CHAPTER_OF_PREFIX, definitions, without_fences
from qformats.errors import CODES

SPEC = Path(__file__).resolve().parents[1] / "spec"

CODE_PATTERN = re.compile(r"^(tensor|argument|bits|gptq|q4k|spqr|gguf|ggml|st|ckpt|safetensors|checkpoint|awq|ctensors|fp4|bnb|kernel|audit|remote)\.[a-z0-9_.]+$")
# File names (`gguf.cpp`, `gptq.md`) share the shape; no code ends in a source or document extension.
FILE_NAME = re.compile(r"\.(md|py|pyi|c|cc|cpp|h|hpp|cu|cuh|rs|json|jsonc|txt|toml|yaml|yml|safetensors|gguf)$")
BACKTICKED = re.compile(r"`([^`\n]+)`")
# The clause parser (prefixes, IDs, definitions) is the package's: the results page lists the clauses
# no case exercises with it. A new chapter's prefix goes into conformance/clauses.py CHAPTER_OF_PREFIX.
_without_fences = without_fences
_definitions = definitions


def _chapters() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(SPEC.glob("*.md"))}


def _looks_like_code(token: str) -> bool:
    return bool(CODE_PATTERN.match(token)) and not FILE_NAME.search(token)


def _expected_chapter(clause: str) -> str:
    return CHAPTER_OF_PREFIX[clause.split("-", 1)[0]]


def test_spec_index_exists():
    """spec/README.md is the index: it exists and links every chapter of its chapter table."""
    index = (SPEC / "README.md").read_text(encoding="utf-8")
    for chapter in sorted(set(CHAPTER_OF_PREFIX.values()) - {"README.md"}):
        assert f"]({chapter})" in index, chapter


@pytest.mark.parametrize(("code", "clause"), [pytest.param(c, v[0], id=c) for c, v in sorted(CODES.items())])
def test_registered_code_is_listed_beside_its_clause(code, clause):
    """Every code in CODES appears in backticks in a spec chapter that also names its clause."""
    chapters = _chapters()
    expected = _expected_chapter(clause)
    holders = [name for name, text in chapters.items() if f"`{code}`" in text]
    if not holders and expected not in chapters:
        pytest.skip(f"chapter spec/{expected} for {clause} is not written yet")
    assert holders, f"`{code}` ({clause}) is listed in no spec chapter"
    assert any(re.search(rf"\b{re.escape(clause)}\b", chapters[name]) for name in holders), (
        f"`{code}` is listed in {holders}, none of which names its clause {clause}")


@pytest.mark.parametrize(("code", "clause"), [pytest.param(c, v[0], id=c) for c, v in sorted(CODES.items())])
def test_registered_clause_is_defined(code, clause):
    """The clause a code enforces is defined (as a heading) in the chapter of its prefix."""
    chapters = _chapters()
    expected = _expected_chapter(clause)
    if expected not in chapters:
        pytest.skip(f"chapter spec/{expected} for {clause} is not written yet")
    assert clause in _definitions(chapters[expected]), f"{clause} (for `{code}`) is not defined in spec/{expected}"


@pytest.mark.parametrize("chapter", [pytest.param(p.name, id=p.name) for p in sorted(SPEC.glob("*.md"))])
def test_every_code_named_in_a_chapter_is_registered(chapter):
    """Every backticked token shaped like an error code in a chapter is a registered code."""
    text = (SPEC / chapter).read_text(encoding="utf-8")
    named = {tok for tok in BACKTICKED.findall(_without_fences(text)) if _looks_like_code(tok)}
    unregistered = sorted(named - set(CODES))
    assert not unregistered, f"spec/{chapter} names unregistered codes: {unregistered}"


def test_clause_ids_defined_once():
    """Each clause ID is defined exactly once across all chapters."""
    where: dict[str, list[str]] = defaultdict(list)
    for name, text in _chapters().items():
        for clause in _definitions(text):
            where[clause].append(name)
    duplicated = {c: files for c, files in where.items() if len(files) > 1}
    assert not duplicated, f"clause IDs defined more than once: {duplicated}"


@pytest.mark.parametrize("chapter", [pytest.param(p.name, id=p.name) for p in sorted(SPEC.glob("*.md"))])
def test_chapter_defines_only_its_own_prefixes(chapter):
    """A chapter defines clauses of its own prefixes only (QF- in README.md, GPTQ- in gptq.md, ...)."""
    own = {prefix for prefix, name in CHAPTER_OF_PREFIX.items() if name == chapter}
    if not own:
        pytest.skip(f"spec/{chapter} is not a clause-bearing chapter")
    foreign = [c for c in _definitions((SPEC / chapter).read_text(encoding="utf-8")) if c.split("-")[0] not in own]
    assert not foreign, f"spec/{chapter} defines clauses of other chapters: {foreign}"


def test_detector_sees_definitions_and_codes():
    """The checks above are not vacuous: they find this file's own fixtures of both kinds."""
    sample = "## GPTQ-5 g_idx\n### GPTQ-5.1 Range\n**Q4K-2.1** Blocks\n- **ST-1.2** Header\n```\n# QF-9.9 not a heading\n```\nSee GPTQ-5.1 and `gptq.g_idx.range`, `gptq.pack`, `tensor.not_a_code`, `gguf.cpp`, `gptq.md`."
    assert _definitions(sample) == ["GPTQ-5", "GPTQ-5.1", "Q4K-2.1", "ST-1.2"]
    tokens = [t for t in BACKTICKED.findall(sample) if _looks_like_code(t)]
    assert tokens == ["gptq.g_idx.range", "gptq.pack", "tensor.not_a_code"]
    assert "gptq.g_idx.range" in CODES and "tensor.not_a_code" not in CODES
