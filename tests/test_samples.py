"""fixtures/checkpoints/ is reproducible: the reference encoders regenerate it byte for byte (DESIGN §5)."""

from pathlib import Path

from qformats.samples import write_all

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"


def test_samples_regenerate_byte_identically(tmp_path):
    """"make fixtures-check regenerates every reference-made fixture and requires byte identity"."""
    write_all(tmp_path)
    made = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    committed = {p.relative_to(SAMPLES).as_posix(): p.read_bytes() for p in SAMPLES.rglob("*") if p.is_file()}
    assert sorted(made) == sorted(committed)
    assert [name for name in made if made[name] != committed[name]] == []
