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
# ---- definitions moved to another set: image identity (docs/provisioning.md, "Image identity")
# An image version belongs to one set, so an example moved to another set gets its own image
# version, and the definition it is planned towards keeps the running build on the boot server.
IMAGE_VERSION = {"2025.10-r580": "2025.10.1", "2026.07-r580": "2026.07.1", "2026.11-r595-candidate": "2026.11.1"}


def image_version(set_name: str) -> str:
    return IMAGE_VERSION.get(set_name, f"{set_name}.1")


def on_set_images(text: str, set_name: str) -> str:
    """The example's image versions (all "2026.07.1") renamed for `set_name`."""
    return text.replace('\n    version: "2026.07.1"\n', f'\n    version: "{image_version(set_name)}"\n')


def keep_builds(text: str, tree: dict[str, str]) -> str:
    """`text` with every image build of the rendered `tree` listed under `images.<image>.published`."""
    import re

    from clusterdef.plan.images import builds_of

    for name, b in builds_of(tree).items():
        text, n = re.subn(rf'(\n  {re.escape(name)}:\n    version: "[^"\n]*"\n)',
                          lambda m, b=b: m.group(1) + f'    published: {{"{b.version}": {{set: {b.set}, '
                                                      f'digest: {b.digest}}}}}\n', text, count=1)
        assert n == 1, f"no image {name} in the definition"
    return text


def images_tree(path: Path, matrices: Path = MATRICES) -> dict[str, str]:
    """The images target of a definition file (what keep_builds reads)."""
    from clusterdef.build import build_tree
    from clusterdef.validate.pipeline import validate_file

    result = validate_file(path, matrices, TODAY)
    assert result.ok, [f"{f.code} {f.message}" for f in result.errors]
    return build_tree(result, ["images"])[0]


pytest_plugins = ["timeline", "molecule_support", "box_cluster", "box_bringup"]


@pytest.fixture(scope="session", autouse=True)
def molecule_early(request):
    """Start the selected molecule scenarios with the session rather than when tests/test_roles.py
    is reached: they wait on podman more than they use CPU, so the rest of the suite runs beside
    them (on CI's two cores about ten minutes of wall time). When their set-up cannot run (no podman,
    no images), nothing starts here and test_roles reports it."""
    if any(getattr(i, "originalname", "") == "test_molecule_scenario" for i in request.session.items):
        try:
            request.getfixturevalue("molecule_runs")
        except (Exception, pytest.skip.Exception, pytest.fail.Exception):  # test_roles reports it again
            pass
    from box_bringup import selected

    if selected(request.session):  # the box bring-up too (box_bringup.py)
        try:
            request.getfixturevalue("box_bringup")
        except (Exception, pytest.skip.Exception, pytest.fail.Exception):  # its tests report it again
            pass
    yield

