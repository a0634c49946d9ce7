"""Fuzz cases for every command (``validate``, ``inspect``, ``decode``, ``convert``, ``conformance
checkpoint``, ``read_layer``): checkpoints as an attacker would upload them.

A case is a directory (file name -> bytes, or a special entry such as a FIFO or a symlink to
/dev/zero), the path handed to the command, the command and its options (tensor names, the ``-o``
mode, ``--jobs``, ``--reader``; see commands.py). It is a pure function of
``(seed, index)``, so any reported case can be rebuilt with ``fuzz.py --replay INDEX``.

Mutators, each named after what it attacks (CKPT-2..4, GPTQ-6, SPQR-6, ST-*, GGUF-*):

- ``config``:       config.json ``quantization_config`` — every field the readers read set to a
                    wrong type or an extreme, keys dropped or added, the object replaced.
- ``quant_config``: quantize_config.json / quant_config.json, alone or disagreeing with config.json.
- ``dynamic``:      GPTQModel ``dynamic`` rules (GPTQ-6.6): real-looking, invalid, catastrophic
                    (nested quantifiers against long module names), huge repeat counts, wild values.
- ``index``:        ``*.safetensors.index.json`` (CKPT-3): paths outside the directory, absolute
                    paths, missing shards, the index naming itself, wrong types, several indexes.
- ``json_bytes``:   any JSON file damaged as bytes: cut, flipped, deep nesting, huge numbers, BOMs.
- ``tensors``:      the layer tensors: dtypes, shapes, values (NaN scales, wild g_idx), dropped,
                    renamed or foreign tensors, written back through the safetensors library.
- ``shard_bytes``:  a shard's header damaged as bytes (ST-1..ST-4).
- ``gguf``:         the GGUF sample damaged as bytes (GGUF-*), through ``validate``.
- ``special``:      FIFOs, directories, dangling or looping symlinks and /dev files where files go.
"""

from __future__ import annotations

import json
import random
import struct
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np
from safetensors.numpy import load as st_load, save as st_save

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


@dataclass(frozen=True)
class Special:
    """A directory entry that is not a regular file: ``fifo``, ``dir``, ``symlink`` (to ``target``)."""

    kind: str
    target: str = ""


@dataclass
class FuzzCase:
    index: int
    seed_name: str
    files: dict[str, bytes | Special]
    entry: str = ""                      # relative to the case directory; "" is the directory itself
    deep: bool = False
    fmt: str = "auto"
    mutations: list[str] = field(default_factory=list)
    command: str = "validate"            # one of commands.COMMANDS
    invocation: Any = None               # commands.Invocation: names, -o mode, jobs, options
    plan: dict = field(default_factory=dict)  # the remote and audit entry points' draws (services.py)


# -- seeds: checkpoints the real tools and our samples wrote, loaded once per process ------------

def _dir_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def _sharded(files: dict[str, bytes]) -> dict[str, bytes]:
    """The same checkpoint split into two shards by the safetensors library, with its index."""
    tensors = st_load(files["model.safetensors"])
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    out = {k: v for k, v in files.items() if k != "model.safetensors"}
    weight_map = {}
    for shard, members in halves.items():
        out[shard] = st_save({n: tensors[n] for n in members}, metadata={"format": "pt"})
        weight_map.update({n: shard for n in members})
    total = sum(tensors[n].nbytes for n in names)
    out["model.safetensors.index.json"] = json.dumps({"metadata": {"total_size": total},
                                                      "weight_map": weight_map}, indent=2).encode()
    return out


def _gguf_with_vocab() -> bytes:
    """A q4_K GGUF with a tokenizer as llama.cpp writes one: string, float and int arrays beside the tensors."""
    sys.path.insert(0, str(ROOT / "tests" / "containers"))
    import gguf_builder as gb

    tokens = ["<unk>", "<s>", "</s>", "▁the", "é", "日本", "🙂", "", " ", "\u0000".encode().decode("unicode_escape")]
    tokens += [f"tok{i}" for i in range(54)]
    kvs = gb.base_kvs() + [
        gb.kv("tokenizer.ggml.model", gb.STRING, gb.gstr("llama")),
        gb.kv("tokenizer.ggml.tokens", gb.ARRAY, gb.arr(gb.STRING, len(tokens), b"".join(map(gb.gstr, tokens)))),
        gb.kv("tokenizer.ggml.scores", gb.ARRAY, gb.arr(gb.F32, len(tokens), struct.pack(f"<{len(tokens)}f",
                                                                                        *range(len(tokens))))),
        gb.kv("tokenizer.ggml.token_type", gb.ARRAY, gb.arr(gb.I32, len(tokens), struct.pack(f"<{len(tokens)}i",
                                                                                            *[1] * len(tokens)))),
    ]
    return gb.gguf(kvs, gb.base_infos(), gb.base_data())


