"""The molecule scenarios' machinery, shared by tests/test_roles.py and conftest.py (a plugin of the
suite: conftest's molecule_early starts the scenarios with the session). Most of a scenario's time is
podman exec round trips and apt, not CPU, so they run beside the other tests instead of after them."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import timeline
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
ROLES = ROOT / "roles"
CACHE = Path(os.environ.get("CLUSTERDEF_CACHE", ROOT / ".cache")) / "molecule"
IMAGE_REPO = "localhost/clusterdef-molecule"
# (role, scenario): each role's `default` scenario (test id: the role), plus named scenarios that span
# roles (test id: the scenario, e.g. `userspace` = cuda_userspace + container_toolkit).
SCENARIO_DIRS = sorted((p.parents[2].name, p.parent.name) for p in ROLES.glob("*/molecule/*/molecule.yml"))
SCENARIOS = [role if scenario == "default" else scenario for role, scenario in SCENARIO_DIRS]


def load_yaml(path: Path):
    return YAML(typ="safe").load(path.read_text())


def scenario_config(role: str, scenario: str) -> dict:
    return load_yaml(ROLES / role / "molecule" / scenario / "molecule.yml")


# Every image a scenario's platforms run (localhost/clusterdef-molecule:<release>, built by scripts/deps.d/50-molecule.sh).
IMAGES = sorted({p["image"] for role, scenario in SCENARIO_DIRS for p in scenario_config(role, scenario)["platforms"]})
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


@pytest.fixture(scope="session")
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
MOLECULE_JOBS = int(os.environ.get("CLUSTERDEF_MOLECULE_JOBS", "3"))
LONGEST_FIRST = ("rollout", "userspace", "firmware", "node_admission", "slurm_control_plane", "backup")


def _molecule_test(molecule: str, env: dict, role: str, scenario: str) -> subprocess.CompletedProcess:
    # 45 minutes: `rollout` takes 5 alone, but shares two cores with the box and the rest of the suite (it
    # ran past 25 minutes so on 2026-12-03)
    try:
        proc = subprocess.run([molecule, "test", "-s", scenario], cwd=ROLES / role, env=env, capture_output=True,
                              text=True, timeout=2700)
    except subprocess.TimeoutExpired as exc:  # its containers are still up: take them down too
        proc = subprocess.CompletedProcess(exc.cmd, 124, str(exc.stdout or ""), f"{exc.stderr or ''}\n{exc}")
    if proc.returncode != 0:
        # molecule test destroys on failure; make sure nothing is left behind either way.
        subprocess.run([molecule, "destroy", "-s", scenario], cwd=ROLES / role, env=env, capture_output=True,
                       timeout=120)
    return proc


@pytest.fixture(scope="session")
def molecule_runs(molecule_env, request):
    """The selected scenarios' `molecule test`, MOLECULE_JOBS at a time, started with the session
    (molecule_early in conftest.py) so they run beside the rest of the suite."""
    from concurrent.futures import ThreadPoolExecutor

    molecule, env = molecule_env
    selected = {(item.callspec.params["role"], item.callspec.params["scenario"]) for item in request.session.items
                if getattr(item, "originalname", "") == "test_molecule_scenario"}
    order = sorted(selected, key=lambda rs: LONGEST_FIRST.index(SCENARIOS[SCENARIO_DIRS.index(rs)])
                   if SCENARIOS[SCENARIO_DIRS.index(rs)] in LONGEST_FIRST else len(LONGEST_FIRST))
    with ThreadPoolExecutor(max_workers=MOLECULE_JOBS, initializer=timeline.lower_priority) as pool:
        futures = {rs: pool.submit(_molecule_test, molecule, env, *rs) for rs in order}
        for (role, scenario), future in futures.items():
            future.add_done_callback(lambda _f, name=f"molecule {role}/{scenario}": timeline.finished(name))
        yield futures
