"""The gpu_facts role's collector and `clusterdef drift` speak the same format: what the
collector prints on a node (wrapped with host and time as the role does) is read by drift,
compared with the set, and drained when off-matrix."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import CLUSTERS, ROOT

COLLECTOR = ROOT / "roles" / "gpu_facts" / "files" / "usr" / "local" / "libexec" / "clusterdef-gpu-facts"


PROBE = ROOT / "roles" / "gpu_facts" / "files" / "usr" / "lib" / "clusterdef" / "probe"


def test_role_ships_the_one_probe():
    """The role's probe is the package's clusterdef-probe (a link, so the two cannot drift apart), and it
    is the file the image target puts into every image."""
    from clusterdef.probe import script

    assert PROBE.is_symlink() and PROBE.read_text() == script()


def test_collector_output_is_what_drift_reads(tmp_path, matrix):
    """The collector on a stand-in HGX node (real output shapes): one GPU out of step and the BMC
    unreadable. Facts carry every distinct VBIOS and the reason; drift drains the node for both."""
    from standin_node import dgx_h100, install

    vs = matrix.sets["2026.07-r580"]
    node = dgx_h100(vs, "hgx-h100")
    node["driver"] = "580.95.05"
    node["gpus"][6]["vbios"] = "96.00.99.00.01"
    node["redfish"] = {k: v for k, v in node["redfish"].items() if "BMC" not in k}
    bindir = install(tmp_path / "bin", node)
    tools = {"bmc": "nvfwupd", "gpu_vbios": "nvidia-smi", "cx7": "mlxfwmanager"}
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "CLUSTERDEF_PROBE": str(PROBE)}
    out = subprocess.run([sys.executable, str(COLLECTOR), json.dumps(tools)], env=env,
                         capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    versions = doc["versions"]
    assert versions["driver"] == "580.95.05" and versions["slurm"] == "25.11.7"
    assert versions["firmware"]["gpu_vbios"] == "96.00.68.00.01,96.00.99.00.01"
    assert versions["firmware"]["cx7"] == "28.47.2682"
    assert versions["firmware"]["bmc"] == "unknown"
    assert doc["reasons"]["firmware.bmc"].startswith("nvfwupd show_version lists no device matching")

    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "gpu001.json").write_text(json.dumps(
        {"host": "gpu001", "collected_at": "2026-11-30T03:00:00Z", "versions": versions, "reasons": doc["reasons"]}))
    drain = tmp_path / "drain.txt"
    r = subprocess.run([sys.executable, "-m", "clusterdef", "drift", str(CLUSTERS / "lab.yaml"), "--facts", str(facts),
                        "--format", "json", "--drain", str(drain), "--today", "2026-11-30"],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    off = {m["component"]: m for n in report["nodes"] for m in n["off"]}
    assert off["driver"]["actual"] == "580.95.05" and off["driver"]["expected"] == "580.126.20"
    assert off["firmware.gpu_vbios"]["actual"] == "96.00.68.00.01,96.00.99.00.01"
    assert off["firmware.bmc"]["actual"] == "unknown" and "nvfwupd" in off["firmware.bmc"]["reason"]
    assert "Traceback" not in r.stderr
    lines = drain.read_text()
    assert "NodeName=gpu001" in lines and "State=DRAIN" in lines and "firmware.bmc unknown" in lines
