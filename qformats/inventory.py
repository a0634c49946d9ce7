"""Every tensor of a checkpoint accounted for (spec/checkpoints.md CKPT-5.1 .. CKPT-5.3).

A format's ``layers`` module checks the modules it claims; this module does the rest of the
checkpoint: the tensors no format claims (embeddings, norms, ``lm_head``, biases, ignored modules)
get the checks their dtype allows, their shapes are held to ``config.json`` where it says, and the
report counts, by kind, how many tensors were checked out of how many, naming each one that was not
and why. Nothing here decodes a quantized module.

    kinds = tensor_kinds(ckpt, claimed, foreign)          # name -> "quantized" | "float" | "integer" | "other"
    findings, checked = check_plain(ckpt, names, deep=True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import elements
from .findings import Finding, finding, plural

__all__ = ["KINDS", "FLOAT_DTYPES", "SCAN_BYTES", "tensor_kinds", "check_plain", "config_shape_findings",
           "summary", "kind_of_dtype", "nonfinite_counts",
           "module_shape_findings", "not_read"]

KINDS = ("quantized", "float", "integer", "other")
SCAN_BYTES = 1 << 24          # a float tensor is scanned 16 MiB at a time: the masks stay that small


@dataclass(frozen=True)
class FloatBits:
    """Where a float element's non-finite codes are, on its raw bits (open_tensor hands BF16 and F8 as bits).

    IEEE-style: exponent all ones is inf (mantissa 0) or NaN. ``element``: a one-byte format of
    :mod:`qformats.elements` (FE-2 .. FE-5), classified by its decode table rather than again here.
    ``nan_codes``: F8_E5M2FNUZ, which elements does not define: its only NaN is 0x80."""

    uint: str
    exponent: int = 0
    mantissa: int = 0
    sign: int = 0
    element: str | None = None
    nan_codes: tuple[int, ...] = ()


#        safetensors dtype: raw view, exponent mask, mantissa mask, sign bit (spec CKPT-5.2's table)
FLOAT_DTYPES: dict[str, FloatBits] = {
    "F64": FloatBits("<u8", 0x7FF0_0000_0000_0000, 0x000F_FFFF_FFFF_FFFF, 1 << 63),
    "F32": FloatBits("<u4", 0x7F80_0000, 0x007F_FFFF, 1 << 31),
    "C64": FloatBits("<u4", 0x7F80_0000, 0x007F_FFFF, 1 << 31),     # two float32 per element
    "F16": FloatBits("<u2", 0x7C00, 0x03FF, 0x8000),
    "BF16": FloatBits("<u2", 0x7F80, 0x007F, 0x8000),
    "F8_E5M2": FloatBits("|u1", element=elements.E5M2),
    "F8_E4M3": FloatBits("|u1", element=elements.E4M3FN),
    "F8_E4M3FNUZ": FloatBits("|u1", element=elements.E4M3FNUZ),
    "F8_E5M2FNUZ": FloatBits("|u1", nan_codes=(0x80,)),
    "F8_E8M0": FloatBits("|u1", element=elements.E8M0),
}
INTEGER_DTYPES = frozenset({"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64"})
GGUF_FLOATS = frozenset({"F32", "F16", "BF16", "F64"})
GGUF_INTEGERS = frozenset({"I8", "I16", "I32", "I64"})


def kind_of_dtype(dtype: str) -> str:
    """``float`` for a dtype CKPT-5.2 scans, ``integer`` for integer and bool, ``other`` for the rest (F4, F6)."""
    if dtype in FLOAT_DTYPES:
        return "float"
    return "integer" if dtype in INTEGER_DTYPES else "other"


def tensor_kinds(ckpt: Any, quantized: set[str]) -> dict[str, str]:
    """Every tensor's kind: ``quantized`` when a format (or a foreign layout, QF-5.2) holds it, else by dtype."""
    if ckpt.kind == "gguf":
        return {info.name: ("float" if info.type_name in GGUF_FLOATS else
                            "integer" if info.type_name in GGUF_INTEGERS else "quantized")
                for info in ckpt.gguf.tensors}
    return {name: "quantized" if name in quantized else kind_of_dtype(ckpt.tensor_info(name).dtype)
            for name in ckpt.tensor_names()}


