"""bitsandbytes 4-bit conformance cases (spec/bnb.md BNB-9, spec/kernels.md KC-1.10).

The call (``bnb_4bit`` dequantize) hands over what a checkpoint module holds: ``packed`` (ceil(n/2), 1) uint8,
``absmax`` (float32, or uint8 codes with double quantization), the stored ``quant_map`` and the quant_state's
``quant_type``, ``blocksize``, ``shape`` and ``dtype``; with double quantization also ``nested_absmax``,
``nested_quant_map`` and ``nested_offset`` (float32 ``(1,)``: bitsandbytes holds a 0-d tensor). Cases::

    <type>_b<B>[_dq]            NF4 and FP4, every blocksize 32 .. 4096, double quantization off and on; the
                                last block partial; odd and even n and K (a random padding nibble on odd n,
                                which readers ignore, BNB-1.2); output dtypes bfloat16, float16, float32 in turn
    <type>_b32_dq_nested_blocks 302 blocks: two nested blocks of 256, the second partial (BNB-4.3)
    <type>_b32_every_code       codes 0 .. 15 in order, over and over (FP4 code 8 is -0.0, BNB-2.3)
    <type>_b64_signed_zeros_zero_absmax  a block with absmax 0: negative codes give -0.0 (KC-2.4)
    invalid/<name>              one per MUST-reject rule (KC-4.2)

Inputs are random codes and scales (the values a decoder must produce are the decode of whatever the codes
are); the double-quantized state is made by the reference writer (``quantize_absmax``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...cases import Case
from ...errors import fail
from . import codec

__all__ = ["cases", "reference", "readings", "misreadings", "checked", "dequantize_checked", "FORMATS", "STORED_MAPS"]

FORMATS = ("bnb_4bit",)
DTYPES = ("bfloat16", "float16", "float32")
# BNB-2.3: the quant_map bitsandbytes stores; its FP4 code 8 is +0.0 (the table of get_4bit_type), where the
# decode's value is -0.0
STORED_MAPS = {"nf4": codec.NF4.copy(), "fp4": np.where(codec.FP4 == 0, np.float32(0), codec.FP4).astype(np.float32)}


def _rng(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def _layer(case_id: str, quant_type: str, blocksize: int, shape: tuple[int, int], nested: bool,
           codes: np.ndarray | None = None, absmax: np.ndarray | None = None) -> tuple[dict, dict]:
    """(inputs, params) of a layer with random codes (every code, a random padding nibble) and scales."""
    rng = _rng(case_id)
    n = shape[0] * shape[1]
    nb = -(-n // blocksize)
    if codes is None:
        codes = rng.integers(0, 16, n + n % 2).astype(np.uint8)
    if absmax is None:
        absmax = rng.uniform(2.0 ** -8, 4.0, nb).astype(np.float32)
    packed = codec.pack_codes(codes)
    inputs: dict[str, np.ndarray] = {"packed": packed, "quant_map": STORED_MAPS[quant_type].copy()}
    params: dict[str, Any] = {"quant_type": quant_type, "blocksize": blocksize, "shape": list(shape)}
    if nested:
        q, nested_absmax, offset = codec.quantize_absmax(absmax)
        inputs |= {"absmax": q, "nested_absmax": nested_absmax, "nested_quant_map": codec.dynamic_map(),
                   "nested_offset": np.array([offset], np.float32)}
    else:
        inputs["absmax"] = absmax.astype(np.float32)
    return inputs, params


def _features(quant_type: str, blocksize: int, shape: tuple[int, int], nested: bool, dtype: str) -> tuple[str, ...]:
    n = shape[0] * shape[1]
    return (f"quant_type:{quant_type}", f"blocksize:{blocksize}", f"double_quant:{str(nested).lower()}",
            f"dtype:{dtype}", f"n:{'odd' if n % 2 else 'even'}", f"k:{'odd' if shape[1] % 2 else 'even'}") + \
        (("last_block:partial",) if n % blocksize else ())


def _case(name: str, quant_type: str, blocksize: int, shape: tuple[int, int], nested: bool, dtype: str,
          clauses: tuple[str, ...], **layer: Any) -> Case:
    cid = f"bnb_4bit/read/{name}"
    inputs, params = _layer(cid, quant_type, blocksize, shape, nested, **layer)
    clauses = clauses + (("BNB-4.3",) if nested else ())
    return Case(id=cid, format="bnb_4bit", ops=("dequantize",), inputs=inputs, params=params | {"dtype": dtype},
                clauses=clauses, features=_features(quant_type, blocksize, shape, nested, dtype))


def _shape(blocksize: int, odd: bool) -> tuple[int, int]:
    """3.5 or 3.2 blocks: n = 7 (B/2 + 1) (odd n and K) or 6 (B/2 + 2) (even); the last block partial."""
    return (7, blocksize // 2 + 1) if odd else (6, blocksize // 2 + 2)


def cases() -> Iterator[Case]:
    """Every reference-made bitsandbytes 4-bit case, in a fixed order."""
    i = 0
    for quant_type in ("nf4", "fp4"):
        for blocksize in codec.BLOCKSIZES:
            for nested in (False, True):
                odd = nested == (quant_type == "fp4")     # each type meets odd and even n and K
                yield _case(f"{quant_type}_b{blocksize}{'_dq' if nested else ''}", quant_type, blocksize,
                            _shape(blocksize, odd), nested, DTYPES[i % 3], ("BNB-3.2", "BNB-1.2", "BNB-2.1"
                                                                           if quant_type == "nf4" else "BNB-2.2"))
                i += 1
        table = "BNB-2.1" if quant_type == "nf4" else "BNB-2.2"
        yield _case(f"{quant_type}_b32_dq_nested_blocks", quant_type, 32, (37, 261), True, "bfloat16",
                    ("BNB-4.3", "BNB-3.2"))
        yield _case(f"{quant_type}_b32_every_code", quant_type, 32, (3, 33), False, "float32",
                    (table, "BNB-2.3", "KC-2.4"), codes=np.arange(100, dtype=np.uint8) % 16)
        absmax = _rng(f"{quant_type}/zero_absmax").uniform(0.5, 2.0, 4).astype(np.float32)
        absmax[1] = 0.0
        yield _case(f"{quant_type}_b64_signed_zeros_zero_absmax", quant_type, 64, (5, 50), False, "float32",
                    ("KC-2.4", "BNB-3.2"), absmax=absmax)
    yield from _invalid_cases()


# Non-conforming layers, one per MUST-reject rule (KC-4.2): (name, clause, double quantization, description).
INVALID = (
    ("absmax_nan", "BNB-3.4", False, "a NaN absmax (bitsandbytes decodes a block of NaN)"),
    ("absmax_inf", "BNB-3.4", False, "an infinite absmax"),
    ("nested_absmax_nan", "BNB-3.4", True, "a NaN nested_absmax"),
    ("absmax_short", "BNB-3.4", False, "absmax one entry short of ceil(n / blocksize) (bitsandbytes reads past it)"),
    ("packed_short", "BNB-1.3", False, "packed one byte short of ceil(n / 2)"),
    ("blocksize_48", "BNB-3.3", False, "blocksize 48, not one of 32 .. 4096"),
    ("quant_type_int4", "BNB-5.2", False, "quant_type 'int4'"),
    ("dtype_float64", "BNB-5.2", False, "dtype 'float64', not float16, bfloat16 or float32"),
    ("quant_map_mismatch", "BNB-2.4", False, "quant_type nf4 with the FP4 table stored as quant_map"),
    ("nested_missing", "BNB-4.4", True, "uint8 absmax codes without the nested state"),
    ("nested_quant_map_short", "BNB-4.4", True, "a nested_quant_map of 255 entries"),
)
NONFINITE = ("absmax_nan", "absmax_inf", "nested_absmax_nan")
BASE = {"shape": (6, 34), "blocksize": 64, "dtype": "bfloat16"}     # even K: bitsandbytes' C++ path on CPU


def _spoiled(name: str, inputs: dict, params: dict) -> None:
    """Break one rule of the NF4 blocksize-64 layer, in place."""
    a = inputs["absmax"]
    if name == "absmax_nan":
        a[1] = np.nan
    elif name == "absmax_inf":
        a[-1] = np.inf
    elif name == "nested_absmax_nan":
        inputs["nested_absmax"][0] = np.nan
    elif name == "absmax_short":
        inputs["absmax"] = np.ascontiguousarray(a[:-1])
    elif name == "packed_short":
        inputs["packed"] = np.ascontiguousarray(inputs["packed"][:-1])
    elif name == "blocksize_48":
        params["blocksize"] = 48
    elif name == "quant_type_int4":
        params["quant_type"] = "int4"
    elif name == "dtype_float64":
        params["dtype"] = "float64"
    elif name == "quant_map_mismatch":
        inputs["quant_map"] = STORED_MAPS["fp4"].copy()
    elif name == "nested_missing":
        del inputs["nested_absmax"], inputs["nested_quant_map"], inputs["nested_offset"]
    elif name == "nested_quant_map_short":
        inputs["nested_quant_map"] = np.ascontiguousarray(inputs["nested_quant_map"][:-1])


def _invalid_cases() -> Iterator[Case]:
    for name, clause, nested, description in INVALID:
        cid = f"bnb_4bit/read/invalid/{name}"
        shape, blocksize, dtype = BASE["shape"], BASE["blocksize"], BASE["dtype"]
        inputs, params = _layer(cid, "nf4", blocksize, shape, nested)
        params["dtype"] = dtype
        _spoiled(name, inputs, params)
        feats = _features("nf4", blocksize, shape, nested, dtype) + ("input:nonconforming",)
        if name in NONFINITE:
            feats += ("absmax:nonfinite",)
        yield Case(id=cid, format="bnb_4bit", ops=("dequantize",), inputs=inputs, params=params,
                   clauses=(clause, "KC-4.2"), features=feats, expect="reject",
                   aux={"nominal_shape": np.array(shape, np.int64)},
                   description=f"non-conforming: {description} ({clause})")


# -- the validating reference decoder (KC-4.2) -----------------------------------------------------------------

def _check_array(value: Any, name: str, dtype: str, shape: tuple[int, ...], code: str) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype != np.dtype(dtype) or a.shape != shape:
        raise fail(code, name, f"{dtype} {list(shape)}", f"{a.dtype} {list(a.shape)}")
    return a


def _finite(a: np.ndarray, name: str) -> None:
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise fail("bnb.absmax.nonfinite", name, "finite values (BNB-3.4)", f"{a.reshape(-1)[bad[0]]} at [{bad[0]}]")


def _checked_params(quant_type: Any, blocksize: Any, shape: Any, dtype: Any) -> tuple[int, int]:
    """BNB-5.2, BNB-3.3, BNB-5.1: the scalar keywords in their domains; (N, K)."""
    if quant_type not in codec.TABLES:
        raise fail("bnb.quant_type", "quant_type", "nf4 or fp4", quant_type)
    if isinstance(blocksize, bool) or blocksize not in codec.BLOCKSIZES:
        raise fail("bnb.blocksize", "blocksize", "one of " + ", ".join(map(str, codec.BLOCKSIZES)), blocksize)
    if dtype not in codec.DTYPES:
        raise fail("bnb.dtype", "dtype", "one of " + ", ".join(codec.DTYPES), dtype)
    dims = list(shape) if isinstance(shape, (list, tuple)) else None
    if not dims or len(dims) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise fail("bnb.state.invalid", "shape", "[out_features, in_features], positive integers", shape)
    return dims[0], dims[1]


def _checked_scales(absmax: Any, nb: int, nested_absmax: Any, nested_quant_map: Any,
                    nested_offset: Any) -> np.ndarray:
    """BNB-3.4 and BNB-4: the float32 block scales of a plain or double-quantized absmax."""
    nested = (nested_absmax, nested_quant_map, nested_offset)
    a = np.asarray(absmax)
    if a.shape != (nb,):
        raise fail("bnb.absmax.length", "absmax", f"{nb} entries, one per block", list(a.shape))
    if all(v is None for v in nested):
        if a.dtype == np.uint8:
            raise fail("bnb.nested.missing", "absmax", "float32, or uint8 codes with nested_absmax, nested_quant_map "
                       "and nested_offset", "uint8 without them")
        a = _check_array(a, "absmax", "float32", (nb,), "bnb.absmax.length")
        _finite(a, "absmax")
        return a
    if any(v is None for v in nested):
        names = ("nested_absmax", "nested_quant_map", "nested_offset")
        raise fail("bnb.nested.missing", "nested_absmax", "nested_absmax, nested_quant_map and nested_offset together",
                   ", ".join(k for k, v in zip(names, nested) if v is None) + " missing")
    _check_array(a, "absmax", "uint8", (nb,), "bnb.nested.invalid")
    nested_absmax = _check_array(nested_absmax, "nested_absmax", "float32", (-(-nb // codec.NESTED_BLOCKSIZE),),
                                 "bnb.nested.invalid")
    nested_map = _check_array(nested_quant_map, "nested_quant_map", "float32", (256,), "bnb.nested.invalid")
    offset = _check_array(nested_offset, "nested_offset", "float32", (1,), "bnb.nested.invalid")
    for arr, name in ((nested_absmax, "nested_absmax"), (nested_map, "nested_quant_map"), (offset, "nested_offset")):
        _finite(arr.reshape(-1), name)
    return codec.scales(a, nested_absmax, nested_map, float(offset[0]))


def checked(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, nested_absmax=None,
            nested_quant_map=None, nested_offset=None) -> tuple[int, int, np.ndarray]:
    """Every MUST-reject rule of BNB-1 to BNB-5 that the KC-1.10 call's inputs carry raises its QFormatsError;
    ``(N, K, the float32 block scales)`` otherwise. The reference kernels' ``prepare`` runs exactly these."""
    n_out, k = _checked_params(quant_type, blocksize, shape, dtype)
    n = n_out * k
    _check_array(packed, "packed", "uint8", (-(-n // 2), 1), "bnb.shape")
    q_map = np.asarray(quant_map)
    if q_map.shape != (16,) or not np.array_equal(q_map.astype(np.float32), codec.TABLES[quant_type]):
        raise fail("bnb.quant_map.mismatch", "quant_map", f"the {quant_type} table (BNB-2.4)",
                   np.array2string(q_map.reshape(-1)[:4], precision=4) + " ...")
    return n_out, k, _checked_scales(absmax, -(-n // blocksize), nested_absmax, nested_quant_map, nested_offset)


def dequantize_checked(*, packed, quant_type, blocksize, dtype, **call: Any) -> np.ndarray:
    """The KC-1.10 call, validated (:func:`checked`); then BNB-3.2 with the table of ``quant_type`` (BNB-2.4)."""
    n_out, k, scales = checked(packed=packed, quant_type=quant_type, blocksize=blocksize, dtype=dtype, **call)
    return codec.dequantize_4bit(np.asarray(packed), scales, quant_type=quant_type, blocksize=blocksize,
                                 shape=(n_out, k), dtype=dtype)


def _evaluated(inputs: dict, params: dict) -> np.ndarray:
    """BNB-3.2 / BNB-4.3 evaluated as written on whatever the inputs hold (NaN and inf included)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return codec.dequantize_4bit(inputs["packed"], _scales_of(inputs, params), quant_type=params["quant_type"],
                                     blocksize=params["blocksize"], shape=tuple(params["shape"]), dtype=params["dtype"])


def reference(case: Case) -> np.ndarray:
    """The reference values of a conforming case (the validating decoder); of a non-conforming one, the values
    of the conforming layer it was spoiled from (what it meant)."""
    if case.expect == "reject":
        name = case.id.rsplit("/", 1)[-1]
        nested = dict((row[0], row[2]) for row in INVALID)[name]
        inputs, params = _layer(case.id, "nf4", BASE["blocksize"], BASE["shape"], nested)
        return dequantize_checked(**inputs, **params, dtype=BASE["dtype"])
    return dequantize_checked(**case.inputs, **case.params)


# -- named readings and known misreadings (spec/kernels.md KC-4.5, KC-5) -------------------------------------

def readings(case: Case) -> tuple[str, str, dict[str, tuple[str, np.ndarray]]] | None:
    """Non-finite absmax or nested absmax (BNB-3.4): a decoder may evaluate BNB-3.2 on them, as bitsandbytes
    does. A quant_map that disagrees with quant_type (BNB-2.4): the decode by quant_type's table, as
    bitsandbytes' dequantize_4bit, which never reads quant_map."""
    name = case.id.rsplit("/", 1)[-1]
    if name in NONFINITE:
        return "nonfinite_scales", "BNB-3.4", {"evaluation": (
            "BNB-3.2 evaluated as written, NaN and inf times the code included (bitsandbytes' dequantize_4bit)",
            _evaluated(dict(case.inputs), dict(case.params)))}
    if name == "quant_map_mismatch":
        return "quant_map_mismatch", "BNB-2.4", {"quant_type": (
            "decoded by the table of quant_type, the stored quant_map ignored (bitsandbytes' dequantize_4bit)",
            _evaluated(dict(case.inputs), dict(case.params)))}
    return None


def _scales_of(inputs: dict, params: dict) -> np.ndarray:
    """The float32 block scales of a conforming call (BNB-3.4, BNB-4.3)."""
    if "nested_absmax" in inputs:
        return codec.scales(inputs["absmax"], inputs["nested_absmax"], inputs["nested_quant_map"],
                            float(inputs["nested_offset"][0]))
    return np.asarray(inputs["absmax"], np.float32)


def _decode(case: Case, *, packed: np.ndarray | None = None, table: np.ndarray | None = None,
            scales: np.ndarray | None = None, per_row: bool = False) -> np.ndarray:
    """BNB-3.2 with one part read wrongly: the bytes, the code table, the block scales, or blocks counted per
    row (block ``r * ceil(K / B) + k // B``, clamped to the last block)."""
    p = dict(case.params)
    (n_out, k), bs = p["shape"], p["blocksize"]
    codes = codec.unpack_codes(case.inputs["packed"] if packed is None else packed, n_out * k)
    s = _scales_of(dict(case.inputs), p) if scales is None else scales
    if per_row:
        block = (np.arange(n_out)[:, None] * -(-k // bs) + np.arange(k)[None, :] // bs).reshape(-1)
    else:
        block = np.arange(n_out * k) // bs
    t = codec.TABLES[p["quant_type"]] if table is None else np.asarray(table, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        w = t[codes] * np.take(s, block, mode="clip")
    return codec.to_dtype(w, p["dtype"]).reshape(n_out, k)


def misreadings(case: Case) -> Iterator[tuple]:
    """(clause, what the subject did, W[, name]) of the known wrong bitsandbytes 4-bit decodes (KC-5). The stored
    quant_map trusted over quant_type differs here only in FP4's zero sign, which KC-2.4 names already."""
    if case.expect != "values":
        return
    from conformance.diagnoses import NAMES, reverse_fields
    from qformats.elements import E2M1, table

    p, i = dict(case.params), dict(case.inputs)
    yield "KC-5.1", f"{NAMES['KC-5.1']}: element 2i read from the low nibble, 2i + 1 from the high one (BNB-1.2)", \
        _decode(case, packed=reverse_fields(i["packed"], 4, 8)), NAMES["KC-5.1"]
    if p["quant_type"] == "fp4":
        yield "BNB-2.2", "FP4 codes read as the OCP E2M1 element (MXFP4's, NVFP4's), not bitsandbytes' FP4", \
            _decode(case, table=table(E2M1))
    yield "BNB-3.2", "blocks counted per row, not over the flattened tensor", _decode(case, per_row=True)
    if "nested_absmax" in i:
        no_offset = codec.scales(i["absmax"], i["nested_absmax"], i["nested_quant_map"], 0.0)
        yield "BNB-4.3", "the nested offset dropped from the double-quantized absmax", _decode(case, scales=no_offset)
