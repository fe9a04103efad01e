"""The fabric checks (validate/checks_fabric.py) finding by finding: code, path, message and hint
written out by hand, for the branches the bad-input corpus (tests/bad/14xx, 17xx) and
test_fabric_kinds.py do not take: rail spines, cores and switch names, rail ports per fabric kind,
switch port counts at and over the InfiniBand limit for tree leaves, rail leaves and spines, Slurm
block sizes, the canary's group and span, NVLink domains, attachments and storage fabrics.
Issue #18: the mutants of these checks that the corpus and the fabric tests let through."""

from __future__ import annotations

import copy

import pytest
from ruamel.yaml import YAML

from clusterdef.errors import Severity
from conftest import CLUSTERS
from test_checks import run

E = Severity.ERROR
RAIL = ("network", "fabrics", "ib0", "topology")
PORTS_HINT = ("each node's compute port i is cabled to rail leaf i: set `rails` to the port count (the `count` of "
              "the compute NICs), or fix the hardware's NICs")
SWITCH_HINT = ("spread the hosts over more leaves (a node's 8 HCA ports fill 8 leaf ports each), or cable each HCA "
               "to its own rail leaf with `kind: rail` (docs/fabric.md)")


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def _codes(result, *codes):
    return [f.code for f in result.findings if f.code in codes]


@pytest.fixture(scope="module")
def gb200_data() -> dict:
    return YAML(typ="safe").load((CLUSTERS / "gb200.yaml").read_text())


@pytest.fixture
def gb200(gb200_data) -> dict:
    """A fresh, mutable copy of clusters/gb200.yaml's data (clean: no finding)."""
    return copy.deepcopy(gb200_data)


def _train_hosts(data: dict, hosts: str) -> None:
    """The lab's group `train` on `hosts` (addresses from 10.20.1.0 in a /23, MACs discovered)."""
    data["nodes"]["train"]["hosts"] = hosts
    data["nodes"]["train"]["addressing"] = {"ipv4_start": "10.20.1.0", "mac": {"source": "discover"}}
    data["network"]["provisioning"]["subnet"] = "10.20.0.0/23"


# ------------------------------------------------------------------ rail-topology

def test_rail_cores_without_spines_word_for_word(rail_lab, matrix, tmp_path):
    topo = rail_lab["network"]["fabrics"]["ib0"]["topology"]
    topo.pop("spines")
    topo["cores"] = "core01"
    assert _found(run(rail_lab, matrix, tmp_path), "rail-no-spine") == [
        (E, RAIL + ("scalable_units",),
         "fabric `ib0` has 2 scalable units and no spines: each unit is an island, and no job can span two of them",
         "list the spine switches every rail leaf is cabled to: `spines: \"spine[01-16]\"`"),
        (E, RAIL + ("cores",), "fabric `ib0` has cores and no spines: the cores are cabled to nothing",
         "list the spines between the rail leaves and the cores")]
    # one unit needs no spine; cores still do
    topo["scalable_units"] = {"su1": {"nodes": "gpu[001-004],kgpu[01-02],sgpu[01-02]"}}
    assert [f[1] for f in _found(run(rail_lab, matrix, tmp_path), "rail-no-spine")] == [RAIL + ("cores",)]
    topo.pop("cores")
    assert _found(run(rail_lab, matrix, tmp_path), "rail-no-spine") == []
    topo["spines"] = "spine01"
    topo["cores"] = "core01"
    assert _found(run(rail_lab, matrix, tmp_path), "rail-no-spine") == []


def test_a_core_named_like_a_rail_leaf_or_a_spine(rail_lab, matrix, tmp_path):
    topo = rail_lab["network"]["fabrics"]["ib0"]["topology"]
    hint = "give each spine and core its own name"
    topo["cores"] = "su2-rail8"
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == [(
        E, RAIL + ("cores",),
        "core `su2-rail8` of fabric `ib0` has the name of another switch of it (rail leaves are `<unit>-rail<i>`)",
        hint)]
    topo["cores"] = "core01,spine02"
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == [(
        E, RAIL + ("cores",),
        "core `spine02` of fabric `ib0` has the name of another switch of it (rail leaves are `<unit>-rail<i>`)",
        hint)]
    topo["cores"] = "core[01-02]"
    topo["spines"] = "su1-rail9,spine02"  # 8 rails: there is no rail leaf 9
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == []


def test_a_rail_leaf_name_longer_than_63_characters(rail_lab, matrix, tmp_path):
    topo = rail_lab["network"]["fabrics"]["ib0"]["topology"]
    units = topo["scalable_units"]
    ok = "u" * 57  # `<unit>-rail8`: 63 characters
    topo["scalable_units"] = {ok: units["su1"], "su2": units["su2"]}
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == []
    long1, long2 = "a" * 58, "b" * 63
    topo["scalable_units"] = {"su2": units["su2"], long1: units["su1"]}
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == [(
        E, RAIL + ("scalable_units", long1),
        f"switch name `{'a' * 58}-rail1...` of fabric `ib0` is longer than 63 characters",
        "use a shorter scalable unit name")]
    # one finding for the fabric: the first long name
    topo["scalable_units"] = {long2: units["su1"], long1: units["su2"]}
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == [(
        E, RAIL + ("scalable_units", long2),
        f"switch name `{'b' * 63}-rail1...` of fabric `ib0` is longer than 63 characters",
        "use a shorter scalable unit name")]


