"""AWQ GEMM conformance cases (spec/awq.md AWQ-8): readers (dequantize, matmul) and packers (pack).

Layouts (K rows, group size, N output columns); N = 40 is five words, not a multiple of 32::

    g-1   64   -1    40   one group
    g32   64   32    64   2 groups
    g64   128  64    40   2 groups
    g128  256  128   64   2 groups

Codes 0 and 15 and zero points 0 and 15 are present in every layer; scales are float16.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ...cases import Case, judge_packed
from . import codec

__all__ = ["cases", "reference", "judge_pack", "FORMATS"]

FORMATS = ("awq_gemm",)
LAYOUTS = (("g-1", 64, -1, 40), ("g32", 64, 32, 64), ("g64", 128, 64, 40), ("g128", 256, 128, 64))
TENSORS = ("qweight", "qzeros", "scales")


def _logical(case_id: str, k: int, group_size: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(case_id.encode()))
    g = 1 if group_size == -1 else k // group_size
    codes = rng.integers(0, 16, (k, n), dtype=np.int32)
    codes[0, 0], codes[-1, -1] = 0, 15
    zeros = rng.integers(0, 16, (g, n), dtype=np.int32)
    zeros[0, 0], zeros[-1, -1] = 0, 15
    scales = rng.uniform(2.0 ** -10, 0.25, (g, n)).astype(np.float16)
    return {"codes": codes, "zeros": zeros, "scales": scales}


def _packed(t: dict[str, np.ndarray], group_size: int) -> dict[str, np.ndarray]:
    layer = codec.pack(t["codes"], t["zeros"], t["scales"], group_size=group_size)
    return {name: np.asarray(layer.tensors[name]) for name in TENSORS}


def cases() -> Iterator[Case]:
    """Every reference-made AWQ case, in a fixed order."""
    for name, k, group_size, n in LAYOUTS:
        t = _logical(f"awq_gemm/{name}", k, group_size, n)
        feats = ("bits:4", f"group_size:{group_size}", f"n:{n}", "zero:0", "zero:15")
        yield Case(id=f"awq_gemm/read/{name}", format="awq_gemm", ops=("dequantize", "matmul"),
                   inputs=_packed(t, group_size), params={"group_size": group_size},
                   clauses=("AWQ-2.3", "AWQ-3.1"), features=feats, aux=t)
        yield Case(id=f"awq_gemm/pack/{name}", format="awq_gemm", ops=("pack",), inputs=t,
                   params={"group_size": group_size}, clauses=("AWQ-2.3", "AWQ-3.2"), features=feats)
    yield from _signed_zero_cases()
    yield from _invalid_cases()


def _signed_zero_cases() -> Iterator[Case]:
    """KC-2.4: ``s * (q - z)`` is -0.0 where q = z and s < 0, and where s = +0 and q < z (AWQ-3.1)."""
    for kind in ("negative_scales", "zero_scales"):
        t = _logical(f"awq_gemm/signed_zeros_{kind}", 64, 32, 64)
        t["zeros"][:, ::2] = t["codes"][0, ::2]             # q = z on row 0 of each group's even columns
        t["zeros"][:, 1::2] = 15                            # q <= z on the odd columns
        if kind == "negative_scales":
            t["scales"] = -t["scales"]
        else:
            t["scales"][:, 1::2] = 0.0
        yield Case(id=f"awq_gemm/read/g32_signed_zeros_{kind}", format="awq_gemm", ops=("dequantize",),
                   inputs=_packed(t, 32), params={"group_size": 32}, clauses=("KC-2.4", "AWQ-3.1"),
                   features=("bits:4", "group_size:32", "n:64", "zeros:signed"), aux=t)


# Non-conforming layers, one per MUST-reject rule (the validating level, KC-4.2): (name, clause, description).
INVALID = (
    ("scales_nan", "AWQ-3.3", "a NaN scale"),
    ("scales_inf", "AWQ-3.3", "an infinite scale"),
    ("scales_float32", "AWQ-2.1", "scales stored as float32, not float16"),
    ("scales_rows", "AWQ-2.2", "scales with G + 1 rows"),
    ("qzeros_columns", "AWQ-2.2", "qzeros one word short of N / 8"),
    ("qweight_int64", "AWQ-2.1", "qweight stored as int64, not int32"),
    ("group_size_not_dividing", "AWQ-2.2", "group size 48, which does not divide K = 64"),
)


def _spoiled(tensors: dict[str, np.ndarray], name: str) -> tuple[dict[str, np.ndarray], int]:
    """The g32 layer (K 64, N 64) with one rule broken; returns the tensors and the group size of the call."""
    out = {k: np.array(v) for k, v in tensors.items()}
    if name == "scales_nan":
        out["scales"][1, 17] = np.nan
    elif name == "scales_inf":
        out["scales"][0, 3] = -np.inf
    elif name == "scales_float32":
        out["scales"] = out["scales"].astype(np.float32)
    elif name == "scales_rows":
        out["scales"] = np.concatenate([out["scales"], out["scales"][-1:]])
    elif name == "qzeros_columns":
        out["qzeros"] = np.ascontiguousarray(out["qzeros"][:, :-1])
    elif name == "qweight_int64":
        out["qweight"] = out["qweight"].astype(np.int64)
    return out, 48 if name == "group_size_not_dividing" else 32


def _invalid_cases() -> Iterator[Case]:
    for name, clause, description in INVALID:
        t = _logical(f"awq_gemm/invalid/{name}", 64, 32, 64)
        tensors, group_size = _spoiled(_packed(t, 32), name)
        yield Case(id=f"awq_gemm/read/invalid/g32_{name}", format="awq_gemm", ops=("dequantize", "matmul"),
                   inputs=tensors, params={"group_size": group_size}, clauses=(clause, "KC-4.2"),
                   features=("bits:4", "group_size:32", "n:64", "input:nonconforming"), expect="reject",
                   aux={**t, "nominal_shape": np.array([64, 64], np.int64)},
                   description=f"non-conforming: {description} ({clause})")


def logical_weight(t) -> np.ndarray:
    """``s * (q - z)`` from the logical arrays, (out, in) float32, without packing (AWQ-3.1)."""
    k, g = t["codes"].shape[0], t["scales"].shape[0]
    rows = np.arange(k) // (k // g)
    w = t["scales"].astype(np.float32)[rows] * (t["codes"].astype(np.float32) - t["zeros"].astype(np.float32)[rows])
    return np.ascontiguousarray(w.T)


def reference(case: Case) -> np.ndarray:
    """The spec reader's decode of a read case; the logical value of a pack case."""
    if "pack" in case.ops:
        return logical_weight(case.inputs)
    if case.expect == "reject":                                 # what the spoiled layer meant
        return logical_weight(case.aux)
    return codec.dequantize(dict(case.inputs), group_size=case.params["group_size"])


def judge_pack(case: Case, op: str, arrays: dict[str, np.ndarray], kind: str) -> tuple[str, str]:
    """A packer's answer: a layer that decodes to ``s * (q - z)`` of its inputs (AWQ-3.2); byte identity
    with the reference packer reported as the higher level."""
    gs = case.params["group_size"]
    return judge_packed(arrays, kind, TENSORS, decode=lambda layer: codec.dequantize(layer, group_size=gs),
                        expected=reference(case), reference_packed=lambda: _packed(dict(case.inputs), gs))
