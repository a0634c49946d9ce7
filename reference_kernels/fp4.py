"""NVFP4 and MXFP4 in Triton: dequantize and fused dequantize-and-multiply (spec/fp4.md, spec/kernels.md KC-1.12).

Reads top to bottom: the contract's entry points, the load-time preparation (KC-7), the launchers, the
kernels, the tile configuration.

Layout (FP4-1.2): row ``r`` of ``weight_packed`` (uint8 ``(R, K/2)``; MXFP4 experts ``(E, N, K/2)`` are ``R = E N``
rows) holds two E2M1 codes a byte, element ``k`` in byte ``k // 2``, the low nibble for even ``k``::

    byte j:   bit 7 6 5 4 | 3 2 1 0        code: s | e e | m    value: (-1)^s * (e == 0 ? m / 2 : (1 + m / 2) 2^(e-1))
              code 2j+1   | code 2j

Block scales, one per ``g`` elements of a row: NVFP4 (``g = 16``) UE4M3 bytes and a float32 global divisor,
MXFP4 (``g = 32``) E8M0 bytes, ``2^(e - 127)``.

Numerics (FP4-3.1, FP4-3.7): NVFP4 ``W = bf16(f32(e2m1 * s32))`` with ``s32 = f32(ue4m3 / global)``; ``prepare``
computes ``s32`` once on the host, correctly rounded (a GPU's float32 division need not be), and the kernel
multiplies (one float32 rounding) and rounds to bfloat16 by the bits (ties to even, subnormals included), so
the result is the reference bit for bit on any device. MXFP4 builds ``2^(e - 127)`` from the byte's bits
(``e = 0`` is the float32 subnormal ``2^-127``); ``e2m1 * 2^(e - 127)`` is exact in float32 and bfloat16 unless
it overflows to inf in both. ``dequantize`` returns float32 holding those bfloat16 values; the matmul keeps W as
computed and multiplies float32 products in the GEMV, and in the batched path rounds W to float16 for tensor
cores only where every value of the layer is exactly a float16 (``prepare`` proves it from the scales), else it
multiplies float32 operands (IEEE, no TF32): W is never rounded (the face's ``w_rounding`` is False).

Validation (KC-4.2): ``prepare`` runs the reference's own checks (``qformats.formats.fp4.cases.nvfp4_checked`` /
``mxfp4_checked``: dtypes, grid, K a multiple of the block, NaN and signed scale bytes, the global scale) on host
copies, so a kernel never reads past a tensor or decodes a layer the spec says a reader MUST reject.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from qformats.errors import fail
from qformats.formats.fp4.cases import mxfp4_checked, nvfp4_checked

from ._arrays import Inputs, host_copy
from ._prepared import Prepared as _Base
from ._prepared import checked_x
from ._tiles import dot_w

__all__ = ["nvfp4_dequantize", "nvfp4_matmul", "mxfp4_dequantize", "mxfp4_matmul", "prepare", "Prepared",
           "dequantize_prepared", "matmul_prepared"]

GROUP = {"nvfp4": 16, "mxfp4": 32}


# -- entry points (KC-1.12) ---------------------------------------------------------------------------

def nvfp4_dequantize(*, weight_packed, weight_scale, weight_global_scale):
    layer, inputs = _prepare("nvfp4", weight_packed, weight_scale, weight_global_scale)
    return inputs.out(dequantize_prepared(layer))


def nvfp4_matmul(*, weight_packed, weight_scale, weight_global_scale, x):
    layer, inputs = _prepare("nvfp4", weight_packed, weight_scale, weight_global_scale, x=x)
    return inputs.out(matmul_prepared(layer, inputs.t["x"].to(torch.float16)))


def mxfp4_dequantize(*, weight_packed, weight_scale):
    layer, inputs = _prepare("mxfp4", weight_packed, weight_scale, None)
    return inputs.out(dequantize_prepared(layer))


def mxfp4_matmul(*, weight_packed, weight_scale, x):
    layer, inputs = _prepare("mxfp4", weight_packed, weight_scale, None, x=x)
    return inputs.out(matmul_prepared(layer, inputs.t["x"].to(torch.float16)))


# -- load-time preparation (KC-7) ----------------------------------------------------------------------

def prepare(*, weight_packed, weight_scale, format, weight_global_scale=None) -> Prepared:  # noqa: A002
    """Check the layer once (KC-4.2, on host copies) and compute what the calls need: NVFP4's float32 block
    scales, whether every W is a float16 value. ``format``: ``"nvfp4"`` or ``"mxfp4"``."""
    if format not in GROUP:
        raise fail("argument.invalid", "format", "nvfp4 or mxfp4", format)
    if (format == "nvfp4") != (weight_global_scale is not None):
        raise fail("argument.invalid", "weight_global_scale", "given for nvfp4 and only for nvfp4 (KC-1.12)",
                   "missing" if format == "nvfp4" else "given")
    return _prepare(format, weight_packed, weight_scale, weight_global_scale)[0]


class Prepared(_Base):
    """A checked layer on its device: the packed rows, the scales the kernel reads, dimensions, the float16-W
    flag; frozen, and refused once a watched tensor is written to (KC-7.3)."""

    def __init__(self, fmt: str, t: dict[str, torch.Tensor], scale32: torch.Tensor | None, lead: tuple[int, ...],
                 fp16_safe: bool) -> None:
        self.format, self.mx = fmt, fmt == "mxfp4"
        self.packed, self.scale_bytes = t["weight_packed"], t["weight_scale"]
        self.global_scale = t.get("weight_global_scale")
        self.scale = t["weight_scale"] if self.mx else scale32            # what the kernel reads
        self.lead, self.n, self.k = lead, lead[-1], 2 * self.packed.shape[-1]
        self.rows = int(np.prod(lead))
        self.fp16_safe, self.device = fp16_safe, self.packed.device
        self._freeze("packed", "scale_bytes", *(() if self.mx else ("global_scale",)))


def _fits_float16(scales: np.ndarray) -> bool:
    """Every nonzero |W| = |v| s, v in 0.5 .. 6, lies in [2^-16, 60000]: a bfloat16 value there (8 significant
    bits) is exactly a float16 one, so rounding W to float16 for tensor cores changes nothing."""
    s = np.asarray(scales, np.float64)
    s = s[s > 0]
    return not s.size or (0.5 * s.min() >= 2.0 ** -16 and 6 * s.max() <= 60000.0)


def _prepare(fmt: str, weight_packed: Any, weight_scale: Any, weight_global_scale: Any,
             **extra: Any) -> tuple[Prepared, Inputs]:
    arrays = {"weight_packed": weight_packed, "weight_scale": weight_scale}
    if fmt == "nvfp4":
        arrays["weight_global_scale"] = weight_global_scale
        p, s, g = nvfp4_checked(*(host_copy(a) for a in arrays.values()))
        # FP4-3.1's first rounding: the UE4M3 value over the global scale, in float32, once
        from qformats.elements import UE4M3, decode

        s32 = (decode(s, UE4M3) / np.float32(np.asarray(g).reshape(-1)[0])).astype(np.float32)
        values = s32
    else:
        p, s = mxfp4_checked(*(host_copy(a) for a in arrays.values()))
        values = np.ldexp(1.0, s.astype(np.int64) - 127)
    inputs = Inputs(**arrays, **extra)
    t = dict(inputs.t)
    lead = tuple(p.shape[:-1])
    t["weight_packed"] = t["weight_packed"].reshape(-1, p.shape[-1])       # experts: E N rows (a view)
    t["weight_scale"] = t["weight_scale"].reshape(-1, s.shape[-1])
    scale32 = None if fmt == "mxfp4" else torch.from_numpy(s32.reshape(-1, s.shape[-1])).to(inputs.device)
    return Prepared(fmt, t, scale32, lead, _fits_float16(values)), inputs


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """W ``(N, K)`` (``(E, N, K)``), float32 holding the bfloat16 reference values; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((*p.lead, p.k), dtype=torch.float32, device=p.device)
    grid = (triton.cdiv(p.rows, BLOCK_N), triton.cdiv(p.k, BLOCK_K))
    _dequantize_kernel[grid](p.packed, p.scale, out, p.k, p.rows, G=GROUP[p.format], MX=p.mx, BN=BLOCK_N, BK=BLOCK_K)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 (batch, out), for contiguous float16 ``xt`` (batch, in); a 2-D layer only (KC-1.6);
    no host work (KC-7.2)."""
    p.check_unchanged()
    if len(p.lead) != 1:
        raise fail("tensor.shape", "weight_packed", "2-D (out, in / 2) for matmul (KC-1.6)", (*p.lead, p.k // 2))
    m = checked_x(xt, p.k, p.device).shape[0]
    y = torch.empty((m, p.n), dtype=torch.float16, device=p.device)
    if not m:
        return y
    flags = dict(G=GROUP[p.format], MX=p.mx, BN=BLOCK_N, BK=BLOCK_K)
    if m == 1:                                   # GEMV: one row of x, float32 products summed along k
        _gemv_kernel[(triton.cdiv(p.n, BLOCK_N),)](xt, p.packed, p.scale, y, p.k, p.n, **flags)
    else:                                        # small batches and prefill: tensor-core tiles
        bm = 16 if m <= 16 else 64
        _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(p.n, BLOCK_N))](xt, p.packed, p.scale, y, m, p.k, p.n,
                                                                       FP16_W=p.fp16_safe, BM=bm, **flags)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _e2m1(code):
    """FE-6: the E2M1 value of 4-bit codes (int32), -0.0 for code 8."""
    e = (code >> 1) & 3
    m = (code & 1).to(tl.float32)
    power = tl.where(e == 1, 1.0, tl.where(e == 2, 2.0, 4.0))
    mag = tl.where(e == 0, 0.5 * m, (1.0 + 0.5 * m) * power)
    return tl.where((code & 8) != 0, -mag, mag)


@triton.jit
def _round_bf16(w):
    """float32 -> the nearest bfloat16 (ties to even), as float32: the low 16 bits rounded away by integer
    arithmetic, so that every device rounds alike (infinities stay infinite, subnormals round in place)."""
    b = w.to(tl.uint32, bitcast=True)
    b = b + 0x7FFF + ((b >> 16) & 1)
    return ((b >> 16) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _weight_tile(wp_ptr, sc_ptr, k, n, K, R, G: tl.constexpr, MX: tl.constexpr):
    """The (BK, BN) tile of W^T for inputs ``k`` and rows ``n``: FP4-3.1 or FP4-3.7, bfloat16 values in float32."""
    mask = (k < K)[:, None] & (n < R)[None, :]
    byte = tl.load(wp_ptr + n[None, :] * (K // 2) + (k // 2)[:, None], mask=mask, other=0).to(tl.int32)
    v = _e2m1((byte >> ((k & 1) * 4)[:, None]) & 15)
    at = sc_ptr + n[None, :] * (K // G) + (k // G)[:, None]
    if MX:                                        # 2^(e - 127) from its bits; e = 0 is the subnormal 2^-127
        e = tl.load(at, mask=mask, other=127).to(tl.int32)
        s = tl.where(e == 0, 0x400000, e << 23).to(tl.float32, bitcast=True)
    else:                                         # s32 = f32(ue4m3 / global), prepared
        s = tl.load(at, mask=mask, other=0.0)
    return _round_bf16(v * s)


@triton.jit
def _dequantize_kernel(wp_ptr, sc_ptr, out_ptr, K, R, G: tl.constexpr, MX: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    k = tl.program_id(1) * BK + tl.arange(0, BK)
    w = _weight_tile(wp_ptr, sc_ptr, k, n, K, R, G, MX)
    tl.store(out_ptr + n[None, :] * K + k[:, None], w, mask=(k < K)[:, None] & (n < R)[None, :])   # (R, K)


@triton.jit
def _gemv_kernel(x_ptr, wp_ptr, sc_ptr, y_ptr, K, N, G: tl.constexpr, MX: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w = _weight_tile(wp_ptr, sc_ptr, k, n, K, N, G, MX)
        xk = tl.load(x_ptr + k, mask=k < K, other=0.0).to(tl.float32)
        acc += tl.sum(xk[:, None] * w, axis=0)
    tl.store(y_ptr + n, acc.to(tl.float16), mask=n < N)


@triton.jit
def _matmul_kernel(x_ptr, wp_ptr, sc_ptr, y_ptr, M, K, N, G: tl.constexpr, MX: tl.constexpr,
                   FP16_W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w = _weight_tile(wp_ptr, sc_ptr, k, n, K, N, G, MX)
        xt = tl.load(x_ptr + m[:, None] * K + k[None, :], mask=(m < M)[:, None] & (k < K)[None, :], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(tl.float16), mask=(m < M)[:, None] & (n < N)[None, :])


# -- tile configuration -------------------------------------------------------------------------------
# BN rows of weight_packed per program, BK inputs along each: 64 inputs are 32 bytes of a row and 4 (NVFP4) or
# 2 (MXFP4) scales; K is a multiple of 16, so a tile past the end of a row is masked, never a partial byte.

BLOCK_N = 64
BLOCK_K = 64
