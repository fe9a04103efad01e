"""What Kubernetes and Kueue do with the rendered tenant objects when a pod arrives: a small,
pure re-statement of their documented rules, so the tests can walk the permitted path (a CPU-only pod
and a sidecar get no GPU, the tenant's GPUs are admitted, one more is refused) against every rendered
LimitRange, ResourceQuota and ClusterQueue. Written from the consumers' source at the versions the
validated set pins (Kubernetes v1.34.2, Kueue v0.19.2); each function cites the code it re-states.

Kubernetes source was read from stored copies of kubernetes/kubernetes (the 1.34 tag itself is too
large to fetch here): the functions cited have the same shape in the 2016 and the 1.3x copies.
"""

from __future__ import annotations

import copy
from fractions import Fraction

GPU = "nvidia.com/gpu"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1, "k": 10**3,
            "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity(text) -> Fraction:
    """A resource.Quantity's value (apimachinery pkg/api/resource/quantity.go: a signed decimal number
    and a binary (Ki..Ei) or decimal (n, u, m, k, M..E) suffix; exponents are not used here)."""
    s = str(text).strip()
    for suffix, factor in list(_BINARY.items()) + sorted(_DECIMAL.items(), key=lambda kv: -len(kv[0])):
        if suffix and s.endswith(suffix):
            return Fraction(s[: -len(suffix)]) * factor
    return Fraction(s)


def _resources(container: dict) -> tuple[dict, dict]:
    r = container.setdefault("resources", {})
    return r.setdefault("requests", {}), r.setdefault("limits", {})


def default_pod(pod: dict) -> dict:
    """API defaulting of a Pod before admission (SetDefaults_Pod, pkg/apis/core/v1/defaults.go): a
    container (or init container) with a limit and no request for a resource gets the limit as its
    request."""
    pod = copy.deepcopy(pod)
    for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
        requests, limits = _resources(c)
        for k, v in limits.items():
            requests.setdefault(k, v)
    return pod


def limit_range_item_defaults(item: dict) -> tuple[dict, dict]:
    """(default limits, default requests) of one LimitRange item after API defaulting
    (SetDefaults_LimitRangeItem, pkg/apis/core/v1/defaults.go): for type Container, a resource with a
    `max` and no `default` gets the max as its default limit; a default limit with no `defaultRequest`
    becomes the default request; a `min` with no default request becomes the default request."""
    if item.get("type") != "Container":
        return {}, {}
    default = dict(item.get("default") or {})
    request = dict(item.get("defaultRequest") or {})
    for k, v in (item.get("max") or {}).items():
        default.setdefault(k, v)
    for k, v in default.items():
        request.setdefault(k, v)
    for k, v in (item.get("min") or {}).items():
        request.setdefault(k, v)
    return default, request


def _all_containers(pod: dict) -> list[dict]:
    return pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])


def limitranger_mutate(limit_range: dict, pod: dict) -> dict:
    """LimitRanger's mutation (plugin/pkg/admission/limitranger/admission.go: PodMutateLimitFunc,
    defaultContainerResourceRequirements, mergeContainerResources): every container and init
    container missing a limit or a request for a resource gets the LimitRange's default for it."""
    pod = copy.deepcopy(pod)
    limits_d, requests_d = {}, {}
    for item in limit_range["spec"]["limits"]:
        d, r = limit_range_item_defaults(item)
        limits_d.update(d)
        requests_d.update(r)
    for c in _all_containers(pod):
        requests, limits = _resources(c)
        for k, v in limits_d.items():
            limits.setdefault(k, v)
        for k, v in requests_d.items():
            requests.setdefault(k, v)
    return pod


