"""Molecule scenarios of the roles in roles/, in real rootful podman containers built from
debootstrap images (scripts/deps.d/50-molecule.sh: Debian 12 bookworm and Ubuntu 22.04 jammy; every
scenario runs its nodes on each release its role supports, side by side). Each runs create, prepare,
converge, idempotence, (side_effect), verify and destroy; ~1-3 minutes each on 2 cores."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import ROOT

ROLES = ROOT / "roles"
CACHE = Path(os.environ.get("CLUSTERDEF_CACHE", ROOT / ".cache")) / "molecule"
DEPS_SCRIPT = ROOT / "scripts" / "deps.d" / "50-molecule.sh"
BASE = ROOT / "tests" / "molecule" / "base.yml"
IMAGE_REPO = "localhost/clusterdef-molecule"
# (role, scenario): each role's `default` scenario (test id: the role), plus named scenarios that span
# roles (test id: the scenario, e.g. `userspace` = cuda_userspace + container_toolkit).
SCENARIO_DIRS = sorted((p.parents[2].name, p.parent.name) for p in ROLES.glob("*/molecule/*/molecule.yml"))
SCENARIOS = [role if scenario == "default" else scenario for role, scenario in SCENARIO_DIRS]


def load_yaml(path: Path):
    return YAML(typ="safe").load(path.read_text())


def scenario_config(role: str, scenario: str) -> dict:
    return load_yaml(ROLES / role / "molecule" / scenario / "molecule.yml")


# Every image a scenario's platforms run (localhost/clusterdef-molecule:<release>, built by DEPS_SCRIPT).
IMAGES = sorted({p["image"] for role, scenario in SCENARIO_DIRS for p in scenario_config(role, scenario)["platforms"]})
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
    absent = [image for image in IMAGES if subprocess.run([podman, "image", "exists", image], env=env).returncode != 0]
    if absent:
        missing(f"podman image {', '.join(absent)}")
    with tempfile.TemporaryDirectory(prefix="clusterdef-molecule-") as home:
        env["HOME"] = home
        yield molecule, env


# Scenarios run concurrently: most of a scenario's time is podman exec round trips and apt, not CPU, so
# a few at once finish in about half the wall time on two cores. Longest first (measured in CI).
MOLECULE_JOBS = int(os.environ.get("CLUSTERDEF_MOLECULE_JOBS", "4"))
LONGEST_FIRST = ("rollout", "userspace", "firmware", "node_admission", "slurm_control_plane", "backup")


def _molecule_test(molecule: str, env: dict, role: str, scenario: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([molecule, "test", "-s", scenario], cwd=ROLES / role, env=env, capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        # molecule test destroys on failure; make sure nothing is left behind either way.
        subprocess.run([molecule, "destroy", "-s", scenario], cwd=ROLES / role, env=env, capture_output=True,
                       timeout=120)
    return proc


@pytest.fixture(scope="module")
def molecule_runs(molecule_env, request):
    """The selected scenarios' `molecule test`, started together on first use (MOLECULE_JOBS at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    molecule, env = molecule_env
    selected = {(item.callspec.params["role"], item.callspec.params["scenario"]) for item in request.session.items
                if getattr(item, "originalname", "") == "test_molecule_scenario"}
    order = sorted(selected, key=lambda rs: LONGEST_FIRST.index(SCENARIOS[SCENARIO_DIRS.index(rs)])
                   if SCENARIOS[SCENARIO_DIRS.index(rs)] in LONGEST_FIRST else len(LONGEST_FIRST))
    with ThreadPoolExecutor(max_workers=MOLECULE_JOBS) as pool:
        yield {rs: pool.submit(_molecule_test, molecule, env, *rs) for rs in order}


@pytest.mark.slow
@pytest.mark.parametrize(("role", "scenario"), SCENARIO_DIRS, ids=SCENARIOS)
def test_molecule_scenario(role, scenario, molecule_runs):
    proc = molecule_runs[(role, scenario)].result()
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


# Scenarios that test a sequence of playbooks rather than one role on every release it supports: each
# role in the sequence runs on every release in its own scenario, so the sequence runs on one.
ONE_RELEASE = {"rollout": "apply's canary and rollback drill (upgrade.yml, rollback.yml, enforce-baseline.yml): "
                          "firmware, nvidia_driver, cuda_userspace and node_admission run both releases alone"}


def built_releases() -> list[str]:
    """The releases DEPS_SCRIPT debootstraps (its `for release in ...; do` loop)."""
    loop = re.search(r"^\s*for release in ([\w ]+); do$", DEPS_SCRIPT.read_text(), re.M)
    assert loop, f"{DEPS_SCRIPT.name} lost its `for release in ...; do` loop"
    return loop.group(1).split()


@pytest.mark.parametrize(("role", "scenario"), SCENARIO_DIRS, ids=SCENARIOS)
def test_scenario_follows_base_and_runs_every_supported_release(role, scenario):
    config = scenario_config(role, scenario)
    for key, value in load_yaml(BASE).items():
        assert config.get(key) == value, f"{key} differs from tests/molecule/base.yml"
    platforms = config["platforms"]
    names = [p["name"] for p in platforms]
    assert len(set(names)) == len(names), f"duplicate platform names {names}"
    built = built_releases()
    releases = []
    for p in platforms:
        repo, _, release = p["image"].rpartition(":")
        assert repo == IMAGE_REPO and release in built, f"{p['name']}: {p['image']} is not an image {DEPS_SCRIPT.name} builds"
        releases.append(release)
    # The role's supported platforms (meta/main.yml galaxy_info) that an image exists for must all be tested,
    # each with the same nodes (one platform per node and release).
    meta = load_yaml(ROLES / role / "meta" / "main.yml")["galaxy_info"]["platforms"]
    supported = {str(v) for p in meta for v in p["versions"]}
    if scenario in ONE_RELEASE:
        assert len(set(releases)) == 1 and releases[0] in supported, f"platform releases {sorted(set(releases))}"
        return
    assert set(releases) == supported & set(built), f"platform releases {sorted(set(releases))}"
    assert len({releases.count(r) for r in set(releases)}) == 1, f"releases differ in node count: {releases}"


def test_container_names_are_unique_across_scenarios():
    names = [p["name"] for role, scenario in SCENARIO_DIRS for p in scenario_config(role, scenario)["platforms"]]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)


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
