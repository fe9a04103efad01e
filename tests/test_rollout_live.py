"""No job is killed by a rollout, live (issue 28): real slurmctld and one slurmd per node (the host's Slurm,
tests/slurm_helpers.py) where slurm.conf's RebootProgram "reboots" a node: its slurmd stops and a new one starts
with a fresh boot time (a time namespace) on the build the node's boot pointer names (the kernel command line
stood in by a file). The reimage play's own Slurm task (playbooks/reimage.yml, "Reboot into the build", run by
ansible-playbook on the local connection) rolls a stateless wave while long jobs run on its nodes: every job
completes, each node comes back on the new build and is resumed; a node whose health check fails after its
reboot stays drained and the play fails naming it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef import hostlist
from test_slurm_daemons import _on_host_slurm, controller, render  # noqa: F401 (controller: a fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_live, pytest.mark.rollout_live, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent
BUILD = "gpu-node-2026.07.1-new"

# slurmd runs RebootProgram once the node is idle; which node's slurmd runs it is read from the process tree
REBOOT = r"""#!/bin/sh
W=@W@
pid=$$; node=""; spid=""
while [ "$pid" -gt 1 ]; do
  args=$(tr '\0' ' ' < /proc/$pid/cmdline)
  case "$args" in *slurmd\ -D\ -N\ *) node=$(echo "$args" | sed -n 's/.*slurmd -D -N \([^ ]*\).*/\1/p'); spid=$pid; break;; esac
  pid=$(awk '/^PPid:/{print $2}' /proc/$pid/status)
done
[ -n "$node" ] || exit 1
echo "$node" >> $W/reboots
setsid sh -c "
  sleep 1; kill $spid; while kill -0 $spid 2>/dev/null; do sleep 0.2; done
  cp $W/pointer/$node $W/cmdline/$node
  up=\$(cut -d. -f1 /proc/uptime)
  exec unshare -T --boottime -\$up @SLURMD@ -D -N $node -f @CONF@
" > $W/reboot-$node.out 2>&1 < /dev/null &
exit 0
"""

# the node's health check (HealthCheckProgram): a node listed in $W/unhealthy drains itself and fails
HEALTH = r"""#!/bin/sh
if grep -qx "$CLUSTERDEF_NODECHECK_NODE" @W@/unhealthy 2>/dev/null; then
  scontrol update NodeName="$CLUSTERDEF_NODECHECK_NODE" State=DRAIN Reason="clusterdef-nodecheck: gpu-count: 7 of 8"
  echo "gpu-count: 7 of 8"; exit 1
fi
exit 0
"""


def _logs(w: Path, ctl) -> str:
    """What the reboot program and the daemons said, for a failure's message."""
    return "".join(f"\n== {p.name}\n" + p.read_text(errors="replace")[-1500:]
                   for p in [*sorted(w.glob("reboot*")), *sorted(w.glob("slurmd-*.log"))]) + ctl.log()[-2000:]


def _reboot_play(hosts: str) -> list[dict]:
    """playbooks/reimage.yml's reboot play as it is, on `hosts`."""
    plays = YAML(typ="safe", pure=True).load((ROOT / "playbooks" / "reimage.yml").read_text())
    play = next(p for p in plays if p.get("name") == "Reboot into the build")
    return [{**play, "hosts": hosts}]


