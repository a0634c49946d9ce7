"""reference_kernels: the Triton kernels against the NumPy reference (TRITON_INTERPRET=1 on the CPU).

Every entry point passes its whole conformance matrix (the runner, as any subject); hypothesis
properties cover shapes, bits and group layouts beyond the matrix: dequantize equals the
reference rounded to float16, matmul stays within the QF-4.6 bound.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.gptq")   # before triton: it selects the interpreter without a GPU

from conformance import compare, run_kernel  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from qformats.formats import gptq, q4_k  # noqa: E402
from qformats.formats.gptq import cases as gptq_cases  # noqa: E402
from reference_kernels import gptq as kgptq  # noqa: E402
from reference_kernels import q4_k as kq4k  # noqa: E402

ENTRIES = [
    ("reference_kernels.gptq:dequantize_v1", "gptq_v1", "dequantize"),
    ("reference_kernels.gptq:dequantize_v2", "gptq_v2", "dequantize"),
    ("reference_kernels.gptq:matmul_v1", "gptq_v1", "matmul"),
    ("reference_kernels.gptq:matmul_v2", "gptq_v2", "matmul"),
    ("reference_kernels.q4_k:dequantize", "q4_k", "dequantize"),
    ("reference_kernels.q4_k:matmul", "q4_k", "matmul"),
    ("reference_kernels.spqr:dequantize", "spqr", "dequantize"),
    ("reference_kernels.spqr:matmul", "spqr", "matmul"),
]


@pytest.mark.parametrize(("entry", "fmt", "op"), ENTRIES, ids=[e[0].split(".")[1] for e in ENTRIES])
def test_kernel_passes_its_whole_matrix(entry, fmt, op, public_cases):
    """The conformance runner passes every Triton kernel 100 % (issue: "Done means")."""
    result = run_kernel(entry, fmt=fmt, op=op, jobs=1, timeout=300, pattern=public_cases(fmt, op))
    bad = [(c.id, c.status, c.detail[:200]) for c in result.cases if c.status != "pass"]
    assert not bad and result.cases, bad[:3]


LAYOUTS = st.sampled_from([(64, -1), (64, 32), (128, 64), (96, 32), (160, 128), (256, 128)])


@st.composite
def gptq_layers(draw):
    bits = draw(st.sampled_from([2, 3, 4, 8]))
    k, gs = draw(LAYOUTS)
    n = draw(st.sampled_from([32, 64, 96]))
    act = draw(st.booleans()) and gs != -1
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 1, (n, k)).astype(np.float32)
    order = rng.random(k) if act else None
    version = draw(st.sampled_from(["v1", "v2"]))
    layer = gptq.quantize(w, bits=bits, group_size=gs, sym=draw(st.booleans()), version="v2", act_order=order)
    if version == "v1":
        zeros = gptq.unpack(layer, bits=bits, version="v2", group_size=gs)[1]
        if (zeros == 0).any():
            version = "v2"                         # v1 cannot hold zero point 0 (GPTQ-3.4)
        else:
            layer = gptq.convert(layer, bits=bits, to="v1", group_size=gs)
    t = {name: np.asarray(layer.tensors[name]) for name in ("qweight", "qzeros", "scales", "g_idx")}
    return t, bits, gs, version, rng


@settings(max_examples=25, deadline=None)
@given(gptq_layers())
def test_gptq_dequantize_is_the_reference_rounded_to_float16(layer):
    t, bits, gs, version, _ = layer
    ref = np.ascontiguousarray(gptq.dequantize(t, bits=bits, version=version, group_size=gs))
    fn = kgptq.dequantize_v1 if version == "v1" else kgptq.dequantize_v2
    got = fn(**t, bits=bits, group_size=gs)
    assert got.dtype == np.float16 and np.array_equal(got, ref.astype(np.float16))


@settings(max_examples=20, deadline=None)
@given(gptq_layers(), st.sampled_from([1, 3, 16, 20]))
def test_gptq_matmul_is_within_the_forward_error_bound(layer, batch):
    t, bits, gs, version, rng = layer
    ref = np.ascontiguousarray(gptq.dequantize(t, bits=bits, version=version, group_size=gs))
    x = rng.uniform(-1, 1, (batch, ref.shape[1])).astype(np.float16)
    fn = kgptq.matmul_v1 if version == "v1" else kgptq.matmul_v2
    y = fn(**t, bits=bits, group_size=gs, x=x)
    assert compare.within_bound(y, "float16", x, ref, w_rounding=True).ok


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.sampled_from([256, 512, 768]), st.integers(0, 2**32 - 1), st.sampled_from([1, 5]))
def test_q4k_kernels_on_random_finite_blocks(rows, n, seed, batch):
    """Random bytes with finite d/dmin: dequantize is the reference rounded to float16; matmul in bound."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (rows * n // 256, 144), dtype=np.uint8)
    blocks[:, 0:4] = rng.uniform(-0.1, 0.1, (blocks.shape[0], 2)).astype("<f2").view(np.uint8)
    blocks = blocks.reshape(rows, -1)
    ref = q4_k.dequantize(blocks)
    assert np.array_equal(kq4k.dequantize(blocks=blocks, rows=rows, n=n), ref.astype(np.float16))
    x = rng.uniform(-1, 1, (batch, n)).astype(np.float16)
    assert compare.within_bound(kq4k.matmul(blocks=blocks, rows=rows, n=n, x=x), "float16", x, ref,
                                w_rounding=True).ok