def test_switches_with_host_names(rail_lab, matrix, tmp_path):
    topo = rail_lab["network"]["fabrics"]["ib0"]["topology"]
    topo["spines"] = "spine01,gpu[001-002]"
    topo["cores"] = "kgpu01"
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == [(
        E, RAIL, "switches of fabric `ib0` have host names: gpu[001-002],kgpu01",
        "name switches and hosts apart (a switch is not a node)")]
    topo["spines"] = "spine01,gpu005"  # a name no group has
    topo.pop("cores")
    assert _found(run(rail_lab, matrix, tmp_path), "rail-switch-name") == []


def test_rail_ports_count_the_compute_nics_of_the_fabrics_kind(rail_lab, matrix, tmp_path):
    nics = rail_lab["hardware"]["hgx-h100"]["nics"]
    # NICs of another role or kind are not rail ports
    nics.append({"name": "ibs", "kind": "infiniband", "speed_gbps": 400, "count": 2, "role": "storage"})
    nics.append({"name": "roc", "kind": "roce", "speed_gbps": 400, "count": 1, "role": "compute"})
    assert _found(run(rail_lab, matrix, tmp_path), "rail-ports") == []
    # a second compute InfiniBand NIC adds its ports
    nics.append({"name": "ibx", "kind": "infiniband", "speed_gbps": 400, "count": 1, "role": "compute"})
    assert _found(run(rail_lab, matrix, tmp_path), "rail-ports") == [
        (E, RAIL + ("rails",), f"fabric `ib0` has 8 rails, but node group `{g}` (hardware `hgx-h100`) has 9 compute "
         "infiniband port(s)", PORTS_HINT) for g in ("train", "infer", "secure")]


def test_rail_ports_on_roce_ethernet_and_another_fabric(rail_lab, matrix, tmp_path):
    fabric = rail_lab["network"]["fabrics"]["ib0"]
    fabric["kind"] = "roce"  # the lab's compute NICs are InfiniBand: no RoCE port
    assert _found(run(rail_lab, matrix, tmp_path), "rail-ports") == [
        (E, RAIL + ("rails",), f"fabric `ib0` has 8 rails, but node group `{g}` (hardware `hgx-h100`) has 0 compute "
         "roce port(s)", PORTS_HINT) for g in ("train", "infer", "secure")]
    fabric["kind"] = "ethernet"
    assert _found(run(rail_lab, matrix, tmp_path), "rail-ports") == []
    # groups placed on another fabric, or on none, are not counted
    fabric["kind"] = "infiniband"
    fabric["topology"]["rails"] = 4
    fabric["topology"]["scalable_units"] = {"su1": {"nodes": "gpu[001-002]"}, "su2": {"nodes": "gpu[003-004]"}}
    rail_lab["network"]["fabrics"]["ib1"] = {"kind": "infiniband", "topology": {
        "kind": "tree", "switches": {"leaf11": {"nodes": "sgpu[01-02]"}}}}
    rail_lab["nodes"]["secure"]["placement"]["fabric"] = "ib1"
    rail_lab["nodes"]["infer"].pop("placement")
    assert _found(run(rail_lab, matrix, tmp_path), "rail-ports") == [
        (E, RAIL + ("rails",), "fabric `ib0` has 4 rails, but node group `train` (hardware `hgx-h100`) has 8 compute "
         "infiniband port(s)", PORTS_HINT)]


def test_rail_ports_of_a_group_without_its_hardware(rail_lab, matrix, tmp_path):
    rail_lab["nodes"]["train"]["hardware"] = "hgx-h200"
    assert _found(run(rail_lab, matrix, tmp_path), "rail-ports") == [
        (E, RAIL + ("rails",), "fabric `ib0` has 8 rails, but node group `train` (hardware `hgx-h200`) has 0 compute "
         "infiniband port(s)", PORTS_HINT)]


# ------------------------------------------------------------------ switch-ports

def test_a_tree_leaf_over_the_port_limit_word_for_word(lab, matrix, tmp_path):
    _train_hosts(lab, "gpu[001-064]")
    switches = lab["network"]["fabrics"]["ib0"]["topology"]["switches"]
    switches["leaf01"]["nodes"] = "gpu[001-004],sgpu01"  # 40 + 1 ports
    switches["leaf02"]["nodes"] = "gpu[005-064],kgpu[01-02],sgpu02"  # 63 hosts: 504 + 1
    assert _found(run(lab, matrix, tmp_path), "switch-ports") == [(
        E, RAIL + ("switches", "leaf02"),
        "switch `leaf02` of fabric `ib0` needs 505 ports (504 for the compute ports of 63 hosts, 1 for cables to "
        "other switches); an InfiniBand switch has at most 254", SWITCH_HINT)]
    # both leaves over: one finding per fabric, the first
    switches["leaf01"]["nodes"] = "gpu[001-032],sgpu01"
    switches["leaf02"]["nodes"] = "gpu[033-064],kgpu[01-02],sgpu02"
    assert _found(run(lab, matrix, tmp_path), "switch-ports") == [(
        E, RAIL + ("switches", "leaf01"),
        "switch `leaf01` of fabric `ib0` needs 265 ports (264 for the compute ports of 33 hosts, 1 for cables to "
        "other switches); an InfiniBand switch has at most 254", SWITCH_HINT)]


