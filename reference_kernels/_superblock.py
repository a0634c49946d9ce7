"""The kernels every 256-weight GGUF super-block type shares (q4_K, q5_K, q6_K).

Reads top to bottom: the prepared layer, launchers, kernels, tile configurations. A format module checks
its blocks, computes its float16-W bound once, and supplies its block size in bytes and one
``@triton.jit`` function ``values(blk, j, l)``: the float32 reference value of weight
``l`` of 32-weight group ``j`` of the block at byte pointer ``blk`` (all broadcast together). Everything
else (grids, the GEMV and tensor-core loops, the float16 rounding of W, QF-4.6) is the same for all of
them and lives here once; ``VALUES`` is passed as a compile-time constant, so each format gets its
own specialised kernels.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._prepared import Prepared as _Base
from ._prepared import checked_x
from ._tiles import dot_w

__all__ = ["Prepared", "dequantize_prepared", "matmul_prepared", "fp16_at"]


# -- the prepared layer (KC-7) ---------------------------------------------------------------------------

class Prepared(_Base):
    """Checked blocks ``(rows, n // 256 * block_bytes)`` of one type, its ``values`` function and whether
    every |W| fits float16 (``fp16_safe``, computed once here rather than synced on every batched call)."""

    def __init__(self, blocks: torch.Tensor, rows: int, n: int, values, block_bytes: int, fp16_safe: bool) -> None:
        self.blocks, self.rows, self.n, self.values, self.block_bytes = blocks, rows, n, values, block_bytes
        self.fp16_safe, self.device = fp16_safe, blocks.device
        self._freeze("blocks")


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """float16 ``(rows, n)``: each reference value rounded once; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.rows, p.n), dtype=torch.float16, device=p.device)
    groups = p.rows * p.n // 32
    _dequantize_kernel[(triton.cdiv(groups, GROUPS),)](p.blocks, out, groups, VALUES=p.values, BB=p.block_bytes,
                                                       SB=GROUPS)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """float16 ``x @ W.T``, float32 accumulation: a GEMV for batch 1, tensor-core tiles otherwise, where W is
    rounded to float16 only if every |W| fits (QF-4.6); no host work (KC-7.2)."""
    p.check_unchanged()
    m = checked_x(xt, p.n, p.device).shape[0]
    y = torch.empty((m, p.rows), dtype=torch.float16, device=p.device)
    if m == 1:
        _gemv_kernel[(triton.cdiv(p.rows, BLOCK_ROWS),)](xt, p.blocks, y, p.rows, p.n, VALUES=p.values,
                                                         BB=p.block_bytes, BR=BLOCK_ROWS)
    else:
        bm = 16 if m <= 16 else 64
        _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(p.rows, BLOCK_ROWS))](
            xt, p.blocks, y, m, p.rows, p.n, VALUES=p.values, BB=p.block_bytes, FP16_W=p.fp16_safe, BM=bm,
            BR=BLOCK_ROWS)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def fp16_at(ptr):
    """The little-endian float16 at byte ``ptr`` (two byte loads, one bit cast), as float32: blocks of 176
    or 210 bytes leave it unaligned."""
    lo = tl.load(ptr).to(tl.uint16)
    hi = tl.load(ptr + 1).to(tl.uint16)
    return (lo | (hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _dequantize_kernel(blocks_ptr, out_ptr, groups, VALUES: tl.constexpr, BB: tl.constexpr, SB: tl.constexpr):
    s = tl.program_id(0) * SB + tl.arange(0, SB)                      # global 32-weight group index
    live = s < groups
    s = tl.where(live, s, 0)
    l = tl.arange(0, 32)
    y = VALUES(blocks_ptr + (s // 8)[:, None] * BB, (s % 8)[:, None], l[None, :])
    tl.store(out_ptr + s[:, None] * 32 + l[None, :], y.to(tl.float16), mask=live[:, None])


@triton.jit
def _weights(blocks_ptr, r, k0, row_bytes, rows, VALUES: tl.constexpr, BB: tl.constexpr):
    """The W^T tile (256, BR), float32 reference values, of block ``k0 // 256`` of output rows ``r``."""
    rr = tl.where(r < rows, r, 0)
    i = tl.arange(0, 256)[:, None]
    blk = blocks_ptr + (rr * row_bytes + (k0 // 256) * BB)[None, :]
    return VALUES(blk, i // 32, i % 32)


@triton.jit
def _gemv_kernel(x_ptr, blocks_ptr, y_ptr, rows, n, VALUES: tl.constexpr, BB: tl.constexpr, BR: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    acc = tl.zeros((BR,), dtype=tl.float32)
    row_bytes = n // 256 * BB
    for k0 in range(0, n, 256):
        w = _weights(blocks_ptr, r, k0, row_bytes, rows, VALUES, BB)    # (256, BR) float32, reference values
        xk = tl.load(x_ptr + k0 + tl.arange(0, 256)).to(tl.float32)
        acc += tl.sum(xk[:, None] * w, axis=0)
    tl.store(y_ptr + r, acc.to(tl.float16), mask=r < rows)


@triton.jit
def _matmul_kernel(x_ptr, blocks_ptr, y_ptr, M, rows, n, VALUES: tl.constexpr, BB: tl.constexpr,
                   FP16_W: tl.constexpr, BM: tl.constexpr, BR: tl.constexpr):
    mm = tl.program_id(0) * BM + tl.arange(0, BM)
    r = tl.program_id(1) * BR + tl.arange(0, BR)
    acc = tl.zeros((BM, BR), dtype=tl.float32)
    row_bytes = n // 256 * BB
    for k0 in range(0, n, 256):
        w = _weights(blocks_ptr, r, k0, row_bytes, rows, VALUES, BB)
        k = k0 + tl.arange(0, 256)
        xt = tl.load(x_ptr + mm[:, None] * n + k[None, :], mask=(mm < M)[:, None], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + mm[:, None] * rows + r[None, :], acc.to(tl.float16), mask=(mm < M)[:, None] & (r < rows)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# Dequantize: 64 groups of 32 weights (8 super-blocks, 2048 weights) per program. Matmul: one
# 256-weight super-block of BR = 32 output rows per step, so each step reads 32 blocks once.

GROUPS = 64
BLOCK_ROWS = 32
