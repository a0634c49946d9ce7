"""The symmetric K-quant searches: ggml ``make_qx_quants`` and ``make_q3_quants`` (spec/ggml_kquants.md KQ-1.1, KQ-1.2).

Both find, for a group of ``n`` weights, signed integer codes ``l`` in ``[-nmax, nmax-1]`` and a
scale with ``x ~ scale * l``. They are the machinery of q3_K and q6_K (and, with other ``n``/``nmax``,
of the legacy types' importance paths). Facts from ggml 0.10.1 ``src/ggml-quants.c`` (llama.cpp sync
``3142f1db``); the code is ours.

Same float32 discipline as ``qformats.formats.q4_k.codec``: each group is a column of an ``(n, S)``
float32 array, every C expression is evaluated with its own rounding steps in C's order
(``w*x[i]*l`` is ``(w*x[i])*l``), and C's reduction loops are in-order loops over the ``n`` rows.
The scale search's 18 trial scales do not depend on one another, only the choice among them does,
so their sums are accumulated for all trials at once, row by row on ``(19, S)`` arrays (the first
rounding and the 18 trials), and the choice is an in-order loop over the trials. The inner loops
write into buffers allocated once: at these sizes a fresh NumPy array per operation costs more
than the operation (allocator page faults), and np.where / clamps against a scalar are several
times slower than a bit blend / a clamp against an array (measured, NumPy 2.4).
"""

from __future__ import annotations

import functools

import numpy as np

from ...numerics import nearest_int
from .base import F32

__all__ = ["GROUP_MAX_EPS", "signed_abs_max", "make_qx_quants", "make_q3_quants", "wrap_int8"]

GROUP_MAX_EPS = F32(1e-15)          # ggml-quants.c `#define GROUP_MAX_EPS 1e-15f`
_TRIALS = np.array([s for s in range(-9, 10) if s != 0])   # `for (is = -9; is <= 9; ++is) { if (!is) continue;`


def wrap_int8(v: np.ndarray) -> np.ndarray:
    """An int stored into an ``int8_t`` (two's complement truncation), as int32."""
    return ((np.asarray(v, np.int32) + 128) & 0xFF) - 128


def signed_abs_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``amax = max = 0; for i: if (|x[i]| > amax) { amax = |x[i]|; max = x[i]; }`` over axis 0.

    The first element of largest magnitude wins; a NaN never does (its comparison is false).
    Returns ``(amax, max)`` as float32 ``x.shape[1:]``.
    """
    shape = x.shape[1:]
    amax, mx, ax = np.zeros((3,) + shape, F32)
    win = np.empty(shape, bool)
    mask, scratch = np.empty((2,) + shape, np.int32)
    for xi in x:
        xi = np.ascontiguousarray(xi)
        np.greater(np.abs(xi, out=ax), amax, out=win)
        _bool_mask(win, mask)
        _blend(mask, ax, amax, scratch)
        _blend(mask, xi, mx, scratch)
    return amax, mx


def _clamped(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``MAX(lo, MIN(hi, nearest_int(v)))`` as int32 (the exact bit trick, any float32); ``lo``,
    ``hi``: int32 arrays of ``v``'s shape."""
    r = nearest_int(v)
    np.maximum(r, lo, out=r)
    np.minimum(r, hi, out=r)
    return r


def _codes(iscale: np.ndarray, x: np.ndarray, nmax: int) -> np.ndarray:
    """``MAX(-nmax, MIN(nmax-1, nearest_int(iscale * x)))`` as int32."""
    v = iscale * x
    return _clamped(v, np.full(v.shape, -nmax, np.int32), np.full(v.shape, nmax - 1, np.int32))


