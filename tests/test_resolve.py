"""Resolved nodes: addresses in hostlist order, formatted exactly as ipaddress does."""

from __future__ import annotations

from ipaddress import IPv4Address
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from clusterdef.model import Definition
from clusterdef.resolve import dotted, resolve


@given(st.integers(0, 2**32 - 1))
def test_dotted_matches_ipaddress(n):
    assert dotted(n) == str(IPv4Address(n))


def test_nodes_follow_the_hostlist(lab, matrix):
    d = Definition.model_validate(lab)
    nodes = list(resolve(d, matrix, Path(".")).nodes("train"))
    assert [n.name for n in nodes] == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert [n.ipv4 for n in nodes] == ["10.20.0.11", "10.20.0.12", "10.20.0.13", "10.20.0.14"]
    assert nodes[0].mac == "52:54:00:20:00:11"
