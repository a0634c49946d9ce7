"""llama.cpp q6_K in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_kquants.md KQ-6).

Reads top to bottom: entry points, load-time preparation (checks and the planes), the one device function
that reads a tile of weights from the planes; the prepared layer, launchers, kernels and tile plans are shared
by the ggml block types (``_superblock.py``, KC-7.5).

Block geometry (KQ-6.1, ``block_q6_K`` in ggml-common.h): 210 bytes = 128 (ql) + 64 (qh) + 16 (scales) + 2 (d)
for 256 weights in 16 sub-blocks of 16, each with a signed 8-bit scale::

    byte   0             128           192              208    210
           | ql[128]     | qh[64]      | scales[16]     | d    |
             low nibbles   2-bit pairs   int8             fp16

Weight ``i = 128 h + 32 t + l`` (half ``h`` < 2, quarter ``t`` < 4, ``l`` < 32), as
``dequantize_row_q6_K`` (ggml-quants.c) interleaves them::

    low 4 bits   nibble t // 2 of ql[64 h + 32 (t % 2) + l]      (t = 0, 1: low nibble; 2, 3: high)
    high 2 bits  bits 2t, 2t + 1 of qh[32 h + l]
    scale        scales[8 h + 2 t + l // 16]
    q = low | high << 4 (0..63);   y = d * scale * (q - 32)

Numerics (KQ-6.2): ``d * scale`` (11 + 7 bits) and its product with ``q - 32`` (``|q - 32| <= 32``) are exact
in float32, so the float32 value is bit-identical to ``dequantize_row_q6_K`` in any order;
``dequantize`` returns it rounded once to float16. Blocks with inf/NaN ``d`` (invalid, GGML-3.1) are
evaluated like ggml does. The batched matmul rounds W once to float16 for tensor cores (QF-4.6) only
where every block's ``128 * 32 |d|`` fits float16; otherwise it multiplies float32 operands.

Planes (KC-7.5), made at prepare from the same bytes (the blocks are 210 bytes, so ``d`` is 4-byte aligned
in every other block only): the low nibbles ``(K / 8, rows)`` int32 (4-bit fields along K, the interleave above
undone), the high pairs ``(K / 16, rows)`` int32 (2-bit fields along K), the scales ``(K / 16, rows)`` int8
(``scales[8 h + 2 t + l // 16]`` is sub-block ``i // 16``: already in row order) and ``d`` ``(K / 256, rows)``
float16. A K step of ``BK`` rows reads ``BK / 8 + BK / 16`` words and ``BK / 16`` scale bytes per column.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._arrays import Inputs, checked_blocks
from . import _superblock as superblock
from ._prepared import block_entries
from ._splitk import codes_tile
from ._superblock import codes_plane, fp16_plane, k_plane

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

QK_K, BLOCK_BYTES = 256, 256 // 2 + 256 // 4 + 256 // 16 + 2


# -- entry points (DESIGN.md §6) and load-time preparation (KC-7) ---------------------------------------

Prepared = superblock.Prepared
dequantize_prepared = superblock.dequantize_prepared
matmul_prepared = superblock.matmul_prepared


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    b = checked_blocks(inputs.t["blocks"], rows, n, "q6_k", QK_K, BLOCK_BYTES)
    return Prepared(b, rows, n, _planes(b, rows, n), _values, _fp16_safe(b), "q6_k")


def _planes(blocks: torch.Tensor, rows: int, n: int) -> tuple[torch.Tensor, ...]:
    """low nibbles, high pairs, scales, d (module docstring), weight ``i = 128 h + 32 t + l`` at row ``i``."""
    b = blocks.reshape(rows, n // QK_K, BLOCK_BYTES)
    ql = b[..., :128].reshape(rows, n // QK_K, 2, 1, 2, 32)         # (rows, nb, h, ., t % 2, l)
    low = torch.cat([ql & 15, ql >> 4], dim=3)                       # nibble t // 2: (h, t // 2, t % 2, l)
    t = 2 * torch.arange(4, device=b.device).view(1, 1, 1, 4, 1)
    high = (b[..., 128:192].reshape(rows, n // QK_K, 2, 1, 32).to(torch.int32) >> t) & 3   # (rows, nb, h, t, l)
    scales = b[..., 192:208].contiguous().view(torch.int8)
    return codes_plane(low, 4), codes_plane(high, 2), k_plane(scales), fp16_plane(b, 208)


dequantize, matmul, prepare = block_entries(_prepare, dequantize_prepared, matmul_prepared)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 128 * 32 |d| <= 65504 for every block: W fits float16 (else the matmul keeps it in float32).
    Non-finite d (invalid blocks) also takes the float32 path, evaluated as ggml does."""
    d = blocks.reshape(-1, BLOCK_BYTES)[:, 208:].contiguous().view(torch.float16).float().abs()
    return bool((128 * 32 * d <= 65504).all()) if d.numel() else True


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _values(low, high, sc_ptr, d_ptr, e, f, r0, n, K, N, BK: tl.constexpr, BN: tl.constexpr):
    """The float32 tile ``W^T[r0 .. r0 + BK, n]`` (one super-block): ``(d * scale) * (q - 32)``, each 16-weight
    sub-block's scale loaded once and broadcast over its weights."""
    q = codes_tile(low, r0, n, N, K // 8, 4, BN, BK) | (codes_tile(high, r0, n, N, K // 16, 2, BN, BK) << 4)
    s = r0 // 16 + tl.arange(0, BK // 16)
    sc = tl.load(sc_ptr + s[:, None] * N + n[None, :], mask=(n < N)[None, :], other=0).to(tl.float32)
    d = tl.load(d_ptr + (r0 // 256) * N + n, mask=n < N, other=0.0).to(tl.float32)
    scale = d[None, :] * sc                                                    # (BK / 16, BN), exact
    w = scale[:, None, :] * (tl.reshape(q, (BK // 16, 16, BN)) - 32).to(tl.float32)   # exact: no rounding
    return tl.reshape(w, (BK, BN))
