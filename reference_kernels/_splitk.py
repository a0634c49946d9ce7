"""Split-K machinery shared by the plane kernels (KC-7.4, KC-7.5): tile plans, the fixed-order reduction,
the packed-field tile loader and the once-per-shape-class tuner.

``_int4.py`` (GPTQ, AWQ, compressed-tensors) and ``_superblock.py`` (the ggml block types) each keep their own
planes, kernels and candidate lists; what a split-K layer needs beyond those is here once:

- a :class:`Plan` per launch (``BN`` columns, ``BK`` rows per K step, ``S`` slices of ``K_PER_SPLIT`` rows) and
  :func:`make_plan`, which turns a candidate tuple into whole-step slices for a layer's shape;
- the workspace ``(MAX_SPLIT, MAX_SPLIT_BATCH, N)`` float32 a layer allocates at prepare, and
  :func:`reduce`, the second launch that adds the slices' partial sums in slice order (no atomics: the
  same bits on every run; QF-4.6 allows any order);
- :func:`codes_tile`, the ``(BK, BN)`` codes of fields packed along K in int32 words, each word loaded once;
- :func:`tune` / :func:`tuned`: on a GPU, the candidates timed once per shape class (cached per process);
  in the interpreter the first candidate is taken.

A planes object handed to :func:`tune` has ``k``, ``n``, ``block_k``, ``device``, ``workspace`` and the
attributes ``gemv`` and ``batch`` (the chosen plans), which the tuner sets while it times.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl

__all__ = ["Plan", "make_plan", "sms", "workspace", "reduce", "codes_tile", "dot_wt", "store_out", "tune", "tuned",
           "MAX_SPLIT", "MAX_SPLIT_BATCH", "INTERPRETER_SMS", "REDUCE_BLOCK"]

MAX_SPLIT = 16                                   # slices of K at most (the workspace's first axis)
MAX_SPLIT_BATCH = 16                             # batches up to this size use the split-K workspace
INTERPRETER_SMS = 2                              # the interpreter's plans still split K (so its tests do)
REDUCE_BLOCK = 1024
_TUNED: dict[tuple, "Plan"] = {}


class Plan:
    """One launch's tiles: BN columns, BK rows per step, S slices of K_PER_SPLIT rows, warps, stages."""

    def __init__(self, bn: int, bk: int, split: int, k_per_split: int, warps: int, stages: int, bm: int = 16,
                 once: bool = False) -> None:
        self.bn, self.bk, self.split, self.k_per_split = bn, bk, split, k_per_split
        self.warps, self.stages, self.bm, self.once = warps, stages, bm, once

    def __repr__(self) -> str:
        return (f"Plan(BN={self.bn}, BK={self.bk}, S={self.split}, K/S={self.k_per_split}, warps={self.warps}, "
                f"stages={self.stages}, BM={self.bm}{', reduce once' if self.once else ''})")


def make_plan(candidate: tuple, k: int, n: int, group_tile: int, sms: int) -> Plan:
    """A candidate ``(BN, BK cap, programs per SM, warps, stages[, reduce once])`` for a K x N layer: S slices
    of whole BK steps (``BK = min(group_tile, cap)``), about ``programs per SM * sms`` programs over the
    ceil(N / BN) column tiles, at most ``MAX_SPLIT`` slices."""
    bn, bk_cap, per_sm, warps, stages, *once = candidate
    bk = min(group_tile, bk_cap)
    steps = triton.cdiv(k, bk)
    want = max(1, min(steps, triton.cdiv(per_sm * sms, max(1, triton.cdiv(n, bn))), MAX_SPLIT))
    per = triton.cdiv(steps, want)
    return Plan(bn, bk, triton.cdiv(steps, per), per * bk, warps, stages, once=bool(once and once[0]))


def sms(device: torch.device) -> int:
    """Streaming multiprocessors of a GPU; ``INTERPRETER_SMS`` on the CPU."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" \
        else INTERPRETER_SMS


def workspace(n: int, device: torch.device) -> torch.Tensor:
    """The split-K partial sums of a layer with ``n`` output columns, made once at prepare (KC-7.2)."""
    return torch.empty((MAX_SPLIT, MAX_SPLIT_BATCH, n), dtype=torch.float32, device=device)


def reduce(part: torch.Tensor, y: torch.Tensor, m: int, n: int, split: int) -> None:
    """y (m, n) float16 = the ``split`` slices of ``part`` added in slice order, rounded once."""
    _reduce_kernel[(triton.cdiv(m * n, REDUCE_BLOCK),)](part, y, m * n, n, SPLIT=split, BLOCK=REDUCE_BLOCK)


@triton.jit
def _reduce_kernel(part_ptr, y_ptr, MN, N, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    """y = the slices' partial sums added in slice order 0, 1, .., S - 1 (reproducible), rounded once."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        acc += tl.load(part_ptr + s * (16 * N) + i, mask=i < MN, other=0.0)
    tl.store(y_ptr + i, acc.to(tl.float16), mask=i < MN)


