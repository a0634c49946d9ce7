"""NVFP4 and MXFP4 conformance cases (spec/fp4.md FP4-7, spec/kernels.md KC-1.12).

The call hands over what one compressed-tensors FP4 module holds (FP4-2.1), arrays only (no scalar keyword):
``nvfp4_packed`` takes ``weight_packed`` uint8 ``(N, K/2)``, ``weight_scale`` uint8 ``(N, K/16)`` (the
float8_e4m3fn bytes as stored, read as UE4M3: NumPy has no float8 dtype) and ``weight_global_scale`` float32
``(1,)`` (compressed-tensors' divisor; ModelOpt's ``weight_scale_2`` is its reciprocal, FP4-3.6);
``mxfp4_packed`` takes ``weight_packed`` uint8 ``(N, K/2)`` or ``(E, N, K/2)`` (MoE experts) and
``weight_scale`` uint8 E8M0 of the same leading shape and ``K/32`` columns. Both return ``W`` ``(N, K)``
(``(E, N, K)``): compressed-tensors 0.20.0's bfloat16 values (FP4-3.1, FP4-3.7). Cases::

    n<N>_k<K>[_e<E>]        random codes and scale bytes, N odd and even (the rows are not blocked); K is
                            always a multiple of the block: the layouts have no partial block (FP4-2.2)
    every_code_signed_zeros E2M1 codes 0..15 in order, a block of scale 0: code 8 and the negative codes of
                            that block decode to -0.0 (FE-6, KC-2.4)
    every_scale_byte        one row per block-scale byte: UE4M3 0x00..0x7E (zero, subnormals 0x01..0x07, 448);
                            E8M0 0x00..0xFE (2^-127 .. 2^127; |v| >= 2 times 2^127 overflows to inf)
    nvfp4 subnormal_results a global scale of 1.5 * 2^118: products near and below bfloat16's smallest normal
    mxfp4 e8m0_min / _max   every scale 0x00 (2^-127: bfloat16 subnormals) / 0xFE (2^127: inf for |v| >= 2)
    invalid/<name>          one per MUST-reject rule (KC-4.2)

Inputs are random; the values a decoder must produce are the decode of whatever the bytes are.
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

__all__ = ["cases", "reference", "readings", "misreadings", "nvfp4_dequantize_checked", "mxfp4_dequantize_checked",
           "nvfp4_checked", "mxfp4_checked", "FORMATS", "GROUP"]

FORMATS = ("nvfp4_packed", "mxfp4_packed")
GROUP = {"nvfp4_packed": 16, "mxfp4_packed": 32}
BOTH = ("dequantize", "matmul")


def _rng(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def _global(rng: np.random.Generator) -> np.ndarray:
    """A writer's global scale, ``448 * 6 / amax`` (FP4-3.2), for an amax drawn over three decades."""
    return np.array([448.0 * 6.0 / (10.0 ** rng.uniform(-2, 1))], np.float32)


