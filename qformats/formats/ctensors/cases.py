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
    return codec.dequantize(dict(case.inputs), num_bits=case.params["num_bits"])


def judge_pack(case: Case, op: str, arrays: dict[str, np.ndarray], kind: str) -> tuple[str, str]:
    """A packer's answer: tensors that decode to ``s * (q - zp)`` of its inputs (CT-3.2); byte identity with
    the reference packer (compressed-tensors' own layout) reported as the higher level."""
    wanted = OUTPUTS[:3] + (("weight_zero_point",) if "zero_points" in case.inputs else ())
    bits, gs = case.params["num_bits"], case.params["group_size"]
    return judge_packed(arrays, kind, wanted, decode=lambda layer: codec.dequantize(layer, num_bits=bits),
                        expected=reference(case), reference_packed=lambda: _packed(dict(case.inputs), bits, gs))
