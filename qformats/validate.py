"""Walk a checkpoint, run every layer's checks, collect findings (DESIGN.md §4, spec QF-5).

    report = validate("ckpt_dir", deep=True)
    report.verdict            # "valid" | "invalid"
    report.findings           # Finding(code, severity, clause, tensor, message)

One layer is in memory at a time: the container readers memory-map tensors and a layer's
arrays are dropped before the next is read, so peak memory follows the largest layer, not the
checkpoint. Errors whose code is in :data:`COULD_NOT_RUN` propagate (the CLI's exit 2);
every other problem, a malformed file included, is a finding and makes the verdict invalid.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .containers.checkpoint import COULD_NOT_RUN_CODES, Checkpoint, open_checkpoint
from .remote import is_remote
from .errors import QFormatsError, fail
from .findings import Finding, finding, from_error, plural
from .formats import registry
from .gguf_summary import refuse_imatrix
from . import executor, inventory
from .completeness import completeness, partial_modules
from .layers import LayerGroup, Progress, load_layer, tick

__all__ = ["Report", "validate", "group_layers", "load_layer", "LayerGroup", "FORMATS", "COULD_NOT_RUN"]

FORMATS = ("auto", *registry.FACES, *(s for f in registry.FACES.values() if getattr(f.layers, "GGUF_TYPES", ())
                                     for s in f.subject_formats if s not in registry.FACES))
COULD_NOT_RUN = frozenset(COULD_NOT_RUN_CODES) | {"checkpoint.format.unsupported", "argument.invalid",
                                                  "checkpoint.empty"}
# Other layouts, recognised by tensor name and never decoded (QF-5.2).
FOREIGN_SUFFIXES = {"B": "GPTQ Marlin (B, s)", "SCB": "bitsandbytes int8", "absmax": "bitsandbytes 4-bit",
                    "quant_map": "bitsandbytes 4-bit", "bitsandbytes__nf4": "bitsandbytes nf4",
                    "bitsandbytes__fp4": "bitsandbytes fp4",
                    # FP8 modules of checkpoints whose config names no FP8 layout (spec/fp8.md FP8-4.1)
                    "weight_scale": "FP8 / compressed-tensors", "weight_scale_inv": "FP8 (DeepSeek)"}
# bitsandbytes keeps a 4-bit Linear's state under ``<module>.weight.`` (absmax, quant_state.bitsandbytes__nf4)
BNB_STATE = re.compile(r"\.weight(\.quant_state)?$")
# findings, one per module, that say a module of a covered format was left unchecked (QF-5.2)
NOT_CHECKED = frozenset({"ctensors.scheme.uncovered"})
# quant_method values of other formats; a format's own other layouts are refused by its layers module.
FOREIGN_METHODS = {"marlin": "GPTQ Marlin",
                   "gptq_marlin": "GPTQ Marlin", "bitblas": "BitBLAS", "exl2": "EXL2", "hqq": "HQQ",
                   "aqlm": "AQLM", "quanto": "quanto", "eetq": "EETQ"}


class Report(BaseModel):
    """The validator's result; ``model_dump()`` is the CLI's ``--json`` object."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    verdict: Literal["valid", "invalid"]
    format: str
    findings: list[Finding]
    layers: list[dict[str, Any]]
    summary: dict[str, Any]

    def strictly(self) -> "Report":
        """The report under ``--strict``: warnings make it invalid, so verdict and exit code agree."""
        if self.verdict == "invalid" or not self.summary["warnings"]:
            return self.model_copy(update={"summary": {**self.summary, "strict": True}})
        return self.model_copy(update={"verdict": "invalid", "summary": {**self.summary, "strict": True}})

    def exit_code(self, *, strict: bool = False) -> int:
        """0 valid, 1 invalid; ``strict`` makes warnings invalid too."""
        if self.verdict == "invalid" or (strict and any(f.severity == "warning" for f in self.findings)):
            return 1
        return 0


