"""NVLink 5 nodes (fourth-generation NVSwitches on the baseboard: HGX/DGX B200, B300) run NVIDIA's NVLink Subnet
Manager beside Fabric Manager (issue 29 item 4): nvlsm and infiniband-diags in the image and in the driver role,
unpinned; the modules NVLSM needs loaded at boot and Fabric Manager's unit (whose start script starts NVLSM first)
ordered after them; chosen from what the hardware is (knowledge/platforms.yaml nvlink_gen, else the GPU model's
generation), never from the firmware a set pins. A set too old for NVLSM is refused, an unpinned nvlsm is said.
Pure: the lab turned into Blackwell boards by text (test_nvswitch_stack.blackwell_lab)."""

from __future__ import annotations

import pytest

from clusterdef.render import images
from clusterdef.render.ansible import variables
from clusterdef.resolve import resolve
from conftest import CLUSTERS
from test_nvswitch_stack import FABRIC, _image_packages, blackwell_lab, role_installs

NVLSM = ["nvlsm", "infiniband-diags"]
EXTRA = "images/gpu-node/mkosi.extra/"
MODULES = EXTRA + "etc/modules-load.d/clusterdef-nvlsm.conf"
DROPIN = EXTRA + "etc/systemd/system/nvidia-fabricmanager.service.d/clusterdef-nvlsm.conf"


def _nvlsm(result) -> dict:
    resolved = resolve(result.definition, result.matrix, CLUSTERS)
    tree = images.render(resolved)
    packages, pref = _image_packages(tree, "gpu-node")
    gv = variables(resolved)
    host = {**gv["all"], **gv["hw_hgx_h100"]}
    role = [p for p in role_installs(host)[0] if p.split("=")[0] in NVLSM]
    return {"packages": [p for p in packages if p in NVLSM], "fabric": set(FABRIC) <= set(packages),
            "pinned": [p for ln in pref.splitlines() if ln.startswith("Package:") for p in NVLSM if p in ln.split()], "modules": tree.get(MODULES), "dropin": tree.get(DROPIN),
            "role_var": host["nvidia_driver_nvlink5_components"], "role": role,
            "pins": images.package_pins(resolved, "gpu-node")}


def _codes(result, *codes):
    return [(f.code, f.severity.value, f.path) for f in result.findings if f.code in codes]


@pytest.mark.parametrize(("platform", "firmware"), [("hgx-b200", "[cx7]"), ("hgx-b300", "[]")])  # no set pins B300
def test_nvlink5_boards_get_nvlsm_beside_fabric_manager(tmp_path, platform, firmware):
    _, result = blackwell_lab(tmp_path, platform, firmware)
    assert result.ok, [(f.code, f.message) for f in result.errors]
    s = _nvlsm(result)
    assert s["fabric"] and s["packages"] == NVLSM
    assert s["pinned"] == [] and not set(NVLSM) & set(s["pins"])  # unpinned, and plan's image diff says no pin
    assert s["modules"].endswith("mlx5_core\nib_umad\n")
    assert "[Unit]\nWants=systemd-modules-load.service\nAfter=systemd-modules-load.service\n" in s["dropin"]
    assert s["role_var"] == NVLSM and s["role"] == NVLSM  # the role installs them without a version
    warned = [f for f in result.findings if f.code == "nvlsm-unpinned"]
    assert [(f.severity.value, f.path) for f in warned] == [("warning", ("hardware", "hgx-h100", "platform"))]
    assert "pins no nvlsm version" in warned[0].message and "dpkg-query -W nvlsm" in warned[0].hint


def test_hopper_and_rack_trays_get_no_nvlsm(tmp_path):
    from clusterdef.validate.pipeline import validate_file
    from conftest import MATRICES, TODAY
    lab = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)  # HGX H100: third-generation NVSwitches
    s = _nvlsm(lab)
    assert s["fabric"] and s["packages"] == [] and s["modules"] is None and s["dropin"] is None
    assert s["role_var"] == [] and s["role"] == [] and not _codes(lab, "nvlsm-unpinned", "hardware-nvlsm-driver")
    # GB200 compute trays: NVLink 5 but no NVSwitch in the node (NVLSM runs on the switch trays)
    _, result = blackwell_lab(tmp_path, "gb200-nvl72", "[cx7]")
    s = _nvlsm(result)
    assert not s["fabric"] and s["packages"] == [] and s["dropin"] is None and s["role_var"] == []
    assert not _codes(result, "nvlsm-unpinned")


