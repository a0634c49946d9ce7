"""`make matrix`: run every real library that installs here as a conformance subject, keep the runs as data,
write the results page and the README's real-library table from them (issue #21).

    python -m conformance.realruns --out build/matrix --bundle results/real_libraries.json --readme README.md \
        [--real-python .venv/real/bin/python] [--reference] [--jobs 2]

Subjects: ggml's own codecs (conformance/adapters/ggml.py, the library QFORMATS_GGML_LIB names), gguf-py
(conformance/adapters/gguf_py.py), both for q4_K and every other GGUF block type they export, and
GPTQModel's CPU path (conformance/adapters/gptqmodel.py), compressed-tensors, AutoAWQ, bitsandbytes'
CPU dequantize_4bit and int8 dequantize (conformance/adapters/bnb.py) and transformers' bitsandbytes 4-bit loader
(conformance/adapters/transformers_bnb.py), and compressed-tensors' and transformers' FP8 decoders
(conformance/adapters/ct_fp8.py, transformers_fp8.py), and the NVFP4 / MXFP4 decoders of compressed-tensors,
transformers' gpt-oss path and ModelOpt (conformance/adapters/ct_fp4.py, transformers_mxfp4.py, modelopt_fp4.py)
in the second environment `make real-subjects` builds. Each run
is `qformats conformance kernel ... --json` in the interpreter that has the library, so the recorded
versions are that interpreter's. ``--reference`` adds qformats' own reference as a
column of the page (never of the README table). A library that is not installed is left out, saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .html import page
from .matrix import readme_table, replace_section

ROOT = Path(__file__).resolve().parents[1]


def _found(module: str) -> str:
    """A probe that succeeds where ``module`` is installed, without importing it."""
    return f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"


@dataclass(frozen=True)
class Subject:
    entry: str
    format: str
    op: str
    python: str


FP8_STRATEGIES = ("tensor", "channel", "block")      # the fp8_<strategy> subject formats (KC-1.11)
# The libraries of the second environment (`make real-subjects`): name, a probe that succeeds where it is there, runs
REAL_LIBRARIES = (
    ("GPTQModel", _found("gptqmodel"), (("conformance.adapters.gptqmodel:dequantize_v1", "gptq_v1", "dequantize"),
                                ("conformance.adapters.gptqmodel:dequantize_v2", "gptq_v2", "dequantize"))),
    ("compressed-tensors", _found("compressed_tensors"),
     (("conformance.adapters.compressed_tensors:dequantize", "ctensors_pack", "dequantize"),
      ("conformance.adapters.compressed_tensors:matmul", "ctensors_pack", "matmul"),
      ("conformance.adapters.compressed_tensors:pack", "ctensors_pack", "pack"),
      *((f"conformance.adapters.ct_fp8:dequantize_{s}", f"fp8_{s}", "dequantize") for s in FP8_STRATEGIES))),
    ("AutoAWQ", "import conformance.adapters.autoawq", (("conformance.adapters.autoawq:dequantize", "awq_gemm", "dequantize"),
                                                 ("conformance.adapters.autoawq:matmul", "awq_gemm", "matmul"),
                                                 ("conformance.adapters.autoawq:pack", "awq_gemm", "pack"))),
    ("bitsandbytes", _found("bitsandbytes"), (("conformance.adapters.bnb:dequantize", "bnb_4bit", "dequantize"),
                                              ("conformance.adapters.bnb:int8_dequantize", "bnb_int8", "dequantize"))),
    ("transformers (fp8)", _found("transformers"),
     (*(("conformance.adapters.transformers_fp8:dequantize", f"fp8_{s}", "dequantize") for s in FP8_STRATEGIES),
      *((f"conformance.adapters.transformers_fp8:dequantize_backward_{s}", f"fp8_{s}", "dequantize")
        for s in FP8_STRATEGIES))),
    ("transformers", _found("transformers"),     # its bitsandbytes 4-bit loader (from_pretrained), not a kernel
     (("conformance.adapters.transformers_bnb:dequantize", "bnb_4bit", "dequantize"),)),
    # NVFP4 / MXFP4 (KC-1.12): compressed-tensors' decompressors, transformers' gpt-oss path, ModelOpt's QTensors
    ("compressed-tensors (fp4)", _found("compressed_tensors"),
     (("conformance.adapters.ct_fp4:nvfp4_dequantize", "nvfp4_packed", "dequantize"),
      ("conformance.adapters.ct_fp4:mxfp4_dequantize", "mxfp4_packed", "dequantize"))),
    ("transformers (gpt-oss mxfp4)", _found("transformers"),
     (("conformance.adapters.transformers_mxfp4:dequantize", "mxfp4_packed", "dequantize"),)),
    ("ModelOpt", _found("modelopt"),
     (("conformance.adapters.modelopt_fp4:nvfp4_dequantize", "nvfp4_packed", "dequantize"),
      ("conformance.adapters.modelopt_fp4:mxfp4_dequantize", "mxfp4_packed", "dequantize"))),
)


def _ggml_types() -> tuple[list[str], list[str]]:
    """(decoder types, encoder types) judged as GGUF block-type subjects (as tests/ggml/test_real_tools.py)."""
    from qformats.formats.ggml.cases import subject_types

    types = subject_types()
    return ([bt.name for bt in types], [bt.name for bt in types if bt.quantize is not None and not bt.requires_importance])


def _absent_from(module) -> set[str]:
    """Block types newer than the ggml library the adapter loads (BlockType.since, e.g. q2_0 from 0.25.3):
    that library has no functions for them, so they are not its subjects (spec/ggml.md's type table)."""
    from qformats.formats.ggml.cases import subject_types

    if not module.__name__.endswith(".ggml"):
        return set()
    have = tuple(int(p) for p in module.version()[0].split(".")[:3])
    return {bt.name for bt in subject_types() if bt.since and tuple(int(p) for p in bt.since.split(".")) > have}


def subjects(real_python: str | None, reference: bool) -> tuple[list[Subject], list[str]]:
    """The subjects to run, and why any library is left out."""
    from .adapters import ggml as ggml_adapter
    from .adapters import gguf_py as gguf_adapter

    out: list[Subject] = []
    skipped: list[str] = []
    py = sys.executable
    decoders, encoders = _ggml_types()

    def library(module, available: bool, why: str) -> None:
        if not available:
            skipped.append(why)
            return
        out.append(Subject(f"{module.__name__}:q4_k_dequantize", "q4_k", "dequantize", py))
        out.append(Subject(f"{module.__name__}:q4_k_quantize", "q4_k", "quantize", py))
        absent = _absent_from(module)
        out.extend(Subject(f"{module.__name__}:{name}_dequantize", name, "dequantize", py)
                   for name in decoders if hasattr(module, f"{name}_dequantize") and name not in absent)
        out.extend(Subject(f"{module.__name__}:{name}_quantize", name, "quantize", py)
                   for name in encoders if hasattr(module, f"{name}_quantize") and name not in absent)

    library(ggml_adapter, bool(os.environ.get("QFORMATS_GGML_LIB")),
            "ggml: QFORMATS_GGML_LIB is not set (make ggml-oracle builds the library)")
    library(gguf_adapter, _probe(py, _found("gguf")), "gguf-py: `gguf` is not installed")
    real = real_python if real_python and Path(real_python).exists() else None
    for name, probe, runs in REAL_LIBRARIES:
        if real and _probe(real, probe):
            out.extend(Subject(entry, fmt, op, real) for entry, fmt, op in runs)
        else:
            skipped.append(f"{name}: not available to {real_python} (make real-subjects builds it)")
    if reference:
        from . import reference as ref

        for name in ref.__all__:                  # gptq_<op>_<version>, or <format>_<op>
            parts = name.split("_")
            fmt, op = (f"gptq_{parts[2]}", parts[1]) if parts[0] == "gptq" else tuple(name.rsplit("_", 1))
            out.append(Subject(f"conformance.reference:{name}", fmt, op, py))
    return out, skipped


def _probe(python: str, code: str) -> bool:
    """Whether ``code`` runs without error in ``python`` (run from the checkout, as the subjects are)."""
    return subprocess.run([python, "-c", code], capture_output=True, cwd=ROOT, timeout=300).returncode == 0


def run(subject: Subject) -> tuple[Subject, dict | None, str]:
    """One `conformance kernel --json` run: (subject, its document or None, what went wrong)."""
    cmd = [subject.python, "-m", "qformats", "conformance", "kernel", subject.entry, "--format", subject.format,
           "--op", subject.op, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if done.returncode not in (0, 1):
        return subject, None, (done.stderr.strip().splitlines() or ["(no message)"])[-1][:300]
    return subject, json.loads(done.stdout), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.realruns", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="build/matrix", help="folder for the runs and index.html")
    parser.add_argument("--bundle", default="results/real_libraries.json", help="the real libraries' runs, kept")
    parser.add_argument("--readme", help="rewrite this README's real-library table from the bundle")
    parser.add_argument("--real-python", default=str(ROOT / ".venv" / "real" / "bin" / "python"))
    parser.add_argument("--reference", action="store_true", help="also run qformats' reference (a page column)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    args = parser.parse_args(argv)

    todo, skipped = subjects(args.real_python, args.reference)
    for why in skipped:
        print(f"left out: {why}", file=sys.stderr)
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    docs, failures = [], []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for n, (subject, doc, problem) in enumerate(pool.map(run, todo)):
            if doc is None:
                failures.append(f"{subject.entry} ({subject.format} {subject.op}): could not run: {problem}")
                continue
            docs.append(doc)
            (out / "runs" / f"{n:03d}.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
            print(f"{subject.entry} {subject.format} {subject.op}: {doc['counts']}", file=sys.stderr)
    for line in failures:
        print(line, file=sys.stderr)
    real = [d for d in docs if not d["subject"].startswith("conformance.reference:")]
    bundle = Path(args.bundle)
    bundle.parent.mkdir(parents=True, exist_ok=True)
    # one run per line: a regenerated bundle diffs run by run
    bundle.write_text('{"schema": "qformats-conformance-runs/1", "runs": [\n'
                      + ",\n".join(json.dumps(d, separators=(",", ":"), sort_keys=True) for d in real) + "\n]}\n",
                      encoding="utf-8")
    (out / "index.html").write_text(page(docs), encoding="utf-8")
    if args.readme:
        readme = Path(args.readme)
        source = os.path.relpath(bundle.resolve(), readme.resolve().parent)
        readme.write_text(replace_section(readme.read_text(encoding="utf-8"), readme_table(real), source), encoding="utf-8")
    print(f"{len(docs)} runs; page {out / 'index.html'}; bundle {bundle}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