def test_a_rail_leaf_at_and_over_the_port_limit(lab, matrix, tmp_path):
    _train_hosts(lab, "gpu[001-252]")
    data = {**lab}
    data["network"]["fabrics"]["ib0"]["topology"] = {
        "kind": "rail", "rails": 8, "spines": "spine[01-02]",
        "scalable_units": {"su1": {"nodes": "gpu[001-251],sgpu01"}, "su2": {"nodes": "gpu252,kgpu[01-02],sgpu02"}}}
    # 252 hosts, one port each on a rail leaf, and 2 spines: 254 ports
    assert _found(run(data, matrix, tmp_path), "switch-ports") == []
    units = data["network"]["fabrics"]["ib0"]["topology"]["scalable_units"]
    units["su1"]["nodes"] = "gpu[001-252],sgpu01"
    units["su2"]["nodes"] = "kgpu[01-02],sgpu02"
    assert _found(run(data, matrix, tmp_path), "switch-ports") == [(
        E, RAIL + ("scalable_units", "su1"),
        "switch `su1-rail1` of fabric `ib0` needs 255 ports (253 for the compute ports of 253 hosts, 2 for cables to "
        "other switches); an InfiniBand switch has at most 254", SWITCH_HINT)]


def test_a_spine_at_and_over_the_port_limit(rail_lab, matrix, tmp_path):
    topo = rail_lab["network"]["fabrics"]["ib0"]["topology"]
    topo["cores"] = "core[001-238]"  # a spine: 16 rail leaves and 238 cores
    assert _found(run(rail_lab, matrix, tmp_path), "switch-ports") == []
    topo["cores"] = "core[001-239]"
    assert _found(run(rail_lab, matrix, tmp_path), "switch-ports") == [(
        E, RAIL + ("spines",),
        "switch `spine01` of fabric `ib0` needs 255 ports (all for cables to other switches); an InfiniBand switch "
        "has at most 254", SWITCH_HINT)]


def test_switch_ports_skip_blocks_and_missing_hardware(lab, matrix, tmp_path):
    _train_hosts(lab, "gpu[001-032]")
    lab["network"]["fabrics"]["ib0"]["topology"] = {"kind": "block", "blocks": {
        "b1": {"nodes": "gpu[001-032]"}, "b2": {"nodes": "kgpu[01-02],sgpu[01-02]"}}}
    assert _found(run(lab, matrix, tmp_path), "switch-ports") == []  # blocks are Slurm's grouping, not switches
    lab["network"]["fabrics"]["ib0"]["topology"] = {"kind": "tree", "switches": {
        "leaf01": {"nodes": "gpu[001-032]"}, "leaf02": {"nodes": "kgpu[01-02],sgpu[01-02]"},
        "spine01": {"switches": "leaf[01-02]"}}}
    assert [f[1] for f in _found(run(lab, matrix, tmp_path), "switch-ports")] == [RAIL + ("switches", "leaf01")]
    lab["nodes"]["infer"]["hardware"] = "hgx-h200"  # ref-hardware: no port count
    result = run(lab, matrix, tmp_path)
    assert _found(result, "switch-ports") == [] and _codes(result, "ref-hardware") == ["ref-hardware"]


def test_a_switch_with_a_host_name_is_left_to_the_rail_check(rail_lab, matrix, tmp_path):
    rail_lab["network"]["fabrics"]["ib0"]["topology"]["spines"] = "gpu001"  # the layout refuses it
    result = run(rail_lab, matrix, tmp_path)
    assert _codes(result, "switch-ports", "rail-switch-name") == ["rail-switch-name"]


# ------------------------------------------------------------------ slurm-block-sizes

def _blocks(lab: dict, sizes, **blocks) -> dict:
    topo = {"kind": "block", "blocks": {n: {"nodes": v} for n, v in blocks.items()}}
    if sizes is not None:
        topo["block_sizes"] = sizes
    lab["network"]["fabrics"]["ib0"]["topology"] = topo
    return lab


TWO_BLOCKS = {"b1": "gpu[001-002],sgpu01", "b2": "gpu[003-004],sgpu02", "b3": "kgpu[01-02]"}
INVALID_HINT = "successive sizes double the base block (Slurm topology.conf, BlockSizes)"


@pytest.mark.parametrize("sizes, index, message, hint", [
    ([3, 3], 1, "BlockSizes 3 is not the base block size 3 times a power of two larger than 3", "use 6, 12, ...: "),
    ([3, 12, 6], 2, "BlockSizes 6 is not the base block size 3 times a power of two larger than 12",
     "use 6, 12, ...: "),
    ([2, 5, 3], 1, "BlockSizes 5 is not the base block size 2 times a power of two larger than 2", "use 4, 8, ...: "),
])
def test_invalid_block_sizes_word_for_word(lab, matrix, tmp_path, sizes, index, message, hint):
    result = run(_blocks(lab, sizes, **TWO_BLOCKS), matrix, tmp_path)
    assert _found(result, "block-sizes-invalid") == [(
        E, RAIL + ("block_sizes", index), message + "; slurmctld refuses to start", hint + INVALID_HINT)]
    assert _codes(result, "block-too-small", "block-sizes-count") == []


@pytest.mark.parametrize("sizes, codes", [
    ([3, 6], []), ([1, 2], []),
    ([3, 12], ["block-sizes-count"]),  # a valid size, but 4 blocks of 3 for 2 blocks
])
def test_valid_block_sizes(lab, matrix, tmp_path, sizes, codes):
    result = run(_blocks(lab, sizes, **TWO_BLOCKS), matrix, tmp_path)
    assert _codes(result, "block-sizes-invalid", "block-too-small", "block-sizes-count") == codes


