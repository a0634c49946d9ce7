"""Deterministic hand-builder of GGUF bytes, valid and malformed (the fixture generator).

Independent of the reader under test: every field is written with ``struct`` straight from the
layout in spec/containers.md §GGUF-1..5, so a malformed file is exactly the one-field change it
claims to be. ``CASES`` maps each fixture name to (builder, expected code or None for valid, clause);
``python tests/containers/gguf_builder.py ROOT`` writes them under ``ROOT/containers/gguf`` and their
cases into ``ROOT/manifest.json``. The ``q4k_*`` payload cases are valid containers whose q4_K blocks
are invalid: the reader accepts them and the format layer (Q4K-5.4) reports them.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable

from qformats.fixtures import generator_main, reference_case

# GGUF value types (spec/containers.md GGUF-2.5)
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# ggml type ids used here
T_F32, T_F16, T_Q4_0, T_Q4_K, T_I8 = 0, 1, 2, 12, 24

U64_MAX = (1 << 64) - 1


def u8(v: int) -> bytes:
    return struct.pack("<B", v)


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def gstr(s: str | bytes, length: int | None = None) -> bytes:
    """A GGUF string: u64 length then the bytes; ``length`` overrides the declared length."""
    raw = s.encode() if isinstance(s, str) else s
    return u64(len(raw) if length is None else length) + raw


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    return gstr(key) + u32(vtype) + payload


def kv_u32(key: str, v: int) -> bytes:
    return kv(key, U32, u32(v))


def kv_str(key: str, v: str) -> bytes:
    return kv(key, STRING, gstr(v))


def arr(etype: int, count: int, body: bytes) -> bytes:
    return u32(etype) + u64(count) + body


def tinfo(name: str | bytes, dims: list[int], ttype: int, offset: int, n_dims: int | None = None) -> bytes:
    """A tensor-info record; ``n_dims`` overrides the declared rank (dims written as given)."""
    return gstr(name) + u32(len(dims) if n_dims is None else n_dims) + b"".join(u64(d) for d in dims) \
        + u32(ttype) + u64(offset)


def pad(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def gguf(kvs: list[bytes], infos: list[bytes], data: bytes = b"", *, version: int = 3,
         magic: bytes = b"GGUF", n_tensors: int | None = None, n_kv: int | None = None,
         alignment: int = 32) -> bytes:
    """Header + KVs + tensor infos, zero padding to ``alignment`` when there are tensors, data."""
    head = magic + u32(version) + u64(len(infos) if n_tensors is None else n_tensors) \
        + u64(len(kvs) if n_kv is None else n_kv) + b"".join(kvs) + b"".join(infos)
    if infos:
        head += bytes(pad(len(head), alignment) - len(head))
    return head + data


# -- deterministic payloads --------------------------------------------------------------------
def f32_payload(n: int) -> bytes:
    """n float32 values 0.0, 0.5, 1.0, ... (exact in fp32)."""
    return b"".join(struct.pack("<f", i * 0.5) for i in range(n))


def q4k_block(d: int = 0x3C00, dmin: int = 0x3800) -> bytes:
    """One 144-byte q4_K block: fp16 d, fp16 dmin (bit patterns), 12 scale bytes, 128 code bytes."""
    scales = bytes((7 * i + 1) & 0x3F for i in range(12))
    qs = bytes((i * 37 + 11) & 0xFF for i in range(128))
    return struct.pack("<HH", d, dmin) + scales + qs


F32_DIMS = [8, 2]                   # 16 floats = 64 bytes, already 32-aligned
Q4K_DIMS = [256, 2]                 # 2 rows x 1 block = 288 bytes, padded to 288


def base_kvs() -> list[bytes]:
    return [kv_str("general.architecture", "qformats-test"), kv_u32("general.alignment", 32)]


def base_infos(q4k_offset: int = 64) -> list[bytes]:
    return [tinfo("a.weight", F32_DIMS, T_F32, 0), tinfo("b.weight", Q4K_DIMS, T_Q4_K, q4k_offset)]


def base_data(d: int = 0x3C00, dmin: int = 0x3800) -> bytes:
    return f32_payload(16) + q4k_block() + q4k_block(d, dmin)


def valid_v3() -> bytes:
    return gguf(base_kvs(), base_infos(), base_data())


def valid_v2() -> bytes:
    return gguf(base_kvs(), base_infos(), base_data(), version=2)


def valid_align64() -> bytes:
    kvs = [kv_str("general.architecture", "qformats-test"), kv_u32("general.alignment", 64)]
    infos = [tinfo("a.weight", F32_DIMS, T_F32, 0), tinfo("b.weight", Q4K_DIMS, T_Q4_K, 64)]
    return gguf(kvs, infos, base_data(), alignment=64)


def valid_no_tensors() -> bytes:
    return gguf(base_kvs(), [])


def valid_name_63() -> bytes:
    return gguf([], [tinfo("n" * 63, [8], T_F32, 0)], f32_payload(8))


def valid_all_value_types() -> bytes:
    kvs = [
        kv("t.u8", U8, u8(200)), kv("t.i8", I8, struct.pack("<b", -7)),
        kv("t.u16", U16, struct.pack("<H", 65535)), kv("t.i16", I16, struct.pack("<h", -300)),
        kv("t.u32", U32, u32(4_000_000_000)), kv("t.i32", I32, struct.pack("<i", -2_000_000_000)),
        kv("t.f32", F32, struct.pack("<f", 0.25)), kv("t.bool", BOOL, u8(1)),
        kv("t.str", STRING, gstr("héllo")), kv("t.u64", U64, u64(U64_MAX)),
        kv("t.i64", I64, struct.pack("<q", -(1 << 62))), kv("t.f64", F64, struct.pack("<d", -1.5)),
        kv("t.arr_u32", ARRAY, arr(U32, 3, u32(1) + u32(2) + u32(3))),
        kv("t.arr_str", ARRAY, arr(STRING, 2, gstr("a") + gstr(""))),
        kv("t.arr_bool", ARRAY, arr(BOOL, 2, u8(0) + u8(1))),
        kv("t.arr_empty", ARRAY, arr(F32, 0, b"")),
    ]
    return gguf(kvs, [tinfo("a.weight", [4], T_F32, 0)], f32_payload(4))


# -- malformed files, one defect each (notes q4_k.md §5.4 class in brackets) --------------------
def _base(**over) -> bytes:
    return gguf(over.get("kvs", base_kvs()), over.get("infos", base_infos()), over.get("data", base_data()),
                **{k: v for k, v in over.items() if k not in ("kvs", "infos", "data")})


def _one_kv(entry: bytes, n_kv: int | None = None) -> bytes:
    """Header + a single KV and nothing else (the smallest carrier of a metadata defect)."""
    return gguf([entry], [], n_kv=n_kv)


def _one_tensor(info: bytes, data: bytes = b"") -> bytes:
    return gguf([], [info], data)


CaseFn = Callable[[], bytes]
CASES: dict[str, tuple[CaseFn, str | None, str]] = {
    # positives
    "valid_v3": (valid_v3, None, "GGUF-1.2"),
    "valid_v2": (valid_v2, None, "GGUF-1.2"),
    "valid_align64": (valid_align64, None, "GGUF-2.9"),
    "valid_no_tensors": (valid_no_tensors, None, "GGUF-5.1"),
    "valid_name_63_bytes": (valid_name_63, None, "GGUF-3.1"),
    "valid_all_value_types": (valid_all_value_types, None, "GGUF-2.5"),
    # [1] magic, short files
    "bad_magic": (lambda: b"FUGG" + valid_v3()[4:], "gguf.magic", "GGUF-1.1"),
    "short_3_bytes": (lambda: b"GGU", "gguf.truncated", "GGUF-1.4"),
    # [2] version
    "version_0": (lambda: _base(version=0), "gguf.version", "GGUF-1.2"),
    "version_1": (lambda: _base(version=1), "gguf.version", "GGUF-1.2"),
    "version_future_4": (lambda: _base(version=4), "gguf.version", "GGUF-1.2"),
    "version_byteswapped": (lambda: _base(version=0x03000000), "gguf.version", "GGUF-1.3"),
    # [3] counts
    "tensor_count_2p63": (lambda: _base(n_tensors=1 << 63), "gguf.count.too_large", "GGUF-1.5"),
    "tensor_count_2p60": (lambda: _base(n_tensors=1 << 60), "gguf.count.too_large", "GGUF-1.5"),
    "kv_count_u64max": (lambda: _base(n_kv=U64_MAX), "gguf.count.too_large", "GGUF-1.5"),
    "kv_count_beyond_file": (lambda: _base(n_kv=1000), "gguf.truncated", "GGUF-1.5"),
    # [4] [5] strings
    "string_len_u64max": (lambda: _one_kv(gstr("k", U64_MAX) + bytes(8)), "gguf.string.length", "GGUF-2.1"),
    "string_len_2p40": (lambda: _one_kv(kv("k", STRING, gstr("x", 1 << 40))), "gguf.string.length", "GGUF-2.1"),
    "string_len_1gib_plus_1": (lambda: _one_kv(kv("k", STRING, gstr("x", (1 << 30) + 1))),
                               "gguf.string.length", "GGUF-2.1"),
    "string_past_eof": (lambda: _one_kv(kv("k", STRING, gstr("x", 100))), "gguf.truncated", "GGUF-1.4"),
    "key_not_utf8": (lambda: _one_kv(kv(b"k\xff", U32, u32(1))), "gguf.string.utf8", "GGUF-2.2"),
    # [6] [7] arrays
    "array_u32_count_2p62": (lambda: _one_kv(kv("a", ARRAY, arr(U32, 1 << 62, b""))), "gguf.array.length", "GGUF-2.8"),
    "array_str_count_2p61": (lambda: _one_kv(kv("a", ARRAY, arr(STRING, 1 << 61, b""))), "gguf.array.length", "GGUF-2.8"),
    "array_count_2p63": (lambda: _one_kv(kv("a", ARRAY, arr(U8, 1 << 63, b""))), "gguf.array.length", "GGUF-2.8"),
    "array_past_eof": (lambda: _one_kv(kv("a", ARRAY, arr(U32, 1000, u32(1)))), "gguf.truncated", "GGUF-1.4"),
    # [8] nesting
    "array_nested": (lambda: _one_kv(kv("a", ARRAY, arr(ARRAY, 1, arr(U8, 1, u8(0))))), "gguf.array.nested", "GGUF-2.7"),
    # [9] value types
    "value_type_13": (lambda: _one_kv(kv("k", 13, u32(0))), "gguf.value_type", "GGUF-2.5"),
    "value_type_u32max": (lambda: _one_kv(kv("k", 0xFFFFFFFF, u32(0))), "gguf.value_type", "GGUF-2.5"),
    "array_elem_type_13": (lambda: _one_kv(kv("a", ARRAY, arr(13, 1, u32(0)))), "gguf.value_type", "GGUF-2.5"),
    # [10] keys
    "key_duplicate": (lambda: _base(kvs=base_kvs() + [kv_u32("general.alignment", 32)]), "gguf.key.duplicate", "GGUF-2.4"),
    "key_empty": (lambda: _one_kv(kv("", U32, u32(1))), "gguf.key.empty", "GGUF-2.3"),
    # [11] alignment
    "alignment_i32": (lambda: _base(kvs=[kv("general.alignment", I32, struct.pack("<i", 32))]), "gguf.alignment", "GGUF-2.9"),
    "alignment_0": (lambda: _base(kvs=[kv_u32("general.alignment", 0)]), "gguf.alignment", "GGUF-2.9"),
    "alignment_24": (lambda: _base(kvs=[kv_u32("general.alignment", 24)]), "gguf.alignment", "GGUF-2.9"),
    "alignment_2p31": (lambda: _base(kvs=[kv_u32("general.alignment", 1 << 31)]), "gguf.alignment", "GGUF-2.9"),
    "alignment_4": (lambda: _base(kvs=[kv_u32("general.alignment", 4)], alignment=4), "gguf.alignment", "GGUF-2.9"),
    # keys and general.* types (docs/gguf.md MUSTs that ggml does not check)
    "key_uppercase": (lambda: _one_kv(kv("General.Name", STRING, gstr("x"))), "gguf.key.form", "GGUF-2.10"),
    "key_not_ascii": (lambda: _one_kv(kv("general.n\u00e4me", STRING, gstr("x"))), "gguf.key.form", "GGUF-2.10"),
    "key_empty_segment": (lambda: _one_kv(kv("general..name", STRING, gstr("x"))), "gguf.key.form", "GGUF-2.10"),
    "key_space": (lambda: _one_kv(kv("my key", U32, u32(1))), "gguf.key.form", "GGUF-2.10"),
    "key_65536_bytes": (lambda: _one_kv(kv("k" * 65536, U32, u32(1))), "gguf.key.form", "GGUF-2.10"),
    "general_architecture_u32": (lambda: _one_kv(kv_u32("general.architecture", 1)), "gguf.key.type", "GGUF-2.11"),
    "general_quantization_version_str": (lambda: _one_kv(kv_str("general.quantization_version", "2")),
                                         "gguf.key.type", "GGUF-2.11"),
    # [24] bools
    "bool_2": (lambda: _one_kv(kv("b", BOOL, u8(2))), "gguf.bool", "GGUF-2.6"),
    "bool_array_2": (lambda: _one_kv(kv("b", ARRAY, arr(BOOL, 3, u8(0) + u8(1) + u8(2)))), "gguf.bool", "GGUF-2.6"),
    # [18] names
    "name_64_bytes": (lambda: _one_tensor(tinfo("n" * 64, [8], T_F32, 0), f32_payload(8)),
                      "gguf.tensor.name_length", "GGUF-3.1"),
    "name_len_2p32": (lambda: gguf([], [gstr("n", 1 << 32)], n_tensors=1), "gguf.tensor.name_length", "GGUF-3.1"),
    "name_empty": (lambda: _one_tensor(tinfo("", [8], T_F32, 0), f32_payload(8)), "gguf.tensor.name_length", "GGUF-3.1"),
    # [19]
    "tensor_duplicate": (lambda: _base(infos=[tinfo("a.weight", F32_DIMS, T_F32, 0), tinfo("a.weight", Q4K_DIMS, T_Q4_K, 64)]),
                         "gguf.tensor.duplicate", "GGUF-3.2"),
    # [12] rank
    "n_dims_5": (lambda: _one_tensor(tinfo("t", [1, 1, 1, 1, 8], T_F32, 0)), "gguf.tensor.n_dims", "GGUF-3.3"),
    "n_dims_u32max": (lambda: _one_tensor(tinfo("t", [8], T_F32, 0, n_dims=0xFFFFFFFF)), "gguf.tensor.n_dims", "GGUF-3.3"),
    # [13] [14] dims
    "ne_zero": (lambda: _one_tensor(tinfo("t", [8, 0], T_F32, 0)), "gguf.tensor.dims", "GGUF-3.4"),
    "ne_negative": (lambda: _one_tensor(tinfo("t", [U64_MAX], T_F32, 0)), "gguf.tensor.dims", "GGUF-3.4"),
    "ne_product_2p64": (lambda: _one_tensor(tinfo("t", [(1 << 42) + 1, 1 << 22], T_F32, 0)), "gguf.tensor.dims", "GGUF-3.4"),
    "ne_product_int64max_x2": (lambda: _one_tensor(tinfo("t", [(1 << 63) - 1, 2], T_I8, 0)), "gguf.tensor.dims", "GGUF-3.4"),
    # [15] byte sizes
    "nbytes_2p63": (lambda: _one_tensor(tinfo("t", [1 << 61], T_F32, 0)), "gguf.tensor.nbytes", "GGUF-3.7"),
    "padded_sizes_sum_2p64": (lambda: gguf([], [tinfo(f"t{i}", [1 << 60], T_F32, i << 62) for i in range(4)]),
                              "gguf.data.past_end", "GGUF-5.2"),
    # [16] types
    "type_43": (lambda: _one_tensor(tinfo("t", [8], 43, 0)), "gguf.tensor.type", "GGUF-3.5"),
    "type_removed_4": (lambda: _one_tensor(tinfo("t", [32], 4, 0)), "gguf.tensor.type", "GGUF-3.5"),
    "type_removed_31": (lambda: _one_tensor(tinfo("t", [32], 31, 0)), "gguf.tensor.type", "GGUF-3.5"),
    "type_u32max": (lambda: _one_tensor(tinfo("t", [8], 0xFFFFFFFF, 0)), "gguf.tensor.type", "GGUF-3.5"),
    # [17] block multiples
    "q4k_ne0_255": (lambda: _one_tensor(tinfo("t", [255], T_Q4_K, 0)), "gguf.tensor.shape_block", "GGUF-3.6"),
    "q4k_ne0_257": (lambda: _one_tensor(tinfo("t", [257], T_Q4_K, 0)), "gguf.tensor.shape_block", "GGUF-3.6"),
    "q4k_ne0_1": (lambda: _one_tensor(tinfo("t", [1, 256], T_Q4_K, 0)), "gguf.tensor.shape_block", "GGUF-3.6"),
    "q4_0_ne0_33": (lambda: _one_tensor(tinfo("t", [33], T_Q4_0, 0)), "gguf.tensor.shape_block", "GGUF-3.6"),
    # [20] offsets
    "offset_misaligned": (lambda: _base(infos=base_infos(q4k_offset=65)), "gguf.tensor.misaligned", "GGUF-3.8"),
    "offset_overlap": (lambda: _base(infos=base_infos(q4k_offset=32)), "gguf.tensor.overlap", "GGUF-3.9"),
    "offset_alias_both_0": (lambda: _base(infos=base_infos(q4k_offset=0)), "gguf.tensor.overlap", "GGUF-3.9"),
    "offset_gap": (lambda: _base(infos=base_infos(q4k_offset=96), data=base_data() + bytes(32)), "gguf.tensor.offset", "GGUF-3.9"),
    "offset_out_of_order": (lambda: _base(infos=[tinfo("b.weight", Q4K_DIMS, T_Q4_K, 64), tinfo("a.weight", F32_DIMS, T_F32, 0)]),
                            "gguf.tensor.offset", "GGUF-3.9"),
    # [21] data section
    "data_short_by_1": (lambda: valid_v3()[:-1], "gguf.data.past_end", "GGUF-5.2"),
    "cut_in_padding": (lambda: _base(kvs=[kv_str("general.architecture", "x")])[:-(64 + 288) - 1],
                       "gguf.truncated", "GGUF-5.1"),
    "trailing_bytes": (lambda: valid_v3() + bytes(32), "gguf.data.trailing", "GGUF-5.3"),
    # [25] q4_K payload: structurally valid, invalid blocks (found by the q4_K layer, not the reader)
    "q4k_d_inf": (lambda: _base(data=base_data(d=0x7C00)), "q4k.d.nonfinite", "Q4K-5.4"),
    "q4k_dmin_nan": (lambda: _base(data=base_data(dmin=0x7E00)), "q4k.d.nonfinite", "Q4K-5.4"),
}


FIXTURE_DIR = "containers/gguf"        # relative to fixtures/
GENERATOR = "tests/containers/gguf_builder.py:fixture_files"


def fixture_files() -> dict[str, bytes]:
    """Every fixture as ``{file name: bytes}`` (the generator named in the manifest)."""
    return {f"{name}.gguf": fn() for name, (fn, _code, _clause) in CASES.items()}


def manifest_entries() -> list[dict]:
    """The manifest cases describing :func:`fixture_files`."""
    return [reference_case(f"gguf/{name}", "gguf", "container", clauses=[clause],
                           features=["container:gguf"] + (["q4_k"] if name.startswith("q4k") else []),
                           files={f"{FIXTURE_DIR}/{name}.gguf": fn()}, generator=GENERATOR,
                           codes=[code] if code else [], valid=code is None)
            for name, (fn, code, clause) in CASES.items()]


def main(argv: list[str]) -> int:
    """Write every fixture under ``ROOT/{FIXTURE_DIR}`` and its cases into ``ROOT/manifest.json``."""
    return generator_main(argv, FIXTURE_DIR, fixture_files(), manifest_entries())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
