"""Triton reference kernels on a GPU: differential check at realistic shapes, then throughput ratios.

    make gpu-bench OUT=DIR            # set-up from carried wheels, then this script: DIR/kernels.json, kernels.txt
    .venv/bin/python benchmarks/kernels.py [--shapes 4096x4096,11008x4096] [--out DIR] [--no-check] [--cpu-smoke]

Prints a table (and, with ``--out DIR``, writes it and a JSON of every figure there), on one device in one run:
  - device-to-device copy bandwidth (torch clone of a 1 GiB buffer): the roofline every ratio uses;
  - per format, the **prepared** path (``prepare`` once at load, then ``dequantize_prepared`` /
    ``matmul_prepared``: what a serving engine calls, KC-7) timed with triton.testing.do_bench (median):
    dequantize bytes moved (packed weights read + W written, at the output's real element size: float32
    for AWQ and compressed-tensors, float16 otherwise) per second as a fraction of the copy bandwidth;
    GEMV (batch 1) weight bytes read per second as a fraction of it and its time against torch's float16
    F.linear on a dense weight; batch 16 against F.linear;
  - separately, the **validating** call (``dequantize`` / ``matmul``: prepare + the prepared call, every
    content check on every call), median of a few synchronized calls (its checks can take seconds);
  - a real peer side by side where it is installed: GPTQModel 7.7.0's TritonV2Linear (its Triton
    dequantize kernel, then torch's matmul) on the same 4-bit layer, checked and timed the same way
    (in the CPU smoke run its TorchLinear stands in, where GPTQModel is installed).
Before timing, every shape is checked against the NumPy reference: dequantize bit-exact (float16 rounding
of the reference; AWQ and compressed-tensors the float32 values themselves), matmul within the QF-4.6
bound at batch 1 and 16, and the validating call's results equal to the prepared path's.
Without a CUDA device it says so and exits 0 (figures need a GPU); ``--cpu-smoke`` runs every code path in
Triton's interpreter on tiny shapes, to prove the script, not to measure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, wait
from pathlib import Path

import numpy as np

DEVICE = "cuda"
SMOKE_SHAPES = "32x256"
GPU_SHAPES = "4096x4096,11008x4096"


def _sync() -> None:
    if DEVICE == "cuda":
        import torch

        torch.cuda.synchronize()


def _bench(fn) -> float:
    """Median seconds per call: triton.testing.do_bench on a GPU; one timed call in the CPU smoke run."""
    if DEVICE != "cuda":
        fn()
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") / 1e3


def _bench_validating(fn, budget: float = 1.0) -> float:
    """Median seconds of a validating call: one warm-up, then synchronized calls until ``budget`` seconds
    or 5 calls (its host checks can take seconds, which do_bench's sizing runs would multiply)."""
    fn()
    _sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < (5 if DEVICE == "cuda" else 1) and (not times or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_bandwidth() -> float:
    import torch

    buf = torch.empty(1 << 29 if DEVICE == "cuda" else 1 << 20, dtype=torch.float16, device=DEVICE)   # 1 GiB
    seconds = _bench(lambda: buf.clone())
    return 2 * buf.numel() * 2 / seconds                                      # read + write


# -- layers (quantized once by the reference, from the same seed) ------------------------------------------

def _weights(out_f: int, in_f: int) -> np.ndarray:
    return (np.random.default_rng(0).standard_normal((out_f, in_f)) * 0.02).astype(np.float32)


def gptq_layer(out_f: int, in_f: int, bits: int = 4, group_size: int = 128):
    from qformats.formats import gptq

    layer = gptq.quantize(_weights(out_f, in_f), bits=bits, group_size=group_size, sym=True, version="v2")
    return {name: np.asarray(layer.tensors[name]) for name in ("qweight", "qzeros", "scales", "g_idx")}


def ggml_blocks(fmt: str, out_f: int, in_f: int):
    from qformats.formats import ggml, q4_k

    w = _weights(out_f, in_f)
    return q4_k.quantize(w) if fmt == "q4_k" else ggml.quantize(fmt, w)


GGML_KERNELS = ("q4_k", "q8_0", "q6_k", "q5_k")     # reference_kernels modules named by their ggml type


def spqr_layer(out_f: int, in_f: int):
    from qformats.formats.spqr import cases

    return cases._layer(f"bench/{out_f}x{in_f}", 0.01, "csr", "act_order", m=out_f, n=in_f)


def awq_ct_layers(out_f: int, in_f: int) -> tuple[dict, dict]:
    """The same asymmetric 4-bit group-128 layer as AWQ GEMM and as compressed-tensors pack-quantized (lossless
    conversions of one GPTQ v2 layer, AWQ-4.2, CT-4.2)."""
    from qformats.formats import awq, ctensors, gptq

    layer = gptq.quantize(_weights(out_f, in_f), bits=4, group_size=128, sym=False, version="v2")
    a = awq.from_gptq(layer, bits=4, version="v2", group_size=128)
    c = ctensors.from_gptq(layer, bits=4, version="v2", group_size=128)
    return ({k: np.array(v) for k, v in a.tensors.items()}, {k: np.array(v) for k, v in c.tensors.items()})


# Each format's row: (name, reference_kernels module, call parameters). AWQ and compressed-tensors hold the
# same asymmetric 4-bit layer; the rest are quantized by the reference from the same weights.
FORMATS = [("gptq 4-bit", "gptq", {"bits": 4, "group_size": 128}),
           *((f, f, {"rows": None, "n": None}) for f in GGML_KERNELS),
           ("spqr", "spqr", {"m": None, "n": None}),
           ("awq 4-bit", "awq", {"group_size": 128}),
           ("ct int4", "ctensors", {"num_bits": 4, "group_size": 128})]


def build(name: str, out_f: int, in_f: int) -> tuple[dict, np.ndarray]:
    """The layer (NumPy arrays) of row ``name`` and its reference values: run in worker processes, since
    quantizing a realistic layer in NumPy takes seconds per format."""
    from qformats.formats import awq, ctensors, ggml, gptq, q4_k, spqr

    if name == "gptq 4-bit":
        g = gptq_layer(out_f, in_f)
        return g, gptq.dequantize(g, bits=4, version="v2", group_size=128)
    if name in GGML_KERNELS:
        b = ggml_blocks(name, out_f, in_f)
        return {"blocks": b}, q4_k.dequantize(b) if name == "q4_k" else ggml.dequantize(name, b)
    if name == "spqr":
        sp = {k: np.array(v) for k, v in spqr_layer(out_f, in_f).items()}
        return sp, spqr.dequantize(sp)
    aw, ct = awq_ct_layers(out_f, in_f)
    if name == "awq 4-bit":
        return aw, awq.dequantize(aw, group_size=128)
    return ct, ctensors.dequantize(ct, num_bits=4, group_size=128)


class Subject:
    """One format's layer on the device: its module, the layer keywords, the prepared layer, the reference."""

    def __init__(self, name: str, module: str, params: dict, layer: dict, reference: np.ndarray) -> None:
        import torch
        from importlib import import_module

        self.name, self.kernels, self.reference = name, import_module(f"reference_kernels.{module}"), reference
        self.gptq = module == "gptq"
        self.layer = {k: torch.from_numpy(np.array(v)).to(DEVICE) for k, v in layer.items()}
        self.params = params
        self.prepared = self.kernels.prepare(**self.layer, **params, **({"version": "v2"} if self.gptq else {}))
        self.weight_bytes = sum(v.numel() * v.element_size() for k, v in self.layer.items()
                                if k not in ("g_idx", "weight_shape"))

    def validating_dequantize(self):
        fn = self.kernels.dequantize_v2 if self.gptq else self.kernels.dequantize
        return fn(**self.layer, **self.params)

    def validating_matmul(self, x):
        fn = self.kernels.matmul_v2 if self.gptq else self.kernels.matmul
        return fn(**self.layer, **self.params, x=x)


def layer_futures(pool, shapes: list[tuple[int, int]]) -> dict:
    """Every (shape, row) layer submitted at once: later shapes build while earlier ones are timed."""
    return {(shape, name): pool.submit(build, name, *shape) for shape in shapes for name, _, _ in FORMATS}


def subjects(futures: dict, out_f: int, in_f: int):
    for name, module, params in FORMATS:
        dims = {"rows": out_f, "m": out_f, "n": in_f}
        params = {k: dims[k] if v is None else v for k, v in params.items()}
        yield Subject(name, module, params, *futures.pop(((out_f, in_f), name)).result())


# -- checks --------------------------------------------------------------------------------------------

def check(s: Subject, ref: np.ndarray, x1, x16) -> tuple[str, int]:
    """The prepared path against the reference, then the validating call against the prepared path; returns
    the status and the dequantize output's element size. Exits on any disagreement (no figures then)."""
    import torch

    from conformance import compare

    k = s.kernels
    w = k.dequantize_prepared(s.prepared)
    dtype = str(w.dtype).removeprefix("torch.")
    ok = [compare.exact(w.cpu().numpy(), dtype, ref).ok]
    ys = [k.matmul_prepared(s.prepared, x) for x in (x1, x16)]
    ok += [compare.within_bound(y.cpu().numpy(), "float16", x.cpu().numpy(), ref, w_rounding=s.name != "spqr").ok
           for x, y in zip((x1, x16), ys)]
    if not all(ok):
        raise SystemExit(f"{s.name}: the prepared kernel disagrees with the reference at this shape: {ok}")
    same = torch.equal(s.validating_dequantize(), w) and torch.equal(s.validating_matmul(x1), ys[0])
    if not same:
        raise SystemExit(f"{s.name}: the validating call and the prepared path disagree at this shape")
    return "ok/ok/ok", w.element_size()


# -- one shape ------------------------------------------------------------------------------------------

def run_shape(futures: dict, out_f: int, in_f: int, bandwidth: float, do_check: bool) -> list[dict]:
    import torch
    import torch.nn.functional as F

    dense = torch.randn(out_f, in_f, dtype=torch.float16, device=DEVICE) * 0.02
    x1 = torch.rand(1, in_f, dtype=torch.float16, device=DEVICE) * 2 - 1
    x16 = torch.rand(16, in_f, dtype=torch.float16, device=DEVICE) * 2 - 1
    t_lin1, t_lin16 = _bench(lambda: F.linear(x1, dense)), _bench(lambda: F.linear(x16, dense))
    rows = []
    for s in subjects(futures, out_f, in_f):
        k, p = s.kernels, s.prepared
        ref = np.ascontiguousarray(s.reference) if do_check else None
        status, elem = check(s, ref, x1, x16) if do_check else ("skipped", k.dequantize_prepared(p).element_size())
        t = {"dequantize": _bench(lambda: k.dequantize_prepared(p)),
             "gemv": _bench(lambda: k.matmul_prepared(p, x1)),
             "batch16": _bench(lambda: k.matmul_prepared(p, x16))}
        v = {"dequantize": _bench_validating(s.validating_dequantize),
             "gemv": _bench_validating(lambda: s.validating_matmul(x1))}
        row = {"shape": [out_f, in_f], "format": s.name, "check": status, "weight_bytes": s.weight_bytes,
               "output_element_bytes": elem, "prepared_s": t, "validating_s": v,
               "f_linear_s": {"gemv": t_lin1, "batch16": t_lin16},
               "dequantize_of_copy": (s.weight_bytes + out_f * in_f * elem) / t["dequantize"] / bandwidth,
               "gemv_of_copy": s.weight_bytes / t["gemv"] / bandwidth,
               "gemv_vs_f_linear": t_lin1 / t["gemv"], "batch16_vs_f_linear": t_lin16 / t["batch16"]}
        rows.append(row)
        print(_line(row), flush=True)
        planes = getattr(p, "planes", None)
        if planes is not None:                   # KC-7.4: the shared int4 planes and the plans prepare chose
            row["plans"] = {"gemv": repr(planes.gemv), "batch16": repr(planes.batch)}
        if s.name == "gptq 4-bit":
            g = {n: v.cpu().numpy() for n, v in s.layer.items()}
            rows.append(peer(g, ref, x1, x16, t_lin1, t_lin16))
            rows.append(tinygemm_peer(s.layer, ref, x1, x16, t_lin1, t_lin16))
            if SWEEP and (out_f, in_f) == SWEEP_SHAPE:
                rows.append(sweep(planes, out_f, in_f))
    return rows


# -- the int4 plans, all timed (--sweep) -------------------------------------------------------------------

SWEEP = False
SWEEP_SHAPE = (0, 0)                   # the run's last shape: one sweep per run keeps it short
WIDE_GEMV = tuple((bn, 128, ps, w, st) for bn in (16, 32, 64) for ps in (2, 4, 8) for w, st in ((2, 3), (4, 3), (4, 4))) \
    + ((128, 128, 2, 8, 3), (128, 128, 4, 8, 3), (32, 64, 4, 4, 3), (64, 64, 4, 4, 3)) \
    + tuple((bn, bk, ps, w, 3, True) for bn in (32, 64, 128) for bk in (64, 128) for ps in (4, 8) for w in (4, 8))
WIDE_BATCH = tuple((bn, bk, ps, 4, 3) for bn in (32, 64, 128) for bk in (64, 128) for ps in (1, 2, 4, 8)) \
    + ((128, 64, 2, 8, 3), (128, 64, 4, 8, 3))


def sweep(planes, out_f: int, in_f: int) -> dict:
    """Every candidate plan of the shared int4 kernels timed at this shape (the prepared choice restored)."""
    from reference_kernels import _int4

    chosen = (planes.gemv, planes.batch)
    print(f"{'':14}sweep of the int4 plans at {out_f}x{in_f}:", flush=True)
    timed = {"gemv": _int4.tune(planes, 1, WIDE_GEMV, verbose=True),
             "batch16": _int4.tune(planes, 16, WIDE_BATCH, verbose=True)}
    planes.gemv, planes.batch = chosen
    return {"shape": [out_f, in_f], "format": "sweep int4 plans",
            "timed": {k: [[t, repr(plan)] for t, plan in v] for k, v in timed.items()}}


# -- a second peer: torch's tinygemm int4 kernel (what torchao's int4 weight-only runs on CUDA) -------------

def tinygemm_peer(layer: dict, ref, x1, x16, t_lin1: float, t_lin16: float) -> dict:
    """torch.ops.aten._weight_int4pack_mm on the same symmetric 4-bit group-128 layer: tinygemm reads
    ``(q - 8) * scale + zero`` with bfloat16 scales and x, so its check is the relative error against the
    float64 reference (bfloat16 operands: 1e-3 to 1e-2 expected), not QF-4.6."""
    return _peer("peer tinygemm", "torch tinygemm", _tinygemm_row, layer, ref, x1, x16, t_lin1, t_lin16)


def _tinygemm_row(layer: dict, ref, x1, x16, t_lin1: float, t_lin16: float) -> dict:
    import torch

    from reference_kernels import _int4
    from reference_kernels.gptq import _zero_fields

    codes = _int4.unpack_along_k(layer["qweight"], 4).t().contiguous().to(torch.int32)   # (N, K) in [0, 15]
    # The H200 run of 2026-11-28 refused a transposed (non-contiguous) uint8 operand: "in.is_contiguous()".
    pairs = (codes[:, ::2] << 4 | codes[:, 1::2]).to(torch.uint8).contiguous()
    packed = torch.ops.aten._convert_weight_to_int4pack(pairs, 8)
    s = layer["scales"].float()                                                    # (G, N)
    z = _zero_fields(layer["qzeros"], 4, s.shape[1]).float()
    sz = torch.stack([s, s * (8 - z)], dim=-1).to(torch.bfloat16).contiguous()       # w = (q - 8) s + s (8 - z)
    group = layer["g_idx"].shape[0] // s.shape[0]

    def run(x):
        return torch.ops.aten._weight_int4pack_mm(x.to(torch.bfloat16), packed, group, sz)

    errors = []
    if ref is not None:
        for x in (x1, x16):
            want = x.double().cpu().numpy() @ ref.astype(np.float64).T
            got = run(x).double().cpu().numpy()
            errors.append(float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    status = "skipped" if ref is None else "/".join("ok" if e < 1e-2 else "FAIL" for e in errors)
    t1, t16 = _bench(lambda: run(x1)), _bench(lambda: run(x16))
    return {"module": "aten._weight_int4pack_mm", "check": status, "relative_error": max(errors, default=0.0),
            "gemv_s": t1, "batch16_s": t16, "gemv_vs_f_linear": t_lin1 / t1, "batch16_vs_f_linear": t_lin16 / t16}


def _line(r: dict) -> str:
    out_f, in_f = r["shape"]
    v = r["validating_s"]
    return (f"{out_f:>6}x{in_f:<6} {r['format']:11s} check {r['check']:8s} "
            f"dequant {r['dequantize_of_copy']:6.1%} of copy (fp{8 * r['output_element_bytes']} out) | "
            f"GEMV {r['gemv_of_copy']:6.1%} of copy, {r['gemv_vs_f_linear']:5.2f}x F.linear | "
            f"batch 16 {r['batch16_vs_f_linear']:5.2f}x F.linear | "
            f"validating: dequant {v['dequantize'] * 1e6:9.1f} us, "
            f"GEMV {v['gemv'] * 1e6:9.1f} us")


# -- the real peer --------------------------------------------------------------------------------------

def peer_module(layer: dict, bits: int = 4, group_size: int = 128):
    """GPTQModel's layer holding ``layer`` (v2 tensors on DEVICE), loaded as its loader does: buffers,
    ``post_init()``, eval. TritonV2Linear on a GPU; TorchLinear (its CPU path) in the smoke run."""
    import torch
    from gptqmodel.utils.backend import BACKEND

    if DEVICE == "cuda":
        from gptqmodel.nn_modules.qlinear.tritonv2 import TritonV2Linear as cls
        backend = BACKEND.GPTQ_TRITON
    else:
        from gptqmodel.nn_modules.qlinear.torch import TorchLinear as cls
        backend = BACKEND.GPTQ_TORCH
    k, n = layer["g_idx"].shape[0], layer["scales"].shape[1]
    module = cls(bits=bits, group_size=group_size, sym=True, desc_act=False, in_features=k, out_features=n,
                 bias=False, pack_dtype=torch.int32, backend=backend, register_buffers=True)
    for name, value in layer.items():
        getattr(module, name).data = torch.as_tensor(value).to(DEVICE).clone()
    module = module.to(DEVICE)
    module.post_init()
    return module.eval()


def peer(layer: dict, ref, x1, x16, t_lin1: float, t_lin16: float) -> dict:
    """One row: the peer's check against the same QF-4.6 bound, and its speed against F.linear."""
    return _peer("peer GPTQModel", "GPTQModel", _peer_row, layer, ref, x1, x16, t_lin1, t_lin16)


def _peer(fmt: str, name: str, measure, layer: dict, *args) -> dict:
    """A peer's row from ``measure(layer, ref, x1, x16, t_lin1, t_lin16)``, printed; a missing or failing peer
    is reported in the row, never fatal."""
    row = {"shape": [int(layer["scales"].shape[1]), int(layer["g_idx"].shape[0])], "format": fmt}
    try:
        row |= measure(layer, *args)
        error = f" (relative error {row['relative_error']:.2g})" if "relative_error" in row else ""
        line = (f"peer {name} {row['module']} check {row['check']:8s} GEMV {row['gemv_vs_f_linear']:5.2f}x "
                f"F.linear | batch 16 {row['batch16_vs_f_linear']:5.2f}x F.linear{error}")
    except Exception as exc:  # noqa: BLE001 - a missing or failing peer is reported, never fatal
        row["unavailable"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        line = f"peer {name}: not available here ({row['unavailable']})"
    print(f"{'':14}{line}", flush=True)
    return row


def _peer_row(layer: dict, ref, x1, x16, t_lin1: float, t_lin16: float) -> dict:
    import torch

    from conformance import compare

    module = peer_module(layer)
    with torch.no_grad():
        y1, y16 = module(x1), module(x16)
        status = "skipped" if ref is None else "/".join(
            "ok" if compare.within_bound(y.float().cpu().numpy(), "float16", x.cpu().numpy(), ref,
                                         w_rounding=True).ok else "FAIL" for x, y in ((x1, y1), (x16, y16)))
        t1, t16 = _bench(lambda: module(x1)), _bench(lambda: module(x16))
    return {"module": type(module).__name__, "check": status, "gemv_s": t1, "batch16_s": t16,
            "gemv_vs_f_linear": t_lin1 / t1, "batch16_vs_f_linear": t_lin16 / t16}


# -- main -----------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=None,
                    help=f"OUTxIN,... (default {GPU_SHAPES}; {SMOKE_SHAPES} with --cpu-smoke)")
    ap.add_argument("--out", type=Path, default=None, help="write kernels.json and kernels.txt into this folder")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="also time every candidate plan of the shared int4 "
                    "kernels (KC-7.4) at each shape")
    ap.add_argument("--cpu-smoke", action="store_true", help="run the whole script on the CPU in Triton's "
                    "interpreter (tiny shapes: proves the script, measures nothing)")
    args = ap.parse_args()
    global DEVICE, SWEEP
    SWEEP = args.sweep
    if args.cpu_smoke:
        import reference_kernels  # noqa: F401 - selects the interpreter before triton is imported

        DEVICE = "cpu"
    try:
        import torch
        import triton
    except ImportError:
        print("benchmarks/kernels.py: torch and triton are not installed (make bench installs the kernels extra)")
        return 0
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("benchmarks/kernels.py: no CUDA device here; the kernel figures must be taken on a GPU "
              "(the interpreter-mode differential tests run in make test)")
        return 0
    started = time.perf_counter()
    bandwidth = copy_bandwidth()
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (interpreter smoke run, not figures)"
    head = (f"device {name}: device-to-device copy {bandwidth / 1e9:.0f} GB/s; torch {torch.__version__}, "
            f"triton {triton.__version__}")
    print(head, flush=True)
    rows = []
    shapes = [tuple(int(v) for v in shape.split("x"))
              for shape in (args.shapes or (SMOKE_SHAPES if args.cpu_smoke else GPU_SHAPES)).split(",")]
    workers = 1 if args.cpu_smoke else min(len(FORMATS), os.cpu_count() or 1)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = layer_futures(pool, shapes)
        # Every layer built before anything is timed: on the first GPU run (2026-11-28) the first format of
        # each shape was timed while the pool still quantized the others on every core, and its Python launch
        # overhead, not the GPU, set its figure (GPTQ's GEMV 67.9 us on the same planes and plan that took
        # 24.5 us in the sweep a minute later).
        wait(list(futures.values()))
        global SWEEP_SHAPE
        SWEEP_SHAPE = shapes[-1]
        for out_f, in_f in shapes:
            rows += run_shape(futures, out_f, in_f, bandwidth, not args.no_check)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        report = {"device": name, "smoke": args.cpu_smoke, "torch": torch.__version__, "triton": triton.__version__,
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "copy_bandwidth_bytes_per_s": bandwidth, "seconds": time.perf_counter() - started, "rows": rows}
        (args.out / "kernels.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out / "kernels.txt").write_text("\n".join([head] + [_line(r) if "check" in r and "prepared_s" in r
                                                                   else json.dumps(r) for r in rows]) + "\n")
        print(f"wrote {args.out / 'kernels.json'} and kernels.txt ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
