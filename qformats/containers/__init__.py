"""Hardened readers for the files quantized weights come in (spec/containers.md)."""
