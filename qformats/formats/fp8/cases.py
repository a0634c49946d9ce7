"""FP8 conformance cases (spec/fp8.md FP8-9, spec/kernels.md KC-1.11).

The call hands over one FP8 module's tensors as a checkpoint stores them, plus the config's cell and the
model dtype: ``weight`` uint8 ``(N, K)`` (the E4M3FN bytes), ``weight_scale`` (float32 or float16; bfloat16
scales widened to float32, which is exact), ``block_size`` ``[bn, bk]`` (the cell one scale covers) and
``dtype`` (the output dtype). Three subject formats, one per strategy::

    fp8_tensor/read/<name>     scale (1,), block_size [N, K]
    fp8_channel/read/<name>    scale (N, 1), block_size [1, K]
    fp8_block/read/<name>      scale (ceil(N / bn), ceil(K / bk)), block_size the config's; ragged grids
    */read/invalid/<name>      one per MUST-reject rule (KC-4.2)

Names: ``every_code_<scale>_to_<dtype>`` holds each of the 254 non-NaN E4M3FN bytes (0x00 .. 0x7E, 0x80 ..
0xFE: zeros, -0, subnormals 0x01 .. 0x07, max +-448) in order; ``random_<N>x<K>_<scale>_to_<dtype>`` random
non-NaN bytes with every NaN byte replaced by the max of its sign. Scales are random over 2^-12 .. 4 in the
scale dtype the writers use (compressed-tensors: the model's dtype; DeepSeek, transformers, fbgemm: float32).
The reference is FP8-5.1's float32 value rounded to ``dtype`` (FP8-9.1).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ... import elements
from ...cases import Case
from ...errors import fail
from ...layers import round_to
from . import codec

__all__ = ["cases", "reference", "readings", "misreadings", "dequantize_checked", "checked_call", "FORMATS", "STRATEGY", "DTYPES",
           "cell"]

FORMATS = ("fp8_tensor", "fp8_channel", "fp8_block")
STRATEGY = {"fp8_tensor": "tensor", "fp8_channel": "channel", "fp8_block": "block"}
DTYPES = ("float32", "bfloat16", "float16")
SCALE_DTYPES = ("float32", "float16")            # on the call; bfloat16 arrives widened (KC-1.11)
NAN_CODES = (0x7F, 0xFF)                         # FE-2.2
EVERY_CODE = np.array([c for c in range(256) if c not in NAN_CODES], np.uint8)      # 254 codes


def cell(fmt: str, n: int, k: int, block: tuple[int, int] | None = None) -> list[int]:
    """The ``block_size`` of a call: the cell one scale covers (KC-1.11)."""
    return {"fp8_tensor": [n, k], "fp8_channel": [1, k]}.get(fmt) or list(block)


def _rng(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def _scales(rng: np.random.Generator, shape: tuple[int, ...], scale_dtype: str) -> np.ndarray:
    """Random positive scales over 2^-12 .. 4 holding values of ``scale_dtype`` (bfloat16 widened)."""
    s = np.exp2(rng.uniform(-12.0, 2.0, shape)).astype(np.float32)
    if scale_dtype == "float16":
        return s.astype(np.float16)
    return round_to(s, "bfloat16") if scale_dtype == "bfloat16" else s


def _codes(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Random bytes, NaN bytes replaced by the max of their sign (0x7E, 0xFE), so both maxima occur."""
    c = rng.integers(0, 256, (n, k), dtype=np.uint8)
    return np.where(c == 0x7F, 0x7E, np.where(c == 0xFF, 0xFE, c)).astype(np.uint8)


def _grid(fmt: str, n: int, k: int, block: tuple[int, int] | None) -> tuple[int, ...]:
    return codec.grid(n, k, STRATEGY[fmt], block=block)


def _layer(cid: str, fmt: str, n: int, k: int, block: tuple[int, int] | None, scale_dtype: str,
           codes: np.ndarray | None = None) -> dict[str, np.ndarray]:
    rng = _rng(cid)
    weight = _codes(rng, n, k) if codes is None else codes.reshape(n, k)
    return {"weight": weight, "weight_scale": _scales(rng, _grid(fmt, n, k, block), scale_dtype)}


