"""One package per format: ``from qformats.formats import gptq, spqr, q4_k``."""
