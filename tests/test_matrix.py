"""Validated sets load, are consistent, and the compatibility rules catch broken sets."""

from __future__ import annotations

import pytest

from clusterdef.errors import Severity
from clusterdef.matrix.checks import check_set
from clusterdef.matrix.compat import past, ver
from clusterdef.matrix.load import load_matrix
from conftest import TODAY


def test_ships_older_current_and_candidate_sets(matrix):
    statuses = [vs.status for vs in matrix.sets.values()]
    assert statuses.count("validated") >= 2 and "candidate" in statuses
    for vs in matrix.sets.values():
        assert vs.provenance.sources, vs.name
        assert vs.baseline and (matrix.root / vs.baseline).is_file(), vs.name
        assert {"dgx-h100", "hgx-h100"} <= set(vs.firmware), vs.name


@pytest.mark.parametrize("name", ["2025.10-r580", "2026.07-r580", "2026.11-r595-candidate"])
def test_live_sets_are_consistent(matrix, name):
    assert check_set(matrix.sets[name], matrix.compat, TODAY) == []


def with_components(vs, **changes):
    return vs.model_copy(update={"components": vs.components.model_copy(update=changes)})


@pytest.mark.parametrize("changes, code", [
    ({"driver": "580.65.06", "cuda": "13.0.2"}, "matrix-driver-cuda"),
    ({"kubernetes": "1.31.4"}, "matrix-operator-k8s"),
    ({"gpu_operator": "v99.1.0"}, "matrix-operator-unknown"),
    ({"nccl": "2.27.6"}, "matrix-nccl-cuda"),
    ({"nccl": "9.9.9"}, "matrix-nccl-unknown"),
    ({"cuda": "11.0.0"}, "matrix-cuda-unknown"),
    ({"slurm": "26.11.0"}, "matrix-slurm-unknown"),
    ({"driver": "570.172.08"}, "matrix-driver-eol"),
])
def test_broken_sets_are_caught(matrix, changes, code):
    vs = with_components(matrix.sets["2026.07-r580"], **changes)
    problems = check_set(vs, matrix.compat, TODAY)
    assert code in {p.code for p in problems}, problems
    assert all(p.hint for p in problems)


def test_min_driver_lookup(matrix):
    c = matrix.compat
    assert c.min_driver("13.0.2") == "580.95.05"
    assert c.min_driver("12.8.0") == "570.26"
    assert c.min_driver("10.0.0") is None


def test_slurm_upgrade_window(matrix):
    c = matrix.compat
    assert c.slurm_window("24.05") == 2
    assert c.slurm_window("24.11") == 3
    assert c.slurm_window("25.11") == 3
    assert c.slurm_rule.slurmdbd_first is True


def test_versions_compare_numerically():
    assert ver("580.126.20") > ver("580.95.05")
    assert ver("v26.3.3") > ver("v25.10.1")
    assert past("2026-06", TODAY) and not past("2026-11", TODAY) and not past(None, TODAY)


def test_broken_matrix_file_is_a_located_finding(tmp_path):
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "x.yaml").write_text("name: x\nstatus: blessed\ncomponents: {}\n")
    _, findings = load_matrix(tmp_path)
    by_code = {f.code for f in findings}
    assert "invalid-value" in by_code and "missing-field" in by_code
    status = next(f for f in findings if f.path == ("status",))
    assert status.line == 2 and status.file.endswith("x.yaml")
    assert all(f.severity is Severity.ERROR for f in findings)


