"""Molecule scenarios of the roles in roles/, in real rootful podman containers built from
debootstrap images (scripts/deps.d/50-molecule.sh: Debian 12 bookworm and Ubuntu 22.04 jammy; every
scenario runs its nodes on each release its role supports, side by side). Each runs create, prepare,
converge, idempotence, (side_effect), verify and destroy; ~1-3 minutes each on 2 cores."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

import pytest

from conftest import ROOT

from molecule_support import (CACHE, IMAGE_REPO, ROLES, SCENARIO_DIRS, SCENARIOS, VENV_BIN, load_yaml,
                              scenario_config, tool)

DEPS_SCRIPT = ROOT / "scripts" / "deps.d" / "50-molecule.sh"
BASE = ROOT / "tests" / "molecule" / "base.yml"
# What a scenario's output must show besides idempotence and verify.
EXPECT = {"firmware": ["would flash through nvfwupd, mlxfwmanager"]}


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


def test_no_scenario_container_is_named_like_a_box_host(lab_data):
    """Molecule scenarios and the box (tests/box_cluster.py: the lab's hosts, one container each, named as the
    host) run side by side in one podman: a platform named like a lab host is removed by the other's
    destroy or start (a CI run lost gpu001 that way)."""
    from clusterdef.hostlist import expand   # the definition's hostlists, as the inventory expands them

    hosts = {h for group in lab_data["nodes"].values() for h in expand(group["hosts"])}
    assert len(hosts) > 5, hosts
    clashes = sorted(f"{role}/{scenario}: {p['name']}" for role, scenario in SCENARIO_DIRS
                     for p in scenario_config(role, scenario)["platforms"] if p["name"] in hosts)
    assert not clashes, f"molecule platforms named like the box's hosts: {clashes}"


def test_apt_installs_refresh_lists_that_images_emptied():
    """Images (node images, molecule bases) remove /var/lib/apt/lists/* when built, which leaves that folder's
    mtime fresh: the apt module reads the mtime as the last update (ansible.builtin.apt get_cache_mtime), so
    `cache_valid_time` skips the update and the install finds no package for an hour after the build.
    CI met exactly this ("No package matching 'restic' is available")."""
    offenders = []
    for tasks in sorted(ROLES.glob("*/tasks/*.yml")) + sorted(ROLES.glob("*/handlers/*.yml")):
        for task in load_yaml(tasks) or []:
            for module in ("ansible.builtin.apt", "apt"):
                args = task.get(module) if isinstance(task, dict) else None
                if isinstance(args, dict) and "cache_valid_time" in args:
                    offenders.append(f"{tasks.relative_to(ROLES)}: {task.get('name')}")
    assert not offenders, offenders
