"""The rendered Slurm health check (slurm/nodecheck) on a stand-in HGX H100 node: stand-in nvidia-smi,
ibstat, dmesg, dpkg-query, slurmd and uname first on PATH print the real tools' output shapes
(tests/standin_node.py), nodecheck reads them through the shared clusterdef-probe, and a stand-in
scontrol records the calls. Each check passes on the healthy node and fails, draining with a reason
that names the check, when one device is broken. (test_slurm_daemons.py drains through a real slurmctld.)"""

from __future__ import annotations

import subprocess

import pytest

from clusterdef.build import build_tree
from clusterdef.probe import script as probe_script
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY
from standin_node import calls, dgx_h100, install, update


@pytest.fixture(scope="module")
def rendered():
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    assert result.ok
    tree, _ = build_tree(result, ["slurm"])
    return tree["slurm/nodecheck"], result.matrix.sets["2026.07-r580"]


@pytest.fixture
def node(rendered, tmp_path):
    text, vs = rendered
    script = tmp_path / "nodecheck"
    script.write_text(text)
    probe = tmp_path / "probe"
    probe.write_text(probe_script())
    state = dgx_h100(vs, "hgx-h100")
    state["kernel_log"] = ["[    3.141592] nvidia-nvswitch: Probing device 0000:05:00.0, Vendor Id = 0x10de"]
    bindir = install(tmp_path / "bin", state)
    (bindir / "uname").write_text("#!/bin/sh\necho 6.8.0-60-generic\n")
    (bindir / "uname").chmod(0o755)
    proc = tmp_path / "proc"
    (proc / "sys/kernel/random").mkdir(parents=True)
    (proc / "sys/kernel/random/boot_id").write_text("0f6a3b7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b\n")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "CLUSTERDEF_NODECHECK_NODE": "gpu002",
           "CLUSTERDEF_NODECHECK_PROBE": str(probe), "CLUSTERDEF_NODECHECK_SCONTROL": str(bindir / "scontrol"),
           "CLUSTERDEF_NODECHECK_STATE": str(tmp_path / "state"), "CLUSTERDEF_PROBE_PROCFS": str(tmp_path),
           "CLUSTERDEF_PROBE_SYSFS": str(tmp_path)}

    def run():
        r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
        drains = [c for c in calls(bindir, "scontrol") if c.startswith("scontrol update")]
        return r, drains
    return run, bindir, vs


def test_healthy_node_passes_and_is_not_drained(node):
    run, bindir, _ = node
    r, drains = run()
    assert r.returncode == 0, r.stderr
    assert drains == []
    # every reading went through the stand-in tools, not around them
    assert any("--query-remapped-rows" in c for c in calls(bindir, "nvidia-smi"))
    assert calls(bindir, "ibstat") and calls(bindir, "dmesg")


