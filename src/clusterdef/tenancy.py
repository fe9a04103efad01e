"""Tenancy: what each tenant's isolation claim compiles into, layer by layer.

One pure function, `enforcement`, answers for every tenant and layer (device, network, storage,
observation) which mechanism enforces the claim and in which rendered file, or why nothing can.
The renderers take their decisions from the helpers here (owned node groups, whole-node mode,
partition keys, project ids), `validate` reports every gap as `dedicated-not-isolated` (and a claim
whose files cut the tenant off its storage, `storage_cuts`, as `isolation-cuts-storage`), and
`clusterdef isolation` prints the table, both kinds as not enforced. docs/tenancy.md describes each value.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from .model import Definition
from .model.storage import QUOTA_KINDS
from .quoting import unit_name

LAYERS = ("device", "network", "storage", "observation")
DEFAULT_PKEY = 0x7FFF
# The shared partition's key (network/opensm/partitions.conf): below the range tenants' keys are derived
# from (0x0100-0x7ffe), so only a tenant's given `isolation.pkey` can collide (`pkey-collision`).
SHARED_PKEY = 0x0001


@dataclass(frozen=True)
class Layer:
    claim: str                      # the definition's value ("whole-node", "partition-key", ...)
    mechanisms: tuple[str, ...]     # what enforces it, in words
    files: tuple[str, ...]          # rendered files that carry the mechanism
    gap: str = ""                   # why the claim is not enforced ("" when it is, or nothing was claimed)
    hint: str = ""                  # what to change so it is (the finding's hint; generic when empty)
    cut: str = ""                   # how the claim's files cut the tenant's nodes off storage (`storage_cuts`;
                                    # validate reports it as isolation-cuts-storage, not dedicated-not-isolated)

    @property
    def shortfall(self) -> str:
        """Everything that keeps the claim from holding as rendered: the gap and the storage cut."""
        return "; ".join(x for x in (self.gap, self.cut) if x)


@dataclass(frozen=True)
class TenantEnforcement:
    tenant: str
    level: str
    layers: dict[str, Layer] = field(default_factory=dict)

    @property
    def gaps(self) -> dict[str, str]:
        return {name: layer.shortfall for name, layer in self.layers.items() if layer.shortfall}


def _derived(name: str, low: int, high: int) -> int:
    """A stable number in [low, high] from a tenant name: adding a tenant never renumbers another."""
    return low + zlib.crc32(name.encode()) % (high - low + 1)


def pkey(d: Definition, tenant: str) -> int:
    """The tenant's InfiniBand partition key (15 bits; 0x7fff is the default partition)."""
    t = d.tenants[tenant]
    return t.isolation.pkey if t.isolation.pkey is not None else _derived(tenant, 0x0100, 0x7FFE)


def vlan(d: Definition, tenant: str) -> int:
    """The tenant's VLAN id (802.1Q, 2-4094; 1 is the usual native VLAN): given, or derived from
    the tenant name in 2000-3999. A collision is a finding (`vlan-collision`)."""
    t = d.tenants[tenant]
    return t.isolation.vlan if t.isolation.vlan is not None else _derived(tenant, 2000, 3999)


VLAN_NIC_KINDS = ("ethernet", "roce")
VLAN_NIC_ROLES = ("compute", "storage")


def nic_ports(nic) -> list[str]:
    """The interfaces of a NIC: its name, or name0 .. name<N-1> for a NIC with count N."""
    return [nic.name] if nic.count == 1 else [f"{nic.name}{i}" for i in range(nic.count)]


def vlan_nics(d: Definition, group: str) -> list[tuple[str, str]]:
    """(interface, NIC name) of the Ethernet/RoCE compute and storage NICs of a node group's hardware,
    which a VLAN tenant's traffic uses."""
    g = d.nodes.get(group)
    hw = d.hardware.get(g.hardware) if g else None
    if hw is None:
        return []
    return [(port, nic.name) for nic in hw.nics if nic.kind in VLAN_NIC_KINDS and nic.role in VLAN_NIC_ROLES
            for port in nic_ports(nic)]


def vlan_interfaces(d: Definition, group: str) -> list[str]:
    """The Ethernet/RoCE compute and storage interfaces of a node group's hardware (a NIC with
    count N is N interfaces, name0 .. name<N-1>), which a VLAN tenant's traffic uses."""
    return [port for port, _ in vlan_nics(d, group)]


