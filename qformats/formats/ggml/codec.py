"""Row-level entry points of the family: limits checked before any allocation, then one type's codec.

``blocks`` are uint8 ``(rows, n // block_size * type_size)`` as a GGUF tensor's rows are
(``GGUFFile.tensor_rows``); decoded weights are float32 ``(rows, n)`` (spec/ggml.md GGML-1, GGML-2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import fail
from ...tensors import as_array
from .base import F32, BlockType
from .checks import first_bad_scale, spread

__all__ = ["check_blocks", "dequantize", "check_input", "quantize", "resolve"]


def resolve(t: BlockType | str) -> BlockType:
    if isinstance(t, BlockType):
        return t
    from . import block_type

    return block_type(t)


def check_blocks(t: BlockType | str, blocks: Any, *, tensor: str = "blocks", n: int | None = None,
                 finite: bool = True) -> np.ndarray:
    """The blocks as a uint8 ``(rows, row bytes)`` array, or QFormatsError (GGML-1.1, GGML-3.1).

    With ``n`` the row length must be ``n // block_size * type_size`` bytes; otherwise a positive
    multiple of ``type_size``. ``finite=False`` skips GGML-3.1, for decoders that evaluate blocks
    with non-finite scales as ggml does.
    """
    bt = resolve(t)
    arr = as_array(blocks, tensor)
    if arr.dtype != np.uint8:
        raise fail("ggml.blocks.dtype", tensor, f"uint8 {bt.name} blocks", arr.dtype.name)
    if arr.ndim != 2:
        raise fail("ggml.blocks.shape", tensor, f"2-D (rows, n // {bt.block_size} * {bt.type_size})",
                   tuple(arr.shape))
    if n is not None:
        check_row_length(bt, n, "n")
        want = n // bt.block_size * bt.type_size
        if arr.shape[1] != want:
            raise fail("ggml.blocks.shape", tensor, f"of shape ({arr.shape[0]}, {want}) for {bt.name} and n = {n}",
                       tuple(arr.shape))
    elif arr.shape[1] == 0 or arr.shape[1] % bt.type_size:
        raise fail("ggml.blocks.shape", tensor, f"rows of a positive multiple of {bt.type_size} bytes ({bt.name})",
                   tuple(arr.shape))
    if finite:
        bad = first_bad_scale(bt, arr)
        if bad is not None:
            field, r, b, label = bad
            raise fail("ggml.scale.nonfinite", tensor, f"{bt.name} blocks with finite {field}",
                       f"{field} = {label} in block {b} of row {r}{spread(bt, arr)}")
    return arr


def check_row_length(bt: BlockType, n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0 or n % bt.block_size:
        raise fail("ggml.n.not_multiple", what, f"a positive multiple of {bt.block_size} ({bt.name})", n)
    return int(n)


def dequantize(t: BlockType | str, blocks: Any, *, strict: bool = False) -> np.ndarray:
    """uint8 ``(rows, row bytes)`` -> float32 ``(rows, n)``, bit-identical to ggml's ``dequantize_row_*``.

    Blocks with non-finite scales are evaluated as ggml evaluates them (GGML-3.1 says they are
    invalid; the values are informative) unless ``strict=True``, which rejects them first.
    """
    bt = resolve(t)
    arr = check_blocks(bt, blocks, tensor="blocks", finite=strict)
    rows, nbytes = arr.shape
    nb = nbytes // bt.type_size
    flat = arr.reshape(rows * nb, bt.type_size)
    step = max(1, DECODE_CHUNK_BYTES // bt.type_size)
    with np.errstate(all="ignore"):         # inf * 0 and friends in invalid blocks, as in C
        # one call, the type's own output, no copy: when it fits one pass, or when the decoder bounds its
        # temporaries by passes of its own (``bounded_passes``, kmachinery_qkx.py)
        if rows * nb <= step or getattr(bt.decode, "bounded_passes", False):
            return bt.decode(flat).astype(bt.out_dtype, copy=False).reshape(rows, nb * bt.block_size)
        out = np.empty((rows * nb, bt.block_size), bt.out_dtype)
        for start in range(0, rows * nb, step):
            part = slice(start, start + step)
            out[part] = bt.decode(flat[part])
    return out.reshape(rows, nb * bt.block_size)


# Input bytes per decode pass: bounds the intermediates of one pass. 256 KiB keeps them in the caches and reused:
# on 16.8M weights iq2_xxs 46.0 -> 33.7 ms, iq4_nl 39.9 -> 31.3, mxfp4 31.5 -> 27.7 against 8 MiB passes, the
# 4.2M figures within noise (2026-11-29, thread CPU time); 64 KiB is no better.
DECODE_CHUNK_BYTES = 1 << 18


def check_input(t: BlockType | str, x: Any, *, tensor: str = "x") -> np.ndarray:
    """Encoder input: float32 ``(rows, n)``, ``n`` a positive multiple of the block size (GGML-4.1)."""
    bt = resolve(t)
    arr = as_array(x, tensor)
    if arr.dtype.kind != "f" or arr.dtype.itemsize != 4:
        raise fail("ggml.input.dtype", tensor, "float32", arr.dtype.name)
    if arr.ndim != 2:
        raise fail("ggml.input.shape", tensor, "2-D (rows, n)", tuple(arr.shape))
    check_row_length(bt, arr.shape[1], tensor)
    return np.ascontiguousarray(arr, F32)


def quantize(t: BlockType | str, x: Any, importance: Any = None) -> np.ndarray:
    """float32 ``(rows, n)`` -> uint8 ``(rows, n // block_size * type_size)`` (GGML-4).

    Byte-identical to ggml's ``quantize_<type>(x, y, rows, n, importance)``: without ``importance``
    the reference path (``quantize_row_*_ref``) for types that have one, with it the importance path.
    """
    bt = resolve(t)
    if bt.quantize is None:
        raise fail("ggml.encoder.missing", "type", "a type with a reference encoder (spec says which)", bt.name)
    arr = check_input(bt, x)
    w = None
    if importance is not None:
        if not bt.importance:
            raise fail("ggml.importance.unsupported", "importance", f"None: {bt.name} has no importance path",
                       "an importance vector")
        w = as_array(importance, "importance")
        if w.dtype.kind != "f" or w.dtype.itemsize != 4:
            raise fail("ggml.input.dtype", "importance", "float32", w.dtype.name)
        if w.shape != (arr.shape[1],):
            raise fail("ggml.importance.shape", "importance", f"of shape ({arr.shape[1]},)", tuple(w.shape))
        w = np.ascontiguousarray(w, F32)
    elif bt.requires_importance:
        raise fail("ggml.importance.required", "importance", f"an importance vector ({bt.name} cannot be "
                   "encoded without one, ggml_quantize_requires_imatrix)", None)
    with np.errstate(all="ignore"):         # 0/0, inf - inf: part of the C encoders' behaviour
        out = bt.quantize(arr, w)
    return out
