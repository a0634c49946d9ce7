"""``qformats convert`` across formats: GPTQ (v1/v2), AWQ GEMM and compressed-tensors pack-quantized.

Every quantized module goes through the lossless Python API with a GPTQ v2 layer in the middle
(AWQ-4, CT-4): ``awq.to_gptq`` / ``ctensors.to_gptq`` / ``gptq.convert`` in, ``gptq.convert`` /
``awq.from_gptq`` / ``ctensors.from_gptq`` out. Whatever the target cannot hold is refused by those
functions with the reason, before anything is written. Around them this module:

- reads each module with its source config (GPTQ ``dynamic`` overrides, AWQ ``group_size``,
  compressed-tensors config groups), and refuses a checkpoint whose modules need more than the one
  scheme the written config states (bits, group size); the layers are written symmetric only when all are;
- writes the module's target tensors under the target's names into the shard of its code tensor,
  copies every other tensor byte for byte (BF16 and F8 included), and rewrites the shard index;
- replaces ``config.json``'s ``quantization_config`` with the config the target library writes
  (AutoAWQ ``AwqConfig.to_transformers_dict``, compressed-tensors ``ModelCompressor.update_config``,
  GPTQModel's ``checkpoint_format`` config), keeping every other key; ``quantize_config.json`` and
  ``quant_config.json`` describe the source format and are not carried over.

Output is staged in a sibling directory and renamed into place only when complete (as ``tools.convert``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__, jsontext
from .containers.checkpoint import CONFIG_FILES, Checkpoint, path_error
from .errors import QFormatsError, fail
from .formats import awq, ctensors, gptq
from .formats.awq import layout as awq_layout
from .formats.awq.layers import _gptq_shaped as awq_gptq_shaped
from .formats.ctensors import layers as ct_layers
from .formats.ctensors import layout as ct_layout
from .formats.gptq.checks import checked_tensors as gptq_checked
from .formats.gptq.evidence import label_evidence
from .formats.gptq.layers import require_config
from .formats.gptq.layout import GPTQConfig, ModuleParams, modules_params
from .formats.gptq.writers import named_writer
from .layers import LayerGroup, load_layer
from .report import plural
from .validate import group_layers

__all__ = ["TARGETS", "SOURCE_LABELS", "ST_DTYPES", "source_format", "convert_across", "write_safetensors",
           "refuse_contradicted"]

# --to value -> the format package that writes it
TARGETS = {"gptq_v2": "gptq", "gptq": "gptq", "awq_gemm": "awq", "compressed_tensors": "ctensors",
           "modelopt": "fp4", "gpt_oss_mxfp4": "fp4", "fp8": "fp8"}
INT_TARGETS = ("gptq_v2", "gptq", "awq_gemm", "compressed_tensors")
# FP8 / FP4 source formats (faces) -> the package converting them where the layouts agree (FP8-8, FP4-8)
FLOAT_SOURCES = {"fp8": "fp8", "fp8_deepseek": "fp8", "fp4": "fp4", "modelopt_fp4": "fp4", "gpt_oss_mxfp4": "fp4"}
SOURCE_LABELS = {"gptq": "GPTQ", "awq": "AWQ GEMM", "ctensors": "compressed-tensors", "fp8": "FP8",
                 "fp8_deepseek": "fp8 (DeepSeek)", "fp4": "compressed-tensors FP4", "modelopt_fp4": "ModelOpt FP4",
                 "gpt_oss_mxfp4": "gpt-oss MXFP4"}
TARGET_OF_FORMAT = {"awq": "awq_gemm", "ctensors": "compressed_tensors"}
# The compressed-tensors release whose config keys and tensor layout the written config follows (CT-5.1).
CT_VERSION = "0.20.0"
# The code tensor of each format: a module's target tensors go to the shard holding it (memory: one shard).
CODES = {"gptq": "qweight", "awq": "qweight", "ctensors": "weight_packed"}
QUANT_SUFFIXES = {"gptq": ("qweight", "qzeros", "scales", "g_idx"), "awq": ("qweight", "qzeros", "scales"),
                  "ctensors": ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_g_idx")}
# numpy dtype -> safetensors dtype, for the tensors the converters produce
ST_DTYPES = {"int32": "I32", "int64": "I64", "float16": "F16", "float32": "F32", "uint8": "U8", "int8": "I8"}


@dataclass(frozen=True)
class Module:
    """One quantized module, read into the common middle: a GPTQ v2 layer without bias."""

    group: LayerGroup
    layer: Any              # GPTQLayer or mapping of GPTQ v2 tensors (None in pass 1's summaries)
    bits: int
    group_size: int
    symmetric: bool         # declared symmetric by the source and every zero point 2^(b-1)
    file: str               # the file holding its code tensor


def source_format(ckpt: Checkpoint) -> str | None:
    """The one format of the checkpoint's quantized modules (``gptq``, ``awq``, ``ctensors``, ``spqr``, ...),
    None when it has none; refused when modules of several formats are mixed."""
    formats = sorted({g.format for g in group_layers(ckpt.tensor_names(), ckpt.config)[0]})
    if len(formats) > 1:
        raise fail("argument.invalid", "path", "a checkpoint whose quantized modules are of one format",
                   ", ".join(formats))
    return formats[0] if formats else None


def convert_across(ckpt: Checkpoint, dst: Path, *, to: str, source: str | None,
                   source_version: str | None = None, reader: str | None = None,
                   round_scales: bool = False) -> dict[str, Any]:
    """Convert the open checkpoint ``ckpt`` (format ``source``) to ``to`` into ``dst`` (see the module doc).
    ``round_scales``: compressed-tensors scales float16 cannot hold are rounded to float16 (CT-4.6); the answer
    then says how many scales were rounded and how many weights changed, by at most how much."""
    if source in FLOAT_SOURCES:
        return _float_across(ckpt, dst, to=to, source=source, options=(source_version, reader, round_scales))
    if to not in INT_TARGETS:
        raise fail("argument.invalid", "to", "gptq_v2, gptq, awq_gemm or compressed_tensors for this checkpoint "
                   "(modelopt, gpt_oss_mxfp4 and fp8 convert FP8 / FP4 checkpoints, FP8-8, FP4-8)",
                   f"{to} for {SOURCE_LABELS.get(source or '', source) or 'no quantized modules'}")
    target = TARGETS[to]
    if source not in SOURCE_LABELS:
        raise fail("argument.invalid", "path", "a GPTQ, AWQ GEMM or compressed-tensors pack-quantized checkpoint",
                   f"{source} layers" if source else "no quantized modules")
    _refuse_options(source, to, source_version, reader)
    if round_scales and (source != "ctensors" or source == target):
        raise fail("argument.invalid", "round_scales", "given only to convert a compressed-tensors checkpoint to "
                   "GPTQ or AWQ GEMM, whose scales are float16 (CT-4.6)", f"{SOURCE_LABELS[source]} to {to}")
    if source == target and source != "ctensors":
        raise fail("argument.invalid", "to", f"a format other than the checkpoint's ({TARGET_OF_FORMAT[source]})", to)
    if Path(ckpt.path).is_file() and ckpt.kind != "sharded":
        raise fail("argument.invalid", "path", "a checkpoint directory or shard index (a conversion to another "
                   "format rewrites config.json's quantization_config)", f"the single file {Path(ckpt.path).name}")
    if source == target:
        return _staged(dst, lambda stage: _ct_repack(ckpt, stage))
    groups = [g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0] if g.format == source]
    rounded: dict[str, tuple[int, int, float]] = {}
    against: set[str] = set()       # modules read as --source-version says, against their zeros' evidence
    read = _reader(ckpt, source, groups, source_version, rounded if round_scales else None, against)
    summaries = []
    for group in groups:    # pass 1: every refusal before anything is written, one module in memory at a time
        module = read(group)
        _converted(ckpt, module, to, Scheme(module.bits, module.group_size, module.symmetric))
        summaries.append(replace(module, layer=None))
    scheme = _one_scheme(summaries, target)
    excluded = _unquantized(ckpt, {g.name for g in groups}, target)
    def write(stage: Path) -> dict[str, Any]:
        placed = _write_shards(ckpt, stage, groups, read, to, scheme)   # pass 2: read and converted again
        _write_side_files(ckpt, stage, placed, _target_config(to, scheme, excluded, {g.name for g in groups}))
        done: dict[str, Any] = {"layers": len(groups), "from": source}
        if against:
            done["against_evidence"] = sorted(against)
        if round_scales:
            done["rounded_scales"] = _rounding_report(rounded)
        return done

    return _staged(dst, write)


def _rounding_report(rounded: dict[str, tuple[int, int, float]]) -> dict[str, Any]:
    """CT-4.6: scales rounded, weights whose exact value changed, the largest absolute change (0.0 if none)."""
    return {"scales": sum(r[0] for r in rounded.values()), "weights_changed": sum(r[1] for r in rounded.values()),
            "max_abs_change": max((r[2] for r in rounded.values()), default=0.0),
            "modules": sorted(name for name, r in rounded.items() if r[0])}


def _staged(dst: Path, write) -> dict[str, Any]:
    """``write(stage)`` into a staging directory beside ``dst``, renamed to ``dst`` only when it all worked."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))   # same filesystem: rename works
    try:
        done = write(stage)
        os.replace(stage, dst)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return done


