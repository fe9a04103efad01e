"""Provisioning network and fabrics with their switch topology."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from .base import Hostlist, Model, Name
from ..types import AbsPath, Fqdn


class DhcpRange(Model):
    start: IPv4Address
    end: IPv4Address


class Provisioning(Model):
    subnet: IPv4Network
    server: IPv4Address
    """Address of the PXE/TFTP/HTTP provisioning server."""
    gateway: IPv4Address | None = None
    dynamic_range: DhcpRange | None = None
    """Range for unknown or discovering nodes."""
    domain: Fqdn = "cluster.local"
    http_port: int = Field(default=80, ge=1, le=65535)
    tftp_root: AbsPath = "/srv/tftp"
    """Directory dnsmasq serves the first-stage iPXE binaries from (undionly.kpxe, ipxe.efi)."""


class Switch(Model):
    nodes: Hostlist | None = None
    """Hosts cabled to this (leaf) switch."""
    switches: Hostlist | None = None
    """Child switches (for spines)."""


class TreeTopology(Model):
    kind: Literal["tree"]
    switches: dict[Name, Switch]

    @property
    def slurm_plugin(self) -> str:
        return "tree"

    def units(self) -> list[tuple[str, str]]:
        """(leaf switch, its nodes) in definition order: the lowest level a node is placed on."""
        return [(n, sw.nodes) for n, sw in self.switches.items() if sw.nodes]


BlockSizes = Annotated[tuple[Annotated[int, Field(ge=1, le=131072)], ...], Field(max_length=16)]


class Block(Model):
    nodes: Hostlist


class BlockTopology(Model):
    kind: Literal["block"]
    """Scalable units (Slurm topology/block, NVL domains)."""
    block_sizes: BlockSizes = ()
    blocks: dict[Name, Block]

    @property
    def slurm_plugin(self) -> str:
        return "block"

    def units(self) -> list[tuple[str, str]]:
        return [(n, b.nodes) for n, b in self.blocks.items()]


class ScalableUnit(Model):
    nodes: Hostlist
    """The unit's nodes; node k's compute InfiniBand/RoCE port i is cabled to the unit's rail leaf i."""


class RailTopology(Model):
    kind: Literal["rail"]
    """Rail-optimised scalable units (DGX SuperPOD style): in each unit, HCA i of every node is cabled
    to rail leaf i of that unit (`<unit>-rail<i>`), every rail leaf to every spine, every spine to
    every core. Schedulers see the unit as the lowest switch (Slurm, Kueue): see docs/fabric.md."""
    rails: int = Field(ge=1, le=64)
    """Rails per scalable unit: the number of compute fabric ports of each node."""
    scalable_units: dict[Name, ScalableUnit] = Field(min_length=1, max_length=4096)
    spines: Hostlist | None = None
    """Spine switches; each rail leaf of each unit is cabled to every one of them."""
    cores: Hostlist | None = None
    """Core switches above the spines (larger fabrics); each spine is cabled to every one of them."""
    slurm: Literal["tree", "block"] = "tree"
    """Slurm plugin: topology/tree (units as leaf switches under the spines and cores) or
    topology/block (one block per unit)."""
    block_sizes: BlockSizes = ()
    """BlockSizes when `slurm: block`."""

    @property
    def slurm_plugin(self) -> str:
        return self.slurm

    def units(self) -> list[tuple[str, str]]:
        return [(n, u.nodes) for n, u in self.scalable_units.items()]

    @staticmethod
    def rail_leaf(unit: str, rail: int) -> str:
        """The name of rail leaf `rail` (1..rails) of `unit`."""
        return f"{unit}-rail{rail}"


Topology = Annotated[Union[TreeTopology, BlockTopology, RailTopology], Field(discriminator="kind")]


