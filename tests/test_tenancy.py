"""Tenancy enforced, not declared: the isolation table never names a file that is not rendered,
quotas never sum above what was sold across the two control planes, and each mechanism is
proven by the software that enforces it: OpenSM on a simulated InfiniBand fabric (partition keys),
btrfs on a loop device (project quotas, scratch expiry), slurmctld (a dedicated partition)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab_variants import without_governed_data

from clusterdef import capacity, tenancy
from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml

EXAMPLES = ("lab", "estate")


def _result(path: Path):
    r = validate_file(path, MATRICES, TODAY)
    assert r.ok, [f"{f.where} {f.code} {f.message}" for f in r.errors]
    return r


def _variant(data: dict, tmp_path: Path, name: str = "lab.yaml"):
    # keep relative files (none in the lab) resolvable: the variant lives beside the examples' data
    return _result(dump_yaml(data, tmp_path / name))


@pytest.fixture(scope="module")
def trees():
    out = {}
    for name in EXAMPLES:
        r = _result(CLUSTERS / f"{name}.yaml")
        out[name] = (r, build_tree(r)[0])
    return out


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_file_the_isolation_table_names_is_rendered(trees, example):
    r, tree = trees[example]
    named = 0
    for te in tenancy.enforcement(r.definition).values():
        for layer in te.layers.values():
            for f in layer.files:
                named += 1
                assert f in tree or any(k.startswith(f) for k in tree if f.endswith("/")), f
    assert named, "the table names no file at all"


def test_lab_dedicated_tenant_is_enforced_on_every_layer(trees):
    r, tree = trees["lab"]
    te = tenancy.enforcement(r.definition)["secure"]
    assert te.level == "dedicated" and not te.gaps
    assert {n: bool(layer.mechanisms) for n, layer in te.layers.items()} == \
        {"device": True, "network": True, "storage": True, "observation": True}


def test_dedicated_or_shared_changes_the_enforcing_files(lab, tmp_path):
    """The field's classic failure: switching a tenant from dedicated to shared changed nothing."""
    dedicated = build_tree(_variant(lab, tmp_path, "a.yaml"))[0]
    lab["tenants"]["secure"]["isolation"] = {"level": "shared"}
    lab["slurm"]["partitions"]["secure"]["allow_accounts"] = []
    shared = build_tree(_variant(lab, tmp_path, "b.yaml"))[0]
    changed = {k for k in set(dedicated) | set(shared) if dedicated.get(k) != shared.get(k)}
    assert {"slurm/slurm.conf", "network/opensm/partitions.conf"} <= changed
    assert "PrivateData=" in dedicated["slurm/slurm.conf"] and "PrivateData=" not in shared["slurm/slurm.conf"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_quota_split_between_control_planes_never_exceeds_the_sale(trees, example):
    r, tree = trees[example]
    grp = dict(re.findall(r"Account - '([^']+)'.*?GrpTRES=gres/gpu=(\d+)", tree["slurm/accounts.cfg"]))
    checked = 0
    for name, t in r.definition.tenants.items():
        slurm = int(grp.get(t.slurm.account, 0)) if t.slurm else 0
        k8s = 0
        if t.kubernetes:
            text = tree[f"kubernetes/tenants/{name}.yaml"]
            k8s = int(re.search(r'requests.nvidia.com/gpu: "(\d+)"', text)[1])
        assert slurm + k8s <= t.quota.reserved_gpus + t.quota.burst_gpus, (name, slurm, k8s)
        # the rendered figures are the capacity ledger's; on both planes, what Kubernetes cannot hold is Slurm's
        cap = capacity.of(r.definition, name)
        assert (slurm if t.slurm else None, k8s if t.kubernetes else None) == (
            cap.slurm and cap.slurm.limit, cap.kubernetes and cap.kubernetes.limit), name
        if t.slurm and t.kubernetes and (t.quota.reserved_gpus or t.quota.burst_gpus):
            assert slurm + k8s == t.quota.reserved_gpus + t.quota.burst_gpus, name
        checked += 1
    assert checked == len(r.definition.tenants)


def test_isolation_verb_exit_codes(lab, tmp_path):
    def run(path):
        return subprocess.run([sys.executable, "-m", "clusterdef", "isolation", str(path), "--today", "2026-11-30",
                               "-f", "json"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "CLUSTERDEF_MATRICES": str(MATRICES)})
    ok = run(CLUSTERS / "lab.yaml")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["gaps"] == 0 and doc["tenants"]["secure"]["layers"]["network"]["files"] == \
        ["network/opensm/partitions.conf"]
    lab["tenants"]["secure"]["isolation"]["network"] = "network-policy"  # no namespace: nothing enforces it
    bad = run(dump_yaml(lab, tmp_path / "lab.yaml"))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    doc = json.loads(bad.stdout)
    assert not doc["tenants"]["secure"]["layers"]["network"]["enforced"]


# --------------------------------------------------------------------------- InfiniBand: OpenSM decides

def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} missing in CI: scripts/install-test-deps must install them")
        pytest.skip(f"{', '.join(missing)} not installed (scripts/install-test-deps installs them)")