def test_block_sizes_count_only_blocks_with_slurm_nodes(lab, matrix, tmp_path):
    result = run(_blocks(lab, [3, 6, 12], **TWO_BLOCKS), matrix, tmp_path)
    assert _found(result, "block-sizes-count") == [(
        E, RAIL + ("block_sizes", 2),
        "BlockSizes 12 aggregates 4 blocks of 3 nodes, but fabric `ib0` has 2 block(s) with Slurm nodes",
        "list sizes up to 6 (2 of the 2 blocks), or add blocks")]
    assert _codes(result, "block-too-small") == []  # b3 has no Slurm node: no block at all for Slurm


def test_the_first_blocks_count_is_the_base_without_block_sizes(lab, matrix, tmp_path):
    lab = _blocks(lab, None, b1="gpu[001-003],sgpu01", b2="gpu004,kgpu[01-02],sgpu02")
    assert _found(run(lab, matrix, tmp_path), "block-too-small") == [(
        E, RAIL + ("blocks", "b2", "nodes"),
        "block `b2` has 2 Slurm node(s), fewer than the base block size 4 (the first block's node count); "
        "slurmctld 24.11 refuses to start, newer ones keep a block too small for a base-size job",
        "every block needs at least the base block size of Slurm nodes: lower the first BlockSizes value, or "
        "order the blocks so the smallest comes first")]
    lab = _blocks(lab, None, b1="gpu[001-002],sgpu01", b2="gpu[003-004],sgpu02,kgpu[01-02]")
    assert _found(run(lab, matrix, tmp_path), "block-too-small") == []  # 3 and 3: the base itself


def test_a_rail_fabric_as_blocks_names_its_scalable_units(rail_lab, matrix, tmp_path):
    rail_lab["network"]["fabrics"]["ib0"]["topology"].update(slurm="block", block_sizes=[4])
    assert _found(run(rail_lab, matrix, tmp_path), "block-too-small") == [(
        E, RAIL + ("scalable_units", "su1", "nodes"),
        "block `su1` has 3 Slurm node(s), fewer than the base block size 4 (the first BlockSizes value); "
        "slurmctld 24.11 refuses to start, newer ones keep a block too small for a base-size job",
        "every block needs at least the base block size of Slurm nodes: lower the first BlockSizes value, or "
        "order the blocks so the smallest comes first")]
    # the same sizes with Slurm's topology/tree: no blocks
    rail_lab["network"]["fabrics"]["ib0"]["topology"].update(slurm="tree", block_sizes=[3, 9])
    assert _codes(run(rail_lab, matrix, tmp_path), "block-sizes-invalid", "block-too-small") == []


def test_no_block_sizes_checked_without_slurm_or_its_fabric(lab, matrix, tmp_path):
    lab = _blocks(lab, [3, 9], **TWO_BLOCKS)
    for g in ("train", "secure"):
        lab["nodes"][g]["control_plane"] = "kubernetes"  # no Slurm group: no fabric for Slurm
    assert _codes(run(lab, matrix, tmp_path), "block-sizes-invalid") == []
    del lab["slurm"]
    lab["nodes"]["train"]["control_plane"] = "slurm"
    assert _codes(run(lab, matrix, tmp_path), "block-sizes-invalid") == []


def test_the_slurm_fabric_is_the_first_placed_slurm_groups(lab, matrix, tmp_path):
    lab = _blocks(lab, [3, 9], **TWO_BLOCKS)
    lab["nodes"]["train"]["placement"]["fabric"] = "ib9"  # ref-fabric: secure's fabric is Slurm's
    assert [f[1] for f in _found(run(lab, matrix, tmp_path), "block-sizes-invalid")] == [RAIL + ("block_sizes", 1)]


def test_the_nvlink_domains_are_the_slurm_fabric(gb200, matrix, tmp_path):
    gb200["network"]["fabrics"]["nvl72"]["topology"]["block_sizes"] = [18, 36, 72]
    assert _found(run(gb200, matrix, tmp_path), "block-sizes-count") == [(
        E, ("network", "fabrics", "nvl72", "topology", "block_sizes", 2),
        "BlockSizes 72 aggregates 4 blocks of 18 nodes, but fabric `nvl72` has 2 block(s) with Slurm nodes",
        "list sizes up to 36 (2 of the 2 blocks), or add blocks")]


def test_five_blocks_list_sizes_up_to_four_of_them(lab, matrix, tmp_path):
    _train_hosts(lab, "gpu[001-010]")
    lab = _blocks(lab, [2, 4, 8, 16], b1="gpu[001-002]", b2="gpu[003-004]", b3="gpu[005-006]",
                  b4="gpu[007-008]", b5="gpu[009-010],kgpu[01-02]", b6="sgpu[01-02]")
    assert _found(run(lab, matrix, tmp_path), "block-sizes-count") == [(
        E, RAIL + ("block_sizes", 3),
        "BlockSizes 16 aggregates 8 blocks of 2 nodes, but fabric `ib0` has 6 block(s) with Slurm nodes",
        "list sizes up to 8 (4 of the 6 blocks), or add blocks")]


# ------------------------------------------------------------------ canary-fabric

def test_a_canary_on_one_scalable_unit(rail_lab, matrix, tmp_path):
    units = rail_lab["network"]["fabrics"]["ib0"]["topology"]["scalable_units"]
    units["su1"]["nodes"] = "gpu[001-004],sgpu01"
    units["su2"]["nodes"] = "kgpu[01-02],sgpu02"
    assert _found(run(rail_lab, matrix, tmp_path), "canary-single-leaf") == [(
        E, ("upgrade", "canary", "node_group"),
        "canary group `train` is on one scalable unit (`su1`) of fabric `ib0`: the canary's collective test never "
        "crosses the fabric",
        "take the canary from a group spread over at least two scalable units (upgrade.canary.node_group), or set "
        "min_leaf_switches: 1 for a one-leaf cluster")]
    rail_lab["upgrade"]["canary"]["min_leaf_switches"] = 1
    assert _codes(run(rail_lab, matrix, tmp_path), "canary-single-leaf", "canary-leaf-count") == []


