"""Rewrite the real bitsandbytes fixture checkpoints (fixtures/third_party/bnb) with one change, for the
corruption tests: tensors are copied as raw bytes with their safetensors dtype, so nothing is re-encoded."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np

from qformats.containers.checkpoint import open_checkpoint

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "bnb"
CHECKPOINTS = ROOT / "checkpoints"
EXPECTED = ROOT / "expected"
DTYPES = {"U8": np.uint8, "I8": np.int8, "F16": np.float16, "BF16": np.uint16, "F32": np.float32}
Q = "model.layers.0.self_attn.q_proj"
O = "model.layers.0.self_attn.o_proj"


def tensors(name: str) -> dict[str, tuple[str, np.ndarray]]:
    """Every tensor of a fixture checkpoint: name -> (safetensors dtype, array; BF16 as uint16 bits)."""
    with open_checkpoint(str(CHECKPOINTS / name)) as ckpt:
        return {t: (ckpt.tensor_info(t).dtype, np.array(ckpt.tensor(t))) for t in ckpt.tensor_names()}


def write(path: Path, items: dict[str, tuple[str, np.ndarray]], config: dict[str, Any] | None) -> Path:
    """A one-file safetensors checkpoint of ``items`` (and ``config.json``) at ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in items.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(np.shape(array)), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    return path


def config(name: str) -> dict[str, Any]:
    return json.loads((CHECKPOINTS / name / "config.json").read_text())


def state_json(items: dict[str, tuple[str, np.ndarray]], module: str, kind: str) -> dict[str, Any]:
    return json.loads(items[f"{module}.weight.quant_state.bitsandbytes__{kind}"][1].tobytes())


def set_state(items: dict[str, tuple[str, np.ndarray]], module: str, kind: str, **changes: Any) -> None:
    """Rewrite one module's quant_state JSON with ``changes`` (None deletes a key)."""
    state = state_json(items, module, kind) | changes
    state = {k: v for k, v in state.items() if v is not None}
    items[f"{module}.weight.quant_state.bitsandbytes__{kind}"] = \
        ("U8", np.frombuffer(json.dumps(state).encode(), dtype=np.uint8))


def copy(tmp: Path, name: str) -> Path:
    shutil.copytree(CHECKPOINTS / name, tmp / name)
    return tmp / name