class Sim:
    """ibsim on a net file, with the environment its clients need; ended by its pid."""

    def __init__(self, net: str, work: Path, sm: str = "sm-ib0"):
        self.work = work
        (work / "fabric.net").write_text(net)
        self.env = {**os.environ, "IBSIM_SOCKNAME": f"cdt-{os.getpid()}-{work.name}"[:90], "SIM_HOST": sm,
                    "OSM_TMP_DIR": str(work), "OSM_CACHE_DIR": str(work)}
        self.log = open(work / "ibsim.log", "w")
        self.proc = subprocess.Popen(["ibsim", "-s", "-n", str(work / "fabric.net")], stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        deadline = time.monotonic() + 20
        while "Network simulator ready" not in (work / "ibsim.log").read_text():
            assert self.proc.poll() is None and time.monotonic() < deadline, (work / "ibsim.log").read_text()
            time.sleep(0.05)

    def run(self, *cmd: str) -> str:
        r = subprocess.run(["ibsim-run", *cmd], env=self.env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    def close(self) -> None:
        os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=10)
        self.log.close()


_CA = re.compile(r'^Ca\s+\d+\s+"[^"]*"\s+#\s+"([^"]+)"')
_CA_PORT = re.compile(r"^\[(\d+)\]\(([0-9a-f]+)\).*?# lid (\d+) ")


def ca_ports(ibnetdiscover: str) -> dict[str, list[tuple[str, int]]]:
    """host -> [(port GUID, LID)] from ibnetdiscover's Ca records."""
    out: dict[str, list[tuple[str, int]]] = {}
    host = None
    for line in ibnetdiscover.splitlines():
        m = _CA.match(line)
        if m:
            host = m[1]
            out[host] = []
            continue
        if not line.strip():
            host = None
        m = _CA_PORT.match(line)
        if host and m:
            out[host].append((f"0x{int(m[2], 16):016x}", int(m[3])))
    return out


_PKEY = re.compile(r"0x[0-9a-f]{4}")


def talk(a: list[int], b: list[int]) -> bool:
    """Whether two ports with these P_Key tables can talk: they hold the same key (low 15 bits) and at
    least one of them holds it as a full member (bit 15). Two limited members cannot (InfiniBand Architecture spec vol. 1, 10.9 Partitioning;
    OpenSM's partition-config.txt: full or limited membership)."""
    full_a = {k & 0x7FFF for k in a if k & 0x8000}
    full_b = {k & 0x7FFF for k in b if k & 0x8000}
    both = {k & 0x7FFF for k in a} & {k & 0x7FFF for k in b}
    return bool(both & (full_a | full_b))


def pkey_sweep(net: str, tmp_path: Path, owner: dict[str, str], partitions_conf, sm: str = "sm-ib0") -> int:
    """Simulate the net file with ibsim, let a real OpenSM sweep it once with the partitions.conf that
    `partitions_conf(ports, dest)` renders once the fabric's port GUIDs are known (`ports`: host ->
    [(GUID, LID)] as ibnetdiscover shows them, which the operator copies into the inventory), then
    read every HCA port's P_Key table as OpenSM programmed it (smpquery pkeys, index order).
    `owner`: host -> what its ports belong to (a partition-key tenant, or "shared"); the SM's port
    belongs to everyone. For EVERY pair of ports: those of the same owner, and any port with the SM's,
    must share a key with a full member; any other pair must not. And index 0 of every host port holds
    a key it is a full member of (what IPoIB's parent interface and NCCL_IB_PKEY=0 use). Returns the
    number of pairs checked."""
    sim = Sim(net, tmp_path, sm)
    try:
        ports = ca_ports(sim.run("ibnetdiscover"))
        partitions_conf(ports, tmp_path / "partitions.conf")
        sim.run("opensm", "-o", "-P", str(tmp_path / "partitions.conf"), "-f", str(tmp_path / "osm.log"), "-s", "0")
        tables: list[tuple[str, int, list[int]]] = []  # (host, LID, P_Key table in index order)
        for host, host_ports in ca_ports(sim.run("ibnetdiscover")).items():
            for _, lid in host_ports:
                assert lid > 0, (host, lid)
                keys = [int(k, 16) for k in _PKEY.findall(sim.run("smpquery", "pkeys", str(lid)))]
                table = [k for k in keys if k & 0x7FFF]
                tables.append((host, lid, table))
                if host != sm:
                    assert table and table[0] & 0x8000, (host, lid, [hex(k) for k in table])
        assert {h for h, _, _ in tables} == set(owner) | {sm}, sorted({h for h, _, _ in tables} ^ set(owner))
        wrong = []
        for i, (ha, la, ta) in enumerate(tables):
            for hb, lb, tb in tables[i + 1:]:
                must = sm in (ha, hb) or owner[ha] == owner[hb]
                if talk(ta, tb) != must:
                    wrong.append((ha, la, [hex(k) for k in ta], hb, lb, [hex(k) for k in tb], must))
        assert not wrong, f"{len(wrong)} pair(s) wrong, e.g. {wrong[:3]}"
        return len(tables) * (len(tables) - 1) // 2
    finally:
        sim.close()


def test_talk_is_the_spec_rule():
    """The pair rule the sweep applies: a shared key with at least one full member."""
    assert talk([0x8001, 0x7FFF], [0x8001, 0x7FFF])       # both full in 0x0001
    assert talk([0x7FFF], [0xFFFF])                       # limited with the SM's full Default
    assert not talk([0x8001, 0x7FFF], [0x8002, 0x7FFF])   # only Default in common, both limited
    assert not talk([0x0001], [0x0001])                   # two limited members


@pytest.mark.parametrize("kind", ["tree", "rail"])
def test_opensm_partitions_let_every_pair_that_must_talk_talk(lab, tmp_path, kind):
    """The rendered partitions.conf, loaded by a real OpenSM sweep of the lab fabric under ibsim,
    on the lab's leaf/spine tree and on the same nodes rail-optimised (HCA i on rail leaf i of its
    scalable unit): of all 65 ports (8 hosts x 8 HCA ports and the SM's), every pair of shared ports
    and every pair of the dedicated tenant's ports shares a key with a full member, every port
    reaches the SM, and no tenant port shares one with a shared port."""
    _need("ibsim", "ibsim-run", "ibnetdiscover", "opensm", "smpquery")
    from clusterdef.fabric import ibsim

    from conftest import as_rail

    data = as_rail(lab) if kind == "rail" else lab
    groups = {g: list(hostlist_names(data["nodes"][g]["hosts"])) for g in ("train", "infer", "secure")}

    def render(ports, dest: Path) -> None:
        # the definition's port GUIDs are what the fabric has (as an operator copies them from ibstat)
        for g, hosts in groups.items():
            data["nodes"][g]["addressing"]["mac"]["port_guids"] = [";".join(p for p, _ in ports[h]) for h in hosts]
        r = _variant(data, tmp_path, "lab-guids.yaml")
        dest.write_text(build_tree(r, ["network"])[0]["network/opensm/partitions.conf"])

    net = ibsim.net_file(_variant(data, tmp_path).definition, "ib0")
    if kind == "rail":
        assert '"su1-rail8"' in net and '"su2-rail1"' in net
    owner = {h: ("secure" if g == "secure" else "shared") for g, hosts in groups.items() for h in hosts}
    assert pkey_sweep(net, tmp_path, owner, render) == 65 * 64 // 2


def hostlist_names(expr: str) -> list[str]:
    from clusterdef import hostlist
    return hostlist.names(expr)


def test_opensm_partitions_let_the_estate_piece_talk_as_sold(trees, tmp_path):
    """The estate's two dedicated tenants (a Slurm SU each, PKeys allocated) and a shared SU of each
    control plane, on a piece of the estate's own fabric under ibsim (the whole estate is 4,096 hosts
    with 32,768 HCA ports, beyond what ibsim simulates in seconds): two hosts on different leaves of
    each SU, their leaves, spines and the cores. partitions.conf is rendered from the estate with the
    piece's port GUIDs in its inventory CSV; all pairs of the piece's 65 ports are checked."""
    _need("ibsim", "ibsim-run", "ibnetdiscover", "opensm", "smpquery")
    import csv
    import io

    from clusterdef.fabric import ibsim

    r, _ = trees["estate"]
    d = r.definition
    owners = {n: t.isolation.node_groups[0] for n, t in d.tenants.items()
              if t.isolation.level == "dedicated" and t.isolation.network == "partition-key"}
    assert len(owners) == 2, owners
    k8s_shared = next(g for g, n in d.nodes.items() if n.control_plane == "kubernetes" and n.services == ()
                      and g not in owners.values())
    piece: dict[str, str] = {}
    for label, su in {**owners, "shared": "su01", "shared-k8s": k8s_shared}.items():
        hosts = hostlist_names(d.nodes[su].hosts)
        for h in (hosts[0], hosts[-1]):  # first and last leaf of the SU
            piece[h] = "shared" if label.startswith("shared") else label
    net = ibsim.net_file(d, "ib-compute", hosts=set(piece))
    assert net.count("\nSwitch") == 4 * 2 + 4 * 2 + 16  # 2 leaves and 2 spines per SU, 16 cores

    def render(ports, dest: Path) -> None:
        rows = list(csv.reader((CLUSTERS / "estate-macs.csv").read_text().splitlines()))
        for row in rows[1:]:
            if row[0] in ports:
                row[2] = ";".join(g for g, _ in ports[row[0]])
        folder = tmp_path / "estate"
        folder.mkdir(exist_ok=True)
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        (folder / "estate-macs.csv").write_text(buf.getvalue())
        shutil.copy(CLUSTERS / "estate.yaml", folder / "estate.yaml")
        rr = _result(folder / "estate.yaml")
        dest.write_text(build_tree(rr, ["network"])[0]["network/opensm/partitions.conf"])

    assert pkey_sweep(net, tmp_path, piece, render, ibsim.sm_hca(d, "ib-compute")) == 65 * 64 // 2


# --------------------------------------------------------------------------- storage: btrfs decides

def _apply_tenant_isolation(tree: dict[str, str], tmp_path: Path, mount: Path, hosts: str = "tenant_storage_admin",
                            recap: str = "gpu001") -> list[str]:
    """playbooks/tenant-isolation.yml's role on this machine (local connection) for `hosts` of the
    rendered inventory and group_vars, each host installing under <tmp>/root/<host> (the lab's scratch
    admin host is gpu001) and applying the quotas to `mount`; twice. Returns `recap`'s PLAY RECAP
    line of both runs."""
    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    inv = tmp_path / "ansible"
    for rel, text in tree.items():
        if rel.startswith("ansible/"):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
    play = tmp_path / "play.yml"
    play.write_text(f"- hosts: {hosts}\n  gather_facts: false\n  roles: [tenant_isolation]\n")
    extra = json.dumps({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                        "tenant_isolation_root": str(tmp_path / "root") + "/{{ inventory_hostname }}",
                        "tenant_isolation_script_env": {"CLUSTERDEF_MOUNT": str(mount)}})
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(Path(__file__).resolve().parents[1] / "roles"),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOST_KEY_CHECKING": "0"}
    recaps = []
    for _ in range(2):  # idempotent: the second run changes nothing
        r = subprocess.run([str(ansible), "-i", str(inv), str(play), "-e", extra], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        recaps.append(next(ln for ln in r.stdout.splitlines() if ln.startswith(recap + " ")))
    return recaps


@pytest.mark.slow
def test_btrfs_quota_and_scratch_expiry(lab, tmp_path):
    """The tenant_isolation role applies the rendered btrfs quota script to a real btrfs (loop
    device): a write past the tenant's quota fails with EDQUOT, another tenant is unaffected; the
    scratch cleanup script it installed removes files not accessed for the tenant's expiry and keeps
    newer ones and everything outside tenants' folders."""
    _need("mkfs.btrfs", "btrfs", "losetup")
    if os.geteuid() != 0:
        pytest.skip("mounting a loop device needs root")
    mib = 1 / 2**20  # 1 MiB in TiB
    without_governed_data(lab)  # this test's one btrfs is scratch; the datasets' filesystems are not here
    lab["tenants"]["secure"]["storage"].update(quota_tib=10 * mib, scratch_expiry_days=7)
    lab["tenants"]["vision"]["storage"].update(quota_tib=200 * mib)
    tree = build_tree(_variant(lab, tmp_path))[0]
    img, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["truncate", "-s", "400M", str(img)], check=True)
    subprocess.run(["mkfs.btrfs", "-q", "-f", str(img)], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True)
    try:
        env = {**os.environ, "CLUSTERDEF_MOUNT": str(mnt)}
        first, second = _apply_tenant_isolation(tree, tmp_path, mnt)
        assert "changed=0" not in first and "failed=0" in first and "changed=0" in second, (first, second)
        installed = tmp_path / "root/gpu001/usr/lib/clusterdef/storage/scratch"
        assert (installed / "quota.sh").read_text() == tree["storage/scratch/quota.sh"]
        assert (tmp_path / "root/gpu001/etc/systemd/system/clusterdef-scratch-scratch.timer").is_file()
        subprocess.run(["sync"], check=True)
        over = subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/secure/big", "bs=1M", "count=20", "conv=fsync"],
                              capture_output=True, text=True, timeout=120)
        assert over.returncode != 0 and "Disk quota exceeded" in over.stderr, over.stderr
        assert (mnt / "secure" / "big").stat().st_size <= 11 * 2**20
        other = subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/vision/data", "bs=1M", "count=20", "conv=fsync"],
                               capture_output=True, text=True, timeout=120)
        assert other.returncode == 0, other.stderr
        # scratch expiry: secure keeps files for 7 days
        (mnt / "secure" / "big").unlink()
        (mnt / "outside").mkdir()
        for rel, age in (("secure/old", "10 days ago"), ("secure/sub/old", "10 days ago"), ("secure/new", "2 days ago"),
                         ("outside/old", "400 days ago")):
            p = mnt / rel
            p.parent.mkdir(exist_ok=True)
            p.write_text("x")
            subprocess.run(["touch", "-a", "-d", age, str(p)], check=True)
        (mnt / "secure" / "link").symlink_to(mnt / "outside" / "old")
        c = subprocess.run(["sh", str(installed / "scratch-cleanup.sh")], env=env, capture_output=True,
                           text=True, timeout=120)
        assert c.returncode == 0, c.stdout + c.stderr
        assert not (mnt / "secure" / "old").exists() and not (mnt / "secure" / "sub" / "old").exists()
        assert (mnt / "secure" / "new").exists() and (mnt / "outside" / "old").exists()
        assert (mnt / "vision" / "data").exists()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)

