"""The tenancy checks (validate/checks_tenancy.py) finding by finding: code, path, message and hint
written out by hand, for the branches the bad-input corpus does not take (unknown references with
no close name, the claim/owner bookkeeping of owned node groups, Kueue flavors mixing owners,
VLAN ids and partition keys given or derived from the name, port GUIDs from a list, discovery or an
inventory, quotas at and over a filesystem's size, mount sources per kind, reservations per control
plane, egress into the BMC network). The mutants of these checks that the corpus and test_checks.py
let through."""

from __future__ import annotations

import copy

from ruamel.yaml import YAML

from clusterdef.errors import Severity
from conftest import CLUSTERS
from test_checks import run

E, W = Severity.ERROR, Severity.WARNING
ISOLATION_CODES = ("dedicated-not-isolated", "isolation-not-enforced")


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def _k8s_group(lab: dict, name: str, hosts: str, first: int) -> None:
    """One more Kubernetes node group of two hosts like `infer`, addresses 10.20.0.<first>.. (no
    placement: it is on no fabric)."""
    g = copy.deepcopy(lab["nodes"]["infer"])
    g.pop("placement")
    g["hosts"] = hosts
    g["addressing"] = {"ipv4_start": f"10.20.0.{first}",
                       "mac": {"source": "list", "macs": [f"52:54:00:20:00:{first}", f"52:54:00:20:00:{first + 1}"]}}
    lab["nodes"][name] = g


# --------------------------------------------------------------------------- tenancy-references

def test_unknown_groups_of_a_filesystem_and_a_tenant(lab, matrix, tmp_path):
    lab["filesystems"]["scratch"]["node_groups"] = ["train", "zzzq"]
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "qqq"]
    result = run(lab, matrix, tmp_path)
    hint = "known node groups: acct, ctl, infer, k8sctl, mgmt, secure, train"
    assert _found(result, "ref-node-group") == [
        (E, ("filesystems", "scratch", "node_groups", 1), "node group `zzzq` is not defined", hint),
        (E, ("tenants", "secure", "isolation", "node_groups", 1), "node group `qqq` is not defined", hint)]
    # the unknown group is not named as unmounted: only the tenant's own known groups are
    assert _found(result, "tenant-filesystem-not-mounted") == [(
        W, ("tenants", "secure", "storage", "filesystem"),
        "tenant `secure` keeps its data on `scratch`, which its own node group(s) secure do not mount",
        "add them to filesystems.scratch.node_groups, or put the tenant on a filesystem its nodes mount")]


def test_unknown_owner_and_filesystem_without_a_close_name(lab, matrix, tmp_path):
    lab["filesystems"]["scratch"]["owner"] = "zzzzz"
    lab["tenants"]["nlp"]["storage"]["filesystem"] = "qqqq"
    result = run(lab, matrix, tmp_path)
    assert _found(result, "ref-tenant") == [
        (E, ("filesystems", "scratch", "owner"), "tenant `zzzzz` is not defined", "known tenants: nlp, secure, vision")]
    assert _found(result, "ref-filesystem") == [
        (E, ("tenants", "nlp", "storage", "filesystem"), "filesystem `qqqq` is not defined",
         "known filesystems: projects, scratch, secure-data")]
    # an unknown owner is not checked for strangers mounting the filesystem
    assert _found(result, "dedicated-filesystem-shared") == []


def test_references_when_nothing_of_the_kind_is_defined(lab, matrix, tmp_path):
    no_tenants = copy.deepcopy(lab)
    no_tenants["tenants"] = {}
    del no_tenants["identity"]["tenant_groups"]
    no_tenants["filesystems"]["scratch"]["owner"] = "x"
    assert _found(run(no_tenants, matrix, tmp_path), "ref-tenant") == [
        (E, ("filesystems", "scratch", "owner"), "tenant `x` is not defined", "define it under `tenants`")]
    del lab["filesystems"]
    del lab["upgrade"]["smoke_tests"]["scratch-mounted"]
    assert _found(run(lab, matrix, tmp_path), "ref-filesystem") == [
        (E, ("tenants", t, "storage", "filesystem"), "filesystem `scratch` is not defined",
         "define it under `filesystems`") for t in ("vision", "nlp", "secure")]


def test_a_tenant_storage_without_a_filesystem_is_no_reference(lab, matrix, tmp_path):
    del lab["tenants"]["nlp"]["storage"]["filesystem"]
    assert run(lab, matrix, tmp_path).findings == []


# --------------------------------------------------------------------------- tenant-enforced

