"""compressed-tensors ``pack-quantized`` packing and decoding (spec/compressed_tensors.md CT-2 .. CT-3).

    layer = ctensors.pack(q, scales, num_bits=4, group_size=128)            # q: signed (out, in)
    layer = ctensors.pack(q, scales, num_bits=3, group_size=128, zero_points=zp)   # asymmetric
    w = ctensors.dequantize(layer, num_bits=4)                               # (out, in) float32

Codes and zero points are the signed values compressed-tensors quantizes to, in
``[-2^(b-1), 2^(b-1) - 1]``; on disk each is stored as ``value + 2^(b-1)`` (CT-2.3).

Two bit layouts (``layout=``): ``"dense"``, one bit stream per row (compressed-tensors 0.18 and later,
CT-2.3), and ``"word"``, ``32 // b`` whole values per word (compressed-tensors <= 0.17, CT-2.6). They
are the same bytes when ``b`` divides 32 (1, 2, 4, 8 bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import fail
from ...tensors import Layer, check_finite, check_tensor

__all__ = ["CTLayer", "pack", "unpack", "dequantize", "pack_dense", "unpack_dense", "pack_words", "unpack_words",
           "packed_words", "packer", "unpacker", "BITS", "LAYOUTS", "SCALE_DTYPES", "checked_tensors",
           "fitting_layouts"]

BITS = tuple(range(1, 9))
LAYOUTS = ("dense", "word")               # CT-2.3 (compressed-tensors >= 0.18), CT-2.6 (<= 0.17)
SCALE_DTYPES = ("float16", "float32")     # bfloat16 scales arrive widened (exactly) to float32


class CTLayer(Layer):
    """One pack-quantized layer: ``weight_packed``, ``weight_scale``, ``weight_shape``, optional
    ``weight_zero_point`` (asymmetric), ``weight_g_idx`` (act-order) and ``bias``."""

    @classmethod
    def _optional_tensors(cls) -> tuple[str, ...]:
        return ("weight_zero_point", "weight_g_idx", "bias")


def check_num_bits(num_bits: Any) -> int:
    if isinstance(num_bits, bool) or not isinstance(num_bits, (int, np.integer)) or int(num_bits) not in BITS:
        raise fail("bits.unsupported", "num_bits", "an integer in [1, 8] (CT-2.3)", num_bits)
    return int(num_bits)


def check_layout(layout: Any) -> str:
    if layout not in LAYOUTS:
        raise fail("argument.invalid", "layout", "'dense' (CT-2.3) or 'word' (CT-2.6)", layout)
    return layout


def packed_words(count: int, bits: int, layout: str = "dense") -> int:
    """The words of one packed row of ``count`` values: ceil(count b / 32) dense (CT-2.3),
    ceil(count / (32 // b)) in the per-word layout (CT-2.6)."""
    if layout == "word":
        return -(-count // (32 // bits))
    return -(-count * bits // 32)


def fitting_layouts(count: int, bits: int, words: int) -> list[str]:
    """The layouts whose row of ``count`` values is ``words`` words long; both when ``b`` divides 32."""
    return [layout for layout in LAYOUTS if packed_words(count, bits, layout) == words]


def pack_words(values: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned b-bit values (rows, count) -> int32 (rows, ceil(count / (32 // b))): word w holds values
    ``p w .. p w + p - 1`` (``p = 32 // b``), value ``p w + i`` at bits ``[b i, b i + b)``; the top
    ``32 - p b`` bits of every word are 0 (CT-2.6)::

        b = 3, p = 10:  word w = | 00 | v9 | v8 | ... | v1 | v0 |
                                  31 30 29 27          5 3 2   0
    """
    v = np.asarray(values, np.uint32)
    rows, count = v.shape
    per = 32 // bits
    words = packed_words(count, bits, "word")
    padded = np.zeros((rows, words * per), np.uint32)
    padded[:, :count] = v
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))
    packed = np.bitwise_or.reduce(padded.reshape(rows, words, per) << shifts, axis=2)
    return np.ascontiguousarray(packed).view(np.int32)


def unpack_words(words: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_words`: int32 (rows, ceil(count / (32 // b))) -> uint8 (rows, count)."""
    w = np.asarray(words).view(np.uint32)
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint32) * np.uint32(bits)
    fields = (w[:, :, None] >> shifts) & np.uint32((1 << bits) - 1)
    return fields.reshape(w.shape[0], -1)[:, :count].astype(np.uint8)


def packer(layout: str):
    """The packer of a layout (CT-2.3 dense, CT-2.6 per word)."""
    return pack_words if layout == "word" else pack_dense


def unpacker(layout: str):
    """The inverse of :func:`packer`."""
    return unpack_words if layout == "word" else unpack_dense


def _positions(bits: int) -> list[tuple[int, int]]:
    """(word, shift) of value j of a 32-value run: it starts at stream bit b*j."""
    return [((bits * j) // 32, (bits * j) % 32) for j in range(32)]


def pack_dense(values: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned b-bit values (rows, count) -> int32 (rows, ceil(count b / 32)): one little-endian bit
    stream per row, value j at stream bits [b j, b j + b); a value may straddle two words (CT-2.3)."""
    v = np.asarray(values, np.uint64)
    rows, count = v.shape
    runs = -(-count // 32)
    padded = np.zeros((rows, runs * 32), np.uint64)
    padded[:, :count] = v
    padded = padded.reshape(rows, runs, 32)
    words = np.zeros((rows, runs, bits + 1), np.uint64)        # one spare word takes the last spill
    for j, (word, shift) in enumerate(_positions(bits)):
        shifted = padded[:, :, j] << np.uint64(shift)
        words[:, :, word] |= shifted & np.uint64(0xFFFFFFFF)
        words[:, :, word + 1] |= shifted >> np.uint64(32)
    flat = words[:, :, :bits].reshape(rows, runs * bits).astype(np.uint32)
    return np.ascontiguousarray(flat[:, :packed_words(count, bits)]).view(np.int32)


def unpack_dense(words: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_dense`: int32 (rows, ceil(count b / 32)) -> uint8 (rows, count)."""
    runs = -(-count // 32)
    w = np.asarray(words)[:, :runs * bits].view(np.uint32).astype(np.uint64)   # words past the values: unread
    rows, n_words = w.shape
    padded = np.zeros((rows, runs * bits + 1), np.uint64)
    padded[:, :n_words] = w
    out = np.empty((rows, runs, 32), np.uint8)
    mask = np.uint64((1 << bits) - 1)
    for j, (word, shift) in enumerate(_positions(bits)):
        lo = padded[:, word:runs * bits:bits]
        hi = padded[:, word + 1:runs * bits + 1:bits]
        out[:, :, j] = (((hi << np.uint64(32)) | lo) >> np.uint64(shift)) & mask
    return out.reshape(rows, runs * 32)[:, :count]


def _signed(name: str, value: Any, bits: int, shape: tuple[int, int] | None) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 2 or (shape is not None and tuple(arr.shape) != shape):
        raise fail("tensor.shape", name, f"of shape {shape}" if shape else "2-D", tuple(arr.shape))
    if not np.issubdtype(arr.dtype, np.integer):
        raise fail("tensor.dtype", name, "an integer array", arr.dtype.name)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    bad = (arr < low) | (arr > high)
    if bad.any():
        idx = [int(i) for i in np.argwhere(bad)[0]]
        raise fail("ctensors.value.range", name, f"in [{low}, {high}] for {bits} bits (CT-2.3)",
                   f"{arr[tuple(idx)]} at {idx}")
    return arr.astype(np.int64)


def _groups_of(in_features: int, group_size: int | None) -> int:
    """Scale columns: 1 for the channel strategy (group_size None or -1), K / group_size for group (CT-2.2)."""
    if group_size in (None, -1):
        return 1
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size <= 0:
        raise fail("argument.invalid", "group_size", "None or -1 (channel) or > 0 (group)", group_size)
    if in_features % group_size:
        raise fail("ctensors.group.shape", "group_size", f"a divisor of in_features {in_features} (CT-2.2)",
                   group_size)
    return in_features // group_size


def pack(codes: Any, scales: Any, *, num_bits: int, group_size: int | None = None, zero_points: Any = None,
         g_idx: Any = None, bias: Any = None, layout: str = "dense") -> CTLayer:
    """Pack signed codes ``(out, in)`` with scales ``(out, G)`` (and signed zero points ``(out, G)`` for an
    asymmetric layer) as compressed-tensors writes them (CT-2); ``layout="word"`` as <= 0.17 did (CT-2.6)."""
    bits = check_num_bits(num_bits)
    pack_rows = packer(check_layout(layout))
    q = _signed("codes", codes, bits, None)
    n, k = q.shape
    g = _groups_of(k, group_size)
    s = check_tensor("scales", scales, SCALE_DTYPES, (n, g))
    check_finite("scales", s, code="ctensors.scales.nonfinite")
    offset = 1 << (bits - 1)
    tensors = {"weight_packed": pack_rows(q + offset, bits), "weight_scale": s,
               "weight_shape": np.array([n, k], np.int64)}
    if zero_points is not None:
        z = _signed("zero_points", zero_points, bits, (n, g))
        tensors["weight_zero_point"] = np.ascontiguousarray(pack_rows((z + offset).T, bits).T)
    if g_idx is not None:
        tensors["weight_g_idx"] = check_tensor("g_idx", g_idx, ("int32", "int64"), (k,))
    if bias is not None:
        tensors["bias"] = np.asarray(bias)
    return CTLayer(tensors, num_bits=bits, group_size=group_size)


def _get(layer: Any, name: str) -> Any:
    return layer.get(name) if isinstance(layer, dict) else getattr(layer, name, None)


def checked_tensors(layer: Any, num_bits: int, *, group_size: int | None = None,
                    layout: str = "dense") -> dict[str, Any]:
    """Tensors of one layer after the CT-2.1/2.2 dtype and shape checks and finite scales (CT-3.3).

    Returns the arrays plus ``out``, ``in``, ``groups`` and ``group_size`` (-1 for the channel strategy).
    ``group_size`` (the config's; -1 for channel), when given, must divide ``in`` and fix the scale columns;
    without it the columns alone imply the groups. ``layout`` fixes the packed widths (CT-2.3, CT-2.6).
    """
    bits = check_num_bits(num_bits)
    layout = check_layout(layout)
    for name in ("weight_packed", "weight_scale", "weight_shape"):
        if _get(layer, name) is None:
            raise fail("tensor.missing", name, "present (CT-2.1)", "absent")
    shape = check_tensor("weight_shape", _get(layer, "weight_shape"), ("int64", "int32"), (2,))
    n, k = (int(v) for v in shape)
    if n <= 0 or k <= 0:
        raise fail("tensor.shape", "weight_shape", "two positive sizes [out, in]", [n, k])
    packed = check_tensor("weight_packed", _get(layer, "weight_packed"), "int32", (n, packed_words(k, bits, layout)))
    scale = check_tensor("weight_scale", _get(layer, "weight_scale"), SCALE_DTYPES,
                         None if group_size is None else (n, _groups_of(k, group_size)))
    if scale.ndim != 2 or scale.shape[0] != n or scale.shape[1] <= 0 or k % scale.shape[1]:
        raise fail("tensor.shape", "weight_scale", f"of shape ({n}, G) with G dividing in_features {k} (CT-2.2)",
                   tuple(scale.shape))
    check_finite("weight_scale", scale, code="ctensors.scales.nonfinite")
    g = scale.shape[1]
    out = {"weight_packed": packed, "weight_scale": scale, "out": n, "in": k, "groups": g,
           "group_size": -1 if g == 1 else k // g}
    zp = _get(layer, "weight_zero_point")
    if zp is not None:
        out["weight_zero_point"] = check_tensor("weight_zero_point", zp, "int32", (packed_words(n, bits, layout), g))
    g_idx = _get(layer, "weight_g_idx")
    if g_idx is not None:
        gi = check_tensor("weight_g_idx", g_idx, ("int32", "int64"), (k,))
        if gi.size and (gi.min() < 0 or gi.max() >= g):
            bad = int(np.argmax((gi < 0) | (gi >= g)))
            raise fail("ctensors.g_idx.range", "weight_g_idx", f"in [0, {g}) (CT-2.4)", f"{int(gi[bad])} at [{bad}]")
        out["weight_g_idx"] = gi
    return out


def dirty_padding_rows(packed: np.ndarray, bits: int, count: int, layout: str = "dense") -> int:
    """How many rows of a packed stream have a bit set outside their ``count`` values (CT-2.3, CT-2.6: writers
    write zeros; readers ignore them). Dense: the bits after the last value, in the last word. Per word: the
    top ``32 - p b`` bits of every word and the unused fields of the last. ``packed`` as checked_tensors
    returns it (the layout's exact width)."""
    rows = np.ascontiguousarray(packed).view(np.uint32)
    if layout == "dense":
        spare = rows.shape[1] * 32 - count * bits
        return int(np.count_nonzero(rows[:, -1] >> np.uint32(32 - spare))) if spare > 0 else 0
    per = 32 // bits
    dirty = np.zeros(rows.shape[0], bool)
    if per * bits < 32:                                  # a shift by 32 is not defined for uint32
        dirty |= (rows >> np.uint32(per * bits)).any(axis=1)
    in_last = count - (rows.shape[1] - 1) * per
    if 0 < in_last < per:
        dirty |= (rows[:, -1] >> np.uint32(in_last * bits)) != 0
    return int(np.count_nonzero(dirty))


def check_padding(t: dict[str, Any], num_bits: int, layout: str = "dense") -> None:
    """A writer's rows hold zero bits outside their values (CT-2.3, CT-2.6): ``weight_packed`` along the input
    axis, ``weight_zero_point`` along the output axis (CT-2.5). ``t`` as :func:`checked_tensors` returns it."""
    streams = [("weight_packed", t["weight_packed"], t["in"])]
    if "weight_zero_point" in t:
        streams.append(("weight_zero_point", t["weight_zero_point"].T, t["out"]))
    for name, packed, count in streams:
        dirty = dirty_padding_rows(packed, num_bits, count, layout)
        if dirty:
            where = "after the last value" if layout == "dense" else "outside the values"
            raise fail("ctensors.padding.nonzero", name, f"zero bits {where} of each packed row "
                       "(CT-2.3: a writer MUST write zeros)", f"{dirty} rows with bits set")


def unpack(layer: Any, *, num_bits: int, layout: str = "dense") -> tuple[np.ndarray, np.ndarray | None]:
    """Signed codes ``(out, in)`` and signed zero points ``(out, G)`` (None when symmetric), int8 (CT-2.3,
    CT-2.6 for ``layout="word"``)."""
    t = checked_tensors(layer, num_bits, layout=layout)
    unpack_rows = unpacker(layout)
    offset = 1 << (num_bits - 1)
    q = unpack_rows(t["weight_packed"], num_bits, t["in"]).astype(np.int16) - offset
    zp = t.get("weight_zero_point")
    z = None if zp is None else unpack_rows(zp.T, num_bits, t["out"]).T.astype(np.int16) - offset
    return q.astype(np.int8), None if z is None else np.ascontiguousarray(z.astype(np.int8))


def dequantize(layer: Any, *, num_bits: int, group_size: int | None = None, layout: str = "dense") -> np.ndarray:
    """The weight ``(out, in)`` as float32: ``s * (q - zp)`` (``zp`` = 0 when symmetric), exact for float16
    and bfloat16 scales and the correctly rounded float32 product for float32 scales (CT-3.1).
    ``group_size`` and ``layout`` as :func:`checked_tensors`."""
    t = checked_tensors(layer, num_bits, group_size=group_size, layout=layout)
    q, z = unpack(layer, num_bits=num_bits, layout=layout)
    k, g = t["in"], t["groups"]
    if "weight_g_idx" in t:
        cols = t["weight_g_idx"].astype(np.intp)
    else:
        cols = np.repeat(np.arange(g), k // g)
    diff = q.astype(np.float32)
    if z is not None:
        diff -= z.astype(np.float32)[:, cols]
    return np.ascontiguousarray(diff * t["weight_scale"].astype(np.float32)[:, cols])
