"""spec/containers.md GGUF part: the worked example is executed, and codes sit beside their clauses."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from qformats.containers.gguf import read_gguf_bytes
from qformats.errors import CODES, QFormatsError

SPEC = (Path(__file__).resolve().parents[2] / "spec" / "containers.md").read_text()


def _example_bytes() -> bytes:
    block = re.search(r"```gguf-example\n(.*?)```", SPEC, re.S).group(1)
    out = b""
    for line in block.strip().splitlines():
        offset, rest = line.split(":", 1)
        assert int(offset, 16) == len(out), line  # the offset column is consistent
        out += bytes.fromhex(rest.split("|")[0])
    return out


def test_worked_example_reads_as_stated():
    """Worked example: "data_offset = PAD(101, 32) = 128 ... w has n_bytes = 8 ... values 1.0 and -2.0"."""
    blob = _example_bytes()
    assert len(blob) == 136
    f = read_gguf_bytes(blob)
    assert (f.version, f.data_offset, dict(f.metadata)) == (3, 128, {"general.architecture": "demo"})
    (w,) = f.tensors
    assert (w.name, w.dims, w.type_name, w.offset, w.n_bytes) == ("w", (2,), "F32", 0, 8)
    np.testing.assert_array_equal(f.tensor_array("w"), np.array([1.0, -2.0], np.float32))


@pytest.mark.parametrize(
    ("edit", "code", "clause"),
    [
        pytest.param(lambda b: b[:0x4D] + b"\x05" + b[0x4E:], "gguf.tensor.n_dims", "GGUF-3.3", id="n_dims-5"),
        pytest.param(lambda b: b[:0x5D] + b"\x20" + b[0x5E:], "gguf.tensor.offset", "GGUF-3.9", id="offset-0x20"),
        pytest.param(lambda b: b[:-1], "gguf.data.past_end", "GGUF-5.2", id="drop-last-byte"),
        pytest.param(lambda b: b[:0x70], "gguf.truncated", "GGUF-5.1", id="cut-in-padding"),
    ],
)
def test_worked_example_mutations(edit, code, clause):
    """Worked example bullets: each stated one-byte edit or cut of the example gives the stated code."""
    with pytest.raises(QFormatsError) as exc:
        read_gguf_bytes(edit(_example_bytes()))
    assert (exc.value.code, exc.value.clause) == (code, clause)


GGUF_CODES = sorted(c for c in CODES if c.startswith("gguf."))


@pytest.mark.parametrize("code", GGUF_CODES)
def test_code_listed_beside_its_clause(code):
    """Every gguf.* code is named in the bullet of the clause CODES assigns to it."""
    clause = CODES[code][0]
    bullets = re.findall(rf"- \*\*{re.escape(clause)}\*\*(.*?)(?=\n- \*\*|\n###|\Z)", SPEC, re.S)
    assert bullets and any(f"`{code}`" in b for b in bullets), (code, clause)
