"""Hardware node types: GPUs, CPUs, memory, NICs and the firmware the matrix pins."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Name
from ..types import InterfaceName, MigProfile, Token

FirmwareComponent = Literal["bmc", "sbios", "gpu_vbios", "nvswitch", "cx7", "bf3", "cpld", "nvme", "psu"]


class Gpu(Model):
    model: Token
    """Marketing model, e.g. H100-SXM5-80GB."""
    type: Name
    """Short type used as the Slurm GRES type and Kubernetes flavor label, e.g. h100."""
    count: int = Field(ge=1, le=72)
    memory_gib: int = Field(ge=1, le=4096)
    mig_profiles: tuple[MigProfile, ...] = Field(default=(), max_length=64)
    """MIG profiles this GPU model supports (empty when it has no MIG)."""
    nvswitch: bool | None = None
    """The node carries NVSwitches of its own (HGX/DGX 8-GPU baseboards): Fabric Manager and NSCQ at the
    driver's version, nodecheck's NVLink check. Unset: from the platform (knowledge/platforms.yaml);
    never from the firmware the set pins. GB200/GB300 compute trays have none (NVLink switch trays)."""


class Cpu(Model):
    sockets: int = Field(ge=1, le=8)
    cores_per_socket: int = Field(ge=1, le=512)
    threads_per_core: int = Field(default=1, ge=1, le=8)

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


class Nic(Model):
    name: InterfaceName
    kind: Literal["ethernet", "infiniband", "roce"]
    speed_gbps: int = Field(ge=1, le=3200)
    count: int = Field(default=1, ge=1, le=64)
    role: Literal["provisioning", "management", "compute", "storage"] = "compute"


class HardwareType(Model):
    platform: Token
    """Firmware platform id in the validated set (e.g. hgx-h100, dgx-h100)."""
    gpu: Gpu | None = None
    cpu: Cpu
    memory_gib: int = Field(ge=1, le=65536)
    """Up to 64 TiB per node (the largest shared-memory machines); RealMemory is derived from it."""
    nics: tuple[Nic, ...] = Field(default=(), max_length=64)
    firmware: tuple[FirmwareComponent, ...] = ()
    """Firmware components whose versions the set pins and the node is checked against (first boot,
    drift); the set must pin each one. What the hardware is (NVSwitches) is `gpu.nvswitch`, not this."""
