"""The node checks (validate/checks_nodes.py) finding by finding: node ownership, provisioning
addresses (the subnet's edges, the dynamic range, the overlap sweep), MACs from a list or an
inventory, and fabric topology for trees, rails and blocks. Code, path, message and hint are
written out by hand, for the branches the bad-input corpus does not take. Issue #18: the mutants
of these checks that the corpus and test_checks.py let through."""

from __future__ import annotations

import pytest

from clusterdef.errors import Severity
from test_checks import run

E = Severity.ERROR
ADDR_CODES = ("ip-outside-subnet", "ip-duplicate")
MAC_CODES = ("mac-count", "mac-inventory", "mac-duplicate")
TOPO_CODES = ("topology-unknown-host", "topology-node-twice", "ref-switch", "switch-empty", "switch-self",
              "switch-cycle")
DUP_HINT = "move one range so provisioning addresses are unique"
MAC_HINT = "every node's provisioning NIC has its own MAC"
INV_HINT = ("the path is relative to the definition file; each line is `host,mac` with a lower-case MAC "
            "(docs/provisioning.md)")
MISSING_HINT = "add `host,mac` lines for every host of the group"
TREE_HINT_TAIL = (", not both. If each node's HCA i is cabled to rail leaf i (a rail-optimised fabric, as in a "
                  "DGX SuperPOD scalable unit), describe the fabric as `topology: {kind: rail, rails: 8, "
                  "scalable_units: {su1: {nodes: ...}}, spines: ...}` (docs/fabric.md)")
UNKNOWN_HINT = "list only hosts defined in `nodes`"


def _found(result, *codes):
    """The findings of `codes`, in the report's order (by place in the file)."""
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in codes]


def _group(lab, name, hosts, ipv4_start, control_plane="slurm"):
    lab["nodes"][name] = {"hosts": hosts, "hardware": "hgx-h100", "image": "gpu-node", "control_plane": control_plane,
                          "addressing": {"ipv4_start": ipv4_start, "mac": {"source": "discover"}}}


# ---- node ownership


def test_a_group_overlapping_two_earlier_groups_gets_one_finding_each(lab, matrix, tmp_path):
    _group(lab, "spare", "gpu[003-004],kgpu01", "10.20.0.90")
    assert _found(run(lab, matrix, tmp_path), "node-in-two-groups", "node-two-control-planes") == [
        ("node-in-two-groups", E, ("nodes", "spare", "hosts"),
         "2 node(s) gpu[003-004] are in both `train` and `spare`", "each node belongs to exactly one node group"),
        ("node-two-control-planes", E, ("nodes", "spare", "hosts"),
         "1 node(s) kgpu01 are owned by kubernetes (group `infer`) and by slurm (group `spare`)",
         "a GPU node has exactly one owning control plane: remove the hosts from one group")]


def test_a_group_overlapping_only_a_group_before_the_last(lab, matrix, tmp_path):
    _group(lab, "spare", "gpu001", "10.20.0.90")
    _group(lab, "extra", "sgpu09", "10.20.0.95")
    _group(lab, "third", "gpu002,sgpu09", "10.20.0.97")
    assert _found(run(lab, matrix, tmp_path), "node-in-two-groups", "node-two-control-planes") == [
        ("node-in-two-groups", E, ("nodes", "spare", "hosts"),
         "1 node(s) gpu001 are in both `train` and `spare`", "each node belongs to exactly one node group"),
        ("node-in-two-groups", E, ("nodes", "third", "hosts"),
         "1 node(s) gpu002 are in both `train` and `third`", "each node belongs to exactly one node group"),
        ("node-in-two-groups", E, ("nodes", "third", "hosts"),
         "1 node(s) sgpu09 are in both `extra` and `third`", "each node belongs to exactly one node group")]


# ---- addressing: the provisioning server


