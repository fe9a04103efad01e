"""Fabric topology as node labels (block, leaf, hostname) and Kueue Topology levels, so that
topology-aware placement keeps a gang on as few leaves and blocks as possible.

Levels per topology kind: tree (block = the leaf's first spine, leaf, host), block (block, host),
rail (block = the scalable unit, rack, host: the unit's rail leaves all hold the same nodes, so the
unit is the lowest fabric level; the rack is the node's NVLink domain when its group has one, else the
group's `placement.rack`, else the unit)."""

from __future__ import annotations

from ... import hostlist
from ...resolve import Resolved
from .common import KUEUE_API, L_BLOCK, L_HOSTNAME, L_LEAF, L_RACK, label_value


def rdma_groups(resolved: Resolved) -> list[str]:
    """Kubernetes-owned groups whose compute fabric carries RDMA (InfiniBand or RoCE)."""
    d = resolved.definition
    out = []
    for n, g in d.nodes.items():
        if g.control_plane != "kubernetes" or g.placement is None:
            continue
        f = d.network.fabrics.get(g.placement.fabric)
        if f is not None and f.rdma and f.kind in ("infiniband", "roce"):
            out.append(n)
    return out


def levels(kind: str) -> list[str]:
    return {"tree": [L_BLOCK, L_LEAF, L_HOSTNAME], "rail": [L_BLOCK, L_RACK, L_HOSTNAME]}.get(kind, [L_BLOCK, L_HOSTNAME])


def fabric_of_groups(resolved: Resolved, groups) -> str | None:
    """The fabric all the groups are placed on, or None when they are not all on one fabric."""
    d = resolved.definition
    placements = (d.nodes[g].placement for g in groups)
    fabrics = {p.fabric if p else None for p in placements}
    if len(fabrics) != 1:
        return None
    f = fabrics.pop()
    return f if f in d.network.fabrics else None


def topologies(resolved: Resolved, fabrics) -> list[dict]:
    d = resolved.definition
    return [{
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": lv} for lv in levels(d.network.fabrics[name].topology.kind)]},
    } for name in sorted(fabrics)]


def node_labels(resolved: Resolved, groups: list[str]) -> dict[str, dict]:
    """fabric -> {levels, nodes: [{hosts, labels}]} for the hosts of `groups`, one entry per
    leaf switch (tree) or block, hosts folded per node group."""
    d = resolved.definition
    out: dict[str, dict] = {}
    by_fabric: dict[str, list[str]] = {}
    for g in groups:
        p = d.nodes[g].placement
        if p is not None and p.fabric in d.network.fabrics:
            by_fabric.setdefault(p.fabric, []).append(g)
    for fname, fgroups in sorted(by_fabric.items()):
        topo = d.network.fabrics[fname].topology
        group_of = {h: g for g in fgroups for h in hostlist.names(d.nodes[g].hosts)}
        entries = []
        if topo.kind == "tree":
            parents: dict[str, list[str]] = {}
            for sname, sw in topo.switches.items():
                if sw.switches:
                    for child in hostlist.names(sw.switches):
                        parents.setdefault(child, []).append(sname)
            for sname, sw in topo.switches.items():
                if not sw.nodes:
                    continue
                here = _split(fgroups, group_of, sw.nodes)
                if not here:
                    continue
                block = min(parents.get(sname, [sname]))
                entries.extend(_entries(here, {L_BLOCK: label_value(block), L_LEAF: label_value(sname)}))
        elif topo.kind == "rail":
            members = hostlist.union(d.nodes[g].hosts for g in fgroups)
            for uname, nodes in topo.units():
                here = hostlist.parse(nodes).intersection(members)
                for g in fgroups:
                    part = here.intersection(hostlist.parse(d.nodes[g].hosts))
                    for rack, hosts in _racks(d, g, part, uname):
                        entries.append({"group": g, "hosts": str(hosts),
                                        "labels": {L_BLOCK: label_value(uname), L_RACK: label_value(rack)}})
        else:
            for bname, nodes in topo.units():
                entries.extend(_entries(_split(fgroups, group_of, nodes), {L_BLOCK: label_value(bname)}))
        out[fname] = {"levels": levels(topo.kind), "nodes": entries}
    return out


def _racks(d, group: str, hosts, unit: str) -> list[tuple[str, object]]:
    """(rack, hosts) of a group's hosts in one scalable unit: a group in NVLink domains takes each
    domain (the NVL72 rack) as its rack, so that a Kueue job required on one rack stays in one NVLink
    domain; otherwise the group's `placement.rack`, or the unit when it has none."""
    if not hosts:
        return []
    p = d.nodes[group].placement
    nv = d.network.fabrics.get(p.nvlink) if p.nvlink else None
    if nv is None or nv.topology.kind != "block":
        return [(p.rack or unit, hosts)]
    out = []
    for bname, nodes in nv.topology.units():
        part = hosts.intersection(hostlist.parse(nodes))
        if part:
            out.append((bname, part))
    rest = hosts.difference(hostlist.union(str(h) for _, h in out)) if out else hosts
    if rest:
        out.append((p.rack or unit, rest))
    return out


def _split(groups: list[str], group_of: dict[str, str], nodes: str) -> dict[str, str]:
    """group -> its hosts among `nodes` (folded), in the order of `groups`: one lookup per host, so a
    fabric of thousands of leaves stays linear (valid definitions put each host in one group)."""
    by_group: dict[str, list[str]] = {}
    for host in hostlist.names(nodes):
        g = group_of.get(host)
        if g is not None:
            by_group.setdefault(g, []).append(host)
    return {g: hostlist.fold(by_group[g]) for g in groups if g in by_group}


def _entries(hosts_by_group: dict[str, str], labels: dict) -> list[dict]:
    return [{"group": g, "hosts": hosts, "labels": dict(labels)} for g, hosts in hosts_by_group.items()]
