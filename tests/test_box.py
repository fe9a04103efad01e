"""The box (tests/box_cluster.py, docs/box.md): the lab's hosts as containers on an internal network, reached
by Ansible through the podman connection, carrying a real multi-host Slurm 24.11 (MariaDB and slurmdbd on
their own host, slurmctld configless, slurmd on six compute hosts with fake GPUs). Run alone with
`pytest -m box`; the cluster starts once for the module."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from box_cluster import IMAGE, LABEL, PREFIX, BoxCluster, BoxError, owner_token, running_box, wait_for

pytestmark = [pytest.mark.box, pytest.mark.slow]

GPUS = 8
LAB_HOSTS = [
    {"name": "slurmctl01", "ip": "10.20.0.3"},
    {"name": "slurmdbd01", "ip": "10.20.0.4"},
    {"name": "mgmt01", "ip": "10.20.0.5"},
    *({"name": f"gpu00{i}", "ip": f"10.20.0.1{i}", "gpus": GPUS} for i in range(1, 5)),
    *({"name": f"sgpu0{i}", "ip": f"10.20.0.4{i}", "gpus": GPUS} for i in range(1, 3)),
]
COMPUTE = [h["name"] for h in LAB_HOSTS if h.get("gpus")]
TENANTS = {"tenant-a": ["alice"], "tenant-b": ["bob"]}
DB_PASS = "box-only-password"   # MariaDB inside a container on an internal network, gone with it

SLURM_CONF = f"""\
ClusterName=lab
SlurmctldHost=slurmctl01
SlurmctldParameters=enable_configless
AuthType=auth/munge
SlurmUser=slurm
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=slurmdbd01
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
NodeName=gpu[001-004],sgpu[01-02] CPUs=2 RealMemory=1000 Gres=gpu:h100:{GPUS} State=UNKNOWN
PartitionName=gpu Nodes=gpu[001-004] Default=YES MaxTime=60 State=UP
PartitionName=secure Nodes=sgpu[01-02] MaxTime=60 State=UP
"""
GRES_CONF = f"NodeName=gpu[001-004],sgpu[01-02] Name=gpu Type=h100 File=/dev/nvidia[0-{GPUS - 1}]\n"
SLURMDBD_CONF = f"""\
AuthType=auth/munge
DbdHost=slurmdbd01
SlurmUser=slurm
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass={DB_PASS}
StorageLoc=slurm_acct_db
"""


@pytest.fixture(scope="module")
def box(box_ready):
    t0 = time.monotonic()
    with running_box(LAB_HOSTS, client="slurmctl01") as b:
        b.timings["image"] = box_ready["slurmctld"]
        yield b
        rss = b.rss_mib()
        print(f"\nbox: start {b.timings['start']:.1f} s for {len(b.hosts)} hosts, RSS {sum(rss.values()):.0f} MiB "
              f"({', '.join(f'{h} {m:.0f}' for h, m in rss.items())}); timings {b.timings}")
    print(f"box: teardown {b.timings.get('stop', 0):.1f} s; module {time.monotonic() - t0:.1f} s")


def test_every_host_answers_ansible_through_the_podman_connection(box):
    # A module (Python in the container) on every inventory name, each landing in its own container: its own
    # hostname and fake GPUs. ansible-runner, as `clusterdef apply` runs Ansible.
    probe = box.ansible("all", "ansible.builtin.shell", "echo $(hostname) $(ls /dev | grep -c '^nvidia[0-9]')")
    assert {h: (r["_event"], r["stdout"]) for h, r in probe.items()} == {
        h: ("runner_on_ok", f"{h} {GPUS if h in COMPUTE else 0}") for h in box.hosts}, probe


def bring_up_slurm(box) -> dict[str, float]:
    """A hand-made minimal Slurm: accounting on slurmdbd01, configless slurmctld on slurmctl01, slurmd
    fetching its configuration from it on the compute hosts. Returns the seconds each step took."""
    took = {}
    t = time.monotonic()
    box.exec("slurmdbd01", ["systemctl", "start", "mariadb"], check=True)
    # The database made before slurmdbd's first start: when it is missing, slurmdbd 24.11 creates it and reconnects
    # on the same handle, which trixie's libmariadb3 3.4.10 (1:11.8.9+ds-0+deb13u1) leaves broken: every result set
    # is then refused ("Number of columns in result (=1) ... exceeds ... (=0)") and slurmdbd exits (docs/box.md).
    box.exec("slurmdbd01", ["mariadb", "-e", "CREATE DATABASE slurm_acct_db; "
                                             f"CREATE USER 'slurm'@'localhost' IDENTIFIED BY '{DB_PASS}'; "
                                             "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"], check=True)
    box.put("slurmdbd01", "/etc/slurm/slurmdbd.conf", SLURMDBD_CONF, owner="slurm", mode=0o600)
    box.exec("slurmdbd01", ["systemctl", "start", "slurmdbd"], check=True)
    box.wait_active("slurmdbd01", "slurmdbd")
    wait_for("slurmdbd listening on 6819", lambda: ":6819 " in box.exec("slurmdbd01", ["ss", "-ltnH"]).stdout, 30,
             diagnostics=lambda: box.diagnostics(["slurmdbd01"], ["slurmdbd", "mariadb"]))
    took["accounting"] = time.monotonic() - t

    t = time.monotonic()
    box.put("slurmctl01", "/etc/slurm/slurm.conf", SLURM_CONF)
    box.put("slurmctl01", "/etc/slurm/gres.conf", GRES_CONF)
    box.sh("slurmctl01", "install -d -o slurm -g slurm /var/lib/slurm/slurmctld", check=True)
    box.exec("slurmctl01", ["systemctl", "start", "slurmctld"], check=True, timeout=90)
    wait_for("slurmctld answering scontrol ping", lambda: "UP" in box.exec("slurmctl01", ["scontrol", "ping"]).stdout, 30,
             diagnostics=lambda: box.diagnostics(["slurmctl01"], ["slurmctld"]))
    took["controller"] = time.monotonic() - t

    t = time.monotonic()
    for host in COMPUTE:
        box.put(host, "/etc/default/slurmd", 'SLURMD_OPTIONS="--conf-server slurmctl01"\n')
        box.exec(host, ["systemctl", "start", "--no-block", "slurmd"], check=True)
    wait_for("every compute node idle in sinfo",
             lambda: all(s == "idle" for p in box.sinfo().values() for s in p["nodes"].values())
             and sum(len(p["nodes"]) for p in box.sinfo().values()) == len(COMPUTE), 60,
             diagnostics=lambda: f"sinfo: {box.sinfo()}\n" + box.diagnostics(["slurmctl01", COMPUTE[0]], ["slurmctld", "slurmd"]))
    took["nodes"] = time.monotonic() - t
    return took


def test_a_real_slurm_spans_the_containers(box):
    took = bring_up_slurm(box)
    assert box.sinfo() == {
        "gpu": {"nodes": {f"gpu00{i}": "idle" for i in range(1, 5)}, "default": True, "avail": "up"},
        "secure": {"nodes": {"sgpu01": "idle", "sgpu02": "idle"}, "default": False, "avail": "up"}}
    # Configless: the node runs on the file slurmctld sent it, byte for byte.
    box.assert_file("gpu001", "/run/slurm/conf/slurm.conf", SLURM_CONF)
    box.assert_file("slurmdbd01", "/etc/slurm/slurmdbd.conf", SLURMDBD_CONF, owner="slurm", group="slurm", mode=0o600)
    node = box.slurm(["scontrol", "-o", "show", "node", "gpu001"]).stdout
    assert "Gres=gpu:h100:8" in node and " State=IDLE " in node, node

    t = time.monotonic()
    srun = box.slurm(["srun", "-N2", "-p", "gpu", "hostname"], timeout=60)
    took["srun"] = time.monotonic() - t
    answers = sorted(srun.stdout.split())
    assert len(answers) == 2 and len(set(answers)) == 2 and set(answers) <= set(COMPUTE), srun.stdout

    # Tenants: local users with the same uid everywhere, associations on the accounting host.
    uids = box.users(TENANTS)
    assert box.exec("sgpu02", ["id", "-u", "alice"]).stdout.strip() == str(uids["alice"])
    box.slurm(["sacctmgr", "-i", "add", "account", "tenant-a", "cluster=lab"])
    box.slurm(["sacctmgr", "-i", "add", "user", "alice", "account=tenant-a", "cluster=lab"])
    assoc = {(a["Account"], a["User"]) for a in box.assoc() if a["Cluster"] == "lab"}
    assert {("root", "root"), ("tenant-a", ""), ("tenant-a", "alice")} <= assoc, assoc

    t = time.monotonic()
    job = box.submit("alice", "gpu", account="tenant-a", gres="gpu:2",
                     command='echo "$(id -un) $(hostname) CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"')
    record = box.wait_job(job, "COMPLETED", timeout=60)
    took["job"] = time.monotonic() - t
    ran_on = record["NodeList"]
    assert box.get(ran_on, f"/tmp/slurm-{job.id}.out").decode() == f"alice {ran_on} CUDA_VISIBLE_DEVICES=0,1\n"
    # The accounting host recorded it (slurmdbd on another container).
    rows = wait_for(f"job {job.id} in sacct", lambda: [r for r in box.sacct(job.id) if r["State"] == "COMPLETED"], 30)
    assert rows[0]["User"] == "alice" and rows[0]["Account"] == "tenant-a" and "gres/gpu=2" in rows[0]["AllocTRES"], rows

    # bob has no association: refused at submit, with Slurm's message.
    refused = box.submit("bob", "gpu")
    assert refused.id is None and "Invalid account" in refused.refused, refused
    with pytest.raises(BoxError, match="refused at submit"):
        box.wait_job(refused)
    print(f"\nbox slurm: {', '.join(f'{k} {v:.1f} s' for k, v in took.items())}")


def test_a_killed_runs_leftovers_are_cleared_and_a_failed_start_leaves_nothing(box_ready):
    """Beside the module's box (another name, another subnet): leftovers of a run whose process is gone are
    removed before a start; a start that fails still takes its network and containers down."""
    hosts = [{"name": "boxprobe01", "ip": "10.20.1.10"}]
    podman = BoxCluster(hosts, subnet="10.20.1.0/24")._podman
    gone = subprocess.Popen(["true"])
    gone.wait()   # a pid that no longer runs: the killed run's
    stale = f"{PREFIX}-{gone.pid}-stale"
    labels = ["--label", f"{LABEL}={owner_token(gone.pid)}", "--label", f"{LABEL}.network={stale}"]
    podman("network", "create", "--internal", "--subnet", "10.20.1.0/24", *labels, stale)
    podman("run", "-d", "--name", "boxprobe01", "--network", stale, "--ip", "10.20.1.10", *labels, IMAGE, "sleep", "infinity")
    try:
        with running_box(hosts, subnet="10.20.1.0/24", network=f"{PREFIX}-{os.getpid()}-probe") as b:
            assert b.exec("boxprobe01", ["hostname"], check=True).stdout.strip() == "boxprobe01"
            assert podman("network", "exists", stale, check=False).returncode != 0   # cleared before the start
        assert podman("network", "exists", b.network, check=False).returncode != 0
        assert podman("container", "exists", "boxprobe01", check=False).returncode != 0

        with pytest.raises(BoxError, match="no-such-tag"):
            with running_box(hosts, subnet="10.20.1.0/24", network=f"{PREFIX}-{os.getpid()}-failing",
                             image="localhost/clusterdef-box:no-such-tag"):
                pass
        assert podman("network", "exists", f"{PREFIX}-{os.getpid()}-failing", check=False).returncode != 0
        assert podman("container", "exists", "boxprobe01", check=False).returncode != 0
    finally:
        podman("rm", "-f", "-t", "0", "boxprobe01", check=False)
        podman("network", "rm", "-f", stale, check=False)
