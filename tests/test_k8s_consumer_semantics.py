"""The permitted path through the consumers of the rendered Kubernetes objects, for every tenant of the
three examples (the golden trees, which test_golden keeps equal to a fresh render): what the API
server's defaulting, LimitRanger, ResourceQuota and Kueue v0.19.2 do with a tenant's pods
(tests/k8s_semantics.py re-states their rules with the source cited), and which GPU nodes the GPU
Operator's and Network Operator's DaemonSets can land on (Kubernetes' ToleratesTaint).

A tenant sold G GPUs must be able to run them: a CPU-only pod, a sidecar and an init container get no
GPU and are admitted even while all G are in use; pods asking for the G GPUs (each with a sidecar) are
admitted by the API server and by their ClusterQueue; one GPU more, or more than a node has in one
container, is refused."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from ruamel.yaml import YAML

import k8s_semantics as ks

GOLDEN = Path(__file__).parent / "golden"
EXAMPLES = ("lab", "estate", "gb200")
yaml = YAML(typ="safe")


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.load_all(path.read_text()) if d] if path.exists() else []


def tenant_files() -> list[Path]:
    return [p for e in EXAMPLES for p in sorted((GOLDEN / e / "kubernetes" / "tenants").glob("*.yaml"))]


def of_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o.get("kind") == kind]


def container(name: str, gpus: int | None = None, **extra) -> dict:
    c: dict = {"name": name, "image": "registry.example/app:1", **extra}
    if gpus is not None:
        c["resources"] = {"limits": {ks.GPU: str(gpus)}}  # what users write: the request follows the limit
    return c


def pod(name: str, gpus: int | None, sidecar: bool = True, init: bool = True, extra_limits: dict | None = None) -> dict:
    main = container("main", gpus)
    if extra_limits:
        main.setdefault("resources", {}).setdefault("limits", {}).update(extra_limits)
    spec: dict = {"containers": [main] + ([container("log-shipper")] if sidecar else [])}
    if init:
        spec["initContainers"] = [container("fetch-weights"), container("proxy", restartPolicy="Always")]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def gpu_ceiling(quotas: list[dict]) -> int:
    hard = [ks.quantity(q["spec"]["hard"][f"requests.{ks.GPU}"]) for q in quotas
            if f"requests.{ks.GPU}" in q["spec"]["hard"]]
    assert hard, "a tenant namespace with no GPU quota"
    return int(min(hard))


def per_container_max(limit_ranges: list[dict], ceiling: int) -> int:
    maxes = [int(ks.quantity(i["max"][ks.GPU])) for lr in limit_ranges for i in lr["spec"]["limits"]
             if ks.GPU in (i.get("max") or {})]
    return min(maxes) if maxes else max(ceiling, 1)


def used_after(used: dict, p: dict) -> dict:
    out = dict(used)
    for k, v in ks.quota_usage(p).items():
        out[k] = out.get(k, 0) + v
    return out


@pytest.mark.parametrize("path", tenant_files(), ids=lambda p: f"{p.parts[-4]}-{p.stem}")
def test_tenant_pods_through_limitranger_and_quota(path):
    objs = docs(path)
    lrs, quotas = of_kind(objs, "LimitRange"), of_kind(objs, "ResourceQuota")
    assert lrs and quotas
    ceiling = gpu_ceiling(quotas)
    per_node = per_container_max(lrs, ceiling)

    # the tenant's GPUs, a node's worth per container at most, each pod with a sidecar and init containers
    used: dict = {}
    left = ceiling
    i = 0
    while left > 0:
        n = min(per_node, left)
        stored, refused = ks.admit(pod(f"gpu-{i}", n), lrs, quotas, used)
        assert not refused, f"{path}: a pod asking {n} of the tenant's {ceiling} GPUs is refused: {refused}"
        assert ks.pod_requests(stored).get(ks.GPU, 0) == n, \
            f"{path}: the sidecar or init containers of a {n}-GPU pod were given GPUs: {ks.pod_requests(stored)}"
        used = used_after(used, stored)
        left -= n
        i += 1
    assert used.get(f"requests.{ks.GPU}", 0) == ceiling

    # with every GPU in use, pods that name no GPU still run and are given none
    for name, p in (("cpu-only", pod("cpu-only", None, sidecar=False, init=False)),
                    ("cpu-with-sidecars", pod("cpu-with-sidecars", None))):
        stored, refused = ks.admit(p, lrs, quotas, used)
        assert not refused, f"{path}: a {name} pod is refused while the tenant's GPUs are in use: {refused}"
        for c in stored["spec"]["containers"] + stored["spec"].get("initContainers", []):
            got = ks.quantity(c["resources"]["requests"].get(ks.GPU, 0))
            assert got == 0, f"{path}: container {c['name']} of a {name} pod asks for {got} GPUs"

    # one GPU more than the tenant holds: refused by the quota
    _, refused = ks.admit(pod("one-more", 1), lrs, quotas, used)
    assert any("exceeded quota" in r for r in refused), refused
    # more than one node's GPUs in one container: refused by the LimitRange (where it sets a max)
    if any(ks.GPU in (i.get("max") or {}) for lr in lrs for i in lr["spec"]["limits"]):
        _, refused = ks.admit(pod("too-big", per_node + 1), lrs, quotas, {})
        assert any(f"maximum {ks.GPU}" in r for r in refused), refused


def rdma_resources(example: str) -> list[str]:
    """`rdma/<resourceName>` of every RDMA shared device the example's NicClusterPolicy hands out."""
    import json
    out = []
    for p in docs(GOLDEN / example / "kubernetes" / "network-operator" / "nicclusterpolicy.yaml"):
        dp = p.get("spec", {}).get("rdmaSharedDevicePlugin")
        if dp:
            out += [f"rdma/{c['resourceName']}" for c in json.loads(dp["config"])["configList"]]
    return out


