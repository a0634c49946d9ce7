"""The weights compressed-tensors itself decoded for the fixtures (fixtures/third_party/compressed_tensors/expected),
as bits, and qformats' float32 weights rounded once to the same dtype."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qformats.containers.checkpoint import open_checkpoint

THIRD = Path(__file__).resolve().parents[2] / "fixtures/third_party/compressed_tensors"


def stored_bits(path: Path, tensor: str) -> tuple[np.ndarray, str]:
    """A float16 / bfloat16 tensor's bits, and its dtype (safetensors.numpy has no bfloat16)."""
    with open_checkpoint(str(path)) as ckpt:
        return np.array(ckpt.tensor(tensor)).view(np.uint16), ckpt.tensor_info(tensor).dtype


def expected_bits(name: str, module: str) -> tuple[np.ndarray, str]:
    """The library's own decode of ``module`` of fixture ``name``."""
    return stored_bits(THIRD / "expected" / f"{name}.safetensors", f"{module}.weight")


def as_bits(w: np.ndarray, dtype: str) -> np.ndarray:
    """float32 weights rounded once to the model dtype (``F16`` or ``BF16``), as bits."""
    from conformance.compare import round_bfloat16
    if dtype == "F16":
        return w.astype(np.float16).view(np.uint16)
    return (round_bfloat16(w).view(np.uint32) >> 16).astype(np.uint16)
