"""Property tests: damaged safetensors bytes parse or raise QFormatsError, and agree with the library."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import st_builder as sb
from qformats.containers.safetensors import DTYPES, open_tensor, read_header, read_header_bytes
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


@FUZZ
@given(seed=hs.sampled_from(SEEDS), data=hs.data())
def test_truncation_parses_or_raises_qformats_error(seed, data):
    """QF-1.1: a valid file cut at any length is accepted only when uncut, else raises a coded error."""
    cut = data.draw(hs.integers(0, len(seed)))
    ok, code = _verdict(seed[:cut])
    assert ok == (cut == len(seed) and sb.library_accepts(seed))
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
    lib = sb.library_accepts(bytes(blob))
    if code in ("st.name.duplicate", "st.metadata.invalid") and lib:
        return
    assert ok == lib, code


_HUGE = hs.sampled_from([1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]) | hs.integers(0, (1 << 64) - 1)


@hs.composite
def _headers(draw) -> tuple[list[int], str, int]:
    """(shape, dtype, END): shapes of any length (up to 300 dims), dims small or up to 2^64 - 1, maybe a 0."""
    dim = _HUGE if draw(hs.booleans()) else hs.integers(1, 3)
    n = draw(hs.integers(0, 4) | hs.integers(0, 300))
    shape = draw(hs.lists(dim, min_size=n, max_size=n))
    if draw(hs.booleans()):
        shape.insert(draw(hs.integers(0, len(shape))), 0)
    return shape, draw(hs.sampled_from(sorted(DTYPES))), draw(hs.just(0) | hs.integers(0, 24))


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(header=_headers())
def test_generated_shapes_agree_with_library_and_open(tmp_path_factory, header):
    """ST-3.4, ST-5.3: any shape is accepted iff the library accepts it, and an accepted tensor opens as an
    array or raises QFormatsError (never a NumPy or formatting exception)."""
    shape, dtype, end = header
    blob = sb.base([("t", {"dtype": dtype, "shape": shape, "data_offsets": [0, end]})], bytes(end))
    ok, code = _verdict(blob)
    assert ok == sb.library_accepts(blob), code
    if ok:
        path = tmp_path_factory.getbasetemp() / "generated.safetensors"
        path.write_bytes(blob)
        try:
            arr = open_tensor(read_header(path), "t")
        except QFormatsError as exc:
            assert (exc.code, exc.clause) == ("tensor.shape", "ST-5.3")
        else:
            assert arr.nbytes == end
