"""Checkpoint discovery: one safetensors file, a directory, a sharded directory, or a GGUF file.

(spec/checkpoints.md, clauses CKPT-1 to CKPT-4.) :func:`open_checkpoint` turns a path into a
:class:`Checkpoint`: which weight files make it up, the header of each (validated by
:mod:`qformats.containers.safetensors` or :mod:`qformats.containers.gguf`), which config files hold
a quantization config, and a name -> tensor view that memory-maps one tensor at a time::

    with open_checkpoint("ckpt_dir") as ckpt:     # raises QFormatsError
        ckpt.kind                                 # "safetensors" | "sharded" | "gguf"
        ckpt.configs[0].file, ckpt.configs[0].config   # where a quantization config was found
        for name in ckpt.tensor_names():
            info = ckpt.tensor_info(name)         # st TensorInfo or GGUFTensorInfo
            arr = ckpt.tensor(name)               # read-only, memory-mapped
        ckpt.findings                             # warnings (Finding), e.g. pickles skipped

Errors split in two (DESIGN.md §4 exit codes). A code in :data:`COULD_NOT_RUN_CODES` means the
path could not be read at all (missing, unreadable, symlink loop, nothing that looks like a model):
exit 2. Every other error code is a malformed or inconsistent checkpoint: a finding, verdict
invalid, exit 1. Codes in :data:`WARNING_CODES` never raise; they arrive in ``findings``.

Pickle files (``.bin``, ``.pt``, ``.pth``, ``.pkl``, ``.ckpt``, or pickle/zip magic bytes) are
never opened beyond their first four bytes: loading one executes arbitrary code (QF-1.2).
Reading is bounded: safetensors headers are O(header), index and config files are capped at
100 MB, tensor data is only ever memory-mapped on request.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import QFormatsError, brief, brief_ascii, fail
from ..findings import Finding, finding
from . import safetensors as st

__all__ = [
    "Checkpoint", "ConfigSource", "open_checkpoint", "path_error", "COULD_NOT_RUN_CODES", "WARNING_CODES",
    "PICKLE_SUFFIXES", "CONFIG_FILES", "MAX_JSON_SIZE", "MAX_JSON_VALUES", "SCHEMA_MODELS", "Files", "LOCAL",
    "REMOTE_SCHEMES",
]

CKPT_SPEC_VERSION = "0.1"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
# (file name, key holding the quantization config or None for the whole file), in the order
# qformats lists them: transformers/vLLM read config.json first, AutoGPTQ/GPTQModel the others.
# ModelOpt's hf_quant_config.json (CKPT-4.5) is read last: vLLM looks for it when config.json has none.
CONFIG_FILES: tuple[tuple[str, str | None], ...] = (
    ("config.json", "quantization_config"), ("quantize_config.json", None), ("quant_config.json", None),
    ("hf_quant_config.json", "quantization"))
INDEX_SUFFIX = ".safetensors.index.json"
PREFERRED_INDEX = "model.safetensors.index.json"
MAX_JSON_SIZE = 100_000_000          # index and config files; the safetensors header cap
# Parsed JSON takes up to ~27x its bytes in Python objects (a 99 MB config of "[]," took 2.6 GB and
# 21 s). Values are counted before parsing (each is opened by "[" or "{" or follows a ","): with 2^22
# the worst file measured (96 MB of 22-byte strings) takes 0.6 GB and 5.5 s to validate; a real
# index of 150k tensors holds ~300k values, a config a few thousand.
MAX_JSON_VALUES = 1 << 22
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")   # PROTO opcode, protocol 2..5
_ZIP_MAGIC = b"PK\x03\x04"           # torch.save's zip container holds a pickle
_GGUF_MAGIC = b"GGUF"
REMOTE_SCHEMES = ("hf://", "http://", "https://")

COULD_NOT_RUN_CODES = frozenset({"ckpt.path.missing", "ckpt.path.unreadable", "ckpt.path.symlink_loop",
                                 "ckpt.no_model",
                                 # REMOTE-3: the bytes could not be had; nothing is said about the checkpoint
                                 "remote.url.invalid", "remote.listing.invalid", "remote.extra.missing",
                                 "remote.header.too_large",
                                 "remote.not_found", "remote.unauthorized", "remote.rate_limited", "remote.http",
                                 "remote.range.ignored", "remote.short_read", "remote.size_mismatch"})
WARNING_CODES = st.WARNING_CODES | frozenset({
    "ckpt.pickle.skipped", "ckpt.index.tensor_unlisted", "ckpt.index.shard_unlisted",
    "ckpt.index.total_size", "ckpt.config.none", "ckpt.config.conflict",
    "ckpt.layer.extra", "ckpt.block.absent"})         # CKPT-5.4/5.5, found by qformats.completeness

Kind = Literal["safetensors", "sharded", "gguf"]


class ConfigSource(BaseModel):
    """A file that holds a quantization config: ``key`` is where in it (None: the whole file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = CKPT_SPEC_VERSION

    file: str
    key: str | None
    config: dict[str, Any]


SCHEMA_MODELS = (ConfigSource,)


def path_error(exc: OSError, file: str) -> QFormatsError:
    """CKPT-1: a path that cannot be read, as a could-not-run code.

    The readers (``safetensors.read_header``/``open_tensor``, ``gguf.read_gguf``) raise ``OSError``
    for such paths, a non-regular file included; discovery maps every one of them here.
    """
    if exc.errno == errno.ELOOP:
        return fail("ckpt.path.symlink_loop", None, "a path without a symbolic link loop", file, file=file)
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return fail("ckpt.path.missing", "path", "an existing file or directory", file, file=file)
    return fail("ckpt.path.unreadable", None, "a readable path", f"{exc.strerror or exc}", file=file)


def _stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as exc:
        raise path_error(exc, path) from None
    except ValueError:           # os.stat's answer to a NUL in the path (the API and audit --list can pass one)
        raise fail("ckpt.path.unreadable", None, "a path without NUL characters", path, file=path) from None


def _read_header(path: str) -> st.SafetensorsHeader:
    try:
        return st.read_header(path)
    except OSError as exc:
        raise path_error(exc, path) from None


def _read_bounded(path: str, code: str) -> bytes:
    """A whole small file (index or config), refused above MAX_JSON_SIZE before reading."""
    size = _stat(path).st_size
    if size > MAX_JSON_SIZE:
        raise fail(code, os.path.basename(path), f"at most {MAX_JSON_SIZE} bytes", size, file=path)
    try:
        with open(path, "rb") as fh:
            return fh.read(size)  # read(n) preallocates n bytes: never pass the cap itself
    except OSError as exc:
        raise path_error(exc, path) from None


class Files:
    """Where a checkpoint's files come from (REMOTE-1.4): the local filesystem here; :mod:`qformats.remote`
    supplies the same calls over HTTP range requests. Discovery asks only these, so the rules and error codes
    of CKPT-1..4 are one code path for both."""

    remote = False

    def listing(self, directory: str) -> dict[str, str]:
        return _listing(directory)

    def join(self, directory: str, name: str) -> str:
        return os.path.join(directory, name)

    def read_small(self, path: str, code: str) -> bytes:
        return _read_bounded(path, code)

    def header(self, path: str) -> st.SafetensorsHeader:
        return _read_header(path)

    def gguf(self, path: str) -> Any:
        from . import gguf  # lazy: the GGUF reader is only needed for GGUF input

        try:
            return gguf.read_gguf(path)  # structure only: payload rules belong to the format layer
        except OSError as exc:
            raise path_error(exc, path) from None

    def sniff(self, path: str) -> bytes:
        return _sniff(path)

    def check_exists(self, path: str) -> bool:
        """False for a shard the index names that does not exist; other OSErrors are could-not-run."""
        try:
            os.stat(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise path_error(exc, path) from None
        return True

    def tensor(self, header: st.SafetensorsHeader, name: str) -> np.ndarray:
        try:
            return st.open_tensor(header, name)
        except OSError as exc:
            raise path_error(exc, header.path) from None

    def subfolders(self, directory: str) -> list[str]:
        return _checkpoint_subfolders(directory)


LOCAL = Files()


def _load_json(path: str, code: str, *, dicts: bool, allow_nan: bool, io: Files = LOCAL) -> Any:
    """An index or config file through the header's strict decoder (``safetensors.load_json``)."""
    raw = io.read_small(path, code)
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1   # an upper bound, counted in C
    if values > MAX_JSON_VALUES:
        raise fail(code, os.path.basename(path), f"at most {MAX_JSON_VALUES} JSON values", f"up to {values}",
                   file=path)
    try:
        return st.load_json(raw, dicts=dicts, allow_nan=allow_nan)
    except ValueError as exc:  # UnicodeDecodeError included
        raise fail(code, os.path.basename(path), "UTF-8 JSON", str(exc)[:200], file=path) from None


def _sniff(path: str) -> bytes:
    """The first 16 bytes of a regular file, or b'' when it cannot be read (then it is no candidate)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16)
    except OSError:
        return b""


def _is_pickle_bytes(head: bytes) -> bool:
    return head[:2] in _PICKLE_MAGIC or head.startswith(_ZIP_MAGIC)


def _refuse_pickle(path: str, why: str) -> QFormatsError:
    return fail("ckpt.pickle.refused", os.path.basename(path),
                "safetensors or GGUF weights (pickles execute code when loaded and are never opened)", why, file=path)


class Checkpoint:
    """A discovered, header-validated checkpoint. Holds no tensor data until :meth:`tensor`.

    Attributes:
        kind: ``"safetensors"`` (one file, or an unindexed directory of them), ``"sharded"``
            (a directory with a ``*.safetensors.index.json``) or ``"gguf"``.
        path: the path given. ``files``: the weight files, in order. ``index_file``: or None.
        configs: every :class:`ConfigSource` found, in :data:`CONFIG_FILES` order.
        model_config: the whole ``config.json`` when there is one, else None.
        headers: file -> :class:`~qformats.containers.safetensors.SafetensorsHeader`.
        gguf: the open :class:`~qformats.containers.gguf.GGUFFile` for ``kind == "gguf"``.
        findings: warnings (codes in :data:`WARNING_CODES`), never errors.
    """

    def __init__(self, *, kind: Kind, path: str, files: tuple[str, ...], index_file: str | None = None,
                 configs: tuple[ConfigSource, ...] = (), model_config: dict[str, Any] | None = None,
                 headers: dict[str, st.SafetensorsHeader] | None = None, where: dict[str, str] | None = None,
                 gguf: Any = None, findings: tuple[Finding, ...] = (), io: Files = LOCAL) -> None:
        self.kind = kind
        self.io = io
        self.path = path
        self.files = files
        self.index_file = index_file
        self.configs = configs
        self.model_config = model_config
        self.headers: Mapping[str, st.SafetensorsHeader] = MappingProxyType(headers or {})
        self.gguf = gguf
        self.findings = findings
        self._where: dict[str, str] = dict(where or {})

    @property
    def config(self) -> dict[str, Any] | None:
        """The first quantization config found (:data:`CONFIG_FILES` order), or None."""
        return self.configs[0].config if self.configs else None

    def tensor_names(self) -> list[str]:
        """Every tensor name, sorted."""
        return sorted(self._where)

    def file_of(self, name: str) -> str:
        """The weight file holding ``name``."""
        try:
            return self._where[name]
        except KeyError:
            raise fail("tensor.missing", name, f"a tensor of this checkpoint ({len(self._where)} tensors)",
                       "absent", file=self.path) from None

    def tensor_info(self, name: str) -> Any:
        """The validated header entry: safetensors ``TensorInfo`` or ``GGUFTensorInfo``."""
        file = self.file_of(name)
        if self.gguf is not None:
            return self.gguf.tensor(name)
        return self.headers[file].tensors[name]

    def tensor(self, name: str) -> np.ndarray:
        """One tensor, memory-mapped read-only (safetensors: see ``open_tensor`` for BF16/F8).

        GGUF: plain types (F32, F16, BF16 widened to float32, integers) as arrays in NumPy shape;
        block-quantized types as their ``(rows, row_bytes)`` uint8 block rows.
        """
        file = self.file_of(name)
        if self.gguf is not None:
            from .gguf import PLAIN_TYPES

            if self.gguf.tensor(name).type_name in PLAIN_TYPES:
                return self.gguf.tensor_array(name)
            return self.gguf.tensor_rows(name)
        return self.io.tensor(self.headers[file], name)

    def close(self) -> None:
        if self.gguf is not None:
            self.gguf.close()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Checkpoint({self.path!r}, kind={self.kind!r}, files={len(self.files)}, "
                f"tensors={len(self._where)}, configs={[c.file for c in self.configs]})")


# -- single files ----------------------------------------------------------------------------

def _open_gguf(file: str, path: str, io: Files = LOCAL) -> Checkpoint:
    gf = io.gguf(file)
    # A GGUF file without tensors (vocab-only, as llama.cpp ships them) is a well-formed container
    # (CKPT-2.5): the validator finds nothing to check in it (QF-5.1, could not run).
    return Checkpoint(kind="gguf", path=path, files=(file,), gguf=gf, where={t.name: file for t in gf.tensors},
                      io=io)


def _open_file(file: str, io: Files = LOCAL, directory: str | None = None) -> Checkpoint:
    """CKPT-2.1: the file's kind from its name, else from its first bytes. ``directory``: the folder the
    file's configs sit in (a remote file's; a local file's is its path's)."""
    name = os.path.basename(file).lower()
    if name.endswith(INDEX_SUFFIX):
        return _open_dir(directory or os.path.dirname(file) or ".", index=os.path.basename(file), path=file, io=io)
    if name.endswith(".safetensors"):        # configs beside it count as for its directory (CKPT-2.1, CKPT-4)
        directory = directory or os.path.dirname(os.path.abspath(file))
        configs, model_config, findings = _discover_configs(directory, set(io.listing(directory)), io)
        return _from_safetensors((file,), path=file, configs=configs, model_config=model_config, findings=findings,
                                 io=io)
    if name.endswith(".gguf"):
        return _open_gguf(file, file, io)
    if name.endswith(PICKLE_SUFFIXES):
        raise _refuse_pickle(file, f"a {os.path.splitext(name)[1]} file")
    head = io.sniff(file)
    if head.startswith(_GGUF_MAGIC):
        return _open_gguf(file, file, io)
    if _is_pickle_bytes(head):
        raise _refuse_pickle(file, f"pickle/zip magic bytes {head[:4]!r}")
    if len(head) > 8 and head[8:9] in (b"{", b" ", b"\t", b"\n", b"\r"):
        return _from_safetensors((file,), path=file, io=io)
    raise fail("ckpt.no_model", os.path.basename(file), "a .safetensors, .gguf or checkpoint directory",
               "a file of unknown kind", file=file)


def _from_safetensors(files: tuple[str, ...], *, path: str,
                      configs: tuple[ConfigSource, ...] = (), model_config: dict[str, Any] | None = None,
                      findings: list[Finding] | None = None, io: Files = LOCAL) -> Checkpoint:
    """CKPT-2.4, 2.5: unindexed files; a tensor name may occur in one file only."""
    headers = {f: io.header(f) for f in files}
    where: dict[str, str] = {}
    for f, header in headers.items():
        for name in header.tensors:
            if name in where:
                raise fail("ckpt.tensor.duplicate", name, "in one weight file only",
                           f"in {os.path.basename(where[name])} and {os.path.basename(f)}", file=path)
            where[name] = f
    if not where:
        raise fail("ckpt.tensors.none", None, "a checkpoint with at least one tensor", "0 tensors", file=path)
    found = list(findings or [])
    for header in headers.values():
        found.extend(header.findings)
    return Checkpoint(kind="safetensors", path=path, files=files, configs=configs, model_config=model_config,
                      headers=headers, where=where, findings=tuple(found), io=io)


# -- configs ---------------------------------------------------------------------------------

def _discover_configs(directory: str, names: set[str],
                      io: Files = LOCAL) -> tuple[tuple[ConfigSource, ...], dict | None, list[Finding]]:
    """CKPT-4: every config file that holds a quantization config, and their disagreements."""
    sources: list[ConfigSource] = []
    model_config = None
    for fname, key in CONFIG_FILES:
        if fname not in names:
            continue
        path = io.join(directory, fname)
        # Python readers (transformers, AutoGPTQ, vLLM) accept NaN/Infinity here; a duplicate key they
        # would resolve silently (the last wins) is refused (CKPT-4.2).
        data = _load_json(path, "ckpt.config.json", dicts=True, allow_nan=True, io=io)
        if not isinstance(data, dict):
            raise fail("ckpt.config.json", fname, "a JSON object", type(data).__name__, file=path)
        if key is not None:
            whole = data
            model_config = data if fname == "config.json" else model_config
            if key not in data or data[key] is None:
                continue
            data = data[key]
            if not isinstance(data, dict):
                raise fail("ckpt.config.json", f"{fname}[{key!r}]", "a JSON object", type(data).__name__, file=path)
            if fname == "hf_quant_config.json":
                data = _modelopt_config(whole, data)
        sources.append(ConfigSource(file=path, key=key, config=data))
    findings: list[Finding] = []
    if not sources:
        findings.append(finding("ckpt.config.none", "warning",
                                "no quantization config beside the weights: none of config.json"
                                "['quantization_config'], quantize_config.json, quant_config.json; the format's "
                                "label is unknown (GPTQ layers are read as their zeros say, v1 where they cannot "
                                "tell, with bits and group size from the tensors)"))
    for i, a in enumerate(sources):
        for b in sources[i + 1:]:
            differ = sorted(k for k in a.config.keys() & b.config.keys() if not _same(k, a.config[k], b.config[k]))
            if differ:
                second = os.path.basename(b.file)
                findings.append(finding("ckpt.config.conflict", "warning",
                                        f"{os.path.basename(a.file)} and {second} disagree on {differ}; "
                                        f"{CONFIG_READERS.get(second, '')}transformers/vLLM read config.json first"))
    return tuple(sources), model_config, findings


def _modelopt_config(whole: dict[str, Any], quantization: dict[str, Any]) -> dict[str, Any]:
    """CKPT-4.5: hf_quant_config.json's ``quantization`` in the keys ModelOpt writes to config.json's
    ``quantization_config`` (``exclude_modules`` is ``ignore``), so either file names the same config."""
    config = {"quant_method": "modelopt", **{k: v for k, v in quantization.items() if k != "exclude_modules"}}
    if "exclude_modules" in quantization:
        config["ignore"] = quantization["exclude_modules"]
    if "producer" in whole:
        config["producer"] = whole["producer"]
    return config


# which tools read a side config before config.json (CKPT-4.4)
CONFIG_READERS = {"quantize_config.json": "AutoGPTQ/GPTQModel read quantize_config.json first, ",
                  "quant_config.json": "AutoAWQ 0.1.6 .. 0.1.8 read quant_config.json only, "}


def _same(key: str, a: Any, b: Any) -> bool:
    """CKPT-4.4: equal values; ``version`` in any case (AutoAWQ's ``AwqConfig.from_dict`` and transformers'
    ``AwqConfig`` lower-case it, so ``GEMM`` and ``gemm`` are read alike)."""
    if key == "version" and isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return a == b


# -- directories -----------------------------------------------------------------------------

def _listing(directory: str) -> dict[str, str]:
    """Regular files of a directory (symlinks followed), name -> path; unreadable entries skipped."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise path_error(exc, directory) from None
    files = {}
    for name in names:
        path = os.path.join(directory, name)
        try:
            if stat.S_ISREG(os.stat(path).st_mode):
                files[name] = path
        except OSError:
            continue  # a dangling link or loop: not a candidate (an index naming it reports it)
    return files


def _checkpoint_subfolders(directory: str, limit: int = 1000) -> list[str]:
    """Subfolders (of the first ``limit`` entries) that hold weights: a parent of several checkpoints."""
    out = []
    try:
        with os.scandir(directory) as entries:
            for i, entry in enumerate(entries):
                if i >= limit:
                    break
                if entry.is_dir() and any(n.endswith((".safetensors", ".gguf")) for n in _listing(entry.path)):
                    out.append(entry.name)
    except (OSError, QFormatsError):
        return out
    return sorted(out)


def _pickles(files: dict[str, str], io: Files = LOCAL) -> list[str]:
    """CKPT-2.2: pickle files by suffix, or by pickle/zip magic for names we do not recognise."""
    known = (".safetensors", ".gguf", ".json")
    out = []
    for name, path in files.items():
        low = name.lower()
        if low.endswith(PICKLE_SUFFIXES) or (not low.endswith(known) and _is_pickle_bytes(io.sniff(path))):
            out.append(path)
    return out


def _open_dir(directory: str, *, index: str | None = None, path: str | None = None, io: Files = LOCAL) -> Checkpoint:
    path = path or directory
    files = io.listing(directory)
    indexes = [n for n in files if n.endswith(INDEX_SUFFIX)]
    weights = [n for n in files if n.endswith(".safetensors")]
    ggufs = [n for n in files if n.lower().endswith(".gguf")]
    pickles = _pickles(files, io)
    if index is None and len(indexes) > 1:
        if PREFERRED_INDEX not in indexes:
            raise fail("ckpt.index.ambiguous", None, f"one index file or one named {PREFERRED_INDEX}",
                       indexes, file=directory)
        index = PREFERRED_INDEX
    elif index is None and indexes:
        index = indexes[0]
    if index is None and not weights:
        if len(ggufs) == 1:
            return _open_gguf(files[ggufs[0]], path, io)
        if pickles:
            raise _refuse_pickle(pickles[0], f"the only weights here are pickles: "
                                 f"{[os.path.basename(p) for p in pickles]}")
        what = f"{len(ggufs)} .gguf files (pass one)" if ggufs else \
            f"{len(files)} file{'' if len(files) == 1 else 's'}, none of them weights"
        subfolders = io.subfolders(directory)
        if subfolders:
            what += f"; checkpoints in subfolders, pass one: {', '.join(subfolders[:3])}" + \
                (f" (+{len(subfolders) - 3} more)" if len(subfolders) > 3 else "")
        raise fail("ckpt.no_model", "path", "a directory with .safetensors weights, an index, or one .gguf file",
                   what, file=directory)
    configs, model_config, findings = _discover_configs(directory, set(files), io)
    findings = [finding("ckpt.pickle.skipped", "warning", f"pickle file {os.path.basename(p)} not opened "
                        "(safetensors weights are used instead)") for p in pickles] + findings
    if index is None:
        return _from_safetensors(tuple(files[n] for n in weights), path=path,
                                 configs=configs, model_config=model_config, findings=findings, io=io)
    return _open_sharded(directory, index, files, path=path, configs=configs, model_config=model_config,
                         findings=findings, io=io)


def _weight_map(index_path: str, io: Files = LOCAL) -> tuple[dict[str, str], Any]:
    """CKPT-3.1: ``{"metadata": {...}?, "weight_map": {tensor: shard file name}}``, keys unique."""
    top = _load_json(index_path, "ckpt.index.json", dicts=False, allow_nan=False, io=io)

    def bad(subject: str, constraint: str, actual: Any) -> QFormatsError:
        return fail("ckpt.index.json", subject, constraint, actual, file=index_path)

    if not isinstance(top, st.JsonObject):
        raise bad("index", "a JSON object", type(top).__name__)
    fields = dict(top)
    if len(fields) != len(top):
        raise bad("index", "each key once", "a duplicate top-level key")
    wm = fields.get("weight_map")
    if not isinstance(wm, st.JsonObject):
        raise bad("weight_map", "an object {tensor name: shard file}", type(wm).__name__)
    out: dict[str, str] = {}
    for name, shard in wm:
        if not st.is_text(name):
            raise bad("weight_map", "tensor names without lone surrogate escapes", brief_ascii(name)[:80])
        subject = f"weight_map.{name}"
        if name in out:
            raise bad(subject, "a tensor listed once", "duplicate")
        if not _is_shard_name(shard):
            raise bad(subject, SHARD_NAME_RULE, brief_ascii(shard)[:80])
        out[name] = shard
    meta = fields.get("metadata")
    total = dict(meta).get("total_size") if isinstance(meta, st.JsonObject) else None
    return out, total


SHARD_NAME_RULE = ("a shard file name in the index's directory: 1 to 255 UTF-8 bytes, no NUL, '/' or '\\', "
                   "not '.' or '..'")


def _is_shard_name(shard: object) -> bool:
    """CKPT-3.1, checked before any filesystem call: ``os.stat`` raises ValueError on NUL and
    UnicodeEncodeError on lone surrogates, and a name over NAME_MAX cannot exist on Linux."""
    return (isinstance(shard, str) and shard not in (".", "..") and st.is_text(shard)
            and 0 < len(shard.encode("utf-8")) <= 255 and not any(c in shard for c in "/\\\0"))


def _unlisted_holders(name: str, files: dict[str, str], shards: list[str], io: Files = LOCAL) -> list[str]:
    """The directory's other safetensors files holding ``name`` (only read to word an error)."""
    out = []
    for fname in sorted(n for n in files if n.endswith(".safetensors") and n not in shards):
        try:
            if name in io.header(files[fname]).tensors:
                out.append(fname)
        except (QFormatsError, OSError):
            continue
    return out


def _open_sharded(directory: str, index: str, files: dict[str, str], *, path: str,
                  configs: tuple[ConfigSource, ...], model_config: dict | None,
                  findings: list[Finding], io: Files = LOCAL) -> Checkpoint:
    """CKPT-3: every index entry points at an existing shard that holds the tensor."""
    index_path = io.join(directory, index)
    weight_map, total = _weight_map(index_path, io)
    shards = sorted(set(weight_map.values()))
    headers: dict[str, st.SafetensorsHeader] = {}
    for shard in shards:
        shard_path = io.join(directory, shard)
        if shard not in files and not io.check_exists(shard_path):
            raise fail("ckpt.index.shard_missing", shard, "an existing file named by the index",
                       "no such file", file=index_path)
        headers[shard_path] = io.header(shard_path)
    holders: dict[str, list[str]] = {}
    for shard_path, header in headers.items():
        findings.extend(header.findings)
        for name in header.tensors:
            holders.setdefault(name, []).append(os.path.basename(shard_path))
    for name, shard in weight_map.items():
        if name not in headers[io.join(directory, shard)].tensors:
            elsewhere = holders.get(name) or _unlisted_holders(name, files, shards, io)
            if elsewhere:
                raise fail("ckpt.index.tensor_elsewhere", name, f"in {shard}, as the index says",
                           f"in {elsewhere}", file=index_path)
            raise fail("ckpt.index.tensor_missing", name, f"in {shard}, as the index says", "in no shard",
                       file=index_path)
    for shard_path, header in headers.items():
        extra = sorted(n for n in header.tensors if weight_map.get(n) != os.path.basename(shard_path))
        if extra:
            findings.append(finding("ckpt.index.tensor_unlisted", "warning",
                                    f"{os.path.basename(shard_path)} holds {len(extra)} tensors the index does "
                                    f"not map to it: {extra[:5]}", tensor=extra[0]))
    for name in sorted(n for n in files if n.endswith(".safetensors") and n not in shards):
        findings.append(finding("ckpt.index.shard_unlisted", "warning", f"{name} is not named by {index}"))
    nbytes = sum(headers[io.join(directory, s)].tensors[n].nbytes for n, s in weight_map.items())
    if total is not None and (type(total) is not int or total != nbytes):
        findings.append(finding("ckpt.index.total_size", "warning",
                                f"{index} metadata.total_size is {brief(total)}; the mapped tensors hold {nbytes} bytes"))
    if not weight_map:
        raise fail("ckpt.tensors.none", None, "a checkpoint with at least one tensor", "0 tensors", file=index_path)
    where = {n: io.join(directory, s) for n, s in weight_map.items()}
    return Checkpoint(kind="sharded", path=path, files=tuple(io.join(directory, s) for s in shards),
                      index_file=index_path, configs=configs, model_config=model_config, headers=headers,
                      where=where, findings=tuple(findings), io=io)


# -- entry point -----------------------------------------------------------------------------

def open_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Discover and validate the container layer of a checkpoint (CKPT-1..4, ST-1..4).

    ``path`` is a ``.safetensors`` file, a ``.gguf`` file, a ``*.safetensors.index.json`` file, or
    a directory (configs discovered, sharded via its index, else every ``*.safetensors`` in it).

    Raises:
        QFormatsError: a code in :data:`COULD_NOT_RUN_CODES` (exit 2) or any other code (the
            checkpoint is invalid, exit 1). ``file`` names the offending file.
    """
    file = os.fspath(path)
    if file.startswith(REMOTE_SCHEMES):          # REMOTE-2: hf://ORG/REPO[@REV][/FILE], http(s)://.../FILE
        from ..remote import open_remote

        return open_remote(file)
    mode = _stat(file).st_mode
    if stat.S_ISDIR(mode):
        return _open_dir(file)
    if not stat.S_ISREG(mode):
        raise fail("ckpt.path.unreadable", None, "a regular file or a directory", stat.filemode(mode), file=file)
    return _open_file(file)
