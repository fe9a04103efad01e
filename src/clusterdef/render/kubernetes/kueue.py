"""Kueue: ResourceFlavors per GPU node group set, a Topology per fabric, Cohorts (with the spare
capacity no queue holds), WorkloadPriorityClasses per workload class, ClusterQueues with nominal
quota and borrowing/lending limits derived from reserved vs burst capacity, and the manager
configuration that turns on gang admission (waitForPodsReady) when a queue needs it."""

from __future__ import annotations

from dataclasses import dataclass

from ... import tenancy
from ...errors import present
from ...resolve import Resolved
from .common import (GPU, GPU_TOLERATION, KUEUE_API, L_FLAVOR, L_NS_NAME, L_TENANT, gpu_nodes, kubernetes_section,
                     per_gpu, tenant_toleration)
from . import network_operator
from .topology import fabric_of_groups, topologies

PRIORITY = {"inference": 100000, "interactive": 50000, "training": 10000, "batch": 1000}
"""WorkloadPriorityClass value per workload class: serving first, then people waiting, then jobs."""
PRIORITY_TEXT = {
    "inference": "Online inference and serving; preempts every other class.",
    "interactive": "Notebooks and debugging sessions a person waits on.",
    "training": "Distributed training, admitted as a gang.",
    "batch": "Batch work that can wait for capacity.",
}
RESOURCES = ["cpu", "memory", GPU]


@dataclass(frozen=True)
class QueueQuota:
    nominal: int
    borrowing: int | None  # None: the queue is in no cohort (no borrowing or lending limits apply)
    lending: int | None
    tenant: str | None


def queue_tenants(resolved: Resolved) -> dict[str, str]:
    """Kueue queue -> the tenant whose namespace has its LocalQueue (first tenant listing it)."""
    out: dict[str, str] = {}
    for tname, t in resolved.definition.tenants.items():
        if t.kubernetes:
            for q in t.kubernetes.queues:
                out.setdefault(q, tname)
    return out


def quotas(resolved: Resolved) -> dict[str, QueueQuota]:
    """Nominal, borrowing and lending GPUs per queue.

    A tenant's reserved GPUs are spread over its queues in the order it lists them; the reserved part
    of a queue is never lent (lendingLimit = nominal - reserved part) and a queue may borrow up to the
    tenant's burst GPUs. Explicit borrowing/lending limits in the definition win. Limits only apply to
    queues in a cohort."""
    d = resolved.definition
    queues = kubernetes_section(d).kueue.queues
    owner = queue_tenants(resolved)
    reserved_left = {t: d.tenants[t].quota.reserved_gpus for t in set(owner.values())}
    out: dict[str, QueueQuota] = {}
    for tname, t in d.tenants.items():
        if not t.kubernetes:
            continue
        for qname in t.kubernetes.queues:
            if qname not in queues or owner.get(qname) != tname or qname in out:
                continue
            q = queues[qname]
            part = min(q.nominal_gpus, reserved_left[tname])
            reserved_left[tname] -= part
            borrow = q.borrowing_limit_gpus if q.borrowing_limit_gpus is not None else t.quota.burst_gpus
            lend = q.lending_limit_gpus if q.lending_limit_gpus is not None else q.nominal_gpus - part
            out[qname] = QueueQuota(q.nominal_gpus, borrow if q.cohort else None,
                                    min(lend, q.nominal_gpus) if q.cohort else None, tname)
    for qname, q in queues.items():
        if qname not in out:  # no tenant: nothing of it is reserved, it borrows nothing unless told
            out[qname] = QueueQuota(q.nominal_gpus,
                                    (q.borrowing_limit_gpus or 0) if q.cohort else None,
                                    (q.lending_limit_gpus if q.lending_limit_gpus is not None else q.nominal_gpus)
                                    if q.cohort else None, None)
    return out


def flavor_capacity(resolved: Resolved, flavor: str) -> int:
    d = resolved.definition
    total = 0
    for g in kubernetes_section(d).kueue.flavors[flavor].node_groups:
        hosts, per_host = gpu_nodes(d, g)
        total += hosts * per_host
    return total


def _resources(resolved: Resolved, flavor: str, gpus: int, borrowing: int | None = None,
               lending: int | None = None) -> list[dict]:
    d = resolved.definition
    cpu, mem = per_gpu(d, kubernetes_section(d).kueue.flavors[flavor].node_groups)
    out = []
    for name, unit, fmt in (("cpu", cpu, str), ("memory", mem, lambda n: f"{n}Gi"), (GPU, 1, str)):
        r: dict = {"name": name, "nominalQuota": fmt(gpus * unit)}
        if borrowing is not None:
            r["borrowingLimit"] = fmt(borrowing * unit)
        if lending is not None:
            r["lendingLimit"] = fmt(lending * unit)
        out.append(r)
    return out


def _root(cohorts, name: str) -> str:
    seen = set()
    while cohorts.get(name) is not None and cohorts[name].parent and name not in seen:
        seen.add(name)
        name = cohorts[name].parent
    return name