def _module_faces() -> list[registry.Face]:
    """Registered formats that claim modules of safetensors checkpoints, in registry order."""
    return [f for f in registry.FACES.values() if getattr(f.layers, "ANCHOR", None)]


def _gguf_faces() -> list[registry.Face]:
    """Registered formats that decode GGUF tensor types."""
    return [f for f in registry.FACES.values() if getattr(f.layers, "GGUF_TYPES", ())]


def group_layers(names: list[str], config: Any = None) -> tuple[list[LayerGroup], dict[str, list[str]]]:
    """Group tensors into modules by suffix (QF-5.1): the first registered format whose anchor tensor a
    module holds claims it; where formats share an anchor (AWQ and GPTQ: ``qweight``), the one whose
    ``claims(config)`` says so. Also return the modules of foreign layouts, each with its unclaimed tensors."""
    by_prefix: dict[str, dict[str, str]] = {}
    for full in names:
        prefix, suffix = split_name(full)
        by_prefix.setdefault(prefix, {})[suffix] = full
    layers: list[LayerGroup] = []
    unclaimed: dict[str, list[str]] = {}
    for prefix, members in sorted(by_prefix.items()):
        owner = _owner([f for f in _module_faces() if not set(_anchors(f)).isdisjoint(members)], config, prefix)
        if owner is not None:
            layers.append(LayerGroup(prefix, owner.name, {s: members[s] for s in owner.layers.SUFFIXES if s in members}))
        unclaimed[prefix] = [full for suffix, full in members.items()
                             if owner is None or suffix not in owner.layers.SUFFIXES]
    return layers, _foreign_modules(unclaimed)


def split_name(full: str) -> tuple[str, str]:
    """(module, suffix) of a tensor name: a format's ``split_name`` where it claims the name (bitsandbytes keeps
    a module's state under ``<module>.weight.``, spec/bnb.md BNB-1.1), else the last dotted component."""
    for face in _module_faces():
        split = getattr(face.layers, "split_name", None)
        got = split(full) if split is not None else None
        if got is not None:
            return got
    prefix, _, suffix = full.rpartition(".")
    return prefix, suffix


def _anchors(face: registry.Face) -> tuple[str, ...]:
    """A face's anchor suffixes: ``ANCHOR`` is one suffix or a tuple of them (bitsandbytes: nf4, fp4, int8)."""
    anchor = face.layers.ANCHOR
    return (anchor,) if isinstance(anchor, str) else tuple(anchor)


def _foreign_modules(unclaimed: dict[str, list[str]]) -> dict[str, list[str]]:
    """QF-5.2: each module holding an unclaimed tensor of a foreign suffix, with all its unclaimed tensors."""
    marked = {BNB_STATE.sub("", prefix) for prefix, names in unclaimed.items()
              if any(_foreign_suffix(name) for name in names)}
    modules: dict[str, list[str]] = {}
    for prefix, names in unclaimed.items():
        module = BNB_STATE.sub("", prefix)
        if module in marked and names:
            modules.setdefault(module, []).extend(names)
    return modules


def _foreign_suffix(name: str) -> str | None:
    """The layout a tensor's suffix names (``weight_scale`` -> FP8 / compressed-tensors), None for others."""
    return FOREIGN_SUFFIXES.get(name.rpartition(".")[2])


def _owner(candidates: list[registry.Face], config: Any, module: str = "") -> registry.Face | None:
    """The face that claims a module: one whose ``claims(config)`` is true, else the first without a claim hook.
    A face with ``CLAIMS_BY_MODULE`` is asked ``claims(config, module)`` and, claiming, goes first: it looked at
    the module (a compressed-tensors config quantizes each module by its own group's format, FP4-5.3)."""
    def says(f: registry.Face) -> bool:
        by_module = getattr(f.layers, "CLAIMS_BY_MODULE", False)
        return f.layers.claims(config, module) if by_module else f.layers.claims(config)
    claimed = sorted((f for f in candidates if getattr(f.layers, "claims", None) is not None and says(f)),
                     key=lambda f: not getattr(f.layers, "CLAIMS_BY_MODULE", False))
    return next(iter(claimed), None) or next((f for f in candidates if getattr(f.layers, "claims", None) is None), None)


