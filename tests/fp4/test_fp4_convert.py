"""FP4-8: lossless conversion between the FP4 layouts, on the checkpoints compressed-tensors 0.20.0, ModelOpt 0.47.0
and the gpt-oss layout wrote (fixtures/third_party/fp4).

Expected values come from the libraries: each fixture's ``expected/`` weights are its own library's decode, and
compressed-tensors 0.20.0 itself (.venv/real) decompresses the converted checkpoints. Refusal figures are computed
here with ml_dtypes' float4_e2m1fn / float8_e4m3fn / bfloat16, not with qformats' codec."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from fp4_fixtures import CHECKPOINTS, corrupted, expected, read_st, write_st

from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.formats.fp4 import convert as fp4_convert
from qformats.formats.ggml import dequantize as ggml_dequantize
from qformats.tools import convert, decode
from qformats.validate import validate
from whole_error import whole_in_file as whole

ROOT = Path(__file__).resolve().parents[2]
REAL_PYTHON = ROOT / ".venv" / "real" / "bin" / "python"
REAL_STAMP = ROOT / ".venv" / "real" / ".installed-awq-ct"
F32 = np.float32

# (source fixture, --to, --to back, whether the library decodes of both sides are compared transposed per expert)
ROUTES = [pytest.param("ct_nvfp4", "modelopt", "compressed_tensors", id="ct-nvfp4>modelopt"),
          pytest.param("modelopt_nvfp4", "compressed_tensors", "modelopt", id="modelopt-nvfp4>ct"),
          pytest.param("ct_mxfp4", "modelopt", "compressed_tensors", id="ct-mxfp4>modelopt"),
          pytest.param("modelopt_mxfp4", "compressed_tensors", "modelopt", id="modelopt-mxfp4>ct"),
          pytest.param("gpt_oss_mxfp4", "compressed_tensors", "gpt_oss_mxfp4", id="gpt-oss-moe>ct")]


def _tensors(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update(read_st(f))
    return out


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """Every route's A -> B (CLI) and B -> A (Python API)."""
    out = {}
    for p in ROUTES:
        name, to, back = p.values
        tmp = tmp_path_factory.mktemp(name)
        assert main(["convert", str(CHECKPOINTS / name), "--to", to, "-o", str(tmp / "b")]) == 0
        convert(str(tmp / "b"), str(tmp / "a"), to=back)
        out[name] = tmp
    return out


def _library_weights(name: str) -> dict[str, np.ndarray]:
    """The source library's decode by module, (out, in) per module or per expert (transformers' gpt-oss decode is
    (E, in, out): transposed here)."""
    out = {}
    for tensor, w in expected(name).items():
        if tensor.endswith(".weight"):
            out[tensor[: -len(".weight")]] = w
        else:                                   # <experts>.<proj>, (E, in, out)
            parent, _, proj = tensor.rpartition(".")
            out.update({f"{parent}.{e}.{proj}": w[e].T for e in range(w.shape[0])})
    return out


@pytest.mark.parametrize(("name", "to", "back"), ROUTES)
def test_round_trip_gives_back_every_tensor_byte_for_byte(converted, name, to, back):
    """FP4-8.1 .. 7.3: A -> B -> A gives back every tensor of the library's checkpoint, dtype, shape and bytes."""
    assert _tensors(converted[name] / "a") == _tensors(CHECKPOINTS / name)


@pytest.mark.parametrize(("name", "to", "back"), ROUTES)
def test_converted_checkpoint_decodes_to_the_source_librarys_weights(converted, name, to, back, tmp_path):
    """FP4-8.1 .. 7.3: the converted checkpoint validates with every module checked and decodes, as its own library
    decodes, to the source library's weights value for value (ModelOpt's +0 for code 8 equals -0)."""
    report = validate(str(converted[name] / "b"), jobs=1)
    assert (report.verdict, report.summary["errors"], report.summary["warnings"]) == ("valid", 0, 0)
    decode(str(converted[name] / "b"), [], str(tmp_path / "w.safetensors"), all_tensors=True)
    got = {n.removesuffix(".weight"): a for n, a in _decoded(tmp_path / "w.safetensors").items()}
    want = _library_weights(name)
    assert sorted(got) == sorted(want)
    for module, w in want.items():
        assert np.array_equal(got[module], w), module


def _decoded(path: Path) -> dict[str, np.ndarray]:
    """The decoded weights written (float32 ``<module>.weight``), not the tensors copied as stored."""
    return {n: np.frombuffer(raw, F32).reshape(shape) for n, (dtype, shape, raw) in read_st(path).items()
            if dtype == "F32" and n.endswith(".weight")}


