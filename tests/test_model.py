"""The definition model: frozen, strict about unknown fields, discriminated unions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clusterdef.model import Definition
from clusterdef.model.network import BlockTopology, TreeTopology
from clusterdef.model.nodes import MacDiscover, MacInventory, MacList


def test_lab_parses_with_defaults(lab):
    d = Definition.model_validate(lab)
    assert d.cluster.matrix == "2026.07-r580"
    assert d.upgrade.canary.nodes == 2 and d.upgrade.rollback.exercise_on_canary
    assert d.hardware["hgx-h100"].cpu.cpus == 224
    assert set(d.groups_of("slurm")) == {"train", "secure"} and set(d.groups_of("kubernetes")) == {"infer"}


def test_models_are_frozen(lab):
    d = Definition.model_validate(lab)
    with pytest.raises(ValidationError):
        d.cluster.name = "other"


@pytest.mark.parametrize("mac, kind", [
    ({"source": "list", "macs": ["52:54:00:00:00:01"]}, MacList),
    ({"source": "inventory", "file": "macs.csv"}, MacInventory),
    ({"source": "discover"}, MacDiscover),
])
def test_mac_source_is_a_discriminated_union(lab, mac, kind):
    lab["nodes"]["train"]["addressing"]["mac"] = mac
    assert isinstance(Definition.model_validate(lab).nodes["train"].addressing.mac, kind)


def test_topology_kinds(lab):
    d = Definition.model_validate(lab)
    assert isinstance(d.network.fabrics["ib0"].topology, TreeTopology)
    lab["network"]["fabrics"]["ib0"]["topology"] = {"kind": "block", "block_sizes": [2],
                                                    "blocks": {"su1": {"nodes": "gpu[001-004]"}}}
    assert isinstance(Definition.model_validate(lab).network.fabrics["ib0"].topology, BlockTopology)


@pytest.mark.parametrize("path, value", [
    (("cluster", "colour"), "blue"),
    (("nodes", "train", "control_plane"), ["slurm", "kubernetes"]),
    (("nodes", "train", "hosts"), "gpu[4-1]"),
    (("hardware", "hgx-h100", "gpu", "count"), 0),
    (("cluster", "name"), "Lab_Cluster"),
    (("slurm", "partitions", "train", "max_time"), "two days"),
])
def test_rejects(lab, path, value):
    node = lab
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    with pytest.raises(ValidationError):
        Definition.model_validate(lab)
