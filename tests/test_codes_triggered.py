"""Finding codes that are not definition checks and had no test that triggered them
(issue #18 item 7): each test makes the code happen and asserts its code, path and
where it points (line and column, or no location where the finding has none)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusterdef.errors import DefinitionError, Severity
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY

LAB = CLUSTERS / "lab.yaml"
# cluster.matrix in clusters/lab.yaml: the key `matrix` on line 7, column 3
MATRIX_AT = (7, 3)


def test_lab_matrix_key_is_where_these_tests_expect_it():
    line = LAB.read_text(encoding="utf-8").splitlines()[MATRIX_AT[0] - 1]
    assert line[MATRIX_AT[1] - 1:].startswith("matrix:"), line


def _one(findings, code):
    hits = [f for f in findings if f.code == code]
    assert hits, [(f.code, f.message) for f in findings]
    assert hits[0].message and hits[0].hint
    return hits[0]


def _matrices(tmp_path: Path, edit) -> Path:
    """A copy of matrices/ with one edit: edit(root) changes files in place."""
    root = tmp_path / "matrices"
    shutil.copytree(MATRICES, root)
    edit(root)
    return root


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def _at_cluster_matrix(f, severity):
    assert f.severity is severity
    assert f.path == ("cluster", "matrix")
    assert f.file == str(LAB) and (f.line, f.column) == MATRIX_AT


def test_matrices_not_found(tmp_path):
    f = _one(validate_file(LAB, tmp_path, TODAY).findings, "matrices-not-found")
    _at_cluster_matrix(f, Severity.ERROR)


def test_slurm_major_unknown(tmp_path):
    """The lab's set on a Slurm older than every keyword list clusterdef ships."""
    root = _matrices(tmp_path, lambda r: _replace(r / "sets" / "2026.07-r580.yaml",
                                                  'slurm: "25.11.7"', 'slurm: "21.08.8"'))
    f = _one(validate_file(LAB, root, TODAY).findings, "slurm-major-unknown")
    _at_cluster_matrix(f, Severity.ERROR)


def test_matrix_driver_branch_unknown(tmp_path):
    def edit(r):
        p = r / "compat" / "driver-branches.yaml"
        lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [ln for ln in lines if '{branch: "R580"' not in ln]
        assert len(kept) == len(lines) - 1
        p.write_text("".join(kept), encoding="utf-8")
    f = _one(validate_file(LAB, _matrices(tmp_path, edit), TODAY).findings, "matrix-driver-branch-unknown")
    _at_cluster_matrix(f, Severity.WARNING)


def test_matrix_driver_cuda_major(tmp_path):
    root = _matrices(tmp_path, lambda r: _replace(r / "compat" / "driver-branches.yaml",
                                                  'eol: "2028-06", max_cuda_major: 13', 'eol: "2028-06", max_cuda_major: 12'))
    f = _one(validate_file(LAB, root, TODAY).findings, "matrix-driver-cuda-major")
    _at_cluster_matrix(f, Severity.ERROR)


def test_matrix_duplicate_set(tmp_path):
    """A second set file with a name already taken: reported in the later file, at its `name` key."""
    root = _matrices(tmp_path, lambda r: shutil.copy(r / "sets" / "2026.07-r580.yaml", r / "sets" / "zz-copy.yaml"))
    f = _one(validate_file(LAB, root, TODAY).findings, "matrix-duplicate-set")
    assert f.severity is Severity.ERROR and f.path == ("name",)
    assert f.file == str(root / "sets" / "zz-copy.yaml")
    line = (root / "sets" / "zz-copy.yaml").read_text(encoding="utf-8").splitlines()[f.line - 1]
    assert (line[f.column - 1:].startswith("name: 2026.07-r580")), (f.line, f.column, line)


def test_file_unreadable(tmp_path):
    """Not a permission problem (the tests may run as root): a path through a regular file."""
    from clusterdef.limits import InputError
    from clusterdef.source import load_file

    (tmp_path / "a.yaml").write_text("version: 1\n")
    path = tmp_path / "a.yaml" / "b.yaml"
    with pytest.raises(InputError) as exc:
        load_file(path)
    f = _one(exc.value.findings, "file-unreadable")
    assert (f.path, f.file, f.line, f.column) == ((), str(path), 0, 0)


def test_file_unreadable_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("cluster: {description: caf\xe9}\n".encode("latin-1"))
    f = _one(validate_file(path, MATRICES, TODAY).findings, "file-unreadable")
    assert (f.path, f.file, f.line, f.column) == ((), str(path), 0, 0)
    assert "at byte 26" in f.message  # 0-based offset of the é


@pytest.mark.parametrize("content, line", [(None, 0), ('\n {"versions": {}}', 2)], ids=["empty-folder", "no-host"])
def test_facts_invalid(tmp_path, content, line):
    """Facts problems name the file, and a refused fact the line it starts on (a folder has none)."""
    from clusterdef import drift

    where = tmp_path / "facts"
    where.mkdir()
    if content is not None:
        where = where / "bad.json"
        where.write_text(content)
    with pytest.raises(drift.FactsError) as exc:
        drift.read_facts(where)
    f = _one(exc.value.findings, "facts-invalid")
    assert (f.path, f.file, f.line, f.column) == ((), str(where), line, 1 if line else 0)


def test_plan_git(tmp_path, monkeypatch):
    """--base outside a git work tree: git rev-parse fails and says so."""
    from clusterdef.plan import PlanInputError, materialise_base

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    d = tmp_path / "defs"
    d.mkdir()
    shutil.copy(LAB, d / "lab.yaml")
    (tmp_path / "work").mkdir()
    with pytest.raises(PlanInputError) as exc:
        materialise_base("HEAD", d / "lab.yaml", tmp_path / "work")
    f = _one(exc.value.findings, "plan-git")
    assert (f.path, f.file, f.line, f.column) == ((), "", 0, 0)
    assert "rev-parse" in f.message


def test_render_unsafe_value(monkeypatch):
    """The second wall (quoting.py) as build_tree reports it. No input is known that passes
    validation and then fails quoting, so a renderer is made to refuse a value."""
    from clusterdef import build
    from clusterdef.quoting import UnsafeValue

    result = validate_file(LAB, MATRICES, TODAY)
    assert result.ok

    def refuse(*_a, **_k):
        raise UnsafeValue("'x\"y': slurm.conf values cannot carry '\"'")

    monkeypatch.setattr(build, "render_all", refuse)
    with pytest.raises(DefinitionError) as exc:
        build.build_tree(result)
    f = _one(exc.value.findings, "render-unsafe-value")
    assert (f.path, f.file, f.line, f.column) == ((), str(LAB), 0, 0)
