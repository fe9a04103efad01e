"""Observability target: Prometheus alert rules derived from the definition, for a plain Prometheus
(observability/rules/*.yml plus file_sd target lists that attach each node's hardware type) and for
the Prometheus Operator (PrometheusRule, ServiceMonitor and PodMonitors under
observability/kubernetes/), and the dcgm-exporter counters list the rules need (observability/dcgm/
for the Slurm nodes; the GPU Operator values carry the same list).

`unit_tests(resolved)` returns `promtool test rules` files for every alert rendered: each alert
fires on its sustained synthetic input and stays silent on a one-sample blip of the same size."""

from __future__ import annotations

from ... import hostlist
from ...resolve import Resolved
from ..yamlout import dump, dump_all
from .alertrules import Alert, Series, alerts, xid_recording_rule
from .dcgm import CSV_KEY, counters_csv, dcgm_metrics

ROOT = "observability"
PORTS = {"dcgm-exporter": 9400, "node-exporter": 9100, "slurm-exporter": 9092}
PLAIN_GROUPS = ("gpu", "fabric", "node", "slurm")
K8S_GROUPS = ("gpu", "fabric", "node", "kueue")
INTERVAL_MINUTES = 1
ONSET = 5  # minutes of good samples before the anomaly starts
L_HARDWARE, L_GROUP = "clusterdef.dev/hardware", "clusterdef.dev/node-group"


def _meta_label(key: str) -> str:
    """Prometheus' node meta label for a Kubernetes node label key."""
    return "__meta_kubernetes_node_label_" + "".join(c if c.isalnum() else "_" for c in key)


def rule_groups(resolved: Resolved, groups: tuple[str, ...]) -> dict[str, dict]:
    """group name -> a Prometheus rule group {name, rules} (only groups with rules)."""
    by: dict[str, list[Alert]] = {}
    for a in alerts(resolved):
        by.setdefault(a.group, []).append(a)
    cluster = resolved.definition.cluster.name
    out = {}
    for g in groups:
        rules = [a.rule() for a in by.get(g, [])]
        if g == "gpu" and rules:
            rules.insert(0, xid_recording_rule())
        if rules:
            out[g] = {"name": f"clusterdef-{cluster}-{g}", "rules": rules}
    return out


def _targets(resolved: Resolved) -> dict[str, list[dict]]:
    """file_sd target lists for the plain Prometheus (the Slurm side: Kubernetes nodes are scraped
    through the PodMonitors), each node group labelled with its hardware type."""
    d = resolved.definition
    cluster = d.cluster.name
    out: dict[str, list[dict]] = {"dcgm-exporter": [], "node-exporter": [], "slurm-exporter": []}
    for gname, g in d.nodes.items():
        if g.control_plane != "slurm":
            continue
        names = hostlist.names(g.hosts)
        labels = {"cluster": cluster, "node_group": gname, "hardware": g.hardware}
        if d.hardware[g.hardware].gpu is not None:
            out["dcgm-exporter"].append({"targets": [f"{h}:{PORTS['dcgm-exporter']}" for h in names], "labels": labels})
        out["node-exporter"].append({"targets": [f"{h}:{PORTS['node-exporter']}" for h in names], "labels": labels})
    if d.slurm is not None:
        ctl = list(d.slurm.controllers)
        out["node-exporter"].append({"targets": [f"{h}:{PORTS['node-exporter']}" for h in ctl],
                                     "labels": {"cluster": cluster, "role": "slurm-controller"}})
        if d.slurm.accounting.storage == "slurmdbd" and d.slurm.accounting.host:
            out["node-exporter"].append({"targets": [f"{d.slurm.accounting.host}:{PORTS['node-exporter']}"],
                                         "labels": {"cluster": cluster, "role": "slurmdbd"}})
        out["slurm-exporter"].append({"targets": [f"{ctl[0]}:{PORTS['slurm-exporter']}"],
                                      "labels": {"cluster": cluster}})
    return {k: v for k, v in out.items() if v}


