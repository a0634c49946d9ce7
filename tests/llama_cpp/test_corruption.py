"""Issue 19 item 4: corrupted llama-quantize output, qformats' verdict beside llama.cpp's own behaviour.

One Q4_K_M file written by llama-quantize from the tiny model (tiny_model.py) is corrupted one way at
a time; for each copy qformats' verdict (``validate(deep=True)`` and the shallow default) is set
beside what llama.cpp does with it: llama-completion loading it and evaluating a prompt, with and
without ``--check-tensors``. The outcomes are pinned (CORRUPTIONS' last three fields): a change of
llama.cpp's behaviour shows up here first. ``python tests/llama_cpp/test_corruption.py`` prints the table.
"""

from __future__ import annotations

import functools
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_tools import LLAMA, SKIP_REASON, load_and_eval, quantized_file, workdir  # noqa: E402

pytestmark = pytest.mark.skipif(not LLAMA, reason=SKIP_REASON)

FP16_NAN = b"\x00\x7e"


@dataclass(frozen=True)
class TensorAt:
    name: str
    type_name: str
    data_offset: int        # absolute, in the file
    n_bytes: int


def _tensors(path: Path) -> dict[str, TensorAt]:
    """The file's tensors as qformats' GGUF reader sees them (gguf-py 0.19.0 cannot open files holding
    types newer than it, q2_0)."""
    from qformats.containers.checkpoint import open_checkpoint

    with open_checkpoint(path) as ckpt:
        g = ckpt.gguf
        return {t.name: TensorAt(t.name, t.type_name, g.data_offset + t.offset, t.n_bytes) for t in g.tensors}


def _info_offset(buf: bytes, name: str) -> int:
    """Byte offset of tensor ``name``'s info record (its length-prefixed name), which must be unique."""
    key = struct.pack("<Q", len(name)) + name.encode()
    at = buf.find(key)
    assert at > 0 and buf.find(key, at + 1) < 0, f"{name}: info record not found once"
    return at


def _type_offset(buf: bytes, name: str) -> int:
    at = _info_offset(buf, name) + 8 + len(name)
    n_dims = struct.unpack_from("<I", buf, at)[0]
    return at + 4 + 8 * n_dims


def nan_q6k_scale(buf: bytearray, path: Path) -> str:
    """The float16 super-scale d (last 2 bytes of a 210-byte block) of block 0 of output.weight (q6_K) -> NaN."""
    t = _tensors(path)["output.weight"]
    assert t.type_name == "Q6_K"
    buf[t.data_offset + 208: t.data_offset + 210] = FP16_NAN
    return "output.weight (q6_K) block 0: d = NaN"


def nan_q4k_scale(buf: bytearray, path: Path) -> str:
    """d (first 2 bytes of a 144-byte block) of block 5 of blk.0.attn_q.weight (q4_K) -> NaN."""
    t = _tensors(path)["blk.0.attn_q.weight"]
    assert t.type_name == "Q4_K"
    buf[t.data_offset + 5 * 144: t.data_offset + 5 * 144 + 2] = FP16_NAN
    return "blk.0.attn_q.weight (q4_K) block 5: d = NaN"


def nan_f32_norm(buf: bytearray, path: Path) -> str:
    t = _tensors(path)["blk.0.attn_norm.weight"]
    buf[t.data_offset + 12: t.data_offset + 16] = struct.pack("<f", float("nan"))
    return "blk.0.attn_norm.weight (f32) element 3 = NaN"


def truncated(buf: bytearray, path: Path) -> str:
    t = max(_tensors(path).values(), key=lambda t: t.data_offset)     # the last tensor: cut in its middle
    cut = t.data_offset + t.n_bytes // 2
    del buf[cut:]
    return f"cut at byte {cut} of {t.data_offset + t.n_bytes} (inside {t.name}'s data)"


def unknown_type(buf: bytearray, path: Path) -> str:
    at = _type_offset(buf, "blk.0.attn_q.weight")
    buf[at: at + 4] = struct.pack("<I", 99)
    return "blk.0.attn_q.weight: type id 99"


