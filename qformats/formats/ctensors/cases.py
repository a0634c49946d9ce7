"""compressed-tensors pack-quantized conformance cases (spec/compressed_tensors.md CT-8).

Every width 1..8 x symmetric/asymmetric x three layouts, N = 24 output rows (zero points packed
along N straddle words at most widths)::

    g32        K = 96   group 32     float16 scales
    g16_k80    K = 80   group 16     float16 scales; K b / 32 is not whole at odd b: padding bits
    channel    K = 37   channel      float32 scales (bfloat16 checkpoints widen to these); 37 b / 32 straddles

Codes and zero points include both ends of [-2^(b-1), 2^(b-1) - 1].
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ...cases import Case, judge_packed
from . import codec

__all__ = ["cases", "reference", "judge_pack", "FORMATS"]

FORMATS = ("ctensors_pack",)
N = 24
LAYOUTS = (("g32", 96, 32, np.float16), ("g16_k80", 80, 16, np.float16), ("channel", 37, -1, np.float32))
OUTPUTS = ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point")


def _logical(case_id: str, bits: int, k: int, group_size: int, sym: bool, dtype) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(case_id.encode()))
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    g = 1 if group_size == -1 else k // group_size
    t = {"codes": rng.integers(low, high + 1, (N, k)).astype(np.int8),
         "scales": rng.uniform(2.0 ** -10, 0.25, (N, g)).astype(dtype)}
    t["codes"][0, 0], t["codes"][-1, -1] = low, high
    if not sym:
        t["zero_points"] = rng.integers(low, high + 1, (N, g)).astype(np.int8)
        t["zero_points"][0, 0], t["zero_points"][-1, -1] = low, high
    return t


def _packed(t: dict[str, np.ndarray], bits: int, group_size: int) -> dict[str, np.ndarray]:
    layer = codec.pack(t["codes"], t["scales"], num_bits=bits, group_size=None if group_size == -1 else group_size,
                       zero_points=t.get("zero_points"))
    return {name: np.asarray(v) for name, v in layer.tensors.items()}


def cases() -> Iterator[Case]:
    """Every reference-made pack-quantized case, in a fixed order."""
    for bits in codec.BITS:
        for sym in (True, False):
            for name, k, group_size, dtype in LAYOUTS:
                cid = f"b{bits}_{'sym' if sym else 'asym'}_{name}"
                t = _logical(f"ctensors_pack/{cid}", bits, k, group_size, sym, dtype)
                feats = (f"bits:{bits}", f"sym:{str(sym).lower()}", f"group_size:{group_size}",
                         f"scales:{np.dtype(dtype).name}") + (("straddle",) if (k * bits) % 32 else ())
                clauses = ("CT-2.3", "CT-3.1") + (("CT-2.5",) if not sym else ())
                params = {"num_bits": bits, "group_size": group_size}
                yield Case(id=f"ctensors_pack/read/{cid}", format="ctensors_pack", ops=("dequantize", "matmul"),
                           inputs=_packed(t, bits, group_size), params=params, clauses=clauses, features=feats, aux=t)
                yield Case(id=f"ctensors_pack/pack/{cid}", format="ctensors_pack", ops=("pack",), inputs=t,
                           params=params, clauses=clauses + ("CT-3.2",), features=feats)
    yield from _signed_zero_cases()
    yield from _invalid_cases()


def _signed_zero_cases() -> Iterator[Case]:
    """KC-2.4: ``s * (q - zp)`` is -0.0 where q = zp and s < 0, and where s = +0 and q < zp (CT-3.1)."""
    for kind in ("negative_scales", "zero_scales"):
        t = _logical(f"ctensors_pack/signed_zeros_{kind}", 4, 96, 32, False, np.float16)
        t["zero_points"][::2] = t["codes"][::2, :1]          # q = zp at column 0 of the even rows
        t["zero_points"][1::2] = 7                           # q <= zp on the odd rows
        if kind == "negative_scales":
            t["scales"] = -t["scales"]
        else:
            t["scales"][1::2] = 0.0
        yield Case(id=f"ctensors_pack/read/b4_asym_g32_signed_zeros_{kind}", format="ctensors_pack",
                   ops=("dequantize",), inputs=_packed(t, 4, 32), params={"num_bits": 4, "group_size": 32},
                   clauses=("KC-2.4", "CT-3.1"),
                   features=("bits:4", "sym:false", "group_size:32", "scales:float16", "zeros:signed"), aux=t)


# Non-conforming layers, one per MUST-reject rule (the validating level, KC-4.2): (name, clause, description).
INVALID = (
    ("scales_nan", "CT-3.3", "a NaN scale"),
    ("scales_inf", "CT-3.3", "an infinite scale"),
    ("scale_columns", "CT-2.2", "weight_scale with G + 1 columns for group size 32"),
    ("group_size_not_dividing", "CT-2.2", "group size 40, which does not divide K = 96"),
    ("packed_words", "CT-2.3", "weight_packed one word short of ceil(K b / 32)"),
    ("zero_point_rows", "CT-2.5", "weight_zero_point one word row short of ceil(N b / 32)"),
    ("packed_int64", "CT-2.1", "weight_packed stored as int64, not int32"),
    ("num_bits_9", "CT-2.3", "num_bits 9: widths are 1 to 8"),
)


def _spoiled(tensors: dict[str, np.ndarray], name: str) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The 4-bit asymmetric g32 layer (K 96) with one rule broken; returns the tensors and the call's params."""
    out = {k: np.array(v) for k, v in tensors.items()}
    params = {"num_bits": 9 if name == "num_bits_9" else 4, "group_size": 40 if name == "group_size_not_dividing" else 32}
    if name == "scales_nan":
        out["weight_scale"][3, 1] = np.nan
    elif name == "scales_inf":
        out["weight_scale"][0, 2] = np.inf
    elif name == "scale_columns":
        out["weight_scale"] = np.ascontiguousarray(np.concatenate([out["weight_scale"], out["weight_scale"][:, -1:]], 1))
    elif name == "packed_words":
        out["weight_packed"] = np.ascontiguousarray(out["weight_packed"][:, :-1])
    elif name == "zero_point_rows":
        out["weight_zero_point"] = np.ascontiguousarray(out["weight_zero_point"][:-1])
    elif name == "packed_int64":
        out["weight_packed"] = out["weight_packed"].astype(np.int64)
    return out, params


