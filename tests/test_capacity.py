"""The capacity ledger (src/clusterdef/capacity.py), figure by figure, computed by hand for the lab,
the lab whose dedicated tenant also has a Kubernetes node (lab_variants.dedicated_kubernetes) and a
272-node definition where a tenant on both planes was given a Kubernetes quota Kubernetes cannot hold;
then the findings that read it (validate/checks_capacity.py), message by message, and the renderers
and `access` that print its figures."""

from __future__ import annotations

import copy

from clusterdef import capacity
from clusterdef.capacity import KubernetesPlane, Plane, TenantCapacity
from clusterdef.errors import Severity
from clusterdef.model import Definition
from lab_variants import dedicated_kubernetes
from test_checks import run

E, W = Severity.ERROR, Severity.WARNING
CODES = ("tenant-reserved-unreachable", "tenant-burst-unreachable", "reserved-sold-twice", "capacity-unusable",
         "quota-reserved-over-capacity")


def _found(result, *codes):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in codes]


# --------------------------------------------------------------------------- the ledger

def test_the_labs_ledger(lab):
    """Slurm: train 4 nodes (32 GPUs, partitions train and debug, open to every account), secure 2 nodes
    (16 GPUs, partition secure, account secure only). Kubernetes: infer 2 nodes (16 GPUs), flavor h100,
    queues vision-serve and nlp-serve of 8 nominal GPUs each in cohort lab. Both queues' 8 GPUs are
    reserved (vision and nlp reserve 16 each), so each lends 0, and the flavor has no GPU left for the
    cohort: vision's borrowingLimit 8 can borrow nothing. So Kubernetes holds 8 for vision, and Slurm
    the rest of its 24 (reserved 16 + burst 8): 16, not the 8 the borrowing that cannot happen left it."""
    d = Definition.model_validate(lab)
    assert capacity.ledger(d) == {
        "vision": TenantCapacity(
            reserved=16, burst=8,
            slurm=Plane(groups=("train",), reachable=32, owned=0, exclusive=0, holdable=32, reserved=8, limit=16),
            kubernetes=KubernetesPlane(groups=("infer",), reachable=16, owned=0, exclusive=0, holdable=8, reserved=8,
                                       limit=8, nominal=8, borrowable=0)),
        "nlp": TenantCapacity(
            reserved=16, burst=0,
            slurm=Plane(groups=("train",), reachable=32, owned=0, exclusive=0, holdable=32, reserved=8, limit=8),
            kubernetes=KubernetesPlane(groups=("infer",), reachable=16, owned=0, exclusive=0, holdable=8, reserved=8,
                                       limit=8, nominal=8, borrowable=0)),
        "secure": TenantCapacity(
            reserved=16, burst=0,
            slurm=Plane(groups=("train", "secure"), reachable=48, owned=16, exclusive=16, holdable=48, reserved=16,
                        limit=16),
            kubernetes=None),
    }
    assert capacity.of(d, "vision") == capacity.ledger(d)["vision"]
    assert (capacity.plane_gpus(d, "slurm"), capacity.plane_gpus(d, "kubernetes")) == (48, 16)


def test_borrowing_follows_what_the_cohort_lends(lab):
    """nlp reserves 4 of its queue's 8: the other 4 are lent (lendingLimit 4), and vision borrows them."""
    lab["tenants"]["nlp"]["quota"] = {"reserved_gpus": 4, "burst_gpus": 0}
    d = Definition.model_validate(lab)
    q = capacity.queue_quotas(d)
    assert (q["nlp-serve"].lending, q["vision-serve"].borrowing) == (4, 8)
    vision = capacity.of(d, "vision")
    assert vision.kubernetes == KubernetesPlane(groups=("infer",), reachable=16, owned=0, exclusive=0, holdable=12,
                                                reserved=8, limit=12, nominal=8, borrowable=4)
    assert vision.slurm is not None and vision.slurm.limit == 24 - 12
    # and capacity no queue holds is the root cohort's, borrowable too: a third node in infer
    lab["nodes"]["infer"]["hosts"] = "kgpu[01-03]"
    d = Definition.model_validate(lab)
    assert capacity.cohort_spare(d) == {"lab": {"h100": 8}}
    assert capacity.of(d, "vision").kubernetes.borrowable == 8  # its limit 8, within 4 lent + 8 spare


def test_the_dedicated_lab_ledger(lab):
    """secure owns secure (Slurm, 16 GPUs) and secure-infer (Kubernetes, 8 GPUs, flavor secure-h100 and
    queue secure-serve of its own, in no cohort): reserved 24 = 8 on Kubernetes + 16 on Slurm."""
    d = Definition.model_validate(dedicated_kubernetes(lab))
    assert capacity.of(d, "secure") == TenantCapacity(
        reserved=24, burst=0,
        slurm=Plane(groups=("train", "secure"), reachable=48, owned=16, exclusive=16, holdable=48, reserved=16,
                    limit=16),
        kubernetes=KubernetesPlane(groups=("secure-infer",), reachable=8, owned=8, exclusive=8, holdable=8, reserved=8,
                                   limit=8, nominal=8, borrowable=0))