def removed_type(buf: bytearray, path: Path) -> str:
    at = _type_offset(buf, "blk.0.attn_q.weight")
    buf[at: at + 4] = struct.pack("<I", 4)
    return "blk.0.attn_q.weight: type id 4 (Q4_2, removed from ggml)"


def negative_q4k_d(buf: bytearray, path: Path) -> str:
    """The sign bit of d of every block of blk.0.attn_q.weight (q4_K): finite, decodable, never written."""
    t = _tensors(path)["blk.0.attn_q.weight"]
    for b in range(t.n_bytes // 144):
        buf[t.data_offset + b * 144 + 1] |= 0x80
    return "blk.0.attn_q.weight (q4_K): every d negated"


def duplicate_name(buf: bytearray, path: Path) -> str:
    at = _info_offset(buf, "blk.1.attn_q.weight") + 8
    buf[at: at + len("blk.0.attn_q.weight")] = b"blk.0.attn_q.weight"
    return "blk.1.attn_q.weight renamed blk.0.attn_q.weight"


def _offset_field(buf: bytes, name: str) -> int:
    """Byte offset of tensor ``name``'s uint64 data offset (relative to the data section), after its type."""
    return _type_offset(buf, name) + 4


def offset_past_end(buf: bytearray, path: Path) -> str:
    at = _offset_field(buf, "blk.0.attn_q.weight")
    buf[at: at + 8] = struct.pack("<Q", len(buf))
    return f"blk.0.attn_q.weight: data offset {len(buf)} (the file is {len(buf)} bytes)"


def overlapping(buf: bytearray, path: Path) -> str:
    """blk.0.attn_k's data offset set to blk.0.attn_q's: same type and a smaller size, inside the file."""
    src = struct.unpack_from("<Q", buf, _offset_field(buf, "blk.0.attn_q.weight"))[0]
    struct.pack_into("<Q", buf, _offset_field(buf, "blk.0.attn_k.weight"), src)
    return f"blk.0.attn_k.weight: data offset {src}, inside blk.0.attn_q.weight's data"


def misaligned(buf: bytearray, path: Path) -> str:
    at = _offset_field(buf, "blk.0.attn_k.weight")
    off = struct.unpack_from("<Q", buf, at)[0] + 1
    struct.pack_into("<Q", buf, at, off)
    return f"blk.0.attn_k.weight: data offset {off} (alignment 32)"


def row_not_block_multiple(buf: bytearray, path: Path) -> str:
    """ne[0] of blk.0.attn_q.weight (q4_K, 256 columns) -> 255: not a multiple of q4_K's 256-weight block."""
    at = _info_offset(buf, "blk.0.attn_q.weight") + 8 + len("blk.0.attn_q.weight") + 4
    struct.pack_into("<Q", buf, at, 255)
    return "blk.0.attn_q.weight (q4_K): ne[0] 256 -> 255"


def bad_utf8_name(buf: bytearray, path: Path) -> str:
    key = b"general.name"
    at = buf.find(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<I", buf, at)[0] == 8, "general.name is not a string"
    buf[at + 4 + 8] = 0xFF
    return "general.name: first byte 0xFF (not UTF-8)"


def _with_alignment(buf: bytearray, path: Path, alignment: int) -> None:
    """Insert ``general.alignment`` (uint32) after the last key and re-pad the data section to it; tensor
    offsets, relative to the data section, are left as llama-quantize wrote them for alignment 32."""
    tensors = sorted(_tensors(path).values(), key=lambda t: t.data_offset)
    kv_end = _first_info(buf, path)
    last = max(tensors, key=lambda t: _info_offset(buf, t.name))
    header_end = _offset_field(buf, last.name) + 8
    data = bytes(buf[tensors[0].data_offset - struct.unpack_from("<Q", buf, _offset_field(buf, tensors[0].name))[0]:])
    key = b"general.alignment"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, alignment)
    head = bytearray(buf[:kv_end]) + kv + buf[kv_end:header_end]
    struct.pack_into("<Q", head, 16, struct.unpack_from("<Q", head, 16)[0] + 1)      # n_kv + 1
    if alignment:
        head += bytes(-len(head) % alignment)
    buf[:] = head + data


def _first_info(buf: bytes, path: Path) -> int:
    """Where the tensor-info section begins: the first tensor's record in file order."""
    return min(_info_offset(buf, name) for name in _tensors(path))


def alignment_4096(buf: bytearray, path: Path) -> str:
    _with_alignment(buf, path, 4096)
    return "general.alignment = 4096 added; tensor offsets stay multiples of 32 only"


def alignment_48(buf: bytearray, path: Path) -> str:
    _with_alignment(buf, path, 48)
    return "general.alignment = 48 added (not a power of two)"


def nan_scale(type_name: str):
    """The first scale field that ggml_validate_row_data checks (GGML-3.1), of block 0 of the first tensor
    of ``type_name``, set to NaN: a float16 field directly, or through the type's ``set_scale`` where the
    scale is not a float16 at a fixed offset (mxfp4's E8M0, iq1_m's spread nibbles)."""
    def corrupt(buf: bytearray, path: Path) -> str:
        import numpy as np

        from qformats.formats import ggml

        bt = ggml.TYPES[type_name.lower()]
        t = next(t for t in _tensors(path).values() if t.type_name.lower() == bt.name)
        size = bt.ggml.type_size
        block = np.frombuffer(bytes(buf[t.data_offset: t.data_offset + size]), np.uint8).reshape(1, size).copy()
        if bt.fp16_offsets:
            field, at = next(iter(bt.fp16_offsets.items()))
            block[0, at: at + 2] = np.frombuffer(FP16_NAN, np.uint8)
        else:
            field = "scale"
            bt.set_scale(block, np.array([np.nan], np.float16))
        buf[t.data_offset: t.data_offset + size] = block.tobytes()
        return f"{t.name} ({bt.name}) block 0: {field} = NaN"
    return corrupt


# Every block type llama-quantize writes here, and the file it is taken from (llama_tools.FILE_TYPES).
NAN_TYPES = [
    ("q4_0", "Q4_0", False), ("q4_1", "Q4_1", False), ("q5_0", "Q5_0", False), ("q5_1", "Q5_1", False),
    ("q8_0", "Q8_0", False), ("q2_k", "Q2_K", False), ("q3_k", "Q3_K_M", False), ("q4_k", "Q4_K_M", False),
    ("q5_k", "Q5_K_M", False), ("q6_k", "Q6_K", False), ("iq4_nl", "IQ4_NL", False), ("iq4_xs", "IQ4_XS", False),
    ("tq1_0", "TQ1_0", False), ("tq2_0", "TQ2_0", False), ("iq2_xxs", "IQ2_XXS", True), ("iq2_xs", "IQ2_XS", True),
    ("iq2_s", "IQ2_M", True), ("iq3_xxs", "IQ3_XXS", True), ("iq3_s", "IQ3_S", True), ("iq1_s", "IQ1_S", True),
    ("iq1_m", "IQ1_M", True), ("mxfp4", "MXFP4_MOE", False, "moe"), ("q1_0", "Q1_0", False),
    ("q2_0", "Q2_0", False),
]   # not nvfp4: its UE4M3 scales have no non-finite code (0x7F and 0xFF decode finite, MX-2)

# (name, corruption, pinned: qformats deep verdict, llama.cpp exit 0 with --check-tensors, without)
CORRUPTIONS = [
    ("nan_q6k_scale", nan_q6k_scale, "invalid", False, True),
    ("nan_q4k_scale", nan_q4k_scale, "invalid", False, True),
    ("nan_f32_norm", nan_f32_norm, "invalid", False, True),
    ("truncated", truncated, "invalid", False, False),
    ("unknown_type", unknown_type, "invalid", False, False),
    ("removed_type", removed_type, "invalid", False, False),
    ("negative_q4k_d", negative_q4k_d, "valid", True, True),
    ("duplicate_name", duplicate_name, "invalid", False, False),
    ("offset_past_end", offset_past_end, "invalid", False, False),
    ("overlapping", overlapping, "invalid", False, False),
    ("misaligned", misaligned, "invalid", False, False),
    ("row_not_block_multiple", row_not_block_multiple, "invalid", False, False),
    # GGUF-2.2: strings MUST be UTF-8 (ggml's docs/gguf.md); llama.cpp's gguf.cpp reads them as bytes and loads it
    ("bad_utf8_name", bad_utf8_name, "invalid", True, True),
    ("alignment_4096", alignment_4096, "invalid", False, False),
    ("alignment_48", alignment_48, "invalid", False, False),
] + [(f"nan_{t}", nan_scale(t), "invalid", False, True) for t, *_ in NAN_TYPES]
BASE = {f"nan_{t}": tuple(base) for t, *base in NAN_TYPES}


@dataclass
class Outcome:
    name: str
    what: str
    verdict: str
    codes: list
    shallow: str
    checked_rc: int
    checked_msg: str
    unchecked_rc: int
    unchecked_msg: str


def _message(log: str) -> str:
    """ggml_validate_row_data's complaint if any, else the first error line of llama.cpp's log (its lines
    read ``0.00.003.374 E function: text``)."""
    for line in log.splitlines():
        if line.startswith("ggml_validate_row_data:"):
            return line.strip()[:140]
    for line in log.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] == "E":
            return parts[2].strip()[:140]
    return ""


