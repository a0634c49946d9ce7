"""Issue 19, phase 1: real GGUF files written by llama.cpp's own llama-quantize, judged end to end.

A tiny F32 llama model (tiny_model.py) is quantized by llama-quantize into every common file type
(the low-bit i-quants with an importance matrix computed by llama-imatrix). For every file:

- ``qformats.validate.validate(path, deep=True)`` is valid and checked every tensor;
- llama.cpp loads it with ``--check-tensors`` and evaluates a prompt (llama-completion exits 0);
- ``qformats.formats.ggml.dequantize`` of every block tensor equals the newer ggml's own
  ``dequantize_row_*`` (llama.cpp's ``libggml-base.so``, loaded by path) bit for bit;
- for every tensor of a type with a reference encoder, ``ggml.quantize(type, f32_rows, importance)``
  equals llama-quantize's bytes (importance as llama-quantize uses it: ``in_sum2 / counts``).

Needs ``QFORMATS_LLAMA_CPP`` = a llama.cpp build folder (``make llama-cpp`` builds
``.venv/llama.cpp/build``; its ``bin/`` holds the tools and the shared libraries). Without it every
test skips, saying why. ``python tests/llama_cpp/test_llama_quantize.py`` prints the whole table.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_tools import (FILE_TYPES, LLAMA, SKIP_REASON, SOURCES, f32_tensors, file_id, importance,  # noqa: E402
                         load_and_eval, newer_ggml, quantized_file, source_model, workdir)

pytestmark = pytest.mark.skipif(not LLAMA, reason=SKIP_REASON)

IDS = [file_id(*f) for f in FILE_TYPES]
PLAIN = {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64"}

@dataclass
class Row:
    file_type: str
    path: Path | None = None
    quantize_rc: int = 0
    quantize_log: str = ""
    tensor_types: dict = field(default_factory=dict)            # type name -> count
    verdict: str = ""
    findings: list = field(default_factory=list)
    tensors: int = 0
    tensors_checked: int = 0
    load_rc: int | None = None
    load_log: str = ""
    decoded: int = 0                                            # block tensors compared
    decode_mismatch: list = field(default_factory=list)
    encodable: int = 0                                          # tensors of a type with a reference encoder
    encode_mismatch: list = field(default_factory=list)
    no_encoder: dict = field(default_factory=dict)              # type -> count of tensors not re-encoded
    with_importance: int = 0                                    # re-encoded with an imatrix vector
    importance_matters: int = 0                                 # ... whose bytes differ without it


def _block_rows(path: Path):
    """(tensor info, its bytes as (rows, row bytes) uint8) for every tensor, read by qformats' own GGUF
    reader: gguf-py 0.19.0 cannot open a file holding a type newer than it (q2_0)."""
    from qformats.containers.checkpoint import open_checkpoint

    with open_checkpoint(path) as ckpt:
        for t in ckpt.gguf.tensors:
            yield t, np.ascontiguousarray(ckpt.gguf.tensor_rows(t.name))


@functools.lru_cache(maxsize=None)
def row(file_type: str, with_imatrix: bool, source: str) -> Row:
    import gguf

    from qformats.formats import ggml
    from qformats.validate import validate

    r = Row(file_id(file_type, with_imatrix, source))
    path, proc = quantized_file(file_type, with_imatrix, source)
    r.quantize_rc, r.quantize_log = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    if proc.returncode or not path.is_file():
        return r
    r.path = path

    report = validate(path, deep=True)
    r.verdict, r.findings = report.verdict, [f.code for f in report.findings]
    r.tensors, r.tensors_checked = report.summary.get("tensors", 0), report.summary.get("tensors_checked", 0)

    load = load_and_eval(path)
    r.load_rc, r.load_log = load.returncode, (load.stdout + load.stderr)[-3000:]

    weights = importance() if with_imatrix else {}
    source = f32_tensors(source)
    lib = newer_ggml()
    for t, blocks in _block_rows(path):
        tname = t.type_name
        r.tensor_types[tname] = r.tensor_types.get(tname, 0) + 1
        if tname in PLAIN:
            continue
        name = tname.lower()
        mine, theirs = ggml.dequantize(name, blocks), lib.dequantize(name, blocks)
        r.decoded += 1
        if mine.shape != theirs.shape or not np.array_equal(mine.view(np.uint32), theirs.view(np.uint32)):
            r.decode_mismatch.append(t.name)
        bt = ggml.TYPES[name]
        if bt.quantize is None:
            r.no_encoder[tname] = r.no_encoder.get(tname, 0) + 1
            continue
        w = weights.get(t.name) if bt.importance else None
        r.encodable += 1
        if not np.array_equal(ggml.quantize(name, source[t.name], w), blocks):
            r.encode_mismatch.append(t.name)
        elif w is not None:
            r.with_importance += 1
            r.importance_matters += not np.array_equal(ggml.quantize(name, source[t.name]), blocks)
    return r


def quantized(file_type: str, with_imatrix: bool, source: str) -> Row:
    r = row(file_type, with_imatrix, source)
    assert r.quantize_rc == 0 and r.path is not None, r.quantize_log
    return r


CASES = pytest.mark.parametrize("file_type,with_imatrix,source", FILE_TYPES, ids=IDS)


@CASES
def test_qformats_validates_every_tensor(file_type, with_imatrix, source):
    """GGML-3.5: llama-quantize's file is valid to validate(deep=True), which says it checked every tensor."""
    r = quantized(file_type, with_imatrix, source)
    assert r.verdict == "valid" and not r.findings, (r.verdict, r.findings)
    assert r.tensors == r.tensors_checked == sum(r.tensor_types.values()) > 0


