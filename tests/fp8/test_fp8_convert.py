"""FP8-8: lossless conversion between compressed-tensors FP8 block and DeepSeek / transformers ``fp8``, on the
checkpoints compressed-tensors 0.20.0 and transformers 5.24.0 wrote (fixtures/third_party/fp8).

Expected values come from the libraries (the fixtures' ``expected/`` weights; compressed-tensors 0.20.0 run from
.venv/real on the converted checkpoint) and from ml_dtypes' float8_e4m3fn / bfloat16, never from qformats' codec."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.formats.fp8 import convert as fp8_convert
from qformats.tools import convert, decode
from qformats.validate import validate
from whole_error import whole_in_file as whole

from .st_edit import CHECKPOINTS, array, copy, edit, entry, expected, read, set_config
from .st_edit import config as st_config

ROOT = Path(__file__).resolve().parents[2]
REAL_PYTHON = ROOT / ".venv" / "real" / "bin" / "python"
REAL_STAMP = ROOT / ".venv" / "real" / ".installed-awq-ct"
REAL_SCRIPT = ROOT / "tests" / "fp4" / "real_ct_decompress.py"
F32 = np.float32

# transformers' fixture declared a float32 model: compressed-tensors then keeps its float32 scales (FP8-8.1)
ROUTES = [pytest.param("ct_fp8_block", "fp8", "compressed_tensors", id="ct-block-bf16-ragged-moe>fp8"),
          pytest.param("hf_fp8_block_f32", "compressed_tensors", "fp8", id="transformers-fp8-float32-model>ct")]


def _tensors(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update(read(f))
    return out


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """Every route's A -> B (CLI) and B -> A (Python API)."""
    out = {}
    for p in ROUTES:
        name, to, back = p.values
        tmp = tmp_path_factory.mktemp(name)
        src = _source(tmp, name)
        assert main(["convert", str(src), "--to", to, "-o", str(tmp / "b")]) == 0
        convert(str(tmp / "b"), str(tmp / "a"), to=back)
        out[name] = tmp
    return out


def _source(tmp: Path, name: str) -> Path:
    """The fixture; ``hf_fp8_block_f32``: transformers' checkpoint with ``dtype: float32`` in its config.json."""
    if not name.endswith("_f32"):
        return CHECKPOINTS / name
    src = copy(tmp, name.removesuffix("_f32"))
    set_config(src, {**st_config(src), "dtype": "float32"})
    return src


def _fixture(name: str) -> str:
    return name.removesuffix("_f32")


@pytest.mark.parametrize(("name", "to", "back"), ROUTES)
def test_round_trip_gives_back_every_tensor_byte_for_byte(converted, name, to, back):
    """FP8-8.2: A -> B -> A gives back every tensor, dtype, shape and bytes (bfloat16 scales included: the model's
    dtype holds them exactly)."""
    assert _tensors(converted[name] / "a") == _tensors(CHECKPOINTS / _fixture(name))


def _bf16(w: np.ndarray) -> np.ndarray:
    return np.asarray(w, F32).astype(ml_dtypes.bfloat16).astype(F32)


@pytest.mark.parametrize(("name", "to", "back"), ROUTES)
def test_converted_checkpoint_decodes_to_the_source_librarys_weights(converted, name, to, back, tmp_path):
    """FP8-8.1: the converted checkpoint validates and its float32 decode, rounded to bfloat16 once, is the source
    library's bfloat16 output (compressed-tensors' for its block fixture, transformers' for its fp8 one)."""
    report = validate(str(converted[name] / "b"), jobs=1)
    assert (report.verdict, report.summary["errors"]) == ("valid", 0)
    want = expected(_fixture(name))
    decode(str(converted[name] / "b"), [t.removesuffix(".weight") for t in want], str(tmp_path / "w.safetensors"))
    got = read(tmp_path / "w.safetensors")
    for tensor, (value, precision) in want.items():
        assert precision == "bfloat16"
        assert np.array_equal(_bf16(array(got[tensor])), value), tensor


