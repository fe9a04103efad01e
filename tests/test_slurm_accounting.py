"""The Slurm target's accounting on real daemons (../shared/TESTING.md, Slurm, Accounting):
MariaDB, slurmdbd, slurmctld with AccountingStorageType=accounting_storage/slurmdbd and the
partitions' QOS kept, and one slurmd per lab node with fake GPUs, all on the host's Slurm
(22.05; the lab rendered for it through a copy of its set, as the live fake cluster test does).

The rendered slurm/qos.sh and slurm/accounts.cfg are loaded exactly as a user would (`sh
qos.sh`, then `sacctmgr -i load file=accounts.cfg`); `sacctmgr show assoc/qos -P` must show
the definition's accounts, parents, GPU quotas (GrpTRES gres/gpu) and QOS priorities and
preemption; a tenant's job over its GPU quota stays PENDING with the association reason, a
job over the QOS's per-user GPUs with the QOS reason, and jobs within both run."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
import subprocess
import time
from types import SimpleNamespace

import pytest
from lab_variants import without_governed_data

from clusterdef.build import build_tree

from clusterdef import capacity, hostlist
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml
from slurm_helpers import accounting_daemons, fake_gpu_slurmds, Workdir, free_port, host_build, stop, wait_for
from test_slurm_daemons import _on_host_slurm, render, slurm_time

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_live, pytest.mark.slow]


def accounting_lab(lab: dict) -> dict:
    """The lab with quotas small enough for 4 fake nodes x 8 GPUs: nlp 2 GPUs (reserved 2,
    burst 0), vision 6 (4 + 2) under a parent account that is not a tenant, QOS normal at 4
    GPUs per user; root is a user of both tenants' accounts so the test can submit as them.
    vision is sold whole nodes without nodes of its own (Slurm MCS by account) and nobody is one of
    its users."""
    without_governed_data(lab)  # its privileged debug partition admits the approved groups only, not root
    lab["tenants"]["nlp"]["quota"] = {"reserved_gpus": 2, "burst_gpus": 0}
    lab["tenants"]["nlp"]["slurm"]["users"] = ["root"]
    lab["tenants"]["vision"]["quota"] = {"reserved_gpus": 4, "burst_gpus": 2}
    lab["tenants"]["vision"]["slurm"]["users"] = ["root"]
    lab["tenants"]["vision"]["slurm"]["parent"] = "research"
    lab["slurm"]["qos"]["normal"]["max_tres_per_user"] = {"gres/gpu": 4}
    # Their Kueue queues admit nothing, so Slurm's share (GrpTRES) is each tenant's whole quota.
    lab["kubernetes"]["kueue"]["queues"]["vision-serve"].update(nominal_gpus=0, borrowing_limit_gpus=0)
    lab["kubernetes"]["kueue"]["queues"]["nlp-serve"]["nominal_gpus"] = 0
    # The dedicated tenant: 2 GPUs on its own nodes, root one of its users.
    lab["tenants"]["secure"]["quota"] = {"reserved_gpus": 2, "burst_gpus": 0}
    lab["tenants"]["secure"]["slurm"]["users"] = ["root"]
    # vision is sold whole nodes in the shared pool: slurm.conf gets MCS by account. nobody (a local
    # user that exists on every machine) is one of its users, to look at the queue as a tenant does.
    lab["tenants"]["vision"]["isolation"] = {"level": "shared", "device": "whole-node"}
    lab["tenants"]["vision"]["slurm"]["users"] = ["root", "nobody"]
    return lab


def table(out: str) -> list[dict[str, str]]:
    """`sacctmgr show ... -P` (with header) as one dict per row."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    head = lines[0].split("|")
    return [dict(zip(head, ln.split("|"))) for ln in lines[1:]]


def expected_preempt_mode(d) -> dict[str, str]:
    """Slurm applies the preempted job's QOS PreemptMode: a QOS that others preempt takes
    the mode of its (first) preemptor; every other QOS follows the cluster's PreemptMode."""
    mode = {}
    for q in d.slurm.qos.values():
        if q.preempt_mode != "off":
            for victim in q.preempt:
                mode.setdefault(victim, q.preempt_mode)
    return {name: mode.get(name, "cluster") for name in d.slurm.qos}


