"""llama.cpp q5_K in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_kquants.md KQ-5).

Reads top to bottom: entry points, load-time preparation and checks, the one device function that reads a
weight; the prepared layer, launchers, kernels and tile configurations are shared by the super-block types
(``_superblock.py``).

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

The blocks are 176 bytes, a multiple of 4 but read as bytes all the same (the float16 fields as two
byte loads and one bit cast), like the other ggml kernels.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._arrays import Inputs, checked_blocks
from . import _superblock as superblock
from ._prepared import block_entries
from ._superblock import fp16_at

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

QK_K, BLOCK_BYTES = 256, 2 + 2 + 12 + 256 // 8 + 256 // 2


# -- entry points (DESIGN.md §6) and load-time preparation (KC-7) ---------------------------------------

Prepared = superblock.Prepared
dequantize_prepared = superblock.dequantize_prepared
matmul_prepared = superblock.matmul_prepared


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    b = checked_blocks(inputs.t["blocks"], rows, n, "q5_k", QK_K, BLOCK_BYTES)
    return Prepared(b, rows, n, _values, BLOCK_BYTES, _fp16_safe(b))


dequantize, matmul, prepare = block_entries(_prepare, dequantize_prepared, matmul_prepared)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 63 * (31 |d| + |dmin|) <= 65504 for every block: W fits float16 (else the matmul keeps it
    in float32). Non-finite d/dmin (invalid blocks) also take the float32 path, evaluated as ggml does."""
    dm = blocks.reshape(-1, BLOCK_BYTES)[:, :4].contiguous().view(torch.float16).float().abs()
    return bool((63 * (31 * dm[:, 0] + dm[:, 1]) <= 65504).all()) if dm.numel() else True


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _values(blk, j, l):
    """float32 weight ``l`` of sub-block ``j`` of the block at byte ``blk`` (all broadcast together)."""
    lo = j < 4
    a = tl.load(blk + 4 + j).to(tl.int32)                             # s[j]
    b = tl.load(blk + 8 + j).to(tl.int32)                             # s[j + 4]
    c = tl.load(blk + 4 + tl.where(lo, j, j - 4)).to(tl.int32)        # s[j - 4] where j >= 4
    sc = tl.where(lo, a & 63, (b & 15) | ((c >> 6) << 4)).to(tl.float32)
    m = tl.where(lo, b & 63, (b >> 4) | ((a >> 6) << 4)).to(tl.float32)
    byte = tl.load(blk + 48 + 32 * (j // 2) + l).to(tl.int32)        # qs
    high = (tl.load(blk + 16 + l).to(tl.int32) >> j) & 1              # bit j of qh[l]
    q = (tl.where(j % 2 == 1, byte >> 4, byte & 15) | (high << 4)).to(tl.float32)
    return (fp16_at(blk) * sc) * q - fp16_at(blk + 2) * m          # one rounding: the subtraction
