"""Where the cases come from: regenerated reference-made cases, pinned by sha256, and real tools' vectors.

Reference-made cases are not shipped: each format's generator rebuilds them at run time and the
runner runs a case only if its bytes hash to the sha256 pinned in ``data/digests.json`` (written
by ``qformats fixtures generate`` together with fixtures/manifest.json, and checked against it by
``make fixtures-check``). Vectors written by real tools cannot be regenerated, so they ship in
``data/third_party/``, one safetensors file per format with its provenance in the metadata.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from qformats.cases import Case

__all__ = ["DATA", "DIGESTS", "pinned_digests", "third_party_cases", "THIRD_PARTY"]

DATA = Path(__file__).resolve().parent / "data"
DIGESTS = DATA / "digests.json"
THIRD_PARTY = DATA / "third_party"


@lru_cache(maxsize=1)
def pinned_digests() -> dict[str, str]:
    """case id -> sha256 of its canonical bytes, as pinned when the fixtures were generated."""
    try:
        return dict(json.loads(DIGESTS.read_text())["cases"])
    except FileNotFoundError:
        return {}


@lru_cache(maxsize=None)
def _third_party(name: str) -> tuple[Case, ...]:
    path = THIRD_PARTY / f"{name}.safetensors"
    if not path.is_file():
        return ()
    from safetensors.numpy import load

    from qformats.containers.safetensors import read_header_bytes

    blob = path.read_bytes()
    header = read_header_bytes(blob, name=str(path))          # our hardened reader checks it first
    arrays = load(blob)
    out = []
    for c in json.loads((header.metadata or {}).get("cases", "[]")):
        out.append(Case(id=c["id"], format=c["format"], ops=tuple(c["ops"]),
                        inputs={k: arrays[v] for k, v in c["inputs"].items()},
                        aux={k: arrays[v] for k, v in c["aux"].items()}, params=c["params"],
                        clauses=tuple(c["clauses"]), features=tuple(c["features"]), expect=c["expect"],
                        provenance=c["provenance"], description=c.get("description", "")))
    return tuple(out)


def third_party_cases(name: str) -> list[Case]:
    """The shipped real-tool cases of format ``name`` (gptq, q4_k, spqr)."""
    return list(_third_party(name))