@triton.jit
def codes_tile(codes_ptr, r0, n, N, KW, BITS: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The (BK, BN) integer codes of rows r0 .. r0 + BK - 1, columns ``n``, of a plane of ``b``-bit fields
    packed along K in int32 words ``(K b / 32, N)``: each word loaded once, zero past word ``KW``.

    A (BK / P, BN) tile of words, P = 32 / b fields each; field i of word w is row w P + i, so broadcasting
    the shifts 0, b, .., (P - 1) b over a middle axis and flattening the first two gives the rows in order.
    """
    PER: tl.constexpr = 32 // BITS
    w = r0 // PER + tl.arange(0, BK // PER)
    words = tl.load(codes_ptr + w[:, None] * N + n[None, :], mask=(w < KW)[:, None] & (n < N)[None, :], other=0)
    shifts = tl.arange(0, PER) * BITS
    q = (words[:, None, :] >> shifts[None, :, None]) & ((1 << BITS) - 1)   # the sign bits shifted in are masked
    return tl.reshape(q, (BK, BN))


@triton.jit
def dot_wt(acc, w, xt, FP16_W: tl.constexpr):
    """``acc + W x^T`` for a float32 weight tile ``(BN, BK)``, the MMA's large side, and float16 ``x^T``
    ``(BK, BM)``: W rounded once to float16 for tensor cores when every |W| fits (QF-4.6), else float32
    operands with IEEE products (no TF32)."""
    if FP16_W:
        return acc + tl.dot(w.to(tl.float16), xt, out_dtype=tl.float32)
    return acc + tl.dot(w, xt.to(tl.float32), input_precision="ieee", out_dtype=tl.float32)


@triton.jit
def program_slice(K, K_PER_SPLIT, BN: tl.constexpr):
    """This program's BN output columns ``n`` (grid axis 0), its slice ``split`` (axis 1) and that slice's rows
    ``[start, stop)`` of K: the prologue of every split-K kernel."""
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    split = tl.program_id(1)
    start = split * K_PER_SPLIT
    return n, split, start, tl.minimum(start + K_PER_SPLIT, K)


@triton.jit
def store_out(out, y_ptr, part_ptr, split, offs, mask, N, DIRECT: tl.constexpr):
    """A program's float32 result at element offsets ``offs`` of the ``(M, N)`` output: rounded once to
    float16 into y when K is not split, else into slice ``split`` of the workspace ``(S, 16, N)``."""
    if DIRECT:
        tl.store(y_ptr + offs, out.to(tl.float16), mask=mask)
    else:
        tl.store(part_ptr + split * (16 * N) + offs, out, mask=mask)


# -- the tuner ---------------------------------------------------------------------------------------------

def tune(p, batch: int, candidates: tuple, run: Callable, verbose: bool = False) -> list[tuple[float, Plan]]:
    """Time ``candidates`` for ``batch`` rows of x through ``run(p, xt, y)`` on the layer's GPU (triton's
    do_bench, median); the fastest first. Only ``prepare`` (host work allowed) and the benchmark call it."""
    xt = torch.randn((batch, p.k), device=p.device).to(torch.float16)
    y = torch.empty((batch, p.n), dtype=torch.float16, device=p.device)
    timed = []
    for cand in candidates:
        plan = make_plan(cand, p.k, p.n, p.block_k, sms(p.device))
        if plan.split > p.workspace.shape[0]:
            continue
        object.__setattr__(p, "gemv" if batch == 1 else "batch", plan)
        t = _median_ms(lambda: run(p, xt, y), p.device)
        timed.append((t * 1e-3, plan))
        if verbose:
            print(f"    batch {batch:2d} {plan}: {t * 1e3:7.2f} us")
    timed.sort(key=lambda tp: tp[0])
    return timed


def tuned(p, key: tuple, gemv_candidates: tuple, batch_candidates: tuple, run: Callable) -> None:
    """On a GPU: the fastest GEMV and batch-16 plans of the shape class ``key``, timed once per process."""
    for batch, cands, attr in ((1, gemv_candidates, "gemv"), (MAX_SPLIT_BATCH, batch_candidates, "batch")):
        full = (attr, *key, p.k, p.n, p.block_k, str(p.device))
        if full not in _TUNED:
            _TUNED[full] = tune(p, batch, cands, run)[0][1]
        object.__setattr__(p, attr, _TUNED[full])


def _median_ms(fn, device: torch.device) -> float:
    """do_bench's median on a GPU; one timed call in the interpreter (the smoke run proves the code only)."""
    if device.type == "cuda":
        import triton.testing

        return triton.testing.do_bench(fn, warmup=5, rep=20, return_mode="median")
    import time

    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3
