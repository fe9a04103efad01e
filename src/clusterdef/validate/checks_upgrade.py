"""Upgrade policy that cannot keep its capacity floors (knowledge/floors.py): a wave of a fixed size, the canary
(`upgrade.canary.nodes`) on a tenant's own node groups or the GPU Operator's `kubernetes_wave_size` on a
Kubernetes pool, that takes more than `upgrade.max_unavailable_pct` of what the tenant or pool has."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error
from ..knowledge.floors import cap, domains, group_sizes
from ..knowledge.services import gpu_groups
from .registry import Context, check


@check("upgrade-floors")
def upgrade_floors(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    up = d.upgrade
    pct = up.max_unavailable_pct
    sizes = group_sizes(d)
    workers = gpu_groups(d)
    canary_group = up.canary.node_group if up.canary.node_group in workers else None
    for (kind, name), groups in domains(d).items():
        n = sum(sizes[g] for g in groups)
        most = cap(n, pct)
        if kind == "tenant" and canary_group in groups and up.canary.nodes > most:
            yield error("upgrade-floor-unkeepable", ("upgrade", "canary", "nodes"),
                        f"the canary takes {up.canary.nodes} node(s) of tenant {name}'s {n} at once, more than "
                        f"upgrade.max_unavailable_pct={pct} allows ({most}): the tenant would keep "
                        f"{n - up.canary.nodes} of what it bought",
                        f"put the canary on a group no tenant owns (upgrade.canary.node_group), or raise "
                        f"upgrade.max_unavailable_pct to at least {-(-100 * up.canary.nodes // n)}")
        if kind == "pool" and up.kubernetes_wave_size > most:
            yield error("upgrade-floor-unkeepable", ("upgrade", "kubernetes_wave_size"),
                        f"the GPU Operator upgrades {up.kubernetes_wave_size} node(s) at once, more than "
                        f"upgrade.max_unavailable_pct={pct} of Kubernetes pool {name} ({n} nodes) allows ({most})",
                        f"lower upgrade.kubernetes_wave_size to {most}, or raise upgrade.max_unavailable_pct")
