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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from .containers.checkpoint import COULD_NOT_RUN_CODES, Checkpoint, open_checkpoint
from .errors import QFormatsError, fail
from .findings import Finding, finding, from_error
from .formats import q4_k, spqr
from .formats.gptq.audit import layer_findings
from .formats.gptq.layout import BITS, ModuleParams, modules_params
from .formats.gptq.layout import parse_config as parse_gptq_config
from .formats.spqr import checks as spqr_checks
from .stats import Moments

__all__ = ["Report", "validate", "group_layers", "load_layer", "LayerGroup", "FORMATS", "COULD_NOT_RUN"]

FORMATS = ("auto", "gptq", "spqr", "q4_k")
COULD_NOT_RUN = frozenset(COULD_NOT_RUN_CODES) | {"checkpoint.format.unsupported", "argument.invalid"}
Progress = Callable[[int, int, str], None]

GPTQ_SUFFIXES = ("qweight", "qzeros", "scales", "g_idx", "bias")
SPQR_SUFFIXES = ("dense_weights", "row_offsets", "col_vals", "in_perm")
# Other layouts, recognised by tensor name and never decoded (QF-5.2).
FOREIGN_SUFFIXES = {"B": "GPTQ Marlin (B, s)", "SCB": "bitsandbytes int8", "absmax": "bitsandbytes 4-bit",
                    "quant_map": "bitsandbytes 4-bit", "bitsandbytes__nf4": "bitsandbytes nf4",
                    "bitsandbytes__fp4": "bitsandbytes fp4", "weight_scale": "FP8 / compressed-tensors",
                    "weight_packed": "compressed-tensors"}
# quant_method values of other formats; GPTQ's own other layouts come from gptq.layout.OTHER_LAYOUTS.
FOREIGN_METHODS = {"awq": "AWQ", "bitsandbytes": "bitsandbytes", "fp8": "FP8", "marlin": "GPTQ Marlin",
                   "gptq_marlin": "GPTQ Marlin", "bitblas": "BitBLAS", "exl2": "EXL2", "hqq": "HQQ",
                   "aqlm": "AQLM", "quanto": "quanto", "eetq": "EETQ", "compressed-tensors": "compressed-tensors"}


class Report(BaseModel):
    """The validator's result; ``model_dump()`` is the CLI's ``--json`` object."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    verdict: Literal["valid", "invalid"]
    format: str
    findings: list[Finding]
    layers: list[dict[str, Any]]
    summary: dict[str, Any]

    def exit_code(self, *, strict: bool = False) -> int:
        """0 valid, 1 invalid; ``strict`` makes warnings invalid too."""
        if self.verdict == "invalid" or (strict and any(f.severity == "warning" for f in self.findings)):
            return 1
        return 0


@dataclass
class LayerGroup:
    """One quantized module: its name and the suffix -> full tensor name map."""

    name: str
    format: str
    tensors: dict[str, str] = field(default_factory=dict)


def group_layers(names: list[str]) -> tuple[list[LayerGroup], list[str]]:
    """Group tensors into layers by suffix (QF-5.1); also return tensors of foreign layouts."""
    by_prefix: dict[str, dict[str, str]] = {}
    for full in names:
        prefix, _, suffix = full.rpartition(".")
        by_prefix.setdefault(prefix, {})[suffix] = full
    layers: list[LayerGroup] = []
    foreign: list[str] = []
    for prefix, members in sorted(by_prefix.items()):
        if "qweight" in members:
            layers.append(LayerGroup(prefix, "gptq", {s: members[s] for s in GPTQ_SUFFIXES if s in members}))
        elif "dense_weights" in members:
            layers.append(LayerGroup(prefix, "spqr", {s: members[s] for s in SPQR_SUFFIXES if s in members}))
        foreign += [full for suffix, full in members.items() if suffix in FOREIGN_SUFFIXES]
    return layers, foreign


def validate(path: str, *, deep: bool = False, fmt: str = "auto", progress: Progress | None = None,
             jobs: int | None = None) -> Report:
    """Validate a checkpoint; raises only for could-not-run problems (codes in :data:`COULD_NOT_RUN`).

    ``jobs > 1`` splits the layers into that many processes (safetensors checkpoints); the default
    is one process per CPU with ``deep``, where decoding dominates, and one process without.
    """
    if fmt not in FORMATS:
        raise fail("argument.invalid", "format", "one of " + ", ".join(FORMATS), fmt)
    if jobs is None:
        jobs = _cpus() if deep else 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise fail("argument.invalid", "jobs", "an integer of at least 1", jobs)
    try:
        ckpt = open_checkpoint(path)
    except QFormatsError as err:
        if err.code in COULD_NOT_RUN:
            raise
        return _report(str(path), "unknown", [from_error(err)], [])
    with ckpt:
        if ckpt.kind == "gguf":
            rows, findings = _gguf_layers(ckpt, deep, progress) if fmt in ("auto", "q4_k") else ([], [])
            if not rows:
                findings.append(finding("checkpoint.empty", "error", f"no {'q4_K' if fmt == 'auto' else fmt} layer "
                                        "in this GGUF file: nothing was checked"))
            return _report(str(path), "q4_k", list(ckpt.findings) + findings, rows)
        _refuse_foreign_method(ckpt)
        layers, foreign = group_layers(ckpt.tensor_names())
        layers = [layer for layer in layers if fmt in ("auto", layer.format)]
        findings = list(ckpt.findings) + _foreign_findings(foreign)
        if jobs > 1 and len(layers) > 1:
            rows, more = _run_parallel(ckpt, layers, deep, jobs, progress)
        else:
            rows, more = _run_layers(ckpt, layers, deep, progress)
        findings += more
        if not rows:
            what = (f"{len(layers)} quantized layers, none of which could be checked" if layers else
                    f"no {'' if fmt == 'auto' else fmt + ' '}quantized layer among {len(ckpt.tensor_names())} tensors")
            findings.append(finding("checkpoint.empty", "error", f"{what}: nothing was checked"))
        return _report(str(path), "+".join(sorted({layer.format for layer in layers})) or "unknown", findings, rows)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _run_layers(ckpt: Checkpoint, layers: list[LayerGroup], deep: bool,
                progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for fmt, run in (("gptq", _gptq_layers), ("spqr", _spqr_layers)):
        subset = [layer for layer in layers if layer.format == fmt]
        if subset:
            more_rows, more = run(ckpt, subset, deep, progress)
            rows, findings = rows + more_rows, findings + more
    return rows, findings


def _run_subset(path: str, names: list[str], deep: bool) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Worker process: validate the named layers of the checkpoint at ``path``."""
    with open_checkpoint(path) as ckpt:
        wanted = set(names)
        layers = [layer for layer in group_layers(ckpt.tensor_names())[0] if layer.name in wanted]
        return _run_layers(ckpt, layers, deep, None)


