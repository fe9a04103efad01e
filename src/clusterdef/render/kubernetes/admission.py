"""Admission for dedicated nodes: a taint keeps the scheduler from placing other pods on a whole-node
tenant's nodes, but a pod may tolerate any taint it likes, or name its node and skip the scheduler.
A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30), bound to the
tenants' namespaces (those labelled clusterdef.dev/tenant), refuses in them a pod that tolerates
another tenant's taint, tolerates every taint (operator Exists without a key), or names its node at
creation. Kueue's own toleration (from the tenant's flavor) names the namespace's tenant and passes.
System namespaces carry no tenant label and are not affected (their daemon sets tolerate everything)."""

from __future__ import annotations

import json

from ... import privilege, tenancy
from ...resolve import Resolved
from .common import L_NS_NAME, L_TENANT

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


# Privileged workloads (docs/data.md, "Privileged workloads"): the pod features Pod Security's baseline
# level forbids because they give a pod the node (Pod Security Standards, "Baseline": privileged
# containers, host namespaces, hostPath volumes; k8s.io/pod-security-admission policy/check_privileged.go,
# check_hostNamespaces.go, check_hostPathVolumes.go). Each is refused in every namespace but the platform's
# own, except in the namespaces of tenants a `privileged` approval names for it. The namespaces are
# written into the expression (definition names are DNS labels, each written as a CEL string literal with
# json.dumps), so no label a namespace can be given widens it.
PRIVILEGED_NAME = "clusterdef-privileged-pods"
_CONTAINERS = ("(has(object.spec.initContainers) ? object.spec.initContainers : []) + object.spec.containers"
               " + (has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])")
# check_capabilities_baseline.go `capabilities_allowed_1_0`: what a container may add at Pod Security baseline.
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
_CAPS = "[" + ", ".join(json.dumps(c) for c in BASELINE_CAPABILITIES) + "]"
# (feature an approval names, CEL rule that holds when the pod does not use it, what it is). Capabilities beyond
# baseline go with `privileged`, host ports with `host-network`: an approved namespace enforces Pod Security
# `privileged`, so this policy is what keeps the rest of it at baseline.
FEATURE_RULES: tuple[tuple[str, str, str], ...] = (
    ("privileged", f"({_CONTAINERS}).all(c, !has(c.securityContext) || !has(c.securityContext.privileged) "
                   "|| c.securityContext.privileged == false)", "privileged containers"),
    ("privileged", f"({_CONTAINERS}).all(c, !has(c.securityContext) || !has(c.securityContext.capabilities) "
                   f"|| !has(c.securityContext.capabilities.add) || c.securityContext.capabilities.add.all(x, x in {_CAPS}))",
     "capabilities beyond Pod Security baseline"),
    ("host-network", "!has(object.spec.hostNetwork) || object.spec.hostNetwork == false", "hostNetwork"),
    ("host-network", f"({_CONTAINERS}).all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
     "host ports"),
    ("host-pid", "!has(object.spec.hostPID) || object.spec.hostPID == false", "hostPID"),
    ("host-ipc", "!has(object.spec.hostIPC) || object.spec.hostIPC == false", "hostIPC"),
    ("host-path", "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))", "hostPath volumes"),
)


def platform_namespaces(resolved: Resolved) -> list[str]:
    """Namespaces whose own pods need the node (and that no tenant is given): kube-system (kube-proxy, the
    CNI), the GPU Operator's, the Network Operator's and the DRA driver's."""
    from .nvidia_dra import NAMESPACE as DRA, helm_values

    k = resolved.definition.kubernetes
    if k is None:
        return []
    out = ["kube-system", k.gpu_operator.namespace]
    if k.network_operator.enabled:
        out.append(k.network_operator.namespace)
    if helm_values(resolved) is not None:
        out.append(DRA)
    return sorted(set(out))


def approved_namespaces(resolved: Resolved) -> dict[str, list[str]]:
    """feature -> the namespaces an approval opens it in."""
    d = resolved.definition
    out: dict[str, list[str]] = {f: [] for f, _, _ in FEATURE_RULES}
    for tenant, features in privilege.tenant_features(d).items():
        t = d.tenants.get(tenant)
        if t is None or t.kubernetes is None:
            continue
        for f in features:
            out[f].append(t.kubernetes.namespace)
    return {f: sorted(set(ns)) for f, ns in out.items()}


def approval_text(resolved: Resolved) -> list[str]:
    """Each Kubernetes approval as the policy records it: name, approver, reference, tenants and features."""
    return [f"{n}: {', '.join(a.kubernetes.features)} for {', '.join(a.kubernetes.tenants)}, approved by "
            f"{a.approver} ({a.reference})" for n, a in resolved.definition.privileged.items() if a.kubernetes]


def privileged_objects(resolved: Resolved) -> list[dict]:
    if resolved.definition.kubernetes is None:
        return []
    approved = approved_namespaces(resolved)
    validations = []
    for feature, rule, what in FEATURE_RULES:
        ns = approved[feature]
        where = f"namespaceObject.metadata.name in [{', '.join(json.dumps(n) for n in ns)}] || " if ns else ""
        validations.append({"expression": where + f"({rule})",
                            "message": f"{what}: only with a `privileged` approval of {feature} for this "
                                       "namespace's tenant" + (f"; approved in: {', '.join(ns)}" if ns else ""),
                            "reason": "Forbidden"})
    return [{
        "apiVersion": API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": PRIVILEGED_NAME, "annotations": {
            "clusterdef.dev/approvals": "; ".join(approval_text(resolved)) or "none"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"],
                                                    "resources": ["pods", "pods/ephemeralcontainers"]}]},
            "validations": validations,
        },
    }, {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": PRIVILEGED_NAME},
        "spec": {"policyName": PRIVILEGED_NAME, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchExpressions": [
                     {"key": L_NS_NAME, "operator": "NotIn", "values": platform_namespaces(resolved)}]}}},
    }]
