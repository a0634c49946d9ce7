"""compressed-tensors pack-quantized modules in a checkpoint: recognised by ``weight_packed``, their config
group resolved from ``targets`` and ``ignore`` (CT-5), checked (CT-2, CT-3, CT-6), decoded, and judged
against the emulated real readers (CT-7)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, decode_stats, load_layer, tick
from ...stats import Moments
from . import codec
from .layout import CTConfig, ModuleScheme, module_schemes, parse_config, target_matches

__all__ = ["ANCHOR", "SUFFIXES", "check", "decode", "reader_rows", "READERS"]

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
    return schemes, findings


def _padding_bits(packed: np.ndarray, bits: int, count: int) -> int:
    """How many rows have non-zero bits after the last value of the row (CT-2.3: writers write zeros)."""
    used = count * bits
    words = packed.shape[1]
    spare = words * 32 - used
    if spare == 0:
        return 0
    last = packed[:, -1].view(np.uint32)
    return int(np.count_nonzero(last >> np.uint32(32 - spare)))


def layer_check(name: str, t: dict[str, np.ndarray], scheme: ModuleScheme, deep: bool) -> tuple[list[Finding], dict]:
    """Structure against the scheme (CT-2, CT-5.4), finite scales (CT-3.3), padding (CT-2.3), ``--deep``."""
    b = scheme.num_bits
    row: dict[str, Any] = {"layer": name, "format": f"ct_int{b}_{'sym' if scheme.symmetric else 'asym'}",
                           "bits": b, "group_size": scheme.group_size or -1}
    try:
        checked = codec.checked_tensors(t, b)
    except QFormatsError as err:
        finding_ = from_error(err.within(name))
        if err.tensor == "weight_packed" and err.code == "tensor.shape" and "weight_shape" in t:
            fits = _widths_that_fit(t)
            finding_ = finding_.model_copy(update={"message": finding_.message + f"; the bytes fit num_bits {fits} "
                                                   f"(CT-6.1), the config says {b}"})
        return [finding_], row
    findings: list[Finding] = []
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
    dirty = _padding_bits(checked["weight_packed"], b, k)
    if dirty:
        findings.append(finding("ctensors.padding.nonzero", "warning", f"{dirty} rows of '{name}.weight_packed' have "
                                "non-zero bits after their last value (readers ignore them)",
                                tensor=f"{name}.weight_packed", count=dirty))
    row["bits_per_weight"] = round((k * n * b + g * n * (16 + (b if has_zp else 0))) / (k * n), 4)
    if deep and not any(f.severity == "error" for f in findings):
        row.update(decode_stats(name, Moments.of(codec.dequantize(t, num_bits=b)), findings))
    return findings, row


def _widths_that_fit(t: dict[str, np.ndarray]) -> list[int]:
    try:
        k = int(np.asarray(t["weight_shape"]).reshape(-1)[1])
    except (IndexError, ValueError):
        return []
    return [b for b in codec.BITS if codec.packed_words(k, b) == t["weight_packed"].shape[-1]]


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
        if isinstance(scheme, str):
            findings.append(finding("ctensors.config.tensor_mismatch", "error", f"'{group.name}' holds weight_packed "
                                    f"but {scheme}", tensor=group.name))
            continue
        more, row = layer_check(group.name, _tensors(ckpt, group), scheme, deep)
        findings += more
        rows.append(row)
    return rows, findings


def _scheme(ckpt: Any, group: LayerGroup) -> ModuleScheme:
    config, findings = _config(ckpt)
    if config is None:
        raise fail(findings[0].code, "quantization_config", "a valid compressed-tensors config", findings[0].message)
    scheme = module_schemes(config, [group.name])[group.name]
    if isinstance(scheme, str):
        raise fail("ctensors.config.tensor_mismatch", group.name, "a module a pack-quantized config group targets", scheme)
    return scheme


def decode(ckpt: Any, group: LayerGroup, **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """float32 (out, in), ``s * (q - zp)`` (CT-3.1) with the module's config group."""
    scheme = _scheme(ckpt, group)
    w = codec.dequantize(_tensors(ckpt, group), num_bits=scheme.num_bits)
    return w, f"float32 (out, in), pack-quantized int{scheme.num_bits} {'sym' if scheme.symmetric else 'asym'}"


class Reader:
    """An emulated real reader of pack-quantized tensors (CT-7): the widths it reads; values as the spec."""

    def __init__(self, description: str, bits: tuple[int, ...], reads_g_idx: bool):
        self.description, self.bits, self.reads_g_idx = description, bits, reads_g_idx

    def decode(self, t: dict[str, np.ndarray], num_bits: int) -> np.ndarray:
        if num_bits not in self.bits:
            raise fail("argument.invalid", "num_bits", f"one of {self.bits}", num_bits)
        if not self.reads_g_idx:
            t = {k: v for k, v in t.items() if k != "weight_g_idx"}
        return codec.dequantize(t, num_bits=num_bits)


READERS = {
    "compressed_tensors": Reader("compressed-tensors 0.20.0 PackedQuantizationCompressor.decompress [run]",
                                 codec.BITS, reads_g_idx=False),
    "vllm_wna16": Reader("vLLM CompressedTensorsWNA16 (WNA16_SUPPORTED_BITS 4 and 8 only) [source]", (4, 8),
                         reads_g_idx=True),
}


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
        t = _tensors(ckpt, group)
        try:
            reference = codec.dequantize(t, num_bits=scheme.num_bits)
        except QFormatsError:
            continue
        row: dict[str, Any] = {"layer": group.name, "declared": f"int{scheme.num_bits}", "zeros_say": "", "readers": {}}
        for name, reader in READERS.items():
            try:
                got = reader.decode(t, scheme.num_bits)
            except QFormatsError as err:
                row["readers"][name] = {"status": "cannot read", "detail": err.constraint or str(err)}
                continue
            wrong = int(np.count_nonzero(got != reference))
            row["readers"][name] = {"status": "wrong" if wrong else "correct", "wrong_weights": wrong}
        rows.append(row)
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
    if not packed:
        raise fail("checkpoint.format.unsupported", "format", "pack-quantized int weights (CT-1.2)",
                   f"compressed-tensors {', '.join(formats)}")
