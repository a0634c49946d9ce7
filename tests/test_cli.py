"""The `qformats` command line (DESIGN.md §4): exit codes and the schema command."""

import json
import subprocess
import sys

import pytest

from qformats.cli import main


def test_schema_command_prints_the_gptq_schema(capsys):
    """`qformats schema gptq` prints the JSON Schema generated from the GPTQ models."""
    assert main(["schema", "gptq"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "GPTQConfig" in doc["$defs"]


def test_unknown_format_is_exit_2_without_traceback(capsys):
    """Exit 2: could not run (bad usage), with a one-line message and no traceback."""
    assert main(["schema", "exl2"]) == 2
    err = capsys.readouterr().err
    assert "'format' must be one of" in err and "Traceback" not in err


def test_bad_usage_is_exit_2():
    """argparse usage errors exit 2, as the CLI contract requires."""
    result = subprocess.run([sys.executable, "-m", "qformats.cli", "frobnicate"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_strict_verdict_and_exit_code_agree(tmp_path, capsys):
    """--strict with warnings: the text says INVALID (strict: ...), --json says "invalid", exit 1."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "fixtures/checkpoints/gptq_v1_sym_4bit/model.safetensors"
    shutil.copy(src, tmp_path / "model.safetensors")             # no config beside it: a warning
    assert main(["validate", "--strict", str(tmp_path / "model.safetensors")]) == 1
    assert "INVALID (strict: 1 warning)" in capsys.readouterr().out
    assert main(["validate", "--strict", "--json", str(tmp_path / "model.safetensors")]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "invalid" and doc["summary"]["strict"] is True


def test_version():
    done = subprocess.run([sys.executable, "-m", "qformats", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "qformats 0.1.0"


def test_schema_without_argument_is_one_json_document(capsys):
    """`qformats schema` prints one object keyed by format, valid JSON as a whole."""
    assert main(["schema"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"gptq", "q4_k", "spqr", "gguf", "awq",
                                                             "compressed_tensors", "fp8", "fp4"}


def test_broken_pipe_is_not_an_internal_error():
    """`qformats schema | head -1`: the reader leaving early ends the command quietly, exit 0."""
    done = subprocess.run(f"{sys.executable} -m qformats schema | head -1", shell=True, capture_output=True,
                          text=True)
    assert done.stdout.strip() == "{" and "internal error" not in done.stderr and "Traceback" not in done.stderr


def test_decode_into_an_existing_directory_is_a_usage_error(tmp_path, capsys):
    from pathlib import Path

    ckpt = Path(__file__).resolve().parents[1] / "fixtures/checkpoints/gptq_v1_sym_4bit"
    assert main(["decode", str(ckpt), "--tensor", "model.layers.0.mlp.down_proj", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not an existing directory" in err and "internal error" not in err


def test_help_does_not_cite_documents_users_do_not_have():
    done = subprocess.run([sys.executable, "-m", "qformats", "validate", "--help"], capture_output=True, text=True)
    assert "DESIGN" not in done.stdout


def test_messages_read_as_sentences(tmp_path, capsys):
    """No pydantic text, no "value must", no "1 files"; a parent of checkpoints names them."""
    import shutil
    from pathlib import Path

    from qformats.formats.gptq.layout import parse_config

    import pytest

    from qformats.errors import QFormatsError
    with pytest.raises(QFormatsError) as exc:
        parse_config({"bits": 4, "quant_method": "awq2"})
    assert str(exc.value).startswith("'quant_method' must be 'gptq' (got awq2)")
    assert main(["validate", str(tmp_path / "nope")]) == 2
    assert "'path' must be an existing file or directory" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("x")
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures/checkpoints/spqr_csr", tmp_path / "run1")
    assert main(["validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "got 1 file, none of them weights; checkpoints in subfolders, pass one: run1" in err
    assert "value must" not in err


# -- decode / convert: --reader, -o, plurals (issue 20) -------------------------------------------------------

def _gptqmodel_zero0_checkpoint(tmp_path):
    """GPTQModel 7.7.0's own v1 bytes for a layer with zero points 0 (fixtures/third_party/gptq), its config
    naming GPTQModel; returns (path, the true weight (out, in) from the real tool's manifest)."""
    from pathlib import Path

    from safetensors.numpy import load_file, save_file

    src = Path(__file__).resolve().parents[1] / "fixtures/third_party/gptq/layers/b4_asym_g32_k128_n64_z0.safetensors"
    t = load_file(str(src))
    name = "model.layers.0.mlp.up_proj"
    save_file({f"{name}.qweight": t["gptqmodel.qweight"], f"{name}.qzeros": t["gptqmodel_v1.qzeros"],
               f"{name}.scales": t["scales"], f"{name}.g_idx": t["g_idx"]}, str(tmp_path / "model.safetensors"))
    (tmp_path / "quantize_config.json").write_text(json.dumps({
        "bits": 4, "group_size": 32, "sym": False, "desc_act": False, "quant_method": "gptq",
        "checkpoint_format": "gptq", "meta": {"quantizer": ["gptqmodel:7.7.0"]}}))
    return tmp_path, t["truth"].T


def test_decode_with_the_writers_reader_salvages_zero0(tmp_path, capsys):
    """decode --reader gptqmodel gives GPTQModel's own weights (the real tool's truth), where the spec
    reader refuses the all-ones fields (GPTQ-3.4)."""
    from safetensors.numpy import load_file

    (tmp_path / "ckpt").mkdir()
    ckpt, truth = _gptqmodel_zero0_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "w.safetensors"
    assert main(["decode", str(ckpt), "--tensor", "model.layers.0.mlp.up_proj", "-o", str(out)]) == 2
    assert "[gptq.zero.v1_unrepresentable" in capsys.readouterr().err
    assert main(["decode", str(ckpt), "--tensor", "model.layers.0.mlp.up_proj", "-o", str(out),
                 "--reader", "gptqmodel"]) == 0
    assert "as the gptqmodel emulation reads it told v1" in capsys.readouterr().out
    assert (load_file(str(out))["model.layers.0.mlp.up_proj.weight"] == truth).all()


def test_convert_with_the_writers_reader_keeps_zero0_as_v2(tmp_path, capsys):
    """convert --to gptq_v2 --reader gptqmodel: the v2 checkpoint validates and decodes to GPTQModel's weights."""
    from safetensors.numpy import load_file

    (tmp_path / "ckpt").mkdir()
    ckpt, truth = _gptqmodel_zero0_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "v2"
    assert main(["convert", str(ckpt), "--to", "gptq_v2", "--reader", "gptqmodel", "-o", str(out)]) == 0
    assert capsys.readouterr().out.startswith("converted 1 GPTQ layer to gptq_v2 as gptqmodel reads them")
    assert main(["validate", str(out)]) == 0
    capsys.readouterr()
    assert main(["decode", str(out), "--tensor", "model.layers.0.mlp.up_proj", "-o", str(tmp_path / "w")]) == 0
    assert (load_file(str(tmp_path / "w"))["model.layers.0.mlp.up_proj.weight"] == truth).all()


def test_convert_reader_that_reads_past_the_field_is_refused(tmp_path, capsys):
    """--reader vllm_gptq_gemm reads zero 0 as 16 (f + 1, no wrap): not storable in 4 bits, refused naming it."""
    (tmp_path / "ckpt").mkdir()
    ckpt, _ = _gptqmodel_zero0_checkpoint(tmp_path / "ckpt")
    assert main(["convert", str(ckpt), "--to", "gptq_v2", "--reader", "vllm_gptq_gemm", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "'model.layers.0.mlp.up_proj.qzeros' must be zero points in [0, 15] as vllm_gptq_gemm reads them" in err
    assert "[gptq.quirk.unsupported" in err and not (tmp_path / "o").exists()


def test_reader_is_refused_for_other_formats(tmp_path, capsys):
    from pathlib import Path

    gguf = Path(__file__).resolve().parents[1] / "fixtures/checkpoints/q4_k.gguf"
    assert main(["decode", str(gguf), "--tensor", "x", "--reader", "gptqmodel", "-o", str(tmp_path / "o")]) == 2
    assert "'reader' must be given only for GPTQ layers (got gptqmodel for a GGUF file)" in capsys.readouterr().err


SAMPLE = "fixtures/checkpoints/gptq_v1_sym_4bit"
MODULE = "model.layers.0.mlp.down_proj"


def test_decode_refuses_an_existing_output_without_force(tmp_path, capsys):
    """decode -o an existing file: refused, the file untouched; --force replaces it."""
    from pathlib import Path

    ckpt = Path(__file__).resolve().parents[1] / SAMPLE
    out = tmp_path / "w.safetensors"
    out.write_bytes(b"keep me")
    assert main(["decode", str(ckpt), "--tensor", MODULE, "-o", str(out)]) == 2
    assert "'output' must be a path that does not exist yet (--force replaces it)" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"
    assert main(["decode", str(ckpt), "--tensor", MODULE, "-o", str(out), "--force"]) == 0
    assert out.read_bytes() != b"keep me"


def test_output_symlink_into_the_input_is_refused(tmp_path, capsys):
    """-o a symbolic link to a file of the input: refused even with --force; the input stays as it was."""
    import shutil
    from pathlib import Path

    ckpt = tmp_path / "ckpt"
    shutil.copytree(Path(__file__).resolve().parents[1] / SAMPLE, ckpt)
    before = (ckpt / "model.safetensors").read_bytes()
    link = tmp_path / "link.safetensors"
    link.symlink_to(ckpt / "model.safetensors")
    for force in ([], ["--force"]):
        assert main(["decode", str(ckpt), "--tensor", MODULE, "-o", str(link), *force]) == 2
        assert "must be outside the input checkpoint" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "ckpt"), "--to", "gptq_v2", "-o", str(ckpt / "sub")]) == 2
    assert (ckpt / "model.safetensors").read_bytes() == before and not (ckpt / "sub").exists()


def test_one_of_a_thing_is_singular(tmp_path, capsys):
    """"1 error", "1 layer", "1 GPTQ layer": never "1 errors" (inspect, conformance, convert)."""
    import shutil
    from pathlib import Path

    from safetensors.numpy import load_file, save_file

    src = Path(__file__).resolve().parents[1] / "fixtures/checkpoints/gptq_v1_zero_underflow_autogptq"
    one = tmp_path / "one"
    shutil.copytree(src, one)
    tensors = load_file(str(one / "model.safetensors"))
    save_file({k: v for k, v in tensors.items() if k.startswith(MODULE)}, str(one / "model.safetensors"))
    for argv in (["inspect", str(one)], ["conformance", "checkpoint", str(one)]):
        main(argv)
        out = capsys.readouterr().out
        assert "1 error," in out and "1 errors" not in out and "1 layers" not in out, out
    assert "on 1 layer:" in out


def test_convert_given_a_shard_index_writes_the_whole_checkpoint(tmp_path, capsys):
    """PATH naming a *.safetensors.index.json converts the sharded checkpoint into a directory (a fuzz
    finding: it raised FileNotFoundError looking for the index in the staged output)."""
    import shutil
    from pathlib import Path

    from safetensors.numpy import load_file, save_file

    src = Path(__file__).resolve().parents[1] / SAMPLE
    ckpt = tmp_path / "ckpt"
    shutil.copytree(src, ckpt)
    tensors = load_file(str(ckpt / "model.safetensors"))
    (ckpt / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:4], "model-00002-of-00002.safetensors": names[4:]}
    for shard, members in shards.items():
        save_file({n: tensors[n] for n in members}, str(ckpt / shard))
    index = ckpt / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": sum(t.nbytes for t in tensors.values())},
                                 "weight_map": {n: s for s, members in shards.items() for n in members}}))
    out = tmp_path / "out"
    assert main(["convert", str(index), "--to", "gptq_v2", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir() if p.suffix in (".safetensors", ".json")) == sorted(
        [*shards, "model.safetensors.index.json", "config.json"])
    capsys.readouterr()
    assert main(["validate", str(out)]) == 0


def test_help_documents_the_progress_bar_as_it_is_drawn():
    """DESIGN.md §4 (progress on stderr on a TTY): --help of validate and inspect shows the bar _progress_bar
    draws for layer 12 of 40, and says it is left out off a terminal."""
    import io

    from qformats.cli import PROGRESS_BAR, _progress_bar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    _progress_bar(tty)(11, 40, "model.layers.3.mlp.up_proj")
    assert tty.getvalue().strip("\r").rstrip() == PROGRESS_BAR
    assert _progress_bar(io.StringIO()) is None                       # not a terminal: no bar
    for command in ("validate", "inspect"):
        done = subprocess.run([sys.executable, "-m", "qformats", command, "--help"], capture_output=True, text=True,
                              env={**__import__("os").environ, "COLUMNS": "300"})
        assert f"progress bar ({PROGRESS_BAR})" in done.stdout and "stderr" in done.stdout


ZERO0 = "fixtures/checkpoints/gptq_v1_zero_underflow_autogptq"
NAN_GGUF = "fixtures/checkpoints/q4_k_m_nan_scale.gguf"


def _text(capsys, *argv) -> str:
    main(list(argv))
    return capsys.readouterr().out


@pytest.mark.parametrize("width", [60, 80, 120])
def test_long_findings_wrap_to_the_width_and_lose_no_word(width, capsys):
    """--width N: every line fits N columns (a single longer word excepted), continuations are indented past
    their first line, and the words are those of the unwrapped text, in order."""
    whole = _text(capsys, "validate", "-v", NAN_GGUF)
    wrapped = _text(capsys, "validate", "-v", "--width", str(width), NAN_GGUF)
    assert wrapped.split() == whole.split() and len(wrapped.splitlines()) > len(whole.splitlines())
    assert all(len(line) <= width or " " not in line.strip() for line in wrapped.splitlines())
    heads = {line.lstrip().split()[0] for line in whole.splitlines()}   # each unwrapped line's first word
    head_indent = 0
    for line in wrapped.splitlines():
        indent = len(line) - len(line.lstrip())
        if line.split()[0] in heads:
            head_indent = indent
        else:                                                             # a continuation of the last head
            assert indent == head_indent + 4, line


def test_off_a_terminal_each_finding_stays_one_line(capsys):
    """In pipes and logs (stdout not a terminal, no --width) a finding is one line, so grep sees it whole."""
    text = _text(capsys, "validate", NAN_GGUF)
    assert [line for line in text.splitlines() if line.startswith("  ggml.scale.nonfinite")] == [
        "  ggml.scale.nonfinite [GGML-3.1] in 1 layer: 'blk.0.attn_v.weight' (q6_k) has non-finite scales in 1 of "
        "32 blocks in 1 of 16 rows (1 NaN); first d = NaN in block 1 of row 5; (row, block): (5, 1); "
        "ggml_validate_row_data refuses such a row"]


def test_fix_lines_are_details_shown_under_verbose(capsys):
    """GPTQ-3.4's finding: its fix line only with -v; without, the first line says -v has it."""
    plain = _text(capsys, "validate", ZERO0)
    verbose = _text(capsys, "validate", "-v", ZERO0)
    fix = ("    fix: requantize and save as checkpoint_format gptq_v2 (no reading restores the overwritten zero "
           "points); qformats conformance checkpoint PATH says which weights each reader gets right")
    assert fix in verbose.splitlines() and "fix:" not in plain
    assert plain.splitlines()[2].endswith("gptqmodel 224 (-v: fix and details)")
    assert "also: in 'model.layers.0.self_attn.q_proj'" in verbose and "also:" not in plain


@pytest.mark.parametrize("command", ["validate", "inspect"])
def test_progress_bar_is_drawn_on_a_terminal_only(command, monkeypatch, capsys):
    """DESIGN.md §4: on a TTY stderr the bar counts the layers to the last (2/2) and ends its line; off one,
    stderr stays empty."""
    import io
    import re

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    path = "fixtures/checkpoints/gptq_v1_sym_4bit"
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main([command, path]) == 0
    assert re.search(r"\r\[#{30}\] 2/2 model\.layers\.0\.\S+ *\n$", tty.getvalue()), tty.getvalue()
    monkeypatch.undo()
    assert main([command, path]) == 0
    assert capsys.readouterr().err == ""
