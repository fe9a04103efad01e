"""Regulated data: datasets and model artefacts, who may read them and where they may go (issue 31,
docs/data.md).

    datasets:
      imagenet-eu:
        kind: dataset                      # dataset | model
        filesystem: projects
        path: /projects/datasets/imagenet-eu   # inside the filesystem's mount
        classification: restricted         # public | internal | restricted | export-controlled
        tenants: [vision]                  # the tenants' directory groups may read it
        groups: [imagenet-licensed]        # and these directory groups
        destinations:
          node_groups: [train, infer]      # mounted (read-only, /datasets/<name>) on these only
          filesystems: [scratch]           # where its users may write copies
          egress_cidrs: [192.0.2.0/24]     # networks its pods may reach
        retention_days: 365                # snapshots of it are kept no longer
        quota_tib: 2
        approver: data-stewards            # approves a change of classification or authorisations

Rendered: storage/<fs>/dataset-<name>.sh (POSIX ACLs and the project quota on the path),
storage/mounts/<group>/<unit>.mount (a read-only bind mount on the authorised node groups only),
kubernetes/data/<name>.yaml (a PersistentVolume and claim, and an egress NetworkPolicy, in each authorised
tenant's namespace only), backup/data-<name>/ (its own backup with `retention_days`)."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Literal

from pydantic import Field

from .base import Model, Name
from .identity import DirectoryGroup
from ..types import AbsPath

Classification = Literal["public", "internal", "restricted", "export-controlled"]
CLASSIFICATIONS: tuple[str, ...] = ("public", "internal", "restricted", "export-controlled")


class Destinations(Model):
    node_groups: tuple[Name, ...] = Field(default=(), max_length=256)
    """Node groups where it is mounted (and where authorised tenants' pods may claim it)."""
    filesystems: tuple[Name, ...] = Field(default=(), max_length=64)
    """Filesystems its users may write copies to: another filesystem mounted where it is mounted is a finding
    (`dataset-copy-unguarded`), since nothing on the node stops a reader from copying it there."""
    egress_cidrs: tuple[IPv4Network, ...] = Field(default=(), max_length=64)
    """Networks outside the cluster the pods that mount it may reach (NetworkPolicy ipBlock). Host names
    cannot be enforced by a NetworkPolicy: name their networks."""


class Dataset(Model):
    kind: Literal["dataset", "model"] = "dataset"
    filesystem: Name
    path: AbsPath
    """Absolute path inside the filesystem's mount."""
    classification: Literal["public", "internal", "restricted", "export-controlled"]
    tenants: tuple[Name, ...] = Field(default=(), max_length=256)
    groups: tuple[DirectoryGroup, ...] = Field(default=(), max_length=256)
    destinations: Destinations = Field(default_factory=Destinations)
    mount: AbsPath | None = None
    """Where it is bind-mounted (read-only) on the authorised node groups; default /datasets/<name>."""
    retention_days: int = Field(ge=1, le=36500)
    """How long copies of it may be kept: its backup keeps snapshots no longer (restic forget --keep-within)."""
    backup: bool = True
    """Back it up (backup/data-<name>/, with `retention_days`); needs the `backup` section."""
    quota_tib: float | None = Field(default=None, gt=0, le=1_000_000)
    project_id: int | None = Field(default=None, ge=1, le=4_000_000_000)
    """Project (quota) id; derived from the dataset's name when absent."""
    approver: DirectoryGroup | None = None
    """Approves a change of its classification or authorisations (else service.approvers' groups)."""

    def mount_point(self, name: str) -> str:
        return self.mount or f"/datasets/{name}"