# -- CKPT-5.2: values of unquantized float tensors ------------------------------------------------------------

def nonfinite_counts(raw: np.ndarray, bits: FloatBits) -> tuple[int, int, int, int]:
    """(NaN, +inf, -inf, flat index of the first non-finite element or -1) of a raw-bit array, chunked."""
    flat = raw.reshape(-1).view(np.dtype(bits.uint))
    step = max(SCAN_BYTES // flat.itemsize, 1)
    nan = pinf = ninf = 0
    first = -1
    for start in range(0, flat.size, step):
        part = flat[start:start + step]
        if bits.element is not None:
            value = elements.table(bits.element)[part]
            bad = ~np.isfinite(value)
            n_nan, n_pinf, n_ninf = (int(np.count_nonzero(m)) for m in
                                     (np.isnan(value), value == np.inf, value == -np.inf))
        elif bits.nan_codes:
            bad = np.isin(part, bits.nan_codes)
            n_nan, n_pinf, n_ninf = int(np.count_nonzero(bad)), 0, 0
        else:
            special = (part & bits.exponent) == bits.exponent
            if not special.any():
                continue
            is_nan = special & ((part & bits.mantissa) != 0)
            is_inf = special & ~is_nan
            negative = (part & bits.sign) != 0
            n_nan, n_pinf, n_ninf = (int(np.count_nonzero(m)) for m in (is_nan, is_inf & ~negative, is_inf & negative))
            bad = special
        if n_nan + n_pinf + n_ninf:
            if first < 0:
                first = start + int(np.flatnonzero(bad)[0])
            nan, pinf, ninf = nan + n_nan, pinf + n_pinf, ninf + n_ninf
    return nan, pinf, ninf, first


def _element_index(flat_index: int, shape: tuple[int, ...], dtype: str) -> list[int]:
    """The ``[i, j, ...]`` of a flat raw index (C64: two raw values per element)."""
    if dtype == "C64":
        flat_index //= 2
    return [int(i) for i in np.unravel_index(flat_index, shape)] if shape else []


def check_plain(ckpt: Any, names: list[str], *, deep: bool) -> tuple[list[Finding], set[str]]:
    """CKPT-5.2: with ``deep``, every unquantized float tensor's elements are finite. Returns the findings and
    the names whose values were read; without ``deep`` none is read (the report names them)."""
    findings: list[Finding] = []
    read: set[str] = set()
    if not deep:
        return findings, read
    for name in names:
        info = ckpt.tensor_info(name)
        bits = FLOAT_DTYPES.get(info.dtype)
        if bits is None:
            continue
        raw = ckpt.tensor(name)
        nan, pinf, ninf, first = nonfinite_counts(raw, bits)
        read.add(name)
        if first >= 0:
            kinds = ", ".join(f"{n} {label}" for label, n in (("NaN", nan), ("+inf", pinf), ("-inf", ninf)) if n)
            where = _element_index(first, tuple(info.shape), info.dtype)
            findings.append(finding(
                "ckpt.float.nonfinite", "error",
                f"'{name}' ({info.dtype}, not quantized) has {plural(nan + pinf + ninf, 'non-finite element')} "
                f"({kinds}); first at {where}; every reader loads it as it is", tensor=name, count=nan + pinf + ninf))
    return findings, read


# -- CKPT-5.3: shapes against config.json --------------------------------------------------------------------

def _text_config(config: Any) -> dict[str, Any]:
    """The model config's text part: ``text_config`` of a multimodal config when the top level has no sizes."""
    if not isinstance(config, dict):
        return {}
    if "hidden_size" not in config and isinstance(config.get("text_config"), dict):
        return config["text_config"]
    return config


def _int(config: dict[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# The Hugging Face decoder names whose shape the config fixes for every architecture that uses them:
# nn.Embedding(vocab_size, hidden_size), the final and per-layer RMSNorm/LayerNorm weights (hidden_size,),
# an untied lm_head nn.Linear(hidden_size, vocab_size).
PLAIN_SHAPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"(?:^|\.)embed_tokens\.weight$"), ("vocab_size", "hidden_size")),
    (re.compile(r"^(?:model\.|language_model\.)?lm_head\.weight$"), ("vocab_size", "hidden_size")),
    (re.compile(r"^(?:model\.|language_model\.model\.|model\.language_model\.)?norm\.weight$"), ("hidden_size",)),
    (re.compile(r"\.layers\.\d+\.(?:input_layernorm|post_attention_layernorm)\.weight$"), ("hidden_size",)),
)