def limitranger_validate(limit_range: dict, pod: dict) -> list[str]:
    """LimitRanger's validation of type Container items (PodValidateLimitFunc, minConstraint,
    maxConstraint): against `max`, a container must have a limit and neither its limit nor its request
    may exceed the max; against `min`, it must have a request and neither may be below the min.
    Applies to containers and init containers."""
    errors = []
    for item in limit_range["spec"]["limits"]:
        if item.get("type") != "Container":
            continue
        for c in _all_containers(pod):
            requests, limits = _resources(c)
            for k, v in (item.get("max") or {}).items():
                if k not in limits:
                    errors.append(f"maximum {k} usage per Container is {v}.  No limit is specified")
                elif quantity(limits[k]) > quantity(v) or (k in requests and quantity(requests[k]) > quantity(v)):
                    errors.append(f"maximum {k} usage per Container is {v}, container {c['name']} asks "
                                  f"{limits[k]}")
            for k, v in (item.get("min") or {}).items():
                if k not in requests or quantity(requests[k]) < quantity(v):
                    errors.append(f"minimum {k} usage per Container is {v}")
    return errors


def validate_extended(pod: dict) -> list[str]:
    """API validation of a container's extended resources (ValidateResourceRequirements,
    pkg/apis/core/validation/validation.go): a resource that cannot be overcommitted (anything but
    cpu, memory, ephemeral-storage) needs a limit when it has a request, and request must equal limit."""
    errors = []
    for c in _all_containers(pod):
        requests, limits = _resources(c)
        for k, v in requests.items():
            if k in ("cpu", "memory", "ephemeral-storage"):
                if k in limits and quantity(v) > quantity(limits[k]):
                    errors.append(f"{c['name']}: {k} request must be less than or equal to limit")
                continue
            if k not in limits:
                errors.append(f"{c['name']}: Limit must be set for non overcommitable resources ({k})")
            elif quantity(v) != quantity(limits[k]):
                errors.append(f"{c['name']}: {k} request must be equal to {k} limit")
    return errors


