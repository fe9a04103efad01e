"""ruff and mypy (configured in pyproject.toml: [tool.ruff], [tool.mypy]) pass: ruff on src and tests,
mypy over src/clusterdef."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> str | None:
    beside = Path(sys.executable).parent / "ruff"  # the venv's ruff (test extra)
    return str(beside) if beside.exists() else shutil.which("ruff")


def test_ruff_check_passes():
    ruff = _ruff()
    if ruff is None:
        if os.environ.get("CI"):
            pytest.fail("ruff missing in CI (pip install -e '.[test]')")
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    r = subprocess.run([ruff, "check", "src", "tests"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_passes():
    """mypy with the repository's configuration (pydantic plugin, check_untyped_defs, files = src/clusterdef)
    reports nothing. Not slow: about 5 s with mypy's cache (.mypy_cache), 15 s without it on 2 cores."""
    if importlib.util.find_spec("mypy") is None:
        if os.environ.get("CI"):
            pytest.fail("mypy missing in CI (pip install -e '.[test]')")
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pre_commit_files_are_valid():
    """The repository's hooks and the hook manifest cluster repositories use both parse as pre-commit's own schema."""
    exe = Path(sys.executable).parent / "pre-commit"
    if not exe.exists():
        if os.environ.get("CI"):
            pytest.fail("pre-commit missing in CI (pip install -e '.[test]')")
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    for verb, name in (("validate-config", ".pre-commit-config.yaml"), ("validate-manifest", ".pre-commit-hooks.yaml")):
        r = subprocess.run([str(exe), verb, name], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr


def test_validate_hook_fails_on_a_bad_definition():
    """The hook's entry (one `clusterdef validate` per file, worst exit code) fails when one file is bad."""
    from ruamel.yaml import YAML

    hooks = YAML(typ="safe").load((REPO / ".pre-commit-hooks.yaml").read_text())
    entry = next(h["entry"] for h in hooks if h["id"] == "clusterdef-validate")
    import shlex

    argv = shlex.split(entry)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    good = subprocess.run([*argv, "clusters/lab.yaml"], cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run([*argv, "clusters/lab.yaml", "tests/bad/1501-tenant-group-is-admin.yaml"], cwd=REPO,
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "tenant-group-is-admin" in bad.stderr, bad.stdout + bad.stderr
