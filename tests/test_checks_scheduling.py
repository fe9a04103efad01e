"""The scheduling checks (validate/checks_scheduling.py: slurm-partitions, multinode-topology, kueue,
mig-profiles-fit) finding by finding: code, path, message and hint written out by hand, for the
branches the bad-input corpus does not take (three default partitions or none, no slurm or
kubernetes section, max_nodes at, above and without the single-node limit, an undefined or
placement-less group before another in a partition, nodes counted off their fabric, training queues
with and without gang, a MIG profile on a supported GPU, on Slurm-only or CPU-only groups, on two
Kubernetes groups, MIG profile memory at and above the GPU's, with a suffix, after a GPU-less
hardware type). The mutants of these checks that the corpus and test_checks.py let through."""

from __future__ import annotations

import copy

from clusterdef.errors import Severity
from test_checks import run

E, W = Severity.ERROR, Severity.WARNING
DEFAULT_CODES = ("partition-default-twice", "partition-no-default")
PLACEMENT_HINT = "add `placement.fabric` and the fabric's switch topology, or set max_nodes: 1"
SWITCH_HINT = "list them under a leaf switch or block so placement is topology-aware"
GANG_HINT = "set `gang: true` so a distributed job starts whole or not at all"
MIG_CODES = ("mig-strategy", "mig-profile-unsupported")
MEMORY_HINT = "list the profiles `nvidia-smi mig -lgip` prints for this GPU (an H100 80GB: 1g.10gb ... 7g.80gb)"


def _found(result, *codes):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in codes]


def _no_placement(pname: str, gname: str):
    return ("partition-no-topology", W, ("slurm", "partitions", pname),
            f"multi-node partition `{pname}` uses `{gname}`, which has no fabric placement", PLACEMENT_HINT)


def _cpu_box(lab: dict) -> None:
    lab["hardware"]["cpu-box"] = {k: v for k, v in copy.deepcopy(lab["hardware"]["hgx-h100"]).items() if k != "gpu"}


# --------------------------------------------------------------------------- slurm-partitions

def test_three_default_partitions_are_named_at_the_second(lab, matrix, tmp_path):
    for p in ("debug", "secure"):
        lab["slurm"]["partitions"][p]["default"] = True
    assert _found(run(lab, matrix, tmp_path), *DEFAULT_CODES) == [(
        "partition-default-twice", E, ("slurm", "partitions", "debug", "default"),
        "partitions train, debug, secure are all marked default", "mark exactly one partition `default: true`")]


def test_no_default_partition_word_for_word(lab, matrix, tmp_path):
    lab["slurm"]["partitions"]["train"]["default"] = False
    assert _found(run(lab, matrix, tmp_path), *DEFAULT_CODES) == [(
        "partition-no-default", W, ("slurm", "partitions"),
        "no partition is marked default; jobs without -p will be rejected", "mark one partition `default: true`")]


def test_one_default_that_is_not_the_first_partition(lab, matrix, tmp_path):
    lab["slurm"]["partitions"]["train"]["default"] = False
    lab["slurm"]["partitions"]["secure"]["default"] = True
    assert _found(run(lab, matrix, tmp_path), *DEFAULT_CODES) == []


def test_no_slurm_section_no_partition_findings(lab, matrix, tmp_path):
    del lab["slurm"]
    for t in lab["tenants"].values():
        t.pop("slurm", None)
    lab["upgrade"].pop("canary")
    result = run(lab, matrix, tmp_path)
    assert _found(result, *DEFAULT_CODES, "partition-no-topology") == []


# --------------------------------------------------------------------------- multinode-topology

def test_max_nodes_one_is_single_node_and_two_is_not(lab, matrix, tmp_path):
    del lab["nodes"]["train"]["placement"]
    # debug (max_nodes: 1) is on train too, but a single-node job needs no topology
    assert _found(run(lab, matrix, tmp_path), "partition-no-topology") == [_no_placement("train", "train")]
    lab["slurm"]["partitions"]["debug"]["max_nodes"] = 2
    assert _found(run(lab, matrix, tmp_path), "partition-no-topology") == [
        _no_placement("train", "train"), _no_placement("debug", "train")]
    del lab["slurm"]["partitions"]["debug"]["max_nodes"]
    assert _found(run(lab, matrix, tmp_path), "partition-no-topology") == [
        _no_placement("train", "train"), _no_placement("debug", "train")]


