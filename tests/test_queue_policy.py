"""Queue policy statements (service.queue_policy, docs/service.md#queue-policy): compiled into the Slurm and
Kueue settings, agreeing with what the definition says itself, refused where no scheduler would enforce them,
and the Kueue side's admission policy walked with the consumer-semantics oracle (tests/k8s_semantics.py).
The Slurm side on a real slurmctld: tests/test_slurm_qos_tiers.py::test_the_queue_policy_holds_a_tenants_jobs."""

from __future__ import annotations

import copy

import pytest
import yaml

from clusterdef.model import Definition
from clusterdef.render import render_all
from clusterdef.render.kubernetes.kueue import MAX_EXEC_LABEL, QUEUE_LABEL
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml
from k8s_semantics import vap_violations


def findings(data: dict, tmp_path) -> list[tuple[str, str]]:
    """(code, dotted path) of every error of the definition `data`."""
    r = validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, TODAY)
    return [(f.code, ".".join(map(str, f.path))) for f in r.errors]


def test_the_lab_statements_set_the_partitions_qos_and_queues(lab):
    d = Definition.model_validate(lab)
    assert "max_time" not in lab["slurm"]["partitions"]["train"]  # only the statement says 48 h
    assert d.slurm.partitions["train"].max_time == "2-00:00:00"
    assert d.slurm.partitions["debug"].max_time == "00:30:00"
    assert d.slurm.partitions["secure"].max_time == "7-00:00:00"  # no statement: its own
    assert d.slurm.qos["normal"].max_tres_per_user == {"gres/gpu": 32}
    assert d.kubernetes.kueue.queues["vision-serve"].reclaim_within_cohort == "Never"  # Kueue's own default is Never too
    assert "reclaim_within_cohort" not in lab["kubernetes"]["kueue"]["queues"]["vision-serve"]
    assert d.queue_policy_findings == ()


def test_the_compiled_settings_reach_slurm_conf_qos_sh_and_the_cluster_queues(lab, matrix, tmp_path):
    st = lab["service"]["queue_policy"]
    st["training"]["max_gpus_per_job"] = 8
    st["serving"]["reclaim_lent_gpus"] = False
    st["nlp-batch"] = {"queues": ["nlp-serve"], "max_job_hours": 4}
    st["serving"]["queues"] = ["vision-serve"]
    d = Definition.model_validate(lab)
    tree = render_all(resolve(d, matrix, CLUSTERS))
    conf = tree["slurm/slurm.conf"]
    assert "PartitionName=train " in conf and " MaxTime=2-00:00:00 " in conf.split("PartitionName=train ")[1].split("\n")[0]
    qos = tree["slurm/qos.sh"]
    assert " MaxTRESPerUser=gres/gpu=32 MaxTRESPerJob=gres/gpu=8 " in qos.split("name=normal")[1].split("\n")[0]
    assert " MaxTRESPerJob=gres/gpu=-1 " in qos.split("name=large")[1].split("\n")[0]  # cleared on the others
    cqs = {o["metadata"]["name"]: o for o in yaml.safe_load_all(tree["kubernetes/kueue/clusterqueues.yaml"])}
    assert cqs["vision-serve"]["spec"]["preemption"]["reclaimWithinCohort"] == "Never"
    assert cqs["nlp-serve"]["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    policy, binding = yaml.safe_load_all(tree["kubernetes/admission/queue-max-execution.yaml"])
    assert policy["kind"] == "ValidatingAdmissionPolicy" and binding["spec"]["policyName"] == policy["metadata"]["name"]


def _job(queue: str | None, seconds: str | None = None, owned: bool = False) -> dict:
    labels = {}
    if queue:
        labels[QUEUE_LABEL] = queue
    if seconds is not None:
        labels[MAX_EXEC_LABEL] = seconds
    meta: dict = {"name": "train-1", "namespace": "nlp", "labels": labels}
    if owned:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u",
                                    "controller": True}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {}}


