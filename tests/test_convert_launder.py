"""A conversion keeps what `validate` sees (GPTQ-7.4, AWQ-4.4, CT-4.7; issue 28 item 3) and the
compressed-tensors scale rounding it allows only when asked (CT-4.6; issue 28 item 4).

Every case is built from a fixture. Expected errors name what ``validate`` reports on the same input
(the evidence, the writer the config names); expected rounding figures come from the spec's bit layout
(CT-2.3) unpacked here by hand and NumPy's own float16 rounding, not from qformats' codec.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.tools import convert, decode
from qformats.validate import validate
from whole_error import whole_in_file as whole

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
GPTQ_NEG = FIXTURES / "third_party" / "gptq" / "checkpoints" / "neg_b4_sym_v2_zeros_labelled_gptq"
AWQ_GEMV = FIXTURES / "checkpoints" / "awq_gemv_bytes_labelled_gemm"
CT_W4_ASYM = FIXTURES / "third_party" / "compressed_tensors" / "checkpoints" / "w4_asym_group32"
MODULE = "model.layers.0.mlp.down_proj"


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def refused(source: Path, to: str, tmp_path: Path, **options) -> QFormatsError:
    """The CLI exits 2, the API raises; nothing is written and the input is unchanged."""
    before = digest(source)
    flags = [a for k, v in options.items() if v for a in (f"--{k.replace('_', '-')}",) + ((v,) if v is not True else ())]
    assert main(["convert", str(source), "--to", to, "-o", str(tmp_path / "out"), *flags]) == 2
    with pytest.raises(QFormatsError) as info:
        convert(str(source), str(tmp_path / "out"), to=to, **options)
    assert not (tmp_path / "out").exists() and digest(source) == before
    return info.value


@pytest.fixture(scope="module")
def asym(tmp_path_factory) -> Path:
    """GPTQModel 7.7.0's v2 zeros labelled `gptq`, declared asymmetric (`sym: false` in both configs): the
    evidence is then statistical (GPTQ-8.2), which the exact-only refusal of old let through (issue 28)."""
    path = tmp_path_factory.mktemp("neg") / "neg_b4_asym_v2_zeros_labelled_gptq"
    shutil.copytree(GPTQ_NEG, path)
    for name in ("config.json", "quantize_config.json"):
        raw = json.loads((path / name).read_text())
        (raw.get("quantization_config") or raw)["sym"] = False
        (path / name).write_text(json.dumps(raw))
    return path


def _mismatch_detail(path: Path, module: str) -> str:
    """The evidence `validate` reports for ``module`` (its gptq.label.mismatch finding)."""
    found = [f for f in validate(str(path)).findings if f.code == "gptq.label.mismatch" and f.tensor == f"{module}.qzeros"]
    assert len(found) == 1
    return found[0].message.split("but the zeros say v2: ", 1)[1].split("; readers that use qzeros", 1)[0]


CONSTRAINT = ("v1 fields as the label says; convert follows the bytes or the label only when told which (GPTQ-7.4): "
              "pass --source-version v2 to read them as the zeros say, or --source-version v1 to read them as labelled")
WRITER = "the label's writer: meta.quantizer 'gptqmodel:7.7.0'"


@pytest.mark.parametrize("to", ["gptq_v2", "awq_gemm", "compressed_tensors"])
def test_statistical_label_mismatch_is_refused_for_every_target(asym, to, tmp_path):
    """GPTQ-7.4: zeros whose statistical evidence (GPTQ-8.2) contradicts the label are not converted until told
    which reading to trust; the error names both flags, the evidence validate reports and the config's writer."""
    err = refused(asym, to, tmp_path)
    file = None if to == "gptq_v2" else "model.safetensors"
    assert whole(err) == ("gptq.label.mismatch", f"{MODULE}.qzeros", CONSTRAINT,
                          f"v2 fields by statistical evidence ({_mismatch_detail(asym, MODULE)}); {WRITER}", file)


