"""The fixture manifest (DESIGN.md §5): one entry per case, every fixture file hashed.

    python -m qformats.fixtures check [ROOT]     every file listed, every hash right
    python -m qformats.fixtures merge [ROOT]     fold fixtures/manifest.d/*.json into manifest.json

Fixtures live in the source checkout (``fixtures/``), never in the wheel; this module only
reads and checks them, so a third party's CI can point it at its own copy.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FixtureFile", "FixtureEntry", "Manifest", "load_manifest", "sha256_of", "manifest_problems",
           "DEFAULT_ROOT"]

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "fixtures"
# Documentation beside the data is not a fixture itself.
UNLISTED_SUFFIXES = (".md",)


class FixtureFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(description="relative to fixtures/")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class FixtureEntry(BaseModel):
    """One case: what it is, which clauses it exercises, where it came from, what to expect."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    format: str
    kind: Literal["layer", "checkpoint", "container"]
    clauses: tuple[str, ...]
    features: tuple[str, ...] = ()
    files: tuple[FixtureFile, ...]
    provenance: dict[str, Any]
    expect: dict[str, Any]
    tolerance: str | dict[str, Any] = "exact"
    description: str | None = None


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_: Literal["qformats-fixtures/1"] = Field("qformats-fixtures/1", alias="schema")
    cases: tuple[FixtureEntry, ...]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_manifest(root: Path = DEFAULT_ROOT) -> Manifest:
    return Manifest.model_validate(json.loads((root / "manifest.json").read_text()))


def fixture_files(root: Path) -> set[str]:
    out = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith("manifest") and not path.name.endswith(UNLISTED_SUFFIXES):
            out.add(rel)
    return out


def manifest_problems(root: Path = DEFAULT_ROOT) -> list[str]:
    """Every way the manifest and the files on disk disagree; empty when they agree."""
    manifest = load_manifest(root)
    problems: list[str] = []
    listed: dict[str, str] = {}
    ids = [case.id for case in manifest.cases]
    problems += [f"duplicate case id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for case in manifest.cases:
        for f in case.files:
            listed.setdefault(f.path, f.sha256)
            path = root / f.path
            if not path.is_file():
                problems.append(f"{case.id}: listed file {f.path} does not exist")
            elif sha256_of(path) != f.sha256:
                problems.append(f"{case.id}: {f.path} has sha256 {sha256_of(path)}, manifest says {f.sha256}")
    for rel in sorted(fixture_files(root) - set(listed)):
        problems.append(f"{rel} has no manifest entry")
    return problems


def merge_fragments(root: Path = DEFAULT_ROOT) -> int:
    """Fold ``manifest.d/*.json`` (lists of entries) into ``manifest.json``; returns the case count."""
    cases: dict[str, dict[str, Any]] = {}
    if (root / "manifest.json").exists():
        cases = {c["id"]: c for c in json.loads((root / "manifest.json").read_text())["cases"]}
    for fragment in sorted((root / "manifest.d").glob("*.json")):
        for entry in json.loads(fragment.read_text()):
            FixtureEntry.model_validate(entry)
            cases[entry["id"]] = entry
    doc = {"schema": "qformats-fixtures/1", "cases": [cases[k] for k in sorted(cases)]}
    (root / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")
    return len(cases)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    root = Path(argv[1]) if len(argv) > 1 else DEFAULT_ROOT
    if command == "merge":
        print(f"{merge_fragments(root)} cases in {root / 'manifest.json'}")
        return 0
    problems = manifest_problems(root)
    for p in problems:
        print(p)
    print(f"{len(load_manifest(root).cases)} cases, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
