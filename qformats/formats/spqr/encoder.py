"""Reference SpQR encoder: float weights -> a valid release-layout layer (spec/spqr.md §10).

Statistics are computed as the SpQR repository's ``quant_groups.Quantizer`` computes them (float32
min-max, fractional zero, ``xmin == xmax -> (-1, +1)`` at both levels, 3-bit second level over 16
consecutive rows). Outliers follow the repository's ``SPQRUtil.quantize`` (the paper's Algorithm 1):
a leave-one-out pass marks likely outliers before the group statistics are fitted, then each column
is quantized and an entry whose squared, Hessian-scaled error exceeds ``tau * outlier_scale``
becomes an outlier: its code is the code of 0 and its float16 value the current weight. With a
calibration Hessian, errors are fed back to later columns (GPTQ, column by column, because each
column depends on the previous ones); without one the Hessian is the identity and no feedback
happens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ...errors import fail
from ...numerics import round_half_even
from ...tensors import as_array, check_finite
from .codec import check_perm, csr_offsets, csr_to_ptcsr, merge_col_vals, pack_dense, pack_perm
from .layout import BITS, TILE, SpQRLayer, check_dims

__all__ = ["quantize", "minmax_params", "quantize_codes"]

F32 = np.float32
MAXQ = F32((1 << BITS) - 1)
EPS = F32(1e-9)
FP16_MAX = float(np.finfo(np.float16).max)


def minmax_params(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scale, fractional zero) per row of x, float32, with the degenerate-group rule (SPQR-10.2)."""
    x = x.astype(F32)
    xmin, xmax = x.min(axis=-1), x.max(axis=-1)
    flat = xmin == xmax
    xmin, xmax = np.where(flat, F32(-1), xmin), np.where(flat, F32(1), xmax)
    scale = ((xmax - xmin) / MAXQ).astype(F32)
    return scale, (-xmin / scale).astype(F32)


def quantize_codes(x: Any, scale: Any, zero: Any) -> np.ndarray:
    """``clamp(rint(x / max(scale, 1e-9) + zero), 0, 7)`` in float32 (round half to even)."""
    x = np.asarray(x, F32)
    return np.clip(round_half_even(x / np.maximum(np.asarray(scale, F32), EPS) + np.asarray(zero, F32)), 0, MAXQ)


