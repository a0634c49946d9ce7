"""Emulation of real GPTQ writers and readers, bit for bit (spec/gptq.md GPTQ-4, informative).

The spec itself has one v1 rule, ``stored field = zero - 1`` with zero in ``[1, 2^b - 1]``
(GPTQ-3.3, GPTQ-3.4). Real tools agree on that range and disagree outside it: a zero of 0 is
written three different ways and read back five different ways. This module reproduces each
tool's arithmetic so that producer -> consumer matrices can be tested (GPTQ-4.1, GPTQ-4.2);
none of it is a conforming encoder.

Writers map logical zeros ``(G, N)`` to the v1 qzeros words ``(G, N*b/32)`` a tool saves for
``checkpoint_format: "gptq"``. The 4-bit example of GPTQ-4.1, zeros ``[0,5,3,0,0,9,15,1]``::

    masked     (z - 1) & 15, per field              0x0e8ff24f   fields F,4,2,F,F,8,E,0
    gptqmodel  pack(z) - 0x11111111, whole word     0x0e7ef23f   borrow runs into field j+1
    autogptq   |= uint32(z - 1) << 4j, no mask      0xffffffff   0xFFFFFFFF << 4j bleeds up

Readers map stored words back to the zero each one subtracts (``W = s * (q - Z)``).

Every function here is vectorized over groups and words; the only loops run over the 32
field positions of a word group or over the three 3-bit word columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ... import SPEC_VERSION
from ...bits import field_positions, pack, packed_length, unpack
from ...errors import fail
from ...tensors import as_array
from .checks import check_qzeros, check_zeros
from .layout import check_bits, check_version, group_rows

__all__ = [
    "WRITERS",
    "READERS",
    "Reader",
    "get_writer",
    "get_reader",
    "ONES",
    "LEGACY_INT3",
]

MASK32 = 0xFFFFFFFF

# A 1 in every field of a 32-bit word: GPTQModel's whole-word v1 <-> v2 offset (GPTQ-7.3).
# Source: GPTQModel f4c327a17eb3 gptqmodel/utils/model.py convert_gptq_v{1_to_2,2_to_1}_format_module.
ONES = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}

# GPTQModel v0.9.0-v6.x 3-bit offsets per qzeros word column c % 3 (GPTQ-4.5). They add
# [4]*10, 0, [1]*10, 3, [2]*10 to the 32 fields instead of [1]*32; fixed in v7.0.0 (PR #2763).
LEGACY_INT3 = (0x24924924, 0x92492492, 0x49249249)


def _word_add(words: np.ndarray, offset: np.ndarray | int) -> np.ndarray:
    """int32 words + offset modulo 2^32, as torch's in-place int32 ``+=`` wraps (GPTQ-7.3)."""
    u = words.view(np.uint32).astype(np.uint64)
    return ((u + np.asarray(offset, np.uint64)) & MASK32).astype(np.uint32).view(np.int32)


def _legacy_offsets(n_cols: int, sign: int) -> np.ndarray:
    """Per-column 3-bit legacy constant (c % 3), as a uint64 row to add modulo 2^32."""
    c = np.array(LEGACY_INT3, np.uint64)[np.arange(n_cols) % 3]
    return c if sign > 0 else (np.uint64(1 << 32) - c) & np.uint64(MASK32)


# -- writers (GPTQ-4.1) -------------------------------------------------------------------------


def write_masked(zeros, bits: int) -> np.ndarray:
    """``(z - 1) & maxq`` per field: AutoGPTQ ``pack_from_tensors``; GPTQModel >= 7.0 at 3 bits."""
    b = check_bits(bits)
    z = check_zeros(zeros, b).astype(np.int64)
    return pack((z - 1) & ((1 << b) - 1), b, axis=1)


