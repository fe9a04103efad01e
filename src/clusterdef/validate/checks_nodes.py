"""Nodes: ownership, provisioning addresses, MACs and fabric topology."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Iterable

from ClusterShell.NodeSet import NodeSet

from .. import hostlist
from ..errors import Finding, Path, error
from .graph import cycles, describe, last_defined
from .registry import Context, check


@check("node-ownership")
def node_ownership(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    seen: set[str] = set()  # names, not a NodeSet: growing a NodeSet group by group is quadratic
    earlier: list[tuple[str, NodeSet]] = []
    for b, nb in ctx.group_nodes.items():
        # One look-up per host against everything before it; pairs only when it overlaps.
        names = hostlist.names(d.nodes[b].hosts)
        if not seen.isdisjoint(names):
            yield from _overlaps(d, earlier, b, nb)
        seen.update(names)
        earlier.append((b, nb))


def _overlaps(d, earlier, b: str, nb: NodeSet) -> Iterable[Finding]:
    for a, na in earlier:
        both = na.intersection(nb)
        if not both:
            continue
        ca, cb = d.nodes[a].control_plane, d.nodes[b].control_plane
        if ca != cb:
            yield error("node-two-control-planes", ("nodes", b, "hosts"),
                        f"{len(both)} node(s) {both} are owned by {ca} (group `{a}`) and by {cb} (group `{b}`)",
                        "a GPU node has exactly one owning control plane: remove the hosts from one group")
        else:
            yield error("node-in-two-groups", ("nodes", b, "hosts"),
                        f"{len(both)} node(s) {both} are in both `{a}` and `{b}`",
                        "each node belongs to exactly one node group")


def group_ip_range(start: IPv4Address, count: int) -> tuple[int, int]:
    first = int(start)
    return first, first + count - 1


@check("addressing")
def addressing(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    prov = d.network.provisioning
    net = prov.subnet
    lo, hi = int(net.network_address) + 1, int(net.broadcast_address) - 1
    if not lo <= int(prov.server) <= hi:
        yield error("ip-outside-subnet", ("network", "provisioning", "server"),
                    f"provisioning server {prov.server} is outside {net}", f"use an address inside {net}")
    ranges: list[tuple[int, int, tuple, str]] = []
    for gname, g in d.nodes.items():
        n = len(ctx.group_nodes[gname])
        first, last = group_ip_range(g.addressing.ipv4_start, n)
        path: Path = ("nodes", gname, "addressing", "ipv4_start")
        if not (lo <= first and last <= hi):
            yield error("ip-outside-subnet", path,
                        f"{n} host(s) from {g.addressing.ipv4_start} run to {IPv4Address(min(last, 2**32 - 1))}, "
                        f"outside the provisioning subnet {net}",
                        f"start the group so all {n} addresses fit in {net} ({IPv4Address(lo)}-{IPv4Address(hi)})")
        ranges.append((first, last, path, f"node group `{gname}`"))
    # the provisioning server's address is the boot-server service host's own when one is declared there
    boot = {int(g.addressing.ipv4_start) + i for gname, g in d.nodes.items() if "boot-server" in g.services
            for i in range(len(ctx.group_nodes[gname]))}
    if int(prov.server) not in boot:
        ranges.append((int(prov.server), int(prov.server), ("network", "provisioning", "server"),
                       "the provisioning server"))
    if prov.dynamic_range:
        dr = prov.dynamic_range
        path = ("network", "provisioning", "dynamic_range")
        if not (lo <= int(dr.start) <= int(dr.end) <= hi):
            yield error("ip-outside-subnet", path,
                        f"dynamic range {dr.start}-{dr.end} is not an ordered range inside {net}",
                        f"keep start <= end inside {net}")
        ranges.append((int(dr.start), int(dr.end), path, "the dynamic DHCP range"))
    ranges.sort(key=lambda r: r[0])
    # Sweep in start order, comparing each range with the one reaching furthest so far.
    reach = ranges[0]
    for cur in ranges[1:]:
        b0, b1, bpath, bname = cur
        a0, a1, _, aname = reach
        if b0 <= a1:
            yield error("ip-duplicate", bpath,
                        f"addresses {IPv4Address(b0)}-{IPv4Address(min(a1, b1))} are given to both {aname} and {bname}",
                        "move one range so provisioning addresses are unique")
        if b1 > a1:
            reach = cur
    if prov.gateway is not None and prov.gateway != prov.server:  # the boot server may route for its subnet
        yield from gateway_collisions(int(prov.gateway), ranges, ("network", "provisioning", "gateway"))
    yield from _macs(ctx)


def gateway_collisions(gateway: int, ranges, path: Path) -> Iterable[Finding]:
    """A gateway whose address a node, the boot server or the DHCP range also has: two hosts would answer
    for it (dnsmasq hands the router option to every node, and a node would route for its subnet)."""
    for first, last, _, name in ranges:
        if first <= gateway <= last:
            yield error("ip-duplicate", path, f"gateway {IPv4Address(gateway)} is also an address of {name}",
                        "give the router an address that no node, boot server or DHCP range has")


def _macs(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    seen: dict[str, str] = {}
    told: set = set()  # inventory files whose problems are reported: once, at the first group naming the file
    for gname, g in d.nodes.items():
        mac = g.addressing.mac
        hosts = ctx.group_nodes[gname]
        path = ("nodes", gname, "addressing", "mac")
        if mac.source == "list":
            macs = list(mac.macs)
            if len(macs) != len(hosts):
                yield error("mac-count", path + ("macs",),
                            f"{len(macs)} MAC(s) listed for {len(hosts)} host(s) in `{gname}`",
                            "list exactly one MAC per host, in hostlist order")
        elif mac.source == "inventory":
            inv = ctx.inventories[ctx.base_dir / mac.file]
            if inv.problems and inv.file.resolve() not in told:
                told.add(inv.file.resolve())
                problems = inv.report(mac.file)
                more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
                yield error("mac-inventory", path + ("file",), "; ".join(problems[:3]) + more,
                            "the path is relative to the definition file; each line is `host,mac` with a "
                            "lower-case MAC (docs/provisioning.md)")
            if not inv.readable:
                continue
            macs, missing = [], []
            for h in hostlist.names(g.hosts):
                m = inv.macs.get(h)
                if m is not None:
                    macs.append(m)
                elif h not in inv.refused:  # a refused line is reported above, not again as missing
                    missing.append(h)
            if missing:
                yield error("mac-inventory", path + ("file",),
                            f"MAC inventory {mac.file} has no entry for {len(missing)} host(s): "
                            f"{hostlist.fold(missing)}",
                            "add `host,mac` lines for every host of the group")
        else:
            continue
        reported = False  # one finding per group; its other MACs are still recorded for the groups after it
        for m in macs:
            if m in seen and not reported:
                first = seen[m]
                where = f"appears twice in `{gname}`" if first == gname else f"is used in both `{first}` and `{gname}`"
                yield error("mac-duplicate", path, f"MAC {m} {where}", "every node's provisioning NIC has its own MAC")
                reported = True
            seen.setdefault(m, gname)


@check("topology")
def topology(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    known = ctx.all_nodes
    for fname, fabric in d.network.fabrics.items():
        topo = fabric.topology
        base = ("network", "fabrics", fname, "topology")
        attached: dict[str, str] = {}  # host -> the switch or block it is attached to
        if topo.kind == "tree":
            names = set(topo.switches)
            for sname, sw in topo.switches.items():
                if sw.nodes:
                    yield from _attach(sw.nodes, attached, known,
                                       base + ("switches", sname, "nodes"), f"switch `{sname}`")
                if sw.switches:
                    for child in hostlist.expand(sw.switches):
                        if child not in names:
                            yield error("ref-switch", base + ("switches", sname, "switches"),
                                        f"switch `{sname}` lists child `{child}`, which is not defined",
                                        "define every child switch in the same fabric")
                if not sw.nodes and not sw.switches:
                    yield error("switch-empty", base + ("switches", sname),
                                f"switch `{sname}` has neither nodes nor switches",
                                "give a leaf its `nodes` or a spine its `switches`")
            yield from _switch_tree(topo.switches, base)
        elif topo.kind == "rail":
            for uname, unit in topo.scalable_units.items():
                yield from _attach(unit.nodes, attached, known,
                                   base + ("scalable_units", uname, "nodes"), f"scalable unit `{uname}`",
                                   rail=True)
        else:
            for bname, block in topo.blocks.items():
                yield from _attach(block.nodes, attached, known,
                                   base + ("blocks", bname, "nodes"), f"block `{bname}`")


def _switch_tree(switches: dict, base: tuple) -> Iterable[Finding]:
    """No switch is its own child or descendant. A switch under several parents is fine: a fat tree
    lists each leaf under every spine it is cabled to (as Slurm's topology guide shows)."""
    children = {n: hostlist.names(sw.switches) if sw.switches else () for n, sw in switches.items()}
    for sname, kids in children.items():
        if sname in kids:
            yield error("switch-self", base + ("switches", sname, "switches"),
                        f"switch `{sname}` lists itself among its child switches",
                        "list only the switches cabled below it")
    order = {n: i for i, n in enumerate(switches)}
    for cycle in cycles(switches, children.__getitem__):
        at = last_defined(cycle, order)
        yield error("switch-cycle", base + ("switches", at, "switches"),
                    f"switches {describe(cycle, at)} are each other's children, so the tree has no top",
                    "list child switches only below their parent: remove the child that leads back up")


def _attach(expr: str, attached: dict[str, str], known: NodeSet, path, what: str,
            rail: bool = False) -> Iterable[Finding]:
    """`attached` maps each host already placed in this fabric to the switch or block holding it: one
    lookup per host, so a fabric of thousands of leaves stays linear."""
    unknown = hostlist.parse(expr).difference(known)
    if unknown:
        yield error("topology-unknown-host", path, f"{what} lists {len(unknown)} host(s) in no node group: {unknown}",
                    "list only hosts defined in `nodes`")
    twice: dict[str, list[str]] = {}
    for host in hostlist.names(expr):
        other = attached.get(host)
        if other is None:
            attached[host] = what
        else:
            twice.setdefault(other, []).append(host)
    for other, hosts in twice.items():
        if rail:
            hint = (f"a node is in one scalable unit: list {hostlist.fold(hosts)} under {other} or {what}, "
                    "not both (its rails are the unit's rail leaves, not more units)")
        else:
            hint = (f"a node hangs off one leaf switch or block per fabric: list {hostlist.fold(hosts)} under "
                    f"{other} or {what}, not both. If each node's HCA i is cabled to rail leaf i "
                    "(a rail-optimised fabric, as in a DGX SuperPOD scalable unit), describe the fabric as "
                    "`topology: {kind: rail, rails: 8, scalable_units: {su1: {nodes: ...}}, spines: ...}` "
                    "(docs/fabric.md)")
        yield error("topology-node-twice", path,
                    f"{what} lists {hostlist.fold(hosts)}, already attached to {other} in this fabric", hint)
