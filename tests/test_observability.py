"""Observability target: rendered Prometheus rules pass `promtool check rules`, every alert has a
generated `promtool test rules` unit test (fires on a sustained input, silent on a blip of the same
size), every metric name exists in the real exporters' lists, the dcgm-exporter counters cover the
DCGM fields the rules read, the Prometheus Operator objects are strict-valid against their CRDs, and
thresholds follow the hardware model and the observability section."""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import jsonschema
import pytest
from lab_variants import without_governed_data
from ruamel.yaml import YAML

from clusterdef.knowledge.gpu_limits import limits_for
from clusterdef.render import observability as obs
from clusterdef.render.kubernetes import gpu_operator
from clusterdef.render.observability import alertrules as alerts_mod
from clusterdef.resolve import Resolved, resolve
from clusterdef.validate.pipeline import validate_file

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS = ROOT / "clusters"
MATRICES = ROOT / "matrices"
REF = Path(__file__).parent / "reference" / "observability"
SHARED = ROOT.parent / "shared" / "reference"
TODAY = date(2026, 11, 30)
yaml_safe = YAML(typ="safe")


def load(path: Path) -> Resolved:
    result = validate_file(path, MATRICES, TODAY)
    assert result.ok, [(f.code, f.message) for f in result.errors]
    return resolve(result.definition, result.matrix, path.parent)


@pytest.fixture(scope="module")
def examples() -> dict[str, Resolved]:
    return {name: load(CLUSTERS / f"{name}.yaml") for name in ("lab", "estate")}


@pytest.fixture(scope="module")
def lab_data() -> dict:
    return yaml_safe.load((CLUSTERS / "lab.yaml").read_text())


def variant(lab_data: dict, tmp_path: Path, mutate) -> Resolved:
    data = copy.deepcopy(lab_data)
    mutate(data)
    path = tmp_path / "lab-variant.yaml"
    buf = io.StringIO()
    YAML().dump(data, buf)
    path.write_text(buf.getvalue())
    return load(path)


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI: scripts/deps.d/60-observability.sh installs prometheus")
        pytest.skip("promtool is not installed (apt-get install prometheus; scripts/install-test-deps does it)")
    return path


def rendered_groups(r: Resolved) -> dict[str, list[dict]]:
    """file name -> rule groups, for the plain rule files and the PrometheusRule."""
    tree = obs.render(r)
    out = {rel: yaml_safe.load(text)["groups"] for rel, text in tree.items() if rel.startswith("observability/rules/")}
    for o in obs.kubernetes_objects(r):
        if o["kind"] == "PrometheusRule":
            out["observability/kubernetes/prometheusrule.yaml"] = o["spec"]["groups"]
    return out


def rendered_alerts(r: Resolved) -> list[dict]:
    return [rule for groups in rendered_groups(r).values() for g in groups for rule in g["rules"] if "alert" in rule]


# ------------------------------------------------------------------ promtool

