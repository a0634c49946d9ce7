"""``qformats decode`` and ``qformats convert``: reference decoding and lossless GPTQ relabelling.

Neither ever writes to its input: outputs go to a temporary sibling and are renamed into place
only when complete, and an output path inside the input is refused.
"""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import jsontext
from .containers.checkpoint import CONFIG_FILES, INDEX_SUFFIX, Checkpoint, open_checkpoint
from .containers.gguf import PLAIN_TYPES
from .convert import (ST_DTYPES, TARGETS, convert_across, copy_side_file, refuse_contradicted, source_format,
                      write_safetensors)
from .errors import QFormatsError, fail
from .formats import gptq
from .formats.gptq.checks import checked_tensors
from .formats.gptq.layers import require_config
from .formats.gptq.layout import modules_params
from .formats import registry
from .layers import LayerGroup, load_layer
from .remote import is_remote
from .report import plural
from .validate import group_layers

__all__ = ["decode", "convert", "read_layer", "write_page"]


def _input_paths(path: str) -> tuple[Path, set[Path]]:
    """What an output must stay out of (QF-1.2): the input itself, and the files read beside it. A shard index
    stands for its whole directory (its shards, configs and index, CKPT-2.1); a single ``.safetensors`` file
    reads the config files beside it (CKPT-4)."""
    src = Path(os.path.realpath(path))       # never raises on a link loop
    if src.name.lower().endswith(INDEX_SUFFIX):
        return src.parent, set()
    if src.name.lower().endswith(".safetensors"):
        return src, {src.parent / name for name, _ in CONFIG_FILES}
    return src, set()


def _within_input(path: str, real: Path) -> bool:
    """QF-1.2: whether the resolved output path ``real`` is the input at ``path``, inside it, or a file read beside it."""
    src, beside = _input_paths(path)
    return real == src or src in real.parents or real in beside


def _check_output(path: str, out: str, *, force: bool = False) -> Path:
    """The resolved output path: outside the input (a symbolic link into it included), not a
    directory, and new unless ``force`` (an existing file is replaced only when asked)."""
    dst = Path(os.path.realpath(out))
    if _within_input(path, dst):
        raise fail("argument.invalid", "output", "outside the input checkpoint (qformats never writes to its input)",
                   str(out))
    if dst.is_dir():
        raise fail("argument.invalid", "output", "a file path, not an existing directory", str(out))
    if not force and (dst.exists() or Path(out).is_symlink()):
        raise fail("argument.invalid", "output", "a path that does not exist yet (--force replaces it)", str(out))
    return dst