def test_a_canary_on_one_block_without_a_named_group(lab, matrix, tmp_path):
    lab = _blocks(lab, None, b1="gpu[001-004],sgpu01", b2="kgpu[01-02],sgpu02")
    del lab["upgrade"]["canary"]["node_group"]  # the first Slurm group: train
    assert _found(run(lab, matrix, tmp_path), "canary-single-leaf") == [(
        E, ("upgrade", "canary", "min_leaf_switches"),
        "canary group `train` is on one block (`b1`) of fabric `ib0`: the canary's collective test never crosses "
        "the fabric",
        "take the canary from a group spread over at least two leaves (upgrade.canary.node_group), or set "
        "min_leaf_switches: 1 for a one-leaf cluster")]


@pytest.mark.parametrize("kind, unit, hint", [
    ("rail", "scalable unit(s)", "set min_leaf_switches to at most 2 (on a rail-optimised fabric it counts scalable "
     "units), or take the canary from a wider group"),
    ("block", "block(s)", "set min_leaf_switches to at most 2, or take the canary from a wider group"),
])
def test_a_canary_spanning_fewer_units_than_asked(rail_lab, matrix, tmp_path, kind, unit, hint):
    if kind == "block":
        _blocks(rail_lab, None, su1="gpu[001-002],sgpu01", su2="gpu[003-004],kgpu[01-02],sgpu02")
    rail_lab["upgrade"]["canary"]["min_leaf_switches"] = 3
    result = run(rail_lab, matrix, tmp_path)
    assert _found(result, "canary-leaf-count") == [(
        E, ("upgrade", "canary", "min_leaf_switches"),
        f"upgrade.canary.min_leaf_switches is 3, but canary group `train` spans 2 {unit} of fabric `ib0` (su1, su2)",
        hint)]
    assert _codes(result, "canary-single-leaf") == []


def test_hosts_on_no_leaf_are_no_span(lab, matrix, tmp_path):
    _train_hosts(lab, "gpu[001-005]")  # gpu005 is on no leaf
    lab["upgrade"]["canary"]["min_leaf_switches"] = 3
    assert _found(run(lab, matrix, tmp_path), "canary-leaf-count") == [(
        E, ("upgrade", "canary", "min_leaf_switches"),
        "upgrade.canary.min_leaf_switches is 3, but canary group `train` spans 2 leaf switch(es) of fabric `ib0` "
        "(leaf01, leaf02)", "set min_leaf_switches to at most 2, or take the canary from a wider group")]
    switches = lab["network"]["fabrics"]["ib0"]["topology"]["switches"]
    switches["leaf01"]["nodes"] = "gpu[001-004],sgpu01"
    switches["leaf02"]["nodes"] = "kgpu[01-02],sgpu02"
    lab["upgrade"]["canary"]["min_leaf_switches"] = 2
    assert [f[2] for f in _found(run(lab, matrix, tmp_path), "canary-single-leaf")] == [
        "canary group `train` is on one leaf switch (`leaf01`) of fabric `ib0`: the canary's collective test never "
        "crosses the fabric"]


def test_a_canary_group_without_placement_or_fabric(lab, matrix, tmp_path):
    lab["upgrade"]["canary"]["min_leaf_switches"] = 3
    lab["nodes"]["train"]["placement"]["fabric"] = "ib9"
    assert _codes(run(lab, matrix, tmp_path), "canary-single-leaf", "canary-leaf-count") == []
    lab["nodes"]["train"].pop("placement")
    assert _codes(run(lab, matrix, tmp_path), "canary-single-leaf", "canary-leaf-count") == []


def test_a_canary_group_on_no_leaf_spans_nothing(lab, matrix, tmp_path):
    _train_hosts(lab, "gpu[005-008]")  # placed on ib0, but on none of its leaves
    lab["upgrade"]["canary"]["min_leaf_switches"] = 3
    assert _codes(run(lab, matrix, tmp_path), "canary-single-leaf", "canary-leaf-count") == []


def test_the_canary_group_is_the_first_slurm_group_then_the_first_group(lab, matrix, tmp_path):
    switches = lab["network"]["fabrics"]["ib0"]["topology"]["switches"]
    del lab["upgrade"]["canary"]["node_group"]
    # infer first: it is on one leaf, but the canary is taken from the first Slurm group (secure, two leaves)
    lab["nodes"] = {"infer": lab["nodes"]["infer"], "secure": lab["nodes"]["secure"], "train": lab["nodes"]["train"]}
    assert _codes(run(lab, matrix, tmp_path), "canary-single-leaf", "canary-leaf-count") == []
    # secure is the first Slurm group now: on one leaf
    switches["leaf01"]["nodes"] = "gpu[001-002],sgpu[01-02]"
    switches["leaf02"]["nodes"] = "gpu[003-004],kgpu[01-02]"
    assert [f[2] for f in _found(run(lab, matrix, tmp_path), "canary-single-leaf")] == [
        "canary group `secure` is on one leaf switch (`leaf01`) of fabric `ib0`: the canary's collective test never "
        "crosses the fabric"]
    # no Slurm group: the first group
    for g in lab["nodes"].values():
        g["control_plane"] = "kubernetes"
    assert [f[1:3] for f in _found(run(lab, matrix, tmp_path), "canary-single-leaf")] == [(
        ("upgrade", "canary", "min_leaf_switches"),
        "canary group `infer` is on one leaf switch (`leaf02`) of fabric `ib0`: the canary's collective test never "
        "crosses the fabric")]
    # a named group that does not exist: the first Slurm group again
    lab["upgrade"]["canary"]["node_group"] = "nope"
    lab["nodes"]["secure"]["control_plane"] = "slurm"
    assert [f[1:3] for f in _found(run(lab, matrix, tmp_path), "canary-single-leaf")] == [(
        ("upgrade", "canary", "node_group"),
        "canary group `secure` is on one leaf switch (`leaf01`) of fabric `ib0`: the canary's collective test never "
        "crosses the fabric")]