@lru_cache(maxsize=1)
def seeds() -> dict[str, dict[str, bytes]]:
    samples = FIXTURES / "checkpoints"
    out = {p.name: _dir_files(p) for p in sorted(samples.iterdir()) if p.is_dir()}
    out["q4_k.gguf"] = {"q4_k.gguf": (samples / "q4_k.gguf").read_bytes()}
    out["q4_k_m.gguf"] = {"q4_k_m.gguf": (samples / "q4_k_m.gguf").read_bytes()}   # q4_K, q6_K, q5_0, q8_0, F32
    out["q4_k_vocab.gguf"] = {"q4_k_vocab.gguf": _gguf_with_vocab()}
    third = FIXTURES / "third_party"
    out["gptqmodel_e2e"] = _dir_files(third / "gptq" / "checkpoints" / "e2e_b4_sym_g32_gptq")
    out["gptqmodel_mislabelled"] = _dir_files(third / "gptq" / "checkpoints" / "neg_b4_sym_v2_zeros_labelled_gptq")
    out["spqr_quant_actorder"] = _dir_files(third / "spqr_quant" / "checkpoints" / "tiny-llama-spqr-csr-actorder")
    out["sharded_gptq_v2"] = _sharded(out["gptq_v2_asym_3bit_actorder"])
    out["sharded_gptqmodel"] = _sharded(out["gptqmodel_e2e"])
    return out


@lru_cache(maxsize=None)
def seed_tensors(seed_name: str, shard: str) -> dict[str, np.ndarray]:
    return st_load(seeds()[seed_name][shard])


# -- wild values --------------------------------------------------------------------------------

BIG_INTS = [0, 1, -1, 2, 3, 4, 8, 16, 32, 64, 128, 127, 255, 256, 1024, 4096, 2**31 - 1, 2**31, 2**32,
            2**53 + 1, 2**63 - 1, 2**63, 2**64, -2**63, -(2**64), 10**30]
FLOATS = [0.0, -0.0, 0.5, 1e-300, 1e308, 4.0, 128.0, -1.5, float("nan"), float("inf"), float("-inf")]
STRINGS = ["", "gptq", "gptq_v2", "v1", "v2", "spqr", "marlin", "awq", "bitblas", "int32", "int64", "4", "-1",
           "true", "null", "\u0000", "\ud800", "é" * 3, "model.layers.0", "../../etc/passwd", "x" * 5000,
           "+:.*", "-:.*q_proj"]


def wild_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(10 if depth < 3 else 7)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick in (2, 3):
        return rng.choice(BIG_INTS)
    if pick == 4:
        return rng.choice(FLOATS)
    if pick in (5, 6):
        return rng.choice(STRINGS)
    if pick == 7:
        return [wild_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 8:
        return {rng.choice(STRINGS + ["bits", "group_size"]): wild_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return _deep_nest(rng)


def _deep_nest(rng: random.Random) -> Any:
    """A nested value json.dumps can still write (it recurses too); m_json_bytes writes deeper ones."""
    value: Any = rng.choice([1, "x", None])
    for _ in range(rng.choice([10, 100, 500, 900])):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


GPTQ_KEYS = ["bits", "group_size", "desc_act", "sym", "checkpoint_format", "format", "quant_method", "method",
             "pack_dtype", "lm_head", "static_groups", "true_sequential", "damp_percent", "meta", "dynamic",
             "model_name_or_path", "model_file_base_name", "modules_in_block_to_quantize", "zero_point", "v2",
             "is_marlin_format", "quantizer"]
SPQR_KEYS = ["quant_method", "bits", "beta1", "beta2", "shapes", "modules_to_not_convert",
             "linear_weights_not_to_quantize", "outlier_threshold", "group_size"]


def _mutate_object(rng: random.Random, obj: Any, keys: list[str]) -> Any:
    """1-4 edits of a JSON object: a key set to a wild value, dropped, or added; or the object replaced."""
    if not isinstance(obj, dict) or rng.random() < 0.04:
        return wild_value(rng) if rng.random() < 0.7 else {}
    obj = dict(obj)
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.6:
            obj[rng.choice(keys + list(obj))] = wild_value(rng)
        elif roll < 0.8 and obj:
            obj.pop(rng.choice(list(obj)))
        elif roll < 0.9:
            obj[rng.choice(STRINGS)] = wild_value(rng)
        elif "shapes" in obj and isinstance(obj["shapes"], dict) and obj["shapes"]:
            shapes = dict(obj["shapes"])
            shapes[rng.choice(list(shapes))] = wild_value(rng)
            obj["shapes"] = shapes
        else:
            obj[rng.choice(keys)] = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 31, 32, 33, 64, 128, -1, 0, -2])
    return obj


