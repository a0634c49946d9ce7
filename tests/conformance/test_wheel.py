"""An installed wheel, outside the repository, runs the whole suite offline (issue: "Done means").

The wheel is built from this checkout and pip-installed (without dependencies, without an index)
into a scratch virtual environment whose only link to ours is a .pth line naming our
site-packages for numpy, safetensors, pydantic, jsonschema and pytest; the editable install of
this checkout is not visible there. Commands run in a scratch directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    wheel = next((tmp / "dist").glob("qformats-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, capture_output=True, timeout=300)
    python = tmp / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_qformats_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    project = tmp / "project"
    project.mkdir()
    return {"python": python, "wheel": wheel, "project": project, "site": site}


def _run(scratch, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(scratch["python"]), *args], capture_output=True, text=True, cwd=scratch["project"],
                          timeout=600)


def test_the_wheel_is_what_runs(scratch):
    """qformats and conformance import from the scratch environment, not from this checkout."""
    done = _run(scratch, "-c", "import qformats, conformance; print(qformats.__file__); print(conformance.__file__)")
    assert all(line.startswith(str(scratch["site"])) for line in done.stdout.split()), done.stdout + done.stderr


def test_installed_cli_runs_the_suite(scratch):
    """`qformats conformance kernel` from the wheel: generated cases regenerate to their pinned bytes and pass."""
    qformats = scratch["python"].parent / "qformats"
    done = subprocess.run([str(qformats), "conformance", "kernel", "conformance.reference:gptq_dequantize_v1",
                           "--format", "gptq_v1", "--json"], capture_output=True, text=True, cwd=scratch["project"],
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["counts"]["pass"] == len(doc["cases"]) > 100
    assert any("third_party" in c["id"] for c in doc["cases"])


def test_installed_pytest_plugin_runs_in_a_project_without_tests(scratch):
    """The wheel's pytest11 entry point: `pytest --qformats-kernel ...` in a scratch project."""
    done = _run(scratch, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--qformats-kernel",
                "conformance.reference:q4_k_dequantize", "--qformats-format", "q4_k")
    assert done.returncode == 0, done.stdout[-2000:]
    cli = subprocess.run([str(scratch["python"].parent / "qformats"), "conformance", "kernel",
                          "conformance.reference:q4_k_dequantize", "--format", "q4_k", "--json"],
                         capture_output=True, text=True, cwd=scratch["project"], timeout=600)
    cases = len(json.loads(cli.stdout)["cases"])      # one test item per case, each passing
    assert cases > 70 and f"{cases} passed" in done.stdout, (cases, done.stdout[-500:])


def test_wheel_weight(scratch):
    """The wheel ships code, pinned digests and the real tools' vectors: under 2 MiB (about 1 MB today)."""
    assert scratch["wheel"].stat().st_size < 2 << 20
