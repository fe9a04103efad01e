"""Capacity floors of a rollout: no wave takes more than `upgrade.max_unavailable_pct` of any capacity domain
at once. A domain is a Slurm partition, the node groups a tenant owns (`isolation.node_groups`: what a
dedicated tenant bought), or a Kubernetes pool (a Kueue resource flavor's node groups). Each wave lies in one
node group, and a group's domains are the same for all its hosts, so a group's waves are bounded by
`group_limit`: the smallest share any of its domains allows (at least one node, so that a domain of one node
can be upgraded at all). Both the rendered inventory's waves (render/ansible) and the plan's (plan/rollout)
use it; `lowest` reports what each domain keeps while the waves run one after another (apply runs them in
order, never two at once). Nothing here imports validation or rendering.
"""

from __future__ import annotations

from .. import hostlist


def cap(nodes: int, pct: int) -> int:
    """Nodes of a domain of `nodes` one wave may take: pct% rounded down, at least 1 (a floor, so never up)."""
    return max(1, nodes * pct // 100)


def domains(definition) -> dict[tuple[str, str], list[str]]:
    """(kind, name) -> node groups, for kind partition, tenant and pool; only domains of GPU node groups."""
    from .services import gpu_groups

    workers = set(gpu_groups(definition))
    out: dict[tuple[str, str], list[str]] = {}
    if definition.slurm:
        for name, p in definition.slurm.partitions.items():
            out[("partition", name)] = [g for g in p.node_groups if g in workers]
    for name, t in definition.tenants.items():
        out[("tenant", name)] = [g for g in t.isolation.node_groups if g in workers]
    kueue = definition.kubernetes.kueue if definition.kubernetes else None
    for name, f in (kueue.flavors.items() if kueue else ()):
        out[("pool", name)] = [g for g in f.node_groups if g in workers]
    return {k: v for k, v in out.items() if v}


def group_sizes(definition) -> dict[str, int]:
    return {name: len(hostlist.names(g.hosts)) for name, g in definition.nodes.items()}


def group_limit(definition, group: str) -> tuple[int, tuple[str, str] | None]:
    """(the most nodes of `group` one wave may take, the domain that binds it; None: only wave_size)."""
    pct = definition.upgrade.max_unavailable_pct
    sizes = group_sizes(definition)
    best, why = definition.upgrade.wave_size, None
    for key, groups in domains(definition).items():
        if group in groups:
            n = cap(sum(sizes[g] for g in groups), pct)
            if n < best:
                best, why = n, key
    return best, why


def lowest(definition, waves: list[list[str]]) -> list[dict]:
    """Per domain: its nodes and GPUs, and the lowest it keeps in service while the waves (canaries included)
    run one at a time."""
    per_node = {name: hw.gpu.count if hw.gpu else 0 for name, hw in definition.hardware.items()}
    group_of = {h: name for name, g in definition.nodes.items() for h in hostlist.names(g.hosts)}
    out = []
    for (kind, name), groups in domains(definition).items():
        hosts = {h for g in groups for h in hostlist.names(definition.nodes[g].hosts)}
        down = max((len(hosts.intersection(w)) for w in waves), default=0)
        gpn = {g: per_node[definition.nodes[g].hardware] for g in groups}
        gpus = sum(gpn[group_of[h]] for h in hosts)
        gpus_down = max((sum(gpn[group_of[h]] for h in hosts.intersection(w)) for w in waves), default=0)
        out.append({"kind": kind, "name": name, "nodes": len(hosts), "gpus": gpus,
                    "lowest_nodes": len(hosts) - down, "lowest_gpus": gpus - gpus_down,
                    "lowest_pct": round(100 * (len(hosts) - down) / len(hosts), 1) if hosts else 100.0})
    return out
