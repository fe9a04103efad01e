"""The Pulumi program's body: validate the definition, build the plan with clusterdef's pure renderers,
and create one component per part. Kept out of __main__.py so tests can run it under mocks."""

from __future__ import annotations

from pathlib import Path

import pulumi

from clusterdef.render.kubernetes import plan as kubernetes_plan
from clusterdef.render.observability import kubernetes_objects as monitoring_objects
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file

from components import GpuOperator, Kueue, Monitoring, NetworkOperator, NvidiaDra, Tenant, k8s_object

PROJECT = Path(__file__).resolve().parent.parent


def deploy(definition_file: str | Path, matrices: str | Path | None = None, today=None) -> dict:
    path = Path(definition_file)
    if not path.is_absolute():
        path = PROJECT / path
    result = validate_file(path, matrices, today)
    if not result.ok:
        raise pulumi.RunError("\n".join(f"{f.where}: {f.code}: {f.message} (hint: {f.hint})" for f in result.errors))
    d = result.definition
    resolved = resolve(d, result.matrix, path.parent)
    pulumi.export("cluster", d.cluster.name)
    pulumi.export("validated_set", resolved.set.name)
    pulumi.export("components", resolved.set.components.model_dump(exclude_none=True))
    p = kubernetes_plan(resolved)
    if p is None:
        return {}
    out: dict = {"gpu_operator": GpuOperator("gpu-operator", p.gpu_operator_release, p.gpu_operator_namespace,
                                             p.gpu_operator_values, p.nvidia_drivers)}
    if p.network_operator_values is not None:
        out["network_operator"] = NetworkOperator("network-operator", p.network_operator_namespace,
                                                  p.network_operator_values, p.nic_cluster_policy)
    out["kueue"] = Kueue("kueue", p.kueue_manager_config, p.kueue_objects)
    out["tenants"] = {name: Tenant(f"tenant-{name}", objs, out["kueue"]) for name, objs in p.tenants.items()}
    if p.dra_driver_values is not None:  # NVLink domains: the DRA driver, then the tenants' ComputeDomains
        namespaces = {t.namespace_name: t.namespace for t in out["tenants"].values()}
        out["nvidia_dra"] = NvidiaDra("nvidia-dra", p.dra_driver_values, p.compute_domains, namespaces)
    if p.admission:  # the policy before its binding
        policy = k8s_object("admission-policy", p.admission[0], pulumi.ResourceOptions())
        out["admission"] = [policy, k8s_object("admission-binding", p.admission[1],
                                               pulumi.ResourceOptions(depends_on=[policy]))]
    for key, objs in (("privileged_pods", p.privileged_pods), ("dataset_admission", p.dataset_admission)):
        if objs:  # privileged pods only where approved; dataset claims only by labelled pods (docs/data.md)
            policy = k8s_object(f"{key}-policy", objs[0], pulumi.ResourceOptions())
            out[key] = [policy, k8s_object(f"{key}-binding", objs[1], pulumi.ResourceOptions(depends_on=[policy]))]
    if p.datasets:  # each dataset's volume, claim and egress policy, in the authorised namespaces after them
        by_ns = {t.namespace_name: t.namespace for t in out["tenants"].values()}
        out["datasets"] = {
            name: [k8s_object(f"dataset-{name}-{o['kind'].lower()}-{o['metadata'].get('namespace', 'cluster')}", o,
                              pulumi.ResourceOptions(depends_on=[by_ns[o["metadata"]["namespace"]]]
                                                     if o["metadata"].get("namespace") in by_ns else []))
                   for o in objs]
            for name, objs in p.datasets.items()}
    if p.cluster_admins is not None:  # cluster-admin for the admin groups only (identity)
        out["cluster_admins"] = k8s_object("cluster-admins", p.cluster_admins, pulumi.ResourceOptions())
    # tenants' images: allowed registries and signatures (sigstore policy-controller)
    out["image_policy"] = [k8s_object(f"image-policy-{o['kind'].lower()}", o, pulumi.ResourceOptions())
                           for o in p.image_policy]
    # alert rules and scrape targets (observability/kubernetes/), after the releases whose namespaces they use
    out["monitoring"] = Monitoring("monitoring", monitoring_objects(resolved), {
        out["gpu_operator"].namespace_name: out["gpu_operator"].release, "kueue-system": out["kueue"].release})
    pulumi.export("gpu_operator_release", p.gpu_operator_release)
    pulumi.export("tenants", sorted(p.tenants))
    return out