def kubernetes_objects(resolved: Resolved) -> list[dict]:
    """PrometheusRule, the dcgm-exporter and node-exporter PodMonitors and the Kueue ServiceMonitor (empty
    when the definition has no Kubernetes section). The dcgm-exporter counters reach Kubernetes through
    the GPU Operator values (dcgmExporter.config: the chart creates the ConfigMap)."""
    d = resolved.definition
    k = d.kubernetes
    if k is None:
        return []
    cluster, ns = d.cluster.name, d.observability.namespace
    common = {"clusterdef.dev/cluster": cluster}
    relabel = [
        {"action": "replace", "targetLabel": "cluster", "replacement": cluster},
        {"action": "replace", "sourceLabels": [_meta_label(L_HARDWARE)], "targetLabel": "hardware"},
        {"action": "replace", "sourceLabels": [_meta_label(L_GROUP)], "targetLabel": "node_group"},
    ]
    groups = list(rule_groups(resolved, K8S_GROUPS).values())
    objs: list[dict] = [{
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": f"clusterdef-{cluster}", "namespace": ns, "labels": common},
        "spec": {"groups": groups},
    }]
    if k.gpu_operator.dcgm_exporter.enabled:
        # The operator's dcgm-exporter pods name their container port `metrics` (NVIDIA/gpu-operator@v26.3.3
        # assets/state-dcgm-exporter/0800_daemonset.yaml); `gpu-metrics` is the Service's port (0400_service.yaml),
        # which a PodMonitor never sees: it keeps __meta_kubernetes_pod_container_port_name (promcfg.go).
        objs.append({
            "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": {"name": "clusterdef-dcgm-exporter", "namespace": k.gpu_operator.namespace, "labels": common},
            "spec": {"selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                     "attachMetadata": {"node": True},
                     "podMetricsEndpoints": [{"port": "metrics", "interval": "15s", "relabelings": relabel}]},
        })
    objs.append({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
        "metadata": {"name": "clusterdef-node-exporter", "namespace": ns, "labels": common},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "prometheus-node-exporter"}},
                 "attachMetadata": {"node": True},
                 "podMetricsEndpoints": [{"port": "http-metrics", "interval": "30s", "relabelings": relabel}]},
    })
    # Kueue's chart gives its metrics, webhook and visibility Services the same control-plane label; only the
    # component label tells the metrics Service (port `https` -> 8443) from the visibility server's (`https` ->
    # 8082) (kubernetes-sigs/kueue@v0.19.2 charts/kueue/templates/_helpers.tpl kueue.metricsService.labels).
    objs.append({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "clusterdef-kueue", "namespace": "kueue-system", "labels": common},
        "spec": {"selector": {"matchLabels": {"control-plane": "controller-manager",
                                              "app.kubernetes.io/component": "metrics-service"}},
                 "endpoints": [{"port": "https", "scheme": "https", "path": "/metrics", "interval": "30s",
                                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                                "tlsConfig": {"insecureSkipVerify": True}}]},
    })
    return objs


# Where the delivery map puts the rule files and target lists on the prometheus hosts (render/delivery.yaml).
RULES_DIR = "/etc/prometheus/rules/clusterdef"
TARGETS_DIR = "/etc/prometheus/file_sd/clusterdef"
ALERTMANAGER_PORT = 9093


