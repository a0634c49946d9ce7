"""The GGUF block types as one family (spec/ggml.md and its family chapters).

    from qformats.formats import ggml
    x_hat  = ggml.dequantize("q6_k", blocks)            # uint8 (rows, row bytes) -> float32 (rows, n)
    blocks = ggml.quantize("q5_k", x, importance=w)     # float32 (rows, n) -> uint8, byte-identical to ggml
    ggml.check_blocks("q8_0", blocks, tensor="blk.0.attn_q.weight")
    ggml.TYPES["iq4_xs"].block_size                     # 256

Each family module declares its types (``TYPES``); :data:`TYPES` walks the modules in
:data:`FAMILY_MODULES`. Adding a type is one :class:`BlockType` in its family's module, its spec
section and its cases. q4_K keeps its own room (``qformats.formats.q4_k``) and joins here through
``q4k.py``.
"""

from __future__ import annotations

from importlib import import_module
from types import MappingProxyType

from .base import BlockType
from .codec import check_blocks, check_input, dequantize, quantize

__all__ = ["TYPES", "BlockType", "block_type", "dequantize", "quantize", "check_blocks", "check_input",
           "FAMILY_MODULES"]

FAMILY_MODULES = ("floats", "legacy", "q4k", "kquants_qkx", "kquants_qx", "iq4", "iqgrid", "ternary", "mxfp4",
                  "nvfp4", "lowbit")


def _load() -> MappingProxyType:
    types: dict[str, BlockType] = {}
    for module in FAMILY_MODULES:
        for bt in import_module(f"{__name__}.{module}").TYPES:
            assert bt.name not in types, f"{bt.name} declared twice"
            types[bt.name] = bt
    return MappingProxyType(types)


TYPES = _load()


def block_type(name: str) -> BlockType:
    """The registered type named ``name`` (ggml's name, any case); ``argument.invalid`` otherwise."""
    from ...errors import fail

    bt = TYPES.get(str(name).lower())
    if bt is None:
        raise fail("argument.invalid", "type", "a ggml type qformats decodes (" + ", ".join(TYPES) + ")", name)
    return bt