def _layer(fmt: str, cid: str, shape: tuple[int, ...], codes: np.ndarray | None = None,
           scales: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The call's arrays for a weight of ``shape`` ((N, K) or (E, N, K)): random codes and scale bytes unless
    given (UE4M3 0x00..0x7E, E8M0 0x70..0x8F: 2^-15 .. 2^16)."""
    rng = _rng(cid)
    *lead, k = shape
    g = GROUP[fmt]
    if codes is None:
        codes = rng.integers(0, 16, shape, dtype=np.uint8)
    if scales is None:
        low, high = (0x00, 0x7F) if fmt == "nvfp4_packed" else (0x70, 0x90)
        scales = rng.integers(low, high, (*lead, k // g), dtype=np.uint8)
    out = {"weight_packed": codec.pack(codes.reshape(shape)), "weight_scale": np.ascontiguousarray(scales, np.uint8)}
    if fmt == "nvfp4_packed":
        out["weight_global_scale"] = _global(rng)
    return out


def _case(fmt: str, name: str, inputs: dict[str, np.ndarray], clauses: tuple[str, ...], features: tuple[str, ...],
          ops: tuple[str, ...] = BOTH, description: str = "") -> Case:
    *lead, cols = inputs["weight_packed"].shape
    shape = (*lead, 2 * cols)
    feats = (f"format:{fmt.removesuffix('_packed')}", f"n:{'odd' if shape[-2] % 2 else 'even'}") + \
        (("experts",) if len(shape) == 3 else ()) + features
    return Case(id=f"{fmt}/read/{name}", format=fmt, ops=ops, inputs=inputs, params={}, clauses=clauses,
                features=feats, description=description)


# (N, K) or (E, N, K) of the random layers: odd and even N, 1 .. 16 blocks a row
SHAPES = {"nvfp4_packed": ((1, 16), (7, 48), (5, 80), (16, 64), (33, 128), (3, 256)),
          "mxfp4_packed": ((1, 32), (7, 96), (5, 160), (16, 64), (33, 128), (3, 256), (4, 6, 64), (2, 3, 96))}
DECODE = {"nvfp4_packed": "FP4-3.1", "mxfp4_packed": "FP4-3.7"}


def _shape_name(shape: tuple[int, ...]) -> str:
    return f"n{shape[-2]}_k{shape[-1]}" + (f"_e{shape[0]}" if len(shape) == 3 else "")


def _conforming(fmt: str) -> Iterator[Case]:
    decode, g = DECODE[fmt], GROUP[fmt]
    for shape in SHAPES[fmt]:
        name = _shape_name(shape)
        ops = BOTH if len(shape) == 2 else ("dequantize",)        # the matmul contract is one Linear (KC-1.6)
        yield _case(fmt, name, _layer(fmt, f"{fmt}/{name}", shape), (decode, "FP4-1.2", "FP4-2.3"), (), ops)
    codes = np.arange(4 * 2 * g, dtype=np.uint8).reshape(4, 2 * g) % 16
    scales = np.full((4, 2), 0x38 if fmt == "nvfp4_packed" else 0x7F, np.uint8)    # 1.0 either way
    scales[2, 1] = 0x00 if fmt == "nvfp4_packed" else scales[2, 1]                 # an NVFP4 block of scale 0
    yield _case(fmt, "every_code_signed_zeros", _layer(fmt, f"{fmt}/every_code", (4, 2 * g), codes, scales),
                ("FP4-1.2", decode, "KC-2.4"), ("zeros:signed",))
    top = 0x7F if fmt == "nvfp4_packed" else 0xFF                                  # every byte but NaN
    every = np.arange(top, dtype=np.uint8)[:, None]
    ops = BOTH if fmt == "nvfp4_packed" else ("dequantize",)                       # E8M0 0xFD, 0xFE overflow
    yield _case(fmt, "every_scale_byte", _layer(fmt, f"{fmt}/every_scale_byte", (top, g), scales=every),
                (decode, "FP4-3.3" if fmt == "nvfp4_packed" else "FP4-3.4"), ("scale:every_byte",), ops)
    if fmt == "nvfp4_packed":
        inputs = _layer(fmt, f"{fmt}/subnormal_results", (6, 64))
        inputs["weight_global_scale"] = np.array([1.5 * 2.0 ** 118], np.float32)
        yield _case(fmt, "subnormal_results", inputs, ("FP4-3.1", "FP4-3.2"), ("w:subnormal",))
    else:
        for name, byte, ops in (("e8m0_min", 0x00, BOTH), ("e8m0_max", 0xFE, ("dequantize",))):
            inputs = _layer(fmt, f"{fmt}/{name}", (4, 64), scales=np.full((4, 2), byte, np.uint8))
            yield _case(fmt, name, inputs, ("FP4-3.7", "FP4-3.4"), (f"scale:{name.split('_')[1]}",), ops)


def cases() -> Iterator[Case]:
    """Every reference-made FP4 case, in a fixed order."""
    for fmt in FORMATS:
        yield from _conforming(fmt)
        yield from _invalid_cases(fmt)


# -- non-conforming layers, one per MUST-reject rule (KC-4.2) ---------------------------------------------
# name -> (clause of the error, description); the base layer is (4, 3 blocks), spoiled by _spoiled
INVALID = {
    "nvfp4_packed": {
        "k_not_multiple_of_16": ("FP4-2.2", "K = 40, not a multiple of 16 (compressed-tensors raises)"),
        "scale_grid_columns": ("FP4-2.3", "weight_scale one column short of K / 16"),
        "scale_grid_rows": ("FP4-2.3", "weight_scale one row short of N (a reader may reuse rows it has)"),
        "scale_nan_7f": ("FP4-3.3", "a block-scale byte 0x7F, UE4M3 NaN"),
        "scale_nan_ff": ("FP4-3.3", "a block-scale byte 0xFF, NaN with the sign bit set"),
        "scale_sign_b8": ("FP4-3.3", "a block-scale byte 0xB8: the sign bit UE4M3 does not have (E4M3FN -1.0)"),
        "global_zero": ("FP4-3.2", "weight_global_scale 0 (readers divide by it)"),
        "global_nan": ("FP4-3.2", "weight_global_scale NaN"),
        "global_inf": ("FP4-3.2", "weight_global_scale +inf"),
        "global_negative": ("FP4-3.2", "weight_global_scale -2.5 (every sign flips)"),
        "global_two_values": ("QF-2.3", "weight_global_scale of shape (2,)"),
        "packed_int32": ("QF-2.2", "weight_packed int32"),
    },
    "mxfp4_packed": {
        "k_not_multiple_of_32": ("FP4-2.2", "K = 88, not a multiple of 32 (compressed-tensors raises)"),
        "scale_grid_columns": ("FP4-2.3", "weight_scale one column short of K / 32"),
        "scale_grid_rows": ("FP4-2.3", "weight_scale one row short of N"),
        "experts_grid": ("FP4-2.3", "experts (2, 4, K/2) with a scale grid of 3 experts"),
        "e8m0_nan": ("FP4-3.4", "an E8M0 scale byte 0xFF, NaN in OCP MX v1.0"),
        "packed_int32": ("QF-2.2", "weight_packed int32"),
    },
}
READINGS = {"scale_nan_7f": "nonfinite_scales", "scale_nan_ff": "nonfinite_scales", "scale_sign_b8": "ue4m3_sign",
            "global_zero": "global_scale", "global_nan": "global_scale", "global_inf": "global_scale",
            "global_negative": "global_scale", "e8m0_nan": "e8m0_nan"}


def _base(fmt: str, cid: str, name: str) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
    shape = (2, 4, 3 * GROUP[fmt]) if name == "experts_grid" else (4, 3 * GROUP[fmt])
    return _layer(fmt, cid, shape), shape


def _spoiled(name: str, t: dict[str, np.ndarray]) -> None:
    """Break one rule of the base layer, in place."""
    s = t["weight_scale"]
    if name.startswith("k_not_multiple"):
        t["weight_packed"] = np.ascontiguousarray(t["weight_packed"][:, :-4])       # K - 8: 48 - 8 = 40, 96 - 8 = 88
        t["weight_scale"] = np.ascontiguousarray(s[:, :3])
    elif name == "scale_grid_columns":
        t["weight_scale"] = np.ascontiguousarray(s[:, :-1])
    elif name == "scale_grid_rows":
        t["weight_scale"] = np.ascontiguousarray(s[:-1])
    elif name == "experts_grid":
        t["weight_scale"] = np.ascontiguousarray(np.concatenate([s, s[:1]]))
    elif name in ("scale_nan_7f", "scale_nan_ff", "scale_sign_b8", "e8m0_nan"):
        s[1, 2] = {"scale_nan_7f": 0x7F, "scale_nan_ff": 0xFF, "scale_sign_b8": 0xB8, "e8m0_nan": 0xFF}[name]
    elif name.startswith("global_"):
        value = {"global_zero": [0.0], "global_nan": [np.nan], "global_inf": [np.inf], "global_negative": [-2.5],
                 "global_two_values": [300.0, 600.0]}[name]
        t["weight_global_scale"] = np.array(value, np.float32)
    elif name == "packed_int32":
        t["weight_packed"] = t["weight_packed"].astype(np.int32)


def _invalid_cases(fmt: str) -> Iterator[Case]:
    for name, (clause, description) in INVALID[fmt].items():
        cid = f"{fmt}/read/invalid/{name}"
        inputs, shape = _base(fmt, cid, name)
        if name.startswith("k_not_multiple"):
            shape = (shape[0], shape[1] - 8)
        _spoiled(name, inputs)
        ops = ("dequantize",) if len(shape) == 3 else BOTH
        case = _case(fmt, f"invalid/{name}", inputs, (clause, "KC-4.2"), ("input:nonconforming",), ops,
                     f"non-conforming: {description} ({clause})")
        yield Case(**{**case.__dict__, "expect": "reject", "aux": {"nominal_shape": np.array(shape, np.int64)}})


# -- the validating reference decoder (KC-4.2) -----------------------------------------------------------

def _array(value: Any, name: str, dtype: str) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype != np.dtype(dtype):
        raise fail("tensor.dtype", name, dtype, str(a.dtype))
    return a


def _grid(packed: np.ndarray, scale: np.ndarray, group: int) -> None:
    """FP4-2.2, FP4-2.3: K a multiple of the group; the scale grid is the weight's rows by K / group."""
    k = 2 * packed.shape[-1]
    if k % group:
        raise fail("fp4.group.shape", "weight_packed", f"in_features a multiple of {group} (FP4-2.2)", k)
    want = (*packed.shape[:-1], k // group)
    if scale.shape != want:
        raise fail("fp4.grid.shape", "weight_scale", f"shape {want}: one scale per {group} weights of each row "
                   "(FP4-2.3)", tuple(scale.shape))


def _first(mask: np.ndarray, raw: np.ndarray) -> str:
    at = tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))
    return f"0x{int(raw[at]):02X} at {list(at)}"


