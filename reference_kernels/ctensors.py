"""compressed-tensors pack-quantized in Triton: dequantize and fused dequantize-and-multiply
(spec/compressed_tensors.md), every width ``b`` = 1..8.

Reads top to bottom: the contract's entry points (KC-1.9), the load-time checks, the launchers, the
kernels, the tile configurations.

Bit layout (CT-2.3): row ``n`` of ``weight_packed`` (int32 ``(N, ceil(K b / 32))``) is one little-endian
bit stream along the *input* axis; value ``k`` sits at stream bits ``[b k, b k + b)``: word
``b k // 32``, shift ``b k % 32``. When ``32 % b != 0`` a value may straddle two words (``shift + b >
32``): its low ``32 - shift`` bits are the top of word ``w``, its high bits the bottom of word ``w + 1``,
and the kernel reads both. At 3 bits that is every value at shift 30 or 31; at 5 bits::

    value k       0   1   2   3   4   5   6   7  ...
    bit 5k        0   5  10  15  20  25  30  35
    word, shift  0,0 0,5 0,10 0,15 0,20 0,25 0,30 1,3     value 6: bits 30..31 of word 0, bits 0..2 of word 1

The field holds ``q + o``, ``o = 2^(b-1)``. ``weight_zero_point`` (int32 ``(ceil(N b / 32), G)``) holds
``zp + o`` packed the same way along dimension 0: one stream per group column ``g``, its word ``w`` at
row ``w`` (CT-2.5), so the next word of a straddling zero point is ``G`` elements on. The unused high
bits that end a row (K b / 32 not whole) are never read into a value (CT-2.3: readers ignore them).

Numerics (CT-3.1): ``W[n, k] = s[n, g] * (q - zp)`` with ``q - zp`` an exact integer and one float32
multiplication: exact for float16 and bfloat16 scales, the correctly rounded product for float32
ones; ``dequantize`` returns float32, the reference values themselves. The GEMV keeps W as computed
and sums float32 products; the batched matmul rounds W once to float16 for tensor cores (QF-4.6)
unless ``max|s| * (2^b - 1)`` passes 65504, and then multiplies float32 operands (IEEE, no TF32).

Validation (KC-4.2): before any launch the layer goes through the reference's own checks
(``qformats.formats.ctensors.codec.checked_tensors``: ``num_bits`` in 1..8, presence, dtypes, the CT-2.1
shapes, ``group_size`` dividing ``K`` and fixing the scale columns CT-2.2, finite scales CT-3.3) on
host copies, so a kernel never reads past a tensor and never decodes what the spec says a reader MUST
reject. Every b-bit zero field is a valid zero point (its range is the field's), so none is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from qformats.formats.ctensors.codec import checked_tensors

from . import _int4
from ._arrays import Inputs, checked_group_size, host_copy
from ._prepared import Prepared as _Base
from ._prepared import matmul_output
from ._tiles import dot_w, row_tile

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]


# -- entry points (DESIGN.md §6, KC-1.9) ----------------------------------------------------------------

def dequantize(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None):
    layer, inputs = _prepare(weight_packed, weight_scale, weight_shape, weight_zero_point, num_bits, group_size)
    return inputs.out(dequantize_prepared(layer))


def matmul(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, x, weight_zero_point=None):
    layer, inputs = _prepare(weight_packed, weight_scale, weight_shape, weight_zero_point, num_bits, group_size,
                             x=x)
    return inputs.out(matmul_prepared(layer, inputs.t["x"].to(torch.float16)))


# -- load-time preparation (KC-7) ----------------------------------------------------------------------

def prepare(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None) -> Prepared:
    """Check the layer once (the validating checks of KC-4.2, on host copies) and plan its tiles."""
    return _prepare(weight_packed, weight_scale, weight_shape, weight_zero_point, num_bits, group_size)[0]


class Prepared(_Base):
    """A checked layer on its device: tensors, dimensions, the tile plan and the float16-W flag; frozen."""

    def __init__(self, t: dict[str, torch.Tensor], host: dict[str, Any], bits: int) -> None:
        self.packed = t["weight_packed"]
        self.scale = t["weight_scale"].float() if t["weight_scale"].dtype == torch.bfloat16 else t["weight_scale"]
        self.zero = t.get("weight_zero_point")
        self.bits, self.n, self.k, self.groups = bits, host["out"], host["in"], host["groups"]
        self.group_rows = self.k // self.groups
        self.block_k = row_tile(self.group_rows)
        self.scalar_group = self.groups == 1 or self.block_k > 0   # every row tile lies in one group
        self.block_k = self.block_k or 32
        # |W| <= max|s| * (2^b - 1): q and zp both lie in [-o, o - 1]
        max_scale = float(np.abs(host["weight_scale"].astype(np.float32)).max())
        self.fp16_safe = max_scale * ((1 << bits) - 1) <= 65504.0
        self.words, self.device = self.packed.shape[1], self.packed.device
        self.planes = self._planes() if _int4.eligible(bits, self.k, self.n, self.group_rows) else None
        self._freeze("packed", "scale", *(("zero",) if self.zero is not None else ()))


    def _planes(self) -> _int4.Planes:
        """KC-7.4: row n's stream along k is column n of the codes plane (a transpose, the words unchanged);
        W = s (field - zero field), the zero field being the offset 2^(b-1) when the layer has none (CT-3.1)."""
        codes = self.packed[:, : self.k * self.bits // 32].t()
        if self.zero is not None:
            bit = torch.arange(self.n, device=self.device) * self.bits
            words = self.zero.to(torch.int64) & 0xFFFFFFFF
            zeros = ((words[bit // 32] >> (bit % 32)[:, None]) & ((1 << self.bits) - 1)).t()
        else:
            zeros = torch.full((self.groups, self.n), 1 << (self.bits - 1), device=self.device)
        return _int4.make_planes(codes, zeros, self.scale.t(), None, bits=self.bits, k=self.k, n=self.n,
                                 group_rows=self.group_rows, fp16_safe=self.fp16_safe)


def _prepare(weight_packed: Any, weight_scale: Any, weight_shape: Any, weight_zero_point: Any, num_bits: Any,
             group_size: Any, **extra: Any) -> tuple[Prepared, Inputs]:
    layer = {"weight_packed": host_copy(weight_packed), "weight_scale": host_copy(weight_scale),
             "weight_shape": host_copy(weight_shape)}
    if weight_zero_point is not None:
        layer["weight_zero_point"] = host_copy(weight_zero_point)
    host = checked_tensors(layer, num_bits, group_size=checked_group_size(group_size, "KC-1.9"))
    arrays = {"weight_packed": weight_packed, "weight_scale": weight_scale} | \
        ({"weight_zero_point": weight_zero_point} if weight_zero_point is not None else {})
    inputs = Inputs(**arrays, **extra)
    return Prepared(inputs.t, host, int(num_bits)), inputs


# -- launchers ---------------------------------------------------------------------------------------

def _launch_args(p: Prepared) -> tuple:
    zero = p.zero if p.zero is not None else p.packed          # never read without HAS_ZP
    return (p.packed, zero, p.scale), dict(BITS=p.bits, HAS_ZP=p.zero is not None, SCALAR_GROUP=p.scalar_group)


def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """W (out, in) = (N, K), float32, exactly the reference values; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.n, p.k), dtype=torch.float32, device=p.device)
    if p.planes is not None:
        return _int4.dequantize(p.planes, out)
    ptrs, flags = _launch_args(p)
    grid = (triton.cdiv(p.n, BLOCK_N), triton.cdiv(p.k, p.block_k))
    _dequantize_kernel[grid](*ptrs, out, p.k, p.n, p.words, p.groups, p.group_rows, BN=BLOCK_N,
                             BK=p.block_k, **flags)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 (batch, out), for contiguous float16 ``xt`` (batch, in); no host work (KC-7.2)."""
    m, y = matmul_output(p, xt)
    if not m:
        return y
    if p.planes is not None:
        return _int4.matmul(p.planes, xt, y)
    ptrs, flags = _launch_args(p)
    args = (*ptrs, y, m, p.k, p.n, p.words, p.groups, p.group_rows)
    if m == 1:                                   # GEMV: one row of x, products summed along k
        _gemv_kernel[(triton.cdiv(p.n, BLOCK_N),)](xt, *args, BN=BLOCK_N, BK=p.block_k, **flags)
    else:                                        # small batches and prefill: tensor-core tiles
        bm = 16 if m <= 16 else 64
        _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(p.n, BLOCK_N))](xt, *args, FP16_W=p.fp16_safe, BM=bm,
                                                                        BN=BLOCK_N, BK=p.block_k, **flags)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _stream_fields(ptr, next_word, shift, mask, BITS: tl.constexpr):
    """The b-bit fields that start at bit ``shift`` of the words at ``ptr`` (CT-2.3); a field that runs
    past bit 31 takes its high bits from the word ``next_word`` elements on. Unsigned, as int32."""
    lo = tl.load(ptr, mask=mask, other=0).to(tl.uint32, bitcast=True) >> shift.to(tl.uint32)
    if 32 % BITS != 0:                           # widths 3, 5, 6, 7: some fields straddle two words
        spill = shift + BITS > 32
        hi = tl.load(ptr + next_word, mask=mask & spill, other=0).to(tl.uint32, bitcast=True)
        lo = lo | tl.where(spill, hi << tl.where(spill, 32 - shift, 0).to(tl.uint32), 0)
    return (lo & ((1 << BITS) - 1)).to(tl.int32)


@triton.jit
def _weight_tile(wp_ptr, zp_ptr, sc_ptr, k, n, k0, K, N, WORDS, G, group_rows, BITS: tl.constexpr,
                 HAS_ZP: tl.constexpr, SCALAR_GROUP: tl.constexpr):
    """The (BK, BN) tile of W^T for inputs ``k`` and outputs ``n``: ``s * (q - zp)`` in float32 (CT-3.1)."""
    mk, mn = k < K, n < N
    mask = mk[:, None] & mn[None, :]
    offset = 1 << (BITS - 1)
    bit = k * BITS                               # row n's stream, value k (CT-2.3)
    q = _stream_fields(wp_ptr + n[None, :] * WORDS + (bit // 32)[:, None], 1, (bit % 32)[:, None], mask,
                       BITS) - offset
    zbit = n * BITS                              # group column g's stream along dimension 0, value n (CT-2.5)
    if SCALAR_GROUP:                             # one group per tile: its scale and zero-point columns
        g = k0 // group_rows
        s = tl.load(sc_ptr + n * G + g, mask=mn, other=0.0).to(tl.float32)[None, :]
        if HAS_ZP:
            zp = _stream_fields(zp_ptr + (zbit // 32) * G + g, G, zbit % 32, mn, BITS)[None, :] - offset
            q = q - zp
    else:                                        # a group size no row tile divides: each row's group
        g = k // group_rows
        s = tl.load(sc_ptr + n[None, :] * G + g[:, None], mask=mask, other=0.0).to(tl.float32)
        if HAS_ZP:
            zp = _stream_fields(zp_ptr + (zbit // 32)[None, :] * G + g[:, None], G, (zbit % 32)[None, :], mask,
                                BITS) - offset
            q = q - zp
    return s * q.to(tl.float32)                  # q - zp exact; one float32 rounding


@triton.jit
def _dequantize_kernel(wp_ptr, zp_ptr, sc_ptr, out_ptr, K, N, WORDS, G, group_rows, BITS: tl.constexpr,
                       HAS_ZP: tl.constexpr, SCALAR_GROUP: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    k0 = tl.program_id(1) * BK
    k = k0 + tl.arange(0, BK)
    w = _weight_tile(wp_ptr, zp_ptr, sc_ptr, k, n, k0, K, N, WORDS, G, group_rows, BITS, HAS_ZP, SCALAR_GROUP)
    tl.store(out_ptr + n[None, :] * K + k[:, None], w, mask=(k < K)[:, None] & (n < N)[None, :])   # (N, K)


@triton.jit
def _gemv_kernel(x_ptr, wp_ptr, zp_ptr, sc_ptr, y_ptr, M, K, N, WORDS, G, group_rows, BITS: tl.constexpr,
                 HAS_ZP: tl.constexpr, SCALAR_GROUP: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w = _weight_tile(wp_ptr, zp_ptr, sc_ptr, k, n, k0, K, N, WORDS, G, group_rows, BITS, HAS_ZP, SCALAR_GROUP)
        xk = tl.load(x_ptr + k, mask=k < K, other=0.0).to(tl.float32)
        acc += tl.sum(xk[:, None] * w, axis=0)                          # W unrounded, float32 products and sums
    tl.store(y_ptr + n, acc.to(tl.float16), mask=n < N)


@triton.jit
def _matmul_kernel(x_ptr, wp_ptr, zp_ptr, sc_ptr, y_ptr, M, K, N, WORDS, G, group_rows, BITS: tl.constexpr,
                   HAS_ZP: tl.constexpr, SCALAR_GROUP: tl.constexpr, FP16_W: tl.constexpr, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w = _weight_tile(wp_ptr, zp_ptr, sc_ptr, k, n, k0, K, N, WORDS, G, group_rows, BITS, HAS_ZP, SCALAR_GROUP)
        xt = tl.load(x_ptr + m[:, None] * K + k[None, :], mask=(m < M)[:, None] & (k < K)[None, :], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(tl.float16), mask=(m < M)[:, None] & (n < N)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# BN output rows per program: 64 rows of weight_packed, each read along k. BK inputs per program: the
# largest of 128, 64, 32, 16 dividing the group size, so a tile never straddles a group and loads its
# scale (and zero-point) column once (SCALAR_GROUP; the channel strategy has one group, so any BK
# does); another group size uses 32 and gathers per input. A BK-input tile spans BK b / 32 words of
# each row (4-bit, BK = 128: 16 words, 64 bytes), plus the next word where its last value straddles.

BLOCK_N = 64

