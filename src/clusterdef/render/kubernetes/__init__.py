"""Kubernetes target: Helm values and Kubernetes objects for the Kubernetes-owned part of the cluster.

`plan(resolved)` returns the data (what infra/ deploys through Pulumi); `render(resolved)` writes the
same data as YAML files under kubernetes/. Both are pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...resolve import Resolved
from . import admission, data, gpu_operator, identity, image_policy, kueue, network_operator, nodes, nvidia_dra, tenants
from .common import KUEUE_VERSION, NETWORK_OPERATOR_VERSION, dump, dump_all

ROOT = "kubernetes"
_FILES = {"Topology": "topologies.yaml", "ResourceFlavor": "resourceflavors.yaml", "Cohort": "cohorts.yaml",
          "WorkloadPriorityClass": "workloadpriorityclasses.yaml", "ClusterQueue": "clusterqueues.yaml"}


@dataclass(frozen=True)
class KubernetesPlan:
    gpu_operator_release: str
    gpu_operator_namespace: str
    gpu_operator_values: dict
    nvidia_drivers: list[dict]
    network_operator_namespace: str
    network_operator_values: dict | None
    nic_cluster_policy: dict | None
    kueue_manager_config: dict
    kueue_objects: list[dict]
    tenants: dict[str, list[dict]] = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    admission: list[dict] = field(default_factory=list)
    cluster_admins: dict | None = None
    authentication_config: dict | None = None
    image_policy: list[dict] = field(default_factory=list)
    compute_domains: list[dict] = field(default_factory=list)
    dra_driver_values: dict | None = None
    privileged_pods: list[dict] = field(default_factory=list)
    datasets: dict[str, list[dict]] = field(default_factory=dict)
    dataset_admission: list[dict] = field(default_factory=list)
    queue_admission: list[dict] = field(default_factory=list)


def plan(resolved: Resolved) -> KubernetesPlan | None:
    d = resolved.definition
    if d.kubernetes is None:
        return None
    k = d.kubernetes
    return KubernetesPlan(
        gpu_operator_release=resolved.set.components.gpu_operator,
        gpu_operator_namespace=k.gpu_operator.namespace,
        gpu_operator_values=gpu_operator.values(resolved),
        nvidia_drivers=gpu_operator.nvidia_drivers(resolved),
        network_operator_namespace=k.network_operator.namespace,
        network_operator_values=network_operator.values(resolved),
        nic_cluster_policy=network_operator.nic_cluster_policy(resolved),
        kueue_manager_config=kueue.manager_config(resolved),
        kueue_objects=kueue.cluster_objects(resolved),
        tenants={n: tenants.objects(resolved, n) for n, t in d.tenants.items() if t.kubernetes},
        nodes=nodes.document(resolved),
        admission=admission.objects(resolved),
        cluster_admins=identity.cluster_admin_binding(resolved),
        authentication_config=identity.authentication_config(resolved),
        image_policy=image_policy.objects(resolved),
        compute_domains=nvidia_dra.compute_domains(resolved),
        dra_driver_values=nvidia_dra.helm_values(resolved),
        privileged_pods=admission.privileged_objects(resolved),
        datasets={n: objs for n in d.datasets if (objs := data.objects(resolved, n))},
        dataset_admission=data.admission(resolved),
        queue_admission=kueue.max_execution_objects(resolved),
    )


def render(resolved: Resolved) -> dict[str, str]:
    p = plan(resolved)
    if p is None:
        return {}
    name, vs = resolved.definition.cluster.name, resolved.set.name
    made = f"clusterdef: cluster {name}, validated set {vs}"
    out = {
        f"{ROOT}/gpu-operator/values.yaml": dump(
            p.gpu_operator_values,
            f"{made}\nHelm values for the NVIDIA GPU Operator chart {p.gpu_operator_release} "
            f"(namespace {p.gpu_operator_namespace})"),
        f"{ROOT}/kueue/manager-config.yaml": dump(
            p.kueue_manager_config, f"{made}\nKueue {KUEUE_VERSION} controller configuration (controller_manager_config.yaml)"),
    }
    if p.nvidia_drivers:
        out[f"{ROOT}/gpu-operator/nvidiadrivers.yaml"] = dump_all(
            p.nvidia_drivers, f"{made}\nNVIDIADriver per driver pool and its canary <pool>.canary (nodes labelled "
            "clusterdef.dev/driver-pool)")
    if p.network_operator_values is not None:
        out[f"{ROOT}/network-operator/values.yaml"] = dump(
            p.network_operator_values,
            f"{made}\nHelm values for the NVIDIA Network Operator chart {NETWORK_OPERATOR_VERSION} "
            f"(namespace {p.network_operator_namespace})")
    if p.nic_cluster_policy is not None:
        out[f"{ROOT}/network-operator/nicclusterpolicy.yaml"] = dump(
            p.nic_cluster_policy, f"{made}\nNicClusterPolicy for the NVIDIA Network Operator {NETWORK_OPERATOR_VERSION}: "
                                  "RDMA shared device plugin and the MOFED source")
    by_kind: dict[str, list[dict]] = {}
    for obj in p.kueue_objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind, objs in by_kind.items():
        out[f"{ROOT}/kueue/{_FILES[kind]}"] = dump_all(objs, f"{made}\nKueue {KUEUE_VERSION}: {kind}")
    for tname, objs in p.tenants.items():
        out[f"{ROOT}/tenants/{tname}.yaml"] = dump_all(objs, f"{made}\nTenant {tname}")
    if p.admission:
        out[f"{ROOT}/admission/dedicated-nodes.yaml"] = dump_all(
            p.admission, f"{made}\nValidatingAdmissionPolicy: tenants' pods tolerate only their own tenant's taint")
    if p.privileged_pods:
        out[f"{ROOT}/admission/privileged-pods.yaml"] = dump_all(
            p.privileged_pods, f"{made}\nValidatingAdmissionPolicy: privileged containers, host namespaces and hostPath "
                               "only where a `privileged` approval names the tenant")
    for dname, objs in p.datasets.items():
        out[f"{ROOT}/data/{dname}.yaml"] = dump_all(
            objs, f"{made}\nDataset {dname}: its volume, read-only claim and egress policy in the authorised "
                  "namespaces only")
    if p.dataset_admission:
        out[f"{ROOT}/admission/dataset-claims.yaml"] = dump_all(
            p.dataset_admission, f"{made}\nValidatingAdmissionPolicy: a pod mounting a dataset claim carries its label")
    if p.queue_admission:
        out[f"{ROOT}/admission/queue-max-execution.yaml"] = dump_all(
            p.queue_admission, f"{made}\nValidatingAdmissionPolicy: jobs sent to a queue with a queue policy's "
                               "max_job_hours say how long they may run (kueue.x-k8s.io/max-exec-time-seconds)")
    if p.cluster_admins is not None:
        out[f"{ROOT}/identity/cluster-admins.yaml"] = dump(
            p.cluster_admins, f"{made}\ncluster-admin for the admin groups only (tenants get namespaced roles)")
    if p.authentication_config is not None:
        out[f"{ROOT}/identity/authentication-config.yaml"] = dump(
            p.authentication_config, f"{made}\nkube-apiserver --authentication-config: the OIDC issuer and its claims "
                                     "(not an object: a file on the control-plane nodes)")
    if p.image_policy:
        out[f"{ROOT}/image-policy/policy.yaml"] = dump_all(
            p.image_policy, f"{made}\nsigstore policy-controller: tenants' images only from the allowed registries"
                            ", signed by the definition's keys")
    if p.dra_driver_values is not None:
        out[f"{ROOT}/nvidia-dra/values.yaml"] = dump(
            p.dra_driver_values,
            f"{made}\nHelm values for NVIDIA's DRA driver chart {nvidia_dra.CHART} {nvidia_dra.CHART_VERSION} "
            f"(namespace {nvidia_dra.NAMESPACE}): ComputeDomains on the NVLink-domain node groups")
    if p.compute_domains:
        out[f"{ROOT}/nvidia-dra/computedomains.yaml"] = dump_all(
            p.compute_domains, f"{made}\nComputeDomains (NVIDIA DRA driver {nvidia_dra.DRA_DRIVER_VERSION}) for multi-node "
                               "NVLink: pods claim <name>-imex-channel to share GPU memory within an NVLink domain")
    out[f"{ROOT}/nodes/labels-taints.yaml"] = dump(
        p.nodes, f"{made}\nNode labels and taints per node group (kubelet --node-labels / --register-with-taints)\n"
                 "and fabric topology labels of Kubernetes-owned nodes (Kueue Topology levels)")
    return out
