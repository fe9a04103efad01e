"""Tenant namespaces: Pod Security labels, GPU ResourceQuota, LimitRange, default-deny network
policies with the allowances the definition grants, RBAC for the tenant's groups, LocalQueues."""

from __future__ import annotations

from ... import access
from ...resolve import Resolved
from . import image_policy
from .common import GPU, L_NS_NAME, L_TENANT, dns_name, gpu_nodes, per_gpu
from .kueue import local_queues, quotas


def pod_security(resolved: Resolved, tenant: str) -> str:
    t = resolved.definition.tenants[tenant]
    if t.kubernetes.pod_security:
        return t.kubernetes.pod_security
    return "restricted" if t.isolation.level == "dedicated" else "baseline"


def gpu_ceiling(resolved: Resolved, tenant: str) -> int:
    """GPUs the tenant's pods may request at once in Kubernetes: its queues' nominal plus what they may
    borrow, never above reserved + burst."""
    t = resolved.definition.tenants[tenant]
    q = quotas(resolved)
    total = 0
    for name in dict.fromkeys(t.kubernetes.queues):
        qq = q.get(name)
        if qq and qq.tenant == tenant:
            total += qq.nominal + (qq.borrowing or 0)  # None: not in a cohort, nothing to borrow
    return min(total, t.quota.reserved_gpus + t.quota.burst_gpus)


def egress_locked(resolved: Resolved, tenant: str) -> bool:
    """Dedicated tenants isolated by network policy get default-deny egress too."""
    iso = resolved.definition.tenants[tenant].isolation
    return iso.level == "dedicated" and iso.network == "network-policy"


def objects(resolved: Resolved, tenant: str) -> list[dict]:
    d = resolved.definition
    t = d.tenants[tenant]
    tk = t.kubernetes
    ns = tk.namespace
    minor = "v" + resolved.set.kubernetes_minor
    ps = pod_security(resolved, tenant)
    common = {L_TENANT: tenant}

    def meta(name: str) -> dict:
        return {"name": name, "namespace": ns, "labels": dict(common)}

    objs: list[dict] = [{
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "labels": {
            **common,
            "clusterdef.dev/isolation": t.isolation.level,
            "pod-security.kubernetes.io/enforce": ps,
            "pod-security.kubernetes.io/enforce-version": minor,
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/warn-version": minor,
            # sigstore policy-controller admits only allowed, signed images here (image_policy.py)
            **({image_policy.INCLUDE_LABEL: "true"} if image_policy.governed(resolved) else {}),
        }},
    }, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("gpu-quota"),
        "spec": {"hard": {f"requests.{GPU}": str(gpu_ceiling(resolved, tenant))}},
    }]

    # LimitRange: a container asks for at most one node's GPUs, and gets a CPU/memory request sized
    # to one GPU's share of a node when it names none.
    kq = d.kubernetes.kueue if d.kubernetes else None
    groups = sorted({g for q in tk.queues if kq and q in kq.queues for g in kq.flavors[kq.queues[q].flavor].node_groups})
    per_node = max((gpu_nodes(d, g)[1] for g in groups), default=0)
    cpu, mem = per_gpu(d, groups) if groups else (0, 0)
    limit: dict = {"type": "Container"}
    if per_node:
        limit["max"] = {GPU: str(per_node)}
    limit["defaultRequest"] = {"cpu": str(max(1, cpu // 2)) if cpu else "1", "memory": f"{max(1, mem // 2)}Gi" if mem else "2Gi"}
    objs.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": meta("container-defaults"),
                 "spec": {"limits": [limit]}})

    locked = egress_locked(resolved, tenant)
    objs.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta("default-deny"),
                 "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"] if locked else ["Ingress"]}})
    same_ns = [{"podSelector": {}}]
    objs.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                 "metadata": meta("allow-same-namespace"),
                 "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"] if locked else ["Ingress"],
                          "ingress": [{"from": same_ns}], **({"egress": [{"to": same_ns}]} if locked else {})}})
    if tk.allow_from_namespaces:
        objs.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                     "metadata": meta("allow-from-namespaces"),
                     "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [
                         {"namespaceSelector": {"matchExpressions": [
                             {"key": L_NS_NAME, "operator": "In", "values": sorted(set(tk.allow_from_namespaces))}]}}]}]}})
    if locked:
        objs.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                     "metadata": meta("allow-egress-platform"),
                     "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [
                         {"to": [{"namespaceSelector": {"matchLabels": {L_NS_NAME: "kube-system"}},
                                  "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                          "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                         {"to": [{"namespaceSelector": {"matchExpressions": [
                             {"key": L_TENANT, "operator": "DoesNotExist"}]}}]},
                     ]}})

    for group in access.tenant_groups(d, tenant):  # identity.tenant_groups, then the namespace's own
        objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": meta(f"{dns_name(group)}-edit"),
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                   "name": access.oidc_group(d, group)}]})
    if d.kubernetes:
        objs.extend(local_queues(resolved, tenant))
    return objs
