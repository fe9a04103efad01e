"""Dangling references between parts of the definition."""

from __future__ import annotations

from difflib import get_close_matches
from typing import Iterable

from ..errors import Finding, Path, error
from .registry import Context, check


def _hint(kind: str, name: str, known: Iterable[str], where: str) -> str:
    known = sorted(known)
    close = get_close_matches(name, known, n=1)
    if close:
        return f"did you mean `{close[0]}`?"
    if not known:
        return f"define it under `{where}`"
    return f"known {kind}s: {', '.join(known[:8])}{' ...' if len(known) > 8 else ''}"


def _ref(code: str, path, kind: str, name: str, known, where: str) -> Finding:
    return error(code, path, f"{kind} `{name}` is not defined", _hint(kind, name, known, where))


@check("references")
def references(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    for gname, g in d.nodes.items():
        if g.hardware not in d.hardware:
            yield _ref("ref-hardware", ("nodes", gname, "hardware"), "hardware type", g.hardware, d.hardware,
                       "hardware")
        if g.image not in d.images:
            yield _ref("ref-image", ("nodes", gname, "image"), "image", g.image, d.images, "images")
        if g.placement and g.placement.fabric not in d.network.fabrics:
            yield _ref("ref-fabric", ("nodes", gname, "placement", "fabric"), "fabric", g.placement.fabric,
                       d.network.fabrics, "network.fabrics")

    accounts = {t.slurm.account for t in d.tenants.values() if t.slurm} | {"root"}
    if d.slurm:
        qos = d.slurm.qos
        for pname, p in d.slurm.partitions.items():
            for i, gname in enumerate(p.node_groups):
                path: Path = ("slurm", "partitions", pname, "node_groups", i)
                if gname not in d.nodes:
                    yield _ref("ref-node-group", path, "node group", gname, d.nodes, "nodes")
                elif d.nodes[gname].control_plane != "slurm":
                    yield error("partition-not-slurm", path,
                                f"partition `{pname}` uses node group `{gname}`, which Kubernetes owns",
                                "only node groups with control_plane: slurm may be in a partition")
            if p.qos and p.qos not in qos:
                yield _ref("ref-qos", ("slurm", "partitions", pname, "qos"), "QOS", p.qos, qos, "slurm.qos")
            for i, acct in enumerate(p.allow_accounts):
                if acct not in accounts:
                    yield _ref("ref-account", ("slurm", "partitions", pname, "allow_accounts", i),
                               "Slurm account", acct, accounts, "tenants.<name>.slurm.account")
        for qname, q in qos.items():
            for i, other in enumerate(q.preempt):
                if other not in qos:
                    yield _ref("ref-qos", ("slurm", "qos", qname, "preempt", i), "QOS", other, qos, "slurm.qos")

    kueue = d.kubernetes.kueue if d.kubernetes else None
    if kueue:
        for fname, f in kueue.flavors.items():
            for i, gname in enumerate(f.node_groups):
                path = ("kubernetes", "kueue", "flavors", fname, "node_groups", i)
                if gname not in d.nodes:
                    yield _ref("ref-node-group", path, "node group", gname, d.nodes, "nodes")
                elif d.nodes[gname].control_plane != "kubernetes":
                    yield error("flavor-not-kubernetes", path,
                                f"flavor `{fname}` uses node group `{gname}`, which Slurm owns",
                                "only node groups with control_plane: kubernetes may back a Kueue flavor")
        for cname, c in kueue.cohorts.items():
            if c.parent and c.parent not in kueue.cohorts:
                yield _ref("ref-cohort", ("kubernetes", "kueue", "cohorts", cname, "parent"), "cohort",
                           c.parent, kueue.cohorts, "kubernetes.kueue.cohorts")
        for qname, queue in kueue.queues.items():
            if queue.flavor not in kueue.flavors:
                yield _ref("ref-flavor", ("kubernetes", "kueue", "queues", qname, "flavor"), "flavor", queue.flavor,
                           kueue.flavors, "kubernetes.kueue.flavors")
            for i, fq in enumerate(queue.fallback_flavors):
                if fq.flavor not in kueue.flavors:
                    yield _ref("ref-flavor", ("kubernetes", "kueue", "queues", qname, "fallback_flavors", i, "flavor"),
                               "flavor", fq.flavor, kueue.flavors, "kubernetes.kueue.flavors")
            if queue.cohort and queue.cohort not in kueue.cohorts:
                yield _ref("ref-cohort", ("kubernetes", "kueue", "queues", qname, "cohort"), "cohort", queue.cohort,
                           kueue.cohorts, "kubernetes.kueue.cohorts")

    queues = kueue.queues if kueue else {}
    for tname, t in d.tenants.items():
        if t.slurm:
            if d.slurm is None:
                yield error("tenant-slurm-without-slurm", ("tenants", tname, "slurm"),
                            f"tenant `{tname}` maps to a Slurm account but the definition has no `slurm` section",
                            "add a `slurm` section or remove the tenant's `slurm` mapping")
            else:
                for i, qos_name in enumerate(t.slurm.qos):
                    if qos_name not in d.slurm.qos:
                        yield _ref("ref-qos", ("tenants", tname, "slurm", "qos", i), "QOS", qos_name, d.slurm.qos,
                                   "slurm.qos")
        if t.kubernetes:
            for i, queue_name in enumerate(t.kubernetes.queues):
                if queue_name not in queues:
                    yield _ref("ref-queue", ("tenants", tname, "kubernetes", "queues", i), "Kueue queue", queue_name,
                               queues, "kubernetes.kueue.queues")

    canary = d.upgrade.canary
    if canary.node_group and canary.node_group not in d.nodes:
        yield _ref("ref-node-group", ("upgrade", "canary", "node_group"), "node group", canary.node_group,
                   d.nodes, "nodes")
    for tname, test in d.upgrade.smoke_tests.items():
        for i, group in enumerate(test.node_groups):
            if group not in d.nodes:
                yield _ref("ref-node-group", ("upgrade", "smoke_tests", tname, "node_groups", i), "node group", group,
                           d.nodes, "nodes")


@check("sections")
def sections(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    slurm_groups = d.groups_of("slurm")
    if slurm_groups and d.slurm is None:
        first = next(iter(slurm_groups))
        yield error("slurm-missing", ("nodes", first, "control_plane"),
                    f"node group `{first}` is owned by Slurm but the definition has no `slurm` section",
                    "add a `slurm` section with controllers and partitions")
    if d.slurm and not slurm_groups:
        yield error("slurm-without-nodes", ("slurm",),
                    "the definition has a `slurm` section but no node group is owned by Slurm",
                    "set control_plane: slurm on a node group or drop the `slurm` section")
