"""Signed images for tenants' pods, enforced at admission by the sigstore policy-controller
(https://docs.sigstore.dev/policy-controller/overview/):

- one ClusterImagePolicy (policy.sigstore.dev/v1beta1) whose `images` globs are the allowed
  registries and whose authorities are the definition's public keys (or a static pass for an
  allow-list without signatures);
- the controller's `config-policy-controller` ConfigMap with `no-match-policy: deny`, so an image
  from any other registry matches no policy and is refused;
- tenants' namespaces carry `policy.sigstore.dev/include: "true"` (tenants.py), the label the
  controller's webhooks select on. Platform namespaces (the operators') are not governed."""

from __future__ import annotations

from ...resolve import Resolved

API = "policy.sigstore.dev/v1beta1"
NAMESPACE = "cosign-system"
INCLUDE_LABEL = "policy.sigstore.dev/include"
POLICY = "clusterdef-tenant-images"


def governed(resolved: Resolved) -> bool:
    k = resolved.definition.kubernetes
    return k is not None and k.image_policy is not None


def objects(resolved: Resolved) -> list[dict]:
    k = resolved.definition.kubernetes
    p = k.image_policy if k is not None else None
    if p is None:
        return []
    keys = resolved.signing_keys or {}
    if p.require_signatures:
        authorities = [{"name": name, "key": {"data": keys[name], "hashAlgorithm": "sha256"}} for name in p.keys]
    else:
        authorities = [{"name": "allow-list", "static": {"action": "pass"}}]
    labels = {"app.kubernetes.io/managed-by": "clusterdef"}
    return [
        {"apiVersion": API, "kind": "ClusterImagePolicy", "metadata": {"name": POLICY, "labels": labels},
         "spec": {"mode": p.mode, "images": [{"glob": f"{r}/**"} for r in p.registries],
                  "authorities": authorities}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "config-policy-controller", "namespace": NAMESPACE, "labels": labels},
         "data": {"no-match-policy": "deny" if p.mode == "enforce" else "warn"}},
    ]