def _features(fmt: str, n: int, k: int, block: tuple[int, int] | None, scale_dtype: str, dtype: str) -> tuple:
    bn, bk = cell(fmt, n, k, block)
    out = (f"strategy:{STRATEGY[fmt]}", f"scale_dtype:{scale_dtype}", f"dtype:{dtype}", f"block:{bn}x{bk}")
    if n % bn:
        out += ("grid:ragged_rows",)
    if k % bk:
        out += ("grid:ragged_cols",)
    if fmt == "fp8_block" and (n % bn or k % bk) and (n % -(-n // bn) == 0 and k % -(-k // bk) == 0):
        out += ("grid:divides_weight",)   # rows // grid rows is a block size, not the config's (FP8-6.8)
    return out


def _case(fmt: str, name: str, n: int, k: int, scale_dtype: str, dtype: str, clauses: tuple[str, ...],
          block: tuple[int, int] | None = None, codes: np.ndarray | None = None) -> Case:
    cid = f"{fmt}/read/{name}"
    inputs = _layer(cid, fmt, n, k, block, scale_dtype, codes)
    return Case(id=cid, format=fmt, ops=("dequantize", "matmul"), inputs=inputs,
                params={"block_size": cell(fmt, n, k, block), "dtype": dtype},
                clauses=clauses + ("FP8-9.1",), features=_features(fmt, n, k, block, scale_dtype, dtype))


# (scale dtype, output dtype) pairs: 16-bit scales with their own dtype (compressed-tensors writes the model's
# dtype), float32 scales with each (DeepSeek and transformers: float32 scales, any model dtype)
PAIRS = (("float32", "float32"), ("float32", "bfloat16"), ("float32", "float16"), ("bfloat16", "bfloat16"),
         ("float16", "float16"))
SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def _pair(scale_dtype: str, dtype: str) -> str:
    return f"{SHORT[scale_dtype]}_to_{SHORT[dtype]}"


# fp8_block layers: (N, K, block, pair index): ragged both ways, rows only, exact, a small block, MXFP8-like rows
BLOCK_LAYERS = ((130, 200, (128, 128), 1), (129, 128, (128, 128), 3), (256, 128, (128, 128), 0),
                (40, 70, (16, 32), 4), (3, 100, (1, 32), 2))


def cases() -> Iterator[Case]:
    """Every reference-made FP8 case, in a fixed order."""
    for fmt in FORMATS:
        block = (1, 64) if fmt == "fp8_block" else None       # 127 columns: a ragged last block of 63
        for scale_dtype, dtype in PAIRS:
            yield _case(fmt, f"every_code_{_pair(scale_dtype, dtype)}", 2, 127, scale_dtype, dtype,
                        ("FE-2.3", "KC-2.4"), block, EVERY_CODE)
    for i, (scale_dtype, dtype) in enumerate(PAIRS):
        n, k = (33, 70) if i % 2 else (64, 96)
        yield _case("fp8_tensor", f"random_{n}x{k}_{_pair(scale_dtype, dtype)}", n, k, scale_dtype, dtype, ("FP8-5.1",))
        yield _case("fp8_channel", f"random_{n}x{k}_{_pair(scale_dtype, dtype)}", n, k, scale_dtype, dtype,
                    ("FP8-5.1", "FP8-1.2"))
    for n, k, block, i in BLOCK_LAYERS:
        scale_dtype, dtype = PAIRS[i]
        yield _case("fp8_block", f"random_{n}x{k}_b{block[0]}x{block[1]}_{_pair(scale_dtype, dtype)}", n, k,
                    scale_dtype, dtype, ("FP8-1.3", "FP8-5.1"), block)
    yield from _invalid_cases()


# -- non-conforming layers, one per MUST-reject rule (KC-4.2) -----------------------------------------------------
# name -> (format, clause, description); every one spoils the layer BASE[format] describes
INVALID = {
    "weight_nan_7f": ("fp8_tensor", "FP8-6.5", "an E4M3FN NaN weight byte 0x7F (writers clamp to +-448)"),
    "weight_nan_ff": ("fp8_block", "FP8-6.5", "an E4M3FN NaN weight byte 0xFF"),
    "weight_int8": ("fp8_block", "FP8-6.1", "weight bytes of dtype int8, not uint8 E4M3FN bytes"),
    "scale_nan": ("fp8_block", "FP8-6.4", "a NaN weight_scale (readers decode a block of NaN)"),
    "scale_inf": ("fp8_channel", "FP8-6.4", "an infinite weight_scale (readers decode a row of +-inf and NaN)"),
    "scale_zero": ("fp8_tensor", "FP8-6.4", "a zero weight_scale (readers decode zeros)"),
    "scale_negative": ("fp8_block", "FP8-6.4", "a negative weight_scale (readers flip a block's signs)"),
    "scale_float64": ("fp8_channel", "FP8-6.3", "a float64 weight_scale"),
    "scale_grid_short_row": ("fp8_block", "FP8-6.3", "a block grid one row short, (1, 1) for a 130 x 128 weight "
                             "(compressed-tensors broadcasts the row it has)"),
    "scale_channel_transposed": ("fp8_channel", "FP8-6.3", "a channel scale stored (1, N), not (N, 1)"),
    "block_size_zero": ("fp8_block", "FP8-1.1", "block_size [0, 128]"),
    "block_size_not_the_cell": ("fp8_channel", "KC-1.11", "block_size [2, K] with a channel scale"),
    "dtype_float64": ("fp8_tensor", "KC-1.11", "dtype 'float64', not float32, bfloat16 or float16"),
}
NONFINITE = ("scale_nan", "scale_inf")
BASE = {"fp8_tensor": (16, 48, None), "fp8_channel": (24, 40, None), "fp8_block": (130, 128, (128, 128))}


def _base(cid: str, fmt: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    n, k, block = BASE[fmt]
    return _layer(cid, fmt, n, k, block, "float32"), {"block_size": cell(fmt, n, k, block), "dtype": "bfloat16"}


def _spoiled(name: str, inputs: dict, params: dict) -> None:
    """Break one rule of the base layer, in place."""
    w, s = inputs["weight"], inputs["weight_scale"]
    spoil = {
        "weight_nan_7f": lambda: w.__setitem__((3, 5), 0x7F),
        "weight_nan_ff": lambda: w.__setitem__((129, 127), 0xFF),
        "weight_int8": lambda: inputs.__setitem__("weight", w.view(np.int8)),
        "scale_nan": lambda: s.__setitem__((1, 0), np.nan),
        "scale_inf": lambda: s.__setitem__((5, 0), np.inf),
        "scale_zero": lambda: s.__setitem__(0, 0.0),
        "scale_negative": lambda: s.__setitem__((0, 0), -s[0, 0]),
        "scale_float64": lambda: inputs.__setitem__("weight_scale", s.astype(np.float64)),
        "scale_grid_short_row": lambda: inputs.__setitem__("weight_scale", np.ascontiguousarray(s[:1])),
        "scale_channel_transposed": lambda: inputs.__setitem__("weight_scale", np.ascontiguousarray(s.T)),
        "block_size_zero": lambda: params.__setitem__("block_size", [0, 128]),
        "block_size_not_the_cell": lambda: params.__setitem__("block_size", [2, params["block_size"][1]]),
        "dtype_float64": lambda: params.__setitem__("dtype", "float64"),
    }
    spoil[name]()


def _invalid_cases() -> Iterator[Case]:
    for name, (fmt, clause, description) in INVALID.items():
        cid = f"{fmt}/read/invalid/{name}"
        inputs, params = _base(cid, fmt)
        _spoiled(name, inputs, params)
        n, k, block = BASE[fmt]
        feats = _features(fmt, n, k, block, "float32", "bfloat16") + ("input:nonconforming",)
        if name in NONFINITE:
            feats += ("scale:nonfinite",)
        yield Case(id=cid, format=fmt, ops=("dequantize", "matmul"), inputs=inputs, params=params,
                   clauses=(clause, "KC-4.2"), features=feats, expect="reject",
                   aux={"nominal_shape": np.array((n, k), np.int64)},
                   description=f"non-conforming: {description} ({clause})")


# -- the validating reference decoder (KC-4.2) -----------------------------------------------------------------

def _checked_weight(weight: Any) -> tuple[np.ndarray, int, int]:
    w = np.asarray(weight)
    if w.dtype != np.uint8 or w.ndim != 2 or 0 in w.shape:
        raise fail("fp8.weight.dtype", "weight", "uint8 E4M3FN bytes (out, in)", f"{w.dtype} {list(w.shape)}")
    return w, w.shape[0], w.shape[1]


def _checked_cell(fmt: str, block_size: Any, n: int, k: int) -> tuple[int, int] | None:
    """FP8-1.1 (two positive integers), KC-1.11 (tensor and channel: the cell their strategy implies)."""
    dims = list(block_size) if isinstance(block_size, (list, tuple)) else None
    if not dims or len(dims) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise fail("fp8.config.invalid", "block_size", "two positive integers [rows, columns]", block_size)
    if fmt != "fp8_block" and dims != cell(fmt, n, k):
        raise fail("argument.invalid", "block_size", f"{cell(fmt, n, k)} for {fmt} of weight ({n}, {k})", dims,
                   clause="KC-1.11")
    return (dims[0], dims[1]) if fmt == "fp8_block" else None


def _checked_scale(fmt: str, weight_scale: Any, n: int, k: int, block: tuple[int, int] | None) -> np.ndarray:
    """FP8-6.3 (dtype, the strategy's grid with ceil) and FP8-6.4 (finite, positive)."""
    s = np.asarray(weight_scale)
    if s.dtype.name not in SCALE_DTYPES:
        raise fail("fp8.scale.dtype", "weight_scale", "float32 or float16 (bfloat16 widened to float32)", s.dtype.name)
    want = _grid(fmt, n, k, block)
    if codec._shape(s, STRATEGY[fmt]) != want:
        raise fail("fp8.scale.shape", "weight_scale", f"{list(want)} for weight ({n}, {k}), strategy "
                   f"{STRATEGY[fmt]}{'' if block is None else f' {list(block)} (ceil grid)'}", list(s.shape))
    f = s.astype(np.float32).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(f))
    if bad.size:
        raise fail("fp8.scale.nonfinite", "weight_scale", "finite (FP8-6.4)", f"{f[bad[0]]} at {_at(s, bad[0])}")
    bad = np.flatnonzero(f <= 0)
    if bad.size:
        raise fail("fp8.scale.nonpositive", "weight_scale", "positive (FP8-6.4)", f"{f[bad[0]]} at {_at(s, bad[0])}")
    return s


def _at(a: np.ndarray, flat: int) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, a.shape)] if a.ndim else []


