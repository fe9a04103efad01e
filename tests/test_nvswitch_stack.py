"""One consistent NVIDIA stack per node: on NVSwitch node types Fabric Manager and NSCQ are installed at exactly
the driver's version, by the image (stateless nodes) and by roles/nvidia_driver (stateful Slurm nodes), and
nowhere else (knowledge/nvidia_packages.yaml cites NVIDIA's Fabric Manager user guide). Pure: the role's own
Jinja (vars/main.yml, its apt tasks, its pin template) is evaluated by Ansible's templar with the rendered
group_vars of each node group of the three bundled examples."""

from __future__ import annotations

import re
import shutil

import pytest

from clusterdef.knowledge.images import fabric_components, operator_owns_driver
from clusterdef.knowledge.platforms import has_nvswitch
from clusterdef.render import images
from clusterdef.render.ansible import variables
from clusterdef.render.ansible.render import ident
from clusterdef.render.slurm import nodecheck_expectations
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
        nvswitch = has_nvswitch(hw)  # the bundled examples' firmware lists agree (hardware-nvswitch-contradiction)
        assert nvswitch == ("nvswitch" in hw.firmware), gname
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


# --- hardware by what it is (issue 29 item 4) -------------------------------------------------------
# The lab with its GPU nodes turned into Blackwell boards by text replacement (no bundled example):
# NVSwitches, and with them Fabric Manager, NSCQ and the NVLink check, follow from the platform
# (knowledge/platforms.yaml) or gpu.nvswitch, never from which firmware the set happens to pin.

LAB_FIRMWARE = "firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7]"