def test_a_loaded_matrix_is_reused_only_while_its_files_are_the_same(tmp_path):
    import shutil

    from conftest import MATRICES

    root = tmp_path / "matrices"
    shutil.copytree(MATRICES, root)
    first, findings = load_matrix(root)
    again, _ = load_matrix(root)
    assert again is first and findings == []
    findings.append("caller's own list")  # the memo hands out copies of its findings
    assert load_matrix(root)[1] == []

    set_file = root / "sets" / "2026.07-r580.yaml"
    set_file.write_text(set_file.read_text().replace("2026.07-r580", "renamed-set", 1))
    changed, _ = load_matrix(root)
    assert changed is not first
    assert "renamed-set" in changed.sets and changed.origins["renamed-set"] == "site"
    # the site's file no longer names 2026.07-r580: the bundled set of that name shows through
    assert changed.origins["2026.07-r580"] == "bundled" and changed.set_files["2026.07-r580"].parent.parent == MATRICES

    (root / "compat" / "nccl-cuda.yaml").write_text("releases: [{")
    broken, found = load_matrix(root)
    assert [f.code for f in found] == ["yaml-syntax"]
    assert broken.compat.nccl == ()


# every shape a site's own compatibility file can have wrong: (file, text, path of the finding, its line)
WRONG_SHAPES = [
    ("cuda-driver-min.yaml", "source: x\nrows: 5\n", ("rows",), 2),
    ("cuda-driver-min.yaml", "- cuda: '13.0'\n", (), 1),
    ("cuda-driver-min.yaml", "rows:\n  - cuda: '13.0'\n    min_driver: '580'\n  - 7\n", ("rows", 1), 4),
    ("cuda-driver-min.yaml", "rows: {cuda: '13.0'}\n", ("rows",), 1),
    ("cuda-driver-min.yaml", "rows: []\nrow: []\n", ("row",), 2),
    ("gpu-operator.yaml", "releases: 'v25.10.0'\n", ("releases",), 1),
    ("nccl-cuda.yaml", "releases:\n  - nccl: '2.28.3'\n    cuda_majors: 12\n", ("releases", 0, "cuda_majors"), 3),
    ("slurm-releases.yaml", "upgrade_rule: 3\nreleases: []\n", ("upgrade_rule",), 1),
    ("driver-branches.yaml", "branches: [[]]\n", ("branches", 0), 1),
    ("kubernetes-skew.yaml", "[1, 2]\n", (), 1),
    ("kubernetes-skew.yaml", "supported_minor_releases: three\n", ("supported_minor_releases",), 1),
    ("package-sources.yaml", "sources: 1\n", ("sources",), 1),
]


@pytest.mark.parametrize("name, text, path, line", WRONG_SHAPES)
def test_a_compat_file_of_the_wrong_shape_is_a_located_finding(tmp_path, name, text, path, line):
    import shutil

    from conftest import MATRICES

    root = tmp_path / "matrices"
    shutil.copytree(MATRICES, root)
    (root / "compat" / name).write_text(text)
    _, findings = load_matrix(root)
    assert findings, name
    first = findings[0]
    assert (first.file, first.path, first.line) == (str(root / "compat" / name), path, line)
    assert first.severity is Severity.ERROR and first.hint


def test_a_set_file_of_the_wrong_shape_is_a_located_finding(tmp_path):
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "x.yaml").write_text("- name: x\n")
    _, findings = load_matrix(tmp_path)
    assert [(f.path, f.line) for f in findings] == [((), 1)]


def test_the_command_line_reports_a_wrong_shaped_matrices_file_with_exit_2(tmp_path, monkeypatch):
    import shutil

    from cli_runner import CliRunner
    from conftest import MATRICES

    from clusterdef.cli import app

    root = tmp_path / "matrices"
    shutil.copytree(MATRICES, root)
    (root / "compat" / "cuda-driver-min.yaml").write_text("source: x\nrows: 5\n")
    monkeypatch.setenv("CLUSTERDEF_MATRICES", str(root))
    result = CliRunner().invoke(app, ["validate", MATRICES.parent / "clusters" / "lab.yaml"])
    assert result.exit_code == 2, result.output
    assert f"{root / 'compat' / 'cuda-driver-min.yaml'}:2:1: error" in result.output
    assert "Traceback" not in result.output
