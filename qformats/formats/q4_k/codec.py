"""q4_K decode and reference encode, bit-identical to llama.cpp (spec/q4_k.md, Q4K-3 .. Q4K-4).

The ``q4_k.dequantize`` / ``q4_k.quantize`` contract (DESIGN.md §3) with q4_K's own checks (Q4K-5,
the ``q4k.*`` codes); the codec itself lives with its K-quant siblings in the GGUF family
(:mod:`qformats.formats.ggml.q4k` on :mod:`qformats.formats.ggml.kmachinery_qkx`), so q4_K and q5_K
share one scale unpacking, one affine search and one decode tail. The bit-field helpers are
re-exported here under their old names for q4_K's tests and mutants.
"""

from __future__ import annotations

import numpy as np

from ...tensors import as_array
from ..ggml import q4k
from ..ggml.kmachinery_qkx import pack_codes, pack_scales, unpack_codes, unpack_scales
from .checks import check_blocks, check_importance, check_input
from .layout import BLOCK_BYTES, QK_K

__all__ = ["dequantize", "quantize", "unpack_scales", "pack_scales", "unpack_codes", "pack_codes"]


def dequantize(blocks, *, strict: bool = False) -> np.ndarray:
    """uint8 ``(rows, n // 256 * 144)`` q4_K blocks -> float32 ``(rows, n)`` (Q4K-3.1).

    Bit-identical to ggml ``dequantize_row_q4_K``: ``y = fp32(d)*sc*q - fp32(dmin)*m``.
    Blocks whose ``d`` or ``dmin`` is inf/NaN are invalid (Q4K-5.4); like llama.cpp the
    formula is still evaluated for them unless ``strict=True``, which rejects them first.
    """
    arr = as_array(blocks, "blocks")
    check_blocks(arr, tensor="blocks", finite=strict)
    rows, nbytes = arr.shape
    with np.errstate(invalid="ignore", over="ignore"):  # inf*0 in invalid blocks, as in C
        out = q4k.decode(arr.reshape(-1, BLOCK_BYTES))
    return out.reshape(rows, nbytes // BLOCK_BYTES * QK_K)


def quantize(x, importance=None) -> np.ndarray:
    """float32 ``(rows, n)``, ``n % 256 == 0`` -> uint8 q4_K blocks ``(rows, n // 256 * 144)``.

    ``importance=None``: ggml ``quantize_row_q4_K_ref`` (what ``llama-quantize`` runs without
    ``--imatrix``). ``importance``: float32 ``(n,)`` per-column weights selects
    ``quantize_row_q4_K_impl``. Both are bit-identical to llama.cpp built without FMA
    contraction (Q4K-4). Non-finite inputs are accepted and give llama.cpp's deterministic
    bytes, which may be invalid blocks (Q4K-4.5).
    """
    arr = np.ascontiguousarray(check_input(x, tensor="x"))
    if importance is None:
        return q4k.quantize_ref(arr)
    return q4k.quantize_impl(arr, np.ascontiguousarray(check_importance(importance, arr.shape[1])))
