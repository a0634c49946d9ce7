"""What a conformance run was, recorded beside its verdicts: the suite and its cases, the subject and the
library it judges, the machine (issue #21: runs as data, the wpt.fyi / test262.report pattern).

    doc = run_document(result, device="cuda", declaration=decl)
    doc["suite"]        # {"name", "version", "spec_version", "commit", "dirty", "cases_sha256", "manifest_sha256", ...}
    doc["subject_info"] # {"entry", "module", "function", "package", "library", "declaration"}
    doc["environment"]  # {"platform", "machine", "cpu", "python", "numpy", "torch", "device", "finished"}
    doc["case_info"]    # {case id: {"features", "expect", "source"}}

Nothing here imports the subject: it runs in its own process (conformance/subject.py), so its
package is found by name (``importlib.metadata``), never by import. The versions are those of this
interpreter, which is the one the subject process runs in.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from qformats import SPEC_VERSION, __version__
from qformats.cases import Case, case_digest
from qformats.formats.registry import subject_format

from .catalog import DIGESTS, THIRD_PARTY
from .runner import RunResult, select_cases
from .subject import SubjectDeclaration

__all__ = ["run_document", "checkout_commit", "suite_info", "subject_info", "environment", "case_info", "ADAPTED"]

ROOT = Path(__file__).resolve().parents[1]
# qformats' own adapters judge another project's code: the distribution each one calls
ADAPTED = {"conformance.adapters.gptqmodel": "gptqmodel", "conformance.adapters.gguf_py": "gguf",
           "conformance.adapters.compressed_tensors": "compressed-tensors", "conformance.adapters.bnb": "bitsandbytes",
           "conformance.adapters.transformers_bnb": "transformers", "conformance.adapters.ct_fp8": "compressed-tensors",
           "conformance.adapters.transformers_fp8": "transformers", "conformance.adapters.ct_fp4": "compressed-tensors",
           "conformance.adapters.transformers_mxfp4": "transformers", "conformance.adapters.modelopt_fp4": "nvidia-modelopt"}
GGML_ADAPTER = "conformance.adapters.ggml"      # a C library named by QFORMATS_GGML_LIB, no distribution
AUTOAWQ_ADAPTER = "conformance.adapters.autoawq"  # modules from an unpacked sdist (QFORMATS_AUTOAWQ_SRC), not installed


def _sha256_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@lru_cache(maxsize=1)
def _git() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout this package runs from; (None, None) in an installed wheel."""
    if not (ROOT / ".git").exists():
        return None, None
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20)
        status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None, None
    if head.returncode != 0:
        return None, None
    return head.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None


def checkout_commit() -> tuple[str | None, bool | None]:
    """(``git rev-parse HEAD``, modified) of the checkout this package runs from; (None, None) without git
    (an installed wheel, git missing): the results page compares its runs' commits with it."""
    return _git()


def _ran(result: RunResult) -> list[Case]:
    """The cases of the run, regenerated (their bytes and tags; the result holds only ids)."""
    ran = {c.id for c in result.cases}
    return [c for c in select_cases(result.format, result.op) if c.id in ran]


def suite_info(result: RunResult, cases: list[Case] | None = None) -> dict[str, Any]:
    """The suite version and digests that tie the run to exact case bytes: ``cases_sha256`` over this run's
    case ids and the sha256 of each case's canonical bytes, ``manifest_sha256`` of the pinned digests of
    every reference-made case, ``vectors_sha256`` of the format's shipped real-tool vectors."""
    lines = [f"{c.id} {case_digest(c)}" for c in (_ran(result) if cases is None else cases)]
    commit, dirty = _git()
    face = subject_format(result.format)
    return {"name": "qformats", "version": __version__, "spec_version": SPEC_VERSION, "commit": commit,
            "dirty": dirty, "cases": len(lines),
            "cases_sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest(),
            "manifest_sha256": _sha256_file(DIGESTS),
            "vectors_sha256": _sha256_file(THIRD_PARTY / f"{face.name}.safetensors")}


def _distribution(module: str) -> dict[str, str] | None:
    """The installed distribution that provides ``module``'s top-level package, by name only."""
    names = metadata.packages_distributions().get(module.split(".")[0]) or []
    for name in dict.fromkeys(names):
        try:
            return {"name": name, "version": metadata.version(name)}
        except metadata.PackageNotFoundError:
            continue
    return None


