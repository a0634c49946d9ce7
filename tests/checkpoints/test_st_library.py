"""Cross-check against the safetensors library (0.8.0): same verdicts, tensors, dtypes, shapes, bytes.

The library is an independent implementation of the same format (Rust, serde_json). Where
spec/checkpoints.md says qformats is stricter, the difference is listed here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import safetensors
from safetensors import safe_open

import st_builder as sb
from qformats.containers.safetensors import open_tensor, read_header, read_header_bytes
from qformats.errors import QFormatsError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ST_DIR = FIXTURES / sb.FIXTURE_DIR
GOLDEN = sorted(str(p.relative_to(FIXTURES)) for p in (FIXTURES / "third_party").rglob("*.safetensors"))

# spec/checkpoints.md ST-2.5, ST-2.6: the library keeps the last duplicate silently; we reject.
STRICTER = {"name_duplicate", "metadata_duplicate_key"}
FILE_CASES = [name for name, (fn, *_r) in sb.CASES.items() if not name.startswith("sharded")]


def _library_accepts(blob: bytes) -> bool:
    try:
        safetensors.deserialize(blob)
    except Exception:  # noqa: BLE001 - the library raises SafetensorError (and others); any means "rejected"
        return False
    return True


@pytest.mark.parametrize("name", FILE_CASES)
def test_verdict_matches_library(name):
    """ST-1..ST-4: we accept a fixture iff the safetensors library does, except the documented stricter cases."""
    blob = sb.CASES[name][0]()
    try:
        read_header_bytes(blob)
        ours = True
    except QFormatsError:
        ours = False
    assert ours == (_library_accepts(blob) and name not in STRICTER)


@pytest.mark.parametrize("name", sorted(STRICTER))
def test_stricter_cases_are_accepted_by_library(name):
    """The stricter list is not stale: the library really does accept these files."""
    assert _library_accepts(sb.CASES[name][0]())


def _same_as_library(path: Path) -> int:
    header = read_header(path)
    lib = {name: view for name, view in safetensors.deserialize(path.read_bytes())}
    assert set(header.tensors) == set(lib)
    for name, info in header.tensors.items():
        view = lib[name]
        assert (info.dtype, list(info.shape)) == (view["dtype"], list(view["shape"]))
        assert open_tensor(header, name).tobytes() == bytes(view["data"])
    with safe_open(str(path), framework="numpy") as f:
        assert (f.metadata() or None) == header.metadata
        assert sorted(f.keys()) == sorted(header.tensors)
    return len(lib)


@pytest.mark.parametrize("name", [n for n in FILE_CASES if sb.CASES[n][1] is None])
def test_valid_fixture_tensors_match_library(name):
    """A valid file yields the library's tensors: names, dtypes, shapes, bytes and __metadata__."""
    assert _same_as_library(ST_DIR / f"{name}.safetensors") >= 1


@pytest.mark.parametrize("rel", GOLDEN)
def test_golden_file_tensors_match_library(rel):
    """Third-party files (GPTQModel, AutoGPTQ, spqr_quant writers) read identically to the library."""
    assert _same_as_library(FIXTURES / rel) >= 1


def _numpy_typed(rel: str) -> bool:
    """Files whose every dtype safetensors' NumPy framework returns (it has no bfloat16 or float8 dtype)."""
    return all(not t.dtype.startswith(("BF16", "F8")) for t in read_header(FIXTURES / rel).tensors.values())


@pytest.mark.parametrize("rel", [rel for rel in GOLDEN if _numpy_typed(rel)][:3])
def test_numpy_values_match_library(rel):
    """open_tensor's typed arrays equal safe_open(framework="numpy").get_tensor for every tensor."""
    path = FIXTURES / rel
    header = read_header(path)
    with safe_open(str(path), framework="numpy") as f:
        for name in f.keys():
            ours = open_tensor(header, name)
            np.testing.assert_array_equal(ours, f.get_tensor(name), strict=True)