def big(lab: dict) -> dict:
    """272 nodes: train (4 Slurm nodes, 32 GPUs), secure (184 Slurm nodes, 1,472 GPUs, a partition only
    account secure may use), infer (80 Kubernetes nodes, 640 GPUs) and the lab's 4 service hosts. secure
    is sold 2,048 GPUs (reserved 1,248 + burst 800) on both planes; its queue holds 512 nominal in cohort
    lab and may borrow its burst. Before the ledger, its ResourceQuota was nominal + borrowing = 1,312
    (Kubernetes has 640) and GrpTRES the remainder, 736: half of its own partition never allocatable."""
    d = copy.deepcopy(lab)
    d["nodes"]["infer"]["hosts"] = "kgpu[01-80]"
    d["nodes"]["secure"]["hosts"] = "sgpu[001-184]"
    d["kubernetes"]["kueue"]["queues"]["secure-serve"] = {"flavor": "h100", "nominal_gpus": 512, "cohort": "lab",
                                                         "workload_class": "inference"}
    t = d["tenants"]["secure"]
    t["quota"] = {"reserved_gpus": 1248, "burst_gpus": 800}
    t["kubernetes"] = {"namespace": "secure", "queues": ["secure-serve"]}
    return d


def test_a_kubernetes_quota_kubernetes_cannot_hold_is_left_to_slurm(lab):
    """The flavor's 640 GPUs: 8 + 8 + 512 nominal, 112 no queue holds (the cohort's own). vision's and
    nlp's queues lend nothing, so secure borrows at most the 112: Kubernetes holds 624 for it, and Slurm
    the other 1,424 of its 2,048."""
    d = Definition.model_validate(big(lab))
    assert sum(capacity.hostlist.count(g.hosts) for g in d.nodes.values()) == 272
    assert capacity.of(d, "secure") == TenantCapacity(
        reserved=1248, burst=800,
        slurm=Plane(groups=("train", "secure"), reachable=1504, owned=1472, exclusive=1472, holdable=1504,
                    reserved=736, limit=1424),
        kubernetes=KubernetesPlane(groups=("infer",), reachable=640, owned=0, exclusive=0, holdable=624, reserved=512,
                                   limit=624, nominal=512, borrowable=112))


# --------------------------------------------------------------------------- findings

def test_a_reservation_no_plane_can_give(lab, matrix, tmp_path):
    """nlp on Kubernetes only: its queue holds 8 and borrows nothing (borrowing_limit_gpus 0)."""
    del lab["tenants"]["nlp"]["slurm"]
    lab["tenants"]["nlp"]["quota"] = {"reserved_gpus": 16, "burst_gpus": 0}
    assert _found(run(lab, matrix, tmp_path), *CODES) == [(
        "tenant-reserved-unreachable", E, ("tenants", "nlp", "quota", "reserved_gpus"),
        "tenant `nlp` is sold 16 reserved GPUs, but its control planes can give it at most 8: Kubernetes 8 (its "
        "queues' nominal 8 + 0 borrowable, within the 16 GPUs of its flavors)",
        "reserved capacity is a promise: give the tenant partitions or Kueue queues (nominal quota) that reach its "
        "reservation, or lower reserved_gpus")]
    lab["tenants"]["nlp"]["quota"] = {"reserved_gpus": 8, "burst_gpus": 8}
    assert _found(run(lab, matrix, tmp_path), *CODES) == [(
        "tenant-burst-unreachable", W, ("tenants", "nlp", "quota", "burst_gpus"),
        "tenant `nlp` is sold 16 GPUs (reserved 8 + burst 8), but its control planes can give it at most 8: "
        "Kubernetes 8 (its queues' nominal 8 + 0 borrowable, within the 16 GPUs of its flavors)",
        "lower burst_gpus to what it can reach, or let its queues borrow (another queue of the cohort lending, or "
        "capacity no queue holds)")]
    lab["tenants"]["nlp"]["quota"] = {"reserved_gpus": 8, "burst_gpus": 0}
    assert _found(run(lab, matrix, tmp_path), *CODES) == []


def test_reserved_capacity_sold_twice_over_one_pool(lab, matrix, tmp_path):
    """vision and nlp may use only train (32 GPUs) on Slurm: vision holds 8 of its 40 on Kubernetes and
    32 on Slurm, nlp 8 on Slurm: 40 of train's 32. Slurm as a whole (48) is not over: 32 + 8 + 0."""
    lab["tenants"]["vision"]["quota"] = {"reserved_gpus": 40, "burst_gpus": 0}
    lab["tenants"]["secure"]["quota"] = {"reserved_gpus": 0, "burst_gpus": 16}
    assert _found(run(lab, matrix, tmp_path), *CODES) == [(
        "reserved-sold-twice", E, ("tenants", "vision", "quota", "reserved_gpus"),
        "tenants `vision` (32), `nlp` (8) reserve 40 GPUs on slurm, but the only node groups they may use there "
        "(train) have 32",
        "lower their reservations, or let them use more node groups (partitions' allow_accounts, Kueue flavors)")]
    lab["tenants"]["vision"]["quota"] = {"reserved_gpus": 32, "burst_gpus": 0}  # 24 + 8: train's 32
    assert _found(run(lab, matrix, tmp_path), *CODES) == []


