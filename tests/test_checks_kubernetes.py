"""The Kubernetes checks (validate/checks_kubernetes.py) finding by finding: code, path, message and
hint written out by hand, for the branches the bad-input corpus does not take (Kueue flavors against
capacity, cohort cycles, queues and tenants, GPU Operator driver pools, RDMA and MOFED). The mutants
of these checks that the corpus and test_checks.py let through."""

from __future__ import annotations

import copy

from clusterdef.errors import Severity
from clusterdef.matrix.load import load_matrix
from conftest import MATRICES
from lab_variants import driver_pool_canary, without_governed_data
from test_checks import run

POOLS = ("kubernetes", "gpu_operator", "driver_pools")
FLAVORS = ("kubernetes", "kueue", "flavors")
QUEUES = ("kubernetes", "kueue", "queues")
COHORTS = ("kubernetes", "kueue", "cohorts")
NETWORK_OPERATOR = ("kubernetes", "network_operator")

FLAVOR_TWICE_HINT = "a node carries one flavor label; put each node group in one flavor"
OVER_CAPACITY_HINT = "nominal quota is guaranteed capacity: lower nominal_gpus or add nodes to the flavor"
TWO_TENANTS_HINT = "a ClusterQueue's quota belongs to one tenant; give each tenant its own queue"
NO_TENANT_HINT = "add it to a tenant's `kubernetes.queues`, or remove it"
SET_STATUS_HINT = "use a validated set, or a candidate with `cluster.allow_candidate: true` (labs, canaries)"
NOT_KUBERNETES_HINT = "the GPU Operator only manages drivers on Kubernetes-owned GPU nodes"
POOL_TWICE_HINT = "a node runs one driver: put each group in one pool"
OPERATOR_OFF_HINT = "set `kubernetes.network_operator.enabled: true`"
MOFED_HINT = ("set `kubernetes.network_operator.ofed_driver: {version: ...}` (the doca-driver container), "
              "or use a set that pins doca: images of hardware with ConnectX/BlueField HCAs carry its "
              "DOCA-OFED (host MOFED)")