def kueue_excluded(example: str) -> list[str]:
    cfg = docs(GOLDEN / example / "kubernetes" / "kueue" / "manager-config.yaml")[0]
    return list((cfg.get("resources") or {}).get("excludeResourcePrefixes") or [])


@pytest.mark.parametrize("path", tenant_files(), ids=lambda p: f"{p.parts[-4]}-{p.stem}")
def test_tenant_queues_admit_the_tenants_gpus(path):
    """Each of the tenant's LocalQueues: a workload of as many 1-GPU pods as its ClusterQueue may hold
    (nominal + borrowing), each with a sidecar, defaulted by the namespace's LimitRange and asking for
    the fabric's RDMA device where the Network Operator hands one out, is admitted by Kueue."""
    example = path.parts[-4]
    objs = docs(path)
    lrs = of_kind(objs, "LimitRange")
    cqs = {c["metadata"]["name"]: c for c in docs(GOLDEN / example / "kubernetes" / "kueue" / "clusterqueues.yaml")}
    rdma = rdma_resources(example)
    checked = 0
    for lq in of_kind(objs, "LocalQueue"):
        cq = cqs[lq["spec"]["clusterQueue"]]
        gpu = [r for rg in cq["spec"]["resourceGroups"] for f in rg["flavors"][:1] for r in f["resources"]
               if r["name"] == ks.GPU]
        if not gpu:
            continue
        count = int(ks.quantity(gpu[0]["nominalQuota"]) + ks.quantity(gpu[0].get("borrowingLimit", 0)))
        extra = {rdma[0]: "1"} if rdma else None
        pods = []
        for i in range(count):
            stored, refused = ks.admit(pod(f"w-{i}", 1, init=False, extra_limits=extra), lrs, [], {})
            assert not refused, refused
            pods.append(stored)
        errors = ks.kueue_fits(cq, pods, kueue_excluded(example))
        assert not errors, f"{path}: ClusterQueue {cq['metadata']['name']} does not admit {count} 1-GPU pods: {errors}"
        checked += 1
    assert checked or not of_kind(objs, "LocalQueue")


def test_oracle_limitranger_defaulting_rule():
    """The rule the fix rests on, stated on its own: with `max` and no `default`, a container naming no
    GPU is given the max as limit and request; with `default` 0 it is given none."""
    bare = {"spec": {"limits": [{"type": "Container", "max": {ks.GPU: "8"}}]}}
    fixed = {"spec": {"limits": [{"type": "Container", "max": {ks.GPU: "8"}, "default": {ks.GPU: "0"}}]}}
    quota = {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {f"requests.{ks.GPU}": "8"}}}
    p = pod("cpu-only", None, sidecar=False, init=False)
    stored, refused = ks.admit(p, [bare], [quota], {})
    assert ks.pod_requests(stored)[ks.GPU] == 8 and not refused
    _, refused = ks.admit(p, [bare], [quota], {f"requests.{ks.GPU}": 8})
    assert refused
    stored, refused = ks.admit(p, [fixed], [quota], {f"requests.{ks.GPU}": 8})
    assert ks.pod_requests(stored)[ks.GPU] == 0 and not refused
    # a GPU quota does not make containers declare GPUs; a cpu quota would make them declare cpu
    assert not ks.quota_admit(quota, {}, {"spec": {"containers": [{"name": "a"}]}})
    cpu_quota = {"metadata": {"name": "q"}, "spec": {"hard": {"requests.cpu": "10"}}}
    assert ks.quota_admit(cpu_quota, {}, {"spec": {"containers": [{"name": "a"}]}})