def nic_fabric(d: Definition, group: str, nic: str) -> str | None:
    """The fabric a node group's NIC is on: the network of the attachment naming it, else for a
    compute NIC the fabric of the group's placement when it is of the NIC's kind; None when the
    definition does not say."""
    g = d.nodes.get(group)
    if g is None:
        return None
    for a in g.attachments.values():
        if a.nic == nic:
            return a.network
    hw = d.hardware.get(g.hardware)
    n = next((x for x in hw.nics if x.name == nic), None) if hw else None
    fabric = g.placement.fabric if g.placement else None
    f = d.network.fabrics.get(fabric) if fabric else None
    return fabric if n and n.role == "compute" and f is not None and f.kind == n.kind else None


def storage_port(d: Definition, group: str) -> str | None:
    """The interface of a node group's storage attachment: the first port of the NIC it names
    (`<nic>` or `<nic>0`); None without one or on a bad reference (validate's attachment-* checks)."""
    g = d.nodes.get(group)
    a = g.attachments.get("storage") if g else None
    hw = d.hardware.get(g.hardware) if g else None
    nic = next((n for n in hw.nics if n.name == a.nic), None) if a and hw else None
    return nic_ports(nic)[0] if nic else None


@dataclass(frozen=True)
class StorageCut:
    """Node groups that the rendered network files leave unable to reach their storage, and the
    tenants whose network claim does it."""
    kind: str                       # the claim that cuts: "partition-key" or "vlan"
    fabric: str                     # the storage fabric
    groups: tuple[str, ...]         # node groups cut off
    tenants: tuple[str, ...]        # tenants whose claim cuts them
    filesystem: str | None = None   # partition-key: the filesystem served over InfiniBand
    port: str | None = None         # vlan: the storage port the tenant's VLAN takes


def storage_cuts(d: Definition) -> list[StorageCut]:
    """Where the rendered network files cut nodes off their storage (validate's isolation-cuts-storage,
    and a gap of the claim in `enforcement`):
    partition-key: a lustre/gpfs/nfs filesystem served over an InfiniBand fabric while tenants are isolated
      by partition key. partitions.conf makes every end port it does not name (the filesystem's servers:
      they are no node group's) a limited member of Default only, and every node a full member of its
      tenant's or the shared key, so no node reaches a server (two limited members cannot talk;
      partition-config.txt, IBA vol. 1 10.9): every group mounting it is cut off.
    vlan: a VLAN tenant's node group whose storage attachment is on an Ethernet/RoCE NIC: its VLAN takes
      every Ethernet/RoCE storage port. The port's 10-clusterdef-<port>.network (the VLAN, no address)
      sorts before 20-clusterdef-storage-<host>.network, and systemd-networkd applies only the first
      .network file that matches a link (systemd.network(5), [Match]), so the storage address and MTU are
      never set; and the switch port carries the tenant's VLAN, not the shared storage network. An
      address on the VLAN interface instead would need the storage servers on every tenant's VLAN with
      one subnet, which no switch routes."""
    out: list[StorageCut] = []
    pkeys = tuple(pkey_tenants(d))
    for fs, x in d.filesystems.items():
        f = d.network.fabrics.get(x.network) if x.network else None
        if pkeys and f is not None and f.kind == "infiniband" and x.kind in ("lustre", "gpfs", "nfs"):
            out.append(StorageCut("partition-key", x.network or "", tuple(g for g in x.node_groups if g in d.nodes),
                                  pkeys, filesystem=fs))
    for t in vlan_tenants(d):
        for g in owned_groups(d, t):
            a = d.nodes[g].attachments.get("storage")
            f = d.network.fabrics.get(a.network) if a else None
            port = storage_port(d, g)
            if a and f is not None and f.kind in VLAN_NIC_KINDS and port in vlan_interfaces(d, g):
                out.append(StorageCut("vlan", a.network, (g,), (t,), port=port))
    return out


def _cut_text(d: Definition, tenant: str) -> str:
    """How the tenant's network claim cuts its own node groups off storage ("" when it does not)."""
    own = set(owned_groups(d, tenant))
    out = []
    for c in storage_cuts(d):
        groups = [g for g in c.groups if g in own]
        if tenant not in c.tenants or not groups:
            continue
        if c.kind == "vlan":
            out.append(f"its VLAN takes storage port {c.port} of node group {', '.join(groups)} (storage fabric "
                       f"{c.fabric}): the storage address is never set there and the port carries only the VLAN")
        else:
            out.append(f"node group(s) {', '.join(groups)} mount filesystem {c.filesystem} over InfiniBand fabric "
                       f"{c.fabric}, whose servers the partition keys leave limited members of Default: "
                       "they cannot reach them")
    return "; ".join(out)


