"""The reference checks (validate/checks_refs.py) finding by finding: each dangling reference's
path, message and hint (a close name, the known names up to eight, or where to define the first
one), the Kueue flavors' node groups, references that are optional, and the `sections` check.
Code, path, message and hint are written out by hand, for the branches the bad-input corpus does
not take. Issue #18: the mutants of these checks that the corpus and test_checks.py let through."""

from __future__ import annotations

from clusterdef.errors import Severity
from test_checks import run

E = Severity.ERROR


def _found(result, *codes):
    """The findings of `codes`, in the report's order (by place in the file)."""
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in codes]


FLAVOR = ("kubernetes", "kueue", "flavors", "h100", "node_groups")
QUEUES = ("kubernetes", "kueue", "queues")


# ---- the hint: a close name, the known names, or where to define one


def test_known_names_are_sorted_and_all_eight_are_listed(lab, matrix, tmp_path):
    qos = lab["slurm"]["qos"]
    for name in ("qf", "qb", "qe", "qa", "qd", "qc"):
        qos[name] = {"priority": 1}
    lab["slurm"]["partitions"]["train"]["qos"] = "zzz"
    assert _found(run(lab, matrix, tmp_path), "ref-qos") == [
        ("ref-qos", E, ("slurm", "partitions", "train", "qos"), "QOS `zzz` is not defined",
         "known QOSs: large, normal, qa, qb, qc, qd, qe, qf")]


def test_past_eight_known_names_the_first_eight_and_dots(lab, matrix, tmp_path):
    qos = lab["slurm"]["qos"]
    for name in ("qg", "qf", "qb", "qe", "qa", "qd", "qc"):
        qos[name] = {"priority": 1}
    lab["slurm"]["partitions"]["train"]["qos"] = "zzz"
    assert _found(run(lab, matrix, tmp_path), "ref-qos") == [
        ("ref-qos", E, ("slurm", "partitions", "train", "qos"), "QOS `zzz` is not defined",
         "known QOSs: large, normal, qa, qb, qc, qd, qe, qf ...")]


def test_with_no_qos_defined_every_qos_reference_says_where_to_define_one(lab, matrix, tmp_path):
    lab["slurm"]["qos"] = {}
    hint = "define it under `slurm.qos`"
    assert _found(run(lab, matrix, tmp_path), "ref-qos") == [
        ("ref-qos", E, ("slurm", "partitions", "train", "qos"), "QOS `normal` is not defined", hint),
        ("ref-qos", E, ("tenants", "vision", "slurm", "qos", 0), "QOS `normal` is not defined", hint),
        ("ref-qos", E, ("tenants", "vision", "slurm", "qos", 1), "QOS `large` is not defined", hint),
        ("ref-qos", E, ("tenants", "nlp", "slurm", "qos", 0), "QOS `normal` is not defined", hint),
        ("ref-qos", E, ("tenants", "secure", "slurm", "qos", 0), "QOS `normal` is not defined", hint)]


def test_with_no_fabric_defined_a_placement_says_where_to_define_one(lab, matrix, tmp_path):
    lab["network"]["fabrics"] = {}
    hint = "define it under `network.fabrics`"
    assert _found(run(lab, matrix, tmp_path), "ref-fabric") == [
        ("ref-fabric", E, ("nodes", group, "placement", "fabric"), "fabric `ib0` is not defined", hint)
        for group in ("train", "infer", "secure")]