def _orphan_findings(ckpt: Checkpoint, fmt: str) -> dict[str, list[Finding]]:
    """Errors about quantized weights that no module anchor claims (an FP8 weight without its scale, FP8-6.2),
    by each face whose config this is (``layers.orphans``)."""
    out: dict[str, list[Finding]] = {}
    for face in registry.FACES.values():
        orphans = getattr(face.layers, "orphans", None)
        if orphans is not None and fmt in ("auto", face.name) and face.layers.claims(ckpt.config):
            out[face.name] = orphans(ckpt)
    return {name: found for name, found in out.items() if found}


def validate(path: str, *, deep: bool = False, fmt: str = "auto", progress: Progress | None = None,
             jobs: int | None = None, scheduler: str | None = None, sample: int | None = None) -> Report:
    """Validate a checkpoint; raises only for could-not-run problems (codes in :data:`COULD_NOT_RUN`).

    ``jobs > 1`` splits the layers into that many processes (safetensors checkpoints); the default
    is one process per CPU with ``deep``, where decoding dominates (or on a Dask scheduler), and one
    process without. ``scheduler`` (:mod:`qformats.executor`): ``processes`` (the default), ``local`` or
    ``tcp://HOST:PORT``; the report is the same whichever runs it (AUDIT-1.3).
    ``sample``: check N quantized layers (GGUF: tensors) spread over the model, naming the rest as not checked;
    an ``hf://`` or ``http(s)://`` path defaults to 0, its headers only (spec/remote.md REMOTE-4).
    """
    if fmt not in FORMATS:
        raise fail("argument.invalid", "format", "one of " + ", ".join(FORMATS), fmt)
    scheduler = executor.check_scheduler(scheduler)
    if jobs is None:
        jobs = _cpus() if deep or executor.is_dask(scheduler) else 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise fail("argument.invalid", "jobs", "an integer of at least 1", jobs)
    if is_remote(path):          # REMOTE-4.1: headers only unless --sample N; one process counts the bytes
        jobs, sample = 1, 0 if sample is None else sample
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 0):
        raise fail("argument.invalid", "sample", "an integer of at least 0", sample)
    try:
        ckpt = open_checkpoint(path)
    except QFormatsError as err:
        if err.code in COULD_NOT_RUN:
            raise
        report = _report(str(path), "unknown", [from_error(err)], [])   # CKPT-5.1: nothing could be read
        fetched = {"remote": err.remote} if getattr(err, "remote", None) else {}   # REMOTE-4.3
        return report.model_copy(update={"summary": {**report.summary, "container": "unreadable",
                                                     **inventory.summary({}, {}), "modules_not_checked": 0,
                                                     "not_read": [], **fetched}})
    with ckpt:
        if ckpt.kind == "gguf":
            rows, findings, picked = _gguf(ckpt, fmt, deep, progress, sample)
            findings += _gguf_completeness(ckpt)
            types = {row["format"] for row in rows} or {info.type_name.lower() for info in ckpt.gguf.tensors
                                                         if not ggml_type_unknown(info)}   # --sample 0: headers
            report = _report(str(path), "+".join(sorted(types)), list(ckpt.findings) + findings, rows)
            # modules_not_checked: the same summary keys for every format; a GGUF tensor qformats cannot
            # decode is counted among the tensors not checked (GGML-3.5), never as a foreign module
            return _sampled_report(ckpt, report.model_copy(update={"summary": {
                **report.summary, "container": "gguf", **_gguf_account(ckpt, rows, fmt, picked),
                "modules_not_checked": 0, "not_read": inventory.not_read(ckpt)}}), sample, picked)
        _refuse_foreign_method(ckpt)
        all_layers, foreign = group_layers(ckpt.tensor_names(), ckpt.config)
        layers = [layer for layer in all_layers if fmt in ("auto", layer.format)]
        asked, layers = layers, _sample(layers, sample)      # REMOTE-4.1: every asked layer unless --sample N
        findings = list(ckpt.findings) + _foreign_findings(foreign)
        if jobs > 1 and len(layers) > 1:
            rows, more = _run_parallel(ckpt, layers, deep, jobs, progress, scheduler)
        else:
            rows, more = _run_layers(ckpt, layers, deep, progress, asked)
        findings += more
        run, layers = layers, asked      # what follows concerns every asked layer; the unsampled are named
        if not layers:       # QF-5.1: nothing of the asked formats here, so nothing to judge (exit 2) ...
            orphans = _orphan_findings(ckpt, fmt)
            if not orphans:  # ... unless the config's own format finds its quantized weights broken (FP8-6.2)
                raise fail("checkpoint.empty", "path", f"a checkpoint holding {_wanted(fmt)} layers",
                           f"none among {len(ckpt.tensor_names())} tensors", file=str(path))
            findings += [f for found in orphans.values() for f in found]
        elif run and not rows:
            findings.append(finding("checkpoint.empty", "error", f"{len(layers)} quantized "
                                    f"layer{'s' if len(layers) > 1 else ''}, none of which could be checked"))
        findings += _whole_checkpoint(ckpt, layers)
        accounting = _account(ckpt, all_layers, layers, foreign, rows, findings, deep, fmt,
                              unsampled={layer.name for layer in layers} - {layer.name for layer in run},
                              sampling=sample is not None)
        findings += accounting.pop("findings")
        named = {layer.format for layer in layers} or set(_orphan_findings(ckpt, fmt))
        report = _report(str(path), "+".join(sorted(named)) or "unknown", findings, rows)
        unchecked = len(foreign) + sum(f.code in NOT_CHECKED for f in findings)
        return _sampled_report(ckpt, report.model_copy(update={"summary": {
            **report.summary, "container": ckpt.kind, **accounting, "modules_not_checked": unchecked}}),
            sample, [layer.name for layer in run])


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _run_layers(ckpt: Checkpoint, layers: list[LayerGroup], deep: bool, progress: Progress | None,
                asked: list[LayerGroup] | None = None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """``asked``: with --sample, every layer asked for; a format holding some of them is still called (with
    only its sampled layers, maybe none) so that its config-level checks run (REMOTE-4.1)."""
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for face in _module_faces():
        subset = [layer for layer in layers if layer.format == face.name]
        if subset or any(layer.format == face.name for layer in asked or ()):
            more_rows, more = face.layers.check(ckpt, subset, deep, progress)
            rows, findings = rows + more_rows, findings + more
    return rows, findings


def _gguf(ckpt: Checkpoint, fmt: str, deep: bool, progress: Progress | None,
          sample: int | None = None) -> tuple[list[dict[str, Any]], list[Finding], list[str]]:
    """Every tensor of a GGUF file, each checked by its ggml type's rules (spec/ggml.md GGML-3).

    ``fmt`` ``auto`` (or a family face's name) checks every tensor; a ggml type name (``q6_k``) only
    the tensors of that type. The verdict counts what was checked (GGML-3.5): the summary's
    ``tensors_checked`` of ``tensors``, and a warning for each type qformats cannot check.
    """
    refuse_imatrix(ckpt.gguf)        # CKPT-1.4: llama-imatrix's output is not a model (could not run)
    only = None if fmt == "auto" or fmt in {f.name for f in _gguf_faces()} else frozenset({fmt})
    checkable = [info for info in ckpt.gguf.tensors if not ggml_type_unknown(info)
                 and (only is None or info.type_name.lower() in only)]
    picked = [info.name for info in _sample(checkable, sample)]
    if sample is not None:           # REMOTE-4.2: the checks walk the sampled tensors (and the undecodable ones,
        keep = set(picked) | {info.name for info in ckpt.gguf.tensors if ggml_type_unknown(info)}   # never read)
        ckpt = _GGUFSample(ckpt, keep)  # type: ignore[assignment]
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for face in _gguf_faces():
        more_rows, more = face.layers.check_gguf(ckpt, deep, progress, only)
        rows, findings = rows + more_rows, findings + more
    if not rows and not (checkable and sample == 0):   # QF-5.1: a vocab-only file, or none of the asked types:
        # nothing to judge (exit 2); --sample 0 (a remote file's headers) judged the container and named the rest
        wanted = "checkable" if only is None else fmt
        raise fail("checkpoint.empty", "path", f"a GGUF file holding {wanted} tensors",
                   f"{len(ckpt.gguf.tensors)} tensors, none of them {wanted}", file=ckpt.path)
    return rows, findings, picked


class _GGUFSample:
    """A GGUF checkpoint seen through the tensors to check (``--sample N``): the format checks walk
    ``ckpt.gguf.tensors``; everything else is the file's."""

    def __init__(self, ckpt: Checkpoint, keep: set[str]) -> None:
        self.path, self._ckpt = ckpt.path, ckpt
        self.gguf = _TensorSubset(ckpt.gguf, keep)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ckpt, name)


