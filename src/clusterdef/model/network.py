"""Provisioning network and fabrics with their switch topology."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Literal, Union

from pydantic import Field

from .base import Hostlist, Model, Name
from .types import AbsPath, Fqdn


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


class Block(Model):
    nodes: Hostlist


class BlockTopology(Model):
    kind: Literal["block"]
    """Scalable units (Slurm topology/block, NVL domains)."""
    block_sizes: tuple[Annotated[int, Field(ge=1, le=131072)], ...] = Field(default=(), max_length=16)
    blocks: dict[Name, Block]


Topology = Annotated[Union[TreeTopology, BlockTopology], Field(discriminator="kind")]


class Fabric(Model):
    kind: Literal["infiniband", "roce", "ethernet"]
    rdma: bool = True
    topology: Topology


class Network(Model):
    provisioning: Provisioning
    fabrics: dict[Name, Fabric] = {}