def _packed(weight_packed: Any, ranks: tuple[int, ...], layout: str) -> np.ndarray:
    p = _array(weight_packed, "weight_packed", "uint8")
    if p.ndim not in ranks:
        raise fail("tensor.shape", "weight_packed", layout, tuple(p.shape))
    return p


def nvfp4_checked(weight_packed, weight_scale, weight_global_scale) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every MUST-reject rule an ``nvfp4_packed`` call can break (FP4-2, FP4-3.2, FP4-3.3), each raising its
    error; returns the arrays (packed, scale bytes, global scale) as NumPy."""
    p = _packed(weight_packed, (2,), "2-D (out_features, in_features / 2) (FP4-2.1)")
    s = _array(weight_scale, "weight_scale", "uint8")
    _grid(p, s, 16)
    g = _array(weight_global_scale, "weight_global_scale", "float32")
    if g.shape not in ((1,), ()):
        raise fail("tensor.shape", "weight_global_scale", "one value, shape (1,) (FP4-2.1)", tuple(g.shape))
    nan, sign = (s & 0x7F) == 0x7F, (s >= 0x80) & (s != 0xFF)
    if nan.any():
        raise fail("fp4.scale.nan", "weight_scale", "UE4M3 bytes 0x00..0x7E (FP4-3.3)", _first(nan, s))
    if sign.any():
        raise fail("fp4.scale.sign", "weight_scale", "UE4M3 bytes 0x00..0x7E, no sign bit (FP4-3.3)", _first(sign, s))
    v = float(g.reshape(-1)[0])
    if not (np.isfinite(v) and v > 0):
        raise fail("fp4.global_scale.invalid", "weight_global_scale", "a finite positive float32 (FP4-3.2)", v)
    return p, s, g


def mxfp4_checked(weight_packed, weight_scale) -> tuple[np.ndarray, np.ndarray]:
    """Every MUST-reject rule an ``mxfp4_packed`` call can break (FP4-2, FP4-3.4); returns (packed, scale bytes)."""
    p = _packed(weight_packed, (2, 3), "2-D (out, in / 2) or 3-D (experts, out, in / 2) (FP4-2.1, FP4-2.5)")
    s = _array(weight_scale, "weight_scale", "uint8")
    _grid(p, s, 32)
    nan = s == 0xFF
    if nan.any():
        raise fail("fp4.scale.e8m0_nan", "weight_scale", "E8M0 bytes 0x00..0xFE (FP4-3.4)", _first(nan, s))
    return p, s


def nvfp4_dequantize_checked(*, weight_packed, weight_scale, weight_global_scale) -> np.ndarray:
    """The KC-1.12 ``nvfp4_packed`` call, validated (:func:`nvfp4_checked`), then FP4-3.1's decode."""
    return codec.nvfp4_dequantize(*nvfp4_checked(weight_packed, weight_scale, weight_global_scale))