# ------------------------------------------------------------------ nvlink-domains

def test_ref_nvlink_names_the_nvlink_fabrics(gb200, lab, matrix, tmp_path):
    gb200["nodes"]["train-r01"]["placement"]["nvlink"] = "nvl99"
    assert _found(run(gb200, matrix, tmp_path), "ref-nvlink") == [(
        E, ("nodes", "train-r01", "placement", "nvlink"), "`nvl99` is not a fabric of kind nvlink",
        "NVLink fabrics: nvl72")]
    fabrics = gb200["network"]["fabrics"]
    fabrics["nvl36"] = copy.deepcopy(fabrics["nvl72"])
    assert [f[3] for f in _found(run(gb200, matrix, tmp_path), "ref-nvlink")] == ["NVLink fabrics: nvl36, nvl72"]
    # a definition without NVLink fabrics
    lab["nodes"]["train"]["placement"]["nvlink"] = "ib0"
    assert _found(run(lab, matrix, tmp_path), "ref-nvlink") == [(
        E, ("nodes", "train", "placement", "nvlink"), "`ib0` is not a fabric of kind nvlink (it is infiniband)",
        "define the NVLink domains under network.fabrics with `kind: nvlink`")]
    assert _codes(run(lab, matrix, tmp_path), "nvlink-platform") == []


def test_a_tray_with_another_gpu_count(gb200, matrix, tmp_path):
    gb200["hardware"]["gb200-tray"]["gpu"]["count"] = 8
    assert _found(run(gb200, matrix, tmp_path), "nvlink-platform") == [(  # one for the three groups
        E, ("hardware", "gb200-tray", "gpu", "count"),
        "hardware `gb200-tray` (gb200-nvl72) has 8 GPU(s) per node; a gb200-nvl72 compute tray has 4",
        "set gpu.count: 4")]
    del gb200["hardware"]["gb200-tray"]["gpu"]
    assert _found(run(gb200, matrix, tmp_path), "nvlink-platform") == [(  # one for the three groups
        E, ("hardware", "gb200-tray"),
        "hardware `gb200-tray` (gb200-nvl72) has 0 GPU(s) per node; a gb200-nvl72 compute tray has 4",
        "set gpu.count: 4")]


def test_nvlink_checks_skip_groups_without_hardware_or_image(gb200, matrix, tmp_path):
    gb200["images"]["grace-node"]["architecture"] = "amd64"
    gb200["nodes"]["train-r01"]["hardware"] = "nope"
    gb200["nodes"]["train-r02"]["image"] = "nope"
    result = run(gb200, matrix, tmp_path)
    assert [f[1] for f in _found(result, "image-arch")] == [("nodes", "mnnvl-r03", "image")]
    assert _codes(result, "nvlink-platform", "nvlink-domain-size", "nvlink-domain-missing") == []


def test_an_nvlink_domain_at_and_over_its_trays(gb200, matrix, tmp_path):
    blocks = gb200["network"]["fabrics"]["nvl72"]["topology"]["blocks"]
    blocks["rack04"] = {"nodes": "spare[01-19]"}  # no group's nodes: not a domain of any group
    assert _codes(run(gb200, matrix, tmp_path), "nvlink-domain-size") == []
    g = gb200["nodes"]["mnnvl-r03"]
    g["hosts"] = "gb[037-055]"
    g["addressing"]["mac"] = {"source": "discover"}
    blocks["rack03"]["nodes"] = "gb[037-055]"
    assert _found(run(gb200, matrix, tmp_path), "nvlink-domain-size") == [(
        E, ("network", "fabrics", "nvl72", "topology", "blocks", "rack03", "nodes"),
        "NVLink domain `rack03` lists 19 nodes; one gb200-nvl72 domain holds 18 compute trays (72 GPUs)",
        "one block per NVL72 rack: split the block")]


# ------------------------------------------------------------------ attachments

def _attach(gb200: dict, group: str, role: str, **kw) -> dict:
    gb200["nodes"][group]["attachments"][role].update(kw)
    return gb200


@pytest.mark.parametrize("role, network, hint", [
    ("provisioning", "management", "a provisioning attachment names `provisioning` (network.provisioning)"),
    ("management", "stor0", "a management (BMC) attachment names `management` (network.management)"),
    ("storage", "stor9", "a storage attachment names a fabric of network.fabrics (fabrics: ib0, nvl72, stor0)"),
    ("storage", "nvl72", "NVLink domains are `placement.nvlink`, not an attachment"),
])
def test_an_attachment_to_the_wrong_network(gb200, matrix, tmp_path, role, network, hint):
    result = run(_attach(gb200, "train-r02", role, network=network), matrix, tmp_path)
    assert _found(result, "attachment-network") == [(
        E, ("nodes", "train-r02", "attachments", role, "network"),
        f"node group `train-r02` attaches {role} to `{network}`", hint)]


