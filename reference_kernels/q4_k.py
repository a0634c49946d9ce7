"""llama.cpp q4_K in Triton: dequantize and fused dequantize-and-multiply (spec/q4_k.md).

Reads top to bottom: entry points, load-time preparation and checks, the one device function that reads a
weight; the prepared layer, launchers, kernels and tile configurations are shared by the super-block types
(``_superblock.py``).

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
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qformats.errors import fail

from ._arrays import Inputs
from . import _superblock as superblock
from ._prepared import block_entries
from ._superblock import fp16_at

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

QK_K, BLOCK_BYTES = 256, 2 + 2 + 12 + 256 // 2


# -- entry points (DESIGN.md §6) and load-time preparation (KC-7) ---------------------------------------

Prepared = superblock.Prepared
dequantize_prepared = superblock.dequantize_prepared
matmul_prepared = superblock.matmul_prepared


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    b = _checked(inputs.t["blocks"], rows, n)
    return Prepared(b, rows, n, _values, BLOCK_BYTES, _fp16_safe(b))


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
def _values(blk, j, l):
    """float32 weight ``l`` of sub-block ``j`` of the block at byte ``blk`` (all broadcast together)."""
    lo = j < 4
    a = tl.load(blk + 4 + j).to(tl.int32)                             # s[j]
    b = tl.load(blk + 8 + j).to(tl.int32)                             # s[j + 4]
    c = tl.load(blk + 4 + tl.where(lo, j, j - 4)).to(tl.int32)        # s[j - 4] where j >= 4
    sc = tl.where(lo, a & 63, (b & 15) | ((c >> 6) << 4)).to(tl.float32)
    m = tl.where(lo, b & 63, (b >> 4) | ((a >> 6) << 4)).to(tl.float32)
    byte = tl.load(blk + 16 + 32 * (j // 2) + l).to(tl.int32)
    q = tl.where(j % 2 == 1, byte >> 4, byte & 15).to(tl.float32)
    return (fp16_at(blk) * sc) * q - fp16_at(blk + 2) * m          # one rounding: the subtraction
