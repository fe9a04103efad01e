"""Molecule scenarios of the roles in roles/, in real rootful podman containers built from a
debootstrap image (scripts/deps.d/50-molecule.sh). Each runs create, prepare, converge,
idempotence, (side_effect), verify and destroy; ~1-2 minutes each on 2 cores."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT

ROLES = ROOT / "roles"
CACHE = Path(os.environ.get("CLUSTERDEF_CACHE", ROOT / ".cache")) / "molecule"
IMAGE = "localhost/clusterdef-molecule:bookworm"
# (role, scenario): each role's `default` scenario (test id: the role), plus named scenarios that span
# roles (test id: the scenario, e.g. `userspace` = cuda_userspace + container_toolkit).
SCENARIO_DIRS = sorted((p.parents[2].name, p.parent.name) for p in ROLES.glob("*/molecule/*/molecule.yml"))
SCENARIOS = [role if scenario == "default" else scenario for role, scenario in SCENARIO_DIRS]
# What a scenario's output must show besides idempotence and verify.
EXPECT = {"firmware": ["would flash through nvfwupd, mlxfwmanager"]}
VENV_BIN = Path(ROOT, ".venv/bin")


def missing(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI: scripts/install-test-deps must provide it")
    pytest.skip(f"{what} (scripts/install-test-deps provides it)")


def tool(name: str) -> str:
    path = shutil.which(name) or (str(VENV_BIN / name) if (VENV_BIN / name).exists() else None)
    if path is None:
        missing(name)
    return path


@pytest.fixture(scope="module")
def molecule_env():
    podman = tool("podman")
    molecule = tool("molecule")
    conf = CACHE / "containers.conf"
    collections = CACHE / "collections" / "ansible_collections" / "containers" / "podman"
    if not conf.exists() or not collections.is_dir():
        missing("the molecule cache (.cache/molecule)")
    env = {**os.environ, "CONTAINERS_CONF": str(conf), "ANSIBLE_COLLECTIONS_PATH": str(CACHE / "collections"),
           "ANSIBLE_ROLES_PATH": str(ROLES), "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
           "ANSIBLE_FORCE_COLOR": "0", "PY_COLORS": "0", "NO_COLOR": "1"}
    if subprocess.run([podman, "image", "exists", IMAGE], env=env).returncode != 0:
        missing(f"podman image {IMAGE}")
    with tempfile.TemporaryDirectory(prefix="clusterdef-molecule-") as home:
        env["HOME"] = home
        yield molecule, env


@pytest.mark.slow
@pytest.mark.parametrize(("role", "scenario"), SCENARIO_DIRS, ids=SCENARIOS)
def test_molecule_scenario(role, scenario, molecule_env):
    molecule, env = molecule_env
    proc = subprocess.run([molecule, "test", "-s", scenario], cwd=ROLES / role, env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        # molecule test destroys on failure; make sure nothing is left behind either way.
        subprocess.run([molecule, "destroy", "-s", scenario], cwd=ROLES / role, env=env, capture_output=True,
                       timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert "idempotence: Executed: Successful" in proc.stdout + proc.stderr
    assert "verify: Executed: Successful" in proc.stdout + proc.stderr
    for text in EXPECT.get(role if scenario == "default" else scenario, []):
        assert text in proc.stdout + proc.stderr, f"{scenario} output lacks {text!r}"


def test_every_role_has_argument_specs_and_a_scenario():
    roles = sorted(p.name for p in ROLES.iterdir() if (p / "tasks" / "main.yml").exists())
    assert roles, "no roles"
    for role in roles:
        assert (ROLES / role / "meta" / "argument_specs.yml").exists(), role
    assert {"node_admission", "nvidia_driver", "userspace", "firmware"} <= set(SCENARIOS)


def test_ansible_lint_production_profile():
    lint = tool("ansible-lint")
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", "ANSIBLE_ROLES_PATH": str(ROLES),
           "NO_COLOR": "1"}
    if (CACHE / "collections").is_dir():
        env["ANSIBLE_COLLECTIONS_PATH"] = str(CACHE / "collections")
    with tempfile.TemporaryDirectory() as home:
        env["HOME"] = home
        proc = subprocess.run([lint, "--offline", "--profile", "production", "roles/", "playbooks/"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
