"""A partition's QOS is the tier of its jobs, on real daemons (MariaDB, slurmdbd, slurmctld and one
slurmd per lab node with fake GPUs, the host's Slurm 22.05; the lab rendered for it as in
test_slurm_accounting.py), with the rendered qos.sh and accounts.cfg loaded as a user would.

Slurm runs a job that names no QOS under its association's DefaultQOS; a partition's QOS lends the
partition its limits, "not ... any priority or preemption characteristics" (qos.shtml, Partition QOS,
Slurm 25.11; slurm.conf(5) QOS). So without the rendered job_submit.lua a tenant's job sent to the
scavenger partition runs under `normal`, with normal's priority, and is never preempted by `normal`.

The lab gets a scavenger tier like the estate's: partition `scavenger` (PriorityTier 0, QOS scavenger,
priority 0) over the train nodes, and QOS normal (partition `train`) preempting it by requeue."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from clusterdef import hostlist
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml
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
    for t in ("vision", "nlp"):
        ts = lab["tenants"][t]["slurm"]
        ts["qos"] = [*ts["qos"], "scavenger"]
        ts["users"] = ["root", "nobody"]  # nobody: a tenant's user, who AllowQos binds (root it does not)
    return lab


@pytest.fixture(scope="module")
def cluster(lab_data, matrix, tmp_path_factory):
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
    d, tree = render(data, _on_host_slurm(matrix, data["cluster"]["matrix"], build.version))
    hosts = [h for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)]
    ports = {h: free_port() for h in hosts}
    # Day 0 in the delivery order (the rendered qos.sh's own two steps): slurmctld refuses to start on a
    # partition QOS the database lacks ("Partition scavenger has an invalid qos"), and the QOS limits name the
    # gres/gpu TRES that only slurmctld registers when it starts. So on a fresh database: `qos.sh names`
    # (slurmdbd alone), slurmctld started on the rendered slurm.conf, then `qos.sh` and accounts.cfg.
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
    env = {**ctl.env, "PATH": os.environ["PATH"]}
    qos = str(work.host / "etc" / "qos.sh")
    r = subprocess.run(["sh", qos, "names"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    stack.append(ctl)
    ctl.start()
    assert re.search(r"\bQoS=scavenger\b", ctl.scontrol("show", "partition", "scavenger")), ctl.log()[-2000:]
    assert "invalid qos" not in ctl.log()
    r = subprocess.run(["sh", qos], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = dbd.sacctmgr("-i", "load", f"file={work.host / 'etc' / 'accounts.cfg'}", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gres/gpu=32" in dbd.sacctmgr("-n", "-P", "show", "qos", "normal", "format=MaxTRESPU").stdout
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
