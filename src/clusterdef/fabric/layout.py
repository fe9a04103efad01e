"""The cabling a definition declares for one InfiniBand fabric: which host ports go to which leaf,
which switch is under which, and the rate each link must run at.

Tree topology: switches with `nodes` are leaves (every compute InfiniBand port of a host goes to
its leaf), `switches` lists the switches under a spine (one cable per child/parent pair).
Block topology (scalable units): one switch per block, named after the block, cabled to one core
switch named `<fabric>-core`; the block's hosts are cabled to the block's switch.
Rail topology (rail-optimised scalable units): unit U has rail leaves `U-rail1`..`U-railR`; port i
of each host of U is cabled to `U-rail<i>`; every rail leaf to every spine, every spine to every core.

A host's ports are its hardware's NICs of the fabric's kind (`infiniband`, or `roce` for a RoCE
fabric) and role `compute`, `count` ports each, numbered 1..N in NIC order (port i is interface
`Host.ifaces[i - 1]`: the NIC's name, or name0..name<count-1>, tenancy.nic_ports); their rated
width is 4x (every ConnectX/InfiniBand HCA port) and their rated rate is the NIC's `speed_gbps`.
Inter-switch links are rated at the fastest host port of the fabric. Hosts without compute NICs of
the fabric's kind are not on the fabric."""

from __future__ import annotations

from dataclasses import dataclass

from .. import hostlist
from ..model import Definition
from ..tenancy import nic_ports

RATED_WIDTH = 4
MAX_SWITCH_PORTS = 254  # ibsim and the IB spec: a switch has at most 254 external ports


class FabricError(ValueError):
    """The definition's fabric cannot be laid out (unknown, not InfiniBand, a name used twice)."""


@dataclass(frozen=True)
class Host:
    name: str
    group: str
    control_plane: str
    leaf: str  # the leaf of port 1 (tree, block: of every port)
    ports: int
    rated_gbps: int
    rails: tuple[str, ...] = ()  # rail topology: the leaf of port i is rails[i - 1]
    ifaces: tuple[str, ...] = ()  # the interface of port i is ifaces[i - 1]

    def leaf_of(self, port: int) -> str:
        return self.rails[port - 1] if self.rails else self.leaf


@dataclass(frozen=True)
class Layout:
    fabric: str
    kind: str  # tree | block
    hosts: dict[str, Host]  # in cabling order (leaf by leaf, hostlist order)
    switches: tuple[str, ...]  # in declaration order (block: blocks, then the core)
    leaves: dict[str, tuple[str, ...]]  # leaf -> its hosts in hostlist order
    uplinks: tuple[tuple[str, str], ...]  # (child, parent), one cable each
    sm: str  # the subnet manager host's HCA
    trunk_gbps: int
    rail_of: dict[str, tuple[str, int]] | None = None  # rail topology: rail leaf -> (unit, rail)

    @property
    def names(self) -> set[str]:
        return set(self.hosts) | set(self.switches) | {self.sm}


KIND_NAMES = {"infiniband": "InfiniBand", "roce": "RoCE"}


def ib_fabrics(definition: Definition, kind: str = "infiniband") -> list[str]:
    """The fabrics of `kind` (infiniband or roce), in definition order."""
    return [n for n, f in definition.network.fabrics.items() if f.kind == kind]


def pick_fabric(definition: Definition, name: str | None, kind: str = "infiniband") -> str:
    """`name`, or the definition's only fabric of `kind` (infiniband or roce)."""
    fabrics = ib_fabrics(definition, kind)
    what = KIND_NAMES[kind]
    if name is not None:
        if name not in definition.network.fabrics:
            known = ", ".join(fabrics) or "none"
            raise FabricError(f"no fabric {name!r} in the definition ({what} fabrics: {known})")
        if name not in fabrics:
            other = next((k for k in KIND_NAMES if k != kind), kind)
            hint = (f" (check it with {'--lldp' if other == 'roce' else '--ibnetdiscover'})"
                    if definition.network.fabrics[name].kind == other else "")
            raise FabricError(f"fabric {name!r} is {definition.network.fabrics[name].kind}, not {what}{hint}")
        return name
    others = [n for n, f in definition.network.fabrics.items() if f.kind in KIND_NAMES and f.kind != kind]
    hint = (f" (its {'RoCE' if kind == 'infiniband' else 'InfiniBand'} fabrics {', '.join(others)}: check them with "
            f"{'--lldp' if kind == 'infiniband' else '--ibnetdiscover'})") if others else ""
    if len(fabrics) != 1:
        raise FabricError(f"the definition has no {what} fabric{hint}" if not fabrics else
                          f"the definition has {len(fabrics)} {what} fabrics ({', '.join(fabrics)}): name one")
    return fabrics[0]


