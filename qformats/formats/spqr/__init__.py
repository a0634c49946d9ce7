"""SpQR (Dettmers et al. 2023): the spqr_quant / HuggingFace release layout (spec/spqr.md).

``from_legacy`` packs the SpQR repository's per-layer quantizer output, ``dequantize`` decodes a
release layer bit-exactly as spqr_quant 0.2.0, ``quantize`` is the reference encoder, and
``to_compact`` / ``from_compact`` convert outliers to and from the paper's delta coding.
"""

from .checks import check_config, check_layer, config_findings, outlier_count, portability_findings
from .codec import dequantize, from_legacy, pack_dense, to_csr, unpack_dense
from .outliers import compact_stats, from_compact, to_compact
from .encoder import quantize
from .layout import SCHEMA_MODELS, SpQRConfig, SpQRLayer, tensor_specs

__all__ = [
    "from_legacy", "dequantize", "quantize", "SpQRLayer", "SpQRConfig", "SCHEMA_MODELS", "tensor_specs",
    "check_layer", "portability_findings", "check_config", "config_findings", "outlier_count",
    "pack_dense", "unpack_dense", "to_csr", "to_compact", "from_compact", "compact_stats",
]
