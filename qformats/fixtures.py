"""The fixture manifest (DESIGN.md §5): one entry per case, every fixture file hashed.

    python -m qformats.fixtures [ROOT]            every file listed, every hash right
    python -m qformats.fixtures generate [ROOT]   pin the generated conformance cases

Conformance cases made by the reference encoders are not stored: their entries carry
``provenance.stored = false`` and the sha256 of the case's canonical bytes
(:func:`qformats.cases.case_digest`), and the check regenerates each one and compares. ``generate``
rewrites those entries and the runner's copy of the digests (``conformance/data/digests.json``,
which the wheel ships in place of the cases).

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
           "write_generated", "file_entry", "reference_case", "DEFAULT_ROOT"]

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
    format: Literal["gptq", "spqr", "q4_k", "ggml", "awq", "ctensors", "fp8", "fp8_deepseek", "fp4",
                    "gpt_oss_mxfp4", "modelopt_fp4", "bnb", "bnb_int8", "gguf", "safetensors"]
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
        if path.is_file() and rel != "manifest.json" and not path.name.endswith(UNLISTED_SUFFIXES):
            out.add(rel)
    return out


def manifest_problems(root: Path = DEFAULT_ROOT) -> list[str]:
    """Every way the manifest and the files on disk disagree; empty when they agree."""
    manifest = load_manifest(root)
    problems: list[str] = []
    listed: dict[str, str] = {}
    ids = [case.id for case in manifest.cases]
    problems += [f"duplicate case id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    problems += generated_problems(manifest)
    for case in manifest.cases:
        if case.provenance.get("stored") is False:
            continue
        for f in case.files:
            listed.setdefault(f.path, f.sha256)
            path = root / f.path
            if not path.is_file():
                problems.append(f"{case.id}: listed file {f.path} does not exist")
            elif (actual := sha256_of(path)) != f.sha256:
                problems.append(f"{case.id}: {f.path} has sha256 {actual}, manifest says {f.sha256}")
    for rel in sorted(fixture_files(root) - set(listed)):
        problems.append(f"{rel} has no manifest entry")
    return problems


def file_entry(root: Path, rel: str) -> dict[str, str]:
    """A manifest ``files`` item for the fixture at ``root / rel``."""
    return {"path": rel, "sha256": sha256_of(root / rel)}


def reference_case(case_id: str, fmt: str, kind: str, *, clauses: list[str], features: list[str],
                   files: dict[str, bytes], generator: str, codes: list[str], valid: bool) -> dict[str, Any]:
    """A manifest case for fixtures made by a qformats generator, hashed from the bytes it wrote.

    ``files`` maps paths relative to fixtures/ to their bytes; ``codes`` are the expected error
    codes (invalid) or warning codes (valid).
    """
    return {
        "id": case_id, "format": fmt, "kind": kind, "clauses": list(clauses), "features": list(features),
        "files": [{"path": rel, "sha256": hashlib.sha256(blob).hexdigest()} for rel, blob in sorted(files.items())],
        "provenance": {"source": "qformats-reference", "generator": generator, "version": "0.1.0"},
        "expect": {"verdict": "valid" if valid else "invalid", "codes": list(codes)},
        "tolerance": "exact",
    }


def write_generated(root: Path, files: dict[str, bytes], entries: list[dict[str, Any]]) -> None:
    """Write a generator's fixtures under ``root`` and put its cases into ``root/manifest.json``.

    Every generator (``qformats.samples``, the container builders in ``tests/``) ends here, so
    the manifest is updated by replacing cases with the same id, never by hand.
    """
    for rel, blob in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    path = root / "manifest.json"
    cases = {c["id"]: c for c in json.loads(path.read_text())["cases"]} if path.exists() else {}
    for entry in entries:
        cases[FixtureEntry.model_validate(entry).id] = entry
    doc = {"schema": "qformats-fixtures/1", "cases": [cases[k] for k in sorted(cases)]}
    path.write_text(json.dumps(doc, indent=1) + "\n")


GENERATED_VERSION = "0.1.0"
DIGESTS = Path(__file__).resolve().parents[1] / "conformance" / "data" / "digests.json"


def generated_entries() -> list[dict[str, Any]]:
    """A manifest entry for every reference-made conformance case of every registered format."""
    from .cases import case_digest
    from .formats.registry import FACES

    entries = []
    for face in FACES.values():
        for case in face.cases():
            entries.append({
                "id": case.id, "format": face.name, "kind": "layer", "clauses": list(case.clauses),
                "features": list(case.features),
                "files": [{"path": f"generated/{case.id}.case", "sha256": case_digest(case)}],
                "provenance": {"source": "qformats-reference", "generator": f"qformats.formats.{face.name}.cases",
                               "version": GENERATED_VERSION, "stored": False},
                "expect": {"ops": list(case.ops), "expect": case.expect,
                           "values": f"the reference ({face.reference_dtype}) at run time"},
                "tolerance": "exact (dequantize), QF-4.6 bound (matmul)",
                **({"description": case.description} if case.description else {}),
            })
    return entries


def generated_problems(manifest: Manifest) -> list[str]:
    """Generated cases whose regenerated bytes do not hash to the manifest's sha256, or are missing."""
    pinned = {c.id: c.files[0].sha256 for c in manifest.cases if c.provenance.get("stored") is False}
    made = {e["id"]: e["files"][0]["sha256"] for e in generated_entries()}
    problems = [f"{i}: regenerated to sha256 {made[i]}, manifest says {pinned[i]}"
                for i in sorted(set(made) & set(pinned)) if made[i] != pinned[i]]
    problems += [f"{i}: generated but not in the manifest (run: python -m qformats.fixtures generate)"
                 for i in sorted(set(made) - set(pinned))]
    problems += [f"{i}: in the manifest but no longer generated" for i in sorted(set(pinned) - set(made))]
    if DIGESTS.is_file() and json.loads(DIGESTS.read_text()).get("cases") != pinned:
        problems.append(f"{DIGESTS.name} differs from the manifest's generated cases")
    return problems


