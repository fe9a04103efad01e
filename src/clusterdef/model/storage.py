"""Filesystems: where tenants' data lives, who mounts it, and how quotas are enforced on it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Name
from ..types import AbsPath, MountSource

# Kinds whose quota clusterdef can set per project (tenant); nfs exports have none of their own.
QUOTA_KINDS = ("lustre", "gpfs", "xfs", "btrfs")


class Filesystem(Model):
    kind: Literal["lustre", "gpfs", "nfs", "xfs", "btrfs"]
    mount: AbsPath
    """Mount point on the nodes; tenants' directories are `<mount>/<tenant>`."""
    source: MountSource | None = None
    """What is mounted: the GPFS device (`fs1`, also what mmsetquota names), Lustre's
    `<MGS NIDs>:/<fsname>`, NFS's `<server>:/<export>`, or the block device of XFS and btrfs
    (`/dev/...`). With it, each node group in `node_groups` gets a systemd mount unit (and no
    other node does)."""
    node_groups: tuple[Name, ...] = Field(min_length=1)
    """Node groups that mount it (and whose Kubernetes namespaces may claim it)."""
    scratch: bool = False
    """Scratch space: files not accessed for the tenant's `scratch_expiry_days` are removed."""
    size_tib: float | None = Field(default=None, gt=0, le=1_000_000)
    """Usable capacity, when known: quotas on it are checked against it."""
    network: Name | None = None
    """The storage fabric (network.fabrics) the filesystem is reached over (lustre, gpfs, nfs): every
    node group in `node_groups` attaches storage to it (`attachments.storage`), and its mount unit
    waits for that interface to be online (systemd-networkd-wait-online@<interface>), not for the
    network as a whole."""
    owner: Name | None = None
    """The tenant that owns it (dedicated-filesystem): mounted only on that tenant's nodes."""