def _run_parallel(ckpt: Checkpoint, layers: list[LayerGroup], deep: bool, jobs: int,
                  progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Contiguous runs of layers of about equal bytes, a few per process so that they balance
    (and the progress bar moves); config-level findings, identical in every worker, are kept once."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    chunks = _balanced_runs(layers, [_layer_bytes(ckpt, layer) for layer in layers], jobs * PARALLEL_RUNS_PER_JOB)
    with ProcessPoolExecutor(max_workers=min(jobs, len(chunks))) as pool:
        futures = {pool.submit(_run_subset, ckpt.path, chunk, deep): chunk for chunk in chunks}
        done = 0
        for future in as_completed(futures):
            done += len(futures[future])
            _tick(progress, done - 1, len(layers), futures[future][-1])
        results = [future.result() for future in futures]
    order = {layer.name: i for i, layer in enumerate(layers)}
    rows = sorted((row for r, _ in results for row in r), key=lambda row: order[row["layer"]])
    findings: list[Finding] = []
    for _, more in results:
        findings += [f for f in more if f not in findings]
    return rows, findings


PARALLEL_RUNS_PER_JOB = 4


def _layer_bytes(ckpt: Checkpoint, layer: LayerGroup) -> int:
    return sum(ckpt.tensor_info(name).nbytes for name in layer.tensors.values())


def _balanced_runs(layers: list[LayerGroup], sizes: list[int], runs: int) -> list[list[str]]:
    """Split ``layers`` in order into at most ``runs`` non-empty runs of about ``sum(sizes) / runs`` bytes."""
    target = sum(sizes) / runs
    chunks: list[list[str]] = [[]]
    filled = 0
    for layer, size in zip(layers, sizes):
        if chunks[-1] and filled + size / 2 > target * len(chunks) and len(chunks) < runs:
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
                   "a format qformats covers (gptq v1/v2, spqr, q4_k)", f"{method} ({FOREIGN_METHODS[method]})")
    if method == "gptq":
        try:
            parse_gptq_config(config)
        except QFormatsError as err:
            if err.code == "gptq.config.other_layout":
                raise fail("checkpoint.format.unsupported", err.tensor, err.constraint, err.actual) from None


def _foreign_findings(foreign: list[str]) -> list[Finding]:
    if not foreign:
        return []
    kind = FOREIGN_SUFFIXES[foreign[0].rpartition(".")[2]]
    return [finding("checkpoint.layer.unsupported", "warning",
                    f"{len(foreign)} tensors are in a layout qformats does not decode ({kind}), "
                    f"first '{foreign[0]}'; they were not checked", tensor=foreign[0])]


