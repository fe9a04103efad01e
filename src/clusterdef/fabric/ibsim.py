"""An ibsim net file of a definition's InfiniBand fabric, so that the subnet manager (OpenSM),
ibnetdiscover and `clusterdef fabric check` can run against the fabric the definition declares.

    net_file(definition, "ib0") -> str           # feed to `ibsim -s NETFILE`
    hca_name(definition, "ib0", "gpu001")       # the HCA (ibsim node id) of a host
    sm_hca(definition, "ib0")                   # the subnet manager host's HCA (SIM_HOST=...)

Layout (see fabric.layout): each host is one `Hca` with one port per compute InfiniBand NIC port,
port k cabled to its leaf; leaves cabled to their spines; one more `Hca` for the subnet manager
host, cabled to the first switch that has no parent. The subnet manager's HCA is the first record
(ibsim's default attachment point), then the switches in declaration order, then the hosts in
cabling order. Switch ports: the hosts' ports first (host by host, in hostlist order), then the
child switches, then the parents, then the subnet manager. So port numbers and, since ibsim
assigns GUIDs in file order, GUIDs are the same for the same definition.

Every link carries its width and speed in the form ibnetdiscover prints (`# lid 0 4xHDR`), which
ibsim reads as the port's enabled width and speed. ibsim 0.10 (Debian 12) knows speeds up to HDR:
a rate it cannot carry at 4x (400 Gb/s NDR) is simulated at the same rate on more lanes (8x HDR)
unless `max_speed` allows more. `fabric check` compares the rate and width with what the NIC is
rated for, so either form of the rated rate checks clean.

Faults for tests (a `Faults` value): swap the far ends of two cables, drop a cable, degrade a
cable's width or speed. A cable is named by either of its ends, `(node or switch, port)`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..model import Definition
from .layout import LANE_GBPS, RATED_WIDTH, MAX_SWITCH_PORTS, FabricError, Layout, layout, restrict

# speeds in order, fastest last; ibsim 0.10 parses SDR..HDR (and FDR10)
_ORDER = ("SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "XDR")
IBSIM_MAX_SPEED = "HDR"
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

End = tuple[str, int]  # (node or switch name, port)


@dataclass(frozen=True)
class Degrade:
    end: End
    width: int | None = None  # 1, 2, 4, 8 or 12
    speed: str | None = None  # SDR .. HDR


@dataclass(frozen=True)
class Faults:
    swap: tuple[tuple[End, End], ...] = ()
    drop: tuple[End, ...] = ()
    degrade: tuple[Degrade, ...] = ()


@dataclass
class Link:
    a: End
    b: End
    width: int
    speed: str

    def other(self, end: End) -> End:
        return self.b if end == self.a else self.a


@dataclass
class Net:
    layout: Layout
    ports: dict[str, int]  # node -> port count (switches, HCAs)
    kinds: dict[str, str]  # node -> Switch | Hca, in record order
    links: list[Link] = field(default_factory=list)


def rated_link(gbps: int, max_speed: str = IBSIM_MAX_SPEED) -> tuple[int, str]:
    """(width, speed) that carries `gbps`: 4x at the lane rate gbps/4 where the simulator knows that
    speed, else the fastest known speed on the fewest lanes (4, 8, 12) that reach the rate."""
    known = _ORDER[: _ORDER.index(max_speed) + 1]
    for s in known:
        if LANE_GBPS[s] * RATED_WIDTH == gbps:
            return RATED_WIDTH, s
    fastest = known[-1]
    for w in (4, 8, 12):
        if w * LANE_GBPS[fastest] >= gbps:
            return w, fastest
    raise FabricError(f"{gbps} Gb/s is more than 12x{fastest} ({12 * LANE_GBPS[fastest]:g} Gb/s), "
                      f"the most the simulator can carry")


def build(definition: Definition, fabric_name: str | None, max_speed: str = IBSIM_MAX_SPEED,
          hosts: set[str] | None = None) -> Net:
    """The fabric's records and cables, before any fault; `hosts`: only the part of the fabric
    that cables these hosts (their leaves and the switches above them)."""
    lay = layout(definition, fabric_name)
    if hosts is not None:
        lay = restrict(lay, hosts)
    net = Net(lay, {}, {})
    used: dict[str, int] = {s: 0 for s in lay.switches}

    def cable(a: str, pa: int, b: str, gbps: int) -> None:
        used[b] += 1
        w, s = rated_link(gbps, max_speed)
        net.links.append(Link((a, pa), (b, used[b]), w, s))

    net.kinds[lay.sm] = "Hca"
    net.ports[lay.sm] = 1
    for s in lay.switches:
        net.kinds[s] = "Switch"
    if lay.kind == "rail":  # unit by unit, host by host, port i to rail leaf i
        for h, host in lay.hosts.items():
            for p in range(1, host.ports + 1):
                cable(h, p, host.leaf_of(p), host.rated_gbps)
    else:
        for leaf, members in lay.leaves.items():
            for h in members:
                host = lay.hosts[h]
                for p in range(1, host.ports + 1):
                    cable(h, p, leaf, host.rated_gbps)
    children: dict[str, list[str]] = {}
    for child, parent in lay.uplinks:
        children.setdefault(parent, []).append(child)
    uplink_port: dict[tuple[str, str], int] = {}
    for parent in lay.switches:
        for child in children.get(parent, ()):
            used[parent] += 1
            uplink_port[(child, parent)] = used[parent]
    for child, parent in lay.uplinks:
        used[child] += 1
        w, s = rated_link(lay.trunk_gbps, max_speed)
        net.links.append(Link((child, used[child]), (parent, uplink_port[(child, parent)]), w, s))
    has_parent = {c for c, _ in lay.uplinks}
    top = next((s for s in lay.switches if s not in has_parent), lay.switches[0] if lay.switches else None)
    if top is None:
        raise FabricError(f"fabric {lay.fabric} has no switch")
    used[top] += 1
    w, s = rated_link(lay.trunk_gbps, max_speed)
    net.links.append(Link((lay.sm, 1), (top, used[top]), w, s))
    for h, host in lay.hosts.items():
        net.kinds[h] = "Hca"
        net.ports[h] = host.ports
    for s, n in used.items():
        if n > MAX_SWITCH_PORTS:
            raise FabricError(f"switch {s} of fabric {lay.fabric} needs {n} ports; a switch has at most "
                              f"{MAX_SWITCH_PORTS}")
        net.ports[s] = max(n, 1)
    return net


def _find(net: Net, end: End) -> Link:
    for link in net.links:
        if end in (link.a, link.b):
            return link
    raise FabricError(f"no cable at {end[0]} port {end[1]}")


def inject(net: Net, faults: Faults) -> Net:
    """The same fabric with `faults` applied (in place; returns `net`)."""
    for e1, e2 in faults.swap:
        l1, l2 = _find(net, e1), _find(net, e2)
        if l1 is l2:
            raise FabricError(f"{e1} and {e2} are the same cable")
        far1, far2 = l1.other(e1), l2.other(e2)
        l1.a, l1.b = e1, far2
        l2.a, l2.b = e2, far1
    for e in faults.drop:
        net.links.remove(_find(net, e))
    for d in faults.degrade:
        link = _find(net, d.end)
        if d.width is not None:
            if d.width not in (1, 2, 4, 8, 12):
                raise FabricError(f"width {d.width} is not an InfiniBand link width")
            link.width = d.width
        if d.speed is not None:
            if d.speed not in _ORDER[: _ORDER.index(IBSIM_MAX_SPEED) + 1]:
                raise FabricError(f"speed {d.speed!r} is not one ibsim can simulate (SDR..HDR)")
            link.speed = d.speed
    return net


def text(net: Net) -> str:
    """The net file."""
    by_node: dict[str, list[tuple[int, End, Link]]] = {n: [] for n in net.kinds}
    for link in net.links:
        by_node[link.a[0]].append((link.a[1], link.b, link))
        by_node[link.b[0]].append((link.b[1], link.a, link))
    lay = net.layout
    out = [f"# clusterdef: ibsim net file of fabric {lay.fabric} ({lay.kind} topology)",
           f"# subnet manager HCA: {lay.sm}", ""]
    for node, kind in net.kinds.items():
        if not _NAME.fullmatch(node):  # definition names are RFC 1123 labels; never quote-breaking
            raise FabricError(f"{node!r} cannot be an ibsim node id")
        out.append(f'{kind}\t{net.ports[node]} "{node}"')
        for port, (peer, pport), link in sorted(by_node[node], key=lambda x: x[0]):
            out.append(f'[{port}]\t"{peer}"[{pport}]\t\t# lid 0 {link.width}x{link.speed}')
        out.append("")
    return "\n".join(out)


def net_file(definition: Definition, fabric_name: str | None = None, faults: Faults | None = None,
             max_speed: str = IBSIM_MAX_SPEED, hosts: set[str] | None = None) -> str:
    """The ibsim net file of the fabric (the only InfiniBand fabric when `fabric_name` is None);
    `hosts`: only the part that cables them (a large estate's piece, within what ibsim carries)."""
    net = build(definition, fabric_name, max_speed, hosts)
    if faults is not None:
        inject(net, faults)
    return text(net)


def hca_name(definition: Definition, fabric_name: str | None, host: str) -> str:
    """The HCA (ibsim node id and node description) of `host`: the host name itself."""
    lay = layout(definition, fabric_name)
    if host not in lay.hosts:
        raise FabricError(f"host {host} has no compute InfiniBand port on fabric {lay.fabric}")
    return host


def hca_names(definition: Definition, fabric_name: str | None = None) -> dict[str, str]:
    """host -> HCA name for every host on the fabric."""
    return {h: h for h in layout(definition, fabric_name).hosts}


def sm_hca(definition: Definition, fabric_name: str | None = None) -> str:
    return layout(definition, fabric_name).sm
