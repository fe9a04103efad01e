"""Shared helpers of the Kubernetes target: label keys, quantities and deterministic YAML."""

from __future__ import annotations

import re

from ... import hostlist
from ...errors import present
from ...model import Definition
from ...model.kubernetes import Kubernetes
from ..yamlout import dump, dump_all  # noqa: F401  (re-exported for the Kubernetes renderers)

PREFIX = "clusterdef.dev"
L_CLUSTER = f"{PREFIX}/cluster"
L_SET = f"{PREFIX}/validated-set"
L_CONTROL_PLANE = f"{PREFIX}/control-plane"
L_GROUP = f"{PREFIX}/node-group"
L_HARDWARE = f"{PREFIX}/hardware"
L_GPU = f"{PREFIX}/gpu"
L_FLAVOR = f"{PREFIX}/kueue-flavor"
L_DRIVER_POOL = f"{PREFIX}/driver-pool"
L_TENANT = f"{PREFIX}/tenant"
L_BLOCK = f"{PREFIX}/fabric-block"
L_LEAF = f"{PREFIX}/fabric-leaf"
L_RACK = f"{PREFIX}/rack"
L_HOSTNAME = "kubernetes.io/hostname"
L_NS_NAME = "kubernetes.io/metadata.name"

GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_POOL = "default"


def kubernetes_section(d: Definition) -> Kubernetes:
    """The definition's `kubernetes`: plan() returns None without it, so every piece it calls has it."""
    return present(d.kubernetes, "kubernetes")


def tenant_taint(tenant: str) -> dict:
    """The taint (and label, same key and value) on nodes a whole-node tenant owns."""
    return {"key": L_TENANT, "value": tenant, "effect": "NoSchedule"}


def tenant_toleration(tenant: str) -> dict:
    return {"key": L_TENANT, "operator": "Equal", "value": tenant, "effect": "NoSchedule"}

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KUEUE_VERSION = "v0.19.2"
"""The Kueue release whose CRDs the objects are written for (and validated against in tests)."""
NETWORK_OPERATOR_VERSION = "v26.4.1"
"""The Network Operator chart whose values.yaml the values are written for (newest GA in the reference)."""

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_value(text: str) -> str:
    """A valid label value (63 characters of [A-Za-z0-9._-], alphanumeric at both ends)."""
    v = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63].strip("-_.")
    assert _LABEL_VALUE.fullmatch(v), v
    return v


def dns_name(text: str) -> str:
    """A DNS-1123 label made from free text (identity-provider group names, ...)."""
    v = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    return v or "x"


def gpu_nodes(d: Definition, group: str) -> tuple[int, int]:
    """(hosts, GPUs per host) of a node group; GPUs per host is 0 for hosts without GPUs."""
    g = d.nodes[group]
    hw = d.hardware[g.hardware]
    return hostlist.count(g.hosts), (hw.gpu.count if hw.gpu else 0)


def per_gpu(d: Definition, groups) -> tuple[int, int]:
    """(CPUs, memory GiB) per GPU, the smallest share over the groups (what every node can give)."""
    cpus, mem = [], []
    for gname in groups:
        hw = d.hardware[d.nodes[gname].hardware]
        if hw.gpu:
            cpus.append(hw.cpu.cpus // hw.gpu.count)
            mem.append(hw.memory_gib // hw.gpu.count)
    return (min(cpus) if cpus else 0, min(mem) if mem else 0)