def load_layer(ckpt: Checkpoint, group: LayerGroup) -> dict[str, np.ndarray]:
    """A layer's tensors by suffix, each memory-mapped by the container reader."""
    return {suffix: ckpt.tensor(full) for suffix, full in group.tensors.items()}


def _tick(progress: Progress | None, i: int, total: int, name: str) -> None:
    if progress is not None:
        progress(i, total, name)


# -- GPTQ ------------------------------------------------------------------------------------

def _gptq_config(ckpt: Checkpoint) -> tuple[Any, list[Finding]]:
    if not ckpt.configs:
        return None, [finding("checkpoint.config.missing", "warning", "no quantization config found "
                              "(config.json, quantize_config.json, quant_config.json): bits and group size "
                              "are read off the tensors and the label is taken as v1 (GPTQ-6.3)")]
    try:
        config, findings = parse_gptq_config(ckpt.config, source=ckpt.configs[0].file)
    except QFormatsError as err:  # other layouts were refused before any layer was read
        return None, [from_error(err.with_file(ckpt.configs[0].file))]
    return config, findings


def _gptq_params(config: Any, params: ModuleParams | None, name: str,
                 t: dict[str, np.ndarray]) -> tuple[dict[str, Any] | None, list[Finding]]:
    """bits, group size, desc_act, sym, version of one module (GPTQ-6.6), checked against its tensors (6.7)."""
    scales, qzeros = t.get("scales"), t.get("qzeros")
    tensor_bits = None
    if scales is not None and qzeros is not None and scales.ndim == 2 and qzeros.ndim == 2 and scales.shape[1]:
        tensor_bits = qzeros.shape[1] * 32 // scales.shape[1]
    if config is None:
        if tensor_bits not in BITS:
            return None, [finding("tensor.shape", "error", f"'{name}' has no consistent GPTQ width "
                                  "(qzeros columns * 32 / scales columns is not 2, 3, 4 or 8)", tensor=name)]
        return {"bits": tensor_bits, "group_size": None, "desc_act": False, "sym": None, "version": "v1"}, []
    findings = []
    if params.excluded_by:
        findings.append(finding("gptq.config.tensor_mismatch", "error", f"dynamic rule {params.excluded_by!r} "
                                f"leaves '{name}' unquantized, but the checkpoint holds its qweight", tensor=name))
    if tensor_bits != params.bits:
        findings.append(finding("gptq.config.tensor_mismatch", "error", f"config says {params.bits}-bit but "
                                f"'{name}.qzeros' and '{name}.scales' imply {tensor_bits}-bit fields", tensor=f"{name}.qzeros"))
    if name.endswith("lm_head") and not config.lm_head:
        findings.append(finding("gptq.config.tensor_mismatch", "error", "config says lm_head is not quantized "
                                "(lm_head false) but the checkpoint holds lm_head.qweight", tensor=name))
    resolved = params.model_dump(exclude={"excluded_by"})
    if tensor_bits != params.bits and tensor_bits in BITS:
        resolved["bits"] = tensor_bits  # check the layer as stored, so one mismatch is reported once
    return resolved, findings


