"""bitsandbytes NF4 / FP4 / LLM.int8 reference codecs (spec/bnb.md), NumPy only.

    w = dequantize_4bit(packed, absmax, quant_type="nf4", blocksize=64, shape=(n, k), dtype="bfloat16")
    packed, absmax = quantize_4bit(x, quant_type="nf4", blocksize=64)          # byte-exact with bitsandbytes
    codes, nested_absmax, offset = quantize_absmax(absmax)                     # double quantization (BNB-4)
    w = dequantize_int8(weight, scb, dtype="float16")                          # LLM.int8 (BNB-6)

Every decode is float32 arithmetic, one rounding per operation in bitsandbytes' order, then one rounding
to the output dtype (BNB-3.2): bfloat16 results come back as float32 arrays holding bfloat16 values.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NF4", "FP4", "TABLES", "BLOCKSIZES", "NESTED_BLOCKSIZE", "DTYPES", "dynamic_map", "unpack_codes",
           "pack_codes", "scales", "dequantize_4bit", "quantize_4bit", "quantize_absmax", "dequantize_int8",
           "to_dtype", "INT8_RECIPROCAL"]

# BNB-2.1: NF4, 16 values in code order = value order (bitsandbytes functional.get_4bit_type("nf4"))
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)
# BNB-2.2: bitsandbytes' own FP4. Bit 3 is the sign; the low three bits 0..7 mean 0, 0.0625, 8, 12, 4, 6, 2, 3,
# normalised by 12 in float32. Code 8 (sign, zero) is -0.0 (bitsandbytes' C++ and CUDA kernels; BNB-2.3).
_FP4_MAGNITUDE = np.array([0, 0.0625, 8, 12, 4, 6, 2, 3], dtype=np.float32) / np.float32(12)
FP4 = np.concatenate([_FP4_MAGNITUDE, -_FP4_MAGNITUDE]).astype(np.float32)
TABLES = {"nf4": NF4, "fp4": FP4}
BLOCKSIZES = (32, 64, 128, 256, 512, 1024, 2048, 4096)     # BNB-3.3
NESTED_BLOCKSIZE = 256                                     # BNB-4.1
DTYPES = ("float16", "bfloat16", "float32")                # BNB-5.2: the quant_state "dtype" names
INT8_RECIPROCAL = np.float32(7.874015718698502e-3)         # BNB-6.2: 1/127 as bitsandbytes writes it


def dynamic_map() -> np.ndarray:
    """BNB-4.2: the signed 8-bit dynamic map (bitsandbytes create_dynamic_map(signed=True)): for each of 7
    decades 10^(i-6), the midpoints of linspace(0.1, 1, 2^i + 1) in float32, scaled by the decade, both signs;
    then 0 and 1; sorted: 2 * 127 + 2 = 256 float32 entries."""
    data: list[float] = []
    for i in range(7):
        bounds = _linspace(0.1, 1.0, (1 << i) + 1)
        means = (bounds[:-1] + bounds[1:]) / np.float32(2)
        scaled = means * np.float32(10.0 ** (i - 6))
        data += scaled.tolist() + (-scaled).tolist()
    data += [0.0, 1.0]
    return np.sort(np.array(data, dtype=np.float32))


def _linspace(start: float, end: float, steps: int) -> np.ndarray:
    """torch.linspace in float32 as its vectorised CPU kernel computes it: the first half ``start + step * i``, the
    second ``end - step * (steps - 1 - i)``, each a fused multiply-add (one rounding; exact here in float64)."""
    a, b = np.float32(start), np.float32(end)
    step = np.float64((b - a) / np.float32(steps - 1))
    i = np.arange(steps)
    low = (np.float64(a) + step * i).astype(np.float32)
    high = (np.float64(b) - step * (steps - 1 - i)).astype(np.float32)
    return np.where(i < steps // 2, low, high).astype(np.float32)


def unpack_codes(packed: np.ndarray, n: int) -> np.ndarray:
    """BNB-1.2: element 2i is the byte's high nibble, 2i+1 its low nibble; the first ``n`` codes."""
    b = np.ascontiguousarray(packed).view(np.uint8).reshape(-1)
    codes = np.empty(b.size * 2, dtype=np.uint8)
    codes[0::2], codes[1::2] = b >> 4, b & 0xF
    return codes[:n]


def pack_codes(codes: np.ndarray, pad: int = 0) -> np.ndarray:
    """BNB-1.2: codes (flattened) two to a byte, high nibble first, an odd count padded with ``pad``; (bytes, 1)."""
    c = np.asarray(codes, dtype=np.uint8).reshape(-1)
    if c.size % 2:
        c = np.concatenate([c, np.full(1, pad, np.uint8)])
    return ((c[0::2] << 4) | c[1::2]).reshape(-1, 1)