def _server_finding(server):
    return [("ip-outside-subnet", E, ("network", "provisioning", "server"),
             f"provisioning server {server} is outside 10.20.0.0/24", "use an address inside 10.20.0.0/24")]


def test_the_server_on_the_subnets_first_and_last_host_address_is_inside(lab, matrix, tmp_path):
    for server in ("10.20.0.1", "10.20.0.254"):
        lab["network"]["provisioning"]["server"] = server
        assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [], server


def test_the_server_on_the_network_or_broadcast_address_is_outside(lab, matrix, tmp_path):
    for server in ("10.20.0.0", "10.20.0.255"):
        lab["network"]["provisioning"]["server"] = server
        assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == _server_finding(server)


# ---- addressing: node groups at the subnet's edges


def _group_outside(start, last, n=2, group="secure"):
    return [("ip-outside-subnet", E, ("nodes", group, "addressing", "ipv4_start"),
             f"{n} host(s) from {start} run to {last}, outside the provisioning subnet 10.20.0.0/24",
             f"start the group so all {n} addresses fit in 10.20.0.0/24 (10.20.0.1-10.20.0.254)")]


def test_a_group_from_the_first_host_address_to_the_last_fits(lab, matrix, tmp_path):
    del lab["network"]["provisioning"]["gateway"]  # the lab's gateway is 10.20.0.1, the edge tested here
    lab["network"]["provisioning"]["server"] = "10.20.0.100"
    lab["nodes"]["mgmt"]["addressing"]["ipv4_start"] = "10.20.0.100"  # the boot server has the server's address
    lab["nodes"]["secure"]["addressing"]["ipv4_start"] = "10.20.0.1"
    lab["nodes"]["infer"]["addressing"]["ipv4_start"] = "10.20.0.253"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == []


def test_a_group_on_the_network_address_is_outside(lab, matrix, tmp_path):
    del lab["network"]["provisioning"]["gateway"]  # the lab's gateway is 10.20.0.1, the edge tested here
    lab["network"]["provisioning"]["server"] = "10.20.0.100"
    lab["nodes"]["secure"]["addressing"]["ipv4_start"] = "10.20.0.0"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == _group_outside("10.20.0.0", "10.20.0.1")


def test_a_group_running_onto_the_broadcast_address_is_outside(lab, matrix, tmp_path):
    lab["nodes"]["secure"]["addressing"]["ipv4_start"] = "10.20.0.254"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == _group_outside("10.20.0.254", "10.20.0.255")


def test_a_group_running_past_the_last_ipv4_address_is_named_at_255_255_255_255(lab, matrix, tmp_path):
    lab["nodes"]["train"]["addressing"]["ipv4_start"] = "255.255.255.254"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == _group_outside(
        "255.255.255.254", "255.255.255.255", n=4, group="train")


# ---- addressing: the dynamic range


def _dynamic_outside(start, end):
    return [("ip-outside-subnet", E, ("network", "provisioning", "dynamic_range"),
             f"dynamic range {start}-{end} is not an ordered range inside 10.20.0.0/24",
             "keep start <= end inside 10.20.0.0/24")]


def test_a_dynamic_range_of_one_address_at_either_edge_is_fine(lab, matrix, tmp_path):
    del lab["network"]["provisioning"]["gateway"]  # the lab's gateway is 10.20.0.1, the edge tested here
    for start, end in (("10.20.0.254", "10.20.0.254"), ("10.20.0.1", "10.20.0.1")):
        lab["network"]["provisioning"]["dynamic_range"] = {"start": start, "end": end}
        assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [], start


