"""SpQR validation rules (spec/spqr.md §2-§7).

Two entry points, both taking a layer or a plain mapping of the four on-disk tensors:

* :func:`check_layer` raises :class:`QFormatsError` on the first structural error: anything a
  reader could misdecode (lengths, offsets, columns, permutation, reserved bits, non-finite fp16).
* :func:`portability_findings` lists what is legal but breaks or surprises real tools: columns
  >= 32768, the float32[0] empty outlier set, the int64 ``in_perm`` of SpQR PR #47, unsorted
  CSR rows, the pre-PR #52 config key; plus the outlier fraction as an info finding.

Every loop here is over the four tensors or a fixed field list, never over rows or tiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import ValidationError

from ...errors import fail, fail_validation
from ...findings import Finding, finding
from ...tensors import Layer, as_array, check_finite, check_tensor
from .codec import as_layer, check_perm, entry_rows, outlier_mask, second_order, so_bytes, split_col_vals, unpack_perm
from .layout import (
    DTYPES, RESERVED_SHIFT, SIGNED_COLUMN_LIMIT, TENSOR_NAMES, TILE, SpQRConfig, check_dims, dim_arg,
)

__all__ = ["check_layer", "portability_findings", "check_config", "config_findings", "outlier_count"]

_STAT_NAMES = ("W_s_s", "W_z_s", "W_s_z", "W_z_z")   # order inside the second-order word


def _tensors(layer: Any) -> dict[str, np.ndarray]:
    src = layer.tensors if isinstance(layer, Layer) else layer
    if not isinstance(src, Mapping):
        raise fail("argument.invalid", "layer", "a SpQR layer or a mapping of its tensors", type(layer).__name__)
    for name in TENSOR_NAMES:
        if name not in src or src[name] is None:
            raise fail("tensor.missing", name, "present", "missing", clause="SPQR-2.1")
    extra = sorted(set(src) - set(TENSOR_NAMES))
    if extra:
        raise fail("tensor.unexpected", extra[0], f"one of {', '.join(TENSOR_NAMES)}", extra[0], clause="SPQR-2.1")
    arrays = {}
    for name in TENSOR_NAMES:
        a = as_array(src[name], name)
        if a.ndim != 1:
            raise fail("tensor.shape", name, "one-dimensional", tuple(a.shape), clause="SPQR-2.1")
        if not a.dtype.isnative:     # the codec reinterprets bits with .view, which needs native order
            raise fail("tensor.dtype", name, "in native byte order", a.dtype.str, clause="SPQR-2.1")
        arrays[name] = np.ascontiguousarray(a)
    return arrays


def _check_dtypes(t: dict[str, np.ndarray]) -> None:
    for name, want in DTYPES.items():
        empty_f32 = name == "col_vals" and t[name].size == 0
        check_tensor(name, t[name], want + ("float32",) if empty_f32 else want, None)


def _dims(t: dict[str, np.ndarray], m: int | None, n: int | None) -> tuple[int, int]:
    perm = t["in_perm"]
    n_perm = perm.size * (2 if perm.dtype == np.int32 else 1)
    if n is not None and n != n_perm:
        want = n // 2 if perm.dtype == np.int32 else n
        raise fail("tensor.shape", "in_perm", f"of shape ({want},) for n = {n}", tuple(perm.shape), clause="SPQR-4.1")
    n = n_perm
    dw = t["dense_weights"].size
    if m is None:
        m = dw * TILE // n if n else 0
    check_dims(m, n, "dense_weights, in_perm")
    if dw != m * n // TILE:
        raise fail("tensor.shape", "dense_weights", f"of shape ({m * n // TILE},) = m*n/16", (dw,), clause="SPQR-2.1")
    return m, n


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_dense(dw: np.ndarray, m: int, n: int) -> None:
    u = dw.view(np.uint64)
    reserved = (u >> np.uint64(RESERVED_SHIFT)) != 0
    if reserved.any():
        j = _first(reserved)
        raise fail("spqr.dense.reserved_bits", "dense_weights", f"zero in bits {RESERVED_SHIFT}-63",
                   f"{int(u[j] >> np.uint64(RESERVED_SHIFT)):#x} at word {j}")
    b = so_bytes(dw, m, n)
    differ = b[..., 0::2] != b[..., 1::2]
    if differ.any():
        i, j, p = np.unravel_index(_first(differ.reshape(-1)), differ.shape)
        raise fail("spqr.dense.so_mismatch", "dense_weights", "the same second-order byte in rows 2p and 2p+1",
                   f"tile ({i}, {j}) byte {p}: {int(b[i, j, 2 * p]):#04x} vs {int(b[i, j, 2 * p + 1]):#04x}")
    stats = second_order(b)
    bad = ~np.isfinite(stats)
    if bad.any():
        i, j, s = np.unravel_index(_first(bad.reshape(-1)), bad.shape)
        raise fail("spqr.stats.nonfinite", "dense_weights", "finite float16 second-level statistics",
                   f"{_STAT_NAMES[s]} = {float(stats[i, j, s])} in tile ({i}, {j})")


def _check_offsets(ro: np.ndarray, cv: np.ndarray, m: int) -> str:
    entries = cv.size
    if ro.size == m + 1:
        sparse = "csr"
    elif ro.size == m // TILE + 1:
        sparse = "ptcsr"
    else:
        raise fail("spqr.row_offsets.length", "row_offsets", f"of length m+1 = {m + 1} (CSR) or m/16+1 = "
                   f"{m // TILE + 1} (PTCSR)", ro.size)
    if sparse == "ptcsr" and cv.dtype != np.int32:
        raise fail("tensor.dtype", "col_vals", "int32 (float32[0] only with CSR row_offsets, SPQR-7.2)",
                   cv.dtype.name, clause="SPQR-2.1")
    r = ro.astype(np.int64)
    if r[0] != 0:
        raise fail("spqr.row_offsets.start", "row_offsets", "0 at index 0", int(r[0]))
    step = np.diff(r)
    if (step < 0).any():
        j = _first(step < 0)
        raise fail("spqr.row_offsets.monotonic", "row_offsets", "non-decreasing",
                   f"{int(r[j])} then {int(r[j + 1])} at index {j + 1}")
    if r[-1] != entries:
        raise fail("spqr.row_offsets.end", "row_offsets", f"the col_vals length {entries} at the last index",
                   int(r[-1]))
    if sparse == "ptcsr" and (step % TILE).any():
        j = _first(step % TILE != 0)
        raise fail("spqr.ptcsr.stride", "row_offsets", "16 * (widest row of the block) for every block",
                   f"{int(step[j])} entries in block {j}")
    return sparse


def _check_entries(cv: np.ndarray, ro: np.ndarray, m: int, n: int, sparse: str) -> None:
    if cv.size == 0:
        return
    u = cv.view(np.uint32)
    cols, vals = split_col_vals(cv)
    smeared = (u >> np.uint32(16) == 0xFFFF) & (cols >= SIGNED_COLUMN_LIMIT)
    if smeared.any():
        j = _first(smeared)
        raise fail("spqr.outliers.sign_extended", "col_vals",
                   "free of sign-extended columns (value bits 0xffff over a column >= 32768)",
                   f"{int(u[j]):#010x} at entry {j}")
    if (cols >= n).any():
        j = _first(cols >= n)
        raise fail("spqr.outliers.column_range", "col_vals", f"columns below n = {n}", f"{int(cols[j])} at entry {j}")
    check_finite("col_vals", vals, "spqr.outliers.nonfinite")
    if sparse == "ptcsr":
        rows = entry_rows(ro, cv.size, m)
        owner = rows // TILE
        slot = (np.arange(cv.size) - ro.astype(np.int64)[owner]) // TILE
        zero = ~outlier_mask(cv, sparse)
        first_pad = np.full(m, np.iinfo(np.int64).max)
        np.minimum.at(first_pad, rows[zero], slot[zero])
        late = ~zero & (slot > first_pad[rows])
        if late.any():
            j = _first(late)
            raise fail("spqr.ptcsr.padding", "col_vals", "zero in every slot after a row's first padding slot",
                       f"{int(u[j]):#010x} at entry {j} (row {int(rows[j])}, slot {int(slot[j])})")


def _config_mapping(config: Any) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise fail("spqr.config.invalid", "quantization_config", "a mapping", type(config).__name__)
    return config


def check_config(config: SpQRConfig | Mapping[str, Any]) -> SpQRConfig:
    """Parse a ``quantization_config`` (SPQR-6.1); unknown keys are findings, not errors."""
    if isinstance(config, SpQRConfig):
        return config
    config = _config_mapping(config)
    known = {k: v for k, v in config.items() if k in SpQRConfig.model_fields}
    try:
        return SpQRConfig(**known)
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "missing":
            field = ".".join(str(p) for p in exc.errors()[0]["loc"])
            raise fail("spqr.config.invalid", field, "present", "missing") from None
        raise fail_validation("spqr.config.invalid", exc) from None


def _check_against_config(t: dict[str, np.ndarray], config: Any, module: str | None) -> None:
    cfg = check_config(config)
    if module is None:
        return
    declared = cfg.module_lengths(module)
    if declared is None:
        raise fail("spqr.config.shape_mismatch", f"{module}.*.shape", "listed in quantization_config.shapes",
                   "missing")
    for name in TENSOR_NAMES:
        if declared[name] is None or declared[name] != t[name].size:
            raise fail("spqr.config.shape_mismatch", f"{module}.{name}",
                       f"of the length declared in shapes ({declared[name]})", t[name].size)


def _validate(layer: Any, *, m: Any = None, n: Any = None, config: Any = None,
              module: str | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The checked, contiguous arrays and ``{"m", "n", "sparse"}``; what :class:`SpQRLayer` is built from."""
    m, n = dim_arg("m", m), dim_arg("n", n)
    t = _tensors(layer)
    _check_dtypes(t)
    m, n = _dims(t, m, n)
    if config is not None:
        _check_against_config(t, config, module)
    _check_dense(t["dense_weights"], m, n)
    sparse = _check_offsets(t["row_offsets"], t["col_vals"], m)
    _check_entries(t["col_vals"], t["row_offsets"], m, n, sparse)
    check_perm(unpack_perm(t["in_perm"]), n, "in_perm", "spqr.in_perm.not_permutation")
    return t, {"m": m, "n": n, "sparse": sparse}


