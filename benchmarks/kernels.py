"""Triton reference kernels on a GPU: differential check at realistic shapes, then throughput ratios.

    .venv/bin/python benchmarks/kernels.py [--shapes 4096x4096,4096x11008,11008x4096,14336x4096] [--no-check]

Prints, on one device in one run:
  - device-to-device copy bandwidth (torch clone of a 1 GiB buffer): the roofline every ratio uses;
  - dequantize: bytes moved (packed weights read + float16 W written) per second, as a fraction of the
    copy bandwidth (target >= 80 %);
  - fused matmul at batch 1 (GEMV): weight bytes read per second as a fraction of the copy bandwidth
    (target >= 75 % for 4-bit GPTQ and q4_K), and the time against torch's float16 F.linear on the
    dense weight (targets: >= 3.5x faster for 4-bit GPTQ and q4_K, >= 2.5x for SpQR);
  - the same at batch 16 against F.linear (target >= 2.5x for 4-bit);
  - a real peer side by side where it is installed: GPTQModel 7.7.0's TritonV2Linear (its Triton
    dequantize kernel, then torch's matmul) on the same 4-bit layer, checked and timed the same way
    (in the CPU smoke run its TorchLinear stands in, so the wiring is tested without a GPU).
Layers are prepared once (act-order reordered at load time, as an engine would) and only the
kernels are timed (triton.testing.do_bench, median). AWQ GEMM and compressed-tensors (the same asymmetric
4-bit layer) have no prepare step: each call runs the reference checks on a host copy of the tensors
(they are validating decoders), and that copy is in their figures. Before timing, every shape is checked against
the NumPy reference: dequantize bit-exact after float16 rounding, matmul within the QF-4.6 bound.
Without a CUDA device it says so and exits 0: the figures need a GPU.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


DEVICE = "cuda"


def _bench(fn) -> float:
    """Median seconds per call: triton.testing.do_bench on a GPU; one timed call in the CPU smoke run."""
    if DEVICE != "cuda":
        import time

        fn()
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") / 1e3


def copy_bandwidth() -> float:
    import torch

    buf = torch.empty(1 << 29 if DEVICE == "cuda" else 1 << 20, dtype=torch.float16, device=DEVICE)   # 1 GiB
    seconds = _bench(lambda: buf.clone())
    return 2 * buf.numel() * 2 / seconds                                      # read + write


def gptq_layer(out_f: int, in_f: int, bits: int = 4, group_size: int = 128):
    from qformats.formats import gptq

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((out_f, in_f)) * 0.02).astype(np.float32)
    layer = gptq.quantize(w, bits=bits, group_size=group_size, sym=True, version="v2")
    return {name: np.asarray(layer.tensors[name]) for name in ("qweight", "qzeros", "scales", "g_idx")}


def q4k_blocks(out_f: int, in_f: int):
    from qformats.formats import q4_k

    rng = np.random.default_rng(0)
    return q4_k.quantize((rng.standard_normal((out_f, in_f)) * 0.02).astype(np.float32))


def ggml_blocks(fmt: str, out_f: int, in_f: int):
    from qformats.formats import ggml

    rng = np.random.default_rng(0)
    return ggml.quantize(fmt, (rng.standard_normal((out_f, in_f)) * 0.02).astype(np.float32))


GGML_KERNELS = ("q8_0", "q6_k", "q5_k")     # reference_kernels modules named by their ggml type



def spqr_layer(out_f: int, in_f: int):
    from qformats.formats.spqr import cases

    return cases._layer(f"bench/{out_f}x{in_f}", 0.01, "csr", "act_order", m=out_f, n=in_f)


def awq_ct_layers(out_f: int, in_f: int) -> tuple[dict, dict]:
    """The same asymmetric 4-bit group-128 layer as AWQ GEMM and as compressed-tensors pack-quantized (lossless
    conversions of one GPTQ v2 layer, AWQ-4.2, CT-4.2)."""
    from qformats.formats import awq, ctensors, gptq

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((out_f, in_f)) * 0.02).astype(np.float32)
    layer = gptq.quantize(w, bits=4, group_size=128, sym=False, version="v2")
    a = awq.from_gptq(layer, bits=4, version="v2", group_size=128)
    c = ctensors.from_gptq(layer, bits=4, version="v2", group_size=128)
    return ({k: np.array(v) for k, v in a.tensors.items()}, {k: np.array(v) for k, v in c.tensors.items()})


def check(name: str, got, ref, x=None, y=None) -> str:
    from conformance import compare

    if x is None:   # AWQ and compressed-tensors dequantize return float32, the exact s * (q - z) (KC-1.8, KC-1.9)
        ok = compare.exact(got.cpu().numpy(), str(got.dtype).removeprefix("torch."), ref).ok
    else:
        ok = compare.within_bound(y.cpu().numpy(), "float16", x.cpu().numpy(), ref, w_rounding=name != "spqr").ok
    if not ok:
        raise SystemExit(f"{name}: the kernel disagrees with the reference at this shape")
    return "ok"


def run_shape(out_f: int, in_f: int, bandwidth: float, do_check: bool) -> None:
    import torch
    import torch.nn.functional as F

    from importlib import import_module

    from qformats.formats import awq, ctensors, ggml, gptq, q4_k, spqr
    from reference_kernels import gptq as kg
    from reference_kernels import q4_k as kq
    from reference_kernels import spqr as ks

    dev = DEVICE
    t = {k: torch.from_numpy(np.array(v)).to(dev) for k, v in gptq_layer(out_f, in_f).items()}
    prepared, _ = kg.prepare(t["qweight"], t["qzeros"], t["scales"], t["g_idx"], bits=4, group_size=128, version="v2")
    blocks = torch.from_numpy(q4k_blocks(out_f, in_f)).to(dev)
    sp = {k: torch.from_numpy(np.array(v)).to(dev) for k, v in spqr_layer(out_f, in_f).items()}
    dense = torch.randn(out_f, in_f, dtype=torch.float16, device=dev) * 0.02
    rows = {
        "gptq 4-bit": (lambda: kg.dequantize_prepared(prepared),
                       lambda x: kg.matmul_prepared(prepared, x),
                       sum(v.numel() * v.element_size() for k, v in t.items() if k != "g_idx")),
        "q4_k": (lambda: kq.dequantize(blocks=blocks, rows=out_f, n=in_f),
                 lambda x: kq.matmul(blocks=blocks, rows=out_f, n=in_f, x=x), blocks.numel()),
        "spqr": (lambda: ks.dequantize(**sp, m=out_f, n=in_f),
                 lambda x: ks.matmul(**sp, m=out_f, n=in_f, x=x), sum(v.numel() * v.element_size() for v in sp.values())),
    }
    from reference_kernels import awq as kawq
    from reference_kernels import ctensors as kct

    aw, ct = ({k: torch.from_numpy(v).to(dev) for k, v in d.items()} for d in awq_ct_layers(out_f, in_f))
    rows["awq 4-bit"] = (lambda: kawq.dequantize(**aw, group_size=128),
                         lambda x: kawq.matmul(**aw, group_size=128, x=x),
                         sum(v.numel() * v.element_size() for v in aw.values()))
    rows["ct int4"] = (lambda: kct.dequantize(**ct, num_bits=4, group_size=128),
                       lambda x: kct.matmul(**ct, num_bits=4, group_size=128, x=x),
                       sum(v.numel() * v.element_size() for k, v in ct.items() if k != "weight_shape"))
    gb = {f: torch.from_numpy(ggml_blocks(f, out_f, in_f)).to(dev) for f in GGML_KERNELS}
    for f, b in gb.items():
        k = import_module(f"reference_kernels.{f}")
        rows[f] = (lambda k=k, b=b: k.dequantize(blocks=b, rows=out_f, n=in_f),
                   lambda x, k=k, b=b: k.matmul(blocks=b, rows=out_f, n=in_f, x=x), b.numel())
    if do_check:
        refs = {"gptq 4-bit": gptq.dequantize({k: v.cpu().numpy() for k, v in t.items()}, bits=4, version="v2",
                                              group_size=128),
                "q4_k": q4_k.dequantize(blocks.cpu().numpy()),
                "spqr": spqr.dequantize({k: v.cpu().numpy() for k, v in sp.items()}),
                "awq 4-bit": awq.dequantize({k: v.cpu().numpy() for k, v in aw.items()}, group_size=128),
                "ct int4": ctensors.dequantize({k: v.cpu().numpy() for k, v in ct.items()}, num_bits=4,
                                               group_size=128),
                **{f: ggml.dequantize(f, b.cpu().numpy()) for f, b in gb.items()}}
    for name, (deq, mm, weight_bytes) in rows.items():
        x1 = torch.rand(1, in_f, dtype=torch.float16, device=dev) * 2 - 1
        x16 = torch.rand(16, in_f, dtype=torch.float16, device=dev) * 2 - 1
        status = ""
        if do_check:
            ref = np.ascontiguousarray(refs[name])
            status = check(name, deq(), ref) + "/" + check(name, None, ref, x1, mm(x1)) + "/" + \
                check(name, None, ref, x16, mm(x16))
        t_deq = _bench(deq)
        t_gemv, t_lin1 = _bench(lambda: mm(x1)), _bench(lambda: F.linear(x1, dense))
        t_b16, t_lin16 = _bench(lambda: mm(x16)), _bench(lambda: F.linear(x16, dense))
        deq_bw = (weight_bytes + out_f * in_f * 2) / t_deq
        print(f"{out_f:>6}x{in_f:<6} {name:11s} check {status or 'skipped':8s} "
              f"dequant {deq_bw / bandwidth:6.1%} of copy | GEMV {weight_bytes / t_gemv / bandwidth:6.1%} of copy, "
              f"{t_lin1 / t_gemv:5.2f}x F.linear | batch 16 {t_lin16 / t_b16:5.2f}x F.linear")
        if name == "gptq 4-bit":
            peer(t, refs[name] if do_check else None, x1, x16, t_lin1, t_lin16)


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


def peer(layer: dict, ref, x1, x16, t_lin1: float, t_lin16: float) -> None:
    """One line: the peer's check against the same QF-4.6 bound, and its speed against F.linear."""
    try:
        line = _peer_line(layer, ref, x1, x16, t_lin1, t_lin16)
    except Exception as exc:  # noqa: BLE001 - a missing or failing peer is reported, never fatal
        line = f"peer GPTQModel: not available here ({type(exc).__name__}: {str(exc)[:100]})"
    print(f"{'':14}{line}")


