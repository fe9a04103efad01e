"""Kubernetes: Kueue flavors and queues against capacity and tenants, driver pools, RDMA, and
network isolation of dedicated tenants' namespaces."""

from __future__ import annotations

from typing import Iterable

from .. import capacity, generations
from ..errors import Finding, error, warning
from .graph import cycles, describe, last_defined
from .registry import Context, check


@check("kubernetes-kueue-capacity")
def kueue_capacity(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    k = d.kubernetes
    if k is None:
        return
    kq = k.kueue
    flavor_of: dict[str, str] = {}
    for fname, fl in kq.flavors.items():
        for i, g in enumerate(fl.node_groups):
            if g in flavor_of:
                yield error("flavor-group-twice", ("kubernetes", "kueue", "flavors", fname, "node_groups", i),
                            f"node group `{g}` is in flavors `{flavor_of[g]}` and `{fname}`",
                            "a node carries one flavor label; put each node group in one flavor")
            else:
                flavor_of[g] = fname
    for fname, models in generations.mixed_flavors(d).items():
        # A ResourceFlavor selects its nodes by the flavor label alone, so a workload admitted to it may get
        # nodes of each model; a Kueue podset is assigned one flavor per resource group
        # (pkg/scheduler/flavorassigner/flavorassigner.go at v0.19.2): one model per flavor keeps it on one.
        yield error("flavor-mixes-gpu-models", ("kubernetes", "kueue", "flavors", fname, "node_groups"),
                    f"Kueue flavor `{fname}` spans GPU models {', '.join(models)}: a workload admitted to it may "
                    "run its pods on nodes of each",
                    "make one flavor per GPU model (its node groups all of one hardware GPU type), and a queue "
                    "per flavor")
    for qname, q in kq.queues.items():
        # ClusterQueue spec.resourceGroups[].flavors is a list map keyed by name (kueue v0.19.2
        # kueue.x-k8s.io_clusterqueues.yaml): the API server refuses a flavor listed twice.
        seen = {q.flavor}
        for i, fq in enumerate(q.fallback_flavors):
            if fq.flavor in seen:
                yield error("queue-flavor-twice", ("kubernetes", "kueue", "queues", qname, "fallback_flavors", i,
                                                   "flavor"),
                            f"queue `{qname}` lists flavor `{fq.flavor}` twice",
                            "list each flavor once: `flavor` first, then each fallback flavor in order")
            seen.add(fq.flavor)
    on_flavor = capacity.flavor_nominal(d)
    for fname, fl in kq.flavors.items():
        if any(g not in d.nodes or d.nodes[g].hardware not in d.hardware for g in fl.node_groups):
            continue  # reported by the reference checks
        gpus = sum(ctx.gpus_in(g) for g in fl.node_groups)
        users = on_flavor.get(fname, [])
        nominal = sum(n for _, _, n in users)
        if users and nominal > gpus:
            last, i, _ = users[-1]
            at = ("nominal_gpus",) if i == 0 else ("fallback_flavors", i - 1, "nominal_gpus")
            yield error("queue-over-flavor-capacity", ("kubernetes", "kueue", "queues", last) + at,
                        f"queues on flavor `{fname}` hold {nominal} nominal GPUs but its node groups "
                        f"({', '.join(fl.node_groups)}) have {gpus}",
                        "nominal quota is guaranteed capacity: lower nominal_gpus or add nodes to the flavor")


@check("kubernetes-cohort-tree")
def cohort_tree(ctx: Context) -> Iterable[Finding]:
    """Kueue cohorts' parents form a tree: no cohort is its own parent or ancestor."""
    k = ctx.definition.kubernetes
    if k is None:
        return
    cohorts = k.kueue.cohorts
    base = ("kubernetes", "kueue", "cohorts")
    for cname, c in cohorts.items():
        if c.parent == cname:
            yield error("cohort-parent-self", base + (cname, "parent"),
                        f"cohort `{cname}` names itself as its parent",
                        "set `parent` to another cohort, or drop it to make the cohort a root")
    order = {c: i for i, c in enumerate(cohorts)}

    def parent_of(cohort: str) -> tuple[str, ...]:
        parent = cohorts[cohort].parent
        return (parent,) if parent else ()

    for cycle in cycles(cohorts, parent_of):
        at = last_defined(cycle, order)
        yield error("cohort-parent-cycle", base + (at, "parent"),
                    f"cohorts {describe(cycle, at)} form a parent cycle, so the cohort hierarchy has no root "
                    "and the quota its queues may borrow is undefined",
                    "break the cycle: drop one of these cohorts' `parent`, or point it at a cohort outside "
                    "the cycle")


@check("kubernetes-queue-tenants")
def queue_tenants(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    if d.kubernetes is None:
        return
    owner: dict[str, str] = {}
    for tname, t in d.tenants.items():
        if not t.kubernetes:
            continue
        for i, q in enumerate(t.kubernetes.queues):
            if q in owner and owner[q] != tname:
                yield error("queue-two-tenants", ("tenants", tname, "kubernetes", "queues", i),
                            f"queue `{q}` is listed by tenants `{owner[q]}` and `{tname}`",
                            "a ClusterQueue's quota belongs to one tenant; give each tenant its own queue")
            owner.setdefault(q, tname)
    for qname in d.kubernetes.kueue.queues:
        if qname not in owner:
            yield warning("queue-no-tenant", ("kubernetes", "kueue", "queues", qname),
                          f"no tenant lists queue `{qname}`, so no namespace can submit to it",
                          "add it to a tenant's `kubernetes.queues`, or remove it")


@check("kubernetes-driver-pools")
def driver_pools(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    if d.kubernetes is None:
        return
    pools = d.kubernetes.gpu_operator.driver_pools
    seen: dict[str, str] = {}
    for pname, pool in pools.items():
        base = ("kubernetes", "gpu_operator", "driver_pools", pname)
        if pname == "default":
            yield error("driver-pool-reserved-name", base,
                        "driver pool `default` is the name of the groups that run the set's driver",
                        "give the pool another name (e.g. canary)")
        vs = ctx.matrix.sets.get(pool.matrix)
        if vs is None:
            yield error("ref-driver-pool-set", base + ("matrix",),
                        f"driver pool `{pname}` runs the driver of `{pool.matrix}`, which is not a known set",
                        f"known sets: {', '.join(sorted(ctx.matrix.sets)) or 'none'}")
        elif vs.status == "retired" or (vs.status == "candidate" and not d.cluster.allow_candidate):
            yield error("driver-pool-set-status", base + ("matrix",),
                        f"driver pool `{pname}` runs the driver of set `{vs.name}`, which is {vs.status}",
                        "use a validated set, or a candidate with `cluster.allow_candidate: true` (labs, canaries)")
        for i, g in enumerate(pool.node_groups):
            where = base + ("node_groups", i)
            group = d.nodes.get(g)
            if group is None:
                yield error("ref-node-group", where, f"driver pool `{pname}` names unknown node group `{g}`",
                            f"node groups: {', '.join(d.nodes)}")
            elif group.control_plane != "kubernetes" or group.hardware not in d.hardware \
                    or d.hardware[group.hardware].gpu is None:
                yield error("driver-pool-not-kubernetes", where,
                            f"driver pool `{pname}` names `{g}`, which is not a Kubernetes-owned GPU node group",
                            "the GPU Operator only manages drivers on Kubernetes-owned GPU nodes")
            elif g in seen:
                yield error("driver-pool-group-twice", where,
                            f"node group `{g}` is in driver pools `{seen[g]}` and `{pname}`",
                            "a node runs one driver: put each group in one pool")
            else:
                seen[g] = pname


@check("kubernetes-rdma")
def rdma(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    if d.kubernetes is None:
        return
    on_rdma = []
    for n, g in d.nodes.items():
        if g.control_plane == "kubernetes" and g.placement:
            f = d.network.fabrics.get(g.placement.fabric)
            if f is not None and f.rdma and f.kind in ("infiniband", "roce"):
                on_rdma.append(n)
    if on_rdma and not d.kubernetes.network_operator.enabled:
        yield warning("rdma-without-network-operator", ("kubernetes", "network_operator"),
                      f"Kubernetes node groups {', '.join(on_rdma)} sit on an RDMA fabric but the Network "
                      "Operator is off, so pods get no RDMA devices",
                      "set `kubernetes.network_operator.enabled: true`")
    no = d.kubernetes.network_operator
    if on_rdma and no.enabled and no.ofed_driver is None:
        from ..knowledge.images import DOCA_HOST_PACKAGE as HOST_PACKAGE
        from ..knowledge.images import carried_by

        vs = ctx.chosen_set
        doca = vs.components.doca if vs is not None else None
        lacking = sorted({d.nodes[n].image for n in on_rdma
                          if d.nodes[n].image in d.images and "doca" not in carried_by(d, d.nodes[n].image)})
        if doca is None or lacking:
            why = (f"the set {d.cluster.matrix} pins no doca" if doca is None else
                   f"image(s) {', '.join(lacking)} do not carry the set's DOCA-OFED (`{HOST_PACKAGE}`; "
                   "their hardware has no ConnectX/BlueField HCA)")
            yield error("rdma-no-mofed", ("kubernetes", "network_operator"),
                        f"the Network Operator serves RDMA to Kubernetes node groups {', '.join(on_rdma)} but no "
                        f"MOFED is declared: {why}, and `ofed_driver` is not set",
                        "set `kubernetes.network_operator.ofed_driver: {version: ...}` (the doca-driver container), "
                        "or use a set that pins doca: images of hardware with ConnectX/BlueField HCAs carry its "
                        "DOCA-OFED (host MOFED)")