def _gptq_layers(ckpt: Checkpoint, layers: list[LayerGroup], deep: bool,
                 progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    config, findings = _gptq_config(ckpt)
    try:
        params_of = modules_params(config, [group.name for group in layers]) if config is not None else {}
    except QFormatsError as err:  # GPTQ-6.6: no module's parameters can be known; nothing is checked
        return [], findings + [from_error(err.with_file(ckpt.configs[0].file))]
    rows, awq = [], []
    for i, group in enumerate(layers):
        _tick(progress, i, len(layers), group.name)
        t = load_layer(ckpt, group)
        if _awq_shaped(t):
            awq.append(group.name)
            continue
        params, more = _gptq_params(config, params_of.get(group.name), group.name, t)
        findings += more
        if params is None:
            continue
        more, row = layer_findings(group.name, t, bits=params["bits"], group_size=params["group_size"],
                                   declared=params["version"], desc_act=params["desc_act"], sym=params["sym"],
                                   deep=deep)  # a GPTQ decode is finite by construction (GPTQ-3.7)
        findings += more
        rows.append(row)
    if awq and not rows:
        raise fail("checkpoint.format.unsupported", "qweight", "packed along the input axis (GPTQ-2.3)",
                   f"AWQ layout (qweight packed along the output axis) in all {len(awq)} layers")
    if awq:
        findings.append(finding("checkpoint.layer.unsupported", "warning", f"{len(awq)} layers have AWQ-shaped "
                                f"qweight (packed along the output axis), first '{awq[0]}'; not decoded as GPTQ",
                                tensor=awq[0]))
    return rows, findings


def _awq_shaped(t: dict[str, np.ndarray]) -> bool:
    """AWQ packs qweight (K, N*b/32) along the output axis; GPTQ (K*b/32, N) along the input (QF-5.2)."""
    qweight, scales = t.get("qweight"), t.get("scales")
    if qweight is None or scales is None or qweight.ndim != 2 or scales.ndim != 2:
        return False
    n = scales.shape[1]
    return n > 0 and qweight.shape[1] != n and qweight.shape[1] * 32 % n == 0 and qweight.shape[1] * 32 // n in (2, 3, 4, 8)


# -- SpQR ------------------------------------------------------------------------------------

def _spqr_layers(ckpt: Checkpoint, layers: list[LayerGroup], deep: bool,
                 progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    findings: list[Finding] = []
    config = None
    if ckpt.config is not None:
        findings += spqr_checks.config_findings(ckpt.config)
        try:
            config = spqr_checks.check_config(ckpt.config)
        except QFormatsError as err:
            findings.append(from_error(err.with_file(ckpt.configs[0].file)))
    skipped = set(config.not_converted()) if config is not None else set()
    rows = []
    for i, group in enumerate(layers):
        _tick(progress, i, len(layers), group.name)
        t = load_layer(ckpt, group)
        if any(group.name == s or group.name.startswith(s + ".") or f"{group.name}.weight" == s for s in skipped):
            findings.append(finding("spqr.config.shape_mismatch", "error", f"'{group.name}' is listed in "
                                    "modules_to_not_convert but holds SpQR tensors", tensor=group.name))
        try:
            layer = spqr.SpQRLayer(t, config=config, module=group.name)  # checked once, reused below
        except QFormatsError as err:
            findings.append(from_error(err.within(group.name)))
            continue
        findings += [f.model_copy(update={"tensor": f"{group.name}.{f.tensor}" if f.tensor else group.name})
                     for f in spqr_checks.portability_findings(layer)]
        outliers = spqr_checks.outlier_count(layer)
        m, n = layer.m, layer.n
        row = {"layer": group.name, "format": "spqr", "bits": 3, "group_size": 16, "in_features": n,
               "out_features": m, "sparse": layer.sparse, "outliers": outliers,
               "outlier_fraction": round(outliers / (m * n), 6),
               "bits_per_weight": round(sum(a.nbytes for a in t.values()) * 8 / (m * n), 4)}
        if deep:
            row.update(_stats(group.name, Moments.of(spqr.dequantize(layer)), findings))
        rows.append(row)
    return rows, findings


# -- GGUF / q4_K -----------------------------------------------------------------------------

def _gguf_layers(ckpt: Checkpoint, deep: bool, progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    infos = list(ckpt.gguf.tensors)
    rows, findings = [], []
    for i, info in enumerate(infos):
        _tick(progress, i, len(infos), info.name)
        if info.type_name != "Q4_K":
            continue
        blocks = ckpt.gguf.tensor_rows(info.name)
        try:
            q4_k.check_blocks(blocks, tensor=info.name)
        except QFormatsError as err:  # checked and found wrong: a row with its finding, not "nothing checked"
            findings.append(from_error(err))
            rows.append({"layer": info.name, "format": "q4_k", "bits": 4})
            continue
        n = blocks.shape[1] // q4_k.BLOCK_BYTES * q4_k.QK_K
        row = {"layer": info.name, "format": "q4_k", "bits": 4, "group_size": 32, "in_features": n,
               "out_features": blocks.shape[0], "bits_per_weight": q4_k.BLOCK_BYTES * 8 / q4_k.QK_K}
        if deep:
            row.update(_stats(info.name, Moments.of(q4_k.dequantize(blocks)), findings))
        rows.append(row)
    other = sum(info.type_name != "Q4_K" for info in infos)
    if other:
        findings.append(finding("checkpoint.layer.unsupported", "info", f"{other} GGUF tensors of other types "
                                "were size-checked by the reader but not decoded"))
    return rows, findings


# -- shared ----------------------------------------------------------------------------------

def _stats(name: str, moments: Moments, findings: list[Finding]) -> dict[str, Any]:
    """``--deep``: the decoded weight must be finite (QF-5.3); per-layer statistics."""
    if moments.nonfinite:
        label, where = moments.first_nonfinite
        findings.append(finding("checkpoint.decode.nonfinite", "error", f"'{name}' decodes to {label} at {where} "
                                f"({moments.nonfinite} non-finite weights)", tensor=name))
        return {"decoded": "non-finite"}
    return moments.row()


def _report(path: str, fmt: str, findings: list[Finding], layers: list[dict[str, Any]]) -> Report:
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    summary = {"layers": len(layers), "errors": counts["error"], "warnings": counts["warning"], "info": counts["info"]}
    return Report(path=path, verdict="invalid" if counts["error"] else "valid", format=fmt,
                  findings=findings, layers=layers, summary=summary)
