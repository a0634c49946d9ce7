"""bitsandbytes modules in a checkpoint (spec/bnb.md): a 4-bit Linear keeps its state under ``<module>.weight.``
(absmax, quant_map, nested_absmax, nested_quant_map, quant_state.bitsandbytes__nf4|fp4), an LLM.int8 Linear
beside its weight (SCB, weight_format). Each module is checked against its own quant_state (BNB-1 .. BNB-6),
the config against BNB-7, and decoded as bitsandbytes decodes it."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from ...errors import QFormatsError
from ...findings import Finding, finding, plural
from ...layers import LayerGroup, Progress, decode_stats, tick
from ...stats import Moments
from . import codec

__all__ = ["ANCHOR", "SUFFIXES", "split_name", "check", "decode", "STATES"]

STATES = {"weight.quant_state.bitsandbytes__nf4": "nf4", "weight.quant_state.bitsandbytes__fp4": "fp4"}
ANCHOR = (*STATES, "SCB")          # any one of these claims a module (validate.group_layers)
STATE_TENSORS = ("weight.absmax", "weight.quant_map", "weight.nested_absmax", "weight.nested_quant_map")
SUFFIXES = ("weight", "bias", *STATE_TENSORS, *STATES, "SCB", "weight_format")
# BNB-1.1: the names Linear4bit._save_to_state_dict writes under ``<module>.weight.``
_UNDER_WEIGHT = re.compile(r"^(?P<module>.+)\.(?P<suffix>weight\.(?:absmax|quant_map|nested_absmax|nested_quant_map"
                           r"|quant_state\.[^.]+))$")
WEIGHT_FORMATS = {0: "row", 1: "col32", 2: "col_turing", 3: "col_ampere"}     # BNB-6.3
STORAGE = {"U8": 1, "I8": 1, "F16": 2, "BF16": 2, "F32": 4}                   # BNB-1.4
NESTED_KEYS = ("nested_blocksize", "nested_dtype", "nested_offset")


def split_name(full: str) -> tuple[str, str] | None:
    """``m.weight.absmax`` -> (``m``, ``weight.absmax``): the module a bitsandbytes state tensor belongs to (BNB-1.1)."""
    m = _UNDER_WEIGHT.match(full)
    return (m["module"], m["suffix"]) if m else None


class _Bad(Exception):
    """A module check that stops the module: carries its finding."""

    def __init__(self, f: Finding):
        super().__init__(f.message)
        self.finding = f


def _bad(code: str, tensor: str, message: str) -> _Bad:
    return _Bad(finding(code, "error", message, tensor=tensor))


# -- the quant_state (BNB-5) -------------------------------------------------------------------------------------

def _state_name(ckpt: Any, group: LayerGroup) -> str:
    """The module's one quant_state suffix (BNB-5.1); every ``<module>.weight.quant_state.*`` tensor counts."""
    prefix = f"{group.name}.weight.quant_state."
    found = sorted(n for n in ckpt.tensor_names() if n.startswith(prefix))
    if len(found) != 1:
        raise _bad("bnb.state.duplicate", f"{group.name}.weight.quant_state", f"'{group.name}' holds "
                   f"{len(found)} quant_state entries ({', '.join(found)}); bitsandbytes' QuantState.from_dict "
                   "requires exactly one ending in bitsandbytes__nf4 or bitsandbytes__fp4 (BNB-5.1)")
    return found[0][len(group.name) + 1:]