def mxfp4_dequantize_checked(*, weight_packed, weight_scale) -> np.ndarray:
    """The KC-1.12 ``mxfp4_packed`` call, validated (:func:`mxfp4_checked`), then FP4-3.7's decode."""
    return codec.mxfp4_dequantize(*mxfp4_checked(weight_packed, weight_scale))


CHECKED = {"nvfp4_packed": nvfp4_dequantize_checked, "mxfp4_packed": mxfp4_dequantize_checked}


def reference(case: Case) -> np.ndarray:
    """The reference values of a conforming case (the validating decoder); of a non-conforming one, the values
    of the conforming layer it was spoiled from (what it meant)."""
    if case.expect == "reject":
        name = case.id.rsplit("/", 1)[-1]
        return CHECKED[case.format](**_base(case.format, case.id, name)[0])
    return CHECKED[case.format](**case.inputs)


# -- named readings and known misreadings (spec/kernels.md KC-4.5, KC-5) ----------------------------------

def _evaluated(case: Case, scale_values: np.ndarray | None = None, global_divisor: Any = None) -> np.ndarray:
    """FP4-3.1 / FP4-3.7 evaluated as written on the case's bytes, with the block scales' values (float32,
    one a block) and the divisor given or decoded from the bytes (NaN for a NaN byte)."""
    t = case.inputs
    q = codec.e2m1_values(t["weight_packed"])
    g = GROUP[case.format]
    if case.format == "mxfp4_packed":
        s = elements.decode(t["weight_scale"], elements.E8M0) if scale_values is None else scale_values
        with np.errstate(over="ignore", invalid="ignore"):
            return round_to(q.astype(np.float64) * np.repeat(s.astype(np.float64), g, axis=-1), "bfloat16")
    s = elements.decode(t["weight_scale"], elements.UE4M3) if scale_values is None else scale_values
    div = np.float32(np.asarray(t["weight_global_scale"]).reshape(-1)[0] if global_divisor is None else global_divisor)
    with np.errstate(all="ignore"):
        s32 = (s.astype(np.float32) / div).astype(np.float32)
        return round_to((q * np.repeat(s32, g, axis=-1)).astype(np.float32), "bfloat16")