def test_a_single_node_partition_first_does_not_end_the_check(lab, matrix, tmp_path):
    partitions = lab["slurm"]["partitions"]
    lab["slurm"]["partitions"] = {"debug": partitions["debug"], "train": partitions["train"],
                                  "secure": partitions["secure"]}
    del lab["nodes"]["train"]["placement"]
    assert _found(run(lab, matrix, tmp_path), "partition-no-topology") == [_no_placement("train", "train")]


def test_an_undefined_group_first_does_not_end_the_partition(lab, matrix, tmp_path):
    lab["slurm"]["partitions"]["train"]["node_groups"] = ["trian", "train"]
    del lab["nodes"]["train"]["placement"]
    result = run(lab, matrix, tmp_path)
    assert [f.path for f in result.findings if f.code == "ref-node-group"] == [
        ("slurm", "partitions", "train", "node_groups", 0)]
    assert _found(result, "partition-no-topology") == [_no_placement("train", "train")]


def test_a_group_without_placement_first_does_not_end_the_partition(lab, matrix, tmp_path):
    lab["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf01"]["nodes"] = "gpu[001-002]"  # not sgpu01
    del lab["nodes"]["train"]["placement"]
    lab["slurm"]["partitions"]["train"]["node_groups"] = ["train", "secure"]
    assert _found(run(lab, matrix, tmp_path), "partition-no-topology") == [
        _no_placement("train", "train"),
        ("partition-no-topology", W, ("slurm", "partitions", "train"),
         "multi-node partition `train`: 1 node(s) of `secure` (sgpu01) are on no switch or block of fabric `ib0`",
         SWITCH_HINT),
        ("partition-no-topology", W, ("slurm", "partitions", "secure"),
         "multi-node partition `secure`: 1 node(s) of `secure` (sgpu01) are on no switch or block of fabric `ib0`",
         SWITCH_HINT)]


def test_the_nodes_off_the_fabric_are_counted_and_listed(lab, matrix, tmp_path):
    lab["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf01"]["nodes"] = "sgpu01"
    assert _found(run(lab, matrix, tmp_path), "partition-no-topology") == [(
        "partition-no-topology", W, ("slurm", "partitions", "train"),
        "multi-node partition `train`: 2 node(s) of `train` (gpu[001-002]) are on no switch or block of fabric `ib0`",
        SWITCH_HINT)]


# --------------------------------------------------------------------------- kueue

def test_only_training_queues_without_gang(lab, matrix, tmp_path):
    queues = lab["kubernetes"]["kueue"]["queues"]
    queues["vision-serve"].update(workload_class="training", gang=True)
    queues["nlp-serve"].update(workload_class="training", gang=False)
    assert _found(run(lab, matrix, tmp_path), "training-without-gang") == [(
        "training-without-gang", E, ("kubernetes", "kueue", "queues", "nlp-serve", "gang"),
        "training queue `nlp-serve` admits workloads without gang (all-or-nothing) admission", GANG_HINT)]
    queues["vision-serve"]["gang"] = False
    assert [f[2] for f in _found(run(lab, matrix, tmp_path), "training-without-gang")] == [
        ("kubernetes", "kueue", "queues", "vision-serve", "gang"), ("kubernetes", "kueue", "queues", "nlp-serve", "gang")]


def test_a_supported_mig_profile_with_a_strategy_is_fine(lab, matrix, tmp_path):
    lab["kubernetes"]["gpu_operator"] = {"mig_strategy": "single", "mig_profile": "3g.40gb"}
    assert _found(run(lab, matrix, tmp_path), *MIG_CODES) == []
    lab["kubernetes"]["gpu_operator"] = {"mig_strategy": "mixed", "mig_profile": "2g.40gb"}
    assert _found(run(lab, matrix, tmp_path), *MIG_CODES) == [(
        "mig-profile-unsupported", E, ("kubernetes", "gpu_operator", "mig_profile"),
        "GPU H100-SXM5-80GB of node group `infer` has no MIG profile 2g.40gb",
        "supported: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb")]


def test_a_mig_profile_is_checked_on_kubernetes_groups_with_gpus_only(lab, matrix, tmp_path):
    lab["hardware"]["hgx-a100"] = copy.deepcopy(lab["hardware"]["hgx-h100"])
    lab["hardware"]["hgx-a100"]["gpu"].update(model="A100-SXM4-40GB", type="a100", memory_gib=40,
                                              mig_profiles=["1g.5gb", "3g.20gb", "7g.40gb"])
    lab["nodes"]["secure"]["hardware"] = "hgx-a100"  # a Slurm group: Kubernetes does not slice it
    lab["kubernetes"]["gpu_operator"] = {"mig_strategy": "single", "mig_profile": "1g.10gb"}
    assert _found(run(lab, matrix, tmp_path), *MIG_CODES) == []
    _cpu_box(lab)
    lab["nodes"]["infer"]["hardware"] = "cpu-box"  # no GPU: nothing to slice
    assert _found(run(lab, matrix, tmp_path), *MIG_CODES) == []