def _peer_line(layer: dict, ref, x1, x16, t_lin1: float, t_lin16: float) -> str:
    import torch

    from conformance import compare

    module = peer_module(layer)
    with torch.no_grad():
        y1, y16 = module(x1), module(x16)
        status = "skipped" if ref is None else "/".join(
            "ok" if compare.within_bound(y.float().cpu().numpy(), "float16", x.cpu().numpy(), ref,
                                         w_rounding=True).ok else "FAIL" for x, y in ((x1, y1), (x16, y16)))
        t1, t16 = _bench(lambda: module(x1)), _bench(lambda: module(x16))
    return (f"peer GPTQModel {type(module).__name__} check {status:8s} "
            f"GEMV {t_lin1 / t1:5.2f}x F.linear | batch 16 {t_lin16 / t16:5.2f}x F.linear")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4096x4096,4096x11008,11008x4096,14336x4096")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--cpu-smoke", action="store_true", help="run the whole script on the CPU in Triton's "
                    "interpreter (tiny shapes: proves the script, measures nothing)")
    args = ap.parse_args()
    global DEVICE
    if args.cpu_smoke:
        import reference_kernels  # noqa: F401 - selects the interpreter before triton is imported

        DEVICE = "cpu"
    try:
        import torch
    except ImportError:
        print("benchmarks/kernels.py: torch is not installed (make bench installs the kernels extra)")
        return 0
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("benchmarks/kernels.py: no CUDA device here; the kernel figures must be taken on a GPU "
              "(the interpreter-mode differential tests run in make test)")
        return 0
    bandwidth = copy_bandwidth()
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (interpreter smoke run, not figures)"
    print(f"device {name}: device-to-device copy {bandwidth / 1e9:.0f} GB/s")
    for shape in args.shapes.split(","):
        out_f, in_f = (int(v) for v in shape.split("x"))
        run_shape(out_f, in_f, bandwidth, not args.no_check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
