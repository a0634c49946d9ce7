"""GGML-5.5: ``qformats conformance checkpoint FILE.gguf`` judges real readers on the file's own tensors.

The readers are judged against the reference decode, bit for bit (a NaN matches a NaN). A reader that
decodes a tensor differently is "wrong" with the count of weights; one that raises or lacks the type
"cannot read" it; one not installed is "not judged" with the reason, never left out.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.checkpoint import check_checkpoint
from qformats.containers.checkpoint import open_checkpoint
from qformats.formats.ggml import readers

SAMPLE = "fixtures/checkpoints/q4_k_m.gguf"
NAN_SAMPLE = "fixtures/checkpoints/q4_k_m_nan_scale.gguf"


def _rows_with(monkeypatch, name: str, load) -> list[dict]:
    monkeypatch.setattr(readers, "READERS", {name: readers.Reader(name, "a test reader", load)})
    with open_checkpoint(SAMPLE) as ckpt:
        return readers.reader_rows(ckpt, [])


def _reference(name: str, rows: np.ndarray) -> np.ndarray:
    return readers.dequantize(readers.TYPES[name], rows)


def test_every_decoded_tensor_gets_a_row_and_f32_tensors_none(monkeypatch):
    rows = _rows_with(monkeypatch, "same", lambda: _reference)
    with open_checkpoint(SAMPLE) as ckpt:
        expected = [t.name for t in ckpt.gguf.tensors if t.type_name != "F32"]
    assert [r["layer"] for r in rows] == expected and expected
    assert all(r["readers"]["same"] == {"status": "correct"} for r in rows)


def test_a_reader_off_by_one_bit_is_wrong_in_exactly_the_weights_it_changed(monkeypatch):
    def load():
        def decode(name, rows):
            out = _reference(name, rows).copy()
            out.view(np.uint32)[0, :3] ^= 1          # three weights of the first row, last mantissa bit
            return out
        return decode
    rows = _rows_with(monkeypatch, "flips", load)
    assert {r["readers"]["flips"]["status"] for r in rows} == {"wrong"}
    assert all(r["readers"]["flips"]["wrong_weights"] == 3 for r in rows)


def test_a_reader_that_turns_negative_zero_positive_is_wrong(monkeypatch):
    """GGML-2.2 is bit for bit: -0.0 and +0.0 are different outputs."""
    def load():
        return lambda name, rows: _reference(name, rows) + np.float32(0.0)    # -0.0 + 0.0 == +0.0
    rows = _rows_with(monkeypatch, "positive", load)
    negative_zeros = []
    with open_checkpoint(SAMPLE) as ckpt:
        for r in rows:
            ref = _reference(r["format"], ckpt.gguf.tensor_rows(r["layer"]))
            negative_zeros.append(int(np.count_nonzero((ref == 0) & np.signbit(ref))))
    assert sum(negative_zeros) > 0, "the sample has no -0.0 output: the test would prove nothing"
    for r, n in zip(rows, negative_zeros):
        expected = {"status": "wrong", "wrong_weights": n} if n else {"status": "correct"}
        assert r["readers"]["positive"] == expected, r["layer"]


def test_a_reader_returning_the_wrong_shape_is_wrong_in_every_weight(monkeypatch):
    rows = _rows_with(monkeypatch, "short", lambda: (lambda name, rows: _reference(name, rows)[:, :-1]))
    r = rows[0]
    with open_checkpoint(SAMPLE) as ckpt:
        n = _reference(r["format"], ckpt.gguf.tensor_rows(r["layer"])).size
    assert r["readers"]["short"]["status"] == "wrong" and r["readers"]["short"]["wrong_weights"] == n
    assert "expected float32" in r["readers"]["short"]["detail"]


def test_a_reader_that_raises_cannot_read_and_says_what_it_raised(monkeypatch):
    def load():
        def decode(name, rows):
            raise ValueError("bad block")
        return decode
    rows = _rows_with(monkeypatch, "raises", load)
    assert rows[0]["readers"]["raises"] == {"status": "cannot read", "detail": "raised ValueError: bad block"}


def test_a_reader_that_is_not_installed_is_listed_as_not_judged_with_the_reason(monkeypatch):
    def load():
        raise readers.Unavailable("set SOMETHING to judge it")
    rows = _rows_with(monkeypatch, "absent", load)
    assert rows and all(r["readers"]["absent"] == {"status": "not judged", "detail": "set SOMETHING to judge it"}
                        for r in rows)


def test_the_ggml_reader_without_its_library_is_not_judged(monkeypatch):
    monkeypatch.delenv("QFORMATS_LLAMA_CPP", raising=False)
    with pytest.raises(readers.Unavailable, match="set QFORMATS_LLAMA_CPP to judge it"):
        readers.READERS["llama_cpp"].load()


def test_a_missing_library_file_is_not_judged(monkeypatch, tmp_path):
    monkeypatch.setenv("QFORMATS_LLAMA_CPP", str(tmp_path))
    with pytest.raises(readers.Unavailable, match="libggml-base.so not found"):
        readers.READERS["llama_cpp"].load()


@pytest.mark.parametrize("path", [SAMPLE, NAN_SAMPLE])
def test_the_pinned_ggml_and_gguf_py_decode_the_samples_as_the_spec_says(path):
    """GGML-5.5 on the bundled samples: the NaN-scale file's NaN block decodes to NaN in every reader."""
    table = check_checkpoint(path)
    if "not judged" == table["readers"]["ggml_oracle"]["verdict"]:
        pytest.skip("QFORMATS_GGML_LIB is not set (make test sets it)")
    assert table["readers"]["ggml_oracle"]["verdict"] == "correct"
    assert table["readers"]["gguf_py"]["verdict"] == "correct"
    assert table["readers"]["transformers"]["verdict"] == "not judged"
