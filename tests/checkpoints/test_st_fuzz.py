"""Property tests: damaged safetensors bytes parse or raise QFormatsError, and agree with the library."""

from __future__ import annotations

from pathlib import Path

import safetensors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import st_builder as sb
from qformats.containers.safetensors import read_header_bytes
from qformats.errors import QFormatsError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GOLDEN = FIXTURES / "third_party" / "gptq" / "layers" / "b4_asym_g32_k128_n64.safetensors"
SEEDS = [sb.base(), sb.CASES["valid_bf16_f8_scalar"][0](), sb.CASES["valid_metadata"][0](),
         sb.CASES["valid_empty_tensor"][0]()]
if GOLDEN.exists():
    _g = GOLDEN.read_bytes()
    SEEDS.append(_g[:8 + int.from_bytes(_g[:8], "little") + 4096])  # header of a real file, data cut


FUZZ = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def _verdict(blob: bytes) -> tuple[bool, str | None]:
    """(accepted, code): never any exception but QFormatsError."""
    try:
        read_header_bytes(blob)
    except QFormatsError as exc:
        return False, exc.code
    return True, None


def _library(blob: bytes) -> bool:
    try:
        safetensors.deserialize(blob)
    except Exception:  # noqa: BLE001 - any library exception is a rejection
        return False
    return True


@FUZZ
@given(seed=hs.sampled_from(SEEDS), data=hs.data())
def test_truncation_parses_or_raises_qformats_error(seed, data):
    """QF-1.1: a valid file cut at any length is accepted only when uncut, else raises a coded error."""
    cut = data.draw(hs.integers(0, len(seed)))
    ok, code = _verdict(seed[:cut])
    assert ok == (cut == len(seed) and _library(seed))
    if not ok:
        assert code.startswith("st.")


@FUZZ
@given(seed=hs.sampled_from(SEEDS), data=hs.data())
def test_byte_flips_agree_with_library(seed, data):
    """ST-1..ST-4: after random byte changes we raise only QFormatsError, and accept iff the library does.

    The one allowed disagreement is the documented stricter rule: duplicate names or metadata keys.
    """
    blob = bytearray(seed)
    for _ in range(data.draw(hs.integers(1, 4))):
        pos = data.draw(hs.integers(0, min(len(blob), 400) - 1))  # mostly the header, where structure lives
        blob[pos] = data.draw(hs.integers(0, 255))
    ok, code = _verdict(bytes(blob))
    lib = _library(bytes(blob))
    if code in ("st.name.duplicate", "st.metadata.invalid") and lib:
        return
    assert ok == lib, code
