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
import zlib
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


# llama-quantize file types: (name, uses the imatrix, source model). The i-quants below 4 bits need an
# imatrix (llama-quantize refuses them without); four others are written both ways. Sources (SOURCES):
# the F32 model, the same model stored as F16, and a mixture-of-experts variant for MXFP4_MOE.
FILE_TYPES = [
    ("Q4_0", False, "f32"), ("Q4_1", False, "f32"), ("Q5_0", False, "f32"), ("Q5_1", False, "f32"),
    ("Q8_0", False, "f32"), ("Q2_K", False, "f32"), ("Q3_K_S", False, "f32"), ("Q3_K_M", False, "f32"),
    ("Q3_K_L", False, "f32"), ("Q4_K_S", False, "f32"), ("Q4_K_M", False, "f32"), ("Q5_K_S", False, "f32"),
    ("Q5_K_M", False, "f32"), ("Q6_K", False, "f32"), ("IQ4_NL", False, "f32"), ("IQ4_XS", False, "f32"),
    ("IQ2_XXS", True, "f32"), ("IQ2_XS", True, "f32"), ("IQ2_M", True, "f32"), ("IQ3_XXS", True, "f32"),
    ("IQ3_S", True, "f32"), ("IQ1_S", True, "f32"), ("IQ1_M", True, "f32"),
    ("Q4_0", True, "f32"), ("Q4_K_M", True, "f32"), ("Q2_K", True, "f32"), ("IQ4_XS", True, "f32"),
    ("TQ1_0", False, "f32"), ("TQ2_0", False, "f32"), ("MXFP4_MOE", False, "moe"),
    ("Q4_K_M", False, "f16"), ("Q8_0", False, "f16"), ("Q6_K", False, "f16"),
    ("Q1_0", False, "f32"), ("Q2_0", False, "f32"),
    # NVFP4 is no llama-quantize file type (0.25.3: "invalid ftype"), only a per-tensor override
    ("Q8_0 --tensor-type attn_q=nvfp4 --tensor-type ffn_up=nvfp4", False, "f32"),
]
SOURCES = {"f32": {}, "f16": {"f16": True}, "moe": {"experts": 4}}


def file_id(file_type: str, with_imatrix: bool, source: str = "f32") -> str:
    return f"{file_type}{'+imatrix' if with_imatrix else ''}{'' if source == 'f32' else ' from ' + source.upper()}"


def build_dir() -> Path:
    return Path(LLAMA).resolve()


def tool(name: str) -> Path:
    for sub in ("bin", "build/bin"):
        path = build_dir() / sub / name
        if path.is_file():
            return path
    raise FileNotFoundError(f"{name} not found under {build_dir()} (bin/ or build/bin/)")


def run(args: list, timeout: int = 300) -> subprocess.CompletedProcess:
    """One llama.cpp tool, its whole log captured (log_drain.c is preloaded)."""
    env = dict(os.environ, LD_PRELOAD=str(log_drain()))
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, errors="replace", timeout=timeout,
                          env=env)


@functools.lru_cache(maxsize=1)
def log_drain() -> Path:
    """log_drain.c built once per process with the C compiler that built llama.cpp's tools."""
    out = workdir() / "log_drain.so"
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc or gcc) to build tests/llama_cpp/log_drain.c")
    source = Path(__file__).with_name("log_drain.c")
    proc = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(out), str(source), "-ldl"],
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"building {source.name} failed:\n{proc.stderr[-3000:]}")
    return out


@functools.lru_cache(maxsize=1)
def workdir() -> Path:
    """One temporary folder per process, removed at exit unless QFORMATS_LLAMA_KEEP is set."""
    path = Path(tempfile.mkdtemp(prefix="qformats-llama-"))
    if not os.environ.get("QFORMATS_LLAMA_KEEP"):
        atexit.register(shutil.rmtree, path, True)
    return path


@functools.lru_cache(maxsize=None)
def source_model(source: str = "f32") -> Path:
    """The tiny model (tiny_model.py) as llama-quantize's input: ``f32``, ``f16`` or ``moe`` (SOURCES)."""
    path = workdir() / f"tiny-{source}.gguf"
    tiny_model.write(path, seed=0, **SOURCES[source])
    return path


def f32_model() -> Path:
    return source_model("f32")


@functools.lru_cache(maxsize=None)
def f32_tensors(source: str = "f32") -> dict[str, np.ndarray]:
    """Name -> the source's weights as float32 rows: what llama-quantize feeds its encoders (F16 weights
    widened exactly to float32 first)."""
    import gguf

    reader = gguf.GGUFReader(str(source_model(source)))
    return {t.name: np.array(t.data).astype(np.float32).reshape(-1, int(t.shape[0])) for t in reader.tensors}


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
    """llama.cpp's own ggml (0.25.3), loaded once; its version is asserted so a changed pin is seen."""
    from conformance.adapters.ggml import Library

    lib = Library(tool("libggml-base.so"))
    assert lib.version()[0] == "0.25.3", lib.version()
    return lib


def seeded_rng(*key) -> np.random.Generator:
    """A generator seeded by ``key``'s repr: the same rows on every machine and run."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


@functools.lru_cache(maxsize=None)
def quantized_file(file_type: str, with_imatrix: bool, source: str = "f32") -> tuple[Path, subprocess.CompletedProcess]:
    """llama-quantize SOURCE OUT FTYPE; ``file_type`` may carry options after the type (``Q8_0 --tensor-type
    attn_q=nvfp4``), passed before the paths."""
    ftype, *options = file_type.split()
    stem = "_".join([ftype] + [o.split("=")[-1] for o in options if "=" in o])
    out = workdir() / f"tiny-{stem}{'-imatrix' if with_imatrix else ''}-{source}.gguf"
    args = [tool("llama-quantize")] + options
    if with_imatrix:
        args += ["--imatrix", imatrix_file()]
    proc = run(args + [source_model(source), out, ftype, 2])
    return out, proc


def load_and_eval(path: Path, check_tensors: bool = True) -> subprocess.CompletedProcess:
    """llama-completion: load (with --check-tensors), evaluate a short prompt, sample one token."""
    args = [tool("llama-completion"), "-m", path, "-p", "the old man", "-n", 1, "-c", 64, "-t", 2,
            "--temp", 0, "-no-cnv", "--no-warmup", "--seed", 0]
    if check_tensors:
        args.append("--check-tensors")
    return run(args, timeout=120)