def project_id(d: Definition, tenant: str) -> int:
    """The tenant's project (quota) id on its filesystem."""
    s = d.tenants[tenant].storage
    return s.project_id if s and s.project_id is not None else _derived(tenant, 10_000, 2_000_000_000)


def owned_groups(d: Definition, tenant: str, control_plane: str | None = None) -> tuple[str, ...]:
    groups = d.tenants[tenant].isolation.node_groups
    return tuple(g for g in groups
                 if g in d.nodes and (control_plane is None or d.nodes[g].control_plane == control_plane))


def owner_of_groups(d: Definition) -> dict[str, str]:
    """node group -> the dedicated tenant that owns it (the first claim; a second is a finding)."""
    out: dict[str, str] = {}
    for tname, t in d.tenants.items():
        for g in t.isolation.node_groups:
            out.setdefault(g, tname)
    return out


def mcs_tenants(d: Definition) -> list[str]:
    """Slurm tenants sold whole nodes without nodes of their own: Slurm's MCS keeps other accounts'
    jobs off a node while one of theirs runs there."""
    return [n for n, t in d.tenants.items()
            if t.slurm and t.isolation.device == "whole-node" and not owned_groups(d, n, "slurm")]


def private_data(d: Definition) -> bool:
    """PrivateData in slurm.conf: whenever any tenant is dedicated, nobody sees others' jobs."""
    return any(t.isolation.level == "dedicated" and t.slurm for t in d.tenants.values())


def pkey_tenants(d: Definition) -> list[str]:
    return [n for n, t in d.tenants.items() if t.isolation.network == "partition-key"]


def shared_ib_groups(d: Definition) -> list[str]:
    """Node groups whose hardware has an InfiniBand NIC and that no partition-key tenant owns: their
    ports are the full members of the shared partition (empty without partition-key tenants, when
    Default alone is every port's full key)."""
    tenants = pkey_tenants(d)
    if not tenants:
        return []
    owned = {g for t in tenants for g in owned_groups(d, t)}
    return [name for name, g in d.nodes.items()
            if name not in owned and g.hardware in d.hardware
            and any(n.kind == "infiniband" for n in d.hardware[g.hardware].nics)]


def vlan_tenants(d: Definition) -> list[str]:
    return [n for n, t in d.tenants.items() if t.isolation.network == "vlan"]


def quota_tenants(d: Definition, fs: str) -> list[str]:
    """Tenants with a project quota on filesystem `fs`."""
    return [n for n, t in d.tenants.items()
            if t.storage and t.storage.filesystem == fs and d.filesystems[fs].kind in QUOTA_KINDS]


def kubernetes_owner(d: Definition) -> dict[str, str]:
    """Kubernetes node group -> the whole-node tenant that owns it: those nodes are labelled and
    tainted `clusterdef.dev/tenant=<tenant>:NoSchedule`, and only its ResourceFlavor tolerates them."""
    owners = owner_of_groups(d)
    return {g: t for g, t in owners.items()
            if g in d.nodes and d.nodes[g].control_plane == "kubernetes" and t in d.tenants
            and d.tenants[t].isolation.device == "whole-node"}


def flavor_owner(d: Definition, flavor: str) -> str | None:
    """The tenant whose dedicated nodes a Kueue flavor selects: every one of its groups is owned by
    that tenant (a flavor mixing owners or unowned groups is `tenant-nodes-shared`)."""
    k = d.kubernetes
    if k is None or flavor not in k.kueue.flavors:
        return None
    owner = kubernetes_owner(d)
    owners = {owner.get(g) for g in k.kueue.flavors[flavor].node_groups}
    return owners.pop() if len(owners) == 1 else None


def tenant_flavors(d: Definition, tenant: str) -> tuple[str, ...]:
    """The Kueue flavors of the tenant's queues, in the order it lists them."""
    t, k = d.tenants[tenant], d.kubernetes
    if not t.kubernetes or k is None:
        return ()
    kq = k.kueue
    return tuple(dict.fromkeys(f for q in t.kubernetes.queues if q in kq.queues
                               for f in kq.queues[q].flavor_names() if f in kq.flavors))


