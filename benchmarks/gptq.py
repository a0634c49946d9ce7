"""GPTQ codec throughput against a named peer, in one run.

    python benchmarks/gptq.py [--k 4096] [--n 11008] [--repeat 3]

Decode and encode (pack) throughput in weights/s of the qformats NumPy reference for a
4096 x 11008 layer at 2, 3, 4 and 8 bits, v1 and v2, next to the same decode done the
straightforward way with torch on CPU (unpack by shifts, gather scales and zeros by g_idx) --
the peer. Ratios > 1 mean qformats is faster. Every decode is checked bit-identical to the peer.
Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from qformats.formats import gptq


def best_of(repeat: int, fn):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def torch_peer_decode(torch, qweight, qzeros, scales, g_idx, bits, version):
    """What a torch user writes: shift-and-mask unpack, +1 for v1, gather by g_idx."""
    qw = torch.from_numpy(qweight)
    qz = torch.from_numpy(qzeros)
    mask = (1 << bits) - 1
    if bits == 3:  # straddling fields: go through the 96-bit word group as three int64 pieces
        def unpack3(words, axis):
            w = words.to(torch.int64) & 0xFFFFFFFF
            w = w.movedim(axis, 0)
            w = w.reshape(w.shape[0] // 3, 3, *w.shape[1:])
            stream = [w[:, 0], w[:, 1], w[:, 2]]
            fields = []
            for k in range(32):
                word, shift = divmod(3 * k, 32)
                f = stream[word] >> shift
                if shift + 3 > 32:
                    f = f | (stream[word + 1] << (32 - shift))
                fields.append(f & 7)
            out = torch.stack(fields, 1).reshape(-1, *w.shape[2:])
            return out.movedim(0, axis)
        q = unpack3(qw, 0)
        z = unpack3(qz, 1)
    else:
        per = 32 // bits
        shifts = torch.arange(0, 32, bits, dtype=torch.int32)
        q = ((qw.unsqueeze(1) >> shifts.view(1, per, 1)) & mask).reshape(-1, qw.shape[1])
        z = ((qz.unsqueeze(2) >> shifts.view(1, 1, per)) & mask).reshape(qz.shape[0], -1)
    if version == "v1":
        z = z + 1
    g = torch.from_numpy(g_idx.astype(np.int64))
    s = torch.from_numpy(scales).float()
    w = s[g] * (q.float() - z[g].float())
    return w.T.numpy()  # (out, in) view, as qformats returns it: neither side pays a transpose copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--n", type=int, default=11008)
    parser.add_argument("--group-size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is needed for the peer: pip install torch==2.13.0 (CPU build)", file=sys.stderr)
        return 2
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    k, n, gs = args.k, args.n, args.group_size
    weights = k * n
    rng = np.random.default_rng(0)
    print(f"GPTQ {k}x{n} (in x out), group_size {gs}, {weights / 1e6:.1f}M weights; best of {args.repeat}; "
          f"torch {torch.__version__} with {torch.get_num_threads()} threads as the peer")
    print(f"{'bits':>4} {'ver':>3} {'decode qformats':>16} {'decode torch':>13} {'ratio':>6} {'encode qformats':>16}")
    for bits in (2, 3, 4, 8):
        groups = k // gs
        codes = rng.integers(0, 1 << bits, (k, n)).astype(np.uint8)
        zeros = rng.integers(1, 1 << bits, (groups, n))
        scales = rng.uniform(1e-3, 1e-2, (groups, n)).astype(np.float16)
        for version in ("v1", "v2"):
            t_enc, layer = best_of(args.repeat, lambda: gptq.pack(codes, zeros, scales, bits=bits, version=version))
            t_dec, ours = best_of(args.repeat, lambda: gptq.dequantize(layer, bits=bits, version=version))
            peer_inputs = [np.array(t) for t in (layer.qweight, layer.qzeros, layer.scales, layer.g_idx)]
            t_peer, theirs = best_of(args.repeat, lambda: torch_peer_decode(torch, *peer_inputs, bits, version))
            if not np.array_equal(ours, theirs):
                print(f"MISMATCH at {bits}-bit {version}: the peer decodes differently", file=sys.stderr)
                return 1
            print(f"{bits:>4} {version:>3} {weights / t_dec / 1e6:>11.1f} M/s {weights / t_peer / 1e6:>8.1f} M/s "
                  f"{t_peer / t_dec:>6.2f} {weights / t_enc / 1e6:>11.1f} M/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