CODES = ("flavor-group-twice", "queue-over-flavor-capacity", "cohort-parent-self", "cohort-parent-cycle",
         "queue-two-tenants", "queue-no-tenant", "driver-pool-reserved-name", "ref-driver-pool-set",
         "driver-pool-set-status", "driver-pool-not-kubernetes", "driver-pool-group-twice",
         "rdma-without-network-operator", "rdma-no-mofed")


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def _split_infer(lab: dict) -> dict:
    """The lab with its Kubernetes group `infer` split in two: `infer` (kgpu01) and `infer2`
    (kgpu02), both in flavor h100, so a flavor has two groups of 8 GPUs each."""
    d = copy.deepcopy(lab)
    d["nodes"]["infer"]["hosts"] = "kgpu01"
    guids = d["nodes"]["infer"]["addressing"]["mac"]["port_guids"]
    d["nodes"]["infer"]["addressing"]["mac"].update(macs=["52:54:00:20:00:31"], port_guids=guids[:1])
    d["nodes"]["infer2"] = copy.deepcopy(d["nodes"]["infer"])
    d["nodes"]["infer2"]["hosts"] = "kgpu02"
    d["nodes"]["infer2"]["addressing"] = {"ipv4_start": "10.20.0.32",
                                          "mac": {"source": "list", "macs": ["52:54:00:20:00:32"],
                                                  "port_guids": guids[1:]}}
    d["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "infer2"]
    d["filesystems"]["scratch"]["node_groups"].append("infer2")
    return d


def _eth_hardware(d: dict) -> None:
    """Hardware `hgx-eth`: the lab's GPU box without InfiniBand HCAs (so no DOCA-OFED on its images)."""
    hw = copy.deepcopy(d["hardware"]["hgx-h100"])
    hw["nics"] = [n for n in hw["nics"] if n["kind"] == "ethernet"]
    hw["firmware"] = [f for f in hw["firmware"] if f != "cx7"]
    d["hardware"]["hgx-eth"] = hw


def _image(d: dict, name: str) -> None:
    d["images"][name] = copy.deepcopy(d["images"]["gpu-node"])
    d["images"][name]["packages"] = ["openssh-server", "chrony"]
    d["images"][name].pop("repositories")


def _no_sets(tmp_path):
    """A matrix without any validated set (a site folder cannot take the bundled sets away: built here)."""
    import dataclasses

    return dataclasses.replace(load_matrix(MATRICES)[0], sets={}, set_files={}, origins={})


# ---- no kubernetes section

def test_a_definition_without_kubernetes_has_none_of_its_findings(lab, matrix, tmp_path):
    without_governed_data(lab)  # datasets and approvals name tenants' namespaces
    del lab["kubernetes"]
    del lab["nodes"]["k8sctl"]  # a Kubernetes control-plane node needs the section (service-needs-kubernetes)
    for t in lab["tenants"].values():
        t.pop("kubernetes", None)
    result = run(lab, matrix, tmp_path)
    assert result.findings == []


def test_the_split_lab_and_the_canary_lab_are_clean(lab, matrix, tmp_path):
    assert run(_split_infer(lab), matrix, tmp_path).findings == []
    assert run(driver_pool_canary(lab), matrix, tmp_path).findings == []


# ---- kubernetes-kueue-capacity

def test_a_group_in_several_flavors_names_the_flavor_that_has_it_first(lab, matrix, tmp_path):
    d = _split_infer(lab)
    d["kubernetes"]["kueue"]["flavors"] = {"h100": {"node_groups": ["infer"]},
                                           "spare": {"node_groups": ["infer2", "infer"]},
                                           "third": {"node_groups": ["infer"]}}
    assert _found(run(d, matrix, tmp_path), "flavor-group-twice") == [
        (Severity.ERROR, FLAVORS + ("spare", "node_groups", 1),
         "node group `infer` is in flavors `h100` and `spare`", FLAVOR_TWICE_HINT),
        (Severity.ERROR, FLAVORS + ("third", "node_groups", 0),
         "node group `infer` is in flavors `h100` and `third`", FLAVOR_TWICE_HINT)]


def test_a_group_twice_in_one_flavor(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "infer"]
    assert _found(run(lab, matrix, tmp_path), "flavor-group-twice") == [
        (Severity.ERROR, FLAVORS + ("h100", "node_groups", 1),
         "node group `infer` is in flavors `h100` and `h100`", FLAVOR_TWICE_HINT)]


def test_queues_at_and_over_a_flavors_capacity(lab, matrix, tmp_path):
    d = _split_infer(lab)
    queues = d["kubernetes"]["kueue"]["queues"]
    queues["extra"] = {"flavor": "h100", "nominal_gpus": 0, "cohort": "lab", "workload_class": "inference"}
    # 8 + 8 + 0 nominal GPUs on two groups of 8: at capacity
    assert _found(run(d, matrix, tmp_path), "queue-over-flavor-capacity") == []
    queues["extra"]["nominal_gpus"] = 1
    assert _found(run(d, matrix, tmp_path), "queue-over-flavor-capacity") == [
        (Severity.ERROR, QUEUES + ("extra", "nominal_gpus"),
         "queues on flavor `h100` hold 17 nominal GPUs but its node groups (infer, infer2) have 16",
         OVER_CAPACITY_HINT)]
    # the finding is on the last queue of the flavor, whichever is over
    d["kubernetes"]["kueue"]["queues"] = {"extra": queues["extra"], "vision-serve": queues["vision-serve"],
                                          "nlp-serve": queues["nlp-serve"]}
    assert [f[1] for f in _found(run(d, matrix, tmp_path), "queue-over-flavor-capacity")] == [
        QUEUES + ("nlp-serve", "nominal_gpus")]


def test_each_flavor_counts_its_own_queues_and_groups(lab, matrix, tmp_path):
    d = _split_infer(lab)
    kq = d["kubernetes"]["kueue"]
    kq["flavors"] = {"h100": {"node_groups": ["infer"]}, "h100b": {"node_groups": ["infer2"]}}
    kq["queues"]["nlp-serve"]["flavor"] = "h100b"
    assert _found(run(d, matrix, tmp_path), "queue-over-flavor-capacity") == []
    kq["queues"]["nlp-serve"]["nominal_gpus"] = 9
    assert _found(run(d, matrix, tmp_path), "queue-over-flavor-capacity") == [
        (Severity.ERROR, QUEUES + ("nlp-serve", "nominal_gpus"),
         "queues on flavor `h100b` hold 9 nominal GPUs but its node groups (infer2) have 8", OVER_CAPACITY_HINT)]
    kq["queues"]["nlp-serve"]["nominal_gpus"] = 8
    kq["queues"]["vision-serve"]["nominal_gpus"] = 9
    assert _found(run(d, matrix, tmp_path), "queue-over-flavor-capacity") == [
        (Severity.ERROR, QUEUES + ("vision-serve", "nominal_gpus"),
         "queues on flavor `h100` hold 9 nominal GPUs but its node groups (infer) have 8", OVER_CAPACITY_HINT)]


def test_a_flavor_with_an_unknown_group_is_left_to_the_reference_checks(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["queues"]["vision-serve"]["nominal_gpus"] = 16  # over the 16 GPUs of infer
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "ghost"]
    result = run(lab, matrix, tmp_path)
    assert _found(result, "queue-over-flavor-capacity") == []
    assert [f.code for f in result.findings if f.path[:3] == FLAVORS] == ["ref-node-group"]
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["ghost", "infer"]
    assert _found(run(lab, matrix, tmp_path), "queue-over-flavor-capacity") == []


def test_a_flavor_whose_group_has_unknown_hardware_is_left_to_the_reference_checks(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["hardware"] = "hgx-h900"
    result = run(lab, matrix, tmp_path)
    assert "ref-hardware" in {f.code for f in result.findings}
    assert _found(result, "queue-over-flavor-capacity") == []


# ---- kubernetes-cohort-tree

def test_a_cohort_cycle_of_three_is_reported_once_at_its_last_defined_cohort(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["cohorts"] = {"lab": {"parent": "b"}, "root": {}, "b": {"parent": "c"},
                                             "c": {"parent": "lab"}, "leaf": {"parent": "root"}}
    result = run(lab, matrix, tmp_path)
    assert _found(result, "cohort-parent-self") == []
    assert _found(result, "cohort-parent-cycle") == [(
        Severity.ERROR, COHORTS + ("c", "parent"),
        "cohorts `c` -> `lab` -> `b` -> `c` form a parent cycle, so the cohort hierarchy has no root and the "
        "quota its queues may borrow is undefined",
        "break the cycle: drop one of these cohorts' `parent`, or point it at a cohort outside the cycle")]


def test_a_cohort_tree_with_parents_is_clean(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["cohorts"] = {"org": {}, "lab": {"parent": "org"}, "sub": {"parent": "lab"}}
    result = run(lab, matrix, tmp_path)
    assert [f for f in result.findings if f.code in CODES] == []


def test_each_self_parented_cohort_is_named(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["cohorts"] = {"org": {"parent": "org"}, "lab": {"parent": "org"},
                                             "sub": {"parent": "sub"}}
    hint = "set `parent` to another cohort, or drop it to make the cohort a root"
    assert _found(run(lab, matrix, tmp_path), "cohort-parent-self") == [
        (Severity.ERROR, COHORTS + ("org", "parent"), "cohort `org` names itself as its parent", hint),
        (Severity.ERROR, COHORTS + ("sub", "parent"), "cohort `sub` names itself as its parent", hint)]


# ---- kubernetes-queue-tenants

def test_a_queue_listed_by_three_tenants_names_its_first_owner(lab, matrix, tmp_path):
    lab["tenants"]["nlp"]["kubernetes"]["queues"] = ["nlp-serve", "vision-serve"]
    lab["tenants"]["secure"]["kubernetes"] = {"namespace": "secure", "queues": ["vision-serve"]}
    result = run(lab, matrix, tmp_path)
    assert _found(result, "queue-two-tenants") == [
        (Severity.ERROR, ("tenants", "nlp", "kubernetes", "queues", 1),
         "queue `vision-serve` is listed by tenants `vision` and `nlp`", TWO_TENANTS_HINT),
        (Severity.ERROR, ("tenants", "secure", "kubernetes", "queues", 0),
         "queue `vision-serve` is listed by tenants `vision` and `secure`", TWO_TENANTS_HINT)]
    assert _found(result, "queue-no-tenant") == []


def test_a_tenant_listing_its_own_queue_twice_is_not_two_tenants(lab, matrix, tmp_path):
    lab["tenants"]["vision"]["kubernetes"]["queues"] = ["vision-serve", "vision-serve"]
    result = run(lab, matrix, tmp_path)
    assert _found(result, "queue-two-tenants") == []
    assert _found(result, "queue-no-tenant") == []


def test_a_tenant_without_kubernetes_does_not_end_the_owners(lab, matrix, tmp_path):
    t = lab["tenants"]
    lab["tenants"] = {"secure": t["secure"], "vision": t["vision"], "nlp": t["nlp"]}
    assert run(lab, matrix, tmp_path).findings == []


def test_queues_no_tenant_lists_are_warned_each(lab, matrix, tmp_path):
    queues = lab["kubernetes"]["kueue"]["queues"]
    queues["spare-a"] = {"flavor": "h100", "nominal_gpus": 0, "cohort": "lab", "workload_class": "inference"}
    queues["spare-b"] = {"flavor": "h100", "nominal_gpus": 0, "cohort": "lab", "workload_class": "inference"}
    assert _found(run(lab, matrix, tmp_path), "queue-no-tenant") == [
        (Severity.WARNING, QUEUES + ("spare-a",),
         "no tenant lists queue `spare-a`, so no namespace can submit to it", NO_TENANT_HINT),
        (Severity.WARNING, QUEUES + ("spare-b",),
         "no tenant lists queue `spare-b`, so no namespace can submit to it", NO_TENANT_HINT)]


# ---- kubernetes-driver-pools

def test_a_pool_named_default(lab, matrix, tmp_path):
    d = driver_pool_canary(lab)
    pools = d["kubernetes"]["gpu_operator"]["driver_pools"]
    pools["default"] = pools.pop("canary")
    result = run(d, matrix, tmp_path)
    assert _found(result, "driver-pool-reserved-name") == [(
        Severity.ERROR, POOLS + ("default",),
        "driver pool `default` is the name of the groups that run the set's driver",
        "give the pool another name (e.g. canary)")]
    assert [f.code for f in result.findings] == ["driver-pool-reserved-name"]


def test_a_pool_on_an_unknown_set_without_any_known_set(lab, tmp_path):
    result = run(driver_pool_canary(lab), _no_sets(tmp_path), tmp_path)
    assert _found(result, "ref-driver-pool-set") == [(
        Severity.ERROR, POOLS + ("canary", "matrix"),
        "driver pool `canary` runs the driver of `2026.11-r595-candidate`, which is not a known set",
        "known sets: none")]
    assert _found(result, "driver-pool-set-status") == []


def test_a_pool_on_a_retired_or_unallowed_candidate_set(lab, matrix, tmp_path):
    d = driver_pool_canary(lab)
    pool = d["kubernetes"]["gpu_operator"]["driver_pools"]["canary"]
    pool["matrix"] = "2025.01-r550"
    retired = [(Severity.ERROR, POOLS + ("canary", "matrix"),
                "driver pool `canary` runs the driver of set `2025.01-r550`, which is retired", SET_STATUS_HINT)]
    # retired is refused even where candidates are allowed
    assert _found(run(d, matrix, tmp_path), "driver-pool-set-status") == retired
    d["cluster"]["allow_candidate"] = False
    assert _found(run(d, matrix, tmp_path), "driver-pool-set-status") == retired
    pool["matrix"] = "2026.11-r595-candidate"
    result = run(d, matrix, tmp_path)
    assert _found(result, "driver-pool-set-status") == [(
        Severity.ERROR, POOLS + ("canary", "matrix"),
        "driver pool `canary` runs the driver of set `2026.11-r595-candidate`, which is candidate", SET_STATUS_HINT)]
    assert _found(result, "ref-driver-pool-set") == []
    pool["matrix"] = "2025.10-r580"
    assert _found(run(d, matrix, tmp_path), "driver-pool-set-status") == []


def test_a_pool_naming_an_unknown_group(lab, matrix, tmp_path):
    d = driver_pool_canary(lab)
    d["kubernetes"]["gpu_operator"]["driver_pools"]["canary"]["node_groups"] = ["canary", "ghost"]
    result = run(d, matrix, tmp_path)
    assert _found(result, "ref-node-group") == [(
        Severity.ERROR, POOLS + ("canary", "node_groups", 1),
        "driver pool `canary` names unknown node group `ghost`", "node groups: train, infer, secure, ctl, acct, mgmt, k8sctl, canary")]
    assert [f.code for f in result.findings] == ["ref-node-group"]


def test_a_pool_naming_a_kubernetes_group_that_has_no_gpus(lab, matrix, tmp_path):
    d = driver_pool_canary(lab)
    d["hardware"]["cpu-box"] = {k: v for k, v in copy.deepcopy(d["hardware"]["hgx-h100"]).items() if k != "gpu"}
    d["nodes"]["canary"]["hardware"] = "cpu-box"
    not_gpu = [(Severity.ERROR, POOLS + ("canary", "node_groups", 0),
                "driver pool `canary` names `canary`, which is not a Kubernetes-owned GPU node group",
                NOT_KUBERNETES_HINT)]
    assert _found(run(d, matrix, tmp_path), "driver-pool-not-kubernetes") == not_gpu
    d["nodes"]["canary"]["hardware"] = "hgx-h900"  # unknown hardware
    result = run(d, matrix, tmp_path)
    assert _found(result, "driver-pool-not-kubernetes") == not_gpu
    assert "ref-hardware" in {f.code for f in result.findings}


def test_a_group_in_several_pools_names_the_pool_that_has_it_first(lab, matrix, tmp_path):
    d = driver_pool_canary(lab)
    d["kubernetes"]["gpu_operator"]["driver_pools"] = {
        "canary": {"node_groups": ["canary"], "matrix": "2026.11-r595-candidate"},
        "canary2": {"node_groups": ["canary"], "matrix": "2026.11-r595-candidate"},
        "canary3": {"node_groups": ["infer", "canary"], "matrix": "2025.10-r580"}}
    result = run(d, matrix, tmp_path)
    assert _found(result, "driver-pool-group-twice") == [
        (Severity.ERROR, POOLS + ("canary2", "node_groups", 0),
         "node group `canary` is in driver pools `canary` and `canary2`", POOL_TWICE_HINT),
        (Severity.ERROR, POOLS + ("canary3", "node_groups", 1),
         "node group `canary` is in driver pools `canary` and `canary3`", POOL_TWICE_HINT)]
    assert {f.code for f in result.findings} == {"driver-pool-group-twice"}


def test_a_group_twice_in_one_pool(lab, matrix, tmp_path):
    d = driver_pool_canary(lab)
    d["kubernetes"]["gpu_operator"]["driver_pools"]["canary"]["node_groups"] = ["canary", "canary"]
    assert _found(run(d, matrix, tmp_path), "driver-pool-group-twice") == [
        (Severity.ERROR, POOLS + ("canary", "node_groups", 1),
         "node group `canary` is in driver pools `canary` and `canary`", POOL_TWICE_HINT)]


def test_groups_refused_for_a_pool_are_not_counted_as_in_it(lab, matrix, tmp_path):
    d = driver_pool_canary(lab)
    d["kubernetes"]["gpu_operator"]["driver_pools"] = {
        "canary": {"node_groups": ["train", "ghost"], "matrix": "2026.11-r595-candidate"},
        "canary2": {"node_groups": ["train", "ghost", "canary"], "matrix": "2026.11-r595-candidate"}}
    result = run(d, matrix, tmp_path)
    assert _found(result, "driver-pool-group-twice") == []
    assert [f.path for f in result.findings if f.code == "driver-pool-not-kubernetes"] == [
        POOLS + ("canary", "node_groups", 0), POOLS + ("canary2", "node_groups", 0)]
    assert [f.path for f in result.findings if f.code == "ref-node-group"] == [
        POOLS + ("canary", "node_groups", 1), POOLS + ("canary2", "node_groups", 1)]


def test_every_finding_of_one_pool(lab, tmp_path):
    d = driver_pool_canary(lab)
    d["kubernetes"]["gpu_operator"]["driver_pools"] = {
        "default": {"node_groups": ["ghost"], "matrix": "2026.11-r595-candidate"}}
    result = run(d, _no_sets(tmp_path), tmp_path)
    assert sorted((f.code, f.path) for f in result.findings if f.path[:3] == POOLS) == [
        ("driver-pool-reserved-name", POOLS + ("default",)),
        ("ref-driver-pool-set", POOLS + ("default", "matrix")),
        ("ref-node-group", POOLS + ("default", "node_groups", 0))]


# ---- kubernetes-rdma

def test_rdma_groups_with_the_network_operator_off(lab, tmp_path):
    d = _split_infer(lab)
    d["kubernetes"]["network_operator"]["enabled"] = False
    d["cluster"]["matrix"] = "2025.01-r550"  # a set without doca: no MOFED either, but the operator is off
    result = run(d, load_matrix(MATRICES)[0], tmp_path)
    assert _found(result, "rdma-without-network-operator") == [(
        Severity.WARNING, NETWORK_OPERATOR,
        "Kubernetes node groups infer, infer2 sit on an RDMA fabric but the Network Operator is off, so pods "
        "get no RDMA devices", OPERATOR_OFF_HINT)]
    assert _found(result, "rdma-no-mofed") == []


def test_only_kubernetes_groups_placed_on_an_rdma_fabric_count(lab, matrix, tmp_path):
    d = _split_infer(lab)
    d["kubernetes"]["network_operator"]["enabled"] = False
    d["nodes"]["infer"].pop("placement")
    assert _found(run(d, matrix, tmp_path), "rdma-without-network-operator") == [(
        Severity.WARNING, NETWORK_OPERATOR,
        "Kubernetes node groups infer2 sit on an RDMA fabric but the Network Operator is off, so pods "
        "get no RDMA devices", OPERATOR_OFF_HINT)]
    d["nodes"]["infer2"]["placement"]["fabric"] = "ib9"  # unknown: the reference checks report it
    result = run(d, matrix, tmp_path)
    assert _found(result, "rdma-without-network-operator") == []
    assert "ref-fabric" in {f.code for f in result.findings}


def test_which_fabrics_are_rdma(lab, matrix, tmp_path):
    lab["kubernetes"]["network_operator"]["enabled"] = False
    warning = [(Severity.WARNING, NETWORK_OPERATOR,
                "Kubernetes node groups infer sit on an RDMA fabric but the Network Operator is off, so pods "
                "get no RDMA devices", OPERATOR_OFF_HINT)]
    assert _found(run(lab, matrix, tmp_path), "rdma-without-network-operator") == warning
    fabric = lab["network"]["fabrics"]["ib0"]
    fabric["rdma"] = False
    assert _found(run(lab, matrix, tmp_path), "rdma-without-network-operator") == []
    fabric["rdma"] = True
    fabric["kind"] = "roce"
    assert _found(run(lab, matrix, tmp_path), "rdma-without-network-operator") == warning
    fabric["kind"] = "ethernet"
    assert _found(run(lab, matrix, tmp_path), "rdma-without-network-operator") == []


def test_no_mofed_where_no_set_or_a_set_without_doca(lab, matrix, tmp_path):
    d = _split_infer(lab)
    d["cluster"]["matrix"] = "2025.01-r550"
    expected = [(Severity.ERROR, NETWORK_OPERATOR,
                 "the Network Operator serves RDMA to Kubernetes node groups infer, infer2 but no MOFED is "
                 "declared: the set 2025.01-r550 pins no doca, and `ofed_driver` is not set", MOFED_HINT)]
    result = run(d, matrix, tmp_path)
    assert _found(result, "rdma-no-mofed") == expected
    assert _found(result, "rdma-without-network-operator") == []
    # an image that lacks DOCA-OFED too: the set's missing doca is what is said
    _eth_hardware(d)
    d["nodes"]["infer"]["hardware"] = "hgx-eth"
    assert _found(run(d, matrix, tmp_path), "rdma-no-mofed") == expected
    # the cluster's set is unknown
    d["cluster"]["matrix"] = "2026.07-r580"
    d["nodes"]["infer"]["hardware"] = "hgx-h100"
    assert _found(run(d, _no_sets(tmp_path), tmp_path), "rdma-no-mofed") == [(
        Severity.ERROR, NETWORK_OPERATOR,
        "the Network Operator serves RDMA to Kubernetes node groups infer, infer2 but no MOFED is declared: "
        "the set 2026.07-r580 pins no doca, and `ofed_driver` is not set", MOFED_HINT)]


def test_an_ofed_driver_container_is_mofed(lab, matrix, tmp_path):
    lab["cluster"]["matrix"] = "2025.01-r550"
    lab["kubernetes"]["network_operator"]["ofed_driver"] = {"version": "3.2.1-044413"}
    assert _found(run(lab, matrix, tmp_path), "rdma-no-mofed") == []
    d = _split_infer(lab)
    _eth_hardware(d)
    d["nodes"]["infer"]["hardware"] = "hgx-eth"
    _image(d, "k8s-node")
    d["nodes"]["infer"]["image"] = "k8s-node"
    d["cluster"]["matrix"] = "2026.07-r580"
    assert _found(run(d, matrix, tmp_path), "rdma-no-mofed") == []


def test_the_images_that_lack_doca_ofed_are_named_once_each_in_order(lab, matrix, tmp_path):
    d = _split_infer(lab)
    _eth_hardware(d)
    _image(d, "k8s-b")
    _image(d, "k8s-a")
    d["nodes"]["infer"].update(hardware="hgx-eth", image="k8s-b")
    d["nodes"]["infer2"].update(hardware="hgx-eth", image="k8s-a")

    def message(images):
        return ("the Network Operator serves RDMA to Kubernetes node groups infer, infer2 but no MOFED is "
                f"declared: image(s) {images} do not carry the set's DOCA-OFED (`doca-ofed`; their hardware "
                "has no ConnectX/BlueField HCA), and `ofed_driver` is not set")

    assert _found(run(d, matrix, tmp_path), "rdma-no-mofed") == [
        (Severity.ERROR, NETWORK_OPERATOR, message("k8s-a, k8s-b"), MOFED_HINT)]
    d["nodes"]["infer2"]["image"] = "k8s-b"
    assert _found(run(d, matrix, tmp_path), "rdma-no-mofed") == [
        (Severity.ERROR, NETWORK_OPERATOR, message("k8s-b"), MOFED_HINT)]
    # a group whose image carries DOCA-OFED is not named
    d["nodes"]["infer2"].update(hardware="hgx-h100", image="gpu-node")
    assert _found(run(d, matrix, tmp_path), "rdma-no-mofed") == [
        (Severity.ERROR, NETWORK_OPERATOR, message("k8s-b"), MOFED_HINT)]


def test_an_unknown_image_is_left_to_the_reference_checks(lab, matrix, tmp_path):
    _eth_hardware(lab)
    lab["nodes"]["infer"].update(hardware="hgx-eth", image="k8s-ghost")
    result = run(lab, matrix, tmp_path)
    assert "ref-image" in {f.code for f in result.findings}
    assert _found(result, "rdma-no-mofed") == []
