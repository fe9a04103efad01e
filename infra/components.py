"""Thin ComponentResources around the pure Kubernetes renderers of clusterdef.

Each component receives data already built by `clusterdef.render.kubernetes.plan()`, the same data
`clusterdef render` writes to kubernetes/, and only turns it into Pulumi resources (parent=self)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from clusterdef.render.kubernetes import common, nvidia_dra

NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"


def k8s_object(name: str, obj: dict, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One rendered Kubernetes object as the typed Pulumi resource of its kind (CustomResource for CRDs)."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "Namespace":
        return k8s.core.v1.Namespace(name, metadata=meta, opts=opts)
    if kind == "ResourceQuota":
        return k8s.core.v1.ResourceQuota(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "LimitRange":
        return k8s.core.v1.LimitRange(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "NetworkPolicy":
        return k8s.networking.v1.NetworkPolicy(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "StorageClass":
        return k8s.storage.v1.StorageClass(name, metadata=meta, provisioner=obj["provisioner"],
                                           volume_binding_mode=obj.get("volumeBindingMode"),
                                           reclaim_policy=obj.get("reclaimPolicy"), opts=opts)
    if kind == "PersistentVolume":
        return k8s.core.v1.PersistentVolume(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "PersistentVolumeClaim":
        return k8s.core.v1.PersistentVolumeClaim(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "ValidatingAdmissionPolicy":
        return k8s.admissionregistration.v1.ValidatingAdmissionPolicy(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "ValidatingAdmissionPolicyBinding":
        return k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(name, metadata=meta, spec=obj["spec"],
                                                                            opts=opts)
    if kind == "ClusterRoleBinding":
        return k8s.rbac.v1.ClusterRoleBinding(name, metadata=meta, role_ref=obj["roleRef"], subjects=obj["subjects"],
                                              opts=opts)
    if kind == "RoleBinding":
        return k8s.rbac.v1.RoleBinding(name, metadata=meta, role_ref=obj["roleRef"], subjects=obj["subjects"],
                                       opts=opts)
    return KubernetesObject(name, obj, opts)


class KubernetesObject(pulumi.CustomResource):
    """A custom resource with all its top-level fields. (pulumi_kubernetes' CustomResource only carries
    `spec`; Kueue's WorkloadPriorityClass has `value` and `description` at the top.)"""

    def __init__(self, name: str, obj: dict, opts: pulumi.ResourceOptions | None = None):
        from pulumi_kubernetes import _utilities

        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_utilities.get_version()))
        super().__init__(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", name, dict(obj), opts)


class GpuOperator(pulumi.ComponentResource):
    """Namespace, the GPU Operator Helm release with the rendered values, NVIDIADriver per driver pool."""

    def __init__(self, name: str, release: str, namespace: str, values: dict, nvidia_drivers: list[dict],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("clusterdef:kubernetes:GpuOperator", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ns = k8s.core.v1.Namespace(f"{name}-namespace", metadata={
            "name": namespace, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}, opts=child)
        self.namespace_name = namespace
        self.release = k8s.helm.v3.Release(
            f"{name}-release", name="gpu-operator", chart="gpu-operator", version=release.lstrip("v"),
            repository_opts={"repo": NVIDIA_HELM_REPO}, namespace=namespace, values=values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]))
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        self.drivers = [k8s_object(f"{name}-nvidiadriver-{d['metadata']['name']}", d, after) for d in nvidia_drivers]
        self.register_outputs({"release": self.release.status})


class NetworkOperator(pulumi.ComponentResource):
    """Namespace, the Network Operator Helm release, then its NicClusterPolicy (when rendered)."""

    def __init__(self, name: str, namespace: str, values: dict, nic_cluster_policy: dict | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("clusterdef:kubernetes:NetworkOperator", name, None, opts)
        ns = k8s.core.v1.Namespace(f"{name}-namespace", metadata={
            "name": namespace, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}},
            opts=pulumi.ResourceOptions(parent=self))
        self.release = k8s.helm.v3.Release(
            f"{name}-release", name="network-operator", chart="network-operator",
            version=common.NETWORK_OPERATOR_VERSION.lstrip("v"), repository_opts={"repo": NVIDIA_HELM_REPO},
            namespace=namespace, values=values, opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]))
        self.policy = (k8s_object(f"{name}-nicclusterpolicy", nic_cluster_policy,
                                  pulumi.ResourceOptions(parent=self, depends_on=[self.release]))
                       if nic_cluster_policy is not None else None)
        self.register_outputs({"release": self.release.status})


