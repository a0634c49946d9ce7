"""Real libraries as conformance subjects: what each passes and fails, pinned (README "Real libraries").

gguf-py is a test dependency; GPTQModel runs from the second environment ``make real-subjects``
builds (.venv/real). The expected outcomes below are what the suite measured; a change in either
library or in the suite shows up here first.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conformance import run_kernel
from qformats.formats.bnb import cases as bnb_cases

ROOT = Path(__file__).resolve().parents[2]
REAL_PYTHON = ROOT / ".venv" / "real" / "bin" / "python"
REAL_STAMP = ROOT / ".venv" / "real" / ".installed"


def test_gguf_py_dequantize_conforms():
    """gguf-py 0.19 quants.dequantize(Q4_K) passes every q4_K decoder case, llama.cpp's rows included."""
    result = run_kernel("conformance.adapters.gguf_py:q4_k_dequantize", fmt="q4_k", op="dequantize", jobs=1)
    decoded = [c for c in result.cases if "/invalid/" not in c.id]     # non-conforming input: KC-4.2 (validating level)
    assert result.conforms and sum(c.status == "pass" for c in decoded) == len(decoded) > 70
    assert result.level()["reached"] == "decoder" and result.level()["readings"] == {"nonfinite_scales": "evaluation"}


def test_gguf_py_has_no_q4_k_encoder():
    """gguf-py's quants.quantize raises NotImplementedError for Q4_K: every encoder case is an error."""
    result = run_kernel("conformance.adapters.gguf_py:q4_k_quantize", fmt="q4_k", op="quantize", pattern="^q4_k/quantize/gaussian$")
    assert [c.status for c in result.cases] == ["error"]
    assert "NotImplementedError" in result.cases[0].detail


def _real(entry: str, fmt: str, *extra: str) -> dict:
    if not REAL_STAMP.exists():
        log = ROOT / ".venv" / "real-install.log"
        tail = log.read_text().strip().splitlines()[-1:] if log.exists() else ["make real-subjects was not run"]
        pytest.skip(f"GPTQModel environment not built: {tail[0][:200]}")
    # --timeout 300: the first call of each worker imports torch and GPTQModel (tens of seconds on a busy machine)
    done = subprocess.run([str(REAL_PYTHON), "-m", "qformats", "conformance", "kernel", entry, "--format", fmt,
                           "--json", "--jobs", "1", "--timeout", "300", *extra], capture_output=True, text=True,
                          cwd=ROOT, timeout=1200)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


def test_gptqmodel_v2_dequantize_conforms():
    """GPTQModel 7.7.0 TorchLinear.dequantize_weight on gptq_v2 tensors: every conforming case passes bit for
    bit (signed zeros and g_idx=None included); it validates nothing, so it is a decoder, not a validating one."""
    report = _real("conformance.adapters.gptqmodel:dequantize_v2", "gptq_v2")
    statuses = {c["id"]: c["status"] for c in report["cases"]}
    assert report["level"]["reached"] == "decoder" and report["counts"]["fail"] == report["counts"]["error"] == 0
    assert all(s == "pass" for i, s in statuses.items() if "/invalid/" not in i)


def test_gptqmodel_v1_follows_its_word_borrow_reading():
    """GPTQModel's v1 loader (convert_gptq_v1_to_v2_format_module) passes every conforming case and decodes the
    12 all-ones zero-field layers by its own word borrow (GPTQ-4.1, 4.2), a named reading (spec/kernels.md
    KC-4.5): it conforms at the decoder level, and the report names the reading. Held to the field-local wrap
    (``v1_zero_fields: wrap``) it fails where a carry crosses into the neighbouring field."""
    report = _real("conformance.adapters.gptqmodel:dequantize_v1", "gptq_v1")
    assert report["level"]["reached"] == "decoder"
    assert report["level"]["readings"] == {"v1_zero_fields": "gptqmodel_word_borrow"}
    assert "GPTQ-3.4" in report["level"]["unenforced"]
    assert report["counts"]["fail"] == report["counts"]["error"] == 0
    declaration = ROOT / "tests" / "conformance" / "wrap.json"
    wrapped = _real("conformance.adapters.gptqmodel:dequantize_v1", "gptq_v1", "--subject-file", str(declaration),
                    "--cases", r"zero0|_z0")
    status = {c["id"]: c["status"] for c in wrapped["cases"]}
    assert status["gptq_v1/read/b4_asym_g32_zero0_field7"] == "pass"
    assert status["gptq_v1/read/b4_asym_g32_zero0_field0"] == "fail"
    assert sum(s == "fail" for s in status.values()) == 5


PEER_SCRIPT = """
import sys
sys.path.insert(0, "benchmarks")
import numpy as np, torch
import kernels as bk
from qformats.formats import gptq
bk.DEVICE = "cpu"
layer = bk.gptq_layer(64, 256)
ref = gptq.dequantize(layer, bits=4, version="v2", group_size=128)
x1, x16 = (torch.rand(b, 256, dtype=torch.float16, generator=torch.Generator().manual_seed(b)) * 2 - 1 for b in (1, 16))
bk.peer({k: torch.from_numpy(np.array(v)) for k, v in layer.items()}, ref, x1, x16, 1.0, 1.0)
"""


def test_benchmark_peer_loads_gptqmodel_layer_and_passes_the_bound():
    """benchmarks/kernels.py's peer (GPTQModel) is loaded as GPTQModel's loader does and judged by QF-4.6:
    on the CPU its TorchLinear stands in for TritonV2Linear, so the wiring is tested without a GPU."""
    if not REAL_STAMP.exists():
        pytest.skip("GPTQModel environment not built")
    done = subprocess.run([str(REAL_PYTHON), "-c", PEER_SCRIPT], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert "peer GPTQModel TorchLinear check ok/ok" in done.stdout, done.stdout[-1500:] + done.stderr[-1500:]


def test_bitsandbytes_dequantize_4bit_differs_only_in_the_fp4_zero_sign():
    """bitsandbytes 0.50.2's CPU dequantize_4bit (QuantState.from_dict, as a checkpoint loads): every NF4 case
    passes bit for bit; FP4 fails only where its pure-torch path runs (odd K always, large blocksizes on some
    CPUs), and there only on the sign of zero (spec/bnb.md BNB-2.3, KC-2.4): +0.0 for code 8. It decodes
    non-finite absmax and a mismatched quant_map by the named readings and validates nothing of BNB-2.4,
    BNB-3.4, BNB-4.4 (BNB-9.3)."""
    if not (ROOT / ".venv" / "real" / ".installed-bnb").exists():
        pytest.skip("bitsandbytes environment not built (make real-subjects)")
    report = _real("conformance.adapters.bnb:dequantize", "bnb_4bit", "--jobs", "1")   # one torch import: faster
    info = {c.id: c for c in bnb_cases.cases()}
    failing = {c["id"] for c in report["cases"] if c["status"] in ("fail", "error")}
    fp4 = {i for i, c in info.items() if c.expect == "values" and c.params["quant_type"] == "fp4"}
    odd_k = {i for i in fp4 if info[i].params["shape"][1] % 2}
    assert odd_k <= failing <= fp4 and len(odd_k) == 10
    assert {c["clause"] for c in report["cases"] if c["id"] in failing} == {"KC-2.4"}
    assert report["level"]["readings"] == {"nonfinite_scales": "evaluation", "quant_map_mismatch": "quant_type"}
    assert report["level"]["unenforced"] == ["BNB-2.4", "BNB-3.4", "BNB-4.4"]
