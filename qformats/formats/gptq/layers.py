"""GPTQ modules in a checkpoint: recognised by ``qweight``, their config applied, checked, decoded (spec/gptq.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import bits as bitpack
from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, load_layer, tick
from .audit import layer_findings
from .cases import logical_weight
from .codec import dequantize
from .evidence import label_evidence
from .layout import BITS, GPTQConfig, ModuleParams, module_params, modules_params, parse_config
from .quirks import READERS

__all__ = ["ANCHOR", "SUFFIXES", "check", "decode", "require_config", "refuse_other_layout", "refuse_mislabelled",
           "reader_rows", "READERS"]

ANCHOR = "qweight"
SUFFIXES = ("qweight", "qzeros", "scales", "g_idx", "bias")


NO_LABEL = ("no quantization config found (config.json, quantize_config.json, quant_config.json): the "
            "checkpoint_format label is unknown, so each GPTQ layer is read as its zeros say (v1 where they cannot "
            "tell, GPTQ-6.3) with bits and group size from the tensors")


def refuse_other_layout(config: dict[str, Any]) -> None:
    """QF-5.2: a GPTQ ``checkpoint_format`` naming another layout (GPTQ-6.3) is a format qformats does not cover."""
    if str(config.get("quant_method", config.get("method", ""))).lower() != "gptq":
        return
    try:
        parse_config(config)
    except QFormatsError as err:
        if err.code == "gptq.config.other_layout":
            raise fail("checkpoint.format.unsupported", err.tensor, err.constraint, err.actual) from None


def require_config(ckpt: Any) -> GPTQConfig:
    """The config, which decoding needs (bits, version); ``checkpoint.config.missing`` without one."""
    if ckpt.config is None:
        raise fail("checkpoint.config.missing", "quantization_config", "present to know bits and version",
                   "no config found")
    return parse_config(ckpt.config)[0]


def _config(ckpt: Any) -> tuple[Any, list[Finding]]:
    if not ckpt.configs:
        said = any(f.code == "ckpt.config.none" for f in ckpt.findings)    # one warning, not two
        return None, [] if said else [finding("checkpoint.config.missing", "warning", NO_LABEL)]
    try:
        config, findings = parse_config(ckpt.config, source=ckpt.configs[0].file)
    except QFormatsError as err:  # other layouts were refused before any layer was read
        return None, [from_error(err.with_file(ckpt.configs[0].file))]
    return config, findings


def _params(config: Any, params: ModuleParams | None, name: str,
            t: dict[str, np.ndarray]) -> tuple[dict[str, Any] | None, list[Finding]]:
    """bits, group size, desc_act, sym, version of one module (GPTQ-6.6), checked against its tensors (6.7)."""
    scales, qzeros = t.get("scales"), t.get("qzeros")
    tensor_bits = None
    if scales is not None and qzeros is not None and scales.ndim == 2 and qzeros.ndim == 2 and scales.shape[1]:
        tensor_bits = qzeros.shape[1] * 32 // scales.shape[1]
    if config is None:
        if tensor_bits not in BITS:
            return None, [finding("tensor.shape", "error", f"'{name}' has no consistent GPTQ width "
                                  "(qzeros columns * 32 / scales columns is not 2, 3, 4 or 8)", tensor=name)]
        return {"bits": tensor_bits, "group_size": None, "desc_act": None, "sym": None, "version": None}, []
    findings = []
    if params.excluded_by:
        findings.append(finding("gptq.config.tensor_mismatch", "error", f"dynamic rule {params.excluded_by!r} "
                                f"leaves '{name}' unquantized, but the checkpoint holds its qweight", tensor=name))
    if tensor_bits != params.bits:
        findings.append(finding("gptq.config.tensor_mismatch", "error", f"config says {params.bits}-bit but "
                                f"'{name}.qzeros' and '{name}.scales' imply {tensor_bits}-bit fields", tensor=f"{name}.qzeros"))
    if name.endswith("lm_head") and not config.lm_head:
        findings.append(finding("gptq.config.tensor_mismatch", "error", "config says lm_head is not quantized "
                                "(lm_head false) but the checkpoint holds lm_head.qweight", tensor=name))
    resolved = params.model_dump(exclude={"excluded_by"})
    if tensor_bits != params.bits and tensor_bits in BITS:
        resolved["bits"] = tensor_bits  # check the layer as stored, so one mismatch is reported once
    return resolved, findings


def check(ckpt: Any, layers: list[LayerGroup], deep: bool,
          progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Every GPTQ check of every module (GPTQ-2 .. GPTQ-8), one row per module for ``inspect``."""
    config, findings = _config(ckpt)
    try:
        params_of = modules_params(config, [group.name for group in layers]) if config is not None else {}
    except QFormatsError as err:  # GPTQ-6.6: no module's parameters can be known; nothing is checked
        return [], findings + [from_error(err.with_file(ckpt.configs[0].file))]
    rows, awq = [], []
    for i, group in enumerate(layers):
        tick(progress, i, len(layers), group.name)
        t = load_layer(ckpt, group)
        if _awq_shaped(t):
            awq.append(group.name)
            continue
        params, more = _params(config, params_of.get(group.name), group.name, t)
        findings += more
        if params is None:
            continue
        more, row = layer_findings(group.name, t, bits=params["bits"], group_size=params["group_size"],
                                   declared=params["version"], desc_act=params["desc_act"], sym=params["sym"],
                                   deep=deep)  # a GPTQ decode is finite by construction (GPTQ-3.7)
        findings += more
        rows.append(row)
    if awq and not rows:
        raise fail("checkpoint.format.unsupported", "qweight", "packed along the input axis (GPTQ-2.3)",
                   f"AWQ layout (qweight packed along the output axis) in all {len(awq)} layers")
    if awq:
        findings.append(finding("checkpoint.layer.unsupported", "warning", f"{len(awq)} layers have AWQ-shaped "
                                f"qweight (packed along the output axis), first '{awq[0]}'; not decoded as GPTQ",
                                tensor=awq[0]))
    return rows, findings


