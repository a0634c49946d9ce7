"""Checkpoints whose shard names or ``dynamic`` regexes broke the validator once (fuzzing, issue 14).

Each case is a small directory: one 4-bit GPTQ layer (K = 32, N = 8, one group) written byte by byte
with :mod:`st_builder`'s safetensors helpers, and a config or index carrying the hostile input.
``CASES`` maps a name to (builder, the error finding ``validate`` must report, clause). ``python
tests/checkpoints/hostile_builder.py [ROOT]`` writes them under ``ROOT/regressions/fuzz`` and into
``ROOT/manifest.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import numpy as np

import st_builder as sb
from qformats.fixtures import generator_main, reference_case

FIXTURE_DIR = "regressions/fuzz"
GENERATOR = "tests/checkpoints/hostile_builder.py:fixture_files"
HOSTILE_NAME = "a" * 40 + "!"   # the name prefix the fuzzer chose for `(a+)+$`


def gptq_layer(module: str) -> bytes:
    """One 4-bit layer, K = 32, N = 8, group size 32: codes 8, v1 zero fields 7 (zero 8), scales 1.0."""
    qweight = np.full((4, 8), 0x88888888, dtype=np.uint32).view(np.int32)
    qzeros = np.full((1, 1), 0x77777777, dtype=np.uint32).view(np.int32)
    scales = np.ones((1, 8), dtype=np.float16)
    pairs, data = [], b""
    for suffix, dtype, array in (("qweight", "I32", qweight), ("qzeros", "I32", qzeros), ("scales", "F16", scales)):
        blob = array.astype(array.dtype.newbyteorder("<")).tobytes()
        pairs.append((f"{module}.{suffix}", {"dtype": dtype, "shape": list(array.shape),
                                              "data_offsets": [len(data), len(data) + len(blob)]}))
        data += blob
    return sb.st_bytes(sb.obj(pairs), data)


def with_dynamic(dynamic: dict, module: str = "model.layers.0.mlp.up_proj") -> dict[str, bytes]:
    config = {**sb.QCONFIG, "dynamic": dynamic}
    return {"model.safetensors": gptq_layer(module),
            "quantize_config.json": (json.dumps(config, indent=2) + "\n").encode()}


def with_shard_name(shard: str) -> dict[str, bytes]:
    return sb.sharded({"x.qweight": shard, "y.qweight": sb.S2})


Builder = Callable[[], dict[str, bytes]]
CASES: dict[str, tuple[Builder, str, str]] = {
    # CKPT-3.1: shard names are checked before any filesystem call
    "shard_name_nul": (lambda: with_shard_name(sb.S1 + "\0"), "ckpt.index.json", "CKPT-3.1"),
    "shard_name_lone_surrogate": (lambda: with_shard_name("model-\ud800.safetensors"), "ckpt.index.json",
                                  "CKPT-3.1"),
    "shard_name_too_long": (lambda: with_shard_name("x" * 300 + ".safetensors"), "ckpt.index.json",
                            "CKPT-3.1"),
    # GPTQ-6.6: patterns re cannot compile
    "dynamic_repeat_overflow": (lambda: with_dynamic({"a{4294967296}": {}}), "gptq.config.invalid",
                                "GPTQ-6.6"),
    "dynamic_nested_groups": (lambda: with_dynamic({"(" * 1500 + "a" + ")" * 1500: {}}), "gptq.config.invalid",
                              "GPTQ-6.6"),
    "dynamic_too_long": (lambda: with_dynamic({"(" * 3000 + "a" + ")" * 3000: {}}), "gptq.config.invalid",
                         "GPTQ-6.6"),
    # GPTQ-6.6: patterns re.match does not finish on the checkpoint's module names
    "dynamic_redos_chosen_name": (lambda: with_dynamic({"-:(a+)+$": {}}, module=HOSTILE_NAME),
                                  "gptq.config.dynamic_unsafe", "GPTQ-6.6"),
    "dynamic_redos_real_name": (lambda: with_dynamic({"-:^(([a-z_.0-9])+)+X$": {}}), "gptq.config.dynamic_unsafe",
                                "GPTQ-6.6"),
}


def fixture_files() -> dict[str, bytes]:
    """Every fixture file as ``{path relative to FIXTURE_DIR: bytes}`` (the manifest's generator)."""
    return {f"{name}/{fname}": blob for name, (fn, *_rest) in CASES.items() for fname, blob in sorted(fn().items())}


def manifest_entries() -> list[dict]:
    files = fixture_files()
    return [reference_case(f"regressions/{name}", "gptq" if code.startswith("gptq") else "safetensors",
                           "checkpoint", clauses=[clause], features=["hostile"],
                           files={f"{FIXTURE_DIR}/{p}": b for p, b in files.items() if p.startswith(name + "/")},
                           generator=GENERATOR, codes=[code], valid=False)
            for name, (_fn, code, clause) in CASES.items()]


def main(argv: list[str]) -> int:
    return generator_main(argv, FIXTURE_DIR, fixture_files(), manifest_entries())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