def dumps(rng: random.Random, value: Any) -> bytes:
    """JSON text as real writers (and careless ones) produce it: indented or not, ASCII or not.

    Only texts under 64 KiB with at most 256 containers are indented: the indenting encoder is pure
    Python, a generator per level that every chunk passes through, so it took seconds on the megabyte-sized
    ``dynamic`` configs and ~25 ms on a 900-deep nest (half of all case generation); the compact one is C."""
    indent, ensure_ascii = rng.choice([None, 2]), rng.random() < 0.5
    try:
        text = json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=True)
        if indent and len(text) < 1 << 16 and text.count("[") + text.count("{") <= 256:
            text = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, allow_nan=True)
    except (ValueError, RecursionError):
        text = "null"
    return text.encode("utf-8", "surrogatepass")


def _load(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return {}


# -- mutators -----------------------------------------------------------------------------------

def m_config(rng: random.Random, case: FuzzCase) -> None:
    cfg = _load(case.files["config.json"]) if isinstance(case.files.get("config.json"), bytes) else {}
    if not isinstance(cfg, dict):
        cfg = {}
    keys = SPQR_KEYS if "spqr" in case.seed_name else GPTQ_KEYS
    roll = rng.random()
    if roll < 0.1:
        cfg = _mutate_object(rng, cfg, ["quantization_config", "model_type", "architectures"])
    elif roll < 0.15:
        case.files.pop("config.json", None)
        return
    else:
        cfg["quantization_config"] = _mutate_object(rng, cfg.get("quantization_config", {}), keys)
    case.files["config.json"] = dumps(rng, cfg)


def m_quant_config(rng: random.Random, case: FuzzCase) -> None:
    name = rng.choice(["quantize_config.json", "quantize_config.json", "quant_config.json"])
    base = case.files.get(name)
    if not isinstance(base, bytes):
        cfg = _load(case.files["config.json"]) if isinstance(case.files.get("config.json"), bytes) else {}
        base = dumps(rng, cfg.get("quantization_config", {}) if isinstance(cfg, dict) else {})
    keys = SPQR_KEYS if "spqr" in case.seed_name else GPTQ_KEYS
    case.files[name] = dumps(rng, _mutate_object(rng, _load(base), keys))


def random_pattern(rng: random.Random, depth: int = 0) -> str:
    """A regular expression from atoms real keys use plus the constructs that break engines."""
    atoms = [r"model", r"\.", r"layers", r"\d+", r".*", r".+", r"q_proj", r"mlp", r"[a-z_.0-9]", r"\w+", "a",
             r"(?i)", r"\b", r"$", r"^", r"[^.]*", "0|1|2", r"(?P<n>x)"]
    parts = []
    for _ in range(rng.randint(1, 5)):
        roll = rng.random()
        if roll < 0.15 and depth < 4:
            inner = random_pattern(rng, depth + 1)
            parts.append(f"({inner})" + rng.choice(["+", "*", "", "?", "{2,}", "+$"]))
        elif roll < 0.2:
            parts.append(rng.choice(["(", ")", "[", "[z-a]", "*", r"\1", "(?<=a+)", "(?P<n>", "{", "a{4294967296}",
                                     "a{1000000}", r"(?<!b)", r"\p{L}", "(?#c)", "(?x) a b"]))
        else:
            atom = rng.choice(atoms)
            parts.append(atom + rng.choice(["", "", "", "+", "*", "?", "{0,5}", "{70000}"]))
    return "".join(parts)


def _module_names(case: FuzzCase) -> list[str]:
    for name, data in case.files.items():
        if name.endswith(".safetensors") and isinstance(data, bytes):
            try:
                tensors = seed_tensors(case.seed_name, name)
            except Exception:  # noqa: BLE001 -- a shard the seed does not have: no names to borrow
                continue
            return sorted({t.rsplit(".", 1)[0] for t in tensors})
    return ["model.layers.0.self_attn.q_proj"]


def m_dynamic(rng: random.Random, case: FuzzCase) -> None:
    cfg = _load(case.files["config.json"]) if isinstance(case.files.get("config.json"), bytes) else {}
    if not isinstance(cfg, dict):
        cfg = {}
    qc = cfg.get("quantization_config")
    qc = dict(qc) if isinstance(qc, dict) else {"quant_method": "gptq", "bits": 4, "group_size": 32}
    modules = _module_names(case)
    rules: dict[str, Any] = {}
    count = rng.choice([1, 1, 2, 3, 8, 50, 500, 5000])
    drawn: list[str] = []
    for i in range(count):
        if len(drawn) == 50:    # past 50 drawn rules, variants of them: distinct keys (each compiled and
            key = rng.choice(drawn)                 # matched on its own) without drawing 5000 patterns (a
            rules[f"{key}(?#{i})"] = rules[key]     # third of all case generation)
            continue
        roll = rng.random()
        if roll < 0.3:
            key = rng.choice(["+:", "-:", ""]) + rng.choice(modules).replace(".", r"\.")
        elif roll < 0.45:
            key = rng.choice(["-:", "+:"]) + rng.choice([r"^(([a-z_.0-9])+)+", r"(.*a){12}", r"(\w+\.?)+", r"(a|a)+"]) \
                + rng.choice(["X$", "$", "!"])
        else:
            key = rng.choice(["+:", "-:", "", "?:", ":"]) + random_pattern(rng)
        value = {k: rng.choice([2, 3, 4, 8, 32, 64, 128, -1, True, None, "4", 5])
                 for k in rng.sample(["bits", "group_size", "sym", "desc_act"], rng.randint(0, 4))}
        rules[key] = value if rng.random() < 0.9 else wild_value(rng)
        drawn.append(key)
    if rng.random() < 0.05:
        rules = wild_value(rng)
    qc["dynamic"] = rules
    cfg["quantization_config"] = qc
    case.files["config.json"] = dumps(rng, cfg)
    if rng.random() < 0.5:      # long module names give a catastrophic pattern something to chew on
        _rename_modules(rng, case, "model.layers.0." + "a" * rng.choice([20, 40, 100, 1000]) + ".q_proj")


def _index_of(case: FuzzCase) -> tuple[str, dict]:
    name = next((n for n in case.files if n.endswith(".safetensors.index.json")), "model.safetensors.index.json")
    data = _load(case.files[name]) if isinstance(case.files.get(name), bytes) else {}
    return name, data if isinstance(data, dict) else {}


BAD_SHARDS = ["../model.safetensors", "/etc/hostname", "/dev/zero", "model.safetensors.index.json", "config.json",
              "missing.safetensors", "", ".", "..", "sub/model.safetensors", "a\\b.safetensors", "x\u0000.safetensors",
              "\ud800.safetensors", "y" * 300 + ".safetensors", "model-00001-of-00002.safetensors"]


def m_index(rng: random.Random, case: FuzzCase) -> None:
    name, index = _index_of(case)
    weight_map = index.get("weight_map") if isinstance(index.get("weight_map"), dict) else {}
    weight_map = dict(weight_map)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.35 and weight_map:
            weight_map[rng.choice(list(weight_map))] = rng.choice(BAD_SHARDS) if rng.random() < 0.8 else wild_value(rng)
        elif roll < 0.5 and weight_map:
            weight_map.pop(rng.choice(list(weight_map)))
        elif roll < 0.6:
            weight_map[rng.choice(["model.layers.9.mlp.up_proj.qweight", "ghost", "", "\u0000"])] = rng.choice(BAD_SHARDS)
        elif roll < 0.7:
            index["metadata"] = {"total_size": wild_value(rng)} if rng.random() < 0.7 else wild_value(rng)
        elif roll < 0.8:
            index[rng.choice(["weight_map", "metadata", "extra"])] = wild_value(rng)
        elif roll < 0.9:
            case.files[rng.choice(["other.safetensors.index.json", "model.safetensors.index.json"])] = dumps(
                rng, {"weight_map": {k: rng.choice(BAD_SHARDS) for k in list(weight_map)[:3]}})
        else:
            weight_map = {k: name for k in weight_map}           # every tensor in the index itself
    if "weight_map" not in index or isinstance(index["weight_map"], dict):
        index["weight_map"] = weight_map
    case.files[name] = dumps(rng, index)


def m_json_bytes(rng: random.Random, case: FuzzCase) -> None:
    names = [n for n, d in case.files.items() if n.endswith(".json") and isinstance(d, bytes)] or ["config.json"]
    name = rng.choice(names)
    raw = bytearray(case.files.get(name, b"{}") if isinstance(case.files.get(name), bytes) else b"{}")
    roll = rng.random()
    if roll < 0.25 and raw:
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
    elif roll < 0.4:
        raw = raw[: rng.randrange(len(raw) + 1)]
    elif roll < 0.55:
        depth = rng.choice([100, 1000, 10_000, 200_000])
        raw = bytearray(b"[" * depth + b"]" * depth if rng.random() < 0.5 else b'{"a":' * depth + b"1" + b"}" * depth)
    elif roll < 0.65:
        pos = rng.randrange(len(raw) + 1)
        raw[pos:pos] = rng.choice([b"1" * 5000, b"1e999999", b"-1e-999999", b"NaN", b"Infinity", b"\xef\xbb\xbf",
                                   b"\xff\xfe", b'"\\ud800"', b"\x00", b'"' + b"\\u0000" * 1000 + b'"'])
    elif roll < 0.8:                                  # a duplicated key, which json.loads keeps silently
        text = bytes(raw).strip()
        if text.startswith(b"{") and len(text) > 2:
            raw = bytearray(b'{"quantization_config": {"bits": 3}, "bits": 9, ' + text[1:])
    else:
        raw = bytearray(rng.choice([b"", b" ", b"null", b"[]", b"0", b'"x"', b"{}", b"\xef\xbb\xbf{}"]))
    case.files[name] = bytes(raw)


def _tensor_shards(case: FuzzCase) -> list[str]:
    return [n for n, d in case.files.items() if n.endswith(".safetensors") and isinstance(d, bytes)]


def _rename_modules(rng: random.Random, case: FuzzCase, new: str) -> None:
    shards = _tensor_shards(case)
    if not shards:
        return
    shard = rng.choice(shards)
    try:
        tensors = dict(seed_tensors(case.seed_name, shard))
    except Exception:  # noqa: BLE001 -- already mutated: leave it
        return
    module = rng.choice(sorted({t.rsplit(".", 1)[0] for t in tensors}))
    renamed = {(new + t[len(module):] if t.startswith(module + ".") else t): a for t, a in tensors.items()}
    case.files[shard] = st_save(renamed, metadata={"format": "pt"})


DTYPES = [np.int32, np.int64, np.uint8, np.int8, np.int16, np.uint32, np.float16, np.float32, np.float64, np.bool_]


def _wild_array(rng: random.Random, arr: np.ndarray) -> np.ndarray:
    roll = rng.random()
    nprng = np.random.default_rng(rng.randrange(2**32))
    if roll < 0.25:
        return arr.astype(rng.choice(DTYPES))
    if roll < 0.45:
        shape = list(arr.shape) or [1]
        axis = rng.randrange(len(shape))
        shape[axis] = rng.choice([0, 1, max(0, shape[axis] - 1), shape[axis] + 1, shape[axis] * 2])
        if rng.random() < 0.3:
            shape = shape[::-1] if rng.random() < 0.5 else shape + [1]
        return np.resize(arr, shape) if 0 not in shape else np.zeros(shape, arr.dtype)
    out = arr.copy()
    flat = out.reshape(-1)
    if flat.size == 0:
        return out
    picks = nprng.integers(0, flat.size, rng.choice([1, 3, flat.size]))
    if out.dtype.kind == "f":
        flat[picks] = nprng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, 1e-8], out.dtype), picks.size)
    elif out.dtype.kind in "iu":
        info = np.iinfo(out.dtype)
        flat[picks] = nprng.choice(np.array([info.min, info.max, 0, -1 if info.min < 0 else 1, 7, 15], out.dtype),
                                   picks.size)
    return out