def test_a_dynamic_range_from_the_first_to_the_last_host_address_overlaps_everything(lab, matrix, tmp_path):
    del lab["network"]["provisioning"]["gateway"]  # the lab's gateway is 10.20.0.1, the edge tested here
    lab["network"]["provisioning"]["dynamic_range"] = {"start": "10.20.0.1", "end": "10.20.0.254"}
    dyn = "the dynamic DHCP range"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [
        ("ip-duplicate", E, ("nodes", "train", "addressing", "ipv4_start"),
         f"addresses 10.20.0.11-10.20.0.14 are given to both {dyn} and node group `train`", DUP_HINT),
        ("ip-duplicate", E, ("nodes", "infer", "addressing", "ipv4_start"),
         f"addresses 10.20.0.31-10.20.0.32 are given to both {dyn} and node group `infer`", DUP_HINT),
        ("ip-duplicate", E, ("nodes", "secure", "addressing", "ipv4_start"),
         f"addresses 10.20.0.41-10.20.0.42 are given to both {dyn} and node group `secure`", DUP_HINT),
        *[("ip-duplicate", E, ("nodes", g, "addressing", "ipv4_start"),
           f"addresses 10.20.0.{i}-10.20.0.{i} are given to both {dyn} and node group `{g}`", DUP_HINT)
          for g, i in (("ctl", 3), ("acct", 4), ("mgmt", 2), ("k8sctl", 6))]]  # the service hosts; mgmt01 is the
    # provisioning server itself (boot-server), so the server's address is reported once, as mgmt's


def test_a_reversed_dynamic_range_is_not_ordered(lab, matrix, tmp_path):
    lab["network"]["provisioning"]["dynamic_range"] = {"start": "10.20.0.250", "end": "10.20.0.249"}
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == _dynamic_outside("10.20.0.250", "10.20.0.249")


def test_a_dynamic_range_on_the_network_or_broadcast_address_is_outside(lab, matrix, tmp_path):
    del lab["network"]["provisioning"]["gateway"]  # the lab's gateway is 10.20.0.1, the edge tested here
    lab["network"]["provisioning"]["dynamic_range"] = {"start": "10.20.0.200", "end": "10.20.0.255"}
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == _dynamic_outside("10.20.0.200", "10.20.0.255")
    lab["network"]["provisioning"]["dynamic_range"] = {"start": "10.20.0.0", "end": "10.20.0.1"}
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == _dynamic_outside("10.20.0.0", "10.20.0.1")


def test_without_a_dynamic_range_its_addresses_are_free(lab, matrix, tmp_path):
    del lab["network"]["provisioning"]["dynamic_range"]
    lab["nodes"]["secure"]["addressing"]["ipv4_start"] = "10.20.0.220"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == []


# ---- addressing: the overlap sweep


