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
        return [from_error(err.within(name))], {"layer": name, "format": f"gptq_{declared or 'v1'}", "bits": bits}


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


def _underflow_finding(name: str, t: Mapping[str, np.ndarray], bits: int, group_size: int,
                       evidence: LabelEvidence) -> Finding:
    """GPTQ-3.4: count all-ones v1 fields and what each real reader makes of them."""
    counts = reader_disagreements(t["qweight"], t["qzeros"], t["scales"], t["g_idx"], bits=bits,
                                  version="v1", group_size=group_size)
    # Marlin ignores qzeros and the legacy-int3 reader equals gptqmodel below 3 bits: neither adds news.
    relevant = {r: n for r, n in counts.items() if not READERS[r].fixed_zero and (r != "gptqmodel_legacy_int3" or bits == 3)}
    wrong = ", ".join(f"{reader} {n}" for reader, n in relevant.items() if n) or "none"
    writer = next((s for s in evidence.signatures if s != "all-ones-fields"), "masked or borrow")
    return finding("gptq.zero.v1_unrepresentable", "error",
                   f"{evidence.all_ones_fields} v1 zero fields are all ones ({(1 << bits) - 1}), i.e. zero point 0, "
                   f"which v1 cannot represent; writer signature: {writer}; weights decoded differently from the "
                   f"intended zero 0 per reader: {wrong}", tensor=f"{name}.qzeros",
                   count=evidence.all_ones_fields)


def _bits_per_weight(dims: LayerDims, bits: int) -> float:
    """Stored bits per weight, statistics and g_idx included."""
    k, n, g = dims.in_features, dims.out_features, dims.n_groups
    total = k * n * bits + g * n * (bits + 16) + 32 * k
    return round(total / (k * n), 4)