def cluster_objects(resolved: Resolved) -> list[dict]:
    """Cluster-scoped Kueue objects, in the order they can be applied."""
    d = resolved.definition
    k = kubernetes_section(d)
    kq = k.kueue
    objs: list[dict] = []
    fabric_of = {f: fabric_of_groups(resolved, fl.node_groups) for f, fl in kq.flavors.items()}
    used_fabrics = {f for f in fabric_of.values() if f}
    objs.extend(topologies(resolved, used_fabrics))
    for fname, fl in kq.flavors.items():
        spec: dict = {"nodeLabels": {L_FLAVOR: fname}}
        owner = tenancy.flavor_owner(d, fname)
        if owner:  # a whole-node tenant's own nodes: select them and tolerate its taint
            spec["nodeLabels"][L_TENANT] = owner
        tolerations = ([dict(GPU_TOLERATION)] if k.gpu_node_taint else []) + \
            ([tenant_toleration(owner)] if owner else [])
        if tolerations:
            spec["tolerations"] = tolerations
        if fabric_of[fname]:
            spec["topologyName"] = fabric_of[fname]
        objs.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": fname}, "spec": spec})

    # Capacity of each flavor that no queue holds is the root cohort's own quota, borrowable by its queues.
    spare: dict[str, dict[str, int]] = {}
    for fname in kq.flavors:
        users = [q for q in kq.queues.values() if q.flavor == fname]
        roots = {_root(kq.cohorts, q.cohort) if q.cohort else None for q in users}
        left = flavor_capacity(resolved, fname) - sum(q.nominal_gpus for q in users)
        root = roots.pop() if len(roots) == 1 else None
        if root is not None and left > 0:
            spare.setdefault(root, {})[fname] = left
    for cname, c in kq.cohorts.items():
        spec = {}
        if c.parent:
            spec["parentName"] = c.parent
        if spare.get(cname):
            spec["resourceGroups"] = [{"coveredResources": list(RESOURCES), "flavors": [
                {"name": f, "resources": _resources(resolved, f, n)} for f, n in sorted(spare[cname].items())]}]
        objs.append({"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": cname}, "spec": spec})

    for wc in sorted({q.workload_class for q in kq.queues.values()}, key=lambda c: -PRIORITY[c]):
        objs.append({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
                     "metadata": {"name": f"clusterdef-{wc}"}, "value": PRIORITY[wc],
                     "description": PRIORITY_TEXT[wc]})

    q_of = quotas(resolved)
    namespaces: dict[str, list[str]] = {}
    for t in d.tenants.values():
        if t.kubernetes:
            for name in t.kubernetes.queues:
                namespaces.setdefault(name, []).append(t.kubernetes.namespace)
    for qname, q in kq.queues.items():
        qq = q_of[qname]
        labels: dict[str, str] = {"clusterdef.dev/workload-class": q.workload_class}
        if qq.tenant:
            labels[L_TENANT] = qq.tenant
        spec = {}
        if q.cohort:
            spec["cohortName"] = q.cohort
        if namespaces.get(qname):
            spec["namespaceSelector"] = {"matchExpressions": [
                {"key": L_NS_NAME, "operator": "In", "values": sorted(set(namespaces[qname]))}]}
        spec["queueingStrategy"] = "StrictFIFO" if q.gang else "BestEffortFIFO"
        spec["preemption"] = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
        spec["resourceGroups"] = [{"coveredResources": list(RESOURCES), "flavors": [
            {"name": q.flavor, "resources": _resources(resolved, q.flavor, qq.nominal, qq.borrowing, qq.lending)}]}]
        objs.append({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": qname, "labels": labels},
                     "spec": spec})
    return objs


def local_queues(resolved: Resolved, tenant: str) -> list[dict]:
    d = resolved.definition
    tk = present(d.tenants[tenant].kubernetes, f"tenants.{tenant}.kubernetes")
    known = kubernetes_section(d).kueue.queues
    return [{"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": {"name": q, "namespace": tk.namespace, "labels": {L_TENANT: tenant}},
             "spec": {"clusterQueue": q}}
            for q in tk.queues if q in known]


FRAMEWORKS = ["batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "jobset.x-k8s.io/jobset",
              "trainer.kubeflow.org/trainjob", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob",
              "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob", "workload.codeflare.dev/appwrapper", "pod", "deployment",
              "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"]
"""Job integrations: the Kueue chart's default list (kubernetes-sigs/kueue charts/kueue/values.yaml)."""


def manager_config(resolved: Resolved) -> dict:
    """Kueue's controller Configuration (the chart's managerConfig.controllerManagerConfigYaml), with the
    chart's defaults. waitForPodsReady is global in Kueue: present (enabled) as soon as one queue asks for
    gang admission, with blockAdmission so a gang is admitted only when the previous one's pods all run."""
    kq = kubernetes_section(resolved.definition).kueue
    cfg: dict = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    }
    if any(q.gang for q in kq.queues.values()):
        cfg["waitForPodsReady"] = {"timeout": f"{kq.pods_ready_timeout_s}s", "blockAdmission": True,
                                   "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5,
                                                         "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}}
    cfg["integrations"] = {"frameworks": list(FRAMEWORKS)}
    if network_operator.rdma_resources(resolved):
        # Kueue's default quotaCheckStrategy BlockUndeclared leaves a workload requesting a resource no
        # ClusterQueue covers unadmitted ("resource ... unavailable in ClusterQueue",
        # pkg/scheduler/flavorassigner/flavorassigner.go at v0.19.2): the RDMA devices a job needs for
        # InfiniBand are not metered, so Kueue ignores them (pkg/workload/workload.go dropExcludedResources).
        cfg["resources"] = {"excludeResourcePrefixes": [network_operator.RESOURCE_PREFIX]}
    return cfg
