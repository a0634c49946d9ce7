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

from qformats.containers.checkpoint import open_checkpoint
from qformats.formats import registry
from qformats.validate import group_layers, validate

__all__ = ["check_checkpoint", "to_text"]


def _rows(path: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every registered format that emulates real readers contributes its modules' rows."""
    rows, readers = [], {}
    with open_checkpoint(path) as ckpt:
        groups = group_layers(ckpt.tensor_names())[0]
        for face in registry.FACES.values():
            hook = getattr(face.layers, "reader_rows", None)
            if hook is not None:
                rows += hook(ckpt, [g for g in groups if g.format == face.name])
                readers |= {name: r.description for name, r in face.layers.READERS.items()}
    return rows, readers


def _summarise(rows: list[dict[str, Any]], readers: dict[str, str]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for name, description in readers.items():
        per = [(r["layer"], r["readers"][name]) for r in rows]
        wrong = [(layer, v["wrong_weights"]) for layer, v in per if v["status"] == "wrong"]
        cannot = [(layer, v["detail"]) for layer, v in per if v["status"] == "cannot read"]
        lost = [layer for layer, v in per if v["status"] == "unknowable"]
        verdict = "wrong" if wrong else "cannot read" if cannot else "unknowable" if lost else "correct"
        table[name] = {"description": description, "verdict": verdict,
                       "layers_correct": sum(v["status"] == "correct" for _, v in per),
                       "layers_wrong": len(wrong), "layers_unreadable": len(cannot), "layers_unknowable": len(lost),
                       "wrong_weights": sum(n for _, n in wrong),
                       "worst": [{"layer": layer, "wrong_weights": n} for layer, n in sorted(wrong, key=lambda x: -x[1])[:3]],
                       "unreadable_because": cannot[0][1] if cannot else None}
    return table


def check_checkpoint(path: str) -> dict[str, Any]:
    """The validator's verdict and, for GPTQ, the per-reader compatibility table (JSON-ready)."""
    report = validate(path)
    rows, readers = _rows(path) if report.layers else ([], {})
    return {"path": str(path), "verdict": report.verdict, "format": report.format,
            "errors": report.summary["errors"], "warnings": report.summary["warnings"],
            "finding_codes": sorted({f.code for f in report.findings}),
            "readers": _summarise(rows, readers) if rows else {}, "layers": rows}


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
