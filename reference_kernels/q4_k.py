"""llama.cpp q4_K in Triton: dequantize and fused dequantize-and-multiply (spec/q4_k.md).

Reads top to bottom: entry points, load-time preparation (checks and the planes), the one device function
that reads a tile of weights from the planes; the prepared layer, launchers, kernels and tile plans are shared
by the ggml block types (``_superblock.py``, KC-7.5).

Block geometry (Q4K-1.1): 144 bytes = 2 (d) + 2 (dmin) + 12 (scales) + 128 (qs) for 256 weights in
8 sub-blocks of 32. Weight ``i`` of a block is in sub-block ``j = i // 32`` at ``l = i % 32``; its
code is nibble ``j % 2`` of ``qs[32 * (j // 2) + l]`` (Q4K-1.5). The 6-bit scale and min of
sub-block ``j`` (Q4K-1.4)::

    j < 4:  sc = s[j] & 63                          m = s[j + 4] & 63
    j >= 4: sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4     m = (s[j + 4] >> 4) | (s[j] >> 6) << 4

Numerics (Q4K-3.1, Q4K-3.2): ``d*sc`` and ``dmin*m`` are exact in float32, so is ``(d*sc)*q``; the
one rounding is the subtraction, with or without FMA. The float32 value is bit-identical to
``dequantize_row_q4_K``; ``dequantize`` returns it rounded once to float16. Blocks with inf/NaN
``d``/``dmin`` (invalid, Q4K-5.4) are evaluated like llama.cpp does (Q4K-3.3). The batched matmul
rounds W once to float16 for tensor cores (QF-4.6) only where every block's ``63 * (15|d| + |dmin|)``
fits float16; otherwise (``d`` near 65504, huge rows) it multiplies float32 operands.

Planes (KC-7.5), made at prepare from the same bytes: the codes ``(K / 8, rows)`` int32, 4-bit fields
along K (weight ``i`` of a block at row ``256 b + i``); ``sc`` and ``m`` ``(K / 32, rows)`` uint8 (the
6-bit unpacking above, done once); ``d`` and ``dmin`` ``(K / 256, rows)`` float16. A K step of ``BK`` rows
and ``BN`` columns reads ``BK / 8`` code words, ``BK / 32`` scale and min bytes and one ``d``, ``dmin`` per
column: ``BK * 4.5 / 8`` bytes (with the float16 pair once per 256 rows), the block's 144 bytes per 256.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qformats.errors import fail

from ._arrays import Inputs
from . import _superblock as superblock
from ._prepared import block_entries
from ._splitk import codes_tile
from ._superblock import affine_tile, codes_plane, fp16_plane, k_plane, scale_min_k4

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

QK_K, BLOCK_BYTES = 256, 2 + 2 + 12 + 256 // 2


# -- entry points (DESIGN.md §6) and load-time preparation (KC-7) ---------------------------------------

Prepared = superblock.Prepared
dequantize_prepared = superblock.dequantize_prepared
matmul_prepared = superblock.matmul_prepared


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    b = _checked(inputs.t["blocks"], rows, n)
    return Prepared(b, rows, n, _planes(b, rows, n), _values, _fp16_safe(b), "q4_k")


def _planes(blocks: torch.Tensor, rows: int, n: int) -> tuple[torch.Tensor, ...]:
    """codes, sc, m, d, dmin (module docstring): sub-block ``2t`` is the low nibbles of ``qs[32t .. 32t + 32]``,
    ``2t + 1`` their high nibbles (Q4K-1.5)."""
    b = blocks.reshape(rows, n // QK_K, BLOCK_BYTES)
    qs = b[..., 16:].reshape(rows, n // QK_K, 4, 1, 32)
    codes = torch.cat([qs & 15, qs >> 4], dim=3)                     # (rows, nb, t, nibble, l): row order
    sc, m = scale_min_k4(b[..., 4:16])
    return codes_plane(codes, 4), k_plane(sc), k_plane(m), fp16_plane(b, 0), fp16_plane(b, 2)


dequantize, matmul, prepare = block_entries(_prepare, dequantize_prepared, matmul_prepared)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 63 * (15 * |d| + |dmin|) <= 65504 for every block: W fits float16 (else the matmul keeps it
    in float32). Non-finite d/dmin (invalid blocks) also take the float32 path, evaluated as llama.cpp does."""
    dm = blocks.reshape(-1, BLOCK_BYTES)[:, :4].contiguous().view(torch.float16).float().abs()
    return bool((63 * (15 * dm[:, 0] + dm[:, 1]) <= 65504).all()) if dm.numel() else True


def _checked(blocks: torch.Tensor, rows: int, n: int) -> torch.Tensor:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or n % QK_K:
        raise fail("q4k.n.not_multiple_of_256", "n", "a positive multiple of 256", n)
    want = (rows, n // QK_K * BLOCK_BYTES)
    if blocks.dtype != torch.uint8 or tuple(blocks.shape) != want:
        raise fail("q4k.blocks.shape", "blocks", f"uint8 of shape {want}", f"{blocks.dtype} {tuple(blocks.shape)}")
    return blocks


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _values(codes, sc, m, d, dmin, unused, r0, n, K, N, BK: tl.constexpr, BN: tl.constexpr):
    """The float32 tile ``W^T[r0 .. r0 + BK, n]`` (one super-block): ``(d * sc) * q - dmin * m``."""
    q = codes_tile(codes, r0, n, N, K // 8, 4, BN, BK)
    return affine_tile(q, sc, m, d, dmin, r0, n, K, N, BK, BN)