BROKEN = [
    ("gpu-count", lambda n: n["gpus"].pop(), "gpu-count: 7 of 8 GPUs visible"),
    ("ecc", lambda n: n["gpus"][4].update(ecc=3), "ecc: gpu4(00000000:9a:00.0) 3 uncorrectable ECC error(s)"),
    ("row-remap pending", lambda n: n["gpus"][1].update(pending="1"),
     "row-remap: 00000000:2a:00.0 remap pending (1): reset the GPU"),
    ("row-remap failure", lambda n: n["gpus"][7].update(failure="1"), "row-remap: 00000000:db:00.0 remap failure (1)"),
    ("xid", lambda n: n["kernel_log"].append(
        "[ 8812.004411] NVRM: Xid (PCI:0000:ba:00): 79, pid=48211, name=python3, GPU has fallen off the bus."),
     "xid: Xid 79 (RESTART_BM) on PCI:0000:ba:00 since boot"),
    ("xid not in the catalogue", lambda n: n["kernel_log"].append(
        "[ 12.5] NVRM: Xid (PCI:0000:18:00): 170, pid=1, unclassified"), "xid: Xid 170 (unknown) on PCI:0000:18:00"),
    ("nvlink", lambda n: n["gpus"][2].update(links_up=16), "nvlink: gpu2 16 of 18 links active"),
    ("ib down", lambda n: n["hcas"][5].update(ports=[("Down", 10, "InfiniBand")]),
     "ib: 7 of 8 InfiniBand ports Active at 400 Gb/s (mlx5_5/1 Down@10)"),
    ("ib slow", lambda n: n["hcas"][0].update(ports=[("Active", 200, "InfiniBand")]),
     "ib: 7 of 8 InfiniBand ports Active at 400 Gb/s (mlx5_0/1 Active@200)"),
    ("version", lambda n: n["gpus"][3].update(vbios="96.00.99.00.01"),
     "version: gpu_vbios gpu3(00000000:5d:00.0) 96.00.99.00.01, set 2026.07-r580 pins 96.00.68.00.01"),
    ("version driver", lambda n: n.update(driver="550.144.03"),
     "version: driver gpu0(00000000:18:00.0) 550.144.03, set 2026.07-r580 pins 580.126.20"),
    ("version unreadable", lambda n: n["packages"].pop("libnccl2"),
     "version: nccl unreadable (no installed package matches libnccl2), set 2026.07-r580 pins 2.30.4"),
]


@pytest.mark.parametrize(("check", "breaks", "reason"), BROKEN, ids=[b[0] for b in BROKEN])
def test_each_check_drains_naming_itself(node, check, breaks, reason):
    run, bindir, _ = node
    update(bindir, breaks)
    r, drains = run()
    assert r.returncode == 1, r.stderr
    assert len(drains) == 1, drains
    assert "NodeName=gpu002 State=DRAIN" in drains[0]
    assert f"'Reason=clusterdef-nodecheck: {reason}" in drains[0], drains[0]


def test_harmless_xid_does_not_drain(node):
    """Xid 13 (Graphics Engine Exception) and 31 (page fault) are the application's: RESTART_APP."""
    run, bindir, _ = node
    update(bindir, lambda n: n["kernel_log"].extend([
        "[ 40.1] NVRM: Xid (PCI:0000:18:00): 13, pid=811, Graphics SM Warp Exception",
        "[ 41.7] NVRM: Xid (PCI:0000:2a:00): 31, pid=812, Ch 00000008, intr 10000000. MMU Fault"]))
    r, drains = run()
    assert r.returncode == 0 and drains == [], r.stderr


# The kernel log of jobs that were ended: the driver's Xid 45 (preemptive channel removal) for each
# GPU channel of a scancelled / timed-out / preempted CUDA process, and Xid 43 for a channel the
# application's own error stopped (shapes: NVRM Xid lines as in docs.nvidia.com/deploy/xid-errors).
ENDED_JOBS = [
    "[ 5120.331907] NVRM: Xid (PCI:0000:18:00): 45, pid=51234, name=python3, Ch 00000010",
    "[ 5120.332011] NVRM: Xid (PCI:0000:2a:00): 45, pid=51234, name=python3, Ch 00000010",
    "[ 7333.100200] NVRM: Xid (PCI:0000:9a:00): 43, pid=60111, name=pt_main_thread, Ch 00000008",
    "[ 9001.000001] NVRM: Xid (PCI:0000:18:00): 45, pid=70001, name=python3, Ch 00000018",
]
FATAL = "[ 9100.250000] NVRM: Xid (PCI:0000:ba:00): 79, pid=70002, name=python3, GPU has fallen off the bus."


