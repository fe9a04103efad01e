"""Node images. Driver, CUDA, NCCL and toolkit versions come from the validated set, never from here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Name
from .types import DebPackage, ImageDigest, ImageVersion, KernelArg, KernelRelease, Release, RepoUrl, SetName


class PublishedImage(Model):
    """An earlier build of the image that the boot server keeps (a rollback target, a host pinned back)."""
    set: SetName
    """The validated set it was built for (an image version belongs to one set)."""
    digest: ImageDigest
    """Its content hash, as in its artefact name `<image>-<version>-<set>-<digest>`."""


class Image(Model):
    version: ImageVersion
    """Image version; artefact names carry it, so a change means a new image."""
    distribution: Literal["debian", "ubuntu"]
    release: Release
    architecture: Literal["amd64", "arm64"] = "amd64"
    """CPU architecture (Debian's name) the image is built for: `arm64` for Grace (GB200/GB300 compute
    trays). mkosi builds it for that architecture (a foreign one through qemu-user/binfmt), package
    sources with per-architecture repositories are chosen for it, and PXE serves arm64 UEFI firmware
    (DHCP client architecture 11) its own first iPXE stage."""
    kernel: KernelRelease
    """Kernel package version the image ships (e.g. 6.1.0-28-amd64)."""
    packages: tuple[DebPackage, ...] = Field(default=(), max_length=1024)
    """Debian package names (no versions: the image version pins the image as a whole)."""
    kernel_cmdline: tuple[KernelArg, ...] = Field(default=(), max_length=64)
    """One argument per item (`console=ttyS0,115200n8`); no spaces, quotes or `$`."""
    published: dict[ImageVersion, PublishedImage] = Field(default={}, max_length=64)
    """Earlier versions kept on the boot server, by version: at least the rollback target's build
    (`clusterdef plan` refuses a rollout of a stateless group whose rollback image is not listed).
    The current version is always published; its artefacts never overwrite these."""
    repositories: dict[Name, RepoUrl] = Field(default={}, max_length=16)
    """Site apt repositories by source id of matrices/compat/package-sources.yaml (`slurm-site: URL`):
    packages the site builds and serves, such as the set's Slurm release (SchedMD publishes no apt
    repository). Flat repositories (`deb URL ./`), signed with /usr/share/keyrings/clusterdef-<id>.gpg."""
