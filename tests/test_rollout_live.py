"""No job is killed by a rollout, live (issue 28): real slurmctld and one slurmd per node (the host's Slurm,
tests/slurm_helpers.py) where slurm.conf's RebootProgram "reboots" a node: its slurmd stops and a new one starts
with a fresh boot time (a time namespace) on the build the node's boot pointer names (the kernel command line
stood in by a file). The reimage play's own Slurm task (playbooks/reimage.yml, "Reboot into the build", run by
ansible-playbook on the local connection) rolls a stateless wave while long jobs run on its nodes: every job
completes, each node comes back on the new build and is resumed; a node whose health check fails after its
reboot stays drained and the play fails naming it. `clusterdef apply` of a stateless canary plan runs that play
(every other step a stand-in, tests/fixtures/apply), is SIGKILLed while the wave reboots and `--resume` completes
the rollout: no job killed, every node on the new build and IDLE, the node rebooted before the kill not again."""

from __future__ import annotations

import json
import os
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

# slurmd runs RebootProgram once the node is idle; which node's slurmd runs it is read from the process tree; a
# node rebooted again is already in a time namespace, whose offsets count from the host's (time_namespaces(7))
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
  off=\$(awk '/^boottime/{print \$2}' /proc/self/timens_offsets 2>/dev/null); up=\$(cut -d. -f1 /proc/uptime)
  up=\$((up - \${off:-0}))
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


# clusterdef apply's reimage.yml for the test: the boot pointers written where the reboot program reads them, then
# playbooks/reimage.yml's own reboot play (every other step of the plan is a stand-in, tests/fixtures/apply)
POINTERS = {"name": "Stand-in boot-pointer.yml: each host's pointer names the build", "hosts": "localhost",
            "connection": "local", "gather_facts": False, "tasks": [{
                "name": "Write the pointers", "loop": "{{ clusterdef_boot_pointers }}",
                "ansible.builtin.copy": {"dest": "{{ apply_pointer_dir }}/{{ item.host }}", "mode": "0644",
                                         "content": "initrd=x clusterdef.image={{ clusterdef_boot_build }} ip=dhcp\n"}}]}


