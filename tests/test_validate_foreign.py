"""QF-5.2: modules of layouts qformats does not decode (FP8, bitsandbytes, GPTQ Marlin) inside a covered
checkpoint are counted and named, by module, and the verdict line says how many were not checked."""

import json
import math
import shutil
import struct
from pathlib import Path

from qformats.cli import main
from qformats.validate import validate

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints" / "gptq_v1_sym_4bit"   # 2 GPTQ layers
GATE, UP, DOWN = (f"model.layers.0.mlp.{m}" for m in ("gate_proj", "up_proj", "down_proj"))
SIZES = {"F8_E4M3": 1, "U8": 1, "F16": 2, "F32": 4}


def _fp8(module: str) -> dict[str, tuple[str, list[int]]]:
    """An FP8 Linear as compressed-tensors' float-quantized format stores it: an FP8 weight and its scale."""
    return {f"{module}.weight": ("F8_E4M3", [64, 128]), f"{module}.weight_scale": ("F32", [64, 1])}


def _bnb4(module: str) -> dict[str, tuple[str, list[int]]]:
    """A bitsandbytes 4-bit Linear as Linear4bit._save_to_state_dict stores it: its state under ``weight.``."""
    return {f"{module}.weight": ("U8", [4096, 1]), f"{module}.weight.absmax": ("F32", [128]),
            f"{module}.weight.quant_map": ("F32", [16]), f"{module}.weight.quant_state.bitsandbytes__nf4": ("U8", [64])}


def _with_extra(tmp_path: Path, tensors: dict[str, tuple[str, list[int]]]) -> Path:
    """The GPTQ sample with ``tensors`` (zeros) in a second file, extra.safetensors."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SAMPLE, ckpt)
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = SIZES[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    (ckpt / "extra.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return ckpt


def _unsupported(path: Path) -> list[tuple[str | None, str, int | None]]:
    report = validate(str(path))
    return [(f.tensor, f.message, f.count) for f in report.findings if f.code == "checkpoint.layer.unsupported"]


def test_one_fp8_module_is_named_with_all_its_tensors(tmp_path):
    """QF-5.2: "1 module (2 tensors) is in a layout qformats does not decode (FP8 / compressed-tensors):
    'model.layers.0.mlp.down_proj'; not checked" -- the FP8 `weight` is counted with its `weight_scale`."""
    assert _unsupported(_with_extra(tmp_path, _fp8(GATE))) == [
        (GATE, "1 module (2 tensors) is in a layout qformats does not decode (FP8 / compressed-tensors): "
               f"'{GATE}'; not checked", 1)]


def test_several_fp8_modules_are_counted_in_the_plural(tmp_path):
    """QF-5.2: "one warning gives the number of modules holding such a tensor and of their tensors [...], the
    first module's name"."""
    assert _unsupported(_with_extra(tmp_path, _fp8(GATE) | _fp8(UP))) == [
        (GATE, "2 modules (4 tensors) are in a layout qformats does not decode (FP8 / compressed-tensors): "
               f"'{GATE}' and 1 more; not checked", 2)]


def test_bitsandbytes_state_under_weight_is_one_module_of_its_own_room(tmp_path):
    """QF-5.2, BNB-1.1: bitsandbytes' `<module>.weight.absmax`, `.weight.quant_map` and `.weight.quant_state.*` belong
    to `<module>`, which spec/bnb.md now covers: no foreign warning, one module checked, its zero-filled
    quant_state reported under its own name."""
    report = validate(str(_with_extra(tmp_path, _bnb4(GATE))))
    assert _unsupported(_with_extra(tmp_path / "again", _bnb4(GATE))) == []
    assert [(f.code, f.tensor) for f in report.findings if f.severity == "error"] == [
        ("bnb.state.invalid", f"{GATE}.weight.quant_state.bitsandbytes__nf4")]


def test_tensors_a_covered_format_claims_are_not_counted(tmp_path):
    """QF-5.2: "every tensor of the module that no covered format claims": a GPTQ module's qweight, qzeros,
    scales and g_idx are checked, only the stray weight_scale beside them is not."""
    assert _unsupported(_with_extra(tmp_path, {f"{DOWN}.weight_scale": ("F32", [64, 1])})) == [
        (DOWN, "1 module (1 tensor) is in a layout qformats does not decode (FP8 / compressed-tensors): "
               f"'{DOWN}'; not checked", 1)]


def test_summary_counts_the_modules_not_checked(tmp_path):
    """QF-5.2: "The report's `summary` gives the number as `modules_not_checked`"."""
    report = validate(str(_with_extra(tmp_path, _fp8(GATE) | _fp8(UP))))
    assert (report.verdict, report.summary["layers"], report.summary["modules_not_checked"]) == ("valid", 2, 2)


def test_summary_says_0_modules_not_checked_when_all_are():
    assert validate(str(SAMPLE)).summary["modules_not_checked"] == 0


def test_verdict_line_says_how_many_modules_were_not_checked(tmp_path, capsys):
    """QF-5.2: "the verdict line adds ", 1 module not checked" when it is not 0"."""
    ckpt = _with_extra(tmp_path, _fp8(GATE))
    assert main(["validate", str(ckpt)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == \
        f"{ckpt}: VALID (gptq, 2 layers, 8 of 10 tensors checked (not checked: 2 quantized; -v names them), 0 errors, " \
        "1 warning, 1 module not checked)"


def test_verdict_line_is_unchanged_when_every_module_was_checked(capsys):
    """QF-5.2: the verdict line adds the count only "when it is not 0"."""
    assert main(["validate", str(SAMPLE)]) == 0
    assert capsys.readouterr().out == f"{SAMPLE}: VALID (gptq, 2 layers, 8 of 8 tensors checked, 0 errors, 0 warnings)\n"


def test_inspect_last_line_says_how_many_modules_were_not_checked(tmp_path, capsys):
    """QF-5.2: inspect's closing line, which carries the verdict, says it too."""
    assert main(["inspect", str(_with_extra(tmp_path, _fp8(GATE) | _fp8(UP)))]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "2 rows, 2 layers, 8 of 12 tensors checked (not checked: 4 quantized; validate -v names them), 2 modules " \
        "not checked; verdict valid (0 errors, 1 warning: qformats validate for details)"
