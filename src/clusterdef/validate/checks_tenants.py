"""Tenants: capacity sold vs capacity owned, and isolation that matches what was sold."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error, warning
from .graph import cycles, describe, last_defined
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
        nominal = sum(fq.nominal_gpus for q in t.kubernetes.queues if q in queues
                      for fq in queues[q].flavor_quotas())
        allowed = t.quota.reserved_gpus + t.quota.burst_gpus
        if nominal > allowed:
            yield error("queue-over-tenant-quota", ("tenants", tname, "kubernetes", "queues"),
                        f"tenant `{tname}`'s Kueue queues have {nominal} nominal GPUs, above its quota of "
                        f"{allowed} (reserved {t.quota.reserved_gpus} + burst {t.quota.burst_gpus})",
                        "lower the queues' nominal_gpus or raise the tenant's quota")


@check("tenant-isolation")
def tenant_isolation(ctx: Context) -> Iterable[Finding]:
    """A dedicated tenant claims every layer; what each claim needs is checked by tenant-enforced."""
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


@check("tenant-names")
def tenant_names(ctx: Context) -> Iterable[Finding]:
    """One tenant per Slurm account and per Kubernetes namespace: the account's limits and the
    namespace's quota, policy and RBAC are per tenant, and the renderers key them by name."""
    accounts: dict[str, str] = {}
    namespaces: dict[str, str] = {}
    for tname, t in ctx.definition.tenants.items():
        if t.slurm:
            acct = t.slurm.account
            if acct in accounts:
                yield error("tenant-account-shared", ("tenants", tname, "slurm", "account"),
                            f"tenants `{accounts[acct]}` and `{tname}` both map to Slurm account `{acct}`, so "
                            "one account would carry only one tenant's quota (GrpTRES), FairShare and QOS",
                            "give each tenant its own account; to group tenants, give their accounts a "
                            "common `slurm.parent`")
            else:
                accounts[acct] = tname
        if t.kubernetes:
            ns = t.kubernetes.namespace
            if ns in namespaces:
                yield error("tenant-namespace-shared", ("tenants", tname, "kubernetes", "namespace"),
                            f"tenants `{namespaces[ns]}` and `{tname}` both map to Kubernetes namespace `{ns}`, "
                            "so their ResourceQuota, network policy and role bindings would collide",
                            "give each tenant its own namespace")
            else:
                namespaces[ns] = tname


@check("slurm-account-tree")
def slurm_account_tree(ctx: Context) -> Iterable[Finding]:
    """Tenant accounts' parents form a tree under root: no account is its own parent or ancestor."""
    owner: dict[str, str] = {}  # account -> the first tenant mapping to it (a second is tenant-account-shared)
    parent: dict[str, str] = {}  # account -> that tenant's parent account
    for tname, t in ctx.definition.tenants.items():
        if t.slurm and t.slurm.account not in owner:
            owner[t.slurm.account] = tname
            parent[t.slurm.account] = t.slurm.parent
    for acct, tname in owner.items():
        if parent[acct] == acct:
            path = ("tenants", tname, "slurm", "parent")
            if acct == "root":
                yield error("account-parent-self", ("tenants", tname, "slurm", "account"),
                            f"tenant `{tname}` maps to account `root`, Slurm's top account, which has no parent",
                            "choose another account name; accounts hang under root by default")
            else:
                yield error("account-parent-self", path,
                            f"tenant `{tname}`'s Slurm account `{acct}` names itself as its parent",
                            "set `slurm.parent` to another account, or drop it to hang the account under root")
    order = {acct: i for i, acct in enumerate(owner)}
    for cycle in cycles(owner, lambda a: (parent[a],)):
        at = last_defined(cycle, order)
        k = cycle.index(at)
        members = ", ".join(f"`{owner[a]}`" for a in cycle[k:] + cycle[:k])
        yield error("account-parent-cycle", ("tenants", owner[at], "slurm", "parent"),
                    f"Slurm accounts {describe(cycle, at)} form a parent cycle, so none of them is under root "
                    f"(tenants {members})",
                    "break the cycle: set one of these tenants' `slurm.parent` to `root` or to an account "
                    "outside the cycle")
