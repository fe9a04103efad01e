"""Node groups: Slurm-style hostlists with a hardware type, an image, exactly one
owning control plane, provisioning addresses and topology placement."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, Field, StringConstraints

from ..macaddr import host_mac_problem
from .base import Hostlist, Model, Name
from ..types import HostName, ImageVersion, InterfaceName, LabelKey, LabelValue, PortGuids, RelPath, RoleName



def _host_mac(value: str) -> str:
    problem = host_mac_problem(value)
    if problem:
        raise ValueError(problem + "; list the MAC of the host's provisioning NIC")
    return value


MacAddress = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$"), AfterValidator(_host_mac)]


class MacList(Model):
    source: Literal["list"]
    macs: tuple[MacAddress, ...]
    """One lower-case MAC per host, in hostlist order."""
    port_guids: tuple[PortGuids, ...] = ()
    """InfiniBand port GUIDs per host, in hostlist order (`;` between a host's ports); needed for
    the nodes of tenants isolated by partition key."""


class MacInventory(Model):
    source: Literal["inventory"]
    file: RelPath
    """CSV file `host,mac` (relative to the definition file), e.g. exported from the vendor."""


class MacDiscover(Model):
    source: Literal["discover"]
    """Unknown MACs: nodes boot from the dynamic range and register themselves."""


MacSource = Annotated[Union[MacList, MacInventory, MacDiscover], Field(discriminator="source")]


class Addressing(Model):
    ipv4_start: IPv4Address
    """Provisioning address of the first host; the rest follow in hostlist order."""
    mac: MacSource


class Placement(Model):
    fabric: Name
    """Name of the fabric (network.fabrics) the group's compute NICs attach to."""
    rack: Name | Literal[""] = ""
    nvlink: Name | None = None
    """A fabric of kind `nvlink` whose blocks are the group's NVLink domains (GB200/GB300 NVL72
    racks). Slurm's topology then is that fabric's topology/block, one block per domain."""

    @property
    def slurm_fabric(self) -> str:
        """The fabric Slurm's topology describes for this group: its NVLink domains when it has them
        (a multi-node NVLink job must stay in one domain), else its compute fabric."""
        return self.nvlink or self.fabric


AttachmentRole = Literal["compute", "storage", "management", "provisioning"]


class Attachment(Model):
    network: Name
    """compute, storage: a fabric of network.fabrics; provisioning: `provisioning`; management (the
    BMC, out of band): `management` (network.management)."""
    nic: InterfaceName
    """The hardware NIC (its `name`) that serves the attachment; its `role` is the attachment's role."""
    ipv4_start: IPv4Address | None = None
    """Address of the first host on that network (the rest follow in hostlist order): the fabric's
    `subnet` (IPoIB/RoCE) or the management subnet (the BMCs). Provisioning addresses stay in
    `addressing`."""


Service = Literal["slurmctld", "slurmdbd", "boot-server", "subnet-manager", "prometheus", "kube-control-plane", "etcd"]
"""What a service host runs (docs/services.md): slurmctld, slurmdbd, boot-server (dnsmasq and the iPXE/HTTP
files), subnet-manager (OpenSM), prometheus, kube-control-plane (API server, scheduler, controller manager),
etcd."""


class Taint(Model):
    key: LabelKey
    value: LabelValue = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeGroup(Model):
    hosts: Hostlist
    hardware: Name
    image: Name
    control_plane: Literal["slurm", "kubernetes", "none"]
    """The control plane that owns the group's GPUs: `slurm` or `kubernetes`; `none` for a service host
    (a controller, the accounting host, the boot server...) that is neither a Slurm nor a Kubernetes worker.
    A Kubernetes control-plane host is `kubernetes` with services [kube-control-plane, etcd]."""
    services: tuple[Service, ...] = Field(default=(), max_length=7)
    """What the group's hosts run when they are service hosts (GPU-less hardware): their image carries only
    what these need, each is an inventory group, and rollout waves keep quorum (docs/services.md)."""
    addressing: Addressing
    placement: Placement | None = None
    labels: dict[LabelKey, LabelValue] = {}
    taints: tuple[Taint, ...] = Field(default=(), max_length=64)
    attachments: dict[AttachmentRole, Attachment] = {}
    """The networks the group is on, by role, with the NIC that serves each: compute (the fabric of
    `placement`), storage (a storage fabric: IPoIB or RoCE), management (the BMC network),
    provisioning (the PXE network)."""
    provisioning: Literal["stateless", "stateful"] = "stateful"
    """`stateless`: the node runs the image it PXE-boots (diskless); an upgrade is a new image and a
    reboot, roles never install packages on it, and rollback points the host back at the previous
    image. `stateful`: installed to disk; upgrades install packages in place with the roles."""
    boot: dict[HostName, ImageVersion] = Field(default={}, max_length=4096)
    """Per-host boot pointers: host -> a version of the group's image (the current one or one in
    `images.<image>.published`). Hosts not listed boot the group's default, the current version."""
    roles: tuple[RoleName, ...] = Field(default=(), max_length=32)
    """Extra roles from roles/ that playbooks/group-roles.yml applies to the group's hosts. A role that
    installs packages (knowledge/roles.yaml) is refused on a stateless group: put the packages in the image."""