def write_autogptq(zeros, bits: int) -> np.ndarray:
    """AutoGPTQ 0.7.1 ``QuantLinear.pack``: ``uint32(z - 1)`` ORed in at each field, unmasked.

    A zero of 0 becomes ``0xFFFFFFFF`` (the float32 -1 -> uint32 cast on x86_64) and the uint32
    shift ``<< s`` keeps every bit from s to 31, so the field and all higher fields of its word
    turn to ones. At 3 bits the high part of a straddling field is masked by the stitch
    (``(z >> 2) & 1``, ``(z >> 1) & 3``), so bleed never crosses into the next word.
    """
    b = check_bits(bits)
    z = check_zeros(zeros, b).astype(np.int64)
    v = ((z - 1) & MASK32).astype(np.uint32)  # 0 -> 0xFFFFFFFF, else z - 1
    g, n = v.shape
    packed_length(n, b, axis_name="zeros")  # whole words only, as bits.pack requires (QF-3.3)
    blocks = np.zeros((g, -(-n // 32) * 32), np.uint32)  # whole 32-field groups; the tail is cut below
    blocks[:, :n] = v
    blocks = blocks.reshape(g, -1, 32)
    words = np.zeros(blocks.shape[:2] + (b,), np.uint32)
    for k, (w, s) in enumerate(field_positions(b)):
        words[:, :, w] |= blocks[:, :, k] << np.uint32(s)
        if s + b > 32:  # stitched high part of a 3-bit field: masked to its own width
            hi = s + b - 32
            words[:, :, w + 1] |= (blocks[:, :, k] >> np.uint32(32 - s)) & np.uint32((1 << hi) - 1)
    return words.reshape(g, -1)[:, : n * b // 32].view(np.int32)


def write_gptqmodel(zeros, bits: int) -> np.ndarray:
    """GPTQModel >= 7.0 save path for ``format="gptq"``: pack raw zeros, then convert to v1.

    2/4/8 bits: whole-word ``- 0x55555555 / 0x11111111 / 0x01010101`` modulo 2^32, so a field
    of 0 becomes all ones and borrows 1 from the field above. 3 bits: per field ``(z-1) & 7``.
    """
    b = check_bits(bits)
    if b == 3:
        return write_masked(zeros, b)
    raw = pack(check_zeros(zeros, b), b, axis=1)
    return _word_add(raw, (1 << 32) - ONES[b])


def write_gptqmodel_legacy_int3(zeros, bits: int) -> np.ndarray:
    """GPTQModel v0.9.0-v6.x: as :func:`write_gptqmodel` but 3 bits subtract the legacy constants."""
    b = check_bits(bits)
    if b != 3:
        return write_gptqmodel(zeros, b)
    raw = pack(check_zeros(zeros, b), b, axis=1)
    return _word_add(raw, _legacy_offsets(raw.shape[1], -1))


WRITERS: Mapping[str, Callable[[np.ndarray, int], np.ndarray]] = MappingProxyType({
    "autogptq": write_autogptq,
    "gptqmodel": write_gptqmodel,
    "gptqmodel_legacy_int3": write_gptqmodel_legacy_int3,
    "masked": write_masked,
})


def get_writer(name: str) -> Callable[[np.ndarray, int], np.ndarray]:
    """The emulated writer called ``name``, or ``gptq.quirk.unknown``."""
    try:
        return WRITERS[name]
    except (KeyError, TypeError):
        raise fail("gptq.quirk.unknown", "writer", f"one of {sorted(WRITERS)}", name) from None


# -- readers (GPTQ-4.2) -------------------------------------------------------------------------


def _fields(qzeros: np.ndarray, bits: int, n: int) -> np.ndarray:
    """Stored fields f as int64 (G, N) of already checked int32 words."""
    return unpack(qzeros, bits, axis=1, count=n).astype(np.int64)


def _rule_wrap(q, b, n):  # (f + 1) & maxq
    return (_fields(q, b, n) + 1) & ((1 << b) - 1)


def _rule_plus_one(q, b, n):  # f + 1, no wrap: a stored all-ones field reads as 2^b
    return _fields(q, b, n) + 1


def _rule_identity(q, b, n):
    return _fields(q, b, n)


def _rule_cuda_old(q, b, n):
    # qlinear_cuda_old.forward: 2/4/8 bits add 1 to the int8/int16 field then mask; 3 bits mask first.
    return _rule_plus_one(q, b, n) if b == 3 else _rule_wrap(q, b, n)


def _rule_cuda_kernel(q, b, n):
    # autogptq_cuda_kernel_256.cu: ((f & mask) + 1) & 0x0f at every width; 8-bit 127 -> 0.
    return (_fields(q, b, n) + 1) & 0x0F


def _rule_gptqmodel_v1(q, b, n):
    # convert_gptq_v1_to_v2_format_module: whole-word add (carries cross fields); 3 bits per field.
    if b == 3:
        return _rule_wrap(q, b, n)
    return _fields(_word_add(q, ONES[b]), b, n)


def _rule_gptqmodel_legacy_v1(q, b, n):
    if b != 3:
        return _rule_gptqmodel_v1(q, b, n)
    return _fields(_word_add(q, _legacy_offsets(q.shape[1], +1)), b, n)


@dataclass(frozen=True)
class Reader:
    """One real consumer of GPTQ tensors: which widths and labels it reads and the zero it uses.

    ``rules`` maps a version label to the function of the stored words giving the zero Z that
    the consumer subtracts; a label the tool cannot read is absent, and a tool that ignores the
    label has the same rule under both. ``fixed_zero`` readers (Marlin) never look at qzeros and
    subtract ``2^(b-1)``; ``sym_only`` readers are never selected for an asymmetric checkpoint.
    """

    spec_version: ClassVar[str] = SPEC_VERSION

    name: str
    description: str
    bits: frozenset[int]
    versions: frozenset[str]
    ignores_g_idx: bool = False
    fixed_zero: bool = False
    sym_only: bool = False
    rules: Mapping[str, Callable[[np.ndarray, int, int], np.ndarray]] = field(
        default_factory=dict, repr=False, compare=False, hash=False)

    def supports(self, bits: int, version: str) -> bool:
        return int(bits) in self.bits and version in self.versions

    def why_not(self, bits: int, version: str, sym: bool | None = None) -> str | None:
        """Why this tool cannot read a layer of these parameters, as a phrase; None when it can.

        ``sym`` is what the config says (None: unknown); a ``sym_only`` reader refuses only a
        declared asymmetric layer (GPTQ-4.2: vLLM selects gptq_marlin only for ``sym: true``).
        """
        if int(bits) not in self.bits:
            widths = " and ".join(f"{b}" for b in sorted(self.bits))
            return f"{bits}-bit: it reads {widths}-bit layers only"
        if version not in self.versions:
            labels = " or ".join(LABELS[v] for v in sorted(self.versions))
            return f"labelled {LABELS[version]}: it reads {labels} only"
        if self.sym_only and sym is False:
            return "asymmetric: it reads symmetric layers only"
        return None

    def _check(self, bits: int, version: str) -> int:
        b = check_bits(bits)
        check_version(version)
        reason = self.why_not(b, version)
        if reason is not None:
            raise fail("gptq.quirk.unsupported", "bits" if b not in self.bits else "version",
                       f"readable by {self.name!r} ({self.description.split(';')[0]})", reason)
        return b

    def effective_zeros(self, qzeros, bits: int, n: int, version: str) -> np.ndarray:
        """The zero (int64, (G, N)) this reader subtracts for each group and column (GPTQ-4.2).

        ``version`` is the label the tool is told ("v1" for ``checkpoint_format: "gptq"``),
        not what the words really hold: reading v2 words with ``version="v1"`` emulates a
        mislabelled checkpoint.
        """
        b = self._check(bits, version)
        words = check_qzeros(qzeros, b, int(n))
        if self.fixed_zero:  # the words are loaded (shape-checked) but never read
            return np.full((words.shape[0], int(n)), 1 << (b - 1), np.int64)
        return self.rules[version](words, b, int(n))

    def groups(self, g_idx, k: int, group_size: int | None) -> np.ndarray:
        """Group index (int64, (K,)) the reader uses for each input row (GPTQ-5.3).

        Readers that ignore g_idx assume ``k // group_size`` and, like AutoGPTQ's
        ``qlinear_cuda_old`` (a reshape to ``[-1, group_size, N]``), fail unless
        ``K % group_size == 0``.
        """
        if not self.ignores_g_idx:
            gi = as_array(g_idx, "g_idx")
            if gi.shape != (k,):
                raise fail("tensor.shape", "g_idx", f"of shape ({k},)", tuple(gi.shape))
            return gi.astype(np.int64)
        gs = group_rows(k, -1 if group_size is None else int(group_size))
        if gs <= 0 or k % gs:
            raise fail("gptq.quirk.unsupported", "group_size", f"a divisor of K={k} for reader {self.name!r} "
                       "(it reshapes rows to [-1, group_size, N])", group_size)
        return np.arange(k, dtype=np.int64) // gs


# The checkpoint_format label as a user reads it in a config (GPTQ-6.3).
LABELS = {"v1": "checkpoint_format gptq (v1)", "v2": "checkpoint_format gptq_v2 (v2)"}


def _reader(name, description, bits, rules, *, ignores_g_idx=False, fixed_zero=False, sym_only=False,
            versions=None):
    return Reader(name=name, description=description, bits=frozenset(bits),
                  versions=frozenset(versions if versions is not None else rules),
                  ignores_g_idx=ignores_g_idx, fixed_zero=fixed_zero, sym_only=sym_only,
                  rules=MappingProxyType(dict(rules)))


def _label_blind(rule):
    """AutoGPTQ 0.7.1 never reads checkpoint_format: its ``BaseQuantizeConfig.from_pretrained``
    (auto_gptq/modeling/_base.py at tag v0.7.1, b8b41270) keeps only its dataclass fields and logs
    "ignoring unknown parameter" for the rest, so a ``gptq_v2`` checkpoint is read with the v1
    rule (GPTQ-4.2). Its unreleased successor (9f7d370, ``from_quant_config``) raises "Unknown
    quantization format: gptq_v2" instead."""
    return {"v1": rule, "v2": rule}


READERS: Mapping[str, Reader] = MappingProxyType({r.name: r for r in (
    _reader("autogptq_cuda_old",
            "AutoGPTQ 0.7.1 qlinear_cuda_old.QuantLinear.forward, torch path; (f+1) & maxq at 2/4/8 bits, "
            "f+1 at 3 bits; assumes g = k // group_size; ignores checkpoint_format",
            (2, 3, 4, 8), _label_blind(_rule_cuda_old), ignores_g_idx=True),
    _reader("autogptq_cuda",
            "AutoGPTQ 0.7.1 qlinear_cuda.QuantLinear.forward, torch path (also triton, auto-round "
            "torch_zp); (f & maxq) + 1, no wrap; ignores checkpoint_format",
            (2, 3, 4, 8), _label_blind(_rule_plus_one)),
    _reader("autogptq_cuda_kernel",
            "AutoGPTQ 0.7.1 / 9f7d37072917 CUDA extension autogptq_cuda_kernel_256.cu (and _64); "
            "((f & mask) + 1) & 0x0f at every width "
            "(8-bit bug: stored 127 reads as 0); ignores checkpoint_format",
            (2, 3, 4, 8), _label_blind(_rule_cuda_kernel)),
    _reader("exllama",
            "AutoGPTQ 0.7.1 / 9f7d37072917 exllama and exllamav2 extensions (q4_matmul.cu, "
            "q_gemm_kernel_gptq.cuh); (f + 1) & 0x0f; ignores checkpoint_format (AutoGPTQ 0.7.1 loader)",
            (4,), _label_blind(_rule_wrap)),
    _reader("vllm_gptq_gemm",
            "vLLM >= 0.12 csrc/quantization/gptq/q_gemm.cu gptq_gemm; f + zero_offset "
            "(1 for gptq, 0 for gptq_v2, PR #26092), no wrap",
            (2, 3, 4, 8), {"v1": _rule_plus_one, "v2": _rule_identity}),
    _reader("gptqmodel",
            "GPTQModel 7.7.0 convert_gptq_v1_to_v2_format_module then TorchLinear.dequantize_weight; "
            "v1: whole-word + 0x55555555/0x11111111/0x01010101, 3 bits (f+1) & 7; v2: f",
            (2, 3, 4, 8), {"v1": _rule_gptqmodel_v1, "v2": _rule_identity}),
    _reader("gptqmodel_legacy_int3",
            "GPTQModel v0.9.0-v6.x convert_gptq_v1_to_v2_format_module; 3 bits add 0x24924924/"
            "0x92492492/0x49249249 by word column c % 3, else as gptqmodel",
            (2, 3, 4, 8), {"v1": _rule_gptqmodel_legacy_v1, "v2": _rule_identity}),
    _reader("marlin",
            "vLLM gptq_marlin (<= 0.2x) and auto_gptq (0.33), GPTQModel Marlin; qzeros ignored, "
            "zero fixed at 2^(b-1); sym 4/8-bit only",
            (4, 8), {}, fixed_zero=True, sym_only=True, versions=("v1", "v2")),
)})


def get_reader(name: str) -> Reader:
    """The emulated reader called ``name``, or ``gptq.quirk.unknown``."""
    try:
        return READERS[name]
    except (KeyError, TypeError):
        raise fail("gptq.quirk.unknown", "reader", f"one of {sorted(READERS)}", name) from None
