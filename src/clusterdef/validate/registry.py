"""The registry of named checks and the context they read.

A check is a pure function `(Context) -> Iterable[Finding]`, registered under a
name with @check. Adding a check is one function in the module of its domain."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable

from ClusterShell.NodeSet import NodeSet

from .. import hostlist
from ..errors import Finding
from ..matrix.load import Matrix
from ..matrix.model import ValidatedSet
from ..model import Definition

CheckFn = Callable[["Context"], Iterable[Finding]]
CHECKS: dict[str, CheckFn] = {}


def check(name: str) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        if name in CHECKS:
            raise RuntimeError(f"check {name!r} registered twice")
        CHECKS[name] = fn
        return fn
    return register


@dataclass
class Context:
    definition: Definition
    matrix: Matrix
    today: date
    base_dir: Path = field(default_factory=Path.cwd)
    definition_file: str = ""
    """The definition's file (records beside it, e.g. the restore rehearsal's), when known."""

    @cached_property
    def chosen_set(self) -> ValidatedSet | None:
        return self.matrix.sets.get(self.definition.cluster.matrix)

    @cached_property
    def group_nodes(self) -> dict[str, NodeSet]:
        return {name: hostlist.parse(g.hosts) for name, g in self.definition.nodes.items()}

    @cached_property
    def inventories(self):
        """MAC inventory files named by node groups, each read once."""
        from ..inventory import read_inventories

        return read_inventories(self.base_dir / g.addressing.mac.file for g in self.definition.nodes.values()
                                if g.addressing.mac.source == "inventory")

    @cached_property
    def fabric_nodes(self) -> dict[str, NodeSet]:
        """Hosts attached to each fabric's leaf switches or blocks."""
        out = {}
        for name, fabric in self.definition.network.fabrics.items():
            out[name] = hostlist.union(nodes for _, nodes in fabric.topology.units() if nodes)
        return out

    @cached_property
    def all_nodes(self) -> NodeSet:
        return hostlist.union(self.group_nodes.values())

    def gpus_in(self, group: str) -> int:
        g = self.definition.nodes[group]
        hw = self.definition.hardware.get(g.hardware)
        if hw is None or hw.gpu is None:
            return 0
        return len(self.group_nodes[group]) * hw.gpu.count

    @cached_property
    def total_gpus(self) -> int:
        return sum(self.gpus_in(n) for n in self.definition.nodes)


def load_checks() -> None:
    """Import every validate/checks_*.py module so its checks register themselves."""
    import importlib
    import pkgutil

    from .. import validate

    for mod in pkgutil.iter_modules(validate.__path__):
        if mod.name.startswith("checks_"):
            importlib.import_module(f"{validate.__name__}.{mod.name}")


def run_checks(ctx: Context, only: Iterable[str] | None = None) -> list[Finding]:
    load_checks()

    names = list(only) if only is not None else list(CHECKS)
    findings: list[Finding] = []
    for name in names:
        findings.extend(CHECKS[name](ctx))
    return findings
