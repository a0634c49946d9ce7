"""Conformance reports: text for people, JSON per the contract (DESIGN.md §6), JUnit XML for CI."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from .provenance import run_document
from .runner import RunResult
from .subject import SubjectDeclaration

__all__ = ["to_text", "to_json", "to_html", "to_junit", "diagnosis_line"]

SHOWN = ("fail", "error", "warning", "expected-failure")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


LEVEL_MEANING = {
    "validating": "conforming input decoded exactly, and every non-conforming input the suite holds rejected",
    "decoder": "conforming input decoded exactly; non-conforming input rejected or decoded by a named reading",
    "numeric": "conforming input decoded exactly with +0 == -0 (declared numeric zeros): below the decoder level",
    "none": "a case failed or errored at the decoder level",
    "reference-equivalent": "every case byte-identical to the reference writer",
    "conforming": "every written layer conforms and decodes to the reference values",
}


def _level_lines(result: RunResult) -> list[str]:
    """The conformance level block of spec/kernels.md KC-4.4: claimed, reached, readings, unenforced rules."""
    level = result.level()
    lines = [f"level: claimed {level['claimed']}, reached {level['reached']} "
             f"({LEVEL_MEANING.get(level['reached'], level['reached'])}; KC-4)"]
    for feature, reading in level["readings"].items():
        lines.append(f"  reading of {feature}: {reading}")
    if level["unenforced"]:
        lines.append(f"  not enforced (non-conforming input decoded, not rejected): {', '.join(level['unenforced'])}")
    if level["reached"] in ("decoder", "numeric") and level.get("validation_cases", 0):
        lines.append("  a decoder-level pass says nothing about validation: claim \"level\": \"validating\" "
                     "to be held to these rules")
    elif level["reached"] == "decoder" and result.op in ("dequantize", "matmul"):
        lines.append("  no non-conforming input was run: validation was not judged")
    return lines


def diagnosis_line(diagnosis: dict) -> str | None:
    """The run's diagnosis in words (spec/kernels.md KC-5.5): each misreading with the failing cases it
    explains, and the failing cases none explains; None when nothing failed."""
    n = diagnosis.get("failing", 0)
    if not n:
        return None
    named = [f"{row['misreading']} ({row['clause']}) explains {row['cases']} of {n} failing cases"
             for row in diagnosis.get("explained", [])]
    left = diagnosis.get("unexplained", 0)
    if not named:
        return f"diagnosis (KC-5.5): no known misreading explains {'it' if n == 1 else f'the {n} failing cases'}"
    if left:
        named.append(f"no known misreading explains the other {left}")
    return "diagnosis (KC-5.5): " + "; ".join(named)


def to_text(result: RunResult, *, verbose: bool = False, coverage: bool = True) -> str:
    counts = result.counts
    verdict = "CONFORMS" if result.conforms else "DOES NOT CONFORM"
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    lines = [f"{result.subject} as {result.format} {result.op}: {verdict} ({_plural(len(result.cases), 'case')}: "
             f"{summary or 'none'})"]
    diagnosed = diagnosis_line(result.diagnosis())
    if diagnosed:
        lines.append(diagnosed)
    lines += _level_lines(result)
    for status in SHOWN + (("not-applicable",) if verbose else ()):
        rows = [c for c in result.cases if c.status == status]
        limit = len(rows) if verbose else 10
        for c in rows[:limit]:
            lines.append(f"  {status.upper():16s} {c.id} [{', '.join(c.attributed)}]: {c.detail}")
        if len(rows) > limit:
            lines.append(f"  ... and {len(rows) - limit} more {status} (--verbose lists them)")
    if coverage:
        lines.append("clauses exercised (cases, passed):")
        table = result.coverage()
        lines += [f"  {clause:10s} {row['cases']:5d} {row['pass']:5d}" for clause, row in table.items()]
    return "\n".join(lines) + "\n"


def to_json(result: RunResult, *, device: str | None = None, declaration: SubjectDeclaration | None = None) -> str:
    """The DESIGN.md §6 keys and the run's provenance: suite version and case digests, the subject and the
    library it judges, platform, Python, numpy, torch and the device (conformance/provenance.py)."""
    return json.dumps(run_document(result, device=device, declaration=declaration), indent=1)


def to_html(result: RunResult, *, device: str | None = None, declaration: SubjectDeclaration | None = None) -> str:
    """The results page (conformance/html.py) of this one run: one self-contained HTML file."""
    from .html import page

    return page([run_document(result, device=device, declaration=declaration)])


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
