"""AWQ GEMM in Triton: dequantize and fused dequantize-and-multiply (spec/awq.md).

Reads top to bottom: the contract's entry points (KC-1.8), the load-time checks, the launchers, the
kernels, the tile configurations.

Bit layout (AWQ-2.2, AWQ-2.3): ``qweight`` is int32 ``(K, N / 8)``, packed along the *output* axis.
Word ``t`` of row ``k`` holds columns ``8t .. 8t+7``; field ``i`` (bits ``4i .. 4i+3``) holds column
``8t + ORDER[i]``, ``ORDER = 0 2 4 6 1 3 5 7``. The kernel reads it the other way round: column ``n``
is in word ``n // 8`` at field ``REVERSE[n % 8] = (c >> 1) + 4 (c & 1)`` for ``c = n % 8`` (the even
columns in the low half-word, the odd ones in the high half), so at shift ``4 REVERSE[c]``::

    c        0  1  2  3  4  5  6  7
    field    0  4  1  5  2  6  3  7
    shift    0 16  4 20  8 24 12 28

``qzeros`` ``(G, N / 8)`` packs the zero points of group ``g`` the same way; they are stored as they
are (no v1 offset, AWQ-1.1). Groups are contiguous rows, ``g = k // gs`` (no ``g_idx``, AWQ-2.1).

Numerics (AWQ-3.1): ``s * (q - z)`` with ``q - z`` an integer in ``[-15, 15]`` and an 11-bit float16
scale is exact in float32, so ``dequantize`` returns float32: the reference values themselves. A
float16 result would not be exact (``s = 0.1`` times 3 needs 13 significant bits; ``15 * 65504``
overflows). The GEMV keeps W exact and sums float32 products; the batched matmul rounds W once to
float16 for tensor cores (QF-4.6) unless ``max|s| * 15`` passes 65504, and then multiplies float32
operands instead (IEEE, no TF32). The matmul returns float16, like the other reference kernels.

Validation (KC-4.2): before any launch the layer goes through the reference's own checks
(``qformats.formats.awq.codec.checked_tensors``: presence, dtypes, the AWQ-2.2 shapes and the group
size dividing ``K``, finite scales AWQ-3.3) on host copies, so a kernel never reads past a tensor and
never decodes what the spec says a reader MUST reject. Every 4-bit zero field is a valid zero point
(AWQ-3.2 asks only for ``[0, 15]``), so no field is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from qformats.formats.awq.codec import checked_tensors

from . import _int4
from ._arrays import Inputs, checked_group_size, host_copy
from ._prepared import Prepared as _Base
from ._prepared import checked_x
from ._tiles import dot_w, row_tile

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

MAXQ = 15                                   # the largest 4-bit code (AWQ-2.3)


# -- entry points (DESIGN.md §6, KC-1.8) ----------------------------------------------------------------

def dequantize(*, qweight, qzeros, scales, group_size):
    layer, inputs = _prepare(qweight, qzeros, scales, group_size)
    return inputs.out(dequantize_prepared(layer))


def matmul(*, qweight, qzeros, scales, group_size, x):
    layer, inputs = _prepare(qweight, qzeros, scales, group_size, x=x)
    return inputs.out(matmul_prepared(layer, inputs.t["x"].to(torch.float16)))


# -- load-time preparation (KC-7) ----------------------------------------------------------------------

def prepare(*, qweight, qzeros, scales, group_size) -> Prepared:
    """Check the layer once (the validating checks of KC-4.2, on host copies) and plan its tiles."""
    return _prepare(qweight, qzeros, scales, group_size)[0]


class Prepared(_Base):
    """A checked layer on its device: tensors, dimensions, the tile plan and the float16-W flag; frozen."""

    def __init__(self, t: dict[str, torch.Tensor], k: int, n: int, group_size: int, max_scale: float) -> None:
        self.qweight, self.qzeros, self.scales = t["qweight"], t["qzeros"], t["scales"]
        self.k, self.n = k, n
        self.group_rows = k if group_size == -1 else group_size
        groups = self.scales.shape[0]
        self.block_k = row_tile(self.group_rows)
        self.scalar_group = groups == 1 or self.block_k > 0     # every row tile lies in one group
        self.block_k = self.block_k or 32
        self.fp16_safe = max_scale * MAXQ <= 65504.0            # |W| <= max|s| * 15 fits float16
        self.device = self.scales.device
        self.planes = _int4.make_planes(_int4.pack_along_k(_columns(self.qweight), 4), _columns(self.qzeros),
                                        self.scales, None, bits=4, k=k, n=n, group_rows=self.group_rows,
                                        fp16_safe=self.fp16_safe) \
            if _int4.eligible(4, k, n, self.group_rows) else None
        self._freeze("qweight", "qzeros", "scales")


def _columns(words: torch.Tensor) -> torch.Tensor:
    """AWQ-2.3: ``(R, N / 8)`` words packed along the output axis to their ``(R, N)`` 4-bit fields, column
    ``8t + c`` from word ``t`` at shift ``4 REVERSE[c]`` (KC-7.4: the shared planes are made from these)."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.tensor([4 * ((c >> 1) + 4 * (c & 1)) for c in range(8)], device=words.device)
    return ((w[:, :, None] >> shifts) & 15).reshape(words.shape[0], -1)


