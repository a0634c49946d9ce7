"""Shared inputs of the audit and executor tests: the fixture checkpoints as audit units, a synthetic sharded
checkpoint (benchmarks/cluster.py's generator) and its serial ``validate --deep`` report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def fixture_units() -> list[str]:
    """The 19 sample checkpoints of fixtures/checkpoints/ (python -m qformats.samples writes the same)."""
    return sorted(str(p) for p in (FIXTURES / "checkpoints").iterdir())


def load_module(name: str, path: Path):
    """A script or another test folder's helper, imported from its file (neither is a package on the path)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module                   # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def sharded(tmp_path_factory) -> str:
    """8 layers x 7 GPTQ modules of 1024 x 1024 in 4 shards: ~0.1 s of --deep work per balanced run."""
    root = tmp_path_factory.mktemp("sharded") / "ckpt"
    load_module("qformats_bench_cluster", ROOT / "benchmarks" / "cluster.py").make_shards(root, layers=8, size=1024)
    return str(root)


@pytest.fixture(scope="session")
def serial_report(sharded) -> dict:
    """The reference: ``validate --deep --jobs 1`` of the sharded checkpoint, in this process."""
    from qformats.validate import validate

    report = validate(sharded, deep=True, jobs=1)
    assert report.verdict == "valid" and report.summary["layers"] == 56, report.summary
    return report.model_dump()


@pytest.fixture
def hub(monkeypatch):
    """The hub stand-in of tests/remote (127.0.0.1), HF_ENDPOINT pointed at it, no token (remote units)."""
    pytest.importorskip("huggingface_hub", reason="the extra qformats[hub] (make test installs it)")
    server = load_module("qformats_test_hubstub", ROOT / "tests" / "remote" / "hubstub.py").Hub().start()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    yield server
    server.stop()