def blackwell_lab(tmp_path, platform: str, firmware: str, gpu_extra: str = "") -> tuple:
    """The lab's GPU hardware type `hgx-h100` as `platform` with B200 GPUs and `firmware`; validated."""
    for csv in CLUSTERS.glob("*.csv"):
        shutil.copyfile(csv, tmp_path / csv.name)
    text = (CLUSTERS / "lab.yaml").read_text(encoding="utf-8")
    for old, new in (("platform: hgx-h100", f"platform: {platform}"),
                     ("gpu: {model: H100-SXM5-80GB, type: h100, count: 8,",
                      f"gpu: {{model: B200-SXM-180GB, type: h100, count: 8, {gpu_extra}"),
                     (LAB_FIRMWARE, f"firmware: {firmware}")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "lab.yaml"
    path.write_text(text, encoding="utf-8")
    return path, validate_file(path, MATRICES, TODAY)


def _stack(result) -> dict:
    """What the lab's GPU nodes get: the image's packages and Fabric Manager drop-in, the driver role's
    fabric components, nodecheck's lines for Slurm group `train`."""
    resolved = resolve(result.definition, result.matrix, CLUSTERS)
    tree = images.render(resolved)
    packages, pref = _image_packages(tree, "gpu-node")
    held = re.search(r"^Package: (.*)\nPin: version (.*)\n", pref, re.M)
    expect = nodecheck_expectations(resolved)["train"]
    return {"packages": packages, "held": (held.group(1).split(), held.group(2)) if held else None,
            "dropin": "images/gpu-node/mkosi.extra/etc/systemd/system/multi-user.target.d/"
                      "clusterdef-nvidia-fabricmanager.service.conf" in tree,
            "role": variables(resolved)["hw_hgx_h100"]["nvidia_driver_fabric_components"],
            "health": expect["health"], "versions": [c for c, _ in expect["versions"]],
            "driver": resolved.set.components.driver}


@pytest.mark.parametrize(("platform", "firmware"), [("hgx-b200", "[cx7]"), ("dgx-b200", "[cpld]")])
def test_blackwell_boards_get_the_nvswitch_stack_from_the_hardware(tmp_path, platform, firmware):
    """HGX B200 (the sets pin only cx7 for it) and DGX B200 (only cpld): neither pins `nvswitch`, yet both
    get Fabric Manager and NSCQ at the driver's version, the NVLink check and a VBIOS check."""
    path, result = blackwell_lab(tmp_path, platform, firmware)
    assert result.ok, [(f.code, f.message) for f in result.findings if f.severity.value == "error"]
    warned = [f for f in result.findings if f.code == "hardware-nvswitch-firmware-unchecked"]
    assert [(f.severity.value, f.path, f.file, f.line) for f in warned] == [
        ("warning", ("hardware", "hgx-h100", "platform"), str(path), 13)]
    assert f"pins no NVSwitch firmware for platform `{platform}`" in warned[0].message and warned[0].hint
    s = _stack(result)
    assert set(FABRIC) <= set(s["packages"]) and s["dropin"]
    assert s["held"] and set(FABRIC) <= set(s["held"][0]) and s["held"][1] == f"{s['driver']}-*"
    assert s["role"] == FABRIC
    # no VBIOS pinned for the platform: every GPU must read one VBIOS, the same on all 8
    assert "gpu_vbios=nvidia-smi" not in s["versions"]
    assert s["health"] == ["gpus 8", "vbios 8 gpu_vbios=nvidia-smi", "nvlink 18", "ib 8 400"]


def test_the_lab_keeps_its_pinned_vbios_and_nvlink_checks():
    """HGX H100 with the VBIOS pinned: the version check, no uniformity line; NVLink as before."""
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    s = _stack(result)
    assert "gpu_vbios=nvidia-smi" in s["versions"]
    assert s["health"] == ["gpus 8", "nvlink 18", "ib 8 400"]


def test_gpu_nvswitch_overrides_the_platform(tmp_path):
    """gpu.nvswitch: false on an HGX B200 takes the stack and the NVLink check away (the firmware list is
    not consulted); listing `nvswitch` firmware on hardware without NVSwitches is a located error."""
    _, result = blackwell_lab(tmp_path, "hgx-b200", "[cx7]", "nvswitch: false, ")
    assert result.ok and "hardware-nvswitch-firmware-unchecked" not in {f.code for f in result.findings}
    s = _stack(result)
    assert not set(FABRIC) & set(s["packages"]) and not s["dropin"] and s["role"] == []
    assert "nvlink 18" not in s["health"] and "vbios 8 gpu_vbios=nvidia-smi" in s["health"]

    (tmp_path / "lab.yaml").unlink()
    path, result = blackwell_lab(tmp_path, "gb200-nvl72", "[cx7, nvswitch]")
    bad = [f for f in result.findings if f.code == "hardware-nvswitch-contradiction"]
    assert [(f.severity.value, f.path, f.file, f.line) for f in bad] == [
        ("error", ("hardware", "hgx-h100", "firmware", 1), str(path), 21)]
    assert "no NVSwitch in the node" in bad[0].message and "gpu.nvswitch: true" in bad[0].hint


def test_an_unknown_platform_is_asked_to_say_what_it_is(tmp_path):
    path, result = blackwell_lab(tmp_path, "acme-b200x8", "[]")
    unknown = [f for f in result.findings if f.code == "hardware-nvswitch-unknown"]
    assert [(f.severity.value, f.path, f.file, f.line) for f in unknown] == [
        ("warning", ("hardware", "hgx-h100", "gpu"), str(path), 14)]
    assert "hardware.hgx-h100.gpu.nvswitch: true" in unknown[0].hint and "hgx-b200" in unknown[0].hint
    assert _stack(result)["role"] == []  # unknown: none, and the warning says so
    (tmp_path / "lab.yaml").unlink()
    _, result = blackwell_lab(tmp_path, "acme-b200x8", "[]", "nvswitch: true, ")
    assert "hardware-nvswitch-unknown" not in {f.code for f in result.findings}
    assert _stack(result)["role"] == FABRIC


def test_a_four_gpu_board_is_not_taken_for_the_eight_gpu_one(tmp_path):
    """The table describes the 8-GPU HGX board; a 4-GPU one of the same platform name is not assumed to
    carry NVSwitches (HGX H100 4-GPU has none): warned, no stack."""
    for csv in CLUSTERS.glob("*.csv"):
        shutil.copyfile(csv, tmp_path / csv.name)
    text = (CLUSTERS / "lab.yaml").read_text(encoding="utf-8").replace(LAB_FIRMWARE, "firmware: [cx7]", 1)
    text = text.replace("type: h100, count: 8,", "type: h100, count: 4,", 1)
    (tmp_path / "lab.yaml").write_text(text, encoding="utf-8")
    result = validate_file(tmp_path / "lab.yaml", MATRICES, TODAY)
    unknown = [f for f in result.findings if f.code == "hardware-nvswitch-unknown"]
    assert unknown and "has 8 GPUs per node, this hardware 4" in unknown[0].message
    hw = result.definition.hardware["hgx-h100"]
    assert fabric_components(hw) == []


def test_platform_table_is_cited_and_consistent():
    """Every platform states GPUs per node, NVSwitch and NVLink scope with a source for each figure;
    the rack-scale trays agree with nvlink_domains.yaml."""
    from ruamel.yaml import YAML

    from clusterdef.knowledge import platforms
    from clusterdef.knowledge.nvlink_domains import table as domains

    raw = YAML(typ="safe").load(platforms.DATA.read_text(encoding="utf-8"))["platforms"]
    for name, p in raw.items():
        assert {"gpus", "nvswitch"} <= set(p["sources"]), name
        assert all(s["url"] and s["text"] and s["verified"] in ("yes", "no") for s in p["sources"].values()), name
    t = platforms.table()
    assert {n for n, p in t.items() if p.nvswitch} >= {"hgx-h100", "dgx-h100", "hgx-b200", "dgx-b200", "hgx-b300"}
    for name, dom in domains().items():
        assert t[name].gpus == dom.gpus_per_tray and not t[name].nvswitch and t[name].nvlink == "rack"


def test_hgx_b200_nodecheck_holds_gpus_to_one_vbios_and_all_nvlinks(tmp_path):
    """The rendered nodecheck of the HGX B200 lab on a stand-in 8-GPU node (tests/standin_node.py, as
    test_nodecheck.py): healthy passes; one GPU with other VBIOS, or one with NVLinks down, drains the node
    naming the check (the set pins no B200 VBIOS, so one VBIOS across the GPUs is what can be held)."""
    import subprocess

    from clusterdef.build import build_tree
    from clusterdef.probe import script as probe_script
    from standin_node import calls, dgx_h100, install, update

    _, result = blackwell_lab(tmp_path, "hgx-b200", "[cx7]")
    tree, _ = build_tree(result, ["slurm"])
    script = tmp_path / "nodecheck"
    script.write_text(tree["slurm/nodecheck"])
    probe = tmp_path / "probe"
    probe.write_text(probe_script())
    state = dgx_h100(result.matrix.sets["2026.07-r580"], "hgx-h100")  # the H100 board's shapes, B200 firmware below
    for g in state["gpus"]:
        g["vbios"] = "97.00.0B.00.01"
    bindir = install(tmp_path / "bin", state)
    (bindir / "uname").write_text("#!/bin/sh\necho 6.8.0-60-generic\n")
    (bindir / "uname").chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "CLUSTERDEF_NODECHECK_NODE": "gpu002",
           "CLUSTERDEF_NODECHECK_PROBE": str(probe), "CLUSTERDEF_NODECHECK_SCONTROL": str(bindir / "scontrol"),
           "CLUSTERDEF_NODECHECK_STATE": str(tmp_path / "state"), "CLUSTERDEF_PROBE_PROCFS": str(tmp_path)}

    def run():
        r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
        return r.returncode, [c for c in calls(bindir, "scontrol") if c.startswith("scontrol update")]

    assert run() == (0, []), "healthy B200 node"
    update(bindir, lambda n: n["gpus"][3].update(vbios="97.00.0A.00.01"))
    rc, drains = run()
    assert rc == 1 and len(drains) == 1
    assert "Reason=clusterdef-nodecheck: vbios: gpu3(00000000:5d:00.0) VBIOS 97.00.0A.00.01, other GPUs " \
           "97.00.0B.00.01" in drains[0], drains
    update(bindir, lambda n: (n["gpus"][3].update(vbios="97.00.0B.00.01"), n["gpus"][5].update(links_up=12)))
    rc, drains = run()
    assert rc == 1 and "nvlink: gpu5 12 of 18 links active" in drains[-1], drains


def test_a_set_older_than_the_platforms_first_driver_is_refused(tmp_path):
    """HGX B200 needs driver 570.133.20 or later (platforms.yaml min_driver, from the GPU Operator's platform
    support page): the lab's B200 variant on the R550 set is refused at its platform, on R580 it is not."""
    path, result = blackwell_lab(tmp_path, "hgx-b200", "[]")
    assert "hardware-driver-floor" not in {f.code for f in result.findings}
    path.write_text(path.read_text(encoding="utf-8").replace("matrix: 2026.07-r580", "matrix: 2025.01-r550", 1),
                    encoding="utf-8")
    result = validate_file(path, MATRICES, TODAY)
    floor = [f for f in result.findings if f.code == "hardware-driver-floor"]
    assert [(f.severity.value, f.path, f.line, f.message) for f in floor] == [
        ("error", ("hardware", "hgx-h100", "platform"), 13, "set `2025.01-r550` runs driver 550.144.03, older than "
         "570.133.20, the first driver for platform `hgx-b200`")]
    assert "570.133.20 or later" in floor[0].hint
