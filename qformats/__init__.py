"""qformats: the reference specification, validator and conformance suite for quantized
LLM weight formats. See spec/README.md for the normative text."""

SPEC_VERSION = "0.1"
__version__ = "0.1.0"

from .errors import QFormatsError  # noqa: E402

__all__ = ["QFormatsError", "SPEC_VERSION", "__version__"]