def test_bfloat16_scales_widen_exactly():
    """FP8-8.1: a bfloat16 scale becomes the float32 of the same value; the weight bytes are untouched."""
    scale = np.array([[0.0107421875, 3.0517578125e-05]], F32)          # bfloat16 numbers (8 significant bits)
    assert np.array_equal(scale.astype(ml_dtypes.bfloat16).astype(F32), scale)
    weight = np.arange(2 * 200, dtype=np.uint8).reshape(2, 200) % 0x7E
    out = fp8_convert.ct_to_deepseek({"weight": weight, "weight_scale": scale}, block=(128, 128))
    assert out["weight"] is weight and out["weight_scale_inv"].dtype == F32
    assert np.array_equal(out["weight_scale_inv"], scale)


def test_narrowing_that_moves_a_weight_is_refused_with_the_largest_change():
    """FP8-8.1: float32 scale 0.1 is no bfloat16; narrowing it moves every non-zero weight by |e4m3| * |s - s'|,
    largest at the largest code (0x7E = 448)."""
    weight = np.zeros((1, 128), np.uint8)
    weight[0, :4] = [0x00, 0x38, 0x7E, 0xFE]                          # 0, 1, 448, -448, then zeros
    scale = np.array([[F32(0.1)]], F32)
    s_bf16 = float(scale.astype(ml_dtypes.bfloat16).astype(F32)[0, 0])
    e4m3 = weight.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    before = (e4m3 * float(scale[0, 0])).astype(F32).astype(np.float64)     # FP8-5.1: rounded once to float32
    after = (e4m3 * s_bf16).astype(F32).astype(np.float64)
    exact = np.abs(before - after)
    with pytest.raises(QFormatsError) as info:
        fp8_convert.deepseek_to_ct({"weight": weight, "weight_scale_inv": scale}, block=(128, 128),
                                   scale_dtype="bfloat16")
    assert whole(info.value) == ("fp8.convert.inexact", "weight_scale", "scales bfloat16 holds exactly: "
                                 "compressed-tensors loads them in the model's dtype, bfloat16, which would change "
                                 "weights (FP8-8.1)", f"1 scales round, 3 weights change, largest by "
                                 f"{float(exact.max())!r} at [0, 2]", None)


def test_columns_compressed_tensors_cannot_block_are_refused():
    """FP8-8.1, FP8-1.3: compressed-tensors pads block rows only; K = 200 with 128-column blocks is refused."""
    with pytest.raises(QFormatsError) as info:
        fp8_convert.deepseek_to_ct({"weight": np.zeros((130, 200), np.uint8),
                                    "weight_scale_inv": np.ones((2, 2), F32)}, block=(128, 128))
    assert whole(info.value) == ("fp8.convert.unrepresentable", "weight", "in_features a multiple of the block's 128 "
                                 "columns: compressed-tensors 0.20.0 pads rows only (initialize.py, FP8-1.3)", 200,
                                 None)


def test_a_static_input_scale_is_refused():
    """FP8-8.1: fp8's dynamic activation scheme has no input_scale to carry a static one."""
    with pytest.raises(QFormatsError) as info:
        fp8_convert.ct_to_deepseek({"weight": np.zeros((16, 128), np.uint8), "weight_scale": np.ones((1, 1), F32),
                                    "input_scale": np.ones(1, F32)}, block=(128, 128))
    assert whole(info.value) == ("fp8.convert.unrepresentable", "input_scale", "absent: fp8's activation_scheme "
                                 "dynamic has no static input scale (FP8-8.1)", "present", None)


