"""GPU Operator: Helm values for the set's release, per-pool NVIDIADriver resources, and the
ClusterPolicy spec the chart builds from those values (for schema checks and previews)."""

from __future__ import annotations

import copy

from ...resolve import Resolved
from ..observability.dcgm import CONFIGMAP as DCGM_CONFIGMAP
from ..observability.dcgm import counters_csv as dcgm_counters
from .common import DEFAULT_POOL, GPU_TOLERATION, L_DRIVER_POOL, L_SET, gpu_nodes, kubernetes_section
from . import network_operator
from .topology import rdma_groups


def _v(version: str) -> str:
    return version if version.startswith("v") else "v" + version


def kubernetes_gpu_groups(resolved: Resolved) -> list[str]:
    d = resolved.definition
    return [n for n, g in d.nodes.items() if g.control_plane == "kubernetes" and d.hardware[g.hardware].gpu]


def driver_pool_of(resolved: Resolved) -> dict[str, str]:
    """Kubernetes GPU group -> driver pool name (`default` for groups in no pool)."""
    return pools_of(resolved.definition)


def pools_of(definition) -> dict[str, str]:
    """Kubernetes GPU group -> driver pool name, from the definition alone (plan reads both sides)."""
    d = definition
    out = {n: DEFAULT_POOL for n, g in d.nodes.items() if g.control_plane == "kubernetes" and d.hardware[g.hardware].gpu}
    for pname, pool in d.kubernetes.gpu_operator.driver_pools.items() if d.kubernetes else ():
        for g in pool.node_groups:
            out[g] = pname
    return out


def canary_pool(pool: str) -> str:
    """The label value (and NVIDIADriver name) of a pool's canary: `<pool>.canary`. A pool name never
    holds a dot (Name), so it is no other pool's label value: the two selectors are disjoint, and a
    pool's nodes carry one of the two values, so together they cover the pool."""
    return f"{pool}.canary"


def pool_drivers(definition, sets: dict, set_name: str) -> dict[str, str]:
    """Driver pool -> the driver version its NVIDIADriver runs, where the GPU Operator owns the
    driver (empty otherwise): the pool's pinned set's driver, else the cluster's set's."""
    k = definition.kubernetes
    if k is None or k.gpu_operator.driver_owner != "operator":
        return {}
    out = {}
    for pool in dict.fromkeys(pools_of(definition).values()):
        p = k.gpu_operator.driver_pools.get(pool)
        vs = sets.get(p.matrix) if p is not None else sets.get(set_name)
        if vs is not None:
            out[pool] = vs.components.driver
    return out


def rollback_pool_drivers(old, new, sets: dict, old_set: str, rb_set: str) -> dict[str, str]:
    """Driver pool -> the driver its NVIDIADriver runs once the cluster is back on the rollback target
    `rb_set`: on the set it runs now (the rollback point), each pool's driver of the old definition (a pool
    the old one lacks: the target's driver); on another set, that set's driver for every pool (a rollback
    pins the whole cluster to the target, named pools included). Empty where the operator owns no driver."""
    now = pool_drivers(new, sets, rb_set)
    if not now or rb_set not in sets:
        return {}
    if rb_set == old_set:
        before = pool_drivers(old, sets, old_set)
        return {p: before.get(p, sets[rb_set].components.driver) for p in now}
    return {p: sets[rb_set].components.driver for p in now}


def tolerations(resolved: Resolved) -> list[dict]:
    """What the operands (and the driver) must tolerate: the GPU taint and the Kubernetes groups' own taints."""
    d = resolved.definition
    out = [dict(GPU_TOLERATION)]
    for gname in kubernetes_gpu_groups(resolved):
        for t in d.nodes[gname].taints:
            tol = {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} if t.value else \
                {"key": t.key, "operator": "Exists", "effect": t.effect}
            if tol not in out:
                out.append(tol)
    return out


# The driver upgrade controller's node labels (NVIDIA/k8s-operator-libs pkg/upgrade/consts.go,
# UpgradeSkipNodeLabelKeyFmt and UpgradeStateLabelKeyFmt with the driver's name "gpu"): a node labelled
# skip=true stays in upgrade-required (ProcessUpgradeRequiredNodes passes it over) until the label goes;
# the state label reads upgrade-done once its driver pod runs the new driver and the node is uncordoned,
# upgrade-failed when the upgrade failed there.
UPGRADE_SKIP = "nvidia.com/gpu-driver-upgrade.skip"
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_DONE, UPGRADE_FAILED = "upgrade-done", "upgrade-failed"


def upgrade_policy(d) -> dict:
    """The driver upgrade controller's policy (ClusterPolicy `driver.upgradePolicy`): it drains a node
    (`drain`, from upgrade.drain) before it reloads the driver there, at most `maxParallelUpgrades` at a
    time (upgrade.kubernetes_wave_size, at most the Kubernetes GPU nodes). Nodes labelled
    `nvidia.com/gpu-driver-upgrade.skip=true` it leaves alone: clusterdef's waves hold and release them
    (plan/stages.py; GPU Operator docs, gpu-driver-upgrades.html, "Skipping Driver Upgrades")."""
    nodes = sum(gpu_nodes(d, n)[0] for n, g in d.nodes.items()
                if g.control_plane == "kubernetes" and d.hardware[g.hardware].gpu)
    # The Kubernetes wave: how many GPU nodes the operator's upgrade controller takes down at once.
    parallel = max(1, min(d.upgrade.kubernetes_wave_size, nodes or 1))
    return {
        "autoUpgrade": True,
        "maxParallelUpgrades": parallel,
        "maxUnavailable": parallel,
        "gpuPodDeletion": {"force": False, "timeoutSeconds": d.upgrade.drain.grace_seconds, "deleteEmptyDir": True},
        "drain": {"enable": True, "force": False, "timeoutSeconds": d.upgrade.drain.timeout_minutes * 60,
                  "deleteEmptyDir": True},
    }


