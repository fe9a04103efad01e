"""Node images. Driver, CUDA, NCCL and toolkit versions come from the validated set, never from here."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Model, Name
from ..types import (AbsPath, DebPackage, ImageDigest, ImageVersion, KernelArg, KernelRelease, Release, RepoUrl,
                    SetName, _pattern)

# A minisign public key as `minisign -G` writes it on the second line of the .pub file: "RW" and the
# base64 of the algorithm (Ed), the 8-byte key id and the 32-byte Ed25519 key. Nothing else fits.
MinisignKey = Annotated[str, _pattern(r"^RW[A-Za-z0-9+/]{54}$", 56, "the second line of the minisign .pub file (RW and 54 base64 characters)")]


class ImageSigning(Model):
    """Every build's artefacts are published with `<artefact>.SHA256SUMS` and its minisign signature
    `<artefact>.SHA256SUMS.minisig`; a node boots the image only once a verifier initrd has checked
    both (docs/provisioning.md, "Signed images")."""

    tool: Literal["minisign"] = "minisign"
    public_key: MinisignKey
    """The public half: built into the verifier initrd every node boots first."""
    secret_key_file: AbsPath = "/etc/clusterdef/image-signing.key"
    """Where the secret key is on the build host (by reference: never in the definition or the
    rendered tree); CLUSTERDEF_SIGNING_KEY overrides it for one build."""


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
    signing: ImageSigning | None = None
    """Sign every build and verify it at boot (a node refuses an unsigned or tampered image)."""
    repositories: dict[Name, RepoUrl] = Field(default={}, max_length=16)
    """Site apt repositories by source id of matrices/compat/package-sources.yaml (`slurm-site: URL`):
    packages the site builds and serves, such as the set's Slurm release (SchedMD publishes no apt
    repository). Flat repositories (`deb URL ./`), signed with /usr/share/keyrings/clusterdef-<id>.gpg."""
