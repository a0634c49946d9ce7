"""`qformats validate`: verdicts, finding codes and exit codes on real and sample checkpoints (QF-5)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.samples import SAMPLES
from qformats.validate import validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOLDEN_GPTQ = json.loads((FIXTURES / "third_party" / "gptq" / "manifest.json").read_text())


# What each sample's construction implies (qformats/samples.py docstrings), written out here rather
# than read back from the module under test.
SAMPLE_VERDICTS = {
    "gptq_v1_sym_4bit": ("valid", set()),
    "gptq_v2_asym_3bit_actorder": ("valid", set()),
    "gptq_v2_zeros_labelled_gptq": ("invalid", {"gptq.label.mismatch"}),
    "gptq_v1_zero_underflow_autogptq": ("invalid", {"gptq.zero.v1_unrepresentable"}),
    "spqr_csr": ("valid", set()),
    "q4_k.gguf": ("valid", set()),
    "q4_k_m.gguf": ("valid", set()),
    "q4_k_m_nan_scale.gguf": ("invalid", {"ggml.scale.nonfinite"}),
    "awq_gemm": ("valid", set()),
    "awq_gemv_bytes_labelled_gemm": ("invalid", {"awq.label.mismatch"}),
    "ctensors_w4_asym": ("valid", set()),
    "ctensors_nan_scale": ("invalid", {"ctensors.scales.nonfinite"}),
    "ctensors_w3_per_word_0_17": ("valid", set()),       # valid, warned: compressed-tensors 0.17's layout (CT-2.6)
    "bnb_nf4_dq": ("valid", set()),
    "bnb_fp4_nan_absmax": ("invalid", {"bnb.absmax.nonfinite"}),
    "fp8_block_deepseek": ("valid", set()),
    "fp8_block_nan_byte": ("invalid", {"fp8.weight.nan"}),
    "nvfp4_ct": ("valid", set()),
    "mxfp4_ct_nan_scale": ("invalid", {"fp4.scale.e8m0_nan"}),
}
LAYERS = {"q4_k_m.gguf": 9, "q4_k_m_nan_scale.gguf": 9,     # every tensor of a GGUF file is checked (GGML-3.5)
          "bnb_fp4_nan_absmax": 1}


def test_every_sample_has_an_expected_verdict():
    """The table below covers exactly the bundled samples."""
    assert set(SAMPLE_VERDICTS) == set(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLE_VERDICTS))
def test_bundled_samples_get_the_verdict_their_construction_implies(name):
    """Each sample was built valid, or broken in one named way; --deep finds exactly that."""
    verdict, codes = SAMPLE_VERDICTS[name]
    report = validate(str(FIXTURES / "checkpoints" / name), deep=True)
    assert report.verdict == verdict
    assert {f.code for f in report.findings if f.severity == "error"} == codes
    assert report.summary["layers"] == LAYERS.get(name, 2)


@pytest.mark.parametrize("case", GOLDEN_GPTQ["checkpoints"], ids=lambda c: c["name"])
def test_real_gptqmodel_checkpoints_get_their_manifest_verdict(case):
    """GPTQ-8.3: GPTQModel 7.7.0's checkpoints -- valid, and v2 zeros relabelled 'gptq' -- as the manifest says."""
    report = validate(str(FIXTURES / "third_party" / "gptq" / case["dir"]), deep=True)
    expected = "valid" if case["kind"] == "valid" else "invalid"
    assert report.verdict == expected
    if expected == "invalid":
        assert {f.code for f in report.findings} == {"gptq.label.mismatch"}
        assert report.summary["errors"] == 14  # every quantized module


def test_real_spqr_checkpoint_is_valid_and_decodes_finite():
    """SPQR: the spqr_quant-made tiny Llama validates, every layer decoded with --deep."""
    report = validate(str(FIXTURES / "third_party" / "spqr_quant" / "checkpoints" / "tiny-llama-spqr-csr-actorder"),
                      deep=True)
    assert report.verdict == "valid" and report.summary["layers"] == 14
    assert all("max_abs" in row for row in report.layers)


