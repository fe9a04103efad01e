"""Tenants: capacity sold vs capacity owned, and isolation that matches what was sold."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error, warning
from .registry import Context, check


@check("tenant-capacity")
def tenant_capacity(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    if not d.tenants or any(g.hardware not in d.hardware for g in d.nodes.values()):
        return  # capacity is unknown while a node group names an undefined hardware type
    capacity = ctx.total_gpus
    reserved = sum(t.quota.reserved_gpus for t in d.tenants.values())
    ceiling = sum(t.quota.reserved_gpus + t.quota.burst_gpus for t in d.tenants.values())
    if reserved > capacity:
        yield error("quota-reserved-over-capacity", ("tenants",),
                    f"tenants reserve {reserved} GPUs but the cluster has {capacity}",
                    "reserved capacity is a promise: lower reservations or add nodes")
    elif ceiling > capacity:
        yield warning("quota-burst-oversubscribed", ("tenants",),
                      f"reserved + burst quotas total {ceiling} GPUs for {capacity} physical "
                      f"({ceiling / capacity:.2f}x oversubscribed)" if capacity else
                      f"reserved + burst quotas total {ceiling} GPUs but the cluster has none",
                      "burst is borrowed idle capacity; confirm the oversubscription is intended")
    k = d.kubernetes
    queues = k.kueue.queues if k else {}
    for tname, t in d.tenants.items():
        if not t.kubernetes:
            continue
        nominal = sum(queues[q].nominal_gpus for q in t.kubernetes.queues if q in queues)
        allowed = t.quota.reserved_gpus + t.quota.burst_gpus
        if nominal > allowed:
            yield error("queue-over-tenant-quota", ("tenants", tname, "kubernetes", "queues"),
                        f"tenant `{tname}`'s Kueue queues have {nominal} nominal GPUs, above its quota of "
                        f"{allowed} (reserved {t.quota.reserved_gpus} + burst {t.quota.burst_gpus})",
                        "lower the queues' nominal_gpus or raise the tenant's quota")


@check("tenant-isolation")
def tenant_isolation(ctx: Context) -> Iterable[Finding]:
    for tname, t in ctx.definition.tenants.items():
        iso = t.isolation
        if iso.level != "dedicated":
            continue
        lacking = [layer for layer in ("device", "network", "storage") if getattr(iso, layer) == "none"]
        for layer in lacking:
            yield error("dedicated-not-isolated", ("tenants", tname, "isolation", layer),
                        f"tenant `{tname}` is sold as dedicated but has no {layer} isolation",
                        {"device": "use cgroup device constraints, MIG or whole nodes",
                         "network": "use network-policy (Kubernetes), partition keys (InfiniBand) or VLANs",
                         "storage": "use a project quota or a dedicated filesystem"}[layer])
        if iso.network == "network-policy" and t.kubernetes is None:
            yield error("dedicated-not-isolated", ("tenants", tname, "isolation", "network"),
                        f"tenant `{tname}` relies on network policy but has no Kubernetes namespace",
                        "map the tenant to a namespace, or isolate its network with partition keys or VLANs")
        if iso.storage != "none" and t.storage is None:
            yield error("dedicated-not-isolated", ("tenants", tname, "storage"),
                        f"tenant `{tname}` has {iso.storage} storage isolation but no storage quota",
                        "add `storage: {quota_tib: N}`")
