"""``qformats decode`` and ``qformats convert``: reference decoding and lossless GPTQ relabelling.

Neither ever writes to its input: outputs go to a temporary sibling and are renamed into place
only when complete, and an output path inside the input is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from .containers.checkpoint import Checkpoint, open_checkpoint
from .containers.gguf import PLAIN_TYPES
from .convert import ST_DTYPES, TARGETS, convert_across, copy_side_file, source_format, write_safetensors
from .errors import QFormatsError, fail
from .formats import gptq
from .formats.gptq.checks import checked_tensors
from .formats.gptq.layers import refuse_mislabelled, require_config
from .formats.gptq.layout import modules_params
from .formats import registry
from .layers import load_layer
from .report import plural
from .validate import group_layers

__all__ = ["decode", "convert", "read_layer"]


def _check_output(path: str, out: str, *, force: bool = False) -> Path:
    """The resolved output path: outside the input (a symbolic link into it included), not a
    directory, and new unless ``force`` (an existing file is replaced only when asked)."""
    src, dst = Path(os.path.realpath(path)), Path(os.path.realpath(out))   # never raises on a link loop
    if dst == src or src in dst.parents:
        raise fail("argument.invalid", "output", "outside the input checkpoint (qformats never writes to its input)",
                   str(out))
    if dst.is_dir():
        raise fail("argument.invalid", "output", "a file path, not an existing directory", str(out))
    if not force and (dst.exists() or Path(out).is_symlink()):
        raise fail("argument.invalid", "output", "a path that does not exist yet (--force replaces it)", str(out))
    return dst


def _atomic_save(tensors: dict[str, np.ndarray], dst: Path, metadata: dict[str, str] | None = None) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_layer(path: str, module: str) -> dict[str, np.ndarray]:
    """One quantized module's tensors by suffix (``qweight``, ``qzeros``, ...), copied out of the
    checkpoint at ``path``: what every format function takes as a layer. ``module`` is the full
    on-disk name without the suffix (``model.layers.0.mlp.down_proj``).

    In a GGUF file ``module`` is a tensor name: a block type's tensor comes back as ``{"blocks": uint8
    (rows, row bytes)}`` (what ``qformats.formats.ggml.dequantize(type, blocks)`` takes; ``inspect``
    names the type), a plain tensor as ``{"weight": array}`` in its row-major shape."""
    with open_checkpoint(path) as ckpt:
        if ckpt.kind == "gguf":
            info = ckpt.gguf.tensor(module)              # tensor.missing, naming the file
            if info.type_name in PLAIN_TYPES:
                return {"weight": np.array(ckpt.gguf.tensor_array(module))}
            return {"blocks": np.array(ckpt.gguf.tensor_rows(module))}
        layers = {g.name: g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0]}
        if module not in layers:
            raise fail("argument.invalid", "module", f"a quantized module of this checkpoint ({len(layers)}, e.g. "
                       f"{next(iter(layers), 'none')})", module)
        return {suffix: np.array(array) for suffix, array in load_layer(ckpt, layers[module]).items()}


def decode(path: str, names: list[str], out: str, **options: Any) -> dict[str, str]:
    """Decode the named layers (or tensors) with the reference reader into one safetensors file.

    Each format's ``layers.decode`` decides the dtype and says it: GPTQ and q4_K layers become
    float32 ``(out, in)``, SpQR layers float16 ``(out, in)`` in original column order unless
    ``permuted=True``. GPTQ layers use their module's parameters after ``dynamic`` overrides
    (GPTQ-6.6) and refuse a layer whose zeros contradict its label unless ``source_version`` says
    what they are (GPTQ-8.3). Returns ``{tensor written: what it holds}``; errors name the layer.
    """
    dst = _check_output(path, out, force=bool(options.pop("force", False)))
    decoded: dict[str, np.ndarray] = {}
    notes: dict[str, str] = {}
    with open_checkpoint(path) as ckpt:
        if ckpt.kind == "gguf":
            _refuse_reader(options, "a GGUF file")
            for name in names:
                decoded[name], notes[name] = _decode_gguf(ckpt, name)
        else:
            layers = {g.name: g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0]}
            for name in names:
                group = layers.get(name) or layers.get(name.rsplit(".", 1)[0])
                if group is None:
                    raise fail("argument.invalid", "tensor", f"a quantized layer of this checkpoint "
                               f"({plural(len(layers), 'layer')}, e.g. {next(iter(layers), 'none')})", name)
                if group.format != "gptq":
                    _refuse_reader(options, f"a {group.format} layer ({group.name})")
                try:
                    w, note = registry.FACES[group.format].layers.decode(ckpt, group, **options)
                except QFormatsError as err:
                    raise err.within(group.name) if err.tensor != group.name else err from None
                decoded[f"{group.name}.weight"], notes[f"{group.name}.weight"] = w, note
    _atomic_save({k: np.ascontiguousarray(v) for k, v in decoded.items()}, dst,
                 metadata={"producer": "qformats decode", **{f"layout:{k}": v for k, v in notes.items()}})
    return dict(sorted(notes.items()))


def _refuse_reader(options: dict[str, Any], what: str) -> None:
    """--reader emulates GPTQ readers (spec/gptq.md GPTQ-4.2); other formats have one reading."""
    if options.get("reader") is not None:
        raise fail("argument.invalid", "reader", "given only for GPTQ layers", f"{options['reader']} for {what}")
    options.pop("reader", None)


def _decode_gguf(ckpt: Checkpoint, name: str) -> tuple[np.ndarray, str]:
    info = ckpt.gguf.tensor(name)
    face = next((f for f in registry.FACES.values() if info.type_name in getattr(f.layers, "GGUF_TYPES", ())), None)
    if face is None:
        types = [t for f in registry.FACES.values() for t in getattr(f.layers, "GGUF_TYPES", ())]
        raise fail("argument.invalid", "tensor", f"a tensor of a type qformats decodes ({', '.join(types)})",
                   f"{name} ({info.type_name})")
    w = face.layers.decode_gguf(ckpt, name)
    return w, f"{w.dtype.name} (rows, n) from {info.type_name}"


def _converted_config(raw: dict[str, Any], target: str) -> dict[str, Any]:
    """The config relabelled: ``checkpoint_format`` always, GPTQModel's ``format`` alias when present."""
    label = "gptq_v2" if target == "v2" else "gptq"
    return raw | {"checkpoint_format": label} | ({"format": label} if "format" in raw else {})


