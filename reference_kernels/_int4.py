"""One packed-integer layout for GPTQ, AWQ and compressed-tensors (KC-7.4): split-K GEMV and batched matmul.

Reads top to bottom: the planes a ``prepare`` makes, the launchers, the kernels, the tile plans.

The planes (made once, at ``prepare``, from each format's own bytes; the values they decode are the
format's, bit for bit)::

    codes   int32 (K b / 32, N)   word r of column n holds inputs k = r P .. r P + P - 1, P = 32 / b,
                                  input k at bits b (k % P) .. b (k % P) + b - 1 (GPTQ's own qweight)
    zeros   uint8 (G, N)          the integer z of W = s (q - z) for group g of column n
    scales  float16|float32 (G, N)
    perm    int32 (K,)            only with act-order: sorted row r is input row perm[r] (x is read through it)

for ``b`` in 2, 4, 8 (widths that divide 32: no field straddles a word). GPTQ 4-bit without act-order is
its ``qweight`` itself; AWQ's output-axis packing (order 0 2 4 6 1 3 5 7) and compressed-tensors'
per-row streams are repacked on the device at prepare. Rows are grouped contiguously (``g = r // gs``)
and ``BK`` divides ``gs``, so each K step of a program reads one scale and zero row.

GEMV (batch 1), split-K: a program owns ``BN`` columns and one of ``S`` slices of K; each packed word
is loaded once (a ``(BK / P, BN)`` tile, 128-byte rows at ``BN = 32``) and unpacked with shifts into
``(BK, BN)`` codes; per K step (one group) it forms ``t = sum_k x_k (q_k - z)`` exactly per product
(a float16 times an integer below 2^8 fits float32's 24 bits) and adds ``s t``. The partial sums of
the ``S`` slices go to a float32 workspace made at prepare and are added in slice order by a second
launch: no atomics, the same bits on every run. QF-4.6 covers the order (split-K and the per-group
factor are float32 sums of exact products: at most ``gs + G <= K + 1`` roundings on any path).

Batch 2..16, split-K on tensor cores with the operands swapped: the weight tile ``(BN, BK)`` is the MMA's
large side, ``x^T`` ``(BK, 16)`` the small one (``y^T = W x^T``); W rounded once to float16 as the
format kernels do (QF-4.6) unless ``fp16_safe`` is False, then float32 operands (IEEE). Larger batches
(prefill) run one slice and store float16 directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _splitk
from ._splitk import INTERPRETER_SMS, MAX_SPLIT_BATCH, REDUCE_BLOCK, Plan, make_plan  # noqa: F401 (re-exported)
from ._splitk import codes_tile as _codes_tile
from ._splitk import dot_wt, program_slice, store_out
from ._tiles import row_tile

__all__ = ["Planes", "eligible", "make_planes", "dequantize", "matmul", "pack_along_k", "unpack_along_k"]


def eligible(bits: int, k: int, n: int, group_rows: int) -> bool:
    """Whether a layer takes the shared planes: a width dividing 32, whole words along K, and a group size
    that a row tile of 16..128 divides (so every K step lies in one group)."""
    return bits in (2, 4, 8) and k > 0 and n > 0 and k % (32 // bits) == 0 and row_tile(group_rows) > 0


def pack_along_k(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """``(K, N)`` integer codes in ``[0, 2^b)`` to the ``codes`` plane ``(K b / 32, N)`` int32 (on their device)."""
    per = 32 // bits
    k, n = codes.shape
    c = codes.to(torch.int64).reshape(k // per, per, n)
    shifts = (torch.arange(per, device=codes.device, dtype=torch.int64) * bits).view(1, per, 1)
    words = (c << shifts).sum(dim=1)                           # disjoint fields: the sum is the bitwise or
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32).contiguous()


def unpack_along_k(words: torch.Tensor, bits: int) -> torch.Tensor:
    """The inverse of :func:`pack_along_k`: ``(K b / 32, N)`` int32 words to ``(K, N)`` int64 codes."""
    per = 32 // bits
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = (torch.arange(per, device=words.device, dtype=torch.int64) * bits).view(1, per, 1)
    return ((w[:, None, :] >> shifts) & ((1 << bits) - 1)).reshape(-1, words.shape[1])


class Planes:
    """The shared layout of one layer (see the module docstring), its tile plans and split-K workspace."""

    def __init__(self, codes: torch.Tensor, zeros: torch.Tensor, scales: torch.Tensor, perm: torch.Tensor | None,
                 *, bits: int, k: int, n: int, group_rows: int, fp16_safe: bool) -> None:
        self.codes, self.zeros, self.scales, self.perm = codes, zeros, scales, perm
        self.bits, self.k, self.n, self.group_rows, self.fp16_safe = bits, k, n, group_rows, fp16_safe
        self.block_k, self.device = row_tile(group_rows), codes.device
        self.gemv = plan_gemv(k, n, self.block_k, codes.device)
        self.batch = plan_batch(k, n, self.block_k, codes.device)
        self.workspace = _splitk.workspace(n, codes.device)
        if codes.device.type == "cuda":
            tuned(self, perm is not None)

    def tensors(self) -> tuple[str, ...]:
        """The attributes a prepared layer watches for writes (KC-7.3)."""
        return ("codes", "zeros", "scales") + (("perm",) if self.perm is not None else ())


def make_planes(codes, zeros, scales, perm, **kw) -> Planes:
    return Planes(codes.contiguous(), zeros.to(torch.uint8).contiguous(), scales.contiguous(),
                  None if perm is None else perm.to(torch.int32).contiguous(), **kw)


# -- launchers ---------------------------------------------------------------------------------------

def dequantize(p: Planes, out: torch.Tensor) -> torch.Tensor:
    """W (N, K) into ``out`` (float16 or float32), the original row order restored through ``perm``."""
    grid = (triton.cdiv(p.n, DEQUANT_BN), triton.cdiv(p.k, p.block_k))
    _dequantize_kernel[grid](p.codes, p.zeros, p.scales, p.perm if p.perm is not None else p.codes, out,
                             p.k, p.n, p.group_rows, BITS=p.bits, HAS_PERM=p.perm is not None,
                             BN=DEQUANT_BN, BK=p.block_k, num_warps=4)
    return out


def matmul(p: Planes, xt: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T into float16 ``y`` (M, N) for contiguous float16 ``xt`` (M, K); launches only."""
    m = xt.shape[0]
    perm = p.perm if p.perm is not None else p.codes            # never read without HAS_PERM
    common = (p.codes, p.zeros, p.scales, perm)
    if m == 1:
        c = p.gemv
        kernel = _gemv_once_kernel if c.once else _gemv_kernel
        kernel[(triton.cdiv(p.n, c.bn), c.split)](xt, *common, p.workspace, y, p.k, p.n, p.group_rows,
                                                        c.k_per_split, BITS=p.bits, HAS_PERM=p.perm is not None,
                                                        DIRECT=c.split == 1, BN=c.bn, BK=c.bk, STAGES=c.stages,
                                                        num_warps=c.warps)
        split = c.split
    else:
        c = p.batch if m <= MAX_SPLIT_BATCH else Plan(64, p.block_k, 1, p.k, 4, 2, bm=64)
        _batch_kernel[(triton.cdiv(p.n, c.bn), c.split, triton.cdiv(m, c.bm))](
            xt, *common, p.workspace, y, m, p.k, p.n, p.group_rows, c.k_per_split, BITS=p.bits,
            HAS_PERM=p.perm is not None, DIRECT=c.split == 1, FP16_W=p.fp16_safe, BM=c.bm, BN=c.bn, BK=c.bk,
            STAGES=c.stages, num_warps=c.warps)
        split = c.split
    if split > 1:                                               # the slices' partial sums, added in order
        _splitk.reduce(p.workspace, y, m, p.n, split)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _group_rows_of(zeros_ptr, scales_ptr, g, n, N):
    """Group g's zero points (int32) and scales (float32) of columns ``n``."""
    z = tl.load(zeros_ptr + g * N + n, mask=n < N, other=0).to(tl.int32)
    s = tl.load(scales_ptr + g * N + n, mask=n < N, other=0.0).to(tl.float32)
    return z, s


