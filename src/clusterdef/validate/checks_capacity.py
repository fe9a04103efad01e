"""Capacity as the ledger (capacity.py) computes it: capacity sold that no control plane can give
(a reservation beyond what a tenant's partitions and queues reach, reservations sold twice over one
pool of nodes) and capacity nobody can use (nodes only one tenant may use, beyond what it may hold)."""

from __future__ import annotations

from typing import Iterable

from .. import capacity
from ..errors import Finding, error, warning
from .registry import Context, check

PLANES = ("slurm", "kubernetes")


def _known(ctx: Context) -> bool:
    """Capacity is unknown while a node group names an undefined hardware type (ref-hardware)."""
    d = ctx.definition
    return all(g.hardware in d.hardware for g in d.nodes.values())


def _plane_text(cap: capacity.TenantCapacity) -> str:
    parts = []
    if cap.slurm is not None:
        parts.append(f"Slurm {cap.slurm.holdable} (its partitions' node groups: "
                     f"{', '.join(cap.slurm.groups) or 'none'})")
    if cap.kubernetes is not None:
        k = cap.kubernetes
        parts.append(f"Kubernetes {k.holdable} (its queues' nominal {k.nominal} + {k.borrowable} borrowable, "
                     f"within the {k.reachable} GPUs of its flavors)")
    return "; ".join(parts) or "no control plane (no Slurm account, no namespace)"


@check("tenant-capacity-reachable")
def tenant_capacity_reachable(ctx: Context) -> Iterable[Finding]:
    """Reserved (an error) and reserved + burst (a warning) against what the tenant's planes can give."""
    if not _known(ctx):
        return
    d = ctx.definition
    for tname, cap in capacity.ledger(d).items():
        t = d.tenants[tname]
        if (t.slurm and d.slurm is None) or (t.kubernetes and d.kubernetes is None):
            continue  # mapped to a plane the cluster lacks: tenant-slurm-without-slurm and the like say so
        if cap.reserved > cap.holdable:
            yield error("tenant-reserved-unreachable", ("tenants", tname, "quota", "reserved_gpus"),
                        f"tenant `{tname}` is sold {cap.reserved} reserved GPUs, but its control planes can give "
                        f"it at most {cap.holdable}: {_plane_text(cap)}",
                        "reserved capacity is a promise: give the tenant partitions or Kueue queues (nominal "
                        "quota) that reach its reservation, or lower reserved_gpus")
        elif cap.sold > cap.holdable:
            yield warning("tenant-burst-unreachable", ("tenants", tname, "quota", "burst_gpus"),
                          f"tenant `{tname}` is sold {cap.sold} GPUs (reserved {cap.reserved} + burst {cap.burst}), "
                          f"but its control planes can give it at most {cap.holdable}: {_plane_text(cap)}",
                          "lower burst_gpus to what it can reach, or let its queues borrow (another queue of "
                          "the cohort lending, or capacity no queue holds)")


def _plane_groups(d, plane: str) -> set[str]:
    return set(d.groups_of(plane))


def _queues_over_flavors(d) -> bool:
    kq = d.kubernetes.kueue if d.kubernetes else None
    return kq is not None and any(
        sum(n for _, _, n in on) > capacity.flavor_gpus(d, f)
        for f, on in capacity.flavor_nominal(d).items() if f in kq.flavors)


