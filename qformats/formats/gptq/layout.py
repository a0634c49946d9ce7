"""GPTQ v1/v2 models: the quantization config as found in the wild, and the tensor specs.

Config (spec/gptq.md GPTQ-6): the dict under ``config.json["quantization_config"]`` or in
``quantize_config.json``, as AutoGPTQ, GPTQModel, optimum/transformers and auto-round write it.
Aliases are resolved before validation; keys the spec does not define are kept and reported
as warnings, never a crash (GPTQ-6.4).

Tensors (GPTQ-2), for ``K = in_features``, ``N = out_features``, ``G = ceil(K / group_size)``::

    qweight  int32    (K * bits / 32, N)   codes of W^T, packed along K (QF-3)
    qzeros   int32    (G, N * bits / 32)   zero fields, packed along N; v1: zero - 1, v2: zero
    scales   float16  (G, N)
    g_idx    int32    (K,)                 group of input row k
    bias     float16  (N,)                 only if the Linear had one
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ... import SPEC_VERSION
from ...errors import QFormatsError, brief, fail, fail_validation
from ...findings import Finding, finding
from ...tensors import TensorSpec
from . import dynamic

__all__ = [
    "BITS",
    "check_bits",
    "check_version",
    "group_rows",
    "ModuleParams",
    "module_params",
    "modules_params",
    "DynamicOverride",
    "GPTQConfig",
    "GPTQMeta",
    "GPTQLayerSpec",
    "Version",
    "parse_config",
    "tensor_specs",
    "n_groups",
    "SCHEMA_MODELS",
]

BITS = (2, 3, 4, 8)
Version = Literal["v1", "v2"]

# checkpoint_format values (GPTQ-6.3). Absent means v1: AutoGPTQ <= 0.7 wrote no such key.
FORMAT_VERSIONS: dict[str | None, Version] = {None: "v1", "gptq": "v1", "gptq_v2": "v2"}
OTHER_LAYOUTS = {
    "marlin": "AutoGPTQ Marlin tile layout (tensors B, s; no qzeros or g_idx)",
    "bitblas": "BitBLAS layout",
    "gptq_p": "GPTQModel planar ('split-plane') layout",
    "qqq": "QQQ layout",
}
# (alias found in the wild, canonical key), GPTQ-6.2. Sources: GPTQModel QUANT_CONFIG_ARG_SYNONYMS,
# AutoGPTQ BaseQuantizeConfig.from_quant_config, transformers 5.x GPTQConfig.
KEY_ALIASES = (("format", "checkpoint_format"), ("method", "quant_method"),
               ("w_bit", "bits"), ("wbits", "bits"), ("q_group_size", "group_size"))


def check_bits(bits: Any) -> int:
    """The GPTQ widths (GPTQ-6.1): an integer in {2, 3, 4, 8}, never a bool or a float."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or int(bits) not in BITS:
        raise fail("bits.unsupported", "bits", "one of 2, 3, 4, 8", bits)
    return int(bits)


def check_version(version: Any, name: str = "version") -> Version:
    """'v1' (zero stored minus one) or 'v2' (zero stored exactly), GPTQ-1."""
    if version not in ("v1", "v2"):
        raise fail("argument.invalid", name, "'v1' or 'v2'", version)
    return version  # type: ignore[return-value]


def group_rows(in_features: int, group_size: int) -> int:
    """Rows per group: ``group_size``, or all K rows for -1 (GPTQ-5.5)."""
    return in_features if group_size == -1 else group_size


