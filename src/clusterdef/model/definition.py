"""The whole definition: the root of the model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from .backup import Backup
from .base import Model, Name
from .cluster import Cluster
from .data import Dataset
from .hardware import HardwareType
from .identity import Identity
from .images import Image
from .kubernetes import Kubernetes
from .network import Network
from .nodes import NodeGroup
from .observability import Observability
from .privileged import Approval
from .queue_policy import Sections, compile_policy
from .secrets import Secrets
from .service import Service
from .slurm import Slurm
from .storage import Filesystem
from .tenants import Tenant
from .upgrade import Upgrade


class Definition(Model):
    version: Literal[1] = 1
    cluster: Cluster
    hardware: dict[Name, HardwareType] = Field(min_length=1)
    images: dict[Name, Image] = Field(min_length=1)
    nodes: dict[Name, NodeGroup] = Field(min_length=1)
    network: Network
    slurm: Slurm | None = None
    kubernetes: Kubernetes | None = None
    filesystems: dict[Name, Filesystem] = {}
    tenants: dict[Name, Tenant] = {}
    upgrade: Upgrade = Field(default_factory=Upgrade)
    observability: Observability = Field(default_factory=Observability)
    secrets: Secrets = Field(default_factory=Secrets)
    identity: Identity | None = None
    backup: Backup | None = None
    service: Service | None = None
    """Service objectives: time zone, maintenance windows, supported hours, recovery objectives, approvers."""
    privileged: dict[Name, Approval] = Field(default={}, max_length=256)
    """Approvals of privileged workloads (Kubernetes pod features, Slurm AdminLevel and root-equivalent partitions)."""
    datasets: dict[Name, Dataset] = Field(default={}, max_length=4096)
    """Regulated data: datasets and model artefacts, their classification, readers, destinations and retention."""

    _queue_policy_findings: tuple = PrivateAttr(default=())

    @model_validator(mode="after")
    def _compile_queue_policy(self):
        """Queue policy statements set the Slurm and Kueue settings they name (queue_policy.py), so every
        reader of a definition sees the compiled settings; what stops a statement is kept for validate."""
        given = Sections(self.service, self.slurm, self.kubernetes)
        compiled, findings = compile_policy(given)
        out = self if (compiled.slurm is given.slurm and compiled.kubernetes is given.kubernetes) else self.model_copy(
            update={"slurm": compiled.slurm, "kubernetes": compiled.kubernetes})
        out._queue_policy_findings = tuple(findings)
        return out

    @property
    def queue_policy_findings(self) -> tuple:
        """Errors of the queue policy statements (file positions not yet placed)."""
        return self._queue_policy_findings

    def groups_of(self, control_plane: str) -> dict[str, NodeGroup]:
        """The worker groups of a control plane: service hosts (groups with `services`, such as a
        Kubernetes control-plane node) are left out (docs/services.md)."""
        return {n: g for n, g in self.nodes.items() if g.control_plane == control_plane and not g.services}