def _descendants(pid: int) -> list[int]:
    """The processes under `pid` (ansible-runner's ansible-playbook runs in its own session)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def test_apply_killed_in_a_wave_reboot_resumes_without_rebooting_a_node_twice(lab, matrix, controller,  # noqa: F811
                                                                              tmp_path):
    """`clusterdef apply` of a lab plan (stateless canary, its rollback drill) whose reboots are reimage.yml's
    real reboot play on this fake Slurm cluster, every other step a stand-in: SIGKILLed (with its playbook run)
    while the canary wave reboots (one node back on the new build, the other's reboot pending behind its job),
    `--resume` completes the rollout: no job is killed, each node comes back on the new build, IDLE, and the
    node rebooted before the kill is not rebooted again by the resumed step."""
    import signal
    from collections import Counter

    from slurm_helpers import fake_gpu_slurmds, free_port, host_build, stop, wait_for
    from test_apply import CANDIDATE, CURRENT, DAY, FIXTURES, MATRICES, TODAY, make_plan, need_ansible_runner, records

    from clusterdef.apply.prepare import prepare

    need_ansible_runner()
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    pf = make_plan(tmp_path, CURRENT, CANDIDATE, "--allow-candidate", stateless=True)  # canary and drill only
    playbooks = tmp_path / "playbooks"
    shutil.copytree(FIXTURES, playbooks)
    smoke = playbooks / "smoke.yml"  # the stand-in imports the real smoke.yml by a path relative to the fixtures
    smoke.write_text(smoke.read_text().replace("../../../../playbooks/", f"{ROOT / 'playbooks'}/"))
    plays = YAML(typ="safe", pure=True).load((ROOT / "playbooks" / "reimage.yml").read_text())
    (playbooks / "reimage.yml").write_text(json.dumps([POINTERS, next(
        p for p in plays if p.get("name") == "Reboot into the build")]))
    skip = [a for s in ("image", "prepare", "control-plane") for a in ("--skip-stage", s)]
    steps = prepare(pf, None, None, None, MATRICES, TODAY, playbooks, {"image", "prepare", "control-plane"}).steps
    canary = next(s for s in steps if (s.stage, s.action) == ("canary", "upgrade"))
    new, wave = canary.vars["clusterdef_boot_build"], canary.hosts
    assert wave == ["gpu001", "gpu003"] and canary.playbook == playbooks / "reimage.yml"

    build = host_build()
    d, tree = render(lab, _on_host_slurm(matrix, lab["cluster"]["matrix"], build.version))
    ctl = controller(build)
    w = ctl.work.host
    conf = ctl.write(tree, node_ports={h: free_port() for g in d.groups_of("slurm").values()
                                       for h in hostlist.names(g.hosts)})
    for sub in ("pointer", "cmdline"):
        (w / sub).mkdir()
    for name, text in (("reboot.sh", REBOOT), ("health.sh", HEALTH)):
        (w / name).write_text(text.replace("@W@", str(w)).replace("@CONF@", ctl.conf)
                              .replace("@SLURMD@", shutil.which("slurmd") or "slurmd"))
        (w / name).chmod(0o755)
    conf = "\n".join(ln for ln in conf.splitlines() if not ln.startswith(("RebootProgram=", "ResumeTimeout=",
                                                                           "HealthCheck")))
    Path(ctl.conf).write_text(conf + f"\nRebootProgram={w / 'reboot.sh'}\nResumeTimeout=60\n")
    ctl.start()
    slurmds = fake_gpu_slurmds(build, ctl.env, w, wave, d.hardware["hgx-h100"].gpu.count)
    record = lambda n: next(r for r in ctl.records("node") if r["NodeName"] == n)  # noqa: E731
    env = {**os.environ, **ctl.env, "HOME": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "ANSIBLE_ROLES_PATH": os.pathsep.join([str(ROOT / "roles"), str(FIXTURES.parent / "roles")])}
    extra = {"apply_log": tmp_path / "apply.log", "ansible_connection": "local", "ansible_become": "false",
             "ansible_python_interpreter": sys.executable, "apply_pointer_dir": w / "pointer",
             "node_drain_build_proof": f"{w}/cmdline/{{{{ inventory_hostname }}}}", "node_drain_poll_s": 1,
             "node_drain_timeout_s": 120, "node_drain_reboot_timeout_s": 60,
             "slurm_nodecheck_program": w / "health.sh"}  # the lab's nodecheck, its stand-in (every node healthy)

    def apply(*args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "clusterdef", "apply", str(pf), "-m", str(MATRICES),
                                 "--today", DAY, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env)

    def job_state(job: str) -> str:
        return ctl.scontrol("show", "job", job, "--oneliner")

    proc = resumed = None
    try:
        wait_for(lambda: all(record(h)["State"] == "IDLE" for h in wave), 60, "the nodes IDLE", slurmds,
                 w / "slurmd.out")
        before = {h: record(h)["SlurmdStartTime"] for h in wave}
        # long jobs: each runs until the test lets it end
        jobs = {h: build.run("sbatch", "--parsable", "-p", "train", "-w", h, "-t", "5", "-o", "/dev/null", "--wrap",
                             f"while [ ! -e {w}/release-{h} ]; do sleep 0.5; done", env=ctl.env).stdout.strip()
                .split(";")[0] for h in wave}
        wait_for(lambda: all(record(h)["State"] in ("ALLOCATED", "MIXED") for h in wave), 30, "the long jobs running")
        proc = apply("--playbooks", str(playbooks), *skip,
                     *(a for k, v in extra.items() for a in ("-e", f"{k}={v}")))
        reboot_asked = lambda h: "REBOOT" in record(h)["State"]  # noqa: E731
        wait_for(lambda: proc.poll() is not None or all(reboot_asked(h) for h in wave), 120,
                 "the canary's reboots asked")
        assert proc.poll() is None, proc.stdout.read()
        (w / "release-gpu001").touch()
        wait_for(lambda: record("gpu001")["SlurmdStartTime"] != before["gpu001"]
                 and record("gpu001")["State"] == "IDLE", 60, "gpu001 back on the new build", log=w / "slurmd.out")
        assert "RUNNING" in job_state(jobs["gpu003"]) and reboot_asked("gpu003") and proc.poll() is None
        victims = _descendants(proc.pid)
        for pid in [proc.pid, *victims]:  # apply and its playbook run die at once, nothing cleans up
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        assert (w / "reboots").read_text().split() == ["gpu001"]
        [killed] = records(tmp_path)
        assert killed["status"] == "running" and killed["runs"][-1]["label"] == "canary: upgrade wave_000"
        assert killed["runs"][-1]["status"] == "running"  # killed in the middle of the step

        resumed = apply("--resume")
        wait_for(lambda: resumed.poll() is not None or [r["runs"][-1].get("pid") for r in records(tmp_path)]
                 == [resumed.pid], 60, "the canary's reboot step resumed")
        time.sleep(3)  # the resumed step is waiting for gpu003's job
        assert "RUNNING" in job_state(jobs["gpu003"]), job_state(jobs["gpu003"])
        (w / "release-gpu003").touch()
        out, _ = resumed.communicate(timeout=240)
        assert resumed.returncode == 0, out[-6000:] + _logs(w, ctl)[-1500:]
        assert "resuming" in out
        for job in jobs.values():  # no job was killed
            state = job_state(job)
            assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state, state
        reboots = (w / "reboots").read_text().split()
        # the resumed canary step rebooted gpu003 only; then the drill: back to the old build and forward again
        assert reboots[:2] == ["gpu001", "gpu003"] and Counter(reboots) == {"gpu001": 3, "gpu003": 3}, reboots
        for h in wave:
            rec = record(h)
            assert rec["State"] == "IDLE" and rec["SlurmdStartTime"] != before[h], rec
            assert f"clusterdef.image={new}" in (w / "cmdline" / h).read_text().split()
        [done] = records(tmp_path)
        assert done["status"] == "succeeded"
        assert [(a["label"], a["status"]) for a in done["attempts"]] == [("canary: upgrade wave_000", "running")]
    finally:
        for p in (proc, resumed):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        stop(slurmds)
        for pid in w.glob("slurmd-*.pid"):  # the slurmd the reboot program started
            subprocess.run(["pkill", "-F", str(pid)], check=False)