def test_an_unknown_owned_group_anywhere_stops_the_enforcement_check(lab, matrix, tmp_path):
    lab["tenants"]["vision"]["isolation"]["network"] = "partition-key"  # a gap: vision owns no groups
    warning = [(W, ("tenants", "vision", "isolation", "network"),
                "tenant `vision`'s network isolation is not enforced: partition-key is set per node port, so the "
                "tenant needs node groups of its own (isolation.node_groups)",
                "see docs/tenancy.md for what each value needs")]
    assert _found(run(lab, matrix, tmp_path), "isolation-not-enforced") == warning
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "qqq"]
    result = run(lab, matrix, tmp_path)
    assert [f.code for f in result.findings if f.code in ISOLATION_CODES] == []
    assert [f.path for f in result.findings if f.code == "ref-node-group"] == [
        ("tenants", "secure", "isolation", "node_groups", 1)]


def test_a_dedicated_gap_without_a_hint_of_its_own_gets_the_general_one(lab, matrix, tmp_path):
    del lab["tenants"]["secure"]["slurm"]
    lab["tenants"]["secure"]["isolation"]["storage"] = "dedicated-filesystem"
    hint = ("change the claim to one clusterdef can enforce, or give the tenant what it needs (see "
            "docs/tenancy.md)")
    assert _found(run(lab, matrix, tmp_path), "dedicated-not-isolated") == [
        (E, ("tenants", "secure", "isolation", "device"),
         "tenant `secure` is sold as dedicated but its device isolation is not enforced: the tenant has neither a "
         "Slurm account nor a namespace, so nothing schedules it", hint),
        (E, ("tenants", "secure", "isolation", "storage"),
         "tenant `secure` is sold as dedicated but its storage isolation is not enforced: filesystem `scratch` is "
         "not owned by the tenant (filesystems.scratch.owner)", hint)]


def test_a_shared_tenants_gaps_are_warnings_with_the_layers_hint(lab, matrix, tmp_path):
    lab["tenants"]["vision"]["isolation"].update(network="partition-key", device="whole-node", node_groups=["train"])
    lab["nodes"]["train"]["addressing"]["mac"]["port_guids"] = [f"0x0002c90300b1000{i}" for i in range(1, 5)]
    result = run(lab, matrix, tmp_path)
    assert _found(result, "dedicated-not-isolated") == []
    # findings come in the order of their place in the file: `network` is written before `device`
    assert _found(result, "isolation-not-enforced") == [
        (W, ("tenants", "vision", "isolation", "network"),
         "tenant `vision`'s network isolation is not enforced: its pods get RDMA on nodes it does not own, whose "
         "HCA ports are not in its partition",
         "give the tenant Kubernetes node groups of its own (isolation.node_groups, with port GUIDs) and a flavor "
         "on them for its queues"),
        (W, ("tenants", "vision", "isolation", "device"),
         "tenant `vision`'s device isolation is not enforced: whole nodes on Kubernetes need Kubernetes node groups "
         "of its own (isolation.node_groups), tainted for it; Kubernetes has no MCS",
         "see docs/tenancy.md for what each value needs")]


# --------------------------------------------------------------------------- tenant-owned-nodes

def test_a_group_claimed_again_names_its_first_owner(lab, matrix, tmp_path):
    lab["tenants"]["vision"]["isolation"].update(device="whole-node", node_groups=["secure"])
    lab["tenants"]["nlp"]["isolation"].update(device="whole-node", node_groups=["secure"])
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["train", "secure"]
    found = [f for f in _found(run(lab, matrix, tmp_path), "tenant-nodes-shared") if f[1][0] == "tenants"]
    hint = "a node group has at most one owner; split the group"
    assert found == [
        (E, ("tenants", "nlp", "isolation", "node_groups", 0),
         "node group `secure` is claimed by tenants `vision` and `nlp`", hint),
        (E, ("tenants", "secure", "isolation", "node_groups", 1),
         "node group `secure` is claimed by tenants `vision` and `secure`", hint)]


def test_a_tenant_listing_its_group_twice_does_not_share_it(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "secure"]
    found = _found(run(lab, matrix, tmp_path), "tenant-nodes-shared")
    assert [f for f in found if f[1][0] == "tenants"] == []