class DynamicOverride(BaseModel):
    """One GPTQModel ``dynamic`` rule's overrides (GPTQ-6.6); other keys are kept, not interpreted."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)

    bits: Literal[2, 3, 4, 8] | None = None
    group_size: int | None = None
    desc_act: bool | None = None
    sym: bool | None = None

    @field_validator("group_size")
    @classmethod
    def _group_size(cls, value: int | None) -> int | None:
        if value is not None and value != -1 and value <= 0:
            raise ValueError("must be -1 or > 0")
        return value


class GPTQMeta(BaseModel):
    """``meta`` as GPTQModel writes it: ``quantizer`` is "name:version" or a list of them."""

    model_config = ConfigDict(frozen=True, extra="allow")

    quantizer: tuple[str, ...] = ()
    uri: str | None = None

    @field_validator("quantizer", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class GPTQConfig(BaseModel):
    """A GPTQ quantization config after alias resolution (GPTQ-6.1).

    ``version`` is derived from ``checkpoint_format``; unknown keys land in ``model_extra``.
    """

    model_config = ConfigDict(frozen=True, extra="allow")
    spec_version: ClassVar[str] = SPEC_VERSION

    bits: Literal[2, 3, 4, 8]
    group_size: int = Field(-1, description="-1 (one group of K rows) or > 0")
    desc_act: bool = False
    sym: bool = True
    static_groups: bool = False
    true_sequential: bool = True
    damp_percent: float | None = Field(None, gt=0, lt=1)
    checkpoint_format: str | None = None
    quant_method: Literal["gptq"] = "gptq"
    lm_head: bool = False
    pack_dtype: Literal["int32"] = "int32"
    dynamic: dict[str, DynamicOverride] | None = None
    meta: GPTQMeta | None = None
    model_name_or_path: str | None = None
    model_file_base_name: str | None = None
    modules_in_block_to_quantize: list[list[str]] | list[str] | None = None

    @field_validator("group_size")
    @classmethod
    def _group_size(cls, value: int) -> int:
        if value != -1 and value <= 0:
            raise ValueError("must be -1 or > 0")
        return value

    @field_validator("dynamic")
    @classmethod
    def _patterns_compile(cls, value: dict[str, DynamicOverride] | None) -> dict[str, DynamicOverride] | None:
        try:
            dynamic.check_rules(list(value or {}))
        except QFormatsError as err:
            raise ValueError(f"must be {err.constraint} (got {err.actual})") from None
        return value

    @property
    def version(self) -> Version:
        return FORMAT_VERSIONS[self.checkpoint_format]


class ModuleParams(BaseModel):
    """What one module is quantized with, after GPTQ-6.6 overrides."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bits: Literal[2, 3, 4, 8]
    group_size: int
    desc_act: bool
    sym: bool
    version: Version
    excluded_by: str | None = None  # the "-:" rule that leaves this module unquantized, if any


def module_params(config: GPTQConfig, module: str) -> ModuleParams:
    """The config as it applies to ``module`` (GPTQ-6.6); see :func:`modules_params`."""
    return modules_params(config, [module])[module]


def modules_params(config: GPTQConfig, modules: Sequence[str]) -> dict[str, ModuleParams]:
    """The config as it applies to each module: the first matching ``dynamic`` rule decides (GPTQ-6.6).

    Patterns are anchored at the start of the module name (``re.match``), as vLLM's
    ``get_dynamic_override`` applies them; matching is bounded in time (``gptq.config.dynamic_unsafe``).
    """
    base = {"bits": config.bits, "group_size": config.group_size, "desc_act": config.desc_act,
            "sym": config.sym, "version": config.version}
    keys = list(config.dynamic or {})
    out = {}
    for module, index in zip(modules, dynamic.first_matches(keys, modules)):
        if index is None:
            out[module] = ModuleParams(**base)
        elif dynamic.rule(keys[index])[0] == "-":
            out[module] = ModuleParams(**base, excluded_by=keys[index])
        else:
            override = config.dynamic[keys[index]].model_dump(exclude_none=True)
            out[module] = ModuleParams(**(base | {k: v for k, v in override.items() if k in base}))
    return out


