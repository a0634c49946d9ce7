"""The ```python worked examples of spec/README.md (QF-3's unpack formula) and spec/gptq.md (the short last
group, 3-bit qzeros) run and their assertions hold; spec/spqr.md's are run by tests/spqr/test_spec_examples.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SPEC = Path(__file__).resolve().parents[1] / "spec"
EXAMPLES = [(name, i, source) for name in ("README.md", "gptq.md")
            for i, source in enumerate(re.findall(r"```python\n(.*?)```", (SPEC / name).read_text(), flags=re.S))]


def test_chapters_carry_the_examples():
    """QF-3 has its one-line unpack; GPTQ-3.2 its short-last-group and 3-bit qzeros examples."""
    assert [(name, i) for name, i, _ in EXAMPLES] == [("README.md", 0), ("gptq.md", 0), ("gptq.md", 1)]


@pytest.mark.parametrize(("name", "index", "source"), EXAMPLES, ids=[f"{n}-{i}" for n, i, _ in EXAMPLES])
def test_spec_example_runs(name, index, source):
    """The example executes with its stated results."""
    exec(compile(source, str(SPEC / name), "exec"), {})
