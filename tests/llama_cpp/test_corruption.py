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


def _tensors(path: Path) -> dict:
    import gguf

    return {t.name: t for t in gguf.GGUFReader(str(path)).tensors}


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
    assert t.tensor_type.name == "Q6_K"
    buf[t.data_offset + 208: t.data_offset + 210] = FP16_NAN
    return "output.weight (q6_K) block 0: d = NaN"


def nan_q4k_scale(buf: bytearray, path: Path) -> str:
    """d (first 2 bytes of a 144-byte block) of block 5 of blk.0.attn_q.weight (q4_K) -> NaN."""
    t = _tensors(path)["blk.0.attn_q.weight"]
    assert t.tensor_type.name == "Q4_K"
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
]


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
    """(exit status, first error line) of llama-completion on ``path``. llama.cpp logs through a worker
    thread that an early ``return 1`` from main can outrun: the log is then empty (measured, now and
    then); the run is repeated, up to 5 times, until a failure says why."""
    for _ in range(5):
        proc = load_and_eval(path, check_tensors=check_tensors)
        message = _message(proc.stdout + proc.stderr)
        if proc.returncode == 0 or message:
            break
    return proc.returncode, message or ("" if proc.returncode == 0 else "(empty log)")


@functools.lru_cache(maxsize=None)
def outcome(name: str) -> Outcome:
    from qformats.validate import validate

    corrupt = dict((n, f) for n, f, *_ in CORRUPTIONS)[name]
    base, proc = quantized_file("Q4_K_M", False)
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


def table() -> str:
    lines = ["| corruption | qformats --deep | codes | qformats (shallow) | llama.cpp --check-tensors "
             "| llama.cpp without |", "|---|---|---|---|---|---|"]
    for name, *_ in CORRUPTIONS:
        o = outcome(name)
        checked = "loads, evaluates (exit 0)" if o.checked_rc == 0 else f"exit {o.checked_rc}: {o.checked_msg}"
        unchecked = "loads, evaluates (exit 0)" if o.unchecked_rc == 0 else f"exit {o.unchecked_rc}: {o.unchecked_msg}"
        lines.append(f"| {o.what} | {o.verdict} | {', '.join(o.codes)} | {o.shallow} | {checked} | {unchecked} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not LLAMA:
        sys.exit(SKIP_REASON)
    print(table())