# -- FP8 and FP4 layouts where they agree (FP8-8, FP4-8) -----------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """A float-format conversion, planned by ``formats.<fp8|fp4>.convert.plan`` after every refusal: the source
    tensors not copied, units (the source file its output goes to, a function making (name, dtype, array)
    entries), the target's quantization_config and side files (name -> JSON, or None: not carried over)."""

    dropped: set[str]
    units: list[tuple[str, Any]]
    config: dict[str, Any]
    side_files: dict[str, Any]
    layers: int


def _float_across(ckpt: Checkpoint, dst: Path, *, to: str, source: str, options: tuple) -> dict[str, Any]:
    """FP8-8, FP4-8: moved bytes, renamed tensors, the target's config; every other tensor copied byte for byte."""
    from importlib import import_module

    if any(options):
        raise fail("argument.invalid", "source_version" if options[0] else "reader" if options[1] else
                   "round_scales", "given only for GPTQ, AWQ GEMM or compressed-tensors pack-quantized sources",
                   f"given for {SOURCE_LABELS[source]} to {to}")
    if Path(ckpt.path).is_file() and ckpt.kind != "sharded":
        raise fail("argument.invalid", "path", "a checkpoint directory or shard index (a conversion to another "
                   "format rewrites config.json's quantization_config)", f"the single file {Path(ckpt.path).name}")
    groups = [g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0] if g.format == source]
    plan = import_module(f".formats.{FLOAT_SOURCES[source]}.convert", __package__).plan(ckpt, groups, to, Plan)

    def write(stage: Path) -> dict[str, Any]:
        placed = _write_planned(ckpt, stage, plan)
        _write_side_files(ckpt, stage, placed, plan.config)
        for name, content in plan.side_files.items():
            (stage / name).unlink(missing_ok=True)
            if content is not None:
                (stage / name).write_text(jsontext.dumps(content, indent=4) + "\n")
        return {"layers": plan.layers, "from": source}

    return _staged(dst, write)


