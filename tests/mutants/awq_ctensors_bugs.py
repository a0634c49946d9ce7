"""Deliberately wrong AWQ GEMM and compressed-tensors kernels and writers, each imitating a real bug class
(tests/mutants/README.md; spec/awq.md AWQ-8.2, spec/compressed_tensors.md CT-8.2).

Each has the conformance call contract of its format (DESIGN.md §6) and must fail the case named in
``MUTANTS``.
"""

from __future__ import annotations

import numpy as np

from qformats.formats import awq, ctensors
from qformats.formats.awq.codec import pack_words, unpack_words
from qformats.formats.ctensors.codec import unpack_dense

SEQUENTIAL = (0, 1, 2, 3, 4, 5, 6, 7)


def _awq_decode(qweight, qzeros, scales, group_size, *, order=awq.layout.ORDER, zero_offset=0):
    codes, zeros = unpack_words(qweight, order=order), unpack_words(qzeros, order=order)
    k = codes.shape[0]
    rows = k if group_size == -1 else group_size
    s = np.asarray(scales, np.float32)
    q = codes.reshape(k // rows, rows, -1).astype(np.float32) - (zeros.astype(np.float32) + zero_offset)[:, None, :]
    return np.ascontiguousarray((q * s[:, None, :]).reshape(k, -1).T)


def awq_order_sequential(*, qweight, qzeros, scales, group_size):
    """Fields read in column order, not AWQ's 0 2 4 6 1 3 5 7 (the GEMM-vs-GEMV/packing-order bug class,
    GPTQModel#1854, #2364)."""
    return _awq_decode(qweight, qzeros, scales, group_size, order=SEQUENTIAL)



def awq_fields_reversed(*, qweight, qzeros, scales, group_size):
    """Field i read where AWQ puts field 7 - i (the word's nibbles taken top first, shift 28 - 4i), in
    qweight and qzeros alike (AWQ-2.3)."""
    return _awq_decode(qweight, qzeros, scales, group_size, order=tuple(reversed(awq.layout.ORDER)))

def awq_zeros_read_as_v1(*, qweight, qzeros, scales, group_size):
    """AWQ zeros read with GPTQ v1's +1 (an exllama/GPTQ v1 kernel fed AutoAWQ zeros without the -1 repack)."""
    return _awq_decode(qweight, qzeros, scales, group_size, zero_offset=1)


def awq_pack_sequential(*, codes, zeros, scales, group_size):
    """A writer that packs columns in order (the layout GEMV-style readers expect), labelled GEMM."""
    return {"qweight": pack_words(np.asarray(codes), order=SEQUENTIAL),
            "qzeros": pack_words(np.asarray(zeros), order=SEQUENTIAL), "scales": np.asarray(scales)}


def _ct(weight_packed, weight_scale, weight_shape, weight_zero_point):
    layer = {"weight_packed": weight_packed, "weight_scale": weight_scale, "weight_shape": weight_shape}
    return layer | ({"weight_zero_point": weight_zero_point} if weight_zero_point is not None else {})


def _ct_values(weight_packed, weight_scale, weight_shape, num_bits, q, z):
    s = np.asarray(weight_scale, np.float32)
    cols = np.repeat(np.arange(s.shape[1]), q.shape[1] // s.shape[1])
    diff = q.astype(np.float32) - (0 if z is None else z.astype(np.float32)[:, cols])
    return np.ascontiguousarray(diff * s[:, cols])


def ct_offset_forgotten(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None):
    """Stored fields used as the signed codes: the + 2^(b-1) offset of pack_to_int32 never undone."""
    n, k = (int(v) for v in np.asarray(weight_shape))
    u = unpack_dense(weight_packed, num_bits, k).astype(np.int16)
    z = None if weight_zero_point is None else unpack_dense(np.asarray(weight_zero_point).T, num_bits, n).T.astype(np.int16)
    return _ct_values(weight_packed, weight_scale, weight_shape, num_bits, u, z if z is None else z - (1 << (num_bits - 1)))


def ct_zero_point_wrong_dim(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None):
    """Zero points unpacked along dimension 1 (the groups), as weight_packed is, instead of dimension 0."""
    q, _ = ctensors.unpack(_ct(weight_packed, weight_scale, weight_shape, None), num_bits=num_bits)
    z = None
    if weight_zero_point is not None:
        n, g = int(np.asarray(weight_shape)[0]), np.asarray(weight_scale).shape[1]
        zp = np.asarray(weight_zero_point)
        flat = unpack_dense(zp.reshape(1, -1), num_bits, n * g).reshape(n, g)     # stream read row-major
        z = flat.astype(np.int16) - (1 << (num_bits - 1))
    return _ct_values(weight_packed, weight_scale, weight_shape, num_bits, q, z)


def ct_straddle_high_bits_dropped(*, weight_packed, weight_scale, weight_shape, num_bits, group_size,
                                  weight_zero_point=None):
    """Each value read from its first word alone: the high bits of a value straddling two words are lost."""
    n, k = (int(v) for v in np.asarray(weight_shape))
    w = np.asarray(weight_packed).view(np.uint32).astype(np.uint64)
    i = np.arange(k)
    u = (w[:, (i * num_bits) // 32] >> ((i * num_bits) % 32).astype(np.uint64)) & ((1 << num_bits) - 1)
    _, z = ctensors.unpack(_ct(weight_packed, weight_scale, weight_shape, weight_zero_point), num_bits=num_bits)
    return _ct_values(weight_packed, weight_scale, weight_shape, num_bits, u.astype(np.int16) - (1 << (num_bits - 1)), z)


def ct_per_word_reader(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None):
    """compressed-tensors <= 0.17.1's unpack_from_int32 (32 // b whole values a word, CT-2.6) on the dense
    bytes 0.18 and later write: a 0.17 reader given a new checkpoint."""
    layer = _ct(weight_packed, weight_scale, weight_shape, weight_zero_point)
    q, z = ctensors.unpack(layer, num_bits=num_bits, layout="word")
    return _ct_values(weight_packed, weight_scale, weight_shape, num_bits, q, z)


def ct_pack_per_word(*, codes, scales, num_bits, group_size, zero_points=None):
    """compressed-tensors <= 0.17.1's pack_to_int32: 32 // b whole values a word (CT-2.6), not one stream."""
    layer = ctensors.pack(codes, scales, num_bits=num_bits, group_size=None if group_size == -1 else group_size,
                          zero_points=zero_points, layout="word")
    return dict(layer.tensors)


MUTANTS = [
    ("awq_ctensors_bugs:awq_order_sequential", "awq_gemm", "dequantize",
     "AWQ fields read in column order instead of 0 2 4 6 1 3 5 7 (packing-order class: GPTQModel#1854, #2364)",
     r"awq_gemm/read/g32"),
    ("awq_ctensors_bugs:awq_zeros_read_as_v1", "awq_gemm", "dequantize",
     "AWQ zeros read as GPTQ v1 (+1), as an exllama kernel given AWQ zeros without AutoAWQ's -1 repack",
     r"awq_gemm/read/g128"),
    ("awq_ctensors_bugs:awq_pack_sequential", "awq_gemm", "pack",
     "AWQ writer packing columns in order under version gemm", r"awq_gemm/pack/g64"),
    ("awq_ctensors_bugs:ct_offset_forgotten", "ctensors_pack", "dequantize",
     "compressed-tensors stored fields used as codes: the 2^(b-1) offset never subtracted", r"ctensors_pack/read/b4_sym_g32"),
    ("awq_ctensors_bugs:ct_zero_point_wrong_dim", "ctensors_pack", "dequantize",
     "compressed-tensors zero points unpacked along the group dimension instead of dimension 0",
     r"ctensors_pack/read/b4_asym_g32"),
    ("awq_ctensors_bugs:ct_straddle_high_bits_dropped", "ctensors_pack", "dequantize",
     "a 3-bit value straddling two words loses the bits in the second word", r"ctensors_pack/read/b3_sym_g16_k80"),
    ("awq_ctensors_bugs:ct_per_word_reader", "ctensors_pack", "dequantize",
     "compressed-tensors 0.17.1's per-word unpack given dense bytes (CT-2.6), where the widths agree",
     r"ctensors_pack/read/b3_sym_g16_k80"),
    ("awq_ctensors_bugs:ct_pack_per_word", "ctensors_pack", "pack",
     "compressed-tensors 0.17.1's per-word packer (CT-2.6)", r"ctensors_pack/pack/b3_sym_g32"),
    ("awq_ctensors_bugs:awq_fields_reversed", "awq_gemm", "dequantize",
     "AWQ words read top field first (shift 28 - 4i): the field order reversed in qweight and qzeros",
     r"awq_gemm/read/g32"),
]
