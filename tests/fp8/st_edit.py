"""Copy a real FP8 fixture checkpoint and change it: drop, replace or add tensors as raw bytes, edit its config.

Only the safetensors container is rewritten (header and byte ranges); the bytes of every tensor kept are the
real library's."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "fp8"
CHECKPOINTS = ROOT / "checkpoints"
EXPECTED = ROOT / "expected"
NP = {"F8_E4M3": np.uint8, "F8_E8M0": np.uint8, "BF16": np.uint16, "F16": np.float16, "F32": np.float32, "U8": np.uint8}


def read(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    """name -> (dtype, shape, raw bytes) of one safetensors file."""
    blob = path.read_bytes()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def write(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    header, offset, body = {}, 0, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        body += raw
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + body)


def array(entry: tuple[str, list[int], bytes]) -> np.ndarray:
    dtype, shape, raw = entry
    return np.frombuffer(raw, NP[dtype]).reshape(shape).copy()


def entry(dtype: str, a: np.ndarray) -> tuple[str, list[int], bytes]:
    return dtype, list(a.shape), np.ascontiguousarray(a.astype(NP[dtype])).tobytes()


def bf16(values) -> np.ndarray:
    """float32 values (exactly representable) as bfloat16 bits."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def copy(tmp: Path, name: str) -> Path:
    dst = tmp / name
    shutil.copytree(CHECKPOINTS / name, dst)
    return dst


def files(ckpt: Path) -> list[Path]:
    return sorted(ckpt.glob("*.safetensors"))


def edit(ckpt: Path, change) -> None:
    """``change(tensors)`` mutates the name -> entry mapping of the file holding the tensors it needs;
    applied to every shard (a change finds its tensors or leaves the shard alone)."""
    for f in files(ckpt):
        tensors = read(f)
        if change(tensors) is not False:
            write(f, tensors)


def config(ckpt: Path) -> dict:
    return json.loads((ckpt / "config.json").read_text())


def set_config(ckpt: Path, cfg: dict) -> None:
    (ckpt / "config.json").write_text(json.dumps(cfg))


def expected(name: str) -> dict[str, tuple[np.ndarray, str]]:
    """The library's decoded weights: float32 arrays holding them, and their precision."""
    out = {}
    for k, (dtype, shape, raw) in read(EXPECTED / f"{name}.safetensors").items():
        a = array((dtype, shape, raw))
        value = (a.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else a.astype(np.float32)
        out[k] = (value, {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[dtype])
    return out
