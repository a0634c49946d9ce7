"""How a subject's answer is judged (spec/README.md "Conformance levels", QF-4.6).

Dequantize: exact. The reference value ``r`` has the format's reference dtype R (float32 for GPTQ
and q4_K, float16 for SpQR). A result of a narrower dtype D (float16, bfloat16 for R = float32) must
equal ``round_D(r)``, the correctly rounded value; a result of R or a wider dtype must round to
exactly ``r`` in R. Values compare bit for bit as values: the sign of zero must match (real decoders
produce -0.0, and a common real mistake, adding a dense matrix of outliers or zeros, flips it to +0.0),
infinities match by sign, NaN matches NaN as a class. A subject that declares ``"zeros": "numeric"``
is judged with +0 equal to -0 instead, and its report says so: a lower level, never a silent one.

Matmul ``y = x @ W.T``: within the forward error bound of QF-4.6, per output element::

    |y_hat - y| <= u_w * (|x| @ |W|.T) + eta_w * (|x| @ 1) + gamma(K + 1) * (|x| @ |W|.T) * (1 + u_w)
                   + u_out * |y| + eta_out

with ``y`` evaluated in float64 from the reference W, ``u_w = 2^-11`` and ``eta_w = 2^-25`` when
the kernel may round W to float16 first (GPTQ, q4_K; 0 for SpQR, whose W is float16),
``gamma(n) = n u / (1 - n u)`` with ``u = 2^-24`` for float32 accumulation in any order, and
``u_out`` / ``eta_out`` the unit roundoff and half the smallest subnormal of the output dtype
(float16: 2^-11, 2^-25; bfloat16: 2^-8, 2^-134; float32 and wider: 0, 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Judgement", "exact", "within_bound", "round_bfloat16", "first_mismatches", "U_W", "allowed_dtypes"]

U32 = 2.0 ** -24
U_W, ETA_W = 2.0 ** -11, 2.0 ** -25
OUT_ROUNDING = {"float16": (2.0 ** -11, 2.0 ** -25), "bfloat16": (2.0 ** -8, 2.0 ** -134)}
FLOAT_RANK = {"bfloat16": 1, "float16": 1, "float32": 2, "float64": 3}
FP16_OVERFLOW = 65520.0          # values at or above this round to inf in float16 (round to nearest)
FP32_MAX = float(np.finfo(np.float32).max)


def allowed_dtypes(reference_dtype: str) -> tuple[str, ...]:
    """The dtypes a dequantize result may have (spec/kernels.md KC-2.2): the reference dtype, a wider one,
    and for a float32 reference the two 16-bit floats (correctly rounded). A float16 reference (SpQR) has
    no narrower dtype: bfloat16 cannot hold its values."""
    if reference_dtype == "float16":
        return ("float16", "float32", "float64")
    return ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Judgement:
    ok: bool
    detail: str
    zero_signs_only: bool = False      # every mismatch is a zero of the wrong sign (KC-2.4)


def round_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 (ties to even), returned as float32; NaN stays NaN."""
    f = np.ascontiguousarray(x, np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(f), f, rounded)


def _round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "bfloat16":
            return round_bfloat16(values.astype(np.float32))
        return values.astype(dtype)


def _equal(a: np.ndarray, b: np.ndarray, signed_zeros: bool = True) -> np.ndarray:
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return same & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b)) if signed_zeros else same


def first_mismatches(bad: np.ndarray, actual: np.ndarray, expected: np.ndarray, k: int = 5) -> str:
    """numpy.testing style: ``n / N`` mismatched and the first ``k`` indices with both values."""
    idx = np.argwhere(bad)[:k]
    shown = ", ".join(f"[{', '.join(map(str, i))}] actual {float(actual[tuple(i)]):.9g} "
                      f"expected {float(expected[tuple(i)]):.9g}" for i in idx)
    return f"{int(bad.sum())} / {bad.size} mismatched; first: {shown}"


def exact(actual: np.ndarray, actual_dtype: str, reference: np.ndarray, *, signed_zeros: bool = True) -> Judgement:
    """Dequantize: correctly rounded to a narrower dtype, else exactly the reference value; the sign of
    zero counts unless ``signed_zeros=False`` (a subject's declared numeric equality)."""
    ref_dtype = reference.dtype.name
    if actual_dtype not in FLOAT_RANK:
        return Judgement(False, f"dtype {actual_dtype} is not a float dtype the suite compares")
    if FLOAT_RANK[actual_dtype] < FLOAT_RANK[ref_dtype]:
        expected, got = _round_to(reference, actual_dtype).astype(np.float64), actual.astype(np.float64)
        rule = f"correctly rounded {actual_dtype}"
    else:
        expected, got = reference.astype(np.float64), _round_to(actual, ref_dtype).astype(np.float64)
        rule = f"exact {ref_dtype}"
    bad = ~_equal(got, expected, signed_zeros)
    if not bad.any():
        return Judgement(True, f"{reference.size} values, {rule}" + ("" if signed_zeros else
                                                                    " (numeric equality declared: +0 == -0)"))
    flipped = bad & (got == 0) & (expected == 0)
    why = f"; {int(flipped.sum())} zeros of the wrong sign" if flipped.any() else ""
    return Judgement(False, f"{rule}: {first_mismatches(bad, got, expected)}{why}",
                     zero_signs_only=bool(flipped.sum() == bad.sum()))


