"""The gpu_facts role's collector and `clusterdef drift` speak the same format: what the
collector prints on a node (wrapped with host and time as the role does) is read by drift,
compared with the set, and drained when off-matrix."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from conftest import CLUSTERS, ROOT

COLLECTOR = ROOT / "roles" / "gpu_facts" / "files" / "usr" / "local" / "libexec" / "clusterdef-gpu-facts"


def stand_in(bindir: Path, name: str, output: str) -> None:
    path = bindir / name
    path.write_text(f"#!/bin/sh\ncat <<'OUT'\n{output}\nOUT\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_collector_output_is_what_drift_reads(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # An old driver and the set's Slurm; every other tool is missing on this machine -> "unknown".
    stand_in(bindir, "nvidia-smi", "580.95.05, 96.00.68.00.01\n580.95.05, 96.00.68.00.01")
    stand_in(bindir, "slurmd", "slurm 25.11.7")
    tools = {"bmc": "nvfwupd", "gpu_vbios": "nvidia-smi", "cx7": "mlxfwmanager"}
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(COLLECTOR), json.dumps(tools)], env=env,
                         capture_output=True, text=True, check=True)
    versions = json.loads(out.stdout)["versions"]
    assert versions["driver"] == "580.95.05" and versions["slurm"] == "25.11.7"
    assert versions["firmware"]["gpu_vbios"] == "96.00.68.00.01"
    assert versions["firmware"]["bmc"] == "unknown"

    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "gpu001.json").write_text(json.dumps(
        {"host": "gpu001", "collected_at": "2026-11-30T03:00:00Z", "versions": versions}))
    drain = tmp_path / "drain.txt"
    r = subprocess.run([sys.executable, "-m", "clusterdef", "drift", str(CLUSTERS / "lab.yaml"), "--facts", str(facts),
                        "--format", "json", "--drain", str(drain), "--today", "2026-11-30"],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    text = json.dumps(report)
    assert "580.95.05" in text and "580.126.20" in text
    assert "Traceback" not in r.stderr
    lines = drain.read_text()
    assert "NodeName=gpu001" in lines and "State=DRAIN" in lines and "driver" in lines