def _write_planned(ckpt: Checkpoint, stage: Path, plan: Plan) -> dict[str, str]:
    """Each weight file rewritten: the plan's entries in the file of their source, all else byte for byte."""
    placed: dict[str, str] = {}
    for file in ckpt.files:
        entries = [(n, ckpt.tensor_info(n).dtype, tuple(ckpt.tensor_info(n).shape), ckpt.tensor(n))
                   for n in ckpt.tensor_names() if ckpt.file_of(n) == file and n not in plan.dropped]
        for _, make in (u for u in plan.units if u[0] == file):
            entries += [(name, dtype, np.shape(a), a) for name, dtype, a in make()]
        write_safetensors(stage / Path(file).name, entries, _metadata(ckpt.headers[file].metadata))
        placed.update({name: Path(file).name for name, *_ in entries})
    return placed


# -- compressed-tensors per-word -> dense (CT-4.5) -------------------------------------------------------------

def _ct_repack(ckpt: Checkpoint, stage: Path) -> dict[str, Any]:
    """CT-4.5: the per-word modules (CT-2.6) rewritten in the dense layout, every other tensor copied byte for
    byte; config.json's quantization_config keeps every key but ``version``, which names a dense writer."""
    word = _per_word_modules(ckpt)
    if not word:
        raise fail("argument.invalid", "to", "a format other than the checkpoint's, or compressed_tensors from "
                   "compressed-tensors <= 0.17's per-word layout (CT-4.5)",
                   "compressed_tensors for a checkpoint in the dense layout already")
    replaced = {f"{g.name}.{s}" for g, _ in word.values() for s in ("weight_packed", "weight_zero_point")}
    placed: dict[str, str] = {}
    for file in ckpt.files:
        entries = [(n, ckpt.tensor_info(n).dtype, tuple(ckpt.tensor_info(n).shape), ckpt.tensor(n))
                   for n in ckpt.tensor_names() if ckpt.file_of(n) == file and n not in replaced]
        for group, bits in word.values():        # each repacked tensor stays in the shard that held it
            here = [s for s in ("weight_packed", "weight_zero_point") if s in group.tensors
                    and ckpt.file_of(group.tensors[s]) == file]
            if here:
                dense = ctensors.to_dense(ct_layers._tensors(ckpt, group), num_bits=bits)
                entries += [(f"{group.name}.{s}", "I32", dense[s].shape, dense[s]) for s in here]
        write_safetensors(stage / Path(file).name, entries, _metadata(ckpt.headers[file].metadata))
        placed.update({name: Path(file).name for name, *_ in entries})
    _write_side_files(ckpt, stage, placed, {**ckpt.config, "version": CT_VERSION})
    return {"layers": len(word), "from": "ctensors"}


