"""Kubernetes: GPU Operator, Network Operator, Kueue (flavors, cohorts, queues), labels and taints."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Model, Name
from ..types import _pattern, Gpus, LabelKey, LabelValue, MigProfile, Registry, RelPath, SetName, Version

WorkloadClass = Literal["training", "inference", "batch", "interactive"]


class DcgmExporter(Model):
    enabled: bool = True
    service_monitor: bool = True


class DriverPool(Model):
    """Kubernetes node groups that run the driver of another validated set (an NVIDIADriver
    resource of their own): how a canary pool runs the new driver before the rest."""

    node_groups: tuple[Name, ...] = Field(min_length=1)
    matrix: SetName
    """Name of the validated (or candidate) set whose driver the pool runs."""


class GpuOperator(Model):
    namespace: Name = "gpu-operator"
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    mig_profile: MigProfile | None = None
    """MIG profile to partition GPUs into (needs mig_strategy single or mixed)."""
    driver_repository: Registry = "nvcr.io/nvidia"
    dcgm_exporter: DcgmExporter = Field(default_factory=DcgmExporter)
    driver_pools: dict[Name, DriverPool] = {}
    """Pools pinning a different driver; the other Kubernetes GPU groups run the set's driver."""
    driver_owner: Literal["operator", "image"] = "image"
    """Who installs the GPU driver and container toolkit on Kubernetes GPU nodes: the node image (default:
    the operator's driver and toolkit are disabled; a new driver is a new image) or the GPU Operator (its
    driver and toolkit containers, upgraded maxParallelUpgrades at a time; the images of those nodes carry
    neither). One owner per layer: validation (gpu-layer-two-owners) refuses both."""


class OfedDriver(Model):
    """DOCA-OFED (MOFED) as the Network Operator's driver container (NicClusterPolicy ofedDriver)."""

    version: Version
    """Tag of the doca-driver image (the DOCA release the container carries)."""
    repository: Registry = "nvcr.io/nvidia/mellanox"


class NetworkOperator(Model):
    enabled: bool = False
    namespace: Name = "nvidia-network-operator"
    rdma_shared_device_plugin: bool = True
    """RDMA shared device plugin in the NicClusterPolicy: pods request `rdma/rdma_shared_device_<fabric>`."""
    sriov: bool = False
    ofed_driver: OfedDriver | None = None
    """Deploy DOCA-OFED as a container. Leave unset when the images carry it on the host (the set pins
    `doca` and the images list `doca-ofed`)."""


class Flavor(Model):
    node_groups: tuple[Name, ...] = Field(min_length=1)


class Cohort(Model):
    parent: Name | None = None


class FlavorQuota(Model):
    """A queue's quota on one more flavor, tried after the queue's own `flavor` (and the ones listed
    before it): e.g. B200 first, then H100."""

    flavor: Name
    nominal_gpus: Gpus
    borrowing_limit_gpus: Gpus | None = None
    lending_limit_gpus: Gpus | None = None


FungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]


class FlavorFungibility(Model):
    """When Kueue tries the queue's next flavor instead of the current one (ClusterQueue
    spec.flavorFungibility, kueue v0.19.2 config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml).
    The defaults are Kueue's: a workload that fits a flavor by borrowing stays on it (MayStopSearch),
    one that would need to preempt there tries the next flavor first (TryNextFlavor)."""

    when_can_borrow: FungibilityPolicy = "MayStopSearch"
    when_can_preempt: FungibilityPolicy = "TryNextFlavor"


class Queue(Model):
    flavor: Name
    nominal_gpus: Gpus
    cohort: Name | None = None
    borrowing_limit_gpus: Gpus | None = None
    lending_limit_gpus: Gpus | None = None
    fallback_flavors: tuple[FlavorQuota, ...] = Field(default=(), max_length=63)
    """More flavors, in order of preference after `flavor`: a workload that does not fit one is
    admitted on the next (Kueue tries a ClusterQueue's flavors in the order listed; at most 64)."""
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility)
    workload_class: WorkloadClass = "batch"
    gang: bool = False
    """All-or-nothing admission (Kueue waitForPodsReady); required for training."""
    reclaim_within_cohort: Literal["Any", "LowerPriority", "Never"] = "Any"
    """ClusterQueue preemption.reclaimWithinCohort: whether a pending workload preempts workloads of other
    queues of the cohort that borrowed this queue's nominal quota (Any), only lower-priority ones, or never."""
    max_execution_s: int | None = Field(default=None, ge=1, le=31_536_000)
    """Jobs sent to this queue must carry kueue.x-k8s.io/max-exec-time-seconds at most this (an admission
    policy refuses the rest); Kueue deactivates a workload that runs longer."""

    def flavor_quotas(self) -> tuple[FlavorQuota, ...]:
        """Every flavor of the queue with its quota, in the order Kueue tries them (`flavor` first)."""
        return (FlavorQuota(flavor=self.flavor, nominal_gpus=self.nominal_gpus,
                            borrowing_limit_gpus=self.borrowing_limit_gpus,
                            lending_limit_gpus=self.lending_limit_gpus),) + self.fallback_flavors

    def flavor_names(self) -> tuple[str, ...]:
        return tuple(fq.flavor for fq in self.flavor_quotas())


class Kueue(Model):
    flavors: dict[Name, Flavor] = {}
    cohorts: dict[Name, Cohort] = {}
    queues: dict[Name, Queue] = {}
    pods_ready_timeout_s: int = Field(default=600, ge=30, le=86400)


class SigningKey(Model):
    """A public key (public, so it is data, not a secret): inline, or a PEM file beside the definition."""

    public_key: Annotated[str, _pattern(r"^[A-Za-z0-9+/]{40,2800}={0,2}$", 2802, "the key's base64 body on one line: the lines between BEGIN PUBLIC KEY and END PUBLIC KEY of cosign.pub, joined")] | None = None
    """The base64 SubjectPublicKeyInfo: cosign.pub without its BEGIN/END lines, on one line."""
    public_key_file: RelPath | None = None
    """A PEM public key file (cosign.pub) beside the definition."""

    @model_validator(mode="after")
    def _one_source(self):
        if (self.public_key is None) == (self.public_key_file is None):
            raise ValueError("give exactly one of public_key (inline base64) and public_key_file")
        return self


class ImagePolicy(Model):
    """What tenants' pods may run, enforced at admission by the sigstore policy-controller
    (docs/kubernetes.md): images only from `registries`, and signed by one of `keys` when
    `require_signatures`. Platform namespaces (the operators') are not governed."""

    registries: tuple[Registry, ...] = Field(default=(), max_length=64)
    """The allow-list: `<registry>/**`; an image from anywhere else is refused."""
    require_signatures: bool = True
    keys: dict[Name, SigningKey] = {}
    mode: Literal["enforce", "warn"] = "enforce"


class Kubernetes(Model):
    gpu_operator: GpuOperator = Field(default_factory=GpuOperator)
    network_operator: NetworkOperator = Field(default_factory=NetworkOperator)
    kueue: Kueue = Field(default_factory=Kueue)
    node_labels: dict[LabelKey, LabelValue] = {}
    """Extra labels for every Kubernetes-owned node."""
    image_policy: ImagePolicy | None = None
    gpu_node_taint: bool = True
    """Taint Kubernetes GPU nodes `nvidia.com/gpu=present:NoSchedule` so only GPU workloads land there."""
