"""Run a subject through the case matrix of its format and op, and judge every answer.

    result = run_kernel("mylib.ops:dequant", fmt="gptq_v2", op="dequantize")
    result.counts            # {"pass": 168, "fail": 0, ...}
    result.conforms          # no case failed or errored

Statuses: ``pass``; ``fail`` (a wrong answer); ``error`` (the subject raised on a conforming input,
hung past the per-case limit, crashed, or returned the wrong shape or dtype); ``not-applicable``
(outside the declared features, or non-conforming input that only a validating decoder must reject,
decoded by a subject that claims the decoder level); ``expected-failure`` (a declared known failure,
with its reason); ``warning`` (an expected failure that passed, a writer below the quality of the
reference, an informative writer case that differs). Only ``fail`` and ``error`` break conformance.

Every run also reports its conformance level (spec/kernels.md KC-4): the level claimed, the level
reached, the named reading the subject follows for each feature that has them (GPTQ v1 all-ones zero
fields, non-finite super-scales) and the MUST-reject clauses it does not enforce.
"""

from __future__ import annotations

import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from qformats.cases import READ_OPS, Case, case_digest
from qformats.errors import fail
from qformats.formats.registry import Face, subject_format

from . import judges
from .catalog import pinned_digests, third_party_cases
from .levels import level_report
from .subject import SubjectDeclaration, SubjectProcess

__all__ = ["CaseResult", "RunResult", "diagnosis", "run_kernel", "select_cases", "judge_case", "matmul_input", "STATUSES"]

STATUSES = ("pass", "fail", "error", "not-applicable", "expected-failure", "warning")
BATCHES = (1, 4, 16)


@dataclass(frozen=True)
class CaseResult:
    """One case's outcome. ``clause`` is the attributed clause (KC-5: what the mismatch violates first;
    the case's own first clause when nothing failed), ``clauses`` every clause the case exercises.
    ``decoder_status`` is the status under the decoder level; ``validation`` the MUST-reject clause of
    non-conforming input, ``rejected`` whether the subject rejected it; ``feature`` and ``readings`` the
    named readings its answer matched."""

    id: str
    status: str
    clauses: tuple[str, ...]
    detail: str
    seconds: float = 0.0
    clause: str = ""
    decoder_status: str = ""
    validation: str | None = None
    rejected: bool = False
    feature: str | None = None
    readings: tuple[str, ...] = ()
    misreading: str | None = None
    misreadings: tuple[str, ...] = ()

    @property
    def attributed(self) -> tuple[str, ...]:
        """The attributed clause, then the case's other clauses."""
        head = self.clause or (self.clauses[0] if self.clauses else "")
        return tuple(dict.fromkeys((head, *self.clauses))) if head else self.clauses

    def as_json(self) -> dict[str, Any]:
        out = {"id": self.id, "status": self.status, "clause": self.attributed[0] if self.attributed else "",
               "clauses": list(self.attributed), "detail": self.detail}
        if self.validation is not None:
            out["validation"] = {"clause": self.validation, "rejected": self.rejected,
                                 "decoder_status": self.decoder_status or self.status}
        if self.feature is not None:
            out["reading"] = {"feature": self.feature, "matched": list(self.readings)}
            if self.misreading:
                out["reading"]["misreading"] = self.misreading
        elif self.misreading:
            out["misreading"] = self.misreading
        return out


@dataclass
class RunResult:
    subject: str
    format: str
    op: str
    cases: list[CaseResult] = field(default_factory=list)
    declaration: SubjectDeclaration = field(default_factory=SubjectDeclaration)

    def level(self) -> dict[str, Any]:
        """The conformance level of the run (KC-4): claimed, reached, readings, unenforced clauses."""
        return level_report(self.cases, self.declaration, self.op)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.cases) for s in STATUSES}

    @property
    def conforms(self) -> bool:
        return not any(c.status in ("fail", "error") for c in self.cases)

    def coverage(self) -> dict[str, dict[str, int]]:
        """Per clause: how many cases exercised it and how many of those passed."""
        table: dict[str, dict[str, int]] = {}
        for c in self.cases:
            for clause in c.clauses:
                row = table.setdefault(clause, {"cases": 0, "pass": 0})
                row["cases"] += 1
                row["pass"] += c.status == "pass"
        return dict(sorted(table.items()))

    def diagnosis(self) -> dict[str, Any]:
        """The run's diagnosis (spec/kernels.md KC-5.5): of the cases that failed or errored, how many each
        known misreading explains (its answer reproduced bit for bit) and how many none explains."""
        return diagnosis(self.cases)

    def as_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "format": self.format, "op": self.op, "counts": self.counts,
                "level": self.level(), "diagnosis": self.diagnosis(), "cases": [c.as_json() for c in self.cases],
                "coverage": self.coverage()}


def diagnosis(cases: list[CaseResult]) -> dict[str, Any]:
    """``{"failing": n, "explained": [{"misreading", "clause", "cases"}], "unexplained": m}`` of ``cases``:
    a misreading is named only for the failing cases whose answers it reproduced (KC-5.5); ``failing`` counts
    the failing answers that are values (not exceptions, hangs or unusable results)."""
    from .diagnoses import CLAUSES

    # the failing answers that are values: a fail, or an error that a misreading explains (W.T, KC-5.4); an
    # exception, a hang or an unusable result has nothing to compare
    failing = [c for c in cases if c.status == "fail" or (c.status == "error" and (c.misreading or c.misreadings))]
    # an answer several misreadings reproduce counts for the one that explains the most of the run's failures
    reach = Counter(name for c in failing for name in (c.misreadings or (c.misreading,)) if name)
    explained: dict[str, dict[str, Any]] = {}
    for c in failing:
        names = [n for n in (c.misreadings or (c.misreading,)) if n]
        if names:
            name = max(names, key=lambda n: reach[n])
            row = explained.setdefault(name, {"misreading": name, "clause": CLAUSES.get(name, c.clause), "cases": 0})
            row["cases"] += 1
    return {"failing": len(failing), "explained": sorted(explained.values(), key=lambda r: -r["cases"]),
            "unexplained": sum(not (c.misreading or c.misreadings) for c in failing)}


