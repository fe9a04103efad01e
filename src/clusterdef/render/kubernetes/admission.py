"""Admission for dedicated nodes: a taint keeps the scheduler from placing other pods on a whole-node
tenant's nodes, but a pod may tolerate any taint it likes, or name its node and skip the scheduler.
A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30), bound to the
tenants' namespaces (those labelled clusterdef.dev/tenant), refuses in them a pod that tolerates
another tenant's taint, tolerates every taint (operator Exists without a key), or names its node at
creation. Kueue's own toleration (from the tenant's flavor) names the namespace's tenant and passes.
System namespaces carry no tenant label and are not affected (their daemon sets tolerate everything)."""

from __future__ import annotations

from ... import tenancy
from ...resolve import Resolved
from .common import L_TENANT

API = "admissionregistration.k8s.io/v1"
NAME = "clusterdef-dedicated-nodes"

VALIDATIONS = [
    {"expression": f"!has(object.spec.tolerations) || object.spec.tolerations.all(t, !has(t.key) || "
                   f"t.key != '{L_TENANT}' || (has(t.value) && "
                   f"t.value == namespaceObject.metadata.labels['{L_TENANT}']))",
     "message": "a pod may tolerate only its own tenant's taint (clusterdef.dev/tenant)",
     "reason": "Forbidden"},
    {"expression": "!has(object.spec.tolerations) || object.spec.tolerations.all(t, "
                   "(has(t.key) && t.key != '') || !has(t.operator) || t.operator != 'Exists')",
     "message": "a tenant's pod may not tolerate every taint (operator Exists without a key)",
     "reason": "Forbidden"},
    {"expression": "request.operation != 'CREATE' || !has(object.spec.nodeName) || object.spec.nodeName == ''",
     "message": "a tenant's pod may not name its node (spec.nodeName skips the scheduler and the taints)",
     "reason": "Forbidden"},
]


def objects(resolved: Resolved) -> list[dict]:
    """The policy and its binding, when a whole-node tenant owns Kubernetes nodes; else nothing."""
    if not tenancy.kubernetes_owner(resolved.definition):
        return []
    return [{
        "apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
            "validations": [dict(v) for v in VALIDATIONS],
        },
    }, {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": NAME},
        "spec": {"policyName": NAME, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchExpressions": [
                     {"key": L_TENANT, "operator": "Exists"}]}}},
    }]