def _awq_shaped(t: dict[str, np.ndarray]) -> bool:
    """AWQ packs qweight (K, N*b/32) along the output axis; GPTQ (K*b/32, N) along the input (QF-5.2)."""
    qweight, scales = t.get("qweight"), t.get("scales")
    if qweight is None or scales is None or qweight.ndim != 2 or scales.ndim != 2:
        return False
    n = scales.shape[1]
    return n > 0 and qweight.shape[1] != n and qweight.shape[1] * 32 % n == 0 and qweight.shape[1] * 32 // n in (2, 3, 4, 8)


def decode(ckpt: Any, group: LayerGroup, *, source_version: str | None = None,
           **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """float32 (out, in) with the module's parameters after ``dynamic`` overrides (GPTQ-6.6).

    A layer whose zeros exactly contradict its label is refused unless ``source_version`` says
    what the zeros are (GPTQ-8.3): decoding with the wrong label shifts every zero point by one.
    """
    p = module_params(require_config(ckpt), group.name)
    t = load_layer(ckpt, group)
    note = ""
    if source_version is None:
        refuse_mislabelled(group.name, t, p)
        evidence = label_evidence(t["qzeros"], p.bits, qweight=t["qweight"], g_idx=t.get("g_idx"), sym=p.sym)
        if evidence.verdict not in (p.version, "undetermined"):        # statistical: a warning, not a refusal
            note = (f"; warning: the zeros suggest {evidence.verdict} ({evidence.detail}); "
                    f"--source-version {evidence.verdict} if so")
    version = source_version or p.version
    w = dequantize(t, bits=p.bits, version=version, group_size=p.group_size)
    return w, f"float32 (out, in), read as {version}{note}"


def refuse_mislabelled(name: str, t: dict[str, np.ndarray], params: ModuleParams) -> None:
    """GPTQ-8.3: zeros that exactly contradict the label (symmetric layers) are refused, naming the fix."""
    evidence = label_evidence(t["qzeros"], params.bits, sym=params.sym)
    if evidence.method == "symmetric-exact" and evidence.verdict != params.version:
        raise fail("gptq.label.mismatch", f"{name}.qzeros",
                   f"{params.version} fields as the label says (pass --source-version {evidence.verdict} "
                   "to relabel without changing them)", f"{evidence.verdict} fields: {evidence.detail}")


def _intended(t: dict[str, np.ndarray], bits: int, version: str) -> np.ndarray:
    """The weight the writer meant: Z = f (v2) or (f + 1) mod 2^b (v1), exactly ``s * (q - Z)``."""
    n = t["scales"].shape[1]
    fields = bitpack.unpack(t["qzeros"], bits, axis=1)[:, :n].astype(np.int64)
    zeros = fields if version == "v2" else (fields + 1) & ((1 << bits) - 1)
    codes = bitpack.unpack(t["qweight"], bits, axis=0)
    return logical_weight(codes, zeros, t["scales"], t["g_idx"])


def _reader_row(name: str, t: dict[str, np.ndarray], p: ModuleParams) -> dict[str, Any] | None:
    evidence = label_evidence(t["qzeros"], p.bits, qweight=t["qweight"], g_idx=t["g_idx"], sym=p.sym)
    truth = evidence.verdict if evidence.verdict in ("v1", "v2") else p.version
    try:
        reference = _intended(t, p.bits, truth)
    except QFormatsError:
        return None                                  # structurally broken: the validator reports it
    row: dict[str, Any] = {"layer": name, "declared": p.version, "zeros_say": truth, "readers": {}}
    if "autogptq-or-bleed" in evidence.signatures:   # GPTQ-4.1: the meant zeros are gone
        lost = {"status": "unknowable", "detail": "AutoGPTQ's OR-bleed overwrote the neighbours of its zero-0 "
                                                  "fields; no reading recovers the meant weights"}
        row["readers"] = {reader: dict(lost) for reader in READERS}
        return row
    for reader in READERS:
        try:
            got = np.ascontiguousarray(dequantize(t, bits=p.bits, version=p.version, reader=reader,
                                                  group_size=p.group_size))
        except QFormatsError as err:
            row["readers"][reader] = {"status": "cannot read", "detail": err.constraint or str(err)}
            continue
        wrong = int(np.count_nonzero(got != reference))
        row["readers"][reader] = {"status": "wrong" if wrong else "correct", "wrong_weights": wrong}
    return row


def reader_rows(ckpt: Any, layers: list[LayerGroup]) -> list[dict[str, Any]]:
    """Per module: how every emulated real reader (GPTQ-4.2), told what the config says, decodes it,
    against the weights the writer meant (``qformats conformance checkpoint``'s table)."""
    if not layers or ckpt.config is None:
        return []
    params = modules_params(parse_config(ckpt.config)[0], [g.name for g in layers])
    rows = []
    for group in layers:
        t = load_layer(ckpt, group)
        if params[group.name].excluded_by or "g_idx" not in t:
            continue
        row = _reader_row(group.name, t, params[group.name])
        if row is not None:
            rows.append(row)
    return rows
