"""Everything GPTQ says about one stored layer: structure, g_idx, label evidence, zero underflow.

This is what ``qformats validate`` runs per GPTQ module; it sits above :mod:`.checks`
(rules), :mod:`.quirks` (real readers) and :mod:`.evidence` (v1/v2 testimony).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import QFormatsError
from ...findings import Finding, finding, from_error
from .checks import LayerDims, check_g_idx, checked_tensors, g_idx_findings, is_trivial_g_idx
from .evidence import LabelEvidence, label_evidence, reader_disagreements
from .moments import checked_moments
from .quirks import READERS

__all__ = ["layer_findings"]


def layer_findings(name: str, layer: Any, *, bits: int, group_size: int | None, declared: str,
                   desc_act: bool, sym: bool | None = None, deep: bool = False) -> tuple[list[Finding], dict[str, Any]]:
    """Every GPTQ check of one layer: structure, g_idx, label evidence, v1 zero underflow.

    Returns the findings (codes of spec/gptq.md) and a summary row for ``inspect``. Structural
    errors come back as error findings rather than exceptions, so a validator reports every
    layer of a checkpoint in one pass. ``deep`` adds the decode's statistics to the row
    (GPTQ-3.7) when the layer has no error.
    """
    try:
        return _layer_findings(name, layer, bits, group_size, declared, desc_act, sym, deep)
    except QFormatsError as err:
        return [from_error(_with_counts(err, layer).within(name))], {"layer": name, "format": f"gptq_{declared or 'v1'}",
                                                                     "bits": bits}


def _with_counts(err: QFormatsError, layer: Any) -> QFormatsError:
    """A non-finite error names its first value; add how many NaN, +inf and -inf the tensor holds (QF-2.4)."""
    if not err.code.endswith("nonfinite") or not err.tensor:
        return err
    try:
        arr = np.asarray(layer[err.tensor.rsplit(".", 1)[-1]])
    except (KeyError, TypeError, ValueError, IndexError):
        return err
    if arr.dtype.kind != "f":
        return err
    kinds = ((int(np.count_nonzero(np.isnan(arr))), "NaN"), (int(np.count_nonzero(arr == np.inf)), "+inf"),
             (int(np.count_nonzero(arr == -np.inf)), "-inf"))
    if sum(n for n, _ in kinds) < 2:
        return err                       # the one value is named already
    said = ", ".join(f"{n:,} {what}" for n, what in kinds if n)
    counted = f"{said} of {arr.size:,} values"
    message = f"{err.message[:-1]}; in all {counted})" if err.message.endswith(")") else f"{err.message} ({counted})"
    return QFormatsError(err.code, message, tensor=err.tensor, constraint=err.constraint, actual=err.actual,
                         clause=err.clause, file=err.file)


def _layer_findings(name: str, layer: Any, bits: int, group_size: int | None, declared: str | None, desc_act: bool,
                    sym: bool | None, deep: bool) -> tuple[list[Finding], dict[str, Any]]:
    dims, t = checked_tensors(layer, bits, group_size)
    check_g_idx(t["g_idx"], dims.n_groups, dims.group_size)
    findings = g_idx_findings(t["g_idx"], dims.group_size, desc_act=desc_act, tensor=f"{name}.g_idx")
    evidence = label_evidence(t["qzeros"], bits, qweight=t["qweight"], g_idx=t["g_idx"], sym=sym)
    if declared is None:     # no config, no label (CKPT-4.3): read as the zeros say, v1 when they cannot tell
        declared = evidence.verdict if evidence.verdict in ("v1", "v2") else "v1"
    elif evidence.verdict not in (declared, "undetermined"):
        fix = (f"qformats convert PATH --to {'gptq_v2' if evidence.verdict == 'v2' else 'gptq'} "
               f"--source-version {evidence.verdict} -o OUT")
        findings.append(finding("gptq.label.mismatch", "error",
                                f"declared {declared} but the zeros say {evidence.verdict}: {evidence.detail}; "
                                f"readers that use qzeros (vLLM gptq_gemm, AutoGPTQ, exllama) decode it wrongly (fix: {fix})",
                                tensor=f"{name}.qzeros"))
    if declared == "v1" and evidence.all_ones_fields:
        findings.append(_underflow_finding(name, t, bits, dims.group_size, evidence))
    summary = {
        "layer": name, "format": f"gptq_{declared}", "bits": bits, "group_size": dims.group_size,
        "in_features": dims.in_features, "out_features": dims.out_features,
        "g_idx": "trivial" if is_trivial_g_idx(t["g_idx"], dims.group_size) else "act-order",
        "evidence": evidence.verdict, "evidence_method": evidence.method,
        "bits_per_weight": _bits_per_weight(dims, bits),
    }
    if deep and not any(f.severity == "error" for f in findings):
        summary.update(checked_moments(t, bits=bits, version=declared).row())
    return findings, summary


# What each writer signature (GPTQ-8.5) means, for a reader of the finding.
SIGNATURE_MEANING = {
    "autogptq-or-bleed": "AutoGPTQ's OR-bleed: all-ones fields run to the top of their word, so the zero points "
                         "above each zero point 0 were overwritten and are lost",
    "masked or borrow": "no bleed: a masked writer or GPTQModel's word borrow, whose zero points 0 are recoverable "
                        "by that writer's own reader",
}


def _underflow_finding(name: str, t: Mapping[str, np.ndarray], bits: int, group_size: int,
                       evidence: LabelEvidence) -> Finding:
    """GPTQ-3.4: count this layer's all-ones v1 fields, name the writer signature, the readers' damage and the fix."""
    counts = reader_disagreements(t["qweight"], t["qzeros"], t["scales"], t["g_idx"], bits=bits,
                                  version="v1", group_size=group_size)
    # Marlin ignores qzeros and the legacy-int3 reader equals gptqmodel below 3 bits: neither adds news.
    relevant = {r: n for r, n in counts.items() if not READERS[r].fixed_zero and (r != "gptqmodel_legacy_int3" or bits == 3)}
    wrong = ", ".join(f"{reader} {n}" for reader, n in relevant.items() if n) or "none"
    writer = next((s for s in evidence.signatures if s != "all-ones-fields"), "masked or borrow")
    if writer == "autogptq-or-bleed":
        fix = ("requantize and save as checkpoint_format gptq_v2 (no reading restores the overwritten zero "
               "points); qformats conformance checkpoint PATH says which weights each reader gets right")
    else:
        wrap = "gptqmodel" if bits == 3 else "autogptq_cuda_old"
        fix = (f"qformats convert PATH --to gptq_v2 --reader gptqmodel -o OUT if GPTQModel wrote it, "
               f"--reader {wrap} if a masked writer did (qformats conformance checkpoint PATH names the writer)")
    fields = "field is" if evidence.all_ones_fields == 1 else "fields are"
    return finding("gptq.zero.v1_unrepresentable", "error",
                   f"in '{name}' {evidence.all_ones_fields} v1 zero {fields} all ones ({(1 << bits) - 1}), i.e. "
                   f"zero point 0, which v1 cannot represent; writer signature (the byte pattern a known writer "
                   f"leaves, GPTQ-8.5): {writer}, {SIGNATURE_MEANING.get(writer, writer)}; this layer's weights "
                   f"that differ from the masked reading of zero 0, per reader: {wrong}\n"
                   f"fix: {fix}", tensor=f"{name}.qzeros", count=evidence.all_ones_fields)


def _bits_per_weight(dims: LayerDims, bits: int) -> float:
    """Stored bits per weight, statistics and g_idx included."""
    k, n, g = dims.in_features, dims.out_features, dims.n_groups
    total = k * n * bits + g * n * (bits + 16) + 32 * k
    return round(total / (k * n), 4)