def generate(root: Path = DEFAULT_ROOT) -> int:
    """Pin every generated case in ``root/manifest.json`` (old generated entries replaced) and in the
    runner's digest file; returns the number of cases."""
    path = root / "manifest.json"
    entries = generated_entries()
    cases = {c["id"]: c for c in json.loads(path.read_text())["cases"]
             if c.get("provenance", {}).get("stored") is not False} if path.exists() else {}
    for entry in entries:
        cases[FixtureEntry.model_validate(entry).id] = entry
    path.write_text(json.dumps({"schema": "qformats-fixtures/1", "cases": [cases[k] for k in sorted(cases)]},
                               indent=1) + "\n")
    DIGESTS.parent.mkdir(parents=True, exist_ok=True)
    DIGESTS.write_text(json.dumps({"schema": "qformats-case-digests/1",
                                   "cases": {e["id"]: e["files"][0]["sha256"] for e in entries}}, indent=0) + "\n")
    return len(entries)


def generator_main(argv: list[str], fixture_dir: str, files: dict[str, bytes], entries: list[dict[str, Any]]) -> int:
    """A fixture builder's command line: ``python BUILDER.py [ROOT]`` writes ``files`` (paths relative
    to ``ROOT/fixture_dir``) and their cases into ``ROOT/manifest.json`` (ROOT defaults to ``fixtures``)."""
    root = Path(argv[1] if len(argv) > 1 else "fixtures")
    write_generated(root, {f"{fixture_dir}/{rel}": blob for rel, blob in files.items()}, entries)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["generate"]:
        count = generate(Path(argv[1]) if len(argv) > 1 else DEFAULT_ROOT)
        print(f"{count} generated cases pinned")
        return 0
    root = Path(argv[0]) if argv else DEFAULT_ROOT
    problems = manifest_problems(root)
    for p in problems:
        print(p)
    print(f"{len(load_manifest(root).cases)} cases, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