def m_tensors(rng: random.Random, case: FuzzCase) -> None:
    shards = _tensor_shards(case)
    if not shards:
        return
    shard = rng.choice(shards)
    try:
        tensors = dict(st_load(case.files[shard]))
    except Exception:  # noqa: BLE001 -- a shard already damaged as bytes: nothing to do here
        return
    if not tensors:
        return
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(sorted(tensors))
        roll = rng.random()
        if roll < 0.6:
            tensors[name] = _wild_array(rng, tensors[name])
        elif roll < 0.7:
            tensors.pop(name)
        elif roll < 0.85:
            module, _, suffix = name.rpartition(".")
            other = rng.choice(["qweight", "qzeros", "scales", "g_idx", "bias", "weight", "B", "SCB", "absmax",
                                "dense_weights", "row_offsets", "col_vals", "in_perm", "quant_map", "xyz"])
            tensors[f"{module}.{other}"] = tensors.pop(name)
        else:
            tensors["model.layers.7.self_attn.o_proj." + rng.choice(["qweight", "scales", "g_idx"])] = tensors[name]
        if not tensors:
            break
    meta = {"format": "pt"} if rng.random() < 0.9 else {rng.choice(STRINGS): rng.choice(STRINGS)}
    case.files[shard] = st_save(tensors, metadata=meta)