VERSIONS = {"gptq_v2": "v2", "v2": "v2", "gptq": "v1", "gptq_v1": "v1", "v1": "v1"}


def _gptq_label(version: str) -> str:
    return "gptq_v2" if version == "v2" else "gptq"


def convert(path: str, out: str, *, to: str, source_version: str | None = None,
            reader: str | None = None) -> dict[str, Any]:
    """Re-express every GPTQ layer's zeros in the other version (GPTQ-7); config relabelled.
    ``to="awq_gemm"`` / ``"compressed_tensors"``, or a GPTQ target for an AWQ GEMM or compressed-tensors
    checkpoint, converts across formats (``qformats.convert``, AWQ-4, CT-4); the answer then says ``from``.

    v1 -> v2 is lossless; v2 -> v1 is refused, with the count, when a zero point is 0
    (GPTQ-7.2). ``source_version`` overrides the config's label for a mislabelled checkpoint
    (GPTQ-8.3): when it equals the target only the label changes, the tensors are copied.
    Without it, a layer whose zeros exactly contradict the label is refused, since converting
    fields the label misnames would shift every zero point by one. Non-GPTQ tensors and every
    other file are copied unchanged. ``reader`` (v1 -> v2) stores the zero points that real reader
    uses instead of the spec's (``gptq.convert``): a GPTQModel-written v1 checkpoint with zero
    points 0 becomes the v2 checkpoint GPTQModel meant with ``reader="gptqmodel"``.
    """
    target = VERSIONS.get(to)
    if target is None and to not in TARGETS:
        raise fail("argument.invalid", "to", "gptq_v2, gptq, awq_gemm or compressed_tensors", to)
    dst = _check_output(path, out)
    if dst.exists():
        raise fail("argument.invalid", "output", "a path that does not exist yet", str(out))
    with open_checkpoint(path) as ckpt:
        if ckpt.kind == "gguf":
            raise fail("argument.invalid", "path", "a GPTQ safetensors checkpoint" if target else
                       "a GPTQ, AWQ GEMM or compressed-tensors safetensors checkpoint", "a GGUF file")
        formats = {g.format for g in group_layers(ckpt.tensor_names(), ckpt.config)[0]}
        if target is None or formats & {"awq", "ctensors"}:
            return convert_across(ckpt, dst, to=to if target is None else _gptq_label(target),
                                  source=source_format(ckpt), source_version=source_version, reader=reader)
        config = require_config(ckpt)
        source = VERSIONS.get(source_version or config.version)
        if source is None:
            raise fail("argument.invalid", "source_version", "v1 or v2", source_version)
        if source == target and source_version is None:
            raise fail("argument.invalid", "to", f"a version other than the checkpoint's ({config.version})", to)
        if reader is not None and (source, target) != ("v1", "v2"):
            raise fail("argument.invalid", "reader", "given only to convert v1 zeros to gptq_v2", reader)
        layers = [g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0] if g.format == "gptq"]
        params_of = modules_params(config, [group.name for group in layers])
        converted = {}
        for group in layers:
            t = load_layer(ckpt, group)
            p = params_of[group.name]
            try:
                checked_tensors(t, p.bits, p.group_size)       # names the tensor before anything reads it
                if source_version is None:
                    refuse_mislabelled(group.name, t, p)
                if source == target:
                    continue
                layer = gptq.convert(t, bits=p.bits, to=target, group_size=p.group_size, reader=reader)
            except QFormatsError as err:
                raise err.within(group.name) if err.tensor != group.name else err from None
            converted[group.tensors["qzeros"]] = np.ascontiguousarray(layer.qzeros)
        dst.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))  # same filesystem: rename works
        try:
            _write_converted(ckpt, stage, converted, target)
            os.replace(stage / Path(path).name if _single_file(ckpt) else stage, dst)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return {"layers": len(layers)}


