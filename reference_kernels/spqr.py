"""SpQR in Triton: dequantize and dequantize-then-multiply (spec/spqr.md).

Reads top to bottom: entry points, load-time preparation, launchers, kernels, tile configurations.

Dense part (SPQR-2, SPQR-5.1). Word ``(bi, bj, r)`` of ``dense_weights`` (index ``(bi * n/16 + bj) * 16
+ r``) is row ``r`` of tile ``(bi, bj)``::

    bits 0..2  s_code   3..5  z_code   6..53  q[c] = bits 6 + 3c .. 8 + 3c (c = 0..15)
    54..61     byte r // 2 of the tile's second-order word so = w_s_s | w_z_s << 16 | w_s_z << 32 | w_z_z << 48
    62..63     reserved (zero)

and every ``-`` and ``*`` of ``s = w_s_s * (s_code - w_s_z)``, ``z = w_z_s * (z_code - w_z_z)``,
``wd = s * (q - z)`` is one float16 operation (native float16 arithmetic, no FMA: each is a lone
subtraction or multiplication), so the result is bit-identical to spqr_quant's.

Outliers (SPQR-5.2) are added, not substituted: ``acc = float32(wd)``, each row's entries added in
storage order, one rounding to float16 at the end; one program per row, so entries that share a
position (PTCSR padding at column 0) are added in order, without races. The permutation (SPQR-5.3)
is undone when the float32 accumulator is rounded and scattered to its original columns.

The matmul decodes W (dense, outliers) into the float32 accumulator in permuted column order and multiplies
``x`` read through the permutation with float32 accumulation, rounding each W value once to float16 as it
loads it: two passes, not a fused kernel, since an outlier must be added to the float16 dense value and
rounded before any product uses it. The accumulator is the prepared layer's scratch, allocated once (KC-7).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from qformats.errors import fail
from qformats.formats.spqr.checks import check_layer

from ._arrays import Inputs
from ._prepared import Prepared as _Base
from ._prepared import checked_x

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

class Prepared(_Base):
    """A checked layer: its tensors as the kernels read them, the permutation, and a float32 ``(m, n)``
    scratch accumulator allocated once here, so a prepared call allocates only its output. The scratch
    makes a prepared layer serve one call at a time (not two streams at once)."""

    def __init__(self, t: dict[str, torch.Tensor], m: int, n: int, perm: torch.Tensor, ro: torch.Tensor,
                 cv: torch.Tensor, ptcsr: bool) -> None:
        self.dense, self.perm, self.ro, self.cv, self.ptcsr, self.m, self.n = t["dense_weights"], perm, ro, cv, \
            ptcsr, m, n
        self.device = self.dense.device
        self.scratch = torch.empty((m, n), dtype=torch.float32, device=self.device)
        self._freeze("dense", "perm", "ro", "cv")


def prepare(*, dense_weights, row_offsets, col_vals, in_perm, m, n) -> Prepared:
    """Check the layer once (dimensions, permutation, offsets, outlier columns and the reference's full
    SpQR checks on host copies, KC-4.2) and allocate its scratch accumulator."""
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
    cv = t["col_vals"] if t["col_vals"].numel() else torch.zeros(1, dtype=torch.int32, device=inputs.device)
    ptcsr = ro.numel() == m // TILE + 1
    if not ptcsr and ro.numel() != m + 1:
        raise fail("spqr.row_offsets.length", "row_offsets", f"length {m + 1} (CSR) or {m // TILE + 1} (PTCSR)",
                   ro.numel())
    entries = t["col_vals"].numel()
    if int(ro[0]) != 0 or int(ro[-1]) != entries or bool((ro[1:] < ro[:-1]).any()):
        raise fail("spqr.row_offsets.monotonic", "row_offsets", f"0 .. {entries}, never decreasing",
                   f"{int(ro[0])} .. {int(ro[-1])}")
    cv = cv.view(torch.int32) if cv.dtype != torch.float32 else cv.to(torch.int32)
    if entries and bool(((cv & 0xFFFF) >= n).any()):               # no read or write past the row
        raise fail("spqr.outliers.column_range", "col_vals", f"columns < {n}", int((cv & 0xFFFF).max()))
    # The content rules no launch depends on for memory safety (SPQR-2.3..2.5 statistics and reserved bits,
    # SPQR-3.4..3.6 values and PTCSR layout, SPQR-4.2, SPQR-7.3): the reference's own checks on host copies,
    # so this kernel is a validating decoder (KC-4.2). Once, at load time (KC-7.1).
    check_layer({name: t[name].cpu().numpy() for name in ("dense_weights", "row_offsets", "col_vals", "in_perm")},
                m=m, n=n)
    return Prepared(t, m, n, perm, ro, cv, ptcsr)


# -- launchers ---------------------------------------------------------------------------------------

def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """float16 ``(m, n)`` in original column order; no host work (KC-7.2)."""
    p.check_unchanged()
    _decode(p)
    out = torch.empty((p.m, p.n), dtype=torch.float16, device=p.device)
    _finish_kernel[(p.m,)](p.scratch, p.perm, out, p.n, BN=triton.next_power_of_2(p.n))
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 ``(batch, m)``, for contiguous float16 ``xt`` ``(batch, n)``; no host work (KC-7.2)."""
    p.check_unchanged()
    batch = checked_x(xt, p.n, p.device).shape[0]
    _decode(p)
    y = torch.empty((batch, p.m), dtype=torch.float16, device=p.device)
    bm = 16 if batch <= 16 else 64
    _matmul_kernel[(triton.cdiv(batch, bm), triton.cdiv(p.m, BLOCK_M))](xt, p.scratch, p.perm, y, batch, p.m, p.n,
                                                                        BM=bm, BN=BLOCK_M, BK=BLOCK_K)
    return y


