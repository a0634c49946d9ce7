"""SpQR in Triton: dequantize and a split-K matmul over planes made at prepare (spec/spqr.md, KC-7.6).

Reads top to bottom: entry points, load-time preparation (checks, planes, the outlier patch), launchers,
kernels, tile plans.

The format (SPQR-2, SPQR-5). Permuted column ``k`` of row ``r`` decodes, one float16 operation per ``-`` and
``*`` (native float16 arithmetic; no FMA can form: each is a lone subtraction or multiplication), as ::

    s = W_s_s * (s_code - W_s_z)      z = W_z_s * (z_code - W_z_z)      wd = s * (q - z)

and each stored outlier entry of ``(r, k)`` is added to ``float32(wd)`` in storage order, the sum rounded
once to float16. The permutation puts permuted column ``k`` at original column ``perm[k]``.

The planes (``K`` = in_features = the format's ``n``, ``N`` = out_features = its ``m``; made once at prepare
from ``dense_weights`` with the same bits)::

    codes  int32 (K / 8, N)        word w of row r: permuted columns 8w .. 8w + 7, column 8w + i in bits
                                   4i .. 4i + 3 = q | patched << 3 (GPTQ's packing along K, 4-bit fields)
    stats  uint8 (K / 16, N)       s_code | z_code << 3 of row r, column group g = k // 16
    so     float16 (K / 16, N / 16, 4)   W_s_s, W_z_s, W_s_z, W_z_z of tile (r // 16, g)
    perm   int32 (K,)              original column of permuted column k (x is read through it)

so a weight costs 4 + 8/16 + 64/256 = 4.75 bits (the format's own word: 4.0), read once per call.

The outlier patch. An outlier is added to its dense value (SPQR-5.2), so the weight at an outlier position
is ``fp16(float32(wd) + entries)``: fixed per layer, it is computed once at prepare (a small kernel over the
positions, entries in storage order) and kept only where its bits differ from ``wd`` (PTCSR padding adds
+0.0: it matters only on a -0.0). Those positions get the ``patched`` bit in ``codes`` and an entry in the
patch, CSR by output row, sorted by original column::

    patch_ro  int32 (N + 1)        row r's entries patch_ro[r] .. patch_ro[r + 1] - 1
    patch_cv  int32 (P,)           original column | fp16_bits(final weight) << 16 (the format's own entry)

Dequantize: a tile program decodes ``wd`` in registers and stores it at ``out[r, perm[k]]`` except where
``patched``; a second launch stores the patch's final weights. No float32 buffer of the layer's size.

Matmul (QF-4.6 exactly: W is the reference's float16 W; products exact in float32, as float16 times float16
needs 22 bits; float32 sums in a fixed order): the dense part contributes ``x[perm[k]] * wd`` and 0 where
``patched``; the patch contributes ``x[col] * final``. Batches up to 16 split K into ``S`` slices; the
program of (rows, slice ``s``) adds, after its dense sum, the patch entries ``t`` of its rows with
``t % S == s`` (so the patch's work spreads over the slices), then writes its partial sum to the layer's
workspace; ``_splitk.reduce`` adds the slices in slice order. One slice (larger batches) stores float16
directly. The same plan gives the same bits on every run.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qformats.errors import fail
from qformats.formats.spqr.checks import check_layer

from . import _splitk
from ._splitk import program_slice
from ._arrays import Inputs
from ._int4 import BATCH_CANDIDATES, GEMV_CANDIDATES, pack_along_k
from ._prepared import Prepared as _Base
from ._prepared import checked_x
from ._tiles import row_tile

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

TILE = 16


# -- entry points (DESIGN.md §6) ---------------------------------------------------------------------

def dequantize(*, dense_weights, row_offsets, col_vals, in_perm, m, n):
    inputs = Inputs(dense_weights=dense_weights, row_offsets=row_offsets, col_vals=col_vals, in_perm=in_perm)
    return inputs.out(dequantize_prepared(_prepare(inputs, m, n)))


def matmul(*, dense_weights, row_offsets, col_vals, in_perm, m, n, x):
    inputs = Inputs(dense_weights=dense_weights, row_offsets=row_offsets, col_vals=col_vals, in_perm=in_perm, x=x)
    return inputs.out(matmul_prepared(_prepare(inputs, m, n), inputs.t["x"].to(torch.float16)))


# -- load-time preparation (KC-7) ----------------------------------------------------------------------

class Planes:
    """The kernels' view of a layer (the module docstring's planes, in GEMM terms: ``k`` inputs, ``n``
    outputs), its tile plans and split-K workspace; the attributes ``_splitk.tune`` reads and sets."""

    def __init__(self, codes, stats, so, perm, patch_ro, patch_cv, *, k: int, n: int) -> None:
        self.codes, self.stats, self.so, self.perm, self.patch_ro, self.patch_cv = \
            codes, stats, so, perm, patch_ro, patch_cv
        self.k, self.n, self.device = k, n, codes.device
        self.block_k = row_tile(k)                     # K is a multiple of 16: BK divides K, no K tail
        self.gemv = _splitk.make_plan(GEMV_CANDIDATES[0], k, n, self.block_k, _splitk.sms(self.device))
        self.batch = _splitk.make_plan(BATCH_CANDIDATES[0], k, n, self.block_k, _splitk.sms(self.device))
        self.workspace = _splitk.workspace(n, self.device)
        if self.device.type == "cuda":
            _splitk.tuned(self, ("spqr",), GEMV_CANDIDATES, BATCH_CANDIDATES, _matmul)


class Prepared(_Base):
    """A checked layer: the caller's four tensors (watched, KC-7.3) and the planes the kernels read."""

    def __init__(self, t: dict[str, torch.Tensor], m: int, n: int, planes: Planes) -> None:
        self.dense, self.ro, self.cv, self.in_perm = t["dense_weights"], t["row_offsets"], t["col_vals"], t["in_perm"]
        self.m, self.n, self.planes, self.device = m, n, planes, planes.device
        self._freeze("dense", "ro", "cv", "in_perm")