class GPTQLayerSpec(BaseModel):
    """The dimensions that fix every tensor shape of one GPTQ layer (GPTQ-2.2)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = SPEC_VERSION

    in_features: int = Field(gt=0)
    out_features: int = Field(gt=0)
    bits: Literal[2, 3, 4, 8]
    group_size: int
    version: Version = "v1"
    bias: bool = False


def _resolve_aliases(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    data = dict(raw)
    notes: list[Finding] = []
    for alias, key in KEY_ALIASES:
        if alias not in data:
            continue
        value = data.pop(alias)
        if key in data and data[key] != value:
            raise fail("gptq.config.invalid", alias, f"equal to '{key}' when both are present ({brief(data[key])})", value)
        data.setdefault(key, value)
    if "zero_point" in data:  # GPTQModel synonym: zero_point=True means asymmetric
        data.setdefault("sym", not data.pop("zero_point"))
    if data.get("is_marlin_format"):
        raise fail("gptq.config.other_layout", "is_marlin_format", "absent or false (a GPTQ v1/v2 layout)", True)
    data.pop("is_marlin_format", None)
    return data, notes


def parse_config(raw: Mapping[str, Any], *, source: str | None = None) -> tuple[GPTQConfig, list[Finding]]:
    """Validate a GPTQ quantization config; return it with warning findings for unknown keys.

    Raises ``gptq.config.other_layout`` for Marlin/BitBLAS/gptq_p checkpoints (GPTQ-6.3) and
    ``gptq.config.invalid`` for values outside their domain (GPTQ-6.1).
    """
    if not isinstance(raw, Mapping):
        raise fail("gptq.config.invalid", "quantization_config", "a JSON object", type(raw).__name__)
    data, findings = _resolve_aliases(raw)
    fmt = data.get("checkpoint_format")
    if fmt is not None and not isinstance(fmt, str):
        raise fail("gptq.config.invalid", "checkpoint_format", "a string", fmt)
    if fmt in OTHER_LAYOUTS:
        raise fail("gptq.config.other_layout", "checkpoint_format",
                   "absent, 'gptq' or 'gptq_v2' (this is the " + OTHER_LAYOUTS[fmt] + ")", fmt)
    if fmt not in FORMAT_VERSIONS:
        raise fail("gptq.config.invalid", "checkpoint_format", "absent, 'gptq' or 'gptq_v2'", fmt)
    if isinstance(data.get("dynamic"), Mapping):
        dynamic.check_rules(list(data["dynamic"]))
    try:
        config = GPTQConfig.model_validate(data)
    except ValidationError as exc:
        raise fail_validation("gptq.config.invalid", exc) from None
    for key in sorted(config.model_extra or {}):
        where = f" in {source}" if source else ""
        findings.append(finding("gptq.config.unknown_key", "warning",
                                f"config key '{key}'{where} is not defined by the spec; kept, not interpreted",
                                tensor=None))
    return config, findings


def n_groups(in_features: int, group_size: int) -> int:
    """G = ceil(K / group_size); group_size -1 means one group (GPTQ-5.5)."""
    if group_size == -1:
        return 1
    if group_size <= 0:
        raise fail("argument.invalid", "group_size", "-1 or > 0", group_size)
    return -(-in_features // group_size)


def tensor_specs(in_features: int, out_features: int, bits: int, group_size: int,
                 *, bias: bool = False) -> dict[str, TensorSpec]:
    """Name, dtype and shape of each tensor of one layer (GPTQ-2.1, GPTQ-2.2)."""
    check_bits(bits)
    for name, n in (("in_features", in_features), ("out_features", out_features)):
        if n <= 0 or (n * bits) % 32:
            raise fail("bits.length", name, f"positive with {name} * bits a multiple of 32 (GPTQ-2.4)", n)
    groups = n_groups(in_features, group_size)
    specs = [
        TensorSpec(name="qweight", dtype="int32", shape=(in_features * bits // 32, out_features)),
        TensorSpec(name="qzeros", dtype="int32", shape=(groups, out_features * bits // 32)),
        TensorSpec(name="scales", dtype="float16", shape=(groups, out_features)),
        TensorSpec(name="g_idx", dtype="int32", shape=(in_features,), required=False),
        TensorSpec(name="bias", dtype="float16", shape=(out_features,), required=bias),
    ]
    return {spec.name: spec for spec in specs}


SCHEMA_MODELS = (GPTQConfig, GPTQMeta, DynamicOverride, GPTQLayerSpec, ModuleParams)