class Lossless(Model):
    """Lossless Ethernet for RDMA on a RoCE fabric's ports (NVIDIA's RoCE configuration for ConnectX:
    trust DSCP, PFC on one priority, ECN with DCQCN), applied per port at boot by
    `clusterdef-roce-qos.service` with DOCA's `mlnx_qos` and the mlx5 driver's ECN sysfs files
    (docs/network.md). The switches must be configured to match; clusterdef does not configure them."""

    trust: Literal["dscp", "pcp"] = "dscp"
    """What the port classifies received traffic by (`mlnx_qos --trust`): the IP header's DSCP (routed
    leaf/spine fabrics) or the VLAN header's PCP (L2 only)."""
    pfc_priority: int = Field(default=3, ge=0, le=7)
    """The one priority PFC pauses (`mlnx_qos --pfc`, one flag per priority 0..7): RDMA traffic only."""
    dscp: int = Field(default=26, ge=0, le=63)
    """DSCP of the RDMA traffic jobs send: NCCL_IB_TC / UCX_IB_TRAFFIC_CLASS are DSCP*4 (the IPv4 TOS
    byte's upper six bits). With `trust: dscp` the adapter's default DSCP-to-priority map sends DSCP d
    to priority d/8, so `dscp` must map to `pfc_priority` (26 -> 3)."""
    ecn: bool = True
    """ECN congestion control (DCQCN) on the PFC priority: the mlx5 driver's
    /sys/class/net/<if>/ecn/roce_np/enable/<prio> and roce_rp/enable/<prio>."""

    @model_validator(mode="after")
    def _dscp_on_priority(self) -> "Lossless":
        if self.trust == "dscp" and self.dscp >> 3 != self.pfc_priority:
            raise ValueError(f"DSCP {self.dscp} maps to priority {self.dscp >> 3} (DSCP/8, the adapter's default "
                             f"map), not to the PFC priority {self.pfc_priority}: RDMA traffic would not be "
                             f"lossless; use a DSCP from {self.pfc_priority * 8} to {self.pfc_priority * 8 + 7}")
        return self


class Fabric(Model):
    kind: Literal["infiniband", "roce", "ethernet", "nvlink"]
    """`nvlink`: NVLink domains (GB200/GB300 NVL72 racks), a block topology with one block per domain."""
    rdma: bool = True
    topology: Topology
    subnet: IPv4Network | None = None
    """IP subnet of the nodes' interfaces on this fabric (IPoIB or RoCE), for node group attachments
    that give addresses (`attachments.<role>.ipv4_start`)."""
    mtu: int | None = Field(default=None, ge=1280, le=65520)
    """MTU of the nodes' interfaces on this fabric (systemd-networkd `MTUBytes=`): 9000 for jumbo
    Ethernet/RoCE, up to 65520 for IPoIB in connected mode, at most 4092 in datagram mode (a 4K IB
    MTU less the 4-byte IPoIB header). Unset: the kernel's default."""
    ipoib_mode: Literal["datagram", "connected"] | None = None
    """IPoIB transport of an `infiniband` fabric's interfaces (systemd.network `[IPoIB] Mode=`):
    `connected` (reliable connected, MTU up to 65520: the usual choice for storage) or `datagram`.
    Unset: the kernel's default (datagram)."""
    lossless: Lossless | None = None
    """RoCE only: lossless Ethernet on the nodes' ports of this fabric (trust, PFC priority, ECN) and
    the traffic class jobs' NCCL/UCX use. Unset on a `roce` fabric: the defaults (trust dscp, PFC
    priority 3, DSCP 26, ECN on); set on another kind: refused (`fabric-interface`)."""
    rail_addressing: Literal["subnet", "routed"] | None = None
    """RoCE only: how the rail ports of node groups with compute addresses are numbered (fabric/rails.py,
    docs/fabric.md). `subnet` (unset: the default): rail i is the i-th equal slice of `subnet`, every port
    of rail i on it (one L2 segment per rail). `routed`: rail i's slice is the rail's aggregate; each port
    is a /31 point-to-point link to its leaf switch port (RFC 3021: the even address the switch's, the odd
    one the host's; `attachments.compute.ipv4_start` odd, hosts 2 apart) with a route to the aggregate
    through the switch. Set on another kind: refused (`fabric-interface`)."""

    @property
    def routed(self) -> bool:
        """Rail ports as /31 links with a route to the rail's aggregate (`rail_addressing: routed`)."""
        return self.kind == "roce" and self.rail_addressing == "routed"

    @property
    def qos(self) -> Lossless | None:
        """The lossless settings the nodes' ports get: a RoCE fabric's (the defaults when unset)."""
        return (self.lossless or Lossless()) if self.kind == "roce" else None


class Management(Model):
    """The out-of-band (BMC) network: a subnet of its own, never served by the provisioning dnsmasq."""

    subnet: IPv4Network
    gateway: IPv4Address | None = None


class Network(Model):
    provisioning: Provisioning
    management: Management | None = None
    """The BMC network; node groups attach to it with `attachments.management`."""
    fabrics: dict[Name, Fabric] = {}