def _load(path: Path, check_tensors: bool) -> tuple[int, str]:
    """(exit status, first error line) of llama-completion on ``path``; its log is whole (log_drain.c), so an
    empty one is what the tool said."""
    proc = load_and_eval(path, check_tensors=check_tensors)
    message = _message(proc.stdout + proc.stderr)
    return proc.returncode, message or ("" if proc.returncode == 0 else "(empty log)")


@functools.lru_cache(maxsize=None)
def outcome(name: str) -> Outcome:
    from qformats.validate import validate

    corrupt = dict((n, f) for n, f, *_ in CORRUPTIONS)[name]
    base, proc = quantized_file(*BASE.get(name, ("Q4_K_M", False)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    buf = bytearray(base.read_bytes())
    what = corrupt(buf, base)
    path = workdir() / f"corrupt-{name}.gguf"
    path.write_bytes(bytes(buf))
    deep, shallow = validate(path, deep=True), validate(path)
    codes = sorted({f.code + ("" if f.severity == "error" else f" ({f.severity})") for f in deep.findings
                    if f.severity in ("error", "warning")})
    return Outcome(name, what, deep.verdict, codes, shallow.verdict, *_load(path, True), *_load(path, False))


@pytest.mark.parametrize("name,verdict,checked_ok,unchecked_ok", [(n, v, c, u) for n, _, v, c, u in CORRUPTIONS],
                         ids=[n for n, *_ in CORRUPTIONS])
def test_corruption(name, verdict, checked_ok, unchecked_ok):
    """GGML-3.1, GGML-3.2, GGML-3.3 and the container rules: qformats flags every corruption (an error, or
    GGML-3.2's warning for a negated d that ggml loads); llama.cpp's outcome with and without
    --check-tensors is as pinned."""
    o = outcome(name)
    assert o.verdict == verdict and o.codes, o
    assert (o.checked_rc == 0) == checked_ok, o
    assert (o.unchecked_rc == 0) == unchecked_ok, o


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table() -> str:
    """The README's corruption table (readme_tables.py writes it)."""
    lines = ["| corruption of a llama-quantize file | qformats `--deep` | codes | qformats (shallow) "
             "| llama.cpp `--check-tensors` | llama.cpp without |", "|---|---|---|---|---|---|"]
    for name, *_ in CORRUPTIONS:
        o = outcome(name)
        checked = "loads, evaluates" if o.checked_rc == 0 else f"refuses: `{o.checked_msg}`"
        unchecked = "loads, evaluates" if o.unchecked_rc == 0 else f"refuses: `{o.unchecked_msg}`"
        codes = ", ".join(f"`{c}`" for c in o.codes)
        lines.append(f"| {_cell(o.what)} | {o.verdict} | {codes} | {o.shallow} | {_cell(checked)} | {_cell(unchecked)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not LLAMA:
        sys.exit(SKIP_REASON)
    print(table())