def test_ranges_that_touch_overlap_and_ranges_side_by_side_do_not(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["ipv4_start"] = "10.20.0.14"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [
        ("ip-duplicate", E, ("nodes", "infer", "addressing", "ipv4_start"),
         "addresses 10.20.0.14-10.20.0.14 are given to both node group `train` and node group `infer`", DUP_HINT)]
    lab["nodes"]["infer"]["addressing"]["ipv4_start"] = "10.20.0.15"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == []


def test_a_range_inside_another_is_named_to_its_own_end_and_the_outer_range_still_reaches(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["ipv4_start"] = "10.20.0.11"   # .11-.12, inside train's .11-.14
    lab["nodes"]["secure"]["addressing"]["ipv4_start"] = "10.20.0.13"  # .13-.14: only train reaches it
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [
        ("ip-duplicate", E, ("nodes", "infer", "addressing", "ipv4_start"),
         "addresses 10.20.0.11-10.20.0.12 are given to both node group `train` and node group `infer`", DUP_HINT),
        ("ip-duplicate", E, ("nodes", "secure", "addressing", "ipv4_start"),
         "addresses 10.20.0.13-10.20.0.14 are given to both node group `train` and node group `secure`", DUP_HINT)]


def test_a_range_ending_where_the_reaching_one_ends_does_not_take_over(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["ipv4_start"] = "10.20.0.13"   # .13-.14, ends with train
    lab["nodes"]["secure"]["addressing"]["ipv4_start"] = "10.20.0.14"  # .14-.15
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [
        ("ip-duplicate", E, ("nodes", "infer", "addressing", "ipv4_start"),
         "addresses 10.20.0.13-10.20.0.14 are given to both node group `train` and node group `infer`", DUP_HINT),
        ("ip-duplicate", E, ("nodes", "secure", "addressing", "ipv4_start"),
         "addresses 10.20.0.14-10.20.0.14 are given to both node group `train` and node group `secure`", DUP_HINT)]


def test_a_range_reaching_further_takes_over(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["ipv4_start"] = "10.20.0.14"   # .14-.15, past train's end
    lab["nodes"]["secure"]["addressing"]["ipv4_start"] = "10.20.0.15"  # .15-.16: infer reaches it
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [
        ("ip-duplicate", E, ("nodes", "infer", "addressing", "ipv4_start"),
         "addresses 10.20.0.14-10.20.0.14 are given to both node group `train` and node group `infer`", DUP_HINT),
        ("ip-duplicate", E, ("nodes", "secure", "addressing", "ipv4_start"),
         "addresses 10.20.0.15-10.20.0.15 are given to both node group `infer` and node group `secure`", DUP_HINT)]


def test_the_server_inside_a_group_is_named_at_the_server(lab, matrix, tmp_path):
    lab["network"]["provisioning"]["server"] = "10.20.0.12"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [
        ("ip-duplicate", E, ("network", "provisioning", "server"),
         "addresses 10.20.0.12-10.20.0.12 are given to both node group `train` and the provisioning server",
         DUP_HINT)]


# ---- MACs from a list


def test_more_macs_than_hosts(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["mac"]["macs"].append("52:54:00:20:00:33")
    assert _found(run(lab, matrix, tmp_path), *MAC_CODES) == [
        ("mac-count", E, ("nodes", "infer", "addressing", "mac", "macs"), "3 MAC(s) listed for 2 host(s) in `infer`",
         "list exactly one MAC per host, in hostlist order")]


def test_one_mac_duplicate_finding_per_group(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["mac"]["macs"] = ["52:54:00:20:00:11", "52:54:00:20:00:12"]
    lab["nodes"]["train"]["addressing"]["mac"]["macs"] = ["52:54:00:20:00:11", "52:54:00:20:00:11",
                                                          "52:54:00:20:00:11", "52:54:00:20:00:14"]
    assert _found(run(lab, matrix, tmp_path), *MAC_CODES) == [
        ("mac-duplicate", E, ("nodes", "train", "addressing", "mac"),
         "MAC 52:54:00:20:00:11 appears twice in `train`", MAC_HINT),
        ("mac-duplicate", E, ("nodes", "infer", "addressing", "mac"),
         "MAC 52:54:00:20:00:11 is used in both `train` and `infer`", MAC_HINT)]


def test_macs_after_a_groups_first_duplicate_are_still_checked_against_later_groups(lab, matrix, tmp_path):
    # train's 4th MAC comes after its own duplicate; infer reusing it is a clash of its own (it was
    # missed while the check stopped recording a group's MACs at its first duplicate)
    lab["nodes"]["train"]["addressing"]["mac"]["macs"] = ["52:54:00:20:00:11", "52:54:00:20:00:11",
                                                          "52:54:00:20:00:13", "52:54:00:20:00:14"]
    lab["nodes"]["infer"]["addressing"]["mac"]["macs"] = ["52:54:00:20:00:14", "52:54:00:20:00:22"]
    assert _found(run(lab, matrix, tmp_path), *MAC_CODES) == [
        ("mac-duplicate", E, ("nodes", "train", "addressing", "mac"),
         "MAC 52:54:00:20:00:11 appears twice in `train`", MAC_HINT),
        ("mac-duplicate", E, ("nodes", "infer", "addressing", "mac"),
         "MAC 52:54:00:20:00:14 is used in both `train` and `infer`", MAC_HINT)]


def test_a_discovering_group_does_not_stop_the_mac_check(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["mac"] = {"source": "discover"}
    lab["nodes"]["secure"]["addressing"]["mac"]["macs"] = ["52:54:00:20:00:41", "52:54:00:20:00:14"]
    assert _found(run(lab, matrix, tmp_path), *MAC_CODES) == [
        ("mac-duplicate", E, ("nodes", "secure", "addressing", "mac"),
         "MAC 52:54:00:20:00:14 is used in both `train` and `secure`", MAC_HINT)]


# ---- MACs from an inventory


def _inventory(lab, tmp_path, text, name="macs.csv"):
    (tmp_path / name).write_text(text, encoding="utf-8")
    lab["nodes"]["infer"]["addressing"]["mac"] = {"source": "inventory", "file": name}
    return tmp_path / name


def test_a_complete_inventory_is_fine(lab, matrix, tmp_path):
    _inventory(lab, tmp_path, "host,mac\nkgpu02,52:54:00:20:00:32\nkgpu01,52:54:00:20:00:31\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == []


def test_three_inventory_problems_are_all_named_with_the_missing_hosts(lab, matrix, tmp_path):
    _inventory(lab, tmp_path, "a[1,52:54:00:20:00:31\nb[2,52:54:00:20:00:32\nc[3,52:54:00:20:00:33\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == [
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "macs.csv:1: 'a[1' is not a host name; macs.csv:2: 'b[2' is not a host name; macs.csv:3: 'c[3' is not a "
         "host name", INV_HINT),
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "MAC inventory macs.csv has no entry for 2 host(s): kgpu[01-02]", MISSING_HINT)]


def test_more_than_three_inventory_problems_are_counted(lab, matrix, tmp_path):
    _inventory(lab, tmp_path, "a[1,x\nb[2,x\nc[3,x\nd[4,x\ne[5,x\nkgpu01,x\nkgpu02,52:54:00:20:00:32\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == [
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "macs.csv:1: 'a[1' is not a host name; macs.csv:2: 'b[2' is not a host name; macs.csv:3: 'c[3' is not a "
         "host name (and 3 more)", INV_HINT)]  # kgpu01's line is refused (one of the 3 more), not missing
    _inventory(lab, tmp_path, "a[1,x\nb[2,x\nc[3,x\nd[4,x\nkgpu01,52:54:00:20:00:31\nkgpu02,52:54:00:20:00:32\n",
               name="four.csv")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == [
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "four.csv:1: 'a[1' is not a host name; four.csv:2: 'b[2' is not a host name; four.csv:3: 'c[3' is not a "
         "host name (and 1 more)", INV_HINT)]


def test_a_broken_inventory_is_checked_in_full_and_later_groups_are_still_checked(lab, matrix, tmp_path):
    _inventory(lab, tmp_path, "kgpu01,52:54:00:20:00:11\nkgpu[02,52:54:00:20:00:11\n")
    lab["nodes"]["secure"]["addressing"]["mac"]["macs"] = ["52:54:00:20:00:41", "52:54:00:20:00:12"]
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == [
        ("mac-duplicate", E, ("nodes", "infer", "addressing", "mac"),
         "MAC 52:54:00:20:00:11 is used in both `train` and `infer`", MAC_HINT),
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "macs.csv:2: 'kgpu[02' is not a host name", INV_HINT),
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "MAC inventory macs.csv has no entry for 1 host(s): kgpu02", MISSING_HINT),
        ("mac-duplicate", E, ("nodes", "secure", "addressing", "mac"),
         "MAC 52:54:00:20:00:12 is used in both `train` and `secure`", MAC_HINT)]


def test_an_inventory_shared_by_groups_is_reported_once_relative_to_the_definition(lab, matrix, tmp_path):
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "all.csv").write_text(
        "kgpu01,52:54:00:20:00:31\nkgpu02,52:54:00:20:00:32\nsgpu01,ff:ff:ff:ff:ff:ff\nbad host,x\n")
    for group in ("infer", "secure"):
        lab["nodes"][group]["addressing"]["mac"] = {"source": "inventory", "file": "inv/all.csv"}
    found = _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES)
    assert found == [
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "inv/all.csv:3: ff:ff:ff:ff:ff:ff is the broadcast address, which no NIC has: write the MAC of sgpu01's "
         "provisioning NIC; inv/all.csv:4: 'bad host' is not a host name", INV_HINT),
        ("mac-inventory", E, ("nodes", "secure", "addressing", "mac", "file"),
         "MAC inventory inv/all.csv has no entry for 1 host(s): sgpu02", MISSING_HINT)]
    assert str(tmp_path) not in repr(found)


