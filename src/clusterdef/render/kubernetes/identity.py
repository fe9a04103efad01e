"""Kubernetes identity: cluster-admin for the admin groups only, and the API server's OIDC
configuration (structured AuthenticationConfiguration: v1beta1 from Kubernetes 1.30, v1 from 1.34,
https://kubernetes.io/docs/reference/config-api/apiserver-config.v1/), with the same group names
and prefix the tenants' RoleBindings use."""

from __future__ import annotations

from ... import access
from ...resolve import Resolved

BINDING = "clusterdef-cluster-admins"


def cluster_admin_binding(resolved: Resolved) -> dict | None:
    d = resolved.definition
    if d.identity is None:
        return None
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": BINDING, "labels": {"app.kubernetes.io/managed-by": "clusterdef"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": access.oidc_group(d, g)}
                         for g in d.identity.admin_groups]}


def authentication_config(resolved: Resolved) -> dict | None:
    d = resolved.definition
    if d.identity is None or d.identity.oidc is None:
        return None
    o = d.identity.oidc
    major, minor = (int(x) for x in resolved.set.kubernetes_minor.split("."))
    version = "v1" if (major, minor) >= (1, 34) else "v1beta1"
    return {"apiVersion": f"apiserver.config.k8s.io/{version}", "kind": "AuthenticationConfiguration",
            "jwt": [{"issuer": {"url": o.issuer, "audiences": [o.client_id]},
                     "claimMappings": {"username": {"claim": o.username_claim, "prefix": ""},
                                       "groups": {"claim": o.groups_claim, "prefix": o.groups_prefix}}}]}