def test_gpt_oss_experts_become_one_module_per_expert(converted):
    """FP4-8.3: gate_up_proj_blocks (E, N, K/32, 16) -> E modules `<experts>.<e>.gate_up_proj` with weight_packed
    (N, K/2), weight_scale (N, K/32) and the expert's float32 bias row."""
    src, out = _tensors(CHECKPOINTS / "gpt_oss_mxfp4"), _tensors(converted["gpt_oss_mxfp4"] / "b")
    m = "model.layers.0.mlp.experts"
    blocks = np.frombuffer(src[f"{m}.gate_up_proj_blocks"][2], np.uint8).reshape(2, 64, 2 * 16)
    for e in range(2):
        assert out[f"{m}.{e}.gate_up_proj.weight_packed"] == ("U8", [64, 32], blocks[e].tobytes())
        assert out[f"{m}.{e}.gate_up_proj.weight_scale"][:2] == ("U8", [64, 2])
        assert out[f"{m}.{e}.down_proj.bias"] == ("F32", [64], src[f"{m}.down_proj_bias"][2][e * 256:(e + 1) * 256])
    config = json.loads((converted["gpt_oss_mxfp4"] / "b" / "config.json").read_text())["quantization_config"]
    assert config["ignore"] == ["model.layers.0.mlp.router"] and config["format"] == "mxfp4-pack-quantized"