def test_hosts_missing_from_an_inventory_are_folded(lab, matrix, tmp_path):
    _inventory(lab, tmp_path, "host,mac\ngpu001,52:54:00:20:00:99\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == [
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "MAC inventory macs.csv has no entry for 2 host(s): kgpu[01-02]", MISSING_HINT)]


def test_the_macs_an_inventory_has_are_checked_when_some_are_missing(lab, matrix, tmp_path):
    _inventory(lab, tmp_path, "kgpu02,52:54:00:20:00:13\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == [
        ("mac-duplicate", E, ("nodes", "infer", "addressing", "mac"),
         "MAC 52:54:00:20:00:13 is used in both `train` and `infer`", MAC_HINT),
        ("mac-inventory", E, ("nodes", "infer", "addressing", "mac", "file"),
         "MAC inventory macs.csv has no entry for 1 host(s): kgpu01", MISSING_HINT)]


def test_an_inventory_giving_two_hosts_one_mac(lab, matrix, tmp_path):
    _inventory(lab, tmp_path, "kgpu01,52:54:00:20:00:77\nkgpu02,52:54:00:20:00:77\n")
    assert _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES) == [
        ("mac-duplicate", E, ("nodes", "infer", "addressing", "mac"),
         "MAC 52:54:00:20:00:77 appears twice in `infer`", MAC_HINT)]