def expected_shape(name: str, config: Any) -> tuple[tuple[int, ...], str] | None:
    """The shape ``config.json`` fixes for an unquantized tensor, with the keys that fix it; None if it says none."""
    text = _text_config(config)
    for pattern, keys in PLAIN_SHAPES:
        if pattern.search(name):
            dims = [_int(text, key) for key in keys]
            if any(d is None for d in dims):
                return None
            return tuple(dims), ", ".join(f"{k} {d}" for k, d in zip(keys, dims))
    return None


def config_shape_findings(ckpt: Any, names: list[str]) -> list[Finding]:
    """CKPT-5.3: an unquantized tensor whose shape contradicts config.json is an error (transformers refuses
    to load it: "size mismatch"); a float tensor in another dtype than the config's is an info finding."""
    config = ckpt.model_config
    findings: list[Finding] = []
    text = _text_config(config)
    declared = text.get("torch_dtype", text.get("dtype"))
    for name in names:
        info = ckpt.tensor_info(name)
        want = expected_shape(name, config)
        if want is not None and tuple(info.shape) != want[0]:
            findings.append(finding(
                "ckpt.tensor.config_shape", "error",
                f"'{name}' has shape {list(info.shape)}, but config.json ({want[1]}) makes it {list(want[0])}; "
                "transformers refuses to load it (size mismatch)", tensor=name))
        if isinstance(declared, str) and info.dtype in TORCH_NAMES and TORCH_NAMES[info.dtype] != declared \
                and want is not None:
            findings.append(finding(
                "ckpt.tensor.config_dtype", "info",
                f"'{name}' is {info.dtype} while config.json says {declared}; readers cast it on load",
                tensor=name))
    return findings


TORCH_NAMES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}

# Architectures whose attention and MLP projections have the llama shapes (transformers' modeling files:
# q_proj (heads * head_dim, hidden), k_proj and v_proj (kv_heads * head_dim, hidden), o_proj (hidden,
# heads * head_dim), gate_proj and up_proj (intermediate, hidden), down_proj (hidden, intermediate)).
LLAMA_SHAPED = frozenset({"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral", "gemma",
                          "gemma2", "gemma3_text", "granite", "olmo2", "cohere", "starcoder2"})
PROJECTION = re.compile(r"\.layers\.\d+\.(?:self_attn\.(?P<attn>[qkvo])_proj|mlp\.(?P<mlp>gate|up|down)_proj)$")


def _projection_shape(text: dict[str, Any], attn: str | None, mlp: str | None) -> tuple[int, int] | None:
    """(out_features, in_features) a llama-shaped projection has by the config, or None where it says not."""
    hidden, heads = _int(text, "hidden_size"), _int(text, "num_attention_heads")
    if hidden is None:
        return None
    if mlp is not None:
        inter = _int(text, "intermediate_size")
        return None if inter is None else ((inter, hidden) if mlp in ("gate", "up") else (hidden, inter))
    if heads is None:
        return None
    head_dim = _int(text, "head_dim") or hidden // heads
    kv = _int(text, "num_key_value_heads") or heads
    return {"q": (heads * head_dim, hidden), "k": (kv * head_dim, hidden), "v": (kv * head_dim, hidden),
            "o": (hidden, heads * head_dim)}[attn]


