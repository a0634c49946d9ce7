"""Deterministic hand-builder of safetensors bytes and checkpoint directories, valid and malformed.

Independent of the reader under test: headers are JSON text assembled from (key, value) pairs with
``json.dumps`` (so duplicate keys and odd padding can be written), prefixed by ``struct.pack("<Q")``,
straight from the format README (spec/checkpoints.md ST-1..ST-4). Each malformed case is one change
to a valid base. ``CASES`` maps a fixture name to (builder, expected error code or None, clause,
expected warning codes); a builder returns ``bytes`` (one ``.safetensors`` file) or
``{file name: bytes}`` (a checkpoint directory). ``python tests/checkpoints/st_builder.py [ROOT]``
writes them under ``ROOT/containers/safetensors`` and their cases into ``ROOT/manifest.json``.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Callable
from typing import Any

from qformats.fixtures import generator_main, reference_case

Pairs = list[tuple[str, Any]]

DATA = bytes(range(20))                       # a: F16 [2, 2] -> bytes 0..8, b: I32 [3] -> bytes 8..20
A = {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}
B = {"dtype": "I32", "shape": [3], "data_offsets": [8, 20]}


def obj(pairs: Pairs) -> str:
    """A JSON object written pair by pair, duplicates kept, compact like the safetensors writer."""
    return "{" + ",".join(json.dumps(k) + ":" + json.dumps(v, separators=(",", ":")) for k, v in pairs) + "}"


def st_bytes(header: str | bytes, data: bytes = DATA, *, n: int | None = None) -> bytes:
    """8-byte little-endian header length (``n`` overrides it), the header, the byte buffer."""
    raw = header.encode("utf-8") if isinstance(header, str) else header
    return struct.pack("<Q", len(raw) if n is None else n) + raw + data


def base(pairs: Pairs | None = None, data: bytes = DATA) -> bytes:
    return st_bytes(obj(pairs if pairs is not None else [("a", A), ("b", B)]), data)


def with_b(**changes: Any) -> bytes:
    return base([("a", A), ("b", {**B, **changes})])


def padded(text: str, align: int = 8) -> str:
    """Trailing 0x20 padding to a multiple of ``align`` bytes after the prefix (as the library writes)."""
    return text + " " * (-len(text.encode()) % align)


# -- directories (sharded checkpoints) -------------------------------------------------------

def shard(name: str, dtype: str = "I32", count: int = 4) -> bytes:
    size = count * 4
    return st_bytes(obj([(name, {"dtype": dtype, "shape": [count], "data_offsets": [0, size]})]),
                    bytes(range(size)))


def index(weight_map: dict[str, str], total: int | None = 32) -> bytes:
    meta = {} if total is None else {"total_size": total}
    return (json.dumps({"metadata": meta, "weight_map": weight_map}, indent=2) + "\n").encode()


QCONFIG = {"bits": 4, "group_size": 32, "desc_act": False, "sym": True, "quant_method": "gptq",
           "checkpoint_format": "gptq"}


def sharded(weight_map: dict[str, str] | None = None, *, drop: str | None = None,
            extra: dict[str, bytes] | None = None, total: int | None = 32) -> dict[str, bytes]:
    files = {
        "model-00001-of-00002.safetensors": shard("x.qweight"),
        "model-00002-of-00002.safetensors": shard("y.qweight"),
        "model.safetensors.index.json": index(weight_map or {"x.qweight": "model-00001-of-00002.safetensors",
                                                             "y.qweight": "model-00002-of-00002.safetensors"}, total),
        "quantize_config.json": (json.dumps(QCONFIG, indent=2) + "\n").encode(),
    }
    if drop:
        del files[drop]
    files.update(extra or {})
    return files


S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"

Builder = Callable[[], "bytes | dict[str, bytes]"]
CASES: dict[str, tuple[Builder, str | None, str, tuple[str, ...]]] = {
    # valid files
    "valid_two_tensors": (lambda: base(), None, "ST-4.2", ()),
    "valid_space_padded": (lambda: st_bytes(padded(obj([("a", A), ("b", B)]))), None, "ST-2.3", ()),
    "valid_reverse_order": (lambda: base([("b", B), ("a", A)]), None, "ST-4.1", ()),
    "valid_metadata": (lambda: base([("__metadata__", {"format": "np"}), ("a", A), ("b", B)]), None, "ST-2.6", ()),
    "valid_empty_tensor": (lambda: base([("a", A), ("e", {"dtype": "F32", "shape": [0, 3], "data_offsets": [8, 8]}),
                                         ("b", B)]), None, "ST-3.7", ()),
    "valid_bf16_f8_scalar": (lambda: base([("h", {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}),
                                           ("f", {"dtype": "F8_E4M3", "shape": [2, 5], "data_offsets": [6, 16]}),
                                           ("s", {"dtype": "F32", "shape": [], "data_offsets": [16, 20]})]),
                             None, "ST-3.3", ()),
    "warn_leading_whitespace": (lambda: st_bytes("\n  " + obj([("a", A), ("b", B)])), None, "ST-2.3",
                                ("st.header.padding",)),
    "warn_unknown_key": (lambda: with_b(note="x"), None, "ST-3.2", ("st.tensor.unknown_key",)),
    # ST-1 framing
    "truncated_4_bytes": (lambda: base()[:4], "st.truncated", "ST-1.1", ()),
    "truncated_in_data": (lambda: base()[:-3], "st.truncated", "ST-1.1", ()),
    "header_len_u64_max": (lambda: st_bytes(obj([("a", A), ("b", B)]), n=(1 << 64) - 1), "st.header.too_large",
                           "ST-1.2", ()),
    "header_len_cap_plus_1": (lambda: st_bytes(obj([("a", A), ("b", B)]), n=100_000_001), "st.header.too_large",
                              "ST-1.2", ()),
    "header_len_past_eof": (lambda: st_bytes(obj([("a", A), ("b", B)]), n=5000), "st.header.length", "ST-1.3", ()),
    "truncated_in_header": (lambda: base()[:40], "st.header.length", "ST-1.3", ()),
    # ST-2 header JSON
    "header_not_utf8": (lambda: st_bytes(obj([("a", A), ("b", B)]).encode().replace(b'"a"', b'"\xff"')),
                        "st.header.utf8", "ST-2.1", ()),
    "header_bad_json": (lambda: st_bytes(obj([("a", A), ("b", B)])[:-1] + ",}"), "st.header.json", "ST-2.2", ()),
    "header_nul_padded": (lambda: st_bytes(obj([("a", A), ("b", B)]) + "\0\0\0"), "st.header.json", "ST-2.2", ()),
    "header_nan_literal": (lambda: st_bytes(obj([("a", A), ("b", B)])[:-1] + ',"x":NaN}'), "st.header.json",
                           "ST-2.2", ()),
    "header_is_array": (lambda: st_bytes("[]", b""), "st.header.not_object", "ST-2.4", ()),
    "name_duplicate": (lambda: base([("a", A), ("b", B), ("a", A)]), "st.name.duplicate", "ST-2.5", ()),
    "metadata_duplicate_key": (lambda: st_bytes(obj([("a", A), ("b", B)])[:-1] + ',"__metadata__":{"k":"1","k":"2"}}'),
                               "st.metadata.invalid", "ST-2.6", ()),
    "metadata_not_string": (lambda: base([("__metadata__", {"k": 1}), ("a", A), ("b", B)]), "st.metadata.invalid",
                            "ST-2.6", ()),
    # ST-3 tensor entries
    "tensor_missing_offsets": (lambda: base([("a", A), ("b", {"dtype": "I32", "shape": [3]})], DATA[:8]),
                               "st.tensor.invalid", "ST-3.1", ()),
    "dtype_unknown": (lambda: with_b(dtype="Q4_K"), "st.dtype.unknown", "ST-3.3", ()),
    "shape_negative": (lambda: with_b(shape=[-3]), "st.shape.invalid", "ST-3.4", ()),
    "shape_float": (lambda: with_b(shape=[3.0]), "st.shape.invalid", "ST-3.4", ()),
    "offsets_three": (lambda: with_b(data_offsets=[8, 20, 20]), "st.offsets.invalid", "ST-3.5", ()),
    "offsets_reversed": (lambda: base([("a", A), ("b", {**B, "data_offsets": [20, 8]})]), "st.offsets.out_of_order",
                         "ST-3.5", ()),
    "f4_odd_count": (lambda: base([("a", A), ("b", {"dtype": "F4", "shape": [3], "data_offsets": [8, 20]})]),
                     "st.shape.partial_byte", "ST-3.6", ()),
    "size_mismatch": (lambda: with_b(shape=[2]), "st.offsets.size_mismatch", "ST-3.7", ()),
    # ST-4 buffer layout
    "offsets_overlap": (lambda: base([("a", {**A, "data_offsets": [0, 8]}),
                                      ("b", {"dtype": "I32", "shape": [4], "data_offsets": [4, 20]})]),
                        "st.offsets.overlap", "ST-4.1", ()),
    "offsets_hole": (lambda: base([("a", A), ("b", {"dtype": "I32", "shape": [2], "data_offsets": [12, 20]})]),
                     "st.offsets.hole", "ST-4.2", ()),
    "offsets_leading_hole": (lambda: base([("a", {"dtype": "F16", "shape": [2], "data_offsets": [4, 8]}), ("b", B)]),
                             "st.offsets.hole", "ST-4.2", ()),
    "trailing_bytes": (lambda: base(data=DATA + b"polyglot"), "st.file.size", "ST-4.3", ()),
    # CKPT-3 sharded directories
    "sharded_valid": (lambda: sharded(), None, "CKPT-3.3", ()),
    "sharded_shard_missing": (lambda: sharded(drop=S2), "ckpt.index.shard_missing", "CKPT-3.3", ()),
    "sharded_tensor_missing": (lambda: sharded({"x.qweight": S1, "y.qweight": S2, "z.qweight": S2}),
                               "ckpt.index.tensor_missing", "CKPT-3.4", ()),
    "sharded_tensor_elsewhere": (lambda: sharded({"x.qweight": S2, "y.qweight": S2}),
                                 "ckpt.index.tensor_elsewhere", "CKPT-3.4", ()),
    "sharded_bad_index": (lambda: sharded(extra={"model.safetensors.index.json": b'{"weight_map": ["x"]}'}),
                          "ckpt.index.json", "CKPT-3.1", ()),
    "sharded_path_escape": (lambda: sharded({"x.qweight": "../" + S1, "y.qweight": S2}), "ckpt.index.json",
                            "CKPT-3.1", ()),
    "sharded_unlisted_shard": (lambda: sharded(extra={"stray.safetensors": shard("w")}), None, "CKPT-3.6",
                               ("ckpt.index.shard_unlisted",)),
    "sharded_wrong_total_size": (lambda: sharded(total=33), None, "CKPT-3.7", ("ckpt.index.total_size",)),
}

FIXTURE_DIR = "containers/safetensors"   # relative to fixtures/
GENERATOR = "tests/checkpoints/st_builder.py:fixture_files"


def fixture_files() -> dict[str, bytes]:
    """Every fixture file as ``{path relative to FIXTURE_DIR: bytes}`` (the manifest's generator)."""
    out: dict[str, bytes] = {}
    for name, (fn, *_rest) in CASES.items():
        built = fn()
        if isinstance(built, bytes):
            out[f"{name}.safetensors"] = built
        else:
            out.update({f"{name}/{fname}": blob for fname, blob in sorted(built.items())})
    return out


def fixture_path(name: str) -> str:
    """Path of case ``name`` relative to FIXTURE_DIR: its file, or its directory."""
    return f"{name}.safetensors" if isinstance(CASES[name][0](), bytes) else name


def manifest_entries() -> list[dict]:
    """The manifest cases describing :func:`fixture_files`."""
    files = fixture_files()
    entries = []
    for name, (_fn, code, clause, warnings) in CASES.items():
        prefix = fixture_path(name)
        mine = {f"{FIXTURE_DIR}/{p}": blob for p, blob in files.items() if p == prefix or p.startswith(prefix + "/")}
        entries.append(reference_case(
            f"safetensors/{name}", "safetensors", "container" if prefix.endswith(".safetensors") else "checkpoint",
            clauses=[clause], features=["container:safetensors"], files=mine, generator=GENERATOR,
            codes=[code] if code else list(warnings), valid=code is None))
    return entries


def library_accepts(blob: bytes) -> bool:
    """Whether the safetensors library itself loads ``blob`` (the independent verdict)."""
    import safetensors

    try:
        safetensors.deserialize(blob)
    except Exception:  # noqa: BLE001 - any library exception is a rejection
        return False
    return True


def main(argv: list[str]) -> int:
    """Write every fixture under ``ROOT/{FIXTURE_DIR}`` and its cases into ``ROOT/manifest.json``."""
    return generator_main(argv, FIXTURE_DIR, fixture_files(), manifest_entries())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
