"""One consistent NVIDIA stack per node: on NVSwitch node types Fabric Manager and NSCQ are installed at exactly
the driver's version, by the image (stateless nodes) and by roles/nvidia_driver (stateful Slurm nodes), and
nowhere else (knowledge/nvidia_packages.yaml cites NVIDIA's Fabric Manager user guide). Pure: the role's own
Jinja (vars/main.yml, its apt tasks, its pin template) is evaluated by Ansible's templar with the rendered
group_vars of each node group of the three bundled examples."""

from __future__ import annotations

import re

import pytest

from clusterdef.knowledge.images import operator_owns_driver
from clusterdef.render import images
from clusterdef.render.ansible import variables
from clusterdef.render.ansible.render import ident
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY
from role_jinja import task_values, template_file

FABRIC = ["nvidia-fabricmanager", "libnvidia-nscq"]


def role_installs(group_vars: dict, rollback: bool = False) -> tuple[list[str], str]:
    """What the role's apt tasks install (name=version glob) and the pin file it writes, for a host with
    these inventory variables."""
    hostvars = {**group_vars, "nvidia_driver_rollback": rollback}
    packages = [p for names in task_values("nvidia_driver", "ansible.builtin.apt", "name", hostvars) for p in names]
    return packages, template_file("nvidia_driver", "etc/apt/preferences.d/clusterdef-nvidia-driver.pref.j2", hostvars)


def test_role_names_fabric_packages_per_branch():
    fm = {"nvidia_driver_fabric_components": FABRIC, "nvidia_driver_rollback_version": "580.95.05"}
    pkgs, pin = role_installs({**fm, "nvidia_driver_version": "570.172.08"})
    assert pkgs[-2:] == ["nvidia-fabricmanager-570=570.172.08-*", "libnvidia-nscq-570=570.172.08-*"]
    assert "Package: nvidia-open-570 nvidia-driver-570-open libnvidia-compute-570 nvidia-fabricmanager-570 " \
           "libnvidia-nscq-570\nPin: version 570.172.08-*\n" in pin
    pkgs, pin = role_installs({**fm, "nvidia_driver_version": "570.172.08"}, rollback=True)
    assert pkgs[-2:] == ["nvidia-fabricmanager=580.95.05-*", "libnvidia-nscq=580.95.05-*"]
    pkgs, pin = role_installs({"nvidia_driver_version": "580.126.20", "nvidia_driver_rollback_version": "580.95.05"})
    assert pkgs == ["nvidia-open=580.126.20-*", "nvidia-driver-open=580.126.20-*", "libnvidia-compute=580.126.20-*"]
    assert "fabricmanager" not in pin and "nscq" not in pin


def _image_packages(tree: dict[str, str], image: str) -> tuple[list[str], str]:
    conf = tree.get(f"images/{image}/mkosi.conf.d/50-nvidia.conf", "")
    body = conf.split("Packages=\n", 1)[1] if "Packages=\n" in conf else ""
    return body.split(), tree.get(f"images/{image}/mkosi.skeleton/etc/apt/preferences.d/clusterdef-nvidia.pref", "")


@pytest.mark.parametrize("name", ["lab", "estate", "gb200"])
def test_fabric_manager_and_nscq_move_with_the_driver_exactly_where_nvswitches_are(name):
    result = validate_file(CLUSTERS / f"{name}.yaml", MATRICES, TODAY)
    assert result.ok
    resolved = resolve(result.definition, result.matrix, CLUSTERS)
    d, c = resolved.definition, resolved.set.components
    back = variables(resolved)["all"]["nvidia_driver_rollback_version"]
    gv = variables(resolved)
    tree = images.render(resolved)
    seen = set()
    for gname, g in d.nodes.items():
        hw = d.hardware[g.hardware]
        if hw.gpu is None:
            continue
        nvswitch = "nvswitch" in hw.firmware
        host = {**gv["all"], **gv.get(f"cp_{g.control_plane}", {}), **gv[f"hw_{ident(g.hardware)}"],
                **gv.get(f"group_{ident(gname)}", {})}
        assert host["nvidia_driver_fabric_components"] == (FABRIC if nvswitch else []), gname
        if g.control_plane == "slurm" and g.provisioning == "stateful":  # the driver role's hosts (upgrade.yml)
            for rollback, version in ((False, c.driver), (True, back)):
                pkgs, pin = role_installs(host, rollback)
                fabric = [p for p in pkgs if p.split("=")[0] in FABRIC]
                assert fabric == ([f"{p}={version}-*" for p in FABRIC] if nvswitch else []), (gname, rollback)
                assert {p.split("=", 1)[1] for p in pkgs} == {f"{version}-*"}, "one version for the whole stack"
                assert all(f" {p}" in pin.split("\n")[2] for p in FABRIC) == nvswitch, pin
            seen.add(("role", nvswitch))
        packages, pref = _image_packages(tree, g.image)
        dropin = f"images/{g.image}/mkosi.extra/etc/systemd/system/multi-user.target.d/" \
                 "clusterdef-nvidia-fabricmanager.service.conf"
        if operator_owns_driver(d, g.image):
            # the GPU Operator's driver container installs FM and NSCQ at its driver version itself
            # (shared/reference/compat/packages.yaml nvswitch_stack: gpu-driver-container install.sh)
            assert not set(FABRIC) & set(packages) and dropin not in tree, gname
            continue
        assert (set(FABRIC) <= set(packages)) == nvswitch, (gname, packages)
        held = re.search(r"^Package: (.*)\nPin: version (.*)\n", pref, re.M)
        assert held and held.group(2) == f"{c.driver}-*" and set(FABRIC) <= set(held.group(1).split()), pref
        assert (dropin in tree) == nvswitch, gname
        if nvswitch:
            assert "\nWants=nvidia-fabricmanager.service\n" in tree[dropin]
        seen.add(("image", nvswitch))
    expect = {"lab": {("role", True), ("image", True)}, "estate": {("role", True), ("image", True)},
              "gb200": {("image", False)}}[name]
    assert expect <= seen, seen