def test_a_defect_is_refused_not_laundered(tmp_path):
    """FP8-8.2: a NaN weight_scale_inv (FP8-6.4) is refused with validate's error; nothing is written."""
    src = copy(tmp_path, "hf_fp8_block")
    name = "model.layers.0.self_attn.q_proj.weight_scale_inv"

    def nan(tensors):
        tensors[name] = entry("F32", np.full((1, 1), np.nan, F32))
    edit(src, nan)
    found = [f for f in validate(str(src)).findings if f.severity == "error"]
    assert [f.code for f in found] == ["fp8.scale.nonfinite"]
    assert main(["convert", str(src), "--to", "compressed_tensors", "-o", str(tmp_path / "out")]) == 2
    with pytest.raises(QFormatsError) as info:
        convert(str(src), str(tmp_path / "out"), to="compressed_tensors")
    assert whole(info.value) == ("fp8.scale.nonfinite", found[0].tensor, "a conforming FP8 module to convert (FP8-6.4)",
                                 found[0].message, "model.safetensors")
    assert not (tmp_path / "out").exists()


def test_other_strategies_are_refused(tmp_path):
    """FP8-8.2: a per-tensor compressed-tensors checkpoint has no fp8 block form here; refused naming the routes."""
    with pytest.raises(QFormatsError) as info:
        convert(str(CHECKPOINTS / "ct_fp8_tensor"), str(tmp_path / "out"), to="fp8")
    assert whole(info.value) == ("argument.invalid", "to", "fp8 for a compressed-tensors block checkpoint, "
                                 "compressed_tensors for a DeepSeek / transformers fp8 block checkpoint, one block "
                                 "size throughout (FP8-8.2)", "fp8 for ct tensor", None)


def test_compressed_tensors_decompresses_the_converted_checkpoint(converted):
    """FP8-8.1: compressed-tensors 0.20.0 loads transformers' fp8 checkpoint converted (strictly) into a float32
    model and decompresses it to values whose bfloat16 rounding is transformers' own output."""
    if not REAL_STAMP.exists():
        pytest.skip("compressed-tensors environment not built (make real-subjects)")
    path = str(converted["hf_fp8_block_f32"] / "b")
    done = subprocess.run([str(REAL_PYTHON), str(REAL_SCRIPT), path], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])[path]
    want = expected("hf_fp8_block")
    assert sorted(got) == sorted(t.removesuffix(".weight") for t in want)
    for tensor, (value, _) in want.items():
        assert np.array_equal(_bf16(np.asarray(got[tensor.removesuffix(".weight")], F32)), value), tensor


def test_float32_scales_a_bfloat16_model_would_round_are_refused(tmp_path):
    """FP8-8.1: transformers' fixture (a bfloat16 lm_head, a float32 scale no bfloat16 holds) converted would be read
    by compressed-tensors with its scale rounded to bfloat16; refused with the weights that would change."""
    layer = read(CHECKPOINTS / "hf_fp8_block" / "model.safetensors")
    m = "model.layers.0.self_attn.q_proj"
    e4m3 = array(layer[f"{m}.weight"]).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    s = float(array(layer[f"{m}.weight_scale_inv"])[0, 0])
    s_bf16 = float(np.float32(s).astype(ml_dtypes.bfloat16))
    change = np.abs((e4m3 * s).astype(F32).astype(np.float64) - (e4m3 * s_bf16).astype(F32))
    at = [int(i) for i in np.unravel_index(int(np.argmax(change)), change.shape)]
    with pytest.raises(QFormatsError) as info:
        convert(str(CHECKPOINTS / "hf_fp8_block"), str(tmp_path / "out"), to="compressed_tensors")
    assert whole(info.value) == ("fp8.convert.inexact", f"{m}.weight_scale", "scales bfloat16 holds exactly: "
                                 "compressed-tensors loads them in the model's dtype, bfloat16, which would change "
                                 "weights (FP8-8.1)", f"1 scales round, {int(np.count_nonzero(change))} weights "
                                 f"change, largest by {float(change.max())!r} at {at}", "model.safetensors")
