"""The Slurm checks (validate/checks_slurm.py) finding by finding: code, path, message and hint
written out by hand, for the branches the bad-input corpus does not take. Issue #18: the mutants
of these checks that the corpus and test_checks.py let through."""

from __future__ import annotations

import copy
import shutil

from clusterdef.errors import Severity
from clusterdef.matrix.load import load_matrix
from conftest import MATRICES, as_rail
from test_checks import run


def _set_slurm(tmp_path, version: str):
    """matrices/ with the lab's set on another Slurm release."""
    root = tmp_path / "matrices"
    shutil.copytree(MATRICES, root)
    path = root / "sets" / "2026.07-r580.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count('slurm: "25.11.7"') == 1
    path.write_text(text.replace('slurm: "25.11.7"', f'slurm: "{version}"'), encoding="utf-8")
    return load_matrix(root)[0]


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def test_a_slurm_older_than_every_keyword_list(lab, tmp_path):
    result = run(lab, _set_slurm(tmp_path, "21.08.8"), tmp_path)
    assert _found(result, "slurm-major-unknown") == [(
        Severity.ERROR, ("cluster", "matrix"),
        "set 2026.07-r580 runs Slurm 21.08, older than every keyword list clusterdef has",
        "choose a set with Slurm 22.05 or newer")]


def test_lines_of_their_own_are_not_passthrough_keys(lab, matrix, tmp_path):
    lab["slurm"]["passthrough"] = {"NodeName": "gpu001", "partitionname": "x", "MaxJobCount": "20000"}
    found = _found(run(lab, matrix, tmp_path), "slurm-key-unknown")
    hint = ("describe nodes, partitions and controllers in the definition (nodes, slurm.partitions, "
            "slurm.controllers)")
    assert found == [
        (Severity.ERROR, ("slurm", "passthrough", "NodeName"),
         "`NodeName` is a line of its own in slurm.conf, not a passthrough parameter", hint),
        (Severity.ERROR, ("slurm", "passthrough", "partitionname"),
         "`partitionname` is a line of its own in slurm.conf, not a passthrough parameter", hint)]


def test_a_key_that_is_top_level_and_a_partition_parameter_is_accepted(lab, matrix, tmp_path):
    lab["slurm"]["passthrough"] = {"DefMemPerGPU": "8192", "maxtime": "60"}
    result = run(lab, matrix, tmp_path)
    assert _found(result, "slurm-key-unknown") == []
    (misplaced,) = _found(result, "slurm-key-misplaced")
    assert misplaced[1] == ("slurm", "passthrough", "maxtime")  # lower case is still MaxTime
    assert misplaced[3] == "set it per partition: slurm.partitions.<name>.max_time"


def test_a_misspelled_key_gets_the_one_closest_name(lab, matrix, tmp_path):
    lab["slurm"]["passthrough"] = {"MaxJobCont": "20000"}
    (found,) = _found(run(lab, matrix, tmp_path), "slurm-key-unknown")
    assert found[2] == "`MaxJobCont` is not a slurm.conf key in Slurm 25.11 (the set's major; list from 25.11.7)"
    assert found[3] == "did you mean `MaxJobCount`?"
    lab["slurm"]["passthrough"] = {"Zzqqxxyy": "1"}
    (found,) = _found(run(lab, matrix, tmp_path), "slurm-key-unknown")
    assert found[3] == "see slurm.conf(5) of Slurm 25.11 for the keys it accepts"


def test_a_partition_whose_qos_asks_for_gpus_needs_gpu_nodes(lab, matrix, tmp_path):
    lab["hardware"]["cpu-box"] = {k: v for k, v in copy.deepcopy(lab["hardware"]["hgx-h100"]).items() if k != "gpu"}
    lab["hardware"]["cpu-box"]["platform"] = "hgx-h100"
    lab["nodes"]["secure"]["hardware"] = "cpu-box"
    message = ("GPU partition `secure` includes node group `secure`, whose hardware `cpu-box` has no GPUs")
    hint = "put CPU-only node groups in a partition of their own"
    # CPU-only nodes in a partition that neither has GPU nodes nor a QOS asking for GPUs: fine
    assert _found(run(lab, matrix, tmp_path), "partition-node-no-gpu") == []
    # the same partition with a QOS whose per-user limit is in GPUs is a GPU partition
    lab["slurm"]["partitions"]["secure"]["qos"] = "normal"
    assert _found(run(lab, matrix, tmp_path), "partition-node-no-gpu") == [
        (Severity.ERROR, ("slurm", "partitions", "secure", "node_groups", 0), message, hint)]
    # a QOS limited in CPUs only does not make it one
    lab["slurm"]["qos"]["cpuonly"] = {"priority": 5, "max_tres_per_user": {"cpu": 64}}
    lab["slurm"]["partitions"]["secure"]["qos"] = "cpuonly"
    assert _found(run(lab, matrix, tmp_path), "partition-node-no-gpu") == []


