"""What the inspect page draws, gathered once into the report (``pictures`` in ``inspect --json``; spec/checkpoints.md
INSPECT-2): per tensor, a map of the blocks holding non-finite values or outliers, pooled to at most 256 x 256
cells, and histograms of its scales and zero-points on fixed bins. The page is drawn from this data only
(DESIGN.md §7), never from the tensors.

A block is a GGUF tensor's ggml block (a row's ``block_size`` elements) or a safetensors module's quantization
group (``group_size`` input columns of one output row; a whole row where the scale is per channel).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..errors import QFormatsError

__all__ = ["Pictures", "TensorPicture", "Histogram", "collect", "pool", "log2_histogram", "tensor_picture",
           "MAX_CELLS", "OUTLIER_FACTOR", "LOG2_MIN", "LOG2_MAX"]

MAX_CELLS = 256                  # INSPECT-2.2: a map is at most 256 x 256 cells
OUTLIER_FACTOR = 8.0             # INSPECT-2.3: a block deviating more than 8 standard deviations from the mean
LOG2_MIN, LOG2_MAX = -24, 16     # INSPECT-2.4: bins of floor(log2 |x|), float16's whole range, the ends clipped
DECODE_CHUNK_BYTES = 1 << 24     # GGUF rows decoded at once: 16 MiB of blocks in, as validate --deep
# Scale tensors of safetensors modules (float arrays) and their zero-points, by suffix; packed or coded ones
# (GPTQ's qzeros, FP8 scale bytes) are not histogrammed.
SCALE_SUFFIXES = ("scales", "weight_scale", "weight_scale_inv", "absmax")
ZERO_SUFFIXES = ("weight_zero_point", "zeros")
GGUF_ZERO_FIELDS = ("dmin", "m")   # a K-quant's or q4_1/q5_1's offset: the zero-point of ggml's affine types
GGUF_PLAIN_FIELDS = ("element",)   # plain float types: no scale


class Histogram(BaseModel):
    """Counts of floor(log2 |x|) over bins LOG2_MIN .. LOG2_MAX - 1 (values outside clipped to the end bins)."""

    model_config = ConfigDict(extra="forbid")

    fields: list[str] = Field(description="the scale fields or tensors counted (ggml: d, dmin, m; safetensors: suffixes)")
    counts: list[int] = Field(description=f"{LOG2_MAX - LOG2_MIN} bins, bin i holding 2^(LOG2_MIN+i) <= |x| < 2^(LOG2_MIN+i+1)")
    zero: int = Field(ge=0)
    negative: int = Field(ge=0, description="finite values below zero (counted in their |x| bin too)")
    nonfinite: int = Field(ge=0)
    total: int = Field(ge=0)


class TensorPicture(BaseModel):
    """One tensor's (or module's) map and histograms."""

    model_config = ConfigDict(extra="forbid")

    tensor: str = Field(description="the layer's name, as in rows and findings")
    rows: int = Field(ge=0, description="rows of blocks: GGUF rows, output features")
    blocks: int = Field(ge=0, description="blocks per row")
    block_elements: int = Field(ge=1)
    cell_rows: int = Field(ge=1, description="rows pooled into one map cell")
    cell_blocks: int = Field(ge=1, description="blocks of a row pooled into one map cell")
    grid: list[int] = Field(description="[cell rows, cell columns], each at most MAX_CELLS")
    mean: float | None = Field(description="mean of the finite decoded weights")
    std: float | None = Field(description="standard deviation of the finite decoded weights")
    nonfinite: list[list[int]] = Field(description="[cell row, cell column, non-finite values, first such block's "
                                       "row, its block in that row], cells with any")
    outliers: list[list[float]] = Field(description="[cell row, cell column, outlier blocks, first such block's row, "
                                        "its block, its largest |w - mean|], cells with any")
    scales: Histogram | None = None
    zeros: Histogram | None = None


class Pictures(BaseModel):
    """``inspect --html``'s data (INSPECT-2), bounded: at most MAX_CELLS^2 cells and two fixed histograms a tensor."""

    model_config = ConfigDict(extra="forbid")

    max_cells: int = MAX_CELLS
    outlier_factor: float = OUTLIER_FACTOR
    log2_min: int = LOG2_MIN
    log2_max: int = LOG2_MAX
    tensors: list[TensorPicture]
    not_drawn: dict[str, str] = Field(default_factory=dict, description="layer -> why it has no picture")


# -- folding decoded weights into per-block arrays ------------------------------------------------------------