def _host_ports(definition: Definition, kind: str = "infiniband") -> dict[str, tuple[str, str, int, int, tuple]]:
    """host -> (group, control plane, compute port count, rated Gb/s, interfaces) for hosts with
    compute NICs of `kind`."""
    out: dict[str, tuple[str, str, int, int, tuple]] = {}
    for gname, g in definition.nodes.items():
        nics = [n for n in definition.hardware[g.hardware].nics if n.kind == kind and n.role == "compute"]
        if not nics:
            continue
        ports, rated = sum(n.count for n in nics), min(n.speed_gbps for n in nics)
        ifaces = tuple(i for n in nics for i in nic_ports(n))
        out.update(dict.fromkeys(hostlist.names(g.hosts), (gname, g.control_plane, ports, rated, ifaces)))
    return out


def layout(definition: Definition, fabric_name: str | None, sm: str | None = None,
           kind: str = "infiniband") -> Layout:
    """The declared cabling of `fabric_name` (the only fabric of `kind` when None: infiniband or
    roce). `sm` names the subnet manager host's HCA (default `sm-<fabric>`, cut to 63 characters;
    a RoCE fabric has none, the name only stays out of the way)."""
    fabric_name = pick_fabric(definition, fabric_name, kind)
    topo = definition.network.fabrics[fabric_name].topology
    ports = _host_ports(definition, kind)
    leaves: dict[str, tuple[str, ...]] = {}
    uplinks: list[tuple[str, str]] = []
    if topo.kind == "tree":
        switches = tuple(topo.switches)
        for sname, sw in topo.switches.items():
            if sw.nodes:
                leaves[sname] = tuple(h for h in hostlist.names(sw.nodes) if h in ports)
        for sname, sw in topo.switches.items():
            if sw.switches:
                uplinks.extend((child, sname) for child in hostlist.names(sw.switches))
    elif topo.kind == "rail":
        return _rail_layout(definition, fabric_name, topo, ports, sm, kind)
    else:
        core = f"{fabric_name}-core"[:63]
        switches = tuple(topo.blocks) + (core,)
        for bname, b in topo.blocks.items():
            leaves[bname] = tuple(h for h in hostlist.names(b.nodes) if h in ports)
            uplinks.append((bname, core))
    hosts: dict[str, Host] = {}
    for leaf, members in leaves.items():
        for h in members:
            if h in hosts:
                raise FabricError(f"host {h} is cabled to two leaves ({hosts[h].leaf} and {leaf})")
            g, cp, n, rated, ifaces = ports[h]
            hosts[h] = Host(h, g, cp, leaf, n, rated, (), ifaces)
    sm = sm or f"sm-{fabric_name}"[:63]
    taken = set(hosts) & set(switches)
    if taken:
        raise FabricError(f"{', '.join(sorted(taken))} names both a host and a switch of fabric {fabric_name}")
    if sm in hosts or sm in switches:
        raise FabricError(f"the subnet manager HCA name {sm!r} is a host or switch of fabric {fabric_name}")
    unknown = {s for pair in uplinks for s in pair} - set(switches)
    if unknown:
        raise FabricError(f"fabric {fabric_name} cables unknown switches: {', '.join(sorted(unknown))}")
    trunk = max((h.rated_gbps for h in hosts.values()), default=100)
    return Layout(fabric_name, topo.kind, hosts, switches, leaves, tuple(uplinks), sm, trunk)