def test_every_kubernetes_group_without_the_profile_is_named(lab, matrix, tmp_path):
    lab["hardware"]["hgx-a100"] = copy.deepcopy(lab["hardware"]["hgx-h100"])
    lab["hardware"]["hgx-a100"]["gpu"].update(model="A100-SXM4-40GB", type="a100", memory_gib=40,
                                              mig_profiles=["1g.5gb", "3g.20gb", "7g.40gb"])
    _cpu_box(lab)
    infer = lab["nodes"]["infer"]
    lab["nodes"] = {"cpu": copy.deepcopy(infer), **lab["nodes"], "infer2": copy.deepcopy(infer)}
    lab["nodes"]["cpu"].update(hosts="kcpu01", hardware="cpu-box")
    lab["nodes"]["cpu"]["addressing"] = {"ipv4_start": "10.20.0.61", "mac": {"source": "list",
                                                                             "macs": ["52:54:00:20:00:61"]}}
    lab["nodes"]["cpu"].pop("placement")
    lab["nodes"]["infer2"].update(hosts="kgpu[03-04]", hardware="hgx-a100")
    lab["nodes"]["infer2"]["addressing"] = {"ipv4_start": "10.20.0.71", "mac": {
        "source": "list", "macs": ["52:54:00:20:00:71", "52:54:00:20:00:72"]}}
    lab["nodes"]["infer2"].pop("placement")
    lab["kubernetes"]["gpu_operator"] = {"mig_strategy": "none", "mig_profile": "1g.12gb"}
    assert _found(run(lab, matrix, tmp_path), *MIG_CODES) == [
        ("mig-strategy", E, ("kubernetes", "gpu_operator", "mig_strategy"),
         "mig_profile 1g.12gb is set but mig_strategy is none", "set mig_strategy: single or mixed"),
        ("mig-profile-unsupported", E, ("kubernetes", "gpu_operator", "mig_profile"),
         "GPU H100-SXM5-80GB of node group `infer` has no MIG profile 1g.12gb",
         "supported: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"),
        ("mig-profile-unsupported", E, ("kubernetes", "gpu_operator", "mig_profile"),
         "GPU A100-SXM4-40GB of node group `infer2` has no MIG profile 1g.12gb",
         "supported: 1g.5gb, 3g.20gb, 7g.40gb")]


def test_no_kubernetes_section_no_queue_findings(lab, matrix, tmp_path):
    del lab["kubernetes"]
    for t in lab["tenants"].values():
        t.pop("kubernetes", None)
    result = run(lab, matrix, tmp_path)
    assert _found(result, "training-without-gang", *MIG_CODES) == []


# --------------------------------------------------------------------------- mig-profiles-fit

def test_mig_profile_memory_at_and_above_the_gpus(lab, matrix, tmp_path):
    lab["hardware"]["hgx-h100"]["gpu"]["mig_profiles"] = ["1g.10gb", "7g.81gb", "7g.80gb", "4g.100gb+me", "1g.80gb+me"]
    assert _found(run(lab, matrix, tmp_path), "mig-profile-exceeds-memory") == [
        ("mig-profile-exceeds-memory", E, ("hardware", "hgx-h100", "gpu", "mig_profiles", 1),
         "MIG profile 7g.81gb needs 81 GB but GPU H100-SXM5-80GB has 80 GiB", MEMORY_HINT),
        ("mig-profile-exceeds-memory", E, ("hardware", "hgx-h100", "gpu", "mig_profiles", 3),
         "MIG profile 4g.100gb+me needs 100 GB but GPU H100-SXM5-80GB has 80 GiB", MEMORY_HINT)]


def test_a_gpu_less_hardware_type_first_does_not_end_the_check(lab, matrix, tmp_path):
    _cpu_box(lab)
    lab["hardware"] = {"cpu-box": lab["hardware"]["cpu-box"], "hgx-h100": lab["hardware"]["hgx-h100"]}
    lab["hardware"]["hgx-h100"]["gpu"]["mig_profiles"] = ["1g.10gb", "7g.160gb"]
    assert _found(run(lab, matrix, tmp_path), "mig-profile-exceeds-memory") == [(
        "mig-profile-exceeds-memory", E, ("hardware", "hgx-h100", "gpu", "mig_profiles", 1),
        "MIG profile 7g.160gb needs 160 GB but GPU H100-SXM5-80GB has 80 GiB", MEMORY_HINT)]