def test_stateless_wave_reboots_without_killing_a_job(lab, matrix, controller, tmp_path):  # noqa: F811
    from slurm_helpers import fake_gpu_slurmds, free_port, host_build, stop, wait_for

    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    build = host_build()
    d, tree = render(lab, _on_host_slurm(matrix, lab["cluster"]["matrix"], build.version))
    assert "RebootProgram=/usr/sbin/reboot" in tree["slurm/slurm.conf"] and "ResumeTimeout=1800" in tree[
        "slurm/slurm.conf"]
    hosts = [h for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)]
    wave, sick = ["gpu001", "gpu002"], "gpu003"
    ctl = controller(build)
    w = ctl.work.host
    conf = ctl.write(tree, node_ports={h: free_port() for h in hosts})
    for sub in ("pointer", "cmdline"):
        (w / sub).mkdir()
    for name, text in (("reboot.sh", REBOOT), ("health.sh", HEALTH)):
        (w / name).write_text(text.replace("@W@", str(w)).replace("@CONF@", ctl.conf)
                              .replace("@SLURMD@", shutil.which("slurmd") or "slurmd"))
        (w / name).chmod(0o755)
    # the test's reboot program and a short ResumeTimeout; no HealthCheckProgram (the play runs the check)
    conf = "\n".join(ln for ln in conf.splitlines() if not ln.startswith(("RebootProgram=", "ResumeTimeout=",
                                                                           "HealthCheck")))
    Path(ctl.conf).write_text(conf + f"\nRebootProgram={w / 'reboot.sh'}\nResumeTimeout=60\n")
    ctl.start()
    slurmds = fake_gpu_slurmds(build, ctl.env, w, [*wave, sick], d.hardware["hgx-h100"].gpu.count)
    record = lambda n: next(r for r in ctl.records("node") if r["NodeName"] == n)  # noqa: E731
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {
        "cp_slurm": {"hosts": {h: {} for h in [*wave, sick]}}, "prov_stateless": {"hosts": {h: {} for h in [*wave, sick]}},
        "wave_001": {"hosts": {h: {} for h in wave}}, "wave_002": {"hosts": {sick: {}}}}}}))
    env = {**ctl.env, "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1", "HOME": str(tmp_path)}
    extra = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
             "clusterdef_boot_build": BUILD, "clusterdef_plan": "lab/2025.10-r580->2026.07-r580",
             "node_drain_build_proof": f"{w}/cmdline/{{{{ inventory_hostname }}}}", "node_drain_poll_s": 1,
             "node_drain_timeout_s": 120, "node_drain_reboot_timeout_s": 60,
             "slurm_nodecheck_script": "stand-in", "slurm_nodecheck_program": str(w / "health.sh")}

    def play(group: str, stage: str):
        path = tmp_path / f"{group}.yml"
        path.write_text(json.dumps(_reboot_play(group)))
        return subprocess.run([str(ansible), "-i", str(inventory), str(path),
                               "-e", json.dumps({**extra, "clusterdef_stage": stage})],
                              env=env, capture_output=True, text=True, timeout=240)

    try:
        wait_for(lambda: all(record(h)["State"] == "IDLE" for h in [*wave, sick]), 60, "the nodes IDLE", slurmds,
                 w / "slurmd.out")
        before = {h: record(h)["SlurmdStartTime"] for h in wave}
        for h in [*wave, sick]:  # boot-pointer.yml's part: each host's pointer names the new build
            (w / "pointer" / h).write_text(f"initrd=x clusterdef.image={BUILD} ip=dhcp\n")
        jobs = {h: build.run("sbatch", "--parsable", "-p", "train", "-w", h, "-t", "2", "-o", "/dev/null",
                             "--wrap", "sleep 10", env=ctl.env).stdout.strip().split(";")[0] for h in wave}
        wait_for(lambda: all(record(h)["State"] in ("ALLOCATED", "MIXED") for h in wave), 30, "the long jobs running")
        start = time.monotonic()
        r = play("wave_001", "wave 1")
        took = time.monotonic() - start
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:] + _logs(w, ctl)
        for job in jobs.values():
            state = ctl.scontrol("show", "job", job, "--oneliner")
            assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state, state
        assert sorted((w / "reboots").read_text().split()) == wave  # each rebooted once, after its job
        assert took > 8, took  # the reboot waited for the 10 s jobs
        for h in wave:
            rec = record(h)
            assert rec["State"] == "IDLE" and rec["SlurmdStartTime"] != before[h], rec  # new slurmd, resumed
            assert f"clusterdef.image={BUILD}" in (w / "cmdline" / h).read_text()
        assert "Reboot the Slurm node through slurmctld" in r.stdout

        # a node whose health check fails on the new build: kept drained, the play fails naming it
        (w / "unhealthy").write_text(sick + "\n")
        r = play("wave_002", "wave 2")
        assert r.returncode != 0
        assert f"{sick} failed its health check after the reboot (kept drained): gpu-count: 7 of 8" in r.stdout, \
            r.stdout[-4000:]
        rec = record(sick)
        assert "DRAIN" in rec["State"] and rec["Reason"].startswith("clusterdef-nodecheck: gpu-count"), rec
        assert f"clusterdef.image={BUILD}" in (w / "cmdline" / sick).read_text()  # it did reboot into the build
    finally:
        stop(slurmds)
        for pid in w.glob("slurmd-*.pid"):  # the slurmd the reboot program started
            subprocess.run(["pkill", "-F", str(pid)], check=False)