def test_tenant_isolation_role_installs_a_groups_mount_unit_only_on_its_nodes(lab, tmp_path):
    """A dedicated filesystem with a source: the role puts its rendered mount unit on the nodes of its
    node group and on no other node (each host installs under its own folder)."""
    lab["filesystems"]["scratch"].update(source="/dev/disk/by-label/scratch", node_groups=["secure"])
    tree = build_tree(_variant(lab, tmp_path), ["ansible", "storage"])[0]
    # sgpu01, the first host of the group, is now the filesystem's admin host (quotas): left out here
    first, second = _apply_tenant_isolation(tree, tmp_path, tmp_path, hosts="nodes:!tenant_storage_admin",
                                            recap="sgpu02")
    assert "changed=0" not in first and "changed=0" in second
    unit = "etc/systemd/system/scratch.mount"
    assert (tmp_path / "root/sgpu02" / unit).read_text() == tree["storage/mounts/secure/scratch.mount"]
    assert not [h for h in ("gpu001", "gpu004", "kgpu01") if (tmp_path / "root" / h / unit).exists()]


# Slurm's enforcement (a dedicated partition refusing another account, PrivateData hiding jobs) is
# proven with a real slurmdbd in tests/test_slurm_accounting.py.


def test_port_guids_from_the_inventory_csv(lab, tmp_path):
    """The third CSV column carries a host's port GUIDs; a host without them is a located error."""
    mac = lab["nodes"]["secure"]["addressing"]["mac"]
    rows = ["host,mac,port_guids"] + [f"sgpu0{i + 1},{m},{g}" for i, (m, g) in enumerate(zip(mac["macs"], mac["port_guids"]))]
    lab["nodes"]["secure"]["addressing"]["mac"] = {"source": "inventory", "file": "macs.csv"}
    (tmp_path / "macs.csv").write_text("\n".join(rows) + "\n")
    r = _variant(lab, tmp_path)
    conf = build_tree(r, ["network"])[0]["network/opensm/partitions.conf"]
    assert all(f"{g}=full" in conf for g in mac["port_guids"][1].split(";"))
    (tmp_path / "macs.csv").write_text("\n".join(rows[:2] + [rows[2].rsplit(",", 1)[0]]) + "\n")
    bad = validate_file(tmp_path / "lab.yaml", MATRICES, TODAY)
    [f] = [f for f in bad.errors]
    assert f.code == "port-guid-missing" and f.dotted == "nodes.secure.addressing.mac.file" and f.line > 0
    assert "sgpu02" in f.message


