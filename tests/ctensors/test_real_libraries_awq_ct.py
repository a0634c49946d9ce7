"""AutoAWQ 0.2.9 and compressed-tensors 0.20.0 as conformance subjects, on CPU (README "Real libraries").

Both run from the second environment ``make real-subjects`` builds (.venv/real, stamp
``.installed-awq-ct``). The outcomes pinned here are what the suite measured.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL_PYTHON = ROOT / ".venv" / "real" / "bin" / "python"
STAMP = ROOT / ".venv" / "real" / ".installed-awq-ct"


def _real(entry: str, fmt: str, op: str) -> dict:
    if not STAMP.exists():
        pytest.skip("AutoAWQ / compressed-tensors environment not built (make real-subjects)")
    done = subprocess.run([str(REAL_PYTHON), "-m", "qformats", "conformance", "kernel", entry, "--format", fmt,
                           "--op", op, "--json", "--jobs", "2"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


def test_compressed_tensors_decompress_conforms():
    """PackedQuantizationCompressor.decompress: every width 1..8, sym/asym, group/channel, straddling rows."""
    report = _real("conformance.adapters.compressed_tensors:dequantize", "ctensors_pack", "dequantize")
    assert report["counts"]["pass"] == len(report["cases"]) == 48


def test_autoawq_gemm_pack_is_byte_identical_where_it_runs():
    """WQLinear_GEMM.from_linear: byte-identical to the reference packer at N = 64; raises (IndexError) at
    N = 40 (it allocates N // 32 * 4 words) and at group_size -1 (it indexes k // -1), AWQ-3.2."""
    report = _real("conformance.adapters.autoawq:pack", "awq_gemm", "pack")
    status = {c["id"]: c["status"] for c in report["cases"]}
    assert status == {"awq_gemm/pack/g-1": "error", "awq_gemm/pack/g32": "pass", "awq_gemm/pack/g64": "error",
                      "awq_gemm/pack/g128": "pass"}
    assert all("bytes identical" in c["detail"] for c in report["cases"] if c["status"] == "pass")