def check_layer(layer: Any, *, m: int | None = None, n: int | None = None, config: Any = None,
                module: str | None = None) -> dict[str, Any]:
    """Raise :class:`QFormatsError` for the first structural error of a release layer (SPQR-2..4, 6).

    Returns ``{"m", "n", "sparse"}`` (dimensions inferred when not given).
    """
    return _validate(layer, m=m, n=n, config=config, module=module)[1]


def outlier_count(layer: Any, *, m: int | None = None, n: int | None = None) -> int:
    """Real outliers of a release layer: CSR entries, or PTCSR entries that are not padding (SPQR-3.8)."""
    lay = as_layer(layer, m=m, n=n)
    return int(outlier_mask(lay.col_vals, lay.sparse).sum())


def config_findings(config: Mapping[str, Any]) -> list[Finding]:
    """Portability findings of a ``quantization_config``: the old key name, keys the spec does not define."""
    config = _config_mapping(config)
    out = []
    if "linear_weights_not_to_quantize" in config:
        out.append(finding("spqr.config.legacy_key", "warning", "'linear_weights_not_to_quantize' is the name "
                           "used before SpQR PR #52; readers after it look for 'modules_to_not_convert'",
                           tensor="quantization_config.linear_weights_not_to_quantize"))
    for key in sorted(set(config) - set(SpQRConfig.model_fields)):
        out.append(finding("spqr.config.unknown_key", "warning", f"key {key!r} is not defined by the SpQR "
                           "chapter and is ignored", tensor=f"quantization_config.{key}"))
    return out