def scales(absmax: np.ndarray, nested_absmax: np.ndarray | None = None, nested_map: np.ndarray | None = None,
           offset: float | None = None) -> np.ndarray:
    """BNB-4.3: the float32 block scales. With double quantization ``map[code] * nested_absmax[j // 256]``
    rounded to float32, then ``+ float32(offset)`` rounded to float32, in that order."""
    if nested_absmax is None:
        return np.asarray(absmax, dtype=np.float32)
    table = dynamic_map() if nested_map is None else np.asarray(nested_map, dtype=np.float32)
    codes = np.asarray(absmax).astype(np.intp)
    nested = np.asarray(nested_absmax, dtype=np.float32)[np.arange(codes.size) // NESTED_BLOCKSIZE]
    return (table[codes] * nested) + np.float32(offset)


def to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """Float32 ``x`` rounded once (to nearest, ties to even) to ``dtype``; bfloat16 as float32 holding its values."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float32":
        return x
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    rounded = np.where(np.isnan(x), bits.astype(np.uint32) | 0x00400000, rounded)   # NaN stays NaN
    return (rounded & 0xFFFF0000).astype(np.uint32).view(np.float32)


def dequantize_4bit(packed: np.ndarray, absmax: np.ndarray, *, quant_type: str, blocksize: int,
                    shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """BNB-3.2: ``table[code] * absmax[i // blocksize]`` in float32 over the flattened tensor (the last block may
    be partial), rounded once to ``dtype``, reshaped to ``shape``. ``absmax``: float32 scales (see :func:`scales`)."""
    n = int(np.prod(shape))
    codes = unpack_codes(packed, n)
    block_scale = np.asarray(absmax, dtype=np.float32)[np.arange(n) // blocksize]
    return to_dtype(TABLES[quant_type][codes] * block_scale, dtype).reshape(shape)


def _bounds(quant_type: str) -> tuple[np.ndarray, np.ndarray]:
    """The table's values sorted, the float32 midpoints of neighbours, and the code of each sorted value."""
    table = TABLES[quant_type].copy()
    table[table == 0] = 0.0                       # bitsandbytes' table: both zeros are +0 (BNB-2.3)
    order = np.argsort(table, kind="stable")
    sorted_ = table[order]
    return (sorted_[:-1] + sorted_[1:]) / np.float32(2), order.astype(np.uint8)


def quantize_4bit(x: np.ndarray, *, quant_type: str, blocksize: int) -> tuple[np.ndarray, np.ndarray]:
    """BNB-3.1: bitsandbytes' quantize_4bit. Per block of the flattened float32 ``x``: absmax = max |x|, each
    value ``clamp(x * (1 / max(absmax, 1e-38)), -1, 1)`` (the partial last block divides instead), then the
    code of the first midpoint not below it (a value on a midpoint takes the lower code). Returns
    ``(packed (ceil(n/2), 1) uint8, absmax float32)``."""
    flat = np.asarray(x, dtype=np.float32).reshape(-1)
    n = flat.size
    full = n - n % blocksize
    blocks = flat[:full].reshape(-1, blocksize)
    absmax = np.abs(blocks).max(axis=1) if full else np.zeros(0, np.float32)
    tiny = np.float32(1e-38)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scaled = (blocks * (np.float32(1) / np.maximum(absmax, tiny))[:, None]).reshape(-1)
        if n % blocksize:
            last = np.maximum(np.abs(flat[full:]).max(), tiny)
            absmax = np.concatenate([absmax, [np.abs(flat[full:]).max()]]).astype(np.float32)
            scaled = np.concatenate([scaled, flat[full:] / last])
    scaled = np.clip(scaled, -1, 1).astype(np.float32)
    midpoints, order = _bounds(quant_type)
    codes = order[np.searchsorted(midpoints, scaled, side="left")]
    zero = order[np.searchsorted(midpoints, np.float32(0), side="left")]     # an odd n pads with 0's code
    return pack_codes(codes, zero), absmax.astype(np.float32)


def quantize_absmax(absmax: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """BNB-4.1: double quantization. ``offset = mean(absmax)`` (float32), then ``absmax - offset`` blockwise
    8-bit over 256 blocks against the dynamic map, nearest value (ties to the lower code). Returns
    ``(codes uint8, nested_absmax float32, offset)``."""
    a = np.asarray(absmax, dtype=np.float32)
    offset = np.float32(a.astype(np.float64).mean())
    centred = a - offset
    full = a.size - a.size % NESTED_BLOCKSIZE
    pieces = [centred[:full].reshape(-1, NESTED_BLOCKSIZE)] + ([centred[full:][None]] if a.size % NESTED_BLOCKSIZE
                                                                else [])
    table = dynamic_map()
    codes, nested = [], []
    for block in pieces:
        m = np.abs(block).max(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.clip(block * (np.float32(1) / m)[:, None], -1, 1).astype(np.float32)
        distance = np.abs(scaled.reshape(-1)[:, None] - table[None, :])
        codes.append(np.argmin(distance, axis=1).astype(np.uint8))
        nested.append(m.astype(np.float32))
    return np.concatenate(codes), np.concatenate(nested), float(offset)


def dequantize_int8(weight: np.ndarray, scb: np.ndarray, *, dtype: str) -> np.ndarray:
    """BNB-6.2: ``(weight * SCB[row]) * float32(7.874015718698502e-3)``, each product rounded to float32, then
    rounded once to ``dtype``."""
    w = np.asarray(weight).astype(np.float32)
    return to_dtype((w * np.asarray(scb, dtype=np.float32)[:, None]) * INT8_RECIPROCAL, dtype)
