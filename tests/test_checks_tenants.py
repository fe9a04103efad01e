"""The tenant checks (validate/checks_tenants.py: tenant-capacity, tenant-isolation, tenant-names,
slurm-account-tree) finding by finding: code, path, message and hint written out by hand, for the
branches the bad-input corpus does not take (reservations and burst at, below and above the
cluster's GPUs, a cluster without GPUs, capacity unknown while a hardware type is undefined, Kueue
queues summed per tenant at and over its quota, no kubernetes section, each layer a dedicated tenant
lacks, three tenants on one account or namespace, the `root` account as its own parent, parent
cycles whose last-defined member is first, in the middle or at the end of a tail). The mutants of
these checks that the corpus and test_checks.py let through."""

from __future__ import annotations

from clusterdef.errors import Severity
from test_checks import run

E, W = Severity.ERROR, Severity.WARNING
CAPACITY_CODES = ("quota-reserved-over-capacity", "quota-burst-oversubscribed")
RESERVED_HINT = "reserved capacity is a promise: lower reservations or add nodes"
BURST_HINT = "burst is borrowed idle capacity; confirm the oversubscription is intended"
QUEUE_HINT = "lower the queues' nominal_gpus or raise the tenant's quota"
CYCLE_HINT = ("break the cycle: set one of these tenants' `slurm.parent` to `root` or to an account outside the "
              "cycle")


def _found(result, *codes):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in codes]


def _quota(lab: dict, tenant: str, reserved: int, burst: int) -> None:
    lab["tenants"][tenant]["quota"] = {"reserved_gpus": reserved, "burst_gpus": burst}


# --------------------------------------------------------------------------- tenant-capacity

def test_reservations_at_the_clusters_gpus_are_not_over(lab, matrix, tmp_path):
    # the lab has 8 nodes of 8 GPUs: 64; vision 16 + nlp 32 + secure 16 reserved, 72 with burst
    _quota(lab, "nlp", 32, 0)
    assert _found(run(lab, matrix, tmp_path), *CAPACITY_CODES) == [(
        "quota-burst-oversubscribed", W, ("tenants",),
        "reserved + burst quotas total 72 GPUs for 64 physical (1.12x oversubscribed)", BURST_HINT)]


def test_reservations_over_the_gpus_are_an_error_and_no_burst_warning(lab, matrix, tmp_path):
    _quota(lab, "nlp", 33, 0)
    assert _found(run(lab, matrix, tmp_path), *CAPACITY_CODES) == [(
        "quota-reserved-over-capacity", E, ("tenants",), "tenants reserve 65 GPUs but the cluster has 64",
        RESERVED_HINT)]


def test_burst_at_and_over_the_gpus(lab, matrix, tmp_path):
    _quota(lab, "vision", 16, 16)  # 16 + 16 + 16 + 16 = 64: every GPU, not more
    assert _found(run(lab, matrix, tmp_path), *CAPACITY_CODES) == []
    _quota(lab, "vision", 16, 17)
    assert _found(run(lab, matrix, tmp_path), *CAPACITY_CODES) == [(
        "quota-burst-oversubscribed", W, ("tenants",),
        "reserved + burst quotas total 65 GPUs for 64 physical (1.02x oversubscribed)", BURST_HINT)]
    _quota(lab, "vision", 16, 112)  # 160 for 64
    assert _found(run(lab, matrix, tmp_path), *CAPACITY_CODES) == [(
        "quota-burst-oversubscribed", W, ("tenants",),
        "reserved + burst quotas total 160 GPUs for 64 physical (2.50x oversubscribed)", BURST_HINT)]