def _parse_state(raw: np.ndarray, tensor: str) -> dict[str, Any]:
    try:
        state = json.loads(bytes(np.ascontiguousarray(raw).view(np.uint8).reshape(-1)).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise _bad("bnb.state.invalid", tensor, f"'{tensor}' is not UTF-8 JSON ({err.__class__.__name__}: "
                   f"{str(err)[:80]}) (BNB-5.1)") from None
    if not isinstance(state, dict):
        raise _bad("bnb.state.invalid", tensor, f"'{tensor}' holds JSON {type(state).__name__}, not an object (BNB-5.1)")
    missing = [k for k in ("quant_type", "blocksize", "dtype", "shape") if k not in state]
    if missing:
        raise _bad("bnb.state.invalid", tensor, f"'{tensor}' lacks {', '.join(missing)} (BNB-5.1)")
    return state


def _state_fields(state: dict[str, Any], tensor: str, named: str) -> tuple[str, int, str, tuple[int, ...]]:
    """quant_type, blocksize, dtype and shape, each in its domain (BNB-5.2, BNB-3.3)."""
    qt = state["quant_type"]
    if qt not in codec.TABLES or qt != named:
        raise _bad("bnb.quant_type", tensor, f"'{tensor}' says quant_type {qt!r}; it must be 'nf4' or 'fp4' and the "
                   f"one its name ends in ({named!r}) (BNB-5.2)")
    bs = state["blocksize"]
    if isinstance(bs, bool) or bs not in codec.BLOCKSIZES:
        raise _bad("bnb.blocksize", tensor, f"'{tensor}' says blocksize {bs!r}; bitsandbytes accepts "
                   f"{', '.join(map(str, codec.BLOCKSIZES))} (BNB-3.3)")
    if state["dtype"] not in codec.DTYPES:
        raise _bad("bnb.dtype", tensor, f"'{tensor}' says dtype {state['dtype']!r}; it must be one of "
                   f"{', '.join(codec.DTYPES)} (BNB-5.2)")
    shape = state["shape"]
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(d, int) and not isinstance(d, bool)
                                                                and 0 < d <= 1 << 31 for d in shape)):
        raise _bad("bnb.state.invalid", tensor, f"'{tensor}' says shape {shape!r}; a Linear's shape is "
                   "[out_features, in_features] of positive integers (BNB-5.1)")
    return qt, bs, state["dtype"], (shape[0], shape[1])


# -- 4-bit modules (BNB-1 .. BNB-4) ------------------------------------------------------------------------------

