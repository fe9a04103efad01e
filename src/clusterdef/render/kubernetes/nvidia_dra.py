"""ComputeDomains of the NVIDIA DRA driver (resource.nvidia.com/v1beta1) for multi-node NVLink.

A ComputeDomain (IMEX under the hood) guarantees NVLink reachability between the pods in it and
isolates them from every other pod. Each Kubernetes tenant whose Kueue queues reach node groups in
NVLink domains (`placement.nvlink`) gets one ComputeDomain per NVLink fabric in its namespace, named
after the fabric, with the ResourceClaimTemplate `<fabric>-imex-channel` that its pods claim
(`resources.claims` + `resourceClaims[].resourceClaimTemplateName`). `numNodes: 0`: with the
driver's default IMEXDaemonsWithDNSNames the IMEX daemons start on every node a pod lands on, and
the CRD recommends 0 (the field is deprecated; v25.12's CRD still requires it, so it is written)."""

from __future__ import annotations

from ...resolve import Resolved
from .common import L_GROUP, L_TENANT

API = "resource.nvidia.com/v1beta1"
DRA_DRIVER_VERSION = "v0.4.0"
"""The DRA driver release whose ComputeDomain CRD the objects are written for (also valid for v25.12.0)."""
CHART = "nvidia-dra-driver-gpu"
CHART_VERSION = "25.12.0"
"""The chart the Pulumi program deploys: NVIDIA's `nvidia-dra-driver-gpu` from NVIDIA's Helm repository, the
release whose ComputeDomain CRD is shared/reference/nvidia-dra/resource.nvidia.com_computedomains-v25.12.0.yaml
(the v0.4.0 chart moved to kubernetes-sigs as `dra-driver-nvidia-gpu`, with the same values keys used here)."""
NAMESPACE = "nvidia-dra-driver-gpu"
# nvidiaDriverRoot (the chart's values.yaml): "/run/nvidia/driver" where the GPU Operator's driver
# container manages the driver, "/" for a driver installed on the host (here: the node image).
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"


def nvlink_groups(resolved: Resolved) -> dict[str, str]:
    """Kubernetes group -> its NVLink fabric, for groups placed in NVLink domains."""
    d = resolved.definition
    out = {}
    for n, g in d.nodes.items():
        if g.control_plane == "kubernetes" and g.placement and g.placement.nvlink:
            f = d.network.fabrics.get(g.placement.nvlink)
            if f is not None and f.kind == "nvlink":
                out[n] = g.placement.nvlink
    return out


def helm_values(resolved: Resolved) -> dict | None:
    """Values of the DRA driver's chart for a cluster whose Kubernetes groups sit in NVLink domains (None
    otherwise): the ComputeDomain side only (the chart's GPU side is not supported upstream, and the GPU
    Operator's device plugin serves GPUs), the driver root of whoever owns the driver, and the kubelet
    plugin on the NVLink groups' nodes only (clusterdef's node-group label, not the chart's GPU labels)."""
    from ...knowledge.images import operator_owns_driver

    d = resolved.definition
    groups = nvlink_groups(resolved)
    if d.kubernetes is None or not groups:
        return None
    operator = d.kubernetes.gpu_operator.driver_owner == "operator" and all(
        operator_owns_driver(d, d.nodes[g].image) for g in groups)
    term = {"matchExpressions": [{"key": L_GROUP, "operator": "In", "values": sorted(groups)}]}
    return {
        "nvidiaDriverRoot": OPERATOR_DRIVER_ROOT if operator else "/",
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        "kubeletPlugin": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}},
    }


def channel_template(fabric: str) -> str:
    return f"{fabric[:49]}-imex-channel"


def compute_domains(resolved: Resolved) -> list[dict]:
    d = resolved.definition
    k = d.kubernetes
    if k is None:
        return []
    groups = nvlink_groups(resolved)
    if not groups:
        return []
    out = []
    for tname, t in d.tenants.items():
        if not t.kubernetes:
            continue
        fabrics: list[str] = []
        for q in t.kubernetes.queues:
            queue = k.kueue.queues.get(q)
            flavors = [k.kueue.flavors[f] for f in (queue.flavor_names() if queue else ()) if f in k.kueue.flavors]
            for g in (g for flavor in flavors for g in flavor.node_groups):
                if g in groups and groups[g] not in fabrics:
                    fabrics.append(groups[g])
        for f in fabrics:
            out.append({
                "apiVersion": API, "kind": "ComputeDomain",
                "metadata": {"name": f, "namespace": t.kubernetes.namespace, "labels": {L_TENANT: tname}},
                "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": channel_template(f)},
                                                    "allocationMode": "Single"}},
            })
    return out