@CASES
def test_llama_cpp_loads_with_check_tensors(file_type, with_imatrix, source):
    """GGML-5.4: llama.cpp itself loads the file with --check-tensors and evaluates a prompt (exit 0)."""
    r = quantized(file_type, with_imatrix, source)
    assert r.load_rc == 0, r.load_log


@CASES
def test_decode_equals_llama_cpp_ggml(file_type, with_imatrix, source):
    """GGML-2.2: every block tensor decodes bit for bit as the newer ggml's own dequantize_row_*."""
    r = quantized(file_type, with_imatrix, source)
    assert r.decoded == sum(n for t, n in r.tensor_types.items() if t not in PLAIN) > 0
    assert not r.decode_mismatch, r.decode_mismatch


@CASES
def test_encode_equals_llama_quantize(file_type, with_imatrix, source):
    """GGML-4.4: every tensor of a type with a reference encoder re-encodes from the F32 source, with the
    importance llama-quantize used (GGML-4.2), to llama-quantize's bytes."""
    r = quantized(file_type, with_imatrix, source)
    assert r.encodable > 0 and not r.encode_mismatch, r.encode_mismatch
    if with_imatrix:    # the importance path was exercised, and made a difference
        assert r.importance_matters > 0 and r.with_importance > 0


@CASES
def test_inspect_lists_every_tensor_with_its_real_type(file_type, with_imatrix, source):
    """qformats inspect: one row per tensor of the file, in file order, each with the type the file stores."""
    from qformats.inspect import rows

    r = quantized(file_type, with_imatrix, source)
    _, table = rows(str(r.path))
    stored = [(t.name, t.type_name.lower()) for t, _ in _block_rows(r.path)]
    assert [(row["layer"], row["format"]) for row in table] == stored


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_source_model_is_valid_and_loads(source):
    """GGML-3.4, GGML-5.4: the unquantized models llama-quantize reads (F32, F16, the MoE variant) are valid
    with every tensor checked, and llama.cpp loads each with --check-tensors and evaluates a prompt."""
    from qformats.validate import validate

    path = source_model(source)
    report = validate(path, deep=True)
    assert report.verdict == "valid" and not report.findings, [f.code for f in report.findings]
    assert report.summary["tensors"] == report.summary["tensors_checked"] > 0
    load = load_and_eval(path)
    assert load.returncode == 0, (load.stdout + load.stderr)[-2000:]


