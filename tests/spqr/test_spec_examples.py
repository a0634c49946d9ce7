"""Every ```python example in spec/spqr.md runs and its assertions hold (spec/spqr.md §2.6, §9.6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qformats.errors import CODES

SPEC = Path(__file__).resolve().parents[2] / "spec" / "spqr.md"
TEXT = SPEC.read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)


def test_spec_has_examples() -> None:
    """SPQR-2.6: the chapter carries the worked tile and the compact-coding example."""
    assert len(EXAMPLES) == 2


@pytest.mark.parametrize("source", [pytest.param(s, id=f"example-{i}") for i, s in enumerate(EXAMPLES)])
def test_spec_example_runs(source: str) -> None:
    """SPQR-2.6, SPQR-9.4: the chapter's worked examples execute with their stated results."""
    exec(compile(source, str(SPEC), "exec"), {})


@pytest.mark.parametrize("code", sorted(c for c in CODES if c.startswith("spqr.")))
def test_code_listed_beside_its_clause(code: str) -> None:
    """SPQR-11: every spqr.* error code appears in the chapter's table on its clause's row."""
    clause = CODES[code][0]
    rows = [line for line in TEXT.splitlines() if line.startswith(f"| {clause} ")]
    assert any(f"`{code}`" in row for row in rows), (code, clause)