def pod_requests(pod: dict) -> dict[str, Fraction]:
    """A pod's effective requests (PodRequests, k8s.io/component-helpers/resource/helpers.go, the sum
    ResourceQuota and the scheduler count): the sum over containers and sidecars (init containers with
    restartPolicy Always), or the largest single init container plus the sidecars started before it,
    whichever is larger, per resource."""
    total: dict[str, Fraction] = {}
    for c in pod["spec"].get("containers", []):
        for k, v in _resources(c)[0].items():
            total[k] = total.get(k, 0) + quantity(v)
    sidecars: dict[str, Fraction] = {}
    init_max: dict[str, Fraction] = {}
    for c in pod["spec"].get("initContainers", []):
        reqs = {k: quantity(v) for k, v in _resources(c)[0].items()}
        if c.get("restartPolicy") == "Always":
            for k, v in reqs.items():
                total[k] = total.get(k, 0) + v
                sidecars[k] = sidecars.get(k, 0) + v
            reqs = dict(sidecars)
        else:
            reqs = {k: reqs.get(k, 0) + sidecars.get(k, 0) for k in set(reqs) | set(sidecars)}
        for k, v in reqs.items():
            init_max[k] = max(init_max.get(k, 0), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    return total


QUOTA_VALIDATION_SET = {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
"""Quota names that make every container declare the resource (podEvaluator.Constraints,
pkg/quota/v1/evaluator/core/pods.go, `validationSet`): extended resources are not among them."""


def quota_usage(pod: dict) -> dict[str, Fraction]:
    """A pod's quota usage (podComputeUsageHelper, pods.go): `requests.<r>` for every requested
    resource (and `<r>` for cpu/memory), `pods` 1."""
    usage: dict[str, Fraction] = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for k, v in pod_requests(pod).items():
        usage[f"requests.{k}"] = v
        if k in ("cpu", "memory", "ephemeral-storage"):
            usage[k] = v
    return usage


def quota_admit(quota: dict, used: dict[str, Fraction], pod: dict) -> list[str]:
    """ResourceQuota admission of a pod (CheckRequest, k8s.io/apiserver/pkg/admission/plugin/
    resourcequota/controller.go, with podEvaluator.Constraints): every container declares what the
    quota's validation-set names require, and for every name in `hard` the pod uses, used + the pod's
    usage stays within hard. Returns the refusals (empty: admitted)."""
    hard = {k: quantity(v) for k, v in quota["spec"]["hard"].items()}
    errors = []
    for name in sorted(set(hard) & QUOTA_VALIDATION_SET):
        base = name.split(".")[-1]
        side = 1 if name.startswith("limits.") else 0
        for c in _all_containers(pod):
            if base not in _resources(c)[side]:
                errors.append(f"must specify {name} for: {c['name']}")
    usage = quota_usage(pod)
    for name, limit in hard.items():
        if name in usage and used.get(name, 0) + usage[name] > limit:
            errors.append(f"exceeded quota: {quota['metadata']['name']}, requested: {name}={usage[name]}, "
                          f"used: {name}={used.get(name, 0)}, limited: {name}={limit}")
    return errors


def admit(pod: dict, limit_ranges: list[dict], quotas: list[dict], used: dict[str, Fraction]) -> tuple[dict, list[str]]:
    """The API server's path for a new pod in a tenant namespace: defaulting, then LimitRanger
    (mutate, validate), API validation, then ResourceQuota. Returns (the stored pod, refusals)."""
    p = default_pod(pod)
    for lr in limit_ranges:
        p = limitranger_mutate(lr, p)
    errors: list[str] = []
    for lr in limit_ranges:
        errors += limitranger_validate(lr, p)
    errors += validate_extended(p)
    for q in quotas:
        errors += quota_admit(q, used, p)
    return p, errors


def kueue_fits(cluster_queue: dict, pods: list[dict], excluded_prefixes: list[str]) -> list[str]:
    """Kueue v0.19.2 admission of one workload by its ClusterQueue, single flavor: each requested
    resource (less those matching `resources.excludeResourcePrefixes`, pkg/workload/workload.go
    dropExcludedResources) must be covered by a resource group ("resource X unavailable in
    ClusterQueue", pkg/scheduler/flavorassigner/flavorassigner.go findFlavorForPodSets), and the
    total must fit nominalQuota plus borrowingLimit of the flavor (what the cohort may lend at most)."""
    total: dict[str, Fraction] = {}
    for p in pods:
        for k, v in pod_requests(p).items():
            if any(k.startswith(x) for x in excluded_prefixes):
                continue
            total[k] = total.get(k, 0) + v
    errors = []
    covered = {}
    for rg in cluster_queue["spec"]["resourceGroups"]:
        for flavor in rg["flavors"][:1]:
            for r in flavor["resources"]:
                cap = quantity(r["nominalQuota"]) + quantity(r.get("borrowingLimit", 0))
                covered[r["name"]] = cap
    for k, v in sorted(total.items()):
        if k not in covered:
            errors.append(f"resource {k} unavailable in ClusterQueue")
        elif v > covered[k]:
            errors.append(f"insufficient quota for {k} in flavor: requested {v}, at most {covered[k]}")
    return errors


# Flavor modes, worst first (pkg/scheduler/flavorassigner/flavorassigner.go at v0.19.2, preemptionMode):
# noFit, preempt (admissible once lower-priority work of the queue is preempted), fit.
NO_FIT, PREEMPT, FIT = 0, 1, 2


def _workload_requests(pods: list[dict], excluded_prefixes: list[str]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for p in pods:
        for k, v in pod_requests(p).items():
            if not any(k.startswith(x) for x in excluded_prefixes):
                total[k] = total.get(k, 0) + v
    return total


def _flavor_mode(flavor: dict, requests: dict[str, Fraction], used: dict[str, Fraction]) -> tuple[int, bool]:
    """One flavor's mode for the workload, the worst over its resources, and whether it borrows
    (fitsResourceQuota): more than nominalQuota + borrowingLimit is noFit; within what the queue does
    not use of them it fits (borrowing when the queue then holds more than nominalQuota); else, when
    the nominal quota alone could hold it, preemption (lower-priority work of the queue assumed to
    exist), else noFit. The cohort is assumed to lend up to borrowingLimit (nothing when unset)."""
    quota = {r["name"]: r for r in flavor["resources"]}
    mode, borrows = FIT, False
    for name, want in requests.items():
        nominal = quantity(quota[name]["nominalQuota"])
        top = nominal + quantity(quota[name].get("borrowingLimit", 0))
        held = used.get(name, 0)
        if want > top:
            return NO_FIT, False
        if held + want <= top:
            borrows = borrows or held + want > nominal
        elif want <= nominal:
            mode = min(mode, PREEMPT)
        else:
            return NO_FIT, False
    return mode, borrows


def kueue_assign(cluster_queue: dict, pods: list[dict], excluded_prefixes: list[str],
                 used: dict[str, dict[str, Fraction]] | None = None) -> tuple[str | None, int, list[str]]:
    """Kueue v0.19.2's flavor assignment of one workload (one resource group) by its ClusterQueue:
    the flavor it is admitted on, the mode, and why not. findFlavorForPodSets tries the group's
    flavors in the order listed; every resource of the group goes to the same flavor; a flavor's mode
    is the worst over the resources; the search stops at the first flavor shouldTryNextFlavor does not
    pass over (noFit always moves on; preemption moves on under whenCanPreempt TryNextFlavor;
    borrowing under whenCanBorrow TryNextFlavor); else the best flavor seen wins (isPreferred,
    BorrowingOverPreemption: the better mode, then no borrowing). `used`: what the queue already
    holds, per flavor and resource."""
    used = used or {}
    requests = _workload_requests(pods, excluded_prefixes)
    groups = cluster_queue["spec"]["resourceGroups"]
    errors = [f"resource {k} unavailable in ClusterQueue" for k in sorted(requests)
              if not any(k in rg["coveredResources"] for rg in groups)]
    if errors:
        return None, NO_FIT, errors
    fungibility = cluster_queue["spec"].get("flavorFungibility", {})
    on_borrow = fungibility.get("whenCanBorrow", "MayStopSearch")
    on_preempt = fungibility.get("whenCanPreempt", "TryNextFlavor")
    best: tuple[str | None, int, bool] = (None, NO_FIT, True)
    for flavor in groups[0]["flavors"]:
        mode, borrows = _flavor_mode(flavor, requests, used.get(flavor["name"], {}))
        if mode == NO_FIT:
            errors.append(f"insufficient quota in flavor {flavor['name']}")
            continue
        better = mode > best[1] or (mode == best[1] and best[2] and not borrows)
        if not ((mode == PREEMPT and on_preempt == "TryNextFlavor") or (borrows and on_borrow == "TryNextFlavor")):
            return flavor["name"], mode, []
        if better:
            best = (flavor["name"], mode, borrows)
    return best[0], best[1], errors if best[0] is None else []


def tolerates(toleration: dict, taint: dict) -> bool:
    """ToleratesTaint (k8s.io/api core/v1/toleration.go at v0.34.2, the staging copy of Kubernetes
    v1.34.2): an empty effect matches every effect, else the effects must be equal; an empty key
    matches every key (with operator Exists), else the keys must be equal; operator Exists matches any
    value, Equal (or empty) needs equal values, any other operator matches nothing."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    op = toleration.get("operator", "")
    if op in ("", "Equal"):
        return toleration.get("value", "") == taint.get("value", "")
    return op == "Exists"


def schedulable_taints(taints: list[dict]) -> list[dict]:
    """Taints that keep a pod off a node: NoSchedule and NoExecute (PreferNoSchedule only scores;
    TaintToleration filter, pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go)."""
    return [t for t in taints if t["effect"] in ("NoSchedule", "NoExecute")]


def untolerated(tolerations: list[dict], taints: list[dict]) -> list[dict]:
    """The node's hard taints no toleration tolerates (v1helper.FindMatchingUntoleratedTaint)."""
    return [t for t in schedulable_taints(taints) if not any(tolerates(x, t) for x in tolerations)]


# ------------------------------------------------------------------ Prometheus Operator target selection
# prometheus-operator v0.93.0 (the CRDs in tests/reference/observability) pkg/prometheus/promcfg.go: a monitor
# becomes a kubernetes_sd scrape job whose relabelings keep only the objects it selects.

def label_selector_matches(selector: dict, labels: dict) -> bool:
    """A metav1.LabelSelector against an object's labels, as the keep/drop relabelings of
    generatePodMonitorConfig / generateServiceMonitorConfig state it: every matchLabels pair present and
    equal; In / NotIn / Exists / DoesNotExist per matchExpressions (regex `(v1|v2);true` on the label and
    its presence)."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        present, value = e["key"] in labels, labels.get(e["key"])
        op = e["operator"]
        if op == "In" and not (present and value in e.get("values", [])):
            return False
        if op == "NotIn" and present and value in e.get("values", []):
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def monitor_namespaces(monitor: dict) -> list[str] | None:
    """getNamespacesFromNamespaceSelector: `any: true` is every namespace (None), no matchNames is the
    monitor's own namespace, else the matchNames."""
    sel = monitor["spec"].get("namespaceSelector") or {}
    if sel.get("any"):
        return None
    return list(sel.get("matchNames") or []) or [monitor["metadata"]["namespace"]]


def _in_namespaces(namespaces: list[str] | None, ns: str) -> bool:
    return namespaces is None or ns in namespaces


def podmonitor_targets(monitor: dict, endpoint: dict, pods: list[dict]) -> list[tuple[str, int]]:
    """(pod name, container port) of every target one podMetricsEndpoint scrapes (generatePodMonitorConfig,
    role pod: one target per declared container port): pods in the selected namespaces whose labels match
    the selector, then `port` keeps __meta_kubernetes_pod_container_port_name equal to it, else
    `portNumber` the port number, else the deprecated `targetPort` (name or number)."""
    nss = monitor_namespaces(monitor)
    out = []
    for p in pods:
        if not _in_namespaces(nss, p["namespace"]) or not label_selector_matches(monitor["spec"]["selector"], p["labels"]):
            continue
        for port in p["ports"]:
            if endpoint.get("port"):
                keep = port.get("name") == endpoint["port"]
            elif endpoint.get("portNumber"):
                keep = port["containerPort"] == endpoint["portNumber"]
            elif "targetPort" in endpoint:
                tp = endpoint["targetPort"]
                keep = port.get("name") == tp if isinstance(tp, str) else port["containerPort"] == tp
            else:
                keep = True
            if keep:
                out.append((p["name"], port["containerPort"]))
    return out


def servicemonitor_targets(monitor: dict, endpoint: dict, services: list[dict]) -> list[tuple[str, int]]:
    """(pod name, container port) of every target one ServiceMonitor endpoint scrapes
    (generateServiceMonitorConfig, role endpoints/endpointslice): Services in the selected namespaces whose
    labels match the selector; `port` keeps __meta_kubernetes_endpoint(slice)_port_name (the Service port's
    name) equal to it, else `targetPort` keeps the pod's container port name or number. The Endpoints
    controller resolves each kept Service port to its targetPort on the Service's pods."""
    nss = monitor_namespaces(monitor)
    out = []
    for s in services:
        if not _in_namespaces(nss, s["namespace"]) or not label_selector_matches(monitor["spec"]["selector"], s["labels"]):
            continue
        for sp in s["ports"]:
            if endpoint.get("port"):
                if sp.get("name") != endpoint["port"]:
                    continue
            elif "targetPort" in endpoint and endpoint["targetPort"] != sp["targetPort"]:
                continue
            for p in s["pods"]:
                out += [(p["name"], cp["containerPort"]) for cp in p["ports"]
                        if sp["targetPort"] in (cp["containerPort"], cp.get("name"))]
    return out


def monitor_targets(monitor: dict, pods: list[dict], services: list[dict]) -> list[list[tuple[str, int]]]:
    """Per endpoint of a PodMonitor or ServiceMonitor, the targets it scrapes."""
    if monitor["kind"] == "PodMonitor":
        return [podmonitor_targets(monitor, ep, pods) for ep in monitor["spec"]["podMetricsEndpoints"]]
    return [servicemonitor_targets(monitor, ep, services) for ep in monitor["spec"]["endpoints"]]


# ------------------------------------------------------------------ Pod Security admission
# k8s.io/pod-security-admission v0.34.2 (the staging copy of Kubernetes v1.34.2) policy/check_*.go, Linux pods.
# Stated here: every check of `baseline` but sysctls, SELinux and AppArmor (whose fields these pods never set),
# and every check `restricted` adds.

BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
"""check_capabilities_baseline.go `capabilities_allowed_1_0`: what a container may add at baseline."""
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                      "persistentVolumeClaim", "projected", "secret"}
"""check_restrictedVolumes.go `restrictedVolumes_1_0`: the only volume sources allowed at restricted."""
LEVELS = ("privileged", "baseline", "restricted")


def _visit(pod: dict) -> list[dict]:
    """visitContainers (policy/visitor.go): containers, init containers and ephemeral containers."""
    s = pod["spec"]
    return s.get("containers", []) + s.get("initContainers", []) + s.get("ephemeralContainers", [])


def _sc(c: dict) -> dict:
    return c.get("securityContext") or {}


def _pod_or_container(pod: dict, c: dict, key: str):
    v = _sc(c).get(key)
    return v if v is not None else (pod["spec"].get("securityContext") or {}).get(key)


def baseline_violations(pod: dict) -> list[str]:
    s = pod["spec"]
    out = []
    for ns in ("hostNetwork", "hostPID", "hostIPC"):  # check_hostNamespaces.go
        if s.get(ns):
            out.append(f"host namespaces ({ns}=true)")
    out += [f"hostPath volume {v['name']}" for v in s.get("volumes", []) if "hostPath" in v]  # check_hostPathVolumes.go
    for c in _visit(pod):
        sc = _sc(c)
        if sc.get("privileged"):  # check_privileged.go
            out.append(f"privileged (container {c['name']})")
        if any(p.get("hostPort") for p in c.get("ports", [])):  # check_hostPorts.go
            out.append(f"hostPort (container {c['name']})")
        bad = sorted(set((sc.get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES)
        if bad:  # check_capabilities_baseline.go
            out.append(f"non-default capabilities {bad} (container {c['name']})")
        if sc.get("procMount") not in (None, "Default"):  # check_procMount.go
            out.append(f"procMount (container {c['name']})")
        if (_pod_or_container(pod, c, "seccompProfile") or {}).get("type") == "Unconfined":  # check_seccompProfile_baseline.go
            out.append(f"seccompProfile Unconfined (container {c['name']})")
    return out


def restricted_violations(pod: dict) -> list[str]:
    out = baseline_violations(pod)
    for v in pod["spec"].get("volumes", []):  # check_restrictedVolumes.go
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"restricted volume types {sorted(kinds - RESTRICTED_VOLUMES)} ({v['name']})")
    for c in _visit(pod):
        sc = _sc(c)
        if sc.get("allowPrivilegeEscalation") is not False:  # check_allowPrivilegeEscalation.go
            out.append(f"allowPrivilegeEscalation != false (container {c['name']})")
        if _pod_or_container(pod, c, "runAsNonRoot") is not True:  # check_runAsNonRoot.go
            out.append(f"runAsNonRoot != true (container {c['name']})")
        if _pod_or_container(pod, c, "runAsUser") == 0:  # check_runAsUser.go
            out.append(f"runAsUser=0 (container {c['name']})")
        if (_pod_or_container(pod, c, "seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
            out.append(f"seccompProfile not RuntimeDefault/Localhost (container {c['name']})")  # _restricted.go
        caps = sc.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):  # check_capabilities_restricted.go
            out.append(f"capabilities.drop does not hold ALL (container {c['name']})")
        bad = sorted(set(caps.get("add", [])) - {"NET_BIND_SERVICE"})
        if bad:
            out.append(f"capabilities.add {bad} (container {c['name']})")
    return out


def pod_security_violations(level: str, pod: dict) -> list[str]:
    """Why the namespace's `pod-security.kubernetes.io/enforce` level refuses the pod (empty: admitted)."""
    return {"privileged": lambda p: [], "baseline": baseline_violations, "restricted": restricted_violations}[level](pod)


# ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in Kubernetes 1.30): how the API server decides
# a request against a policy and its binding, from the documentation page "Validating Admission Policy"
# (kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/) and the apiserver's
# staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/matching/matching.go (a request is in scope when
# the policy's matchConstraints and the binding's matchResources both match it: resource rules by group,
# version, resource or subresource and operation, and the namespaceSelector against the namespace's labels)
# and .../policy/validating/validator.go (every validation is a CEL expression over `object`, `oldObject`,
# `request`, `namespaceObject`, ...; one false is a violation, and an evaluation error counts as a
# violation under failurePolicy Fail). validationActions Deny refuses the request on any violation.

def namespace_labels(name: str, labels: dict | None = None) -> dict:
    """The labels the API server puts on every namespace: kubernetes.io/metadata.name = its name
    (NamespaceDefaultLabelName, GA in 1.22: pkg/registry/core/namespace/strategy.go), plus its own."""
    return {**(labels or {}), "kubernetes.io/metadata.name": name}


def _rule_matches(rule: dict, resource: str, operation: str) -> bool:
    return (("*" in rule.get("operations", []) or operation in rule.get("operations", []))
            and ("*" in rule.get("resources", []) or resource in rule.get("resources", [])))


def vap_violations(policy: dict, binding: dict, namespace: dict, pod: dict, operation: str = "CREATE",
                   resource: str = "pods") -> list[str] | None:
    """The messages of the policy's failed validations for a pod `operation` in `namespace` (an object with
    metadata.name and metadata.labels); None when the policy does not apply to the request (out of scope)."""
    import celpy

    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    if not any(_rule_matches(r, resource, operation) for r in rules):
        return None
    ns_labels = namespace_labels(namespace["metadata"]["name"], namespace["metadata"].get("labels"))
    for spec in (policy["spec"]["matchConstraints"], binding["spec"].get("matchResources") or {}):
        if "namespaceSelector" in spec and not label_selector_matches(spec["namespaceSelector"], ns_labels):
            return None
        # objectSelector: the object's labels (on DELETE the old object's; this oracle sees CREATE/UPDATE only)
        if "objectSelector" in spec and not label_selector_matches(spec["objectSelector"],
                                                                   pod.get("metadata", {}).get("labels") or {}):
            return None
    env = celpy.Environment()
    act = {"object": celpy.json_to_cel(pod), "request": celpy.json_to_cel({"operation": operation}),
           "namespaceObject": celpy.json_to_cel({"metadata": {"name": namespace["metadata"]["name"],
                                                              "labels": ns_labels}})}
    # matchConditions (admissionregistration/v1): every one true, or the policy is skipped; one that errs
    # fails the request under failurePolicy Fail (the API reference, ValidatingAdmissionPolicySpec.matchConditions).
    for cond in policy["spec"].get("matchConditions", []):
        try:
            held = env.program(env.compile(cond["expression"])).evaluate(act)
        except Exception:  # noqa: BLE001
            held = None
        if not isinstance(held, celpy.celtypes.BoolType):
            return [f"matchCondition {cond['name']} failed to evaluate"]
        if not held:
            return None
    out = []
    for v in policy["spec"]["validations"]:
        try:
            ok = env.program(env.compile(v["expression"])).evaluate(act)
            ok = bool(ok) if isinstance(ok, celpy.celtypes.BoolType) else False  # an evaluation error
        except Exception:  # noqa: BLE001  (a compile or evaluation error is a violation under Fail)
            ok = policy["spec"].get("failurePolicy", "Fail") != "Fail"
        if not ok:
            out.append(v["message"])
    return out


def vap_admits(policy: dict, binding: dict, namespace: dict, pod: dict, operation: str = "CREATE") -> bool:
    got = vap_violations(policy, binding, namespace, pod, operation)
    return not got or "Deny" not in binding["spec"]["validationActions"]