def _decode(p: Prepared) -> None:
    """The scratch accumulator := W in permuted column order, float32, dense values with outliers added."""
    _dense_kernel[(p.m // TILE, p.n // TILE)](p.dense, p.scratch, p.n)
    _outlier_kernel[(p.m,)](p.ro, p.cv, p.scratch, p.n, PTCSR=p.ptcsr)


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


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _dense_kernel(dense_ptr, acc_ptr, n):
    """One 16 x 16 tile: its 16 words give codes, first-level codes and the second-order word."""
    bi, bj = tl.program_id(0), tl.program_id(1)
    r = tl.arange(0, 16)
    words = tl.load(dense_ptr + (bi * (n // 16) + bj) * 16 + r).to(tl.uint64, bitcast=True)
    byte = (words >> 54) & 0xFF                                        # rows 2b and 2b+1 hold byte b
    so = tl.sum(tl.where(r % 2 == 0, byte << ((r // 2) * 8).to(tl.uint64), 0), axis=0)
    w_s_s = (so & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    w_z_s = ((so >> 16) & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    w_s_z = ((so >> 32) & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    w_z_z = ((so >> 48) & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    s = w_s_s * ((words & 7).to(tl.float16) - w_s_z)                   # float16 ops, one rounding each
    z = w_z_s * (((words >> 3) & 7).to(tl.float16) - w_z_z)
    c = tl.arange(0, 16)
    q = ((words[:, None] >> (6 + 3 * c)[None, :].to(tl.uint64)) & 7).to(tl.float16)
    wd = s[:, None] * (q - z[:, None])
    tl.store(acc_ptr + (bi * 16 + r)[:, None] * n + (bj * 16 + c)[None, :], wd.to(tl.float32))


@triton.jit
def _outlier_kernel(ro_ptr, cv_ptr, acc_ptr, n, PTCSR: tl.constexpr):
    """Row ``r``'s outliers added to the float32 accumulator in storage order (SPQR-3.3, SPQR-3.4)."""
    r = tl.program_id(0)
    if PTCSR:                                    # entry t of row 16b + k sits at ptr[b] + 16t + k
        start = tl.load(ro_ptr + r // 16)
        count = (tl.load(ro_ptr + r // 16 + 1) - start) // 16
        first, step = start + r % 16, 16
    else:
        first = tl.load(ro_ptr + r)
        count = tl.load(ro_ptr + r + 1) - first
        step = 1
    for t in range(0, count):
        e = tl.load(cv_ptr + first + t * step).to(tl.uint32, bitcast=True)
        col = (e & 0xFFFF).to(tl.int32)
        val = (e >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
        here = acc_ptr + r * n + col
        tl.store(here, tl.load(here) + val)


@triton.jit
def _finish_kernel(acc_ptr, perm_ptr, out_ptr, n, BN: tl.constexpr):
    """Row ``r`` rounded to float16 and scattered to original columns: out[r, perm[j]] = acc[r, j]."""
    r = tl.program_id(0)
    j = tl.arange(0, BN)
    live = j < n
    p = tl.load(perm_ptr + j, mask=live, other=0)
    tl.store(out_ptr + r * n + p, tl.load(acc_ptr + r * n + j, mask=live, other=0.0).to(tl.float16), mask=live)


@triton.jit
def _matmul_kernel(x_ptr, wp_ptr, perm_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """y = x[:, perm] @ Wp.T, Wp the float32 accumulator rounded once to float16 as it is loaded (the value
    ``dequantize`` returns), float32 accumulation (QF-4.6)."""
    mm = tl.program_id(0) * BM + tl.arange(0, BM)
    rows = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        src = tl.load(perm_ptr + k, mask=k < K, other=0)
        xt = tl.load(x_ptr + mm[:, None] * K + src[None, :], mask=(mm < M)[:, None] & (k < K)[None, :], other=0.0)
        w = tl.load(wp_ptr + rows[None, :] * K + k[:, None], mask=(rows < N)[None, :] & (k < K)[:, None],
                    other=0.0).to(tl.float16)
        acc += tl.dot(xt, w, out_dtype=tl.float32)
    tl.store(y_ptr + mm[:, None] * N + rows[None, :], acc.to(tl.float16), mask=(mm < M)[:, None] & (rows < N)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# Dense decode: one 16 x 16 tile (16 words) per program, the layout's own unit. Matmul: 32 output rows
# by 64 input columns per step; batches of at most 16 use 16-row x tiles, larger ones 64.

BLOCK_M, BLOCK_K = 32, 64