def test_owned_nodes_need_whole_node_device_isolation(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["isolation"]["device"] = "cgroup"
    assert _found(run(lab, matrix, tmp_path), "owned-nodes-not-whole") == [(
        W, ("tenants", "secure", "isolation", "device"),
        "tenant `secure` owns node groups but its device isolation is `cgroup`",
        "set `device: whole-node`: owning nodes is what whole-node means")]
    lab["tenants"]["secure"]["isolation"]["node_groups"] = []
    assert _found(run(lab, matrix, tmp_path), "owned-nodes-not-whole") == []


def test_a_partition_allowing_more_accounts_than_the_owners(lab, matrix, tmp_path):
    lab["slurm"]["partitions"]["secure"]["allow_accounts"] = ["secure", "nlp"]
    assert _found(run(lab, matrix, tmp_path), "tenant-nodes-shared") == [(
        E, ("slurm", "partitions", "secure", "allow_accounts"),
        "partition `secure` includes node group `secure`, owned by tenant `secure`, but allows secure, nlp",
        "set `allow_accounts: [secure]`, or leave `secure` out of the partition")]


def test_a_group_owned_by_a_tenant_without_slurm_is_skipped_not_the_partition(lab, matrix, tmp_path):
    del lab["tenants"]["vision"]["slurm"]
    lab["tenants"]["vision"]["isolation"].update(device="whole-node", node_groups=["secure"])
    lab["tenants"]["secure"]["isolation"]["node_groups"] = []
    lab["tenants"]["nlp"]["isolation"].update(device="whole-node", node_groups=["train"])
    lab["slurm"]["partitions"]["train"]["node_groups"] = ["secure", "train"]
    lab["slurm"]["partitions"]["train"]["allow_accounts"] = ["nlp"]
    lab["slurm"]["partitions"]["debug"]["allow_accounts"] = ["nlp"]
    assert _found(run(lab, matrix, tmp_path), "tenant-nodes-shared") == []
    lab["slurm"]["partitions"]["train"]["allow_accounts"] = []
    assert _found(run(lab, matrix, tmp_path), "tenant-nodes-shared") == [(
        E, ("slurm", "partitions", "train", "allow_accounts"),
        "partition `train` includes node group `train`, owned by tenant `nlp`, but allows every account",
        "set `allow_accounts: [nlp]`, or leave `train` out of the partition")]


def _flavor_lab(lab: dict) -> dict:
    """The lab with two more Kubernetes node groups, infer2 and infer3, in flavor h100."""
    _k8s_group(lab, "infer2", "kgpu[03-04]", 33)
    _k8s_group(lab, "infer3", "kgpu[05-06]", 35)
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "infer2", "infer3"]
    return lab


def _flavor_found(lab, matrix, tmp_path):
    return [f for f in _found(run(lab, matrix, tmp_path), "tenant-nodes-shared") if f[1][0] == "kubernetes"]


FLAVOR_HINT = "give the dedicated tenant a flavor of its own groups only, used only by its queues"


def test_a_flavor_of_an_owned_group_and_unowned_ones(lab, matrix, tmp_path):
    lab = _flavor_lab(lab)
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "infer"]
    assert _flavor_found(lab, matrix, tmp_path) == [(
        E, ("kubernetes", "kueue", "flavors", "h100", "node_groups"),
        "flavor `h100` includes node groups owned by tenant(s) secure and unowned infer2, infer3", FLAVOR_HINT)]


def test_a_flavor_of_groups_of_two_owners(lab, matrix, tmp_path):
    lab = _flavor_lab(lab)
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "infer2"]
    lab["tenants"]["vision"]["isolation"].update(device="whole-node", node_groups=["infer2"])
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "infer"]
    assert _flavor_found(lab, matrix, tmp_path) == [(
        E, ("kubernetes", "kueue", "flavors", "h100", "node_groups"),
        "flavor `h100` includes node groups owned by tenant(s) secure, vision and groups of another owner",
        FLAVOR_HINT)]
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "infer2", "infer3"]
    assert _flavor_found(lab, matrix, tmp_path) == [(
        E, ("kubernetes", "kueue", "flavors", "h100", "node_groups"),
        "flavor `h100` includes node groups owned by tenant(s) secure, vision and unowned infer3", FLAVOR_HINT)]


def test_a_flavor_of_one_owners_groups_only_is_not_shared(lab, matrix, tmp_path):
    lab = _flavor_lab(lab)
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "infer2"]
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "infer", "infer2"]
    assert _flavor_found(lab, matrix, tmp_path) == []


def _owned_flavor_lab(lab: dict) -> dict:
    """secure owns infer (flavor h100) and infer2 (flavor own2); nlp owns infer3 (flavor own3)."""
    _k8s_group(lab, "infer2", "kgpu[03-04]", 33)
    _k8s_group(lab, "infer3", "kgpu[05-06]", 35)
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "infer", "infer2"]
    lab["tenants"]["nlp"]["isolation"].update(device="whole-node", node_groups=["infer3"])
    flavors = lab["kubernetes"]["kueue"]["flavors"]
    flavors["own2"] = {"node_groups": ["infer2"]}
    flavors["own3"] = {"node_groups": ["infer3"]}
    return lab


