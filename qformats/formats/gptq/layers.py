"""GPTQ modules in a checkpoint: recognised by ``qweight``, their config applied, checked, decoded (spec/gptq.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import bits as bitpack
from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, load_layer, tick
from . import dynamic
from .audit import layer_findings
from .checks import check_g_idx, check_qzeros, checked_tensors
from .codec import _decode, dequantize
from .evidence import label_evidence
from .layout import BITS, GPTQConfig, ModuleParams, module_params, modules_params, parse_config
from .quirks import READERS, get_reader
from .writers import PLAUSIBLE_ORDER, WRITERS, Meaning, WriterClaim, meaning, named_writer

__all__ = ["ANCHOR", "SUFFIXES", "check", "decode", "require_config", "refuse_other_layout", "refuse_mislabelled",
           "reader_rows", "writer_claim", "READERS"]

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
    return config, findings + _unused_rules(config, ckpt.tensor_names())


def _unused_rules(config: Any, names: list[str]) -> list[Finding]:
    """GPTQ-6.6: a ``dynamic`` rule that is the first match of no module name of the checkpoint does nothing."""
    keys = list(config.dynamic or {})
    if not keys:
        return []
    modules = sorted({name.rpartition(".")[0] for name in names})
    try:
        deciding = {i for i in dynamic.first_matches(keys, modules) if i is not None}
    except QFormatsError:         # unsafe or invalid rules: modules_params reports it (GPTQ-6.6)
        return []
    return [finding("gptq.config.dynamic_unused", "warning", f"dynamic rule {key!r} decides no module of this "
                    "checkpoint (it matches none, or an earlier rule decides each it matches); readers never apply it",
                    tensor="dynamic", count=None) for i, key in enumerate(keys) if i not in deciding]


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
    if awq and _all_awq_shaped(ckpt):
        raise fail("checkpoint.format.unsupported", "qweight", "packed along the input axis (GPTQ-2.3)",
                   f"AWQ layout (qweight packed along the output axis) in all {len(awq)} "
                   f"layer{'s' if len(awq) > 1 else ''}")
    # One warning per layer, not one per call: validate --jobs N checks the layers in N processes, and the
    # findings they send back must be those of one process (QF-5.1).
    findings += [finding("checkpoint.layer.unsupported", "warning", f"'{name}' has AWQ-shaped qweight (packed "
                         "along the output axis); not decoded as GPTQ", tensor=name) for name in awq]
    return rows, findings


def _all_awq_shaped(ckpt: Any) -> bool:
    """Every GPTQ module of the whole checkpoint (not only this worker's share) is AWQ-shaped, by its
    header shapes: then the checkpoint is another format, not a GPTQ one with odd layers (QF-5.2)."""
    from ...validate import group_layers     # validate imports this module: resolved at call time

    def shape(group: LayerGroup, suffix: str) -> tuple[int, ...] | None:
        name = group.tensors.get(suffix)
        return tuple(ckpt.tensor_info(name).shape) if name else None

    groups = [g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0] if g.format == "gptq"]
    return bool(groups) and all(_awq_shapes(shape(g, "qweight"), shape(g, "scales")) for g in groups)


def _awq_shaped(t: dict[str, np.ndarray]) -> bool:
    qweight, scales = t.get("qweight"), t.get("scales")
    return _awq_shapes(None if qweight is None else qweight.shape, None if scales is None else scales.shape)


def _awq_shapes(qweight: tuple[int, ...] | None, scales: tuple[int, ...] | None) -> bool:
    """AWQ packs qweight (K, N*b/32) along the output axis; GPTQ (K*b/32, N) along the input (QF-5.2)."""
    if qweight is None or scales is None or len(qweight) != 2 or len(scales) != 2:
        return False
    n = scales[1]
    return n > 0 and qweight[1] != n and qweight[1] * 32 % n == 0 and qweight[1] * 32 // n in (2, 3, 4, 8)


def decode(ckpt: Any, group: LayerGroup, *, source_version: str | None = None, reader: str | None = None,
           **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """float32 (out, in) with the module's parameters after ``dynamic`` overrides (GPTQ-6.6).

    A layer whose zeros exactly contradict its label is refused unless ``source_version`` says
    what the zeros are (GPTQ-8.3): decoding with the wrong label shifts every zero point by one.
    ``reader`` decodes as that real reader does (GPTQ-4.2), told the label (or ``source_version``).
    """
    p = module_params(require_config(ckpt), group.name)
    t = load_layer(ckpt, group)
    checked_tensors(t, p.bits, p.group_size)       # every tensor named and checked before any is read
    if reader is not None:
        return _decode_as(t, p, source_version or p.version, reader)
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


def _decode_as(t: dict[str, np.ndarray], p: ModuleParams, version: str, reader: str) -> tuple[np.ndarray, str]:
    emulated = get_reader(reader)
    reason = emulated.why_not(p.bits, version, p.sym)
    if reason is not None:
        raise fail("gptq.quirk.unsupported", "reader", f"a reader that can read this layer ({reader}: "
                   f"{emulated.description.split(';')[0]})", reason)
    w = dequantize(t, bits=p.bits, version=version, reader=reader, group_size=p.group_size)
    return w, f"float32 (out, in), as the {reader} emulation reads it told {version} (spec/gptq.md GPTQ-4.2)"


def refuse_mislabelled(name: str, t: dict[str, np.ndarray], params: ModuleParams) -> None:
    """GPTQ-8.3: zeros that exactly contradict the label (symmetric layers) are refused, naming the fix."""
    evidence = label_evidence(t["qzeros"], params.bits, sym=params.sym)
    if evidence.method == "symmetric-exact" and evidence.verdict != params.version:
        raise fail("gptq.label.mismatch", f"{name}.qzeros",
                   f"{params.version} fields as the label says (pass --source-version {evidence.verdict} "
                   "to relabel without changing them)", f"{evidence.verdict} fields: {evidence.detail}")


def writer_claim(ckpt: Any, layers: list[LayerGroup]) -> dict[str, Any]:
    """Whose meaning the compatibility table judges against (GPTQ-4.1, GPTQ-8.5), JSON-ready:
    the writer the config names, else the one a signature identifies, else every plausible one."""
    claim, plausible = _resolve_writer(ckpt, layers)
    return {"known": claim.writer is not None, "writer": claim.writer, "basis": claim.basis,
            "detail": claim.detail, "plausible": list(plausible), "names": dict(WRITERS)}


def _config_or_none(ckpt: Any) -> GPTQConfig | None:
    try:
        return parse_config(ckpt.config)[0] if ckpt.config is not None else None
    except QFormatsError:
        return None


def _v1_qzeros(ckpt: Any, layers: list[LayerGroup]) -> list[tuple[str, np.ndarray, int]]:
    """(name, checked qzeros, bits) of every v1-labelled layer whose qzeros can be read."""
    config = _config_or_none(ckpt)
    if config is None:
        return []
    out = []
    params = modules_params(config, [g.name for g in layers])
    for group in layers:
        p = params[group.name]
        if p.excluded_by or p.version != "v1" or "qzeros" not in group.tensors:
            continue
        try:
            out.append((group.name, check_qzeros(np.asarray(ckpt.tensor(group.tensors["qzeros"])), p.bits), p.bits))
        except QFormatsError:
            continue
    return out


def _resolve_writer(ckpt: Any, layers: list[LayerGroup]) -> tuple[WriterClaim, tuple[str, ...]]:
    """The checkpoint's writer claim and, when unknown, the writers its bytes do not rule out.

    One writer wrote the whole checkpoint: AutoGPTQ is ruled out by any v1 layer whose words its
    bleed cannot have produced, and a named AutoGPTQ so refuted makes the writer unknown.
    """
    claim = named_writer(_config_or_none(ckpt))
    zeros = _v1_qzeros(ckpt, layers)
    refuted = next((name for name, qz, b in zeros if not meaning(qz, b, qz.shape[1] * 32 // b, "autogptq").plausible),
                   None)
    if claim.writer == "autogptq" and refuted:
        claim = WriterClaim(None, "unknown", f"{claim.detail} names AutoGPTQ, but the zeros of {refuted!r} are "
                                             "not bytes its OR-bleed writes")
    if claim.writer is not None:
        return claim, (claim.writer,)
    signatures = {s for _, qz, b in zeros for s in label_evidence(qz, b).signatures}
    if "gptqmodel-legacy-int3" in signatures:
        return WriterClaim("gptqmodel_legacy_int3", "signature", "GPTQModel 0.9.0 - 6.x 3-bit words "
                                                                 "0x00000000 0xb6db6db7 0x49249249 (GPTQ-8.5)"), \
            ("gptqmodel_legacy_int3",)
    if "autogptq-or-bleed" in signatures and not refuted:
        return WriterClaim("autogptq", "signature", "all-ones fields running to the top of their words, "
                                                    "AutoGPTQ's OR-bleed (GPTQ-8.5)"), ("autogptq",)
    return claim, tuple(w for w in PLAUSIBLE_ORDER if w != "autogptq" or not refuted)


def _meant(t: dict[str, np.ndarray], bits: int, truth: str, writer: str) -> Meaning:
    n = t["scales"].shape[1]
    if truth == "v2":
        return Meaning(bitpack.unpack(t["qzeros"], bits, axis=1, count=n).astype(np.int64), None)
    return meaning(t["qzeros"], bits, n, writer)


def _judge(reader: str, got: np.ndarray, meant: np.ndarray, lost: np.ndarray | None) -> dict[str, Any]:
    """One reader's status against the weights a writer meant; overwritten weights are not judged."""
    differ = got != meant
    lost_weights = int(np.count_nonzero(lost)) if lost is not None else 0
    if lost is not None:
        differ &= ~lost
    wrong = int(np.count_nonzero(differ))
    status = "wrong" if wrong else "unknowable" if lost_weights else "correct"
    return {"status": status, "wrong_weights": wrong, "unknowable_weights": lost_weights}


def _layer_rows(name: str, t: dict[str, np.ndarray], p: ModuleParams, writers: tuple[str, ...]) -> list[dict[str, Any]]:
    """One row per distinct meaning the plausible writers give this layer's bytes."""
    try:
        dims, t = checked_tensors(t, p.bits, p.group_size)
        check_g_idx(t["g_idx"], dims.n_groups, dims.group_size)
    except QFormatsError as err:     # readers' behaviour on a malformed layer is not emulated
        detail = f"the layer is malformed ({err.message} [{err.code}]); qformats validate reports it"
        return [{"layer": name, "writers": list(writers), "declared": p.version, "zeros_say": None,
                 "readers": {r: {"status": "not judged", "detail": detail} for r in READERS}}]
    evidence = label_evidence(t["qzeros"], p.bits, qweight=t["qweight"], g_idx=t["g_idx"], sym=p.sym)
    truth = evidence.verdict if evidence.verdict in ("v1", "v2") else p.version
    decoded = {r: _read(t, p, r) for r in READERS}
    codes = bitpack.unpack(t["qweight"], p.bits, axis=0)
    groups: list[tuple[list[str], Meaning]] = []
    for writer in writers:
        m = _meant(t, p.bits, truth, writer)
        same = next((g for g in groups if np.array_equal(g[1].zeros, m.zeros) and _same_mask(g[1].lost, m.lost)), None)
        if same is not None:
            same[0].append(writer)
        else:
            groups.append(([writer], m))
    rows = []
    for names, m in groups:
        meant = np.ascontiguousarray(_decode(codes, m.zeros, t["scales"], t["g_idx"].astype(np.intp)))
        lost = None if m.lost is None or not m.lost.any() else np.ascontiguousarray(m.lost[t["g_idx"]].T)
        readers = {r: got if isinstance(got, dict) else _judge(r, got, meant, lost) for r, got in decoded.items()}
        rows.append({"layer": name, "writers": names if len(groups) > 1 or truth == "v1" else ["any"],
                     "declared": p.version, "zeros_say": truth, "readers": readers})
    return rows


def _same_mask(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    a_any, b_any = a is not None and a.any(), b is not None and b.any()
    return a_any == b_any and (not a_any or np.array_equal(a, b))


def _read(t: dict[str, np.ndarray], p: ModuleParams, reader: str) -> np.ndarray | dict[str, Any]:
    """What ``reader``, told the config's label, decodes; or why it cannot read the layer."""
    reason = READERS[reader].why_not(p.bits, p.version, p.sym)
    if reason is None:
        try:
            return np.ascontiguousarray(dequantize(t, bits=p.bits, version=p.version, reader=reader,
                                                   group_size=p.group_size))
        except QFormatsError as err:
            reason = f"{err.actual}: {err.constraint}" if err.code == "gptq.quirk.unsupported" else err.message
    return {"status": "cannot read", "detail": reason}


def reader_rows(ckpt: Any, layers: list[LayerGroup]) -> list[dict[str, Any]]:
    """Per module and writer meaning: how every emulated real reader (GPTQ-4.2), told what the config
    says, decodes it against the weights the writer meant (``qformats conformance checkpoint``)."""
    config = _config_or_none(ckpt)
    if not layers or config is None:
        return []
    params = modules_params(config, [g.name for g in layers])
    claim, plausible = _resolve_writer(ckpt, layers)
    rows = []
    for group in layers:
        p = params[group.name]
        if p.excluded_by:
            continue
        try:
            t = load_layer(ckpt, group)
        except QFormatsError:
            continue                              # unreadable tensors: the validator reports them
        rows += _layer_rows(group.name, t, p, plausible)
    return rows