class _TensorSubset:
    def __init__(self, gf: Any, keep: set[str]) -> None:
        self._gf = gf
        self.tensors = tuple(info for info in gf.tensors if info.name in keep)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gf, name)


NOT_SAMPLED = "not sampled: --sample {n} checked {k} of {total} (REMOTE-4.1)"


def _sample(items: list[Any], n: int | None) -> list[Any]:
    """REMOTE-4.1: ``n`` of ``items`` evenly spread in their order, the first and last included (all when
    ``n`` is None or at least their number), so the sample spans the model's depth."""
    if n is None or n >= len(items):
        return list(items)
    if n <= 1:
        return list(items[:n])
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def _sampled_report(ckpt: Checkpoint, report: Report, sample: int | None, picked: list[str]) -> Report:
    """REMOTE-4.3: a remote read that failed inside a check is could-not-run; the summary says what was sampled
    and, for a remote checkpoint, what was fetched."""
    io = getattr(ckpt, "io", None)
    if getattr(io, "remote", False):
        io.raise_failure()
    extra: dict[str, Any] = {}
    if sample is not None:
        extra["sample"] = {"asked": sample, "checked": picked}
    if getattr(io, "remote", False):
        extra["remote"] = io.summary()
    return report.model_copy(update={"summary": {**report.summary, **extra}}) if extra else report