def readings(case: Case) -> tuple[str, str, dict[str, tuple[str, np.ndarray]]] | None:
    """A NaN UE4M3 byte or an invalid global scale: FP4-3.1 evaluated as written (compressed-tensors). A UE4M3
    byte with the sign bit: read as E4M3FN (torch) or as its magnitude (ggml). E8M0 0xFF: its block NaN (OCP MX
    v1.0), which no library measured does (FP4-3.4)."""
    feature = READINGS.get(case.id.rsplit("/", 1)[-1]) if case.expect == "reject" else None
    if feature == "nonfinite_scales":
        return feature, "FP4-3.3", {"evaluation": ("FP4-3.1 evaluated as written: the NaN byte's block NaN (torch's "
                                                   "float8_e4m3fn, compressed-tensors)", _evaluated(case))}
    if feature == "global_scale":
        return feature, "FP4-3.2", {"evaluation": ("FP4-3.1 evaluated as written: divided by the global scale "
                                                   "(compressed-tensors)", _evaluated(case))}
    if feature == "ue4m3_sign":
        raw = case.inputs["weight_scale"]
        return feature, "FP4-3.3", {
            "e4m3fn": ("the byte read as an E4M3FN scale, negative (torch's float8_e4m3fn, compressed-tensors)",
                       _evaluated(case, elements.decode(raw, elements.E4M3FN))),
            "magnitude": ("the sign bit ignored (ggml's ggml_ue4m3_to_fp32)",
                          _evaluated(case, elements.decode(raw & 0x7F, elements.UE4M3)))}
    if feature == "e8m0_nan":
        return feature, "FP4-3.4", {"nan": ("the 0xFF block decoded to NaN (OCP MX v1.0: a NaN scale makes its "
                                            "block NaN)", _evaluated(case))}
    return None


def _with_codes(case: Case, codes: np.ndarray, **evaluated: Any) -> np.ndarray:
    """The decode of the case with its codes replaced (the split nibble order's reading)."""
    from dataclasses import replace

    return _evaluated(replace(case, inputs=dict(case.inputs) | {"weight_packed": codec.pack(codes)}), **evaluated)


def _split_order(case: Case) -> np.ndarray:
    """GGUF's order read on these bytes: in each block of g codes, byte j holds element j (low nibble) and
    j + g/2 (high), where the layout has 2j and 2j + 1 (FP4-1.2; kekzl/imp#567 decoded one as the other)."""
    g = GROUP[case.format]
    lin = codec.unpack(case.inputs["weight_packed"])
    blocks = lin.reshape(*lin.shape[:-1], -1, g)
    split = np.concatenate([blocks[..., 0::2], blocks[..., 1::2]], axis=-1)
    return _with_codes(case, split.reshape(lin.shape))


def _nv_product(case: Case, s32: np.ndarray) -> np.ndarray:
    """``bf16(f32(e2m1 * s32))`` with the effective block scales ``s32`` given (float32, one a block)."""
    q = codec.e2m1_values(case.inputs["weight_packed"])
    with np.errstate(all="ignore"):
        return round_to((q * np.repeat(np.asarray(s32, np.float32), 16, axis=-1)).astype(np.float32), "bfloat16")