def test_a_management_attachment_without_the_bmc_network(gb200, matrix, tmp_path):
    del gb200["network"]["management"]
    result = run(gb200, matrix, tmp_path)
    assert _found(result, "attachment-network") == [
        (E, ("nodes", g, "attachments", "management", "network"), f"node group `{g}` attaches management to "
         "`management`", "define the BMC network under network.management: {subnet: ...}")
        for g in ("train-r01", "train-r02", "mnnvl-r03")]
    assert _codes(result, "management-subnet", "attachment-ip") == []


def test_the_bmc_network_overlapping_a_fabric(gb200, matrix, tmp_path):
    gb200["network"]["management"] = {"subnet": "10.40.0.0/16"}
    assert _found(run(gb200, matrix, tmp_path), "management-subnet") == [(
        E, ("network", "management", "subnet"),
        "the BMC network 10.40.0.0/16 overlaps network.fabrics.stor0.subnet (10.40.0.0/24)",
        "give the out-of-band network a subnet of its own: the provisioning dnsmasq must never lease or boot a BMC, "
        "and tenant traffic on the fabrics must not reach it")]
    gb200["network"]["management"] = {"subnet": "10.41.0.0/24"}
    assert _codes(run(gb200, matrix, tmp_path), "management-subnet") == []


def test_an_attachment_nic_of_another_role_or_hardware(gb200, matrix, tmp_path):
    _attach(gb200, "mnnvl-r03", "management", nic="bf3s")
    assert _found(run(gb200, matrix, tmp_path), "attachment-nic") == [(
        E, ("nodes", "mnnvl-r03", "attachments", "management", "nic"),
        "node group `mnnvl-r03`: hardware `gb200-tray` has no management NIC `bf3s`",
        "name a NIC of the hardware whose role is management (its NICs: bf3p (provisioning), bf3s (storage), "
        "ibp (compute), bmc (management))")]
    _attach(gb200, "mnnvl-r03", "management", nic="bmc0")
    assert [f[2] for f in _found(run(gb200, matrix, tmp_path), "attachment-nic")] == [
        "node group `mnnvl-r03`: hardware `gb200-tray` has no management NIC `bmc0`"]
    gb200["nodes"]["mnnvl-r03"]["hardware"] = "nope"  # ref-hardware: no NIC to compare
    assert _found(run(gb200, matrix, tmp_path), "attachment-nic") == []


def test_addresses_on_a_fabric_without_a_subnet(gb200, matrix, tmp_path):
    del gb200["network"]["fabrics"]["stor0"]["subnet"]
    result = run(gb200, matrix, tmp_path)
    assert _found(result, "attachment-ip") == [
        (E, ("nodes", g, "attachments", "storage", "ipv4_start"),
         f"node group `{g}` gives storage addresses on `stor0`, which has no subnet",
         "set network.fabrics.stor0.subnet") for g in ("train-r01", "train-r02", "mnnvl-r03")]
    assert _codes(result, "storage-subnet") == []


@pytest.mark.parametrize("start, fits", [
    ("10.40.0.237", True),  # the last of 18 addresses is 10.40.0.254
    ("10.40.0.238", False),  # ... the broadcast address
    ("10.40.0.0", False),  # the network address
    ("10.39.255.250", False),
])
def test_attachment_addresses_in_the_subnet(gb200, matrix, tmp_path, start, fits):
    result = run(_attach(gb200, "train-r01", "storage", ipv4_start=start), matrix, tmp_path)
    assert _found(result, "attachment-ip") == ([] if fits else [(
        E, ("nodes", "train-r01", "attachments", "storage", "ipv4_start"),
        f"node group `train-r01`: 18 storage address(es) from {start} do not fit in 10.40.0.0/24",
        "start the range inside the subnet, with room for every host")])


# ------------------------------------------------------------------ storage-fabric

def test_ipoib_datagram_mtu_at_and_over_the_limit(lab, matrix, tmp_path):
    fabric = lab["network"]["fabrics"]["ib0"]
    fabric.update(ipoib_mode="datagram", mtu=4092)
    assert _found(run(lab, matrix, tmp_path), "fabric-interface") == []
    fabric["mtu"] = 4093
    assert _found(run(lab, matrix, tmp_path), "fabric-interface") == [(
        E, ("network", "fabrics", "ib0", "mtu"),
        "fabric `ib0`: MTU 4093 in IPoIB datagram mode; datagram mode carries at most 4092 (a 4K InfiniBand MTU "
        "less the IPoIB header)", "set ipoib_mode: connected (MTU up to 65520) or an MTU of at most 4092")]
    fabric["ipoib_mode"] = "connected"
    assert _found(run(lab, matrix, tmp_path), "fabric-interface") == []
    fabric["ipoib_mode"] = "datagram"
    del fabric["mtu"]  # the kernel's MTU
    assert _found(run(lab, matrix, tmp_path), "fabric-interface") == []


def test_an_unset_ipoib_mode_is_datagram_and_takes_no_larger_mtu(lab, matrix, tmp_path):
    # the kernel's default mode is datagram: MTU 9000 without ipoib_mode was accepted and then refused
    # by the interface
    fabric = lab["network"]["fabrics"]["ib0"]
    fabric.pop("ipoib_mode", None)
    fabric["mtu"] = 4092
    assert _found(run(lab, matrix, tmp_path), "fabric-interface") == []
    fabric["mtu"] = 9000
    assert _found(run(lab, matrix, tmp_path), "fabric-interface") == [(
        E, ("network", "fabrics", "ib0", "mtu"),
        "fabric `ib0`: MTU 9000 in IPoIB datagram mode (ipoib_mode unset: the kernel's default); datagram mode "
        "carries at most 4092 (a 4K InfiniBand MTU less the IPoIB header)",
        "set ipoib_mode: connected (MTU up to 65520) or an MTU of at most 4092")]