def tenant_pod_groups(d: Definition, tenant: str) -> tuple[str, ...]:
    """Node groups the tenant's pods run on: the groups of its queues' flavors."""
    k = d.kubernetes
    if k is None:
        return ()
    return tuple(dict.fromkeys(g for f in tenant_flavors(d, tenant) for g in k.kueue.flavors[f].node_groups
                               if g in d.nodes))


def kubernetes_storage(d: Definition, tenant: str) -> tuple[str, ...] | None:
    """The node groups where the tenant's namespace may mount its filesystem (the filesystem's
    groups its pods run on), or None when its pods cannot reach its filesystem."""
    t = d.tenants[tenant]
    s = t.storage
    if not t.kubernetes or not s or s.filesystem not in d.filesystems:
        return None
    fs = d.filesystems[s.filesystem]
    groups = tuple(g for g in tenant_pod_groups(d, tenant) if g in fs.node_groups)
    return groups or None


def rdma_pkey_attachment(d: Definition, tenant: str) -> bool:
    """The tenant's namespace gets a NetworkAttachmentDefinition carrying its PKey: it is isolated by
    partition key and its pods run on Kubernetes nodes it owns on an InfiniBand fabric."""
    t = d.tenants[tenant]
    if t.kubernetes is None or t.isolation.network != "partition-key":
        return False
    own = set(owned_groups(d, tenant, "kubernetes"))
    for g in tenant_pod_groups(d, tenant):
        p = d.nodes[g].placement
        f = d.network.fabrics.get(p.fabric) if p else None
        if g in own and f is not None and f.kind == "infiniband":
            return True
    return False


def _device(d: Definition, name: str) -> Layer:
    t = d.tenants[name]
    claim = t.isolation.device
    mech, files, gaps = [], [], []
    if claim == "none":
        return Layer(claim, (), ())
    if claim in ("cgroup", "mig") and t.slurm:
        mech.append("Slurm cgroup ConstrainDevices: a job opens only the GPUs it was allocated")
        files.append("slurm/cgroup.conf")
    if claim in ("cgroup", "mig") and t.kubernetes:
        mech.append("GPU device plugin: a pod gets only the GPUs it requested")
        files.append("kubernetes/gpu-operator/values.yaml")
    if claim == "mig":
        k = d.kubernetes
        if t.kubernetes and k and k.gpu_operator.mig_strategy != "none":
            mech.append(f"MIG strategy {k.gpu_operator.mig_strategy} partitions the GPUs")
        else:
            gaps.append("mig needs a Kubernetes namespace and kubernetes.gpu_operator.mig_strategy single or mixed")
        if t.slurm:
            gaps.append("MIG slices are not rendered for Slurm (gres.conf has whole GPUs); use cgroup or whole-node")
    if claim == "whole-node":
        if t.slurm:
            if owned_groups(d, name, "slurm"):
                mech.append("Slurm partitions of its own node groups allow only its account")
                files.append("slurm/slurm.conf")
            else:
                mech.append("Slurm MCS (mcs/account, enforced,select): nodes never hold two accounts' jobs")
                files.append("slurm/slurm.conf")
        if t.kubernetes:
            own = owned_groups(d, name, "kubernetes")
            flavors = tenant_flavors(d, name)
            shared = [f for f in flavors if flavor_owner(d, f) != name]
            if not own:
                gaps.append("whole nodes on Kubernetes need Kubernetes node groups of its own "
                            "(isolation.node_groups), tainted for it; Kubernetes has no MCS")
            elif shared:
                gaps.append(f"its queues also use flavor(s) {', '.join(shared)} on nodes it does not own")
            elif not flavors:
                gaps.append("it owns Kubernetes nodes but none of its queues has a flavor on them")
            else:
                mech.append(f"its Kubernetes nodes ({', '.join(own)}) labelled and tainted "
                            f"clusterdef.dev/tenant={name}:NoSchedule; only its ResourceFlavor(s) "
                            f"{', '.join(flavors)} tolerate the taint, and only its ClusterQueues use them")
                mech.append("ValidatingAdmissionPolicy: no pod in another tenant's namespace tolerates the taint, "
                            "tolerates every taint or names its node")
                files += ["kubernetes/nodes/labels-taints.yaml", "kubernetes/kueue/resourceflavors.yaml",
                          "kubernetes/kueue/clusterqueues.yaml", "kubernetes/admission/dedicated-nodes.yaml"]
    if not t.slurm and not t.kubernetes:
        gaps.append("the tenant has neither a Slurm account nor a namespace, so nothing schedules it")
    return Layer(claim, tuple(mech), tuple(dict.fromkeys(files)), "; ".join(gaps))


