"""Shared helpers of the llama.cpp end-to-end tests (issue 19): where the tools are, the tiny F32 model,
the importance matrix, the quantized files and one load-and-evaluate run, each made once per process
in one temporary folder.

``QFORMATS_LLAMA_CPP`` names a llama.cpp build folder (``make llama-cpp`` builds
``.venv/llama.cpp/build``): its ``bin/`` holds llama-quantize, llama-imatrix, llama-completion and the
shared libraries, ``libggml-base.so`` among them.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import tiny_model

LLAMA = os.environ.get("QFORMATS_LLAMA_CPP")
SKIP_REASON = "set QFORMATS_LLAMA_CPP to a llama.cpp build folder (make llama-cpp builds .venv/llama.cpp/build)"

TEXT = (
    "The old man looked at the water for a long time, and then he went back to the house.\n"
    "Some people think that the world is very large, but the children found it small enough to walk.\n"
    "Write the number three on every page, then read it again after the next sound of the line.\n"
    "Many animals live under the earth; they come up only once a day to find food and air.\n"
    "When the school day was over the boy asked his mother if he could go home along the river.\n"
) * 6


def build_dir() -> Path:
    return Path(LLAMA).resolve()


def tool(name: str) -> Path:
    for sub in ("bin", "build/bin"):
        path = build_dir() / sub / name
        if path.is_file():
            return path
    raise FileNotFoundError(f"{name} not found under {build_dir()} (bin/ or build/bin/)")


def run(args: list, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, errors="replace", timeout=timeout)


@functools.lru_cache(maxsize=1)
def workdir() -> Path:
    """One temporary folder per process, removed at exit unless QFORMATS_LLAMA_KEEP is set."""
    path = Path(tempfile.mkdtemp(prefix="qformats-llama-"))
    if not os.environ.get("QFORMATS_LLAMA_KEEP"):
        atexit.register(shutil.rmtree, path, True)
    return path


@functools.lru_cache(maxsize=1)
def f32_model() -> Path:
    path = workdir() / "tiny-f32.gguf"
    tiny_model.write(path, seed=0)
    return path


@functools.lru_cache(maxsize=1)
def f32_tensors() -> dict[str, np.ndarray]:
    import gguf

    reader = gguf.GGUFReader(str(f32_model()))
    return {t.name: np.array(t.data, np.float32).reshape(-1, int(t.shape[0])) for t in reader.tensors}


@functools.lru_cache(maxsize=1)
def imatrix_file() -> Path:
    """llama-imatrix on a few lines of text, written in its GGUF format."""
    text = workdir() / "calibration.txt"
    text.write_text(TEXT)
    out = workdir() / "imatrix.gguf"
    proc = run([tool("llama-imatrix"), "-m", f32_model(), "-f", text, "-o", out, "-c", 64, "-b", 64, "-ub", 64,
                "-t", 2, "--no-ppl"])
    if proc.returncode or not out.is_file():
        raise RuntimeError(f"llama-imatrix failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return out


@functools.lru_cache(maxsize=1)
def importance() -> dict[str, np.ndarray]:
    """Tensor name -> the importance vector llama-quantize passes to ggml_quantize_chunk: ``in_sum2`` divided
    in float32 by ``(float) lround(counts)`` (tools/quantize/quantize.cpp; all ones where the count is 0)."""
    import gguf

    reader = gguf.GGUFReader(str(imatrix_file()))
    sums, counts = {}, {}
    for t in reader.tensors:
        if t.name.endswith(".in_sum2"):
            sums[t.name[: -len(".in_sum2")]] = np.array(t.data, np.float32).reshape(-1)
        elif t.name.endswith(".counts"):
            counts[t.name[: -len(".counts")]] = np.array(t.data, np.float32).reshape(-1)
    out = {}
    for name, s in sums.items():
        c = np.float32(np.round(counts[name][0]))      # one matrix per tensor here (no experts)
        out[name] = (s / c).astype(np.float32) if c > 0 else np.ones_like(s)
    return out


@functools.lru_cache(maxsize=None)
def newer_ggml():
    from conformance.adapters.ggml import Library

    return Library(tool("libggml-base.so"))


def quantized_file(file_type: str, with_imatrix: bool) -> tuple[Path, subprocess.CompletedProcess]:
    out = workdir() / f"tiny-{file_type}{'-imatrix' if with_imatrix else ''}.gguf"
    args = [tool("llama-quantize")]
    if with_imatrix:
        args += ["--imatrix", imatrix_file()]
    proc = run(args + [f32_model(), out, file_type, 2])
    return out, proc


def load_and_eval(path: Path, check_tensors: bool = True) -> subprocess.CompletedProcess:
    """llama-completion: load (with --check-tensors), evaluate a short prompt, sample one token."""
    args = [tool("llama-completion"), "-m", path, "-p", "the old man", "-n", 1, "-c", 64, "-t", 2,
            "--temp", 0, "-no-cnv", "--no-warmup", "--seed", 0]
    if check_tensors:
        args.append("--check-tensors")
    return run(args, timeout=120)