def test_exact_label_mismatch_is_refused_naming_the_writer(tmp_path):
    """GPTQ-7.4 with GPTQ-8.1's exact evidence: every field 8 is symmetric zero 8 stored as v2."""
    err = refused(GPTQ_NEG, "gptq_v2", tmp_path)
    assert whole(err) == ("gptq.label.mismatch", f"{MODULE}.qzeros", CONSTRAINT,
                          "v2 fields by exact evidence (every field is 8 = symmetric zero 8 stored as v2 (GPTQ-8.1)); "
                          f"{WRITER}", None)


def _evidence(path: Path) -> dict[str, str]:
    return {row["layer"]: row["evidence"] for row in validate(str(path)).layers}


def _testimony(path: Path) -> dict[str, tuple[str, str]]:
    """Per module: whether the zeros agree with the label, contradict it or cannot tell, and by which method."""
    said = {}
    for row in validate(str(path)).layers:
        label = row["format"].removeprefix("gptq_")
        verdict = "undetermined" if row["evidence"] == "undetermined" else "agrees" if row["evidence"] == label \
            else "contradicts"
        said[row["layer"]] = (verdict, row["evidence_method"])
    return said


def test_the_zeros_reading_converts_and_keeps_the_evidence(asym, tmp_path):
    """GPTQ-7.4: told --source-version v2 (the zeros' reading), convert relabels; the output's evidence is the
    input's (v2 in every module, not "undetermined") and it agrees with the new label."""
    assert main(["convert", str(asym), "--to", "gptq_v2", "--source-version", "v2", "-o", str(tmp_path / "out")]) == 0
    before, after = _evidence(asym), _evidence(tmp_path / "out")
    assert set(before.values()) == {"v2"} and after == before
    assert validate(str(tmp_path / "out")).verdict == "valid"


def test_the_labels_reading_is_converted_only_when_asked_and_said(asym, tmp_path, capsys):
    """GPTQ-7.4: --source-version v1 says the label is right: convert does as told, and says on stderr (and in the
    answer) that it read every module against its zeros' evidence, which the output's label no longer shows."""
    assert main(["convert", str(asym), "--to", "gptq_v2", "--source-version", "v1", "-o", str(tmp_path / "cli")]) == 0
    assert capsys.readouterr().err == ("qformats: warning: read as --source-version v1 against the zeros' evidence in "
                                       f"14 layers (e.g. {MODULE}); validate cannot see this in the output\n")
    done = convert(str(asym), str(tmp_path / "api"), to="awq_gemm", source_version="v1")
    assert done["against_evidence"] == sorted(row["layer"] for row in validate(str(asym)).layers)


@pytest.mark.parametrize("to", ["gptq_v2", "compressed_tensors"])
def test_awq_bytes_contradicting_gemm_are_refused(to, tmp_path):
    """AWQ-4.4: GPTQ-shaped (GEMV) bytes under version 'gemm' are refused as validate reports them (AWQ-6.2)."""
    err = refused(AWQ_GEMV, to, tmp_path)
    assert whole(err) == ("awq.label.mismatch", f"{MODULE}.qweight", "packed along the output axis, as the config's "
                          "version 'gemm' says (AWQ-2.3); convert reads AWQ GEMM bytes only and no option makes other "
                          "bytes AWQ GEMM (AWQ-4.4)", "(16, 64) with scales (4, 64): packed along the input axis "
                          "(GPTQ or AutoAWQ GEMV bytes)", "model.safetensors")
    assert {f.code for f in validate(str(AWQ_GEMV)).findings} == {"awq.label.mismatch"}


