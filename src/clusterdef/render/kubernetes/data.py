"""Datasets on Kubernetes (docs/data.md): in each authorised tenant's namespace, and in no other, a
PersistentVolume of the dataset's path pre-bound (claimRef) to a read-only claim `dataset-<name>`, and an
egress NetworkPolicy for the pods labelled `clusterdef.dev/dataset: <name>`: DNS, their own namespace and
the dataset's `destinations.egress_cidrs`, nothing else. A ValidatingAdmissionPolicy refuses a pod that
mounts a `dataset-*` claim without carrying that claim's label, so every pod that can read it is held by
the egress policy.

NetworkPolicies add up (Kubernetes docs, "Network Policies": a pod may make the connections the union of
the policies selecting it allows): the namespace's own policies that open egress wider (allow-egress-networks,
allow-egress-platform in kubernetes/tenants/<tenant>.yaml) leave the labelled pods out. What clusterdef cannot
close: a tenant's group has `edit` in its namespace, which may create NetworkPolicies of its own (docs/data.md).
A `local` PersistentVolume names a path on the node (the filesystem's mount there) and node affinity to
the node groups where the dataset is mounted (storage/mounts/<group>/)."""

from __future__ import annotations

import json

from ... import datasets
from ...resolve import Resolved
from .common import L_GROUP, L_NS_NAME, L_TENANT

PREFIX = "clusterdef.dev"
L_DATASET = f"{PREFIX}/dataset"
CLAIM_PREFIX = "dataset-"
API = "admissionregistration.k8s.io/v1"
POLICY = "clusterdef-dataset-claims"


def claim_name(name: str) -> str:
    return CLAIM_PREFIX + name


def objects(resolved: Resolved, name: str) -> list[dict]:
    d = resolved.definition
    ds = d.datasets[name]
    size = f"{ds.quota_tib:g}Ti" if ds.quota_tib is not None and float(ds.quota_tib).is_integer() else (
        f"{round(ds.quota_tib * 1024)}Gi" if ds.quota_tib is not None else "1Gi")
    out: list[dict] = []
    for tenant, groups in datasets.namespaces(d, name).items():
        tk = d.tenants[tenant].kubernetes
        assert tk is not None  # datasets.namespaces keeps tenants with a namespace only
        ns = tk.namespace
        labels = {L_TENANT: tenant, L_DATASET: name, f"{PREFIX}/classification": ds.classification}
        pv = f"{CLAIM_PREFIX}{name}-{ns}"
        out.append({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv, "labels": dict(labels)},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadOnlyMany"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "", "volumeMode": "Filesystem",
                     "local": {"path": ds.path},
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                                  "name": claim_name(name)},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": L_GROUP, "operator": "In", "values": sorted(groups)}]}]}}}})
        out.append({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name(name), "namespace": ns, "labels": dict(labels)},
            "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": pv,
                     "resources": {"requests": {"storage": size}}}})
        egress: list[dict] = [
            {"to": [{"namespaceSelector": {"matchLabels": {L_NS_NAME: "kube-system"}},
                     "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
             "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
            {"to": [{"podSelector": {}}]}]
        if ds.destinations.egress_cidrs:
            egress.append({"to": [{"ipBlock": {"cidr": str(c)}} for c in ds.destinations.egress_cidrs]})
        out.append({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{CLAIM_PREFIX}{name}-egress", "namespace": ns, "labels": dict(labels)},
            "spec": {"podSelector": {"matchLabels": {L_DATASET: name}}, "policyTypes": ["Egress"], "egress": egress}})
    return out


CLAIM_RULE = (
    "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.persistentVolumeClaim) || "
    f"!v.persistentVolumeClaim.claimName.startsWith({json.dumps(CLAIM_PREFIX)}) || "
    f"(has(object.metadata.labels) && {json.dumps(L_DATASET)} in object.metadata.labels && "
    f"v.persistentVolumeClaim.claimName == {json.dumps(CLAIM_PREFIX)} + object.metadata.labels[{json.dumps(L_DATASET)}]))")


def admission(resolved: Resolved) -> list[dict]:
    """The claim-label policy, bound to the tenants' namespaces; nothing without a dataset in a namespace."""
    d = resolved.definition
    if not any(datasets.namespaces(d, n) for n in d.datasets):
        return []
    return [{
        "apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": POLICY},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
                 "validations": [{"expression": CLAIM_RULE, "reason": "Forbidden",
                                  "message": f"a pod mounting a dataset claim (dataset-<name>) carries the label "
                                             f"{L_DATASET}: <name>, so the dataset's egress policy holds it"}]},
    }, {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": POLICY},
        "spec": {"policyName": POLICY, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchExpressions": [
                     {"key": L_TENANT, "operator": "Exists"}]}}},
    }]