def checked_call(fmt: str, *, weight, weight_scale, block_size, dtype) -> tuple[int, int, int, int]:
    """Every MUST-reject rule of the KC-1.11 call (KC-4.2), each raising its QFormatsError; ``(N, K, bn, bk)``
    with the cell one scale covers (the whole weight for fp8_tensor, a row for fp8_channel)."""
    w, n, k = _checked_weight(weight)
    block = _checked_cell(fmt, block_size, n, k)
    if dtype not in DTYPES:
        raise fail("argument.invalid", "dtype", "float32, bfloat16 or float16", dtype, clause="KC-1.11")
    _checked_scale(fmt, weight_scale, n, k, block)
    nan = elements.is_nan_code(w, elements.E4M3FN)
    if nan.any():
        at = [int(i) for i in np.argwhere(nan)[0]]
        raise fail("fp8.weight.nan", "weight", "no E4M3FN NaN byte (FP8-6.5)", f"0x{int(w[tuple(at)]):02X} at {at}")
    bn, bk = cell(fmt, n, k, block)
    return n, k, bn, bk


def dequantize_checked(fmt: str, *, weight, weight_scale, block_size, dtype) -> np.ndarray:
    """The KC-1.11 call, validated (:func:`checked_call`), then FP8-5.1's float32 value rounded to ``dtype``
    (FP8-9.1)."""
    checked_call(fmt, weight=weight, weight_scale=weight_scale, block_size=block_size, dtype=dtype)
    block = tuple(block_size) if fmt == "fp8_block" else None
    return _decoded(np.asarray(weight), np.asarray(weight_scale), fmt, block, dtype)


