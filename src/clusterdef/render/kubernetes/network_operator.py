"""NVIDIA Network Operator: Helm values and the NicClusterPolicy, rendered only where Kubernetes-owned
nodes sit on an RDMA fabric (InfiniBand or RoCE) and the definition enables the operator.

MOFED (DOCA-OFED) comes from one of two places, decided here and read by the GPU Operator values
(`driver.rdma`) and the `rdma-no-mofed` check:
- `host`: the set pins `doca` and every image of the Kubernetes RDMA node groups lists the
  `doca-ofed` package; the NicClusterPolicy then deploys no driver container;
- `operator`: `kubernetes.network_operator.ofed_driver` is set; the NicClusterPolicy deploys the
  doca-driver container at that version. The host stack wins when both are declared (a second
  MOFED over the host's would replace its modules under running pods)."""

from __future__ import annotations

import json

from ...errors import present
from ...resolve import Resolved
from .common import NETWORK_OPERATOR_VERSION, kubernetes_section
from .topology import rdma_groups

COMPONENT_REPOSITORY = "nvcr.io/nvidia/mellanox"  # the chart's component images (values ofedDriver.initContainer)
NIC_VENDOR = "15b3"  # PCI vendor id of NVIDIA (Mellanox) NICs


def values(resolved: Resolved) -> dict | None:
    no = kubernetes_section(resolved.definition).network_operator
    if not no.enabled or not rdma_groups(resolved):
        return None
    return {
        # The GPU Operator already runs Node Feature Discovery (and labels NICs, PCI class 02):
        # a second NFD would fight over the same labels.
        "nfd": {"enabled": False, "deployNodeFeatureRules": True},
        "sriovNetworkOperator": {"enabled": no.sriov},
        "operator": {"tolerations": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ]},
    }


def host_mofed(resolved: Resolved) -> bool:
    d = resolved.definition
    groups = rdma_groups(resolved)
    from ...knowledge.images import carried_by  # what the image target puts into each image

    return bool(resolved.set.components.doca and groups
                and all("doca" in carried_by(d, d.nodes[g].image) for g in groups))


def mofed(resolved: Resolved) -> str | None:
    """`host`, `operator` or None (no MOFED declared for the Kubernetes RDMA groups)."""
    if host_mofed(resolved):
        return "host"
    if kubernetes_section(resolved.definition).network_operator.ofed_driver is not None:
        return "operator"
    return None


def interfaces(resolved: Resolved) -> dict[str, tuple[str, list[str]]]:
    """fabric -> (link type, interface names) of the compute RDMA NICs of the Kubernetes RDMA groups.
    A NIC with `count: N` > 1 is N interfaces, name0 .. name<N-1>."""
    d = resolved.definition
    out: dict[str, tuple[str, list[str]]] = {}
    for g in rdma_groups(resolved):
        fabric = present(d.nodes[g].placement, f"nodes.{g}.placement").fabric  # rdma_groups: placed groups only
        kind = d.network.fabrics[fabric].kind
        link, names = out.setdefault(fabric, ("infiniband" if kind == "infiniband" else "ether", []))
        for nic in d.hardware[d.nodes[g].hardware].nics:
            if nic.role != "compute" or nic.kind != kind:
                continue
            for name in ([nic.name] if nic.count == 1 else [f"{nic.name}{i}" for i in range(nic.count)]):
                if name not in names:
                    names.append(name)
    return out


RESOURCE_PREFIX = "rdma/"
"""The RDMA shared device plugin's extended resources are `rdma/<resourceName>` (its config's
`resourcePrefix`, left at the plugin's default `rdma`)."""


def resource_name(fabric: str) -> str:
    return f"rdma_shared_device_{fabric}"


def rdma_resources(resolved: Resolved) -> bool:
    """Pods here request `rdma/...` devices: the NicClusterPolicy deploys the RDMA shared device plugin."""
    p = nic_cluster_policy(resolved)
    return bool(p and "rdmaSharedDevicePlugin" in p["spec"])


def nic_cluster_policy(resolved: Resolved) -> dict | None:
    no = kubernetes_section(resolved.definition).network_operator
    if values(resolved) is None:
        return None
    spec: dict = {}
    source = mofed(resolved)
    if source == "operator":
        ofed = present(no.ofed_driver, "kubernetes.network_operator.ofed_driver")  # what `operator` means
        spec["ofedDriver"] = {"image": "doca-driver", "repository": ofed.repository, "version": ofed.version}
    if no.rdma_shared_device_plugin:
        config = {"configList": [
            {"resourceName": resource_name(fabric), "rdmaHcaMax": 63,
             "selectors": {"vendors": [NIC_VENDOR], "linkTypes": [link], "ifNames": names}}
            for fabric, (link, names) in sorted(interfaces(resolved).items()) if names]}
        spec["rdmaSharedDevicePlugin"] = {
            "image": "k8s-rdma-shared-dev-plugin", "repository": COMPONENT_REPOSITORY,
            "version": f"network-operator-{NETWORK_OPERATOR_VERSION}",
            "config": json.dumps(config, sort_keys=True)}
    if not spec:
        return None
    return {"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
            "metadata": {"name": "nic-cluster-policy"}, "spec": spec}