def _rail_layout(definition: Definition, fabric_name: str, topo, ports, sm: str | None,
                 kind: str = "infiniband") -> Layout:
    spines = hostlist.names(topo.spines) if topo.spines else ()
    cores = hostlist.names(topo.cores) if topo.cores else ()
    rail_of: dict[str, tuple[str, int]] = {}
    leaves: dict[str, tuple[str, ...]] = {}
    hosts: dict[str, Host] = {}
    for unit, su in topo.scalable_units.items():
        members = tuple(h for h in hostlist.names(su.nodes) if h in ports)
        rails = tuple(topo.rail_leaf(unit, r) for r in range(1, topo.rails + 1))
        for r, leaf in enumerate(rails, 1):
            rail_of[leaf] = (unit, r)
            leaves[leaf] = members
        for h in members:
            if h in hosts:
                raise FabricError(f"host {h} is in two scalable units ({hosts[h].leaf.rsplit('-rail', 1)[0]} "
                                  f"and {unit})")
            g, cp, n, rated, ifaces = ports[h]
            if n != topo.rails:
                raise FabricError(f"host {h} has {n} compute {KIND_NAMES[kind]} port(s) on a {topo.rails}-rail "
                                  "fabric")
            hosts[h] = Host(h, g, cp, rails[0], n, rated, rails, ifaces)
    switches = tuple(rail_of) + spines + cores
    if len(set(switches)) != len(switches):
        raise FabricError(f"fabric {fabric_name} names a switch twice")
    uplinks = tuple((leaf, s) for leaf in rail_of for s in spines) + tuple((s, c) for s in spines for c in cores)
    sm = sm or f"sm-{fabric_name}"[:63]
    taken = set(hosts) & set(switches)
    if taken:
        raise FabricError(f"{', '.join(sorted(taken))} names both a host and a switch of fabric {fabric_name}")
    if sm in hosts or sm in switches:
        raise FabricError(f"the subnet manager HCA name {sm!r} is a host or switch of fabric {fabric_name}")
    trunk = max((h.rated_gbps for h in hosts.values()), default=100)
    return Layout(fabric_name, "rail", hosts, switches, leaves, uplinks, sm, trunk, rail_of)


def switch_ports(lay: Layout) -> dict[str, int]:
    """External ports each switch of the layout uses: its hosts' ports and its cables to other
    switches (the subnet manager's cable aside)."""
    used = {s: 0 for s in lay.switches}
    for host in lay.hosts.values():
        if host.rails:  # port i on rails[i - 1] (leaf_of)
            for p in range(host.ports):
                used[host.rails[p]] += 1
        else:  # every port on the leaf: one addition per host, not per port
            used[host.leaf] += host.ports
    for child, parent in lay.uplinks:
        used[child] += 1
        used[parent] += 1
    return used


def restrict(lay: Layout, hosts: set[str]) -> Layout:
    """The part of the layout that cables `hosts`: those hosts, their leaves and every switch
    above them, with the same names and cabling order (a piece of a large fabric to simulate)."""
    kept = {h: host for h, host in lay.hosts.items() if h in hosts}
    switches = {host.leaf_of(p) for host in kept.values() for p in range(1, host.ports + 1)}
    grown = True
    while grown:  # every switch above a kept one
        above = {parent for child, parent in lay.uplinks if child in switches} - switches
        switches |= above
        grown = bool(above)
    leaves = {leaf: tuple(h for h in members if h in kept) for leaf, members in lay.leaves.items() if leaf in switches}
    return Layout(lay.fabric, lay.kind, kept, tuple(s for s in lay.switches if s in switches), leaves,
                  tuple((c, p) for c, p in lay.uplinks if c in switches and p in switches), lay.sm, lay.trunk_gbps,
                  {k: v for k, v in lay.rail_of.items() if k in switches} if lay.rail_of is not None else None)


# Gb/s per lane of each InfiniBand speed as ibnetdiscover names it (the signalling rates rounded
# the way the NIC's marketing speed is: 4x NDR = 400 Gb/s).
LANE_GBPS = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0, "EDR": 25.0,
             "HDR": 50.0, "NDR": 100.0, "XDR": 200.0}
WIDTHS = (1, 2, 4, 8, 12)


def link_gbps(width: int, speed: str) -> float:
    return width * LANE_GBPS[speed]


def leaves(definition: Definition, group: str) -> list[tuple[str, list[str]]]:
    """(leaf switch or block, hosts of `group` on it) in topology order, for the group's fabric.
    Hosts not found in the topology are put under `-`."""
    g = definition.nodes[group]
    members = list(hostlist.names(g.hosts))
    fabric = definition.network.fabrics.get(g.placement.fabric) if g.placement else None
    out: list[tuple[str, list[str]]] = []
    placed: set[str] = set()
    if fabric is not None:
        mine = set(members)
        for name, nodes in fabric.topology.units():  # leaves, blocks, or scalable units (rail)
            if nodes:
                hosts = [h for h in hostlist.names(nodes) if h in mine and h not in placed]
                if hosts:
                    out.append((name, hosts))
                    placed.update(hosts)
    rest = [h for h in members if h not in placed]
    if rest:
        out.append(("-", rest))
    return out