def _invalid_cases() -> Iterator[Case]:
    for name, clause, description in INVALID:
        t = _logical(f"ctensors_pack/invalid/{name}", 4, 96, 32, False, np.float16)
        tensors, params = _spoiled(_packed(t, 4, 32), name)
        yield Case(id=f"ctensors_pack/read/invalid/b4_asym_g32_{name}", format="ctensors_pack",
                   ops=("dequantize", "matmul"), inputs=tensors, params=params, clauses=(clause, "KC-4.2"),
                   features=("bits:4", "sym:false", "group_size:32", "scales:float16", "input:nonconforming"),
                   expect="reject", aux={**t, "nominal_shape": np.array([N, 96], np.int64)},
                   description=f"non-conforming: {description} ({clause})")


def logical_weight(t, bits: int) -> np.ndarray:
    """``s * (q - zp)`` from the signed logical arrays, (out, in) float32 (CT-3.1)."""
    q = t["codes"].astype(np.float32)
    g = t["scales"].shape[1]
    cols = np.repeat(np.arange(g), q.shape[1] // g)
    if "zero_points" in t:
        q = q - t["zero_points"].astype(np.float32)[:, cols]
    return np.ascontiguousarray(q * t["scales"].astype(np.float32)[:, cols])


def reference(case: Case) -> np.ndarray:
    if "pack" in case.ops:
        return logical_weight(case.inputs, case.params["num_bits"])
    if case.expect == "reject":                                 # what the spoiled layer meant
        return logical_weight(case.aux, 4)
    return codec.dequantize(dict(case.inputs), num_bits=case.params["num_bits"], group_size=case.params["group_size"])


def _written(layer: dict[str, np.ndarray], bits: int) -> np.ndarray:
    """A writer's layer decoded, after its padding bits are held to zero (CT-2.3)."""
    codec.check_padding(codec.checked_tensors(layer, bits), bits)
    return codec.dequantize(layer, num_bits=bits)


def judge_pack(case: Case, op: str, arrays: dict[str, np.ndarray], kind: str) -> tuple[str, str]:
    """A packer's answer: tensors that decode to ``s * (q - zp)`` of its inputs (CT-3.2); byte identity with
    the reference packer (compressed-tensors' own layout) reported as the higher level."""
    wanted = OUTPUTS[:3] + (("weight_zero_point",) if "zero_points" in case.inputs else ())
    bits, gs = case.params["num_bits"], case.params["group_size"]
    return judge_packed(arrays, kind, wanted, decode=lambda layer: _written(layer, bits),
                        expected=reference(case), reference_packed=lambda: _packed(dict(case.inputs), bits, gs))