def test_reservations_per_plane_count_a_tenant_on_both_planes_on_each(lab, matrix, tmp_path):
    """Slurm holds 48: vision 8 (16 less its queue's 8) + nlp 0 (its 4 are its queue's) + secure 41 = 49,
    while the cluster's 64 are not over (16 + 4 + 41 = 61)."""
    lab["tenants"]["nlp"]["quota"] = {"reserved_gpus": 4, "burst_gpus": 0}
    lab["tenants"]["secure"]["quota"] = {"reserved_gpus": 41, "burst_gpus": 0}
    found = _found(run(lab, matrix, tmp_path), "quota-reserved-over-capacity")
    assert found == [("quota-reserved-over-capacity", E, ("tenants",),
                      "tenants reserve 49 GPUs on slurm but slurm owns 48",
                      "lower their reservations or give slurm more nodes")]


UNUSABLE_HINT = ("raise the tenant's quota to its nodes, or let other tenants use them (partitions' allow_accounts, "
                 "flavors), or give it fewer nodes")


def test_owned_nodes_beyond_what_the_tenant_may_hold(lab, matrix, tmp_path):
    lab["tenants"]["secure"]["quota"] = {"reserved_gpus": 8, "burst_gpus": 0}
    assert _found(run(lab, matrix, tmp_path), *CODES) == [(
        "capacity-unusable", W, ("tenants", "secure", "isolation", "node_groups"),
        "8 of the 16 slurm GPUs only tenant `secure` may use can never be allocated: it may hold 8 there at once "
        "(GrpTRES; reserved 8 + burst 0)", UNUSABLE_HINT)]


def test_a_partition_only_one_tenant_may_use_beyond_what_it_may_hold(lab, matrix, tmp_path):
    """A shared tenant whose partition admits only its account: its GPUs are its alone all the same."""
    lab["tenants"]["secure"]["isolation"] = {"level": "shared"}
    lab["tenants"]["secure"]["quota"] = {"reserved_gpus": 4, "burst_gpus": 4}
    assert _found(run(lab, matrix, tmp_path), *CODES) == [(
        "capacity-unusable", W, ("slurm", "partitions", "secure", "allow_accounts"),
        "8 of the 16 slurm GPUs only tenant `secure` may use can never be allocated: it may hold 8 there at once "
        "(GrpTRES; reserved 4 + burst 4)", UNUSABLE_HINT)]
    lab["slurm"]["partitions"]["secure"]["allow_accounts"] = ["secure", "nlp"]  # now nlp may use them too
    assert _found(run(lab, matrix, tmp_path), *CODES) == []


def test_the_big_definitions_waste_is_found(lab):
    """On the 272-node definition the ledger leaves 1,424 on Slurm: 48 of secure's 1,472 stay idle."""
    from clusterdef.validate.checks_capacity import tenant_capacity_unusable

    class Ctx:
        definition = Definition.model_validate(big(lab))

    found = [(f.code, f.path, f.message) for f in tenant_capacity_unusable(Ctx())]
    assert found == [("capacity-unusable", ("tenants", "secure", "isolation", "node_groups"),
                      "48 of the 1472 slurm GPUs only tenant `secure` may use can never be allocated: it may hold "
                      "1424 there at once (GrpTRES; reserved 1248 + burst 800, less the 624 Kubernetes holds)")]


# --------------------------------------------------------------------------- who reads it

def test_renderers_and_access_print_the_ledgers_figures(lab, tmp_path):
    from clusterdef import access
    from clusterdef.render.kubernetes.tenants import gpu_ceiling
    from clusterdef.render.slurm import accounts_cfg, slurm_gpu_share
    from test_kubernetes_render import variant

    r = variant(lab, tmp_path, lambda d: None)
    assert [(slurm_gpu_share(r, t), gpu_ceiling(r, t)) for t in ("vision", "nlp")] == [(16, 8), (8, 8)]
    assert slurm_gpu_share(r, "secure") == 16
    acc = accounts_cfg(r)
    assert "Account - 'vision':Description='vision':Organization='vision':Fairshare=8:GrpTRES=gres/gpu=16:" in acc
    assert "Account - 'secure':Description='secure':Organization='secure':Fairshare=16:GrpTRES=gres/gpu=16:" in acc
    can = {(g.who.split(" ")[0], g.layer): g.can for g in access.table(r)}
    assert "at most 16 GPUs at once (GrpTRES)" in can[("tenant:vision", "slurm")]
    assert "at most 8 GPUs at once (ResourceQuota)" in can[("tenant:vision", "kubernetes")]
    assert "partitions train, debug" in can[("tenant:vision", "slurm")]