def prepare(*, dense_weights, row_offsets, col_vals, in_perm, m, n) -> Prepared:
    """Check the layer once (dimensions, permutation, offsets, outlier columns and the reference's full
    SpQR checks on host copies, KC-4.2), then lay it out as planes and a patch (the module docstring)."""
    return _prepare(Inputs(dense_weights=dense_weights, row_offsets=row_offsets, col_vals=col_vals,
                           in_perm=in_perm), m, n)


def _prepare(inputs: Inputs, m: int, n: int) -> Prepared:
    t = inputs.t
    for name, value in (("m", m), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value % TILE:
            raise fail("spqr.dims", name, "a positive multiple of 16", value)
    if t["dense_weights"].dtype != torch.int64 or t["dense_weights"].numel() != m * n // TILE:
        raise fail("tensor.shape", "dense_weights", f"int64 [{m * n // TILE}]", tuple(t["dense_weights"].shape))
    perm = _permutation(t["in_perm"], n)
    ro = t["row_offsets"].to(torch.int32)
    ptcsr = ro.numel() == m // TILE + 1
    if not ptcsr and ro.numel() != m + 1:
        raise fail("spqr.row_offsets.length", "row_offsets", f"length {m + 1} (CSR) or {m // TILE + 1} (PTCSR)",
                   ro.numel())
    entries = t["col_vals"].numel()
    if int(ro[0]) != 0 or int(ro[-1]) != entries or bool((ro[1:] < ro[:-1]).any()):
        raise fail("spqr.row_offsets.monotonic", "row_offsets", f"0 .. {entries}, never decreasing",
                   f"{int(ro[0])} .. {int(ro[-1])}")
    cv = t["col_vals"]
    cv = cv.view(torch.int32) if cv.dtype != torch.float32 else cv.to(torch.int32)
    if entries and bool(((cv & 0xFFFF) >= n).any()):               # no read or write past the row
        raise fail("spqr.outliers.column_range", "col_vals", f"columns < {n}", int((cv & 0xFFFF).max()))
    # The content rules no launch depends on for memory safety (SPQR-2.3..2.5 statistics and reserved bits,
    # SPQR-3.4..3.6 values and PTCSR layout, SPQR-4.2, SPQR-7.3): the reference's own checks on host copies,
    # so this kernel is a validating decoder (KC-4.2). Once, at load time (KC-7.1).
    check_layer({name: t[name].cpu().numpy() for name in ("dense_weights", "row_offsets", "col_vals", "in_perm")},
                m=m, n=n)
    return Prepared(t, m, n, _planes(t["dense_weights"], ro, cv, perm, m, n, ptcsr))


def _permutation(in_perm: torch.Tensor, n: int) -> torch.Tensor:
    """int32 [n/2] of uint16 pairs (SPQR-4.1) -> int32 permutation, checked (SPQR-4.2)."""
    if in_perm.dtype != torch.int32 or in_perm.numel() != n // 2:
        raise fail("tensor.dtype", "in_perm", f"int32 [{n // 2}] (uint16 pairs, SPQR-4.1)",
                   f"{in_perm.dtype} {tuple(in_perm.shape)}")
    words = in_perm.to(torch.int64) & 0xFFFFFFFF
    perm = torch.stack([words & 0xFFFF, words >> 16], dim=1).reshape(-1)
    if not torch.equal(torch.sort(perm).values, torch.arange(n, device=perm.device)):
        raise fail("spqr.in_perm.not_permutation", "in_perm", f"a permutation of 0..{n - 1}", "not one")
    return perm.to(torch.int32).contiguous()


def _planes(dense: torch.Tensor, ro: torch.Tensor, cv: torch.Tensor, perm: torch.Tensor, m: int, n: int,
            ptcsr: bool) -> Planes:
    """The planes of a checked layer (bits 62..63 are zero, SPQR-2.4, so int64 shifts read the fields)."""
    w = dense.view(m // TILE, n // TILE, TILE)                    # [I, J, k]: row 16I + k, columns 16J + l
    l = torch.arange(TILE, device=dense.device)  # noqa: E741
    q = ((w[..., None] >> (6 + 3 * l)) & 7).to(torch.uint8).permute(1, 3, 0, 2).reshape(n, m)   # (16J + l, 16I + k)
    stats = (w & 63).permute(1, 0, 2).reshape(n // TILE, m).to(torch.uint8).contiguous()
    b = (w[..., 0::2] >> 54) & 0xFF                               # SO byte p from row 2p (SPQR-2.3)
    half = b[..., 0::2] | b[..., 1::2] << 8                       # [I, J, 4]: W_s_s, W_z_s, W_s_z, W_z_z bits
    so = _float16(half).permute(1, 0, 2).contiguous()            # [J, I, 4]
    rows, cols, final = _patched(pack_along_k(q, 4), stats, so, ro, cv, m, n, ptcsr)
    q[cols, rows] |= 8                                            # the patched bit of those positions
    order = torch.argsort(rows * n + perm[cols])                  # CSR by row, then by original column
    rows, cols, final = rows[order], perm[cols][order].to(torch.int64), final[order]
    patch_ro = torch.cat([rows.new_zeros(1), torch.cumsum(torch.bincount(rows, minlength=m), 0)]).to(torch.int32)
    entry = (final.view(torch.int16).to(torch.int64) & 0xFFFF) << 16 | cols   # the format's own entry layout
    entry = torch.where(entry >= 2**31, entry - 2**32, entry).to(torch.int32)
    if not entry.numel():                                         # a pointer the kernels never read through
        entry = torch.zeros(1, dtype=torch.int32, device=dense.device)
    return Planes(pack_along_k(q, 4), stats, so, perm, patch_ro, entry.contiguous(), k=n, n=m)


def _patched(codes: torch.Tensor, stats: torch.Tensor, so: torch.Tensor, ro: torch.Tensor, cv: torch.Tensor,
             m: int, n: int, ptcsr: bool):
    """(row, permuted column, final float16 weight) of every position whose outliers change its dense value."""
    dev = cv.device
    e = cv.numel()
    if not e:
        empty = torch.zeros(0, dtype=torch.int64, device=dev)
        return empty, empty, torch.zeros(0, dtype=torch.float16, device=dev)
    owner = torch.repeat_interleave(torch.arange(ro.numel() - 1, device=dev), (ro[1:] - ro[:-1]).to(torch.int64))
    idx = torch.arange(e, device=dev)
    rows = owner * TILE + idx % TILE if ptcsr else owner          # SPQR-3.4: slot j of block b is row 16b + j % 16
    key = rows * n + (cv.to(torch.int64) & 0xFFFF)
    key, order = torch.sort(key, stable=True)                     # a position's entries stay in storage order
    vals = _float16(cv.to(torch.int64)[order] >> 16 & 0xFFFF).float()
    pos, counts = torch.unique_consecutive(key, return_counts=True)
    first = torch.cat([torch.zeros(1, dtype=torch.int64, device=dev), torch.cumsum(counts, 0)]).to(torch.int32)
    prow, pcol = (pos // n).to(torch.int32), (pos % n).to(torch.int32)
    wd = torch.empty(pos.numel(), dtype=torch.float16, device=dev)
    final = torch.empty_like(wd)
    _final_kernel[(triton.cdiv(pos.numel(), FINAL_BLOCK),)](codes, stats, so, prow, pcol, first, vals.contiguous(),
                                                            wd, final, pos.numel(), m, BLOCK=FINAL_BLOCK)
    keep = final.view(torch.int16) != wd.view(torch.int16)
    return prow[keep].to(torch.int64), pcol[keep].to(torch.int64), final[keep]


def _float16(bits: torch.Tensor) -> torch.Tensor:
    """Integer tensor of float16 bit patterns (0 .. 65535) -> float16, the same bits."""
    return torch.where(bits >= 2**15, bits - 2**16, bits).to(torch.int16).view(torch.float16)


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """float16 ``(m, n)`` in original column order; no host work (KC-7.2)."""
    p.check_unchanged()
    s = p.planes
    out = torch.empty((s.n, s.k), dtype=torch.float16, device=s.device)
    _dequantize_kernel[(s.k // s.block_k, triton.cdiv(s.n, DEQUANT_BN))](
        s.codes, s.stats, s.so, s.perm, out, s.k, s.n, BN=DEQUANT_BN, G=s.block_k // TILE)
    _patch_store_kernel[(triton.cdiv(s.n, PATCH_ROWS),)](s.patch_ro, s.patch_cv, out, s.k, s.n, BLOCK=PATCH_ROWS)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 ``(batch, m)``, for contiguous float16 ``xt`` ``(batch, n)``; no host work (KC-7.2)."""
    p.check_unchanged()
    s = p.planes
    batch = checked_x(xt, s.k, s.device).shape[0]
    y = torch.empty((batch, s.n), dtype=torch.float16, device=s.device)
    return _matmul(s, xt, y)


def _matmul(s: Planes, xt: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T into float16 ``y`` for contiguous float16 ``xt``; launches only (the tuner times it)."""
    batch = xt.shape[0]
    common = (xt, s.codes, s.stats, s.so, s.perm, s.patch_ro, s.patch_cv, s.workspace, y)
    if batch == 1:
        c = s.gemv
        _gemv_kernel[(triton.cdiv(s.n, c.bn), c.split)](*common, s.k, s.n, c.k_per_split, c.split,
                                                        DIRECT=c.split == 1, ONCE=c.once, BN=c.bn, G=c.bk // TILE,
                                                        STAGES=c.stages, num_warps=c.warps)
    else:
        c = s.batch if batch <= _splitk.MAX_SPLIT_BATCH else _splitk.Plan(64, s.block_k, 1, s.k, 4, 2, bm=64)
        _batch_kernel[(triton.cdiv(s.n, c.bn), c.split, triton.cdiv(batch, c.bm))](
            *common, batch, s.k, s.n, c.k_per_split, c.split, DIRECT=c.split == 1, BM=c.bm, BN=c.bn,
            G=c.bk // TILE, STAGES=c.stages, num_warps=c.warps)
    if c.split > 1:                                                # the slices' partial sums, added in order
        _splitk.reduce(s.workspace, y, batch, s.n, c.split)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _scale_zero(stats_ptr, so_ptr, g, r, N, live):
    """s and z (float16, SPQR-5.1) of column groups ``g`` and rows ``r`` (broadcast together)."""
    st = tl.load(stats_ptr + g * N + r, mask=live, other=0).to(tl.int32)
    so = so_ptr + (g * (N // 16) + r // 16) * 4
    w_s_s = tl.load(so, mask=live, other=0.0)
    w_z_s = tl.load(so + 1, mask=live, other=0.0)
    w_s_z = tl.load(so + 2, mask=live, other=0.0)
    w_z_z = tl.load(so + 3, mask=live, other=0.0)
    s = w_s_s * (_code(st) - w_s_z)                               # float16 ops, one rounding each
    z = w_z_s * (_code(st >> 3) - w_z_z)
    return s, z


@triton.jit
def _code(f):
    """The 3-bit code in the low bits of ``f`` as float16, exactly, without an integer-to-float conversion (a
    slow instruction on the GPU): 0x6400 | c is the float16 1024 + c, and (1024 + c) - 1024 = c exactly."""
    return ((f & 7) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - tl.full((), 1024.0, tl.float16)


@triton.jit
def _tile(codes_ptr, stats_ptr, so_ptr, r0, n, N, G: tl.constexpr):
    """The dense weights ``wd`` (float16) of permuted columns r0 .. r0 + 16 G - 1 and rows ``n`` as a
    (G, 2, 8, BN) tile [group, word in group, field, row], and the 4-bit fields (bit 3: patched).

    Two code words per row and group (16 columns x 4 bits), each loaded once; one (G, BN) load of the
    statistics codes and of the tile statistics, decoded once per row and group."""
    g = r0 // 16 + tl.arange(0, G)
    live = (n < N)[None, :]
    words = tl.load(codes_ptr + (g[:, None, None] * 2 + tl.arange(0, 2)[None, :, None]) * N + n[None, None, :],
                    mask=live[None, :, :], other=0)                                       # (G, 2, BN)
    f = (words[:, :, None, :] >> (tl.arange(0, 8) * 4)[None, None, :, None]) & 15       # (G, 2, 8, BN)
    s, z = _scale_zero(stats_ptr, so_ptr, g[:, None], n[None, :], N, live)               # (G, BN)
    wd = s[:, None, None, :] * (_code(f) - z[:, None, None, :])
    return wd, f


@triton.jit
def _columns(r0, G: tl.constexpr):
    """Permuted columns of a (G, 2, 8) tile: group g, word j, field i is r0 + 16 g + 8 j + i."""
    return r0 + tl.arange(0, G)[:, None, None] * 16 + tl.arange(0, 2)[None, :, None] * 8 + \
        tl.arange(0, 8)[None, None, :]


@triton.jit
def _entries(ro_ptr, cv_ptr, n, N, t):
    """Entry ``t`` of rows ``n``'s patch: whether it exists, its original column and final weight (float32)."""
    first = tl.load(ro_ptr + n, mask=n < N, other=0)
    on = (n < N) & (t < tl.load(ro_ptr + n + 1, mask=n < N, other=0) - first)
    e = tl.load(cv_ptr + first + t, mask=on, other=0)
    val = ((e >> 16) & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    return on, e & 0xFFFF, val


@triton.jit
def _patch_width(ro_ptr, n, N):
    """The most patch entries of any row ``n``."""
    return tl.max(tl.load(ro_ptr + n + 1, mask=n < N, other=0) - tl.load(ro_ptr + n, mask=n < N, other=0), axis=0)


@triton.jit
def _dequantize_kernel(codes_ptr, stats_ptr, so_ptr, perm_ptr, out_ptr, K, N, BN: tl.constexpr, G: tl.constexpr):
    """A (BN rows, 16 G columns) tile: out[r, perm[k]] = wd, except at patched positions. The K tiles of one
    row block are consecutive programs, so the scattered 2-byte stores of its rows meet in cache."""
    r0 = tl.program_id(0) * G * 16
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    wd, f = _tile(codes_ptr, stats_ptr, so_ptr, r0, n, N, G)
    src = tl.load(perm_ptr + _columns(r0, G))
    mask = (n < N)[None, None, None, :] & (f < 8)
    tl.store(out_ptr + n[None, None, None, :] * K + src[:, :, :, None], wd, mask=mask)


@triton.jit
def _patch_store_kernel(ro_ptr, cv_ptr, out_ptr, K, N, BLOCK: tl.constexpr):
    """The patch's final weights over their positions, BLOCK rows per program."""
    n = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    for t in range(0, _patch_width(ro_ptr, n, N)):
        on, col, val = _entries(ro_ptr, cv_ptr, n, N, t)
        tl.store(out_ptr + n * K + col, val, mask=on)


@triton.jit
def _gemv_kernel(x_ptr, codes_ptr, stats_ptr, so_ptr, perm_ptr, ro_ptr, cv_ptr, part_ptr, y_ptr, K, N,
                 K_PER_SPLIT, SPLIT, DIRECT: tl.constexpr, ONCE: tl.constexpr, BN: tl.constexpr, G: tl.constexpr,
                 STAGES: tl.constexpr):
    """Rows n, slice ``split`` of K: sum_k x[perm[k]] wd[n, k] (0 where patched), then the slice's share of
    the patch; float32 products (exact) and sums. ONCE keeps one accumulator per tile element, summed once."""
    n, split, start, stop = program_slice(K, K_PER_SPLIT, BN)
    if ONCE:
        acc3 = tl.zeros((G, 2, 8, BN), dtype=tl.float32)
    else:
        acc = tl.zeros((BN,), dtype=tl.float32)
    for r0 in tl.range(start, stop, G * 16, num_stages=STAGES):
        wd, f = _tile(codes_ptr, stats_ptr, so_ptr, r0, n, N, G)
        xk = tl.load(x_ptr + tl.load(perm_ptr + _columns(r0, G))).to(tl.float32)
        prod = xk[:, :, :, None] * tl.where(f < 8, wd, 0.0).to(tl.float32)
        if ONCE:
            acc3 += prod
        else:
            acc += tl.sum(tl.sum(tl.sum(prod, axis=0), axis=0), axis=0)
    if ONCE:
        acc = tl.sum(tl.sum(tl.sum(acc3, axis=0), axis=0), axis=0)
    for t in range(split, _patch_width(ro_ptr, n, N), SPLIT):     # this slice's share: t % S == split
        on, col, val = _entries(ro_ptr, cv_ptr, n, N, t)
        acc += tl.load(x_ptr + col, mask=on, other=0.0).to(tl.float32) * val.to(tl.float32)
    if DIRECT:
        tl.store(y_ptr + n, acc.to(tl.float16), mask=n < N)
    else:
        tl.store(part_ptr + split * (16 * N) + n, acc, mask=n < N)   # workspace (S, 16, N), row 0


@triton.jit
def _batch_kernel(x_ptr, codes_ptr, stats_ptr, so_ptr, perm_ptr, ro_ptr, cv_ptr, part_ptr, y_ptr, M, K, N,
                  K_PER_SPLIT, SPLIT, DIRECT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, G: tl.constexpr,
                  STAGES: tl.constexpr):
    """y^T tile (BN rows, BM batch) on tensor cores, the weight tile the MMA's large side: W (BN, 16 G) float16
    as decoded (no rounding), x^T (16 G, BM) read through perm; then the slice's share of the patch."""
    n, split, start, stop = program_slice(K, K_PER_SPLIT, BN)
    m = tl.program_id(2) * BM + tl.arange(0, BM)
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for r0 in tl.range(start, stop, G * 16, num_stages=STAGES):
        wd, f = _tile(codes_ptr, stats_ptr, so_ptr, r0, n, N, G)
        w = tl.trans(tl.reshape(tl.where(f < 8, wd, 0.0).to(tl.float16), (G * 16, BN)))   # (BN, 16 G)
        src = tl.load(perm_ptr + r0 + tl.arange(0, G * 16))
        xt = tl.load(x_ptr + m[None, :] * K + src[:, None], mask=(m < M)[None, :], other=0.0)
        acc += tl.dot(w, xt, out_dtype=tl.float32)
    for t in range(split, _patch_width(ro_ptr, n, N), SPLIT):
        on, col, val = _entries(ro_ptr, cv_ptr, n, N, t)
        xv = tl.load(x_ptr + m[None, :] * K + col[:, None], mask=on[:, None] & (m < M)[None, :], other=0.0)
        acc += xv.to(tl.float32) * val.to(tl.float32)[:, None]
    mask = (n < N)[:, None] & (m < M)[None, :]
    if DIRECT:
        tl.store(y_ptr + m[None, :] * N + n[:, None], acc.to(tl.float16), mask=mask)
    else:
        tl.store(part_ptr + split * (16 * N) + m[None, :] * N + n[:, None], acc, mask=mask)


@triton.jit
def _final_kernel(codes_ptr, stats_ptr, so_ptr, rows_ptr, cols_ptr, first_ptr, vals_ptr, dense_ptr, final_ptr, P,
                  N, BLOCK: tl.constexpr):
    """At prepare: per outlier position, ``wd`` and ``fp16(float32(wd) + its entries in storage order)``."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = i < P
    r = tl.load(rows_ptr + i, mask=live, other=0)
    k = tl.load(cols_ptr + i, mask=live, other=0)
    word = tl.load(codes_ptr + (k // 8) * N + r, mask=live, other=0)
    s, z = _scale_zero(stats_ptr, so_ptr, k // 16, r, N, live)
    wd = s * (_code(word >> ((k % 8) * 4)) - z)
    first = tl.load(first_ptr + i, mask=live, other=0)
    count = tl.load(first_ptr + i + 1, mask=live, other=0) - first
    acc = wd.to(tl.float32)
    for t in range(0, tl.max(count, axis=0)):                     # no +0.0 past a position's last entry
        acc = tl.where(t < count, acc + tl.load(vals_ptr + first + t, mask=t < count, other=0.0), acc)
    tl.store(dense_ptr + i, wd, mask=live)
    tl.store(final_ptr + i, acc.to(tl.float16), mask=live)


# -- tile plans ----------------------------------------------------------------------------------------
# Matmul: the int4 layout's candidate lists (_int4.py: BN output rows, BK = min(largest of 128..16 dividing K,
# cap), slices for about a number of programs per SM), timed once per shape class at prepare on a GPU; SpQR's
# own are not measured yet. A K step of BK = 16 G columns covers G whole column groups, so each of its
# (G, BN) statistics is decoded once per step. Dequantize: 64 rows by BK columns per program; the patch
# store and the prepare-time final values: 64 rows / positions per program.

DEQUANT_BN = 64
PATCH_ROWS = 64
FINAL_BLOCK = 64
