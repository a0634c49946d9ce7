"""AWQ GEMM modules in a checkpoint: claimed when the config says ``quant_method: awq`` (AWQ-5),
checked (AWQ-2, AWQ-3, AWQ-6), decoded, and judged against the emulated real readers (AWQ-7)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, decode_stats, load_layer, tick
from ...stats import Moments
from .codec import checked_tensors, dequantize, unpack_words
from .layout import PACK, AWQConfig, parse_config

__all__ = ["ANCHOR", "SUFFIXES", "claims", "check", "decode", "reader_rows", "READERS", "refuse_other_layout"]

ANCHOR = "qweight"
SUFFIXES = ("qweight", "qzeros", "scales", "bias")


def claims(config: Any) -> bool:
    """AWQ and GPTQ share the tensor names: a module is AWQ's when the config says so (AWQ-5.1)."""
    return isinstance(config, dict) and str(config.get("quant_method", "")).lower() == "awq"


def refuse_other_layout(config: dict[str, Any]) -> None:
    """QF-5.2: an AWQ config naming another AutoAWQ layout (GEMV, Marlin, ...) is a format not covered (AWQ-1.2)."""
    if not claims(config):
        return
    try:
        parse_config(config)
    except QFormatsError as err:
        if err.code == "awq.config.other_layout":
            raise fail("checkpoint.format.unsupported", err.tensor, err.constraint, err.actual) from None


def _config(ckpt: Any) -> tuple[AWQConfig | None, list[Finding]]:
    try:
        return parse_config(ckpt.config, source=ckpt.configs[0].file)
    except QFormatsError as err:
        return None, [from_error(err.with_file(ckpt.configs[0].file))]


def _excluded(config: AWQConfig, name: str) -> str | None:
    """AutoAWQ leaves a Linear unquantized when any ``modules_to_not_convert`` entry is a substring of its name
    (``awq/utils/module.py`` ``exclude_layers_to_not_quantize``)."""
    return next((key for key in config.modules_to_not_convert or () if key in name), None)


def _gptq_shaped(t: dict[str, np.ndarray]) -> bool:
    """AWQ-6.2: qweight (K/8, N) with scales (G, N): codes packed along the input axis, as GPTQ stores them."""
    qweight, scales = t.get("qweight"), t.get("scales")
    if qweight is None or scales is None or qweight.ndim != 2 or scales.ndim != 2:
        return False
    return qweight.shape[1] == scales.shape[1] and qweight.shape[1] != qweight.shape[1] * PACK


def layer_check(name: str, t: dict[str, np.ndarray], group_size: int, deep: bool) -> tuple[list[Finding], dict]:
    """Structure (AWQ-2), finite scales (AWQ-3.3), the label against the bytes (AWQ-6.2), ``--deep`` stats."""
    row: dict[str, Any] = {"layer": name, "format": "awq_gemm", "bits": 4, "group_size": group_size}
    if _gptq_shaped(t):
        return [finding("awq.label.mismatch", "error", f"'{name}.qweight' is {tuple(t['qweight'].shape)} with scales "
                        f"{tuple(t['scales'].shape)}: codes packed along the input axis (GPTQ or AutoAWQ GEMV), "
                        "not AWQ GEMM's output axis; version 'gemm' contradicts the bytes", tensor=f"{name}.qweight")], row
    try:
        gs, checked = checked_tensors(t, group_size)
    except QFormatsError as err:
        return [from_error(err.within(name))], row
    k, n = checked["qweight"].shape[0], checked["scales"].shape[1]
    g = checked["scales"].shape[0]
    row.update({"in_features": k, "out_features": n, "bits_per_weight": round((k * n * 4 + g * n * 20) / (k * n), 4)})
    findings: list[Finding] = []
    if "bias" in t and (t["bias"].dtype != np.float16 or t["bias"].shape != (n,)):
        findings.append(finding("tensor.shape", "error", f"'{name}.bias' must be float16 ({n},) (AWQ-2.1), got "
                                f"{t['bias'].dtype}{tuple(t['bias'].shape)}", tensor=f"{name}.bias"))
    if deep and not findings:
        row.update(decode_stats(name, Moments.of(dequantize(checked, group_size=gs)), findings))
    return findings, row


