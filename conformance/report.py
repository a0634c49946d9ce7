"""Conformance reports: text for people, JSON per the contract (DESIGN.md §6), JUnit XML for CI."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from .runner import RunResult

__all__ = ["to_text", "to_json", "to_junit"]

SHOWN = ("fail", "error", "warning", "expected-failure")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def to_text(result: RunResult, *, verbose: bool = False, coverage: bool = True) -> str:
    counts = result.counts
    verdict = "CONFORMS" if result.conforms else "DOES NOT CONFORM"
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    lines = [f"{result.subject} as {result.format} {result.op}: {verdict} ({_plural(len(result.cases), 'case')}: "
             f"{summary or 'none'})"]
    for status in SHOWN + (("not-applicable",) if verbose else ()):
        rows = [c for c in result.cases if c.status == status]
        limit = len(rows) if verbose else 10
        for c in rows[:limit]:
            lines.append(f"  {status.upper():16s} {c.id} [{', '.join(c.clauses)}]: {c.detail}")
        if len(rows) > limit:
            lines.append(f"  ... and {len(rows) - limit} more {status} (--verbose lists them)")
    if coverage:
        lines.append("clauses exercised (cases, passed):")
        table = result.coverage()
        lines += [f"  {clause:10s} {row['cases']:5d} {row['pass']:5d}" for clause, row in table.items()]
    return "\n".join(lines) + "\n"


def to_json(result: RunResult) -> str:
    return json.dumps(result.as_json(), indent=1)


def to_junit(result: RunResult) -> str:
    """One <testsuite> of one <testcase> per case: fail -> <failure>, error -> <error>, not-applicable and
    expected-failure -> <skipped> with the reason, warning -> passed with the warning in <system-out>."""
    counts = result.counts
    suites = ET.Element("testsuites", name="qformats conformance", tests=str(len(result.cases)),
                        failures=str(counts["fail"]), errors=str(counts["error"]),
                        skipped=str(counts["not-applicable"] + counts["expected-failure"]))
    suite = ET.SubElement(suites, "testsuite", name=f"qformats.conformance.{result.format}.{result.op}",
                          tests=str(len(result.cases)), failures=str(counts["fail"]), errors=str(counts["error"]),
                          skipped=str(counts["not-applicable"] + counts["expected-failure"]),
                          time=f"{sum(c.seconds for c in result.cases):.3f}")
    props = ET.SubElement(suite, "properties")
    for name, value in (("subject", result.subject), ("format", result.format), ("op", result.op)):
        ET.SubElement(props, "property", name=name, value=value)
    for c in result.cases:
        case = ET.SubElement(suite, "testcase", classname=f"qformats.conformance.{result.format}.{result.op}",
                             name=c.id, time=f"{c.seconds:.3f}")
        message = f"[{', '.join(c.clauses)}] {c.detail}"
        if c.status == "fail":
            ET.SubElement(case, "failure", message=message[:500], type="nonconforming").text = message
        elif c.status == "error":
            ET.SubElement(case, "error", message=message[:500], type="subject-error").text = message
        elif c.status in ("not-applicable", "expected-failure"):
            ET.SubElement(case, "skipped", message=f"{c.status}: {c.detail}"[:500])
        elif c.status == "warning":
            ET.SubElement(case, "system-out").text = f"warning: {message}"
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