def _c_float_semantics(fn):
    """0/0, x/0 and inf*0 are part of the C searches (all-zero and non-finite groups): no warnings."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return wrapped


_MAGIC = F32(12582912.0)            # 1.5 * 2^23, nearest_int's constant


def _trial_codes(v: np.ndarray, nmax: int) -> np.ndarray:
    """``v`` replaced by ``MAX(-nmax, MIN(nmax-1, nearest_int(v)))`` as float32, for finite ``|v| < 2^22``.

    There nearest_int is round-half-to-even (Q4K-4.4), which ``np.rint`` computes in one pass; it
    may give -0.0 where nearest_int gives 0, which changes no sum that starts from +0 (C's sums
    do). Callers redo groups holding inf or NaN with the bit trick.
    """
    np.rint(v, out=v)
    return np.clip(v, F32(-nmax), F32(nmax - 1), out=v)


@_c_float_semantics
def make_qx_quants(x: np.ndarray, nmax: int, qw: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ggml ``make_qx_quants(n, nmax, x, L, rmse_type = 1, qw)`` on ``(n, S)`` float32 groups.

    ``qw``: ``(n, S)`` float32 weights, or None for ``rmse_type = 1``'s own weights ``x*x``.
    Returns ``(scale (S,), L (n, S))`` with ``L`` the stored codes ``l + nmax`` in ``[0, 2*nmax-1]``
    (int32), and ``L = 0``, scale 0 for a group whose ``amax < GROUP_MAX_EPS`` (KQ-1.1).
    """
    amax, mx = signed_abs_max(x)
    w = x * x if qw is None else qw
    wx = w * x                                                  # the `w*x[i]` of `w*x[i]*l`

    # row 0: the first rounding, `iscale = -nmax / max` (int -nmax to float); rows 1..18 the trials
    # `iscale = -(nmax + 0.1f*is) / max`. Each row's sums are independent of the others.
    num = np.concatenate([[F32(-nmax)], -(F32(nmax) + F32(0.1) * _TRIALS.astype(F32))]).astype(F32)
    iscales = num[:, None] / mx[None, :]                        # (19, S)
    # |iscale * x| <= nmax + 1 where x is finite and the group is not all-zero (whose result is
    # replaced below); groups holding inf/NaN take nearest_int's bit trick instead
    special = np.flatnonzero(~np.isfinite(x).all(axis=0))
    sumlx = np.zeros(iscales.shape, F32)
    suml2 = np.zeros(iscales.shape, F32)
    lt, tmp = np.empty(iscales.shape, F32), np.empty(iscales.shape, F32)   # reused: no allocation per row
    for i in range(x.shape[0]):
        _trial_codes(np.multiply(iscales, x[i], out=lt), nmax)
        if special.size:
            lt[:, special] = _codes(iscales[:, special], x[i, special], nmax)
        sumlx += np.multiply(wx[i], lt, out=tmp)
        np.multiply(w[i], lt, out=tmp)
        suml2 += np.multiply(tmp, lt, out=tmp)                  # (w*l)*l

    scale = np.where(suml2[0] != 0, sumlx[0] / suml2[0], F32(0))   # `suml2 ? ... : 0` (NaN is true)
    best = scale * sumlx[0]
    chosen = iscales[0].copy()
    take, ok = np.empty((2,) + mx.shape, bool)
    mask, scratch = np.empty((2,) + mx.shape, np.int32)
    new_scale, new_best = np.empty((2,) + mx.shape, F32)
    for t in range(1, len(num)):                                # in C's order: best moves
        slx, sl2 = sumlx[t], suml2[t]
        np.greater(np.multiply(slx, slx, out=new_scale), np.multiply(best, sl2, out=new_best), out=take)
        take &= np.greater(sl2, 0, out=ok)                      # suml2 > 0 && sumlx*sumlx > best*suml2
        np.divide(slx, sl2, out=new_scale)
        np.multiply(new_scale, slx, out=new_best)
        _bool_mask(take, mask)
        for new, old in ((new_scale, scale), (new_best, best), (iscales[t], chosen)):
            _blend(mask, new, old, scratch)

    zero = amax < GROUP_MAX_EPS
    lo, hi = np.full(mx.shape, -nmax, np.int32), np.full(mx.shape, nmax - 1, np.int32)
    L = np.empty(x.shape, np.int32)
    for i in range(x.shape[0]):                                 # the codes of the chosen trial
        np.add(_clamped(chosen * x[i], lo, hi), nmax, out=L[i])
    L[:, zero] = 0
    return np.where(zero, F32(0), scale), L


