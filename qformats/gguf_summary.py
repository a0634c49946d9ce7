"""What a GGUF file is, from its header: a model's summary for ``inspect``, or an importance matrix.

``header_summary`` gives the facts ``qformats inspect`` prints above a GGUF file's table (spec/ggml.md
GGML-7.1): ``general.architecture``, ``general.file_type`` by llama.cpp's name, the tensor count, the
parameter count (every tensor's elements, as llama.cpp's ``llama_model_n_params`` counts them) and the
average bits per weight (every tensor's data bytes x 8 / every tensor's elements, as llama.cpp's loader
prints "BPW"). ``refuse_imatrix`` tells an importance matrix written by ``llama-imatrix`` from a model
(CKPT-1.4): it is an input of ``llama-quantize --imatrix``, not weights to validate.
"""

from __future__ import annotations

from typing import Any

from .errors import fail
from .findings import plural

__all__ = ["FILE_TYPES", "header_summary", "is_imatrix", "refuse_imatrix", "file_type_name"]

# llama.cpp include/llama.h, enum llama_ftype (LLAMA_FTYPE_<name>): the value general.file_type holds.
# 4 (MOSTLY_Q4_1_SOME_F16), 5 and 6 (Q4_2, Q4_3) and 33..35 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) were removed
# from llama.cpp; files naming them are shown by number. GUESSED (1024) is or-ed into a guessed type.
FILE_TYPES = {
    0: "ALL_F32", 1: "MOSTLY_F16", 2: "MOSTLY_Q4_0", 3: "MOSTLY_Q4_1", 7: "MOSTLY_Q8_0", 8: "MOSTLY_Q5_0",
    9: "MOSTLY_Q5_1", 10: "MOSTLY_Q2_K", 11: "MOSTLY_Q3_K_S", 12: "MOSTLY_Q3_K_M", 13: "MOSTLY_Q3_K_L",
    14: "MOSTLY_Q4_K_S", 15: "MOSTLY_Q4_K_M", 16: "MOSTLY_Q5_K_S", 17: "MOSTLY_Q5_K_M", 18: "MOSTLY_Q6_K",
    19: "MOSTLY_IQ2_XXS", 20: "MOSTLY_IQ2_XS", 21: "MOSTLY_Q2_K_S", 22: "MOSTLY_IQ3_XS", 23: "MOSTLY_IQ3_XXS",
    24: "MOSTLY_IQ1_S", 25: "MOSTLY_IQ4_NL", 26: "MOSTLY_IQ3_S", 27: "MOSTLY_IQ3_M", 28: "MOSTLY_IQ2_S",
    29: "MOSTLY_IQ2_M", 30: "MOSTLY_IQ4_XS", 31: "MOSTLY_IQ1_M", 32: "MOSTLY_BF16", 36: "MOSTLY_TQ1_0",
    37: "MOSTLY_TQ2_0", 38: "MOSTLY_MXFP4_MOE", 39: "MOSTLY_NVFP4", 40: "MOSTLY_Q1_0",
}
GUESSED = 1024
# llama.cpp tools/imatrix/imatrix.cpp, IMatrixCollector::save_imatrix: general.type "imatrix", and per
# weight tensor NAME the F32 tensors NAME.in_sum2 (sums of squared activations), NAME.counts and, since
# the activations were added, NAME.in_sum.
IMATRIX_SUFFIXES = (".in_sum2", ".counts", ".in_sum")


def file_type_name(value: Any) -> str | None:
    """``MOSTLY_Q4_K_M`` for 15; ``MOSTLY_Q4_K_M (guessed)`` with the GUESSED bit; None for a number
    llama.cpp does not name; a string value (the first GGUF specification typed the key STRING) as is."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    name = FILE_TYPES.get(value & ~GUESSED)
    return None if name is None else name + (" (guessed)" if value & GUESSED else "")


def header_summary(gguf: Any) -> dict[str, Any]:
    """The header facts of an open :class:`~qformats.containers.gguf.GGUFFile` (JSON-ready)."""
    meta = gguf.metadata
    elements = sum(t.n_elements for t in gguf.tensors)
    data_bytes = sum(t.n_bytes for t in gguf.tensors)
    file_type = meta.get("general.file_type")
    kind, arch = meta.get("general.type", "model"), meta.get("general.architecture")
    return {"type": kind if isinstance(kind, str) else None, "architecture": arch if isinstance(arch, str) else None,
            "file_type": file_type if isinstance(file_type, (int, str)) and not isinstance(file_type, bool)
            else None, "file_type_name": file_type_name(file_type), "tensors": len(gguf.tensors),
            "parameters": elements, "bits_per_weight": round(data_bytes * 8 / elements, 4) if elements else None}


def header_line(header: dict[str, Any]) -> str:
    """``architecture llama, file type MOSTLY_Q4_K_M (15), 9 tensors, 43,776 parameters, 5.93 bits/weight``."""
    ftype = header["file_type"]
    named = "not given" if ftype is None else (
        f"{header['file_type_name']} ({ftype})" if header["file_type_name"] and not isinstance(ftype, str)
        else f"{ftype!r}" if isinstance(ftype, str) else f"{ftype} (a number llama.cpp does not name)")
    bpw = "-" if header["bits_per_weight"] is None else f"{header['bits_per_weight']:.4g}"
    return (f"architecture {header['architecture'] or 'not given'}, file type {named}, "
            f"{plural(header['tensors'], 'tensor')}, {header['parameters']:,} parameters, {bpw} bits/weight")


def is_imatrix(gguf: Any) -> bool:
    """An importance matrix: general.type says "imatrix", or every tensor is named NAME.in_sum2,
    NAME.counts or NAME.in_sum (files written before general.type was set), at least one an in_sum2."""
    if gguf.metadata.get("general.type") == "imatrix":
        return True
    names = [t.name for t in gguf.tensors]
    return bool(names) and all(n.endswith(IMATRIX_SUFFIXES) for n in names) and any(
        n.endswith(".in_sum2") for n in names)


def refuse_imatrix(gguf: Any) -> None:
    """CKPT-1.4: an importance matrix is not a model; validating its F32 sums as weights would call it one."""
    if not is_imatrix(gguf):
        return
    entries = sum(t.name.endswith(".in_sum2") for t in gguf.tensors)
    raise fail("ckpt.no_model", "path", "a model checkpoint", (
        f"an importance matrix, not a model: general.type {gguf.metadata.get('general.type', 'not given')!r}, "
        f"{entries} {'entry' if entries == 1 else 'entries'} of NAME.in_sum2 and NAME.counts tensors as "
        "llama-imatrix writes them; give it to llama-quantize --imatrix"), file=gguf.file)
