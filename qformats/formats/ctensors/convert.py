"""Lossless conversion between compressed-tensors pack-quantized, GPTQ v2 and AWQ GEMM (CT-4).

A GPTQ v2 layer and a pack-quantized layer hold the same weight when the unsigned code is
``q + 2^(b-1)`` and the zero point ``zp + 2^(b-1)`` (``2^(b-1)`` for a symmetric layer), the scales are
the same float16 numbers and the groups are the same rows. Anything else is refused with the reason:
widths GPTQ lacks (1, 5, 6, 7), scales float16 cannot hold exactly, groups that do not divide K, and
act-order (compressed-tensors 0.20 does not read ``weight_g_idx``, CT-2.4).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import fail
from . import codec

__all__ = ["to_gptq", "from_gptq", "to_awq", "from_awq", "to_dense"]

GPTQ_BITS = (2, 3, 4, 8)


def _refuse(tensor: str, constraint: str, actual: Any) -> Exception:
    return fail("ctensors.convert.unrepresentable", tensor, constraint, actual)


def _float16_scales(scales: np.ndarray) -> np.ndarray:
    s16 = scales.astype(np.float16)
    lost = s16.astype(np.float32) != scales.astype(np.float32)
    if lost.any():
        idx = [int(i) for i in np.argwhere(lost)[0]]
        raise _refuse("weight_scale", "exactly representable in float16 (GPTQ and AWQ store float16 scales, CT-4.1)",
                      f"{float(scales[tuple(idx)])!r} at {idx} ({int(lost.sum())} scales)")
    return s16


def to_gptq(layer: Any, *, num_bits: int, version: str = "v2", layout: str = "dense") -> Any:
    """The same weights as a GPTQ layer (CT-4.1); v2 always where representable, v1 refuses zero 0 (GPTQ-3.4).
    ``layout`` is the source's bit layout (CT-2.3 dense, CT-2.6 per word)."""
    from .. import gptq

    t = codec.checked_tensors(layer, num_bits, layout=layout)
    if num_bits not in GPTQ_BITS:
        raise _refuse("num_bits", "2, 3, 4 or 8 (the GPTQ widths, CT-4.1)", num_bits)
    if "weight_g_idx" in t:
        raise _refuse("weight_g_idx", "absent (act-order layers are not converted, CT-4.1)", "present")
    if t["in"] * num_bits % 32 or t["out"] * num_bits % 32:
        raise _refuse("weight_shape", f"in and out features filling whole words at {num_bits} bits (GPTQ-2.4)",
                      [t["out"], t["in"]])
    q, z = codec.unpack(layer, num_bits=num_bits, layout=layout)
    offset = 1 << (num_bits - 1)
    zeros = np.full((t["out"], t["groups"]), offset, np.int64) if z is None else z.astype(np.int64) + offset
    return gptq.pack((q.astype(np.int64) + offset).T, zeros.T, _float16_scales(t["weight_scale"]).T,
                     bits=num_bits, version=version, group_size=t["group_size"])


def to_dense(layer: Any, *, num_bits: int) -> dict[str, np.ndarray]:
    """CT-4.5: one module's per-word ``weight_packed`` and ``weight_zero_point`` (CT-2.6) as the dense layout
    writes them (CT-2.3). The stored fields are moved, not decoded: codes, zero points and every other tensor
    stay as they were; bits outside the fields (padding) are not carried."""
    t = codec.checked_tensors(layer, num_bits, layout="word")
    out = {"weight_packed": codec.pack_dense(codec.unpack_words(t["weight_packed"], num_bits, t["in"]), num_bits)}
    if "weight_zero_point" in t:
        zp = codec.unpack_words(t["weight_zero_point"].T, num_bits, t["out"])
        out["weight_zero_point"] = np.ascontiguousarray(codec.pack_dense(zp, num_bits).T)
    return out


def from_gptq(layer: Any, *, bits: int, version: str, group_size: int | None = None,
              symmetric: bool | None = None) -> codec.CTLayer:
    """A GPTQ layer as pack-quantized (CT-4.2). ``symmetric`` None: symmetric exactly when every zero point
    is 2^(b-1) (then no zero point is stored); True refuses other zero points."""
    from .. import gptq
    from ..gptq import checks as gchecks

    dims, t = gchecks.checked_tensors(layer, bits, group_size)
    gs = dims.group_size
    if gs != -1 and dims.in_features % gs:
        raise _refuse("group_size", f"a divisor of in_features {dims.in_features} (compressed-tensors has no "
                      "short last group, CT-2.2)", gs)
    if not gchecks.is_trivial_g_idx(t["g_idx"], gs):
        raise _refuse("g_idx", "trivial (act-order layers are not converted, CT-4.2)", "a permuted g_idx")
    codes, zeros = gptq.unpack(t, bits=bits, version=version, group_size=gs)
    offset = 1 << (bits - 1)
    centred = bool((zeros == offset).all())
    if symmetric and not centred:
        raise _refuse("qzeros", f"all {offset} for a symmetric layer (CT-4.2)", "other zero points")
    zp = None if (centred and symmetric is not False) else (zeros.T.astype(np.int64) - offset)
    return codec.pack(codes.T.astype(np.int64) - offset, t["scales"].T, num_bits=bits,
                      group_size=None if gs == -1 else gs, zero_points=zp)


def to_awq(layer: Any, *, num_bits: int) -> Any:
    """The same weights as AWQ GEMM (CT-4.3): 4-bit only, out_features a multiple of 8."""
    from .. import awq

    if num_bits != 4:
        raise _refuse("num_bits", "4 (AWQ GEMM stores 4-bit codes only, CT-4.3)", num_bits)
    g = to_gptq(layer, num_bits=4)
    return awq.from_gptq(g, bits=4, version="v2")


def from_awq(layer: Any, *, group_size: int | None = None, symmetric: bool | None = None) -> codec.CTLayer:
    """An AWQ GEMM layer as pack-quantized 4-bit (CT-4.3)."""
    from .. import awq

    g = awq.to_gptq(layer, group_size=group_size)
    return from_gptq(g, bits=4, version="v2", symmetric=symmetric)