# --------------------------------------------------------------------------- mounts: systemd decides

def _without_datasets(lab: dict) -> dict:
    """The lab without its datasets and the two filesystems that hold them (projects, secure-data)."""
    lab.pop("datasets", None)
    for fs in ("projects", "secure-data"):
        lab["filesystems"].pop(fs, None)
    return lab


def _filesystems_lab(lab: dict) -> dict:
    """The lab with a filesystem of every kind that has a source, and the dedicated tenant on a
    Lustre filesystem of its own (dedicated-filesystem). The lab's datasets and their filesystems are left out
    (tests/test_data.py covers their mounts)."""
    _without_datasets(lab)
    lab["filesystems"]["scratch"]["source"] = "/dev/disk/by-label/scratch"
    lab["filesystems"].update({
        "secure-proj": {"kind": "lustre", "mount": "/lustre/secure", "source": "10.0.0.1@o2ib:/secfs",
                        "node_groups": ["secure"], "owner": "secure"},
        "home": {"kind": "nfs", "mount": "/home", "source": "nfs1:/export/home", "node_groups": ["train", "infer", "secure"]},
        "data": {"kind": "xfs", "mount": "/data", "source": "/dev/disk/by-label/data", "node_groups": ["train"]},
        "gp": {"kind": "gpfs", "mount": "/gpfs/fs1", "source": "fs1", "node_groups": ["train"]},
    })
    lab["tenants"]["secure"]["isolation"]["storage"] = "dedicated-filesystem"
    lab["tenants"]["secure"]["storage"]["filesystem"] = "secure-proj"
    lab["tenants"]["vision"]["storage"]["filesystem"] = "data"
    return lab


