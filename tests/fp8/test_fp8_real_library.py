"""compressed-tensors 0.20.0 and transformers 5.24.0 as FP8 conformance subjects, on CPU (spec/kernels.md KC-1.11,
spec/fp8.md FP8-9.3; README "Real libraries").

Both run from the second environment ``make real-subjects`` builds (.venv/real, stamp ``.installed-awq-ct``),
all runs in one interpreter (tests/fp8/real_fp8_runs.py). The outcomes pinned here are what the suite
measured; which cases each library fails is derived from the cases' own shapes and dtypes, not from the
reference codec.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from qformats.formats.fp8 import cases as fp8_cases

ROOT = Path(__file__).resolve().parents[2]
REAL_PYTHON = ROOT / ".venv" / "real" / "bin" / "python"
STAMP = ROOT / ".venv" / "real" / ".installed-awq-ct"
CASES = {c.id: c for c in fp8_cases.cases()}
CT = "conformance.adapters.ct_fp8:dequantize_{}"
TF = "conformance.adapters.transformers_fp8:dequantize"
TF_BACKWARD = "conformance.adapters.transformers_fp8:dequantize_backward_block"


@pytest.fixture(scope="module")
def runs() -> dict:
    if not STAMP.exists():
        pytest.skip("compressed-tensors / transformers environment not built (make real-subjects)")
    done = subprocess.run([str(REAL_PYTHON), str(Path(__file__).with_name("real_fp8_runs.py"))], capture_output=True,
                          text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _conforming(fmt: str) -> set[str]:
    return {i for i, c in CASES.items() if c.format == fmt and c.expect == "values"}


def _status(run: dict, wanted: str) -> set[str]:
    return {i for i, (status, _, _) in run["cases"].items() if status == wanted}


# What compressed-tensors rejects (it raised) and leaves unenforced, per strategy: a channel scale (1, N) fails
# its broadcast, a block_structure of 0 its pydantic model; NaN bytes, non-positive scales, a short grid (the row
# it has broadcast), int8 bytes and float64 scales decode without a word.
CT_REJECTS = {"tensor": set(), "channel": {"scale_channel_transposed"}, "block": {"block_size_zero"}}
CT_UNENFORCED = {"tensor": ["FP8-6.4", "FP8-6.5", "KC-1.11"], "channel": ["FP8-6.3", "FP8-6.4", "KC-1.11"],
                 "block": ["FP8-6.1", "FP8-6.3", "FP8-6.4", "FP8-6.5"]}


@pytest.mark.parametrize("strategy", ["tensor", "channel", "block"])
def test_compressed_tensors_decompress_conforms_as_a_decoder(runs, strategy):
    """FloatQuantizationCompressor.decompress: every conforming case bit for bit (every E4M3FN byte, ragged
    grids, scales in float32, bfloat16 and float16); NaN and inf scales decoded by evaluation (KC-4.5)."""
    run = runs[f"{CT.format(strategy)} fp8_{strategy}"]
    fmt = f"fp8_{strategy}"
    assert _status(run, "pass") >= _conforming(fmt)
    assert not _status(run, "fail") and not _status(run, "error")
    rejected = {i.rsplit("/", 1)[1] for i, (s, _, _) in run["cases"].items() if "/invalid/" in i and s == "pass"}
    assert rejected - {"scale_nan", "scale_inf"} == CT_REJECTS[strategy]
    assert run["level"]["reached"] == "decoder" and run["level"]["unenforced"] == CT_UNENFORCED[strategy]
    assert run["level"]["readings"] == ({} if strategy == "tensor" else {"nonfinite_scales": "evaluation"})


def test_transformers_fp8_dequantize_conforms_per_channel(runs):
    """Fp8Dequantize._dequantize_one (from_pretrained on CPU): float32 product, then the model dtype (FP8-5.2):
    every channel case bit for bit (a 1-row block derived from an (N, 1) grid is the channel's cell)."""
    run = runs[f"{TF} fp8_channel"]
    assert _status(run, "pass") >= _conforming("fp8_channel")
    assert not _status(run, "fail") and not _status(run, "error") and run["level"]["reached"] == "decoder"


def _grid(case) -> tuple[int, int, int, int]:
    (n, k), (rows, cols) = case.inputs["weight"].shape, case.inputs["weight_scale"].shape
    return n, k, rows, cols


def test_transformers_fp8_dequantize_derives_the_block_from_the_grid(runs):
    """FP8-6.8: Fp8Dequantize takes rows // scale_rows as the block, ignoring weight_block_size: it raises
    ValueError on every conforming block case whose grid does not divide the weight, decodes the ragged ones
    whose grid does divide it with the wrong blocks (the diagnosis names the misreading), and passes the rest."""
    run = runs[f"{TF} fp8_block"]
    block = {i: CASES[i] for i in _conforming("fp8_block")}
    undivided = {i for i, c in block.items() if (lambda n, k, r, s: n % r or k % s)(*_grid(c))}
    ragged = {i for i, c in block.items() if i not in undivided and
              (lambda n, k, r, s: (n % c.params["block_size"][0] or k % c.params["block_size"][1]))(*_grid(c))}
    assert len(undivided) == 7 and len(ragged) == 2
    assert {i for i in block if run["cases"][i][0] == "error"} == undivided
    assert {i: run["cases"][i][1:] for i in ragged} == {i: ["FP8-6.8", "block size from the grid"] for i in ragged}
    assert {i for i in block if run["cases"][i][0] == "pass"} == set(block) - undivided - ragged
    assert run["cases"]["fp8_block/read/invalid/scale_nan"][0] == "fail"      # NaN spread over 65-row blocks


def test_transformers_fp8_backward_rounds_the_scale_to_the_dtype_first(runs):
    """FP8-9.1: _dequantize_fp8_weight (FP8Linear's backward) uses the config's ceil blocks (every ragged grid
    right) but casts a float32 scale to the output dtype before the product: it fails exactly the cases with a
    float32 scale and a 16-bit dtype, named 'scale rounded to dtype first', and rejects the short grid."""
    run = runs[f"{TF_BACKWARD} fp8_block"]
    block = _conforming("fp8_block")
    rounded = {i for i in block if "scale_dtype:float32" in CASES[i].features and "dtype:float32" not in
               CASES[i].features}
    assert {i for i in block if run["cases"][i][0] != "pass"} == rounded and len(rounded) == 4
    assert {tuple(run["cases"][i][1:]) for i in rounded} == {("FP8-9.1", "scale rounded to dtype first")}
    assert run["cases"]["fp8_block/read/invalid/scale_grid_short_row"][0] == "pass"          # it raised
