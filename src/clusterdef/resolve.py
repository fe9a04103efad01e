"""Resolve what renderers need from outside the definition (MAC inventories) once,
so that renderers stay pure functions of data."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from . import hostlist
from .matrix.load import Matrix
from .matrix.model import ValidatedSet
from .model import Definition


@dataclass(frozen=True)
class Node:
    name: str
    group: str
    ipv4: IPv4Address
    mac: str  # "" when discovered at boot


@dataclass(frozen=True)
class Resolved:
    definition: Definition
    set: ValidatedSet
    matrix: Matrix
    macs: dict[str, dict[str, str]]  # group -> host -> mac (inventory or list sources)

    def nodes(self, group: str):
        """Every node of a group with its address and MAC, in hostlist order."""
        g = self.definition.nodes[group]
        macs = self.macs.get(group, {})
        first = int(g.addressing.ipv4_start)
        for i, host in enumerate(hostlist.parse(g.hosts)):
            yield Node(host, group, IPv4Address(first + i), macs.get(host, ""))


def read_macs(definition: Definition, base_dir: Path) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for gname, g in definition.nodes.items():
        src = g.addressing.mac
        if src.source == "list":
            out[gname] = dict(zip(hostlist.parse(g.hosts), src.macs))
        elif src.source == "inventory":
            with open(base_dir / src.file, newline="", encoding="utf-8") as fh:
                out[gname] = {r[0].strip(): r[1].strip().lower() for r in csv.reader(fh)
                              if len(r) >= 2 and r[0].strip() and not r[0].startswith("#") and r[0] != "host"}
    return out


def resolve(definition: Definition, matrix: Matrix, base_dir: Path) -> Resolved:
    return Resolved(definition, matrix.sets[definition.cluster.matrix], matrix, read_macs(definition, base_dir))