def test_killed_jobs_xid_45_leaves_the_node_in_service(node):
    """Xid 45 is the driver tearing down an ended application's channels (WORKFLOW_XID_45; NVIDIA: "the
    kernel driver terminates a GPU application as a result of a user or system action"): every scancel,
    time limit and preemption of a CUDA job leaves one. The node stays in service, and the check keeps
    doing so run after run (the old check drained here and kept the node drained until a reboot)."""
    run, bindir, _ = node
    update(bindir, lambda n: n["kernel_log"].extend(ENDED_JOBS))
    for _ in range(2):
        r, drains = run()
        assert r.returncode == 0 and drains == [], (r.stderr, drains)


def test_fatal_xid_drains_beside_benign_ones(node):
    run, bindir, _ = node
    update(bindir, lambda n: n["kernel_log"].extend(ENDED_JOBS + [FATAL]))
    r, drains = run()
    assert r.returncode == 1 and len(drains) == 1, r.stderr
    assert "'Reason=clusterdef-nodecheck: xid: Xid 79 (RESTART_BM) on PCI:0000:ba:00 since boot'" in drains[0]
    assert "Xid 45" not in drains[0] and "Xid 43" not in drains[0]
    # not handled yet: the next check drains it again (still new to the cursor)
    r, drains = run()
    assert r.returncode == 1 and len(drains) == 2, r.stderr


def test_handled_fatal_xid_is_not_read_again(node, tmp_path):
    """A fatal Xid drains; the operator resets the GPU and resumes the node (scontrol update
    State=RESUME): the check takes the lifted drain as the Xid handled and moves its cursor past it, so
    the node stays in service (the old check re-read the whole log since boot and drained it again at
    every run until a reboot). A new fatal Xid after that drains again, naming only itself; a reboot
    (a new boot id) starts from the new kernel log."""
    run, bindir, _ = node
    update(bindir, lambda n: n["kernel_log"].extend(ENDED_JOBS))
    r, drains = run()
    assert r.returncode == 0 and drains == []
    update(bindir, lambda n: n["kernel_log"].append(FATAL))
    r, drains = run()
    assert r.returncode == 1 and "Xid 79 (RESTART_BM)" in drains[-1] and "since the last clean check" in drains[-1]
    update(bindir, lambda n: n.update(slurm_state="IDLE", slurm_reason=""))  # the operator's resume
    for _ in range(2):
        r, drains = run()
        assert r.returncode == 0 and len(drains) == 1, (r.stderr, drains)
    cursor = (tmp_path / "state/xid-cursor").read_text().split()
    assert cursor == ["0f6a3b7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "9100250000"]
    update(bindir, lambda n: n["kernel_log"].append(
        "[ 9500.000000] NVRM: Xid (PCI:0000:3a:00): 48, pid=1, DBE (0x1) ECC"))
    r, drains = run()
    assert r.returncode == 1 and "xid: Xid 48 (WORKFLOW_XID_48) on PCI:0000:3a:00 since the last clean check'" in \
        drains[-1] and "Xid 79" not in drains[-1], drains[-1]
    # the reboot: a new boot id and a new kernel log; the drain is Slurm's to lift (reboot nextstate=RESUME)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text("7d1e2f30-4a5b-4c6d-9e8f-a0b1c2d3e4f5\n")
    update(bindir, lambda n: n.update(kernel_log=[], slurm_state="IDLE", slurm_reason=""))
    r, drains = run()
    assert r.returncode == 0 and len(drains) == 2, r.stderr
    assert (tmp_path / "state/xid-cursor").read_text().split()[0] == "7d1e2f30-4a5b-4c6d-9e8f-a0b1c2d3e4f5"


def test_clean_check_moves_the_cursor(node, tmp_path):
    run, bindir, _ = node
    update(bindir, lambda n: n["kernel_log"].extend(ENDED_JOBS))
    r, _ = run()
    assert (tmp_path / "state/xid-cursor").read_text() == "0f6a3b7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b 9001000001\n"
    # a fatal Xid logged at a time before the cursor (it was judged, or handled, already) is not re-read
    update(bindir, lambda n: n["kernel_log"].append(
        "[ 8000.000000] NVRM: Xid (PCI:0000:ba:00): 79, pid=1, GPU has fallen off the bus."))
    r, drains = run()
    assert r.returncode == 0 and drains == [], r.stderr


def test_missing_tool_fails_closed(node):
    run, bindir, _ = node
    (bindir / "ibstat").unlink()
    r, drains = run()
    assert r.returncode == 1
    assert "ib: InfiniBand ports unreadable (ibstat (infiniband-diags) not installed)" in drains[0]


def test_several_failures_in_one_reason_and_resume(node):
    run, bindir, _ = node
    update(bindir, lambda n: (n["gpus"][4].update(ecc=1), n["gpus"][2].update(links_up=0)))
    r, drains = run()
    assert r.returncode == 1
    assert "ecc: gpu4" in drains[0] and "; nvlink: gpu2 0 of 18 links active" in drains[0]
    update(bindir, lambda n: (n["gpus"][4].update(ecc=0), n["gpus"][2].pop("links_up")))
    r, _ = run()
    assert r.returncode == 0
    assert calls(bindir, "scontrol")[-1] == "scontrol update NodeName=gpu002 State=RESUME"


def test_every_catalogue_action_is_classified():
    """knowledge/xid_nodecheck.csv names every action bucket of the catalogue (keep or drain, with its
    source), so no Xid class falls to the drain default unseen; 45 keeps the node, 48 and 79 drain."""
    import csv

    from clusterdef.knowledge import xid

    with xid.NODECHECK.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["node"] for r in rows} == {"keep", "drain"} and all(r["source"].startswith("http") for r in rows)
    assert {x.action for x in xid.catalogue().values()} <= set(xid.node_actions())
    cat = xid.catalogue()
    assert [c for c in (13, 31, 43, 45, 63, 94) if cat[c].drains] == []
    assert all(cat[c].drains for c in (48, 62, 64, 74, 79, 95, 119, 154))