def test_a_queue_with_max_job_hours_admits_only_jobs_that_say_they_stop_in_time(lab, matrix):
    """The permitted path (a 4-hour job, a shorter one) and each refusal, through the rendered policy and binding."""
    lab["service"]["queue_policy"]["nlp-batch"] = {"queues": ["nlp-serve"], "max_job_hours": 4}
    lab["service"]["queue_policy"]["serving"]["queues"] = ["vision-serve"]
    d = Definition.model_validate(lab)
    assert d.kubernetes.kueue.queues["nlp-serve"].max_execution_s == 14400
    tree = render_all(resolve(d, matrix, CLUSTERS), ["kubernetes"])
    policy, binding = yaml.safe_load_all(tree["kubernetes/admission/queue-max-execution.yaml"])
    ns = {"metadata": {"name": "nlp", "labels": {"clusterdef.dev/tenant": "nlp"}}}

    def check(obj, resource="jobs", op="CREATE"):
        return vap_violations(policy, binding, ns, obj, op, resource)

    assert check(_job("nlp-serve", "14400")) == []
    assert check(_job("nlp-serve", "600"), "pytorchjobs", "UPDATE") == []
    assert len(check(_job("nlp-serve"))) == 2 - 1  # no label: the first rule (the second passes vacuously)
    for bad in ("14401", "4h", "-1", "0", "99999999999", ""):
        assert check(_job("nlp-serve", bad)) != [], bad
    assert check(_job("vision-serve")) is None  # a queue without the limit: out of scope
    assert check(_job(None)) is None  # no queue: Kueue does not admit it either
    assert check(_job("nlp-serve", owned=True), "pods") is None  # a Job's pod: its Job was checked


@pytest.mark.parametrize("edit, expected", [
    # an explicit setting that says otherwise, at the setting
    (lambda lab: lab["slurm"]["partitions"]["train"].update(max_time="7-00:00:00"),
     ("queue-policy-conflict", "slurm.partitions.train.max_time")),
    (lambda lab: lab["slurm"]["partitions"]["train"].update(max_time="UNLIMITED"),
     ("queue-policy-conflict", "slurm.partitions.train.max_time")),
    (lambda lab: lab["slurm"]["qos"]["normal"].update(max_tres_per_user={"gres/gpu": 16}),
     ("queue-policy-conflict", "slurm.qos.normal.max_tres_per_user.gres/gpu")),
    (lambda lab: lab["kubernetes"]["kueue"]["queues"]["vision-serve"].update(reclaim_within_cohort="Any"),
     ("queue-policy-conflict", "kubernetes.kueue.queues.vision-serve.reclaim_within_cohort")),
    # two statements over one setting
    (lambda lab: lab["service"]["queue_policy"].update(long={"partitions": ["train"], "max_job_hours": 72}),
     ("queue-policy-conflict", "service.queue_policy.long.max_job_hours")),
    # what no scheduler setting holds
    (lambda lab: lab["service"]["queue_policy"]["serving"].update(max_gpus_per_user=8),
     ("queue-policy-not-enforceable", "service.queue_policy.serving.max_gpus_per_user")),
    (lambda lab: lab["service"]["queue_policy"]["training"].update(reclaim_lent_gpus=True),
     ("queue-policy-not-enforceable", "service.queue_policy.training.reclaim_lent_gpus")),
    (lambda lab: lab["service"]["queue_policy"]["debugging"].update(max_gpus_per_job=8),
     ("queue-policy-needs-qos", "service.queue_policy.debugging.partitions.0")),
    (lambda lab: lab["slurm"]["partitions"]["secure"].update(qos="normal"),
     ("queue-policy-qos-shared", "service.queue_policy.training.partitions.0")),
    (lambda lab: lab["service"]["queue_policy"]["training"].update(partitions=["trian"]),
     ("queue-policy-scope-unknown", "service.queue_policy.training.partitions.0")),
    (lambda lab: lab["service"]["queue_policy"]["serving"].update(queues=["vision-srve"]),
     ("queue-policy-scope-unknown", "service.queue_policy.serving.queues.0")),
    (lambda lab: lab["service"]["queue_policy"].update(empty={"max_job_hours": 1}),
     ("queue-policy-scope-empty", "service.queue_policy.empty")),
    (lambda lab: lab["service"]["queue_policy"].update(mute={"partitions": ["secure"]}),
     ("queue-policy-says-nothing", "service.queue_policy.mute")),
])
def test_a_statement_that_cannot_mean_what_it_says_is_an_error(lab, tmp_path, edit, expected):
    edit(lab)
    assert findings(lab, tmp_path) == [expected]


def test_an_explicit_setting_that_agrees_is_fine_and_a_fraction_of_a_minute_is_refused(lab, tmp_path):
    lab["slurm"]["partitions"]["train"]["max_time"] = "48:00:00"
    lab["slurm"]["qos"]["normal"]["max_tres_per_user"] = {"gres/gpu": 32}
    assert findings(lab, tmp_path) == []
    bad = copy.deepcopy(lab)
    bad["service"]["queue_policy"]["debugging"]["max_job_hours"] = 0.001
    assert findings(bad, tmp_path) == [("invalid-value", "service.queue_policy.debugging")]