def test_modelopt_target_writes_hf_quant_config(converted):
    """FP4-8.5: a ModelOpt target gets hf_quant_config.json as ModelOpt 0.47.0 writes it, a compressed-tensors one
    none (the source's would name the wrong format)."""
    hf = json.loads((converted["ct_nvfp4"] / "b" / "hf_quant_config.json").read_text())
    assert hf == {"producer": {"name": "modelopt", "version": "0.47.0"},
                  "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                   "exclude_modules": ["lm_head"]}}
    assert not (converted["modelopt_nvfp4"] / "b" / "hf_quant_config.json").exists()


@pytest.fixture(scope="module")
def real(converted) -> dict[str, dict[str, np.ndarray]]:
    """compressed-tensors 0.20.0 decompressing the converted compressed-tensors checkpoints (one process)."""
    if not REAL_STAMP.exists():
        pytest.skip("compressed-tensors environment not built (make real-subjects)")
    names = ("modelopt_nvfp4", "modelopt_mxfp4", "gpt_oss_mxfp4")
    done = subprocess.run([str(REAL_PYTHON), str(Path(__file__).with_name("real_ct_decompress.py")),
                           *(str(converted[n] / "b") for n in names)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {n: {m: np.asarray(w, F32) for m, w in got[str(converted[n] / "b")].items()} for n in names}


@pytest.mark.parametrize("name", ["modelopt_nvfp4", "modelopt_mxfp4", "gpt_oss_mxfp4"])
def test_compressed_tensors_decompresses_the_converted_checkpoint(real, name):
    """FP4-8.1 .. 7.3: compressed-tensors 0.20.0 loads the converted checkpoint strictly and decompresses every module
    to the weights ModelOpt / transformers decode from the source, value for value."""
    want = _library_weights(name)
    assert sorted(real[name]) == sorted(want)
    for module, w in want.items():
        assert np.array_equal(real[name][module], w), module


# -- FP4-8.1: the reciprocal global scale, refused where it would change a weight -------------------------------

def _e2m1(packed: np.ndarray) -> np.ndarray:
    """E2M1 values of packed rows, element 2j in the low nibble (FP4-1.2), by ml_dtypes."""
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(packed.shape[0], -1).astype(np.uint8)
    return codes.view(ml_dtypes.float4_e2m1fn).astype(F32)


def _by_library(packed: np.ndarray, scale: np.ndarray, s32: np.ndarray) -> np.ndarray:
    """bfloat16(float32(e2m1 * s32)), s32 per block of 16 (FP4-3.1 / FP4-4.1), via ml_dtypes."""
    w = (_e2m1(packed) * np.repeat(s32, 16, axis=1)).astype(F32)
    return w.astype(ml_dtypes.bfloat16).astype(F32)


def test_a_reciprocal_that_moves_a_weight_is_refused_with_the_largest_change(tmp_path):
    """FP4-8.1: global scale 12426.69 and block-scale byte 0x07: float32(s / g) and float32(s * float32(1 / g))
    differ by an ulp that moves code 3 (1.5) to another bfloat16; refused, naming the count and largest change."""
    k = "model.layers.0.self_attn.k_proj"
    g = F32(12426.69)
    src = corrupted(tmp_path, "ct_nvfp4", {
        f"{k}.weight_global_scale": ("F32", [1], g.tobytes()),
        f"{k}.weight_scale": lambda b: np.where(np.arange(b.size) == 0, 0x07, b),
        f"{k}.weight_packed": lambda b: np.where(np.arange(b.size) < 8, 0x33, b)})
    t = read_st(src / "model.safetensors")
    packed = np.frombuffer(t[f"{k}.weight_packed"][2], np.uint8).reshape(8, 16)
    s = np.frombuffer(t[f"{k}.weight_scale"][2], np.uint8).view(ml_dtypes.float8_e4m3fn).astype(F32).reshape(8, 2)
    ct = _by_library(packed, s, (s / g).astype(F32))
    mo = _by_library(packed, s, (s * (F32(1) / g)).astype(F32))
    err = np.abs(ct.astype(np.float64) - mo.astype(np.float64))
    at = [int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape)]
    assert int((ct != mo).sum()) > 0
    with pytest.raises(QFormatsError) as info:
        convert(str(src), str(tmp_path / "out"), to="modelopt")
    assert whole(info.value) == ("fp4.convert.inexact", f"{k}.weight_scale_2", "the same weights after conversion: "
                                 "the reciprocal global scale must give every weight the value its source library "
                                 "decodes (FP4-8.1)", f"{int((ct != mo).sum())} weights change, largest by "
                                 f"{float(err.max())!r} at {at}", "model.safetensors")
    assert not (tmp_path / "out").exists()


def test_a_defect_is_refused_not_laundered(tmp_path):
    """FP4-8.5: a zero global scale (FP4-3.2) is refused with validate's error; nothing is written."""
    src = corrupted(tmp_path, "ct_nvfp4", {"model.layers.1.mlp.up_proj.weight_global_scale":
                                           ("F32", [1], F32(0).tobytes())})
    assert main(["convert", str(src), "--to", "modelopt", "-o", str(tmp_path / "cli")]) == 2
    with pytest.raises(QFormatsError) as info:
        convert(str(src), str(tmp_path / "out"), to="modelopt")
    t = "model.layers.1.mlp.up_proj.weight_global_scale"
    assert whole(info.value) == ("fp4.global_scale.invalid", t, "a conforming FP4 module (FP4-3.2)",
                                 f"'{t}' must be a finite positive float32 (got 0.0); readers divide by it (FP4-3.2)",
                                 "model.safetensors")
    assert not (tmp_path / "out").exists() and not (tmp_path / "cli").exists()


def test_dense_modules_do_not_become_gpt_oss(tmp_path):
    """FP4-8.3: gpt-oss quantizes MoE experts only; a compressed-tensors q_proj / down_proj is refused."""
    with pytest.raises(QFormatsError) as info:
        convert(str(CHECKPOINTS / "ct_mxfp4"), str(tmp_path / "out"), to="gpt_oss_mxfp4")
    assert whole(info.value) == ("fp4.convert.unrepresentable", "model.layers.0.mlp.down_proj", "an MoE expert "
                                 "projection, <parent>.experts.<e>.gate_up_proj or .down_proj (gpt-oss quantizes its "
                                 "experts only, FP4-8.3)", "another module", None)


def test_experts_without_a_bias_are_refused(converted, tmp_path):
    """FP4-8.3: gpt-oss experts carry a bias per output; an expert without one is refused, not given zeros."""
    src = tmp_path / "ct"
    shutil.copytree(converted["gpt_oss_mxfp4"] / "b", src)
    tensors = read_st(src / "model.safetensors")
    del tensors["model.layers.0.mlp.experts.1.down_proj.bias"]
    write_st(src / "model.safetensors", tensors)
    with pytest.raises(QFormatsError) as info:
        convert(str(src), str(tmp_path / "out"), to="gpt_oss_mxfp4")
    assert whole(info.value) == ("fp4.convert.unrepresentable", "model.layers.0.mlp.experts.down_proj.bias",
                                 "present in every expert (gpt-oss experts have a bias per output, FP4-2.5)",
                                 "absent in 1 of 2 experts", None)


def test_one_activation_scheme_is_required(tmp_path):
    """FP4-8.1: input_global_scale in some modules only cannot be stated by one config; refused."""
    src = corrupted(tmp_path, "ct_nvfp4", {"model.layers.0.mlp.up_proj.input_global_scale": None})
    with pytest.raises(QFormatsError) as info:
        convert(str(src), str(tmp_path / "out"), to="modelopt")
    assert whole(info.value) == ("fp4.convert.unrepresentable", "input_global_scale", "in every module or in none: "
                                 "the written config states one activation scheme (FP4-8.1)", "in some modules only",
                                 None)


def test_a_route_the_layouts_lack_is_refused_naming_the_routes(tmp_path):
    """FP4-8.5: NVFP4 has no gpt-oss layout; the error names the routes this checkpoint has."""
    with pytest.raises(QFormatsError) as info:
        convert(str(CHECKPOINTS / "ct_nvfp4"), str(tmp_path / "out"), to="gpt_oss_mxfp4")
    assert whole(info.value) == ("argument.invalid", "to", "a target this checkpoint converts to losslessly (FP4-8.5): "
                                 "modelopt", "gpt_oss_mxfp4 for ct_nvfp4", None)


def test_an_int_checkpoint_is_not_converted_to_an_fp4_layout(tmp_path):
    """FP4-8.5: --to modelopt takes an FP4 checkpoint; a GPTQ one is refused before anything is written."""
    src = ROOT / "fixtures" / "checkpoints" / "gptq_v1_sym_4bit"
    assert main(["convert", str(src), "--to", "modelopt", "-o", str(tmp_path / "out")]) == 2
    with pytest.raises(QFormatsError) as info:
        convert(str(src), str(tmp_path / "out"), to="modelopt")
    assert whole(info.value) == ("argument.invalid", "to", "gptq_v2, gptq, awq_gemm or compressed_tensors for this "
                                 "checkpoint (modelopt, gpt_oss_mxfp4 and fp8 convert FP8 / FP4 checkpoints, FP8-8, "
                                 "FP4-8)", "modelopt for GPTQ", None)
    assert not (tmp_path / "out").exists()


# -- FP4-8.4: GGUF mxfp4 blocks ---------------------------------------------------------------------------------

def test_gguf_permutation_by_hand():
    """FP4-8.4: codes c(i) = i mod 16 pack as safetensors bytes c(2j) | c(2j+1) << 4; GGUF's qs[j] = c(j) | c(j+16) << 4
    = j * 0x11, after the same scale byte."""
    codes = np.arange(32) % 16
    packed = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).reshape(1, 16)
    blocks = fp4_convert.to_gguf_mxfp4(packed, np.array([[0x7C]], np.uint8))
    assert blocks.tolist() == [[[0x7C] + [j * 0x11 for j in range(16)]]]
    back = fp4_convert.from_gguf_mxfp4(blocks)
    assert back[0].tolist() == packed.tolist() and back[1].tolist() == [[0x7C]]


@pytest.mark.parametrize("name", ["ct_mxfp4", "gpt_oss_mxfp4"])
def test_gguf_blocks_decode_to_the_library_weights_and_back(name):
    """FP4-8.4: every MXFP4 module of the fixture (ragged N = 8 rows, MoE experts 3-D) as GGUF mxfp4 rows: ggml's
    decode (the oracle where QFORMATS_GGML_LIB names it, else qformats' ggml decoder, bit-identical to it, MX-1.3)
    gives the library's weights value for value, and the blocks convert back to the same bytes."""
    stored = read_st(CHECKPOINTS / name / "model.safetensors")
    t = {n: np.frombuffer(raw, np.uint8).reshape(shape) for n, (_, shape, raw) in stored.items()
         if n.endswith(("packed", "scale", "blocks", "scales"))}
    want = expected(name)
    oracle = None
    if os.environ.get("QFORMATS_GGML_LIB"):
        from conformance.adapters import ggml as oracle
    pairs = [(n[: -len(".weight_packed")], t[n], t[n.replace("weight_packed", "weight_scale")]) for n in t
             if n.endswith("weight_packed")]
    pairs += [(n[: -len("_blocks")], t[n].reshape(*t[n].shape[:2], -1), t[n.replace("_blocks", "_scales")])
              for n in t if n.endswith("_blocks")]
    for module, packed, scales in pairs:
        blocks = fp4_convert.to_gguf_mxfp4(packed, scales)
        rows = blocks.reshape(-1, blocks.shape[-2] * 17)
        for decoder in (ggml_dequantize, oracle.dequantize if oracle else None):
            if decoder is None:
                continue
            got = np.asarray(decoder("mxfp4", rows), F32).reshape(packed.shape[:-1] + (2 * packed.shape[-1],))
            ref = want[f"{module}.weight"] if f"{module}.weight" in want else np.swapaxes(want[module], 1, 2)
            assert np.array_equal(got, ref), module
        back = fp4_convert.from_gguf_mxfp4(blocks)
        assert np.array_equal(back[0], packed) and np.array_equal(back[1], scales)