# --------------------------------------------------------------------------- RoCE ports (sysfs)

@pytest.fixture(scope="module")
def roce_rendered(tmp_path_factory):
    """slurm/nodecheck of the RoCE lab (tests/roce_lab.py: eight 400 Gb/s RoCE ports roce0..roce7)."""
    from roce_lab import roce_lab

    result = validate_file(roce_lab(tmp_path_factory.mktemp("roce") / "roce.yaml"), MATRICES, TODAY)
    assert result.ok
    tree, _ = build_tree(result, ["slurm"])
    return tree["slurm/nodecheck"]


def _net(root, name: str, state: str = "up", speed: str | None = "400000") -> None:
    d = root / "sys" / "class" / "net" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "operstate").write_text(state + "\n")
    if speed is not None:
        (d / "speed").write_text(speed + "\n")


@pytest.fixture
def roce_node(node, roce_rendered, tmp_path):
    """The stand-in node running the RoCE lab's nodecheck, its interfaces under <tmp>/sys/class/net."""
    run, bindir, vs = node
    (tmp_path / "nodecheck").write_text(roce_rendered)
    _net(tmp_path, "eno1", speed="25000")
    for i in range(8):
        _net(tmp_path, f"roce{i}")
    return run, bindir, tmp_path


def test_roce_expectations_come_from_the_hardware(roce_rendered):
    assert "  echo 'roce 400 roce0 roce1 roce2 roce3 roce4 roce5 roce6 roce7'\n" in roce_rendered
    assert "echo 'ib " not in roce_rendered  # no InfiniBand port on this hardware


def test_roce_healthy_node_passes(roce_node):
    run, _, _ = roce_node
    r, drains = run()
    assert r.returncode == 0 and drains == [], r.stderr


