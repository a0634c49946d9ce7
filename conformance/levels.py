"""The conformance level a run reached (spec/kernels.md KC-4), from its case results.

Readers: ``none`` < ``numeric`` (values right with +0 == -0 declared, KC-4.3) < ``decoder`` (KC-4.1) <
``validating`` (KC-4.2). The report also names, per feature with named readings, the reading the subject
follows (``reject`` when it rejected every such input), and lists the MUST-reject clauses it did not
enforce: a decoder-level pass says nothing about validation. Writers: ``none`` < ``conforming`` <
``reference-equivalent`` (the reference packer's or encoder's bytes on every case).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from qformats.cases import READ_OPS

__all__ = ["level_report", "LEVELS"]

LEVELS = ("none", "numeric", "decoder", "validating")
BREAKING = ("fail", "error")


def _reading_of(results: list) -> str:
    """The one named reading that explains every answer of a feature's cases (KC-4.5)."""
    if any(not r.readings for r in results):                        # some answer matched no named reading
        misread = Counter(r.misreading for r in results if getattr(r, "misreading", None))
        return "none of the named readings" + "".join(f"; {sentence} on {n} of {len(results)}"
                                                      for sentence, n in misread.items())
    rejected = sum(r.readings == ("reject",) for r in results)
    decoded = [set(r.readings) for r in results if r.readings != ("reject",)]
    if not decoded:
        return "reject"
    order = list(dict.fromkeys(name for r in results for name in r.readings if name != "reject"))
    common = [name for name in order if all(name in s for s in decoded)]
    if not common:
        counts = Counter(name for s in decoded for name in s)
        return "mixed: " + ", ".join(f"{name} on {n}" for name, n in counts.items())
    return common[0] + (f" (rejected {rejected} of {len(results)})" if rejected else "")


def _writer_level(cases: list, claims: str) -> dict[str, Any]:
    judged = [c for c in cases if c.status not in ("not-applicable",)]
    if any(c.status in BREAKING for c in judged):
        reached = "none"
    elif judged and all(c.status == "pass" and "identical" in c.detail for c in judged if c.status != "expected-failure"):
        reached = "reference-equivalent"
    else:
        reached = "conforming"
    return {"claimed": claims, "reached": reached, "readings": {}, "unenforced": [], "zeros": "signed"}


def level_report(cases: list, declaration: Any, op: str) -> dict[str, Any]:
    """``{"claimed", "reached", "readings": {feature: reading}, "unenforced": [clause ids], "zeros",
    "validation_cases"}`` of a run's case results (runner.CaseResult) under its declaration."""
    if op not in READ_OPS:
        return _writer_level(cases, declaration.claims)
    judged = [c for c in cases if c.status != "not-applicable" or c.validation is not None]
    broken = any((c.decoder_status or c.status) in BREAKING and c.status != "expected-failure" for c in judged)
    validation = [c for c in judged if c.validation is not None]
    unenforced = sorted({c.validation for c in validation if not c.rejected},
                        key=lambda clause: [int(p) if p.isdigit() else p for p in clause.replace("-", ".").split(".")])
    if broken:
        reached = "none"
    elif declaration.zeros == "numeric":
        reached = "numeric"
    elif unenforced or not validation:
        reached = "decoder"
    else:
        reached = "validating"
    features: dict[str, list] = {}
    for c in judged:
        if c.feature is not None:
            features.setdefault(c.feature, []).append(c)
    return {"claimed": declaration.claimed_level, "reached": reached,
            "readings": {name: _reading_of(rs) for name, rs in sorted(features.items())},
            "unenforced": unenforced, "zeros": declaration.zeros, "validation_cases": len(validation)}