def _second_level(first: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """3-bit codes and float32 (scale, zero) of first-level stats [m] grouped by 16 rows."""
    groups = first.reshape(-1, TILE)
    s2, z2 = minmax_params(groups)
    return quantize_codes(groups, s2[:, None], z2[:, None]).reshape(-1), s2, z2


def _loo_likely_outliers(w: np.ndarray, d: np.ndarray, threshold: float) -> np.ndarray:
    """Leave-one-out test: entries whose exclusion cuts the group's scaled error by > threshold."""
    m, g = w.shape
    keep = ~np.eye(g, dtype=bool)
    loo = np.broadcast_to(w[:, None, :], (m, g, g))[:, keep].reshape(m, g, g - 1)  # [r, left-out, others]
    s, z = minmax_params(loo)
    rec = s[..., None] * (quantize_codes(loo, s[..., None], z[..., None]) - z[..., None])
    d_loo = np.broadcast_to(d[None, :], (g, g))[keep].reshape(g, g - 1)
    loo_err = (((rec - loo) / d_loo) ** 2).sum(-1)
    s, z = minmax_params(w)
    base = s[:, None] * (quantize_codes(w, s[:, None], z[:, None]) - z[:, None])
    base_err = (((base - w) / d) ** 2).sum(-1, keepdims=True)
    return (base_err - loo_err) > threshold


def _fit_group(w: np.ndarray, likely: np.ndarray) -> dict[str, np.ndarray]:
    """Bilevel statistics of one column group, fitted with likely outliers replaced by the row mean."""
    keep = (~likely).astype(F32)
    mean = (w * keep).sum(1, keepdims=True) / np.maximum(keep.sum(1, keepdims=True), 1)
    s1, z1 = minmax_params(np.where(likely, mean, w).astype(F32))
    qs, ss, sz = _second_level(s1)
    qz, zs, zz = _second_level(z1)
    rows = lambda a: np.repeat(a, TILE)  # noqa: E731
    f16 = np.float16
    # what a decoder reconstructs (SPQR-5.1): float16 op by op from the stored float16 stats
    s_dec = rows(ss.astype(f16)) * (qs.astype(f16) - rows(sz.astype(f16)))
    z_dec = rows(zs.astype(f16)) * (qz.astype(f16) - rows(zz.astype(f16)))
    return {"s_code": qs, "z_code": qz, "stats": (ss, sz, zs, zz),
            "fp32": (rows(ss) * (qs - rows(sz)), rows(zs) * (qz - rows(zz))),
            "decoded": (s_dec.astype(F32), z_dec.astype(F32))}


def _hessian(hessian: Any, n: int) -> np.ndarray | None:
    if hessian is None:
        return None
    h = as_array(hessian, "hessian")
    if h.shape != (n, n) or h.dtype.kind not in "iuf":
        raise fail("argument.invalid", "hessian", f"a real ({n}, {n}) matrix", (h.dtype.name, tuple(h.shape)))
    h = h.astype(np.float64)
    check_finite("hessian", h, "argument.invalid")
    return h


def _hessian_factor(h: np.ndarray, n: int, perm: np.ndarray, percdamp: float) -> tuple[np.ndarray, np.ndarray]:
    h = h[perm][:, perm]
    dead = np.diag(h) == 0
    h[np.diag_indices(n)] += percdamp * np.abs(np.diag(h)).mean()
    h[dead, dead] = 1
    try:
        h_inv = np.linalg.inv(h)
        u = np.linalg.cholesky((h_inv + h_inv.T) / 2).T       # upper factor of H^-1
    except np.linalg.LinAlgError as exc:
        raise fail("argument.invalid", "hessian", "positive definite after damping", "singular") from exc
    return u, dead


def _permutation(perm: Any, h: np.ndarray | None, n: int) -> np.ndarray:
    if isinstance(perm, str):
        if perm == "identity":
            return np.arange(n)
        if perm == "act_order":
            if h is None:
                raise fail("argument.invalid", "perm", "'identity' without a hessian", perm)
            return np.argsort(-np.diag(h), kind="stable")
        raise fail("argument.invalid", "perm", "'identity', 'act_order' or an index array", perm)
    return check_perm(as_array(perm, "perm"), n, "perm", "argument.invalid")


def _number(name: str, value: Any, want: str, ok: Callable[[float], bool]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not ok(float(value)):
        raise fail("argument.invalid", name, want, value)
    return float(value)


def quantize(weight: Any, *, tau: float = 0.2, hessian: Any = None,
             perm: Literal["identity", "act_order"] | Any = "identity", percdamp: float = 1.0,
             sparse: Literal["csr", "ptcsr"] = "csr", fit: Literal["loo", "all"] = "loo",
             code_stats: Literal["decoded", "fp32"] = "decoded",
             outlier_values: Literal["additive", "spqr"] = "additive") -> SpQRLayer:
    """Quantize float weights (out, in) to a release-layout layer (SPQR-10).

    ``tau`` is the SpQR outlier threshold relative to ``outlier_scale`` (``inf`` turns outliers
    off); ``hessian`` an optional (in, in) calibration matrix ``X^T X``; ``code_stats`` picks weight
    codes against the statistics a decoder reconstructs ("decoded", default) or against the
    encoder's float32 statistics as the SpQR repository does ("fp32", SPQR-7.8); ``fit`` "loo"
    runs the leave-one-out pre-pass, "all" fits on every weight (SpQR's ``simplified_outliers``);
    ``outlier_values`` "additive" stores ``w - dense(code of 0)`` so the additive decode returns w
    (SPQR-10.4), "spqr" stores ``fp16(w)`` as the SpQR repository does.
    """
    w = as_array(weight, "weight")
    if w.ndim != 2 or w.dtype.kind != "f":
        raise fail("argument.invalid", "weight", "a 2-D float array (out, in)", (w.dtype.name, tuple(w.shape)))
    m, n = w.shape
    check_dims(m, n, "weight")
    check_finite("weight", w, "argument.invalid")
    if np.abs(w).max() > FP16_MAX:      # outlier values and statistics are float16
        j = np.unravel_index(int(np.abs(w).argmax()), w.shape)
        raise fail("argument.invalid", "weight", f"within the float16 range |w| <= {FP16_MAX:g}",
                   f"{float(w[j])} at {[int(i) for i in j]}")
    for name, value, allowed in (("sparse", sparse, ("csr", "ptcsr")), ("fit", fit, ("loo", "all")),
                                 ("code_stats", code_stats, ("decoded", "fp32")),
                                 ("outlier_values", outlier_values, ("additive", "spqr"))):
        if value not in allowed:
            raise fail("argument.invalid", name, " or ".join(map(repr, allowed)), value)
    tau = _number("tau", tau, "a number > 0 (inf disables outliers)", lambda v: v > 0)
    percdamp = _number("percdamp", percdamp, "a finite number >= 0", lambda v: math.isfinite(v) and v >= 0)
    h = _hessian(hessian, n)
    p = _permutation(perm, h, n)
    wp = w.astype(F32)[:, p].astype(np.float64)
    if h is not None:
        u, dead = _hessian_factor(h, n, p, percdamp)
        wp[:, dead] = 0
    else:
        u = np.eye(n)
    d = np.diag(u)
    threshold = tau * float((wp.var(axis=0, ddof=1) / d ** 2).mean())
    q = np.zeros((m, n), np.uint8)
    outlier = np.zeros((m, n), bool)
    values = np.zeros((m, n), np.float16)
    s_codes, z_codes, stats = [], [], []
    for g0 in range(0, n, TILE):                       # GPTQ order: each group sees earlier feedback
        grp = wp[:, g0:g0 + TILE].astype(F32)
        likely = (_loo_likely_outliers(grp, d[g0:g0 + TILE].astype(F32), threshold)
                  if np.isfinite(threshold) and fit == "loo" else np.zeros_like(grp, bool))
        group = _fit_group(grp, likely)
        s_codes.append(group["s_code"])
        z_codes.append(group["z_code"])
        stats.append(group["stats"])
        scale, zero = group[code_stats]
        s16, z16 = (a.astype(np.float16) for a in group["decoded"])
        code0 = quantize_codes(np.zeros(m, F32), scale, zero)
        dense0 = (s16 * (code0.astype(np.float16) - z16)).astype(F32)     # what the decoder adds to
        for j in range(g0, g0 + TILE):
            col = wp[:, j].astype(F32)
            code = quantize_codes(col, scale, zero)
            err = (col - scale * (code - zero)) / d[j]
            out = (err.astype(np.float64) ** 2 > threshold) if np.isfinite(threshold) else np.zeros(m, bool)
            code = np.where(out, code0, code)
            deq = np.where(out, col, scale * (code - zero))
            stored = col - dense0 if outlier_values == "additive" else col
            q[:, j], outlier[:, j], values[:, j] = code, out, np.where(out, stored, 0).astype(np.float16)
            if h is not None and j + 1 < n:
                wp[:, j + 1:] -= np.outer((wp[:, j] - deq) / d[j], u[j, j + 1:])
    st = [np.stack([s[i] for s in stats], axis=1).astype(np.float16) for i in range(4)]   # [m/16, n/16]
    dense = pack_dense(q, np.stack(s_codes, 1).astype(np.uint8), np.stack(z_codes, 1).astype(np.uint8), *st)
    outlier &= values != 0                              # +0.0 adds nothing; exact zeros are not stored
    rows, cols = np.nonzero(outlier)
    ro = csr_offsets(rows, m)
    cv = merge_col_vals(cols, values[rows, cols])
    if sparse == "ptcsr":
        ro, cv = csr_to_ptcsr(ro, cv, m)
    return SpQRLayer({"dense_weights": dense, "row_offsets": ro, "col_vals": cv, "in_perm": pack_perm(p)}, m=m, n=n)
