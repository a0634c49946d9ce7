"""GGUF-6.1: random mutations of valid files either parse or raise QFormatsError -- nothing else."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings, strategies as st

import gguf_builder as gb
from qformats.containers.gguf import read_gguf, read_gguf_bytes
from qformats.errors import QFormatsError

SEEDS = [gb.valid_v3(), gb.valid_all_value_types(), gb.valid_align64(), gb.valid_v2()]
# Values that hit limits and wrap-around points when written over a length, count or dim field.
INTERESTING_U64 = [0, 1, 63, 64, 255, 256, (1 << 30) + 1, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


def _outcome(blob: bytes) -> str:
    try:
        f = read_gguf_bytes(blob, name="fuzz")
        for t in f.tensors:
            f.tensor_bytes(t.name)
        result = "ok"
    except QFormatsError as exc:
        assert exc.code.startswith("gguf.") and exc.file == "fuzz"  # GGUF-6.1: container codes only
        result = exc.code
    return result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(SEEDS), edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6))
def test_byte_flips(seed, edits):
    """Overwriting random bytes never escapes as anything but QFormatsError."""
    blob = bytearray(seed)
    for pos, val in edits:
        blob[pos % len(blob)] = val
    _outcome(bytes(blob))


@settings(max_examples=200, deadline=None)
@given(seed=st.sampled_from(SEEDS), pos=st.integers(0, 10**6), value=st.sampled_from(INTERESTING_U64))
def test_interesting_u64_writes(seed, pos, value):
    """Writing a limit/wrap value over any 8 bytes is rejected or read, never crashes or hangs."""
    blob = bytearray(seed)
    pos %= len(blob) - 7
    blob[pos:pos + 8] = struct.pack("<Q", value)
    _outcome(bytes(blob))


@settings(max_examples=100, deadline=None)
@given(seed=st.sampled_from(SEEDS), cut=st.integers(0, 10**6), tail=st.binary(max_size=64))
def test_truncate_and_append(seed, cut, tail):
    """Cutting a file and appending junk is rejected or read, never anything else."""
    _outcome(seed[: cut % (len(seed) + 1)] + tail)


@settings(max_examples=30, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4))
def test_mutated_file_on_disk(tmp_path_factory, edits):
    """The file path (mmap) behaves like the in-memory path on mutated files."""
    blob = bytearray(gb.valid_v3())
    for pos, val in edits:
        blob[pos % len(blob)] = val
    path = tmp_path_factory.mktemp("fuzz") / "m.gguf"
    path.write_bytes(bytes(blob))
    expected = _outcome(bytes(blob))
    try:
        with read_gguf(path):
            got = "ok"
    except QFormatsError as exc:
        got = exc.code
    assert got == expected
