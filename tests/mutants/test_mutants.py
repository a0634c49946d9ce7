"""The suite has teeth: every mutant in the catalogue fails, on the case that names its bug (100 % kill rate)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from catalogue import MUTANTS
from conformance import run_kernel
from conformance.subject import SubjectDeclaration

# Encoder mutants imitate encoders that claim llama.cpp's bytes (GPTQModel's q8_0 "roundf", ...): they are
# judged at the level they claim, where valid-but-different blocks fail (GGML-5.3).
REFERENCE_CLAIM = SubjectDeclaration(claims="reference-equivalent")
# exllama's field-local wrap is a named reading of v1 all-ones zero fields (spec/kernels.md KC-4.5): as a 4-bit
# decoder it conforms; claimed as a validating decoder it must reject them, and does not.
DECLARATIONS = {"gptq_bugs:exllama_wrap": SubjectDeclaration(level="validating", supports={"bits": ["4"]})}


@pytest.mark.parametrize(("entry", "fmt", "op", "imitates", "killer"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_is_killed_by_its_case(entry, fmt, op, imitates, killer):
    """spec/README.md: a conforming kernel passes every case; this one must fail, on the case named."""
    declaration = DECLARATIONS.get(entry, REFERENCE_CLAIM if op == "quantize" else None)
    result = run_kernel(entry, fmt=fmt, op=op, jobs=1, declaration=declaration)
    failed = {c.id: c for c in result.cases if c.status == "fail"}
    assert not result.conforms
    assert any(re.fullmatch(killer, case_id) for case_id in failed), (killer, sorted(failed)[:5])


def test_kill_rate_is_100_percent():
    """Every catalogue row names a distinct mutant, and the README documents each one."""
    readme = (Path(__file__).parent / "README.md").read_text()
    assert len({m[0] for m in MUTANTS}) == len(MUTANTS)
    for entry, *_ in MUTANTS:
        assert f"`{entry}`" in readme, entry