def _prepare(qweight: Any, qzeros: Any, scales: Any, group_size: Any, **extra: Any) -> tuple[Prepared, Inputs]:
    gs, host = checked_tensors({"qweight": host_copy(qweight), "qzeros": host_copy(qzeros), "scales": host_copy(scales)},
                               checked_group_size(group_size, "KC-1.8"))
    k, n = host["qweight"].shape[0], host["scales"].shape[1]
    max_scale = float(np.abs(host["scales"].astype(np.float32)).max()) if host["scales"].size else 0.0
    inputs = Inputs(qweight=qweight, qzeros=qzeros, scales=scales, **extra)
    return Prepared(inputs.t, k, n, gs, max_scale), inputs


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """W (out, in) = (N, K), float32, exactly the reference values; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.n, p.k), dtype=torch.float32, device=p.device)
    if p.planes is not None:
        return _int4.dequantize(p.planes, out)
    if out.numel():
        grid = (triton.cdiv(p.n, BLOCK_N), triton.cdiv(p.k, p.block_k))
        _dequantize_kernel[grid](p.qweight, p.qzeros, p.scales, out, p.k, p.n, p.group_rows,
                                 SCALAR_GROUP=p.scalar_group, BN=BLOCK_N, BK=p.block_k)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 (batch, out), for contiguous float16 ``xt`` (batch, in); no host work (KC-7.2)."""
    p.check_unchanged()
    m = checked_x(xt, p.k, p.device).shape[0]
    if p.planes is not None:
        y = torch.empty((m, p.n), dtype=torch.float16, device=p.device)
        return _int4.matmul(p.planes, xt, y) if m else y
    y = torch.zeros((m, p.n), dtype=torch.float16, device=p.device)
    if not m or not p.n or not p.k:                 # nothing to launch: an empty batch, or K = 0 (y = 0)
        return y
    args = (p.qweight, p.qzeros, p.scales, y, m, p.k, p.n, p.group_rows)
    if m == 1:                                   # GEMV: one row of x, products summed along k
        _gemv_kernel[(triton.cdiv(p.n, BLOCK_N),)](xt, *args, SCALAR_GROUP=p.scalar_group, BN=BLOCK_N,
                                                   BK=p.block_k)
    else:                                        # small batches and prefill: tensor-core tiles
        bm = 16 if m <= 16 else 64
        _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(p.n, BLOCK_N))](
            xt, *args, SCALAR_GROUP=p.scalar_group, FP16_W=p.fp16_safe, BM=bm, BN=BLOCK_N, BK=p.block_k)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _fields(words, shift):
    """The 4-bit fields at ``shift`` (an arithmetic shift of a negative word is masked off)."""
    return (words >> shift) & 15


