"""Management segmentation: what a tenant's pods may reach outside the cluster, as NetworkPolicy
ipBlocks with the BMC network (network.management) cut out, and the evaluation of an ipBlock the
renderer (render/kubernetes/tenants.py) and the `management-exposed` check share. Pure."""

from __future__ import annotations

from ipaddress import IPv4Network

from .model import Definition

EVERYWHERE = IPv4Network("0.0.0.0/0")


def egress_cidrs(d: Definition, tenant: str) -> tuple[IPv4Network, ...]:
    """The networks outside the cluster a tenant's pods may reach: `kubernetes.egress_cidrs`, else
    everything for a shared tenant and nothing for a dedicated one."""
    t = d.tenants[tenant]
    if t.kubernetes is not None and t.kubernetes.egress_cidrs is not None:
        return t.kubernetes.egress_cidrs
    return () if t.isolation.level == "dedicated" else (EVERYWHERE,)


def policed(d: Definition, tenant: str) -> bool:
    """Whether the tenant's egress needs ipBlocks: a BMC network to cut out, or networks declared."""
    t = d.tenants[tenant]
    return d.network.management is not None or (t.kubernetes is not None and t.kubernetes.egress_cidrs is not None)


def ip_blocks(d: Definition, tenant: str) -> list[dict]:
    """The tenant's egress ipBlocks: each allowed network with the BMC network as `except` where it
    holds it. A network inside the BMC network cannot be cut (an except must be smaller than its
    cidr): it is rendered as declared, and `management-exposed` refuses the definition."""
    mgmt = d.network.management.subnet if d.network.management else None
    out = []
    for net in egress_cidrs(d, tenant):
        block: dict = {"cidr": str(net)}
        if mgmt is not None and mgmt != net and mgmt.subnet_of(net):
            block["except"] = [str(mgmt)]
        out.append(block)
    return out


def reaches(block: dict, net: IPv4Network) -> bool:
    """Whether an ipBlock lets traffic reach any address of `net`: its cidr overlaps `net` and its
    excepts do not cover that overlap."""
    cidr = IPv4Network(block["cidr"])
    if not cidr.overlaps(net):
        return False
    left = [net if net.subnet_of(cidr) else cidr]  # the part of `net` the cidr holds
    for e in map(IPv4Network, block.get("except", ())):
        left = [piece for p in left if not p.subnet_of(e)
                for piece in (p.address_exclude(e) if e.subnet_of(p) else (p,))]
    return bool(left)
