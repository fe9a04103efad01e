"""Privileged workloads: what may run as root-equivalent, where, and who approved it (issue 31,
docs/data.md "Privileged workloads").

    privileged:
      vision-node-debug:                   # one approval: the approver's group and the change reference
        approver: hpc-admins
        reference: CHG-2026-0117
        kubernetes: {tenants: [vision], features: [host-network, host-pid]}
      debug-root:
        approver: hpc-admins
        reference: CHG-2026-0121
        slurm: {groups: [hpc-debug], partitions: [debug], admin_level: Operator}

Kubernetes: a ValidatingAdmissionPolicy (kubernetes/admission/privileged-pods.yaml) refuses privileged
containers, host namespaces (network, PID, IPC) and hostPath volumes in every namespace but the platform's
own, except the features an approval names for a tenant's namespace. Slurm: the approved groups' members
get the AdminLevel (identity/slurm-users.sh), and a partition marked `privileged` (root-equivalent) takes
jobs from the approved groups only (AllowGroups) on nodes no one else shares (slurm/slurm.conf)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Model, Name
from .identity import DirectoryGroup
from ..types import _pattern

# A change or ticket reference as the site's tracker writes it (CHG-2026-0117, JIRA-42).
Reference = Annotated[str, _pattern(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}$", 64,
                                    "a change reference of letters, digits, '.', '_', ':', '/' and '-' "
                                    "(CHG-2026-0117)")]
Feature = Literal["privileged", "host-network", "host-pid", "host-ipc", "host-path"]
FEATURES: tuple[str, ...] = ("privileged", "host-network", "host-pid", "host-ipc", "host-path")


class KubernetesGrant(Model):
    tenants: tuple[Name, ...] = Field(min_length=1, max_length=256)
    """Tenants whose namespace may run pods with `features` (their namespace's Pod Security becomes `privileged`:
    the admission policy is then what limits it to these features)."""
    features: tuple[Feature, ...] = Field(min_length=1, max_length=5)


class SlurmGrant(Model):
    groups: tuple[DirectoryGroup, ...] = Field(min_length=1, max_length=64)
    """Directory groups granted the Slurm root-equivalents below."""
    admin_level: Literal["None", "Operator", "Administrator"] = "None"
    """AdminLevel for the groups' members (sacctmgr; identity/slurm-users.sh keeps it and demotes anyone else)."""
    partitions: tuple[Name, ...] = Field(default=(), max_length=256)
    """Privileged (root-equivalent) partitions the groups may submit to (AllowGroups)."""


class Approval(Model):
    approver: DirectoryGroup
    """The directory group that approved it (for a change of it, governance.py names this group)."""
    reference: Reference
    """The change or ticket that records the approval."""
    kubernetes: KubernetesGrant | None = None
    slurm: SlurmGrant | None = None