def _packed(ckpt: Any, group: LayerGroup, n: int, shape: tuple[int, int], findings: list[Finding]) -> None:
    """BNB-1.3/1.4: ceil(n/2) bytes as a (bytes / itemsize, 1) tensor; another dtype than uint8 is a warning."""
    tensor = f"{group.name}.weight"
    if "weight" not in group.tensors:
        raise _bad("bnb.shape", tensor, f"'{tensor}' is missing: the quant_state's shape {list(shape)} needs "
                   f"{-(-n // 2)} packed bytes (BNB-1.1, BNB-1.3)")
    info = ckpt.tensor_info(tensor)
    size = STORAGE.get(info.dtype)
    need = -(-n // 2)
    if size is None or need % size or tuple(info.shape) != (need // size, 1):
        want = f"({need // size}, 1) {info.dtype}" if size and not need % size else f"({need}, 1) U8"
        raise _bad("bnb.shape", tensor, f"'{tensor}' is {list(info.shape)} {info.dtype}; the quant_state's shape "
                   f"{list(shape)} ({n} codes) needs {need} packed bytes, {want} (BNB-1.3)")
    if info.dtype != "U8":
        findings.append(finding("bnb.storage", "warning", f"'{tensor}' stores its codes as {info.dtype} "
                                "(bnb_4bit_quant_storage); bitsandbytes reads the bytes, transformers >= 4.48 refuses "
                                "a pre-quantized weight that is not uint8 (BNB-1.4)", tensor=tensor))


def _nonfinite(values: np.ndarray, tensor: str, what: str) -> None:
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise _bad("bnb.absmax.nonfinite", tensor, f"'{tensor}' holds {values[bad[0]]} at [{bad[0]}] ({bad.size} "
                   f"non-finite); bitsandbytes decodes {what} to NaN or infinity without an error (BNB-3.4)")


def _tensor(ckpt: Any, group: LayerGroup, suffix: str, dtype: str, shape: tuple[int, ...], code: str) -> np.ndarray:
    name = f"{group.name}.{suffix}"
    if suffix not in group.tensors:
        raise _bad(code, name, f"'{name}' is missing (BNB-1.1)")
    info = ckpt.tensor_info(name)
    if info.dtype != dtype or tuple(info.shape) != shape:
        raise _bad(code, name, f"'{name}' is {list(info.shape)} {info.dtype}; it must be {list(shape)} {dtype}")
    return np.asarray(ckpt.tensor(name))


def _absmax(ckpt: Any, group: LayerGroup, state: dict[str, Any], blocks: int) -> np.ndarray:
    """BNB-3.4 and BNB-4: the float32 block scales, from absmax or the double-quantized codes."""
    name = f"{group.name}.weight.absmax"
    if "weight.absmax" not in group.tensors:
        raise _bad("bnb.absmax.length", name, f"'{name}' is missing; {blocks} blocks need one absmax each (BNB-3.4)")
    info = ckpt.tensor_info(name)
    if tuple(info.shape) != (blocks,):
        raise _bad("bnb.absmax.length", name, f"'{name}' has shape {list(info.shape)}; {blocks} blocks need "
                   f"[{blocks}] (bitsandbytes reads past the end of a shorter absmax) (BNB-3.4)")
    nested = [k for k in NESTED_KEYS if k in state] + [s for s in STATE_TENSORS[2:] if s in group.tensors]
    if info.dtype == "F32" and not nested:
        absmax = np.asarray(ckpt.tensor(name))
        _nonfinite(absmax, name, "its block")
        return absmax
    if info.dtype != "U8":
        raise _bad("bnb.nested.invalid", name, f"'{name}' is {info.dtype}; absmax is float32, or uint8 codes with "
                   "double quantization (BNB-3.4, BNB-4.1)")
    want = [k for k in NESTED_KEYS if k not in state] + [s for s in STATE_TENSORS[2:] if s not in group.tensors]
    if want:
        raise _bad("bnb.nested.missing", name, f"'{name}' holds uint8 codes (double quantization) but the module has "
                   f"no {', '.join(want)}; bitsandbytes then uses the codes themselves as scales (BNB-4.4)")
    return _nested_scales(ckpt, group, state, np.asarray(ckpt.tensor(name)))


def _nested_scales(ckpt: Any, group: LayerGroup, state: dict[str, Any], codes: np.ndarray) -> np.ndarray:
    tensor = f"{group.name}.weight.quant_state"
    if state["nested_blocksize"] != codec.NESTED_BLOCKSIZE or state["nested_dtype"] != "float32":
        raise _bad("bnb.nested.invalid", tensor, f"nested_blocksize {state['nested_blocksize']!r}, nested_dtype "
                   f"{state['nested_dtype']!r}; double quantization is 256 and float32 (BNB-4.1)")
    offset = state["nested_offset"]
    if isinstance(offset, bool) or not isinstance(offset, (int, float)) or not math.isfinite(offset):
        raise _bad("bnb.absmax.nonfinite", tensor, f"'{tensor}' says nested_offset {offset!r}; it must be a finite "
                   "number (BNB-4.1)")
    nested = _tensor(ckpt, group, "weight.nested_absmax", "F32", (-(-codes.size // codec.NESTED_BLOCKSIZE),),
                     "bnb.nested.invalid")
    _nonfinite(nested, f"{group.name}.weight.nested_absmax", "every block of its 256")
    table = _tensor(ckpt, group, "weight.nested_quant_map", "F32", (256,), "bnb.nested.invalid")
    _nonfinite(table, f"{group.name}.weight.nested_quant_map", "the blocks of that code")
    return codec.scales(codes, nested, table, offset)


def _quant_map(ckpt: Any, group: LayerGroup, qt: str) -> None:
    """BNB-2.4: the stored table is the quant_type's (readers decode by quant_type and never read it)."""
    stored = _tensor(ckpt, group, "weight.quant_map", "F32", (16,), "bnb.quant_map.mismatch")
    if not np.array_equal(stored, codec.TABLES[qt]):
        other = next((k for k, t in codec.TABLES.items() if np.array_equal(stored, t)), None)
        said = f"the {other} table" if other else f"not the {qt} table (first difference at code " \
            f"{int(np.flatnonzero(stored != codec.TABLES[qt])[0])})"
        raise _bad("bnb.quant_map.mismatch", f"{group.name}.weight.quant_map", f"'{group.name}.weight.quant_map' is "
                   f"{said} while quant_type is {qt!r}; bitsandbytes decodes by quant_type and ignores the stored "
                   "table, readers that use the table decode other weights (BNB-2.4)")


def _four_bit(ckpt: Any, group: LayerGroup, findings: list[Finding]) -> dict[str, Any]:
    """Every 4-bit check of one module, in reading order; returns what decoding needs."""
    suffix = _state_name(ckpt, group)
    tensor = f"{group.name}.{suffix}"
    state = _parse_state(ckpt.tensor(tensor), tensor)
    named = suffix.rpartition("bitsandbytes__")[2]
    qt, bs, dtype, shape = _state_fields(state, tensor, named)
    n = shape[0] * shape[1]
    _packed(ckpt, group, n, shape, findings)
    scales = _absmax(ckpt, group, state, -(-n // bs))
    _quant_map(ckpt, group, qt)
    return {"quant_type": qt, "blocksize": bs, "dtype": dtype, "shape": shape, "scales": scales,
            "nested": "nested_offset" in state}


# -- LLM.int8 modules (BNB-6) ------------------------------------------------------------------------------------

def _int8(ckpt: Any, group: LayerGroup) -> dict[str, Any]:
    weight = f"{group.name}.weight"
    info = ckpt.tensor_info(weight) if "weight" in group.tensors else None
    if info is None or info.dtype != "I8" or len(info.shape) != 2:
        got = "missing" if info is None else f"{list(info.shape)} {info.dtype}"
        raise _bad("bnb.int8.invalid", weight, f"'{weight}' is {got}; an LLM.int8 weight is (out, in) int8 (BNB-6.1)")
    scb = _tensor(ckpt, group, "SCB", "F32", (info.shape[0],), "bnb.int8.invalid")
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~(np.isfinite(scb) & (scb >= 0)))
    if bad.size:
        raise _bad("bnb.int8.invalid", f"{group.name}.SCB", f"'{group.name}.SCB' holds {scb[bad[0]]} at [{bad[0]}]; "
                   "row scales must be finite and not negative (BNB-6.1)")
    if "weight_format" in group.tensors:
        fmt = np.asarray(ckpt.tensor(group.tensors["weight_format"])).reshape(-1)
        value = int(fmt[0]) if fmt.size == 1 else fmt.tolist()
        if value != 0:
            name = WEIGHT_FORMATS.get(value, "no layout") if isinstance(value, int) else "not one value"
            raise _bad("bnb.int8.weight_format", f"{group.name}.weight_format", f"'{group.name}.weight_format' is "
                       f"{value} ({name}); only 0 (row) is a layout readers decode: transformers never reads it and "
                       "decodes the bytes as row-major, bitsandbytes' load hook refuses it (BNB-6.3)")
    return {"weight": np.asarray(ckpt.tensor(weight)), "scb": scb, "shape": tuple(info.shape)}


# -- the config (BNB-7) ------------------------------------------------------------------------------------------

def _config(ckpt: Any) -> tuple[dict[str, Any], list[Finding]]:
    config = ckpt.config if isinstance(ckpt.config, dict) else {}
    if str(config.get("quant_method", "")).lower() != "bitsandbytes":
        return {}, []
    findings = []
    qt = config.get("bnb_4bit_quant_type", "fp4")
    if not isinstance(qt, str) or qt not in codec.TABLES:
        findings.append(finding("bnb.config.invalid", "error", f"bnb_4bit_quant_type {qt!r} must be 'nf4' or 'fp4' "
                                "(BNB-7.1)", tensor="bnb_4bit_quant_type"))
    skip = config.get("llm_int8_skip_modules")
    if skip is not None and not (isinstance(skip, list) and all(isinstance(s, str) for s in skip)):
        findings.append(finding("bnb.config.invalid", "error", f"llm_int8_skip_modules {skip!r} must be a list of "
                                "module names or null (BNB-7.1)", tensor="llm_int8_skip_modules"))
    return config, findings


def _skipped(ckpt: Any, config: dict[str, Any], claimed: set[str]) -> list[Finding]:
    """BNB-7.2: the modules llm_int8_skip_modules leaves unquantized, named (their weights are plain tensors)."""
    skip = config.get("llm_int8_skip_modules")
    if not isinstance(skip, list) or not skip:
        return []
    modules = sorted({n[:-len(".weight")] for n in ckpt.tensor_names() if n.endswith(".weight")} - claimed)
    hit = [m for m in modules if any(isinstance(k, str) and f".{k}." in f".{m}." for k in skip)]
    if not hit:
        return []
    shown = ", ".join(f"'{m}'" for m in hit[:4]) + (f" and {len(hit) - 4} more" if len(hit) > 4 else "")
    return [finding("bnb.module.skipped", "info", f"{plural(len(hit), 'module')} left unquantized by "
                    f"llm_int8_skip_modules {skip}: {shown}; their weights are plain tensors (BNB-7.2)",
                    tensor=hit[0], count=len(hit))]


# -- check and decode --------------------------------------------------------------------------------------------

def _module(ckpt: Any, group: LayerGroup, findings: list[Finding]) -> dict[str, Any]:
    if "SCB" in group.tensors:
        return {"kind": "int8", **_int8(ckpt, group)}
    return {"kind": "4bit", **_four_bit(ckpt, group, findings)}


def _row(group: LayerGroup, m: dict[str, Any]) -> dict[str, Any]:
    out, k = m["shape"]
    if m["kind"] == "int8":
        return {"layer": group.name, "format": "bnb_int8", "bits": 8, "group_size": k, "in_features": k,
                "out_features": out, "bits_per_weight": round(8 + 32 / k, 4)}
    scale_bits = 8 + 32 / codec.NESTED_BLOCKSIZE if m["nested"] else 32
    return {"layer": group.name, "format": f"bnb_{m['quant_type']}" + ("_dq" if m["nested"] else ""), "bits": 4,
            "group_size": m["blocksize"], "in_features": k, "out_features": out, "dtype": m["dtype"],
            "bits_per_weight": round(4 + scale_bits / m["blocksize"], 4)}


def check(ckpt: Any, layers: list[LayerGroup], deep: bool,
          progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Every bitsandbytes check of every module (BNB-1 .. BNB-7), one row per module for ``inspect``."""
    config, findings = _config(ckpt)
    findings += _skipped(ckpt, config, {g.name for g in layers})
    rows = []
    for i, group in enumerate(layers):
        tick(progress, i, len(layers), group.name)
        try:
            m = _module(ckpt, group, findings)
        except _Bad as bad:
            findings.append(bad.finding)
            continue
        row = _row(group, m)
        if deep:
            row.update(decode_stats(group.name, Moments.of(np.asarray(_decoded(ckpt, group, m), np.float32)),
                                    findings))
        rows.append(row)
    return rows, findings


def _decoded(ckpt: Any, group: LayerGroup, m: dict[str, Any]) -> np.ndarray:
    if m["kind"] == "int8":
        return codec.dequantize_int8(m["weight"], m["scb"], dtype=_int8_dtype(ckpt))
    packed = np.asarray(ckpt.tensor(f"{group.name}.weight"))
    return codec.dequantize_4bit(packed, m["scales"], quant_type=m["quant_type"], blocksize=m["blocksize"],
                                 shape=m["shape"], dtype=m["dtype"])


def _int8_dtype(ckpt: Any) -> str:
    """BNB-6.2: LLM.int8 states no dtype; readers cast to the model's (config.json torch_dtype / dtype)."""
    text = ckpt.model_config if isinstance(ckpt.model_config, dict) else {}
    dtype = text.get("dtype", text.get("torch_dtype"))
    return dtype if dtype in codec.DTYPES else "float32"


def decode(ckpt: Any, group: LayerGroup, **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """The module's weight ``(out, in)`` as bitsandbytes decodes it, in the dtype its quant_state (4-bit) or the
    model config (LLM.int8) names; a module that fails a check is refused with that check's error."""
    try:
        m = _module(ckpt, group, [])
    except _Bad as bad:
        f = bad.finding
        raise QFormatsError(f.code, f.message, tensor=f.tensor, constraint=f.clause, actual=None) from None
    w = _decoded(ckpt, group, m)
    if m["kind"] == "int8":
        return w, f"{w.dtype} (out, in), LLM.int8: weight * SCB * (1/127) in float32 (BNB-6.2)"
    held = " held in float32" if m["dtype"] == "bfloat16" else ""
    return w, (f"{m['dtype']}{held} (out, in), bitsandbytes {m['quant_type']} blocksize {m['blocksize']}"
               + (" double-quantized" if m["nested"] else "") + " (BNB-3.2)")