# ---- topology: switch trees


def _switches(lab):
    return lab["network"]["fabrics"]["ib0"]["topology"]["switches"]


SW = ("network", "fabrics", "ib0", "topology", "switches")


def test_every_undefined_child_switch_is_named(lab, matrix, tmp_path):
    _switches(lab)["spine01"]["switches"] = "leaf[01-04]"
    hint = "define every child switch in the same fabric"
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == [
        ("ref-switch", E, SW + ("spine01", "switches"), "switch `spine01` lists child `leaf03`, which is not defined",
         hint),
        ("ref-switch", E, SW + ("spine01", "switches"), "switch `spine01` lists child `leaf04`, which is not defined",
         hint)]


def test_a_switch_with_nodes_and_switches_is_not_empty(lab, matrix, tmp_path):
    _switches(lab)["spine01"]["nodes"] = "kgpu01"
    _switches(lab)["leaf02"]["nodes"] = "gpu[003-004],kgpu02,sgpu02"
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == []


def test_unknown_hosts_on_a_switch_are_counted(lab, matrix, tmp_path):
    _switches(lab)["leaf01"]["nodes"] = "gpu[001-002,008-009],sgpu01"
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == [
        ("topology-unknown-host", E, SW + ("leaf01", "nodes"),
         "switch `leaf01` lists 2 host(s) in no node group: gpu[008-009]", UNKNOWN_HINT)]