def check(ckpt: Any, layers: list[LayerGroup], deep: bool,
          progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Every AWQ check of every module (AWQ-2 .. AWQ-6), one row per module for ``inspect``."""
    config, findings = _config(ckpt)
    if config is None:
        return [], findings
    rows = []
    for i, group in enumerate(layers):
        tick(progress, i, len(layers), group.name)
        excluded = _excluded(config, group.name)
        if excluded is not None:
            findings.append(finding("awq.config.tensor_mismatch", "error", f"modules_to_not_convert entry {excluded!r} "
                                    f"leaves '{group.name}' unquantized, but the checkpoint holds its qweight",
                                    tensor=group.name))
            continue
        more, row = layer_check(group.name, load_layer(ckpt, group), config.group_size, deep)
        findings += more
        rows.append(row)
    return rows, findings


def decode(ckpt: Any, group: LayerGroup, **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """float32 (out, in), exactly ``s * (q - z)`` (AWQ-3.1), with the config's group size."""
    config, findings = _config(ckpt)
    if config is None:
        raise fail(findings[0].code, "quantization_config", "a valid AWQ config", findings[0].message)
    t = load_layer(ckpt, group)
    if _gptq_shaped(t):
        raise fail("awq.label.mismatch", f"{group.name}.qweight", "packed along the output axis (AWQ GEMM, AWQ-2.3)",
                   f"{tuple(t['qweight'].shape)}, packed along the input axis")
    return dequantize(t, group_size=config.group_size), "float32 (out, in), AWQ GEMM s * (q - z)"


class Reader:
    """An emulated real reader of AWQ GEMM tensors (AWQ-7): what it decodes, or why it cannot."""

    def __init__(self, description: str, order: tuple[int, ...] | None, zero_offset: int, group_sizes=None):
        self.description, self.order, self.zero_offset, self.group_sizes = description, order, zero_offset, group_sizes

    def decode(self, t: dict[str, np.ndarray], group_size: int) -> np.ndarray:
        if self.group_sizes is not None and group_size not in self.group_sizes:
            raise fail("argument.invalid", "group_size", f"one of {self.group_sizes}", group_size)
        order = self.order or (0, 1, 2, 3, 4, 5, 6, 7)
        codes, zeros = unpack_words(t["qweight"], order=order), unpack_words(t["qzeros"], order=order)
        k = codes.shape[0]
        rows = k if group_size == -1 else group_size
        q = codes.reshape(k // rows, rows, -1).astype(np.float32)
        q -= zeros.astype(np.float32)[:, None, :] + self.zero_offset
        q *= t["scales"].astype(np.float32)[:, None, :]
        return q.reshape(k, -1).T


READERS = {
    "autoawq_gemm": Reader("AutoAWQ 0.2.9 WQLinear_GEMM, CPU path packing_utils.dequantize_gemm [run]",
                           (0, 2, 4, 6, 1, 3, 5, 7), 0),
    "vllm_awq_triton": Reader("vLLM awq_triton awq_dequantize_triton (reverse order 0 4 1 5 2 6 3 7; group sizes "
                              "-1, 32, 64, 128 only) [source]", (0, 2, 4, 6, 1, 3, 5, 7), 0,
                              group_sizes=(-1, 32, 64, 128)),
}


def reader_rows(ckpt: Any, layers: list[LayerGroup]) -> list[dict[str, Any]]:
    """Per module: whether each emulated reader decodes it to the spec reader's values (AWQ-7)."""
    if not layers:
        return []
    config, _ = _config(ckpt)
    if config is None:
        return []
    rows = []
    for group in layers:
        t = load_layer(ckpt, group)
        try:
            gs, checked = checked_tensors(t, config.group_size)
            reference = dequantize(checked, group_size=gs)
        except QFormatsError:
            continue
        row: dict[str, Any] = {"layer": group.name, "declared": "awq_gemm", "zeros_say": "awq_gemm", "readers": {}}
        for name, reader in READERS.items():
            try:
                got = np.ascontiguousarray(reader.decode(checked, gs))
            except QFormatsError as err:
                row["readers"][name] = {"status": "cannot read", "detail": err.constraint or str(err)}
                continue
            wrong = int(np.count_nonzero(got != reference))
            row["readers"][name] = {"status": "wrong" if wrong else "correct", "wrong_weights": wrong}
        rows.append(row)
    return rows
