"""Throughput of `validate --deep` on synthetic shards: the process pool against a Dask LocalCluster of 1 and 2 workers.

    python benchmarks/cluster.py [--layers 16] [--size 2048] [--repeat 2] [--keep DIR]

Generates (never commits) a sharded 4-bit GPTQ checkpoint: ``--layers`` decoder layers of seven ``size x size``
modules (q/k/v/o, gate/up/down), symmetric v1 zeros, group size 128, two layers per shard, with a
transformers index. Then times ``validate(deep=True)`` (the same code path as ``qformats validate --deep
--scheduler ...``) with:

* ``--jobs 1`` (serial, in this process: the process pool's 1-worker figure), the reference report;
* the process pool (``--scheduler processes``) with 2 workers;
* a Dask ``LocalCluster`` (``--scheduler tcp://...`` to a cluster started here, processes=True,
  threads_per_worker=1) with 1 and 2 workers; the cluster's start is timed apart, not in the throughput.

Every report must equal the serial one (spec/audit.md AUDIT-1.3). Prints one table: seconds (best of
``--repeat``), MB/s of checkpoint bytes and the 2-worker / 1-worker scaling ratio per scheduler. Every process
runs NumPy on one thread (as Dask's workers do). The figures depend on the cores the machine gives; the script
prints ``os.sched_getaffinity`` beside them.
"""

from __future__ import annotations

import os

# One core per process everywhere, as Dask's nanny gives its workers (distributed.nanny.pre-spawn-environ):
# NumPy's BLAS would otherwise spread the serial run over every core and the comparison would mean nothing.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from safetensors.numpy import save_file

MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
BITS, GROUP, LAYERS_PER_SHARD = 4, 128, 2


def make_shards(root: Path, layers: int, size: int, seed: int = 0) -> int:
    """A sharded GPTQ v1 checkpoint of ``layers`` x 7 modules of ``size x size``; returns its bytes."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    groups, weight_map = size // GROUP, {}
    starts = range(0, layers, LAYERS_PER_SHARD)
    for s, first in enumerate(starts):
        file = f"model-{s + 1:05d}-of-{len(starts):05d}.safetensors"
        tensors = {}
        for layer in range(first, min(first + LAYERS_PER_SHARD, layers)):
            for module in MODULES:
                name = f"model.layers.{layer}.{module}"
                tensors[f"{name}.qweight"] = rng.integers(-2**31, 2**31, (size * BITS // 32, size), dtype=np.int64
                                                          ).astype(np.int32)
                tensors[f"{name}.qzeros"] = np.full((groups, size * BITS // 32), 0x77777777, np.int32)
                tensors[f"{name}.scales"] = rng.uniform(1e-3, 2e-2, (groups, size)).astype(np.float16)
                tensors[f"{name}.g_idx"] = (np.arange(size) // GROUP).astype(np.int32)
        save_file(tensors, str(root / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, file))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    config = {"model_type": "llama", "quantization_config": {"bits": BITS, "group_size": GROUP, "sym": True,
                                                            "desc_act": False, "quant_method": "gptq",
                                                            "checkpoint_format": "gptq"}}
    (root / "config.json").write_text(json.dumps(config))
    return sum(p.stat().st_size for p in root.iterdir())


def best_of(repeat: int, run) -> tuple[float, dict]:
    times, doc = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        doc = run()
        times.append(time.perf_counter() - began)
    return min(times), doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--size", type=int, default=2048, help="each module is size x size (a multiple of 128)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", metavar="DIR", help="write the checkpoint here and keep it")
    args = ap.parse_args(argv)
    import dask
    from distributed import Client, LocalCluster

    from qformats.executor import WORKER_ENVIRON     # the workers as --scheduler local starts them
    from qformats.validate import validate

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="qformats-cluster-"))
    try:
        size = make_shards(root / "ckpt", args.layers, args.size)
        path = str(root / "ckpt")
        print(f"checkpoint: {args.layers} layers x 7 modules {args.size}x{args.size}, 4-bit GPTQ, "
              f"{size / 1e6:.0f} MB in {-(-args.layers // LAYERS_PER_SHARD)} shards; cores {len(os.sched_getaffinity(0))}")
        serial_s, serial = best_of(args.repeat, lambda: validate(path, deep=True, jobs=1).model_dump())
        rows = [("processes", 1, serial_s, None)]          # --jobs 1 is the serial run, in this process
        s, doc = best_of(args.repeat, lambda: validate(path, deep=True, jobs=2, scheduler="processes").model_dump())
        assert doc == serial, "the process pool's report differs from --jobs 1's"
        rows.append(("processes", 2, s, None))
        for workers in (1, 2):
            began = time.perf_counter()
            with dask.config.set(WORKER_ENVIRON), LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                              silence_logs=logging.ERROR) as cluster, Client(cluster):
                start_s = time.perf_counter() - began
                # jobs=2 takes the parallel path; the runs are sized by the cluster's workers
                s, doc = best_of(args.repeat, lambda: validate(path, deep=True, jobs=2,
                                                                  scheduler=cluster.scheduler_address).model_dump())
            assert doc == serial, "the Dask cluster's report differs from --jobs 1's"
            rows.append(("dask LocalCluster", workers, s, start_s))
        print(f"{'scheduler':20s} {'workers':>7s} {'seconds':>8s} {'MB/s':>7s} {'x1 worker':>9s} {'cluster start s':>15s}")
        one = {}
        for name, workers, s, start_s in rows:
            one.setdefault(name, s)
            ratio = f"{one[name] / s:9.2f}"
            start = f"{start_s:15.1f}" if start_s is not None else ""
            print(f"{name:20s} {workers:7d} {s:8.2f} {size / 1e6 / s:7.1f} {ratio} {start}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
