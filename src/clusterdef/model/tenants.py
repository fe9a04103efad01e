"""Tenants: GPU quota (reserved vs burst), isolation, and their Slurm/Kubernetes/storage mapping."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Name


class Quota(Model):
    reserved_gpus: int = Field(default=0, ge=0)
    """Guaranteed capacity, sold to the tenant; never lent away."""
    burst_gpus: int = Field(default=0, ge=0)
    """Extra capacity the tenant may borrow when idle elsewhere."""


class Isolation(Model):
    level: Literal["shared", "dedicated"] = "shared"
    device: Literal["none", "cgroup", "whole-node", "mig"] = "cgroup"
    network: Literal["none", "network-policy", "partition-key", "vlan"] = "none"
    storage: Literal["none", "project-quota", "dedicated-filesystem"] = "none"


class TenantSlurm(Model):
    account: Name
    parent: str = "root"
    qos: tuple[str, ...] = ()
    users: tuple[str, ...] = ()


class TenantKubernetes(Model):
    namespace: Name
    queues: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    """Identity-provider groups bound to the namespace."""
    allow_from_namespaces: tuple[str, ...] = ()
    """Namespaces allowed through the default-deny network policy."""
    pod_security: Literal["privileged", "baseline", "restricted"] | None = None
    """Pod Security Standard enforced on the namespace; default: restricted when the tenant
    is dedicated, baseline when shared."""


class Storage(Model):
    quota_tib: float = Field(gt=0)
    scratch_expiry_days: int = Field(default=30, ge=1)


class Tenant(Model):
    quota: Quota = Quota()
    isolation: Isolation = Isolation()
    slurm: TenantSlurm | None = None
    kubernetes: TenantKubernetes | None = None
    storage: Storage | None = None
