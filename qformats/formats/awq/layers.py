"""AWQ GEMM modules in a checkpoint: claimed when the config says ``quant_method: awq`` or is AutoAWQ 0.1's (AWQ-5),
checked (AWQ-2, AWQ-3, AWQ-6), decoded, and judged against the emulated real readers (AWQ-7)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, ReaderValues, decode_stats, judge_readers, load_layer, tick
from ...stats import Moments
from .codec import checked_tensors, dequantize, unpack_words
from .layout import OTHER_VERSIONS, PACK, AWQConfig, parse_config

__all__ = ["ANCHOR", "SUFFIXES", "claims", "check", "decode", "reader_rows", "READERS", "Reader",
           "refuse_other_layout"]

ANCHOR = "qweight"
SUFFIXES = ("qweight", "qzeros", "scales", "bias")
LEGACY_KEYS = ("w_bit", "q_group_size", "zero_point")       # AutoAWQ 0.1.x quant_config.json (AWQ-5.1)


def claims(config: Any) -> bool:
    """AWQ and GPTQ share the tensor names: a module is AWQ's when the config says so (AWQ-5.1):
    ``quant_method: awq``, or AutoAWQ 0.1's ``quant_config.json``, which has no ``quant_method``."""
    if not isinstance(config, dict):
        return False
    if "quant_method" in config:
        return str(config["quant_method"]).lower() == "awq"
    return _legacy(config)


def _legacy(config: dict[str, Any]) -> bool:
    """AWQ-5.1: every key AutoAWQ 0.1 writes (``w_bit``, ``q_group_size``, ``zero_point``) and a version it
    writes (``GEMM``, ``GEMV``, ..., any case); GPTQ's ``quantize_config.json`` has none of them."""
    version = config.get("version")
    return (all(key in config for key in LEGACY_KEYS) and isinstance(version, str)
            and version.lower() in ("gemm", *OTHER_VERSIONS))


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


AUTOAWQ_DEFAULT_GROUP_SIZE = 128     # AutoAWQ 0.2.9 AwqConfig() (q_group_size), used when config.json has none


def _legacy_only(ckpt: Any, config: AWQConfig) -> list[Finding]:
    """AWQ-5.1: a config only in quant_config.json is read by vLLM (AWQConfig.get_config_filenames) but not by
    AutoAWQ 0.2.9 (AwqConfig.from_pretrained reads config.json, else its defaults) nor transformers."""
    if ckpt.configs[0].key is not None:             # config.json's quantization_config: every reader finds it
        return []
    gs = config.group_size
    fits = ("which is this checkpoint's" if gs == AUTOAWQ_DEFAULT_GROUP_SIZE
            else f"where this checkpoint has {gs}: its scales do not fit the layers AutoAWQ builds")
    return [finding("awq.config.legacy_only", "warning", f"the AWQ config is only in "
                    f"{os.path.basename(ckpt.configs[0].file)} (AutoAWQ 0.1): vLLM reads it, but AutoAWQ 0.2.9 "
                    f"reads config.json's quantization_config, absent here, and falls back to group size "
                    f"{AUTOAWQ_DEFAULT_GROUP_SIZE}, {fits}; transformers finds no quantization config (AWQ-5.1)")]


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
    findings += _legacy_only(ckpt, config)
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


# -- emulated real readers (AWQ-7) ----------------------------------------------------------------------------
# vLLM 0.33.0 (PyPI sdist vllm-0.33.0.tar.gz, sha256 f4c33c25...c74112, commit 4ba787ec9), read [source]:
# AutoAWQConfig.get_quant_method (model_executor/layers/quantization/auto_awq.py) sends a Linear on CUDA to
# AutoAWQMarlinLinearMethod -> choose_mp_linear_kernel when check_marlin_supported(uint4, group_size, zp) holds,
# else to AutoAWQLinearMethod (ops.awq_dequantize / ops.awq_gemm: CUDA, or Triton with VLLM_USE_TRITON_AWQ=1,
# which ROCm forces). choose_mp_linear_kernel tries Machete (SM 9.0 only) before Marlin (SM 7.5+).

VLLM = "vLLM 0.33.0"


def _exact(q: np.ndarray, z: np.ndarray, s: np.ndarray) -> np.ndarray:
    """s * (q - z) in float32: exact (an 11-bit significand times an integer of at most 4 bits, AWQ-3.1)."""
    return s.astype(np.float32) * (q.astype(np.float32) - z)


def _float16_once(q: np.ndarray, z: np.ndarray, s: np.ndarray) -> np.ndarray:
    return _exact(q, z, s).astype(np.float16).astype(np.float32)