@pytest.mark.parametrize("text,value", [("14", 14), ("128Gi", 128 * 2**30), ("500m", ks.Fraction(1, 2)),
                                        ("50Ti", 50 * 2**40), ("2k", 2000), ("0", 0)])
def test_oracle_quantity(text, value):
    assert ks.quantity(text) == value


NETWORK_OPERATOR_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
"""Added by the Network Operator to its own DaemonSets after NicClusterPolicy spec.tolerations
(Mellanox/network-operator v26.4.1 manifests/state-rdma-shared-device-plugin/0060_rdma-shared-dev-plugin-ds.yaml,
manifests/state-ofed-driver/0050_ofed-driver-ds.yaml)."""
CHART = Path(__file__).parent / "reference" / "kubernetes" / "gpu-operator"


def operand_tolerations(example: str) -> dict[str, list[dict]]:
    """The tolerations each GPU-stack DaemonSet gets: GPU Operator operands (driver, toolkit, device
    plugin, DCGM exporter) take ClusterPolicy spec.daemonsets.tolerations, which the chart's
    templates/clusterpolicy.yaml fills from values `daemonsets.tolerations` (a Helm list replaces the
    chart's default list); a NVIDIADriver's driver DaemonSet takes the CR's own tolerations; the Network
    Operator's take NicClusterPolicy spec.tolerations plus its fixed nvidia.com/gpu toleration."""
    base = GOLDEN / example / "kubernetes"
    header = (base / "gpu-operator" / "values.yaml").read_text().splitlines()[1]
    version = header.split("chart ")[1].split()[0]
    chart = docs(CHART / f"values-{version}.yaml")[0]
    values = docs(base / "gpu-operator" / "values.yaml")[0]
    common = (values.get("daemonsets") or {}).get("tolerations", chart["daemonsets"]["tolerations"])
    out = {name: common for name in ("driver", "toolkit", "device-plugin", "dcgm-exporter")}
    for d in docs(base / "gpu-operator" / "nvidiadrivers.yaml"):
        out[f"driver {d['metadata']['name']}"] = d["spec"].get("tolerations") or []
    for p in docs(base / "network-operator" / "nicclusterpolicy.yaml"):
        out["network-operator"] = list(p["spec"].get("tolerations") or []) + [NETWORK_OPERATOR_TOLERATION]
    return out


@pytest.mark.parametrize("example", EXAMPLES)
def test_gpu_stack_daemonsets_reach_kubernetes_gpu_nodes(example):
    """Every Kubernetes-owned GPU node group's taints are tolerated by every GPU-stack DaemonSet, so the
    device plugin, driver, toolkit, DCGM exporter and RDMA device plugin run there; Slurm-owned GPU nodes
    are kept from them (operands off by label and their control-plane taints not tolerated); nodes without
    GPUs (the Kubernetes control plane) need none of them."""
    groups = docs(GOLDEN / example / "kubernetes" / "nodes" / "labels-taints.yaml")[0]["groups"]
    tolerations = operand_tolerations(example)
    k8s_gpu = 0
    for name, g in groups.items():
        taints, labels = g.get("taints") or [], g.get("labels") or {}
        has_gpu = "clusterdef.dev/gpu" in labels
        if g["control_plane"] == "kubernetes" and has_gpu:
            k8s_gpu += 1
            for ds, tol in tolerations.items():
                missing = ks.untolerated(tol, taints)
                assert not missing, f"{example}: {ds} cannot run on node group {name}: untolerated {missing}"
        elif g["control_plane"] == "slurm" and has_gpu:
            assert labels.get("nvidia.com/gpu.deploy.operands") == "false"
            assert ks.untolerated(tolerations["device-plugin"], taints), \
                f"{example}: the GPU Operator's device plugin would also claim Slurm's GPUs on {name}"
    assert k8s_gpu, f"{example}: no Kubernetes GPU node group to check"