def _per_word_modules(ckpt: Checkpoint) -> dict[str, tuple[LayerGroup, int]]:
    """The modules whose bytes are in the per-word layout (CT-2.6), with their widths."""
    try:
        config, _ = ct_layout.parse_config(ckpt.config if ckpt.config is not None else {})
        groups = [g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0] if g.format == "ctensors"]
        schemes = ct_layout.module_schemes(config, [g.name for g in groups])
    except QFormatsError as err:
        raise _config_error(ckpt, err) from None
    written = ct_layers.written_layout(config)
    word, doubt = {}, []
    for group in groups:
        scheme = schemes[group.name]
        if isinstance(scheme, str):
            continue
        layout, findings = ct_layers.bytes_layout(group.name, load_layer(ckpt, group), scheme.num_bits, written)
        if layout == "word":
            word[group.name] = (group, scheme.num_bits)
        doubt += [f for f in findings if f.code == "ctensors.layout.ambiguous"]
    if word and doubt:      # CT-4.7: the written version would settle, unseen, what the bytes leave open
        raise fail("ctensors.layout.ambiguous", doubt[0].tensor, "in one layout: a module whose widths fit both is "
                   "copied as it is under a config whose version then says dense (CT-4.7); set the version that "
                   "wrote the checkpoint in config.json's quantization_config first (CT-2.6)",
                   f"{plural(len(doubt), 'module')} fitting both layouts beside {plural(len(word), 'module')} in "
                   "the per-word one", file=ckpt.file_of(doubt[0].tensor))
    return word


def _refuse_options(source: str, to: str, source_version: str | None, reader: str | None) -> None:
    """--source-version says what a GPTQ checkpoint's zeros are (GPTQ-8.3); --reader picks the zero points a
    real reader uses for v1 -> gptq_v2 (GPTQ-4.2). Neither means anything for another conversion."""
    if source_version is not None and source != "gptq":
        raise fail("argument.invalid", "source_version", "given only for a GPTQ checkpoint (what its stored zeros "
                   "really are, GPTQ-8.3)", f"{source_version} for a {SOURCE_LABELS[source]} checkpoint")
    if reader is not None:
        raise fail("argument.invalid", "reader", "given only to convert GPTQ v1 zeros to gptq_v2 (GPTQ-4.2)",
                   f"{reader} for {SOURCE_LABELS[source]} to {to}")


# -- reading: source module -> GPTQ v2 layer -----------------------------------------------------------------

def _reader(ckpt: Checkpoint, source: str, groups: list[LayerGroup], source_version: str | None,
            rounded: dict[str, tuple[int, int, float]] | None = None, against: set[str] | None = None):
    """The function reading one module of ``source`` into a :class:`Module`; errors name module and file.
    ``rounded`` (compressed-tensors only): where scales may be rounded to float16, and their report (CT-4.6)."""
    if source == "gptq":
        read = _gptq_reader(ckpt, groups, source_version, set() if against is None else against)
    elif source == "awq":
        read = _awq_reader(ckpt)
    else:
        read = _ct_reader(ckpt, groups, rounded)

    def named(group: LayerGroup) -> Module:
        file = ckpt.file_of(group.tensors[CODES[source]])
        try:
            layer, bits, group_size, symmetric = read(group)
        except QFormatsError as err:
            raise (err.within(group.name) if err.tensor != group.name else err).with_file(err.file or file) from None
        return Module(group, layer, bits, group_size, symmetric, file)

    return named


