"""The real-library FP4 fixtures (fixtures/third_party/fp4) and byte-level corruptions of copies of them."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "fp4"
CHECKPOINTS = ROOT / "checkpoints"
EXPECTED = ROOT / "expected"


def read_st(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    """name -> (dtype, shape, raw bytes) of a safetensors file, by its header (ST-2)."""
    blob = path.read_bytes()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {k: (v["dtype"], v["shape"], blob[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in header.items()}


def write_st(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    header, data, at = {}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        data += raw
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def corrupted(tmp_path: Path, checkpoint: str, edits: dict[str, object]) -> Path:
    """A copy of ``checkpoint`` with tensors replaced: name -> None (removed), a (dtype, shape, bytes) triple,
    or a function of the stored uint8 bytes (a NumPy array) returning new bytes of the same size."""
    out = tmp_path / checkpoint
    shutil.copytree(CHECKPOINTS / checkpoint, out)
    st = out / "model.safetensors"
    tensors = read_st(st)
    for name, edit in edits.items():
        if edit is None:
            del tensors[name]
        elif callable(edit):
            dtype, shape, raw = tensors[name]
            tensors[name] = (dtype, shape, np.asarray(edit(np.frombuffer(raw, np.uint8).copy()), np.uint8).tobytes())
        else:
            tensors[name] = edit
    write_st(st, tensors)
    return out


def expected(checkpoint: str) -> dict[str, np.ndarray]:
    """The library's own decoded weights (bfloat16 widened exactly to float32)."""
    out = {}
    for name, (dtype, shape, raw) in read_st(EXPECTED / f"{checkpoint}.safetensors").items():
        assert dtype == "BF16"
        bits = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
        out[name] = bits.view(np.float32).reshape(shape)
    return out


def f32(value: float) -> bytes:
    return np.float32(value).tobytes()