def _queue_found(lab, matrix, tmp_path):
    return _found(run(lab, matrix, tmp_path), "dedicated-flavor-shared")


def _queue_finding(queue: str, tenants: str, flavor: str, owner: str):
    return (E, ("kubernetes", "kueue", "queues", queue, "flavor"),
            f"queue `{queue}` of tenant(s) {tenants} uses flavor `{flavor}`, whose nodes tenant `{owner}` owns: "
            f"their pods would be admitted onto `{owner}`'s nodes",
            f"give `{queue}` a flavor on nodes `{owner}` does not own, or list the queue only under tenant `{owner}`")


def test_queues_of_other_tenants_on_a_dedicated_flavor(lab, matrix, tmp_path):
    lab = _owned_flavor_lab(lab)
    queues = lab["kubernetes"]["kueue"]["queues"]
    # a queue on an unknown flavor first (ref-flavor reports it), one no tenant lists, then shared ones
    lab["kubernetes"]["kueue"]["queues"] = {
        "lost": {"flavor": "nope", "nominal_gpus": 8}, "orphan": {"flavor": "own2", "nominal_gpus": 8},
        **queues}
    lab["tenants"]["secure"]["kubernetes"] = {"namespace": "secure", "queues": ["nlp-serve"]}
    lab["tenants"]["vision"]["kubernetes"]["queues"] = ["vision-serve", "nlp-serve"]
    assert _queue_found(lab, matrix, tmp_path) == [
        _queue_finding("vision-serve", "vision", "h100", "secure"),
        _queue_finding("nlp-serve", "vision, nlp", "h100", "secure")]


def test_a_queue_on_a_flavor_of_two_owners_names_each_owner(lab, matrix, tmp_path):
    lab = _owned_flavor_lab(lab)
    lab["kubernetes"]["kueue"]["flavors"]["mixed"] = {"node_groups": ["infer3", "infer2"]}
    lab["kubernetes"]["kueue"]["queues"] = {
        "mixed-q": {"flavor": "mixed", "nominal_gpus": 8}, "own3-q": {"flavor": "own3", "nominal_gpus": 8}}
    lab["tenants"]["vision"]["kubernetes"]["queues"] = ["mixed-q"]
    lab["tenants"]["nlp"]["kubernetes"]["queues"] = ["mixed-q", "own3-q"]
    assert _queue_found(lab, matrix, tmp_path) == [
        _queue_finding("mixed-q", "vision", "mixed", "nlp"),
        _queue_finding("mixed-q", "vision, nlp", "mixed", "secure")]


# --------------------------------------------------------------------------- tenant-vlans

VLAN_HINT = "set `isolation.vlan` of one of them to another id (2-4094)"


def test_a_vlan_id_derived_from_the_name_collides(lab, matrix, tmp_path):
    # nlp's derived VLAN id is 3071 (crc32 of the name in 2000-3999)
    lab["tenants"]["vision"]["isolation"].update(network="vlan", vlan=3071)
    lab["tenants"]["nlp"]["isolation"]["network"] = "vlan"
    lab["tenants"]["secure"]["isolation"].update(network="vlan", vlan=3071)
    assert _found(run(lab, matrix, tmp_path), "vlan-collision") == [
        (E, ("tenants", "nlp", "isolation", "network"),
         "tenants `vision` and `nlp` have the same VLAN id 3071 (derived from the name)", VLAN_HINT),
        (E, ("tenants", "secure", "isolation", "vlan"),
         "tenants `vision` and `secure` have the same VLAN id 3071", VLAN_HINT)]


def test_vlan_ids_apart_do_not_collide(lab, matrix, tmp_path):
    lab["tenants"]["vision"]["isolation"].update(network="vlan", vlan=3072)
    lab["tenants"]["nlp"]["isolation"]["network"] = "vlan"
    lab["tenants"]["secure"]["isolation"].update(network="vlan", vlan=3070)
    assert _found(run(lab, matrix, tmp_path), "vlan-collision") == []


# --------------------------------------------------------------------------- tenant-partition-keys

PKEY_HINT = "set `isolation.pkey` of one of them to another value (0x0002-0x7ffe)"


def test_partition_keys_collide_with_the_first_holder(lab, matrix, tmp_path):
    for t in ("vision", "nlp"):
        lab["tenants"][t]["isolation"].update(network="partition-key", pkey=0xAB)
    lab["tenants"]["secure"]["isolation"]["pkey"] = 0xAB
    assert _found(run(lab, matrix, tmp_path), "pkey-collision") == [
        (E, ("tenants", "nlp", "isolation", "pkey"), "tenants `vision` and `nlp` have the same partition key 0x00ab",
         PKEY_HINT),
        (E, ("tenants", "secure", "isolation", "pkey"),
         "tenants `vision` and `secure` have the same partition key 0x00ab", PKEY_HINT)]