def portability_findings(layer: Any, *, m: int | None = None, n: int | None = None,
                         config: Mapping[str, Any] | None = None) -> list[Finding]:
    """Warnings and info for a layer; a mapping is validated first (an :class:`SpQRLayer` already is)."""
    lay = as_layer(layer, m=m, n=n)
    m, n, sparse = lay.m, lay.n, lay.sparse
    out: list[Finding] = []
    cv, ro, perm = lay.col_vals, lay.row_offsets, lay.in_perm
    if cv.dtype == np.float32:
        out.append(finding("spqr.col_vals.float32_empty", "warning", "'col_vals' is float32[0], the empty CSR "
                           "outlier set spqr_quant's merge_col_val writes; the spec type is int32[0]",
                           tensor="col_vals"))
    if perm.dtype == np.int64:
        out.append(finding("spqr.in_perm.int64", "error", f"'in_perm' is int64[{perm.size}] (SpQR PR #47); "
                           f"spqr_quant 0.2.0 raises on it and transformers cannot load it: int32[{n // 2}] "
                           "is required", tensor="in_perm"))
    cols, _ = split_col_vals(cv)
    real = outlier_mask(cv, sparse)
    wide = real & (cols >= SIGNED_COLUMN_LIMIT)
    if wide.any():
        out.append(finding("spqr.outliers.column_signed", "warning", f"{int(wide.sum())} outlier columns are "
                           f">= 32768 (first {int(cols[wide][0])}); spqr_quant reads columns as signed int16",
                           tensor="col_vals"))
    if sparse == "csr" and cols.size > 1:
        rows = entry_rows(ro, cols.size, m)
        bad = (np.diff(rows) == 0) & (np.diff(cols) <= 0)
        if bad.any():
            out.append(finding("spqr.outliers.unsorted", "warning", f"{int(bad.sum())} CSR entries do not "
                               "have a column above the previous entry of their row", tensor="col_vals"))
    nnz = int(real.sum())
    out.append(finding("spqr.outliers.fraction", "info", f"{nnz} outliers in {m * n} weights "
                       f"({100.0 * nnz / (m * n):.3f}%), {sparse.upper()}", tensor="col_vals"))
    if config is not None:
        out.extend(config_findings(config))
    return out

