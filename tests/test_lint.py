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
    assert bad.returncode == 2 and "tenant-group-is-admin" in bad.stdout, bad.stdout + bad.stderr


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a module of `package` (relative ones resolved)."""
    import ast

    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            out += [(node.lineno, f"{mod}.{a.name}" if not node.module else mod) for a in node.names]
    return out


def _is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("package, forbidden", [
    ("validate", ("clusterdef.render",)),                       # checks use knowledge/, never a renderer
    ("knowledge", ("clusterdef.render", "clusterdef.validate")),  # what both read imports neither
])
def test_layers_import_one_way(package, forbidden):
    """validate/ never imports clusterdef.render, and knowledge/ neither of them: absolutely or
    relatively, at the top or inside a function."""
    files = sorted((REPO / "src" / "clusterdef" / package).glob("*.py"))
    assert len(files) > 3
    found = [f"{f.relative_to(REPO)}:{line}: {mod}" for f in files
             for line, mod in _imports(f, f"clusterdef.{package}") if any(_is_under(mod, x) for x in forbidden)]
    assert not found, f"{package} imports what it must not:\n" + "\n".join(found)


def test_import_resolution_sees_relative_and_from_dot_imports(tmp_path):
    """The walker above resolves what a check could write: `..render`, `from .. import render`,
    `clusterdef.render.x`."""
    src = tmp_path / "m.py"
    src.write_text("from ..render.slurm import keywords\nfrom .. import render\nimport clusterdef.render.images\n"
                   "def f():\n    from ..knowledge import slurm\n")
    mods = [m for _, m in _imports(src, "clusterdef.validate")]
    assert mods == ["clusterdef.render.slurm", "clusterdef.render", "clusterdef.render.images",
                    "clusterdef.knowledge"]
    assert [_is_under(m, "clusterdef.render") for m in mods] == [True, True, True, False]