def select_cases(fmt: str, op: str, pattern: str | None = None) -> list[Case]:
    """The matrix of ``fmt`` and ``op``: reference-made cases, then the real tools' vectors."""
    import re

    face = subject_format(fmt)
    if op not in face.ops[fmt]:
        raise fail("argument.invalid", "op", f"one of {', '.join(face.ops[fmt])} for {fmt}", op)
    chosen = [c for c in list(face.cases()) + third_party_cases(face.name) if c.format == fmt and op in c.ops]
    if pattern is not None:
        chosen = [c for c in chosen if re.search(pattern, c.id)]
    return chosen


def matmul_input(case: Case, k: int) -> np.ndarray:
    """x float16 (batch, in): batch 1, 4 or 16 by case, uniform in [-1, 1) (or [0, 1) for x:nonnegative)."""
    seed = zlib.crc32((case.id + "/x").encode())
    rng = np.random.default_rng(seed)
    batch = BATCHES[seed % len(BATCHES)]
    low = 0.0 if "x:nonnegative" in case.features else -1.0
    return rng.uniform(low, 1.0, (batch, k)).astype(np.float16)




def judge_case(case: Case, op: str, face: Face, decl: SubjectDeclaration, proc: SubjectProcess,
               digests: dict[str, str]) -> CaseResult:
    def result(status: str, detail: str, seconds: float = 0.0) -> CaseResult:
        return CaseResult(case.id, status, case.clauses, detail, seconds, clause=case.clauses[0] if case.clauses else "")

    unsupported = decl.unsupported(case.features)
    if unsupported:
        return result("not-applicable", f"outside the declared features: {', '.join(unsupported)}")
    pinned = digests.get(case.id)
    if case.provenance.get("source") == "qformats-reference" and pinned != case_digest(case):
        why = "has no pinned sha256" if pinned is None else "regenerated to bytes other than the pinned sha256"
        return result("error", f"case data {why}: the generator drifted (numpy {np.__version__}); "
                               "not run, so that no subject is judged on unproven data")
    # read ops: the reference is computed once, for x's width and the judge (non-conforming input has
    # none: its named readings are the judge's); writers' judges know their own expectation
    conforming = op in READ_OPS and not judges.nonconforming(case, op)
    reference = face.reference(case) if conforming else None
    if op == "matmul":
        x = matmul_input(case, reference.shape[1] if reference is not None else judges.nominal_shape(case, face)[1])
    else:
        x = None
    answer = proc.call(dict(case.inputs) | ({"x": x} if x is not None else {}), dict(case.params))
    v = judges.judge(case, op, face, decl, answer, x, reference)
    status, detail = v.status, v.detail
    reason = decl.expected_failure(case.id)
    if reason is not None and status in ("fail", "error"):
        status, detail = "expected-failure", f"{reason} ({detail})"
    elif reason is not None and status == "pass":
        status, detail = "warning", f"declared as an expected failure ({reason}) but passed: remove the entry"
    return CaseResult(case.id, status, case.clauses, detail, answer.seconds, clause=v.clause,
                      decoder_status=v.decoder_status or v.status, validation=v.validation, rejected=v.rejected,
                      feature=v.feature, readings=v.readings, misreading=v.misreading, misreadings=v.misreadings)


def run_kernel(entry: str, *, fmt: str, op: str, device: str | None = None, declaration: SubjectDeclaration | None = None,
               jobs: int = 1, timeout: float = 60.0, pattern: str | None = None,
               progress: Callable[[CaseResult], None] | None = None) -> RunResult:
    """Run ``entry`` (``module:function``) on every case of ``fmt`` / ``op``; never raises for the
    subject's behaviour, only for bad arguments or a subject that cannot be imported (QFormatsError
    ``argument.invalid``: "could not run")."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise fail("argument.invalid", "jobs", "an integer of at least 1", jobs)
    if device not in (None, "cpu", "cuda") and not str(device).startswith("cuda:"):
        raise fail("argument.invalid", "device", "cpu or cuda (or cuda:N); omit it for NumPy arrays", device)
    face = subject_format(fmt)
    decl = declaration or SubjectDeclaration()
    cases = select_cases(fmt, op, pattern)
    digests = pinned_digests()
    shards = [cases[i::jobs] for i in range(min(jobs, max(1, len(cases))))]
    procs = [SubjectProcess(entry, device=device, timeout=timeout) for _ in shards]

    def run_shard(i: int) -> list[CaseResult]:
        out = []
        for case in shards[i]:
            out.append(judge_case(case, op, face, decl, procs[i], digests))
            if progress is not None:
                progress(out[-1])
        return out

    try:
        # the first worker imports the subject before any case, apart from us: one that cannot load is
        # could-not-run; the worker then runs its shard (no separate probe process)
        problem = procs[0].start()
        if problem is not None:
            raise fail("argument.invalid", "subject", "an importable MODULE:FUNCTION", problem)
        with ThreadPoolExecutor(max_workers=len(shards)) as pool:
            done = {r.id: r for rs in pool.map(run_shard, range(len(shards))) for r in rs}
    finally:
        for proc in procs:
            proc.__exit__(None, None, None)
    return RunResult(subject=entry, format=fmt, op=op, cases=[done[c.id] for c in cases], declaration=decl)