def test_burst_on_a_cluster_without_gpus(lab, matrix, tmp_path):
    for hw in lab["hardware"].values():
        hw.pop("gpu", None)
    for t in lab["tenants"]:
        _quota(lab, t, 0, 0)
    _quota(lab, "vision", 0, 8)
    result = run(lab, matrix, tmp_path)
    assert _found(result, *CAPACITY_CODES) == [(
        "quota-burst-oversubscribed", W, ("tenants",),
        "reserved + burst quotas total 8 GPUs but the cluster has none", BURST_HINT)]
    # the queues (8 nominal GPUs each) against each tenant's quota
    assert _found(result, "queue-over-tenant-quota") == [(
        "queue-over-tenant-quota", E, ("tenants", "nlp", "kubernetes", "queues"),
        "tenant `nlp`'s Kueue queues have 8 nominal GPUs, above its quota of 0 (reserved 0 + burst 0)", QUEUE_HINT)]


def test_capacity_is_unknown_while_a_hardware_type_is_undefined(lab, matrix, tmp_path):
    # train's 32 GPUs would be missing from the count: 48 reserved would look over 32
    lab["nodes"]["train"]["hardware"] = "hgx-h200"
    _quota(lab, "nlp", 16, 40)
    result = run(lab, matrix, tmp_path)
    assert [f.path for f in result.findings if f.code == "ref-hardware"] == [("nodes", "train", "hardware")]
    assert _found(result, *CAPACITY_CODES, "queue-over-tenant-quota") == []


def test_a_tenants_queues_are_summed_against_its_quota(lab, matrix, tmp_path):
    queues = lab["kubernetes"]["kueue"]["queues"]
    lab["tenants"]["vision"]["kubernetes"]["queues"] = ["vision-serve", "nlp-serve"]
    queues["vision-serve"]["nominal_gpus"] = 16  # 16 + 8 = 24 = 16 reserved + 8 burst
    assert _found(run(lab, matrix, tmp_path), "queue-over-tenant-quota") == []
    queues["vision-serve"]["nominal_gpus"] = 17
    assert _found(run(lab, matrix, tmp_path), "queue-over-tenant-quota") == [(
        "queue-over-tenant-quota", E, ("tenants", "vision", "kubernetes", "queues"),
        "tenant `vision`'s Kueue queues have 25 nominal GPUs, above its quota of 24 (reserved 16 + burst 8)",
        QUEUE_HINT)]


def test_a_queue_at_the_tenants_quota_and_an_undefined_queue(lab, matrix, tmp_path):
    queues = lab["kubernetes"]["kueue"]["queues"]
    queues["nlp-serve"]["nominal_gpus"] = 16  # nlp: 16 reserved + 0 burst
    lab["tenants"]["nlp"]["kubernetes"]["queues"] = ["nlp-serve", "nlp-batch"]
    result = run(lab, matrix, tmp_path)
    assert [f.path for f in result.findings if f.code == "ref-queue"] == [("tenants", "nlp", "kubernetes", "queues", 1)]
    assert _found(result, "queue-over-tenant-quota") == []
    queues["nlp-serve"]["nominal_gpus"] = 17
    assert _found(run(lab, matrix, tmp_path), "queue-over-tenant-quota") == [(
        "queue-over-tenant-quota", E, ("tenants", "nlp", "kubernetes", "queues"),
        "tenant `nlp`'s Kueue queues have 17 nominal GPUs, above its quota of 16 (reserved 16 + burst 0)",
        QUEUE_HINT)]


def test_a_tenant_without_kubernetes_first_does_not_end_the_queue_check(lab, matrix, tmp_path):
    tenants = lab["tenants"]
    lab["tenants"] = {"secure": tenants["secure"], "vision": tenants["vision"], "nlp": tenants["nlp"]}
    lab["kubernetes"]["kueue"]["queues"]["nlp-serve"]["nominal_gpus"] = 20
    assert [f[2] for f in _found(run(lab, matrix, tmp_path), "queue-over-tenant-quota")] == [
        ("tenants", "nlp", "kubernetes", "queues")]


def test_no_kubernetes_section_means_no_queues(lab, matrix, tmp_path):
    del lab["kubernetes"]
    _quota(lab, "nlp", 0, 0)
    result = run(lab, matrix, tmp_path)
    assert [f.path for f in result.findings if f.code == "ref-queue"] == [
        ("tenants", "vision", "kubernetes", "queues", 0), ("tenants", "nlp", "kubernetes", "queues", 0)]
    assert _found(result, "queue-over-tenant-quota") == []


