"""Thin adapters that present real libraries with the conformance call contract (DESIGN.md §6).

Each adapter only renames arguments and converts arrays; any decision it made would be judged
instead of the library. ``qformats conformance kernel conformance.adapters.gguf_py:q4_k_dequantize
--format q4_k`` judges gguf-py.
"""