def _flip_bytes(rng: random.Random, blob: bytes, window: int) -> bytes:
    raw = bytearray(blob)
    for _ in range(rng.randint(1, 6)):
        pos = rng.randrange(min(len(raw), window))
        if rng.random() < 0.2 and pos + 8 <= len(raw):
            raw[pos:pos + 8] = struct.pack("<Q", rng.choice([0, 1, 2**31, 2**32, 2**63, 2**64 - 1, len(raw) + 1]))
        else:
            raw[pos] = rng.randrange(256)
    if rng.random() < 0.15:
        raw = raw[: rng.randrange(len(raw) + 1)]
    return bytes(raw)


def m_shard_bytes(rng: random.Random, case: FuzzCase) -> None:
    shards = _tensor_shards(case)
    if shards:
        shard = rng.choice(shards)
        blob = case.files[shard]
        header = 8 + int.from_bytes(blob[:8], "little") if len(blob) >= 8 else len(blob)
        case.files[shard] = _flip_bytes(rng, blob, min(header + 64, len(blob)) or 1)


def m_gguf(rng: random.Random, case: FuzzCase) -> None:
    for name, data in case.files.items():
        if name.endswith(".gguf") and isinstance(data, bytes):
            case.files[name] = _flip_bytes(rng, data, len(data) if rng.random() < 0.3 else 2048)


