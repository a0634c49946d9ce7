"""llama.cpp q6_K in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_kquants.md KQ-6).

Reads top to bottom: entry points, launchers, kernels, tile configurations.

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

from qformats.errors import fail

from ._arrays import Inputs
from ._tiles import dot_w

__all__ = ["dequantize", "matmul"]

QK_K, BLOCK_BYTES = 256, 256 // 2 + 256 // 4 + 256 // 16 + 2


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
    """|W| <= 128 * 32 |d| <= 65504 for every block: W fits float16 (else the matmul keeps it in float32).
    Non-finite d (invalid blocks) also takes the float32 path, evaluated as ggml does."""
    d = blocks.reshape(-1, BLOCK_BYTES)[:, 208:].contiguous().view(torch.float16).float().abs()
    return bool((128 * 32 * d <= 65504).all()) if d.numel() else True


def _checked(blocks: torch.Tensor, rows: int, n: int) -> torch.Tensor:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or n % QK_K:
        raise fail("ggml.n.not_multiple", "n", "a positive multiple of 256 (q6_k)", n)
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
    """float32 weight ``l`` of 32-weight group ``j = 4 h + t`` of the block at byte ``blk`` (all broadcast
    together), the interleave of the module docstring."""
    h = j // 4
    t = j % 4
    low = tl.load(blk + 64 * h + 32 * (t % 2) + l).to(tl.int32)                   # ql
    low = tl.where(t < 2, low & 15, low >> 4)
    high = (tl.load(blk + 128 + 32 * h + l).to(tl.int32) >> (2 * t)) & 3          # qh
    sc = tl.load(blk + 192 + 8 * h + 2 * t + l // 16).to(tl.int8, bitcast=True).to(tl.float32)
    q = ((low | (high << 4)) - 32).to(tl.float32)
    return (_fp16_at(blk + 208) * sc) * q                                        # exact: no rounding


@triton.jit
def _dequantize_kernel(blocks_ptr, out_ptr, sub_blocks, SB: tl.constexpr):
    s = tl.program_id(0) * SB + tl.arange(0, SB)                      # global 32-weight group index
    live = s < sub_blocks
    s = tl.where(live, s, 0)
    l = tl.arange(0, 32)
    y = _values(blocks_ptr + (s // 8)[:, None] * 210, (s % 8)[:, None], l[None, :])
    tl.store(out_ptr + s[:, None] * 32 + l[None, :], y.to(tl.float16), mask=live[:, None])


@triton.jit
def _weights(blocks_ptr, r, k0, row_bytes, rows):
    """The W^T tile (256, BR), float32 reference values, of block ``k0 // 256`` of output rows ``r``."""
    rr = tl.where(r < rows, r, 0)
    i = tl.arange(0, 256)[:, None]
    blk = blocks_ptr + (rr * row_bytes + (k0 // 256) * 210)[None, :]
    return _values(blk, i // 32, i % 32)


@triton.jit
def _gemv_kernel(x_ptr, blocks_ptr, y_ptr, rows, n, BR: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    acc = tl.zeros((BR,), dtype=tl.float32)
    row_bytes = n // 256 * 210
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
    row_bytes = n // 256 * 210
    for k0 in range(0, n, 256):
        w = _weights(blocks_ptr, r, k0, row_bytes, rows)
        k = k0 + tl.arange(0, 256)
        xt = tl.load(x_ptr + mm[:, None] * n + k[None, :], mask=(mm < M)[:, None], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + mm[:, None] * rows + r[None, :], acc.to(tl.float16), mask=(mm < M)[:, None] & (r < rows)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# Dequantize: 64 groups of 32 weights (8 blocks, 2048 weights) per program. Matmul: one 256-weight
# block of BR = 32 output rows per step, so each step reads 32 x 210 bytes of blocks once.

SUB_BLOCKS = 64
BLOCK_ROWS = 32
