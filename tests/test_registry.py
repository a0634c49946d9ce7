"""DESIGN.md §1: a format is one room. validate, decode and the runner walk the registry, so a format
registered there, and nowhere else, is grouped, checked and decoded."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from qformats.formats import registry
from qformats.layers import load_layer
from qformats.tools import decode
from qformats.validate import validate


def _toy_face() -> registry.Face:
    """A made-up format: module tensors ``toy_codes`` (uint8) and ``toy_scale``; W = scale * codes."""
    def check(ckpt, groups, deep, progress):
        rows = [{"layer": g.name, "format": "toy", "bits": 8} for g in groups]
        return rows, []

    def decode_layer(ckpt, group, **options):
        t = load_layer(ckpt, group)
        return t["toy_scale"].astype(np.float32) * t["toy_codes"].astype(np.float32), "float32"

    layers = types.SimpleNamespace(ANCHOR="toy_codes", SUFFIXES=("toy_codes", "toy_scale"), check=check,
                                   decode=decode_layer)
    return registry.Face(name="toy", subject_formats=("toy",), ops={"toy": ("dequantize",)},
                         reference_dtype="float32", w_rounding=True, kernel_keywords=(), cases=lambda: [],
                         reference=lambda case: None, layers=layers)


def test_a_format_registered_only_in_the_registry_is_validated_and_decoded(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "FACES", {**registry.FACES, "toy": _toy_face()})
    path = tmp_path / "toy.safetensors"
    save_file({"m.toy_codes": np.arange(6, dtype=np.uint8).reshape(2, 3),
               "m.toy_scale": np.full((2, 1), 0.5, np.float16)}, str(path))
    report = validate(str(path))
    assert [(row["layer"], row["format"]) for row in report.layers] == [("m", "toy")]
    decode(str(path), ["m"], str(tmp_path / "out.safetensors"))
    from safetensors.numpy import load_file
    assert load_file(str(tmp_path / "out.safetensors"))["m.weight"].tolist() == [[0, 0.5, 1], [1.5, 2, 2.5]]


def test_walkers_do_not_branch_on_format_names():
    """validate.py and the decode path name no format: per-format code lives in qformats/formats/<name>/."""
    root = Path(__file__).resolve().parents[1] / "qformats"
    text = (root / "validate.py").read_text()
    for name in ("spqr", "q4_k", "_gptq", "gptq."):
        assert name not in text.replace("gptq_marlin", ""), name
