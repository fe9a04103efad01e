"""A Kueue queue over several GPU models in order (issue 29 item 5): the ClusterQueue lists its flavors in
the definition's order with flavorFungibility set, Kueue v0.19.2's flavor assigner (tests/k8s_semantics.py
kueue_assign) admits a workload that does not fit the first flavor on the next, and not for a tenant whose
queue has no next flavor; the capacity ledger and validation count quota per flavor."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import k8s_semantics as ks
from clusterdef import capacity
from clusterdef.render.kubernetes import kueue
from clusterdef.resolve import Resolved, resolve
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml
from lab_variants import fallback_flavors


def validated(data: dict, tmp_path: Path):
    return validate_file(dump_yaml(data, tmp_path / "lab-flavors.yaml"), MATRICES, TODAY)


def load(data: dict, tmp_path: Path) -> Resolved:
    result = validated(data, tmp_path)
    assert result.ok, [(f.code, f.message) for f in result.errors]
    return resolve(result.definition, result.matrix, tmp_path)


def queues(r: Resolved) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in kueue.cluster_objects(r) if o["kind"] == "ClusterQueue"}


def gpu_pods(n: int) -> list[dict]:
    return [{"spec": {"containers": [{"name": f"w{i}", "resources": {
        "requests": {ks.GPU: "1", "cpu": "1", "memory": "1Gi"}, "limits": {ks.GPU: "1"}}}]}} for i in range(n)]


def gpu_quota(cq: dict) -> list[tuple[str, str, str | None]]:
    return [(f["name"], r["nominalQuota"], r.get("borrowingLimit"))
            for f in cq["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"] if r["name"] == ks.GPU]


@pytest.fixture(scope="module")
def lab_flavors(lab_data, tmp_path_factory) -> Resolved:
    return load(fallback_flavors(lab_data), tmp_path_factory.mktemp("flavors"))


def test_flavors_rendered_in_order_with_fungibility(lab_flavors):
    cqs = queues(lab_flavors)
    # vision: H200 first, then H100, each with its own quota; borrowing up to its burst (8) on each
    assert gpu_quota(cqs["vision-serve"]) == [("h200", "4", "8"), ("h100", "4", "8")]
    assert gpu_quota(cqs["nlp-serve"]) == [("h100", "4", "0")]
    for cq in cqs.values():  # Kueue's defaults, written out
        assert cq["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    # each flavor selects the nodes of one GPU model by the flavor label the nodes carry
    flavors = {o["metadata"]["name"]: o for o in kueue.cluster_objects(lab_flavors) if o["kind"] == "ResourceFlavor"}
    assert flavors["h200"]["spec"]["nodeLabels"] == {"clusterdef.dev/kueue-flavor": "h200"}


def test_oracle_next_flavor_when_the_first_is_full(lab_flavors):
    """vision's H200 quota is full, borrowing included: its workload is admitted on H100. nlp's queue has
    no second flavor: the same workload on its full H100 quota waits for preemption, never admitted."""
    cqs = queues(lab_flavors)
    four = gpu_pods(4)
    full = {"h200": {ks.GPU: 12, "cpu": 0, "memory": 0}}
    assert ks.kueue_assign(cqs["vision-serve"], four, [], full)[:2] == ("h100", ks.FIT)
    flavor, mode, _ = ks.kueue_assign(cqs["nlp-serve"], four, [], {"h100": {ks.GPU: 4}})
    assert (flavor, mode) == ("h100", ks.PREEMPT)  # admitted only by preempting its own work
    assert ks.kueue_assign(cqs["nlp-serve"], gpu_pods(5), [], {})[0] is None  # over nominal + borrowing 0
    # a workload fitting the first flavor stays there
    assert ks.kueue_assign(cqs["vision-serve"], four, [], {})[:2] == ("h200", ks.FIT)


def test_oracle_borrowing_follows_when_can_borrow(lab_data, lab_flavors, tmp_path):
    """H200's nominal quota used: MayStopSearch (default) borrows H200; TryNextFlavor takes H100's own quota."""
    used = {"h200": {ks.GPU: 4}}
    assert ks.kueue_assign(queues(lab_flavors)["vision-serve"], gpu_pods(4), [], used)[:2] == ("h200", ks.FIT)
    cq = queues(load(fallback_flavors(lab_data, "TryNextFlavor"), tmp_path))["vision-serve"]
    assert cq["spec"]["flavorFungibility"]["whenCanBorrow"] == "TryNextFlavor"
    assert ks.kueue_assign(cq, gpu_pods(4), [], used)[:2] == ("h100", ks.FIT)
    # every flavor would have to borrow: the first borrowing one is kept (isPreferred: ties keep the first)
    both = {"h200": {ks.GPU: 4}, "h100": {ks.GPU: 4}}
    assert ks.kueue_assign(cq, gpu_pods(4), [], both)[:2] == ("h200", ks.FIT)


def test_capacity_counts_quota_per_flavor(lab_flavors):
    d = lab_flavors.definition
    q = capacity.queue_quotas(d)["vision-serve"]
    assert [(s.flavor, s.nominal, s.lending) for s in q.flavors] == [("h200", 4, 0), ("h100", 4, 0)]
    assert capacity.cohort_spare(d) == {"lab": {"h200": 4}}  # H200 GPUs no queue holds
    assert capacity.flavor_nominal(d)["h100"] == [("vision-serve", 1, 4), ("nlp-serve", 0, 4)]
    cap = capacity.of(d, "vision")
    assert cap.kubernetes.nominal == 8 and set(cap.kubernetes.groups) == {"infer", "infer-h200"}
    assert cap.kubernetes.borrowable == 4  # the H200 the root cohort holds; nlp lends no H100


def codes(result) -> dict[str, str]:
    return {f.code: ".".join(map(str, f.path)) for f in result.findings}


def test_fallback_over_flavor_capacity_is_located(lab_data, tmp_path):
    d = fallback_flavors(lab_data)
    d["kubernetes"]["kueue"]["queues"]["vision-serve"]["fallback_flavors"][0]["nominal_gpus"] = 6
    found = codes(validated(d, tmp_path))
    # nlp-serve lists h100 after vision-serve: the last queue quota on the flavor carries the error
    assert found["queue-over-flavor-capacity"] == "kubernetes.kueue.queues.nlp-serve.nominal_gpus"
    d["kubernetes"]["kueue"]["queues"]["nlp-serve"]["flavor"] = "h200"
    d["kubernetes"]["kueue"]["queues"]["vision-serve"]["fallback_flavors"][0]["nominal_gpus"] = 9  # one node: 8
    found = codes(validated(d, tmp_path))
    assert found["queue-over-flavor-capacity"] == "kubernetes.kueue.queues.vision-serve.fallback_flavors.0.nominal_gpus"


def test_fallback_flavor_unknown_or_twice(lab_data, tmp_path):
    d = fallback_flavors(lab_data)
    fb = d["kubernetes"]["kueue"]["queues"]["vision-serve"]["fallback_flavors"]
    fb[0]["flavor"] = "b200"
    assert codes(validated(d, tmp_path))["ref-flavor"] == "kubernetes.kueue.queues.vision-serve.fallback_flavors.0.flavor"
    fb[0]["flavor"] = "h200"
    assert codes(validated(d, tmp_path))["queue-flavor-twice"] == \
        "kubernetes.kueue.queues.vision-serve.fallback_flavors.0.flavor"


def test_tenant_quota_counts_every_flavor(lab_data, tmp_path):
    d = copy.deepcopy(fallback_flavors(lab_data))
    d["tenants"]["vision"]["quota"] = {"reserved_gpus": 4, "burst_gpus": 2}  # 8 nominal over 2 flavors > 6
    assert "queue-over-tenant-quota" in codes(validated(d, tmp_path))


def test_oracle_fungibility_rules():
    """The oracle on its own (shouldTryNextFlavor, isPreferred at v0.19.2): whenCanPreempt MayStopSearch
    stops at a flavor needing preemption; TryNextFlavor moves on and takes a later fit; with no flavor
    fitting, preemption on the first is what is left."""
    def cq(when_can_preempt: str) -> dict:
        flavor = lambda name: {"name": name, "resources": [{"name": ks.GPU, "nominalQuota": "4"}]}  # noqa: E731
        return {"spec": {"resourceGroups": [{"coveredResources": [ks.GPU], "flavors": [flavor("a"), flavor("b")]}],
                         "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": when_can_preempt}}}

    pods = [{"spec": {"containers": [{"name": "w", "resources": {"requests": {ks.GPU: "4"}, "limits": {ks.GPU: "4"}}}]}}]
    a_full = {"a": {ks.GPU: 4}}
    assert ks.kueue_assign(cq("MayStopSearch"), pods, [], a_full)[:2] == ("a", ks.PREEMPT)
    assert ks.kueue_assign(cq("TryNextFlavor"), pods, [], a_full)[:2] == ("b", ks.FIT)
    assert ks.kueue_assign(cq("TryNextFlavor"), pods, [], {**a_full, "b": {ks.GPU: 4}})[:2] == ("a", ks.PREEMPT)
    assert ks.kueue_assign(cq("TryNextFlavor"), pods * 2, [], {})[0] is None  # 8 > 4 on each
