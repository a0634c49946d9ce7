"""Q4K-3 / Q4K-4: byte-exact encoders and bit-exact decoder against llama.cpp's own output.

Golden data: ggml d99724f2 (2026-08-21), `ggml_quantize_chunk(Q4_K)` and `dequantize_row_q4_K`,
compiled without FMA contraction (fixtures/third_party/llama.cpp/q4_k/PROVENANCE.md).
"""

import hashlib

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import q4_k
from q4k_golden import GOLDEN_DIR, bits, importance_row_ids, load, main_row_ids, manifest

MAIN_ROWS = [pytest.param(r, id=i) for r, i in main_row_ids()]
IMP_ROWS = [pytest.param(r, id=i) for r, i in importance_row_ids()]


COPIED = sorted(n for n in manifest()["files"] if n.endswith(".npy"))


@pytest.mark.parametrize("name", COPIED)
def test_golden_files_match_producer_hashes(name):
    """The copied golden files are byte-identical to what the producer's manifest lists."""
    assert hashlib.sha256((GOLDEN_DIR / name).read_bytes()).hexdigest() == manifest()["files"][name]["sha256"]


def test_blocks_npy_holds_the_raw_bin_bytes():
    """main_q4k_blocks.bin (not copied) is exactly the payload of main_q4k_blocks_u8.npy."""
    raw = load("main_q4k_blocks_u8.npy").tobytes()
    assert hashlib.sha256(raw).hexdigest() == manifest()["files"]["main_q4k_blocks.bin"]["sha256"]


def test_golden_covers_64_rows():
    """The main set has the 64 described row categories the tests are parametrized over."""
    assert len(MAIN_ROWS) == 64 == load("main_input_f32.npy").shape[0]


@pytest.mark.parametrize("row", MAIN_ROWS)
def test_reference_encoder_matches_llama_cpp(row):
    """Q4K-4.3: quantize() reproduces quantize_row_q4_K_ref byte for byte."""
    x = load("main_input_f32.npy")[row:row + 1]
    got = q4_k.quantize(x)
    want = load("main_q4k_blocks_u8.npy")[row:row + 1]
    assert got.dtype == np.uint8 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("row", MAIN_ROWS)
def test_decoder_matches_llama_cpp(row):
    """Q4K-3.1: dequantize() reproduces dequantize_row_q4_K bit for bit (NaN/inf rows included)."""
    got = q4_k.dequantize(load("main_q4k_blocks_u8.npy")[row:row + 1])
    np.testing.assert_array_equal(bits(got), bits(load("main_dequant_f32.npy")[row:row + 1]))


@pytest.mark.parametrize("row", IMP_ROWS)
def test_importance_encoder_matches_llama_cpp(row):
    """Q4K-4.6: quantize(importance=w) reproduces quantize_row_q4_K_impl byte for byte."""
    x = load("importance_input_f32.npy")[row:row + 1]
    got = q4_k.quantize(x, importance=load("importance_weights_f32.npy"))
    np.testing.assert_array_equal(got, load("importance_q4k_blocks_u8.npy")[row:row + 1])


@pytest.mark.parametrize("row", IMP_ROWS)
def test_decoder_matches_llama_cpp_on_importance_blocks(row):
    """Q4K-3.1: the importance-path blocks decode to llama.cpp's values bit for bit."""
    got = q4_k.dequantize(load("importance_q4k_blocks_u8.npy")[row:row + 1])
    np.testing.assert_array_equal(bits(got), bits(load("importance_dequant_f32.npy")[row:row + 1]))


def test_whole_matrix_encode_equals_per_row():
    """Q4K-4.1: rows are independent, so encoding all 64 rows at once gives the same bytes."""
    np.testing.assert_array_equal(q4_k.quantize(load("main_input_f32.npy")), load("main_q4k_blocks_u8.npy"))


def test_whole_matrix_importance_encode():
    """Q4K-4.6: one importance vector applies to every row of the matrix."""
    got = q4_k.quantize(load("importance_input_f32.npy"), importance=load("importance_weights_f32.npy"))
    np.testing.assert_array_equal(got, load("importance_q4k_blocks_u8.npy"))


def test_importance_path_differs_from_reference_path():
    """Q4K-4.6: the importance path is a different encoder (every golden row differs)."""
    x = load("importance_input_f32.npy")
    ref = q4_k.quantize(x)
    assert (ref != load("importance_q4k_blocks_u8.npy")).any(axis=1).all()


def test_rows_45_to_47_are_rejected_by_the_validator():
    """Q4K-5.4: the golden rows with d = dmin = +inf are invalid q4_K data."""
    blocks = load("main_q4k_blocks_u8.npy")
    assert manifest()["row_properties"]["rows_with_nonfinite_d_or_dmin"] == [45, 46, 47]
    for r in range(64):
        if r in (45, 46, 47):
            with pytest.raises(QFormatsError) as exc:
                q4_k.check_blocks(blocks[r:r + 1])
            assert exc.value.code == "q4k.d.nonfinite"
        else:
            q4_k.check_blocks(blocks[r:r + 1])
