"""llama.cpp q8_0 in Triton: dequantize and fused dequantize-and-multiply (spec/ggml_legacy.md LEG-6).

Reads top to bottom: load-time preparation, launchers and entry points, kernels, tile configurations.

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

The blocks are 34 bytes, so a block's fields are not 2- or 4-byte aligned: every field is read as
bytes (the float16 as two byte loads and one bit cast).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._arrays import Inputs, checked_blocks
from ._prepared import Prepared as _Base
from ._prepared import block_entries, checked_x
from ._tiles import dot_w

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

QK8_0, BLOCK_BYTES = 32, 2 + 32


# -- load-time preparation (KC-7); the entry points (DESIGN.md §6) follow the launchers ----------------

class Prepared(_Base):
    """Checked blocks ``(rows, n // 32 * 34)`` and whether every |W| fits float16; frozen."""

    def __init__(self, blocks: torch.Tensor, rows: int, n: int) -> None:
        self.blocks, self.rows, self.n, self.device = blocks, rows, n, blocks.device
        self.fp16_safe = _fp16_safe(blocks)          # once here, not a bool() sync per batched call
        self._freeze("blocks")


def _prepare(inputs: Inputs, rows: int, n: int) -> Prepared:
    return Prepared(checked_blocks(inputs.t["blocks"], rows, n, "q8_0", QK8_0, BLOCK_BYTES), rows, n)


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """float16 ``(rows, n)``: each reference value rounded once; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.rows, p.n), dtype=torch.float16, device=p.device)
    nblocks = p.rows * p.n // QK8_0
    _dequantize_kernel[(triton.cdiv(nblocks, BLOCKS),)](p.blocks, out, nblocks, NB=BLOCKS)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """float16 ``x @ W.T``, float32 accumulation, for contiguous float16 ``xt``; no host work (KC-7.2)."""
    p.check_unchanged()
    m = checked_x(xt, p.n, p.device).shape[0]
    y = torch.empty((m, p.rows), dtype=torch.float16, device=p.device)
    if m == 1:
        _gemv_kernel[(triton.cdiv(p.rows, BLOCK_ROWS),)](xt, p.blocks, y, p.rows, p.n, BK=BLOCK_K, BR=BLOCK_ROWS)
    else:
        bm = 16 if m <= 16 else 64
        _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(p.rows, BLOCK_ROWS))](
            xt, p.blocks, y, m, p.rows, p.n, FP16_W=p.fp16_safe, BM=bm, BK=BLOCK_K, BR=BLOCK_ROWS)
    return y


dequantize, matmul, prepare = block_entries(_prepare, dequantize_prepared, matmul_prepared)


def _fp16_safe(blocks: torch.Tensor) -> bool:
    """|W| <= 128 |d| <= 65504 for every block: W fits float16 (else the matmul keeps it in float32).
    Non-finite d (invalid blocks) also takes the float32 path, evaluated as ggml does."""
    d = blocks.reshape(-1, BLOCK_BYTES)[:, :2].contiguous().view(torch.float16).float().abs()
    return bool((128 * d <= 65504).all()) if d.numel() else True


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _fp16_at(ptr):
    """The little-endian float16 at byte ``ptr`` (two byte loads, one bit cast), as float32."""
    lo = tl.load(ptr).to(tl.uint16)
    hi = tl.load(ptr + 1).to(tl.uint16)
    return (lo | (hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _values(blk, l):
    """float32 weight ``l`` of the block at byte ``blk`` (broadcast together): ``qs[l] * d``, exact."""
    q = tl.load(blk + 2 + l).to(tl.int8, bitcast=True).to(tl.float32)
    return q * _fp16_at(blk)


@triton.jit
def _dequantize_kernel(blocks_ptr, out_ptr, nblocks, NB: tl.constexpr):
    b = tl.program_id(0) * NB + tl.arange(0, NB)                      # global block index
    live = b < nblocks
    b = tl.where(live, b, 0)
    l = tl.arange(0, 32)
    y = _values(blocks_ptr + b[:, None] * 34, l[None, :])
    tl.store(out_ptr + b[:, None] * 32 + l[None, :], y.to(tl.float16), mask=live[:, None])


@triton.jit
def _weights(blocks_ptr, r, k0, n, rows, BK: tl.constexpr):
    """The W^T tile (BK, BR), float32 reference values, of weights ``k0 .. k0 + BK`` of output rows ``r``;
    zero past the row end (``n`` is a multiple of 32, not of BK)."""
    k = k0 + tl.arange(0, BK)[:, None]
    live = (k < n) & (r < rows)[None, :]
    blk = blocks_ptr + (tl.where(r < rows, r, 0) * (n // 32 * 34))[None, :] + tl.where(k < n, k // 32, 0) * 34
    return tl.where(live, _values(blk, k % 32), 0.0)


@triton.jit
def _gemv_kernel(x_ptr, blocks_ptr, y_ptr, rows, n, BK: tl.constexpr, BR: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    acc = tl.zeros((BR,), dtype=tl.float32)
    for k0 in range(0, n, BK):
        w = _weights(blocks_ptr, r, k0, n, rows, BK)                    # (BK, BR) float32, reference values
        k = k0 + tl.arange(0, BK)
        xk = tl.load(x_ptr + k, mask=k < n, other=0.0).to(tl.float32)
        acc += tl.sum(xk[:, None] * w, axis=0)
    tl.store(y_ptr + r, acc.to(tl.float16), mask=r < rows)


@triton.jit
def _matmul_kernel(x_ptr, blocks_ptr, y_ptr, M, rows, n, FP16_W: tl.constexpr, BM: tl.constexpr,
                   BK: tl.constexpr, BR: tl.constexpr):
    mm = tl.program_id(0) * BM + tl.arange(0, BM)
    r = tl.program_id(1) * BR + tl.arange(0, BR)
    acc = tl.zeros((BM, BR), dtype=tl.float32)
    for k0 in range(0, n, BK):
        w = _weights(blocks_ptr, r, k0, n, rows, BK)
        k = k0 + tl.arange(0, BK)
        xt = tl.load(x_ptr + mm[:, None] * n + k[None, :], mask=(mm < M)[:, None] & (k < n)[None, :], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + mm[:, None] * rows + r[None, :], acc.to(tl.float16), mask=(mm < M)[:, None] & (r < rows)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# Dequantize: 64 blocks (2048 weights) per program. Matmul: BK = 256 weights (8 blocks) of BR = 32
# output rows per step, so each step reads 32 x 8 x 34 bytes of blocks once; a row whose length is
# not a multiple of 256 ends in a masked step (W and x zero past n).

BLOCKS = 64
BLOCK_K = 256
BLOCK_ROWS = 32
