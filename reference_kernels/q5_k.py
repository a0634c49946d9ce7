"""llama.cpp q5_K in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_kquants.md KQ-5).

Reads top to bottom: entry points, load-time preparation (checks and the planes), the one device function
that reads a tile of weights from the planes; the prepared layer, launchers, kernels and tile plans are shared
by the ggml block types (``_superblock.py``, KC-7.5).

Block geometry (KQ-5.1, ``block_q5_K`` in ggml-common.h): 176 bytes = 2 (d) + 2 (dmin) + 12 (scales) + 32 (qh)
+ 128 (qs) for 256 weights in 8 sub-blocks of 32::

    byte   0      2      4             16          48                  176
           | d    | dmin | scales[12]  | qh[32]    | qs[128]           |
             fp16   fp16   6-bit pairs   high bits   low nibbles

Weight ``i`` of a block is in sub-block ``j = i // 32`` at ``l = i % 32``; its 5-bit code is nibble
``j % 2`` of ``qs[32 * (j // 2) + l]`` plus 16 times bit ``j`` of ``qh[l]`` (``dequantize_row_q5_K``,
ggml-quants.c: masks ``u1 = 1 << 2(j // 2)``, ``u2 = 2 << 2(j // 2)``). The 6-bit scale and min of
sub-block ``j`` are packed as q4_K's (``get_scale_min_k4``)::

    j < 4:  sc = s[j] & 63                          m = s[j + 4] & 63
    j >= 4: sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4     m = (s[j + 4] >> 4) | (s[j] >> 6) << 4

Numerics (KQ-5.2): ``y = (d * sc) * q - dmin * m``. ``d * sc`` and ``dmin * m`` are exact in float32, so is
``(d * sc) * q`` (11 + 6 + 5 bits); the one rounding is the subtraction, with or without FMA. The
float32 value is bit-identical to ``dequantize_row_q5_K``; ``dequantize`` returns it rounded once to
float16. Blocks with inf/NaN ``d``/``dmin`` (invalid, GGML-3.1) are evaluated like ggml does. The
batched matmul rounds W once to float16 for tensor cores (QF-4.6) only where every block's
``63 * (31 |d| + |dmin|)`` fits float16; otherwise it multiplies float32 operands.

Planes (KC-7.5), made at prepare from the same bytes: the low nibbles ``(K / 8, rows)`` int32 (4-bit fields
along K), the high bits ``(K / 32, rows)`` int32 (bit ``l`` of word ``8 b + j`` is bit ``j`` of ``qh[l]`` of
block ``b``: one word per sub-block), ``sc`` and ``m`` ``(K / 32, rows)`` uint8 (unpacked once), ``d`` and
``dmin`` ``(K / 256, rows)`` float16. A K step of ``BK`` rows reads ``BK / 8 + BK / 32`` words and
``BK / 32`` scale and min bytes per column: the block's 176 bytes per 256 weights.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._arrays import Inputs, checked_blocks
from . import _superblock as superblock
from ._prepared import block_entries
from ._splitk import codes_tile
from ._superblock import affine_tile, codes_plane, fp16_plane, k_plane, scale_min_k4

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

QK_K, BLOCK_BYTES = 256, 2 + 2 + 12 + 256 // 8 + 256 // 2


# -- entry points (DESIGN.md §6) and load-time preparation (KC-7) ---------------------------------------

Prepared = superblock.Prepared
dequantize_prepared = superblock.dequantize_prepared
matmul_prepared = superblock.matmul_prepared


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    b = checked_blocks(inputs.t["blocks"], rows, n, "q5_k", QK_K, BLOCK_BYTES)
    return Prepared(b, rows, n, _planes(b, rows, n), _values, _fp16_safe(b), "q5_k")


def _planes(blocks: torch.Tensor, rows: int, n: int) -> tuple[torch.Tensor, ...]:
    """low nibbles, high bits, sc, m, d, dmin (module docstring)."""
    b = blocks.reshape(rows, n // QK_K, BLOCK_BYTES)
    qs = b[..., 48:].reshape(rows, n // QK_K, 4, 1, 32)
    low = torch.cat([qs & 15, qs >> 4], dim=3)                       # (rows, nb, t, nibble, l): row order
    j = torch.arange(8, device=b.device).view(1, 1, 8, 1)
    high = (b[..., 16:48].reshape(rows, n // QK_K, 1, 32).to(torch.int32) >> j) & 1   # (rows, nb, j, l)
    sc, m = scale_min_k4(b[..., 4:16])
    return codes_plane(low, 4), codes_plane(high, 1), k_plane(sc), k_plane(m), fp16_plane(b, 0), fp16_plane(b, 2)


dequantize, matmul, prepare = block_entries(_prepare, dequantize_prepared, matmul_prepared)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 63 * (31 |d| + |dmin|) <= 65504 for every block: W fits float16 (else the matmul keeps it
    in float32). Non-finite d/dmin (invalid blocks) also take the float32 path, evaluated as ggml does."""
    dm = blocks.reshape(-1, BLOCK_BYTES)[:, :4].contiguous().view(torch.float16).float().abs()
    return bool((63 * (31 * dm[:, 0] + dm[:, 1]) <= 65504).all()) if dm.numel() else True


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _values(low, high, sc, m, d, dmin, r0, n, K, N, BK: tl.constexpr, BN: tl.constexpr):
    """The float32 tile ``W^T[r0 .. r0 + BK, n]`` (one super-block): ``(d * sc) * q - dmin * m``, ``q`` the
    low nibble plus 16 times the high bit."""
    q = codes_tile(low, r0, n, N, K // 8, 4, BN, BK) | (codes_tile(high, r0, n, N, K // 32, 1, BN, BK) << 4)
    return affine_tile(q, sc, m, d, dmin, r0, n, K, N, BK, BN)