@triton.jit
def _dequantize_kernel(codes_ptr, zeros_ptr, scales_ptr, perm_ptr, out_ptr, K, N, group_rows,
                       BITS: tl.constexpr, HAS_PERM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    r0 = tl.program_id(1) * BK
    r = r0 + tl.arange(0, BK)
    q = _codes_tile(codes_ptr, r0, n, N, K * BITS // 32, BITS, BN, BK)
    z, s = _group_rows_of(zeros_ptr, scales_ptr, r0 // group_rows, n, N)
    w = s[None, :] * (q - z[None, :]).to(tl.float32)             # exact in float32 (the formats' W)
    rows = tl.load(perm_ptr + r, mask=r < K, other=0) if HAS_PERM else r
    mask = (r < K)[:, None] & (n < N)[None, :]
    tl.store(out_ptr + n[None, :] * K + rows[:, None], w.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gemv_kernel(x_ptr, codes_ptr, zeros_ptr, scales_ptr, perm_ptr, part_ptr, y_ptr, K, N, group_rows,
                 K_PER_SPLIT, BITS: tl.constexpr, HAS_PERM: tl.constexpr, DIRECT: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, STAGES: tl.constexpr):
    n, split, start, stop = program_slice(K, K_PER_SPLIT, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for r0 in tl.range(start, stop, BK, num_stages=STAGES):
        r = r0 + tl.arange(0, BK)
        q = _codes_tile(codes_ptr, r0, n, N, K * BITS // 32, BITS, BN, BK)
        z, s = _group_rows_of(zeros_ptr, scales_ptr, r0 // group_rows, n, N)
        rows = tl.load(perm_ptr + r, mask=r < K, other=0) if HAS_PERM else r
        xk = tl.load(x_ptr + rows, mask=r < K, other=0.0).to(tl.float32)
        t = tl.sum(xk[:, None] * (q - z[None, :]).to(tl.float32), axis=0)   # exact products, one group
        acc += s * t
    store_out(acc, y_ptr, part_ptr, split, n, n < N, N, DIRECT)   # workspace (S, 16, N), row 0


@triton.jit
def _gemv_once_kernel(x_ptr, codes_ptr, zeros_ptr, scales_ptr, perm_ptr, part_ptr, y_ptr, K, N, group_rows,
                      K_PER_SPLIT, BITS: tl.constexpr, HAS_PERM: tl.constexpr, DIRECT: tl.constexpr,
                      BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    """The GEMV with one float32 accumulator per (word row, field, column), reduced once after the K loop:
    no cross-thread sum and no reshape inside the loop; products ``x_k W_kn`` with W exact in float32."""
    PER: tl.constexpr = 32 // BITS
    n, split, start, stop = program_slice(K, K_PER_SPLIT, BN)
    shifts = tl.arange(0, PER) * BITS
    acc = tl.zeros((BK // PER, PER, BN), dtype=tl.float32)
    for r0 in tl.range(start, stop, BK, num_stages=STAGES):
        w = r0 // PER + tl.arange(0, BK // PER)
        words = tl.load(codes_ptr + w[:, None] * N + n[None, :], mask=(w < K // PER)[:, None] & (n < N)[None, :],
                        other=0)
        q = (words[:, None, :] >> shifts[None, :, None]) & ((1 << BITS) - 1)     # (BK / P, P, BN), rows in order
        z, s = _group_rows_of(zeros_ptr, scales_ptr, r0 // group_rows, n, N)
        r = w[:, None] * PER + tl.arange(0, PER)[None, :]                          # (BK / P, P) sorted rows
        rows = tl.load(perm_ptr + r, mask=r < K, other=0) if HAS_PERM else r
        xk = tl.load(x_ptr + rows, mask=r < K, other=0.0).to(tl.float32)
        acc += xk[:, :, None] * (s[None, None, :] * (q - z[None, None, :]).to(tl.float32))
    out = tl.sum(tl.sum(acc, axis=0), axis=0)
    store_out(out, y_ptr, part_ptr, split, n, n < N, N, DIRECT)


@triton.jit
def _batch_kernel(x_ptr, codes_ptr, zeros_ptr, scales_ptr, perm_ptr, part_ptr, y_ptr, M, K, N, group_rows,
                  K_PER_SPLIT, BITS: tl.constexpr, HAS_PERM: tl.constexpr, DIRECT: tl.constexpr,
                  FP16_W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    n, split, start, stop = program_slice(K, K_PER_SPLIT, BN)
    m = tl.program_id(2) * BM + tl.arange(0, BM)
    acc = tl.zeros((BN, BM), dtype=tl.float32)                   # y^T tile: the weight is the MMA's large side
    for r0 in tl.range(start, stop, BK, num_stages=STAGES):
        r = r0 + tl.arange(0, BK)
        q = _codes_tile(codes_ptr, r0, n, N, K * BITS // 32, BITS, BN, BK)
        z, s = _group_rows_of(zeros_ptr, scales_ptr, r0 // group_rows, n, N)
        w = tl.trans(s[None, :] * (q - z[None, :]).to(tl.float32))   # (BN, BK), exact in float32
        rows = tl.load(perm_ptr + r, mask=r < K, other=0) if HAS_PERM else r
        xt = tl.load(x_ptr + m[None, :] * K + rows[:, None], mask=(r < K)[:, None] & (m < M)[None, :], other=0.0)
        acc = dot_wt(acc, w, xt, FP16_W)                         # W rounded once to float16 (QF-4.6)
    store_out(acc, y_ptr, part_ptr, split, m[None, :] * N + n[:, None], (n < N)[:, None] & (m < M)[None, :], N,
              DIRECT)


# -- tile plans ----------------------------------------------------------------------------------------
# The roofline of a 4-bit GEMV is its weight bytes over the copy bandwidth: 11008 x 4096 is 22.5 MB, ~5.3 us
# at 4.25 TB/s. That needs enough loads in flight: several programs per SM (132 on an H200) each streaming a
# few K steps with the loop pipelined (num_stages). A plan splits K into S slices so that ceil(N / BN) * S
# reaches a number of programs per SM; each slice is whole BK steps (groups never straddle).
# On a GPU, ``prepare`` times the candidates below once per shape class (bits, K, N, row tile, act-order,
# batch class, device) and keeps the fastest (``tune``; the choice is cached for the process); in the
# interpreter the first candidate is taken, so the tests run the same tile arithmetic on every candidate
# they name.

# (BN, BK cap, programs per SM, warps, stages[, reduce once]). Measured on an H200 (2026-11-28, 11008 x 4096,
# benchmarks/results/kernels-h200-2026-11-28-sweep.txt): the per-step-sum GEMV was fastest at BN = 64 with
# about 7-8 slices (24.5 us), within 10 % from 4 to 8 programs per SM; BN = 16 without a split was slowest
# (40 us). The reduce-once variants are not measured yet: the tuner times them beside the measured ones.
GEMV_CANDIDATES = ((64, 128, 8, 4, 3), (64, 128, 4, 4, 3), (64, 128, 8, 2, 3), (32, 128, 8, 4, 3),
                   (64, 128, 8, 4, 3, True), (32, 128, 8, 4, 3, True), (64, 64, 8, 4, 3, True),
                   (128, 128, 4, 8, 3, True))
# batch 16 on the same run: BN = 128, BK = 64, about 7 programs per SM was fastest (35.4 us), BN = 32 slowest.
BATCH_CANDIDATES = ((128, 64, 8, 4, 3), (128, 128, 4, 4, 3), (64, 128, 8, 4, 3), (128, 64, 16, 4, 3),
                    (128, 64, 4, 4, 3), (128, 64, 4, 8, 3))
DEQUANT_BN = 64


def plan_gemv(k: int, n: int, group_tile: int, device: torch.device) -> Plan:
    return make_plan(GEMV_CANDIDATES[0], k, n, group_tile, _splitk.sms(device))


def plan_batch(k: int, n: int, group_tile: int, device: torch.device) -> Plan:
    return make_plan(BATCH_CANDIDATES[0], k, n, group_tile, _splitk.sms(device))


def tune(p: Planes, batch: int, candidates: tuple, verbose: bool = False) -> list[tuple[float, Plan]]:
    """Time ``candidates`` for ``batch`` rows of x on the layer's GPU (triton's do_bench, median); the
    fastest first. Only ``prepare`` (host work allowed) and the benchmark call it."""
    return _splitk.tune(p, batch, candidates, matmul, verbose)


def tuned(p: Planes, has_perm: bool) -> None:
    """On a GPU: the fastest GEMV and batch-16 plans of this shape class, timed once per process."""
    _splitk.tuned(p, (p.bits, has_perm), GEMV_CANDIDATES, BATCH_CANDIDATES, matmul)
