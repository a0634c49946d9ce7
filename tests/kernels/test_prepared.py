"""The prepared path of every Triton kernel (KC-7), in the interpreter (TRITON_INTERPRET=1 on the CPU).

Each format's whole conformance matrix runs once more through ``reference_kernels.strict``: ``prepare``,
then the prepared call under a guard that raises on host work and counts allocations (KC-7.2). So the
prepared path is held to the same bit-exact verdicts as the validating entry points, on the same cases
(ragged shapes, 3-bit fields straddling words, act-order, every GGUF scale class), and the guard is
proven to bite. A layer written to after prepare is refused with its code (KC-7.3).
"""

from __future__ import annotations

from importlib import import_module

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.gptq")   # before triton: it selects the interpreter without a GPU

from conformance import run_kernel  # noqa: E402
from conformance.runner import select_cases  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from reference_kernels import gptq, q4_k, q8_0, spqr, strict  # noqa: E402

# (strict entry, conformance format): both ops of every format
MATRIX = [(f"gptq_{op}_{v}", f"gptq_{v}", op) for v in ("v1", "v2") for op in ("dequantize", "matmul")] + \
    [(f"{m}_{op}", fmt, op) for m, fmt in (("q4_k", "q4_k"), ("q5_k", "q5_k"), ("q6_k", "q6_k"), ("q8_0", "q8_0"),
                                          ("spqr", "spqr"), ("awq", "awq_gemm"), ("ctensors", "ctensors_pack"))
     for op in ("dequantize", "matmul")] + [("bnb_dequantize", "bnb_4bit", "dequantize")] + \
    [(f"fp4_{op}_{f}", f"{f}_packed", op) for f in ("nvfp4", "mxfp4") for op in ("dequantize", "matmul")] + \
    [(f"fp8_{s}_{op}", f"fp8_{s}", op) for s in ("tensor", "channel", "block") for op in ("dequantize", "matmul")]


@pytest.mark.parametrize(("entry", "fmt", "op"), MATRIX, ids=[m[0] for m in MATRIX])
def test_prepared_path_passes_the_whole_matrix_without_host_work(entry, fmt, op):
    """KC-7.1, KC-7.2: prepare + the prepared call, guarded, gets every case's verdict right."""
    result = run_kernel(f"reference_kernels.strict:{entry}", fmt=fmt, op=op, jobs=1, timeout=300)
    bad = [(c.id, c.status, c.detail[:300]) for c in result.cases if c.status != "pass"]
    assert not bad and result.cases, bad[:3]


def _first_valid(fmt: str, module: str, **fixed):
    """The first case of ``fmt`` decoded to values, prepared from torch tensors (which the layer keeps)."""
    case = next(c for c in select_cases(fmt, "dequantize") if c.expect == "values")
    t = {k: torch.from_numpy(np.array(v)) for k, v in case.inputs.items()}
    kernels = import_module(f"reference_kernels.{module}")
    return kernels, kernels.prepare(**t, **case.params, **fixed), t


LAYERS = [("gptq_v2", "gptq", {"version": "v2"}, "qweight"), ("q4_k", "q4_k", {}, "blocks"),
          ("q5_k", "q5_k", {}, "blocks"), ("q6_k", "q6_k", {}, "blocks"), ("q8_0", "q8_0", {}, "blocks"),
          ("spqr", "spqr", {}, "dense_weights"), ("awq_gemm", "awq", {}, "scales"),
          ("ctensors_pack", "ctensors", {}, "weight_packed"), ("bnb_4bit", "bnb", {}, "packed"),
          ("nvfp4_packed", "fp4", {"format": "nvfp4"}, "weight_global_scale"),
          ("mxfp4_packed", "fp4", {"format": "mxfp4"}, "weight_scale"),
          ("fp8_block", "fp8", {"strategy": "block"}, "weight")]
WATCHED = {"dense_weights": "dense", "weight_packed": "packed", "weight_global_scale": "global_scale",
           "weight_scale": "scale_bytes"}      # the prepared layer's names for them


@pytest.mark.parametrize(("fmt", "module", "fixed", "tensor"), LAYERS, ids=[m[1] for m in LAYERS])
def test_a_layer_written_to_after_prepare_is_refused(fmt, module, fixed, tensor):
    """KC-7.3: an in-place write bumps the tensor's version counter; the next prepared call refuses."""
    kernels, p, t = _first_valid(fmt, module, **fixed)
    kernels.dequantize_prepared(p)                                  # unchanged: runs
    t[tensor].add_(0)                                               # same bits, but written to
    with pytest.raises(QFormatsError) as exc:
        kernels.dequantize_prepared(p)
    e = exc.value
    name = WATCHED.get(tensor, tensor)
    assert (e.code, e.tensor, e.actual) == ("kernel.layer.changed", name, "written to in place 1 time(s) since")
    assert str(e) == f"'{name}' must be unchanged since prepare (KC-7.3): prepare the layer again " \
                     "(got written to in place 1 time(s) since) [kernel.layer.changed, KC-7.3]"


def test_a_prepared_layer_is_frozen():
    """KC-7.1: rebinding a prepared layer's tensor would bypass the checks prepare ran."""
    _, p, _ = _first_valid("q8_0", "q8_0")
    with pytest.raises(AttributeError, match="frozen"):
        p.blocks = torch.zeros_like(p.blocks)


def test_numpy_inputs_are_copied_at_prepare():
    """KC-7.1: a prepared layer owns NumPy inputs, so a later write to the caller's array cannot reach it."""
    case = next(c for c in select_cases("q8_0", "dequantize") if c.expect == "values")
    blocks = np.array(case.inputs["blocks"])
    p = q8_0.prepare(blocks=blocks, **case.params)
    before = q8_0.dequantize_prepared(p).numpy().copy()
    blocks[:] = 0
    assert np.array_equal(q8_0.dequantize_prepared(p).numpy(), before, equal_nan=True)


def test_prepared_matmul_takes_float16_x_only():
    """KC-7.2: the prepared call converts nothing; float32 x is refused, not copied."""
    _, p, _ = _first_valid("q4_k", "q4_k")
    with pytest.raises(QFormatsError) as exc:
        q4_k.matmul_prepared(p, torch.zeros((1, p.n), dtype=torch.float32))
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("tensor.dtype", "x", "float32 on cpu")


def test_the_guard_refuses_host_work_in_kernel_code():
    """The guard is not vacuous: the per-call float16 check the batched path used to run (a reduction and a
    bool() sync, reference_kernels.q8_0._fp16_safe) raises inside it."""
    _, p, _ = _first_valid("q8_0", "q8_0")
    with pytest.raises(strict.HostWork, match=r"host work in the prepared path \(KC-7.2\): \w+ at .*q8_0.py"):
        with strict.no_host_work():
            q8_0._fp16_safe(p.blocks)


def test_the_guard_counts_allocations():
    """Two prepared calls in one guarded block allocate two tensors: the guard refuses the second."""
    _, p, _ = _first_valid("spqr", "spqr")
    with pytest.raises(strict.HostWork, match="allocated 2 tensors"):
        with strict.no_host_work():
            spqr.dequantize_prepared(p)
            spqr.dequantize_prepared(p)


def test_gptq_prepare_refuses_an_unknown_version():
    case = next(c for c in select_cases("gptq_v2", "dequantize") if c.expect == "values")
    with pytest.raises(QFormatsError) as exc:
        gptq.prepare(**case.inputs, **case.params, version="v3")
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("argument.invalid", "version", "v3")