def write_page(out: str | Path, text: str, *, inputs: tuple[str, ...] = (), option: str = "--html") -> Path:
    """QF-1.3: a page or report file (``--html``, ``--junit``, ``audit summarize``) replaces whatever is at ``out``
    as a whole: written to a temporary name beside it and renamed over the name, so a symbolic link there is
    replaced, never written through, and a FIFO never blocks the writer. Never inside one of ``inputs`` (QF-1.2);
    a directory at ``out``, or a folder that cannot be written, is ``argument.invalid`` naming ``option``."""
    dst, real = Path(out), Path(os.path.realpath(out))
    for path in inputs:
        if _within_input(path, real):
            raise fail("argument.invalid", option, "outside the input (qformats never writes to its input)",
                       str(out), file=str(out))
    if dst.is_dir() and not dst.is_symlink():
        raise fail("argument.invalid", option, "a file path, not an existing directory", str(out), file=str(out))
    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name[:200]}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, dst)
    except (OSError, UnicodeError) as err:     # no such folder, no permission, a name the file system refuses
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise fail("argument.invalid", option, "a file path that can be written",
                   getattr(err, "strerror", None) or str(err), file=str(out)) from None
    return dst


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

    A name with a shell wildcard (``*``, ``?``, ``[``; ``model.layers.0.*``) selects every quantized layer
    one of whose names it matches, and every unquantized tensor it matches (copied as stored); ``all_tensors``
    writes the whole model so: every quantized layer decoded, every other tensor (biases, embeddings, norms)
    copied byte for byte, dtype kept. One layer is in memory at a time. A plain name that matches nothing is
    refused naming the closest names.
    """
    dst = _check_output(path, out, force=bool(options.pop("force", False)))
    every = bool(options.pop("all_tensors", False))
    if not names and not every:
        raise fail("argument.invalid", "tensor", "at least one layer or tensor name, or all_tensors (--all)", "none")
    with open_checkpoint(path) as ckpt:
        if ckpt.kind == "gguf":
            _refuse_reader(options, "a GGUF file")
            plan = _gguf_plan(ckpt, names, every)
        else:
            plan = _safetensors_plan(ckpt, names, every, options)
        notes = _save_streamed(plan, dst)
    return dict(sorted(notes.items()))


GLOB_CHARS = frozenset("*?[")
# What decode writes for a tensor: its name, a thunk giving (array, safetensors dtype, note), and whether the
# note goes into the file's metadata (decoded layers: yes; copies: no, a whole model has thousands).
Planned = tuple[str, Callable[[], tuple[np.ndarray, str, str]], bool]


def _is_glob(name: str) -> bool:
    return any(c in GLOB_CHARS for c in name)


def _no_match(name: str, candidates: list[str], code: str, constraint: str, file: str | None = None) -> QFormatsError:
    """A name that matches nothing, refused with the closest names (difflib) as a suggestion."""
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    if close:
        constraint += f"; did you mean {' or '.join(close)}?"
    return fail(code, "tensor", constraint, name, file=file)


def _safetensors_plan(ckpt: Checkpoint, names: list[str], every: bool, options: dict[str, Any]) -> list[Planned]:
    """Quantized layers decoded by their format (one at a time, when written); other tensors copied as stored."""
    layers = {g.name: g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0]}
    quantized = {full: g.name for g in layers.values() for suffix, full in g.tensors.items()
                 if not suffix.endswith("bias")}      # gpt-oss experts' gate_up_proj_bias: copied as stored
    chosen: dict[str, LayerGroup] = {}
    copies: dict[str, None] = {}
    for name in names:
        if _is_glob(name):
            hits = [g for g in layers.values() if fnmatch.fnmatchcase(g.name, name) or any(
                fnmatch.fnmatchcase(full, name) for suffix, full in g.tensors.items() if suffix != "bias")]
            plain = [t for t in ckpt.tensor_names() if t not in quantized and fnmatch.fnmatchcase(t, name)]
            if not hits and not plain:
                raise _no_match(name, [], "argument.invalid", "a pattern matching a tensor or layer of this "
                                f"checkpoint ({plural(len(ckpt.tensor_names()), 'tensor')})")
            chosen.update({g.name: g for g in hits})
            copies.update(dict.fromkeys(plain))
            continue
        group = layers.get(name) or layers.get(name.rsplit(".", 1)[0])
        if group is None:
            raise _no_match(name, sorted(set(layers) | set(quantized) | {f"{g}.weight" for g in layers}),
                            "argument.invalid", f"a quantized layer of this checkpoint ({plural(len(layers), 'layer')}, "
                            f"e.g. {next(iter(layers), 'none')})")
        chosen[group.name] = group
    if every:
        chosen = dict(layers)
        copies = dict.fromkeys(t for t in ckpt.tensor_names() if t not in quantized)
    if any(g.format != "gptq" for g in chosen.values()):
        _refuse_reader(options, "a " + next(f"{g.format} layer ({g.name})" for g in chosen.values() if g.format != "gptq"))
    plan: list[Planned] = [(f"{g.name}.{out}", functools.partial(_decoded_layer, ckpt, g, {**options, **extra}), True)
                           for g in chosen.values() for out, extra in _outputs(g)]
    written = {name for name, _, _ in plan}
    return plan + [(t, functools.partial(_copied, ckpt, t), False) for t in copies if t not in written]


def _outputs(group: LayerGroup) -> list[tuple[str, dict[str, str]]]:
    """The weights a module decodes to: ``weight``, or those its format's ``outputs(group)`` names (gpt-oss
    experts: one per projection, spec/fp4.md FP4-3.8), each asked for with ``output=``."""
    outputs = getattr(registry.FACES[group.format].layers, "outputs", None)
    return [("weight", {})] if outputs is None else [(out, {"output": out}) for out in outputs(group)]


def _decoded_layer(ckpt: Checkpoint, group: LayerGroup, options: dict[str, Any]) -> tuple[np.ndarray, str, str]:
    try:
        w, note = registry.FACES[group.format].layers.decode(ckpt, group, **options)
    except QFormatsError as err:
        raise err.within(group.name) if err.tensor != group.name else err from None
    w = np.ascontiguousarray(w)
    return w, ST_DTYPES[w.dtype.name], note


def _copied(ckpt: Checkpoint, name: str) -> tuple[np.ndarray, str, str]:
    """A tensor as stored: its raw bytes and its safetensors dtype (BF16 and F8 included)."""
    dtype = ckpt.tensor_info(name).dtype
    return np.asarray(ckpt.tensor(name)), dtype, f"copied as stored ({dtype})"


def _gguf_plan(ckpt: Checkpoint, names: list[str], every: bool) -> list[Planned]:
    """GGUF tensors by name or pattern: block types decoded to float32 (rows, n); with a pattern or all_tensors,
    plain-typed tensors (F32, F16, BF16 widened exactly ...) written as their arrays."""
    every_name = [t.name for t in ckpt.gguf.tensors]
    known = set(every_name)
    chosen: dict[str, bool] = {}       # name -> asked by its plain name (plain types then refused, as before)
    for name in names:
        if _is_glob(name):
            hits = [t for t in every_name if fnmatch.fnmatchcase(t, name)]
            if not hits:
                raise _no_match(name, [], "tensor.missing", f"a pattern matching a tensor of this file "
                                f"({plural(len(every_name), 'tensor')})", file=ckpt.gguf.file)
            chosen.update({t: chosen.get(t, False) for t in hits})
        elif name not in known:
            raise _no_match(name, every_name, "tensor.missing", "a tensor of this file", file=ckpt.gguf.file)
        else:
            chosen[name] = True
    if every:
        chosen = {t: chosen.get(t, False) for t in every_name}
    return [(name, functools.partial(_gguf_tensor, ckpt, name, exact), True) for name, exact in chosen.items()]


def _gguf_tensor(ckpt: Checkpoint, name: str, exact: bool) -> tuple[np.ndarray, str, str]:
    info = ckpt.gguf.tensor(name)
    if not exact and info.type_name in PLAIN_TYPES:
        a = np.ascontiguousarray(ckpt.gguf.tensor_array(name))
        return a, ST_DTYPES[a.dtype.name], f"{a.dtype.name} {info.type_name} as stored, row-major"
    w, note = _decode_gguf(ckpt, name)
    return np.ascontiguousarray(w), ST_DTYPES[w.dtype.name], note


def _save_streamed(plan: list[Planned], dst: Path) -> dict[str, str]:
    """Write the plan as one safetensors file, one tensor in memory at a time: each tensor's bytes go to a
    scratch file of its item size as it is made, then the header and the scratch files (largest items first,
    so every tensor starts aligned to its item size) are copied into a sibling renamed to ``dst`` (QF-1.2:
    nothing is written to the input, nothing half-written at ``dst``)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        header, layout, notes = _stage_tensors(plan, stage)
        blob = json.dumps(header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % 8)
        with open(stage / "out", "wb") as fh:
            fh.write(len(blob).to_bytes(8, "little"))
            fh.write(blob)
            for size in sorted(layout, reverse=True):
                with open(stage / f"items{size}", "rb") as part:
                    shutil.copyfileobj(part, fh, 1 << 20)
        os.replace(stage / "out", dst)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return notes


