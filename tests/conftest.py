from __future__ import annotations

import copy
import os
import shutil
from datetime import date
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
MATRICES = ROOT / "matrices"
CLUSTERS = ROOT / "clusters"
TODAY = date(2026, 11, 30)

os.environ.setdefault("CLUSTERDEF_MATRICES", str(MATRICES))


def need_scontrol() -> str:
    """Path of Slurm's scontrol. In CI a missing scontrol is a failure, not a skip."""
    path = shutil.which("scontrol")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("scontrol is missing in CI: scripts/install-test-deps must install slurm-client")
        pytest.skip("Slurm's scontrol is not installed (scripts/install-test-deps installs it)")
    return path


@pytest.fixture(scope="session")
def matrix():
    from clusterdef.matrix.load import load_matrix

    m, findings = load_matrix(MATRICES)
    assert findings == []
    return m


@pytest.fixture(scope="session")
def lab_data() -> dict:
    return YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())


@pytest.fixture
def lab(lab_data) -> dict:
    """A fresh, mutable copy of the lab definition's data."""
    return copy.deepcopy(lab_data)


def dump_yaml(data, path: Path) -> Path:
    y = YAML()
    y.default_flow_style = False
    with open(path, "w") as fh:
        y.dump(data, fh)
    return path


def as_rail(data: dict) -> dict:
    """The lab's fabric `ib0` as a rail-optimised fabric of two scalable units (8 rails: every lab
    node has 8 compute InfiniBand ports), rail leaves under two spines. The canary group `train`
    spans both units."""
    data = copy.deepcopy(data)
    leaves = data["network"]["fabrics"]["ib0"]["topology"]["switches"]
    data["network"]["fabrics"]["ib0"]["topology"] = {
        "kind": "rail", "rails": 8, "spines": "spine[01-02]",
        "scalable_units": {"su1": {"nodes": leaves["leaf01"]["nodes"]}, "su2": {"nodes": leaves["leaf02"]["nodes"]}}}
    return data


@pytest.fixture
def rail_lab(lab) -> dict:
    return as_rail(lab)