def test_hosts_already_attached_are_named_per_switch_they_hang_off(lab, matrix, tmp_path):
    _switches(lab)["leaf03"] = {"nodes": "gpu[001,003],sgpu01"}
    _switches(lab)["leaf04"] = {"nodes": "gpu001"}
    _switches(lab)["spine01"]["switches"] = "leaf[01-04]"
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == [
        ("topology-node-twice", E, SW + ("leaf03", "nodes"),
         "switch `leaf03` lists gpu001,sgpu01, already attached to switch `leaf01` in this fabric",
         "a node hangs off one leaf switch or block per fabric: list gpu001,sgpu01 under switch `leaf01` or "
         "switch `leaf03`" + TREE_HINT_TAIL),
        ("topology-node-twice", E, SW + ("leaf03", "nodes"),
         "switch `leaf03` lists gpu003, already attached to switch `leaf02` in this fabric",
         "a node hangs off one leaf switch or block per fabric: list gpu003 under switch `leaf02` or "
         "switch `leaf03`" + TREE_HINT_TAIL),
        ("topology-node-twice", E, SW + ("leaf04", "nodes"),
         "switch `leaf04` lists gpu001, already attached to switch `leaf01` in this fabric",
         "a node hangs off one leaf switch or block per fabric: list gpu001 under switch `leaf01` or "
         "switch `leaf04`" + TREE_HINT_TAIL)]


def test_a_node_on_two_fabrics_is_attached_once_in_each(lab, matrix, tmp_path):
    lab["network"]["fabrics"]["ib1"] = {"kind": "infiniband", "topology": {
        "kind": "tree", "switches": {"leaf11": {"nodes": "gpu[001-004],sgpu[01-02]"}}}}
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == []


def test_a_cycle_of_three_switches_is_named_from_the_one_defined_last(lab, matrix, tmp_path):
    _switches(lab)["spine01"]["switches"] = "leaf[01-02],spine03"
    _switches(lab)["spine02"] = {"switches": "spine01"}
    _switches(lab)["spine03"] = {"switches": "spine02"}
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == [
        ("switch-cycle", E, SW + ("spine03", "switches"),
         "switches `spine03` -> `spine02` -> `spine01` -> `spine03` are each other's children, so the tree has no top",
         "list child switches only below their parent: remove the child that leads back up")]


# ---- topology: rail-optimised scalable units


SU = ("network", "fabrics", "ib0", "topology", "scalable_units")


def test_a_scalable_unit_listing_a_host_of_another_unit(rail_lab, matrix, tmp_path):
    rail_lab["network"]["fabrics"]["ib0"]["topology"]["scalable_units"]["su2"]["nodes"] += ",gpu001"
    assert _found(run(rail_lab, matrix, tmp_path), *TOPO_CODES) == [
        ("topology-node-twice", E, SU + ("su2", "nodes"),
         "scalable unit `su2` lists gpu001, already attached to scalable unit `su1` in this fabric",
         "a node is in one scalable unit: list gpu001 under scalable unit `su1` or scalable unit `su2`, not both "
         "(its rails are the unit's rail leaves, not more units)")]


def test_a_scalable_unit_listing_an_unknown_host(rail_lab, matrix, tmp_path):
    rail_lab["network"]["fabrics"]["ib0"]["topology"]["scalable_units"]["su2"]["nodes"] += ",gpu009"
    assert _found(run(rail_lab, matrix, tmp_path), *TOPO_CODES) == [
        ("topology-unknown-host", E, SU + ("su2", "nodes"),
         "scalable unit `su2` lists 1 host(s) in no node group: gpu009", UNKNOWN_HINT)]


# ---- topology: blocks


BL = ("network", "fabrics", "ib0", "topology", "blocks")


def _as_block(lab, b2):
    lab["network"]["fabrics"]["ib0"]["topology"] = {
        "kind": "block", "blocks": {"b1": {"nodes": "gpu[001-002],sgpu01"}, "b2": {"nodes": b2}}}