def test_a_derived_partition_key_collides(lab, matrix, tmp_path):
    # secure's derived key is 0x639e (crc32 of the name in 0x0100-0x7ffe)
    lab["tenants"]["nlp"]["isolation"].update(network="partition-key", pkey=0x639E)
    assert _found(run(lab, matrix, tmp_path), "pkey-collision") == [
        (E, ("tenants", "secure", "isolation", "pkey"),
         "tenants `nlp` and `secure` have the same partition key 0x639e", PKEY_HINT)]
    lab["tenants"]["nlp"]["isolation"]["pkey"] = 0x639F
    assert _found(run(lab, matrix, tmp_path), "pkey-collision") == []


LIST_HINT = "give each host its HCA port GUIDs (ibstat), `;` between ports, in hostlist order"


def test_more_or_fewer_port_guid_entries_than_hosts(lab, matrix, tmp_path):
    mac = lab["nodes"]["secure"]["addressing"]["mac"]
    guids = list(mac["port_guids"])
    path = ("nodes", "secure", "addressing", "mac", "port_guids")
    mac["port_guids"] = guids + ["0x0002c90300a30001"]
    assert _found(run(lab, matrix, tmp_path), "port-guid-missing") == [(
        E, path, "node group `secure` of tenant `secure` (partition key) has 3 port GUID entries for 2 hosts",
        LIST_HINT)]
    mac["port_guids"] = guids[:1]
    assert _found(run(lab, matrix, tmp_path), "port-guid-missing") == [(
        E, path, "node group `secure` of tenant `secure` (partition key) has 1 port GUID entries for 2 hosts",
        LIST_HINT)]


def test_every_owned_group_is_checked_for_port_guids(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "infer"]
    lab["nodes"]["secure"]["addressing"]["mac"]["port_guids"] = []
    lab["nodes"]["infer"]["addressing"]["mac"]["port_guids"] = []
    assert _found(run(lab, matrix, tmp_path), "port-guid-missing") == [
        (E, ("nodes", "infer", "addressing", "mac", "port_guids"),
         "node group `infer` of tenant `secure` (partition key) has 0 port GUID entries for 2 hosts", LIST_HINT),
        (E, ("nodes", "secure", "addressing", "mac", "port_guids"),
         "node group `secure` of tenant `secure` (partition key) has 0 port GUID entries for 2 hosts", LIST_HINT)]


def test_a_discovered_group_has_no_port_guids(lab, matrix, tmp_path):
    lab["nodes"]["secure"]["addressing"]["mac"] = {"source": "discover"}
    assert _found(run(lab, matrix, tmp_path), "port-guid-missing") == [(
        E, ("nodes", "secure", "addressing", "mac"),
        "node group `secure` of tenant `secure` (partition key) discovers its nodes, so its port GUIDs are unknown "
        "and no "
        "partition can list them",
        "use a MAC inventory with a third column of port GUIDs, or a list with `port_guids`")]


def test_inventory_hosts_without_port_guids(lab, matrix, tmp_path):
    lab["nodes"]["secure"]["addressing"]["mac"] = {"source": "inventory", "file": "macs.csv"}
    (tmp_path / "macs.csv").write_text("host,mac\nsgpu01,52:54:00:20:00:41\nsgpu02,52:54:00:20:00:42\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), "port-guid-missing") == [(
        E, ("nodes", "secure", "addressing", "mac", "file"),
        "macs.csv has no port GUIDs (third column) for 2 host(s) of node group `secure`, e.g. sgpu01",
        "add the HCA port GUIDs as a third column, `;` between ports")]
    (tmp_path / "macs.csv").write_text("host,mac,port_guids\nsgpu01,52:54:00:20:00:41,0x0002c90300a10001\n"
                                       "sgpu02,52:54:00:20:00:42,0x0002c90300a20001\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), "port-guid-missing") == []
    (tmp_path / "macs.csv").write_text("host,mac,port_guids\nsgpu01,52:54:00:20:00:41,0x0002c90300a10001\n"
                                       "sgpu02,52:54:00:20:00:42\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), "port-guid-missing") == [(
        E, ("nodes", "secure", "addressing", "mac", "file"),
        "macs.csv has no port GUIDs (third column) for 1 host(s) of node group `secure`, e.g. sgpu02",
        "add the HCA port GUIDs as a third column, `;` between ports")]


