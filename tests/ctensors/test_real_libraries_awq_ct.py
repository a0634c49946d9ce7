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
                           "--op", op, "--json", "--jobs", "1"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


def test_compressed_tensors_decompress_conforms():
    """PackedQuantizationCompressor.decompress: every width 1..8, sym/asym, group/channel, straddling rows."""
    report = _real("conformance.adapters.compressed_tensors:dequantize", "ctensors_pack", "dequantize")
    status = {c["id"]: c["status"] for c in report["cases"]}
    invalid = {i for i in status if "/invalid/" in i}
    assert len(status) == 58 and len(invalid) == 8
    assert all(status[i] == "pass" for i in status if i not in invalid)     # 48 read + 2 signed-zero cases
    # It decodes NaN and inf scales (CT-3.3 unenforced) and rejects every malformed shape, dtype and width.
    assert {i for i in invalid if status[i] != "pass"} == {"ctensors_pack/read/invalid/b4_asym_g32_scales_nan",
                                                          "ctensors_pack/read/invalid/b4_asym_g32_scales_inf"}
    assert report["level"]["reached"] == "decoder" and report["level"]["unenforced"] == ["CT-3.3"]


def test_autoawq_dequantize_gemm_conforms_as_a_decoder():
    """packing_utils.dequantize_gemm: every read and signed-zero case; it decodes NaN/inf scales, float32 scales
    and int64 qweight (AWQ-2.1, AWQ-3.3 unenforced) and fails on the other malformed layers."""
    report = _real("conformance.adapters.autoawq:dequantize", "awq_gemm", "dequantize")
    status = {c["id"]: c["status"] for c in report["cases"]}
    decoded = {f"awq_gemm/read/invalid/g32_{name}" for name in ("scales_nan", "scales_inf", "scales_float32",
                                                                  "qweight_int64")}
    assert len(status) == 13 and {i for i, s in status.items() if s != "pass"} == decoded
    assert {status[i] for i in decoded} == {"not-applicable"}
    assert report["level"]["reached"] == "decoder" and report["level"]["unenforced"] == ["AWQ-2.1", "AWQ-3.3"]


def test_autoawq_gemm_pack_is_byte_identical_where_it_runs():
    """WQLinear_GEMM.from_linear: byte-identical to the reference packer at N = 64; raises (IndexError) at
    N = 40 (it allocates N // 32 * 4 words) and at group_size -1 (it indexes k // -1), AWQ-3.2."""
    report = _real("conformance.adapters.autoawq:pack", "awq_gemm", "pack")
    status = {c["id"]: c["status"] for c in report["cases"]}
    assert status == {"awq_gemm/pack/g-1": "error", "awq_gemm/pack/g32": "pass", "awq_gemm/pack/g64": "error",
                      "awq_gemm/pack/g128": "pass"}
    assert all("bytes identical" in c["detail"] for c in report["cases"] if c["status"] == "pass")