def bound(x: np.ndarray, w: np.ndarray, out_dtype: str, *, w_rounding: bool) -> tuple[np.ndarray, np.ndarray]:
    """(y, allowed |error|) of ``x @ w.T`` per the module docstring; both float64 (batch, out)."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):     # informative cases carry inf/NaN weights
        y = x64 @ w64.T
        mag = np.abs(x64) @ np.abs(w64).T
    k = w.shape[1]
    gamma = (k + 1) * U32 / (1 - (k + 1) * U32)
    u_w, eta_w = (U_W, ETA_W) if w_rounding else (0.0, 0.0)
    u_out, eta_out = OUT_ROUNDING.get(out_dtype, (0.0, 0.0))
    allowed = u_w * mag + eta_w * np.abs(x64).sum(axis=1, keepdims=True) + gamma * mag * (1 + u_w)
    return y, allowed + u_out * (np.abs(y) + allowed) + eta_out


def _beyond_float32(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Outputs whose float32 evaluation may overflow in some order: ``|x| @ |W|.T`` (the largest any product or
    partial sum can be) times ``1 + gamma(K + 1)`` over float32's largest value. QF-4.6's model promises nothing
    there (a product may be inf, two partial sums inf and -inf): those outputs are not judged, and said."""
    x64, w64 = np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        mag = x64 @ w64.T
    k = w.shape[1]
    gamma = (k + 1) * U32 / (1 - (k + 1) * U32)
    return np.nan_to_num(mag, nan=np.inf) * (1 + gamma) * (1 + U_W) > FP32_MAX


def within_bound(actual: np.ndarray, actual_dtype: str, x: np.ndarray, w: np.ndarray, *,
                 w_rounding: bool) -> Judgement:
    """Matmul: every element within the forward error bound; float16 overflow to inf allowed where due."""
    if actual_dtype not in FLOAT_RANK:
        return Judgement(False, f"dtype {actual_dtype} is not a float dtype the suite compares")
    y, allowed = bound(x, w, actual_dtype, w_rounding=w_rounding)
    got = actual.astype(np.float64)
    beyond = _beyond_float32(x, w)
    with np.errstate(invalid="ignore"):
        ok = (np.abs(got - y) <= allowed) | beyond
        if actual_dtype == "float16":
            ok |= np.isinf(got) & (np.sign(got) == np.sign(y)) & (np.abs(y) + allowed >= FP16_OVERFLOW)
    bad = ~ok
    unjudged = (f"; {int(beyond.sum())} beyond float32's range, not judged (|x| @ |W|.T over {FP32_MAX:.4g}: "
                "a float32 product or partial sum may overflow, QF-4.6)") if beyond.any() else ""
    if not bad.any():
        judged = ~beyond
        worst = float(np.max(np.abs(got - y)[judged] / np.maximum(allowed[judged], np.finfo(np.float64).tiny))) \
            if judged.any() else 0.0
        return Judgement(True, f"{int(judged.sum())} outputs within the QF-4.6 bound (worst {worst:.3g} of it)"
                               f"{unjudged}")
    i = tuple(np.argwhere(bad)[0])
    return Judgement(False, f"QF-4.6 bound: {first_mismatches(bad, got, y)}; at [{', '.join(map(str, i))}] "
                            f"|error| {abs(got[i] - y[i]):.6g} > allowed {allowed[i]:.6g}")


def nonfinite_pattern(actual: np.ndarray, reference: np.ndarray) -> Judgement:
    """Informative cases: finite exactly where the reference is finite (matmul of inf/NaN scales)."""
    got = actual.astype(np.float64)
    ref = reference.astype(np.float64)
    bad = np.isfinite(got) != np.isfinite(ref)
    if bad.any():
        return Judgement(False, f"non-finite pattern differs: {first_mismatches(bad, got, ref)}")
    return Judgement(True, f"{int((~np.isfinite(ref)).sum())} non-finite values where the reference has them")