def test_blocks_are_checked_like_leaf_switches(lab, matrix, tmp_path):
    _as_block(lab, "gpu[002-004],kgpu[01-02],sgpu02,xgpu1")
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == [
        ("topology-node-twice", E, BL + ("b2", "nodes"),
         "block `b2` lists gpu002, already attached to block `b1` in this fabric",
         "a node hangs off one leaf switch or block per fabric: list gpu002 under block `b1` or block `b2`"
         + TREE_HINT_TAIL),
        ("topology-unknown-host", E, BL + ("b2", "nodes"),
         "block `b2` lists 1 host(s) in no node group: xgpu1", UNKNOWN_HINT)]
    _as_block(lab, "gpu[003-004],kgpu[01-02],sgpu02")
    assert _found(run(lab, matrix, tmp_path), *TOPO_CODES) == []


# ---- addresses that cannot belong to a host (issue 30)

GW_HINT = "give the router an address that no node, boot server or DHCP range has"


@pytest.mark.parametrize("mac, why", [
    ("ff:ff:ff:ff:ff:ff", "is the broadcast address"),
    ("01:00:5e:00:00:01", "is a multicast address (the first octet 01"),
    ("33:33:00:00:00:01", "is a multicast address (the first octet 33"),
    ("00:00:00:00:00:00", "is all zeros"),
])
def test_a_mac_no_nic_has_is_refused_in_a_list_and_in_an_inventory(lab, matrix, tmp_path, mac, why):
    lab["nodes"]["infer"]["addressing"]["mac"]["macs"] = ["52:54:00:20:00:31", mac]
    (f,) = [f for f in run(lab, matrix, tmp_path).findings if f.severity is E]
    assert (f.code, f.path) == ("invalid-value", ("nodes", "infer", "addressing", "mac", "macs", 1))
    assert why in f.message
    _inventory(lab, tmp_path, f"kgpu01,52:54:00:20:00:31\nkgpu02,{mac}\n")
    (f,) = _found(run(lab, matrix, tmp_path, base_dir=tmp_path), *MAC_CODES)
    assert f[0] == "mac-inventory" and f"macs.csv:2: {mac} {why}" in f[3] and "kgpu02" in f[3]


def test_a_mac_with_the_local_bit_is_a_host_mac(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["addressing"]["mac"]["macs"] = ["02:00:00:00:00:31", "fe:54:00:20:00:32"]
    assert run(lab, matrix, tmp_path).ok


def test_a_gateway_on_a_node_or_the_dynamic_range_is_refused(lab, matrix, tmp_path):
    prov = lab["network"]["provisioning"]
    for gateway, owner in [("10.20.0.3", "node group `ctl`"), ("10.20.0.12", "node group `train`"),
                           ("10.20.0.220", "the dynamic DHCP range")]:
        prov["gateway"] = gateway
        assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == [
            ("ip-duplicate", E, ("network", "provisioning", "gateway"),
             f"gateway {gateway} is also an address of {owner}", GW_HINT)], gateway
    prov["gateway"] = prov["server"]  # the boot server routing for its subnet
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == []
    prov["gateway"] = "10.20.0.1"
    assert _found(run(lab, matrix, tmp_path), *ADDR_CODES) == []


def test_a_management_gateway_on_a_bmc_address_is_refused(lab, matrix, tmp_path):
    lab["hardware"]["mgmt-server"]["nics"].append({"name": "bmc", "kind": "ethernet", "speed_gbps": 1,
                                                    "role": "management"})
    lab["network"]["management"] = {"subnet": "10.30.0.0/24", "gateway": "10.30.0.11"}
    lab["nodes"]["ctl"]["attachments"] = {"management": {"network": "management", "nic": "bmc",
                                                         "ipv4_start": "10.30.0.11"}}
    assert _found(run(lab, matrix, tmp_path), "ip-duplicate") == [
        ("ip-duplicate", E, ("network", "management", "gateway"),
         "gateway 10.30.0.11 is also an address of node group `ctl`'s BMCs", GW_HINT)]
    lab["network"]["management"]["gateway"] = "10.30.0.1"
    assert _found(run(lab, matrix, tmp_path), "ip-duplicate") == []
