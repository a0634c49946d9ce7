"""Remote validate against downloading: bytes fetched and wall time on a synthetic sharded checkpoint served on
127.0.0.1 by the hub stand-in of tests/remote (spec/remote.md).

    python benchmarks/remote.py [--layers 8] [--sample 2] [--keep DIR]

Generates (never commits) the Llama-7B-shaped 4-bit GPTQ checkpoint of benchmarks/validate.py (``--layers``
decoder layers, 4 per shard, a transformers index), serves it as ``hf://bench/llama`` through the stand-in
(Range / 206 / Content-Range, huggingface_hub's listing route), and measures, each once:

* ``validate hf://bench/llama``: headers only (configs, the index, every shard's header);
* ``validate hf://bench/llama --deep --sample N``: the same plus N quantized modules' tensors;
* the download: every file of the repository fetched whole over the same server (what a validator that needs
  the files on disk must move first), then ``validate --deep --sample N`` of the downloaded copy.

Loopback moves bytes far faster than any network, so the bytes are the figure that carries over: the script
also prints the time each would take at 100 MB/s and the same ratios for a 700 GB checkpoint of 163 shards.
No figure here is asserted by a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from tests.remote.hubstub import Hub  # noqa: E402
from validate import make_checkpoint  # noqa: E402  (benchmarks/validate.py)

from qformats.validate import validate  # noqa: E402

LINK_BYTES_PER_S = 100e6        # a good link to the hub, for the projection
BIG_BYTES, BIG_SHARDS = 700e9, 163


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _download(hub: Hub, repo: str, out: Path) -> int:
    out.mkdir()
    total = 0
    for name in hub.repos[repo]:
        with urllib.request.urlopen(hub.url(repo, name)) as resp, open(out / name, "wb") as fh:
            while chunk := resp.read(1 << 22):
                fh.write(chunk)
                total += len(chunk)
    return total


def _line(label: str, fetched: int, requests: int | str, seconds: float, whole: int) -> str:
    at_link = fetched / LINK_BYTES_PER_S
    return (f"{label:34s} {fetched:>15,d} B {fetched / whole:9.5%} {requests!s:>6} req  {seconds:7.2f} s loopback  "
            f"{at_link:8.2f} s at 100 MB/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--sample", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="write the checkpoint here and keep it")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="qformats-remote-"))
    ckpt = args.keep or work / "ckpt"
    try:
        if not (ckpt / "model.safetensors.index.json").exists():
            ckpt.mkdir(parents=True, exist_ok=True)
            _, made = _timed(lambda: make_checkpoint(ckpt, args.layers))
            print(f"generated {args.layers} layers in {made:.1f} s")
        whole = sum(p.stat().st_size for p in ckpt.iterdir())
        shards = sum(p.name.endswith(".safetensors") for p in ckpt.iterdir())
        hub = Hub().start()
        os.environ["HF_ENDPOINT"] = hub.endpoint
        os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
        repo = hub.add_paths("bench/llama", ckpt)
        print(f"checkpoint: {whole:,d} bytes in {shards} shards, {args.layers} layers x 7 modules")
        head, t_head = _timed(lambda: validate(f"hf://{repo}"))
        r = head.summary["remote"]
        print(_line("remote, headers only", r["bytes_fetched"], r["requests"], t_head, whole))
        deep, t_deep = _timed(lambda: validate(f"hf://{repo}", deep=True, sample=args.sample))
        r2 = deep.summary["remote"]
        print(_line(f"remote, --deep --sample {args.sample}", r2["bytes_fetched"], r2["requests"], t_deep, whole))
        got, t_down = _timed(lambda: _download(hub, repo, work / "download"))
        local, t_val = _timed(lambda: validate(str(work / "download"), deep=True, sample=args.sample, jobs=1))
        print(_line("download all", got, len(hub.repos[repo]), t_down, whole))
        print(f"{'  then local --deep --sample ' + str(args.sample):34s} {t_val:57.2f} s")
        assert [f.code for f in local.findings] == [f.code for f in deep.findings]   # the same report either way
        per_shard = r["bytes_fetched"] / shards
        print(f"projection to {BIG_BYTES / 1e9:.0f} GB in {BIG_SHARDS} shards: headers only ~{per_shard * BIG_SHARDS / 1e6:.1f} MB "
              f"(~{per_shard * BIG_SHARDS / LINK_BYTES_PER_S:.1f} s at 100 MB/s, plus {BIG_SHARDS * 2 + 2} requests' "
              f"latency), download {BIG_BYTES / LINK_BYTES_PER_S / 3600:.1f} h at 100 MB/s")
        hub.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
