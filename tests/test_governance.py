"""governance.changes_needing_approval (issue 31 item 5): every change of a dataset's classification or
authorisations and of a privileged-workload approval, with the group that must approve it. Pure."""

from __future__ import annotations

import copy

import pytest

from clusterdef.governance import changes_needing_approval
from clusterdef.model import Definition


@pytest.fixture(scope="module")
def lab_def(lab_data) -> Definition:
    return Definition.model_validate(lab_data)


def changed(lab_data, edit) -> Definition:
    data = copy.deepcopy(lab_data)
    edit(data)
    return Definition.model_validate(data)


def test_no_change_needs_no_approval(lab_def):
    assert changes_needing_approval(lab_def, lab_def) == []


def test_classification_change_needs_the_datasets_approver(lab_data, lab_def):
    new = changed(lab_data, lambda d: d["datasets"]["imagenet-eu"].update(classification="export-controlled"))
    assert changes_needing_approval(lab_def, new) == [
        {"kind": "dataset-classification", "subject": "datasets.imagenet-eu.classification",
         "group": "data-stewards", "why": "classification restricted -> export-controlled"}]


def test_authorisation_change_without_own_approver_falls_back_to_service_approvers(lab_data, lab_def):
    new = changed(lab_data, lambda d: d["datasets"]["secure-weights"]["tenants"].append("nlp"))
    (c,) = changes_needing_approval(lab_def, new)
    assert c["kind"] == "dataset-authorisation" and c["subject"] == "datasets.secure-weights"
    assert c["group"] == "hpc-admins"  # service.approvers (reflash) in the lab
    assert "tenants: [secure] -> [secure, nlp]" in c["why"]


def test_destination_and_retention_changes_are_named(lab_data, lab_def):
    def edit(d):
        d["datasets"]["imagenet-eu"]["destinations"]["egress_cidrs"].append("198.51.100.0/24")
        d["datasets"]["imagenet-eu"]["retention_days"] = 30
    (c,) = changes_needing_approval(lab_def, changed(lab_data, edit))
    assert "destinations:" in c["why"] and "198.51.100.0/24" in c["why"] and "retention_days: 365 -> 30" in c["why"]


def test_added_and_removed_datasets(lab_data, lab_def):
    def add(d):
        d["datasets"]["new-set"] = {"filesystem": "projects", "path": "/projects/new", "classification": "internal",
                                    "groups": ["g1"], "retention_days": 7, "approver": "stewards-2"}
    kinds = [(c["kind"], c["subject"], c["group"]) for c in changes_needing_approval(lab_def, changed(lab_data, add))]
    assert kinds == [("dataset-added", "datasets.new-set", "stewards-2")]
    gone = changed(lab_data, lambda d: d["datasets"].pop("imagenet-eu"))
    assert [(c["kind"], c["group"]) for c in changes_needing_approval(lab_def, gone)] == [("dataset-removed", "data-stewards")]


def test_approver_change_needs_the_old_approver_too(lab_data, lab_def):
    new = changed(lab_data, lambda d: d["datasets"]["imagenet-eu"].update(approver="someone-else"))
    got = {(c["kind"], c["group"]) for c in changes_needing_approval(lab_def, new)}
    assert ("dataset-authorisation", "someone-else") not in got  # approver is not an authorisation field
    assert ("dataset-approver", "data-stewards") in got


def test_privileged_approval_changes(lab_data, lab_def):
    new = changed(lab_data, lambda d: d["privileged"]["vision-node-debug"]["kubernetes"]["features"].append("privileged"))
    (c,) = changes_needing_approval(lab_def, new)
    assert (c["kind"], c["subject"], c["group"]) == ("privileged-approval", "privileged.vision-node-debug", "hpc-admins")
    assert "host-network, host-pid, privileged" in c["why"]

    def moved(d):
        d["privileged"]["debug-root"]["approver"] = "security-office"
    got = [(c["group"]) for c in changes_needing_approval(lab_def, changed(lab_data, moved))]
    assert got == ["hpc-admins", "security-office"]  # the new approver and the one it replaces
    gone = changed(lab_data, lambda d: d["privileged"].pop("debug-root"))
    (c,) = changes_needing_approval(lab_def, gone)
    assert "withdrawn" in c["why"] and "partitions debug" in c["why"]


def test_no_approver_defined_is_said(lab_data):
    def strip(d):
        d.pop("service")
        d["identity"]["admin_groups"] = ["x"]
        d["datasets"]["secure-weights"].pop("approver", None)
    old = changed(lab_data, strip)
    new = changed(lab_data, lambda d: (strip(d), d["datasets"]["secure-weights"].update(classification="internal")))
    (c,) = changes_needing_approval(old, new)
    assert c["group"] == "x"


def test_a_change_with_no_approver_anywhere_says_so(lab_data):
    def strip(d):
        d.pop("service")
        d.pop("identity")
        d["datasets"]["imagenet-eu"].pop("approver")
    old = changed(lab_data, strip)
    new = changed(lab_data, lambda d: (strip(d), d["datasets"]["imagenet-eu"].update(classification="public")))
    (c,) = changes_needing_approval(old, new)
    assert c["group"] == "" and "no approver group is defined" in c["why"]
