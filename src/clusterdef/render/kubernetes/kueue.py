"""Kueue: ResourceFlavors per GPU node group set, a Topology per fabric, Cohorts (with the spare
capacity no queue holds), WorkloadPriorityClasses per workload class, ClusterQueues with nominal
quota and borrowing/lending limits derived from reserved vs burst capacity, and the manager
configuration that turns on gang admission (waitForPodsReady) when a queue needs it."""

from __future__ import annotations

import json

from ... import capacity, tenancy
from ...errors import present
from ...resolve import Resolved
from .common import (GPU, GPU_TOLERATION, KUEUE_API, L_FLAVOR, L_NS_NAME, L_TENANT, kubernetes_section,
                     per_gpu, tenant_toleration)
from . import network_operator
from .admission import API as ADMISSION_API
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
    spare = capacity.cohort_spare(d)
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

    q_of = capacity.queue_quotas(d)
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
        spec["preemption"] = {"reclaimWithinCohort": q.reclaim_within_cohort, "withinClusterQueue": "LowerPriority"}
        # One resource group; its flavors in the queue's order of preference: Kueue's flavor assigner
        # tries them in the order listed (pkg/scheduler/flavorassigner/flavorassigner.go at v0.19.2) and
        # flavorFungibility says when it moves on to the next (kueue.x-k8s.io_clusterqueues.yaml at v0.19.2).
        spec["resourceGroups"] = [{"coveredResources": list(RESOURCES), "flavors": [
            {"name": s.flavor, "resources": _resources(resolved, s.flavor, s.nominal, s.borrowing, s.lending)}
            for s in qq.flavors]}]
        spec["flavorFungibility"] = {"whenCanBorrow": q.flavor_fungibility.when_can_borrow,
                                     "whenCanPreempt": q.flavor_fungibility.when_can_preempt}
        objs.append({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": qname, "labels": labels},
                     "spec": spec})
    return objs


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
"""The job labels Kueue reads: the LocalQueue a job goes to, and the longest it may run once admitted. Read at
v0.19.2: pkg/controller/constants/constants.go (QueueLabel, MaxExecTimeSecondsLabel); jobframework/utils.go
MaximumExecutionTimeSecondsForObject parses the label base 10 into 32 bits (a value it cannot parse, or <= 0, is
no limit at all), and jobframework/validation.go refuses a non-number or <= 0 at creation. The policy's limits
(<= 31,536,000 s) keep an accepted label well inside 32 bits."""
MAX_EXEC_POLICY = "clusterdef-queue-max-execution"


def max_execution_objects(resolved: Resolved) -> list[dict]:
    """A ValidatingAdmissionPolicy that refuses a job sent to a queue with max_execution_s (the queue policy's
    max_job_hours) unless it carries kueue.x-k8s.io/max-exec-time-seconds, a whole number of seconds at most the
    queue's limit. LocalQueues are named after their ClusterQueue (local_queues), so the queue-name label names the
    ClusterQueue; objects a controller owns (a Job's pods) are left to their owner, which was checked."""
    queues = kubernetes_section(resolved.definition).kueue.queues
    limits = {n: q.max_execution_s for n, q in sorted(queues.items()) if q.max_execution_s}
    if not limits:
        return []
    table = "{" + ", ".join(f"{json.dumps(n)}: {v}" for n, v in limits.items()) + "}"
    label = f"object.metadata.labels[{json.dumps(MAX_EXEC_LABEL)}]"
    return [{
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": MAX_EXEC_POLICY, "annotations": {
            "clusterdef.dev/limits": ", ".join(f"{n}: {v} s" for n, v in limits.items())}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                                   "resources": ["*"]}],
                "objectSelector": {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "In",
                                                         "values": list(limits)}]}},
            "matchConditions": [{
                "name": "not-owned-by-a-controller",
                "expression": "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists("
                              "r, has(r.controller) && r.controller)"}],
            "validations": [
                {"expression": f"{json.dumps(MAX_EXEC_LABEL)} in object.metadata.labels",
                 "message": f"a job sent to this queue must say how long it may run: label {MAX_EXEC_LABEL} "
                            "(seconds), at most the queue policy's max_job_hours",
                 "reason": "Forbidden"},
                {"expression": f"!({json.dumps(MAX_EXEC_LABEL)} in object.metadata.labels) || "
                               f"({label}.matches('^[1-9][0-9]{{0,9}}$') && "
                               f"int({label}) <= {table}[object.metadata.labels[{json.dumps(QUEUE_LABEL)}]])",
                 "message": f"{MAX_EXEC_LABEL} must be a whole number of seconds at most the queue's limit "
                            f"({', '.join(f'{n}: {v}' for n, v in limits.items())})",
                 "reason": "Forbidden"},
            ],
        },
    }, {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": MAX_EXEC_POLICY},
        "spec": {"policyName": MAX_EXEC_POLICY, "validationActions": ["Deny"]},
    }]


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