@triton.jit
def _weight_tile(qw_ptr, qz_ptr, sc_ptr, k, n, k0, K, N, group_rows, SCALAR_GROUP: tl.constexpr):
    """The (BK, BN) tile of W^T for rows ``k`` and columns ``n``, exact float32 (AWQ-3.1)."""
    mk, mn = k < K, n < N
    mask = mk[:, None] & mn[None, :]
    words = N // 8
    word = n // 8
    c = n % 8
    shift = ((c >> 1) + 4 * (c & 1)) * 4         # AWQ-2.3: the field ORDER puts column c in
    q = _fields(tl.load(qw_ptr + k[:, None] * words + word[None, :], mask=mask, other=0), shift[None, :])
    if SCALAR_GROUP:                             # one group per tile: its zero and scale rows, broadcast
        g = k0 // group_rows
        z = _fields(tl.load(qz_ptr + g * words + word, mask=mn, other=0), shift)[None, :]
        s = tl.load(sc_ptr + g * N + n, mask=mn, other=0.0)[None, :]
    else:                                        # a group size no row tile divides: each row's group
        g = k // group_rows
        z = _fields(tl.load(qz_ptr + g[:, None] * words + word[None, :], mask=mask, other=0), shift[None, :])
        s = tl.load(sc_ptr + g[:, None] * N + n[None, :], mask=mask, other=0.0)
    return s.to(tl.float32) * (q - z).to(tl.float32)   # exact in float32


@triton.jit
def _dequantize_kernel(qw_ptr, qz_ptr, sc_ptr, out_ptr, K, N, group_rows, SCALAR_GROUP: tl.constexpr,
                       BN: tl.constexpr, BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    k0 = tl.program_id(1) * BK
    k = k0 + tl.arange(0, BK)
    w = _weight_tile(qw_ptr, qz_ptr, sc_ptr, k, n, k0, K, N, group_rows, SCALAR_GROUP)
    mask = (k < K)[:, None] & (n < N)[None, :]
    tl.store(out_ptr + n[None, :] * K + k[:, None], w, mask=mask)     # W is (out, in) = (N, K)


@triton.jit
def _gemv_kernel(x_ptr, qw_ptr, qz_ptr, sc_ptr, y_ptr, M, K, N, group_rows, SCALAR_GROUP: tl.constexpr,
                 BN: tl.constexpr, BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w = _weight_tile(qw_ptr, qz_ptr, sc_ptr, k, n, k0, K, N, group_rows, SCALAR_GROUP)
        xk = tl.load(x_ptr + k, mask=k < K, other=0.0).to(tl.float32)
        acc += tl.sum(xk[:, None] * w, axis=0)                          # W unrounded, float32 products and sums
    tl.store(y_ptr + n, acc.to(tl.float16), mask=n < N)


@triton.jit
def _matmul_kernel(x_ptr, qw_ptr, qz_ptr, sc_ptr, y_ptr, M, K, N, group_rows, SCALAR_GROUP: tl.constexpr,
                   FP16_W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w = _weight_tile(qw_ptr, qz_ptr, sc_ptr, k, n, k0, K, N, group_rows, SCALAR_GROUP)
        xt = tl.load(x_ptr + m[:, None] * K + k[None, :], mask=(m < M)[:, None] & (k < K)[None, :], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(tl.float16), mask=(m < M)[:, None] & (n < N)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# BN output columns per program: 64 columns are 8 qweight words, 32 bytes of a row; BK rows of them make
# a (BK, 8) word tile, each word decoded into 8 columns. BK rows per program: the largest of 128, 64,
# 32, 16 dividing the group size (AutoAWQ's 32, 64, 128 all do), so a tile never straddles a group and
# loads its zero and scale row once (SCALAR_GROUP); another group size uses 32 and gathers per row.

BLOCK_N = 64

