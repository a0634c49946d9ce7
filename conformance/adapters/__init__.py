"""Thin adapters that present real libraries with the conformance call contract (DESIGN.md §6).

Each adapter only renames arguments and converts arrays; any decision it made would be judged
instead of the library. ``qformats conformance kernel conformance.adapters.gguf_py:q4_k_dequantize
--format q4_k`` judges gguf-py.
"""


def type_subjects(namespace: dict, names, dequantize, quantize) -> None:
    """Define ``<type>_dequantize(*, blocks, rows, n)`` and ``<type>_quantize(*, x)`` in ``namespace`` for
    each GGUF type in ``names`` (DESIGN.md §6), calling ``dequantize(name, blocks)`` / ``quantize(name, x)``."""
    for name in names:
        low = name.lower()

        def deq(*, blocks, rows=None, n=None, _name=name):
            return dequantize(_name, blocks)

        def quant(*, x, _name=name):
            return quantize(_name, x)

        deq.__name__, quant.__name__ = f"{low}_dequantize", f"{low}_quantize"
        namespace[deq.__name__] = deq
        namespace[quant.__name__] = quant