def test_mount_units_only_on_the_filesystems_node_groups(lab, tmp_path):
    """Each filesystem with a source gets one systemd mount unit per node group that mounts it and
    none elsewhere, so a dedicated filesystem exists only on its owner's nodes; `systemd-analyze
    verify` accepts every unit (it refuses one whose name does not match Where=)."""
    r = _variant(_filesystems_lab(lab), tmp_path)
    d = r.definition
    tree = build_tree(r, ["storage"])[0]
    mounts = {k: v for k, v in tree.items() if k.startswith("storage/mounts/")}
    want = set()
    unit = {"scratch": "scratch.mount", "secure-proj": "lustre-secure.mount", "home": "home.mount",
            "data": "data.mount", "gp": "gpfs-fs1.mount"}
    for fs, f in d.filesystems.items():
        want |= {f"storage/mounts/{g}/{unit[fs]}" for g in f.node_groups}
    assert set(mounts) == want
    owned = [k for k in mounts if k.endswith("/lustre-secure.mount")]
    assert owned == ["storage/mounts/secure/lustre-secure.mount"]  # the owner's nodes, no other group
    expect = {"scratch": ("btrfs", "/dev/disk/by-label/scratch", "defaults", "local-fs.target"),
              "secure-proj": ("lustre", "10.0.0.1@o2ib:/secfs", "_netdev,flock", "remote-fs.target"),
              "home": ("nfs", "nfs1:/export/home", "_netdev,hard", "remote-fs.target"),
              "data": ("xfs", "/dev/disk/by-label/data", "prjquota", "local-fs.target"),  # vision's project quota
              "gp": ("gpfs", "fs1", "_netdev", "remote-fs.target")}
    for fs, (kind, what, options, target) in expect.items():
        text = tree[f"storage/mounts/{d.filesystems[fs].node_groups[0]}/{unit[fs]}"]
        lines = set(text.splitlines())
        assert {f"Type={kind}", f"What={what}", f"Where={d.filesystems[fs].mount}", f"Options={options}",
                f"WantedBy={target}"} <= lines, text
    te = tenancy.enforcement(d)["secure"]
    # its mount on its own nodes, and its quota on that filesystem
    assert not te.gaps and te.layers["storage"].files == ("storage/mounts/secure/lustre-secure.mount",
                                                          "storage/secure-proj/quota.sh")
    assert set(te.layers["storage"].files) <= set(tree)
    _need("systemd-analyze")
    for rel, text in mounts.items():
        folder = tmp_path / "units" / rel.split("/")[2]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / rel.rsplit("/", 1)[1]).write_text(text)
        v = subprocess.run(["systemd-analyze", "verify", str(folder / rel.rsplit("/", 1)[1])],
                           capture_output=True, text=True, timeout=60)
        assert v.returncode == 0 and not v.stderr.strip(), (rel, v.stdout + v.stderr)
    # and the check is real: the same unit under another name is refused
    (tmp_path / "units" / "wrong.mount").write_text(mounts["storage/mounts/train/home.mount"])
    v = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "units" / "wrong.mount")],
                       capture_output=True, text=True, timeout=60)
    assert v.returncode != 0 and "doesn't match unit name" in v.stderr, v.stderr


