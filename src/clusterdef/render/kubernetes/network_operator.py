"""NVIDIA Network Operator Helm values, rendered only where Kubernetes-owned nodes sit on an RDMA
fabric (InfiniBand or RoCE) and the definition enables the operator."""

from __future__ import annotations

from ...resolve import Resolved
from .topology import rdma_groups


def values(resolved: Resolved) -> dict | None:
    no = resolved.definition.kubernetes.network_operator
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