def test_with_no_flavor_defined_a_queue_says_where_to_define_one(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["flavors"] = {}
    hint = "define it under `kubernetes.kueue.flavors`"
    assert _found(run(lab, matrix, tmp_path), "ref-flavor") == [
        ("ref-flavor", E, QUEUES + (q, "flavor"), "flavor `h100` is not defined", hint)
        for q in ("vision-serve", "nlp-serve")]


def test_with_no_cohort_defined_a_queue_says_where_to_define_one(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["cohorts"] = {}
    hint = "define it under `kubernetes.kueue.cohorts`"
    assert _found(run(lab, matrix, tmp_path), "ref-cohort") == [
        ("ref-cohort", E, QUEUES + (q, "cohort"), "cohort `lab` is not defined", hint)
        for q in ("vision-serve", "nlp-serve")]


def test_with_no_kueue_a_tenants_queues_say_where_to_define_them(lab, matrix, tmp_path):
    del lab["kubernetes"]["kueue"]
    hint = "define it under `kubernetes.kueue.queues`"
    assert _found(run(lab, matrix, tmp_path), "ref-queue") == [
        ("ref-queue", E, ("tenants", "vision", "kubernetes", "queues", 0), "Kueue queue `vision-serve` is not defined",
         hint),
        ("ref-queue", E, ("tenants", "nlp", "kubernetes", "queues", 0), "Kueue queue `nlp-serve` is not defined",
         hint)]


def test_a_queue_not_close_to_any_lists_the_known_queues(lab, matrix, tmp_path):
    lab["tenants"]["vision"]["kubernetes"]["queues"] = ["vision-serve", "zzz"]
    assert _found(run(lab, matrix, tmp_path), "ref-queue") == [
        ("ref-queue", E, ("tenants", "vision", "kubernetes", "queues", 1), "Kueue queue `zzz` is not defined",
         "known Kueue queues: nlp-serve, vision-serve")]


# ---- Kueue flavors' node groups


def test_a_flavors_unknown_node_group(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infr"]
    result = run(lab, matrix, tmp_path)
    assert _found(result, "ref-node-group", "flavor-not-kubernetes") == [
        ("ref-node-group", E, FLAVOR + (0,), "node group `infr` is not defined", "did you mean `infer`?")]


def test_a_flavors_node_groups_are_each_checked(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "zzz", "secure"]
    assert _found(run(lab, matrix, tmp_path), "ref-node-group", "flavor-not-kubernetes") == [
        ("ref-node-group", E, FLAVOR + (1,), "node group `zzz` is not defined",
         "known node groups: acct, ctl, infer, k8sctl, mgmt, secure, train"),
        ("flavor-not-kubernetes", E, FLAVOR + (2,), "flavor `h100` uses node group `secure`, which Slurm owns",
         "only node groups with control_plane: kubernetes may back a Kueue flavor")]


# ---- Slurm partitions, accounts and QOS, by index


def test_a_partitions_node_groups_are_each_checked(lab, matrix, tmp_path):
    lab["slurm"]["partitions"]["debug"]["node_groups"] = ["train", "infer", "zzz"]
    assert _found(run(lab, matrix, tmp_path), "ref-node-group", "partition-not-slurm") == [
        ("partition-not-slurm", E, ("slurm", "partitions", "debug", "node_groups", 1),
         "partition `debug` uses node group `infer`, which Kubernetes owns",
         "only node groups with control_plane: slurm may be in a partition"),
        ("ref-node-group", E, ("slurm", "partitions", "debug", "node_groups", 2), "node group `zzz` is not defined",
         "known node groups: acct, ctl, infer, k8sctl, mgmt, secure, train")]


def test_root_is_an_account_and_the_known_accounts_are_the_tenants(lab, matrix, tmp_path):
    lab["slurm"]["partitions"]["secure"]["allow_accounts"] = ["secure", "root", "zzz"]
    assert _found(run(lab, matrix, tmp_path), "ref-account") == [
        ("ref-account", E, ("slurm", "partitions", "secure", "allow_accounts", 2), "Slurm account `zzz` is not defined",
         "known Slurm accounts: nlp, root, secure, vision")]


def test_a_tenant_without_slurm_has_no_account(lab, matrix, tmp_path):
    del lab["tenants"]["vision"]["slurm"]
    lab["slurm"]["partitions"]["debug"]["allow_accounts"] = ["vision"]
    assert _found(run(lab, matrix, tmp_path), "ref-account") == [
        ("ref-account", E, ("slurm", "partitions", "debug", "allow_accounts", 0),
         "Slurm account `vision` is not defined", "known Slurm accounts: nlp, root, secure")]


def test_each_qos_to_preempt_is_checked(lab, matrix, tmp_path):
    lab["slurm"]["qos"]["large"]["preempt"] = ["normal", "zzz"]
    assert _found(run(lab, matrix, tmp_path), "ref-qos") == [
        ("ref-qos", E, ("slurm", "qos", "large", "preempt", 1), "QOS `zzz` is not defined",
         "known QOSs: large, normal")]


def test_a_partition_without_qos_references_none(lab, matrix, tmp_path):
    del lab["slurm"]["partitions"]["train"]["qos"]
    assert _found(run(lab, matrix, tmp_path), "ref-qos") == []


# ---- optional references: absent is fine


def test_a_queue_without_a_cohort_and_a_canary_without_a_group(lab, matrix, tmp_path):
    del lab["kubernetes"]["kueue"]["queues"]["nlp-serve"]["cohort"]
    del lab["upgrade"]["canary"]["node_group"]
    assert _found(run(lab, matrix, tmp_path), "ref-cohort", "ref-node-group") == []


def test_a_cohorts_known_parent(lab, matrix, tmp_path):
    lab["kubernetes"]["kueue"]["cohorts"]["org"] = {}
    lab["kubernetes"]["kueue"]["cohorts"]["lab"] = {"parent": "org"}
    assert _found(run(lab, matrix, tmp_path), "ref-cohort") == []


def test_each_smoke_test_node_group_is_checked(lab, matrix, tmp_path):
    lab["upgrade"]["smoke_tests"]["scratch-mounted"]["node_groups"] = ["train", "zzz"]
    assert _found(run(lab, matrix, tmp_path), "ref-node-group") == [
        ("ref-node-group", E, ("upgrade", "smoke_tests", "scratch-mounted", "node_groups", 1),
         "node group `zzz` is not defined", "known node groups: acct, ctl, infer, k8sctl, mgmt, secure, train")]


def test_an_unknown_image_hardware_and_canary_group_far_from_any_name(lab, matrix, tmp_path):
    lab["nodes"]["secure"]["image"] = "zzz"
    lab["nodes"]["secure"]["hardware"] = "zzz"
    lab["upgrade"]["canary"]["node_group"] = "zzz"
    assert _found(run(lab, matrix, tmp_path), "ref-image", "ref-hardware", "ref-node-group") == [
        ("ref-hardware", E, ("nodes", "secure", "hardware"), "hardware type `zzz` is not defined",
         "known hardware types: hgx-h100, mgmt-server"),
        ("ref-image", E, ("nodes", "secure", "image"), "image `zzz` is not defined", "known images: gpu-node, mgmt"),
        ("ref-node-group", E, ("upgrade", "canary", "node_group"), "node group `zzz` is not defined",
         "known node groups: acct, ctl, infer, k8sctl, mgmt, secure, train")]


# ---- sections


def test_a_slurm_section_without_slurm_nodes_word_for_word(lab, matrix, tmp_path):
    for g in ("train", "secure"):
        lab["nodes"][g]["control_plane"] = "kubernetes"
    assert _found(run(lab, matrix, tmp_path), "slurm-without-nodes", "slurm-missing") == [
        ("slurm-without-nodes", E, ("slurm",),
         "the definition has a `slurm` section but no node group is owned by Slurm",
         "set control_plane: slurm on a node group or drop the `slurm` section")]


def test_slurm_missing_names_the_first_slurm_group(lab, matrix, tmp_path):
    del lab["slurm"]
    lab["nodes"]["train"]["control_plane"] = "kubernetes"
    assert _found(run(lab, matrix, tmp_path), "slurm-missing", "slurm-without-nodes") == [
        ("slurm-missing", E, ("nodes", "secure", "control_plane"),
         "node group `secure` is owned by Slurm but the definition has no `slurm` section",
         "add a `slurm` section with controllers and partitions")]