def prometheus_config(resolved: Resolved) -> dict:
    """prometheus.yml: the rule files and one scrape job per target list, as delivered; without it Prometheus
    would load none of the rules (Debian's default configuration names no rule file)."""
    o = resolved.definition.observability
    cfg: dict = {"global": {"scrape_interval": "30s", "evaluation_interval": "30s",
                            "external_labels": {"cluster": resolved.definition.cluster.name}},
                 "rule_files": [f"{RULES_DIR}/*.yml"],
                 "scrape_configs": [{"job_name": name, "file_sd_configs": [{"files": [f"{TARGETS_DIR}/{name}.yml"]}]}
                                    for name in _targets(resolved)]}
    if o.alertmanagers:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [
            {"targets": [f"{h}:{ALERTMANAGER_PORT}" for h in o.alertmanagers]}]}]}
    return cfg


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    made = f"clusterdef: cluster {d.cluster.name}, validated set {resolved.set.name}"
    out: dict[str, str] = {}
    for g, group in rule_groups(resolved, PLAIN_GROUPS).items():
        out[f"{ROOT}/rules/{g}.yml"] = dump({"groups": [group]}, f"{made}\nPrometheus rules: {g} (promtool check rules)")
    for name, entries in _targets(resolved).items():
        out[f"{ROOT}/targets/{name}.yml"] = dump(
            entries, f"{made}\nfile_sd_configs targets for {name} (port {PORTS[name]}), Slurm side")
    out[f"{ROOT}/prometheus.yml"] = dump(prometheus_config(resolved), f"{made}\nPrometheus configuration of the "
                                         "prometheus service hosts (promtool check config)")
    if any(hw.gpu for hw in d.hardware.values()):
        out[f"{ROOT}/dcgm/{CSV_KEY}"] = counters_csv(resolved)
    objs = kubernetes_objects(resolved)
    by_kind: dict[str, list[dict]] = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    files = {"PrometheusRule": "prometheusrule.yaml", "PodMonitor": "podmonitors.yaml", "ServiceMonitor": "servicemonitors.yaml"}
    for kind, items in by_kind.items():
        out[f"{ROOT}/kubernetes/{files[kind]}"] = dump_all(items, f"{made}\n{kind} (Prometheus Operator)")
    return out


# ------------------------------------------------------------------ promtool unit tests

def _values(s: Series, sustained: bool, n: int) -> str:
    good = _num(s.good)
    if s.kind == "static":
        return " ".join([good] * n)
    if s.kind == "vanish":
        head = [good] * ONSET
        return " ".join(head + (["stale"] if sustained else ["stale"] + [good] * (n - ONSET - 1)))
    if s.kind == "gauge":
        bad = _num(s.bad)
        tail = [bad] * (n - ONSET) if sustained else [bad] + [good] * (n - ONSET - 1)
        return " ".join([good] * ONSET + tail)
    if s.kind == "counter":
        vals, v = [], s.good
        for i in range(n):
            if i >= ONSET and (sustained or i == ONSET):
                v += s.bad
            vals.append(_num(v))
        return " ".join(vals)
    raise ValueError(s.kind)


def _num(v) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def unit_test(a: Alert, rule_file: str) -> dict:
    """A promtool test file body for one alert: two tests (sustained input fires, blip stays silent)."""
    fire_at = ONSET + a.for_minutes + a.window_minutes + 2
    n = fire_at + 5
    exp = {"exp_labels": {**a.out_labels, "severity": a.severity, **a.labels}, "exp_annotations": a.annotations()}
    sustained = {"interval": f"{INTERVAL_MINUTES}m",
                 "input_series": [{"series": s.selector, "values": _values(s, True, n)} for s in a.inputs],
                 "alert_rule_test": [{"eval_time": f"{fire_at}m", "alertname": a.name, "exp_alerts": [exp]}]}
    blip = {"interval": f"{INTERVAL_MINUTES}m",
            "input_series": [{"series": s.selector, "values": _values(s, False, n)} for s in a.inputs],
            "alert_rule_test": [{"eval_time": f"{t}m", "alertname": a.name, "exp_alerts": []}
                                for t in range(ONSET, fire_at + 1)]}
    return {"rule_files": [rule_file], "evaluation_interval": f"{INTERVAL_MINUTES}m", "tests": [sustained, blip]}


def unit_tests(resolved: Resolved, rule_dir: str = "rules") -> dict[str, tuple[Alert, dict]]:
    """test file name -> (alert, promtool test document), one per alert rule of the plain and the
    Kubernetes rule groups. Each test names a rule file holding only that alert (plus the XID
    recording rule it reads), so that another rule of the same name cannot answer for it."""
    out: dict[str, tuple[Alert, dict]] = {}
    for i, a in enumerate(alerts(resolved)):
        out[f"{i:03d}-{a.group}-{a.name}"] = (a, unit_test(a, f"{rule_dir}/{i:03d}.yml"))
    return out


def single_rule_file(a: Alert) -> str:
    rules = ([xid_recording_rule()] if a.group == "gpu" else []) + [a.rule()]
    return dump({"groups": [{"name": "under-test", "rules": rules}]})


__all__ = ["render", "rule_groups", "kubernetes_objects", "unit_tests", "unit_test", "single_rule_file",
           "dcgm_metrics"]
