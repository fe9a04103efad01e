"""Tenant namespaces: Pod Security labels, GPU (and storage) ResourceQuota, LimitRange, default-deny
network policies with the allowances the definition grants (ingress always, egress too for dedicated
tenants), RBAC for the tenant's groups, LocalQueues; for a tenant isolated by partition key on nodes
of its own, a NetworkAttachmentDefinition carrying its PKey; for a tenant whose filesystem is mounted
where its pods run, a StorageClass, PersistentVolume and claim of its folder."""

from __future__ import annotations

import json

from ... import access, capacity, datasets, privilege, segmentation, tenancy
from ...errors import present
from ...model.tenants import TenantKubernetes
from ...resolve import Resolved
from ...fabric.rails import rail_fabric, rail_ports
from ..network.roce import job_env
from . import image_policy
from .common import GPU, L_GROUP, L_NS_NAME, L_TENANT, dns_name, gpu_nodes, per_gpu
from .data import L_DATASET
from .kueue import local_queues

NAD_API = "k8s.cni.cncf.io/v1"
IB_NETWORK = "ib-pkey"
"""Name of the tenant's InfiniBand NetworkAttachmentDefinition (pods: k8s.v1.cni.cncf.io/networks)."""
NO_PROVISIONER = "kubernetes.io/no-provisioner"


def tenant_kubernetes(resolved: Resolved, tenant: str) -> TenantKubernetes:
    """The tenant's `kubernetes` mapping: the objects here are made only for tenants that have one."""
    return present(resolved.definition.tenants[tenant].kubernetes, f"tenants.{tenant}.kubernetes")


def tenant_filesystem(resolved: Resolved, tenant: str) -> str:
    """The tenant's `storage.filesystem`: storage objects are made only where tenancy.kubernetes_storage
    found it."""
    s = resolved.definition.tenants[tenant].storage
    return present(s.filesystem if s else None, f"tenants.{tenant}.storage.filesystem")


def pod_security(resolved: Resolved, tenant: str) -> str:
    t = resolved.definition.tenants[tenant]
    tk = tenant_kubernetes(resolved, tenant)
    if tk.pod_security:
        return tk.pod_security
    if privilege.tenant_features(resolved.definition).get(tenant):
        return "privileged"  # approved pod features: admission.privileged_objects limits the namespace to them
    return "restricted" if t.isolation.level == "dedicated" else "baseline"


def gpu_ceiling(resolved: Resolved, tenant: str) -> int:
    """GPUs the tenant's pods may request at once (its ResourceQuota): the capacity ledger's Kubernetes
    limit, what its queues can hold (nominal plus what can actually be borrowed), within reserved + burst."""
    plane = capacity.of(resolved.definition, tenant).kubernetes
    return plane.limit if plane else 0


def egress_locked(resolved: Resolved, tenant: str) -> bool:
    """Dedicated tenants get default-deny egress too (DNS and their own namespace stay open)."""
    return resolved.definition.tenants[tenant].isolation.level == "dedicated"


def storage_names(resolved: Resolved, tenant: str) -> tuple[str, str]:
    """(StorageClass and PersistentVolume name, PersistentVolumeClaim name) of the tenant's folder."""
    fs = tenant_filesystem(resolved, tenant)
    return f"{tenant_kubernetes(resolved, tenant).namespace}-{fs}", fs


def storage_objects(resolved: Resolved, tenant: str) -> list[dict]:
    """Static provisioning of `<mount>/<tenant>`, already mounted on the nodes: a StorageClass of its
    own (kubernetes.io/no-provisioner, so nothing else is ever provisioned in it), one `local`
    PersistentVolume pinned to the groups that mount the filesystem, pre-bound (claimRef) to the
    claim in the tenant's namespace, so no other namespace can bind it. Bytes are limited by the
    filesystem's project quota, not by Kubernetes."""
    d = resolved.definition
    groups = tenancy.kubernetes_storage(d, tenant)
    if not groups:
        return []
    ns = tenant_kubernetes(resolved, tenant).namespace
    s = present(d.tenants[tenant].storage, f"tenants.{tenant}.storage")
    fs = d.filesystems[tenant_filesystem(resolved, tenant)]
    name, claim = storage_names(resolved, tenant)
    size = f"{s.quota_tib:g}Ti" if float(s.quota_tib).is_integer() else f"{round(s.quota_tib * 1024)}Gi"
    labels = {L_TENANT: tenant}
    return [{
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "labels": dict(labels)},
        "provisioner": NO_PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain",
    }, {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": name,
            "volumeMode": "Filesystem",
            "local": {"path": f"{fs.mount}/{tenant}"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns, "name": claim},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": L_GROUP, "operator": "In", "values": sorted(groups)}]}]}},
        },
    }, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": ns, "labels": dict(labels)},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": name, "volumeName": name,
                 "resources": {"requests": {"storage": size}}},
    }]


def ib_attachment(resolved: Resolved, tenant: str) -> dict | None:
    """The tenant's InfiniBand network: ib-sriov CNI with the tenant's PKey (the one OpenSM's
    partitions.conf gives its HCA ports, from tenancy.pkey) and ibKubernetesEnabled, so
    ib-kubernetes adds each pod's GUID to that PKey (pods annotated mellanox.infiniband.app).
    No IPAM: RDMA verbs on InfiniBand need no IP address on the interface."""
    d = resolved.definition
    if not tenancy.rdma_pkey_attachment(d, tenant):
        return None
    ns = tenant_kubernetes(resolved, tenant).namespace
    config = {"cniVersion": "0.3.1", "name": IB_NETWORK, "type": "ib-sriov",
              "pkey": f"0x{tenancy.pkey(d, tenant):04x}", "link_state": "enable", "rdmaIsolation": True,
              "ibKubernetesEnabled": True}
    return {"apiVersion": NAD_API, "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": IB_NETWORK, "namespace": ns, "labels": {L_TENANT: tenant}},
            "spec": {"config": json.dumps(config, sort_keys=True)}}


