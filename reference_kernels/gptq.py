"""GPTQ v1/v2 in Triton: dequantize and fused dequantize-and-multiply (spec/gptq.md).

Reads top to bottom: the contract's entry points, the load-time preparation, the launchers, the
kernels, the tile configurations.

Bit layout (GPTQ-2, QF-3): input row ``k`` of column ``n`` is field ``k`` of column ``n``'s
little-endian stream of 32-bit words in ``qweight``: bit offset ``k*b``, word ``k*b // 32``, shift
``k*b % 32``. At 3 bits the fields at shift 30 and 31 (fields 10 and 21 of every 32) spill into the
next word; every other width divides 32. ``qzeros`` packs the zero fields of one group along ``n``
the same way. v1 stores ``zero - 1``: an all-ones v1 field (zero point 0, GPTQ-3.4) is rejected at
launch with ``gptq.zero.v1_unrepresentable``, never decoded as something else.

Act-order (GPTQ-5.3): reordered once at load time, as exllama and Marlin do. ``prepare`` sorts the
input rows by group (stable), so every tile of BK sorted rows lies in one group when BK divides the
group size: the kernel loads that group's zero and scale row once per tile and broadcasts it,
never gathering a scale per weight. Codes are read through the permutation row by row (each row of
``qweight`` words is contiguous along ``n``), the dequantized tile is stored to its original columns,
and the matmul reads ``x`` through the same permutation.

Numerics: ``s * (q - z)`` is exact in float32 (an 11-bit scale times |q - z| < 2^8), so one rounding
to float16 gives the correctly rounded value of the exact reference (spec/README.md). The GEMV keeps
W exact and sums float32 products; the batched matmul rounds W once to float16 for tensor cores
(QF-4.6) unless ``max|s| * maxq`` passes 65504, where W could overflow, and then multiplies float32
operands instead (IEEE, no TF32).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from qformats.errors import fail

from . import _int4
from ._arrays import Inputs
from ._prepared import Prepared as _Base
from ._prepared import matmul_output
from ._tiles import dot_w, row_tile

__all__ = ["dequantize_v1", "dequantize_v2", "matmul_v1", "matmul_v2", "prepare", "Prepared", "dequantize_prepared",
           "matmul_prepared"]


# -- entry points (DESIGN.md §6) ---------------------------------------------------------------------

def dequantize_v1(*, qweight, qzeros, scales, g_idx, bits, group_size):
    return _dequantize("v1", qweight, qzeros, scales, g_idx, bits, group_size)


def dequantize_v2(*, qweight, qzeros, scales, g_idx, bits, group_size):
    return _dequantize("v2", qweight, qzeros, scales, g_idx, bits, group_size)


def matmul_v1(*, qweight, qzeros, scales, g_idx, bits, group_size, x):
    return _matmul("v1", qweight, qzeros, scales, g_idx, bits, group_size, x)


def matmul_v2(*, qweight, qzeros, scales, g_idx, bits, group_size, x):
    return _matmul("v2", qweight, qzeros, scales, g_idx, bits, group_size, x)


# -- load-time preparation -----------------------------------------------------------------------------

class Prepared(_Base):
    """A layer checked and reordered once (act-order), ready for any number of launches; frozen (KC-7)."""

    def __init__(self, t: dict[str, torch.Tensor], bits: int, group_size: int, version: str) -> None:
        self.qweight, self.qzeros, self.scales = t["qweight"], t["qzeros"], t["scales"]
        self.bits, self.v1 = bits, version == "v1"
        self.k, self.n = t["g_idx"].shape[0], self.scales.shape[1]
        self.group_rows = self.k if group_size == -1 else group_size
        g = t["g_idx"].long()
        self.perm = torch.argsort(g, stable=True)
        self.row_group = g[self.perm].to(torch.int32).contiguous()
        self.has_perm = not torch.equal(self.perm, torch.arange(self.k, device=g.device))
        self.perm = self.perm.to(torch.int32).contiguous()
        contiguous = torch.arange(self.k, device=g.device) // self.group_rows
        self.block_k = row_tile(self.group_rows)
        self.scalar_group = self.block_k > 0 and torch.equal(self.row_group.long(), contiguous)
        self.block_k = self.block_k or 32
        # |W| <= max|s| * maxq (|q - z| <= maxq for z in [0, maxq], v1 z <= maxq): float16 holds W when
        # that is at most 65504; otherwise rounding W to float16 would overflow to inf (and inf - inf).
        self.fp16_safe = float(self.scales.abs().max()) * ((1 << bits) - 1) <= 65504.0 if self.scales.numel() else True
        self.device, self.zero_words = self.scales.device, self.qzeros.shape[1]
        self.planes = self._planes(version) if self.scalar_group and \
            _int4.eligible(bits, self.k, self.n, self.group_rows) else None
        self._freeze("qweight", "qzeros", "scales", "row_group", "perm")

    def _planes(self, version: str) -> _int4.Planes:
        """KC-7.4: the shared int4 layout; qweight is its codes plane unless act-order sorted the rows."""
        codes = self.qweight
        if self.has_perm:
            rows = _int4.unpack_along_k(self.qweight, self.bits)[self.perm.long()]
            codes = _int4.pack_along_k(rows, self.bits)
        zeros = _zero_fields(self.qzeros, self.bits, self.n) + (1 if version == "v1" else 0)
        return _int4.make_planes(codes, zeros, self.scales, self.perm if self.has_perm else None, bits=self.bits,
                                 k=self.k, n=self.n, group_rows=self.group_rows, fp16_safe=self.fp16_safe)


def _check(t: dict[str, torch.Tensor], bits: int, group_size: int) -> None:
    if isinstance(bits, bool) or bits not in (2, 3, 4, 8):
        raise fail("bits.unsupported", "bits", "one of 2, 3, 4, 8", bits)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or (group_size != -1 and group_size <= 0):
        raise fail("argument.invalid", "group_size", "-1 or > 0", group_size)
    k, (g, n) = t["g_idx"].shape[0], t["scales"].shape
    want = {"qweight": ((k * bits // 32, n), torch.int32), "qzeros": ((g, n * bits // 32), torch.int32),
            "scales": ((g, n), torch.float16)}
    for name, (shape, dtype) in want.items():
        if tuple(t[name].shape) != shape or t[name].dtype != dtype:
            raise fail("tensor.shape", name, f"{str(dtype).removeprefix('torch.')} of shape {shape}",
                       f"{str(t[name].dtype).removeprefix('torch.')} {tuple(t[name].shape)}")
    gi = t["g_idx"]
    if gi.numel() and (int(gi.min()) < 0 or int(gi.max()) >= g):   # bounds before any kernel reads by it
        raise fail("gptq.g_idx.range", "g_idx", f"in [0, {g})", f"{int(gi.min())}..{int(gi.max())}")
    _check_group_sizes(gi, g, k if group_size == -1 else group_size)
    bad = ~torch.isfinite(t["scales"])
    if bool(bad.any()):                                             # GPTQ-3.5: before any launch reads them
        first = [int(i) for i in torch.nonzero(bad)[0]]
        raise fail("gptq.scales.nonfinite", "scales", "finite float16",
                   f"{float(t['scales'][tuple(first)])} at {first} ({int(bad.sum())} non-finite)")


def _check_group_sizes(g_idx: torch.Tensor, groups: int, gs: int) -> None:
    """GPTQ-5.2: every group holds gs rows, the last K - gs (G - 1); the row tiling relies on it."""
    k = g_idx.shape[0]
    counts = torch.bincount(g_idx.long(), minlength=groups)
    want = torch.full((groups,), gs, dtype=counts.dtype, device=counts.device)
    if groups:
        want[-1] = k - gs * (groups - 1)
    if not torch.equal(counts, want):
        first = int(torch.nonzero(counts != want)[0])
        raise fail("gptq.g_idx.group_sizes", "g_idx", f"{gs} rows per group, the last {k - gs * (groups - 1)}",
                   f"{int(counts[first])} rows in group {first}")


def _default_g_idx(qweight: Any, bits: int, group_size: int) -> Any:
    """GPTQ-2.1 / KC-1.3: a layer without g_idx reads as row i in group i // gs (all rows in group 0 for -1)."""
    k = int(qweight.shape[0]) * 32 // bits if bits in (2, 3, 4, 8) else 0
    rows = np.arange(k, dtype=np.int32)
    g_idx = np.zeros(k, np.int32) if group_size == -1 or not isinstance(group_size, int) or group_size <= 0 \
        else rows // group_size
    return torch.from_numpy(g_idx).to(qweight.device) if isinstance(qweight, torch.Tensor) else g_idx