@pytest.mark.parametrize("toleration,taint,expected", [
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
     {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
     {"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"},
     {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, False),
    ({"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
     {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}, True),
    ({"operator": "Exists"}, {"key": "clusterdef.dev/control-plane", "value": "slurm", "effect": "NoExecute"}, True),
    ({"key": "a", "value": "b"}, {"key": "a", "value": "b", "effect": "NoExecute"}, True),
    ({"key": "a", "operator": "Lt", "value": "b"}, {"key": "a", "value": "b", "effect": "NoSchedule"}, False),
])
def test_oracle_tolerates_taint(toleration, taint, expected):
    assert ks.tolerates(toleration, taint) is expected


SCRAPE = docs(Path(__file__).parent / "reference" / "observability" / "scrape-targets.yaml")[0]["workloads"]


def scrape_world(example: str) -> tuple[list[dict], list[dict], dict[tuple[str, int], str], list[dict]]:
    """The pods and Services of the monitored workloads (tests/reference/observability/scrape-targets.yaml)
    placed in the example's namespaces, which (pod, port) serves each workload's metrics, and the monitors
    the example deploys: every PodMonitor and ServiceMonitor rendered, plus the GPU Operator's own
    dcgm-exporter ServiceMonitor where the values enable it."""
    base = GOLDEN / example
    header = (base / "kubernetes" / "gpu-operator" / "values.yaml").read_text().splitlines()[1]
    roles = {"gpu_operator": header.split("(namespace ")[1].rstrip(")"),
             "observability": docs(base / "observability" / "kubernetes" / "prometheusrule.yaml")[0]["metadata"]["namespace"]}
    pods, services, metrics = [], [], {}
    for name, w in SCRAPE.items():
        ns = roles.get(w["namespace"], w["namespace"])
        pod_ = {"name": name, "namespace": ns, **w["pod"]}
        pods.append(pod_)
        services += [{**s, "namespace": ns, "pods": [pod_]} for s in w["services"]]
        metrics[(name, w["metrics_port"])] = name
    monitors = [m for f in ("podmonitors.yaml", "servicemonitors.yaml")
                for m in docs(base / "observability" / "kubernetes" / f)]
    dcgm = docs(base / "kubernetes" / "gpu-operator" / "values.yaml")[0].get("dcgmExporter") or {}
    if dcgm.get("enabled") and (dcgm.get("serviceMonitor") or {}).get("enabled"):
        m = copy.deepcopy(SCRAPE["dcgm-exporter"]["operator_monitor"])
        m["metadata"]["namespace"] = roles["gpu_operator"]
        m["spec"]["namespaceSelector"] = {"matchNames": [roles["gpu_operator"]]}
        monitors.append(m)
    return pods, services, metrics, monitors


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_monitor_endpoint_scrapes_its_exporters_metrics_port(example):
    """Prometheus Operator's target selection (namespace, label selector, port by name) for every
    PodMonitor and ServiceMonitor the example deploys: each endpoint reaches exactly one workload's metrics
    port, never nothing (a port name the pod does not declare) and never another port (a selector that
    also matches a Service on the same pods)."""
    pods, services, metrics, monitors = scrape_world(example)
    assert {m["kind"] for m in monitors} == {"PodMonitor", "ServiceMonitor"}
    for m in monitors:
        for i, targets in enumerate(ks.monitor_targets(m, pods, services)):
            where = f"{example}: {m['kind']} {m['metadata']['namespace']}/{m['metadata']['name']} endpoint {i}"
            assert targets, f"{where} scrapes nothing"
            wrong = [t for t in targets if t not in metrics]
            assert not wrong, f"{where} scrapes {wrong}, not a metrics port ({sorted(metrics)})"
            assert len({metrics[t] for t in targets}) == 1, f"{where} scrapes several workloads: {targets}"


@pytest.mark.parametrize("monitor,expected", [
    ({"kind": "PodMonitor", "metadata": {"namespace": "gpu-operator"},
      "spec": {"selector": {"matchLabels": {"app": "x"}}, "podMetricsEndpoints": [{"port": "gpu-metrics"}]}}, [[]]),
    ({"kind": "PodMonitor", "metadata": {"namespace": "gpu-operator"},
      "spec": {"selector": {"matchLabels": {"app": "x"}}, "podMetricsEndpoints": [{"port": "metrics"}]}},
     [[("x", 9400)]]),
    ({"kind": "PodMonitor", "metadata": {"namespace": "monitoring"},
      "spec": {"selector": {"matchLabels": {"app": "x"}}, "podMetricsEndpoints": [{"port": "metrics"}]}}, [[]]),
    ({"kind": "PodMonitor", "metadata": {"namespace": "monitoring"},
      "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]},
               "namespaceSelector": {"any": True}, "podMetricsEndpoints": [{"portNumber": 9400}]}},
     [[("x", 9400)]]),
    ({"kind": "ServiceMonitor", "metadata": {"namespace": "gpu-operator"},
      "spec": {"selector": {"matchLabels": {"app": "x"}}, "endpoints": [{"port": "gpu-metrics"}]}},
     [[("x", 9400)]]),
    ({"kind": "ServiceMonitor", "metadata": {"namespace": "gpu-operator"},
      "spec": {"selector": {"matchLabels": {"app": "x"}}, "endpoints": [{"port": "metrics"}]}}, [[]]),
    ({"kind": "ServiceMonitor", "metadata": {"namespace": "gpu-operator"},
      "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]},
               "endpoints": [{"targetPort": "metrics"}]}}, [[]]),
])
def test_oracle_monitor_targets(monitor, expected):
    """The port is a name matched against the pod's container port names (PodMonitor) or the Service's
    port names (ServiceMonitor); the monitor's own namespace unless namespaceSelector says otherwise."""
    pod_ = {"name": "x", "namespace": "gpu-operator", "labels": {"app": "x"},
            "ports": [{"name": "metrics", "containerPort": 9400}]}
    svc = {"name": "x", "namespace": "gpu-operator", "labels": {"app": "x"},
           "ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400}], "pods": [pod_]}
    assert ks.monitor_targets(monitor, [pod_], [svc]) == expected


# ------------------------------------------------------------------ Pod Security levels
ROLES = Path(__file__).parent.parent / "roles"
RESTRICTED_CONTEXT = {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                      "seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"drop": ["ALL"]}}


def memlock_lifted(example: str) -> bool:
    """RDMA pods can register memory without CAP_IPC_LOCK: their runtime's RLIMIT_MEMLOCK is unlimited.
    CRI containers inherit containerd's rlimits (containerd/cri#515), and ib_umem_get refuses to pin more than
    RLIMIT_MEMLOCK without CAP_IPC_LOCK (linux drivers/infiniband/core/umem.c). True when the Kubernetes GPU
    nodes' container_toolkit role configures containerd and its tasks give containerd LimitMEMLOCK=infinity."""
    gv = docs(GOLDEN / example / "ansible" / "group_vars" / "cp_kubernetes.yml")
    if not gv or "containerd" not in (gv[0].get("container_toolkit_runtimes") or []):
        return False
    for task in docs(ROLES / "container_toolkit" / "tasks" / "main.yml")[0]:
        dest = (task.get("ansible.builtin.copy") or {}).get("dest", "")
        if dest.startswith("/etc/systemd/system/containerd.service.d/") and \
                "LimitMEMLOCK=infinity" in task["ansible.builtin.copy"].get("content", "").splitlines():
            return "'containerd' in container_toolkit_runtimes" in str(task.get("when"))
    return False


def sold_pods(example: str, path: Path, rdma: bool) -> dict[str, dict]:
    """The pods the tenant was sold, in their least-privileged form: GPUs through the device plugin (and the
    NVLink domain's IMEX channel claim where a ComputeDomain is rendered in its namespace); where its pods
    get RDMA, the RDMA device, its secondary network (the NetworkAttachmentDefinition in its namespace)
    and, unless the node runtime lifts the locked-memory limit, CAP_IPC_LOCK."""
    objs = docs(path)
    ns = of_kind(objs, "Namespace")[0]["metadata"]["name"]
    claims = [{"name": "imex", "resourceClaimTemplateName": cd["spec"]["channel"]["resourceClaimTemplate"]["name"]}
              for cd in docs(GOLDEN / example / "kubernetes" / "nvidia-dra" / "computedomains.yaml")
              if cd["metadata"]["namespace"] == ns]

    def shaped(name: str, limits: dict, caps: list[str] = (), annotations: dict | None = None) -> dict:
        sc = copy.deepcopy(RESTRICTED_CONTEXT)
        if caps:
            sc["capabilities"]["add"] = list(caps)
        c = {"name": "main", "image": "registry.example/app:1", "securityContext": sc,
             "resources": {"limits": limits}}
        spec: dict = {"containers": [c], "volumes": [{"name": "scratch", "emptyDir": {}}]}
        if claims:
            spec["resourceClaims"] = claims
            c["resources"]["claims"] = [{"name": "imex"}]
        return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
                "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}}}

    out = {"gpu": shaped("gpu", {ks.GPU: "1"})}
    if rdma:
        nads = [n["metadata"]["name"] for n in of_kind(objs, "NetworkAttachmentDefinition")]
        caps = [] if memlock_lifted(example) else ["IPC_LOCK"]
        out["rdma"] = shaped("rdma", {ks.GPU: "1", **{r: "1" for r in rdma_resources(example)}}, caps,
                             {"k8s.v1.cni.cncf.io/networks": ",".join(nads)} if nads else None)
    return out


@pytest.fixture(scope="module")
def definitions():
    from clusterdef.validate.pipeline import validate_file
    from conftest import CLUSTERS, MATRICES, TODAY

    return {e: validate_file(CLUSTERS / f"{e}.yaml", MATRICES, TODAY).definition for e in EXAMPLES}


@pytest.mark.parametrize("path", tenant_files(), ids=lambda p: f"{p.parts[-4]}-{p.stem}")
def test_tenant_pods_admitted_at_the_namespaces_pod_security_level(path, definitions):
    """The namespace's enforced Pod Security level admits the pods the tenant was sold: GPU pods, and RDMA
    pods where tenancy.rdma_reaches_pods says its pods get RDMA (a tenant sold RDMA at a level that refuses
    what RDMA needs is a sale that cannot be used)."""
    from clusterdef import tenancy

    example = path.parts[-4]
    ns = of_kind(docs(path), "Namespace")[0]
    level = ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    assert level in ks.LEVELS
    tenant = ns["metadata"]["labels"].get("clusterdef.dev/tenant") or path.stem
    rdma = tenancy.rdma_reaches_pods(definitions[example], tenant)
    pods = sold_pods(example, path, rdma)
    assert ("rdma" in pods) is rdma and (not rdma or rdma_resources(example))
    for shape, p in pods.items():
        refused = ks.pod_security_violations(level, p)
        assert not refused, f"{path}: a {shape} pod of the tenant is refused at Pod Security {level}: {refused}"


@pytest.mark.parametrize("example", EXAMPLES)
def test_rdma_pods_need_no_ipc_lock_on_kubernetes_gpu_nodes(example):
    """What the RDMA pods above rest on: the Kubernetes GPU nodes' containerd runs with unlimited locked
    memory, which its containers inherit; without it an RDMA pod needs IPC_LOCK, which baseline refuses."""
    assert memlock_lifted(example)


@pytest.mark.parametrize("level,pod_spec,admitted", [
    ("baseline", {"containers": [{"name": "a", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}]}, False),
    ("baseline", {"containers": [{"name": "a", "securityContext": {"capabilities": {"add": ["NET_RAW", "CHOWN"]}}}]},
     False),
    ("baseline", {"containers": [{"name": "a", "securityContext": {"capabilities": {"add": ["CHOWN"]}}}]}, True),
    ("baseline", {"containers": [{"name": "a"}]}, True),
    ("baseline", {"hostNetwork": True, "containers": [{"name": "a"}]}, False),
    ("baseline", {"containers": [{"name": "a"}], "volumes": [{"name": "h", "hostPath": {"path": "/dev"}}]}, False),
    ("baseline", {"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}]}]}, False),
    ("baseline", {"initContainers": [{"name": "i", "securityContext": {"privileged": True}}],
                  "containers": [{"name": "a"}]}, False),
    ("baseline", {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [{"name": "a"}]}, False),
    ("restricted", {"containers": [{"name": "a"}]}, False),
    ("restricted", {"containers": [{"name": "a", "securityContext": RESTRICTED_CONTEXT}]}, True),
    ("restricted", {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "Localhost"}},
                    "containers": [{"name": "a", "securityContext": {"allowPrivilegeEscalation": False,
                                                                      "capabilities": {"drop": ["ALL"],
                                                                                       "add": ["NET_BIND_SERVICE"]}}}]},
     True),
    ("restricted", {"containers": [{"name": "a", "securityContext": {
        **RESTRICTED_CONTEXT, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}}]}, False),
    ("restricted", {"containers": [{"name": "a", "securityContext": {**RESTRICTED_CONTEXT, "runAsUser": 0}}]}, False),
    ("restricted", {"containers": [{"name": "a", "securityContext": RESTRICTED_CONTEXT}],
                    "volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]}, False),
    ("privileged", {"hostNetwork": True, "containers": [{"name": "a", "securityContext": {"privileged": True}}]}, True),
])
def test_oracle_pod_security(level, pod_spec, admitted):
    assert (not ks.pod_security_violations(level, {"spec": pod_spec})) is admitted