def test_a_tenant_key_equal_to_the_shared_partitions_collides(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["isolation"]["pkey"] = 0x0001
    assert _found(run(lab, matrix, tmp_path), "pkey-collision") == [
        (E, ("tenants", "secure", "isolation", "pkey"),
         "tenant `secure` has partition key 0x0001, the shared partition's (network/opensm/partitions.conf): its "
         "nodes would talk to every shared node", PKEY_HINT)]


def test_shared_infiniband_groups_need_port_guids_once_a_tenant_has_a_partition_key(lab, matrix, tmp_path):
    """The shared partition lists its ports by GUID (OpenSM cannot say "all ports but the tenant's")."""
    lab["nodes"]["train"]["addressing"]["mac"]["port_guids"] = []
    lab["nodes"]["infer"]["addressing"]["mac"] = {"source": "inventory", "file": "macs.csv"}
    (tmp_path / "macs.csv").write_text("host,mac\nkgpu01,52:54:00:20:00:31\nkgpu02,52:54:00:20:00:32\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), "port-guid-missing") == [
        (E, ("nodes", "train", "addressing", "mac", "port_guids"),
         "node group `train` (InfiniBand: its ports are the shared partition's) has 0 port GUID entries for 4 hosts",
         LIST_HINT),
        (E, ("nodes", "infer", "addressing", "mac", "file"),
         "macs.csv has no port GUIDs (third column) for 2 host(s) of node group `infer` (InfiniBand: its ports are "
         "the shared partition's), e.g. kgpu01", "add the HCA port GUIDs as a third column, `;` between ports")]
    lab["tenants"]["secure"]["isolation"]["network"] = "none"  # no partition-key tenant: no partitions.conf
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), "port-guid-missing") == []


# --------------------------------------------------------------------------- tenant-storage

NFS_HINT = "put the tenant on a lustre, gpfs, xfs or btrfs filesystem, or enforce the quota on the NFS server"


def test_quotas_on_nfs_after_a_tenant_without_storage(lab, matrix, tmp_path):
    lab["filesystems"]["scratch"].update(kind="nfs", source="nfs1:/export/scratch")
    del lab["tenants"]["vision"]["storage"]
    lab["tenants"]["nlp"]["storage"]["quota_tib"] = 2.5
    assert _found(run(lab, matrix, tmp_path), "quota-unsupported-filesystem") == [
        (E, ("tenants", "nlp", "storage", "filesystem"),
         "tenant `nlp` has a 2.5 TiB quota on `scratch`, a nfs filesystem, where clusterdef cannot set project "
         "quotas", NFS_HINT),
        (E, ("tenants", "secure", "storage", "filesystem"),
         "tenant `secure` has a 10 TiB quota on `scratch`, a nfs filesystem, where clusterdef cannot set project "
         "quotas", NFS_HINT)]


def test_a_tenant_on_an_unknown_filesystem_does_not_end_the_storage_check(lab, matrix, tmp_path):
    lab["filesystems"]["scratch"]["size_tib"] = 59
    lab["tenants"]["vision"]["storage"]["filesystem"] = "nope"
    assert _found(run(lab, matrix, tmp_path), "quota-over-filesystem") == [(
        E, ("filesystems", "scratch", "size_tib"), "tenants' quotas on `scratch` total 60 TiB, above its size of 59 TiB",
        "lower the quotas or grow the filesystem (quotas are promises)")]


def test_a_gpfs_quota_needs_the_device_name(lab, matrix, tmp_path):
    lab["filesystems"]["scratch"]["kind"] = "gpfs"
    del lab["tenants"]["vision"]["storage"]
    finding = (E, ("filesystems", "scratch", "source"),
               "filesystem `scratch` (gpfs) needs `source`, the device mmsetquota names", "add `source: <gpfs device>`")
    assert _found(run(lab, matrix, tmp_path), "missing-field") == [finding]  # once, however many tenants
    lab["filesystems"]["scratch"]["source"] = "fs1"
    assert _found(run(lab, matrix, tmp_path), "missing-field") == []
    lab["filesystems"]["scratch"].update(kind="xfs", source=None)
    del lab["filesystems"]["scratch"]["source"]
    assert _found(run(lab, matrix, tmp_path), "missing-field") == []


def _quota_lab(lab: dict, size) -> dict:
    """Quotas of 20.25 + 50 + 10 = 80.25 TiB on scratch; a second filesystem `data` without quotas."""
    lab["tenants"]["vision"]["storage"]["quota_tib"] = 20.25
    lab["filesystems"]["scratch"]["size_tib"] = size
    lab["filesystems"]["data"] = {"kind": "xfs", "mount": "/data", "node_groups": ["train"], "size_tib": 1}
    return lab