SPECIALS = [Special("fifo"), Special("dir"), Special("symlink", "/dev/zero"), Special("symlink", "/dev/null"),
            Special("symlink", "/dev/urandom"), Special("symlink", "missing-target"), Special("symlink", "loop"),
            Special("symlink", "/proc/self/mem"), Special("symlink", "..")]


def m_special(rng: random.Random, case: FuzzCase) -> None:
    name = rng.choice(list(case.files) + ["config.json", "quantize_config.json", "x.safetensors",
                                          "model.safetensors.index.json"])
    case.files[name] = rng.choice(SPECIALS)
    if rng.random() < 0.2:
        case.entry = name


MUTATORS: dict[str, tuple[float, Callable[[random.Random, FuzzCase], None]]] = {
    "config": (0.20, m_config),
    "quant_config": (0.12, m_quant_config),
    "dynamic": (0.05, m_dynamic),
    "index": (0.13, m_index),
    "json_bytes": (0.10, m_json_bytes),
    "tensors": (0.20, m_tensors),
    "shard_bytes": (0.08, m_shard_bytes),
    "gguf": (0.07, m_gguf),
    "special": (0.05, m_special),
}


def _entry(rng: random.Random, case: FuzzCase) -> str:
    roll = rng.random()
    names = list(case.files)
    if roll < 0.75 or not names:
        return ""
    if roll < 0.95:
        weights = [n for n in names if n.endswith((".safetensors", ".gguf", ".index.json"))]
        return rng.choice(weights or names)
    return rng.choice(names + ["does-not-exist"])


