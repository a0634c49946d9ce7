"""Every command on every unmodified fixture, and the parts of the contract the fuzzer relies on.

QF-5.1 / CKPT-1: each fixture gets an answer (exit 0/1) or a structured refusal from validate,
inspect, decode, convert, conformance checkpoint and read_layer; never an internal error. The
targets are the fixtures' checkpoint directories and every loose weight file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import commands
import qformats.validate
from qformats.errors import QFormatsError, fail
from qformats.validate import validate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def fixture_targets(root: Path = FIXTURES) -> list[Path]:
    """Checkpoint directories (a config or an index beside the weights) and loose weight files."""
    out = []
    for d in sorted({p.parent for p in root.rglob("*") if p.is_file()}):
        files = [p for p in d.iterdir() if p.is_file()]
        if any(p.name in ("config.json", "quantize_config.json") or p.name.endswith(".index.json") for p in files):
            out.append(d)
        else:
            out += sorted(p for p in files if p.suffix in (".safetensors", ".gguf"))
    return out


def _first_name(target: Path) -> list[str]:
    from qformats.containers.checkpoint import open_checkpoint

    try:
        with open_checkpoint(str(target)) as ckpt:
            if ckpt.kind == "gguf":
                return [t.name for t in ckpt.gguf.tensors[:1]] or ["x"]
            return [g.name for g in qformats.validate.group_layers(ckpt.tensor_names())[0][:1]] or ["x"]
    except QFormatsError:
        return ["x"]


def test_the_sweep_reaches_every_kind_of_fixture():
    """The target list is not empty by accident: checkpoints, containers, GGUF files, third-party data."""
    targets = {str(t.relative_to(FIXTURES)) for t in fixture_targets()}
    assert {"checkpoints/gptq_v1_sym_4bit", "containers/safetensors/sharded_valid", "checkpoints/q4_k.gguf",
            "third_party/gptq/checkpoints/e2e_b4_sym_g32_gptq",
            "third_party/gptq/layers/b4_asym_g32_k128_n64_z0.safetensors"} <= targets
    assert len(targets) > 150


@pytest.mark.parametrize("command", commands.COMMANDS)
def test_every_command_answers_every_fixture(tmp_path, command):
    """No internal error, no broken contract, on any unmodified fixture (sharded_valid convert included)."""
    broken = []
    for i, target in enumerate(fixture_targets()):
        inv = commands.Invocation(command=command, names=_first_name(target), deep=True, json=i % 2 == 0)
        outcome, detail = commands.sweep_one(inv, target, tmp_path / f"out{i}")
        if outcome.startswith(("EXCEPTION", "CONTRACT")):
            broken.append((str(target.relative_to(FIXTURES)), outcome, detail[:200]))
    assert broken == []


def test_sharded_valid_converts(tmp_path, capsys):
    """The fixture that printed 'internal error: KeyError' now gets the structured error naming the tensor."""
    from qformats.cli import main

    target = FIXTURES / "containers/safetensors/sharded_valid"
    assert main(["convert", str(target), "--to", "gptq_v2", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and "[tensor.missing" in err and "qzeros" in err


def test_worker_error_is_the_same_error(monkeypatch):
    """validate --jobs 2: a QFormatsError raised in a worker process reaches the caller unchanged
    (code, tensor, message, file), as with one process, not as a pickling error."""
    parent = os.getpid()
    real = qformats.validate._run_layers

    def refuse_in_child(ckpt, layers, deep, progress):
        if os.getpid() != parent:
            raise fail("checkpoint.format.unsupported", "qweight", "a format this worker reads", "AWQ", file="x")
        return real(ckpt, layers, deep, progress)

    monkeypatch.setattr(qformats.validate, "_run_layers", refuse_in_child)
    with pytest.raises(QFormatsError) as info:
        validate(str(FIXTURES / "checkpoints/gptq_v2_asym_3bit_actorder"), jobs=2)
    err = info.value
    assert (err.code, err.tensor, err.constraint, err.actual, err.file) == (
        "checkpoint.format.unsupported", "qweight", "a format this worker reads", "AWQ", "x")
    assert str(err) == str(fail("checkpoint.format.unsupported", "qweight", "a format this worker reads", "AWQ",
                                file="x"))


def test_jobs_comparison_sees_a_difference(monkeypatch, tmp_path):
    """The fuzzer's --jobs check fails when N processes answer differently from one."""
    real = qformats.validate.validate

    def differs(path, *, jobs=1, **kw):
        report = real(path, jobs=1, **kw)
        return report if jobs == 1 else report.model_copy(update={"findings": []})

    monkeypatch.setattr(qformats.validate, "validate", differs)
    inv = commands.Invocation(command="validate", jobs=2)
    target = FIXTURES / "checkpoints/gptq_v1_zero_underflow_autogptq"
    assert commands.run(inv, str(target), target, tmp_path)[0] == "CONTRACT:jobs-differ"


def test_harness_sees_a_replaced_output(monkeypatch, tmp_path):
    """An existing -o file replaced without --force is a broken contract, whatever the exit code."""
    import qformats.tools

    def overwrite(path, names, out, **options):
        Path(out).write_bytes(b"replaced")
        return {}

    monkeypatch.setattr(qformats.tools, "decode", overwrite)
    inv = commands.Invocation(command="decode", names=["model.layers.0.mlp.down_proj"], output="existing")
    target = FIXTURES / "checkpoints/gptq_v1_sym_4bit"
    assert commands.run(inv, str(target), target, tmp_path)[0] == "CONTRACT:replaced-existing-output"


def test_awq_shaped_layer_gets_the_same_answer_in_every_process_count(tmp_path):
    """A fuzz finding (seed 79, case 4567): one AWQ-shaped layer beside a GPTQ one was a warning with one
    process and a whole-checkpoint refusal in the worker that held only it. QF-5.2 is now decided on the
    whole checkpoint, and the warning is per layer, so jobs=1 and jobs=2 agree."""
    import shutil

    from safetensors.numpy import load_file, save_file

    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "checkpoints/gptq_v2_asym_3bit_actorder", ckpt)
    tensors = load_file(str(ckpt / "model.safetensors"))
    name = "model.layers.0.self_attn.q_proj"
    qweight = tensors[f"{name}.qweight"]                                  # (K * 3 / 32, N) = (12, 64)
    tensors[f"{name}.qweight"] = np.zeros((qweight.shape[1] * 2, qweight.shape[1] * 3 // 32), np.int32)
    save_file(tensors, str(ckpt / "model.safetensors"))
    answers = []
    for jobs in (1, 2):
        report = validate(str(ckpt), jobs=jobs)
        answers.append((report.verdict, [(f.code, f.tensor, f.message) for f in report.findings]))
    assert answers[0] == answers[1]
    assert answers[0][1] == [("checkpoint.layer.unsupported", name, f"'{name}' has AWQ-shaped qweight (packed "
                                                                    "along the output axis); not decoded as GPTQ")]