def test_dedicated_filesystem_without_source_is_a_gap(lab, tmp_path):
    lab = _filesystems_lab(lab)
    del lab["filesystems"]["secure-proj"]["source"]
    bad = validate_file(dump_yaml(lab, tmp_path / "lab.yaml"), MATRICES, TODAY)
    [f] = bad.errors
    assert f.code == "dedicated-not-isolated" and "no `source`" in f.message, f.message


def test_mount_unit_names_are_systemd_escape(tmp_path):
    from clusterdef.quoting import unit_name
    _need("systemd-escape")
    for path in ("/scratch", "/lustre/proj-a", "/a+b/c@d", "/x/.hidden", "/gpfs/fs1/", "/data_1/x.y"):
        r = subprocess.run(["systemd-escape", "--path", "--suffix=mount", path], capture_output=True, text=True)
        assert unit_name(path) == r.stdout.strip(), path


# --------------------------------------------------------------------------- VLAN: systemd-networkd decides

def _vlan_lab(lab: dict) -> dict:
    """The lab's dedicated tenant isolated by VLAN on nodes with two RoCE storage ports."""
    hw = copy.deepcopy(lab["hardware"]["hgx-h100"])
    hw["nics"].append({"name": "ens1f", "kind": "roce", "speed_gbps": 200, "count": 2, "role": "storage"})
    lab["hardware"]["hgx-h100-roce"] = hw
    lab["nodes"]["secure"]["hardware"] = "hgx-h100-roce"
    lab["tenants"]["secure"]["isolation"].update(network="vlan", vlan=2101)
    return lab


# Run systemd-networkd on the rendered files in a network and mount namespace of its own: two veth
# ends named as the node's ports, the files in /etc/systemd/network (a tmpfs there), a read-only
# sysfs of the namespace (networkd then does not wait for udev), debug log to $2.
_NETWORKD = r"""set -e
ip link set lo up
ip link add ens1f0 type veth peer name peer0
ip link add ens1f1 type veth peer name peer1
mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd; }
mkdir -p /run/systemd/netif /run/systemd/network
chown systemd-network: /run/systemd/netif
mount -t tmpfs tmpfs /etc/systemd/network
cp "$1"/* /etc/systemd/network/
mount -t tmpfs tmpfs /usr/lib/systemd/network
mount -t sysfs -o ro sysfs /sys
SYSTEMD_LOG_LEVEL=debug /lib/systemd/systemd-networkd >"$2" 2>&1 &
P=$!
for i in $(seq 50); do grep -q -e 'Could not create stacked netdev' -e 'State changed: configuring -> configured' "$2" \
  && [ $(grep -c -e 'Could not create stacked netdev' -e 'configuring -> configured' "$2") -ge 2 ] && break; sleep 0.1; done
ip -d -o link show
kill $P
"""