def _ggml_library() -> dict[str, str] | None:
    path = os.environ.get("QFORMATS_GGML_LIB")
    if not path:
        return None
    try:
        from .adapters.ggml import Library

        version, commit = Library(path).version()
    except (OSError, AttributeError) as exc:
        return {"name": "ggml", "version": None, "path": path, "problem": str(exc)[:200]}
    return {"name": "ggml", "version": version, "commit": commit, "path": path}


def _autoawq_library() -> dict[str, str] | None:
    """AutoAWQ's name and version from the PKG-INFO of the sdist the adapter imports from."""
    given = os.environ.get("QFORMATS_AUTOAWQ_SRC")
    folders = [Path(given)] if given else sorted((ROOT / ".venv" / "real" / "src").glob("autoawq-*"))
    for folder in folders:
        try:
            fields = dict(line.split(": ", 1) for line in (folder / "PKG-INFO").read_text().splitlines()[:12] if ": " in line)
        except OSError:
            continue
        return {"name": fields.get("Name", "autoawq"), "version": fields.get("Version"), "path": str(folder)}
    return {"name": "autoawq", "version": None}


def _library(module: str, package: dict[str, str] | None) -> dict[str, str] | None:
    """The library under judgement: the one a qformats adapter calls, else the subject's own package."""
    if module == GGML_ADAPTER:
        return _ggml_library()
    if module == AUTOAWQ_ADAPTER:
        return _autoawq_library()
    if module in ADAPTED:
        try:
            return {"name": ADAPTED[module], "version": metadata.version(ADAPTED[module])}
        except metadata.PackageNotFoundError:
            return {"name": ADAPTED[module], "version": None}
    if module.split(".")[0] in ("conformance", "qformats", "reference_kernels"):
        return {"name": "qformats", "version": __version__, "role": module}
    return package


def subject_info(entry: str, declaration: SubjectDeclaration | None = None) -> dict[str, Any]:
    module, _, function = entry.partition(":")
    package = _distribution(module)
    declared = None if declaration is None else declaration.model_dump(mode="json")
    return {"entry": entry, "module": module, "function": function, "package": package,
            "library": _library(module, package), "declaration": declared}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cuda_name(device: str) -> str | None:
    """The GPU's name, asked of torch in a child process so that this one never initialises CUDA."""
    index = device.partition(":")[2] or "0"
    code = f"import torch; print(torch.cuda.get_device_name({int(index)}))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@lru_cache(maxsize=4)
def _device(device: str | None) -> dict[str, Any]:
    if device is None:
        return {"arrays": "numpy", "kind": "cpu", "name": _cpu_name()}
    if device == "cpu":
        return {"arrays": "torch", "kind": "cpu", "name": _cpu_name()}
    return {"arrays": "torch", "kind": "cuda", "index": device, "name": _cuda_name(device)}


def environment(device: str | None = None) -> dict[str, Any]:
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": _cpu_name(),
            "python": platform.python_version(), "python_implementation": platform.python_implementation(),
            "numpy": np.__version__, "torch": _version("torch"), "device": _device(device),
            "finished": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def case_info(result: RunResult, cases: list[Case] | None = None) -> dict[str, dict[str, Any]]:
    """Per case of the run: its feature tags, expectation and provenance (the page's rows and filters)."""
    return {c.id: {"features": list(c.features), "expect": c.expect,
                   "source": c.provenance.get("source", "qformats-reference")}
            for c in (_ran(result) if cases is None else cases)}


def run_document(result: RunResult, *, device: str | None = None,
                 declaration: SubjectDeclaration | None = None) -> dict[str, Any]:
    """``result.as_json()`` (the DESIGN.md §6 keys, and the level when the runner reports one) with the
    run's provenance beside it."""
    doc, cases = result.as_json(), _ran(result)
    doc.update({"schema": "qformats-conformance-run/1", "suite": suite_info(result, cases),
                "subject_info": subject_info(result.subject, declaration), "environment": environment(device),
                "case_info": case_info(result, cases)})
    return doc
