"""Addresses of the rail ports on a RoCE compute fabric (docs/network.md): rail i (1-based) gets the
i-th of 2^k equal slices of the fabric's subnet (2^k >= rails), and a host's address on rail i is the
same offset in rail i's slice as its address (`attachments.compute.ipv4_start` and hostlist order) in
rail 1's. Each rail is a subnet of its own, so the kernel's connected route for it goes out of that
rail's port only: RDMA and NCCL traffic of rail i stays on rail i (rail-optimised), with no policy
routing, and a host answers ARP for a rail address on that rail's port only (arp_ignore=1). Read by
validation (roce-rails) and render/network/roce.py.

`rail_addressing: routed` (a routed leaf/spine fabric, no L2 segment per rail): rail i's slice is the rail's
aggregate; host j's port on rail i is the odd address of a /31 (RFC 3021 point-to-point; the even one below
it is the leaf switch port's), at `ipv4_start + 2j` in rail 1's slice and the same offset in rail i's, with a
route to the aggregate through the switch: rail i's traffic still leaves by rail i's port only."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network

from .. import hostlist, tenancy
from ..model.network import Fabric  # noqa: F401 (annotations)


def rail_fabric(d, group: str) -> tuple[str, Fabric] | None:
    """(name, fabric) of a node group's compute attachment when it gives addresses on a RoCE fabric
    with a subnet; None otherwise (or on bad references: validate's attachment-* checks)."""
    g = d.nodes.get(group)
    a = g.attachments.get("compute") if g else None
    f = d.network.fabrics.get(a.network) if a else None
    if a is None or f is None or f.kind != "roce" or f.subnet is None or a.ipv4_start is None:
        return None
    return a.network, f


def compute_ports(d, group: str) -> list[str]:
    """The interfaces of the NIC a group's compute attachment names (`<nic>` or `<nic>0..N-1`)."""
    g = d.nodes[group]
    hw = d.hardware.get(g.hardware)
    a = g.attachments.get("compute")
    nic = next((n for n in hw.nics if n.name == a.nic), None) if hw and a else None
    return tenancy.nic_ports(nic) if nic else []


def fabric_rails(d, fname: str) -> int:
    """Rails of a RoCE fabric: a rail topology's `rails`, else the most compute ports of a node
    group that gets addresses on it (each port a rail of its own)."""
    f = d.network.fabrics[fname]
    if f.topology.kind == "rail":
        return f.topology.rails
    ports = [len(compute_ports(d, g)) for g in d.nodes if (rail_fabric(d, g) or ("",))[0] == fname]
    return max(ports, default=1) or 1


def rail_subnets(subnet: IPv4Network, rails: int) -> list[IPv4Network] | None:
    """Rail i (0-based) gets the i-th of 2^k equal slices of `subnet` (2^k >= rails); None when the
    slices would be smaller than a /30 (no room for hosts)."""
    k = (rails - 1).bit_length()
    if subnet.prefixlen + k > 30:
        return None
    return list(subnet.subnets(prefixlen_diff=k))[:rails]


def rail_problem(d, group: str) -> str | None:
    """Why a group's rail addresses cannot be laid out (validate's roce-rails), or None."""
    rf = rail_fabric(d, group)
    if rf is None:
        return None
    fname, f = rf
    subnet = f.subnet
    assert subnet is not None
    rails = fabric_rails(d, fname)
    slices = rail_subnets(subnet, rails)
    if slices is None:
        return (f"fabric `{fname}`'s subnet {subnet} cannot be split into {rails} rail subnets of at least a "
                f"/30 each (rail i gets the i-th equal slice)")
    ports = compute_ports(d, group)
    if len(ports) > rails:
        return f"node group `{group}` has {len(ports)} compute ports on fabric `{fname}`, which has {rails} rails"
    a = d.nodes[group].attachments["compute"]
    first = slices[0]
    count = len(hostlist.names(d.nodes[group].hosts))
    if f.routed:
        if int(a.ipv4_start) % 2 == 0:
            return (f"node group `{group}`: fabric `{fname}` is routed (a /31 per port, RFC 3021): ipv4_start "
                    f"{a.ipv4_start} is even, the switch's side of its /31; a host's side is the odd address")
        start, last = int(a.ipv4_start) - 1, int(a.ipv4_start) + 2 * (count - 1)
        if not (int(first.network_address) <= start and last <= int(first.broadcast_address)):
            return (f"node group `{group}`: {count} /31 link(s) from {a.ipv4_start} (hosts 2 apart) do not fit in "
                    f"rail 1's aggregate {first} (fabric `{fname}`'s {subnet} in {len(slices)} rail slice(s)); a "
                    f"host's address on rail i is the same offset in rail i's slice")
        return None
    start, last = int(a.ipv4_start), int(a.ipv4_start) + count - 1
    if not (int(first.network_address) < start and last < int(first.broadcast_address)):
        return (f"node group `{group}`: {count} address(es) from {a.ipv4_start} do not fit in rail 1's subnet "
                f"{first} (fabric `{fname}`'s {subnet} in {len(slices)} rail slice(s)); a host's address on "
                f"rail i is the same offset in rail i's slice")
    return None


def rail_addresses(d, group: str) -> dict[str, list[tuple[str, IPv4Interface]]]:
    """host -> [(port, address/prefix)] on each rail, ports in order (port i on rail i+1); {} when the
    group has no rail addresses or they cannot be laid out (`rail_problem`)."""
    rf = rail_fabric(d, group)
    if rf is None or rail_problem(d, group):
        return {}
    fname, f = rf
    assert f.subnet is not None
    slices = rail_subnets(f.subnet, fabric_rails(d, fname)) or []
    a = d.nodes[group].attachments["compute"]
    offset = int(a.ipv4_start) - int(f.subnet.network_address)
    ports = compute_ports(d, group)
    step, prefix = (2, 31) if f.routed else (1, None)
    return {host: [(port, IPv4Interface((int(slices[r].network_address) + offset + step * i,
                                         prefix or slices[r].prefixlen)))
                   for r, port in enumerate(ports)]
            for i, host in enumerate(hostlist.names(d.nodes[group].hosts))}


def rail_route(d, group: str, address: IPv4Interface) -> tuple[IPv4Network, IPv4Address] | None:
    """A routed fabric's port: (the rail's aggregate, the switch's side of the /31) for the route through
    it; None on a per-rail-subnet fabric (the connected route is the rail's)."""
    rf = rail_fabric(d, group)
    if rf is None or not rf[1].routed:
        return None
    fname, f = rf
    assert f.subnet is not None
    rails = rail_subnets(f.subnet, fabric_rails(d, fname)) or []
    aggregate = next(n for n in rails if address.ip in n)
    return aggregate, address.ip - 1


def vlan_owned(d, group: str) -> bool:
    return any(group in tenancy.owned_groups(d, t) for t in tenancy.vlan_tenants(d))


def qos_ports(d, group: str) -> list[tuple[str, Fabric]]:
    """(port, fabric) of every RoCE compute port with rail addresses and the RoCE storage port."""
    out: list[tuple[str, Fabric]] = []
    rf = rail_fabric(d, group)
    if rf is not None and rail_addresses(d, group) and not vlan_owned(d, group):
        out += [(p, rf[1]) for p in compute_ports(d, group)]
    g = d.nodes.get(group)
    a = g.attachments.get("storage") if g else None
    f = d.network.fabrics.get(a.network) if a else None
    port = tenancy.storage_port(d, group)
    if port is not None and f is not None and f.kind == "roce" and port not in {p for p, _ in out}:
        out.append((port, f))
    return out


def rail_ports(d, group: str) -> list[str]:
    """The ports whose RDMA devices jobs use (NCCL_IB_HCA, UCX_NET_DEVICES): the compute rails."""
    if not rail_addresses(d, group) or vlan_owned(d, group):
        return []
    return compute_ports(d, group)
