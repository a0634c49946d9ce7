"""The ggml block types (q4_K, q5_K, q6_K, q8_0) on aligned planes (KC-7.5): split-K GEMV, batched matmul on
tensor cores and dequantize, shared by the four format modules.

Reads top to bottom: the prepared layer and its planes, the plane builders the format modules call, launchers,
kernels, tile plans.

A format module checks its blocks, computes its float16-W bound once, and at ``prepare`` splits the blocks
into planes made from the same bytes (no value changes), each ``(K units, N)`` with the ``N = rows`` output
columns contiguous (a K step of a program reads whole 128-byte rows of the int32 planes at ``BN = 32``)::

    codes    int32 (K b / 32, N)   b-bit fields packed along K as ``_int4.pack_along_k`` packs them: the
                                   low nibbles (q4_K, q5_K, q6_K), q5_K's high bit, q6_K's 2 high bits,
                                   q8_0's bytes (two's complement, sign-extended in the kernel)
    scales   uint8|int8 (K / S, N) the sub-block scale (and q4_K/q5_K's min): the 6-bit packing undone
                                   at prepare, as integers
    d, dmin  float16 (K / B, N)    the block's float16 fields as they are (inf and NaN included)

for sub-blocks of ``S`` weights (32; 16 for q6_K) and blocks of ``B`` weights (256; 32 for q8_0). Its one
``@triton.jit`` function ``VALUES(a, b, c, d, e, f, r0, n, K, N, BK, BN)`` turns the planes (up to six
pointers, unused ones repeat the first) into the float32 ``(BK, BN)`` tile ``W^T[r0 .. r0 + BK, n]``
exactly as ggml computes each value (``d * sc`` and ``dmin * m`` in float32, then ``(d sc) q - dmin m``):
bit for bit the NumPy reference. The kernels here are the same for all four; ``VALUES`` is a compile-time
constant, so each type gets its own specialised kernels.

Tile arithmetic: a K step is ``BK`` in 32, 64, 128, 256 rows; for the K-quants it divides the 256-weight
super-block, so a step lies in one block and loads its ``d``/``dmin`` row once (once per block at
``BK = 256``, once per step for a smaller ``BK``). A step loads ``BK b / 32`` words of each codes plane per column, each
once, and ``BK / S`` rows of each scale plane, so every sub-block's scale and min are loaded once and
broadcast over its ``S`` weights (a ``(BK / S, S, BN)`` view of the codes tile). q8_0 blocks are 32 weights
and ``K`` is a multiple of 32, not of ``BK``: the last step is masked (codes, ``d`` and x read as zero).

GEMV (batch 1), split-K as ``_int4.py``: a program owns ``BN`` columns and one of ``S`` slices of whole K
steps; products ``x_k W_kn`` summed in float32 per step (or in a ``(BK, BN)`` accumulator reduced once after
the loop), partial sums to the workspace made at prepare, added in slice order by a second launch (no
atomics: the same bits on every run). Batch 2..16: ``y^T = W x^T`` on tensor cores, the ``(BN, BK)``
weight tile the MMA's large side, W rounded once to float16 when ``fp16_safe`` (QF-4.6) else float32
operands (IEEE); larger batches run one slice and store float16 directly.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from . import _splitk
from ._int4 import pack_along_k
from ._prepared import Prepared as _Base
from ._prepared import checked_x
from ._splitk import Plan, dot_wt, make_plan, program_slice, store_out

__all__ = ["Prepared", "Planes", "dequantize_prepared", "matmul_prepared", "fp16_plane", "codes_plane",
           "k_plane", "scale_min_k4", "affine_tile", "GEMV_CANDIDATES", "BATCH_CANDIDATES"]

STEP_CAP = 256                     # the largest K step: one super-block, so a step never straddles one


# -- the prepared layer (KC-7) and its planes (KC-7.5) -----------------------------------------------------

class Planes:
    """The planes of one layer (module docstring), its ``VALUES`` function, tile plans and split-K workspace.
    ``k`` is the input length (ggml's ``n``), ``n`` the output columns (ggml's rows)."""

    def __init__(self, planes: tuple[torch.Tensor, ...], values, *, k: int, n: int, fp16_safe: bool,
                 kind: str) -> None:
        planes = tuple(t.contiguous() for t in planes)
        self.arrays = planes + (planes[0],) * (6 - len(planes))      # the kernels take six pointers
        self.values, self.k, self.n, self.fp16_safe, self.kind = values, k, n, fp16_safe, kind
        self.block_k, self.device = STEP_CAP, planes[0].device
        gpu, sms = self.device.type == "cuda", _splitk.sms(self.device)
        self.gemv = make_plan(GEMV_CANDIDATES[0] if gpu else INTERPRETER_PLAN, k, n, STEP_CAP, sms)
        self.batch = make_plan(BATCH_CANDIDATES[0] if gpu else INTERPRETER_PLAN, k, n, STEP_CAP, sms)
        self.workspace = _splitk.workspace(n, self.device)
        if gpu:
            _splitk.tuned(self, (kind,), GEMV_CANDIDATES, BATCH_CANDIDATES, matmul)


class Prepared(_Base):
    """Checked blocks ``(rows, n // block * block_bytes)`` (watched for writes, KC-7.3), their planes, and
    whether every |W| fits float16 (``fp16_safe``, computed once here rather than synced per batched call)."""

    def __init__(self, blocks: torch.Tensor, rows: int, n: int, planes: tuple[torch.Tensor, ...], values,
                 fp16_safe: bool, kind: str) -> None:
        self.blocks, self.rows, self.n, self.fp16_safe, self.device = blocks, rows, n, fp16_safe, blocks.device
        self.planes = Planes(planes, values, k=n, n=rows, fp16_safe=fp16_safe, kind=kind)
        self._freeze("blocks")


# -- plane builders (prepare only; torch on the blocks' device) ---------------------------------------------

def k_plane(t: torch.Tensor) -> torch.Tensor:
    """``(rows, K units)`` to the ``(K units, rows)`` plane layout (the units' axes flattened; rows may be 0)."""
    return t.reshape(t.shape[0], math.prod(t.shape[1:])).t().contiguous()


def fp16_plane(blocks: torch.Tensor, offset: int) -> torch.Tensor:
    """The little-endian float16 field at byte ``offset`` of every block of ``(rows, nb, block_bytes)``, as a
    ``(nb, rows)`` float16 plane: the same two bytes, NaN payloads and signs kept."""
    return k_plane(blocks[..., offset:offset + 2].contiguous().view(torch.float16))


def codes_plane(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """``(rows, K)`` codes in ``[0, 2^b)`` to the ``(K b / 32, rows)`` int32 plane."""
    return pack_along_k(codes.reshape(codes.shape[0], math.prod(codes.shape[1:])).t(), bits)


def scale_min_k4(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q4_K/q5_K's 12 scale bytes ``(rows, nb, 12)`` to the 6-bit scales and mins ``(rows, nb, 8)`` uint8
    (Q4K-1.4, ``get_scale_min_k4``)::

        j < 4:  sc = s[j] & 63                              m = s[j + 4] & 63
        j >= 4: sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4     m = (s[j + 4] >> 4) | (s[j] >> 6) << 4
    """
    a, b, c = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = torch.cat([a & 63, (c & 15) | ((a >> 6) << 4)], dim=-1)
    m = torch.cat([b & 63, (c >> 4) | ((b >> 6) << 4)], dim=-1)
    return sc, m


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """float16 ``(rows, n)``: each reference value rounded once; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.rows, p.n), dtype=torch.float16, device=p.device)
    q = p.planes
    if q.n:
        grid = (triton.cdiv(q.n, DEQUANT_BN), triton.cdiv(q.k, DEQUANT_BK))
        _dequantize_kernel[grid](*q.arrays, out, q.k, q.n, VALUES=q.values, BN=DEQUANT_BN, BK=DEQUANT_BK,
                                 num_warps=8)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """float16 ``x @ W.T``, float32 accumulation: the split-K GEMV for batch 1, tensor-core tiles otherwise,
    where W is rounded to float16 only if every |W| fits (QF-4.6); no host work (KC-7.2)."""
    p.check_unchanged()
    m = checked_x(xt, p.n, p.device).shape[0]
    y = torch.empty((m, p.rows), dtype=torch.float16, device=p.device)
    return matmul(p.planes, xt, y) if m and p.rows else y


def matmul(q: Planes, xt: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T into float16 ``y`` (M, N) for contiguous float16 ``xt`` (M, K); launches only."""
    m = xt.shape[0]
    if m == 1:
        c = q.gemv
        _gemv_kernel[(triton.cdiv(q.n, c.bn), c.split)](
            xt, *q.arrays, q.workspace, y, q.k, q.n, c.k_per_split, VALUES=q.values, DIRECT=c.split == 1,
            ONCE=c.once, BN=c.bn, BK=c.bk, STAGES=c.stages, num_warps=c.warps)
    else:
        c = q.batch if m <= _splitk.MAX_SPLIT_BATCH else Plan(64, 64, 1, q.k, 4, 2, bm=64)
        _batch_kernel[(triton.cdiv(q.n, c.bn), c.split, triton.cdiv(m, c.bm))](
            xt, *q.arrays, q.workspace, y, m, q.k, q.n, c.k_per_split, VALUES=q.values, DIRECT=c.split == 1,
            FP16_W=q.fp16_safe, BM=c.bm, BN=c.bn, BK=c.bk, STAGES=c.stages, num_warps=c.warps)
    if c.split > 1:                                             # the slices' partial sums, added in order
        _splitk.reduce(q.workspace, y, m, q.n, c.split)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def affine_tile(q, sc_ptr, m_ptr, d_ptr, dmin_ptr, r0, n, K, N, BK: tl.constexpr, BN: tl.constexpr):
    """q4_K/q5_K: the (BK, BN) float32 values ``(d * sc) * q - dmin * m`` of the codes tile ``q`` of rows
    r0 .. r0 + BK - 1 (one super-block), each sub-block's scale and min loaded once and broadcast over its
    32 weights. ``d * sc`` and ``dmin * m`` are exact in float32, so is ``(d sc) q``: the one rounding is the
    subtraction, with or without FMA (Q4K-3.1, KQ-5.2)."""
    s = r0 // 32 + tl.arange(0, BK // 32)
    live = (s < K // 32)[:, None] & (n < N)[None, :]
    sc = tl.load(sc_ptr + s[:, None] * N + n[None, :], mask=live, other=0).to(tl.float32)
    m = tl.load(m_ptr + s[:, None] * N + n[None, :], mask=live, other=0).to(tl.float32)
    d = tl.load(d_ptr + (r0 // 256) * N + n, mask=n < N, other=0.0).to(tl.float32)
    dmin = tl.load(dmin_ptr + (r0 // 256) * N + n, mask=n < N, other=0.0).to(tl.float32)
    scale = d[None, :] * sc                                        # (BK / 32, BN), exact
    mins = dmin[None, :] * m
    w = scale[:, None, :] * tl.reshape(q, (BK // 32, 32, BN)).to(tl.float32) - mins[:, None, :]
    return tl.reshape(w, (BK, BN))


@triton.jit
def _dequantize_kernel(a, b, c, d, e, f, out_ptr, K, N, VALUES: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    r0 = tl.program_id(1) * BK
    r = r0 + tl.arange(0, BK)
    w = VALUES(a, b, c, d, e, f, r0, n, K, N, BK, BN)
    mask = (r < K)[:, None] & (n < N)[None, :]
    tl.store(out_ptr + n[None, :] * K + r[:, None], w.to(tl.float16), mask=mask)


@triton.jit
def _gemv_kernel(x_ptr, a, b, c, d, e, f, part_ptr, y_ptr, K, N, K_PER_SPLIT, VALUES: tl.constexpr,
                 DIRECT: tl.constexpr, ONCE: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 STAGES: tl.constexpr):
    n, split, start, stop = program_slice(K, K_PER_SPLIT, BN)
    if ONCE:                                          # one accumulator per (row, column), reduced after the loop
        acc = tl.zeros((BK, BN), dtype=tl.float32)
    else:                                             # a cross-row sum per K step
        acc = tl.zeros((BN,), dtype=tl.float32)
    for r0 in tl.range(start, stop, BK, num_stages=STAGES):
        w = VALUES(a, b, c, d, e, f, r0, n, K, N, BK, BN)              # (BK, BN) float32, ggml's values
        r = r0 + tl.arange(0, BK)
        xk = tl.load(x_ptr + r, mask=r < K, other=0.0).to(tl.float32)
        if ONCE:
            acc += xk[:, None] * w
        else:
            acc += tl.sum(xk[:, None] * w, axis=0)
    if ONCE:
        out = tl.sum(acc, axis=0)
    else:
        out = acc
    store_out(out, y_ptr, part_ptr, split, n, n < N, N, DIRECT)     # workspace (S, 16, N), row 0


@triton.jit
def _batch_kernel(x_ptr, a, b, c, d, e, f, part_ptr, y_ptr, M, K, N, K_PER_SPLIT, VALUES: tl.constexpr,
                  DIRECT: tl.constexpr, FP16_W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, STAGES: tl.constexpr):
    n, split, start, stop = program_slice(K, K_PER_SPLIT, BN)
    m = tl.program_id(2) * BM + tl.arange(0, BM)
    acc = tl.zeros((BN, BM), dtype=tl.float32)                   # y^T tile: the weight is the MMA's large side
    for r0 in tl.range(start, stop, BK, num_stages=STAGES):
        w = tl.trans(VALUES(a, b, c, d, e, f, r0, n, K, N, BK, BN))   # (BN, BK) float32, ggml's values
        r = r0 + tl.arange(0, BK)
        xt = tl.load(x_ptr + m[None, :] * K + r[:, None], mask=(r < K)[:, None] & (m < M)[None, :], other=0.0)
        acc = dot_wt(acc, w, xt, FP16_W)                         # W rounded once to float16 (QF-4.6)
    store_out(acc, y_ptr, part_ptr, split, m[None, :] * N + n[:, None], (n < N)[:, None] & (m < M)[None, :], N,
              DIRECT)


# -- tile plans ----------------------------------------------------------------------------------------
# (BN, BK cap, programs per SM, warps, stages[, reduce once]), as _int4.py's; BK = min(cap, 256). Not yet
# measured for these types: the first candidates follow _int4's H200 sweep (BN = 64, about 8 programs per
# SM for the GEMV; BN = 128, BK = 64 for batch 16), the rest give the tuner a super-block step (BK = 256,
# d/dmin loaded once per block) and the reduce-once accumulator. On a GPU ``prepare`` times them once per
# shape class (type, K, N); in the interpreter the first is taken (the tests force each in turn).
# The planes stream the blocks' bytes: 11008 x 4096 is 25.4 MB in q4_K (4.5 bits a weight), ~6.0 us at 4.25 TB/s;
# q5_K 31.0 MB (5.5 bits) ~7.3 us, q6_K 37.0 MB (6.5625 bits) ~8.7 us, q8_0 47.9 MB (8.5 bits) ~11.3 us.

GEMV_CANDIDATES = ((64, 128, 8, 4, 3), (64, 256, 8, 4, 3), (32, 256, 8, 4, 3), (64, 128, 4, 4, 3),
                   (64, 128, 8, 4, 3, True), (32, 256, 8, 4, 3, True))
BATCH_CANDIDATES = ((128, 64, 8, 4, 3), (128, 128, 4, 4, 3), (64, 128, 8, 4, 3), (64, 256, 4, 4, 3))
# The interpreter pays Python time per program and per operation, not per weight, and runs every case of four
# conformance matrices: its plans take whole super-block steps and one program per SM (2), so a layer of one
# column tile still runs two slices and the reduction; the tests force each GPU candidate above in turn.
INTERPRETER_PLAN = (64, 256, 1, 4, 3)
DEQUANT_BN, DEQUANT_BK = 64, 256                # a (256, 64) tile, one super-block, over 8 warps
