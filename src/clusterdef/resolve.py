"""Resolve what renderers need from outside the definition (MAC inventories) once,
so that renderers stay pure functions of data."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from . import hostlist
from .inventory import read_inventories
from .matrix.load import Matrix
from .matrix.model import ValidatedSet
from .model import Definition


def dotted(address: int) -> str:
    """An IPv4 address as text; ipaddress's own formatting costs microseconds per node."""
    return f"{address >> 24}.{(address >> 16) & 255}.{(address >> 8) & 255}.{address & 255}"


class Node(NamedTuple):  # a tuple, not a frozen dataclass: built once per host by each renderer that lists them
    name: str
    group: str
    ipv4: str  # dotted quad
    mac: str  # "" when discovered at boot


@dataclass(frozen=True)
class Resolved:
    definition: Definition
    set: ValidatedSet
    matrix: Matrix
    macs: dict[str, dict[str, str]]  # group -> host -> mac (inventory or list sources)
    guids: dict[str, dict[str, tuple[str, ...]]] | None = None  # group -> host -> InfiniBand port GUIDs
    signing_keys: dict[str, str] | None = None  # image policy key name -> canonical PEM

    def port_guids(self, group: str) -> dict[str, tuple[str, ...]]:
        return (self.guids or {}).get(group, {})

    def nodes(self, group: str) -> tuple[Node, ...]:
        """Every node of a group with its address and MAC, in hostlist order."""
        return self._nodes[group]

    @cached_property  # built once for the renderers that list the nodes (inventory, pxe)
    def _nodes(self) -> dict[str, tuple[Node, ...]]:
        out = {}
        for group, g in self.definition.nodes.items():
            macs = self.macs.get(group, {})
            first = int(g.addressing.ipv4_start)
            out[group] = tuple([Node(host, group, dotted(first + i), macs.get(host, ""))
                                for i, host in enumerate(hostlist.names(g.hosts))])
        return out


def read_macs(definition: Definition, base_dir: Path) -> dict[str, dict[str, str]]:
    """group -> host -> MAC. Groups sharing an inventory file share one mapping."""
    files = {g: base_dir / n.addressing.mac.file for g, n in definition.nodes.items()
             if n.addressing.mac.source == "inventory"}
    inventories = read_inventories(files.values())
    out: dict[str, dict[str, str]] = {g: inventories[f].macs for g, f in files.items()}
    for gname, g in definition.nodes.items():
        if g.addressing.mac.source == "list":
            out[gname] = dict(zip(hostlist.names(g.hosts), g.addressing.mac.macs))
    return out


def read_guids(definition: Definition, base_dir: Path) -> dict[str, dict[str, tuple[str, ...]]]:
    """group -> host -> InfiniBand port GUIDs, from the inventory's third column or `port_guids`."""
    files = {g: base_dir / n.addressing.mac.file for g, n in definition.nodes.items()
             if n.addressing.mac.source == "inventory"}
    inventories = read_inventories(files.values())
    # Groups share an inventory file: each keeps only its own hosts' GUIDs (a partition of one
    # group's ports must never take another group's).
    out: dict[str, dict[str, tuple[str, ...]]] = {group: {} for group in files}
    owners: dict[Path, dict[str, list[str]]] = {}  # file -> host -> the groups of that file holding it
    for group, f in files.items():
        held = owners.setdefault(f, {})
        for h in hostlist.names(definition.nodes[group].hosts):
            held.setdefault(h, []).append(group)
    for f, held in owners.items():  # one pass over each file's GUIDs (was: every file's GUIDs once per group)
        for h, v in inventories[f].guids.items():
            for group in held.get(h, ()):
                out[group][h] = v  # in the file's order, as before
    for gname, g in definition.nodes.items():
        m = g.addressing.mac
        if m.source == "list" and m.port_guids:
            out[gname] = {h: tuple(v.split(";")) for h, v in zip(hostlist.names(g.hosts), m.port_guids)}
    return out


def read_signing_keys(definition: Definition, base_dir: Path) -> dict[str, str]:
    from .signing import key_pem

    k = definition.kubernetes
    if k is None or k.image_policy is None:
        return {}
    return {name: key_pem(key, base_dir) for name, key in k.image_policy.keys.items()}


def resolve(definition: Definition, matrix: Matrix, base_dir: Path) -> Resolved:
    return Resolved(definition, matrix.sets[definition.cluster.matrix], matrix, read_macs(definition, base_dir),
                    read_guids(definition, base_dir), read_signing_keys(definition, base_dir))