@check("tenant-capacity-per-control-plane")
def tenant_capacity_per_control_plane(ctx: Context) -> Iterable[Finding]:
    """Reservations held on each control plane (the ledger's per-plane part: a tenant on both holds its
    queues' nominal quota on Kubernetes and the rest on Slurm) against that plane's GPUs, and against
    each smaller pool tenants share: the node groups one tenant may use, holding every tenant that may
    use no other (reserved capacity sold twice)."""
    if not _known(ctx):
        return
    d = ctx.definition
    ledger = capacity.ledger(d)
    if sum(t.quota.reserved_gpus for t in d.tenants.values()) > ctx.total_gpus:
        return  # over the whole cluster: tenant-capacity's quota-reserved-over-capacity says so
    for plane in PLANES:
        if plane == "kubernetes" and _queues_over_flavors(d):
            continue  # queue-over-flavor-capacity: the queues' nominal quota, the Kubernetes parts, cannot hold
        on = {t: p for t, cap in ledger.items() if (p := getattr(cap, plane)) is not None}
        whole = _plane_groups(d, plane)
        gpus = capacity.plane_gpus(d, plane)
        reserved = sum(p.reserved for p in on.values())
        if on and reserved > gpus:
            yield error("quota-reserved-over-capacity", ("tenants",),
                        f"tenants reserve {reserved} GPUs on {plane} but {plane} owns {gpus}",
                        f"lower their reservations or give {plane} more nodes")
            continue
        seen: set[frozenset[str]] = set()
        for tname, p in on.items():
            pool = frozenset(p.groups)
            if not pool or pool in seen or whole <= pool:
                continue
            seen.add(pool)
            inside = {t: q for t, q in on.items() if q.groups and set(q.groups) <= pool and q.reserved}
            pool_gpus = sum(capacity.group_gpus(d, g) for g in pool)
            held = sum(q.reserved for q in inside.values())
            if held > pool_gpus:
                yield error("reserved-sold-twice", ("tenants", tname, "quota", "reserved_gpus"),
                            f"tenants {', '.join(f'`{t}` ({q.reserved})' for t, q in inside.items())} reserve "
                            f"{held} GPUs on {plane}, but the only node groups they may use there "
                            f"({', '.join(sorted(pool))}) have {pool_gpus}",
                            "lower their reservations, or let them use more node groups (partitions' "
                            "allow_accounts, Kueue flavors)")


def _unusable_at(d, tname: str, plane: str, p: capacity.Plane) -> tuple:
    """Where the GPUs only this tenant may use come from: its own node groups, else the first
    partition (or flavor) holding such a group."""
    if p.owned >= p.exclusive and p.owned:
        return ("tenants", tname, "isolation", "node_groups")
    mine = [g for g in p.groups if g not in d.tenants[tname].isolation.node_groups]
    if plane == "slurm" and d.slurm:
        for pname, part in d.slurm.partitions.items():
            if part.allow_accounts and any(g in mine for g in part.node_groups):
                return ("slurm", "partitions", pname, "allow_accounts")
    if plane == "kubernetes" and d.kubernetes:
        for fname, fl in d.kubernetes.kueue.flavors.items():
            if any(g in mine for g in fl.node_groups):
                return ("kubernetes", "kueue", "flavors", fname, "node_groups")
    return ("tenants", tname, "quota")


@check("tenant-capacity-unusable")
def tenant_capacity_unusable(ctx: Context) -> Iterable[Finding]:
    """GPUs only one tenant may use on a plane (its own nodes, a partition only its account may use, a
    flavor only its queues list) beyond what it may hold there: nobody can ever allocate them."""
    if not _known(ctx):
        return
    d = ctx.definition
    for tname, cap in capacity.ledger(d).items():
        for plane in PLANES:
            p = getattr(cap, plane)
            if p is None or p.exclusive <= p.limit:
                continue
            what = "GrpTRES" if plane == "slurm" else "ResourceQuota"
            yield warning("capacity-unusable", _unusable_at(d, tname, plane, p),
                          f"{p.exclusive - p.limit} of the {p.exclusive} {plane} GPUs only tenant `{tname}` may use "
                          f"can never be allocated: it may hold {p.limit} there at once ({what}; reserved "
                          f"{cap.reserved} + burst {cap.burst}"
                          + (f", less the {cap.kubernetes.limit} Kubernetes holds" if plane == "slurm"
                             and cap.kubernetes else "") + ")",
                          "raise the tenant's quota to its nodes, or let other tenants use them (partitions' "
                          "allow_accounts, flavors), or give it fewer nodes")
