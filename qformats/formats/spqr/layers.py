"""SpQR modules in a checkpoint: recognised by ``dense_weights``, checked, summarised, decoded (spec/spqr.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import QFormatsError
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, decode_stats, load_layer, tick
from ...stats import Moments
from . import checks
from .codec import dequantize
from .layout import TENSOR_NAMES, SpQRLayer

__all__ = ["ANCHOR", "SUFFIXES", "check", "decode"]

ANCHOR = "dense_weights"
SUFFIXES = TENSOR_NAMES


def _config(ckpt: Any) -> tuple[Any, list[Finding]]:
    if ckpt.config is None:
        return None, []
    findings = checks.config_findings(ckpt.config)
    try:
        return checks.check_config(ckpt.config), findings
    except QFormatsError as err:
        return None, findings + [from_error(err.with_file(ckpt.configs[0].file))]


def check(ckpt: Any, layers: list[LayerGroup], deep: bool,
          progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    config, findings = _config(ckpt)
    skipped = set(config.not_converted()) if config is not None else set()
    rows = []
    for i, group in enumerate(layers):
        tick(progress, i, len(layers), group.name)
        t = load_layer(ckpt, group)
        if any(group.name == s or group.name.startswith(s + ".") or f"{group.name}.weight" == s for s in skipped):
            findings.append(finding("spqr.config.shape_mismatch", "error", f"'{group.name}' is listed in "
                                    "modules_to_not_convert but holds SpQR tensors", tensor=group.name))
        try:
            layer = SpQRLayer(t, config=config, module=group.name)  # checked once, reused below
        except QFormatsError as err:
            findings.append(from_error(err.within(group.name)))
            continue
        portability = [f.model_copy(update={"tensor": ".".join(filter(None, (group.name, f.tensor)))})
                       for f in checks.portability_findings(layer)]
        findings += portability
        outliers = checks.outlier_count(layer)
        m, n = layer.m, layer.n
        row = {"layer": group.name, "format": "spqr", "bits": 3, "group_size": 16, "in_features": n,
               "out_features": m, "sparse": layer.sparse, "outliers": outliers,
               "outlier_fraction": round(outliers / (m * n), 6),
               "bits_per_weight": round(sum(a.nbytes for a in t.values()) * 8 / (m * n), 4)}
        if deep and not any(f.severity == "error" for f in portability):   # a layer in error is not decoded
            row.update(decode_stats(group.name, Moments.of(dequantize(layer)), findings))
        rows.append(row)
    return rows, findings


def decode(ckpt: Any, group: LayerGroup, *, permuted: bool = False,
           **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """float16 (out, in) in original column order, or in permuted order as spqr_quant's
    ``dequantize()`` returns it (SPQR-5.3)."""
    w = dequantize(load_layer(ckpt, group), permuted=permuted)
    order = "permuted column order (as spqr_quant's dequantize())" if permuted else "original column order"
    return w, f"float16 (out, in), {order}"