@pytest.fixture(scope="module")
def cluster(lab_data, matrix, tmp_path_factory):
    """MariaDB, slurmdbd, slurmctld and one slurmd per lab node (fake GPUs) on the rendered
    accounting lab, with the rendered qos.sh and accounts.cfg loaded as a user would (each twice:
    both say they are idempotent). Shared by this module's tests; everything started is stopped at
    teardown, newest first, even when a start fails."""
    started: list = []
    try:
        yield _start(started, accounting_lab(copy.deepcopy(lab_data)), matrix, tmp_path_factory.mktemp("acct"))
    finally:
        for thing in reversed(started):
            thing.cleanup() if isinstance(thing, Workdir) else thing.stop()


def _start(stack: list, data: dict, matrix, tmp_path: Path) -> SimpleNamespace:
    build = host_build()
    result = validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, TODAY)
    assert result.ok, [(f.code, f.message) for f in result.errors]
    d, tree = render(data, _on_host_slurm(matrix, data["cluster"]["matrix"], build.version))
    full_tree = build_tree(result)[0]
    hosts = [h for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)]

    work, ctl, dbd, conf = accounting_daemons(build, tree, stack, "cdslurmdbd-",
                                              node_ports={h: free_port() for h in hosts})
    # gres/gpu is a TRES only once slurmctld registered with AccountingStorageTRES.
    def gpu_tres() -> bool:
        return "gres|gpu" in dbd.sacctmgr("-n", "-P", "show", "tres", "format=type,name").stdout
    wait_for(gpu_tres, 20, "TRES gres/gpu in the database", ctl.proc, work.host / "slurmctld.log")

    # --- the rendered files, loaded as a user would ---
    etc = work.host / "etc"
    env = {**ctl.env, "PATH": os.environ["PATH"]}
    for attempt in (1, 2):  # qos.sh says it is idempotent: run it twice
        r = subprocess.run(["sh", str(etc / "qos.sh")], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"qos.sh (run {attempt}) exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    for attempt in (1, 2):  # and so is loading accounts.cfg again (the cluster line applies on a re-load)
        r = dbd.sacctmgr("-i", "load", f"file={etc / 'accounts.cfg'}", check=False)
        assert r.returncode == 0, f"sacctmgr load (run {attempt}) exited {r.returncode}\n{r.stdout}\n{r.stderr}"

    gpus = d.hardware["hgx-h100"].gpu.count
    slurmds = fake_gpu_slurmds(build, ctl.env, work.host, hosts, gpus)
    stack.append(SimpleNamespace(stop=lambda: stop(slurmds)))

    def idle():
        r = build.run("sinfo", "-h", "-N", "-o", "%N %T", env=ctl.env, check=False)
        states = dict(ln.split() for ln in r.stdout.splitlines() if ln.strip())
        return states and all(states.get(h, "").startswith("idle") for h in hosts)
    wait_for(idle, 60, "all lab nodes IDLE", slurmds, work.host / "slurmd.out")
    return SimpleNamespace(build=build, d=d, tree=tree, full_tree=full_tree, conf=conf, ctl=ctl, dbd=dbd,
                           munge=ctl.munge, work=work, hosts=hosts)


class Jobs:
    """srun/sbatch/squeue on the cluster, as root unless told."""

    def __init__(self, c: SimpleNamespace):
        self.c, self.build, self.env = c, c.build, c.ctl.env

    def srun(self, *args):
        return self.build.run("srun", "-t", "1", *args, "sh", "-c", 'echo "cvd=$CUDA_VISIBLE_DEVICES"',
                              env=self.env, timeout=60, check=False)

    def sbatch(self, *args, wrap: str = "sleep 30") -> str:
        r = self.build.run("sbatch", "--parsable", "-t", "1", "-o", "/dev/null", *args, "--wrap", wrap,
                           env=self.env, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.strip().split(";")[0]

    def state(self, job: str) -> tuple[str, str]:
        out = self.build.run("squeue", "-h", "-j", job, "-o", "%T %r", env=self.env).stdout.split()
        return (out[0], out[1]) if len(out) == 2 else ("", "")

    def node(self, job: str) -> str:
        return self.build.run("squeue", "-h", "-j", job, "-o", "%N", env=self.env).stdout.strip()

    def running(self, job: str) -> str:
        """Waits until the job runs; its node."""
        wait_for(lambda: self.state(job)[0] == "RUNNING", 20, f"job {job} RUNNING")
        return self.node(job)

    def pending_with(self, job: str, reason: str | None = None):
        def pending() -> bool:
            st, why = self.state(job)
            return st == "PENDING" and (reason is None or why == reason)
        wait_for(pending, 15, f"job {job} PENDING with {reason}")
        time.sleep(1)  # and it stays so across scheduling passes
        assert pending(), self.state(job)

    def cancel(self, *jobs: str) -> None:
        self.build.run("scancel", *jobs, env=self.env, check=False)  # finished ones are gone already

        def gone() -> bool:
            out = self.build.run("squeue", "-h", "-o", "%i", env=self.env).stdout.split()
            return not set(jobs) & set(out)
        wait_for(gone, 20, f"jobs {jobs} gone")


def test_accounts_qos_and_gpu_quota(cluster):
    c = cluster
    d, tree, full_tree, conf, ctl, dbd, build = c.d, c.tree, c.full_tree, c.conf, c.ctl, c.dbd, c.build
    assert f"for Slurm {build.major}" in tree["slurm/slurm.conf"]
    assert "AccountingStorageTRES=gres/gpu" in tree["slurm/slurm.conf"]
    # The partitions' QOS stay (the database resolves them); only host/port/pass are the test's.
    for pname, p in d.slurm.partitions.items():
        line = next(ln for ln in conf.splitlines() if ln.startswith(f"PartitionName={pname} "))
        assert (f" QOS={p.qos} " in line) == bool(p.qos), line

    # --- QOS as the definition says ---
    qos = {row["Name"]: row for row in table(dbd.sacctmgr(
        "show", "qos", "-P", "format=name,priority,preempt,preemptmode,maxtrespu,maxwall").stdout)}
    modes = expected_preempt_mode(d)
    for name, q in d.slurm.qos.items():
        row = qos[name]
        assert row["Priority"] == str(q.priority), row
        assert set(filter(None, row["Preempt"].split(","))) == set(q.preempt), row
        assert row["PreemptMode"] == modes[name], row
        assert row["MaxTRESPU"] == ",".join(f"{k}={v}" for k, v in q.max_tres_per_user.items()), row
        assert row["MaxWall"] == (slurm_time(q.max_wall) if q.max_wall else ""), row

    # --- accounts, parents, quotas, QOS and users as the definition says ---
    assoc = table(dbd.sacctmgr("show", "assoc", "-P", f"cluster={d.cluster.name}",
                               "format=account,parentname,user,grptres,fairshare,qos,defaultqos").stdout)
    accounts = {row["Account"]: row for row in assoc if not row["User"]}
    users = {(row["Account"], row["User"]) for row in assoc if row["User"]}
    assert set(accounts["root"]["QOS"].split(",")) == set(d.slurm.qos), accounts["root"]
    for _tname, t in d.tenants.items():
        if t.slurm is None:
            continue
        row = accounts[t.slurm.account]
        assert row["ParentName"] == t.slurm.parent, row
        total = t.quota.reserved_gpus + t.quota.burst_gpus
        # Slurm holds what Kubernetes does not: GrpTRES + the namespace's GPU ResourceQuota = the quota sold
        k8s = 0
        if t.kubernetes:
            k8s = int(re.search(r'requests.nvidia.com/gpu: "(\d+)"', full_tree[f"kubernetes/tenants/{_tname}.yaml"])[1])
        assert row["GrpTRES"] == (f"gres/gpu={total - k8s}" if total else ""), (row, k8s)
        # FairShare: the reservation held on Slurm (the capacity ledger: here all of it, as the queues admit nothing)
        assert row["Share"] == str(max(capacity.of(d, _tname).slurm.reserved, 1)) == str(max(t.quota.reserved_gpus, 1)), row
        assert set(row["QOS"].split(",")) == set(t.slurm.qos), row
        assert row["Def QOS"] == t.slurm.qos[0], row
        assert {u for a, u in users if a == t.slurm.account} == set(t.slurm.users), assoc
        if t.slurm.parent != "root":
            assert accounts[t.slurm.parent]["ParentName"] == "root", accounts[t.slurm.parent]

    # slurmctld resolved the partitions' QOS in the database.
    parts = {r["PartitionName"]: r for r in ctl.records("partition")}
    for pname, p in d.slurm.partitions.items():
        assert parts[pname]["QoS"] == (p.qos or "N/A"), parts[pname]

    # --- jobs against the quotas, on one slurmd per lab node with fake GPUs ---
    jobs = Jobs(c)
    srun, sbatch, state, pending_with = jobs.srun, jobs.sbatch, jobs.state, jobs.pending_with

    nlp = d.tenants["nlp"]
    quota = nlp.quota.reserved_gpus + nlp.quota.burst_gpus
    ok = srun("-A", nlp.slurm.account, f"--gres=gpu:{quota}")
    assert ok.returncode == 0 and "cvd=" + ",".join(map(str, range(quota))) in ok.stdout, ok.stdout + ok.stderr
    # Over the tenant's GPU quota (GrpTRES of its association) on an otherwise idle cluster.
    over = sbatch("-A", nlp.slurm.account, f"--gres=gpu:{quota + 1}")
    pending_with(over, "AssocGrpGRES")

    # Over the partition QOS's GPUs per user, within the tenant's quota: the QOS reason.
    vision = d.tenants["vision"]
    per_user = d.slurm.qos["normal"].max_tres_per_user["gres/gpu"]
    assert per_user < vision.quota.reserved_gpus + vision.quota.burst_gpus
    qos_over = sbatch("-A", vision.slurm.account, "-p", "train", f"--gres=gpu:{per_user + 1}")
    pending_with(qos_over, "QOSMaxGRESPerUser")
    # The same request under QOS large in the partition without a QOS runs.
    ok = srun("-A", vision.slurm.account, "-p", "debug", "--qos=large", f"--gres=gpu:{per_user + 1}")
    assert ok.returncode == 0 and "cvd=" in ok.stdout, ok.stdout + ok.stderr
    assert state(over)[0] == "PENDING" and state(qos_over)[0] == "PENDING"

    jobs.cancel(over, qos_over)

    # --- tenancy: the dedicated partition runs its tenant's jobs and refuses every other account ---
    secure = d.tenants["secure"]
    ok = srun("-A", secure.slurm.account, "-p", "secure", "--gres=gpu:1")
    assert ok.returncode == 0 and "cvd=0" in ok.stdout, ok.stdout + ok.stderr
    r = build.run("sbatch", "--parsable", "-t", "1", "-o", "/dev/null", "-A", vision.slurm.account, "-p", "secure",
                  "--wrap", "true", env=ctl.env, check=False)
    if r.returncode == 0:  # accepted into the queue, but slurmctld never starts it there
        job = r.stdout.strip().split(";")[0]
        time.sleep(2)
        rec = ctl.scontrol("show", "job", "-o", job)
        assert "JobState=PENDING" in rec and "account_not_permitted" in rec and "secure_allows_secure" in rec, rec
        build.run("scancel", job, env=ctl.env)
    else:
        assert "account" in r.stderr.lower(), r.stderr

    assert "fatal" not in ctl.log().lower() and "fatal" not in dbd.log().lower()


def test_mcs_never_puts_two_accounts_on_one_node(cluster):
    """MCSPlugin=mcs/account with MCSParameters=enforced,select (rendered because vision is sold whole
    nodes in the shared pool): a node running one account's job takes only that account's jobs. With
    nodes free elsewhere another account's job goes there; with every node holding another
    account's job it waits, although GPUs are idle on each, and starts when a node is freed."""
    c = cluster
    conf = c.tree["slurm/slurm.conf"]
    assert "MCSPlugin=mcs/account\n" in conf and "MCSParameters=enforced,select,privatedata\n" in conf
    jobs = Jobs(c)
    nlp, vision, secure = (c.d.tenants[n].slurm.account for n in ("nlp", "vision", "secure"))
    train = hostlist.names(c.d.nodes["train"].hosts)
    # vision in the partition without a QOS under its QOS large: no per-user GPU limit in the way;
    # nlp and secure (2 GPUs each) stay within QOS normal's 4 GPUs per user together.
    b_args = ("-A", vision, "-p", "debug", "--qos=large", "--gres=gpu:1")
    started = []
    try:
        a1 = jobs.sbatch("-A", nlp, "-p", "train", "--gres=gpu:1")
        started.append(a1)
        node = jobs.running(a1)
        assert node in train
        assert f"MCS_label={nlp}" in c.ctl.scontrol("show", "job", "-o", a1)
        # The same account shares the node (Slurm packs a second 1-GPU job onto it): the filter is
        # the label, not whole nodes per job.
        a2 = jobs.sbatch("-A", nlp, "-p", "train", "--gres=gpu:1")
        started.append(a2)
        assert jobs.running(a2) == node
        # Another account, nodes free elsewhere: it runs, on another node.
        b = jobs.sbatch(*b_args)
        started.append(b)
        other = jobs.running(b)
        assert other in train and other != node, (node, other)
        # Asked for that node by name, it waits while nlp's jobs run there (6 of its 8 GPUs idle).
        pinned = jobs.sbatch(*b_args, "-w", node)
        started.append(pinned)
        jobs.pending_with(pinned)
        jobs.cancel(b, pinned, a2)

        # Every train node holds another account's job (nlp's 2 GPUs and secure's 2 spread one per
        # node): vision's job waits although 7 GPUs are idle on each, and starts where one is freed.
        rest = [h for h in train if h != node]
        held = {}
        for account, h in zip((nlp, secure, secure), rest):
            started.append(j := jobs.sbatch("-A", account, "-p", "train", "--gres=gpu:1", "-w", h))
            assert jobs.running(j) == h
            held[h] = j
        waiting = jobs.sbatch(*b_args)
        started.append(waiting)
        jobs.pending_with(waiting)
        reason = jobs.state(waiting)[1]
        assert not reason.startswith(("Assoc", "QOS")), reason  # not a quota: the nodes are taken
        freed = rest[-1]
        jobs.cancel(held[freed])
        assert jobs.running(waiting) == freed
    finally:
        jobs.cancel(*[j for j in started if j])


def test_private_data_hides_other_tenants_jobs_in_squeue_and_sacct(cluster):
    """PrivateData (rendered in slurm.conf for slurmctld and in slurmdbd.conf for the database, because
    a tenant is dedicated): nobody, a user of vision, sees none of nlp's jobs, neither queued in
    squeue nor finished in sacct, while root sees them all."""
    c = cluster
    jobs = Jobs(c)
    assert "PrivateData=accounts,jobs,reservations,usage,users\n" in c.tree["slurm/slurm.conf"]
    assert "PrivateData=accounts,jobs,reservations,usage,users\n" in c.tree["slurm/slurmdbd.conf.j2"]
    assert "PrivateData=accounts,jobs,reservations,usage,users" in (c.work.host / "etc/slurmdbd.conf").read_text()
    nlp = c.d.tenants["nlp"].slurm.account
    done = jobs.srun("-A", nlp, "--gres=gpu:1")
    assert done.returncode == 0, done.stdout + done.stderr
    queued = jobs.sbatch("-A", nlp, "--gres=gpu:1")
    jobs.running(queued)
    try:
        Path(c.munge.socket).parent.chmod(0o755)  # any local user may talk to munged, as on a real node

        def as_nobody(*cmd: str) -> str:
            r = c.build.run("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd,
                            env=c.ctl.env, check=False)
            assert r.returncode == 0, r.stdout + r.stderr
            return r.stdout

        sacct = ("sacct", "-a", "-X", "-n", "-P", "-S", "2000-01-01", "-o", "jobid,account,user")

        def finished_in_sacct() -> bool:
            rows = c.build.run(*sacct, env=c.ctl.env).stdout.splitlines()
            return sum(row.endswith(f"|{nlp}|root") for row in rows) >= 2
        wait_for(finished_in_sacct, 20, "nlp's jobs in the database (sacct as root)")
        root_sees = c.build.run("squeue", "-h", "-o", "%i", env=c.ctl.env).stdout.split()
        assert queued in root_sees
        assert as_nobody("squeue", "-h", "-o", "%i %a %u").strip() == ""
        theirs = as_nobody(*sacct)
        assert nlp not in theirs and "root" not in theirs, theirs
        # and the accounts and users in the database are not theirs to list
        assocs = as_nobody("sacctmgr", "-n", "-P", "show", "assoc", "format=account,user")
        assert f"{nlp}|" not in assocs, assocs
    finally:
        jobs.cancel(queued)
