"""clusterdef as users install it: the wheel built from this checkout and the clusterdef.cluster
collection built by scripts/build-collection, installed into a fresh virtual environment and a fresh
collections folder, run on a definition in an empty folder outside the checkout (no matrices/ nor
playbooks/ beside or above it, no PYTHONPATH): validate, matrix list, render, plan and apply --check.

The fresh environment gets clusterdef from the wheel only; the third-party dependencies come from this
interpreter's site-packages through a .pth file (pip cannot fetch them here without a network). A
.pth line adds the folder to sys.path without running the folder's own .pth files, so the checkout's
editable-install hook there is not run; the test checks that clusterdef is imported from the fresh
environment and that its matrices are the wheel's."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT, TODAY

pytestmark = [pytest.mark.slow, pytest.mark.spawns]
OLD, CURRENT = "2025.10-r580", "2026.07-r580"
DAY = TODAY.isoformat()
# no PYTHONPATH (the checkout's src/ would stand in for the installed package), no site settings
CLEAN = {k: v for k, v in os.environ.items()
         if k not in {"PYTHONPATH", "CLUSTERDEF_MATRICES", "ANSIBLE_ROLES_PATH", "ANSIBLE_COLLECTIONS_PATH",
                      "VIRTUAL_ENV", "PIP_USER", "PIP_TARGET", "PIP_PREFIX"}}


def _run(argv: list, cwd: Path, env: dict, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _wheel(out: Path) -> Path:
    """The wheel of this checkout: without build isolation when setuptools can build wheels offline (the
    `wheel` package), else pip's isolated build (setuptools from the package index, as scripts/install)."""
    offline = importlib.util.find_spec("wheel") is not None
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT]
    if offline:
        cmd.insert(4, "--no-build-isolation")
    _ok(_run(cmd, ROOT, {**CLEAN, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}, timeout=300))
    [wheel] = out.glob("clusterdef-*.whl")
    return wheel


def _venv(where: Path, wheel: Path) -> Path:
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", where], where.parent, CLEAN))
    python = where / "bin" / "python"
    purelib = _ok(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], where.parent,
                       {})).stdout.strip()
    # the third-party dependencies: this interpreter's site-packages, after the fresh environment's own
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "zz-clusterdef-test-deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    _ok(_run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel],
             where.parent, {**CLEAN, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}))
    return where / "bin"


def _definitions(tmp: Path, site: Path) -> None:
    """The lab on OLD (old.yaml) and on CURRENT (new.yaml), as tests/test_apply.py makes them."""
    from test_apply import lab

    lab(tmp, CURRENT, "new.yaml", keep=lab(tmp, OLD, "old.yaml", stateless=False), stateless=False)
    for name in ("old.yaml", "new.yaml"):
        shutil.move(tmp / name, site / name)


def test_installed_wheel_and_collection_work_outside_the_checkout(tmp_path):
    if shutil.which("ansible-galaxy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("ansible-core is not installed (pip install -e '.[test]')")
    bindir = Path(sys.executable).parent
    wheel = _wheel(tmp_path / "dist")
    built = _ok(_run([sys.executable, ROOT / "scripts" / "build-collection", tmp_path / "dist"], ROOT,
                     {**CLEAN, "PATH": f"{bindir}:{os.environ['PATH']}"})).stdout.strip()
    collections = tmp_path / "collections"
    _ok(_run([bindir / "ansible-galaxy", "collection", "install", "-p", collections, built], tmp_path,
             {**CLEAN, "ANSIBLE_NOCOLOR": "1"}))
    venv_bin = _venv(tmp_path / "venv", wheel)
    site = tmp_path / "site"  # the user's repository: two definitions, nothing else
    site.mkdir()
    assert not any((d / "matrices").exists() or (d / "playbooks").exists() for d in (site, *site.parents))
    _definitions(tmp_path, site)

    env = dict(CLEAN)
    env.update(PATH=f"{venv_bin}:{os.environ['PATH']}:{bindir}", HOME=str(tmp_path / "home"),
               ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1")
    cli = [venv_bin / "clusterdef"]
    where = _ok(_run([venv_bin / "python", "-c", "import clusterdef.matrix.load as m, clusterdef; "
                      "print(clusterdef.__file__); print(m.bundled_matrices())"], site, env)).stdout.split()
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), where

    _ok(_run([*cli, "validate", "new.yaml", "--today", DAY], site, env))
    sets = json.loads(_ok(_run([*cli, "matrix", "list", "-f", "json", "--today", DAY], site, env)).stdout)
    assert {s["from"] for s in sets} == {"bundled"} and CURRENT in {s["name"] for s in sets}
    assert all(Path(s["file"]).is_relative_to(tmp_path / "venv") for s in sets)
    _ok(_run([*cli, "render", "new.yaml", "-o", "out", "--today", DAY], site, env))
    assert (site / "out" / "ansible" / "inventory" / "hosts.yml").is_file()
    _ok(_run([*cli, "plan", "--from", "old.yaml", "--to", "new.yaml", "-f", "json", "--plan-file",
              "lab.plan.json", "--today", DAY], site, env))

    # apply --check with no playbooks/ anywhere: the installed collection's playbooks, on the local connection.
    # It runs until a step fails on this machine (the snapshot's gpu_facts role finds no GPU stack here);
    # what this test holds is that apply found the collection, ran its playbooks, and Ansible resolved
    # their clusterdef.cluster.* roles from the collections path.
    done = _run([*cli, "apply", "lab.plan.json", "--check", "--today", DAY, "-e", "ansible_connection=local",
                 "-e", "ansible_become=false", "-e", f"ansible_python_interpreter={sys.executable}"], site, env,
                timeout=300)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-3000:]
    playbooks = collections / "ansible_collections" / "clusterdef" / "cluster" / "playbooks"
    [record] = [json.loads(p.read_text()) for p in site.glob("lab.plan.run-*.json")]
    assert record["playbooks"] == str(playbooks) and record["check"] is True
    runs = record["runs"]
    assert runs and all(Path(r["playbook"]).parent == playbooks for r in runs), runs
    assert runs[0]["status"] == "successful", runs[0]
    stdout = "".join(Path(r["artifact_dir"], "stdout").read_text() for r in runs)
    assert "TASK [clusterdef.cluster." in stdout  # a role of the collection ran, by its fully qualified name
    assert "was not found" not in stdout, stdout[-3000:]
