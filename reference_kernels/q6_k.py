"""llama.cpp q6_K in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_kquants.md KQ-6).

Reads top to bottom: entry points, load-time preparation and checks, the one device function that reads a
weight; the prepared layer, launchers, kernels and tile configurations are shared by the super-block types
(``_superblock.py``).

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

The blocks are 210 bytes, so ``d`` is not 4-byte aligned: every field is read as bytes (the float16
as two byte loads and one bit cast).
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

QK_K, BLOCK_BYTES = 256, 256 // 2 + 256 // 4 + 256 // 16 + 2


# -- entry points (DESIGN.md §6) and load-time preparation (KC-7) ---------------------------------------

Prepared = superblock.Prepared
dequantize_prepared = superblock.dequantize_prepared
matmul_prepared = superblock.matmul_prepared


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    b = checked_blocks(inputs.t["blocks"], rows, n, "q6_k", QK_K, BLOCK_BYTES)
    return Prepared(b, rows, n, _values, BLOCK_BYTES, _fp16_safe(b))


dequantize, matmul, prepare = block_entries(_prepare, dequantize_prepared, matmul_prepared)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 128 * 32 |d| <= 65504 for every block: W fits float16 (else the matmul keeps it in float32).
    Non-finite d (invalid blocks) also takes the float32 path, evaluated as ggml does."""
    d = blocks.reshape(-1, BLOCK_BYTES)[:, 208:].contiguous().view(torch.float16).float().abs()
    return bool((128 * 32 * d <= 65504).all()) if d.numel() else True


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _values(blk, j, l):
    """float32 weight ``l`` of 32-weight group ``j = 4 h + t`` of the block at byte ``blk`` (all broadcast
    together), the interleave of the module docstring."""
    h = j // 4
    t = j % 4
    low = tl.load(blk + 64 * h + 32 * (t % 2) + l).to(tl.int32)                   # ql
    low = tl.where(t < 2, low & 15, low >> 4)
    high = (tl.load(blk + 128 + 32 * h + l).to(tl.int32) >> (2 * t)) & 3          # qh
    sc = tl.load(blk + 192 + 8 * h + 2 * t + l // 16).to(tl.int8, bitcast=True).to(tl.float32)
    q = ((low | (high << 4)) - 32).to(tl.float32)
    return (fp16_at(blk + 208) * sc) * q                                        # exact: no rounding