def test_vlan_files_loaded_by_systemd_networkd(lab, tmp_path):
    """The rendered systemd-networkd files, loaded by a real systemd-networkd on two ports named
    as the node's: each port matches its .network, asks for the tenant's VLAN as a stacked netdev,
    and networkd loads that .netdev as a VLAN with no unknown key or parse error. Where the kernel
    has 802.1Q, `ip -d link` then shows the VLAN id on each port; this machine's kernel has none
    (`ip link add ... type vlan`: Unknown device type), and networkd says so."""
    r = _variant(_vlan_lab(lab), tmp_path)
    d = r.definition
    tree = build_tree(r, ["network"])[0]
    files = {k.rsplit("/", 1)[1]: v for k, v in tree.items() if k.startswith("network/vlan/")}
    assert all(k.startswith("network/vlan/secure/") for k in tree if k.startswith("network/vlan/"))
    vid = tenancy.vlan(d, "secure")
    assert vid == 2101
    ports = ["ens1f0", "ens1f1"]
    assert set(files) == {f"10-clusterdef-{p}{ext}" for p in ports for ext in (".network", ".2101.netdev", ".2101.network")}
    for p in ports:
        assert f"[VLAN]\nId={vid}\n" in files[f"10-clusterdef-{p}.{vid}.netdev"]
        assert f"VLAN={p}.{vid}\n" in files[f"10-clusterdef-{p}.network"]
    te = tenancy.enforcement(d)["secure"]
    assert not te.gaps and te.layers["network"].files == ("network/vlan/secure/",)
    _need("unshare", "ip")
    if os.geteuid() != 0 or not Path("/lib/systemd/systemd-networkd").exists():
        pytest.skip("systemd-networkd in namespaces of its own needs root and systemd-networkd")
    conf = tmp_path / "conf"
    conf.mkdir()
    for name, text in files.items():
        (conf / name).write_text(text)
    log = tmp_path / "networkd.log"
    run = subprocess.run(["unshare", "-n", "-m", "--propagation", "private", "sh", "-c", _NETWORKD, "sh", str(conf),
                          str(log)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    text = log.read_text()
    for p in ports:
        v = f"{p}.{vid}"
        assert f"{v}: loaded \"vlan\"" in text, text
        assert f"{p}: found matching network '/etc/systemd/network/10-clusterdef-{p}.network'" in text, text
        assert f"{p}: Requested stacked netdev '{v}'" in text, text
    # networkd names the file and line of every key it cannot use (`<file>:<line>: Unknown key ...`)
    assert not re.search(r"10-clusterdef-[^:\s]+:\d+:", text), text
    if "Could not create stacked netdev: Unknown device type" not in text:  # a kernel with 802.1Q
        for p in ports:
            assert re.search(rf"{p}\.{vid}@{p}:.*vlan protocol 802\.1Q id {vid} ", run.stdout), run.stdout


def test_vlan_derived_ids_are_stable_and_in_range(lab, tmp_path):
    lab = _vlan_lab(lab)
    del lab["tenants"]["secure"]["isolation"]["vlan"]
    r = _variant(lab, tmp_path)
    vid = tenancy.vlan(r.definition, "secure")
    assert 2000 <= vid <= 3999 and vid == tenancy.vlan(_variant(lab, tmp_path, "again.yaml").definition, "secure")
    assert f"Id={vid}\n" in build_tree(r, ["network"])[0][f"network/vlan/secure/10-clusterdef-ens1f0.{vid}.netdev"]
    lab["tenants"]["secure"]["isolation"]["vlan"] = 4095
    bad = validate_file(dump_yaml(lab, tmp_path / "lab.yaml"), MATRICES, TODAY)
    assert [f.dotted for f in bad.errors] == ["tenants.secure.isolation.vlan"], [(f.code, f.message) for f in bad.errors]


# --------------------------------------------------------------------------- pam_slurm_adopt: image and role

def test_image_and_role_carry_the_same_pam_slurm_adopt_stack(trees):
    """The lab's node image gets libpam-slurm-adopt and sshd's PAM stack with pam_slurm_adopt last in
    account (required, with the guide's deny actions) and no pam_systemd; the slurm_node_access role
    (roles/, molecule scenario with pamtester) installs the very same files."""
    import jinja2

    from conftest import ROOT

    _, tree = trees["lab"]
    root = "images/gpu-node/"
    assert "Packages=libpam-slurm-adopt\n" in tree[root + "mkosi.conf.d/60-slurm-node-access.conf"]
    pam = tree[root + "mkosi.extra/etc/pam.d/sshd"]
    account = [ln.split() for ln in pam.splitlines() if ln.startswith(("account", "-account", "@include common-account"))]
    assert account[-1][:3] == ["account", "required", "pam_slurm_adopt.so"], account
    assert set(account[-1][3:]) == {"action_no_jobs=deny", "action_unknown=newest", "action_adopt_failure=deny",
                                    "action_generic_failure=deny"}
    assert account[-2] == ["account", "sufficient", "pam_access.so", "accessfile=/etc/security/clusterdef-admins.conf"]
    rules = "\n".join(ln for ln in pam.splitlines() if not ln.startswith("#"))
    assert "pam_systemd" not in rules and "common-session" not in rules
    role = ROOT / "roles" / "slurm_node_access"
    assert (role / "files" / "sshd").read_text() == pam
    admins = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True).from_string(
        (role / "templates" / "clusterdef-admins.conf.j2").read_text()).render(slurm_node_access_admins=["root"])
    assert admins == tree[root + "mkosi.extra/etc/security/clusterdef-admins.conf"]
    # every option the stack passes is one the Slurm guide documents
    guide = Path(__file__).resolve().parents[2] / "shared" / "reference" / "slurm" / "docs" / "pam_slurm_adopt.shtml"
    if guide.is_file():
        text = guide.read_text()
        for opt in account[-1][3:]:
            assert opt.split("=")[0] in text, opt


def test_no_pam_slurm_adopt_without_a_dedicated_tenant(lab, tmp_path):
    lab["tenants"]["secure"]["isolation"] = {"level": "shared"}
    lab["slurm"]["partitions"]["secure"]["allow_accounts"] = []
    tree = build_tree(_variant(lab, tmp_path), ["images"])[0]
    assert not [k for k in tree if "slurm-node-access" in k or k.endswith("pam.d/sshd")]


def test_estate_dedicated_tenants_own_their_su_ports_in_partitions_conf(trees):
    """The estate's dedicated tenants each own a whole Slurm SU: its partition allows only their
    account and no other partition has the SU; partitions.conf lists exactly the HCA port GUIDs
    of the SU's hosts (the MAC inventory's third column) as full members of their PKey, and every
    other host's as full members of the shared partition."""
    import csv

    r, tree = trees["estate"]
    d = r.definition
    owners = {n: t for n, t in d.tenants.items() if t.isolation.level == "dedicated" and t.isolation.node_groups}
    assert len(owners) == 2, sorted(owners)
    rows = list(csv.reader((CLUSTERS / "estate-macs.csv").read_text().splitlines()))[1:]
    guids = {row[0]: row[2].split(";") for row in rows if len(row) > 2 and row[2]}
    conf = tree["network/opensm/partitions.conf"]
    # short lines: OpenSM cuts a long one mid-GUID and falls back to one partition for every port
    assert max(len(ln) for ln in conf.splitlines()) < 512
    lines: dict[str, list[str]] = {}
    for ln in conf.splitlines():
        if ln and not ln.startswith("#"):
            lines.setdefault(ln.split("=", 1)[0], []).append(ln)
    from clusterdef import hostlist

    # every host's port GUIDs are given: the shared partition lists its ports too (OpenSM has no "all but")
    assert set(guids) == {h for g in d.nodes.values() for h in hostlist.names(g.hosts)
                          if any(n.kind == "infiniband" for n in d.hardware[g.hardware].nics)}
    shared = set()
    for ln in lines["shared"]:
        head, members = ln.split(":", 1)
        assert head.strip() == f"shared=0x{tenancy.SHARED_PKEY:04x}, ipoib, indx0"
        shared |= {m.strip().removesuffix("=full") for m in members.rstrip(" ;").split(",")}
    owned_hosts = {h for t in owners.values() for g in t.isolation.node_groups for h in hostlist.names(d.nodes[g].hosts)}
    assert shared == {g for h, gs in guids.items() if h not in owned_hosts for g in gs}
    for name, t in owners.items():
        assert t.isolation.device == "whole-node" and t.isolation.network == "partition-key"
        assert t.isolation.storage == "project-quota" and not tenancy.enforcement(d)[name].gaps
        [su] = t.isolation.node_groups
        hosts = hostlist.names(d.nodes[su].hosts)
        key = f"0x{tenancy.pkey(d, name):04x}"
        full = set()
        for ln in lines[name]:  # one partition in definitions of 16 ports, merged by their PKey
            head, members = ln.split(":", 1)
            assert head.strip() == f"{name}={key}, ipoib, indx0"
            full |= {m.strip().removesuffix("=full") for m in members.rstrip(" ;").split(",")}
        assert full == {g for h in hosts for g in guids[h]} and len(full) == len(hosts) * 8
        parts = [p for p, part in d.slurm.partitions.items() if su in part.node_groups]
        assert parts == [name] and d.slurm.partitions[name].allow_accounts == (t.slurm.account,)
        assert f"PartitionName={name} Nodes={su} " in tree["slurm/slurm.conf"]


def test_an_image_carries_its_groups_mount_units_only_when_they_agree(lab, tmp_path):
    """A stateless node keeps nothing a role installs, so the image carries its groups' mount units
    (pulled in by local-fs.target) when every group booting it has the same; when they differ, none
    go in (one group's filesystem must not be mounted on another's nodes) and validate warns."""
    _without_datasets(lab)  # their filesystems are mounted on infer and secure only: the groups would differ
    lab["filesystems"]["scratch"]["source"] = "/dev/disk/by-label/scratch"
    tree = build_tree(_variant(lab, tmp_path), ["images", "storage"])[0]
    extra = "images/gpu-node/mkosi.extra/etc/systemd/system/"
    assert tree[extra + "scratch.mount"] == tree["storage/mounts/train/scratch.mount"]
    assert tree[extra + "local-fs.target.d/clusterdef-scratch.mount.conf"].endswith("[Unit]\nWants=scratch.mount\n")

    lab["filesystems"]["scratch"]["node_groups"] = ["train"]
    path = dump_yaml(lab, tmp_path / "split.yaml")
    r = validate_file(path, MATRICES, TODAY)
    assert [f.path for f in r.findings if f.code == "image-group-files"] == [("nodes", "train", "image")]
    tree = build_tree(r, ["images", "storage"])[0]
    assert "storage/mounts/train/scratch.mount" in tree and extra + "scratch.mount" not in tree