def _decoded(w: np.ndarray, s: np.ndarray, fmt: str, block: tuple[int, int] | None, dtype: str,
             table: str = elements.E4M3FN, divide: bool = False) -> np.ndarray:
    """FP8-5.1 evaluated as written (NaN and inf included), rounded to ``dtype``: float16 as float16, bfloat16
    as float32 holding its values (KC-2.2). ``divide``: the misreading that divides by the scale."""
    n, k = w.shape
    values = elements.decode(w, table).astype(np.float64)
    cells = codec.expand(np.asarray(s, np.float32), n, k, STRATEGY[fmt], block=block)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        v = (values / cells if divide else values * cells).astype(np.float32)
        return v.astype(np.float16) if dtype == "float16" else round_to(v, dtype)


def _block_of(case: Case) -> tuple[int, int] | None:
    return tuple(case.params["block_size"]) if case.format == "fp8_block" else None


def reference(case: Case) -> np.ndarray:
    """The reference values of a conforming case; of a non-conforming one, those of the layer it spoils."""
    if case.expect == "reject":
        inputs, params = _base(case.id, case.format)
        return dequantize_checked(case.format, **inputs, **params)
    return dequantize_checked(case.format, **case.inputs, **case.params)


# -- named readings and known misreadings (spec/kernels.md KC-4.5, KC-5) -------------------------------------

