"""AWQ (GEMM) models: the quantization config AutoAWQ writes, and the tensor specs (spec/awq.md).

Config (AWQ-5): ``config.json["quantization_config"]`` as AutoAWQ's ``AwqConfig.to_transformers_dict``
writes it (``quant_method``, ``zero_point``, ``group_size``, ``bits``, ``version``,
``modules_to_not_convert``); AutoAWQ's own key names (``q_group_size``, ``w_bit``) are accepted as
aliases, as its ``from_transformers_dict`` reads them; AutoAWQ 0.1's ``quant_config.json`` (those names,
no ``quant_method``, ``version`` upper-case) reads the same. Tensors (AWQ-2), ``K`` = in, ``N`` = out::

    qweight  int32    (K, N / 8)      codes, 8 per word along N, in the order of AWQ-2.3
    qzeros   int32    (G, N / 8)      zero points, packed the same way; stored as they are
    scales   float16  (G, N)
    bias     float16  (N,)            only if the Linear had one
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ... import SPEC_VERSION
from ...errors import brief, fail, fail_validation
from ...findings import Finding, finding
from ...tensors import TensorSpec

__all__ = ["AWQConfig", "AWQLayerSpec", "parse_config", "tensor_specs", "n_groups", "BITS", "PACK",
           "ORDER", "OTHER_VERSIONS", "SCHEMA_MODELS"]

BITS = 4
PACK = 8                                   # fields per int32 word (32 / 4)
ORDER = (0, 2, 4, 6, 1, 3, 5, 7)           # field i of a word holds column 8t + ORDER[i] (AWQ-2.3)
# version values of AutoAWQ's other layouts (AWQ-1.2): recognised, never decoded
OTHER_VERSIONS = {
    "gemv": "AutoAWQ GEMV layout (qweight packed along the input axis, split-k scales)",
    "gemv_fast": "AutoAWQ GEMVFast layout (interleaved, int16 packing)",
    "marlin": "AutoAWQ Marlin tile layout (repacked for the Marlin kernel)",
    "exllama": "exllama layout (AutoAWQ's GPTQ-style repack, zeros minus one)",
    "exllamav2": "exllamav2 layout",
    "ipex": "Intel IPEX layout",
}
KEY_ALIASES = (("q_group_size", "group_size"), ("w_bit", "bits"))


class AWQConfig(BaseModel):
    """An AWQ quantization config after alias resolution (AWQ-5.1); other keys land in ``model_extra``."""

    model_config = ConfigDict(frozen=True, extra="allow")
    spec_version: ClassVar[str] = SPEC_VERSION

    quant_method: Literal["awq"] = "awq"
    bits: Literal[4] = 4
    group_size: int = Field(128, description="-1 (one group of K rows) or > 0")
    zero_point: Literal[True] = Field(True, description="GEMM layers always store zero points (AWQ-5.1)")
    version: Literal["gemm"] = "gemm"
    modules_to_not_convert: list[str] | None = None

    @field_validator("group_size")
    @classmethod
    def _group_size(cls, value: int) -> int:
        if value != -1 and value <= 0:
            raise ValueError("must be -1 or > 0")
        return value


class AWQLayerSpec(BaseModel):
    """The dimensions that fix every tensor shape of one AWQ GEMM layer (AWQ-2.2)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = SPEC_VERSION

    in_features: int = Field(gt=0)
    out_features: int = Field(gt=0, multiple_of=PACK)
    group_size: int
    bias: bool = False


def parse_config(raw: Mapping[str, Any], *, source: str | None = None) -> tuple[AWQConfig, list[Finding]]:
    """Validate an AWQ config (AWQ-5); the other AutoAWQ layouts are ``awq.config.other_layout`` (AWQ-1.2)."""
    if not isinstance(raw, Mapping):
        raise fail("awq.config.invalid", "quantization_config", "a JSON object", type(raw).__name__)
    data = dict(raw)
    for alias, key in KEY_ALIASES:
        if alias in data:
            value = data.pop(alias)
            if key in data and data[key] != value:
                raise fail("awq.config.invalid", alias, f"equal to '{key}' when both are present ({brief(data[key])})",
                           value)
            data.setdefault(key, value)
    version = data.get("version", "gemm")
    if isinstance(version, str):
        data["version"] = version = version.lower()      # AutoAWQ lower-cases it (AwqConfig.from_dict)
    if isinstance(version, str) and version in OTHER_VERSIONS:     # a list or object is the model's to refuse
        raise fail("awq.config.other_layout", "version", f"'gemm' (this is the {OTHER_VERSIONS[version]})", version)
    try:
        config = AWQConfig.model_validate(data)
    except ValidationError as exc:
        raise fail_validation("awq.config.invalid", exc) from None
    where = f" in {source}" if source else ""
    findings = [finding("awq.config.unknown_key", "warning",
                        f"config key '{key}'{where} is not defined by the spec; kept, not interpreted")
                for key in sorted(config.model_extra or {})]
    return config, findings


def n_groups(in_features: int, group_size: int) -> int:
    """G = K / group_size (which must divide K, AWQ-2.2); -1 means one group."""
    if group_size == -1:
        return 1
    if group_size <= 0:
        raise fail("argument.invalid", "group_size", "-1 or > 0", group_size)
    if in_features % group_size:
        raise fail("awq.group.shape", "group_size", f"a divisor of in_features {in_features} (AWQ-2.2)", group_size)
    return in_features // group_size


def tensor_specs(in_features: int, out_features: int, group_size: int, *, bias: bool = False) -> dict[str, TensorSpec]:
    """Name, dtype and shape of each tensor of one layer (AWQ-2.1, AWQ-2.2)."""
    if out_features <= 0 or out_features % PACK:
        raise fail("bits.length", "out_features", f"a positive multiple of {PACK} (AWQ-2.2)", out_features)
    groups = n_groups(in_features, group_size)
    specs = [
        TensorSpec(name="qweight", dtype="int32", shape=(in_features, out_features // PACK)),
        TensorSpec(name="qzeros", dtype="int32", shape=(groups, out_features // PACK)),
        TensorSpec(name="scales", dtype="float16", shape=(groups, out_features)),
        TensorSpec(name="bias", dtype="float16", shape=(out_features,), required=bias),
    ]
    return {spec.name: spec for spec in specs}


SCHEMA_MODELS = (AWQConfig, AWQLayerSpec)
