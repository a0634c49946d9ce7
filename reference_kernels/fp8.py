"""FP8 (E4M3FN weights, float scales) in Triton: dequantize and fused dequantize-and-multiply for the tensor,
channel and block strategies (spec/fp8.md, spec/kernels.md KC-1.11).

Reads top to bottom: the contract's entry points, the load-time checks, the launchers, the kernels, the tile
configurations.

One kernel serves the three strategies: every strategy is a grid of cells, one scale each (FP8-1.2), and
``W[r, c] = e4m3(weight[r, c]) * s[r // bn, c // bk]`` with the cell ``(bn, bk)`` of KC-1.11's ``block_size``:
``(N, K)`` for a per-tensor scale, ``(1, K)`` per channel, the config's block otherwise; a ragged last block is
just a cell the tile's mask crops (FP8-1.3). ``weight_scale`` is read as the multiplier it is, whether the
checkpoint calls it ``weight_scale`` or ``weight_scale_inv`` (FP8-2.1).

E4M3FN decode by bit arithmetic (FE-2.1), no table and no float8 dtype, so the interpreter runs it as the GPU
does::

    byte  S EEEE MMM     E > 0: float32 bits S | (E + 120) << 23 | M << 20    (2^(E-7) * 1.MMM, exact)
                         E = 0: +-M * 2^-9                                    (subnormals, +-0; 0x80 is -0)

NaN bytes (0x7F, 0xFF) never reach a kernel: ``prepare`` refuses them (FP8-6.5).

Numerics (FP8-9.1): the float32 product ``e4m3 * s`` is FP8-5.1's value (exact for 16-bit scales, rounded
once for float32 ones), then rounded once to ``dtype``: bfloat16 by integer round-to-nearest-even on the
float32 bits (so the store's conversion is exact whatever its rounding mode), float16 by the conversion
(round to nearest even). ``dequantize`` returns W in ``dtype``: the reference values. The matmul multiplies
that W (rounded once more to float16 for tensor cores when every |W| fits, QF-4.6) by float16 ``x``, float32
sums, and returns float16 ``(batch, out)``.

Validation (KC-4.2): before any launch, ``prepare`` runs the reference's own checks
(``qformats.formats.fp8.cases.checked_call``: uint8 ``(N, K)`` bytes, ``block_size`` and ``dtype`` in their
domains, the scale's dtype and ceil grid, finite positive scales, no NaN byte) on host copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from qformats.errors import fail
from qformats.formats.fp8.cases import checked_call

from ._arrays import Inputs, host_copy
from ._prepared import Prepared as _Base
from ._prepared import matmul_output
from ._tiles import dot_w

__all__ = ["prepare", "Prepared", "dequantize_prepared", "matmul_prepared", "STRATEGIES",
           *(f"{op}_{s}" for op in ("dequantize", "matmul") for s in ("tensor", "channel", "block"))]

STRATEGIES = ("tensor", "channel", "block")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
OUT_KIND = {"float32": 0, "bfloat16": 1, "float16": 2}


# -- entry points (KC-1.11): fp8_tensor, fp8_channel, fp8_block ------------------------------------------------

def _dequantize(strategy: str, weight, weight_scale, block_size, dtype):
    layer, inputs = _prepare(strategy, weight, weight_scale, block_size, dtype)
    return _out(inputs, dequantize_prepared(layer))


def _matmul(strategy: str, weight, weight_scale, block_size, dtype, x):
    layer, inputs = _prepare(strategy, weight, weight_scale, block_size, dtype, x=x)
    return inputs.out(matmul_prepared(layer, inputs.t["x"].to(torch.float16).contiguous()))


def dequantize_tensor(*, weight, weight_scale, block_size, dtype):
    return _dequantize("tensor", weight, weight_scale, block_size, dtype)


def dequantize_channel(*, weight, weight_scale, block_size, dtype):
    return _dequantize("channel", weight, weight_scale, block_size, dtype)


def dequantize_block(*, weight, weight_scale, block_size, dtype):
    return _dequantize("block", weight, weight_scale, block_size, dtype)


def matmul_tensor(*, weight, weight_scale, block_size, dtype, x):
    return _matmul("tensor", weight, weight_scale, block_size, dtype, x)


def matmul_channel(*, weight, weight_scale, block_size, dtype, x):
    return _matmul("channel", weight, weight_scale, block_size, dtype, x)


def matmul_block(*, weight, weight_scale, block_size, dtype, x):
    return _matmul("block", weight, weight_scale, block_size, dtype, x)


def _out(inputs: Inputs, w: torch.Tensor) -> Any:
    """NumPy has no bfloat16: a NumPy caller gets bfloat16 W widened to float32 (exact), torch callers bfloat16."""
    return w.float().numpy() if inputs.numpy and w.dtype == torch.bfloat16 else inputs.out(w)


# -- load-time preparation (KC-7) ----------------------------------------------------------------------

def prepare(*, weight, weight_scale, block_size, dtype, strategy) -> Prepared:
    """Check the layer once (the validating checks of KC-4.2, on host copies) for ``strategy`` (tensor, channel,
    block) and note whether every |W| fits float16 (the matmul's tensor-core path)."""
    return _prepare(strategy, weight, weight_scale, block_size, dtype)[0]


class Prepared(_Base):
    """A checked layer on its device: the bytes, the 2-D scale grid, the cell, the output dtype; frozen."""

    def __init__(self, t: dict[str, torch.Tensor], cell: tuple[int, int, int, int], dtype: str,
                 fp16_safe: bool) -> None:
        self.weight = t["weight"]
        self.n, self.k, self.bn, self.bk = cell
        rows, cols = -(-self.n // self.bn), -(-self.k // self.bk)
        self.scale = t["weight_scale"].view(rows, cols)          # (1,), () or (1, 1) per tensor: one grid
        self.cols = cols
        self.dtype, self.out_kind = DTYPES[dtype], OUT_KIND[dtype]
        self.fp16_safe, self.device = fp16_safe, self.weight.device
        self._freeze("weight", "scale")


def _prepare(strategy: str, weight: Any, weight_scale: Any, block_size: Any, dtype: Any,
             **extra: Any) -> tuple[Prepared, Inputs]:
    if strategy not in STRATEGIES:
        raise fail("argument.invalid", "strategy", "tensor, channel or block (KC-1.11)", strategy)
    scale = host_copy(weight_scale)
    if isinstance(scale, torch.Tensor) and scale.dtype == torch.bfloat16:
        scale = scale.float()                                   # KC-1.11: bfloat16 widened, exactly
    cell = checked_call(f"fp8_{strategy}", weight=host_copy(weight), weight_scale=scale, block_size=block_size,
                        dtype=dtype)
    # |W| <= 448 * max s: the batched matmul may round W to float16 when that fits (QF-4.6)
    fp16_safe = 448.0 * float(np.asarray(scale, np.float32).max()) <= 65504.0
    inputs = Inputs(weight=weight, weight_scale=weight_scale, **extra)
    return Prepared(inputs.t, cell, dtype, fp16_safe), inputs


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """W (out, in) = (N, K) in the layer's dtype, exactly the reference values; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.n, p.k), dtype=p.dtype, device=p.device)
    grid = (triton.cdiv(p.n, BLOCK_N), triton.cdiv(p.k, BLOCK_K))
    _dequantize_kernel[grid](p.weight, p.scale, out, p.n, p.k, p.bn, p.bk, p.cols, OUT=p.out_kind, BN=BLOCK_N,
                             BK=BLOCK_K)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 (batch, out), for contiguous float16 ``xt`` (batch, in); no host work (KC-7.2)."""
    m, y = matmul_output(p, xt)
    if not m:
        return y
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(p.n, BLOCK_N))
    _matmul_kernel[grid](xt, p.weight, p.scale, y, m, p.n, p.k, p.bn, p.bk, p.cols, OUT=p.out_kind,
                         FP16_W=p.fp16_safe, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _e4m3(byte):
    """FE-2.1: the float32 value of E4M3FN bytes (int32 0..255, no NaN byte), exactly."""
    sign = byte >> 7
    e = (byte >> 3) & 15
    m = byte & 7
    normal = ((sign << 31) | ((e + 120) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    sub = m.to(tl.float32) * 0.001953125                      # M * 2^-9
    sub = tl.where(sign == 1, -sub, sub)                      # 0x80: -0.0
    return tl.where(e == 0, sub, normal)


@triton.jit
def _rounded(v, OUT: tl.constexpr):
    """FP8-9.1: float32 ``v`` rounded once to the output dtype (0 float32, 1 bfloat16, 2 float16), held in float32."""
    if OUT == 1:                                              # round to nearest even on the top 16 bits
        bits = v.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        v = bits.to(tl.float32, bitcast=True)
    elif OUT == 2:
        v = v.to(tl.float16).to(tl.float32)
    return v


@triton.jit
def _weight_tile(w_ptr, s_ptr, r, c, N, K, bn, bk, cols, OUT: tl.constexpr):
    """W[r, c] for the (len(r), len(c)) tile: e4m3 times its cell's scale, in float32, rounded to the dtype."""
    mask = (r < N)[:, None] & (c < K)[None, :]
    byte = tl.load(w_ptr + r[:, None] * K + c[None, :], mask=mask, other=0).to(tl.int32)
    s = tl.load(s_ptr + (r // bn)[:, None] * cols + (c // bk)[None, :], mask=mask, other=0.0).to(tl.float32)
    return _rounded(_e4m3(byte) * s, OUT)


@triton.jit
def _dequantize_kernel(w_ptr, s_ptr, out_ptr, N, K, bn, bk, cols, OUT: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    r = tl.program_id(0) * BN + tl.arange(0, BN)
    c = tl.program_id(1) * BK + tl.arange(0, BK)
    w = _weight_tile(w_ptr, s_ptr, r, c, N, K, bn, bk, cols, OUT)
    tl.store(out_ptr + r[:, None] * K + c[None, :], w.to(out_ptr.dtype.element_ty),   # exact: w holds dtype values
             mask=(r < N)[:, None] & (c < K)[None, :])


@triton.jit
def _matmul_kernel(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K, bn, bk, cols, OUT: tl.constexpr, FP16_W: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        wt = tl.trans(_weight_tile(w_ptr, s_ptr, n, k, N, K, bn, bk, cols, OUT))         # (BK, BN) of W^T
        xt = tl.load(x_ptr + m[:, None] * K + k[None, :], mask=(m < M)[:, None] & (k < K)[None, :], other=0.0)
        acc = dot_w(acc, xt, wt, FP16_W)
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(tl.float16), mask=(m < M)[:, None] & (n < N)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# BN x BK = 32 x 32 weight bytes per program (1 KiB), each byte's scale gathered from its cell (a 128 x 128
# block holds 16 tiles, so the gather hits one scale per tile there; per channel one per row). BM = 16 rows
# of x: tl.dot's smallest tile.

BLOCK_M = 16
BLOCK_N = 32
BLOCK_K = 32