class _Blocks:
    """Per-block non-finite counts and finite extremes, and the tensor's finite sums, filled a slice of rows at
    a time: memory follows the blocks (elements / block size), not the tensor."""

    def __init__(self, rows: int, n: int, width: int):
        self.width, self.starts = width, np.arange(0, n, width)
        self.bad = np.zeros((rows, len(self.starts)), np.int64)
        self.hi = np.full((rows, len(self.starts)), -np.inf)
        self.lo = np.full((rows, len(self.starts)), np.inf)
        self.count = self.total = self.squares = 0.0

    def add(self, start: int, w: np.ndarray) -> None:
        w = np.asarray(w, np.float64).reshape(w.shape[0], -1)
        finite = np.isfinite(w)
        r = slice(start, start + w.shape[0])
        self.bad[r] = np.add.reduceat((~finite).astype(np.int64), self.starts, axis=1)
        self.hi[r] = np.maximum.reduceat(np.where(finite, w, -np.inf), self.starts, axis=1)
        self.lo[r] = np.minimum.reduceat(np.where(finite, w, np.inf), self.starts, axis=1)
        clean = np.where(finite, w, 0.0)
        self.count += float(finite.sum())
        self.total += float(clean.sum())
        self.squares += float(np.square(clean).sum())

    def picture(self, name: str, scales: Histogram | None, zeros: Histogram | None) -> TensorPicture:
        mean = self.total / self.count if self.count else None
        std = float(np.sqrt(max(self.squares / self.count - mean ** 2, 0.0))) if self.count else None
        with np.errstate(invalid="ignore"):     # a block of only non-finite values: -inf - mean
            spread = np.maximum(self.hi - (mean or 0.0), (mean or 0.0) - self.lo)
        spread = np.where(np.isfinite(spread), spread, 0.0)
        outlier = spread > OUTLIER_FACTOR * std if std else np.zeros_like(self.bad, bool)
        rows, nb = self.bad.shape
        cr, cb = -(-rows // MAX_CELLS) or 1, -(-nb // MAX_CELLS) or 1
        return TensorPicture(
            tensor=name, rows=rows, blocks=nb, block_elements=self.width, cell_rows=cr, cell_blocks=cb,
            grid=[-(-rows // cr), -(-nb // cb)], mean=mean, std=std,
            nonfinite=[[i, j, int(v), r, b] for i, j, v, r, b, _ in pool(self.bad, self.bad > 0, None, cr, cb)],
            outliers=[[i, j, int(v), r, b, float(x)] for i, j, v, r, b, x in pool(outlier.astype(np.int64), outlier,
                                                                                     spread, cr, cb)],
            scales=scales, zeros=zeros)


def pool(values: np.ndarray, mask: np.ndarray, extra: np.ndarray | None, cr: int, cb: int) -> list[tuple]:
    """Cells of ``cr`` x ``cb`` blocks holding any ``mask`` block: (cell row, cell column, sum of ``values``, first
    masked block's row and block in row-major order, ``extra`` at that block or 0)."""
    hits = np.argwhere(mask)                        # row-major: a cell's first hit is its first block
    if not len(hits):
        return []
    cells = (hits[:, 0] // cr) * (-(-mask.shape[1] // cb)) + hits[:, 1] // cb
    sums = np.bincount(cells, weights=values[hits[:, 0], hits[:, 1]])
    order, first = np.unique(cells, return_index=True)
    ncols = -(-mask.shape[1] // cb)
    return [(int(c // ncols), int(c % ncols), int(sums[c]), int(hits[f, 0]), int(hits[f, 1]),
             float(extra[hits[f, 0], hits[f, 1]]) if extra is not None else 0.0) for c, f in zip(order, first)]


def log2_histogram(values: list[np.ndarray], fields: list[str]) -> Histogram | None:
    """The INSPECT-2.4 histogram of the values of ``fields`` (None when there are none)."""
    if not values:
        return None
    x = np.concatenate([np.asarray(v, np.float64).ravel() for v in values])
    finite = np.isfinite(x)
    a = np.abs(x[finite])
    nonzero = a[a > 0]
    with np.errstate(divide="ignore"):
        bins = np.clip(np.floor(np.log2(nonzero)).astype(np.int64), LOG2_MIN, LOG2_MAX - 1) - LOG2_MIN
    return Histogram(fields=fields, counts=np.bincount(bins, minlength=LOG2_MAX - LOG2_MIN).tolist(),
                     zero=int(a.size - nonzero.size), negative=int((x[finite] < 0).sum()),
                     nonfinite=int((~finite).sum()), total=int(x.size))


# -- GGUF tensors --------------------------------------------------------------------------------------------


def _gguf_pictures(ckpt: Any, names: set[str]) -> Iterator[TensorPicture]:
    from ..formats.ggml.codec import dequantize
    from ..formats.ggml.layers import tensor_type

    for info in ckpt.gguf.tensors:
        bt = tensor_type(info)
        if info.name not in names or bt is None:
            continue
        data = ckpt.gguf.tensor_rows(info.name)
        nb = data.shape[1] // bt.type_size
        blocks = _Blocks(data.shape[0], nb * bt.block_size, bt.block_size)
        scales: dict[str, list[np.ndarray]] = {}
        step = max(1, DECODE_CHUNK_BYTES // max(data.shape[1], 1))
        for start in range(0, data.shape[0], step):
            part = data[start:start + step]
            with np.errstate(all="ignore"):          # NaN and inf scales decode to non-finite weights: counted
                blocks.add(start, dequantize(bt, part))
                fields = bt.scales(part.reshape(-1, bt.type_size))
            for field, v in fields.items():
                if field not in GGUF_PLAIN_FIELDS:
                    scales.setdefault(field, []).append(np.asarray(v, np.float32))
        zero = [f for f in scales if f in GGUF_ZERO_FIELDS]
        scale = [f for f in scales if f not in GGUF_ZERO_FIELDS]
        yield blocks.picture(info.name, log2_histogram([a for f in scale for a in scales[f]], scale),
                             log2_histogram([a for f in zero for a in scales[f]], zero))


# -- safetensors modules -------------------------------------------------------------------------------------


def _module_picture(ckpt: Any, group: Any, row: dict[str, Any]) -> TensorPicture:
    from ..formats import registry

    w, _ = registry.FACES[group.format].layers.decode(ckpt, group)
    w = np.asarray(w).reshape(np.asarray(w).shape[0], -1)
    gs = row.get("group_size")
    hists = []
    for suffixes, kinds in ((SCALE_SUFFIXES, "f"), (ZERO_SUFFIXES, "fiu")):   # coded scales (uint8 absmax) left out
        found = [s for s in suffixes if s in group.tensors]
        arrays = [np.asarray(ckpt.tensor(group.tensors[s])) for s in found]
        kept = [(s, a) for s, a in zip(found, arrays) if a.dtype.kind in kinds]
        hists.append(log2_histogram([a for _, a in kept], [s for s, _ in kept]))
    return tensor_picture(group.name, w, gs if isinstance(gs, int) and 0 < gs <= w.shape[1] else w.shape[1], *hists)


def tensor_picture(name: str, w: np.ndarray, width: int, scales: Histogram | None = None,
                   zeros: Histogram | None = None) -> TensorPicture:
    """The picture of one decoded weight ``w`` (rows, n) whose blocks are ``width`` columns of a row."""
    blocks = _Blocks(w.shape[0], w.shape[1], width)
    with np.errstate(all="ignore"):
        blocks.add(0, w)
    return blocks.picture(name, scales, zeros)


def _safetensors_pictures(ckpt: Any, rows: dict[str, dict[str, Any]], skipped: dict[str, str]) -> Iterator[TensorPicture]:
    from ..validate import group_layers

    for group in group_layers(ckpt.tensor_names(), ckpt.config)[0]:
        if group.name not in rows:
            continue
        try:
            yield _module_picture(ckpt, group, rows[group.name])
        except QFormatsError as err:          # the report's findings say why; the page says it is not drawn
            skipped[group.name] = f"not decoded: {err.code}"


def collect(path: str, table: list[dict[str, Any]], opened: list | None = None) -> Pictures:
    """The pictures of the layers in ``table`` (inspect's rows) of the checkpoint at ``path``: each layer decoded
    once more, a slice of rows at a time (INSPECT-2.1). Layers that cannot be decoded are listed in
    ``not_drawn``; a checkpoint that cannot be opened has no pictures (its report says why)."""
    from ..containers.checkpoint import open_checkpoint

    rows = {r["layer"]: r for r in table}
    skipped: dict[str, str] = {}
    try:
        with open_checkpoint(path) as ckpt:
            if opened is not None:        # the caller counts a remote checkpoint's reads (REMOTE-4.3)
                opened.append(ckpt)
            if ckpt.kind == "gguf":
                tensors = list(_gguf_pictures(ckpt, set(rows)))
            else:
                tensors = list(_safetensors_pictures(ckpt, rows, skipped))
    except QFormatsError as err:
        return Pictures(tensors=[], not_drawn={name: f"not read: {err.code}" for name in rows})
    drawn = {t.tensor for t in tensors}
    skipped.update({name: "no decoder for its type" for name in rows if name not in drawn and name not in skipped})
    return Pictures(tensors=tensors, not_drawn=skipped)
