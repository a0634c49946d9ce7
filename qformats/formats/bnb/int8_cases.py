"""bitsandbytes LLM.int8 conformance cases (spec/bnb.md BNB-6, BNB-9.2; spec/kernels.md KC-1.10).

The call (``bnb_int8`` dequantize) hands over what a checkpoint module holds: ``weight`` int8 ``(N, K)`` and
``SCB`` float32 ``(N,)``, with the model's ``dtype`` (LLM.int8 states none of its own, BNB-6.2). Cases::

    int8_<N>x<K>_<dtype>        random codes over -127 .. 127 and positive row scales, ragged N and K
                                (1 x 1, odd, square, past a 64-wide tile), dtypes float32, float16, bfloat16 in turn
    int8_every_code             the codes -128 .. 127 in order, over and over (-128: decoded as written, BNB-6.2)
    int8_zero_rows              SCB 0 (bitsandbytes' scale of an all-zero row): its negative codes give -0.0
    invalid/<name>              one per MUST-reject rule of BNB-6.1 (KC-4.2)
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...cases import Case
from ...errors import fail
from . import codec

__all__ = ["cases", "reference", "dequantize_checked", "FORMATS"]

FORMATS = ("bnb_int8",)
# (N, K): one weight, odd, ragged, square (q_proj, o_proj: a per-column scale then decodes without an error),
# past a 64-wide tile
SHAPES = ((1, 1), (7, 33), (13, 130), (48, 48), (64, 65))
DTYPES = ("float32", "float16", "bfloat16")


def _layer(case_id: str, shape: tuple[int, int], codes: np.ndarray | None = None,
           scb: np.ndarray | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(case_id.encode()))
    if codes is None:
        codes = rng.integers(-127, 128, shape)
    if scb is None:
        scb = 2.0 ** rng.uniform(-12, 6, shape[0])
    return {"weight": np.asarray(codes, np.int8).reshape(shape), "SCB": np.asarray(scb, np.float32)}


def _case(name: str, shape: tuple[int, int], dtype: str, clauses: tuple[str, ...], **layer: Any) -> Case:
    cid = f"bnb_int8/read/{name}"
    n, k = shape
    return Case(id=cid, format="bnb_int8", ops=("dequantize",), inputs=_layer(cid, shape, **layer),
                params={"dtype": dtype}, clauses=("BNB-6.2",) + clauses,
                features=(f"dtype:{dtype}", f"n:{'odd' if n % 2 else 'even'}", f"k:{'odd' if k % 2 else 'even'}"))


def cases() -> Iterator[Case]:
    """Every reference-made LLM.int8 case, in a fixed order."""
    for i, shape in enumerate(SHAPES):
        for j, dtype in enumerate(DTYPES):
            if (i + j) % 2 == 0 or shape == (1, 1):      # dtypes in turn; 1 x 1 in all three
                yield _case(f"int8_{shape[0]}x{shape[1]}_{dtype}", shape, dtype, ("BNB-6.1",))
    yield _case("int8_every_code", (4, 129), "float32", (),
                codes=(np.arange(4 * 129) % 256 - 128).reshape(4, 129))
    scb = np.array([0.0, 1.5, 0.0], np.float32)
    yield _case("int8_zero_rows", (3, 40), "float32", ("BNB-6.1", "KC-2.4"), scb=scb)
    yield from _invalid_cases()


# Non-conforming layers, one per MUST-reject rule (KC-4.2): name, clause, description.
INVALID = (
    ("scb_nan", "BNB-6.1", "a NaN SCB (bitsandbytes decodes a row of NaN)"),
    ("scb_inf", "BNB-6.1", "an infinite SCB"),
    ("scb_negative", "BNB-6.1", "a negative SCB (an absmax is not negative; decoded, the row's signs flip)"),
    ("scb_short", "BNB-6.1", "SCB one entry short of N"),
    ("weight_uint8", "BNB-6.1", "the codes stored as uint8, not int8"),
    ("dtype_float64", "BNB-5.2", "dtype 'float64', not one of the dtype names float16, bfloat16, float32"),
)
BASE = (6, 34)


def _invalid_cases() -> Iterator[Case]:
    for name, clause, description in INVALID:
        cid = f"bnb_int8/read/invalid/{name}"
        inputs, params = _layer(cid, BASE), {"dtype": "float16"}
        if name == "scb_nan":
            inputs["SCB"][2] = np.nan
        elif name == "scb_inf":
            inputs["SCB"][-1] = -np.inf
        elif name == "scb_negative":
            inputs["SCB"][1] = -inputs["SCB"][1]
        elif name == "scb_short":
            inputs["SCB"] = np.ascontiguousarray(inputs["SCB"][:-1])
        elif name == "weight_uint8":
            inputs["weight"] = inputs["weight"].view(np.uint8)
        elif name == "dtype_float64":
            params["dtype"] = "float64"
        yield Case(id=cid, format="bnb_int8", ops=("dequantize",), inputs=inputs, params=params,
                   clauses=(clause, "KC-4.2"), features=("dtype:float16", "input:nonconforming"), expect="reject",
                   aux={"nominal_shape": np.array(BASE, np.int64)},
                   description=f"non-conforming: {description} ({clause})")


# -- the validating reference decoder (KC-4.2) -----------------------------------------------------------------

def dequantize_checked(*, weight: Any, SCB: Any, dtype: Any) -> np.ndarray:  # noqa: N803 (the stored name)
    """The KC-1.10 ``bnb_int8`` call, validated (BNB-6.1, the dtype of BNB-6.2), then BNB-6.2's decode."""
    if dtype not in codec.DTYPES:
        raise fail("bnb.dtype", "dtype", "one of " + ", ".join(codec.DTYPES), dtype)
    w, scb = np.asarray(weight), np.asarray(SCB)
    if w.dtype != np.int8 or w.ndim != 2:
        raise fail("bnb.int8.invalid", "weight", "int8 (out_features, in_features) (BNB-6.1)",
                   f"{w.dtype} {list(w.shape)}")
    if scb.dtype != np.float32 or scb.shape != (w.shape[0],):
        raise fail("bnb.int8.invalid", "SCB", f"float32 [{w.shape[0]}], one scale per row (BNB-6.1)",
                   f"{scb.dtype} {list(scb.shape)}")
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~(np.isfinite(scb) & (scb >= 0)))
    if bad.size:
        raise fail("bnb.int8.invalid", "SCB", "finite and not negative, a row's absmax (BNB-6.1)",
                   f"{scb[bad[0]]} at [{bad[0]}]")
    return codec.dequantize_int8(w, scb, dtype=dtype)


def reference(case: Case) -> np.ndarray:
    """The reference values of a conforming case; of a non-conforming one, those of the layer it was spoiled from."""
    if case.expect == "reject":
        return dequantize_checked(**_layer(case.id, BASE), dtype="float16")
    return dequantize_checked(**case.inputs, **case.params)