def values(resolved: Resolved) -> dict:
    d, vs = resolved.definition, resolved.set
    k = kubernetes_section(d)
    op = k.gpu_operator
    c = vs.components
    facts = resolved.matrix.compat.operator(c.gpu_operator)
    # One owner per layer: where the node image installs driver and toolkit (driver_owner: image),
    # the operator's are off (validate's gpu-layer-two-owners checks the images against this).
    owned = op.driver_owner == "operator"
    if owned and kubernetes_gpu_groups(resolved):
        # NVIDIADriver per pool and its canary (nvidia_drivers) carry the driver's image, version and
        # RDMA; from v26.7.0 the chart leaves them out of the ClusterPolicy when its CRD is in use
        driver: dict = {"enabled": True, "nvidiaDriverCRD": {"enabled": True, "deployDefaultCR": False}}
    else:
        driver = {"enabled": owned, "repository": op.driver_repository, "version": c.driver,
                  "rdma": driver_rdma(resolved)}
    driver["upgradePolicy"] = upgrade_policy(d)
    out: dict = {
        "daemonsets": {"tolerations": tolerations(resolved)},
        "mig": {"strategy": op.mig_strategy},
        "driver": driver,
        "toolkit": {"enabled": owned, "version": _v(c.container_toolkit)},
    }
    device_plugin = (facts.model_extra or {}).get("device_plugin") if facts else None
    out["devicePlugin"] = {"enabled": True, **({"version": _v(str(device_plugin))} if device_plugin else {})}
    out["dcgmExporter"] = {"enabled": op.dcgm_exporter.enabled,
                           "serviceMonitor": {"enabled": op.dcgm_exporter.enabled and op.dcgm_exporter.service_monitor}}
    if op.dcgm_exporter.enabled:  # the chart creates the ConfigMap of counters the observability rules read
        out["dcgmExporter"]["config"] = {"name": DCGM_CONFIGMAP, "create": True, "data": dcgm_counters(resolved)}
    out["migManager"] = {"enabled": op.mig_strategy != "none",
                         "config": {"default": f"all-{op.mig_profile}" if op.mig_profile else "all-disabled"}}
    return out


def driver_rdma(resolved: Resolved) -> dict:
    """GPUDirect RDMA of the operator's driver: it needs MOFED, the host's DOCA-OFED or the Network
    Operator's container."""
    source = network_operator.mofed(resolved)
    rdma = bool(kubernetes_section(resolved.definition).network_operator.enabled and rdma_groups(resolved)
                and source is not None)
    return {"enabled": rdma, "useHostMofed": rdma and source == "host"}


def nvidia_drivers(resolved: Resolved) -> list[dict]:
    """Where the GPU Operator owns the driver: one NVIDIADriver per driver pool (`default` for the
    Kubernetes GPU groups in no pool) and one for the pool's canary (`<pool>.canary`), both at the
    pool's driver. Nodes join labelled with their pool; a rollout labels its canary hosts
    `<pool>.canary` and applies that object first, so they run the new driver while the rest of
    the pool stays on the old one until the control-plane stage moves the pool's own object."""
    op = kubernetes_section(resolved.definition).gpu_operator
    if op.driver_owner != "operator" or not kubernetes_gpu_groups(resolved):
        return []
    tol, rdma = tolerations(resolved), driver_rdma(resolved)
    pools = [(DEFAULT_POOL, resolved.set)] + [(n, resolved.matrix.sets[p.matrix]) for n, p in op.driver_pools.items()]
    pools = [(name, vs) for pool, vs in pools for name in (pool, canary_pool(pool))]
    return [{
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": name, "labels": {L_SET: vs.name}},
        "spec": {
            "driverType": "gpu",
            "repository": op.driver_repository,
            "image": "driver",
            "version": vs.components.driver,
            "nodeSelector": {L_DRIVER_POOL: name},
            "tolerations": copy.deepcopy(tol),
            **({"rdma": rdma} if rdma["enabled"] else {}),
        },
    } for name, vs in pools]


def cluster_policy_spec(vals: dict) -> dict:
    """The ClusterPolicy `spec` the chart's templates/clusterpolicy.yaml builds from these values, for
    the keys clusterdef sets. Sections map one to one, except two renames: driver.upgradePolicy.
    gpuPodDeletion is spec podDeletion, and driver.nvidiaDriverCRD.enabled is spec
    driver.useNvidiaDriverCRD (deployDefaultCR only steers the chart, as dcgmExporter.config's create
    and data do)."""
    spec = copy.deepcopy(vals)
    driver = spec.get("driver", {})
    crd = driver.pop("nvidiaDriverCRD", None)
    if crd is not None:
        driver["useNvidiaDriverCRD"] = crd.get("enabled", False)
    policy = driver.get("upgradePolicy")
    if policy and "gpuPodDeletion" in policy:
        policy["podDeletion"] = policy.pop("gpuPodDeletion")
    config = spec.get("dcgmExporter", {}).get("config")
    if config:  # create/data make the chart write the ConfigMap; the spec names it
        spec["dcgmExporter"]["config"] = {"name": config["name"]}
    return spec
