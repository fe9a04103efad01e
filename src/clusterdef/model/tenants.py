"""Tenants: GPU quota (reserved vs burst), isolation, and their Slurm/Kubernetes/storage mapping."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Name
from .types import Gpus, GroupName, UserName


class Quota(Model):
    reserved_gpus: Gpus = 0
    """Guaranteed capacity, sold to the tenant; never lent away."""
    burst_gpus: Gpus = 0
    """Extra capacity the tenant may borrow when idle elsewhere."""


class Isolation(Model):
    level: Literal["shared", "dedicated"] = "shared"
    device: Literal["none", "cgroup", "whole-node", "mig"] = "cgroup"
    network: Literal["none", "network-policy", "partition-key", "vlan"] = "none"
    storage: Literal["none", "project-quota", "dedicated-filesystem"] = "none"


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
    pod_security: Literal["privileged", "baseline", "restricted"] | None = None
    """Pod Security Standard enforced on the namespace; default: restricted when the tenant
    is dedicated, baseline when shared."""


class Storage(Model):
    quota_tib: float = Field(gt=0, le=1_000_000)
    """Up to an exabyte; finite (`.inf` and `.nan` are refused)."""
    scratch_expiry_days: int = Field(default=30, ge=1, le=3650)


class Tenant(Model):
    quota: Quota = Quota()
    isolation: Isolation = Isolation()
    slurm: TenantSlurm | None = None
    kubernetes: TenantKubernetes | None = None
    storage: Storage | None = None