@_c_float_semantics
def make_q3_quants(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml ``make_q3_quants(n, nmax, x, L, do_rmse = true)`` on ``(n, S)`` float32 groups.

    Rounds at ``-nmax / max``, then coordinate descent with weights ``x*x`` (at most 5 passes, in
    order over the ``n`` codes, stopping after a pass that changes nothing). Returns ``(scale (S,),
    L (n, S))``, ``L = l + nmax`` (int32); ``L = 0``, scale 0 for ``amax < GROUP_MAX_EPS`` (KQ-1.2).
    """
    amax, mx = signed_abs_max(x)
    iscale = F32(-nmax) / mx
    lo, hi = np.full(mx.shape, -nmax, np.int32), np.full(mx.shape, nmax - 1, np.int32)
    L = np.empty(x.shape, F32)                                  # signed during the descent (exact)
    w = np.empty(x.shape, F32)
    wx = np.empty(x.shape, F32)                                 # the `w*x[i]` of `w*x[i]*L[i]`
    sumlx = np.zeros(x.shape[1:], F32)
    suml2 = np.zeros(x.shape[1:], F32)
    for i in range(x.shape[0]):                                 # row by row: no (n, S) temporaries
        L[i] = _clamped(iscale * x[i], lo, hi)
        np.multiply(x[i], x[i], out=w[i])
        np.multiply(w[i], x[i], out=wx[i])
        sumlx = sumlx + wx[i] * L[i]
        suml2 = suml2 + (w[i] * L[i]) * L[i]
    _descend(x, w, wx, L, sumlx, suml2, nmax)
    zero = amax < GROUP_MAX_EPS
    scale = np.where(suml2 > 0, sumlx / suml2, F32(0))
    return np.where(zero, F32(0), scale), np.where(zero, 0, L.astype(np.int32) + nmax)


def _descend(x, w, wx, L, sumlx, suml2, nmax: int, passes: int = 5) -> None:
    """make_q3_quants' coordinate descent, in place on ``L`` (n, S) float32 and the (S,) sums.

    Pass after pass, C visits ``i = 0 .. n-1`` in order; a group whose pass changed nothing stops
    (``if (!n_changed) break;``). Its state is then final, and another pass would change nothing
    either, so each pass here runs on the groups that the previous pass changed. Every operation
    writes into a buffer allocated once per pass: a fresh array per operation costs more than the
    operation itself at these sizes (allocator page faults).
    """
    live = np.arange(x.shape[1])
    xs, ws, wxs, Ls, slx_all, sl2_all = x, w, wx, L, sumlx.copy(), suml2.copy()   # L itself until a group stops
    for _ in range(passes):
        size = live.size
        lo, hi = np.full(size, -nmax, np.int32), np.full(size, nmax - 1, np.int32)
        slx, sl2, v, new_l, slx_new, sl2_new, lhs, rhs = np.empty((8, size), F32)
        vi = v.view(np.int32)
        take, ok = np.empty((2, size), bool)
        m, r = np.empty((2, size), np.int32)
        changed = np.zeros(size, bool)
        for i in range(x.shape[0]):
            li = Ls[i]
            np.subtract(slx_all, np.multiply(wxs[i], li, out=slx), out=slx)    # slx = sumlx - w*x[i]*L[i]
            np.multiply(ws[i], li, out=sl2)
            sl2 *= li
            np.subtract(sl2_all, sl2, out=sl2)                                  # sl2 = suml2 - w*L[i]*L[i]
            np.multiply(xs[i], sl2, out=v)
            v /= slx
            v += _MAGIC                                                         # nearest_int(x[i]*sl2/slx)
            vi &= 0x007FFFFF
            vi -= 0x00400000
            np.maximum(vi, lo, out=vi)
            np.minimum(vi, hi, out=vi)
            new_l[...] = vi
            np.add(np.multiply(wxs[i], new_l, out=slx_new), slx, out=slx_new)  # slx += w*x[i]*new_l
            np.multiply(ws[i], new_l, out=sl2_new)
            sl2_new *= new_l
            sl2_new += sl2                                                      # sl2 += w*new_l*new_l
            np.multiply(slx_new, slx_new, out=lhs)
            lhs *= sl2_all
            np.multiply(slx_all, slx_all, out=rhs)
            rhs *= sl2_new
            np.greater(lhs, rhs, out=take)                                      # slx*slx*suml2 > sumlx*sumlx*sl2
            take &= np.not_equal(new_l, li, out=ok)
            take &= np.greater(np.minimum(slx, sl2_new, out=lhs), 0, out=ok)    # slx > 0 && sl2 > 0 (NaN fails)
            changed |= take
            _bool_mask(take, m)
            for new, old in ((new_l, li), (slx_new, slx_all), (sl2_new, sl2_all)):
                _blend(m, new, old, r)
        if Ls is not L:
            L[:, live] = Ls
        sumlx[live] = slx_all
        suml2[live] = sl2_all
        if not changed.all():
            live = live[changed]
            xs, ws, wxs, Ls = xs[:, changed], ws[:, changed], wxs[:, changed], Ls[:, changed]
            slx_all, sl2_all = slx_all[changed], sl2_all[changed]
        if live.size == 0:
            break


def _bool_mask(take: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``mask`` (int32) = all-ones where ``take``, zeros elsewhere, for :func:`_blend`."""
    mask[...] = take
    return np.negative(mask, out=mask)


def _blend(mask: np.ndarray, new: np.ndarray, old: np.ndarray, scratch: np.ndarray) -> None:
    """``old = mask ? new : old`` in place, bit for bit, with an int32 scratch buffer."""
    oi = old.view(np.int32)
    np.bitwise_xor(new.view(np.int32), oi, out=scratch)
    scratch &= mask
    oi ^= scratch
