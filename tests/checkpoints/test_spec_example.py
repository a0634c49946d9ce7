"""spec/checkpoints.md "Worked example", executed: the 138-byte two-tensor file and its three defects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import st_builder as sb
from qformats.containers.safetensors import open_tensor, read_header, read_header_bytes
from qformats.errors import QFormatsError

EXAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / sb.FIXTURE_DIR / "valid_two_tensors.safetensors"
SPEC = Path(__file__).resolve().parents[2] / "spec" / "checkpoints.md"


def test_worked_example_bytes_and_geometry():
    """"The byte buffer starts at file offset 8 + 110 = 118 and is 20 bytes long, so the file is exactly 138 bytes"."""
    blob = EXAMPLE.read_bytes()
    assert blob[:8] == bytes.fromhex("6e00000000000000")
    assert blob[8:118].decode() == ('{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},'
                                    '"b":{"dtype":"I32","shape":[3],"data_offsets":[8,20]}}')
    assert blob[118:] == bytes(range(20)) and len(blob) == 138
    header = read_header(EXAMPLE)
    assert (header.header_size, header.data_start, header.file_size) == (110, 118, 138)


def test_worked_example_b_values():
    """"`b` ... reads as the little-endian int32 values `0x0b0a0908, 0x0f0e0d0c, 0x13121110`"."""
    b = open_tensor(read_header(EXAMPLE), "b")
    np.testing.assert_array_equal(b, np.array([0x0B0A0908, 0x0F0E0D0C, 0x13121110], "<i4"), strict=True)


@pytest.mark.parametrize(("blob", "code"), [
    pytest.param(sb.with_b(shape=[2]), "st.offsets.size_mismatch", id="shape-[2]"),
    pytest.param(EXAMPLE.read_bytes() + bytes(8), "st.file.size", id="append-8"),
    pytest.param(EXAMPLE.read_bytes()[:-1], "st.truncated", id="cut-last-byte"),
])
def test_worked_example_defects(blob, code):
    """"Changing `b`'s shape to `[2]` gives ... `st.offsets.size_mismatch`; appending 8 bytes gives `st.file.size`; cutting the last byte gives `st.truncated`"."""
    with pytest.raises(QFormatsError) as exc:
        read_header_bytes(blob)
    assert exc.value.code == code
    if code == "st.offsets.size_mismatch":
        assert exc.value.message in SPEC.read_text()
