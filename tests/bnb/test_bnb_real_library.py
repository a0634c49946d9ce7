"""bitsandbytes 0.50.2 itself, run from the second environment ``make real-subjects`` builds (.venv/real, stamp
``.installed-bnb``), against the reference codecs on fresh inputs: BNB-3.1 (bytes), BNB-4.1 (double
quantization), BNB-3.2 / BNB-4.3 (decode) and BNB-6.2 (LLM.int8), every blocksize, NF4 and FP4, three dtypes;
and as judged conformance subjects, their outcome on every case pinned: transformers' 4-bit loader
(conformance/adapters/transformers_bnb.py) and bitsandbytes' int8 dequantize (conformance/adapters/bnb.py)."""

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


# -- the real libraries as conformance subjects (README "Real libraries") ------------------------------------

def _judged(entry: str, fmt: str) -> dict:
    """One ``qformats conformance kernel --json`` run of ``entry`` in the bitsandbytes environment."""
    if not STAMP.exists():
        pytest.skip("bitsandbytes environment not built (make real-subjects)")
    done = subprocess.run([str(REAL_PYTHON), "-m", "qformats", "conformance", "kernel", entry, "--format", fmt,
                           "--op", "dequantize", "--json", "--jobs", "1"], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


def test_transformers_loader_decodes_as_bitsandbytes_and_validates_no_more():
    """transformers 5.24's from_pretrained (its bitsandbytes quantizer, Params4bit.from_prequantized) then its
    dequantize_bnb_weight, per case: bitsandbytes' own outcome on every case (BNB-9.3). Every NF4 case passes;
    FP4 fails only where bitsandbytes' pure-torch CPU path runs (odd K always), on the sign of zero only
    (BNB-2.3, KC-2.4). The loader adds one refusal of its own, quant_type 'int4' (its weight conversion fails);
    the short packed tensor loads and bitsandbytes' decode refuses it; absmax one entry short, uint8 codes
    without their nested state and a short nested map load and decode (BNB-3.4, BNB-4.4 unenforced)."""
    from qformats.formats.bnb import cases as bnb_cases

    report = _judged("conformance.adapters.transformers_bnb:dequantize", "bnb_4bit")
    assert report["subject_info"]["library"]["name"] == "transformers"
    info = {c.id: c for c in bnb_cases.cases()}
    status = {c["id"]: c["status"] for c in report["cases"]}
    detail = {c["id"]: c["detail"] for c in report["cases"]}
    failing = {i for i, s in status.items() if s == "fail"}
    fp4 = {i for i, c in info.items() if c.expect == "values" and c.params["quant_type"] == "fp4"}
    odd_k = {i for i in fp4 if info[i].params["shape"][1] % 2}
    assert len(status) == 49 and "error" not in status.values()
    assert odd_k <= failing <= fp4 and len(odd_k) == 10
    assert {c["clause"] for c in report["cases"] if c["id"] in failing} == {"KC-2.4"}
    invalid = "bnb_4bit/read/invalid/"
    assert {i.removeprefix(invalid) for i, s in status.items() if s == "not-applicable"} == \
        {"absmax_short", "nested_missing", "nested_quant_map_short"}
    assert "automatic conversion of the weights" in detail[invalid + "quant_type_int4"]
    assert "bitsandbytes/backends/cpu/ops.py" in detail[invalid + "packed_short"]
    assert report["level"]["readings"] == {"nonfinite_scales": "evaluation", "quant_map_mismatch": "quant_type"}
    assert report["level"]["unenforced"] == ["BNB-2.4", "BNB-3.4", "BNB-4.4"]


def test_bitsandbytes_int8_dequantize_decodes_every_code_and_validates_nothing():
    """bitsandbytes 0.50.2's int8_vectorwise_dequant, cast to the dtype (BNB-9.3): every bnb_int8 value case bit for
    bit, -128 and SCB 0 included (BNB-6.2); of the must-reject cases it refuses SCB one entry short only (a
    broadcast error) and decodes NaN, infinite and negative SCB, uint8 codes and dtype float64 (BNB-6.1 unenforced)."""
    report = _judged("conformance.adapters.bnb:int8_dequantize", "bnb_int8")
    assert report["subject_info"]["library"]["name"] == "bitsandbytes"
    status = {c["id"].removeprefix("bnb_int8/read/"): c["status"] for c in report["cases"]}
    assert report["counts"] == {"pass": 12, "fail": 0, "error": 0, "not-applicable": 5, "expected-failure": 0,
                                "warning": 0}
    assert {i for i, s in status.items() if s == "not-applicable"} == \
        {f"invalid/{n}" for n in ("scb_nan", "scb_inf", "scb_negative", "weight_uint8", "dtype_float64")}
    assert status["int8_every_code"] == status["int8_zero_rows"] == status["invalid/scb_short"] == "pass"
    assert report["level"]["reached"] == "decoder" and report["level"]["unenforced"] == ["BNB-5.2", "BNB-6.1"]