def _stage_tensors(plan: list[Planned], stage: Path) -> tuple[dict[str, Any], dict[int, list], dict[str, str]]:
    """Each planned tensor made and appended to the scratch file of its item size; the header's entries."""
    from .containers.safetensors import DTYPES

    layout: dict[int, list[tuple[str, str, tuple[int, ...], int]]] = {}
    meta: dict[str, str] = {"producer": "qformats decode"}
    notes: dict[str, str] = {}
    files: dict[int, Any] = {}
    try:
        for name, make, in_metadata in plan:
            array, dtype, note = make()
            size = DTYPES[dtype][0]
            if size not in files:
                files[size] = open(stage / f"items{size}", "wb")
            files[size].write(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)
            layout.setdefault(size, []).append((name, dtype, tuple(array.shape), array.nbytes))
            del array                                  # before the next tensor is made: one in memory at a time
            notes[name] = note
            if in_metadata:
                meta[f"layout:{name}"] = note
    finally:
        for fh in files.values():
            fh.close()
    header: dict[str, Any] = {"__metadata__": meta}
    offset = 0
    for size in sorted(layout, reverse=True):
        for name, dtype, shape, nbytes in layout[size]:
            header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
    return header, layout, notes


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
            reader: str | None = None, round_scales: bool = False) -> dict[str, Any]:
    """Re-express every GPTQ layer's zeros in the other version (GPTQ-7); config relabelled.
    ``to="awq_gemm"`` / ``"compressed_tensors"``, or a GPTQ target for an AWQ GEMM or compressed-tensors
    checkpoint, converts across formats (``qformats.convert``, AWQ-4, CT-4); the answer then says ``from``.
    FP8 and FP4 checkpoints move between the layouts that agree (FP8-8, FP4-8): ``to="fp8"`` /
    ``"compressed_tensors"`` (FP8 block), ``"modelopt"`` / ``"compressed_tensors"`` (NVFP4, MXFP4),
    ``"gpt_oss_mxfp4"`` / ``"compressed_tensors"`` (gpt-oss experts).

    v1 -> v2 is lossless; v2 -> v1 is refused, with the count, when a zero point is 0
    (GPTQ-7.2). ``source_version`` overrides the config's label for a mislabelled checkpoint
    (GPTQ-8.3): when it equals the target only the label changes, the tensors are copied.
    Without it, a layer whose zeros contradict the label (exact or statistical evidence, GPTQ-8) is
    refused, since converting fields the label misnames would shift every zero point by one. Non-GPTQ tensors and every
    other file are copied unchanged. ``reader`` (v1 -> v2) stores the zero points that real reader
    uses instead of the spec's (``gptq.convert``): a GPTQModel-written v1 checkpoint with zero
    points 0 becomes the v2 checkpoint GPTQModel meant with ``reader="gptqmodel"``.

    A convert never hides a defect ``validate`` reports (GPTQ-7.4, AWQ-4.4, CT-4.7): zeros whose evidence
    (exact or statistical, GPTQ-8) contradicts the label are refused unless ``source_version`` or ``reader``
    says which reading to trust. ``round_scales`` (compressed-tensors sources) rounds scales float16 cannot
    hold; the answer's ``rounded_scales`` then says how many scales and weights changed and the largest change.
    """
    target = VERSIONS.get(to)
    if target is None and to not in TARGETS:
        raise fail("argument.invalid", "to", ", ".join(dict.fromkeys(("gptq_v2", "gptq", *TARGETS))), to)
    if is_remote(path):      # the output holds a copy of every file, so the input is downloaded either way
        raise fail("argument.invalid", "path", "a local checkpoint: convert copies every file of it (download it "
                   "first, e.g. `hf download ORG/REPO --local-dir DIR`)", path)
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
                                  source=source_format(ckpt), source_version=source_version, reader=reader,
                                  round_scales=round_scales)
        if round_scales:
            raise fail("argument.invalid", "round_scales", "given only to convert a compressed-tensors checkpoint to "
                       "GPTQ or AWQ GEMM, whose scales are float16 (CT-4.6)", "a GPTQ checkpoint")
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
        converted, against = {}, []
        for group in layers:
            t = load_layer(ckpt, group)
            p = params_of[group.name]
            try:
                _, checked = checked_tensors(t, p.bits, p.group_size)   # names the tensor before anything reads it
                told = source if source_version is not None else p.version if reader is not None else None
                if refuse_contradicted(group.name, checked, p, config, told):
                    against.append(group.name)
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
    return {"layers": len(layers), **({"against_evidence": against} if against else {})}


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
                if item.name == "config.json" and isinstance(raw.get("quantization_config"), dict):
                    raw["quantization_config"] = _converted_config(raw["quantization_config"], target)
                elif item.name != "config.json":
                    raw = _converted_config(raw, target)
                (stage / item.name).write_text(jsontext.dumps(raw, indent=2) + "\n")
            else:
                copy_side_file(item, stage / item.name)
