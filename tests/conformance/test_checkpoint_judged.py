"""GGML-5.5: a `conformance checkpoint` verdict says what was judged.

With the plain install (no gguf-py, no ggml library named) no reader of a GGUF file can be judged; the
headline must say so, why, and the command that enables each reader, while the exit status stays the
validity verdict's. The plain install is simulated: ``gguf`` made unimportable, both library variables unset.
"""

from __future__ import annotations

import json
import sys

import pytest

from qformats.cli import main

GGUF = "fixtures/checkpoints/q4_k_m.gguf"
SPQR = "fixtures/checkpoints/spqr_csr"


@pytest.fixture
def plain_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)            # `import gguf` raises ImportError
    monkeypatch.setitem(sys.modules, "gguf.quants", None)
    monkeypatch.delenv("QFORMATS_GGML_LIB", raising=False)
    monkeypatch.delenv("QFORMATS_LLAMA_CPP", raising=False)


def test_plain_install_headline_says_no_reader_judged_why_and_how(plain_install, capsys):
    """GGML-5.5: "VALID; no reader judged", the reason, and each reader's enabling command; exit 0 (valid)."""
    assert main(["conformance", "checkpoint", GGUF]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [
        f"{GGUF}: VALID; no reader judged (f32+q4_k+q5_0+q6_k+q8_0, 9 of 9 tensors checked, 0 errors, 0 warnings; "
        "qformats validate for the findings)",
        "no reader could be judged (no reader is installed or configured here): the verdict is the validator's alone",
        "  to judge ggml_oracle  make ggml-oracle, then QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so "
        "(in a qformats checkout)",
        "  to judge llama_cpp    make llama-cpp, then QFORMATS_LLAMA_CPP=.venv/llama.cpp/build (in a qformats checkout)",
        "  to judge gguf_py      pip install gguf",
    ]
    assert "  gguf_py       not judged (gguf-py is not installed)" in lines     # the table's reason, said once


def test_plain_install_json_names_what_was_judged(plain_install, capsys):
    """GGML-5.5: --json carries judged (none), no_reader_judged (why) and enable (reader -> command)."""
    assert main(["conformance", "checkpoint", "--json", GGUF]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "valid" and doc["judged"] == []
    assert doc["no_reader_judged"] == "no reader is installed or configured here"
    assert doc["enable"] == {
        "ggml_oracle": "make ggml-oracle, then QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so (in a qformats checkout)",
        "llama_cpp": "make llama-cpp, then QFORMATS_LLAMA_CPP=.venv/llama.cpp/build (in a qformats checkout)",
        "gguf_py": "pip install gguf"}


def test_one_reader_judged_keeps_the_plain_headline_and_names_the_missing_ones(monkeypatch, capsys):
    """GGML-5.5: gguf-py installed (as in .venv), no ggml library: VALID without "no reader judged"; the
    rows of the readers not judged carry their enabling command."""
    pytest.importorskip("gguf")
    monkeypatch.delenv("QFORMATS_GGML_LIB", raising=False)
    monkeypatch.delenv("QFORMATS_LLAMA_CPP", raising=False)
    assert main(["conformance", "checkpoint", GGUF]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"{GGUF}: VALID (f32+q4_k+q5_0+q6_k+q8_0, 9 of 9 tensors checked, 0 errors, 0 warnings; "
                        "qformats validate for the findings)")
    assert "  gguf_py       correct in all 8 tensors" in lines
    assert ("  ggml_oracle   not judged (set QFORMATS_GGML_LIB to judge it); to judge it: make ggml-oracle, then "
            "QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so (in a qformats checkout)") in lines


def test_a_format_without_emulated_readers_says_no_reader_judged(capsys):
    """GGML-5.5 (and SpQR, which has no emulated reader): the headline says none was judged and why; exit 0."""
    assert main(["conformance", "checkpoint", SPQR]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{SPQR}: VALID; no reader judged (spqr, 2 layers, 8 of 8 tensors checked, 0 errors, 0 warnings; qformats validate for the findings)",
        "no reader could be judged (qformats emulates no real reader of spqr checkpoints): the verdict is the "
        "validator's alone"]