def _wanted(fmt: str) -> str:
    return "quantized (" + ", ".join(registry.FACES) + ")" if fmt == "auto" else fmt


def _run_subset(work: tuple[str, list[str], bool]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Worker: validate the named layers of the checkpoint at ``path``; plain data back (the executor seam)."""
    path, names, deep = work
    with open_checkpoint(path) as ckpt:
        wanted = set(names)
        layers = [layer for layer in group_layers(ckpt.tensor_names(), ckpt.config)[0] if layer.name in wanted]
        rows, findings = _run_layers(ckpt, layers, deep, None)
        return rows, [f.model_dump() for f in findings]


def _run_parallel(ckpt: Checkpoint, layers: list[LayerGroup], deep: bool, jobs: int, progress: Progress | None,
                  scheduler: str) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Contiguous runs of layers of about equal bytes, a few per worker so that they balance (and the
    progress bar moves), through the executor seam; results are taken in run order, so the report does not
    depend on which worker finished first. Config-level findings, identical in every worker, are kept once."""
    sizes = [_layer_bytes(ckpt, layer) for layer in layers]
    with executor.pool(scheduler, min(jobs, len(layers))) as seam:
        chunks = _balanced_runs(layers, sizes, seam.workers * PARALLEL_RUNS_PER_JOB)
        results: list[Any] = [None] * len(chunks)
        done = 0
        for i, value in seam.completed(_run_subset, [(ckpt.path, chunk, deep) for chunk in chunks]):
            results[i] = (value[0], [Finding(**f) for f in value[1]])
            done += len(chunks[i])
            tick(progress, done - 1, len(layers), chunks[i][-1])
    order = {layer.name: i for i, layer in enumerate(layers)}
    rows = sorted((row for r, _ in results for row in r), key=lambda row: order[row["layer"]])
    findings: list[Finding] = []
    for _, more in results:
        findings += [f for f in more if f not in findings]
    return rows, findings


PARALLEL_RUNS_PER_JOB = 4


def _layer_bytes(ckpt: Checkpoint, layer: LayerGroup) -> int:
    return sum(ckpt.tensor_info(name).nbytes for name in layer.tensors.values())


def _parent(name: str) -> str:
    return name.rpartition(".")[0] or name


def _balanced_runs(layers: list[LayerGroup], sizes: list[int], runs: int) -> list[list[str]]:
    """Split ``layers`` in order into at most ``runs`` non-empty runs of about ``sum(sizes) / runs`` bytes,
    never between siblings (q/k/v_proj of one attention, gate/up_proj of one MLP): a format's checks across
    the shards one reader fuses (FP8-6.7, FP4-3.5) must see them in one process."""
    target = sum(sizes) / runs
    chunks: list[list[str]] = [[]]
    filled = 0
    for layer, size in zip(layers, sizes):
        apart = not chunks[-1] or _parent(chunks[-1][-1]) != _parent(layer.name)
        if chunks[-1] and apart and filled + size / 2 > target * len(chunks) and len(chunks) < runs:
            chunks.append([])
        chunks[-1].append(layer.name)
        filled += size
    return chunks


def _refuse_foreign_method(ckpt: Checkpoint) -> None:
    """QF-5.2: another quant_method, or a GPTQ checkpoint_format naming another layout (GPTQ-6.3)."""
    config = ckpt.config if isinstance(ckpt.config, dict) else {}
    method = str(config.get("quant_method", config.get("method", ""))).lower()
    if method in FOREIGN_METHODS:
        raise fail("checkpoint.format.unsupported", "quant_method",
                   f"a format qformats covers ({', '.join(registry.FACES)})", f"{method} ({FOREIGN_METHODS[method]})")
    for face in registry.FACES.values():
        refuse = getattr(face.layers, "refuse_other_layout", None)
        if refuse is not None:
            refuse(config)


def _foreign_findings(foreign: dict[str, list[str]]) -> list[Finding]:
    """QF-5.2: one warning counting and naming the modules of foreign layouts, and their tensors."""
    if not foreign:
        return []
    first = next(iter(foreign))
    kinds = dict.fromkeys(kind for names in foreign.values() for kind in map(_foreign_suffix, names) if kind)
    tensors = sum(len(names) for names in foreign.values())
    named = f"'{first}'" + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
    return [finding("checkpoint.layer.unsupported", "warning",
                    f"{plural(len(foreign), 'module')} ({plural(tensors, 'tensor')}) {_is(len(foreign))} in a "
                    f"layout qformats does not decode ({', '.join(kinds)}): {named}; not checked",
                    tensor=first, count=len(foreign))]


def _is(n: int) -> str:
    return "is" if n == 1 else "are"


def _report(path: str, fmt: str, findings: list[Finding], layers: list[dict[str, Any]]) -> Report:
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    summary = {"layers": len(layers), "errors": counts["error"], "warnings": counts["warning"], "info": counts["info"]}
    return Report(path=path, verdict="invalid" if counts["error"] else "valid", format=fmt,
                  findings=findings, layers=layers, summary=summary)


# -- the whole checkpoint (spec/checkpoints.md CKPT-5) -----------------------------------------------------------

def _whole_checkpoint(ckpt: Checkpoint, layers: list[LayerGroup]) -> list[Finding]:
    """CKPT-5.4 .. 5.6 from the names alone: layers against the config, modules across layers, partners."""
    names = ckpt.tensor_names()
    claimed = {layer.name for layer in layers}
    modules = sorted({split_name(name)[0] for name in names})
    leftovers: dict[str, set[str]] = {}
    for name in names:
        prefix, suffix = split_name(name)
        if prefix not in claimed:
            leftovers.setdefault(prefix, set()).add(suffix)
    return completeness(modules, ckpt.model_config) + partial_modules(leftovers, _partner_suffixes())


def _partner_suffixes() -> list[tuple[str, str, frozenset[str]]]:
    """(format, anchor, the suffixes only that format's modules hold) for CKPT-5.6."""
    shared = {"weight", "bias", *FOREIGN_SUFFIXES}
    return [(face.name, " or ".join(_anchors(face)), frozenset(face.layers.SUFFIXES) - set(_anchors(face)) - shared)
            for face in _module_faces()]


def _account(ckpt: Checkpoint, all_layers: list[LayerGroup], layers: list[LayerGroup], foreign: dict[str, list[str]],
             rows: list[dict[str, Any]], findings: list[Finding], deep: bool, fmt: str, *,
             unsampled: set[str] | frozenset[str] = frozenset(), sampling: bool = False) -> dict[str, Any]:
    """CKPT-5.1: every tensor checked or named with the reason; CKPT-5.2/5.3 on the tensors no format holds."""
    partial = {f.tensor for f in findings if f.code == "ckpt.module.partial"}
    orphans = {name for name in ckpt.tensor_names() if split_name(name)[0] in partial}
    formats = {layer.name: layer.format for layer in all_layers}
    strays = {name for name in ckpt.tensor_names() if split_name(name)[0] in formats} - \
        {full for layer in all_layers for full in layer.tensors.values()}
    quantized = {full for layer in all_layers for full in layer.tensors.values()} | orphans | strays | \
        {name for names in foreign.values() for name in names}
    kinds = inventory.tensor_kinds(ckpt, quantized)
    unchecked = dict.fromkeys(orphans, "ckpt.module.partial: a module without its anchor tensor (CKPT-5.6)")
    for name in strays:
        unchecked[name] = f"a tensor the {formats[split_name(name)[0]]} layout does not have: not read"
    done = {row["layer"] for row in rows}
    asked = {layer.name for layer in layers}
    for layer in all_layers:
        why = None if layer.name in done else NOT_SAMPLED.format(n=len(layers) - len(unsampled), k=len(done),
                                                                  total=len(layers)) \
            if layer.name in unsampled else _why_unchecked(layer, layer.name in asked, findings, fmt)
        if why:
            unchecked.update(dict.fromkeys(layer.tensors.values(), why))
    for module, names in foreign.items():
        kind = ", ".join(dict.fromkeys(k for k in map(_foreign_suffix, names) if k)) or "foreign"
        unchecked.update(dict.fromkeys(names, f"a layout qformats does not decode ({kind}) (QF-5.2)"))
    # a tensor a format's check found wanting by name (an FP8 weight without its scale, FP8-6.2) was judged
    judged = {f.tensor for f in findings if f.severity == "error" and f.tensor in kinds}
    plain = [name for name, kind in kinds.items() if name not in quantized | judged]
    more = inventory.config_shape_findings(ckpt, plain) + inventory.module_shape_findings(rows, ckpt.model_config)
    floats = [] if sampling else [n for n in plain if kinds[n] == "float"]   # --sample: quantized layers only
    scanned_findings, scanned = inventory.check_plain(ckpt, floats, deep=deep)
    more += scanned_findings
    for name in plain:
        if name not in scanned:
            unchecked[name] = _plain_reason(kinds[name], deep) if not (sampling and deep and kinds[name] == "float") \
                else "not quantized: --sample reads quantized layers only (REMOTE-4.1)"
    return {"findings": more, **inventory.summary(kinds, unchecked), "not_read": inventory.not_read(ckpt)}


def _why_unchecked(layer: LayerGroup, asked: bool, findings: list[Finding], fmt: str) -> str | None:
    """None when a finding says the module was looked at and found wanting (an error names it), else why not."""
    if not asked:
        return f"a {layer.format} module; --format {fmt} left it out"
    mine = [f for f in findings if f.tensor and (f.tensor == layer.name or f.tensor.startswith(layer.name + "."))]
    if any(f.severity == "error" for f in mine):
        return None
    if mine:
        return f"{mine[0].code}: {mine[0].message.splitlines()[0]}"
    stop = next((f for f in findings if f.severity == "error" and f.code != "checkpoint.empty"), None)
    return f"{stop.code} stopped the {layer.format} checks: {stop.message.splitlines()[0]}" if stop else \
        "no check reached it"


def _plain_reason(kind: str, deep: bool) -> str:
    if kind == "float":
        return "not quantized: its values are read with --deep (CKPT-5.2)" if not deep else \
            "not quantized: a float dtype CKPT-5.2 does not scan"
    if kind == "integer":
        return "an integer tensor outside any quantized module: no rule gives its values a meaning"
    return "sub-byte float elements outside any quantized module: no rule yet"


def _gguf_completeness(ckpt: Checkpoint) -> list[Finding]:
    """CKPT-5.4/5.5 for GGUF: ``blk.N`` against ``{general.architecture}.block_count``."""
    names = [info.name for info in ckpt.gguf.tensors]
    modules = sorted({n.rpartition(".")[0] if n.endswith((".weight", ".bias")) else n for n in names})
    meta = getattr(ckpt.gguf, "metadata", {}) or {}
    arch = meta.get("general.architecture")
    blocks = meta.get(f"{arch}.block_count") if isinstance(arch, str) else None
    blocks = blocks if isinstance(blocks, int) and not isinstance(blocks, bool) and blocks >= 0 else None
    return completeness(modules, None, gguf_blocks=blocks)


def _gguf_account(ckpt: Checkpoint, rows: list[dict[str, Any]], fmt: str, picked: list[str] | None = None) -> dict[str, Any]:
    """CKPT-5.1 for GGUF: every tensor is a row (checked) or named (a type qformats cannot decode, --format)."""
    kinds = inventory.tensor_kinds(ckpt, set())
    done = {row["layer"] for row in rows}
    unchecked = {}
    chosen = set(picked) if picked is not None else None
    checkable = sum(not ggml_type_unknown(info) for info in ckpt.gguf.tensors)
    for info in ckpt.gguf.tensors:
        if info.name not in done:
            unchecked[info.name] = (f"type {info.type_name}: qformats has no decoder for it (GGML-3.5)"
                                    if ggml_type_unknown(info) else
                                    NOT_SAMPLED.format(n=len(chosen), k=len(done), total=checkable)
                                    if chosen is not None and info.name not in chosen and len(chosen) < checkable
                                    else f"type {info.type_name}; --format {fmt} left it out")
    return inventory.summary(kinds, unchecked)


def ggml_type_unknown(info: Any) -> bool:
    """A GGUF tensor of a type no registered format decodes."""
    return not any(info.type_name.lower() in face.layers.GGUF_TYPES or info.type_name in face.layers.GGUF_TYPES
                   for face in _gguf_faces())
