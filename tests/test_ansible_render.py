"""The Ansible target: inventory shape, waves, pins, and the cross-check of rendered variables
against every role's meta/argument_specs.yml."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef import hostlist
from clusterdef.render.ansible import render, variables
from clusterdef.render.ansible.render import patterns, waves
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY

ROLES = ROOT / "roles"
yaml = YAML(typ="safe")


def resolved(name: str):
    result = validate_file(CLUSTERS / f"{name}.yaml", MATRICES, TODAY)
    assert result.ok
    return resolve(result.definition, result.matrix, CLUSTERS)


@pytest.fixture(scope="module")
def lab():
    return resolved("lab")


@pytest.fixture(scope="module")
def estate():
    return resolved("estate")


def role_options() -> dict[str, dict]:
    """role -> {option: spec} from meta/argument_specs.yml (entry point main)."""
    out = {}
    for spec in sorted(ROLES.glob("*/meta/argument_specs.yml")):
        out[spec.parents[1].name] = yaml.load(spec.read_text())["argument_specs"]["main"]["options"]
    return out


def test_patterns_use_ansible_ranges():
    assert patterns(["gpu0001", "gpu0002", "gpu0003", "gpu0007"]) == ["gpu[0001:0003]", "gpu0007"]
    assert patterns(["kgpu01", "kgpu02", "gpu003"]) == ["gpu003", "kgpu[01:02]"]


@pytest.mark.parametrize("name", ["lab", "estate"])
def test_every_rendered_variable_is_read_by_its_role_and_every_input_is_rendered(name):
    options = role_options()
    assert {"gpu_facts", "node_admission", "node_drain", "nvidia_driver"} <= set(options)
    rendered: dict[str, object] = {}
    for group_vars in variables(resolved(name)).values():
        rendered.update(group_vars)
    playbooks = "\n".join(pb.read_text() for pb in (ROOT / "playbooks").glob("*.yml"))
    for var in rendered:
        if var.startswith("clusterdef_"):  # read by the bundled playbooks, not by one role
            assert re.search(rf"\b{var}\b", playbooks), f"{var} is rendered but no playbook reads it"
            continue
        role = next((r for r in options if var.startswith(r + "_")), None)
        assert role, f"{var} has no role prefix"
        assert var in options[role], f"{var} is rendered but {role}'s argument_specs does not read it"
    for role, opts in options.items():
        for opt, spec in opts.items():
            assert opt.startswith(role + "_"), f"{role} option {opt} lacks the role prefix"
            if spec.get("required"):
                assert opt in rendered, f"{role} needs {opt} but clusterdef does not render it"
            else:
                assert "default" in spec, f"{role}.{opt} is neither rendered nor defaulted"


def test_lab_pins_and_groups(lab):
    v = variables(lab)
    assert v["all"]["nvidia_driver_version"] == "580.126.20"
    assert v["all"]["nvidia_driver_rollback_version"] == "580.95.05"  # rollback target 2025.10-r580
    assert v["all"]["node_admission_expected"]["slurm"] == "25.11.7"
    # every layer rollback.yml moves, and what admission holds the node to afterwards, come from the rollback set
    back = lab.matrix.sets["2025.10-r580"].components
    assert (v["all"]["cuda_userspace_rollback_cuda_version"], v["all"]["cuda_userspace_rollback_nccl_version"],
            v["all"]["cuda_userspace_rollback_driver_version"], v["all"]["container_toolkit_rollback_version"]) == \
        (back.cuda, back.nccl, back.driver, back.container_toolkit) == ("13.0.1", "2.28.7", "580.95.05", "1.18.0")
    assert v["all"]["node_admission_rollback_set"] == "2025.10-r580"
    assert v["all"]["node_admission_rollback_expected"] == {
        "driver": "580.95.05", "cuda": "13.0.1", "nccl": "2.28.7", "container_toolkit": "1.18.0", "slurm": "25.05.0",
        "kubelet": "1.33.0"}
    assert set(v["all"]["node_admission_rollback_expected"]) == set(v["all"]["node_admission_expected"])
    assert v["hw_hgx_h100"]["node_admission_firmware"]["cx7"] == lab.set.firmware["hgx-h100"]["cx7"]
    assert v["cp_slurm"]["node_drain_control_plane"] == "slurm"
    assert v["cp_kubernetes"]["node_admission_control_plane"] == "kubernetes"


def test_waves_align_to_leaf_switches(lab, estate):
    # service hosts last, apart from GPU nodes: slurmdbd never with the controller (docs/services.md)
    # the pool h100 (infer) and the tenant secure have two nodes each: one a wave (max_unavailable_pct 50)
    assert waves(lab) == [["gpu001", "gpu003"], ["gpu002", "gpu004"], ["kgpu01"], ["kgpu02"], ["sgpu01"],
                          ["sgpu02"], ["slurmctl01", "mgmt01"], ["slurmdbd01", "k8sctl01"]]
    w = waves(estate)
    assert len(w[0]) == 8  # canary
    assert all(len(x) <= estate.definition.upgrade.wave_size for x in w)
    # the dedicated tenant speech (su24, gpu[2945-3072]): four waves of 32 (25%), never with other nodes
    speech = set(hostlist.names("gpu[2945-3072]"))
    assert [len(x) for x in w if set(x) & speech] == [32, 32, 32, 32] and all(set(x) <= speech for x in w
                                                                              if set(x) & speech)
    flat = [h for x in w for h in x]
    assert len(flat) == len(set(flat)) == 4096


def test_render_is_valid_yaml_and_quotes_versions(lab):
    tree = render(lab)
    all_vars = yaml.load(tree["ansible/group_vars/all.yml"])
    assert all(isinstance(v, str) for v in all_vars["node_admission_expected"].values())
    assert "ansible/inventory/hosts.yml" in tree


def test_ansible_inventory_expands_estate(estate, tmp_path):
    """ansible-inventory (real Ansible) reads the rendered tree: 4,096 hosts with their group_vars."""
    tool = shutil.which("ansible-inventory") or str(Path(ROOT, ".venv/bin/ansible-inventory"))
    if not Path(tool).exists():
        pytest.skip("ansible-core is not installed")
    for rel, text in render(estate).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    out = subprocess.run([tool, "-i", str(tmp_path / "ansible"), "--list"], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    inv = json.loads(out.stdout)
    hostvars = inv["_meta"]["hostvars"]
    s = estate.definition.slurm
    control_plane = {*s.controllers, s.accounting.host}  # slurm_control_plane > slurmdbd, slurm_controllers
    assert len(hostvars) == 4096 + len(control_plane)
    assert set(inv["slurm_controllers"]["hosts"]) == set(s.controllers)
    assert inv["slurmdbd"]["hosts"] == [s.accounting.host]
    assert hostvars[s.controllers[0]]["slurm_control_plane_version"] == estate.set.components.slurm
    assert hostvars["gpu0001"]["node_drain_control_plane"] == "slurm"
    assert hostvars["gpu0001"]["node_admission_firmware"]["bmc"] == estate.set.firmware["dgx-h100"]["bmc"]
    assert hostvars["gpu2100"]["node_admission_firmware"]["bmc"] == estate.set.firmware["hgx-h100"]["bmc"]
    assert len(inv["wave_000"]["hosts"]) == 8
