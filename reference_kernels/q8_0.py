"""llama.cpp q8_0 in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_legacy.md LEG-6).

Reads top to bottom: entry points, load-time preparation (checks and the planes), the one device function
that reads a tile of weights from the planes; the prepared layer, launchers, kernels and tile plans are shared
by the ggml block types (``_superblock.py``, KC-7.5).

Block geometry (LEG-6.1, ``block_q8_0`` in ggml-common.h): 34 bytes = 2 (d) + 32 (qs) for 32 weights; weight
``l`` of a block is ``qs[l]``, a signed byte::

    byte   0      2                                  34
           | d    | qs[0] qs[1] ...          qs[31] |
             fp16   int8, two's complement

Numerics (LEG-6.2, ``dequantize_row_q8_0`` in ggml-quants.c): ``y = qs[l] * d`` in float32. ``|qs| <= 128``
(8 bits) times an 11-bit float16 significand is exact in float32, subnormal ``d`` included, so the
float32 value is the product; ``dequantize`` returns it rounded once to float16. Blocks with inf/NaN
``d`` (invalid, GGML-3.1) are evaluated like ggml does (``0 * inf`` is NaN). The batched matmul
rounds W once to float16 for tensor cores (QF-4.6) only where every block's ``128 |d|`` fits
float16; otherwise it multiplies float32 operands.

Planes (KC-7.5), made at prepare from the same bytes (the blocks are 34 bytes, so ``qs`` is 4-byte aligned
in every other block only): the codes ``(K / 4, rows)`` int32, the bytes ``qs`` as 8-bit fields along K
(two's complement, sign-extended in the kernel), and ``d`` ``(K / 32, rows)`` float16. A K step of ``BK``
rows reads ``BK / 4`` words and ``BK / 32`` scales per column; ``K`` is a multiple of 32, not of ``BK``,
so the last step is masked.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._arrays import Inputs, checked_blocks
from . import _superblock as superblock
from ._prepared import block_entries
from ._splitk import codes_tile
from ._superblock import codes_plane, fp16_plane

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

QK8_0, BLOCK_BYTES = 32, 2 + 32


# -- entry points (DESIGN.md §6) and load-time preparation (KC-7) ---------------------------------------

Prepared = superblock.Prepared
dequantize_prepared = superblock.dequantize_prepared
matmul_prepared = superblock.matmul_prepared


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    b = checked_blocks(inputs.t["blocks"], rows, n, "q8_0", QK8_0, BLOCK_BYTES)
    return Prepared(b, rows, n, _planes(b, rows, n), _values, _fp16_safe(b), "q8_0")


def _planes(blocks: torch.Tensor, rows: int, n: int) -> tuple[torch.Tensor, ...]:
    """codes, d (module docstring): weight ``l`` of block ``b`` at row ``32 b + l``."""
    b = blocks.reshape(rows, n // QK8_0, BLOCK_BYTES)
    return codes_plane(b[..., 2:], 8), fp16_plane(b, 0)


dequantize, matmul, prepare = block_entries(_prepare, dequantize_prepared, matmul_prepared)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 128 |d| <= 65504 for every block: W fits float16 (else the matmul keeps it in float32).
    Non-finite d (invalid blocks) also takes the float32 path, evaluated as ggml does."""
    d = blocks.reshape(-1, BLOCK_BYTES)[:, :2].contiguous().view(torch.float16).float().abs()
    return bool((128 * d <= 65504).all()) if d.numel() else True


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _values(codes, d_ptr, c, d, e, f, r0, n, K, N, BK: tl.constexpr, BN: tl.constexpr):
    """The float32 tile ``W^T[r0 .. r0 + BK, n]``: ``qs * d``, exact; zero past ``K``. Each block's ``d`` is
    loaded once and broadcast over its 32 weights."""
    q = codes_tile(codes, r0, n, N, K // 4, 8, BN, BK)
    q = (q ^ 128) - 128                                              # the byte as int8
    s = r0 // 32 + tl.arange(0, BK // 32)
    scale = tl.load(d_ptr + s[:, None] * N + n[None, :], mask=(s < K // 32)[:, None] & (n < N)[None, :],
                    other=0.0).to(tl.float32)
    w = tl.reshape(q, (BK // 32, 32, BN)).to(tl.float32) * scale[:, None, :]
    return tl.reshape(w, (BK, BN))