def _network(d: Definition, name: str) -> Layer:
    t = d.tenants[name]
    claim = t.isolation.network
    mech, files, gaps = [], [], []
    hint = ""
    if claim == "none":
        return Layer(claim, (), ())
    if claim == "network-policy":
        if t.kubernetes:
            mech.append("default-deny NetworkPolicy (ingress and, when dedicated, egress)")
            files.append(f"kubernetes/tenants/{name}.yaml")
        else:
            gaps.append("network-policy covers Kubernetes pods only and the tenant has no namespace")
        if t.slurm:
            gaps.append("network-policy does not reach Slurm nodes; use partition-key or vlan")
        if t.kubernetes and t.isolation.level == "dedicated" and rdma_reaches_pods(d, name):
            gaps.append("its pods get RDMA on an InfiniBand fabric, which NetworkPolicy does not filter")
            hint = ("set `network: partition-key` (the tenant then needs Kubernetes node groups of its own, "
                    "with HCA port GUIDs), or turn off kubernetes.network_operator.rdma_shared_device_plugin")
    elif claim in ("partition-key", "vlan"):
        groups = owned_groups(d, name)
        if not groups:
            gaps.append(f"{claim} is set per node port, so the tenant needs node groups of its own "
                        "(isolation.node_groups)")
        elif claim == "partition-key":
            mech.append(f"OpenSM partition 0x{pkey(d, name):04x}: only its HCA ports are full members")
            files.append("network/opensm/partitions.conf")
            if t.kubernetes:
                if t.isolation.level == "dedicated":
                    mech.append("default-deny NetworkPolicy, ingress and egress, for its pods' own network")
                    files.append(f"kubernetes/tenants/{name}.yaml")
                if rdma_pkey_attachment(d, name):
                    mech.append(f"NetworkAttachmentDefinition in its namespace carrying PKey 0x{pkey(d, name):04x} "
                                "(ib-sriov, ibKubernetesEnabled)")
                    files.append(f"kubernetes/tenants/{name}.yaml")
                elif rdma_reaches_pods(d, name):
                    gaps.append("its pods get RDMA on nodes it does not own, whose HCA ports are not in its partition")
                    hint = ("give the tenant Kubernetes node groups of its own (isolation.node_groups, with port "
                            "GUIDs) and a flavor on them for its queues")
        else:
            bare = [g for g in groups if not vlan_interfaces(d, g)]
            if bare:
                gaps.append(f"node group(s) {', '.join(bare)} have no Ethernet or RoCE compute/storage NIC "
                            "to carry the tenant's VLAN")
            if t.kubernetes:
                gaps.append("pods get no VLAN of their own (no NetworkAttachmentDefinition for it is rendered)")
            withnics = [g for g in groups if vlan_interfaces(d, g)]
            if withnics:
                mech.append(f"VLAN {vlan(d, name)} on its nodes' Ethernet/RoCE interfaces (systemd-networkd); "
                            "their untagged traffic carries no address")
                files += [f"network/vlan/{g}/" for g in withnics]
    return Layer(claim, tuple(mech), tuple(dict.fromkeys(files)), "; ".join(gaps), hint, _cut_text(d, name))


