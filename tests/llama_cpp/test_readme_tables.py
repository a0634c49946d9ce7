"""README.md's llama.cpp tables are the ones this run produces (readme_tables.py): never typed by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import readme_tables  # noqa: E402
from llama_tools import LLAMA, SKIP_REASON  # noqa: E402

pytestmark = pytest.mark.skipif(not LLAMA, reason=SKIP_REASON)


@pytest.mark.parametrize("name", sorted(readme_tables.MARKERS))
def test_readme_table_is_what_this_run_measured(name):
    fresh = readme_tables.render()[name]
    assert readme_tables.current()[name] == fresh, (
        f"README.md's {name} table is stale: python tests/llama_cpp/readme_tables.py --write regenerates it")