@pytest.mark.parametrize(("source", "to"), [
    pytest.param(FIXTURES / "checkpoints" / "gptq_v2_asym_3bit_actorder", "gptq", id="v2-asym-3bit>v1"),
    pytest.param(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", "gptq_v2", id="v1-sym>v2"),
    pytest.param(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", "awq_gemm", id="v1-sym>awq"),
])
def test_a_clean_conversion_keeps_the_evidence(source, to, tmp_path):
    """GPTQ-7.4: where convert is allowed, the output's verdict is the input's and, between GPTQ versions, every
    module's zeros testify as they did (agreeing with the label, by the same method): nothing is promoted."""
    assert main(["convert", str(source), "--to", to, "-o", str(tmp_path / "out")]) == 0
    assert validate(str(tmp_path / "out")).verdict == validate(str(source)).verdict
    if to != "awq_gemm":
        assert _testimony(tmp_path / "out") == _testimony(source)
        assert {v for v, _ in _testimony(source).values()} == {"agrees"}


# -- CT-4.6: --round-scales --------------------------------------------------------------------------------------

def _unpack4(words: np.ndarray, count: int, axis: int) -> np.ndarray:
    """CT-2.3 at 4 bits, by hand: value j of a packed row is bits 4 (j mod 8) .. of word j // 8, stored + 8."""
    w = np.moveaxis(words.astype(np.int64) & 0xFFFFFFFF, axis, -1)
    j = np.arange(count)
    return np.moveaxis((w[..., j // 8] >> (4 * (j % 8))) & 15, -1, axis) - 8


@pytest.fixture(scope="module")
def f32_scales(tmp_path_factory) -> tuple[Path, dict[str, dict[str, np.ndarray]]]:
    """compressed-tensors 0.20.0's w4_asym_group32 with float32 scales, as the library writes them for a float32
    model: each scale nudged by 0, +-2^-13 or +2^-20 of itself, so some are float16 numbers and most are not."""
    path = tmp_path_factory.mktemp("ct") / "w4_asym_f32"
    shutil.copytree(CT_W4_ASYM, path)
    tensors = load_file(str(path / "model.safetensors"))
    rng = np.random.default_rng(28)
    parts = {}
    for name in sorted(n[: -len(".weight_scale")] for n in tensors if n.endswith(".weight_scale")):
        s16 = tensors[f"{name}.weight_scale"]
        nudge = rng.choice(np.array([0.0, 2.0 ** -13, -(2.0 ** -13), 2.0 ** -20]), size=s16.shape)
        s32 = (s16.astype(np.float64) * (1 + nudge)).astype(np.float32)
        tensors[f"{name}.weight_scale"] = s32
        n, k = (int(v) for v in tensors[f"{name}.weight_shape"])
        q = _unpack4(tensors[f"{name}.weight_packed"], k, axis=1)                   # (N, K)
        z = _unpack4(tensors[f"{name}.weight_zero_point"], n, axis=0)               # (N, G)
        parts[name] = {"s": s32, "q": q, "z": z}
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path, parts


def _expected_change(parts: dict[str, dict[str, np.ndarray]]) -> tuple[int, int, float]:
    """(scales rounded, weights changed, largest change): |q - z| * |s - fp16(s)| per weight (CT-4.6)."""
    scales = weights = 0
    largest = 0.0
    for p in parts.values():
        step = np.abs(p["s"].astype(np.float64) - p["s"].astype(np.float16).astype(np.float64))   # (N, G)
        off = np.abs(p["q"] - np.repeat(p["z"], p["q"].shape[1] // p["z"].shape[1], axis=1))     # (N, K)
        change = off * np.repeat(step, p["q"].shape[1] // step.shape[1], axis=1)
        scales += int(np.count_nonzero(step))
        weights += int(np.count_nonzero(change))
        largest = max(largest, float(change.max()))
    return scales, weights, largest


def test_float32_scales_are_refused_naming_the_option(f32_scales, tmp_path):
    """CT-4.1, CT-4.6: scales float16 cannot hold are refused without --round-scales; the error names it."""
    path, parts = f32_scales
    first = "model.layers.0.mlp.down_proj"
    s = parts[first]["s"]
    lost = s.astype(np.float16).astype(np.float32) != s
    i, j = (int(v) for v in np.argwhere(lost)[0])
    err = refused(path, "gptq_v2", tmp_path)
    assert whole(err) == ("ctensors.convert.unrepresentable", f"{first}.weight_scale",
                          "exactly representable in float16 (GPTQ and AWQ store float16 scales, CT-4.1); --round-scales "
                          "rounds them to float16 and reports the weights that change (CT-4.6)",
                          f"{float(s[i, j])!r} at [{i}, {j}] ({int(lost.sum())} scales)", "model.safetensors")


def test_round_scales_reports_the_weights_it_changes(f32_scales, tmp_path, capsys):
    """CT-4.6: --round-scales converts; it prints (and the API returns) the scales rounded, the weights changed
    and the largest change, as |q - z| * |s - fp16(s)| computed here from the hand-unpacked codes."""
    path, parts = f32_scales
    scales, weights, largest = _expected_change(parts)
    assert 0 < scales < sum(p["s"].size for p in parts.values()) and weights > 0 and largest > 0
    assert main(["convert", str(path), "--to", "gptq_v2", "--round-scales", "-o", str(tmp_path / "cli")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"rounded {scales} scales to float16 in 3 layers: {weights} weights changed, largest absolute change {largest!r}")
    done = convert(str(path), str(tmp_path / "api"), to="awq_gemm", round_scales=True)
    assert done["rounded_scales"] == {"scales": scales, "weights_changed": weights, "max_abs_change": largest,
                                      "modules": sorted(parts)}


def test_round_scales_output_is_the_rounded_weights(f32_scales, tmp_path):
    """CT-4.6: the output decodes to fp16(s) * (q - z) exactly, and validates (a conforming GPTQ v2 checkpoint)."""
    path, parts = f32_scales
    convert(str(path), str(tmp_path / "out"), to="gptq_v2", round_scales=True)
    decode(str(tmp_path / "out"), [], str(tmp_path / "w.safetensors"), all_tensors=True)
    got = load_file(str(tmp_path / "w.safetensors"))
    for name, p in parts.items():
        s16 = p["s"].astype(np.float16).astype(np.float32)
        reps = p["q"].shape[1] // s16.shape[1]
        want = np.repeat(s16, reps, axis=1) * (p["q"] - np.repeat(p["z"], reps, axis=1)).astype(np.float32)
        np.testing.assert_array_equal(got[f"{name}.weight"], want)
    assert validate(str(tmp_path / "out")).verdict == "valid"


def test_round_scales_refuses_a_scale_beyond_float16(f32_scales, tmp_path):
    """CT-4.6: a scale that would round to infinity is refused, naming it."""
    path, _ = f32_scales
    src = tmp_path / "big"
    shutil.copytree(path, src)
    tensors = load_file(str(src / "model.safetensors"))
    tensors["model.layers.0.mlp.up_proj.weight_scale"][3, 1] = np.float32(70000.0)
    save_file(tensors, str(src / "model.safetensors"))
    err = refused(src, "gptq_v2", tmp_path, round_scales=True)
    assert whole(err) == ("ctensors.convert.unrepresentable", "model.layers.0.mlp.up_proj.weight_scale",
                          "within float16's range (|s| <= 65504) to be rounded to float16 (CT-4.6)", "70000.0 at [3, 1]",
                          "model.safetensors")


def test_round_scales_is_refused_for_a_gptq_source(tmp_path):
    """CT-4.6: the option means nothing where scales are float16 already (a GPTQ checkpoint)."""
    err = refused(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", "gptq_v2", tmp_path, round_scales=True)
    assert whole(err) == ("argument.invalid", "round_scales", "given only to convert a compressed-tensors checkpoint "
                          "to GPTQ or AWQ GEMM, whose scales are float16 (CT-4.6)", "a GPTQ checkpoint", None)


def test_a_repack_that_would_hide_an_ambiguous_layout_is_refused(tmp_path):
    """CT-4.7: beside a per-word module, one whose widths fit both layouts (3-bit, K = 80: 8 words either way) under
    a config naming no version is ambiguous (CT-2.6); CT-4.5 would write version 0.20.0 and so settle it as dense
    unseen. Refused until the config names the version that wrote it."""
    from qformats.formats.ctensors import codec

    src = tmp_path / "mixed"
    shutil.copytree(FIXTURES / "checkpoints" / "ctensors_w3_per_word_0_17", src)
    tensors = load_file(str(src / "model.safetensors"))
    rng = np.random.default_rng(47)
    name = "model.layers.0.mlp.gate_proj"                     # N = 80: zero points fit both layouts too
    tensors[f"{name}.weight_packed"] = codec.pack_dense(rng.integers(0, 8, (80, 80)).astype(np.uint8), 3)
    tensors[f"{name}.weight_zero_point"] = np.ascontiguousarray(
        codec.pack_dense(rng.integers(0, 8, (1, 80)).astype(np.uint8), 3).T)
    tensors[f"{name}.weight_scale"] = np.full((80, 1), 0.01, np.float16)
    tensors[f"{name}.weight_shape"] = np.array([80, 80], np.int64)
    save_file(tensors, str(src / "model.safetensors"))
    raw = json.loads((src / "config.json").read_text())
    del raw["quantization_config"]["version"]
    (src / "config.json").write_text(json.dumps(raw))
    assert "ctensors.layout.ambiguous" in {f.code for f in validate(str(src)).findings}
    err = refused(src, "compressed_tensors", tmp_path)
    assert whole(err) == ("ctensors.layout.ambiguous", f"{name}.weight_packed", "in one layout: a module whose widths "
                          "fit both is copied as it is under a config whose version then says dense (CT-4.7); set the "
                          "version that wrote the checkpoint in config.json's quantization_config first (CT-2.6)",
                          "1 module fitting both layouts beside 2 modules in the per-word one", "model.safetensors")


# -- the sweep (issue 28's done-when): every convert output validates no better than its input -----------------

# A per-word module converted is read by its widths alone, so the warning about other readers is repaired (CT-4.7).
REPAIRED = {"ctensors.layout.word"}
# every --to value, the FP8 / FP4 layouts' included (FP8-8, FP4-8)
TARGETS = ("gptq_v2", "gptq", "awq_gemm", "compressed_tensors", "modelopt", "gpt_oss_mxfp4", "fp8")


def _convertible() -> list[Path]:
    dirs = {p.parent for p in FIXTURES.rglob("*.safetensors")} | {p.parent for p in FIXTURES.rglob("*.index.json")}
    return sorted(d for d in dirs if (d / "config.json").exists() or (d / "quantize_config.json").exists())


@pytest.mark.parametrize("source", _convertible(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_convert_output_validates_no_better_than_its_input(source, tmp_path):
    """GPTQ-7.4, AWQ-4.4, CT-4.7, FP8-8.2, FP4-8.5: for every fixture and every target, convert refuses (leaving the
    input as it was) or writes a checkpoint whose verdict is no better and whose findings keep every code of the
    input's."""
    try:
        before = validate(str(source), jobs=1)
    except QFormatsError:
        return                                   # could not run: nothing for convert to keep either
    codes = {f.code for f in before.findings if f.severity != "info"} - REPAIRED
    for to in TARGETS:
        out, digest_before = tmp_path / to, digest(source)
        try:
            convert(str(source), str(out), to=to)
        except QFormatsError:
            assert digest(source) == digest_before and not out.exists()
            continue
        after = validate(str(out), jobs=1)
        assert not (before.verdict == "invalid" and after.verdict == "valid"), (to, [f.code for f in before.findings])
        assert codes <= {f.code for f in after.findings}, (to, codes, [f.code for f in after.findings])


# The FP8 / FP4 fixtures the sweep walks, and the targets each converts to (the rest are refused): the sweep above
# reaches every conversion of FP8-8 and FP4-8 from a real library's checkpoint.
FLOAT_REACHED = {"third_party/fp4/checkpoints/ct_nvfp4": {"modelopt"},
                 "third_party/fp4/checkpoints/modelopt_nvfp4": {"compressed_tensors"},
                 "third_party/fp4/checkpoints/ct_mxfp4": {"modelopt"},
                 "third_party/fp4/checkpoints/modelopt_mxfp4": {"compressed_tensors"},
                 "third_party/fp4/checkpoints/gpt_oss_mxfp4": {"compressed_tensors"},
                 "third_party/fp8/checkpoints/ct_fp8_block": {"fp8"}}


def test_the_sweep_reaches_every_fp8_and_fp4_conversion(tmp_path):
    """FP8-8.2, FP4-8.5: among the fixtures the sweep walks, each FP8 / FP4 route converts from a real library's
    checkpoint (and validates as well as its input), so the sweep judges every new conversion."""
    swept = {str(p.relative_to(FIXTURES)) for p in _convertible()}
    assert set(FLOAT_REACHED) <= swept
    for source, targets in FLOAT_REACHED.items():
        done = set()
        for to in TARGETS:
            try:
                convert(str(FIXTURES / source), str(tmp_path / source / to), to=to)
            except QFormatsError:
                continue
            done.add(to)
            assert validate(str(tmp_path / source / to), jobs=1).verdict == "valid"
        assert done == targets, source
