"""compressed-tensors pack-quantized modules in a checkpoint: recognised by ``weight_packed``, their config
group resolved from ``targets`` and ``ignore`` (CT-5), checked (CT-2, CT-3, CT-6), decoded, and judged
against the emulated real readers (CT-7)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import (LayerGroup, NotEmulated, Progress, ReaderValues, decode_stats, judge_readers,
                       load_layer, round_to, tick)
from ...stats import Moments
from . import codec
from .layout import STRATEGIES, CTConfig, ModuleScheme, Uncovered, module_schemes, parse_config, target_matches

__all__ = ["ANCHOR", "SUFFIXES", "check", "decode", "reader_rows", "READERS", "Reader", "Layer"]

ANCHOR = "weight_packed"
SUFFIXES = ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_g_idx", "bias")


def _tensors(ckpt: Any, group: LayerGroup) -> dict[str, np.ndarray]:
    """The module's tensors; bfloat16 scales (read as raw bits) widened exactly to float32."""
    t = load_layer(ckpt, group)
    if "weight_scale" in t and ckpt.tensor_info(group.tensors["weight_scale"]).dtype == "BF16":
        t["weight_scale"] = (t["weight_scale"].view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return t


def _config(ckpt: Any) -> tuple[CTConfig | None, list[Finding]]:
    if ckpt.config is None:
        return None, [finding("checkpoint.config.missing", "error", "no quantization_config: num_bits and the "
                              "symmetric flag of pack-quantized tensors are unknown (CT-5.1)")]
    try:
        return parse_config(ckpt.config, source=ckpt.configs[0].file)
    except QFormatsError as err:
        return None, [from_error(err.with_file(ckpt.configs[0].file))]


def _schemes(ckpt: Any, config: CTConfig, names: list[str]) -> tuple[dict[str, ModuleScheme | str], list[Finding]]:
    """Each module's scheme (CT-5.3) and a warning per ``ignore`` name matching nothing present (CT-5.2)."""
    schemes = module_schemes(config, names)
    present = sorted({n.rpartition(".")[0] for n in ckpt.tensor_names()})
    plain = [t for t in config.ignore if not t.startswith("re:") and not t[:1].isupper()]   # names, not classes
    hits = target_matches(plain, present, classes_match=False) if plain else []
    used = {plain[h] for h in hits if h is not None}
    findings = [finding("ctensors.config.ignore_unmatched", "warning", f"ignore entry {entry!r} names no module "
                        "of this checkpoint", tensor=entry) for entry in plain if entry not in used]
    return schemes, findings + _unmatched_targets(config, present)


def _unmatched_targets(config: CTConfig, present: list[str]) -> list[Finding]:
    """CT-5.2: a group's name or ``re:`` target matching no module present (class targets match by class)."""
    findings = []
    for group, scheme in config.config_groups.items():
        for target in scheme.targets:
            if (target.startswith("re:") or "." in target) and \
                    not any(h is not None for h in target_matches([target], present, classes_match=False)):
                findings.append(finding("ctensors.config.target_unmatched", "warning",
                                        f"config group {group!r} target {target!r} matches no module of this "
                                        "checkpoint; readers leave it unused", tensor=target))
    return findings


DENSE_SINCE = (0, 18)       # compressed-tensors 0.18.0 made pack_to_int32 dense; 0.17.1 and earlier packed per word


def written_layout(config: CTConfig) -> str | None:
    """The layout the config's compressed-tensors ``version`` writes (CT-2.6); None when it names none."""
    try:
        major, minor = (int(part) for part in str(config.version).split(".")[:2])
    except ValueError:
        return None
    return "dense" if (major, minor) >= DENSE_SINCE else "word"


def _fits(t: dict[str, np.ndarray], bits: int) -> set[str]:
    """The layouts whose widths the module's tensors have (CT-2.6); empty when the shapes say nothing."""
    try:
        n, k = (int(v) for v in np.asarray(t["weight_shape"]).reshape(2))
        fits = set(codec.fitting_layouts(k, bits, np.shape(t["weight_packed"])[-1]))
        if "weight_zero_point" in t:
            fits &= set(codec.fitting_layouts(n, bits, np.shape(t["weight_zero_point"])[0]))
    except (KeyError, ValueError, TypeError, IndexError, OverflowError):     # a float weight_shape may hold inf
        return set()
    return fits


def bytes_layout(name: str, t: dict[str, np.ndarray], bits: int, written: str | None) -> tuple[str, list[Finding]]:
    """The bit layout of one module's bytes (CT-2.6): the widths decide; where both fit, the config's version;
    with neither, dense. A per-word module is a warning: compressed-tensors 0.18 and later misread it."""
    if 32 % bits == 0:
        return "dense", []
    fits = _fits(t, bits)
    if fits != {"word"} and fits != set(codec.LAYOUTS):
        return "dense", []                              # dense, or no layout: CT-2.3's shape checks report it
    tensor = f"{name}.weight_packed"
    if fits == set(codec.LAYOUTS) and written is None:
        return "dense", [finding("ctensors.layout.ambiguous", "warning", f"'{tensor}' fits both the dense layout "
                                 "and compressed-tensors <= 0.17's per-word layout and the config names no "
                                 "version; read as dense (CT-2.6)", tensor=tensor)]
    if fits == set(codec.LAYOUTS) and written == "dense":
        return "dense", []
    words, k = np.shape(t["weight_packed"])[-1], int(np.asarray(t["weight_shape"]).reshape(2)[1])
    said = "" if written != "dense" else "; the config's version writes the dense layout, not these bytes"
    return "word", [finding("ctensors.layout.word", "warning", f"'{tensor}' holds {32 // bits} whole {bits}-bit "
                            f"values a word ({words} words for {k} values), compressed-tensors <= 0.17's "
                            f"per-word layout, decoded as such; compressed-tensors 0.18 and later read "
                            f"{codec.packed_words(k, bits)} dense words and decode other values without an error, "
                            f"and vLLM 0.33.0's Marlin, Machete, Exllama and Triton paths take no {bits}-bit layer "
                            f"(CT-2.6){said}", tensor=tensor)]


def layer_check(name: str, t: dict[str, np.ndarray], scheme: ModuleScheme, deep: bool,
                written: str | None = None) -> tuple[list[Finding], dict]:
    """Structure against the scheme (CT-2, CT-5.4), finite scales (CT-3.3), padding (CT-2.3), ``--deep``."""
    b = scheme.num_bits
    row: dict[str, Any] = {"layer": name, "format": f"ct_int{b}_{'sym' if scheme.symmetric else 'asym'}",
                           "bits": b, "group_size": scheme.group_size or -1}
    layout, findings = bytes_layout(name, t, b, written)
    try:
        checked = codec.checked_tensors(t, b, layout=layout)
    except QFormatsError as err:
        finding_ = from_error(err.within(name))
        if err.tensor == "weight_packed" and err.code == "tensor.shape" and "weight_shape" in t:
            fits = _widths_that_fit(t)
            finding_ = finding_.model_copy(update={"message": finding_.message + f"; the bytes fit num_bits {fits} "
                                                   f"(CT-6.1), the config says {b}"})
        return findings + [finding_], row
    k, n, g = checked["in"], checked["out"], checked["groups"]
    row.update({"in_features": k, "out_features": n})
    want_g = 1 if scheme.strategy == "channel" else (k // scheme.group_size if k % scheme.group_size == 0 else None)
    if want_g != g:
        findings.append(finding("ctensors.config.tensor_mismatch", "error", f"strategy {scheme.strategy} group_size "
                                f"{scheme.group_size} needs weight_scale ({n}, {want_g}), the checkpoint has ({n}, {g})",
                                tensor=f"{name}.weight_scale"))
    has_zp = "weight_zero_point" in checked
    if has_zp == scheme.symmetric:
        what = "holds weight_zero_point although symmetric" if has_zp else "has no weight_zero_point although asymmetric"
        findings.append(finding("ctensors.config.tensor_mismatch", "error", f"'{name}' {what} (CT-2.1)",
                                tensor=f"{name}.weight_zero_point"))
    dirty = codec.dirty_padding_rows(checked["weight_packed"], b, k, layout)
    if dirty:
        where = "after their last value" if layout == "dense" else "outside their values"
        findings.append(finding("ctensors.padding.nonzero", "warning", f"{dirty} rows of '{name}.weight_packed' have "
                                f"non-zero bits {where} (readers ignore them)",
                                tensor=f"{name}.weight_packed", count=dirty))
    row["bits_per_weight"] = round((k * n * b + g * n * (16 + (b if has_zp else 0))) / (k * n), 4)
    if deep and not any(f.severity == "error" for f in findings):
        row.update(decode_stats(name, Moments.of(codec.dequantize(t, num_bits=b, layout=layout)), findings))
    return findings, row


def _widths_that_fit(t: dict[str, np.ndarray]) -> list[int]:
    try:
        k = int(np.asarray(t["weight_shape"]).reshape(-1)[1])
    except (IndexError, ValueError):
        return []
    return [b for b in codec.BITS if codec.fitting_layouts(k, b, t["weight_packed"].shape[-1])]


def check(ckpt: Any, layers: list[LayerGroup], deep: bool,
          progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Every pack-quantized check of every module (CT-2 .. CT-6), one row per module for ``inspect``."""
    config, findings = _config(ckpt)
    if config is None:
        return [], findings
    try:
        schemes, more = _schemes(ckpt, config, [g.name for g in layers])
    except QFormatsError as err:
        return [], findings + [from_error(err.with_file(ckpt.configs[0].file))]
    findings += more
    rows = []
    for i, group in enumerate(layers):
        tick(progress, i, len(layers), group.name)
        scheme = schemes[group.name]
        if isinstance(scheme, Uncovered):
            findings.append(finding("ctensors.scheme.uncovered", "warning", f"'{group.name}' holds weight_packed but "
                                    f"{scheme}; not checked", tensor=group.name))
            continue
        if isinstance(scheme, str):
            findings.append(finding("ctensors.config.tensor_mismatch", "error", f"'{group.name}' holds weight_packed "
                                    f"but {scheme}", tensor=group.name))
            continue
        more, row = layer_check(group.name, _tensors(ckpt, group), scheme, deep, written_layout(config))
        findings += more
        rows.append(row)
    return rows, findings


def _scheme(ckpt: Any, group: LayerGroup) -> tuple[ModuleScheme, str | None]:
    """The module's scheme and the layout its config's version writes."""
    config, findings = _config(ckpt)
    if config is None:
        raise fail(findings[0].code, "quantization_config", "a valid compressed-tensors config", findings[0].message)
    scheme = module_schemes(config, [group.name])[group.name]
    if isinstance(scheme, str):
        raise fail("ctensors.config.tensor_mismatch", group.name, "a module a pack-quantized config group targets", scheme)
    return scheme, written_layout(config)


def decode(ckpt: Any, group: LayerGroup, **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """float32 (out, in), ``s * (q - zp)`` (CT-3.1) with the module's config group, in its bytes' layout."""
    scheme, written = _scheme(ckpt, group)
    t = _tensors(ckpt, group)
    layout, _ = bytes_layout(group.name, t, scheme.num_bits, written)
    w = codec.dequantize(t, num_bits=scheme.num_bits, layout=layout)
    kind = "" if layout == "dense" else ", per-word layout (CT-2.6)"
    return w, f"float32 (out, in), pack-quantized int{scheme.num_bits} {'sym' if scheme.symmetric else 'asym'}{kind}"


# -- emulated real readers (CT-7) -----------------------------------------------------------------------------
# vLLM 0.33.0 (PyPI sdist vllm-0.33.0.tar.gz, sha256 f4c33c25...c74112, commit 4ba787ec9), read [source]:
# CompressedTensorsConfig refuses actorder "group"/"dynamic"; CompressedTensorsWNA16 takes 2..8 bits (uintNbM
# symmetric, uintN with zero points) and choose_mp_linear_kernel (kernels/linear/__init__.py) tries, on CUDA,
# Machete (SM 9.0 only), Marlin (SM 7.5+), Conch and Humming (optional packages), Exllama, Triton W4A16.

VLLM = "vLLM 0.33.0"
WNA16_BITS = (2, 3, 4, 5, 6, 7, 8)


@dataclass(frozen=True)
class Layer:
    """What a reader path is told about one layer: sizes, the config's scheme and the activation dtype
    (vLLM's params dtype: the scales' dtype for 16-bit scales)."""

    k: int
    n: int
    num_bits: int
    symmetric: bool
    group_size: int                 # -1: the channel strategy
    actorder: str | None = None
    act: str = "bfloat16"

    @property
    def quant_type(self) -> str:
        """vLLM's ScalarType name: uintN with zero points, uintN b 2^(N-1) symmetric (WNA16_*_TYPES_MAP)."""
        return f"uint{self.num_bits}" if not self.symmetric else f"uint{self.num_bits}b{1 << (self.num_bits - 1)}"


def _wna16_refusal(layer: Layer) -> str | None:
    """CompressedTensorsConfig._quantization_scheme_map and CompressedTensorsWNA16.__init__ (every vLLM path)."""
    if layer.actorder in ("group", "dynamic"):
        return (f"Compressed-tensors group/dynamic activation ordering (actorder={layer.actorder!r}) is no longer "
                "supported.")
    if layer.num_bits not in WNA16_BITS:
        return f"Unsupported num_bits = {layer.num_bits}. Supported num_bits = {list(WNA16_BITS)}"
    return None


def _marlin_refusal(layer: Layer) -> str | None:
    # MarlinLinearKernel.can_implement with query_marlin_supported_quant_types (integer types listed)
    types = ["uint4b8", "uint8b128"] if layer.symmetric else ["uint4"]
    if layer.quant_type not in types:
        return f"Quant type ({layer.quant_type}) not supported by Marlin, supported types are: {types}"
    if layer.group_size not in (-1, 32, 64, 128):
        return (f"Group size ({layer.group_size}) not supported by Marlin, supported group sizes are: "
                "[-1, 32, 64, 128]")
    return None


def _machete_refusal(layer: Layer) -> str | None:
    # MacheteLinearKernel.can_implement, machete_utils
    types = ["uint4b8", "uint8b128"] if layer.symmetric else ["uint4", "uint8"]
    if layer.quant_type not in types:
        return f"Quant type ({layer.quant_type}) not supported by Machete, supported types are: {types}"
    if layer.group_size not in (-1, 64, 128):
        return (f"Group size ({layer.group_size}) not supported by Machete, supported group sizes are: "
                "[-1, 64, 128]")
    if layer.k % 64:
        return f"Input features size must be divisible by 64 (in_features = {layer.k})"
    if layer.n % 128:
        return f"Output features size must be divisible by 128 (out_features = {layer.n})"
    return None


def _exllama_refusal(layer: Layer) -> str | None:
    # ExllamaLinearKernel.can_implement
    if layer.n % (32 // layer.num_bits):
        return ("Output features must be a multiple of the pack factor (32 / num_bits) so that we can correctly "
                f"pack the zero points (out_features = {layer.n})")
    if layer.act != "float16":
        return f"Exllama only supports float16 activations (activations {layer.act})"
    if layer.quant_type not in ("uint4b8", "uint8b128"):
        return (f"Quant type ({layer.quant_type}) not supported by Exllama, supported types are: "
                "['uint4b8', 'uint8b128']")
    if layer.group_size <= 0:
        return (f"Group size ({layer.group_size}) must be positive, Exllama does not support channelwise "
                "quantization")
    return None


def _triton_refusal(layer: Layer) -> str | None:
    # TritonW4A16LinearKernel.can_implement
    if layer.quant_type not in ("uint4b8", "uint4"):
        return f"Quant type {layer.quant_type} not supported; supported: ['uint4b8', 'uint4']"
    if layer.n % 8:
        return f"Output features ({layer.n}) must be divisible by 8 (8 int4 values packed per int32)"
    if layer.group_size not in (-1, 32, 64, 128, 256) and layer.group_size != layer.k:
        return f"Group size {layer.group_size} not supported; supported: [-1, 32, 64, 128, 256] or full K ({layer.k})"
    return None


def _round_once(diff: np.ndarray, s: np.ndarray, act: str) -> ReaderValues:
    return ReaderValues(round_to(diff * s, act), act)


def _marlin_values(diff: np.ndarray, s: np.ndarray, layer: Layer) -> ReaderValues:
    # marlin_template.h: q - z exact, times s in the activation dtype per group (scale / __hmul2);
    # channelwise scales multiply the float32 accumulator (scale_float), so the weights stay exact
    return ReaderValues(diff * s) if layer.group_size == -1 else _round_once(diff, s, layer.act)


def _machete_values(q: np.ndarray, z: np.ndarray | None, s: np.ndarray, layer: Layer) -> ReaderValues:
    # machete_mainloop.cuh: q * s rounded; with zero points + round(-s * z) (transform_w_zp), rounded again
    if z is None:
        return _round_once(q, s, layer.act)
    scaled, folded = round_to(q * s, layer.act), round_to(-(s * z), layer.act)
    return ReaderValues(round_to(scaled + folded, layer.act), layer.act)


def _read_codes(t: dict[str, Any], layer: Layer, layout: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The signed codes and zero points a reader unpacking ``layout`` takes from the bytes, whichever layout
    they are in (CT-2.6): words past those it needs are never read; with too few, compressed-tensors' rows
    come out short and its dequantize raises."""
    b, offset = layer.num_bits, 1 << (layer.num_bits - 1)
    unpack_rows = codec.unpacker(layout)
    streams = [("weight_packed", t["weight_packed"], layer.k)]
    if "weight_zero_point" in t:
        streams.append(("weight_zero_point", t["weight_zero_point"].T, layer.n))
    out = []
    for name, rows, count in streams:
        need = codec.packed_words(count, b, layout)
        if rows.shape[1] < need:
            raise fail("argument.invalid", name, f"{need} words a row in the {layout} layout (CT-2.6)",
                       f"{name} holds {rows.shape[1]} words a row where the {layout} layout of {count} values needs "
                       f"{need}: the unpacked rows are short and the decompressor raises RuntimeError")
        out.append(unpack_rows(rows[:, :need], b, count).astype(np.int16) - offset)
    q, z = out[0], (out[1].T if len(out) > 1 else None)
    return q.astype(np.int8), None if z is None else np.ascontiguousarray(z.astype(np.int8))


def _not_emulated(*_: Any) -> ReaderValues:
    raise NotEmulated("values not emulated: the kernel applies scales and zero points inside its dot products")


@dataclass(frozen=True)
class Reader:
    """One real reader path of pack-quantized tensors (CT-7): which layers it refuses, in the tool's own words,
    and the weights it computes."""

    description: str
    refusal: Callable[[Layer], str | None]
    reads_g_idx: bool = True
    values: str = "vllm"            # "once": (q - zp) * s rounded once to the scale dtype; "vllm": per kernel
    kernel: str = ""
    layout: str = "dense"           # the bit layout the path unpacks, whatever the bytes' (CT-2.6)

    def why_not(self, layer: Layer) -> str | None:
        """Why this path cannot read the layer, as the tool says it; None when it can."""
        if self.values == "once":
            return None if layer.num_bits in codec.BITS else f"num_bits {layer.num_bits}"
        return _wna16_refusal(layer) or self.refusal(layer)

    def decode(self, t: dict[str, Any], layer: Layer) -> ReaderValues:
        """The path's weights ``(out, in)`` for checked tensors, or ``argument.invalid`` with its refusal."""
        reason = self.why_not(layer)
        if reason is not None:
            raise fail("argument.invalid", "layer", "a layer this reader path implements (CT-7)", reason)
        q, z = _read_codes(t, layer, self.layout)
        cols = (t["weight_g_idx"].astype(np.intp) if self.reads_g_idx and "weight_g_idx" in t
                else np.arange(layer.k) // (layer.k // t["groups"]))
        s = t["weight_scale"].astype(np.float64)[:, cols]
        zk = None if z is None else z.astype(np.float64)[:, cols]
        diff = q.astype(np.float64) - (0 if zk is None else zk)
        if self.values == "once":
            return _round_once(diff, s, layer.act)
        if self.kernel == "marlin":
            return _marlin_values(diff, s, layer)
        if self.kernel == "machete":
            unsigned = 1 << (layer.num_bits - 1)
            return _machete_values(q + np.float64(unsigned) if zk is not None else q.astype(np.float64),
                                   None if zk is None else zk + unsigned, s, layer)
        return _not_emulated()


READERS = {
    "compressed_tensors": Reader("compressed-tensors 0.20.0 PackedQuantizationCompressor.decompress: dense layout "
                                 "(CT-2.3), (q - zp) * s in the scale dtype, weight_g_idx ignored [run]",
                                 lambda layer: None, reads_g_idx=False, values="once"),
    "compressed_tensors_0_17": Reader("compressed-tensors 0.17.1 PackedQuantizationCompressor.decompress: per-word "
                                      "layout (CT-2.6), (q - zp) * s in the scale dtype, weight_g_idx read [run]",
                                      lambda layer: None, values="once", layout="word"),
    "vllm_wna16_marlin": Reader(f"{VLLM} CompressedTensorsWNA16 -> MarlinLinearKernel (CUDA SM 7.5+; on SM 9.0 only "
                                "where Machete refuses): uint4b8, uint8b128, uint4 with zero points; group sizes -1, "
                                "32, 64, 128; q - zp exact, times s in the activation dtype per group, channelwise "
                                "scales on the float32 accumulator [source]", _marlin_refusal, kernel="marlin"),
    "vllm_wna16_machete": Reader(f"{VLLM} CompressedTensorsWNA16 -> MacheteLinearKernel (CUDA SM 9.0 only): uint4b8, "
                                 "uint8b128, uint4, uint8; group sizes -1, 64, 128; K % 64, N % 128; q * s rounded, "
                                 "zero points folded as round(-s * zp) and added, rounded [source]", _machete_refusal,
                                 kernel="machete"),
    "vllm_wna16_exllama": Reader(f"{VLLM} CompressedTensorsWNA16 -> ExllamaLinearKernel (CUDA or ROCm, where Machete "
                                 "and Marlin refuse and Conch is not installed): float16 activations, uint4b8 and "
                                 "uint8b128, group size > 0; refusals only, values not emulated [source]",
                                 _exllama_refusal),
    "vllm_wna16_triton": Reader(f"{VLLM} CompressedTensorsWNA16 -> TritonW4A16LinearKernel (CUDA or ROCm, after "
                                "Exllama): uint4b8 and uint4, N % 8, group sizes -1, 32, 64, 128, 256 or K; refusals "
                                "only, values not emulated [source]", _triton_refusal),
}


def _activation(ckpt: Any, group: LayerGroup) -> str:
    """vLLM's activation dtype for the layer as qformats can know it: the dtype of its scales."""
    return {"BF16": "bfloat16", "F16": "float16"}.get(ckpt.tensor_info(group.tensors["weight_scale"]).dtype,
                                                       "float32")


def _layer(t: dict[str, Any], scheme: ModuleScheme, act: str) -> Layer:
    return Layer(k=t["in"], n=t["out"], num_bits=scheme.num_bits, symmetric=scheme.symmetric,
                 group_size=t["group_size"], actorder=scheme.actorder, act=act)


def _judged(t: dict[str, Any], layer: Layer) -> dict[str, Callable[[], ReaderValues]]:
    """Each reader's decode; a 32-bit activation dtype is not one vLLM runs these kernels in."""
    if layer.act == "float32":
        def unknown() -> ReaderValues:
            raise NotEmulated("float32 scales: vLLM loads them in the model dtype it picks (--dtype), not emulated")
        return {name: (partial(r.decode, t, layer) if r.values == "once" else unknown) for name, r in READERS.items()}
    return {name: partial(reader.decode, t, layer) for name, reader in READERS.items()}


def reader_rows(ckpt: Any, layers: list[LayerGroup]) -> list[dict[str, Any]]:
    """Per module: whether each emulated reader decodes it to the spec reader's values (CT-7)."""
    config, _ = _config(ckpt) if layers else (None, [])
    if config is None:
        return []
    schemes = module_schemes(config, [g.name for g in layers])
    rows = []
    for group in layers:
        scheme = schemes[group.name]
        if isinstance(scheme, str):
            continue
        try:
            raw = _tensors(ckpt, group)
            layout, _ = bytes_layout(group.name, raw, scheme.num_bits, written_layout(config))
            t = raw | codec.checked_tensors(raw, scheme.num_bits, layout=layout)   # the tensors and their sizes
            reference = codec.dequantize(raw, num_bits=scheme.num_bits, layout=layout)
        except QFormatsError:
            continue
        layer = _layer(t, scheme, _activation(ckpt, group))
        rows.append({"layer": group.name, "declared": f"int{scheme.num_bits}", "zeros_say": "",
                     "readers": judge_readers(_judged(t, layer), reference)})
    return rows


def refuse_other_layout(config: dict[str, Any]) -> None:
    """QF-5.2: a compressed-tensors config none of whose groups is pack-quantized int (FP8, NVFP4, 2:4 ...)
    is a format qformats does not cover (CT-1.2)."""
    if not isinstance(config, dict) or str(config.get("quant_method", "")).lower() != "compressed-tensors":
        return
    try:
        parsed, _ = parse_config(config)
    except QFormatsError:
        return                                      # the validator reports the invalid config
    formats = sorted({str(s.format or parsed.format) for s in parsed.config_groups.values()})
    packed = [s for s in parsed.config_groups.values() if (s.format or parsed.format) == "pack-quantized"
              and s.weights is not None and s.weights.type == "int"]
    if not packed and {"float-quantized", "nvfp4-pack-quantized", "mxfp4-pack-quantized"} & set(formats):
        return                                      # FP8, FP4: their rooms' (spec/fp8.md FP8-1.1, spec/fp4.md FP4-1.1)
    if not packed:
        raise fail("checkpoint.format.unsupported", "format", "pack-quantized int weights (CT-1.2)",
                   f"compressed-tensors {', '.join(formats)}")
    strategies = sorted({str(s.weights.strategy) for s in packed})
    if not set(strategies) & set(STRATEGIES):
        raise fail("checkpoint.format.unsupported", "strategy", "group or channel (CT-2.2)",
                   f"compressed-tensors pack-quantized, strategy {', '.join(strategies)}")