@lru_cache(maxsize=None)
def _gguf_names(seed_name: str) -> list[str]:
    """Tensor names of a GGUF seed (decode --tensor, read_layer), read once per process."""
    from qformats.containers.gguf import read_gguf_bytes

    return [t.name for t in read_gguf_bytes(next(iter(seeds()[seed_name].values()))).tensors]


def _names(rng: random.Random, case: FuzzCase, is_gguf: bool) -> list[str]:
    """What decode --tensor / read_layer get: real module or tensor names mostly, then the odd ones."""
    real = _gguf_names(case.seed_name) if is_gguf else _module_names(case)
    picks = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        roll = rng.random()
        if roll < 0.75:
            picks.append(rng.choice(real))
        elif roll < 0.85:
            picks.append(rng.choice(real) + rng.choice([".qweight", ".scales", ".weight", "."]))
        else:
            picks.append(rng.choice(["", "x", "\u00e9", "../etc/passwd", "model.layers", "a" * 3000, "\u0000"]))
    return picks


READER_NAMES = ["autogptq_cuda_old", "autogptq_cuda", "autogptq_cuda_kernel", "exllama", "vllm_gptq_gemm",
                "gptqmodel", "gptqmodel_legacy_int3", "marlin"]


def _invocation(rng: random.Random, case: FuzzCase, command: str, is_gguf: bool):
    import commands

    inv = commands.Invocation(command=command, deep=case.deep, fmt=case.fmt,
                              json=command in ("validate", "conformance") and rng.random() < 0.5,
                              output=rng.choice(commands.OUTPUTS))
    if command in ("decode", "read_layer"):
        inv.names = _names(rng, case, is_gguf)
    if command == "validate" and rng.random() < 0.15:
        inv.jobs = rng.choice([2, 3])
    if command in ("decode", "convert"):
        if rng.random() < 0.15:
            inv.options += ["--source-version", rng.choice(["v1", "v2"])]
        if rng.random() < 0.25:
            inv.options += ["--reader", rng.choice(READER_NAMES)]
    if command == "decode" and rng.random() < 0.05:
        inv.options.append("--permuted")
    if command == "convert" and rng.random() < 0.4:
        inv.options.append(rng.choice(["--to-v1", "--to-awq", "--to-ct"]))    # else gptq_v2 (TO_OPTIONS)
    return inv


def make_case(seed: int, index: int, commands: tuple[str, ...] = ("validate",)) -> FuzzCase:
    """The case ``index`` of the run ``seed``: a seed checkpoint and 1-3 mutators, deterministically.

    One case in eight starts from a GGUF seed (byte damage and special entries apply to it); the
    others start from a safetensors checkpoint, with the mutators weighted as in :data:`MUTATORS`.
    """
    rng = random.Random(seed * 1_000_003 + index)
    ggufs = sorted(n for n in seeds() if n.endswith(".gguf"))
    names = sorted(n for n in seeds() if n not in ggufs)
    seed_name = rng.choice(ggufs) if rng.random() < 0.125 else rng.choice(names)
    is_gguf = seed_name in ggufs
    case = FuzzCase(index=index, seed_name=seed_name, files=dict(seeds()[seed_name]))
    kinds = [k for k in MUTATORS if (k in ("gguf", "special")) == is_gguf or k == "special"]
    weights = [MUTATORS[k][0] for k in kinds]
    for kind in rng.choices(kinds, weights, k=rng.choice([1, 1, 1, 2, 3])):
        try:
            with np.errstate(all="ignore"):
                MUTATORS[kind][1](rng, case)
        except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError):
            kind += "(not applicable)"   # e.g. the safetensors library refuses to write a surrogate name
        case.mutations.append(kind)
    case.entry = case.entry or _entry(rng, case)
    case.deep = rng.random() < 0.25
    case.fmt = rng.choice(["auto"] * 8 + ["gptq", "spqr", "q4_k"])
    # Drawn apart from the case's own draws, and not by index modulo: fuzz workers take every jobs-th
    # index, so a modulo would give each worker only some of the commands.
    case.command = random.Random(f"{seed}:{index}:command").choice(commands)
    case.invocation = _invocation(rng, case, case.command, is_gguf)
    return case