def test_roce_three_rails_down_drain(roce_node):
    """One rail's link down, one interface gone, one trained at 200 Gb/s: 5 of 8, drained."""
    run, bindir, root = roce_node
    _net(root, "roce1", "down", None)
    _net(root, "roce6", speed="200000")
    import shutil

    shutil.rmtree(root / "sys/class/net/roce4")
    r, drains = run()
    assert r.returncode == 1, r.stderr
    assert len(drains) == 1 and "NodeName=gpu002 State=DRAIN" in drains[0]
    assert ("'Reason=clusterdef-nodecheck: roce: 5 of 8 RoCE ports up at 400 Gb/s "
            "(roce1 down, roce4 absent, roce6 at 200 Gb/s)'") in drains[0], drains[0]


def test_roce_unreadable_fails_closed(roce_node):
    import shutil

    run, bindir, root = roce_node
    shutil.rmtree(root / "sys/class/net")
    r, drains = run()
    assert r.returncode == 1
    assert "roce: RoCE ports unreadable (no " in drains[0] and "/class/net/*/operstate)" in drains[0]


# --------------------------------------------------------------------------- installed by a role on stateful nodes

@pytest.mark.slow
def test_role_installs_nodecheck_on_stateful_slurm_nodes(tmp_path):
    """roles/slurm_nodecheck as upgrade.yml and rollback.yml name it (their `when`), with the rendered
    inventory and group_vars, on this machine (local connection, each host under <tmp>/root/<host>):
    the lab's stateful Slurm nodes (sgpu01-02) get the rendered slurm/nodecheck at slurm.conf's
    HealthCheckProgram, mode 0755, byte for byte; the stateless ones (gpu001-004, their image carries
    it) and the Kubernetes ones get nothing; a second run changes nothing; rollback.yml installs the
    rollback set's health check."""
    import json
    import os
    import stat
    import sys
    from pathlib import Path

    from ruamel.yaml import YAML

    from conftest import ROOT

    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    tree, _ = build_tree(result, ["slurm", "ansible"])
    for rel, text in tree.items():
        if rel.startswith("ansible/"):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
    program = result.definition.slurm.health_check.program
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1"}
    extra = json.dumps({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                        "slurm_nodecheck_root": str(tmp_path / "root") + "/{{ inventory_hostname }}"})

    def play(playbook: str) -> Path:
        """A play of the playbook's own slurm_nodecheck entry (role, when, vars) on every node."""
        plays = YAML(typ="safe").load((ROOT / "playbooks" / playbook).read_text())
        [entry] = [r for p in plays for r in p.get("roles", []) if r.get("role") == "slurm_nodecheck"]
        path = tmp_path / f"play-{playbook}"
        path.write_text(json.dumps([{"name": "Health check", "hosts": "nodes", "gather_facts": False,
                                     "roles": [entry]}]))
        return path

    def run(playbook: str) -> str:
        r = subprocess.run([str(ansible), "-i", str(tmp_path / "ansible"), str(play(playbook)), "-e", extra],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        return r.stdout

    first, second = run("upgrade.yml"), run("upgrade.yml")
    recap = lambda out, host: next(ln for ln in out.splitlines() if ln.startswith(host + " "))  # noqa: E731
    for host in ("sgpu01", "sgpu02"):
        installed = tmp_path / "root" / host / program.lstrip("/")
        assert installed.read_text() == tree["slurm/nodecheck"]
        assert stat.S_IMODE(installed.stat().st_mode) == 0o755
        assert "changed=0" not in recap(first, host) and "failed=0" in recap(first, host)
        assert "changed=0" in recap(second, host) and "failed=0" in recap(second, host), recap(second, host)
    for host in ("gpu001", "gpu004", "kgpu01"):
        assert not (tmp_path / "root" / host).exists(), host
    run("rollback.yml")
    back = (tmp_path / "root" / "sgpu01" / program.lstrip("/")).read_text()
    rb = result.matrix.sets["2025.10-r580"]
    assert back != tree["slurm/nodecheck"] and f"Validated set {rb.name} (Slurm {rb.components.slurm})" in back