def _machete_zero_folded(q: np.ndarray, z: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Machete with zero points: ``-s * z`` rounded at load (transform_w_zp), then ``q * s`` rounded and the
    two added and rounded in the kernel (machete_mainloop.cuh ConvertAndScaleWithZero): three roundings."""
    s64 = s.astype(np.float64)
    scaled = (q.astype(np.float64) * s64).astype(np.float16).astype(np.float64)
    folded = (-(s64 * z)).astype(np.float16).astype(np.float64)
    return (scaled + folded).astype(np.float16).astype(np.float32)        # the float64 sum is exact


@dataclass(frozen=True)
class Reader:
    """One real reader path of AWQ GEMM tensors (AWQ-7): which layers it refuses, in the tool's own words,
    and the weights it computes from codes ``q``, zero points ``z`` and scales ``s`` (each ``(K, N)``)."""

    description: str
    refusal: Callable[[int, int, int, int], str | None]        # (K, N, config group size, rows per group)
    weights: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]      # float16 values, held in float32
    channelwise_exact: bool = False     # group size -1: scales applied to the float32 accumulator, weights exact

    def why_not(self, k: int, n: int, group_size: int) -> str | None:
        """Why this path cannot read a ``K x N`` layer of that config group size; None when it can."""
        return self.refusal(k, n, group_size, k if group_size == -1 else group_size)

    def decode(self, t: dict[str, np.ndarray], group_size: int) -> ReaderValues:
        """The path's weights ``(N, K)`` for checked tensors, or ``argument.invalid`` with its refusal."""
        k, n = t["qweight"].shape[0], t["scales"].shape[1]
        reason = self.why_not(k, n, group_size)
        if reason is not None:
            raise fail("argument.invalid", "layer", "a layer this reader path implements (AWQ-7)", reason)
        rows = k if group_size == -1 else group_size
        q = unpack_words(t["qweight"])
        z = np.repeat(unpack_words(t["qzeros"]), rows, axis=0)
        s = np.repeat(t["scales"], rows, axis=0)
        if self.channelwise_exact and group_size == -1:
            return ReaderValues(_exact(q, z, s).T, "float32")
        return ReaderValues(self.weights(q, z, s).T, "float16")


def _reads_all(k: int, n: int, gs: int, rows: int) -> str | None:
    return None


def _marlin_refusal(k: int, n: int, gs: int, rows: int) -> str | None:
    # marlin_utils._check_marlin_supported; tile-misaligned N and K are zero-padded (marlin_padded_nk)
    if gs not in (-1, 32, 64, 128):
        return f"Marlin does not support group_size = {gs}. Only group_sizes = [-1, 32, 64, 128] are supported."
    return None


def _machete_refusal(k: int, n: int, gs: int, rows: int) -> str | None:
    # MacheteLinearKernel.can_implement: query_machete_supported_group_sizes, check_machete_supports_shape
    if gs not in (-1, 64, 128):
        return f"Group size ({gs}) not supported by Machete, supported group sizes are: [-1, 64, 128]"
    if k % 64:
        return f"Input features size must be divisible by 64 (in_features = {k})"
    if n % 128:
        return f"Output features size must be divisible by 128 (out_features = {n})"
    return None


def _awq_gemm_refusal(k: int, n: int, gs: int, rows: int) -> str | None:
    # csrc/quantization/awq/gemm_kernels.cu awq_gemm, group size = in_features / scales rows
    if n % 64:
        return f"OC is not multiple of cta_N = 64 (OC = {n})"
    if rows % 32:
        return f"Group size should be a multiple of 32 (group size = {rows})"
    if n % rows:
        return f"OC is not multiple of Group size (OC = {n}, group size = {rows})"
    return None


def _awq_triton_refusal(k: int, n: int, gs: int, rows: int) -> str | None:
    # awq_triton.py awq_dequantize_triton / awq_gemm_triton: group size = in_features / scales rows
    if rows not in (32, 64, 128) and rows != k:
        return (f"group_size in AWQ_TRITON_SUPPORTED_GROUP_SIZES [-1, 32, 64, 128] or group_size == K fails "
                f"(group_size = {rows}, K = {k})")
    return None


READERS = {
    "autoawq_gemm": Reader("AutoAWQ 0.2.9 WQLinear_GEMM, CPU path packing_utils.dequantize_gemm: (q - z) * s in "
                           "float16 [run]", _reads_all, _float16_once),
    "vllm_awq_marlin": Reader(f"{VLLM} AutoAWQMarlinLinearMethod -> MarlinLinearKernel (CUDA SM 7.5+; on SM 9.0 "
                              "only where Machete refuses): group sizes -1, 32, 64, 128; tile-misaligned shapes "
                              "zero-padded; q - z exact, times s in float16 per group, channelwise (-1) scales "
                              "applied to the float32 accumulator [source]", _marlin_refusal, _float16_once,
                              channelwise_exact=True),
    "vllm_awq_machete": Reader(f"{VLLM} AutoAWQMarlinLinearMethod -> MacheteLinearKernel (CUDA SM 9.0 only): group "
                               "sizes -1, 64, 128, K % 64, N % 128; zero points folded as float16(-s * z), weight "
                               "float16(float16(q * s) + that) [source]", _machete_refusal, _machete_zero_folded),
    "vllm_awq_cuda": Reader(f"{VLLM} AutoAWQLinearMethod, CUDA ops.awq_gemm / awq_dequantize (CUDA when Marlin is not "
                            "supported: group sizes outside -1, 32, 64, 128, or VLLM_BATCH_INVARIANT=1): awq_gemm "
                            "(under 256 tokens) needs OC % 64, group % 32, OC % group; (q - z) then fma(., s, +0) "
                            "in float16 [source]", _awq_gemm_refusal, _float16_once),
    "vllm_awq_triton": Reader(f"{VLLM} AutoAWQLinearMethod with VLLM_USE_TRITON_AWQ=1 (forced on ROCm): "
                              "awq_dequantize_triton / awq_gemm_triton (reverse order 0 4 1 5 2 6 3 7; group sizes "
                              "32, 64, 128 or K); (q - z) * s in float16 [source]", _awq_triton_refusal,
                              _float16_once),
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
        readers = {name: partial(reader.decode, checked, gs) for name, reader in READERS.items()}
        rows.append({"layer": group.name, "declared": "awq_gemm", "zeros_say": "awq_gemm",
                     "readers": judge_readers(readers, reference)})
    return rows