def module_shape_findings(rows: list[dict[str, Any]], config: Any) -> list[Finding]:
    """CKPT-5.3 for quantized modules of llama-shaped architectures: in and out features against the config."""
    text = _text_config(config)
    types = (text.get("model_type"), config.get("model_type") if isinstance(config, dict) else None)
    if not any(isinstance(t, str) and t in LLAMA_SHAPED for t in types):      # a hostile value may be unhashable
        return []
    findings: list[Finding] = []
    for row in rows:
        m = PROJECTION.search(str(row.get("layer", "")))
        want = _projection_shape(text, m["attn"], m["mlp"]) if m else None
        got = (row.get("out_features"), row.get("in_features"))
        if want is not None and None not in got and tuple(got) != want:
            findings.append(finding(
                "ckpt.tensor.config_shape", "error",
                f"'{row['layer']}' is a {got[1]} -> {got[0]} projection (in -> out), but config.json makes it "
                f"{want[1]} -> {want[0]}; transformers refuses to load it (size mismatch)", tensor=row["layer"]))
    return findings


# -- CKPT-5.1: the count ------------------------------------------------------------------------------------------

def summary(kinds: dict[str, str], unchecked: dict[str, str]) -> dict[str, Any]:
    """The summary keys every format's report carries: totals, by kind, and each tensor not checked with why."""
    by_kind = {kind: {"total": 0, "checked": 0} for kind in KINDS}
    for name, kind in kinds.items():
        by_kind[kind]["total"] += 1
        by_kind[kind]["checked"] += name not in unchecked
    return {"tensors": len(kinds), "tensors_checked": len(kinds) - len(unchecked),
            "tensors_by_kind": {k: v for k, v in by_kind.items() if v["total"]},
            "not_checked": [{"tensor": name, "kind": kinds[name], "reason": why}
                            for name, why in sorted(unchecked.items())]}


# -- CKPT-5.1: what is not a tensor ---------------------------------------------------------------------------------

NOT_READ_SHOWN = 50          # a directory of thousands of files is summarised after this many names


def not_read(ckpt: Any) -> list[dict[str, str]]:
    """Files of a checkpoint directory that are neither weights nor the configs read, and a GGUF file's metadata
    beyond what the checks use: named in the report so that "checked" never reaches them by implication."""
    import os

    if ckpt.kind == "gguf":
        n = len(ckpt.gguf.metadata)
        return [{"what": f"{plural(n, 'metadata key')}", "reason": "read within the container's bounds (GGUF-2); "
                 "their meaning (tokenizer, chat template, hyperparameters) is not judged, but for "
                 "general.alignment and the architecture's block_count (CKPT-5.4)"}]
    directory = ckpt.path if os.path.isdir(ckpt.path) else os.path.dirname(ckpt.path) or "."
    used = {os.path.basename(f) for f in ckpt.files} | {os.path.basename(c.file) for c in ckpt.configs}
    used |= {os.path.basename(ckpt.index_file)} if ckpt.index_file else set()
    used |= {"config.json"} if ckpt.model_config is not None else set()      # read for CKPT-5.3/5.4
    if os.path.isfile(ckpt.path):
        return []                     # a single file was asked for: its directory is not the checkpoint
    try:
        names = sorted(n for n in os.listdir(directory) if n not in used and os.path.isfile(os.path.join(directory, n)))
    except OSError:
        return []
    shown = [{"what": n, "reason": "not a weight or quantization config file: not read"} for n in names[:NOT_READ_SHOWN]]
    if len(names) > NOT_READ_SHOWN:
        shown.append({"what": f"{len(names) - NOT_READ_SHOWN} more files", "reason": "not read"})
    return shown