def _storage(d: Definition, name: str) -> Layer:
    t = d.tenants[name]
    claim = t.isolation.storage
    s = t.storage
    if claim == "none":
        return Layer(claim, (), ())
    if s is None or s.filesystem is None or s.filesystem not in d.filesystems:
        return Layer(claim, (), (), f"{claim} needs storage.filesystem naming one of `filesystems`")
    fs = d.filesystems[s.filesystem]
    mech, files, gaps = [], [], []
    if claim == "project-quota":
        if fs.kind in QUOTA_KINDS:
            mech.append(f"{fs.kind} project quota {s.quota_tib:g} TiB on {fs.mount}/{name} "
                        f"(project {project_id(d, name)})")
            files.append(f"storage/{s.filesystem}/quota.sh")
        else:
            gaps.append(f"{fs.kind} has no project quotas clusterdef can set; use lustre, gpfs, xfs or btrfs")
    else:
        if fs.owner != name:
            gaps.append(f"filesystem `{s.filesystem}` is not owned by the tenant (filesystems.{s.filesystem}.owner)")
        elif fs.source is None:
            gaps.append(f"filesystem `{s.filesystem}` has no `source`, so no mount unit is rendered for it "
                        "(its mounts are the site's, unchecked)")
        else:
            mech.append(f"{fs.mount} mounted ({fs.kind}) only on its node groups "
                        f"{', '.join(fs.node_groups)}: a systemd mount unit each, none elsewhere")
            files += [f"storage/mounts/{g}/{unit_name(fs.mount)}" for g in fs.node_groups if g in d.nodes]
            if fs.kind in QUOTA_KINDS and name in quota_tenants(d, s.filesystem):
                files.append(f"storage/{s.filesystem}/quota.sh")
    if claim in ("project-quota", "dedicated-filesystem") and t.kubernetes and kubernetes_storage(d, name):
        mech.append(f"namespace {t.kubernetes.namespace}: its own StorageClass and a PersistentVolume of "
                    f"{fs.mount}/{name} bound to its claim; ResourceQuota requests.storage {s.quota_tib:g}Ti")
        files.append(f"kubernetes/tenants/{name}.yaml")
    if fs.scratch:
        mech.append(f"files not accessed for {s.scratch_expiry_days} days removed")
        files += [f"storage/{s.filesystem}/scratch-cleanup.sh",
                  f"storage/{s.filesystem}/clusterdef-scratch-{s.filesystem}.timer"]
    return Layer(claim, tuple(mech), tuple(files), "; ".join(gaps))


def _observation(d: Definition, name: str) -> Layer:
    t = d.tenants[name]
    if t.isolation.level != "dedicated":
        return Layer("shared", (), ())
    mech, files = [], []
    if t.slurm:
        mech.append("Slurm PrivateData (jobs, usage, users, accounts, reservations)")
        files.append("slurm/slurm.conf")
    if t.kubernetes:
        mech.append("namespaced RoleBindings only; no cluster-wide read")
        files.append(f"kubernetes/tenants/{name}.yaml")
    return Layer("dedicated", tuple(mech), tuple(files))


def rdma_reaches_pods(d: Definition, tenant: str) -> bool:
    """The tenant's pods can use RDMA: the Network Operator hands out RDMA devices and one of the
    node groups its queues run on sits on an InfiniBand fabric with RDMA."""
    k, t = d.kubernetes, d.tenants[tenant]
    if not k or not t.kubernetes or not k.network_operator.enabled or not k.network_operator.rdma_shared_device_plugin:
        return False
    kq = k.kueue
    groups = {g for q in t.kubernetes.queues if q in kq.queues for f in kq.queues[q].flavor_names()
              if f in kq.flavors for g in kq.flavors[f].node_groups}
    for g in groups:
        p = d.nodes[g].placement if g in d.nodes else None
        f = d.network.fabrics.get(p.fabric) if p else None
        if f is not None and f.kind == "infiniband" and f.rdma:
            return True
    return False


def enforcement(d: Definition) -> dict[str, TenantEnforcement]:
    out = {}
    for name, t in d.tenants.items():
        layers = {"device": _device(d, name), "network": _network(d, name), "storage": _storage(d, name),
                  "observation": _observation(d, name)}
        out[name] = TenantEnforcement(name, t.isolation.level, layers)
    return out


def to_json(table: dict[str, TenantEnforcement]) -> dict:
    return {"tenants": {name: {"level": te.level, "layers": {
        layer: {"claim": lay.claim, "mechanisms": list(lay.mechanisms), "files": list(lay.files),
                "enforced": not lay.shortfall, **({"gap": lay.shortfall} if lay.shortfall else {})}
        for layer, lay in te.layers.items()}} for name, te in table.items()},
        "gaps": sum(len(te.gaps) for te in table.values())}


def to_markdown(table: dict[str, TenantEnforcement]) -> str:
    """A tenant x layer table for a pull request: the claim, what enforces it and where."""
    out = ["| tenant | layer | claim | enforced by | file(s) |", "|---|---|---|---|---|"]
    for name, te in table.items():
        for layer, lay in te.layers.items():
            how = "; ".join(lay.mechanisms) or "-"
            if lay.shortfall:
                how = f"**not enforced**: {lay.shortfall}" + (f" (partly: {how})" if lay.mechanisms else "")
            files = ", ".join(f"`{f}`" for f in lay.files) or "-"
            out.append(f"| {name} ({te.level}) | {layer} | {lay.claim} | {how.replace('|', '/')} | {files} |")
    return "\n".join(out) + "\n"
