"""Tenants: GPU quota (reserved vs burst), isolation, and their Slurm/Kubernetes/storage mapping."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Literal

from pydantic import Field

from .base import Model, Name
from ..types import Gpus, GroupName, UserName


class Quota(Model):
    reserved_gpus: Gpus = 0
    """Guaranteed capacity, sold to the tenant; never lent away."""
    burst_gpus: Gpus = 0
    """Extra capacity the tenant may borrow when idle elsewhere."""


class Isolation(Model):
    """What was sold, layer by layer; docs/tenancy.md says what each value renders and what it
    does not protect against."""

    level: Literal["shared", "dedicated"] = "shared"
    device: Literal["none", "cgroup", "whole-node", "mig"] = "cgroup"
    """cgroup: jobs see only their GPUs (ConstrainDevices); whole-node: no other tenant's job on a
    node while this tenant runs there (owned node groups, or Slurm MCS by account); mig: MIG slices."""
    network: Literal["none", "network-policy", "partition-key", "vlan"] = "none"
    storage: Literal["none", "project-quota", "dedicated-filesystem"] = "none"
    node_groups: tuple[Name, ...] = ()
    """Node groups this tenant alone may use (whole-node): no other tenant's partition or flavor
    may include them. Empty with whole-node: nodes are shared but never at once (Slurm MCS)."""
    pkey: int | None = Field(default=None, ge=0x0001, le=0x7FFE)
    """InfiniBand partition key (partition-key); derived from the tenant name when absent."""
    vlan: int | None = Field(default=None, ge=2, le=4094)
    """VLAN id on the nodes' Ethernet/RoCE interfaces (vlan)."""


class TenantSlurm(Model):
    account: Name
    parent: Name = "root"
    qos: tuple[Name, ...] = ()
    users: tuple[UserName, ...] = Field(default=(), max_length=100000)


class TenantKubernetes(Model):
    namespace: Name
    queues: tuple[Name, ...] = ()
    groups: tuple[GroupName, ...] = ()
    """Identity-provider groups bound to the namespace."""
    allow_from_namespaces: tuple[Name, ...] = ()
    """Namespaces allowed through the default-deny network policy."""
    egress_cidrs: tuple[IPv4Network, ...] | None = Field(default=None, max_length=64)
    """Networks outside the cluster the tenant's pods may reach. Default: everything for a shared
    tenant, nothing for a dedicated one. The BMC network (network.management) is always cut out
    (`except`), and a network inside it is refused (`management-exposed`)."""
    pod_security: Literal["privileged", "baseline", "restricted"] | None = None
    """Pod Security Standard enforced on the namespace; default: restricted when the tenant
    is dedicated, baseline when shared."""


class Storage(Model):
    filesystem: Name | None = None
    """The filesystem (top-level `filesystems`) holding the tenant's directory and quota."""
    project_id: int | None = Field(default=None, ge=1, le=4_000_000_000)
    """Project (quota) id; derived from the tenant name when absent."""
    quota_tib: float = Field(gt=0, le=1_000_000)
    """Up to an exabyte; finite (`.inf` and `.nan` are refused)."""
    scratch_expiry_days: int = Field(default=30, ge=1, le=3650)


class Tenant(Model):
    quota: Quota = Field(default_factory=Quota)
    isolation: Isolation = Field(default_factory=Isolation)
    slurm: TenantSlurm | None = None
    kubernetes: TenantKubernetes | None = None
    storage: Storage | None = None