def _nvfp4_misreadings(case: Case) -> Iterator[tuple]:
    s = elements.decode(case.inputs["weight_scale"], elements.UE4M3)
    gs = np.float32(np.asarray(case.inputs["weight_global_scale"]).reshape(-1)[0])
    with np.errstate(all="ignore"):
        multiplied = (s * gs).astype(np.float32)
        modelopt = (s * (np.float32(1) / gs)).astype(np.float32)
        bf16_first = round_to((s / gs).astype(np.float32), "bfloat16")
        dropped = (np.ones_like(s) / gs).astype(np.float32)
    yield "FP4-3.2", "the global scale multiplied, not divided by (modular#6600: compressed-tensors' " \
        "weight_global_scale read as ModelOpt's weight_scale_2)", _nv_product(case, multiplied), \
        "global scale multiplied"
    yield "FP4-3.6", "the block scale times float32(1 / weight_global_scale), ModelOpt's weight_scale_2 " \
        "product, where compressed-tensors divides (one more float32 rounding)", _nv_product(case, modelopt), \
        "reciprocal global scale multiplied"
    yield "FP4-3.1", "the block scale rounded to bfloat16 before the product (FP4-3.1's rounding order)", \
        _nv_product(case, bf16_first), "block scale rounded to bfloat16 first"
    yield "FP4-3.3", "the block scales dropped: e2m1 / weight_global_scale", _nv_product(case, dropped), \
        "block scales dropped"


def _mxfp4_misreadings(case: Case) -> Iterator[tuple]:
    e = elements.decode(case.inputs["weight_scale"], elements.E8M0).astype(np.float64)
    yield "FP4-3.7", "E2M1 read from GGUF's doubled table with the full E8M0 scale, every weight twice its value " \
        "(tinygrad#14849)", _evaluated(case, e * 2), "GGUF doubled table, full scale"
    yield "FP4-3.7", "the E8M0 scale halved as ggml's ggml_e8m0_to_fp32_half with the plain E2M1 table", \
        _evaluated(case, e / 2), "GGUF half scale, plain table"
    yield "FP4-3.4", "the block scales dropped: the bare E2M1 values", _evaluated(case, np.ones_like(e)), \
        "block scales dropped"


def _e8m0_ff(case: Case) -> Iterator[tuple]:
    """The readers' answers to an E8M0 0xFF byte (FP4-3.4), measured: 2^128 as a bfloat16 scale (inf, and
    inf * 0 = NaN: compressed-tensors, ModelOpt), or the exact product rounded (transformers' ldexp)."""
    raw = case.inputs["weight_scale"]
    e = np.where(raw == 0xFF, np.float32(np.inf), elements.decode(raw, elements.E8M0))
    yield "FP4-3.4", "E8M0 0xFF read as 2^128 in bfloat16 (inf; inf * 0 = NaN), not NaN", _evaluated(case, e), \
        "E8M0 0xFF read as 2^128 (inf)"
    exact = np.where(raw == 0xFF, 2.0 ** 128, elements.decode(raw, elements.E8M0).astype(np.float64))
    yield "FP4-3.4", "E8M0 0xFF read as 2^128, the exact product rounded to bfloat16 (0.5 -> 2^127, 0 -> 0), " \
        "not NaN", _evaluated(case, exact), "E8M0 0xFF read as 2^128 (ldexp)"


def misreadings(case: Case) -> Iterator[tuple]:
    """(clause, what the subject did, W[, name]) of the known wrong FP4 decodes (KC-5), each from a real bug."""
    if case.expect == "reject":
        if case.id.endswith("/e8m0_nan"):
            yield from _e8m0_ff(case)
        return
    from conformance.diagnoses import NAMES, reverse_fields

    from dataclasses import replace
    swapped = replace(case, inputs=dict(case.inputs) | {"weight_packed": reverse_fields(case.inputs["weight_packed"],
                                                                                        4, 8)})
    yield "KC-5.1", f"{NAMES['KC-5.1']}: element 2j read from the high nibble (FP4-1.2)", _evaluated(swapped), \
        NAMES["KC-5.1"]
    yield "FP4-1.2", "GGUF's split nibble order (element j and j + g/2 in byte j, kekzl/imp#567) read on the " \
        "linear layout", _split_order(case), "split nibble order"
    yield from (_nvfp4_misreadings(case) if case.format == "nvfp4_packed" else _mxfp4_misreadings(case))