def test_quotas_at_and_over_the_filesystems_size(lab, matrix, tmp_path):
    assert _found(run(_quota_lab(lab, 80.25), matrix, tmp_path), "quota-over-filesystem") == []
    assert _found(run(_quota_lab(lab, 80.2), matrix, tmp_path), "quota-over-filesystem") == [(
        E, ("filesystems", "scratch", "size_tib"),
        "tenants' quotas on `scratch` total 80.25 TiB, above its size of 80.2 TiB",
        "lower the quotas or grow the filesystem (quotas are promises)")]
    lab = _quota_lab(lab, 1)
    del lab["filesystems"]["scratch"]["size_tib"]
    assert _found(run(lab, matrix, tmp_path), "quota-over-filesystem") == []


def test_quotas_total_per_filesystem(lab, matrix, tmp_path):
    lab["filesystems"]["data"] = {"kind": "xfs", "mount": "/data", "node_groups": ["train", "infer", "secure"],
                                  "size_tib": 50}
    lab["tenants"]["nlp"]["storage"]["filesystem"] = "data"
    lab["filesystems"]["scratch"]["size_tib"] = 30
    assert _found(run(lab, matrix, tmp_path), "quota-over-filesystem") == []
    lab["filesystems"]["scratch"]["size_tib"] = 29
    lab["filesystems"]["data"]["size_tib"] = 49
    assert [f[2] for f in _found(run(lab, matrix, tmp_path), "quota-over-filesystem")] == [
        "tenants' quotas on `scratch` total 30 TiB, above its size of 29 TiB",
        "tenants' quotas on `data` total 50 TiB, above its size of 49 TiB"]


