"""q4_K tensors of a GGUF file: checked, summarised and decoded (spec/q4_k.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import QFormatsError
from ...findings import Finding, from_error
from ...layers import Progress, decode_stats, tick
from ...stats import Moments
from .checks import check_blocks
from .codec import dequantize
from .layout import BLOCK_BYTES, QK_K

__all__ = ["GGUF_TYPES", "check_gguf", "decode_gguf"]

GGUF_TYPES = ("Q4_K",)


def check_gguf(ckpt: Any, deep: bool, progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    infos = list(ckpt.gguf.tensors)
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for i, info in enumerate(infos):
        tick(progress, i, len(infos), info.name)
        if info.type_name not in GGUF_TYPES:
            continue
        blocks = ckpt.gguf.tensor_rows(info.name)
        try:
            check_blocks(blocks, tensor=info.name)
        except QFormatsError as err:  # checked and found wrong: a row with its finding, not "nothing checked"
            findings.append(from_error(err))
            rows.append({"layer": info.name, "format": "q4_k", "bits": 4})
            continue
        n = blocks.shape[1] // BLOCK_BYTES * QK_K
        row = {"layer": info.name, "format": "q4_k", "bits": 4, "group_size": 32, "in_features": n,
               "out_features": blocks.shape[0], "bits_per_weight": BLOCK_BYTES * 8 / QK_K}
        if deep:
            row.update(decode_stats(info.name, Moments.of(dequantize(blocks)), findings))
        rows.append(row)
    return rows, findings


def decode_gguf(ckpt: Any, name: str) -> np.ndarray:
    return dequantize(ckpt.gguf.tensor_rows(name))
