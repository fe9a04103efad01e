"""The gpu_facts role's collector and `clusterdef drift` speak the same format: what the
collector prints on a node (wrapped with host and time as the role does) is read by drift,
compared with the set, and drained when off-matrix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_snapshot_playbook_records_a_gpu_node_and_a_service_host(tmp_path, matrix):
    """The real playbooks/snapshot.yml (apply's prepare stage: no node changes before its versions are on
    record) on the rendered lab inventory, local connection: the gpu_facts role collects on a stand-in HGX
    node and on a service host (no GPU firmware tools rendered for it before: the role's required argument
    failed there), and the facts file is fetched from the role's own gpu_facts_path (an included role's
    defaults are private unless `public`: the fetch failed on an undefined variable)."""
    import shutil

    from clusterdef.build import build_tree
    from clusterdef.validate.pipeline import validate_file
    from standin_node import dgx_h100, install

    from conftest import MATRICES, TODAY

    ansible = shutil.which("ansible-playbook", path=str(Path(sys.executable).parent))
    assert ansible, "ansible-playbook is not installed beside the interpreter (pip install -e '.[test]')"
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    tree, _ = build_tree(result, ["ansible"])
    for rel, text in tree.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    bindir = install(tmp_path / "bin", dgx_h100(matrix.sets["2026.07-r580"], "hgx-h100"))
    snap, work, roles = tmp_path / "snapshot", tmp_path / "node", tmp_path / "roles"
    snap.mkdir()
    # each host's own files under the test folder (both "hosts" are this machine), set where production sets
    # them, in the role's defaults: an extra var would be visible to the playbook where a default is not
    shutil.copytree(ROOT / "roles" / "gpu_facts", roles / "gpu_facts", symlinks=False)
    defaults = roles / "gpu_facts" / "defaults" / "main.yml"
    text = defaults.read_text()
    for old in ("/var/lib/clusterdef/gpu-facts.json", "/usr/local/libexec/clusterdef-gpu-facts", "/usr/lib/clusterdef/probe"):
        assert old in text, f"{old} is no longer a default of gpu_facts"
        text = text.replace(old, f"{work}/{{{{ inventory_hostname }}}}{old}")
    defaults.write_text(text)
    extra = {"clusterdef_snapshot_dir": str(snap), "ansible_connection": "local", "ansible_become": False,
             "ansible_python_interpreter": sys.executable}
    env = {**os.environ, "PATH": f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin",
           "ANSIBLE_ROLES_PATH": f"{roles}:{ROOT / 'roles'}", "ANSIBLE_NOCOLOR": "1", "HOME": str(tmp_path)}
    proc = subprocess.run([ansible, str(ROOT / "playbooks" / "snapshot.yml"), "-i", str(tmp_path / "ansible"),
                           "--limit", "gpu001,mgmt01", "-e", json.dumps(extra)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in snap.iterdir()) == ["gpu001.json", "mgmt01.json"]
    gpu, mgmt = (json.loads((snap / f"{h}.json").read_text()) for h in ("gpu001", "mgmt01"))
    assert gpu["host"] == "gpu001" and gpu["versions"]["driver"] == matrix.sets["2026.07-r580"].components.driver
    assert gpu["versions"]["firmware"]["gpu_vbios"] != "unknown"  # the HGX tools ran
    assert mgmt["host"] == "mgmt01" and mgmt["versions"]["firmware"] == {}  # nothing to read, nothing unknown
