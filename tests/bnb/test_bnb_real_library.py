"""bitsandbytes 0.50.2 itself, run from the second environment ``make real-subjects`` builds (.venv/real, stamp
``.installed-bnb``), against the reference codecs on fresh inputs: BNB-3.1 (bytes), BNB-4.1 (double
quantization), BNB-3.2 / BNB-4.3 (decode) and BNB-6.2 (LLM.int8), every blocksize, NF4 and FP4, three dtypes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL_PYTHON = ROOT / ".venv" / "real" / "bin" / "python"
STAMP = ROOT / ".venv" / "real" / ".installed-bnb"


def test_bitsandbytes_agrees_with_the_reference_codecs_on_fresh_inputs():
    """Every count is 0: same bytes, absmax, nested state and decoded bits (FP4 code 8's zero by value, BNB-2.3)."""
    if not STAMP.exists():
        pytest.skip("bitsandbytes environment not built (make real-subjects)")
    done = subprocess.run([str(REAL_PYTHON), str(Path(__file__).with_name("real_bnb_check.py"))], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout)
    assert len(results) == 8 * 2 * 2 * 3 + 3
    assert {case: counts for case, counts in results.items() if any(counts.values())} == {}