def test_every_unmounted_owned_group_is_named(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["isolation"]["node_groups"] = ["secure", "infer", "train"]
    lab["filesystems"]["scratch"]["node_groups"] = ["infer"]
    assert _found(run(lab, matrix, tmp_path), "tenant-filesystem-not-mounted") == [(
        W, ("tenants", "secure", "storage", "filesystem"),
        "tenant `secure` keeps its data on `scratch`, which its own node group(s) secure, train do not mount",
        "add them to filesystems.scratch.node_groups, or put the tenant on a filesystem its nodes mount")]


def test_a_dedicated_filesystem_mounted_elsewhere(lab, matrix, tmp_path):
    lab["filesystems"] = {
        "free": {"kind": "xfs", "mount": "/free", "node_groups": ["train"]},
        "lost": {"kind": "xfs", "mount": "/lost", "node_groups": ["train"], "owner": "nobody"},
        **lab["filesystems"]}
    lab["filesystems"]["scratch"]["owner"] = "secure"
    assert _found(run(lab, matrix, tmp_path), "dedicated-filesystem-shared") == [(
        E, ("filesystems", "scratch", "node_groups"),
        "filesystem `scratch` is owned by tenant `secure` but mounted on train, infer",
        "mount a dedicated filesystem only on its owner's node groups")]
    lab["filesystems"]["scratch"]["node_groups"] = ["secure"]
    assert _found(run(lab, matrix, tmp_path), "dedicated-filesystem-shared") == []


# --------------------------------------------------------------------------- filesystem-source

SOURCES = {  # kind: (a source it mounts, one it does not, the hint)
    "lustre": ("10.0.0.1@o2ib,10.0.0.2@o2ib:/fs1", "10.0.0.1@o2ib:/fs1/sub",
               "write <MGS NIDs>:/<fsname>, e.g. 10.0.0.1@o2ib:/fs1"),
    "nfs": ("nfs1:/export/home", "nfs1:export", "write <server>:/<export>, e.g. nfs1:/export/home"),
    "gpfs": ("fs1", "/dev/fs1", "write the GPFS device name, e.g. fs1"),
    "xfs": ("/dev/disk/by-label/scratch", "dev/sdb", "write the block device, e.g. /dev/disk/by-label/scratch"),
    "btrfs": ("/dev/nvme0n1", "/dev/", "write the block device, e.g. /dev/disk/by-label/scratch"),
}


def test_mount_sources_per_kind(lab, matrix, tmp_path):
    fs = lab["filesystems"]["scratch"]
    for kind, (good, bad, hint) in SOURCES.items():
        fs.update(kind=kind, source=good)
        assert _found(run(lab, matrix, tmp_path), "filesystem-source-invalid") == [], kind
        fs["source"] = bad
        assert _found(run(lab, matrix, tmp_path), "filesystem-source-invalid") == [(
            E, ("filesystems", "scratch", "source"),
            f"`{bad}` is not what a mount of {kind} names, so its mount unit would not mount", hint)], kind


# --------------------------------------------------------------------------- tenant-capacity-per-control-plane

def test_reservations_of_slurm_only_and_kubernetes_only_tenants(lab, matrix, tmp_path):
    """The lab's Slurm owns 48 GPUs (6 nodes), Kubernetes 16 (2 nodes). Each tenant's reservation counts
    on a plane for what it can hold there (the capacity ledger): nlp on Kubernetes only holds its queue's
    8 nominal GPUs, whatever it reserves (the rest is tenant-reserved-unreachable, tests/test_capacity.py)."""
    lab["tenants"]["vision"]["quota"]["reserved_gpus"] = 0
    del lab["tenants"]["nlp"]["slurm"]
    lab["tenants"]["nlp"]["quota"]["reserved_gpus"] = 16
    lab["tenants"]["secure"]["quota"]["reserved_gpus"] = 48
    assert _found(run(lab, matrix, tmp_path), "quota-reserved-over-capacity") == []
    lab["tenants"]["nlp"]["quota"]["reserved_gpus"] = 17
    lab["tenants"]["secure"]["quota"]["reserved_gpus"] = 47
    result = run(lab, matrix, tmp_path)
    assert _found(result, "quota-reserved-over-capacity") == []
    assert [f.path for f in result.findings if f.code == "tenant-reserved-unreachable"] == [
        ("tenants", "nlp", "quota", "reserved_gpus")]
    lab["tenants"]["nlp"]["quota"]["reserved_gpus"] = 15
    lab["tenants"]["secure"]["quota"]["reserved_gpus"] = 49
    assert _found(run(lab, matrix, tmp_path), "quota-reserved-over-capacity") == [(
        E, ("tenants",), "tenants reserve 49 GPUs on slurm but slurm owns 48",
        "lower their reservations or give slurm more nodes")]


def test_tenants_on_both_control_planes_are_not_counted_per_control_plane(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["quota"]["reserved_gpus"] = 0
    lab["tenants"]["nlp"]["quota"]["reserved_gpus"] = 17
    lab["tenants"]["vision"]["quota"]["reserved_gpus"] = 0
    assert _found(run(lab, matrix, tmp_path), "quota-reserved-over-capacity") == []


def test_unknown_hardware_skips_the_capacity_check(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["hardware"] = "nope"
    lab["tenants"]["vision"]["quota"]["reserved_gpus"] = 0
    del lab["tenants"]["nlp"]["slurm"]
    lab["tenants"]["nlp"]["quota"]["reserved_gpus"] = 1
    result = run(lab, matrix, tmp_path)
    assert [f.path for f in result.findings if f.code == "ref-hardware"] == [("nodes", "infer", "hardware")]
    assert _found(result, "quota-reserved-over-capacity") == []


# --------------------------------------------------------------------------- management-exposed

def test_a_declared_network_inside_the_bmc_network(matrix, tmp_path):
    data = YAML(typ="safe").load((CLUSTERS / "gb200.yaml").read_text())
    data["tenants"]["llm"]["kubernetes"]["egress_cidrs"] = ["10.8.0.0/16", "10.31.0.128/25", "10.31.0.0/30"]
    assert _found(run(data, matrix, tmp_path), "management-exposed") == [
        (E, ("tenants", "llm", "kubernetes", "egress_cidrs", i),
         f"tenant `llm`'s pods may reach {cidr}, inside the BMC network 10.31.0.0/24 (network.management): its "
         "NetworkPolicy egress cannot cut it out",
         "tenants never reach BMCs: remove the network from egress_cidrs, or name the service's own subnet "
         "outside network.management") for i, cidr in ((1, "10.31.0.128/25"), (2, "10.31.0.0/30"))]


def test_a_bmc_network_holding_the_default_egress(matrix, tmp_path):
    """A shared tenant's default egress 0.0.0.0/0 cannot be cut from a BMC network that is all of it
    (management-subnet refuses that network too): located at the tenant's kubernetes section."""
    data = YAML(typ="safe").load((CLUSTERS / "gb200.yaml").read_text())
    data["network"]["management"]["subnet"] = "0.0.0.0/0"
    assert _found(run(data, matrix, tmp_path), "management-exposed") == [(
        E, ("tenants", "llm", "kubernetes"),
        "tenant `llm`'s pods may reach 0.0.0.0/0, inside the BMC network 0.0.0.0/0 (network.management): its "
        "NetworkPolicy egress cannot cut it out",
        "tenants never reach BMCs: remove the network from egress_cidrs, or name the service's own subnet "
        "outside network.management")]
