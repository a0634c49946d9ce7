"""q4_K validity rules (spec/q4_k.md, Q4K-5).

llama.cpp validates q4_K data in exactly one place, ``ggml_validate_row_data``: the byte
count must be whole blocks and no block may have an inf/NaN ``d`` or ``dmin``. Every
scale pattern and every code pattern is legal, so there is nothing else to check.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import fail
from ...numerics import first_nonfinite
from ...tensors import as_array
from .layout import BLOCK_BYTES, D_OFFSET, QK_K, SCALES_OFFSET, row_bytes

__all__ = ["check_blocks", "check_input", "check_importance", "first_nonfinite_scale"]


def first_nonfinite_scale(blocks: np.ndarray) -> tuple[str, int, int, str] | None:
    """(field, row, block-in-row, value) of the first block whose d or dmin is inf/NaN."""
    rows, nbytes = blocks.shape
    blk = blocks.reshape(rows, nbytes // BLOCK_BYTES, BLOCK_BYTES)
    dm = np.ascontiguousarray(blk[:, :, D_OFFSET:SCALES_OFFSET]).view("<f2")   # (rows, nb, 2): d, dmin
    bad = first_nonfinite(dm)
    if bad is None:
        return None
    label, (r, b, k) = bad
    return ("d", "dmin")[k], r, b, label


def check_blocks(blocks: Any, *, tensor: str = "blocks", n: int | None = None, finite: bool = True) -> None:
    """Raise QFormatsError unless ``blocks`` is valid q4_K data (Q4K-5.1 .. Q4K-5.4).

    ``blocks``: uint8 ``(rows, n // 256 * 144)``. With ``n`` the row length is checked
    against it, otherwise it must be a positive multiple of 144. ``finite=False`` skips the
    inf/NaN scale rule (Q4K-5.4), for decoders that evaluate such blocks as llama.cpp does.
    """
    arr = as_array(blocks, tensor)
    if arr.dtype != np.uint8:
        raise fail("q4k.blocks.dtype", tensor, "uint8", arr.dtype.name)
    if arr.ndim != 2:
        raise fail("q4k.blocks.shape", tensor, "2-D (rows, n // 256 * 144)", tuple(arr.shape))
    if n is not None:
        want = row_bytes(n, tensor="n")
        if arr.shape[1] != want:
            raise fail("q4k.blocks.shape", tensor, f"of shape ({arr.shape[0]}, {want}) for n = {n}",
                       tuple(arr.shape))
    elif arr.shape[1] == 0 or arr.shape[1] % BLOCK_BYTES:
        raise fail("q4k.blocks.shape", tensor, f"rows of a positive multiple of {BLOCK_BYTES} bytes",
                   tuple(arr.shape))
    if finite:
        bad = first_nonfinite_scale(arr)
        if bad is not None:
            field, r, b, label = bad
            raise fail("q4k.d.nonfinite", tensor, f"blocks with finite float16 {field}",
                       f"{field} = {label} in block {b} of row {r}{_spread(arr)}")


SHOWN_BLOCKS = 3


def _spread(blocks: np.ndarray) -> str:
    """How many blocks and rows hold a non-finite d or dmin, and where the first few are."""
    rows, nbytes = blocks.shape
    dm = np.ascontiguousarray(blocks.reshape(rows, nbytes // BLOCK_BYTES, BLOCK_BYTES)[:, :, D_OFFSET:SCALES_OFFSET])
    exponent_all_ones = (dm.view("<u2") & 0x7C00) == 0x7C00              # inf or NaN, d or dmin
    bad = exponent_all_ones.any(axis=2)                                    # (rows, blocks)
    if int(bad.sum()) <= 1:
        return ""
    where = ", ".join(f"({int(r)}, {int(b)})" for r, b in np.argwhere(bad)[:SHOWN_BLOCKS])
    more = ", ..." if int(bad.sum()) > SHOWN_BLOCKS else ""
    return (f"; {int(bad.sum())} blocks in {int(bad.any(axis=1).sum())} rows are non-finite, "
            f"(row, block): {where}{more}")


def _as_float32(value: Any, tensor: str) -> np.ndarray:
    """float32 in either byte order (converted to native), anything else rejected."""
    arr = as_array(value, tensor)
    if arr.dtype.kind != "f" or arr.dtype.itemsize != 4:
        raise fail("q4k.input.dtype", tensor, "float32", arr.dtype.name)
    return arr.astype(np.float32, copy=False)


def check_input(x: Any, *, tensor: str = "x") -> np.ndarray:
    """Encoder input: float32 ``(rows, n)`` with ``n`` a positive multiple of 256 (Q4K-4.1)."""
    arr = _as_float32(x, tensor)
    if arr.ndim != 2:
        raise fail("q4k.input.shape", tensor, "2-D (rows, n)", tuple(arr.shape))
    if arr.shape[1] == 0 or arr.shape[1] % QK_K:
        raise fail("q4k.n.not_multiple_of_256", tensor, f"rows of a positive multiple of {QK_K} weights",
                   arr.shape[1])
    return arr


def check_importance(w: Any, n: int, *, tensor: str = "importance") -> np.ndarray:
    """Importance vector: float32 ``(n,)``, one weight per column (Q4K-4.6)."""
    arr = _as_float32(w, tensor)
    if arr.shape != (n,):
        raise fail("q4k.importance.shape", tensor, f"of shape ({n},)", tuple(arr.shape))
    return arr