class NvidiaDra(pulumi.ComponentResource):
    """NVIDIA's DRA driver: its namespace and Helm release with the rendered values, then the ComputeDomains
    (each after the release, whose chart installs their CRD, and after its tenant's namespace)."""

    def __init__(self, name: str, values: dict, compute_domains: list[dict], namespaces: dict[str, pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("clusterdef:kubernetes:NvidiaDra", name, None, opts)
        ns = k8s.core.v1.Namespace(f"{name}-namespace", metadata={"name": nvidia_dra.NAMESPACE},
                                   opts=pulumi.ResourceOptions(parent=self))
        self.release = k8s.helm.v3.Release(
            f"{name}-release", name=nvidia_dra.CHART, chart=nvidia_dra.CHART, version=nvidia_dra.CHART_VERSION,
            repository_opts={"repo": NVIDIA_HELM_REPO}, namespace=nvidia_dra.NAMESPACE, values=values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]))
        self.compute_domains = []
        for o in compute_domains:
            meta = o["metadata"]
            deps = [self.release] + ([namespaces[meta["namespace"]]] if meta["namespace"] in namespaces else [])
            self.compute_domains.append(k8s_object(f"{name}-computedomain-{meta['namespace']}-{meta['name']}", o,
                                                   pulumi.ResourceOptions(parent=self, depends_on=deps)))
        self.register_outputs({"release": self.release.status})


class Kueue(pulumi.ComponentResource):
    """Kueue's chart with the rendered manager configuration, then the cluster-scoped Kueue objects."""

    def __init__(self, name: str, manager_config: dict, objects: list[dict],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("clusterdef:kubernetes:Kueue", name, None, opts)
        self.release = k8s.helm.v3.Release(
            f"{name}-release", name="kueue", chart=KUEUE_CHART, version=common.KUEUE_VERSION.lstrip("v"),
            namespace="kueue-system", create_namespace=True,
            values={"managerConfig": {"controllerManagerConfigYaml": common.dump(manager_config)}},
            opts=pulumi.ResourceOptions(parent=self))
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        self.objects = [k8s_object(f"{name}-{o['kind'].lower()}-{o['metadata']['name']}", o, after) for o in objects]
        self.register_outputs({})


class Monitoring(pulumi.ComponentResource):
    """The Prometheus Operator objects of observability/kubernetes/ (PrometheusRule, PodMonitors,
    ServiceMonitor). Their CRDs (monitoring.coreos.com) come with the site's monitoring stack, which also
    owns `observability.namespace`; an object in a namespace a release here makes (the GPU Operator's,
    kueue-system) waits for that release."""

    def __init__(self, name: str, objects: list[dict], after: dict[str, pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("clusterdef:kubernetes:Monitoring", name, None, opts)
        self.objects = []
        for o in objects:
            meta = o["metadata"]
            deps = [after[meta["namespace"]]] if meta.get("namespace") in after else []
            self.objects.append(k8s_object(f"{name}-{o['kind'].lower()}-{meta['namespace']}-{meta['name']}", o,
                                           pulumi.ResourceOptions(parent=self, depends_on=deps)))
        self.register_outputs({})


_AFTER = {"PersistentVolume": "StorageClass", "PersistentVolumeClaim": "PersistentVolume"}


class Tenant(pulumi.ComponentResource):
    """A tenant's namespace and everything in it (with its cluster-scoped StorageClass and
    PersistentVolume); LocalQueues wait for Kueue, the PersistentVolumeClaim for its volume. The
    NetworkAttachmentDefinition needs Multus' CRD (k8s.cni.cncf.io) on the cluster."""

    def __init__(self, name: str, objects: list[dict], kueue: Kueue | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("clusterdef:kubernetes:Tenant", name, None, opts)
        ns_obj = objects[0]
        assert ns_obj["kind"] == "Namespace"
        self.namespace = k8s_object(f"{name}-namespace", ns_obj, pulumi.ResourceOptions(parent=self))
        self.namespace_name = ns_obj["metadata"]["name"]
        self.objects = []
        made: dict[str, pulumi.Resource] = {}
        for o in objects[1:]:
            deps = [self.namespace] + ([kueue] if kueue and o["apiVersion"].startswith("kueue.x-k8s.io/") else [])
            if _AFTER.get(o["kind"]) in made:  # the volume after its class, the claim after its volume
                deps.append(made[_AFTER[o["kind"]]])
            res = k8s_object(f"{name}-{o['kind'].lower()}-{o['metadata']['name']}", o,
                             pulumi.ResourceOptions(parent=self, depends_on=deps))
            made.setdefault(o["kind"], res)
            self.objects.append(res)
        self.register_outputs({"namespace": ns_obj["metadata"]["name"]})
