"""Validated sets and compatibility facts, as typed data."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..types import Model, RelPath, SetName, Text, Token, Version


class Fact(BaseModel):
    """A row of a fact table; annotation fields (source, note, ...) are kept but not typed."""

    model_config = ConfigDict(frozen=True, extra="allow")


class Components(Model):
    driver: Version
    cuda: Version
    nccl: Version
    container_toolkit: Version
    gpu_operator: Version
    kubernetes: Version
    slurm: Version
    doca: Version | None = None
    mft: Version | None = None


class Provenance(Model):
    validated_on: Text | None = None
    sources: tuple[Text, ...] = ()


SetStatus = Literal["candidate", "validated", "retired"]


class ValidatedSet(Model):
    name: SetName
    status: SetStatus
    summary: Text = ""
    provenance: Provenance = Field(default_factory=Provenance)
    baseline: RelPath | None = None
    """Baseline file, relative to the matrices folder."""
    components: Components
    firmware: dict[Token, dict[Token, Token]] = {}
    """platform -> firmware component -> version; versions reach the first-boot script and nodecheck."""

    @property
    def driver_branch(self) -> str:
        return "R" + self.components.driver.split(".")[0]

    @property
    def slurm_major(self) -> str:
        return ".".join(self.components.slurm.split(".")[:2])

    @property
    def kubernetes_minor(self) -> str:
        return ".".join(self.components.kubernetes.lstrip("v").split(".")[:2])


class CudaDriverRow(Fact):
    cuda: str
    min_driver: str


class OperatorRelease(Fact):
    gpu_operator: str
    driver_default: str
    container_toolkit: str
    k8s_min: str | None = None
    k8s_max: str | None = None


class NcclRelease(Fact):
    nccl: str
    cuda_majors: tuple[int, ...]


class SlurmRelease(Fact):
    major: str
    end_of_support: str | None = None
    released: str | None = None
    compatible_prior: tuple[str, ...] = ()
    latest: str | None = None


class SlurmUpgradeRule(Fact):
    window_before_24_11: int = 2
    window_from_24_11: int = 3
    slurmdbd_first: bool = True


class DriverBranch(Fact):
    branch: str
    type: str
    eol: str | None = None
    max_cuda_major: int | None = None


class KubernetesSkew(Fact):
    kubelet_max_minor_older: int = 3
    kubelet_newer_than_apiserver: bool = False
    apiserver_skip_minor: bool = False
    supported_minor_releases: int = 3


class SourceComponent(Fact):
    packages: tuple[str, ...] = ()
    pin: str = "{version}-*"
    services: dict[str, tuple[str, ...]] = {}
    """Service (nodes.<group>.services) -> this source's names of the packages it needs, for service images
    (docs/services.md); a service not listed installs knowledge/services.yaml's names."""


class PackageSource(Fact):
    """An apt repository and what it provides (compat/package-sources.yaml)."""
    id: str
    kind: Literal["vendor", "distribution", "site"]
    url: str | None = None
    components: dict[str, SourceComponent] = {}
    releases: dict[str, dict[str, str]] = {}
    """distribution -> release -> the repository's distro id (vendor, site) or the version it carries (distribution)."""
    versions: object = "any"
    """any | {from: "x.y"} | [versions] (vendor and site sources)."""
    architectures: dict[str, str] = {}
    """Debian architecture -> the repository's path for it (`{arch}` in `url`), for repositories laid out
    per architecture; empty: one repository for every architecture (apt picks the packages)."""


# One model per compatibility file: the whole file is validated, so a wrong shape anywhere (a list where a
# mapping belongs, `rows: 5`, an unknown top-level key) is a located finding, never a traceback.
class _FactFile(Model):
    source: str | None = None
    """Where the facts were read from (kept for reviewers; no check reads it)."""


class CudaDriverFile(_FactFile):
    rows: tuple[CudaDriverRow, ...] = ()


class OperatorFile(_FactFile):
    releases: tuple[OperatorRelease, ...] = ()


class NcclFile(_FactFile):
    releases: tuple[NcclRelease, ...] = ()


class SlurmFile(_FactFile):
    upgrade_rule: SlurmUpgradeRule = Field(default_factory=SlurmUpgradeRule)
    releases: tuple[SlurmRelease, ...] = ()


class DriverBranchesFile(_FactFile):
    branches: tuple[DriverBranch, ...] = ()


class PackageSourcesFile(_FactFile):
    sources: tuple[PackageSource, ...] = ()
