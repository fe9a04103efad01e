"""Tenancy enforced, not declared: every claim has the mechanism that enforces it (tenancy.py),
owned nodes are owned by one tenant, partition keys and quotas are well-formed, and capacity is
checked per control plane."""

from __future__ import annotations

import re
from typing import Iterable

from .. import tenancy
from ..errors import Finding, error, warning
from ..model.storage import QUOTA_KINDS
from .checks_refs import _ref
from .registry import Context, check


@check("tenancy-references")
def tenancy_references(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    for fname, f in d.filesystems.items():
        for i, g in enumerate(f.node_groups):
            if g not in d.nodes:
                yield _ref("ref-node-group", ("filesystems", fname, "node_groups", i), "node group", g,
                           d.nodes, "nodes")
        if f.owner is not None and f.owner not in d.tenants:
            yield _ref("ref-tenant", ("filesystems", fname, "owner"), "tenant", f.owner, d.tenants, "tenants")
    for tname, t in d.tenants.items():
        for i, g in enumerate(t.isolation.node_groups):
            if g not in d.nodes:
                yield _ref("ref-node-group", ("tenants", tname, "isolation", "node_groups", i), "node group", g,
                           d.nodes, "nodes")
        s = t.storage
        if s and s.filesystem is not None and s.filesystem not in d.filesystems:
            yield _ref("ref-filesystem", ("tenants", tname, "storage", "filesystem"), "filesystem", s.filesystem,
                       d.filesystems, "filesystems")


@check("tenant-enforced")
def tenant_enforced(ctx: Context) -> Iterable[Finding]:
    """dedicated-not-isolated from what will be rendered: a claim without its mechanism is an error
    for a dedicated tenant (a warning for a shared one, where it is a promise nobody sold)."""
    d = ctx.definition
    if any(g not in d.nodes for t in d.tenants.values() for g in t.isolation.node_groups):
        return  # tenancy-references reports the unknown group
    for tname, te in tenancy.enforcement(d).items():
        # a claim that cuts the tenant off its storage is isolation-cuts-storage's (checks_fabric), not a gap here
        for layer, gap in ((n, lay.gap) for n, lay in te.layers.items() if lay.gap):
            path = ("tenants", tname, "isolation", layer if layer != "observation" else "level")
            hint = te.layers[layer].hint
            if te.level == "dedicated":
                yield error("dedicated-not-isolated", path, f"tenant `{tname}` is sold as dedicated but its "
                            f"{layer} isolation is not enforced: {gap}",
                            hint or "change the claim to one clusterdef can enforce, or give the tenant what it "
                            "needs (see docs/tenancy.md)")
            else:
                yield warning("isolation-not-enforced", path, f"tenant `{tname}`'s {layer} isolation is not "
                              f"enforced: {gap}", hint or "see docs/tenancy.md for what each value needs")


@check("tenant-owned-nodes")
def tenant_owned_nodes(ctx: Context) -> Iterable[Finding]:
    """Owned node groups belong to one tenant, and no other tenant's partition or flavor reaches them."""
    d = ctx.definition
    owner: dict[str, str] = {}
    for tname, t in d.tenants.items():
        for i, g in enumerate(t.isolation.node_groups):
            if g in owner and owner[g] != tname:
                yield error("tenant-nodes-shared", ("tenants", tname, "isolation", "node_groups", i),
                            f"node group `{g}` is claimed by tenants `{owner[g]}` and `{tname}`",
                            "a node group has at most one owner; split the group")
            owner.setdefault(g, tname)
        if t.isolation.node_groups and t.isolation.device != "whole-node":
            yield warning("owned-nodes-not-whole", ("tenants", tname, "isolation", "device"),
                          f"tenant `{tname}` owns node groups but its device isolation is `{t.isolation.device}`",
                          "set `device: whole-node`: owning nodes is what whole-node means")
    if d.slurm:
        for pname, p in d.slurm.partitions.items():
            for g in p.node_groups:
                owning = owner.get(g)
                owning_slurm = d.tenants[owning].slurm if owning is not None else None
                if owning_slurm is None:
                    continue
                acct = owning_slurm.account
                if tuple(p.allow_accounts) != (acct,):
                    yield error("tenant-nodes-shared", ("slurm", "partitions", pname, "allow_accounts"),
                                f"partition `{pname}` includes node group `{g}`, owned by tenant `{owning}`, but "
                                f"allows {'every account' if not p.allow_accounts else ', '.join(p.allow_accounts)}",
                                f"set `allow_accounts: [{acct}]`, or leave `{g}` out of the partition")
    k = d.kubernetes
    if k:
        for fname, fl in k.kueue.flavors.items():
            owners = {owner[g] for g in fl.node_groups if g in owner}
            unowned = [g for g in fl.node_groups if g not in owner]
            if owners and (len(owners) > 1 or unowned):
                yield error("tenant-nodes-shared", ("kubernetes", "kueue", "flavors", fname, "node_groups"),
                            f"flavor `{fname}` includes node groups owned by tenant(s) {', '.join(sorted(owners))} "
                            f"and {'groups of another owner' if not unowned else 'unowned ' + ', '.join(unowned)}",
                            "give the dedicated tenant a flavor of its own groups only, used only by its queues")
        # Another tenant's ClusterQueue on a dedicated flavor would admit its pods onto the owner's
        # nodes (Kueue adds the flavor's tolerations to them): located at the queue's flavor.
        tenant_of: dict[str, list[str]] = {}  # queue -> the tenants listing it
        for tname, t in d.tenants.items():
            for q in (t.kubernetes.queues if t.kubernetes else ()):
                tenant_of.setdefault(q, []).append(tname)
        for qname, queue in k.kueue.queues.items():
            for i, fname in enumerate(queue.flavor_names()):
                fl_owners = {owner[g] for g in k.kueue.flavors[fname].node_groups if g in owner} \
                    if fname in k.kueue.flavors else set()
                at = ("flavor",) if i == 0 else ("fallback_flavors", i - 1, "flavor")
                for o in sorted(fl_owners):
                    strangers = [t for t in tenant_of.get(qname, []) if t != o]
                    if strangers:
                        yield error("dedicated-flavor-shared", ("kubernetes", "kueue", "queues", qname) + at,
                                    f"queue `{qname}` of tenant(s) {', '.join(strangers)} uses flavor `{fname}`, "
                                    f"whose nodes tenant `{o}` owns: their pods would be admitted onto "
                                    f"`{o}`'s nodes",
                                    f"give `{qname}` a flavor on nodes `{o}` does not own, or list the queue "
                                    f"only under tenant `{o}`")


@check("tenant-vlans")
def tenant_vlans(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    seen: dict[int, str] = {}
    for tname in tenancy.vlan_tenants(d):
        vid = tenancy.vlan(d, tname)
        if vid in seen:
            given = d.tenants[tname].isolation.vlan is not None
            yield error("vlan-collision", ("tenants", tname, "isolation", "vlan" if given else "network"),
                        f"tenants `{seen[vid]}` and `{tname}` have the same VLAN id {vid}"
                        + ("" if given else " (derived from the name)"),
                        "set `isolation.vlan` of one of them to another id (2-4094)")
        seen.setdefault(vid, tname)


def _port_guid_findings(ctx: Context, g: str, why: str, shared: bool = False) -> Iterable[Finding]:
    """`port-guid-missing` for node group `g`, whose ports partitions.conf must list (`why`: in whose
    partition, after the group's name; `shared`: say so in the inventory's message too)."""
    m = ctx.definition.nodes[g].addressing.mac
    if m.source == "list":
        n = len(ctx.group_nodes[g])
        if len(m.port_guids) != n:
            yield error("port-guid-missing", ("nodes", g, "addressing", "mac", "port_guids"),
                        f"node group `{g}` {why} has {len(m.port_guids)} port GUID entries for {n} hosts",
                        "give each host its HCA port GUIDs (ibstat), `;` between ports, in hostlist order")
    elif m.source == "discover":
        yield error("port-guid-missing", ("nodes", g, "addressing", "mac"),
                    f"node group `{g}` {why} discovers its nodes, so its port GUIDs are "
                    "unknown and no partition can list them",
                    "use a MAC inventory with a third column of port GUIDs, or a list with `port_guids`")
    else:
        inv = ctx.inventories.get(ctx.base_dir / m.file)
        # an inventory that cannot be read, or lacks a host's MAC, is `mac-inventory`'s to report
        missing = [h for h in ctx.group_nodes[g] if inv is not None and h in inv.macs and h not in inv.guids]
        if missing:
            yield error("port-guid-missing", ("nodes", g, "addressing", "mac", "file"),
                        f"{m.file} has no port GUIDs (third column) for {len(missing)} host(s) of node "
                        f"group `{g}`{' ' + why if shared else ''}, e.g. {missing[0]}",
                        "add the HCA port GUIDs as a third column, `;` between ports")


@check("tenant-partition-keys")
def tenant_partition_keys(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    seen: dict[int, str] = {tenancy.SHARED_PKEY: "(the shared partition)"}
    for tname in tenancy.pkey_tenants(d):
        key = tenancy.pkey(d, tname)
        if key in seen:
            yield error("pkey-collision", ("tenants", tname, "isolation", "pkey"),
                        f"tenants `{seen[key]}` and `{tname}` have the same partition key 0x{key:04x}"
                        if key != tenancy.SHARED_PKEY else
                        f"tenant `{tname}` has partition key 0x{key:04x}, the shared partition's "
                        "(network/opensm/partitions.conf): its nodes would talk to every shared node",
                        "set `isolation.pkey` of one of them to another value (0x0002-0x7ffe)")
        seen.setdefault(key, tname)
        for g in tenancy.owned_groups(d, tname):
            yield from _port_guid_findings(ctx, g, f"of tenant `{tname}` (partition key)")
    # the shared partition lists its ports by GUID: OpenSM has no "all ports but the tenants'"
    for g in tenancy.shared_ib_groups(d):
        yield from _port_guid_findings(ctx, g, "(InfiniBand: its ports are the shared partition's)", shared=True)


@check("tenant-storage")
def tenant_storage(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    totals: dict[str, float] = {}
    for tname, t in d.tenants.items():
        s = t.storage
        if not s or s.filesystem not in d.filesystems:
            continue
        fs = d.filesystems[s.filesystem]
        if fs.kind not in QUOTA_KINDS:
            yield error("quota-unsupported-filesystem", ("tenants", tname, "storage", "filesystem"),
                        f"tenant `{tname}` has a {s.quota_tib:g} TiB quota on `{s.filesystem}`, a {fs.kind} "
                        "filesystem, where clusterdef cannot set project quotas",
                        "put the tenant on a lustre, gpfs, xfs or btrfs filesystem, or enforce the quota on "
                        "the NFS server")
        if fs.kind == "gpfs" and fs.source is None:
            yield error("missing-field", ("filesystems", s.filesystem, "source"),
                        f"filesystem `{s.filesystem}` (gpfs) needs `source`, the device mmsetquota names",
                        "add `source: <gpfs device>`")
        totals[s.filesystem] = totals.get(s.filesystem, 0.0) + s.quota_tib
        unmounted = [g for g in t.isolation.node_groups if g in d.nodes and g not in fs.node_groups]
        if unmounted:
            yield warning("tenant-filesystem-not-mounted", ("tenants", tname, "storage", "filesystem"),
                          f"tenant `{tname}` keeps its data on `{s.filesystem}`, which its own node group(s) "
                          f"{', '.join(unmounted)} do not mount",
                          f"add them to filesystems.{s.filesystem}.node_groups, or put the tenant on a "
                          "filesystem its nodes mount")
    for fname, total in totals.items():
        size = d.filesystems[fname].size_tib
        if size is not None and total > size:
            yield error("quota-over-filesystem", ("filesystems", fname, "size_tib"),
                        f"tenants' quotas on `{fname}` total {total:g} TiB, above its size of {size:g} TiB",
                        "lower the quotas or grow the filesystem (quotas are promises)")
    for fname, f in d.filesystems.items():
        if f.owner is None or f.owner not in d.tenants:
            continue
        owned = set(d.tenants[f.owner].isolation.node_groups)
        strangers = [g for g in f.node_groups if g not in owned]
        if strangers:
            yield error("dedicated-filesystem-shared", ("filesystems", fname, "node_groups"),
                        f"filesystem `{fname}` is owned by tenant `{f.owner}` but mounted on {', '.join(strangers)}",
                        "mount a dedicated filesystem only on its owner's node groups")


# What each kind's mount names (storage/mounts/<group>/<unit>.mount renders it as What=).
_SOURCE_SHAPES = {
    "lustre": (re.compile(r"^[A-Za-z0-9_.@,:-]+:/[A-Za-z0-9_.-]+$"), "<MGS NIDs>:/<fsname>, e.g. 10.0.0.1@o2ib:/fs1"),
    "nfs": (re.compile(r"^[A-Za-z0-9_.-]+:/[A-Za-z0-9_.+@/-]*$"), "<server>:/<export>, e.g. nfs1:/export/home"),
    "gpfs": (re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"), "the GPFS device name, e.g. fs1"),
    "xfs": (re.compile(r"^/dev/[A-Za-z0-9_.+@/:-]+$"), "the block device, e.g. /dev/disk/by-label/scratch"),
    "btrfs": (re.compile(r"^/dev/[A-Za-z0-9_.+@/:-]+$"), "the block device, e.g. /dev/disk/by-label/scratch"),
}


@check("filesystem-source")
def filesystem_source(ctx: Context) -> Iterable[Finding]:
    for fname, f in ctx.definition.filesystems.items():
        shape, example = _SOURCE_SHAPES[f.kind]
        if f.source is not None and not shape.fullmatch(f.source):
            yield error("filesystem-source-invalid", ("filesystems", fname, "source"),
                        f"`{f.source}` is not what a mount of {f.kind} names, so its mount unit would not mount",
                        f"write {example}")


@check("management-exposed")
def management_exposed(ctx: Context) -> Iterable[Finding]:
    """No tenant's pods reach the BMC network: every egress ipBlock the tenant's NetworkPolicy gets
    (segmentation.ip_blocks, as rendered) is evaluated against network.management. The default
    0.0.0.0/0 gets the BMC subnet as `except`; a declared network inside the BMC subnet cannot be cut."""
    from .. import segmentation

    d = ctx.definition
    mgmt = d.network.management
    if mgmt is None:
        return
    for tname, t in d.tenants.items():
        if t.kubernetes is None:
            continue
        for i, block in enumerate(segmentation.ip_blocks(d, tname)):
            if segmentation.reaches(block, mgmt.subnet):
                declared = t.kubernetes.egress_cidrs is not None
                yield error("management-exposed",
                            ("tenants", tname, "kubernetes") + (("egress_cidrs", i) if declared else ()),
                            f"tenant `{tname}`'s pods may reach {block['cidr']}, inside the BMC network "
                            f"{mgmt.subnet} (network.management): its NetworkPolicy egress cannot cut it out",
                            "tenants never reach BMCs: remove the network from egress_cidrs, or name the "
                            "service's own subnet outside network.management")
