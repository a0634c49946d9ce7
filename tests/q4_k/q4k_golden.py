"""Loader for the third-party llama.cpp q4_K golden set in fixtures/third_party/llama.cpp/q4_k/."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "llama.cpp" / "q4_k"

# importance_input_f32.npy: "row i has distribution kind i % 8" (golden_manifest.json)
IMPORTANCE_KINDS = ("gaussian", "gaussian-outliers", "all-positive", "all-negative", "laplace", "student-t",
                    "mixed-magnitude", "quarter-step-grid")


@lru_cache(maxsize=None)
def load(name: str) -> np.ndarray:
    arr = np.load(GOLDEN_DIR / name, allow_pickle=False)
    arr.flags.writeable = False
    return arr


@lru_cache(maxsize=None)
def manifest() -> dict:
    return json.loads((GOLDEN_DIR / "golden_manifest.json").read_text())


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def main_row_ids() -> list[tuple[int, str]]:
    """(row, readable id) for the 64 rows of the main set, from the producer's descriptions."""
    return [(r["row"], f"row{r['row']:02d}-{_slug(r['category'])}-{_slug(r['description'])}")
            for r in manifest()["rows"]]


def importance_row_ids() -> list[tuple[int, str]]:
    rows = load("importance_input_f32.npy").shape[0]
    return [(r, f"imp-row{r:02d}-{IMPORTANCE_KINDS[r % 8]}") for r in range(rows)]


def bits(a: np.ndarray) -> np.ndarray:
    """float32 bit patterns, so NaN payloads and signed zeros compare exactly."""
    return np.ascontiguousarray(a, np.float32).view(np.uint32)