def readings(case: Case) -> tuple[str, str, dict[str, tuple[str, np.ndarray]]] | None:
    """A NaN or infinite weight scale (FP8-6.4): a decoder may evaluate FP8-5.1 on it, as every reader measured
    does (KC-4.5 ``nonfinite_scales``: ``evaluation``)."""
    if case.id.rsplit("/", 1)[-1] not in NONFINITE:
        return None
    w = _decoded(case.inputs["weight"], case.inputs["weight_scale"], case.format, _block_of(case),
                 case.params["dtype"])
    return "nonfinite_scales", "FP8-6.4", {"evaluation": (
        "FP8-5.1 evaluated as written, NaN and inf times the E4M3 value included (compressed-tensors, transformers)",
        w)}


def _grid_block(case: Case) -> tuple[int, int] | None:
    """transformers 5.24.0 Fp8Dequantize's block: rows // scale_rows, cols // scale_cols (FP8-6.8), when it is
    not the config's and the grid divides the weight."""
    if case.format != "fp8_block":
        return None
    n, k = case.inputs["weight"].shape
    rows, cols = case.inputs["weight_scale"].shape
    derived = (n // rows, k // cols)
    if n % rows or k % cols or derived == _block_of(case):
        return None
    return derived


def misreadings(case: Case) -> Iterator[tuple]:
    """(clause, what the subject did, W, name) of the known wrong FP8 decodes (KC-5; tests/mutants/fp8_bugs.py)."""
    if case.expect != "values":
        return
    w, s, dtype, block = case.inputs["weight"], case.inputs["weight_scale"], case.params["dtype"], _block_of(case)
    ones = np.ones_like(np.asarray(s, np.float32))
    yield "FP8-5.1", "the scale dropped (read as 1.0): the bare E4M3 values", \
        _decoded(w, ones, case.format, block, dtype), "scale dropped"
    yield "FP8-2.1", "the scale applied as a divisor (weight_scale_inv inverted)", \
        _decoded(w, s, case.format, block, dtype, divide=True), "scale inverted"
    yield "FE-2.1", "the E4M3FN bytes decoded as E4M3FNUZ (bias 8: every value halved, 0x80 NaN)", \
        _decoded(w, s, case.format, block, dtype, elements.E4M3FNUZ), "FN read as FNUZ"
    if dtype != "float32" and np.asarray(s).dtype == np.float32:
        yield "FP8-9.1", f"the float32 scale rounded to {dtype} before the product (transformers' " \
            "_dequantize_fp8_weight)", _decoded(w, round_to(s, dtype), case.format, block, dtype), \
            "scale rounded to dtype first"
    derived = _grid_block(case)
    if derived is not None:
        yield "FP8-6.8", f"blocks of {derived[0]} x {derived[1]} derived from the grid (rows // scale_rows), not " \
            f"the config's {block[0]} x {block[1]}", \
            _decoded(w, s, "fp8_block", derived, dtype), "block size from the grid"
