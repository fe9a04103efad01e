"""Node labels and taints per node group, for every group (Slurm-owned ones included): the
cluster, the validated set and the owning control plane are labels on every node, and Slurm-owned
GPU nodes carry taints and a GPU Operator opt-out so nothing in Kubernetes ever uses their GPUs,
even if one is joined by mistake. Kubernetes groups a whole-node tenant owns carry its label and a
`clusterdef.dev/tenant=<tenant>:NoSchedule` taint that only its ResourceFlavor tolerates. Applied
through kubelet flags (the args below) at join time.

Service hosts (docs/services.md): a Kubernetes control-plane node (services kube-control-plane) carries
`node-role.kubernetes.io/control-plane=""` and the `node-role.kubernetes.io/control-plane:NoSchedule` taint,
and no flavor, driver pool, tenant or GPU label; kubelet may not set a `node-role.kubernetes.io` label on
itself (NodeRestriction), so its kubelet args carry the taint and kubeadm's mark-control-plane phase the
label. Hosts with control_plane none run no kubelet and are not listed."""

from __future__ import annotations

from ... import tenancy
from ...resolve import Resolved
from .common import (GPU_TAINT, L_CLUSTER, L_CONTROL_PLANE, L_DRIVER_POOL, L_FLAVOR, L_GPU, L_GROUP, L_HARDWARE,
                     L_SET, kubernetes_section, label_value, tenant_taint)
from .gpu_operator import driver_pool_of
from .topology import node_labels

L_ROLE_CONTROL_PLANE = "node-role.kubernetes.io/control-plane"


def group_labels_taints(resolved: Resolved) -> dict[str, dict]:
    d = resolved.definition
    k = kubernetes_section(d)
    pools = driver_pool_of(resolved)
    flavor_of = {g: f for f, fl in k.kueue.flavors.items() for g in fl.node_groups}
    op = k.gpu_operator
    owned = tenancy.kubernetes_owner(d)
    out: dict[str, dict] = {}
    for gname, g in d.nodes.items():
        if g.control_plane == "none":
            continue
        hw = d.hardware[g.hardware]
        labels = {
            L_CLUSTER: label_value(d.cluster.name),
            L_SET: label_value(resolved.set.name),
            L_CONTROL_PLANE: g.control_plane,
            L_GROUP: gname,
            L_HARDWARE: label_value(g.hardware),
        }
        if hw.gpu:
            labels[L_GPU] = hw.gpu.type
        taints: list[dict] = []
        if "kube-control-plane" in g.services:
            labels[L_ROLE_CONTROL_PLANE] = ""
            taints.append({"key": L_ROLE_CONTROL_PLANE, "effect": "NoSchedule"})
        elif g.control_plane == "slurm":
            # Slurm owns these GPUs: the GPU Operator deploys no operand (no device plugin advertising
            # nvidia.com/gpu) and the taints keep and evict every pod that does not tolerate them.
            if hw.gpu:
                labels["nvidia.com/gpu.deploy.operands"] = "false"
            taints += [{"key": L_CONTROL_PLANE, "value": "slurm", "effect": "NoSchedule"},
                       {"key": L_CONTROL_PLANE, "value": "slurm", "effect": "NoExecute"}]
        else:
            labels.update(k.node_labels)
            if gname in flavor_of:
                labels[L_FLAVOR] = flavor_of[gname]
            if gname in pools:
                labels[L_DRIVER_POOL] = pools[gname]
                if op.mig_strategy != "none":
                    labels["nvidia.com/mig.config"] = f"all-{op.mig_profile}" if op.mig_profile else "all-disabled"
                if k.gpu_node_taint:
                    taints.append(dict(GPU_TAINT))
            if gname in owned:
                taint = tenant_taint(owned[gname])
                labels[taint["key"]] = taint["value"]
                taints.append(taint)
        labels.update(g.labels)
        for t in g.taints:
            taints.append({"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect})
        # kubelet may not label itself with node-role.kubernetes.io/* (NodeRestriction): kubeadm does
        args = ["--node-labels=" + ",".join(f"{k_}={v}" for k_, v in labels.items() if k_ != L_ROLE_CONTROL_PLANE)]
        if taints:
            args.append("--register-with-taints=" + ",".join(
                t["key"] + (f"={t['value']}" if t.get("value") else "") + f":{t['effect']}" for t in taints))
        out[gname] = {"control_plane": g.control_plane, "hosts": g.hosts, "labels": labels, "taints": taints,
                      "kubelet_args": args}
    return out


def document(resolved: Resolved) -> dict:
    d = resolved.definition
    k8s_groups = list(d.groups_of("kubernetes"))
    return {
        "cluster": d.cluster.name,
        "validated_set": resolved.set.name,
        "groups": group_labels_taints(resolved),
        "topology": node_labels(resolved, k8s_groups),
    }