def test_an_unknown_platform_with_nvswitches_takes_the_generation_from_its_gpus(tmp_path):
    """An OEM board the table does not know, stated to carry NVSwitches: its B200 GPUs are NVLink 5
    (gpu_limits.yaml nvlink_gen), so it gets NVLSM too; without NVSwitches it does not."""
    _, result = blackwell_lab(tmp_path, "acme-b200x8", "[]", "nvswitch: true, ")
    assert _nvlsm(result)["packages"] == NVLSM
    (tmp_path / "lab.yaml").unlink()
    _, result = blackwell_lab(tmp_path, "acme-b200x8", "[]", "nvswitch: false, ")
    assert _nvlsm(result)["packages"] == [] and not _codes(result, "nvlsm-unpinned")


def test_a_set_older_than_nvlsm_is_refused(tmp_path):
    """HGX B300 (no first driver in the platform table) on the R550 set: NVLSM ships from R570."""
    path, _ = blackwell_lab(tmp_path, "hgx-b300", "[]")
    path.write_text(path.read_text().replace("matrix: 2026.07-r580", "matrix: 2025.01-r550", 1))
    from clusterdef.validate.pipeline import validate_file
    from conftest import MATRICES, TODAY
    result = validate_file(path, MATRICES, TODAY)
    bad = [f for f in result.findings if f.code == "hardware-nvlsm-driver"]
    assert [(f.severity.value, f.path) for f in bad] == [("error", ("hardware", "hgx-h100", "platform"))]
    assert "first shipped for driver branch R570" in bad[0].message and "R570 or later" in bad[0].hint
    assert not _codes(result, "nvlsm-unpinned")


def test_b300_renders_no_alert_or_link_count_from_figures_the_reference_lacks(tmp_path):
    """The lab's boards as HGX B300 with B300 GPUs: no TDP, temperature or link count is known
    (gpu_limits.yaml), so no power or temperature alert and no `nvlink N` nodecheck line; the NVLink runbooks
    say "every NVLink link"; NVLSM is there all the same (the generation is known). Validation says so
    (gpu-limits-incomplete); thresholds set in the definition bring those two alerts back."""
    from clusterdef.render.observability.alertrules import alerts
    from clusterdef.render.slurm import nodecheck_expectations
    from clusterdef.validate.pipeline import validate_file
    from conftest import MATRICES, TODAY

    path, _ = blackwell_lab(tmp_path, "hgx-b300", "[]")
    path.write_text(path.read_text().replace("B200-SXM-180GB", "B300-SXM-288GB", 1))
    result = validate_file(path, MATRICES, TODAY)
    assert result.ok and [f.dotted for f in result.findings if f.code == "gpu-limits-incomplete"] == [
        "hardware.hgx-h100.gpu.model"]
    resolved = resolve(result.definition, result.matrix, CLUSTERS)
    gpu = {a.name: a for a in alerts(resolved) if a.group == "gpu"}
    assert "GpuPowerHigh" not in gpu and "GpuTemperatureHigh" not in gpu and "GpuNvlinkLinkDown" in gpu
    assert "nvidia-smi nvlink -s must show every NVLink link up" in gpu["GpuNvlinkLinkDown"].runbook
    assert [h for h in nodecheck_expectations(resolved)["train"]["health"] if h.startswith("nvlink")] == []
    assert _nvlsm(result)["packages"] == NVLSM
    text = path.read_text()
    assert "\nobservability:" not in text
    path.write_text(text + "observability:\n  hardware:\n    hgx-h100: {temperature_c: 80, power_w: 900}\n")
    result = validate_file(path, MATRICES, TODAY)
    gpu = {a.name: a for a in alerts(resolve(result.definition, result.matrix, CLUSTERS)) if a.group == "gpu"}
    assert "> 900" in gpu["GpuPowerHigh"].expr and "> 80" in gpu["GpuTemperatureHigh"].expr