def _zero_fields(qzeros: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The (G, N) zero fields, unpacked on the device (used once, for the v1 check)."""
    words = qzeros.to(torch.int64) & 0xFFFFFFFF
    bit = torch.arange(n, device=qzeros.device) * bits
    lo = words[:, bit // 32] >> (bit % 32)
    spill = (bit % 32) + bits > 32
    hi = torch.where(spill, words[:, torch.clamp(bit // 32 + 1, max=words.shape[1] - 1)] << (32 - bit % 32), 0)
    return (lo | hi) & ((1 << bits) - 1)


def prepare(*, qweight: Any, qzeros: Any, scales: Any, g_idx: Any = None, bits: int, group_size: int,
            version: str) -> Prepared:
    """Check the layer once (shapes, g_idx range and group sizes, finite scales, v1 all-ones fields) and
    reorder its rows by group; ``version`` is ``"v1"`` or ``"v2"``."""
    if version not in ("v1", "v2"):
        raise fail("argument.invalid", "version", "v1 or v2", version)
    return _prepare(qweight, qzeros, scales, g_idx, bits=bits, group_size=group_size, version=version)[0]


def _prepare(qweight: Any, qzeros: Any, scales: Any, g_idx: Any, *, bits: int, group_size: int,
             version: str) -> tuple[Prepared, Inputs]:
    if g_idx is None:
        g_idx = _default_g_idx(qweight, bits, group_size)
    inputs = Inputs(qweight=qweight, qzeros=qzeros, scales=scales, g_idx=g_idx)
    t = inputs.t
    _check(t, bits, group_size)
    if version == "v1":
        fields = _zero_fields(t["qzeros"], bits, t["scales"].shape[1])
        bad = fields == (1 << bits) - 1
        if bool(bad.any()):
            first = [int(i) for i in torch.nonzero(bad)[0]]
            raise fail("gptq.zero.v1_unrepresentable", "qzeros", "free of all-ones v1 fields: zero point 0 is "
                       "not representable in v1 (GPTQ-3.4)", f"{int(bad.sum())} such fields, first at {first}")
    return Prepared(t, bits, group_size, version), inputs


# -- launchers ---------------------------------------------------------------------------------------

def _dequantize(version, qweight, qzeros, scales, g_idx, bits, group_size):
    p, inputs = _prepare(qweight, qzeros, scales, g_idx, bits=bits, group_size=group_size, version=version)
    return inputs.out(dequantize_prepared(p))


def _matmul(version, qweight, qzeros, scales, g_idx, bits, group_size, x):
    p, inputs = _prepare(qweight, qzeros, scales, g_idx, bits=bits, group_size=group_size, version=version)
    return inputs.out(matmul_prepared(p, inputs._tensor(x).to(torch.float16)))


def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """W (out, in) float16 of a prepared layer (what an engine calls after loading); no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.n, p.k), dtype=torch.float16, device=p.device)
    if p.planes is not None:
        return _int4.dequantize(p.planes, out)
    grid = (triton.cdiv(p.n, BLOCK_N), triton.cdiv(p.k, p.block_k))
    _dequantize_kernel[grid](p.qweight, p.qzeros, p.scales, p.row_group, p.perm, out, p.k, p.n,
                             p.zero_words, p.group_rows, BITS=p.bits, V1=p.v1, SCALAR_GROUP=p.scalar_group,
                             HAS_PERM=p.has_perm, BN=BLOCK_N, BK=p.block_k)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 (batch, out), for contiguous float16 ``xt`` (batch, in) on the layer's device; no
    host work (KC-7.2)."""
    m, y = matmul_output(p, xt)
    if p.planes is not None:
        return _int4.matmul(p.planes, xt, y) if m else y
    args = (p.qweight, p.qzeros, p.scales, p.row_group, p.perm, y, m, p.k, p.n, p.zero_words, p.group_rows)
    flags = dict(BITS=p.bits, V1=p.v1, SCALAR_GROUP=p.scalar_group, HAS_PERM=p.has_perm, BK=p.block_k)
    if m == 1:                                   # GEMV: one row of x, products summed along k
        _gemv_kernel[(triton.cdiv(p.n, BLOCK_N),)](xt, *args, BN=BLOCK_N, **flags)
    else:                                        # small batches and prefill: tensor-core tiles
        bm = 16 if m <= 16 else 64
        _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(p.n, BLOCK_N))](xt, *args, FP16_W=p.fp16_safe, BM=bm,
                                                                        BN=BLOCK_N, **flags)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _fields(base, idx, stride, other_axis, mask, BITS: tl.constexpr, ALONG_ROWS: tl.constexpr):
    """b-bit fields ``idx`` of little-endian word streams: along rows (qweight, stride = N) or along a
    row (qzeros). Returns int32 of shape (len(idx), len(other_axis)) or (len(other_axis), len(idx))."""
    bit = idx * BITS
    word, shift = bit // 32, bit % 32
    if ALONG_ROWS:
        ptr = base + word[:, None] * stride + other_axis[None, :]
        sh = shift[:, None]
    else:
        ptr = base + other_axis[:, None] * stride + word[None, :]
        sh = shift[None, :]
    q = tl.load(ptr, mask=mask, other=0).to(tl.uint32, bitcast=True) >> sh.to(tl.uint32)
    if BITS == 3:                                # fields 10 and 21 of every 32 straddle two words
        spill = sh > 29
        nxt = stride if ALONG_ROWS else 1
        hi = tl.load(ptr + nxt, mask=mask & spill, other=0).to(tl.uint32, bitcast=True)
        q = q | tl.where(spill, hi << tl.where(spill, 32 - sh, 0).to(tl.uint32), 0)
    return (q & ((1 << BITS) - 1)).to(tl.int32)


@triton.jit
def _weight_tile(qw_ptr, qz_ptr, sc_ptr, grp_ptr, perm_ptr, k, n, k0, K, N, ZW, group_rows,
                 BITS: tl.constexpr, V1: tl.constexpr, SCALAR_GROUP: tl.constexpr, HAS_PERM: tl.constexpr):
    """The (BK, BN) tile of W^T, exact float32, for sorted rows ``k`` and columns ``n``; and the original rows."""
    mk, mn = k < K, n < N
    rows = tl.load(perm_ptr + k, mask=mk, other=0) if HAS_PERM else k
    q = _fields(qw_ptr, rows, N, n, mk[:, None] & mn[None, :], BITS, True)
    if SCALAR_GROUP:                             # one group per tile: its zero and scale rows, broadcast
        g = k0 // group_rows
        z = _fields(qz_ptr + g * ZW, n, 0, tl.zeros((1,), tl.int32), mn[None, :], BITS, False)
        s = tl.load(sc_ptr + g * N + n, mask=mn, other=0.0)[None, :]
    else:                                        # groups of other sizes: the row's group, gathered
        g = tl.load(grp_ptr + k, mask=mk, other=0)
        z = _fields(qz_ptr, n, ZW, g, mk[:, None] & mn[None, :], BITS, False)
        s = tl.load(sc_ptr + g[:, None] * N + n[None, :], mask=mk[:, None] & mn[None, :], other=0.0)
    if V1:
        z = z + 1
    return s.to(tl.float32) * (q - z).to(tl.float32), rows   # exact in float32


@triton.jit
def _dequantize_kernel(qw_ptr, qz_ptr, sc_ptr, grp_ptr, perm_ptr, out_ptr, K, N, ZW, group_rows,
                       BITS: tl.constexpr, V1: tl.constexpr, SCALAR_GROUP: tl.constexpr, HAS_PERM: tl.constexpr,
                       BN: tl.constexpr, BK: tl.constexpr):
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    n = pid_n * BN + tl.arange(0, BN)
    k0 = pid_k * BK
    k = k0 + tl.arange(0, BK)
    w, rows = _weight_tile(qw_ptr, qz_ptr, sc_ptr, grp_ptr, perm_ptr, k, n, k0, K, N, ZW, group_rows,
                           BITS, V1, SCALAR_GROUP, HAS_PERM)
    mask = (k < K)[:, None] & (n < N)[None, :]
    tl.store(out_ptr + n[None, :] * K + rows[:, None], w.to(tl.float16), mask=mask)   # W is (out, in) = (N, K)


@triton.jit
def _gemv_kernel(x_ptr, qw_ptr, qz_ptr, sc_ptr, grp_ptr, perm_ptr, y_ptr, M, K, N, ZW, group_rows,
                 BITS: tl.constexpr, V1: tl.constexpr, SCALAR_GROUP: tl.constexpr, HAS_PERM: tl.constexpr,
                 BN: tl.constexpr, BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w, rows = _weight_tile(qw_ptr, qz_ptr, sc_ptr, grp_ptr, perm_ptr, k, n, k0, K, N, ZW, group_rows,
                               BITS, V1, SCALAR_GROUP, HAS_PERM)
        xk = tl.load(x_ptr + rows, mask=k < K, other=0.0).to(tl.float32)
        acc += tl.sum(xk[:, None] * w, axis=0)                          # W unrounded, float32 products and sums
    tl.store(y_ptr + n, acc.to(tl.float16), mask=n < N)


@triton.jit
def _matmul_kernel(x_ptr, qw_ptr, qz_ptr, sc_ptr, grp_ptr, perm_ptr, y_ptr, M, K, N, ZW, group_rows,
                   BITS: tl.constexpr, V1: tl.constexpr, SCALAR_GROUP: tl.constexpr, HAS_PERM: tl.constexpr,
                   FP16_W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        w, rows = _weight_tile(qw_ptr, qz_ptr, sc_ptr, grp_ptr, perm_ptr, k, n, k0, K, N, ZW, group_rows,
                               BITS, V1, SCALAR_GROUP, HAS_PERM)
        xt = tl.load(x_ptr + m[:, None] * K + rows[None, :], mask=(m < M)[:, None] & (k < K)[None, :], other=0.0)
        acc = dot_w(acc, xt, w, FP16_W)
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(tl.float16), mask=(m < M)[:, None] & (n < N)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# BN output columns per program: 64 keeps a 4-bit qweight row tile at 256 bytes (two 128-byte
# transactions) on a GPU and few programs in the interpreter. BK rows per program: the largest of
# 128, 64, 32, 16 dividing the group size, so a tile never straddles a group (SCALAR_GROUP); a
# group size none of them divides uses 32 and gathers per row.

BLOCK_N = 64

