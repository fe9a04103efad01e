"""The estate example is what scripts/gen_estate.py writes, and the generator's other sizes (the
benchmark's 1,024 and 16,384 nodes) validate without errors: a hand edit of clusters/estate.yaml
that the generator does not know would leave the benchmark measuring a definition that fails."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest

from clusterdef.validate.pipeline import validate_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from gen_estate import generate  # noqa: E402

TODAY = date(2026, 11, 30)


def test_the_estate_is_what_its_generator_writes(tmp_path):
    out = generate(4096, 48, tmp_path, "estate")
    assert out.read_text() == (ROOT / "clusters" / "estate.yaml").read_text()
    assert (tmp_path / "estate-macs.csv").read_bytes() == (ROOT / "clusters" / "estate-macs.csv").read_bytes()


@pytest.mark.parametrize("nodes", [1024, 16384])
def test_the_generators_other_sizes_validate(tmp_path, nodes):
    out = generate(nodes, 48, tmp_path, "estate")
    result = validate_file(out, ROOT / "matrices", TODAY)
    assert result.ok, [f"{f.where}: {f.code} {f.message}" for f in result.errors]