@pytest.mark.parametrize("example", ["lab", "estate"])
def test_promtool_check_rules(examples, example, tmp_path):
    tool = promtool()
    files = []
    for rel, groups in rendered_groups(examples[example]).items():
        p = tmp_path / rel.replace("/", "_")
        p.write_text(json.dumps({"groups": groups}))
        files.append(p)
    # the rule files exactly as rendered (YAML through yamlout), too
    for rel, text in obs.render(examples[example]).items():
        if rel.startswith("observability/rules/"):
            p = tmp_path / ("as-rendered-" + rel.replace("/", "_"))
            p.write_text(text)
            files.append(p)
    r = subprocess.run([tool, "check", "rules", *map(str, files)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == len(files), r.stdout


@pytest.mark.parametrize("example", ["lab", "estate"])
def test_promtool_unit_tests_every_alert(examples, example, tmp_path):
    """One generated unit test per rendered alert rule; each fires on its sustained input and stays
    silent at every minute of a one-sample blip of the same size."""
    tool = promtool()
    r = examples[example]
    tests = obs.unit_tests(r)
    (tmp_path / "rules").mkdir()
    names = []
    for i, (name, (alert, doc)) in enumerate(tests.items()):
        (tmp_path / "rules" / f"{i:03d}.yml").write_text(obs.single_rule_file(alert))
        (tmp_path / f"{name}.test.yml").write_text(json.dumps(doc))
        names.append(f"{name}.test.yml")
    # a new alert cannot ship untested: every rendered rule is one of the tested alerts
    tested = {(a.name, a.expr, a.for_minutes, json.dumps(a.labels, sort_keys=True)) for a, _ in tests.values()}
    for rule in rendered_alerts(r):
        labels = {k: v for k, v in rule["labels"].items() if k != "severity"}
        key = (rule["alert"], rule["expr"], int(rule["for"].rstrip("mh")) * (60 if rule["for"].endswith("h") else 1),
               json.dumps(labels, sort_keys=True))
        assert key in tested, f"rendered alert without a unit test: {rule['alert']} {rule['expr']}"
    proc = subprocess.run([tool, "test", "rules", *names], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert proc.stdout.count("SUCCESS") == len(names), proc.stdout[-3000:]


def test_unit_test_catches_a_broken_rule(examples, tmp_path):
    """The generated tests are not vacuous: a rule without its `for:` fails the blip test, and a
    rule whose threshold can never be reached fails the sustained test."""
    tool = promtool()
    r = examples["lab"]
    alert, doc = next(v for v in obs.unit_tests(r).values() if v[0].name == "GpuTemperatureHigh")
    (tmp_path / "rules").mkdir()
    for label, broken in (("no-for", alerts_mod.replace(alert, for_minutes=0)),
                          ("unreachable", alerts_mod.replace(alert, expr=alert.expr.split(" > ")[0] + " > 1000"))):
        (tmp_path / "rules" / "000.yml").write_text(obs.single_rule_file(broken))
        (tmp_path / "t.yml").write_text(json.dumps(doc))
        proc = subprocess.run([tool, "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode != 0, label


# ------------------------------------------------------------------ metric names

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_FUNCS_KEYWORDS = {"and", "or", "unless", "bool", "offset"}


def metric_names(expr: str) -> set[str]:
    e = _STRINGS.sub('""', expr)
    e = _GROUPING.sub(" ", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    out = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        tail = e[m.end():].lstrip()
        if tail.startswith("(") or m.group() in _FUNCS_KEYWORDS:
            continue
        if re.fullmatch(r"\d+(e\d+)?", m.group()):
            continue
        out.add(m.group())
    return out


def known_metrics() -> dict[str, set[str]]:
    dcgm = set()
    for f in ("default-counters.csv", "dcp-metrics-included.csv"):
        for line in (REF / f).read_text().splitlines():
            m = re.match(r"^#?\s*(DCGM_[A-Z0-9_]+)\s*,", line)
            if m:
                dcgm.add(m.group(1))
    kueue = set(re.findall(r"`(kueue_[a-z0-9_]+)`", (REF / "metrics-v0.19.2.md").read_text()))
    slurm = set(re.findall(r"# HELP (slurm_[a-z0-9_]+)", (REF / "rivosinc-prometheus-slurm-exporter-README.md").read_text()))
    node = {ln.strip() for ln in (REF / "node-exporter-metrics.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}
    from clusterdef import drift
    src = Path(drift.__file__).read_text()
    ours = set(re.findall(r"# TYPE (clusterdef_[a-z0-9_]+)", src))
    return {"dcgm": dcgm, "kueue": kueue, "slurm": slurm, "node": node, "clusterdef": ours}


def test_metric_name_parser():
    assert metric_names('count by (a, b) (X{hardware="h"} >= 5) < 8') == {"X"}
    assert metric_names('100 * sum by (p) (m{s=~"a|b"}) / sum by (p) (n{}) > 20') == {"m", "n"}
    assert metric_names("increase(c_total{a=\"x\"}[10m]) > 0 and absent(up)") == {"c_total", "up"}


@pytest.mark.parametrize("example", ["lab", "estate"])
def test_every_metric_name_is_in_an_exporters_list(examples, example):
    known = known_metrics()
    allowed = set().union(*known.values())
    recorded = {rule["record"] for groups in rendered_groups(examples[example]).values() for g in groups
                for rule in g["rules"] if "record" in rule}
    used = set()
    for groups in rendered_groups(examples[example]).values():
        for g in groups:
            for rule in g["rules"]:
                used |= metric_names(rule["expr"])
    assert used, "no metric names parsed"
    unknown = used - allowed - recorded
    assert not unknown, f"metric names in no exporter's list: {sorted(unknown)}"
    # every exporter family is used (the lists are not decoration)
    for fam, names in known.items():
        assert used & names, f"no rule reads a {fam} metric"


def test_reference_copies_match_shared():
    if not SHARED.is_dir():
        pytest.skip("../shared/reference is not beside this checkout")
    sys.path.insert(0, str(REF.parent / "kubernetes"))
    try:
        from strip import reduce_crd
    finally:
        sys.path.remove(str(REF.parent / "kubernetes"))
    for name, sub in (("default-counters.csv", "dcgm-exporter"), ("dcp-metrics-included.csv", "dcgm-exporter"),
                      ("metrics-v0.19.2.md", "kueue"), ("rivosinc-prometheus-slurm-exporter-README.md", "slurm-exporter")):
        assert (REF / name).read_bytes() == (SHARED / sub / name).read_bytes(), name
    for plural in ("prometheusrules", "servicemonitors", "podmonitors"):
        original = SHARED / "prometheus-operator" / f"monitoring.coreos.com_{plural}.yaml"
        copy_path = REF / f"monitoring.coreos.com_{plural}.json"
        assert json.loads(copy_path.read_text()) == reduce_crd(yaml_safe.load(original.read_text()))
    pkg = Path(obs.__file__).parent
    from clusterdef.knowledge import xid

    assert xid.DATA.read_bytes() == (SHARED / "nvidia-xid" / "xid.csv").read_bytes()
    assert (pkg / "dcgm-default-counters.csv").read_bytes() == (REF / "default-counters.csv").read_bytes()
    for p in REF.iterdir():
        if not p.name.endswith(".source"):
            assert p.with_name(p.name + ".source").is_file(), f"{p} has no .source"


# ------------------------------------------------------------------ dcgm-exporter counters

@pytest.mark.parametrize("example", ["lab", "estate"])
def test_dcgm_counters_cover_the_rules(examples, example):
    r = examples[example]
    used = {m for rule in rendered_alerts(r) for m in metric_names(rule["expr"]) if m.startswith("DCGM_")}
    used |= {m for groups in rendered_groups(r).values() for g in groups for rule in g["rules"]
             if "record" in rule for m in metric_names(rule["expr"]) if m.startswith("DCGM_")}
    cfg = gpu_operator.values(r)["dcgmExporter"]["config"]
    text = cfg["data"]
    enabled = {row[0].strip() for row in csv.reader(io.StringIO(text)) if row and not row[0].startswith("#")}
    assert used and used <= enabled, sorted(used - enabled)
    assert text == obs.render(r)["observability/dcgm/dcgm-metrics.csv"]
    assert cfg["create"] is True and cfg["name"] == "clusterdef-dcgm-metrics"
    assert gpu_operator.cluster_policy_spec(gpu_operator.values(r))["dcgmExporter"]["config"] == {"name": cfg["name"]}
    # the default counters stay enabled
    for line in (REF / "default-counters.csv").read_text().splitlines():
        m = re.match(r"^(DCGM_[A-Z0-9_]+)\s*,", line)
        if m:
            assert m.group(1) in enabled


def test_dcgm_config_only_when_exporter_enabled(lab_data, tmp_path):
    r = variant(lab_data, tmp_path, lambda d: d["kubernetes"]["gpu_operator"].update(dcgm_exporter={"enabled": False}))
    assert "config" not in gpu_operator.values(r)["dcgmExporter"]
    assert not any(o["metadata"]["name"] == "clusterdef-dcgm-exporter" for o in obs.kubernetes_objects(r))


# ------------------------------------------------------------------ CRDs

def strict(schema):
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def validator(plural: str):
    crd = json.loads((REF / f"monitoring.coreos.com_{plural}.json").read_text())
    v = next(x for x in crd["spec"]["versions"] if x["name"] == "v1")
    return jsonschema.Draft7Validator(strict(v["schema"]["openAPIV3Schema"]))


@pytest.mark.parametrize("example", ["lab", "estate"])
def test_operator_objects_strict_valid(examples, example):
    validators = {"PrometheusRule": validator("prometheusrules"), "ServiceMonitor": validator("servicemonitors"),
                  "PodMonitor": validator("podmonitors")}
    objs = obs.kubernetes_objects(examples[example])
    kinds = {o["kind"] for o in objs}
    assert {"PrometheusRule", "ServiceMonitor", "PodMonitor"} == kinds
    for o in objs:
        if o["kind"] in validators:
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validators[o["kind"]].iter_errors(o)]
            assert errors == [], (o["kind"], o["metadata"]["name"], errors[:5])
    # an unknown field is caught (the strict schema is not vacuous)
    bad = copy.deepcopy(next(o for o in objs if o["kind"] == "PodMonitor"))
    bad["spec"]["podMetricsEndpoints"][0]["portt"] = "x"
    assert list(validators["PodMonitor"].iter_errors(bad))


# ------------------------------------------------------------------ RoCE fabric

@pytest.fixture(scope="module")
def roce(tmp_path_factory) -> Resolved:
    """The lab on RoCE (tests/roce_lab.py: eight 400 Gb/s RoCE interfaces roce0..roce7, no InfiniBand)."""
    from roce_lab import roce_lab

    return load(roce_lab(tmp_path_factory.mktemp("roce") / "roce.yaml"))


def test_roce_rules_speak_of_the_fabric_the_cluster_has(roce, examples):
    fabric = [a for a in rendered_alerts(roce) if a["alert"].startswith(("Ib", "Roce"))]
    assert sorted({a["alert"] for a in fabric}) == ["RoceLinkFlapping", "RocePortBelowRatedSpeed", "RocePortDown",
                                                   "RocePortMissing"]
    for a in fabric:
        text = a["annotations"]["summary"] + " " + a["annotations"]["runbook"]
        assert "subnet manager" not in text and "ibstat" not in text and "InfiniBand" not in text, a
    devices = '"roce0|roce1|roce2|roce3|roce4|roce5|roce6|roce7"'
    assert _rule(roce, "RocePortDown")["expr"] == f'node_network_up{{hardware="hgx-h100",device=~{devices}}} == 0'
    assert _rule(roce, "RocePortBelowRatedSpeed", rated_gbps="400")["expr"] == \
        f'node_network_speed_bytes{{hardware="hgx-h100",device=~{devices}}} < {400 * 10**9 // 8}'
    assert _rule(roce, "RocePortMissing")["expr"].endswith(") * 0) < 8")
    # the InfiniBand lab keeps its InfiniBand rules and its subnet manager runbook
    assert "subnet manager" in _rule(examples["lab"], "IbPortDown")["annotations"]["runbook"]
    assert not [a for a in rendered_alerts(examples["lab"]) if a["alert"].startswith("Roce")]
    # every metric the RoCE rules read is in node_exporter's list (tests/reference/observability)
    used = set().union(*(metric_names(a["expr"]) for a in fabric))
    assert used == {"node_network_up", "node_network_speed_bytes", "node_network_carrier_changes_total"}
    assert used <= known_metrics()["node"]


def test_roce_rules_fire_in_promtool(roce, tmp_path):
    """promtool: each RoCE rule fires on its sustained input (one rail's interface down, one gone, one
    at half speed, a flapping carrier) and stays silent on a one-sample blip."""
    tool = promtool()
    tests = {n: v for n, v in obs.unit_tests(roce).items() if v[0].name.startswith("Roce")}
    assert sorted(a.name for a, _ in tests.values()) == ["RoceLinkFlapping", "RocePortBelowRatedSpeed",
                                                        "RocePortDown", "RocePortMissing"]
    (tmp_path / "rules").mkdir()
    names = []
    for name, (alert, doc) in tests.items():  # each test reads rules/<its index among all alerts>.yml
        (tmp_path / "rules" / f"{name.split('-', 1)[0]}.yml").write_text(obs.single_rule_file(alert))
        (tmp_path / f"{name}.test.yml").write_text(json.dumps(doc))
        names.append(f"{name}.test.yml")
    proc = subprocess.run([tool, "test", "rules", *names], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert proc.stdout.count("SUCCESS") == len(names) == 4, proc.stdout[-3000:]
    # not vacuous: the same tests fail against a rule that looks at the wrong interfaces
    name, (alert, doc) = next((n, v) for n, v in tests.items() if v[0].name == "RocePortDown")
    broken = alerts_mod.replace(alert, expr=alert.expr.replace("roce0|", ""))
    (tmp_path / "rules" / f"{name.split('-', 1)[0]}.yml").write_text(obs.single_rule_file(broken))
    proc = subprocess.run([tool, "test", "rules", f"{name}.test.yml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "RocePortDown" in proc.stdout
    # every RoCE interface gone (only eno1 left): RocePortMissing still fires, on the `or ... * 0` side
    name, (alert, _) = next((n, v) for n, v in tests.items() if v[0].name == "RocePortMissing")
    (tmp_path / "rules" / f"{name.split('-', 1)[0]}.yml").write_text(obs.single_rule_file(alert))
    node = {"hardware": "hgx-h100", "node_group": "train", "instance": "node-a:9100"}
    series = 'node_network_up{hardware="hgx-h100",node_group="train",instance="node-a:9100",device="eno1"}'
    doc = {"rule_files": [f"rules/{name.split('-', 1)[0]}.yml"], "evaluation_interval": "1m",
           "tests": [{"interval": "1m", "input_series": [{"series": series, "values": "1x30"}],
                      "alert_rule_test": [{"eval_time": "15m", "alertname": "RocePortMissing", "exp_alerts": [
                          {"exp_labels": {**node, "severity": "critical"}, "exp_annotations": alert.annotations()}]}]}]}
    (tmp_path / "gone.yml").write_text(json.dumps(doc))
    proc = subprocess.run([tool, "test", "rules", "gone.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


# ------------------------------------------------------------------ thresholds from the model

def _rule(r: Resolved, name: str, **labels) -> dict:
    hits = [a for a in rendered_alerts(r) if a["alert"] == name
            and all(a["labels"].get(k) == v for k, v in labels.items())]
    assert hits, name
    return hits[0]


def test_thresholds_follow_hardware_and_gpu_limits(examples):
    r = examples["lab"]
    hw = r.definition.hardware["hgx-h100"]
    lim = limits_for(hw.gpu.model)
    assert _rule(r, "GpuTemperatureHigh")["expr"].endswith(f"> {lim.max_operating_c - 5}")
    assert _rule(r, "GpuPowerHigh")["expr"].endswith(f"> {lim.tdp_w}")
    assert _rule(r, "GpuMissing")["expr"].endswith(f"< {hw.gpu.count}")
    ib = _rule(r, "IbPortBelowRatedSpeed", rated_gbps="400")
    assert f">= {400 * 10**9 // 8}) < 8" in ib["expr"]
    assert "18 NVLink links per GPU" in _rule(r, "GpuNvlinkLinkDown")["annotations"]["runbook"]
    assert r.set.name in _rule(r, "NodeOffMatrix")["annotations"]["runbook"]


@pytest.mark.parametrize(("mutate", "alert", "expect"), [
    (lambda d: d["hardware"]["hgx-h100"]["gpu"].update(count=16, nvswitch=True), "GpuMissing", "< 16"),
    (lambda d: d["hardware"]["hgx-h100"]["nics"][1].update(speed_gbps=200), "IbPortBelowRatedSpeed",
     f">= {200 * 10**9 // 8}) < 8"),
    (lambda d: d["hardware"]["hgx-h100"]["nics"][1].update(count=4), "IbPortBelowRatedSpeed", ") < 4"),
    (lambda d: d.update(observability={"gpu_temperature_margin_c": 10}), "GpuTemperatureHigh", "> 77"),
    (lambda d: d.update(observability={"gpu_power_percent_of_tdp": 90}), "GpuPowerHigh", "> 630"),
    (lambda d: d.update(observability={"hardware": {"hgx-h100": {"temperature_c": 70}}}), "GpuTemperatureHigh", "> 70"),
    (lambda d: d.update(observability={"hardware": {"hgx-h100": {"power_w": 600}}}), "GpuPowerHigh", "> 600"),
    (lambda d: d.update(observability={"job_failure_percent": 40}), "SlurmJobFailureRatio", "> 40"),
    (lambda d: d.update(observability={"filesystem_free_percent": 5}), "NodeFilesystemFull", "< 5 and"),
    (lambda d: d.update(observability={"fabric_transmit_wait_per_s": 5000}), "IbPortCongested", "> 5000"),
])
def test_model_changes_the_rules(lab_data, tmp_path, mutate, alert, expect):
    r = variant(lab_data, tmp_path, mutate)
    assert expect in _rule(r, alert)["expr"]


def test_every_observability_field_changes_the_output(lab_data, tmp_path, examples):
    base = obs.render(examples["lab"])
    changes = {"namespace": "prom", "gpu_temperature_margin_c": 9, "gpu_power_percent_of_tdp": 80,
               "hardware": {"hgx-h100": {"temperature_c": 60}}, "queue_wait_minutes": 90,
               "job_failure_percent": 50, "filesystem_free_percent": 20, "fabric_transmit_wait_per_s": 7,
               "alertmanagers": ["am1.lab.example"]}
    from clusterdef.model.observability import Observability
    assert set(changes) == set(Observability.model_fields), "a new field needs a case here"
    for field, value in changes.items():
        r = variant(lab_data, tmp_path, lambda d, field=field, value=value: d.update(observability={field: value}))
        assert obs.render(r) != base, field
    r = variant(lab_data, tmp_path, lambda d: d.update(observability={"hardware": {"hgx-h100": {"power_w": 500}}}))
    assert obs.render(r) != base


def test_queue_wait_sets_for(lab_data, tmp_path):
    r = variant(lab_data, tmp_path, lambda d: d.update(observability={"queue_wait_minutes": 120}))
    for name in ("SlurmQueueWait", "KueueQueueWait", "TenantPendingDemand"):
        assert _rule(r, name)["for"] == "2h"


def test_every_alert_has_severity_for_and_runbook(examples):
    for r in examples.values():
        for rule in rendered_alerts(r):
            assert rule["labels"]["severity"] in ("critical", "warning", "info")
            assert re.fullmatch(r"\d+[mh]", rule["for"]) and rule["for"] not in ("0m", "0h")
            rb = rule["annotations"]["runbook"]
            assert re.search(r"drain|roll back|ticket|restart", rb), rule["alert"]


def test_no_kubernetes_section_no_operator_objects(lab_data, tmp_path):
    r = variant(lab_data, tmp_path, lambda d: (without_governed_data(d), d.pop("kubernetes"),
                                               [t.pop("kubernetes", None) for t in d["tenants"].values()],
                                               d["nodes"]["infer"].update(control_plane="slurm"),
                                               d["nodes"].pop("k8sctl"),  # needs the kubernetes section
                                               d["tenants"]["nlp"].update(isolation={"level": "shared"})))
    tree = obs.render(r)
    assert not any(k.startswith("observability/kubernetes/") for k in tree)
    assert "observability/rules/slurm.yml" in tree


def test_xid_classes_from_catalogue():
    c = alerts_mod.xid_classes()
    assert 79 in c["fatal"] and 48 in c["fatal"] and 13 in c["application"] and 43 in c["informational"]
    assert not set(c["fatal"]) & set(c["application"])


# ------------------------------------------------------------------ checks

def _codes(lab_data, tmp_path, mutate) -> list[tuple[str, str]]:
    data = copy.deepcopy(lab_data)
    mutate(data)
    path = tmp_path / "lab-check.yaml"
    buf = io.StringIO()
    YAML().dump(data, buf)
    path.write_text(buf.getvalue())
    result = validate_file(path, MATRICES, TODAY)
    return [(f.code, ".".join(map(str, f.path))) for f in result.findings]


@pytest.mark.parametrize(("mutate", "code", "path"), [
    (lambda d: d.update(observability={"hardware": {"hgx-h100": {"temperature_c": 90}}}),
     "alert-threshold-out-of-range", "observability.hardware.hgx-h100.temperature_c"),
    (lambda d: d.update(observability={"hardware": {"hgx-h100": {"power_w": 701}}}),
     "alert-threshold-out-of-range", "observability.hardware.hgx-h100.power_w"),
    (lambda d: d.update(observability={"hardware": {"nope": {"power_w": 600}}}),
     "ref-hardware", "observability.hardware.nope"),
    (lambda d: d["hardware"]["hgx-h100"]["gpu"].update(model="X9000-SXM"),
     "gpu-limits-unknown", "hardware.hgx-h100.gpu.model"),
])
def test_threshold_checks(lab_data, tmp_path, mutate, code, path):
    assert (code, path) in _codes(lab_data, tmp_path, mutate)


def test_thresholds_at_the_limit_are_fine(lab_data, tmp_path):
    found = _codes(lab_data, tmp_path, lambda d: d.update(
        observability={"hardware": {"hgx-h100": {"temperature_c": 87, "power_w": 700}}}))
    assert not [c for c, _ in found if c.startswith("alert-threshold")]


def test_unknown_gpu_model_renders_without_temperature_and_power(lab_data, tmp_path):
    r = variant(lab_data, tmp_path, lambda d: d["hardware"]["hgx-h100"]["gpu"].update(model="X9000-SXM"))
    names = {a["alert"] for a in rendered_alerts(r)}
    assert "GpuTemperatureHigh" not in names and "GpuPowerHigh" not in names and "GpuMissing" in names


@pytest.mark.parametrize("example", ["lab", "estate"])
def test_promtool_check_config_with_targets_and_rules(examples, example, tmp_path):
    """A Prometheus configuration reading the rendered file_sd target lists and rule files passes
    `promtool check config` (which also parses each file_sd file and rule file)."""
    tool = promtool()
    tree = obs.render(examples[example])
    for rel, text in tree.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    targets = sorted(rel for rel in tree if rel.startswith("observability/targets/"))
    assert targets
    cfg = {"global": {"scrape_interval": "30s"},
           "rule_files": ["observability/rules/*.yml"],
           "scrape_configs": [{"job_name": Path(rel).stem, "file_sd_configs": [{"files": [rel]}]} for rel in targets]}
    (tmp_path / "prometheus.yml").write_text(json.dumps(cfg))
    proc = subprocess.run([tool, "check", "config", "prometheus.yml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_annotations_refuse_template_syntax():
    """Prometheus expands annotations as Go templates: text that would open one is refused."""
    from clusterdef.quoting import UnsafeValue

    a = alerts_mod.Alert("A", "gpu", "x > 1", 5, 0, "info", "model {{ query \"up\" }}", "drain")
    with pytest.raises(UnsafeValue):
        a.rule()


def test_promql_string_literals_are_escaped():
    assert alerts_mod.q('a"b\\c') == '"a\\"b\\\\c"'


@pytest.mark.parametrize("example", ["lab", "estate"])
def test_every_blip_test_catches_a_rule_without_for(examples, example, tmp_path):
    """Mutation check for every alert: the same rule with `for: 0` and its rate window shrunk to 2m
    must fail its generated test (the blip fires it), so what keeps each blip silent is the rule's
    `for:` or rate window, and the blip test stands between a transient and a page."""
    tool = promtool()
    tests = obs.unit_tests(examples[example])
    (tmp_path / "rules").mkdir()
    names = []
    for i, (name, (alert, doc)) in enumerate(tests.items()):
        (tmp_path / "rules" / f"{i:03d}.yml").write_text(obs.single_rule_file(
            alerts_mod.replace(alert, for_minutes=0, expr=re.sub(r"\[\d+m\]", "[2m]", alert.expr))))
        (tmp_path / f"{name}.test.yml").write_text(json.dumps(doc))
        names.append(f"{name}.test.yml")
    proc = subprocess.run([tool, "test", "rules", *names], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    sections = re.split(r"Unit Testing:\s+", proc.stdout)[1:]
    results = {s.split()[0]: ("SUCCESS" not in s.split("\n", 2)[1]) for s in sections}
    assert set(results) == set(names)
    survived = [n for n, failed in results.items() if not failed]
    assert survived == [], f"rules without `for:` still pass their tests: {survived}"


def test_xid_alert_classes_follow_the_health_check():
    """The alerts class an Xid as the health check judges the node (knowledge/xid_nodecheck.csv): Xid 45, which
    every scancelled or preempted CUDA job leaves, is an application XID (the node stays in service), never a
    fatal one that tells the operator to drain; 79 (fallen off the bus) is fatal."""
    from clusterdef.knowledge.xid import catalogue
    from clusterdef.render.observability.alertrules import xid_classes

    cls = xid_classes()
    assert 45 in cls["application"] and 45 not in cls["fatal"] and 79 in cls["fatal"] and 13 in cls["application"]
    for code, x in catalogue().items():
        if code in cls["fatal"]:
            assert x.drains, code
        elif code in cls["application"]:
            assert not x.drains and x.action != "IGNORE", code