def _single_file(ckpt: Checkpoint) -> bool:
    """One .safetensors file given: the output is one file. A directory, or a shard index given by its
    file name, is a whole checkpoint: the output is a directory (its shards, index and configs)."""
    return Path(ckpt.path).is_file() and ckpt.kind != "sharded"


def _write_converted(ckpt: Checkpoint, stage: Path, converted: dict[str, np.ndarray], target: str) -> None:
    src_root = Path(ckpt.path) if Path(ckpt.path).is_dir() else Path(ckpt.path).parent
    for file in ckpt.files:
        names = [n for n in ckpt.tensor_names() if ckpt.file_of(n) == file]
        if not any(n in converted for n in names):  # untouched shard: the very same bytes
            shutil.copyfile(file, stage / Path(file).name)
            continue
        header = ckpt.headers[file]     # raw bytes: BF16/F8 tensors keep their dtype (NumPy reads them as uints)
        write_safetensors(stage / Path(file).name, [
            (n, ST_DTYPES[converted[n].dtype.name], converted[n].shape, converted[n]) if n in converted else
            (n, header.tensors[n].dtype, tuple(header.tensors[n].shape), ckpt.tensor(n)) for n in names],
            metadata=header.metadata)
    if _single_file(ckpt):
        return
    for item in src_root.iterdir():
        if item.is_file() and not item.name.endswith(".safetensors"):
            if item.name in ("config.json", "quantize_config.json", "quant_config.json"):
                raw = json.loads(item.read_text())
                if item.name == "config.json" and "quantization_config" in raw:
                    raw["quantization_config"] = _converted_config(raw["quantization_config"], target)
                elif item.name != "config.json":
                    raw = _converted_config(raw, target)
                (stage / item.name).write_text(json.dumps(raw, indent=2) + "\n")
            else:
                copy_side_file(item, stage / item.name)