ROCE_CONFIGMAP = "clusterdef-roce"


def roce_env(resolved: Resolved, tenant: str) -> dict[str, str]:
    """NCCL/UCX settings for the tenant's pods on RoCE rails (GID index, traffic class of the fabric's
    lossless priority: render/network/roce.job_env), for pods to take with `envFrom: configMapRef
    clusterdef-roce`. No device list: the pod's RDMA devices are the ones its device plugin gave it, which
    NCCL and UCX find by themselves. {} when none of its groups has RoCE rails (or they disagree)."""
    d = resolved.definition
    envs = []
    for g in tenancy.tenant_pod_groups(d, tenant):
        rf = rail_fabric(d, g)
        if rf is not None and rail_ports(d, g) and rf[1].qos is not None:
            envs.append(job_env(rf[1].qos))
    return envs[0] if envs and all(e == envs[0] for e in envs) else {}


def objects(resolved: Resolved, tenant: str) -> list[dict]:
    d = resolved.definition
    t = d.tenants[tenant]
    tk = tenant_kubernetes(resolved, tenant)
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
    }]
    storage = storage_objects(resolved, tenant)
    hard = {f"requests.{GPU}": str(gpu_ceiling(resolved, tenant))}
    if storage:
        pv = storage[1]
        size, sc = pv["spec"]["capacity"]["storage"], pv["spec"]["storageClassName"]
        hard["requests.storage"] = size
        hard[f"{sc}.storageclass.storage.k8s.io/requests.storage"] = size
    objs.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("gpu-quota"),
                 "spec": {"hard": hard}})

    # LimitRange: a container asks for at most one node's GPUs, and gets a CPU/memory request sized
    # to half of one GPU's share of a node when it names none (a GPU container and one sidecar fill
    # that share, so the tenant's queues hold all its GPUs). `default` GPUs 0: LimitRanger defaults a
    # missing limit to `default`, and without one to `max` (SetDefaults_LimitRangeItem, Kubernetes
    # v1.34.2 pkg/apis/core/v1/defaults.go), so every container naming no GPU (sidecar, init, CPU-only
    # pod) would ask for a whole node's GPUs; the request then follows the limit.
    kq = d.kubernetes.kueue if d.kubernetes else None
    groups = sorted({g for q in tk.queues if kq and q in kq.queues for f in kq.queues[q].flavor_names()
                     for g in kq.flavors[f].node_groups})
    per_node = max((gpu_nodes(d, g)[1] for g in groups), default=0)
    cpu, mem = per_gpu(d, groups) if groups else (0, 0)
    limit: dict = {"type": "Container"}
    if per_node:
        limit["default"] = {GPU: "0"}
        limit["max"] = {GPU: str(per_node)}
    limit["defaultRequest"] = {"cpu": str(max(1, cpu // 2)) if cpu else "1", "memory": f"{max(1, mem // 2)}Gi" if mem else "2Gi"}
    objs.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": meta("container-defaults"),
                 "spec": {"limits": [limit]}})

    locked = egress_locked(resolved, tenant)
    # Pods holding a dataset (labelled clusterdef.dev/dataset) are left out of the policies that open egress
    # beyond DNS and the namespace: the dataset's own policy (kubernetes/data/<name>.yaml) is their way out.
    held = any(tenant in datasets.namespaces(d, n) for n in d.datasets)
    wide_pods: dict = {"matchExpressions": [{"key": L_DATASET, "operator": "DoesNotExist"}]} if held else {}
    objs.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta("default-deny"),
                 "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"] if locked else ["Ingress"]}})
    same_ns: list[dict] = [{"podSelector": {}}]
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
                     "spec": {"podSelector": dict(wide_pods), "policyTypes": ["Egress"], "egress": [
                         {"to": [{"namespaceSelector": {"matchLabels": {L_NS_NAME: "kube-system"}},
                                  "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                          "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                         {"to": [{"namespaceSelector": {"matchExpressions": [
                             {"key": L_TENANT, "operator": "DoesNotExist"}]}}]},
                     ]}})

    roce = roce_env(resolved, tenant)
    if roce:
        objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(ROCE_CONFIGMAP), "data": roce})

    if segmentation.policed(d, tenant):
        # egress outside the cluster only to the tenant's networks, the BMC network cut out of each
        # (segmentation.py; `management-exposed` refuses a network that lies inside it)
        rules: list[dict] = [] if locked else [{"to": [{"namespaceSelector": {}}]}]  # shared: the cluster stays reachable
        blocks = segmentation.ip_blocks(d, tenant)
        if blocks:
            rules.append({"to": [{"ipBlock": b} for b in blocks]})
        if rules:
            objs.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                         "metadata": meta("allow-egress-networks"),
                         "spec": {"podSelector": dict(wide_pods), "policyTypes": ["Egress"], "egress": rules}})

    for group in access.tenant_groups(d, tenant):  # identity.tenant_groups, then the namespace's own
        objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": meta(f"{dns_name(group)}-edit"),
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                   "name": access.oidc_group(d, group)}]})
    nad = ib_attachment(resolved, tenant) if d.kubernetes else None
    if nad:
        objs.append(nad)
    objs.extend(storage)
    if d.kubernetes:
        objs.extend(local_queues(resolved, tenant))
    return objs
