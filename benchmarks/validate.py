"""`qformats validate`, plain and --deep, on a synthetic 7B-shaped 4-bit GPTQ checkpoint, against a named peer.

    python benchmarks/validate.py [--layers 32] [--jobs N] [--zeros sym|asym] [--keep DIR]

Generates (never commits) a Llama-7B-shaped checkpoint: 32 decoder layers of q/k/v/o 4096x4096
and gate/up 11008x4096, down 4096x11008, 4-bit symmetric v1, group size 128, sharded by layer
groups with a transformers index. Prints, in one run:

* the peer: the time to merely read every tensor with the safetensors library (safe_open +
  get_tensor, which copies each tensor out of the file into a new bytearray; were a version to
  hand back a lazy view of the file instead, the script copies it so the bytes are really read);
* plain validation time (no ``--deep``) and its ratio to the peer (target <= 1.3, and never slower
  than ``--deep``); ``--zeros asym`` gives every layer random zero points, which sends the label
  evidence down its statistical path (GPTQ-8.2), the costly one;
* full ``--deep`` validation time and the ratio to the peer (target <= 1.5);
* peak RSS of each, measured in a fresh child process (target < 1 GB for validation); for
  validation, the largest of its processes (the parent and each ``--jobs`` worker), and their sum
  bound (parent + jobs x largest worker).

Both children run after one warm-up read, so the page cache serves both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

MODULES = {"self_attn.q_proj": (4096, 4096), "self_attn.k_proj": (4096, 4096), "self_attn.v_proj": (4096, 4096),
           "self_attn.o_proj": (4096, 4096), "mlp.gate_proj": (11008, 4096), "mlp.up_proj": (11008, 4096),
           "mlp.down_proj": (4096, 11008)}
BITS, GROUP = 4, 128
LAYERS_PER_SHARD = 4


def _zeros(rng: np.random.Generator, groups: int, n: int, asym: bool) -> np.ndarray:
    """v1 qzeros words: every field 7 (sym zero 8), or random fields 0..14 (zero points 1..15)."""
    if not asym:
        return np.full((groups, n * BITS // 32), 0x77777777, np.int32)
    fields = rng.integers(0, 15, (groups, n * BITS // 32, 32 // BITS), dtype=np.uint32)
    return (fields << (np.arange(32 // BITS, dtype=np.uint32) * BITS)).sum(axis=2, dtype=np.uint32).view(np.int32)


def make_checkpoint(root: Path, layers: int, asym: bool = False) -> int:
    """Write the synthetic checkpoint; returns the number of quantized weights."""
    rng = np.random.default_rng(0)
    weight_map, weights = {}, 0
    shards = range(0, layers, LAYERS_PER_SHARD)
    for s, first in enumerate(shards):
        file = f"model-{s + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for layer in range(first, min(first + LAYERS_PER_SHARD, layers)):
            for module, (n, k) in MODULES.items():
                name = f"model.layers.{layer}.{module}"
                groups = k // GROUP
                tensors[f"{name}.qweight"] = rng.integers(-2**31, 2**31, (k * BITS // 32, n), dtype=np.int64).astype(np.int32)
                tensors[f"{name}.qzeros"] = _zeros(rng, groups, n, asym)
                tensors[f"{name}.scales"] = rng.uniform(1e-3, 2e-2, (groups, n)).astype(np.float16)
                tensors[f"{name}.g_idx"] = (np.arange(k) // GROUP).astype(np.int32)
                weights += n * k
        save_file(tensors, str(root / file), metadata={"format": "pt"})
        weight_map.update({name: file for name in tensors})
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    config = {"model_type": "llama", "quantization_config": {"bits": BITS, "group_size": GROUP, "sym": not asym,
                                                            "desc_act": False, "quant_method": "gptq",
                                                            "checkpoint_format": "gptq"}}
    (root / "config.json").write_text(json.dumps(config))
    return weights


READ_ALL = """
import sys, glob
from safetensors import safe_open
def owner(a):
    while a.base is not None and not isinstance(a.base, memoryview):  # down to the buffer
        a = a.base
    return getattr(a.base, 'obj', None)
for f in sorted(glob.glob(sys.argv[1] + '/*.safetensors')):
    with safe_open(f, framework='numpy') as fh:
        for k in fh.keys():
            a = fh.get_tensor(k)
            if not isinstance(owner(a), (bytes, bytearray)):
                a.copy()  # a lazily mapped view reads nothing: make the bytes come in
print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))
"""
VALIDATE = """
import resource, sys
from qformats.validate import validate
r = validate(sys.argv[1], deep=sys.argv[3] == 'deep', jobs=None if sys.argv[2] == 'default' else int(sys.argv[2]))
assert r.verdict == 'valid', r.summary
own = int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB: the largest worker process
print(r.summary['layers'], workers, max(own, workers))
"""


def timed_child(code: str, *args: str) -> tuple[float, float, str]:
    """Run ``code`` in a fresh interpreter; (seconds, the child's own peak RSS in MiB, its other output).

    The child prints its VmHWM (KiB) last: unlike ``ru_maxrss``, it is not inherited across exec
    from this (data-generating) parent, so each figure belongs to the child alone.
    """
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True).stdout
    elapsed = time.perf_counter() - t0
    *rest, peak_kib = out.split()
    return elapsed, int(peak_kib) / 1024, " ".join(rest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--jobs", default="default", help="processes (default: validate's own, one per CPU)")
    parser.add_argument("--zeros", choices=("sym", "asym"), default="sym")
    parser.add_argument("--keep", type=Path, help="write the checkpoint here and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="qformats-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        weights = make_checkpoint(root, args.layers, asym=args.zeros == "asym")
        size = sum(p.stat().st_size for p in root.glob("*.safetensors"))
        print(f"synthetic checkpoint: {args.layers} layers, {weights / 1e9:.2f}B weights, {size / 2**30:.2f} GiB, "
              f"written in {time.perf_counter() - t0:.1f} s")
        timed_child(READ_ALL, str(root))  # warm the page cache for both measurements
        t_read, rss_read, _ = timed_child(READ_ALL, str(root))
        t_plain, rss_plain, _ = timed_child(VALIDATE, str(root), "1", "plain")
        t_val, rss_val, rest = timed_child(VALIDATE, str(root), str(args.jobs), "deep")
        layers, worker_kib = rest.split()
        jobs = len(os.sched_getaffinity(0)) if args.jobs == "default" else int(args.jobs)  # validate's default
        total = rss_val + jobs * int(worker_kib) / 1024
        print(f"peer  safetensors read of every tensor : {t_read:7.2f} s, peak RSS {rss_read:7.0f} MiB")
        print(f"qformats validate (plain, {args.zeros} zeros)    : {t_plain:7.2f} s, peak RSS {rss_plain:7.0f} MiB; "
              f"ratio to the read {t_plain / t_read:.2f} (target <= 1.3), to --deep {t_plain / t_val:.2f} (<= 1)")
        print(f"qformats validate --deep (jobs={args.jobs})   : {t_val:7.2f} s, peak RSS {rss_val:7.0f} MiB "
              f"in its largest process, <= {total:.0f} MiB in all ({layers} layers, "
              f"{weights / t_val / 1e6:.0f} M weights/s)")
        print(f"ratio validate / read = {t_val / t_read:.2f} (target <= 1.5); "
              f"validate peak RSS {rss_val:.0f} MiB per process, {total:.0f} MiB in all (target < 1024)")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