def test_torch_in_torch_out_numpy_in_numpy_out():
    """The launchers return the kind they were given: torch tensors stay torch (same device)."""
    case = next(c for c in gptq_cases.cases() if c.id == "gptq_v2/read/b4_sym_g32_act_order")
    t = {k: torch.from_numpy(np.array(v)) for k, v in case.inputs.items()}
    out = kgptq.dequantize_v2(**t, **case.params)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16
    assert isinstance(kgptq.dequantize_v2(**case.inputs, **case.params), np.ndarray)


def test_v1_zero0_fields_are_rejected_not_decoded():
    """GPTQ-3.4: the kernel raises gptq.zero.v1_unrepresentable rather than decoding an all-ones field."""
    case = next(c for c in gptq_cases.cases() if c.id == "gptq_v1/read/b3_asym_g32_zero0_field21")
    with pytest.raises(QFormatsError) as exc:
        kgptq.dequantize_v1(**case.inputs, **case.params)
    assert exc.value.code == "gptq.zero.v1_unrepresentable" and "[0, 21]" in str(exc.value)


def test_out_of_range_g_idx_is_refused_before_launch():
    """A g_idx the kernel would read scales past the table with is refused (vLLM #47255)."""
    case = next(c for c in gptq_cases.cases() if c.id == "gptq_v2/read/b4_sym_g32_trivial")
    bad = dict(case.inputs, g_idx=np.full_like(case.inputs["g_idx"], 7))
    with pytest.raises(QFormatsError) as exc:
        kgptq.dequantize_v2(**bad, **case.params)
    assert exc.value.code == "gptq.g_idx.range"


def test_qformats_works_without_torch_or_triton():
    """DESIGN.md §1: qformats itself imports and validates with neither torch nor triton importable."""
    code = ("import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"
            "from qformats.validate import validate\n"
            "r = validate('fixtures/checkpoints/gptq_v1_sym_4bit')\n"
            "print(r.verdict)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "valid", done.stderr[-1000:]


def test_benchmark_script_runs_in_the_interpreter(tmp_path):
    """benchmarks/kernels.py (what `make gpu-bench` runs on a GPU) runs end to end in --cpu-smoke: tiny shapes,
    every row checked first, the prepared path and the validating call timed, the JSON written beside the
    table, each row's dequantize output counted at its real element size (float32 for AWQ and
    compressed-tensors, KC-1.8, KC-1.9)."""
    import json
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels.py"
    done = subprocess.run([sys.executable, str(script), "--cpu-smoke", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("check ok/ok/ok") == 8                # GPTQ, q4_K, SpQR, AWQ, compressed-tensors, 3 types
    report = json.loads((tmp_path / "kernels.json").read_text())
    rows = {r["format"]: r for r in report["rows"]}
    assert report["smoke"] and "peer GPTQModel" in rows            # the peer row: measured, or why it is absent
    kernels = [r for name, r in rows.items() if not name.startswith("peer")]
    assert {r["format"]: r["output_element_bytes"] for r in kernels} == {
        "gptq 4-bit": 2, "q4_k": 2, "q8_0": 2, "q6_k": 2, "q5_k": 2, "spqr": 2, "awq 4-bit": 4, "ct int4": 4}
    assert all(set(r["prepared_s"]) == {"dequantize", "gemv", "batch16"} and set(r["validating_s"]) ==
               {"dequantize", "gemv"} and r["check"] == "ok/ok/ok" for r in kernels)
    assert (tmp_path / "kernels.txt").read_text().count("check ok/ok/ok") == 8


def test_runner_passes_torch_tensors_with_device_cpu():
    """--device cpu: the subject gets torch tensors and returns torch tensors; the judge reads them back."""
    result = run_kernel("reference_kernels.gptq:dequantize_v2", fmt="gptq_v2", op="dequantize", device="cpu",
                        pattern=r"gptq_v2/read/b3_asym_g32_act_order")
    assert [c.status for c in result.cases] == ["pass"]
