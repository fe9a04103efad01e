"""Slurm-style hostlists (``gpu[0001-0512]``, ``a[1-3,7],b5``), through ClusterShell's
NodeSet, the HPC standard library for folding and expanding them. Everything
else in clusterdef goes through these few functions."""

from __future__ import annotations

import re
from functools import lru_cache

from ClusterShell.NodeSet import NodeSet, NodeSetParseError
from ClusterShell.NodeSet import RESOLVER_NOGROUP


class HostlistError(ValueError):
    """A hostlist expression that cannot be parsed."""


@lru_cache(maxsize=4096)
def parse(expr: str) -> NodeSet:
    """Parse a hostlist expression into a NodeSet (group syntax such as @name is off)."""
    if not isinstance(expr, str) or not expr.strip():
        raise HostlistError("empty hostlist")
    if any(c.isspace() for c in expr.strip()):
        raise HostlistError(f"hostlist {expr!r} contains whitespace")
    if "@" in expr or "!" in expr or "&" in expr or "^" in expr:
        raise HostlistError(f"hostlist {expr!r} uses set operators or groups; list hosts and ranges only")
    try:
        ns = NodeSet(expr.strip(), resolver=RESOLVER_NOGROUP)
    except (NodeSetParseError, ValueError) as exc:
        raise HostlistError(f"hostlist {expr!r} is not valid: {exc}") from None
    return ns


@lru_cache(maxsize=4096)
def names(expr: str) -> tuple[str, ...]:
    """All host names, in Slurm's order (sorted by prefix, then index); expanded once per expression."""
    return tuple(parse(expr))


def expand(expr: str) -> list[str]:
    return list(names(expr))


_TRAILING_INDEX = re.compile(r"^(.*?)(\d+)$")


def fold(hosts) -> str:
    """Compress host names into the shortest hostlist expression.

    Names are grouped by prefix and index width into ranges first, so NodeSet parses one
    expression per prefix instead of one per host (thousands of hosts fold in milliseconds)."""
    if isinstance(hosts, str):
        hosts = [hosts]
    ranges: dict[tuple[str, int], set[int]] = {}
    parts: list[str] = []
    for host in hosts:
        m = _TRAILING_INDEX.match(host)
        if m:
            prefix, digits = m.groups()
            ranges.setdefault((prefix, len(digits) if digits.startswith("0") else 0), set()).add(int(digits))
        else:
            parts.append(host)
    for (prefix, width), numbers in ranges.items():
        runs, start, prev = [], None, None
        for n in sorted(numbers):
            if start is None:
                start = prev = n
            elif n == prev + 1:
                prev = n
            else:
                runs.append((start, prev))
                start = prev = n
        runs.append((start, prev))
        fmt = f"{{:0{width}d}}" if width else "{}"
        body = ",".join(fmt.format(a) if a == b else f"{fmt.format(a)}-{fmt.format(b)}" for a, b in runs)
        parts.append(f"{prefix}[{body}]")
    ns = NodeSet(resolver=RESOLVER_NOGROUP)
    if parts:
        ns.update(",".join(parts))
    return str(ns)


def count(expr: str) -> int:
    return len(parse(expr))


def union(exprs) -> NodeSet:
    ns = NodeSet(resolver=RESOLVER_NOGROUP)
    for e in exprs:
        ns.update(parse(e) if isinstance(e, str) else e)
    return ns


def overlap(a: str, b: str) -> NodeSet:
    """Hosts present in both hostlists (empty NodeSet when disjoint)."""
    return parse(a).intersection(parse(b))