def test_json_output_follows_the_contract(capsys):
    """DESIGN §4: --json prints {path, verdict, format, findings[code, severity, clause, tensor, message], layers, summary}."""
    code = main(["validate", "--json", str(FIXTURES / "checkpoints" / "gptq_v2_zeros_labelled_gptq")])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert set(doc) == {"path", "verdict", "format", "findings", "layers", "summary"}
    assert set(doc["findings"][0]) == {"code", "severity", "clause", "tensor", "message"}
    assert doc["findings"][0]["clause"] == "GPTQ-8.3"


def test_countable_findings_carry_their_count(capsys):
    """A finding that stands for many instances adds "count" (an extension of the contract), and the text
    report gives the total and the per-layer counts. The sample makes 8 output columns of each layer's
    first group all-positive (qformats/samples.py), so each layer holds 8 zero-0 fields."""
    path = str(FIXTURES / "checkpoints" / "gptq_v1_zero_underflow_autogptq")
    assert main(["validate", "--json", path]) == 1
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "gptq.zero.v1_unrepresentable"]
    assert [f["count"] for f in found] == [8, 8]
    assert main(["validate", path]) == 1
    assert "in 2 layers (16 in all: model.layers.0.mlp.down_proj 8, model.layers.0.self_attn.q_proj 8)" in \
        capsys.readouterr().out


