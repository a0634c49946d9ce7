"""``qformats conformance checkpoint PATH``: validate, then tell which real readers decode it correctly.

For every GPTQ layer, the reference values are what the writer meant: the spec reading of the
zeros under their true version (the label, or what the zeros say when they contradict it,
GPTQ-8.3), with a v1 all-ones field read as the intended zero 0 (GPTQ-3.4), unless AutoGPTQ's OR-bleed has
overwritten its neighbours (GPTQ-4.1), when no reading can be called right. Every emulated real
reader (spec/gptq.md GPTQ-4.2) is then told what the checkpoint's config tells it, and its decode is
compared weight by weight: "vllm_gptq_gemm: wrong in 37 weights of model.layers.3.mlp.up_proj".
Formats without emulated readers (SpQR, q4_K) get the validator's verdict for the spec reader only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qformats import bits as bitpack
from qformats.containers.checkpoint import open_checkpoint
from qformats.errors import QFormatsError
from qformats.formats import gptq
from qformats.formats.gptq.cases import logical_weight
from qformats.formats.gptq.evidence import label_evidence
from qformats.formats.gptq.layout import modules_params, parse_config
from qformats.formats.gptq.quirks import READERS
from qformats.validate import group_layers, load_layer, validate

__all__ = ["check_checkpoint", "to_text"]


def _intended(t: dict[str, np.ndarray], bits: int, version: str) -> np.ndarray:
    """The weight the writer meant: Z = f (v2) or (f + 1) mod 2^b (v1), exactly ``s * (q - Z)``."""
    n = t["scales"].shape[1]
    fields = bitpack.unpack(t["qzeros"], bits, axis=1)[:, :n].astype(np.int64)
    zeros = fields if version == "v2" else (fields + 1) & ((1 << bits) - 1)
    codes = bitpack.unpack(t["qweight"], bits, axis=0)
    return logical_weight(codes, zeros, t["scales"], t["g_idx"])


def _gptq_rows(path: str) -> list[dict[str, Any]]:
    rows = []
    with open_checkpoint(path) as ckpt:
        layers = [g for g in group_layers(ckpt.tensor_names())[0] if g.format == "gptq"]
        if not layers or ckpt.config is None:
            return rows
        config = parse_config(ckpt.config)[0]
        params = modules_params(config, [g.name for g in layers])
        for group in layers:
            t = load_layer(ckpt, group)
            p = params[group.name]
            if p.excluded_by or "g_idx" not in t:
                continue
            evidence = label_evidence(t["qzeros"], p.bits, qweight=t["qweight"], g_idx=t["g_idx"], sym=p.sym)
            truth = evidence.verdict if evidence.verdict in ("v1", "v2") else p.version
            try:
                reference = _intended(t, p.bits, truth)
            except QFormatsError:
                continue                            # structurally broken: the validator reports it
            row = {"layer": group.name, "declared": p.version, "zeros_say": truth, "readers": {}}
            if "autogptq-or-bleed" in evidence.signatures:   # GPTQ-4.1: the meant zeros are gone
                row["readers"] = {name: {"status": "unknowable", "detail": "AutoGPTQ's OR-bleed overwrote the "
                                         "neighbours of its zero-0 fields; no reading recovers the meant weights"}
                                  for name in READERS}
                rows.append(row)
                continue
            for name in READERS:
                try:
                    got = np.ascontiguousarray(gptq.dequantize(t, bits=p.bits, version=p.version, reader=name,
                                                               group_size=p.group_size))
                except QFormatsError as err:
                    row["readers"][name] = {"status": "cannot read", "detail": err.constraint or str(err)}
                    continue
                wrong = int(np.count_nonzero(got != reference))
                row["readers"][name] = {"status": "wrong" if wrong else "correct", "wrong_weights": wrong}
            rows.append(row)
    return rows


def _summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for name, reader in READERS.items():
        per = [(r["layer"], r["readers"][name]) for r in rows]
        wrong = [(layer, v["wrong_weights"]) for layer, v in per if v["status"] == "wrong"]
        cannot = [(layer, v["detail"]) for layer, v in per if v["status"] == "cannot read"]
        lost = [layer for layer, v in per if v["status"] == "unknowable"]
        verdict = "wrong" if wrong else "cannot read" if cannot else "unknowable" if lost else "correct"
        table[name] = {"description": reader.description, "verdict": verdict,
                       "layers_correct": sum(v["status"] == "correct" for _, v in per),
                       "layers_wrong": len(wrong), "layers_unreadable": len(cannot), "layers_unknowable": len(lost),
                       "wrong_weights": sum(n for _, n in wrong),
                       "worst": [{"layer": layer, "wrong_weights": n} for layer, n in sorted(wrong, key=lambda x: -x[1])[:3]],
                       "unreadable_because": cannot[0][1] if cannot else None}
    return table


def check_checkpoint(path: str) -> dict[str, Any]:
    """The validator's verdict and, for GPTQ, the per-reader compatibility table (JSON-ready)."""
    report = validate(path)
    rows = _gptq_rows(path) if "gptq" in report.format.split("+") else []
    return {"path": str(path), "verdict": report.verdict, "format": report.format,
            "errors": report.summary["errors"], "warnings": report.summary["warnings"],
            "finding_codes": sorted({f.code for f in report.findings}),
            "readers": _summarise(rows) if rows else {}, "layers": rows}


def to_text(table: dict[str, Any]) -> str:
    lines = [f"{table['path']}: {table['verdict'].upper()} ({table['format']}, {table['errors']} errors, "
             f"{table['warnings']} warnings; qformats validate for the findings)"]
    if not table["readers"]:
        lines.append("no emulated real readers for this format: the spec reader's verdict is the validator's")
        return "\n".join(lines) + "\n"
    lines.append(f"real readers, told what the config says, on {len(table['layers'])} GPTQ layers:")
    for name, row in table["readers"].items():
        if row["verdict"] == "correct":
            what = f"correct in all {row['layers_correct']} layers"
        elif row["verdict"] == "wrong":
            worst = row["worst"][0]
            what = (f"wrong in {row['wrong_weights']} weights of {row['layers_wrong']} layers "
                    f"(worst {worst['wrong_weights']} in {worst['layer']})")
        elif row["verdict"] == "cannot read":
            what = f"cannot read it ({row['unreadable_because']})"
        else:
            what = f"unknowable in {row['layers_unknowable']} layers (zero-0 fields overwritten by the writer)"
        if row["verdict"] != "unknowable" and row["layers_unknowable"]:
            what += f"; {row['layers_unknowable']} layers unknowable"
        lines.append(f"  {name:24s} {what}")
    return "\n".join(lines) + "\n"
