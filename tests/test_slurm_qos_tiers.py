"""A partition's QOS is the tier of its jobs, on real daemons (MariaDB, slurmdbd, slurmctld and one
slurmd per lab node with fake GPUs, the host's Slurm 22.05; the lab rendered for it as in
test_slurm_accounting.py), with the rendered qos.sh and accounts.cfg loaded as a user would.

Slurm runs a job that names no QOS under its association's DefaultQOS; a partition's QOS lends the
partition its limits, "not ... any priority or preemption characteristics" (qos.shtml, Partition QOS,
Slurm 25.11; slurm.conf(5) QOS). So without the rendered job_submit.lua a tenant's job sent to the
scavenger partition runs under `normal`, with normal's priority, and is never preempted by `normal`.

The lab gets a scavenger tier like the estate's: partition `scavenger` (PriorityTier 0, QOS scavenger,
priority 0) over the train nodes, and QOS normal (partition `train`) preempting it by requeue; its queue policy
statement `training` also limits a job to 8 GPUs."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from clusterdef import hostlist
from clusterdef.validate.pipeline import validate_file
from clusterdef.resolve import resolve
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, dump_yaml
from slurm_helpers import (Controller, MariaDB, Munge, Slurmdbd, Workdir, fake_gpu_slurmds, free_port, host_build, stop,
                           wait_for)
from test_slurm_accounting import Jobs
from test_slurm_daemons import _on_host_slurm, render

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_live, pytest.mark.slow]


def tiers_lab(lab: dict) -> dict:
    """The lab with a scavenger tier bound to a partition over the train nodes, preempted by normal."""
    s = lab["slurm"]
    s["qos"]["normal"].update(preempt=["scavenger"], preempt_mode="requeue")
    s["qos"]["scavenger"] = {"priority": 0}
    s["partitions"]["scavenger"] = {"node_groups": ["train"], "priority_tier": 0, "qos": "scavenger",
                                    "allow_accounts": ["vision", "nlp"]}
    lab["service"]["queue_policy"]["training"]["max_gpus_per_job"] = 8  # the lab's: 48 h and 32 GPUs per user
    for t in ("vision", "nlp"):
        ts = lab["tenants"][t]["slurm"]
        ts["qos"] = [*ts["qos"], "scavenger"]
        # nobody: a tenant's user, who AllowQos binds (root it does not); daemon: the member of hpc-debug
        ts["users"] = ["root", "nobody", "daemon"]
    return lab


DEBUG_GROUP, DEBUG_USER = "hpc-debug", "daemon"  # the lab's privileged.debug-root group, and a member of it here


@pytest.fixture(scope="module")
def debug_group():
    """The directory group the lab's `debug-root` approval names, as a local group with one member (the system
    user `daemon`), made before slurmctld starts: slurmctld reads a partition's AllowGroups members from NSS when
    it loads the partitions (slurm.conf(5) AllowGroups). Removed afterwards, with the membership."""
    made = subprocess.run(["getent", "group", DEBUG_GROUP], capture_output=True).returncode != 0
    if made:
        subprocess.run(["groupadd", DEBUG_GROUP], check=True)
    subprocess.run(["gpasswd", "-a", DEBUG_USER, DEBUG_GROUP], check=True, capture_output=True)
    try:
        yield DEBUG_GROUP
    finally:
        subprocess.run(["gpasswd", "-d", DEBUG_USER, DEBUG_GROUP], capture_output=True)
        if made:
            subprocess.run(["groupdel", DEBUG_GROUP], capture_output=True)


@pytest.fixture(scope="module")
def cluster(lab_data, matrix, tmp_path_factory, debug_group):
    stack: list = []
    try:
        yield _start(stack, tiers_lab(copy.deepcopy(lab_data)), matrix, tmp_path_factory.mktemp("tiers"))
    finally:
        for thing in reversed(stack):
            thing.cleanup() if isinstance(thing, Workdir) else thing.stop()


def _start(stack: list, data: dict, matrix, tmp_path: Path) -> SimpleNamespace:
    build = host_build()
    result = validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, TODAY)
    assert result.ok, [(f.code, f.message) for f in result.errors]
    on_host = _on_host_slurm(matrix, data["cluster"]["matrix"], build.version)
    d, tree = render(data, on_host)
    hosts = [h for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)]
    ports = {h: free_port() for h in hosts}
    # Day 0 as `clusterdef apply` delivers it: slurmctld refuses to start on a partition QOS the database lacks
    # ("Partition scavenger has an invalid qos"), and the QOS limits name the gres/gpu TRES that only slurmctld
    # registers when it starts. On a fresh database (slurmdbd up, as the control plane stage leaves it), the real
    # playbooks/deliver.yml with apply's payload: the controller gets its files, runs `qos.sh names` (the action's
    # `before`), starts slurmctld; then the accounting host runs `qos.sh` and loads accounts.cfg.
    work = Workdir(build, prefix="cdtiers-")
    stack.append(work)
    munge = Munge(work)
    stack.append(munge)
    munge.start()
    db = MariaDB(work)
    stack.append(db)
    db.start()
    ctl = Controller(build, work, munge)
    dbd = Slurmdbd(ctl, db)
    conf = ctl.write(tree, accounting=dbd.address, node_ports=ports)
    stack.append(dbd)
    dbd.start()
    stack.append(SimpleNamespace(stop=lambda: _stop_pidfile(work.host / "slurmctld.pid")))
    _deliver_day0(resolve(d, on_host, CLUSTERS), tree, work.host, ctl.env, tmp_path)
    assert ctl.ping(), ctl.log()[-2000:]
    assert re.search(r"\bQoS=scavenger\b", ctl.scontrol("show", "partition", "scavenger")), ctl.log()[-2000:]
    assert "invalid qos" not in ctl.log()
    assert "gres/gpu=32" in dbd.sacctmgr("-n", "-P", "show", "qos", "normal", "format=MaxTRESPU").stdout
    assert "vision" in dbd.sacctmgr("-n", "-P", "show", "account", "format=account").stdout.split()
    slurmds = fake_gpu_slurmds(build, ctl.env, work.host, hosts, d.hardware["hgx-h100"].gpu.count)
    stack.append(SimpleNamespace(stop=lambda: stop(slurmds)))

    def idle():
        r = build.run("sinfo", "-h", "-N", "-o", "%N %T", env=ctl.env, check=False)
        states = dict(ln.split() for ln in r.stdout.splitlines() if ln.strip())
        return states and all(states.get(h, "").startswith("idle") for h in hosts)
    wait_for(idle, 60, "all lab nodes IDLE", slurmds, work.host / "slurmd.out")
    assert "Ignoring invalid Allow" not in ctl.log()
    Path(ctl.munge.socket).parent.chmod(0o755)  # any local user may talk to munged, as on a real node
    return SimpleNamespace(build=build, d=d, tree=tree, conf=conf, ctl=ctl, dbd=dbd, work=work, hosts=hosts)


# systemctl for the deliver role on this test machine: slurmctld alone, daemonized on the test's slurm.conf (its
# SlurmctldPidFile is the work folder's slurmctld.pid); what ansible's systemd_service and the role ask of it.
SYSTEMCTL = """#!/bin/sh
pid=@W@/slurmctld.pid
running() { [ -s "$pid" ] && kill -0 "$(cat "$pid")" 2>/dev/null; }
[ "${2:-}" = slurmctld ] || [ "${3:-}" = slurmctld ] || { echo "test systemctl: slurmctld only: $*" >&2; exit 1; }
echo "$*" >> @W@/systemctl.calls
case "$1" in
  is-active) running ;;
  is-enabled) echo enabled ;;
  show) echo Id=slurmctld.service; echo LoadState=loaded
        if running; then echo ActiveState=active; echo SubState=running
        else echo ActiveState=inactive; echo SubState=dead; fi ;;
  start) running && exit 0
         slurmctld -i -f "$SLURM_CONF" </dev/null >>@W@/slurmctld.out 2>&1 || exit 1
         for _ in $(seq 60); do scontrol ping 2>/dev/null | grep -q "is UP" && exit 0; sleep 1; done; exit 1 ;;
  *) echo "test systemctl: unexpected $*" >&2; exit 1 ;;