@functools.lru_cache(maxsize=None)
def readers(file_type: str, with_imatrix: bool, source: str) -> dict:
    """``qformats conformance checkpoint``'s reader verdicts on the file (GGML-5.5)."""
    from conformance.checkpoint import check_checkpoint

    r = quantized(file_type, with_imatrix, source)
    return {name: row["verdict"] for name, row in check_checkpoint(r.path)["readers"].items()}


@CASES
def test_conformance_checkpoint_names_the_real_readers(file_type, with_imatrix, source):
    """GGML-5.5: llama.cpp's ggml, the pinned ggml and gguf-py decode every tensor of the file as the spec
    says; transformers is listed as not judged (it decodes through gguf-py)."""
    verdicts = readers(file_type, with_imatrix, source)
    # gguf-py 0.19.0 has no q1_0 decoder and no q2_0 at all; ggml 0.10.1 has no q2_0 (GGML-5.5)
    lacking = {"Q1_0": {"gguf_py"}, "Q2_0": {"gguf_py", "ggml_oracle"}}.get(file_type, set())
    assert verdicts == {"ggml_oracle": "correct", "llama_cpp": "correct", "gguf_py": "correct",
                        "transformers": "not judged"} | {name: "cannot read" for name in lacking}


def _readers_cell(verdicts: dict) -> str:
    judged = [name for name, v in verdicts.items() if v == "correct"]
    others = [f"{name} {v}" for name, v in verdicts.items() if v not in ("correct", "not judged")]
    return ", ".join(judged) + (" correct" if judged else "") + "".join(f"; {o}" for o in others)


def table(rows: list[Row]) -> str:
    """The README's table (tests/llama_cpp/readme_tables.py writes it): one line per file llama-quantize wrote."""
    lines = ["| file type | tensor types llama-quantize wrote | qformats verdict (tensors checked) | llama.cpp "
             "`--check-tensors` load + eval | decode identical to ggml 0.25.3 | encode identical to llama-quantize "
             "| `conformance checkpoint` readers |", "|---|---|---|---|---|---|---|"]
    for r, key in zip(rows, FILE_TYPES):
        if r.path is None:
            lines.append(f"| {r.file_type} | llama-quantize failed ({r.quantize_rc}) | | | | | |")
            continue
        types = ", ".join(f"{k.lower()} ×{v}" for k, v in sorted(r.tensor_types.items()))
        verdict = f"{r.verdict}{' ' + ','.join(r.findings) if r.findings else ''} ({r.tensors_checked}/{r.tensors})"
        load = "ok" if r.load_rc == 0 else f"exit {r.load_rc}"
        dec = f"{r.decoded - len(r.decode_mismatch)}/{r.decoded}"
        enc = f"{r.encodable - len(r.encode_mismatch)}/{r.encodable}"
        if r.with_importance:
            enc += f", {r.with_importance} through the importance path ({r.importance_matters} differ without it)"
        if r.no_encoder:
            enc += " (informative encoder, not compared: " + ", ".join(
                f"{k.lower()} ×{v}" for k, v in sorted(r.no_encoder.items())) + ")"
        name = r.file_type.replace(" --tensor-type ", ", --tensor-type ")
        lines.append(f"| {name} | {types} | {verdict} | {load} | {dec} | {enc} | {_readers_cell(readers(*key))} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not LLAMA:
        sys.exit("set QFORMATS_LLAMA_CPP to a llama.cpp build folder")
    print("ggml:", newer_ggml().version(), "work dir:", workdir())
    rows = [row(*f) for f in FILE_TYPES]
    print(table(rows))
    for r in rows:
        for what, names in (("decode", r.decode_mismatch), ("encode", r.encode_mismatch)):
            if names:
                print(f"{r.file_type}: {what} mismatch on {names}")
        if r.load_rc:
            print(f"{r.file_type}: load failed:\n{r.load_log[-1500:]}")
