"""fixtures/checkpoints/ is reproducible: the reference encoders regenerate it byte for byte (DESIGN §5)."""

from pathlib import Path

import pytest

from qformats.samples import write_all

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"


def test_samples_regenerate_byte_identically(tmp_path):
    """"make fixtures-check regenerates every reference-made fixture and requires byte identity"."""
    write_all(tmp_path)
    made = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    committed = {p.relative_to(SAMPLES).as_posix(): p.read_bytes() for p in SAMPLES.rglob("*") if p.is_file()}
    assert sorted(made) == sorted(committed)
    assert [name for name in made if made[name] != committed[name]] == []


def test_quantization_config_names_the_targets_it_writes():
    """qformats.convert.quantization_config (the samples' configs): an unknown target is refused with the list."""
    from qformats.convert import quantization_config
    from qformats.errors import QFormatsError

    assert quantization_config("awq_gemm", bits=4, group_size=32, symmetric=False)["version"] == "gemm"
    with pytest.raises(QFormatsError) as err:
        quantization_config("marlin", bits=4, group_size=32, symmetric=True)
    assert (err.value.code, err.value.tensor, err.value.constraint, err.value.actual) == (
        "argument.invalid", "to", "gptq_v2, gptq, awq_gemm or compressed_tensors", "marlin")