esac
"""


def _stop_pidfile(pidfile: Path) -> None:
    """Stop the slurmctld the test systemctl started, waiting for it to exit."""
    if not pidfile.is_file():
        return
    pid = int(pidfile.read_text().split()[0])
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            time.sleep(0.1)
            os.kill(pid, 0)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _deliver_day0(resolved, slurm_tree: dict[str, str], w: Path, env: dict, tmp_path: Path) -> None:
    """The Slurm files of the day-0 config stage through playbooks/deliver.yml (local connection), with apply's
    payload; each host's absolute paths under a folder of its own (the controller's /etc/slurm is the work folder's
    etc/, where this slurmctld reads), the files' sources the ones Controller.write prepared."""
    from clusterdef.apply.delivery import Hosts, payload
    from clusterdef.render import ansible as ansible_target
    from clusterdef.render import delivery
    from clusterdef.render.ansible.render import ROOT as ANSIBLE

    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    tree = {**slurm_tree, **ansible_target.render(resolved)}  # the inventory and the map beside the Slurm files
    tree[delivery.FILE] = delivery.render(resolved, tree)
    new = w / "new"  # the new tree's files, as the apply snapshot holds them
    new.mkdir()
    for rel in tree:
        if rel.startswith("slurm/") and (w / "etc" / rel[6:]).is_file():
            (w / "etc" / rel[6:]).rename(new / rel[6:])  # the hosts have none of them yet
    files = sorted(r for r, e in json.loads(tree["delivery.json"])["files"].items()
                   if r.startswith("slurm/") and e["via"] == "deliver")
    p = payload(tree, new, files, Hosts(tree[f"{ANSIBLE}/inventory/hosts.yml"]))
    assert p["clusterdef_deliver_hosts"] == "slurmctl01,slurmdbd01"
    assert p["deliver_actions"]["slurmctl01"][0]["before"] == [["/etc/slurm/clusterdef/qos.sh", "names"]]
    roots = {"slurmctl01": {"/etc/slurm/": f"{w}/etc/"}, "slurmdbd01": {"/": f"{w}/dbd/"}}

    def local(h: str, text: str) -> str:
        for prefix, there in roots[h].items():
            text = re.sub(rf"(^|=){re.escape(prefix)}", rf"\g<1>{there}", text)
        return text
    for h, fs in p["deliver_files"].items():
        for f in fs:
            f["path"] = local(h, f["path"])
            f["src"] = str(new / f["rel"][6:])
    for h, acts in p["deliver_actions"].items():
        for a in acts:
            a["argv"] = [[local(h, x) for x in argv] for argv in a["argv"]]
            a["before"] = [[local(h, x) for x in argv] for argv in a["before"]]
    bin_dir = w / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(SYSTEMCTL.replace("@W@", str(w)))
    (bin_dir / "systemctl").chmod(0o755)
    inventory = tmp_path / "deliver-hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {h: {} for h in p["deliver_files"]}}}))
    extra = {**p, "deliver_staging": f"{w}/staged", "ansible_connection": "local",
             "ansible_python_interpreter": sys.executable, "ansible_become": False}
    r = subprocess.run([str(ansible), "-i", str(inventory), str(ROOT / "playbooks" / "deliver.yml"),
                        "-e", json.dumps(extra)], capture_output=True, text=True, timeout=300,
                       env={**env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path),
                            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1"})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    # the order the role ran them in: qos.sh names on the controller, slurmctld started, then the accounts
    ran = re.findall(r"^(?:changed|ok): \[(\w+)\] => \(item=(.+?)\)$", r.stdout, re.M)
    steps = [(h, item) for h, item in ran if item.startswith(("slurm-reconfigure", "slurm-accounts"))]
    assert [h for h, _ in steps] == ["slurmctl01", "slurmctl01", "slurmdbd01", "slurmdbd01"], r.stdout[-4000:]
    assert "qos.sh names" in steps[0][1] and "start slurmctld" in steps[1][1], steps
    assert (w / "systemctl.calls").read_text().count("start slurmctld") == 1


def job(c, jid: str) -> dict[str, str]:
    rec = c.ctl.scontrol("show", "job", "-o", jid)
    return dict(re.findall(r"(?:^|\s)([A-Za-z]+)=(\S*)", rec))


def test_a_job_without_qos_gets_its_partitions_tier_and_is_preempted_by_the_higher_one(cluster):
    c = cluster
    jobs = Jobs(c)
    train = hostlist.names(c.d.nodes["train"].hosts)
    scavenger_qos, normal_qos = c.d.slurm.qos["scavenger"], c.d.slurm.qos["normal"]
    assert "scavenger" in normal_qos.preempt and normal_qos.priority > scavenger_qos.priority
    started = []
    try:
        # A tenant's job in the scavenger partition, naming no QOS, over every train node. A job that
        # asks for no memory gets all of each node's (slurm.conf(5) DefMemPerNode unset; CR_Core_Memory),
        # so each job below holds whole nodes without asking for GPUs (the tenants' GPU quotas stay out of it).
        low = jobs.sbatch("-A", "vision", "-p", "scavenger", "-N", str(len(train)), wrap="sleep 300")
        started.append(low)
        jobs.running(low)
        rec = job(c, low)
        assert (rec["Partition"], rec["QOS"]) == ("scavenger", "scavenger"), rec  # the partition's tier, not normal

        # Another tenant's job in train, naming no QOS: QOS normal, which preempts scavenger (requeue).
        high = jobs.sbatch("-A", "nlp", "-p", "train", "-N", "1", wrap="sleep 300")
        started.append(high)
        jobs.running(high)
        assert job(c, high)["QOS"] == "normal"

        def requeued() -> bool:
            r = job(c, low)
            return r["JobState"] == "PENDING" and int(r["Restarts"]) >= 1
        wait_for(requeued, 20, f"scavenger job {low} requeued by the preemption")

        # Priority: the tier's QOS factor, read back by sprio from two jobs of one account that wait
        # (every train node is needed and one is taken), one per partition, neither naming a QOS.
        waiting = {}
        for part in ("scavenger", "train"):
            waiting[part] = jobs.sbatch("-A", "nlp", "-p", part, "-N", str(len(train)), wrap="sleep 300")
            started.append(waiting[part])
            jobs.pending_with(waiting[part])

        def qos_factor(jid: str) -> int:
            out = c.build.run("sprio", "-h", "-j", jid, "-o", "%Q", env=c.ctl.env).stdout.split()
            return int(out[0])
        top = max(q.priority for q in c.d.slurm.qos.values())
        weight = c.d.slurm.priority.weight_qos
        assert qos_factor(waiting["scavenger"]) == 0
        assert qos_factor(waiting["train"]) == round(weight * normal_qos.priority / top) > 0
    finally:
        jobs.cancel(*started)


def test_a_tenants_user_cannot_take_another_tier_into_a_partition(cluster):
    """AllowQos: nobody (a user of vision) sending a job to the scavenger partition under QOS normal is
    refused at submission; without --qos the same job is accepted under the partition's QOS. (root
    is exempt from AllowQos: slurm.conf(5).)"""
    c = cluster
    # QOS large is bound to no partition: a tier asked for with --qos anywhere, so AllowQos keeps it.
    assert " QOS=scavenger AllowQos=scavenger,large " in c.conf and "JobSubmitPlugins=lua" in c.conf

    def sbatch_as_nobody(*args: str):
        return c.build.run("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "sbatch", "--parsable", "-t", "1", "-o", "/dev/null", "--chdir=/", "-H", *args,
                           "--wrap", "true", env=c.ctl.env, check=False)

    r = sbatch_as_nobody("-A", "vision", "-p", "scavenger", "--qos=normal")
    assert r.returncode != 0 and "qos" in r.stderr.lower(), r.stdout + r.stderr
    r = sbatch_as_nobody("-A", "vision", "-p", "scavenger")
    assert r.returncode == 0, r.stdout + r.stderr
    jid = r.stdout.strip().split(";")[0]
    try:
        assert job(c, jid)["QOS"] == "scavenger"
    finally:
        Jobs(c).cancel(jid)


def _sbatch_as_nobody(c, *args: str, wrap: str = "true"):
    return c.build.run("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                       "sbatch", "--parsable", "-o", "/dev/null", "--chdir=/", *args, "--wrap", wrap,
                       env=c.ctl.env, check=False)


def _sbatch_as_debug_user(c, *args: str, wrap: str = "true"):
    return c.build.run("setpriv", f"--reuid={DEBUG_USER}", f"--regid={DEBUG_USER}", "--init-groups",
                       "sbatch", "--parsable", "-o", "/dev/null", "--chdir=/", *args, "--wrap", wrap,
                       env=c.ctl.env, check=False)


def test_the_queue_policy_holds_a_tenants_jobs(cluster):
    """service.queue_policy.training, compiled into partition train's MaxTime (48 h) and QOS normal's
    MaxTRESPerJob (8 GPUs): a tenant's user gets a 48-hour, 8-GPU job (the permitted path), a job asking one
    minute more is refused at submission (EnforcePartLimits=ALL), and one asking 16 GPUs waits with
    QOSMaxGRESPerJob."""
    c = cluster
    policy = c.d.service.queue_policy["training"]
    assert (policy.max_job_hours, policy.max_gpus_per_job) == (48, 8)
    assert re.search(r"\bMaxTime=2-00:00:00\b", c.ctl.scontrol("show", "partition", "train"))
    assert "gres/gpu=8" in c.dbd.sacctmgr("-n", "-P", "show", "qos", "normal", "format=MaxTRES").stdout
    jobs = Jobs(c)
    started = []
    try:
        r = _sbatch_as_nobody(c, "-A", "nlp", "-p", "train", "-t", "48:00:00", "-N", "1", "--gres=gpu:8",
                              wrap="sleep 300")
        assert r.returncode == 0, r.stdout + r.stderr
        started.append(r.stdout.strip().split(";")[0])
        jobs.running(started[-1])

        r = _sbatch_as_nobody(c, "-A", "nlp", "-p", "train", "-t", "48:01:00", "-H")
        assert r.returncode != 0 and "time limit" in r.stderr.lower(), r.stdout + r.stderr

        r = _sbatch_as_nobody(c, "-A", "nlp", "-p", "train", "-t", "10", "-N", "2", "--gres=gpu:8")
        assert r.returncode == 0, r.stdout + r.stderr
        started.append(r.stdout.strip().split(";")[0])
        jobs.pending_with(started[-1], "QOSMaxGRESPerJob")
    finally:
        jobs.cancel(*started)


def test_only_the_approved_group_gets_the_root_equivalent_partition(cluster):
    """The lab's `debug` partition is root-equivalent (privileged: true) and approved for hpc-debug only
    (privileged.debug-root): AllowGroups=hpc-debug. A tenant's user outside the group is refused at submission;
    the group's member gets a job there, and it has its node to itself (OverSubscribe=EXCLUSIVE)."""
    c = cluster
    part = c.ctl.scontrol("show", "partition", "debug")
    assert re.search(r"\bAllowGroups=hpc-debug\b", part) and re.search(r"\bOverSubscribe=EXCLUSIVE\b", part), part
    r = _sbatch_as_nobody(c, "-A", "vision", "-p", "debug", "-t", "10", "-H")
    assert r.returncode != 0 and "not permitted" in r.stderr.lower(), r.stdout + r.stderr
    r = _sbatch_as_debug_user(c, "-A", "vision", "-p", "debug", "-t", "10", wrap="sleep 300")
    assert r.returncode == 0, r.stdout + r.stderr
    jid = r.stdout.strip().split(";")[0]
    jobs = Jobs(c)
    try:
        jobs.running(jid)
        assert job(c, jid)["OverSubscribe"] == "NO", job(c, jid)  # scontrol: exclusive node use shows as NO
    finally:
        jobs.cancel(jid)
