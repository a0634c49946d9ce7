"""The registry of formats: every consumer of per-format knowledge walks these faces (DESIGN.md §1).

A format is one room: ``qformats/formats/<name>/`` with its chapter, kernels and fixtures. Its package
exposes one :class:`Face` (``FACE`` in ``<name>/face.py``), or a family room one per anchor tensor (``FACES``); ``validate``, the CLI tools and the
conformance runner look formats up here and never branch on a format's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from types import MappingProxyType
from typing import Any

import numpy as np

from ..cases import Case
from ..errors import fail

__all__ = ["Face", "FACES", "subject_format", "SUBJECT_FORMATS", "all_cases"]

PACKAGES = ("gptq", "spqr", "q4_k", "ggml", "awq", "ctensors", "fp8", "fp4", "bnb")


@dataclass(frozen=True)
class Face:
    """What the rest of qformats needs to know about one format.

    ``subject_formats`` are the names a kernel or writer is judged under (``gptq_v1``, ``gptq_v2``);
    ``ops`` maps each to the ops it has; ``reference_dtype`` is the dtype of the reference decode;
    ``w_rounding`` whether a matmul kernel may round W to float16 before multiplying (QF-4.6);
    ``kernel_keywords`` the scalar keywords of the kernel call contract (DESIGN.md §6);
    ``judge_writer(case, op, arrays, kind)`` the (status, detail) of a writer's answer (``pack``,
    ``quantize``): the format knows what makes written bytes conforming.

    ``layers`` is the format's ``layers`` module, its checkpoint side. Modules of safetensors
    checkpoints: ``ANCHOR`` (the tensor suffix that claims a module), ``SUFFIXES``,
    ``check(ckpt, groups, deep, progress) -> (rows, findings)`` (validate, inspect, ``--deep``) and
    ``decode(ckpt, group)``. Tensors of GGUF files: ``GGUF_TYPES``, ``check_gguf(ckpt, deep,
    progress)`` and ``decode_gguf(ckpt, name)``.
    """

    name: str
    subject_formats: tuple[str, ...]
    ops: Mapping[str, tuple[str, ...]]
    reference_dtype: str
    w_rounding: bool
    kernel_keywords: tuple[str, ...]
    cases: Callable[[], Iterable[Case]]
    reference: Callable[[Case], np.ndarray]
    judge_writer: Callable[[Case, str, Mapping[str, np.ndarray], str], tuple[str, str]] | None = None
    layers: Any = field(default=None, repr=False)   # the checkpoint side: the format's layers module


def _load() -> Mapping[str, Face]:
    # a family room with more than one anchor (fp8: weight_scale, weight_scale_inv) exposes FACES
    modules = [import_module(f"qformats.formats.{name}.face") for name in PACKAGES]
    faces = [face for module in modules for face in getattr(module, "FACES", (module.FACE,))]
    return MappingProxyType({f.name: f for f in faces})


FACES: Mapping[str, Face] = _load()
SUBJECT_FORMATS: Mapping[str, Face] = MappingProxyType({s: f for f in FACES.values() for s in f.subject_formats})


def subject_format(name: str) -> Face:
    """The face that judges subjects declared as ``name`` (``gptq_v1`` -> the GPTQ face)."""
    try:
        return SUBJECT_FORMATS[name]
    except KeyError:
        raise fail("argument.invalid", "format", "one of " + ", ".join(SUBJECT_FORMATS), name) from None


def all_cases() -> list[Case]:
    """Every reference-made case of every format, in registry order."""
    return [case for f in FACES.values() for case in f.cases()]
