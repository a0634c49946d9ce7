"""compressed-tensors models: the ``quantization_config`` as compressed-tensors 0.20 writes it
(``ModelCompressor.update_config``), and which config group quantizes which module (CT-5).

Only what decoding needs is interpreted: each group's ``targets`` and ``weights`` (``num_bits``,
``type``, ``symmetric``, ``strategy``, ``group_size``, ``actorder``), the group's or the global
``format``, and ``ignore``. Every other key is kept (``extra="allow"``) and never crashes a read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ... import SPEC_VERSION
from ...errors import QFormatsError, fail, fail_validation
from ...findings import Finding

__all__ = ["CTConfig", "CTScheme", "CTWeights", "ModuleScheme", "Uncovered", "parse_config", "module_schemes", "PACKED",
           "OTHER_FORMATS", "SCHEMA_MODELS"]

PACKED = "pack-quantized"
# formats compressed-tensors writes (compressed_tensors/config/base.py CompressionFormat) that are not this one
OTHER_FORMATS = ("dense", "sparse-bitmask", "sparse-24-bitmask", "int-quantized", "float-quantized",
                 "naive-quantized", "marlin-24", "mixed-precision", "nvfp4-pack-quantized", "mxfp4-pack-quantized",
                 "mxfp6-pack-quantized", "mxfp8-quantized")
STRATEGIES = ("group", "channel")


class Uncovered(str):
    """Why a module's config group is one qformats does not decode (a strategy outside CT-2.2): the module is
    reported as not checked, not as contradicting its config."""


class CTWeights(BaseModel):
    """A scheme's ``weights`` (compressed-tensors ``QuantizationArgs``), the keys decoding reads."""

    model_config = ConfigDict(frozen=True, extra="allow")

    num_bits: int = Field(8, ge=1, le=8)
    type: Literal["int", "float"] = "int"
    symmetric: bool = True
    group_size: int | None = None
    strategy: str | None = None
    actorder: str | bool | None = None
    dynamic: bool | str = False


class CTScheme(BaseModel):
    """One ``config_groups`` entry (compressed-tensors ``QuantizationScheme``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    targets: list[str]
    weights: CTWeights | None = None
    input_activations: dict[str, Any] | None = None
    output_activations: dict[str, Any] | None = None
    format: str | None = None


class CTConfig(BaseModel):
    """``config.json["quantization_config"]`` of a compressed-tensors checkpoint (CT-5.1)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    spec_version: ClassVar[str] = SPEC_VERSION

    quant_method: Literal["compressed-tensors"] = "compressed-tensors"
    config_groups: dict[str, CTScheme]
    format: str | None = None
    ignore: list[str] = Field(default_factory=list)
    quantization_status: str | None = None
    version: str | None = None


class ModuleScheme(BaseModel):
    """What one module holding ``weight_packed`` is quantized with (CT-5.3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    num_bits: int
    symmetric: bool
    strategy: Literal["group", "channel"]
    group_size: int | None
    actorder: str | None = None


KNOWN_KEYS = {"quant_method", "config_groups", "format", "ignore", "quantization_status", "version",
              "kv_cache_scheme", "global_compression_ratio", "sparsity_config", "transform_config",
              "moe_sparsity_config"}


def parse_config(raw: Mapping[str, Any], *, source: str | None = None) -> tuple[CTConfig, list[Finding]]:
    """Validate the config (CT-5.1); unknown top-level keys are kept (compressed-tensors adds keys often)."""
    if not isinstance(raw, Mapping):
        raise fail("ctensors.config.invalid", "quantization_config", "a JSON object", type(raw).__name__)
    try:
        config = CTConfig.model_validate(dict(raw))
    except ValidationError as exc:
        raise fail_validation("ctensors.config.invalid", exc) from None
    return config, []


def _scheme_format(config: CTConfig, scheme: CTScheme) -> str | None:
    return scheme.format or config.format


def _is_class_target(target: str) -> bool:
    """``Linear`` and other class names: no ``re:`` prefix and no dot (compressed-tensors ``_match_class``)."""
    return not target.startswith("re:") and "." not in target


def target_matches(targets: Sequence[str], modules: Sequence[str], *, classes_match: bool) -> list[int | None]:
    """For each module, the index of the first target that names it (exact name or ``re:`` + ``re.match``,
    compressed-tensors ``match_name``); a class name matches every module when ``classes_match`` (the
    checkpoint does not record classes, CT-5.2). Regexes run in a bounded child (GPTQ-6.6's matcher)."""
    from ..gptq import dynamic

    regexes = [(i, t.removeprefix("re:")) for i, t in enumerate(targets) if t.startswith("re:")]
    try:
        regex_hits = dynamic.first_matches([p for _, p in regexes], list(modules)) if regexes else [None] * len(modules)
    except QFormatsError as err:
        raise fail("ctensors.config.invalid", "targets", "regular expressions Python's re matches in bounded time",
                   err.actual) from None
    out: list[int | None] = []
    for module, hit in zip(modules, regex_hits):
        hits = [i for i, t in enumerate(targets) if t == module]
        if hit is not None:
            hits.append(regexes[hit][0])
        if classes_match:
            hits += [i for i, t in enumerate(targets) if _is_class_target(t)]
        out.append(min(hits) if hits else None)
    return out


def module_schemes(config: CTConfig, modules: Sequence[str]) -> dict[str, ModuleScheme | str]:
    """Each module's scheme, or why it has none: ``"ignored by <entry>"``, ``"no config group targets it"``,
    or the reason its group is outside this format (CT-5.3)."""
    names = list(modules)
    ignored = target_matches(config.ignore, names, classes_match=False)
    out: dict[str, ModuleScheme | str] = {m: "no config group targets it" for m in names}
    for module, hit in zip(names, ignored):
        if hit is not None:
            out[module] = f"ignored by ignore entry {config.ignore[hit]!r}"
    for group, scheme in config.config_groups.items():
        hits = target_matches(scheme.targets, names, classes_match=True)
        for module, hit in zip(names, hits):
            if hit is None or not isinstance(out[module], str) or out[module].startswith("ignored"):
                continue
            out[module] = _resolve(config, group, scheme)
    return out


def _resolve(config: CTConfig, group: str, scheme: CTScheme) -> ModuleScheme | str:
    fmt = _scheme_format(config, scheme)
    w = scheme.weights
    if fmt != PACKED:
        return f"config group {group!r} has format {fmt!r}, not {PACKED!r}"
    if w is None or w.type != "int":
        return f"config group {group!r} quantizes no int weights"
    if w.strategy not in STRATEGIES:
        return Uncovered(f"config group {group!r} has strategy {w.strategy!r} (covered: group, channel)")
    if w.strategy == "group" and (w.group_size is None or w.group_size <= 0):
        return f"config group {group!r} has strategy group without a positive group_size"
    actorder = w.actorder if isinstance(w.actorder, str) else ("group" if w.actorder else None)
    return ModuleScheme(group=group, num_bits=w.num_bits, symmetric=w.symmetric, strategy=w.strategy,
                        group_size=w.group_size if w.strategy == "group" else None, actorder=actorder)


SCHEMA_MODELS = (CTConfig, CTScheme, CTWeights, ModuleScheme)