def _without_bias(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Biases keep their name in every format: copied unchanged, never converted."""
    return {k: v for k, v in t.items() if k != "bias"}


def _centred(layer: Any, bits: int, group_size: int) -> bool:
    _, zeros = gptq.unpack(layer, bits=bits, version="v2", group_size=group_size)
    return bool((zeros == 1 << (bits - 1)).all())


def _config_error(ckpt: Checkpoint, err: QFormatsError) -> QFormatsError:
    return err.with_file(ckpt.configs[0].file) if ckpt.configs else err


def _gptq_reader(ckpt: Checkpoint, groups: list[LayerGroup], source_version: str | None, against: set[str]):
    from .tools import VERSIONS

    try:
        config = require_config(ckpt)
        params_of = modules_params(config, [g.name for g in groups])
    except QFormatsError as err:
        raise _config_error(ckpt, err) from None
    if source_version is not None and VERSIONS.get(source_version) is None:
        raise fail("argument.invalid", "source_version", "v1 or v2", source_version)

    def read(group: LayerGroup) -> tuple[Any, int, int, bool]:
        p = params_of[group.name]
        if p.excluded_by is not None:
            raise fail("gptq.config.tensor_mismatch", "qweight", f"absent: dynamic rule {p.excluded_by!r} leaves "
                       "this module unquantized (GPTQ-6.6)", "present")
        t = _without_bias(load_layer(ckpt, group))
        dims, checked = gptq_checked(t, p.bits, p.group_size)        # names the tensor before anything reads it
        told = VERSIONS[source_version] if source_version else None
        if refuse_contradicted(group.name, checked, p, config, told):
            against.add(group.name)
        version = told or p.version
        layer = gptq.convert(t, bits=p.bits, to="v2", group_size=p.group_size) if version == "v1" else t
        return layer, p.bits, dims.group_size, p.sym and _centred(layer, p.bits, dims.group_size)

    return read


def refuse_contradicted(name: str, t: dict[str, np.ndarray], p: ModuleParams, config: GPTQConfig,
                        told: str | None = None) -> bool:
    """GPTQ-7.4: a layer whose zeros testify against its label (GPTQ-8.1 exact or GPTQ-8.2 statistical, the
    evidence ``validate`` reports as ``gptq.label.mismatch``) is not converted until told which reading to trust:
    converting fields the label misnames shifts every zero point by one, and the output's label then agrees with
    its fields, so no validator could see the damage. ``t`` as ``checked_tensors`` returns it.

    ``told``: the version ``--source-version`` names; then nothing is refused and the answer is whether the
    evidence contradicts that reading (the caller says so: the output can no longer show it)."""
    evidence = label_evidence(t["qzeros"], p.bits, qweight=t["qweight"], g_idx=t["g_idx"], sym=p.sym)
    if told is not None or evidence.verdict not in ("v1", "v2") or evidence.verdict == p.version:
        return told is not None and evidence.verdict in ("v1", "v2") and evidence.verdict != told
    how = "exact" if evidence.method == "symmetric-exact" else "statistical"
    raise fail("gptq.label.mismatch", f"{name}.qzeros",
               f"{p.version} fields as the label says; convert follows the bytes or the label only when told which "
               f"(GPTQ-7.4): pass --source-version {evidence.verdict} to read them as the zeros say, or "
               f"--source-version {p.version} to read them as labelled",
               f"{evidence.verdict} fields by {how} evidence ({evidence.detail}); the label's writer: "
               f"{named_writer(config).detail}")


def _awq_reader(ckpt: Checkpoint):
    try:
        config, _ = awq_layout.parse_config(ckpt.config)
    except QFormatsError as err:
        raise _config_error(ckpt, err) from None

    def read(group: LayerGroup) -> tuple[Any, int, int, bool]:
        hit = next((key for key in config.modules_to_not_convert or () if key in group.name), None)
        if hit is not None:
            raise fail("awq.config.tensor_mismatch", "qweight", f"absent: modules_to_not_convert entry {hit!r} "
                       "leaves this module unquantized (AWQ-5.2)", "present")
        t = _without_bias(load_layer(ckpt, group))
        if awq_gptq_shaped(t):        # AWQ-4.4: the bytes contradict version 'gemm'; no reading is AWQ GEMM's
            raise fail("awq.label.mismatch", "qweight", f"packed along the output axis, as the config's version "
                       f"{config.version!r} says (AWQ-2.3); convert reads AWQ GEMM bytes only and no option makes "
                       "other bytes AWQ GEMM (AWQ-4.4)", f"{tuple(t['qweight'].shape)} with scales "
                       f"{tuple(t['scales'].shape)}: packed along the input axis (GPTQ or AutoAWQ GEMV bytes)")
        layer = awq.to_gptq(t, group_size=config.group_size)
        return layer, awq_layout.BITS, config.group_size, False     # AWQ GEMM always stores zero points

    return read


def _ct_reader(ckpt: Checkpoint, groups: list[LayerGroup], rounded: dict[str, tuple[int, int, float]] | None):
    try:
        config, _ = ct_layout.parse_config(ckpt.config if ckpt.config is not None else {})
        schemes = ct_layout.module_schemes(config, [g.name for g in groups])
    except QFormatsError as err:
        raise _config_error(ckpt, err) from None

    def read(group: LayerGroup) -> tuple[Any, int, int, bool]:
        scheme = schemes[group.name]
        if isinstance(scheme, str):
            raise fail("ctensors.config.tensor_mismatch", "weight_packed", "in a module a pack-quantized config "
                       "group targets (CT-5.3)", scheme)
        t = _without_bias(load_layer(ckpt, group))
        scale = group.tensors.get("weight_scale")      # absent: to_gptq names it (tensor.missing)
        if scale is not None and ckpt.tensor_info(scale).dtype == "BF16":     # widened exactly (CT-2.1)
            t["weight_scale"] = (np.asarray(t["weight_scale"]).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        layout, _ = ct_layers.bytes_layout(group.name, t, scheme.num_bits, ct_layers.written_layout(config))
        layer = _ct_to_gptq(group.name, t, scheme.num_bits, layout, rounded)
        gs = layer.group_size
        return layer, scheme.num_bits, gs, scheme.symmetric and _centred(layer, scheme.num_bits, gs)

    return read


def _ct_to_gptq(name: str, t: dict[str, Any], bits: int, layout: str,
                rounded: dict[str, tuple[int, int, float]] | None) -> Any:
    """``ctensors.to_gptq``; scales float16 cannot hold exactly are refused, or rounded when ``rounded`` is
    given (``--round-scales``, CT-4.6), which then records (scales rounded, weights changed, largest change)."""
    try:
        with np.errstate(over="ignore"):          # a scale past float16's range is refused, not warned about
            layer = ctensors.to_gptq(t, num_bits=bits, layout=layout)
    except QFormatsError as err:      # every other refusal of CT-4.1 comes first, as without the option
        if err.code != "ctensors.convert.unrepresentable" or err.tensor != "weight_scale":
            raise
        if rounded is None:
            raise fail(err.code, err.tensor, f"{err.constraint}; --round-scales rounds them to float16 and reports "
                       "the weights that change (CT-4.6)", err.actual) from None
        t = {**t, "weight_scale": _rounded_scales(t, bits, layout, name, rounded)}
        layer = ctensors.to_gptq(t, num_bits=bits, layout=layout)
    if rounded is not None:
        rounded.setdefault(name, (0, 0, 0.0))
    return layer


def _rounded_scales(t: dict[str, Any], bits: int, layout: str, name: str,
                    rounded: dict[str, tuple[int, int, float]]) -> np.ndarray:
    """CT-4.6: the scales rounded to float16 (nearest, ties to even); a weight ``s * (q - zp)`` changes by exactly
    ``|q - zp| * |s - fp16(s)|``, so it changes where its scale was rounded and ``q != zp``."""
    s = np.asarray(t["weight_scale"])
    with np.errstate(over="ignore"):
        s16 = s.astype(np.float16)
    if np.isinf(s16).any():
        idx = [int(i) for i in np.argwhere(np.isinf(s16))[0]]
        raise fail("ctensors.convert.unrepresentable", "weight_scale", "within float16's range (|s| <= 65504) to be "
                   "rounded to float16 (CT-4.6)", f"{float(s[tuple(idx)])!r} at {idx}")
    q, zp = ctensors.unpack(t, num_bits=bits, layout=layout)          # (N, K), (N, G) or None
    n, g = s.shape
    step = np.abs(s.astype(np.float64) - s16.astype(np.float64))       # exact: both are float32 numbers
    off = q.reshape(n, g, -1).astype(np.int16) - (0 if zp is None else zp.astype(np.int16)[:, :, None])
    moved = np.count_nonzero((off != 0) & (step > 0)[:, :, None])
    largest = float((np.abs(off).max(axis=2) * step).max())            # exact in float64: |q - zp| <= 255
    rounded[name] = (int(np.count_nonzero(step)), int(moved), largest)
    return s16


# -- the one scheme the target config states ----------------------------------------------------------------

@dataclass(frozen=True)
class Scheme:
    bits: int
    group_size: int
    symmetric: bool


def _one_scheme(modules: list[Module], target: str) -> Scheme:
    """The bits and group size every module shares, and whether all are symmetric: the written config states
    one scheme (one AWQ config, one compressed-tensors config group, GPTQ without ``dynamic`` rules)."""
    first = modules[0]
    code = "awq.convert.unrepresentable" if target == "awq" else "ctensors.convert.unrepresentable"
    for m in modules[1:]:
        for what, mine, theirs in (("bits", m.bits, first.bits), ("group_size", m.group_size, first.group_size)):
            if mine != theirs:
                raise fail(code, f"{m.group.name}.{what}", f"{theirs}, as in {first.group.name}: qformats convert "
                           "writes one scheme for every module (AWQ-4.3, CT-4.4)", mine, file=m.file)
    return Scheme(first.bits, first.group_size, all(m.symmetric for m in modules))


def _unquantized(ckpt: Checkpoint, quantized: set[str], target: str) -> list[str]:
    """Modules holding a 2-D ``weight`` that stay unquantized (lm_head ...): AWQ's ``modules_to_not_convert``,
    compressed-tensors' ``ignore``. The checkpoint does not record which modules are Linear, so every such
    module is listed (an embedding listed there is skipped by both readers, which quantize Linear only).
    AutoAWQ matches entries as substrings: one inside a quantized module's name is refused (AWQ-5.2)."""
    names = sorted(n.rpartition(".")[0] for n in ckpt.tensor_names()
                   if n.endswith(".weight") and len(ckpt.tensor_info(n).shape) == 2)
    out = [n for n in names if n not in quantized]
    if target == "awq":
        for entry in out:
            hit = next((q for q in sorted(quantized) if entry in q), None)
            if hit is not None:
                raise fail("awq.convert.unrepresentable", "modules_to_not_convert", f"entries that are no substring "
                           f"of a quantized module's name (AutoAWQ matches substrings, AWQ-5.2): {entry!r} is in "
                           f"{hit!r}", entry)
    return out


# -- writing -------------------------------------------------------------------------------------------------

def _target_tensors(module: Module, to: str, scheme: Scheme) -> dict[str, np.ndarray]:
    """The module's tensors in the target format, by suffix (GPTQ-7, AWQ-4.2, CT-4.2)."""
    layer, bits, gs = module.layer, module.bits, module.group_size
    if to in ("gptq", "gptq_v2"):
        if to == "gptq":
            layer = gptq.convert(layer, bits=bits, to="v1", group_size=gs)      # refuses zero points 0 (GPTQ-7.2)
        names = QUANT_SUFFIXES["gptq"]
    elif to == "awq_gemm":
        layer = awq.from_gptq(layer, bits=bits, version="v2", group_size=gs)
        names = QUANT_SUFFIXES["awq"]
    else:
        layer = ctensors.from_gptq(layer, bits=bits, version="v2", group_size=gs, symmetric=scheme.symmetric)
        names = QUANT_SUFFIXES["ctensors"]
    get = layer.get if isinstance(layer, dict) else lambda name: getattr(layer, name, None)
    return {name: np.ascontiguousarray(get(name)) for name in names if get(name) is not None}


def _converted(ckpt: Checkpoint, module: Module, to: str, scheme: Scheme) -> dict[str, np.ndarray]:
    """:func:`_target_tensors`, errors naming the module and its file; a bias the target would round is refused."""
    name = module.group.name
    try:
        bias = module.group.tensors.get("bias")
        dtype = ckpt.tensor_info(bias).dtype if bias else "F16"
        if to != "compressed_tensors" and dtype != "F16":
            raise fail("awq.convert.unrepresentable" if to == "awq_gemm" else "ctensors.convert.unrepresentable",
                       "bias", "float16: AWQ GEMM and GPTQ store float16 biases (AWQ-2.1, GPTQ-2.1); converting "
                       "it would round", dtype)
        return _target_tensors(module, to, scheme)
    except QFormatsError as err:
        raise err.within(name).with_file(module.file) from None


def _write_shards(ckpt: Checkpoint, stage: Path, groups: list[LayerGroup], read, to: str,
                  scheme: Scheme) -> dict[str, str]:
    """Each weight file rewritten: quantized tensors replaced by the target's, all else copied byte for byte.
    Returns {tensor name: file name} of everything written."""
    dropped = {name for g in groups for suffix, name in g.tensors.items() if suffix != "bias"}
    by_file: dict[str, list[LayerGroup]] = {}
    for g in groups:
        by_file.setdefault(ckpt.file_of(g.tensors[CODES[g.format]]), []).append(g)
    placed: dict[str, str] = {}
    for file in ckpt.files:
        entries: list[tuple[str, str, tuple[int, ...], Any]] = []
        for name in ckpt.tensor_names():
            if ckpt.file_of(name) == file and name not in dropped:
                info = ckpt.tensor_info(name)
                entries.append((name, info.dtype, tuple(info.shape), ckpt.tensor(name)))
        for group in by_file.get(file, []):
            tensors = _converted(ckpt, read(group), to, scheme)
            entries += [(f"{group.name}.{suffix}", ST_DTYPES[a.dtype.name], a.shape, a)
                        for suffix, a in tensors.items()]
        header = ckpt.headers[file]
        write_safetensors(stage / Path(file).name, entries, _metadata(header.metadata))
        placed.update({name: Path(file).name for name, *_ in entries})
    return placed


def _metadata(metadata: dict[str, str] | None) -> dict[str, str] | None:
    """The source file's metadata; a ``producer`` says qformats rewrote what that producer wrote."""
    if not metadata or "producer" not in metadata:
        return metadata
    return {**metadata, "producer": f"qformats {__version__} convert (from {metadata['producer']})"}


def write_safetensors(path: Path, entries: Iterable[tuple[str, str, tuple[int, ...], Any]],
                      metadata: dict[str, str] | None = None) -> None:
    """A safetensors file from (name, safetensors dtype, shape, array) entries, each written as its raw bytes:
    BF16 and F8 tensors (which NumPy reads as uint16/uint8) keep their dtype. Largest items first and names
    sorted within, as the safetensors writer orders them, so every tensor starts aligned to its item size."""
    from .containers.safetensors import DTYPES

    items = sorted(entries, key=lambda e: (-DTYPES[e[1]][0], e[0]))
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, dtype, shape, array in items:
        size = np.asarray(array).nbytes
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as fh:
        fh.write(len(blob).to_bytes(8, "little"))
        fh.write(blob)
        for _, _, _, array in items:
            fh.write(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)   # one tensor in memory at a time


def copy_side_file(src: Path, dst: Path) -> None:
    """A file beside the weights (tokenizer, generation config ...) copied byte for byte, streamed; one that
    cannot be read (a link to /proc/self/mem, a vanished file) is refused naming it (CKPT-1.2), never a
    traceback. The callers copy regular files only: a FIFO or a device is not a side file."""
    try:
        shutil.copy2(src, dst)
    except OSError as exc:
        raise path_error(exc, str(src)) from None


def _write_side_files(ckpt: Checkpoint, stage: Path, placed: dict[str, str], quantization_config: dict) -> None:
    """config.json with the target's quantization_config, the index rewritten, other files copied unchanged;
    the source's own quantize_config.json / quant_config.json / hf_quant_config.json are not carried over (they
    name its format, CKPT-4.1)."""
    root = Path(ckpt.path) if Path(ckpt.path).is_dir() else Path(ckpt.path).parent
    index = Path(ckpt.index_file).name if ckpt.index_file else None
    source_configs = {name for name, _ in CONFIG_FILES} - {"config.json"}
    for item in root.iterdir():
        if not item.is_file() or item.name.endswith(".safetensors") or item.name in source_configs:
            continue
        if item.name == index:
            _write_index(item, stage / item.name, placed, stage)
        elif item.name != "config.json":
            copy_side_file(item, stage / item.name)
    config = dict(ckpt.model_config or {})
    config["quantization_config"] = quantization_config
    (stage / "config.json").write_text(jsontext.dumps(config, indent=2) + "\n")


def _write_index(source: Path, dst: Path, placed: dict[str, str], stage: Path) -> None:
    """The shard index with the new tensor names; metadata kept, total_size recomputed when present (CKPT-3)."""
    raw = json.loads(source.read_text())
    metadata = raw.get("metadata")
    if metadata is None:
        metadata = {}
    if isinstance(metadata, dict) and "total_size" in metadata:     # any other metadata is kept as it was
        from .containers.safetensors import read_header

        metadata = {**metadata, "total_size": sum(info.nbytes for f in sorted(set(placed.values()))
                                                  for info in read_header(str(stage / f)).tensors.values())}
    dst.write_text(jsontext.dumps({**raw, "metadata": metadata, "weight_map": dict(sorted(placed.items()))},
                              indent=2) + "\n")


# -- the target's quantization_config ------------------------------------------------------------------------

def _target_config(to: str, scheme: Scheme, excluded: list[str], quantized: set[str]) -> dict[str, Any]:
    if to == "awq_gemm":      # AutoAWQ 0.2.9 AwqConfig.to_transformers_dict, key order included (AWQ-5.1)
        return {"quant_method": "awq", "zero_point": True, "group_size": scheme.group_size, "bits": scheme.bits,
                "version": "gemm", "modules_to_not_convert": excluded or None}
    if to == "compressed_tensors":
        return _ct_config(scheme, excluded)
    label = "gptq_v2" if to == "gptq_v2" else "gptq"   # GPTQModel 7.7 writes format, checkpoint_format (GPTQ-6.3)
    return {"bits": scheme.bits, "checkpoint_format": label, "desc_act": False, "format": label,
            "group_size": scheme.group_size, "lm_head": "lm_head" in quantized, "method": "gptq",
            "pack_dtype": "int32", "quant_method": "gptq", "sym": scheme.symmetric}


def _ct_config(scheme: Scheme, excluded: list[str]) -> dict[str, Any]:
    """As compressed-tensors 0.20.0 ``ModelCompressor.update_config`` writes it (CT-5.1), keys sorted as there."""
    channel = scheme.group_size == -1
    weights = {"dynamic": False, "group_size": None if channel else scheme.group_size, "num_bits": scheme.bits,
               "strategy": "channel" if channel else "group", "symmetric": scheme.symmetric, "type": "int"}
    group = {"format": ct_layout.PACKED, "input_activations": None, "output_activations": None,
             "targets": ["Linear"], "weights": weights}
    return {"config_groups": {"group_0": group}, "format": ct_layout.PACKED, "global_compression_ratio": None,
            "ignore": excluded, "kv_cache_scheme": None, "moe_sparsity_config": None,
            "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
            "transform_config": {}, "version": CT_VERSION}


def quantization_config(to: str, *, bits: int, group_size: int, symmetric: bool, excluded: list[str] | None = None,
                        quantized: set[str] | None = None) -> dict[str, Any]:
    """The ``quantization_config`` qformats writes for target ``to`` (``awq_gemm``, ``compressed_tensors``,
    ``gptq_v2``, ``gptq``): one scheme, as the target's library writes it (AWQ-4.3, CT-4.4)."""
    if to not in INT_TARGETS:
        raise fail("argument.invalid", "to", "gptq_v2, gptq, awq_gemm or compressed_tensors", to)
    return _target_config(to, Scheme(bits, group_size, symmetric), list(excluded or []), set(quantized or ()))