def test_valid_checkpoint_exits_0(capsys):
    """Exit 0: valid."""
    assert main(["validate", str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit")]) == 0
    assert "VALID" in capsys.readouterr().out


def test_missing_path_exits_2_without_traceback(capsys):
    """Exit 2: a missing path could not be validated at all."""
    assert main(["validate", "/nonexistent/ckpt"]) == 2
    assert "ckpt.path.missing" in capsys.readouterr().err


def test_truncated_safetensors_is_a_finding_exit_1(tmp_path, capsys):
    """A malformed or truncated file is a finding and an invalid verdict (exit 1), never a crash."""
    src = FIXTURES / "checkpoints" / "gptq_v1_sym_4bit" / "model.safetensors"
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(src.read_bytes()[:-100])
    assert main(["validate", "--json", str(bad)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["verdict"], [f["code"] for f in doc["findings"]]) == ("invalid", ["st.truncated"])


def test_gptq_tensors_labelled_awq_are_a_label_mismatch(tmp_path):
    """AWQ-6.2: GPTQ bytes (qweight packed along the input axis) under quant_method awq, version gemm: invalid."""
    ckpt = tmp_path / "awq"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "version": "gemm"}
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert report.verdict == "invalid" and {f.code for f in report.findings} == {"awq.label.mismatch"}
    assert main(["validate", str(ckpt)]) == 1


def test_awq_gemv_checkpoint_is_refused(tmp_path):
    """AWQ-1.2 / QF-5.2: another AutoAWQ layout could not be validated (exit 2)."""
    ckpt = tmp_path / "awq"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "version": "gemv"}
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(QFormatsError) as info:
        validate(str(ckpt))
    assert (info.value.code, info.value.tensor) == ("checkpoint.format.unsupported", "version")
    assert main(["validate", str(ckpt)]) == 2


def test_checkpoint_without_quantized_layers_is_invalid(tmp_path):
    """QF-5.1: "0 layers checked" is never a pass."""
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"model.embed_tokens.weight": np.zeros((4, 4), np.float16)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(QFormatsError) as exc:        # QF-5.1: could not run (exit 2), never valid
        validate(str(tmp_path / "plain.safetensors"))
    assert exc.value.code == "checkpoint.empty"
    assert main(["validate", str(tmp_path / "plain.safetensors")]) == 2


def test_one_file_of_a_checkpoint_reads_the_config_beside_it(tmp_path):
    """CKPT-2.1: a v2 checkpoint's model.safetensors validated alone gets the checkpoint's label (gptq_v2),
    not a false label mismatch; alone in a folder, its label is unknown: a warning, no error, no fix."""
    src = FIXTURES / "checkpoints" / "gptq_v2_asym_3bit_actorder"
    report = validate(str(src / "model.safetensors"))
    assert report.verdict == "valid" and not report.findings
    assert {row["format"] for row in report.layers} == {"gptq_v2"}
    shutil.copy(src / "model.safetensors", tmp_path / "model.safetensors")
    alone = validate(str(tmp_path / "model.safetensors"))
    assert alone.verdict == "valid"
    assert [(f.code, f.severity) for f in alone.findings] == [("ckpt.config.none", "warning")]
    assert "label is unknown" in alone.findings[0].message


def test_strict_turns_warnings_into_exit_1(tmp_path):
    """--strict: warnings make the verdict exit 1 (a config-less GPTQ file warns, GPTQ-6.3 / QF-5.4)."""
    src = FIXTURES / "checkpoints" / "gptq_v1_sym_4bit" / "model.safetensors"
    shutil.copy(src, tmp_path / "model.safetensors")
    assert main(["validate", str(tmp_path / "model.safetensors")]) == 0
    assert main(["validate", "--strict", str(tmp_path / "model.safetensors")]) == 1


def test_dynamic_override_that_leaves_a_module_unquantized_contradicts_its_tensors(tmp_path):
    """GPTQ-6.6, 6.7: a "-:" rule matching a module that holds GPTQ tensors is a mismatch."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config["quantization_config"]["dynamic"] = {"-:.*down_proj": {}}
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert [(f.code, f.tensor) for f in report.findings] == [
        ("gptq.config.tensor_mismatch", "model.layers.0.mlp.down_proj")]


def test_config_bits_contradicting_the_tensors_is_reported(tmp_path):
    """GPTQ-6.7: config bits 8 over 4-bit tensors names the module and both widths."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config["quantization_config"]["bits"] = 8
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert {f.code for f in report.findings} == {"gptq.config.tensor_mismatch"}
    assert "config says 8-bit but 'model.layers.0.mlp.down_proj.qzeros' and" in report.findings[0].message
    assert "imply 4-bit fields" in report.findings[0].message


def test_validate_never_writes_to_its_input(tmp_path):
    """Validation reads only: every byte of the checkpoint is unchanged afterwards."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_zero_underflow_autogptq", ckpt)
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    validate(str(ckpt), deep=True)
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before


def shard(src: Path, dst: Path) -> Path:
    """Split a one-file sample into one shard per module, with a transformers-style index."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(src / "model.safetensors"))
    modules = sorted({name.rsplit(".", 1)[0] for name in tensors})
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    weight_map = {}
    for i, module in enumerate(modules, 1):
        file = f"model-{i:05d}-of-{len(modules):05d}.safetensors"
        part = {k: v for k, v in tensors.items() if k.startswith(module + ".")}
        save_file(part, str(dst / file))
        weight_map.update({k: file for k in part})
    (dst / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return dst


@pytest.mark.parametrize("sample", ["gptq_v1_zero_underflow_autogptq", "spqr_csr"])
def test_jobs_validate_shards_in_parallel_with_the_same_report(sample, tmp_path):
    """--jobs N validates shards in parallel processes; the report equals the serial one."""
    ckpt = shard(FIXTURES / "checkpoints" / sample, tmp_path / "sharded")
    serial = validate(str(ckpt), deep=True)
    parallel = validate(str(ckpt), deep=True, jobs=2)
    assert parallel.model_dump() == serial.model_dump()
    assert serial.summary["layers"] == 2


MALFORMED = [case for case in json.loads((FIXTURES / "manifest.json").read_text())["cases"]
             if case["kind"] == "container" and case["expect"].get("verdict") == "invalid"]


@pytest.mark.parametrize("case", MALFORMED, ids=lambda c: c["id"])
def test_every_malformed_container_is_exit_1_with_its_code(case, capsys):
    """A malformed or truncated file is a finding with its code and exit 1, never a crash or exit 2."""
    path = FIXTURES / case["files"][0]["path"]
    if "sharded" in case["id"]:
        path = path.parent
    assert main(["validate", "--json", str(path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(case["expect"]["codes"]) <= {f["code"] for f in doc["findings"]}


def test_pickle_checkpoint_is_refused_never_loaded(tmp_path, capsys):
    """CKPT: .bin/.pt/.pth/.pkl are pickles: refused with a message naming the file, never unpickled."""
    import pickle

    class Bomb:
        def __reduce__(self):  # unpickling this would create a file: proof it was never loaded
            return (open, (str(tmp_path / "PWNED"), "w"))

    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps(Bomb()))
    code = main(["validate", "--json", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["findings"][0]["code"] == "ckpt.pickle.refused"
    assert not (tmp_path / "PWNED").exists()


def test_awq_shaped_tensors_without_a_config_are_not_decoded_as_gptq(tmp_path):
    """QF-5.2: AWQ's qweight (K, N*b/32), packed along the output axis, is recognised, never read as GPTQ."""
    import numpy as np
    from safetensors.numpy import save_file

    k, n, groups = 128, 64, 1
    save_file({"m.qweight": np.zeros((k, n // 8), np.int32), "m.qzeros": np.zeros((groups, n // 8), np.int32),
               "m.scales": np.ones((groups, n), np.float16)}, str(tmp_path / "awq.safetensors"))
    with pytest.raises(QFormatsError) as info:
        validate(str(tmp_path / "awq.safetensors"))
    assert info.value.code == "checkpoint.format.unsupported"
    assert "AWQ layout" in info.value.message


def _mutated_sample(tmp_path, tensors=None, config=None):
    """The 4-bit v1 sample with some tensors replaced and/or its quantization_config updated."""
    from safetensors.numpy import load_file, save_file

    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", ckpt)
    if tensors:
        stored = load_file(str(ckpt / "model.safetensors")) | tensors
        save_file(stored, str(ckpt / "model.safetensors"))
    if config is not None:
        doc = json.loads((ckpt / "config.json").read_text())
        doc["quantization_config"].update(config)
        (ckpt / "config.json").write_text(json.dumps(doc))
    return ckpt


DOWN = "model.layers.0.mlp.down_proj"


@pytest.mark.parametrize(("tensors", "config", "code"), [
    pytest.param({f"{DOWN}.qzeros": np.zeros((0, 8), np.int32)}, None, "tensor.shape", id="qzeros-without-rows"),
    pytest.param({f"{DOWN}.qweight": np.zeros((0, 64), np.int32)}, None, "tensor.shape", id="qweight-K-0"),
    pytest.param({f"{DOWN}.scales": np.zeros((4, 0), np.float16)}, None, "tensor.shape", id="scales-N-0"),
    pytest.param(None, {"dynamic": {"+:[": {}}}, "gptq.config.invalid", id="dynamic-bad-regex"),
    pytest.param(None, {"dynamic": {"+:.*": {"group_size": "32"}}}, "gptq.config.invalid", id="dynamic-string-group"),
    pytest.param(None, {"checkpoint_format": ["gptq"]}, "gptq.config.invalid", id="format-is-a-list"),
])
def test_hostile_layers_and_configs_are_findings_not_crashes(tmp_path, tensors, config, code):
    """QF-1.1: malformed tensors or configs give a coded finding and exit 1, never a traceback."""
    ckpt = _mutated_sample(tmp_path, tensors, config)
    report = validate(str(ckpt), deep=True)
    assert report.verdict == "invalid"
    assert code in {f.code for f in report.findings}


def test_format_option_applies_to_gguf_files():
    """--format gptq on a GGUF file checks no GPTQ layer: could not run (QF-5.1), never a pass."""
    with pytest.raises(QFormatsError) as exc:
        validate(str(FIXTURES / "checkpoints" / "q4_k.gguf"), fmt="gptq")
    assert exc.value.code == "checkpoint.empty"


def test_format_naming_an_absent_format_is_exit_2(capsys):
    """QF-5.1: --format spqr on a GPTQ checkpoint is the same rule as a checkpoint without layers: exit 2."""
    assert main(["validate", "--format", "spqr", str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit")]) == 2
    assert "checkpoint.empty" in capsys.readouterr().err


def test_vocab_only_gguf_is_not_invalid(tmp_path, capsys):
    """A GGUF file with no tensors is a well-formed container: nothing to check, exit 2, never invalid."""
    import struct

    blob = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)                 # v3, no tensors, no metadata
    (tmp_path / "vocab.gguf").write_bytes(blob)
    assert main(["validate", str(tmp_path / "vocab.gguf")]) == 2
    assert "checkpoint.empty" in capsys.readouterr().err


def test_every_bad_q4k_tensor_of_a_gguf_file_is_reported(tmp_path):
    """Q4K-5.4 per tensor: two tensors with a non-finite d give two findings, not one."""
    import struct

    from qformats.formats import q4_k

    blocks = q4_k.quantize(np.random.default_rng(0).normal(size=(1, 256)).astype(np.float32))
    bad = blocks.copy()
    bad[0, 0:2] = np.frombuffer(np.float16(np.inf).tobytes(), np.uint8)  # d = inf
    text = lambda s: struct.pack("<Q", len(s)) + s.encode()  # noqa: E731
    header = b"GGUF" + struct.pack("<IQQ", 3, 2, 0)
    for i, name in enumerate(("a", "b")):
        header += text(name) + struct.pack("<IQQIQ", 2, 256, 1, 12, i * 160)
    header += b"\0" * (-len(header) % 32)
    data = bad.tobytes() + b"\0" * 16 + bad.tobytes()
    (tmp_path / "m.gguf").write_bytes(header + data)
    report = validate(str(tmp_path / "m.gguf"))
    assert [(f.code, f.tensor) for f in report.findings if f.severity == "error"] == [
        ("q4k.d.nonfinite", "a"), ("q4k.d.nonfinite", "b")]


@pytest.mark.parametrize("name", ["gptq_v1_sym_4bit", "gptq_v2_asym_3bit_actorder"])
def test_deep_gptq_statistics_are_those_of_the_reference_decode(name):
    """QF-5.3 / GPTQ-3.7: --deep's mean, std and max |w| of a GPTQ layer equal the decoded array's."""
    from qformats.containers.checkpoint import open_checkpoint
    from qformats.formats import gptq
    from qformats.validate import group_layers, load_layer

    path = FIXTURES / "checkpoints" / name
    rows = {row["layer"]: row for row in validate(str(path), deep=True).layers}
    with open_checkpoint(str(path)) as ckpt:
        for group in group_layers(ckpt.tensor_names())[0]:
            row = rows[group.name]
            w = gptq.dequantize(load_layer(ckpt, group), bits=row["bits"], version=row["format"][-2:],
                                group_size=row["group_size"]).astype(np.float64)
            assert row["max_abs"] == float(np.abs(w).max())
            assert row["mean"] == pytest.approx(float(w.mean()), rel=1e-12, abs=1e-15)
            assert row["std"] == pytest.approx(float(w.std()), rel=1e-9)


def test_parallel_jobs_split_a_single_file_with_the_same_report():
    """--jobs N splits the layers, not only shards: one file, two processes, the serial report."""
    path = str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit")
    assert validate(path, deep=True, jobs=2).model_dump() == validate(path, deep=True, jobs=1).model_dump()


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5], ids=repr)
def test_jobs_must_be_a_positive_integer(jobs):
    """--jobs takes an integer of at least 1; anything else is a usage error (argument.invalid)."""
    with pytest.raises(QFormatsError) as err:
        validate(str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit"), jobs=jobs)
    assert err.value.code == "argument.invalid"


def test_cli_jobs_zero_is_exit_2(capsys):
    """DESIGN §4: bad usage is exit 2 ("could not run"), with a message, not a traceback."""
    assert main(["validate", str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit"), "--jobs", "0"]) == 2
    assert "jobs" in capsys.readouterr().err


def test_balanced_runs_keep_order_and_split_by_bytes():
    """Layers are cut, in order, into at most `runs` non-empty runs of about equal bytes."""
    from qformats.validate import LayerGroup, _balanced_runs

    layers = [LayerGroup(f"l{i}", "gptq") for i in range(6)]
    runs = _balanced_runs(layers, [10, 10, 10, 10, 40, 20], 3)
    assert [name for run in runs for name in run] == [f"l{i}" for i in range(6)]
    assert runs == [["l0", "l1", "l2"], ["l3", "l4"], ["l5"]]
    assert _balanced_runs(layers[:2], [1, 1], 8) == [["l0"], ["l1"]]


def test_balanced_runs_never_split_siblings():
    """FP8-6.7 / FP4-3.5 under --jobs: the shards a reader fuses (children of one module) stay in one run."""
    from qformats.validate import LayerGroup, _balanced_runs

    names = ["a.self_attn.k_proj", "a.self_attn.q_proj", "a.self_attn.v_proj", "a.mlp.gate_proj", "a.mlp.up_proj"]
    runs = _balanced_runs([LayerGroup(n, "fp8") for n in names], [10] * 5, 5)
    assert runs == [names[:3], names[3:]]


@pytest.mark.parametrize("name", ["ct_fp8_tensor", "modelopt_fp8_tensor"])
def test_parallel_deep_validation_keeps_the_fused_scale_warning(name):
    """FP8-6.7: validate --deep --jobs 2 reports the per-tensor scales of fused shards that differ, as --jobs 1."""
    path = str(FIXTURES / "third_party" / "fp8" / "checkpoints" / name)
    parallel = validate(path, deep=True, jobs=2)
    assert "fp8.fused.scales_differ" in {f.code for f in parallel.findings}
    assert parallel.model_dump() == validate(path, deep=True, jobs=1).model_dump()


def test_parallel_validation_reports_progress_up_to_the_last_layer():
    """A progress bar on a TTY also moves when layers run in worker processes, and ends at the total."""
    ticks = []
    path = str(FIXTURES / "third_party" / "spqr_quant" / "checkpoints" / "tiny-llama-spqr-csr-actorder")
    validate(path, deep=True, jobs=2, progress=lambda i, total, name: ticks.append((i, total)))
    assert ticks and ticks[-1] == (13, 14)
    assert [i for i, _ in ticks] == sorted(i for i, _ in ticks)


def test_plain_validation_reports_progress_too():
    """Progress is not only for --deep: a plain validate ticks through every layer to the total."""
    ticks = []
    validate(str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit"), progress=lambda i, total, name: ticks.append((i, total)))
    assert ticks and ticks[-1] == (ticks[-1][1] - 1, ticks[-1][1])


def test_cli_shows_a_progress_bar_on_a_tty_without_deep(monkeypatch, capsys):
    """On a TTY the CLI draws the bar for plain validate as well (stderr; stdout stays the report)."""
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr("sys.stderr", err)
    assert main(["validate", str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit")]) == 0
    assert "2/2" in err.getvalue() and "[" in err.getvalue()


@pytest.mark.parametrize("deep", [False, True], ids=["plain", "deep"])
def test_spqr_int64_in_perm_is_invalid(tmp_path, deep):
    """SPQR-7.3: spqr_quant 0.2.0 raises on an int64 in_perm and transformers cannot load it: invalid."""
    from safetensors.numpy import load_file, save_file

    src = FIXTURES / "checkpoints" / "spqr_csr"
    ckpt = tmp_path / "ckpt"
    shutil.copytree(src, ckpt)
    tensors = load_file(str(ckpt / "model.safetensors"))
    config = json.loads((ckpt / "config.json").read_text())
    for name in [k for k in tensors if k.endswith(".in_perm")]:
        tensors[name] = tensors[name].view(np.uint16).astype(np.int64)
        config["quantization_config"]["shapes"][f"{name}.shape"] = tensors[name].size   # as PR #47 wrote it
    save_file(tensors, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt), deep=deep)
    assert report.verdict == "invalid"
    assert {f.code for f in report.findings if f.severity == "error"} == {"spqr.in_perm.int64"}


def test_single_layer_file_names_bare_tensors(tmp_path, capsys):
    """QF-5.3 text report: a file holding one layer under bare names (qweight, scales, ...) names the
    tensor as stored ('scales', not '.scales') and prints no empty ``layers:`` line."""
    from safetensors.numpy import load_file, save_file

    golden = load_file(str(FIXTURES / "third_party" / "gptq" / "layers" / "b4_asym_g32_k128_n64.safetensors"))
    scales = golden["scales"].copy()
    scales[1, 3] = np.nan
    path = tmp_path / "one_layer.safetensors"
    save_file({"qweight": golden["gptqmodel.qweight"], "qzeros": golden["gptqmodel_v1.qzeros"], "scales": scales,
               "g_idx": golden["g_idx"]}, str(path))
    bad = [f for f in validate(str(path)).findings if f.code == "gptq.scales.nonfinite"]
    assert [(f.tensor, f.message) for f in bad] == [("scales", "'scales' must be finite float16 (got NaN at [1, 3])")]
    assert main(["validate", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "    where: scales" in lines and not any(line.strip() in ("layers:", "where:") for line in lines)