def test_every_cpu_group_of_a_gpu_partition_is_named(lab, matrix, tmp_path):
    lab["hardware"]["cpu-box"] = {k: v for k, v in copy.deepcopy(lab["hardware"]["hgx-h100"]).items() if k != "gpu"}
    lab["nodes"]["secure"]["hardware"] = "cpu-box"
    lab["slurm"]["partitions"]["train"]["node_groups"] = ["secure", "train"]
    found = _found(run(lab, matrix, tmp_path), "partition-node-no-gpu")
    assert [f[1] for f in found] == [("slurm", "partitions", "train", "node_groups", 0)]
    lab["nodes"]["extra"] = copy.deepcopy(lab["nodes"]["secure"])
    lab["nodes"]["extra"].update(hosts="cpu[1-2]")
    lab["nodes"]["extra"]["addressing"] = {"ipv4_start": "10.20.0.51",
                                           "mac": {"source": "list", "macs": ["52:54:00:20:00:51", "52:54:00:20:00:52"]}}
    lab["nodes"]["extra"].pop("placement")
    lab["slurm"]["partitions"]["train"]["node_groups"] = ["secure", "train", "extra"]
    found = _found(run(lab, matrix, tmp_path), "partition-node-no-gpu")
    assert [f[1][-1] for f in found] == [0, 2]


def test_a_topology_the_sets_slurm_has_no_plugin_for(lab, tmp_path):
    old = _set_slurm(tmp_path, "23.02.8")
    hint = ("describe the fabric as a switch tree, or choose a set whose Slurm has topology/block "
            "(23.11 or newer)")
    rail = as_rail(lab)
    rail["network"]["fabrics"]["ib0"]["topology"]["slurm"] = "block"
    assert _found(run(rail, old, tmp_path), "slurm-topology-unsupported") == [(
        Severity.ERROR, ("network", "fabrics", "ib0", "topology", "slurm"),
        "Slurm 23.02 (set 2026.07-r580) has no topology/block plugin", hint)]
    rail["network"]["fabrics"]["ib0"]["topology"]["slurm"] = "tree"
    assert _found(run(rail, old, tmp_path), "slurm-topology-unsupported") == []
    leaves = lab["network"]["fabrics"]["ib0"]["topology"]["switches"]
    block = copy.deepcopy(lab)
    block["network"]["fabrics"]["ib0"]["topology"] = {
        "kind": "block", "blocks": {"b1": {"nodes": leaves["leaf01"]["nodes"]}, "b2": {"nodes": leaves["leaf02"]["nodes"]}}}
    assert _found(run(block, old, tmp_path), "slurm-topology-unsupported") == [(
        Severity.ERROR, ("network", "fabrics", "ib0", "topology", "kind"),
        "Slurm 23.02 (set 2026.07-r580) has no topology/block plugin", hint)]
    assert _found(run(lab, old, tmp_path), "slurm-topology-unsupported") == []


def test_a_cpu_partition_before_a_gpu_partition_does_not_end_the_check(lab, matrix, tmp_path):
    lab["hardware"]["cpu-box"] = {k: v for k, v in copy.deepcopy(lab["hardware"]["hgx-h100"]).items() if k != "gpu"}
    lab["nodes"]["secure"]["hardware"] = "cpu-box"
    partitions = lab["slurm"]["partitions"]
    lab["slurm"]["partitions"] = {"secure": partitions["secure"], "train": partitions["train"], "debug": partitions["debug"]}
    lab["slurm"]["partitions"]["train"]["node_groups"] = ["train", "secure"]
    found = _found(run(lab, matrix, tmp_path), "partition-node-no-gpu")
    assert [f[1] for f in found] == [("slurm", "partitions", "train", "node_groups", 1)]


def test_preempt_warnings_word_for_word(lab, matrix, tmp_path):
    lab["slurm"]["qos"]["large"]["preempt_mode"] = "off"
    lab["slurm"]["qos"]["normal"]["preempt_mode"] = "cancel"
    result = run(lab, matrix, tmp_path)
    assert _found(result, "qos-preempt-off") == [(
        Severity.WARNING, ("slurm", "qos", "large", "preempt_mode"),
        "QOS `large` lists QOS to preempt but its preempt_mode is off",
        "set preempt_mode: requeue (or cancel/suspend)")]
    assert _found(result, "qos-preempt-mode-unused") == [(
        Severity.WARNING, ("slurm", "qos", "normal", "preempt_mode"),
        "QOS `normal` has preempt_mode cancel but preempts no QOS",
        "preempt_mode is how this QOS's jobs preempt the QOS in `preempt` (Slurm applies it to the jobs "
        "preempted); list them, or remove preempt_mode")]


def test_slurm_groups_on_two_fabrics_are_named(lab, matrix, tmp_path):
    fabrics = lab["network"]["fabrics"]
    fabrics["ib1"] = {"kind": "infiniband", "topology": {"kind": "tree", "switches": {"leaf11": {"nodes": "sgpu[01-02]"}}}}
    fabrics["ib0"]["topology"]["switches"]["leaf01"]["nodes"] = "gpu[001-002]"
    fabrics["ib0"]["topology"]["switches"]["leaf02"]["nodes"] = "gpu[003-004],kgpu[01-02]"
    lab["nodes"]["secure"]["placement"]["fabric"] = "ib1"
    assert _found(run(lab, matrix, tmp_path), "slurm-topology-fabrics") == [(
        Severity.WARNING, ("nodes",),
        "Slurm node groups sit on 2 fabrics (ib0, ib1); topology.conf describes only `ib0`",
        "place the Slurm node groups on one fabric")]