# --------------------------------------------------------------------------- tenant-isolation

def test_each_layer_a_dedicated_tenant_lacks_gets_its_hint(lab, matrix, tmp_path):
    iso = lab["tenants"]["secure"]["isolation"]
    iso.update(device="none", network="none", storage="none")
    assert _found(run(lab, matrix, tmp_path), "dedicated-not-isolated") == [
        ("dedicated-not-isolated", E, ("tenants", "secure", "isolation", "device"),
         "tenant `secure` is sold as dedicated but has no device isolation",
         "use cgroup device constraints, MIG or whole nodes"),
        ("dedicated-not-isolated", E, ("tenants", "secure", "isolation", "network"),
         "tenant `secure` is sold as dedicated but has no network isolation",
         "use network-policy (Kubernetes), partition keys (InfiniBand) or VLANs"),
        ("dedicated-not-isolated", E, ("tenants", "secure", "isolation", "storage"),
         "tenant `secure` is sold as dedicated but has no storage isolation",
         "use a project quota or a dedicated filesystem")]


def test_one_lacking_layer_is_the_only_finding(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["isolation"]["device"] = "none"
    assert _found(run(lab, matrix, tmp_path), "dedicated-not-isolated") == [(
        "dedicated-not-isolated", E, ("tenants", "secure", "isolation", "device"),
        "tenant `secure` is sold as dedicated but has no device isolation",
        "use cgroup device constraints, MIG or whole nodes")]


def test_a_shared_tenant_before_a_dedicated_one_does_not_end_the_check(lab, matrix, tmp_path):
    # vision and nlp are shared with no network or storage isolation: not a finding; nlp dedicated is
    lab["tenants"]["nlp"]["isolation"] = {"level": "dedicated", "device": "cgroup", "network": "none",
                                          "storage": "project-quota"}
    found = [f for f in _found(run(lab, matrix, tmp_path), "dedicated-not-isolated") if "has no" in f[3]]
    assert found == [(
        "dedicated-not-isolated", E, ("tenants", "nlp", "isolation", "network"),
        "tenant `nlp` is sold as dedicated but has no network isolation",
        "use network-policy (Kubernetes), partition keys (InfiniBand) or VLANs")]


# --------------------------------------------------------------------------- tenant-names

def test_three_tenants_on_one_account_name_the_first(lab, matrix, tmp_path):
    for t in ("nlp", "secure"):
        lab["tenants"][t]["slurm"]["account"] = "vision"
    tail = ", so one account would carry only one tenant's quota (GrpTRES), FairShare and QOS"
    hint = "give each tenant its own account; to group tenants, give their accounts a common `slurm.parent`"
    assert _found(run(lab, matrix, tmp_path), "tenant-account-shared") == [
        ("tenant-account-shared", E, ("tenants", "nlp", "slurm", "account"),
         "tenants `vision` and `nlp` both map to Slurm account `vision`" + tail, hint),
        ("tenant-account-shared", E, ("tenants", "secure", "slurm", "account"),
         "tenants `vision` and `secure` both map to Slurm account `vision`" + tail, hint)]


def test_three_tenants_on_one_namespace_name_the_first(lab, matrix, tmp_path):
    lab["tenants"]["vision"]["kubernetes"]["namespace"] = "nlp"
    lab["tenants"]["secure"]["kubernetes"] = {"namespace": "nlp"}
    del lab["tenants"]["nlp"]["slurm"]  # a tenant without Slurm still has its namespace checked
    tail = ", so their ResourceQuota, network policy and role bindings would collide"
    hint = "give each tenant its own namespace"
    assert _found(run(lab, matrix, tmp_path), "tenant-namespace-shared", "tenant-account-shared") == [
        ("tenant-namespace-shared", E, ("tenants", "nlp", "kubernetes", "namespace"),
         "tenants `vision` and `nlp` both map to Kubernetes namespace `nlp`" + tail, hint),
        ("tenant-namespace-shared", E, ("tenants", "secure", "kubernetes", "namespace"),
         "tenants `vision` and `secure` both map to Kubernetes namespace `nlp`" + tail, hint)]


# --------------------------------------------------------------------------- slurm-account-tree

def test_the_root_account_word_for_word(lab, matrix, tmp_path):
    lab["tenants"]["nlp"]["slurm"]["account"] = "root"
    assert _found(run(lab, matrix, tmp_path), "account-parent-self", "account-parent-cycle") == [(
        "account-parent-self", E, ("tenants", "nlp", "slurm", "account"),
        "tenant `nlp` maps to account `root`, Slurm's top account, which has no parent",
        "choose another account name; accounts hang under root by default")]


def test_a_second_tenant_on_an_account_does_not_set_its_parent(lab, matrix, tmp_path):
    lab["tenants"]["nlp"]["slurm"].update(account="vision", parent="vision")
    del lab["tenants"]["secure"]["slurm"]
    lab["tenants"]["secure"]["isolation"] = {"level": "shared"}
    result = run(lab, matrix, tmp_path)
    assert [f.path for f in result.findings if f.code == "tenant-account-shared"] == [
        ("tenants", "nlp", "slurm", "account")]
    assert _found(result, "account-parent-self", "account-parent-cycle") == []
    # the first tenant's own parent is the account's
    lab["tenants"]["vision"]["slurm"]["parent"] = "vision"
    assert _found(run(lab, matrix, tmp_path), "account-parent-self", "account-parent-cycle") == [(
        "account-parent-self", E, ("tenants", "vision", "slurm", "parent"),
        "tenant `vision`'s Slurm account `vision` names itself as its parent",
        "set `slurm.parent` to another account, or drop it to hang the account under root")]


def _accounts(lab: dict, **parents: str) -> None:
    """Accounts va, na, sa for vision, nlp and secure (not the tenants' names), with these parents."""
    for tenant, account in (("vision", "va"), ("nlp", "na"), ("secure", "sa")):
        lab["tenants"][tenant]["slurm"]["account"] = account
        lab["tenants"][tenant]["slurm"]["parent"] = parents.get(account, "root")


def test_a_cycle_is_told_from_its_last_defined_account(lab, matrix, tmp_path):
    _accounts(lab, va="na", na="sa", sa="va")
    assert _found(run(lab, matrix, tmp_path), "account-parent-self", "account-parent-cycle") == [(
        "account-parent-cycle", E, ("tenants", "secure", "slurm", "parent"),
        "Slurm accounts `sa` -> `va` -> `na` -> `sa` form a parent cycle, so none of them is under root "
        "(tenants `secure`, `vision`, `nlp`)", CYCLE_HINT)]


def test_a_cycle_whose_last_defined_account_is_in_the_middle(lab, matrix, tmp_path):
    _accounts(lab, va="sa", sa="na", na="va")
    assert _found(run(lab, matrix, tmp_path), "account-parent-self", "account-parent-cycle") == [(
        "account-parent-cycle", E, ("tenants", "secure", "slurm", "parent"),
        "Slurm accounts `sa` -> `na` -> `va` -> `sa` form a parent cycle, so none of them is under root "
        "(tenants `secure`, `nlp`, `vision`)", CYCLE_HINT)]


def test_a_cycle_at_the_end_of_a_tail_names_only_its_members(lab, matrix, tmp_path):
    _accounts(lab, va="sa", sa="na", na="sa")
    assert _found(run(lab, matrix, tmp_path), "account-parent-self", "account-parent-cycle") == [(
        "account-parent-cycle", E, ("tenants", "secure", "slurm", "parent"),
        "Slurm accounts `sa` -> `na` -> `sa` form a parent cycle, so none of them is under root "
        "(tenants `secure`, `nlp`)", CYCLE_HINT)]


def test_a_parent_outside_the_tenants_is_no_cycle(lab, matrix, tmp_path):
    _accounts(lab, va="na", na="research", sa="va")
    assert _found(run(lab, matrix, tmp_path), "account-parent-self", "account-parent-cycle") == []
