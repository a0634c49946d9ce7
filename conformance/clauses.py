"""The spec's clause list, parsed from spec/*.md: which clauses exist, where, and which are normative.

A clause is defined by a heading that starts with its ID (``### GPTQ-3.4 ...``) or by a paragraph or
list item that starts with the bold ID (``**Q4K-2.1** ...``), outside fenced code (spec/README.md,
"Clause IDs and error codes"). A clause is *informative* when its heading, or the heading of a
section that holds it, says so (``## GPTQ-4 Real writers and readers (informative)``); every other
clause is normative. tests/test_spec_docs.py checks the spec with the same parser; the results page
uses it to list the normative clauses that no case exercises.

The spec ships with the source tree, not the wheel: :func:`spec_clauses` returns ``[]`` when there
is no ``spec/`` beside the package, and the page then says the list is unavailable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["CHAPTER_OF_PREFIX", "CLAUSE_ID", "DEFINITION", "SPEC", "Clause", "definitions", "without_fences",
           "spec_clauses", "covering"]

SPEC = Path(__file__).resolve().parents[1] / "spec"

# Clause prefix -> the chapter that defines it (spec/README.md, chapter table).
CHAPTER_OF_PREFIX = {
    "QF": "README.md",
    "GPTQ": "gptq.md",
    "SPQR": "spqr.md",
    "Q4K": "q4_k.md",
    "GGUF": "containers.md",
    "ST": "checkpoints.md",
    "CKPT": "checkpoints.md",
    "INSPECT": "checkpoints.md",
    "GGML": "ggml.md",
    "LEG": "ggml_legacy.md",
    "KQ": "ggml_kquants.md",
    "IQ": "ggml_iquants.md",
    "TQ": "ggml_ternary_fp4.md",
    "MX": "ggml_ternary_fp4.md",
    "AWQ": "awq.md",
    "FP8": "fp8.md",
    "CT": "compressed_tensors.md",
    "KC": "kernels.md",
    "FE": "float_elements.md",
    "FP4": "fp4.md",
    "BNB": "bnb.md",
    "AUDIT": "audit.md",
    "REMOTE": "remote.md",
}
CLAUSE_ID = rf"(?:{'|'.join(CHAPTER_OF_PREFIX)})-\d+(?:\.\d+)?"
DEFINITION = re.compile(rf"^(?:#{{1,6}}\s+|\s*(?:[-*]\s+)?\*\*)({CLAUSE_ID})\b", re.MULTILINE)
# the same, keeping the heading depth (None for a bold definition) and the rest of the line
_DEFINITION_LINE = re.compile(rf"^(?:(#{{1,6}})\s+|\s*(?:[-*]\s+)?\*\*)({CLAUSE_ID})\b(?:\*\*)?[.:]?\s*(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_INFORMATIVE = re.compile(r"\binformative\b", re.IGNORECASE)


def without_fences(text: str) -> str:
    """Drop fenced code blocks: diagrams may contain backticks and '#' lines that are not markdown."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def definitions(text: str) -> list[str]:
    """The clause IDs a chapter's text defines, in order."""
    return DEFINITION.findall(without_fences(text))


@dataclass(frozen=True)
class Clause:
    id: str
    chapter: str          # file name under spec/
    title: str            # the heading text after the ID, or the start of the bold paragraph
    normative: bool


def _title(rest: str) -> str:
    rest = re.sub(r"[*`]", "", rest).strip()
    return rest if len(rest) <= 90 else rest[:87].rstrip() + "..."


def _chapter_clauses(name: str, text: str) -> list[Clause]:
    """Walk the headings, remembering which enclosing ones are marked informative."""
    out: list[Clause] = []
    informative_at: dict[int, bool] = {}       # heading depth -> that heading says "informative"
    for line in without_fences(text).splitlines():
        heading = _HEADING.match(line)
        if heading:
            depth = len(heading.group(1))
            informative_at = {d: v for d, v in informative_at.items() if d < depth}
            informative_at[depth] = bool(_INFORMATIVE.search(heading.group(2)))
        found = _DEFINITION_LINE.match(line)
        if found:
            inherited = any(informative_at.values())
            own = found.group(1) is None and bool(_INFORMATIVE.search(found.group(3)[:80]))
            out.append(Clause(found.group(2), name, _title(found.group(3)), not (inherited or own)))
    return out


def spec_clauses(spec: Path | None = None) -> list[Clause]:
    """Every clause the chapters under ``spec`` (default: this checkout's spec/) define, chapter by chapter."""
    root = SPEC if spec is None else Path(spec)
    if not root.is_dir():
        return []
    chapters = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(root.glob("*.md")))
    return list(_parsed(root, chapters))


@lru_cache(maxsize=4)
def _parsed(root: Path, chapters: tuple[tuple[str, int], ...]) -> tuple[Clause, ...]:
    """The clauses of ``chapters`` (name, mtime: an edited chapter is parsed again)."""
    out: list[Clause] = []
    for name, _ in chapters:
        out += _chapter_clauses(name, (root / name).read_text(encoding="utf-8"))
    return tuple(out)


def _key(clause: str) -> tuple:
    prefix, _, number = clause.partition("-")
    order = list(CHAPTER_OF_PREFIX).index(prefix) if prefix in CHAPTER_OF_PREFIX else len(CHAPTER_OF_PREFIX)
    return (order, prefix, *(int(p) for p in number.split(".") if p.isdigit()))


def covering(clause: str, cited: set[str]) -> str:
    """How the cases exercise ``clause``: ``direct`` (a case cites it), ``section`` (a case cites a section
    that holds it, ``KQ-6`` for ``KQ-6.2``; or one of its own sub-clauses, for a section), or ``none``."""
    if clause in cited:
        return "direct"
    prefix, _, number = clause.partition("-")
    parts = number.split(".")
    ancestors = {f"{prefix}-{'.'.join(parts[:i])}" for i in range(1, len(parts))}
    if ancestors & cited or any(c.startswith(clause + ".") for c in cited):
        return "section"
    return "none"


def sort_key(clause: str) -> tuple:
    """Clause IDs in spec order within a prefix: GPTQ-2.10 after GPTQ-2.9."""
    return _key(clause)