def test_ipoib_mode_on_ethernet(lab, matrix, tmp_path):
    lab["network"]["fabrics"]["eth0"] = {"kind": "ethernet", "ipoib_mode": "datagram", "mtu": 9000, "topology": {
        "kind": "tree", "switches": {"e01": {"nodes": "gpu001"}}}}
    assert _found(run(lab, matrix, tmp_path), "fabric-interface") == [(
        E, ("network", "fabrics", "eth0", "ipoib_mode"),
        "fabric `eth0` is ethernet: IPoIB mode applies to InfiniBand fabrics only",
        "remove ipoib_mode (MTU alone sets a RoCE/Ethernet interface)")]


STORAGE_HINT = ("give the storage network a subnet of its own: with overlapping subnets a node routes storage traffic "
                "out of the wrong port, and tenant or provisioning traffic reaches it")


def test_a_storage_subnet_overlapping_the_bmcs_or_another_fabric(gb200, matrix, tmp_path):
    gb200["network"]["fabrics"]["stor0"]["subnet"] = "10.31.0.0/25"
    assert _found(run(gb200, matrix, tmp_path), "storage-subnet") == [(
        E, ("network", "fabrics", "stor0", "subnet"),
        "storage fabric `stor0` (10.31.0.0/25, attached by train-r01, train-r02, mnnvl-r03) overlaps "
        "network.management.subnet (10.31.0.0/24)", STORAGE_HINT)]
    gb200["network"]["fabrics"]["stor0"]["subnet"] = "10.40.0.0/24"
    gb200["network"]["fabrics"]["ib0"]["subnet"] = "10.40.0.128/25"
    del gb200["nodes"]["mnnvl-r03"]["attachments"]["storage"]
    assert _found(run(gb200, matrix, tmp_path), "storage-subnet") == [(
        E, ("network", "fabrics", "stor0", "subnet"),
        "storage fabric `stor0` (10.40.0.0/24, attached by train-r01, train-r02) overlaps "
        "network.fabrics.ib0.subnet (10.40.0.128/25)", STORAGE_HINT)]


def test_a_storage_subnet_without_a_bmc_network(gb200, matrix, tmp_path):
    del gb200["network"]["management"]
    gb200["network"]["fabrics"]["stor0"]["subnet"] = "10.31.0.0/24"
    assert _found(run(gb200, matrix, tmp_path), "storage-subnet") == []


def test_a_fabric_no_group_attaches_storage_to_is_not_a_storage_fabric(gb200, matrix, tmp_path):
    for g in gb200["nodes"].values():
        del g["attachments"]["storage"]
    gb200["network"]["fabrics"]["stor0"]["subnet"] = "10.30.0.0/24"  # the provisioning subnet
    result = run(gb200, matrix, tmp_path)
    assert _found(result, "storage-subnet") == []
    assert _found(result, "filesystem-network") == [(
        E, ("filesystems", "data", "network"),
        "filesystem `data` is reached over `stor0`, which no node group attaches storage to",
        "name a storage fabric of the attachments (none)")]


def test_a_filesystem_over_an_unknown_network(gb200, matrix, tmp_path):
    gb200["filesystems"]["data"]["network"] = "nope"
    assert _found(run(gb200, matrix, tmp_path), "filesystem-network") == [(
        E, ("filesystems", "data", "network"), "filesystem `data` is reached over `nope`, which no node group "
        "attaches storage to", "name a storage fabric of the attachments (stor0)")]


def test_a_local_filesystem_with_a_network(gb200, matrix, tmp_path):
    gb200["filesystems"]["data"] = {"kind": "xfs", "mount": "/data", "node_groups": ["train-r01"], "network": "stor0"}
    assert _found(run(gb200, matrix, tmp_path), "filesystem-network") == [(
        E, ("filesystems", "data", "network"),
        "filesystem `data` (xfs) is a local block device: it is reached over no network",
        "remove `network` (only lustre, gpfs and nfs are mounted over a storage fabric)")]
    del gb200["filesystems"]["data"]["network"]
    assert _found(run(gb200, matrix, tmp_path), "filesystem-network") == []


def test_a_group_mounting_without_a_storage_attachment(gb200, matrix, tmp_path):
    del gb200["nodes"]["train-r02"]["attachments"]["storage"]
    gb200["filesystems"]["data"]["node_groups"] = ["train-r01", "train-r02", "mnnvl-r03", "gone"]
    assert _found(run(gb200, matrix, tmp_path), "filesystem-network") == [(
        E, ("filesystems", "data", "network"),
        "filesystem `data` is mounted over storage fabric `stor0` by node group `train-r02`, which has no storage "
        "attachment on it", "add `attachments.storage: {network: stor0, nic: ...}` to nodes.train-r02")]


@pytest.mark.parametrize("kind", ["gpfs", "lustre"])
def test_a_parallel_filesystem_over_the_storage_fabric(gb200, matrix, tmp_path, kind):
    gb200["filesystems"]["data"]["kind"] = kind
    assert _found(run(gb200, matrix, tmp_path), "filesystem-network") == []
