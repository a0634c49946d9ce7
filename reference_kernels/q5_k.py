"""llama.cpp q5_K in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_kquants.md KQ-5).

Reads top to bottom: entry points, launchers, kernels, tile configurations.

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

from qformats.errors import fail

from ._arrays import Inputs
from ._tiles import dot_w

__all__ = ["dequantize", "matmul"]

QK_K, BLOCK_BYTES = 256, 2 + 2 + 12 + 256 // 8 + 256 // 2


# -- entry points (DESIGN.md §6) ---------------------------------------------------------------------

def dequantize(*, blocks, rows, n):
    inputs = Inputs(blocks=blocks)
    b = _checked(inputs.t["blocks"], rows, n)
    out = torch.empty((rows, n), dtype=torch.float16, device=inputs.device)
    sub_blocks = rows * n // 32
    _dequantize_kernel[(triton.cdiv(sub_blocks, SUB_BLOCKS),)](b, out, sub_blocks, SB=SUB_BLOCKS)
    return inputs.out(out)


def matmul(*, blocks, rows, n, x):
    inputs = Inputs(blocks=blocks, x=x)
    b = _checked(inputs.t["blocks"], rows, n)
    xt = inputs.t["x"].to(torch.float16)
    if xt.ndim != 2 or xt.shape[1] != n:
        raise fail("tensor.shape", "x", f"(batch, {n}) float16", tuple(xt.shape))
    m = xt.shape[0]
    y = torch.empty((m, rows), dtype=torch.float16, device=inputs.device)
    if m == 1:
        _gemv_kernel[(triton.cdiv(rows, BLOCK_ROWS),)](xt, b, y, rows, n, BR=BLOCK_ROWS)
    else:
        bm = 16 if m <= 16 else 64
        _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(rows, BLOCK_ROWS))](xt, b, y, m, rows, n,
                                                                            FP16_W=_fp16_safe(b), BM=bm,
                                                                            BR=BLOCK_ROWS)
    return inputs.out(y)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 63 * (31 |d| + |dmin|) <= 65504 for every block: W fits float16 (else the matmul keeps it
    in float32). Non-finite d/dmin (invalid blocks) also take the float32 path, evaluated as ggml does."""
    dm = blocks.reshape(-1, BLOCK_BYTES)[:, :4].contiguous().view(torch.float16).float().abs()
    return bool((63 * (31 * dm[:, 0] + dm[:, 1]) <= 65504).all()) if dm.numel() else True


def _checked(blocks: torch.Tensor, rows: int, n: int) -> torch.Tensor:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or n % QK_K:
        raise fail("ggml.n.not_multiple", "n", "a positive multiple of 256 (q5_k)", n)
    want = (rows, n // QK_K * BLOCK_BYTES)
    if blocks.dtype != torch.uint8 or tuple(blocks.shape) != want:
        raise fail("ggml.blocks.shape", "blocks", f"uint8 of shape {want}", f"{blocks.dtype} {tuple(blocks.shape)}")
    return blocks


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _fp16_at(ptr):
    """The little-endian float16 at byte ``ptr`` (two byte loads, one bit cast), as float32."""
    lo = tl.load(ptr).to(tl.uint16)
    hi = tl.load(ptr + 1).to(tl.uint16)
    return (lo | (hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)


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
    return (_fp16_at(blk) * sc) * q - _fp16_at(blk + 2) * m          # one rounding: the subtraction


@triton.jit
def _dequantize_kernel(blocks_ptr, out_ptr, sub_blocks, SB: tl.constexpr):
    s = tl.program_id(0) * SB + tl.arange(0, SB)                      # global sub-block index
    live = s < sub_blocks
    s = tl.where(live, s, 0)
    l = tl.arange(0, 32)
    y = _values(blocks_ptr + (s // 8)[:, None] * 176, (s % 8)[:, None], l[None, :])
    tl.store(out_ptr + s[:, None] * 32 + l[None, :], y.to(tl.float16), mask=live[:, None])


@triton.jit
def _weights(blocks_ptr, r, k0, row_bytes, rows):
    """The W^T tile (256, BR), float32 reference values, of block ``k0 // 256`` of output rows ``r``."""
    rr = tl.where(r < rows, r, 0)
    i = tl.arange(0, 256)[:, None]
    blk = blocks_ptr + (rr * row_bytes + (k0 // 256) * 176)[None, :]
    return _values(blk, i // 32, i % 32)


@triton.jit
def _gemv_kernel(x_ptr, blocks_ptr, y_ptr, rows, n, BR: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    acc = tl.zeros((BR,), dtype=tl.float32)
    row_bytes = n // 256 * 176
    for k0 in range(0, n, 256):
        w = _weights(blocks_ptr, r, k0, row_bytes, rows)                # (256, BR) float32, reference values
        xk = tl.load(x_ptr + k0 + tl.arange(0, 256)).to(tl.float32)
        acc += tl.sum(xk[:, None] * w, axis=0)
    tl.store(y_ptr + r, acc.to(tl.float16), mask=r < rows)


@triton.jit
def _matmul_kernel(x_ptr, blocks_ptr, y_ptr, M, rows, n, FP16_W: tl.constexpr, BM: tl.constexpr, BR: tl.constexpr):
    mm = tl.program_id(0) * BM + tl.arange(0, BM)
    r = tl.program_id(1) * BR + tl.arange(0, BR)
    acc = tl.zeros((BM, BR), dtype=tl.float32)
    row_bytes = n // 256 * 176
    for k0 in range(0, n, 256):
        w = _weights(blocks_ptr, r, k0, row_bytes, rows)
        k = k0 + tl.arange(0, 256)
        xt = tl.load(x_ptr + mm[:, None] * n + k[None, :], mask=(mm < M)[:, None], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + mm[:, None] * rows + r[None, :], acc.to(tl.float16), mask=(mm < M)[:, None] & (r < rows)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# Dequantize: 64 sub-blocks (8 blocks, 2048 weights) per program. Matmul: one 256-weight block of
# BR = 32 output rows per step, so each step reads 32 x 176 bytes of blocks once.

SUB_BLOCKS = 64
BLOCK_ROWS = 32
