"""Kubernetes target: every emitted object checked against the real schemas.

- GPU Operator values: every key path exists in the chart's values.yaml of the set's release (the
  nearest release in tests/reference when the set's own is not there: v25.10.0 -> v25.10.1), and the
  ClusterPolicy the chart's own templates/clusterpolicy.yaml of that release builds from them
  (tests/gotemplate.py) validates against that release's ClusterPolicy CRD and agrees with clusterdef's
  rendition field by field.
- NVIDIADriver (the CRD of the set's release), Kueue objects: jsonschema against the CRD's openAPIV3Schema
  with unknown fields rejected.
- Tenant objects: kubernetes-validate --strict for the set's Kubernetes version.
Reference copies live in tests/reference/kubernetes/ (with .source files); CI also has ../shared.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from clusterdef import privilege
from ruamel.yaml import YAML

import gotemplate
from clusterdef import capacity, hostlist
from clusterdef.render import kubernetes as k8s
from clusterdef.render.kubernetes import common, gpu_operator
from clusterdef.resolve import Resolved, resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, dump_yaml
from lab_variants import dedicated_kubernetes, driver_pool_canary

REF = Path(__file__).parent / "reference" / "kubernetes"
SHARED = ROOT.parent / "shared" / "reference"
NEAREST_VALUES = {"v25.10.0": "v25.10.1"}  # the reference has no values.yaml of v25.10.0
yaml_safe = YAML(typ="safe")


# ---------------------------------------------------------------- helpers

def load(path: Path) -> Resolved:
    result = validate_file(path, MATRICES, TODAY)
    assert result.ok, [(f.code, f.message) for f in result.errors]
    return resolve(result.definition, result.matrix, path.parent)


@pytest.fixture(scope="module")
def dedicated_path(tmp_path_factory, lab_data) -> Path:
    """The lab with its dedicated tenant on Kubernetes too (tests/lab_variants.py)."""
    return dump_yaml(dedicated_kubernetes(lab_data), tmp_path_factory.mktemp("dedicated") / "lab-dedicated.yaml")


@pytest.fixture(scope="module")
def examples(dedicated_path) -> dict[str, Resolved]:
    out = {name: load(CLUSTERS / f"{name}.yaml") for name in ("lab", "estate")}
    out["lab-dedicated"] = load(dedicated_path)
    return out


@pytest.fixture(scope="module")
def plans(examples):
    return {name: k8s.plan(r) for name, r in examples.items()}


def variant(lab_data: dict, tmp_path: Path, mutate) -> Resolved:
    data = copy.deepcopy(lab_data)
    mutate(data)
    return load(dump_yaml(data, tmp_path / "lab-variant.yaml"))


def strict(schema):
    """The schema with additionalProperties: false wherever it lists properties (unknown fields fail)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_validator(path: Path, version: str | None = None) -> jsonschema.protocols.Validator:
    crd = yaml_safe.load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())
    versions = crd["spec"]["versions"]
    v = next(x for x in versions if version is None or x["name"] == version)
    schema = strict(v["schema"]["openAPIV3Schema"])
    return jsonschema.Draft7Validator(schema)


def errors_of(validator, obj) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]


KUEUE_CRDS = {kind: REF / "kueue" / f"kueue.x-k8s.io_{plural}.json" for kind, plural in (
    ("ClusterQueue", "clusterqueues"), ("Cohort", "cohorts"), ("LocalQueue", "localqueues"),
    ("ResourceFlavor", "resourceflavors"), ("Topology", "topologies"),
    ("WorkloadPriorityClass", "workloadpriorityclasses"))}


@pytest.fixture(scope="module")
def kueue_validators():
    return {kind: crd_validator(p, "v1beta2") for kind, p in KUEUE_CRDS.items()}


def key_paths(node, prefix=()):
    """Every key path of nested mappings (lists and scalars end a path)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from key_paths(v, prefix + (k,))


def missing_in(chart: dict, values: dict) -> list[str]:
    out = []
    for path in key_paths(values):
        node = chart
        for k in path:
            if not isinstance(node, dict) or k not in node:
                out.append(".".join(path))
                break
            node = node[k]
    return out


# Keys every reference values.yaml documents only as a commented-out example block under dcgmExporter
# ("# config:", "# name: custom-dcgm-exporter-metrics", "# create: true", "# data: |-"): the chart
# reads them all the same.
COMMENTED_IN_CHART = {"dcgmExporter": {"config": {"name": None, "create": None, "data": None}}}


def chart_values(release: str) -> dict:
    tag = NEAREST_VALUES.get(release, release)
    path = REF / "gpu-operator" / f"values-{tag}.yaml"
    assert path.is_file(), f"no reference values for GPU Operator {release} (looked for {path.name})"
    text = path.read_text()
    values = yaml_safe.load(text)
    assert "\n  # config:\n    # name: custom-dcgm-exporter-metrics\n    # create: true\n    # data: |-\n" in text, path.name
    values["dcgmExporter"].setdefault("config", COMMENTED_IN_CHART["dcgmExporter"]["config"])
    return values


def with_set(r: Resolved, name: str) -> Resolved:
    return Resolved(r.definition, r.matrix.sets[name], r.matrix, r.macs)


# ---------------------------------------------------------------- GPU Operator

@pytest.mark.parametrize("set_name", sorted(p.stem for p in (MATRICES / "sets").glob("*.yaml")))
@pytest.mark.parametrize("example", ["lab", "estate"])
def test_gpu_operator_values_exist_in_chart(examples, example, set_name):
    """Every key path clusterdef emits is a key of the chart values.yaml of that release."""
    r = with_set(examples[example], set_name)
    values = gpu_operator.values(r)
    chart = chart_values(r.set.components.gpu_operator)
    assert missing_in(chart, values) == []
    if values["driver"].get("nvidiaDriverCRD", {}).get("enabled"):  # the NVIDIADriver objects carry the driver
        assert "version" not in values["driver"] and "repository" not in values["driver"]
        drivers = {o["metadata"]["name"]: o["spec"] for o in gpu_operator.nvidia_drivers(r)}
        assert drivers["default"]["version"].startswith(r.set.components.driver), drivers["default"]
    else:
        assert values["driver"]["version"] == r.set.components.driver
    assert values["toolkit"]["version"].lstrip("v") == r.set.components.container_toolkit


def test_gpu_operator_values_follow_set_and_policy(examples, plans):
    for name, r in examples.items():
        v = plans[name].gpu_operator_values
        d = r.definition
        assert plans[name].gpu_operator_release == r.set.components.gpu_operator == "v26.3.3"
        assert v["devicePlugin"]["version"] == "v0.19.3"  # compat facts for v26.3.3
        up = v["driver"]["upgradePolicy"]
        k8s_nodes = sum(hostlist.count(g.hosts) for g in d.nodes.values() if g.control_plane == "kubernetes")
        # the Kubernetes wave, not the Slurm one: never the whole pool at once by default
        assert up["maxParallelUpgrades"] == up["maxUnavailable"] == min(d.upgrade.kubernetes_wave_size, k8s_nodes) == 1
        owner = d.kubernetes.gpu_operator.driver_owner
        assert v["driver"]["enabled"] is v["toolkit"]["enabled"] is (owner == "operator")
        assert up["drain"]["timeoutSeconds"] == d.upgrade.drain.timeout_minutes * 60
        assert up["gpuPodDeletion"]["timeoutSeconds"] == d.upgrade.drain.grace_seconds
        assert v["dcgmExporter"]["serviceMonitor"]["enabled"] is True
        assert operator_rdma(plans[name])["enabled"] is True  # both examples: IB fabric + Network Operator


def operator_rdma(plan) -> dict:
    """The GPU Operator driver's RDMA as the cluster gets it: from the values, or, where NVIDIADriver
    objects carry the driver, from each of them (all equal; absent means off)."""
    if "rdma" in plan.gpu_operator_values["driver"]:
        return plan.gpu_operator_values["driver"]["rdma"]
    specs = [o["spec"].get("rdma", {"enabled": False, "useHostMofed": False}) for o in plan.nvidia_drivers]
    assert specs and all(x == specs[0] for x in specs), specs
    return specs[0]


def chart_tag(release: str) -> str:
    return NEAREST_VALUES.get(release, release)


def operator_crd(kind: str, release: str) -> dict:
    """The CRD of the operator release the set runs (nearest reference tag), not the newest."""
    path = REF / "gpu-operator" / f"nvidia.com_{kind}-{chart_tag(release)}.json"
    assert path.is_file(), f"no {kind} CRD for GPU Operator {release} (looked for {path.name})"
    return json.loads(path.read_text())


def cluster_policy_validator(release: str, required: bool = False):
    schema = strict(operator_crd("clusterpolicies", release)["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    if not required:  # clusterdef's rendition holds only the keys it sets; the chart renders the rest
        schema["properties"]["spec"].pop("required", None)
    return jsonschema.Draft7Validator(schema)


def cluster_policy(values: dict) -> dict:
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": gpu_operator.cluster_policy_spec(values)}


# The chart's _helpers.tpl is not in the reference: its two label helpers only fill metadata.labels and
# spec.daemonsets.labels, which clusterdef does not set.
CHART_HELPERS = {"gpu-operator.labels": "app.kubernetes.io/managed-by: Helm",
                 "gpu-operator.operand-labels": "app.kubernetes.io/managed-by: gpu-operator"}


def chart_cluster_policy(release: str, values: dict) -> dict:
    """The ClusterPolicy the chart's own templates/clusterpolicy.yaml at that release builds from its
    values.yaml coalesced with clusterdef's values (tests/gotemplate.py evaluates the template)."""
    tag = chart_tag(release)
    chart = yaml_safe.load((REF / "gpu-operator" / f"values-{tag}.yaml").read_text())
    template = (REF / "gpu-operator" / f"clusterpolicy-template-{tag}.yaml").read_text()
    text = gotemplate.render(template, {"Values": gotemplate.coalesce(chart, values), "Chart": {"AppVersion": tag}},
                             CHART_HELPERS)
    return yaml_safe.load(text)


def as_stored(schema: dict, obj):
    """What the API server keeps of obj before validating it: nulls of non-nullable fields pruned and the
    schema's defaults filled in for objects that are present."""
    if isinstance(obj, dict) and "properties" in schema:
        out = {k: as_stored(schema["properties"].get(k, {}), v) for k, v in obj.items()
               if v is not None or schema["properties"].get(k, {}).get("nullable")}
        for k, sub in schema["properties"].items():
            if k not in out and "default" in sub:
                out[k] = copy.deepcopy(sub["default"])
        return out
    if isinstance(obj, list) and "items" in schema:
        return [as_stored(schema["items"], v) for v in obj]
    return obj


def leaves(node, prefix=()):
    """(path, value) of every scalar or list under nested mappings."""
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, prefix + (k,))
    else:
        yield prefix, node


def at(node, path):
    for k in path:
        if not isinstance(node, dict) or k not in node:
            return KeyError
        node = node[k]
    return node


SETS = sorted(p.stem for p in (MATRICES / "sets").glob("*.yaml"))


@pytest.mark.parametrize("set_name", SETS)
def test_cluster_policy_spec_validates(examples, set_name):
    """clusterdef's rendition validates against the ClusterPolicy CRD of the set's own operator release."""
    for r in examples.values():
        r = with_set(r, set_name)
        cp = cluster_policy(gpu_operator.values(r))
        assert errors_of(cluster_policy_validator(r.set.components.gpu_operator), cp) == []
        assert cp["spec"]["driver"]["upgradePolicy"]["podDeletion"]["timeoutSeconds"] == 300


@pytest.mark.parametrize("set_name", SETS)
@pytest.mark.parametrize("example", ["lab", "estate", "lab-dedicated"])
def test_chart_template_builds_the_same_cluster_policy(examples, example, set_name):
    """The chart's own template at the set's release, fed the chart's defaults and clusterdef's values,
    builds a ClusterPolicy that (as the API server stores it) validates against that release's CRD with
    every required section, and holds every field clusterdef's rendition claims, with the same value."""
    r = with_set(examples[example], set_name)
    release = r.set.components.gpu_operator
    values = gpu_operator.values(r)
    built = chart_cluster_policy(release, values)
    schema = operator_crd("clusterpolicies", release)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    stored = as_stored(schema, built)
    assert errors_of(cluster_policy_validator(release, required=True), stored) == []
    ours = gpu_operator.cluster_policy_spec(values)
    assert [(".".join(p), v, at(built["spec"], p)) for p, v in leaves(ours) if at(built["spec"], p) != v] == []


# Values clusterdef emits that templates/clusterpolicy.yaml does not read: they steer other templates
# of the chart (the default NVIDIADriver CR, the DCGM ConfigMap).
NOT_IN_CLUSTER_POLICY = {("driver", "nvidiaDriverCRD", "deployDefaultCR"),
                         ("dcgmExporter", "config", "create"), ("dcgmExporter", "config", "data")}


def changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "-x"
    return value + [{"key": "x", "operator": "Exists"}]


@pytest.mark.parametrize("set_name", SETS)
def test_every_value_clusterdef_sets_reaches_the_cluster_policy(examples, set_name):
    """Which fields the template sets from which values: changing any value clusterdef emits changes the
    ClusterPolicy the chart builds at that release (none is silently ignored by the template)."""
    r = with_set(examples["lab-dedicated"], set_name)
    release = r.set.components.gpu_operator
    values = gpu_operator.values(r)
    values["driver"]["nvidiaDriverCRD"] = {"enabled": False, "deployDefaultCR": False}  # pools' keys, too
    base = chart_cluster_policy(release, values)
    ignored = []
    for path, value in leaves(values):
        mutated = copy.deepcopy(values)
        node = mutated
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = changed(value)
        if chart_cluster_policy(release, mutated) == base:
            ignored.append(path)
    assert set(ignored) == NOT_IN_CLUSTER_POLICY


def test_chart_defaults_clusterdef_overrides(examples):
    """The chart's defaults at the examples' release (v26.3.3): without clusterdef's upgrade policy the
    upgrade controller may take 25% of the nodes at once and drains nothing; clusterdef sets the wave."""
    r = examples["lab"]
    release = r.set.components.gpu_operator
    values = gpu_operator.values(r)
    bare = copy.deepcopy(values)
    del bare["driver"]["upgradePolicy"]  # values.yaml's defaults apply
    up = chart_cluster_policy(release, bare)["spec"]["driver"]["upgradePolicy"]
    assert (up["maxUnavailable"], up["drain"]["enable"], up["waitForCompletion"]) == ("25%", False, {"timeoutSeconds": 0})
    bare["driver"]["upgradePolicy"] = {"maxUnavailable": None, "autoUpgrade": None}  # null removes the chart's key
    up = chart_cluster_policy(release, bare)["spec"]["driver"]["upgradePolicy"]
    assert (up["maxUnavailable"], up["autoUpgrade"]) == ("25%", False)  # the template's own `default`s
    built = chart_cluster_policy(release, values)["spec"]
    up = built["driver"]["upgradePolicy"]
    assert (up["maxUnavailable"], up["maxParallelUpgrades"], up["drain"]["enable"]) == (1, 1, True)
    # a default clusterdef leaves alone stays the chart's
    assert built["validator"]["image"] == "gpu-operator"  # values.yaml v26.3.3: validator.image


@pytest.mark.parametrize("template, values, out", [
    ('m: {{ .Values.x | default "25%" }}', {"x": 0}, 'm: 25%'),  # Sprig: 0 is empty
    ('m: {{ .Values.x | default "25%" }}', {"x": 2}, "m: 2"),
    ("m: {{ .Values.x | default false }}", {}, "m: false"),
    ("a:\n  {{- if .Values.m }}\n  b: 1\n  {{- end }}\nc: 2", {"m": {}}, "a:\nc: 2"),  # empty map is false
    ("a:\n  {{- if .Values.m }}\n  b: 1\n  {{- else }}\n  b: 0\n  {{- end }}", {"m": [1]}, "a:\n  b: 1"),
    ("{{- if and (.Values.c) (.Values.c.name) }}x{{- end }}y", {}, "y"),  # stops before the nil lookup
    ("{{- if ne .Values.c nil }}x{{- end }}", {"c": False}, "x"),
    ("v: {{ .Values.v | quote }} n: {{ .Values.n | quote }}", {"v": "1.0"}, 'v: "1.0" n: '),
    ("k: {{ .Values.e }}", {}, "k: "),  # a missing key prints nothing (Helm drops <no value>)
    ("t: {{ toYaml .Values.t | nindent 2 }}", {"t": [{"b": 1, "a": "x"}]}, "t: \n  - a: x\n    b: 1"),
])
def test_gotemplate_follows_go_and_sprig(template, values, out):
    """The interpreter the ClusterPolicy oracle rests on, on what text/template and Sprig print."""
    assert gotemplate.render(template, {"Values": values}) == out


@pytest.mark.parametrize("template", ["{{ .Values.a.b }}", "{{- range .Values.l }}x{{- end }}", "{{ .Values.m }}"])
def test_gotemplate_refuses_what_go_refuses_or_it_does_not_know(template):
    with pytest.raises(gotemplate.TemplateError):
        gotemplate.render(template, {"Values": {"m": {"k": 1}, "l": [1]}})


def test_cluster_policy_schema_rejects_unknown_keys(plans):
    validator = cluster_policy_validator(plans["lab"].gpu_operator_release)
    values = copy.deepcopy(plans["lab"].gpu_operator_values)
    values["driver"]["upgradePolicy"]["maxParallelUpgrade"] = 1  # singular: not a field
    assert any("maxParallelUpgrade" in e for e in errors_of(validator, cluster_policy(values)))
    values = copy.deepcopy(plans["lab"].gpu_operator_values)
    values["mig"]["strategy"] = "double"
    assert errors_of(validator, cluster_policy(values))


def test_driver_pools_canary(lab_data, tmp_path):
    """A canary pool runs the candidate set's driver through its own NVIDIADriver; the rest the set's."""
    r = load(dump_yaml(driver_pool_canary(lab_data), tmp_path / "lab-canary.yaml"))
    p = k8s.plan(r)
    drivers = {o["metadata"]["name"]: o for o in p.nvidia_drivers}
    assert set(drivers) == {"default", "default.canary", "canary", "canary.canary"}  # each pool and its canary
    assert drivers["default"]["spec"]["version"] == drivers["default.canary"]["spec"]["version"] == \
        r.set.components.driver
    assert drivers["canary"]["spec"]["version"] == drivers["canary.canary"]["spec"]["version"] == \
        r.matrix.sets["2026.11-r595-candidate"].components.driver
    assert drivers["canary"]["spec"]["version"] != drivers["default"]["spec"]["version"]
    # the cluster's operator (the set's release) serves the NVIDIADriver CRD, whatever set a pool runs
    release = r.set.components.gpu_operator
    validator = crd_validator(REF / "gpu-operator" / f"nvidia.com_nvidiadrivers-{chart_tag(release)}.json")
    for obj in p.nvidia_drivers:
        assert errors_of(validator, obj) == []
    assert errors_of(validator, {**drivers["canary"], "spec": {**drivers["canary"]["spec"], "nodeSelectors": {}}})
    assert p.gpu_operator_values["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": False}
    assert missing_in(chart_values(r.set.components.gpu_operator), p.gpu_operator_values) == []
    assert errors_of(cluster_policy_validator(release), cluster_policy(p.gpu_operator_values)) == []
    built = chart_cluster_policy(release, p.gpu_operator_values)
    assert built["spec"]["driver"]["useNvidiaDriverCRD"] is True
    groups = p.nodes["groups"]
    assert groups["canary"]["labels"][common.L_DRIVER_POOL] == "canary"
    assert groups["infer"]["labels"][common.L_DRIVER_POOL] == "default"
    assert "kubernetes/gpu-operator/nvidiadrivers.yaml" in k8s.render(r)


def test_mig_profile(lab_data, tmp_path):
    def mutate(d):
        d["kubernetes"]["gpu_operator"].update(mig_strategy="single", mig_profile="3g.40gb")
    p = k8s.plan(variant(lab_data, tmp_path, mutate))
    v = p.gpu_operator_values
    assert v["mig"]["strategy"] == "single"
    assert v["migManager"] == {"enabled": True, "config": {"default": "all-3g.40gb"}}
    assert p.nodes["groups"]["infer"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"
    assert "nvidia.com/mig.config" not in p.nodes["groups"]["train"]["labels"]


# ---------------------------------------------------------------- Network Operator

def test_network_operator_values_exist_in_chart(plans):
    chart = yaml_safe.load((REF / "network-operator" / "values-v26.4.1.yaml").read_text())
    assert common.NETWORK_OPERATOR_VERSION == "v26.4.1"
    for p in plans.values():
        assert p.network_operator_values is not None
        assert missing_in(chart, p.network_operator_values) == []


def test_network_operator_only_with_rdma(lab_data, tmp_path):
    def ethernet(d):
        d["network"]["fabrics"]["ib0"]["kind"] = "ethernet"
    r = variant(lab_data, tmp_path, ethernet)
    assert k8s.plan(r).network_operator_values is None
    assert operator_rdma(k8s.plan(r))["enabled"] is False
    assert "kubernetes/network-operator/values.yaml" not in k8s.render(r)


# ---------------------------------------------------------------- Kueue

def test_kueue_objects_validate_against_crds(plans, kueue_validators):
    for name, p in plans.items():
        objs = p.kueue_objects + [o for t in p.tenants.values() for o in t if o["kind"] == "LocalQueue"]
        kinds = {o["kind"] for o in objs}
        assert {"ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "Topology",
                "WorkloadPriorityClass"} <= kinds, name
        for obj in objs:
            assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
            assert errors_of(kueue_validators[obj["kind"]], obj) == [], (name, obj["metadata"]["name"])


def test_kueue_schema_rejects_unknown_fields(plans, kueue_validators):
    cq = copy.deepcopy(next(o for o in plans["lab"].kueue_objects if o["kind"] == "ClusterQueue"))
    cq["spec"]["cohort"] = "lab"  # the v1beta1 spelling; v1beta2 has cohortName
    assert any("cohort" in e for e in errors_of(kueue_validators["ClusterQueue"], cq))
    rf = copy.deepcopy(next(o for o in plans["lab"].kueue_objects if o["kind"] == "ResourceFlavor"))
    rf["spec"]["nodeLabels"] = ["not", "a", "map"]
    assert errors_of(kueue_validators["ResourceFlavor"], rf)


def test_cluster_queues_quota(examples, plans):
    for name, r in examples.items():
        kq = r.definition.kubernetes.kueue
        cqs = {o["metadata"]["name"]: o for o in plans[name].kueue_objects if o["kind"] == "ClusterQueue"}
        assert set(cqs) == set(kq.queues)
        for qname, q in kq.queues.items():
            fl = cqs[qname]["spec"]["resourceGroups"][0]["flavors"][0]
            assert fl["name"] == q.flavor
            gpu = next(x for x in fl["resources"] if x["name"] == common.GPU)
            assert gpu["nominalQuota"] == str(q.nominal_gpus)
            if q.borrowing_limit_gpus is not None:
                assert gpu["borrowingLimit"] == str(q.borrowing_limit_gpus)
            assert int(gpu.get("lendingLimit", 0)) <= q.nominal_gpus
            assert cqs[qname]["spec"]["queueingStrategy"] == ("StrictFIFO" if q.gang else "BestEffortFIFO")
    lab = {o["metadata"]["name"]: o for o in plans["lab"].kueue_objects if o["kind"] == "ClusterQueue"}
    vision = lab["vision-serve"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    # vision: reserved 16 >= nominal 8, so nothing is lent; it may borrow its burst (8)
    assert {x["name"]: (x["nominalQuota"], x["borrowingLimit"], x["lendingLimit"]) for x in vision} == {
        "cpu": ("224", "224", "0"), "memory": ("2048Gi", "2048Gi", "0Gi"), common.GPU: ("8", "8", "0")}
    assert lab["vision-serve"]["spec"]["namespaceSelector"]["matchExpressions"][0]["values"] == ["vision"]


def test_reserved_is_never_lent_burst_is_borrowed(lab_data, tmp_path):
    def mutate(d):
        d["tenants"]["vision"]["quota"] = {"reserved_gpus": 4, "burst_gpus": 6}
    q = capacity.queue_quotas(variant(lab_data, tmp_path, mutate).definition)["vision-serve"]
    assert (q.nominal, q.lending, q.borrowing) == (8, 4, 6)  # 4 of its 8 are reserved


def test_spare_capacity_goes_to_root_cohort(plans, examples, kueue_validators):
    cohorts = {o["metadata"]["name"]: o for o in plans["estate"].kueue_objects if o["kind"] == "Cohort"}
    assert cohorts["training"]["spec"]["parentName"] == "estate"
    groups = cohorts["estate"]["spec"]["resourceGroups"]
    kq = examples["estate"].definition.kubernetes.kueue
    for fl in groups[0]["flavors"]:
        gpus = capacity.flavor_gpus(examples["estate"].definition, fl["name"])
        used = sum(q.nominal_gpus for q in kq.queues.values() if q.flavor == fl["name"])
        gpu = next(x for x in fl["resources"] if x["name"] == common.GPU)
        assert int(gpu["nominalQuota"]) == gpus - used > 0


def test_gang_admission_and_priorities(plans):
    cfg = plans["estate"].kueue_manager_config
    assert cfg["waitForPodsReady"]["blockAdmission"] is True
    assert cfg["waitForPodsReady"]["timeout"] == "600s"
    assert "waitForPodsReady" not in plans["lab"].kueue_manager_config  # no gang queue in the lab
    prios = {o["metadata"]["name"]: o["value"] for o in plans["estate"].kueue_objects
             if o["kind"] == "WorkloadPriorityClass"}
    assert prios["clusterdef-inference"] > prios["clusterdef-training"]


def test_topology_levels_are_node_labels(plans, examples):
    for name, p in plans.items():
        d = examples[name].definition
        topo = {o["metadata"]["name"]: o for o in p.kueue_objects if o["kind"] == "Topology"}
        for fabric, t in p.nodes["topology"].items():
            assert [lv["nodeLabel"] for lv in topo[fabric]["spec"]["levels"]] == t["levels"]
            covered = hostlist.union(e["hosts"] for e in t["nodes"])
            # worker groups only: a control-plane node (services) is in no Kueue topology
            k8s_hosts = hostlist.union(g.hosts for g in d.groups_of("kubernetes").values()
                                       if g.placement and g.placement.fabric == fabric)
            assert covered == k8s_hosts
            for e in t["nodes"]:
                assert set(e["labels"]) | {common.L_HOSTNAME} == set(t["levels"])


# ---------------------------------------------------------------- tenants (kubernetes-validate)

def test_tenant_objects_validate_strict(plans, examples):
    import kubernetes_validate

    for name, p in plans.items():
        version = examples[name].set.components.kubernetes
        assert len(p.tenants) == sum(1 for t in examples[name].definition.tenants.values() if t.kubernetes)
        for _tname, objs in p.tenants.items():
            for obj in objs:
                if obj["apiVersion"].startswith(("kueue.x-k8s.io/", "k8s.cni.cncf.io/")):
                    continue  # CRDs, checked against their own schemas
                kubernetes_validate.validate(obj, version, strict=True)


def test_kubernetes_validate_cli_rejects_unknown_field(tmp_path, plans, examples):
    """The real CLI, on a rendered tenant file, passes; with one misspelt field, it fails."""
    exe = Path(sys.executable).parent / "kubernetes-validate"
    if not exe.exists():
        if os.environ.get("CI"):
            pytest.fail("kubernetes-validate is missing in CI ([test] extras)")
        pytest.skip("kubernetes-validate is not installed")
    objs = [o for o in plans["lab"].tenants["nlp"] if not o["apiVersion"].startswith("kueue")]
    good = tmp_path / "good.yaml"
    good.write_text(common.dump_all(objs))
    version = examples["lab"].set.components.kubernetes
    ok = subprocess.run([str(exe), "--strict", "-k", version, str(good)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad_objs = copy.deepcopy(objs)
    bad_objs[1]["spec"]["hardd"] = bad_objs[1]["spec"].pop("hard")
    bad = tmp_path / "bad.yaml"
    bad.write_text(common.dump_all(bad_objs))
    no = subprocess.run([str(exe), "--strict", "-k", version, str(bad)], capture_output=True, text=True)
    assert no.returncode != 0 and "hardd" in no.stdout + no.stderr


@pytest.mark.parametrize("example", ["lab", "estate", "lab-dedicated"])
def test_tenant_quota_isolation_and_rbac(plans, examples, example):
    d = examples[example].definition
    for tname, objs in plans[example].tenants.items():
        t = d.tenants[tname]
        by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        ns = by[("Namespace", t.kubernetes.namespace)]
        enforce = ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        approved = bool(privilege.tenant_features(d).get(tname))  # a `privileged` approval: the policy limits it
        assert enforce == ("privileged" if approved else "restricted" if t.isolation.level == "dedicated" else "baseline")
        hard = int(by[("ResourceQuota", "gpu-quota")]["spec"]["hard"]["requests.nvidia.com/gpu"])
        nominal = sum(d.kubernetes.kueue.queues[q].nominal_gpus for q in t.kubernetes.queues)
        assert nominal <= hard <= t.quota.reserved_gpus + t.quota.burst_gpus
        deny = by[("NetworkPolicy", "default-deny")]["spec"]
        assert deny["podSelector"] == {} and "Ingress" in deny["policyTypes"]
        assert ("Egress" in deny["policyTypes"]) == (t.isolation.level == "dedicated")
        if t.isolation.level == "dedicated":  # egress closed, but DNS in kube-system and its own namespace open
            allowed = by[("NetworkPolicy", "allow-egress-platform")]["spec"]["egress"]
            assert allowed[0]["to"][0]["namespaceSelector"]["matchLabels"] == {common.L_NS_NAME: "kube-system"}
            assert {(x["protocol"], x["port"]) for x in allowed[0]["ports"]} == {("UDP", 53), ("TCP", 53)}
            same = by[("NetworkPolicy", "allow-same-namespace")]["spec"]
            assert same["egress"] == [{"to": [{"podSelector": {}}]}] and "Egress" in same["policyTypes"]
        if t.kubernetes.allow_from_namespaces:
            allow = by[("NetworkPolicy", "allow-from-namespaces")]["spec"]["ingress"][0]["from"][0]
            assert allow["namespaceSelector"]["matchExpressions"][0]["values"] == sorted(t.kubernetes.allow_from_namespaces)
        prefix = d.identity.oidc.groups_prefix if d.identity and d.identity.oidc else ""
        for g in t.kubernetes.groups:  # the group as the API server sees it: with the OIDC groups prefix
            rb = by[("RoleBinding", f"{g}-edit")]
            assert rb["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": prefix + g}]
        assert {o["metadata"]["name"] for o in objs if o["kind"] == "LocalQueue"} == set(t.kubernetes.queues)
        assert all(o["metadata"].get("namespace", ns["metadata"]["name"]) == t.kubernetes.namespace for o in objs)


# ---------------------------------------------------------------- nodes

LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


ROLE_CP = "node-role.kubernetes.io/control-plane"


def test_node_labels_and_taints(plans, examples):
    for name, p in plans.items():
        d, vs = examples[name].definition, examples[name].set
        flavors = {o["metadata"]["name"]: o for o in p.kueue_objects if o["kind"] == "ResourceFlavor"}
        for gname, g in p.nodes["groups"].items():
            labels = g["labels"]
            assert labels[common.L_SET] == vs.name
            assert labels[common.L_CONTROL_PLANE] == d.nodes[gname].control_plane
            for k, v in labels.items():
                assert LABEL_KEY.match(k) and LABEL_VALUE.match(v), (k, v)
            effects = {(t["key"], t["effect"]) for t in g["taints"]}
            assert d.nodes[gname].control_plane != "none", "a host with no kubelet is not listed"
            if "kube-control-plane" in d.nodes[gname].services:
                # docs/services.md: kubeadm's control-plane role and taint, nothing of a GPU node
                assert labels[ROLE_CP] == "" and effects == {(ROLE_CP, "NoSchedule")}
                assert not {common.L_FLAVOR, common.L_DRIVER_POOL, common.L_GPU, common.L_TENANT} & set(labels)
                assert g["kubelet_args"] == [
                    "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items() if k != ROLE_CP),
                    f"--register-with-taints={ROLE_CP}:NoSchedule"]
                continue
            if d.nodes[gname].control_plane == "slurm":
                # Slurm's GPUs: no pod lands or stays, and the GPU Operator deploys nothing there.
                assert {(common.L_CONTROL_PLANE, "NoSchedule"), (common.L_CONTROL_PLANE, "NoExecute")} <= effects
                assert labels["nvidia.com/gpu.deploy.operands"] == "false"
                assert common.L_FLAVOR not in labels
            else:
                assert (common.GPU, "NoSchedule") in effects
                fl = flavors[labels[common.L_FLAVOR]]
                assert fl["spec"]["nodeLabels"].items() <= labels.items()
            assert g["kubelet_args"][0] == "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items())


# ---------------------------------------------------------------- files, bad input, speed

def test_rendered_files_parse_back(examples, plans):
    for name, r in examples.items():
        tree = k8s.render(r)
        p = plans[name]
        assert yaml_safe.load(tree["kubernetes/gpu-operator/values.yaml"]) == p.gpu_operator_values
        assert yaml_safe.load(tree["kubernetes/nodes/labels-taints.yaml"]) == p.nodes
        for tname, objs in p.tenants.items():
            assert list(yaml_safe.load_all(tree[f"kubernetes/tenants/{tname}.yaml"])) == objs
        kueue_docs = [doc for rel, text in tree.items() if rel.startswith("kubernetes/kueue/")
                      and rel != "kubernetes/kueue/manager-config.yaml" for doc in yaml_safe.load_all(text)]
        assert sorted(map(json.dumps, kueue_docs)) == sorted(map(json.dumps, p.kueue_objects))
        assert tree == k8s.render(r)  # deterministic


def test_no_kubernetes_section_renders_nothing(lab_data, tmp_path):
    def mutate(d):
        del d["kubernetes"]
        for t in d["tenants"].values():
            t.pop("kubernetes", None)
            t["isolation"] = {"level": "shared"}
        d["nodes"]["infer"]["control_plane"] = "slurm"
        del d["nodes"]["k8sctl"]  # a Kubernetes control-plane node needs the section
        del d["privileged"]["vision-node-debug"]  # approves pod features in a namespace
        del d["datasets"]["imagenet-eu"]  # vision reads it from its pods only
        del d["service"]["queue_policy"]["serving"]  # it holds Kueue queues
    assert k8s.render(variant(lab_data, tmp_path, mutate)) == {}


def test_operator_release_not_supporting_kubernetes_exits_2(tmp_path):
    """A set whose GPU Operator release does not support its Kubernetes minor: finding at cluster.matrix."""
    import shutil

    matrices = tmp_path / "matrices"
    shutil.copytree(MATRICES, matrices)
    s = matrices / "sets" / "2026.07-r580.yaml"
    s.write_text(s.read_text().replace('kubernetes: "1.34.2"', 'kubernetes: "1.31.4"'))
    r = subprocess.run([sys.executable, "-m", "clusterdef", "validate", str(CLUSTERS / "lab.yaml"),
                        "--matrices", str(matrices), "--format", "json", "--today", "2026-11-30"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    found = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "matrix-operator-k8s"]
    assert found and found[0]["path"] == "cluster.matrix" and found[0]["line"] == 7
    assert "1.33-1.36" in found[0]["message"] and found[0]["hint"]


def test_reference_copies_match_shared():
    """The in-repo copies are the shared originals (CRDs: descriptions stripped, storage version only)."""
    if not SHARED.is_dir():
        pytest.skip("../shared/reference is not beside this checkout (users' checkouts have only the copies)")
    sys.path.insert(0, str(REF))
    try:
        from strip import reduce_crd
    finally:
        sys.path.remove(str(REF))
    for copy_path in sorted(REF.rglob("*.yaml")):
        original = SHARED / copy_path.relative_to(REF)
        assert copy_path.read_bytes() == original.read_bytes(), copy_path
    pairs = [(p, SHARED / "gpu-operator" / (p.stem + ".yaml")) for p in (REF / "gpu-operator").glob("nvidia.com_*.json")]
    assert len(pairs) == 8  # ClusterPolicy and NVIDIADriver of the four releases the sets run
    pairs += [(p, SHARED / "kueue" / "crds-v0.19.2" / (p.stem + ".yaml")) for p in KUEUE_CRDS.values()]
    pairs += [(p, SHARED / "nvidia-dra" / (p.stem + ".yaml")) for p in CD_CRDS]
    for copy_path, original in pairs:
        assert json.loads(copy_path.read_text()) == reduce_crd(yaml_safe.load(original.read_text())), copy_path
    for p in REF.rglob("*"):
        if p.is_file() and p.suffix in (".yaml", ".json"):
            assert p.with_name(p.name + ".source").is_file(), f"{p} has no .source"


def _pool(groups, matrix="2025.10-r580"):
    return {"node_groups": groups, "matrix": matrix}


@pytest.mark.parametrize(("code", "mutate"), [
    ("driver-pool-reserved-name", lambda d: d["kubernetes"]["gpu_operator"].update(
        driver_pools={"default": _pool(["infer"])})),
    ("driver-pool-group-twice", lambda d: d["kubernetes"]["gpu_operator"].update(
        driver_pools={"a": _pool(["infer"]), "b": _pool(["infer"])})),
    ("driver-pool-set-status", lambda d: d["kubernetes"]["gpu_operator"].update(
        driver_pools={"old": _pool(["infer"], "2025.01-r550")})),
    ("ref-node-group", lambda d: d["kubernetes"]["gpu_operator"].update(driver_pools={"a": _pool(["nope"])})),
    ("queue-no-tenant", lambda d: d["tenants"]["nlp"]["kubernetes"].update(queues=[])),
    ("rdma-without-network-operator", lambda d: d["kubernetes"].update(network_operator={"enabled": False})),
    ("rdma-no-mofed", lambda d: (  # Kubernetes nodes whose hardware has no HCA: no DOCA-OFED in their image
        d["hardware"].update({"hgx-eth": {**d["hardware"]["hgx-h100"], "firmware": ["bmc", "sbios", "gpu_vbios"],
                                          "nics": [n for n in d["hardware"]["hgx-h100"]["nics"]
                                                   if n["kind"] == "ethernet"]}}),
        d["images"].update({"k8s-node": {**d["images"]["gpu-node"], "repositories": {}}}),
        d["nodes"]["infer"].update(hardware="hgx-eth", image="k8s-node"))),
    ("gpu-layer-two-owners", lambda d: d["kubernetes"]["network_operator"].update(
        ofed_driver={"version": "3.2.1-044413"})),
    ("gpu-layer-two-owners", lambda d: d["kubernetes"]["gpu_operator"].update(driver_owner="operator")),
    ("gpu-layer-two-owners", lambda d: d["kubernetes"]["gpu_operator"].update(
        driver_pools={"a": _pool(["infer"])})),
])
def test_kubernetes_checks(lab_data, tmp_path, code, mutate):
    data = copy.deepcopy(lab_data)
    mutate(data)
    result = validate_file(dump_yaml(data, tmp_path / "def.yaml"), MATRICES, TODAY)
    found = [f for f in result.findings if f.code == code]
    assert found, [(f.code, f.message) for f in result.findings]
    assert found[0].line > 0 and found[0].hint


NCP_CRD = REF / "network-operator" / "mellanox.com_nicclusterpolicies-v26.4.1.json"


def test_nic_cluster_policy_validates_against_crd(plans):
    """The NicClusterPolicy, strict (unknown fields fail), for both examples; RDMA resources per fabric
    with the GPU nodes' IB interfaces; GPU Operator rdma only with a declared MOFED."""
    import json as _json

    validator = crd_validator(NCP_CRD)
    for name, p in plans.items():
        ncp = p.nic_cluster_policy
        assert ncp is not None, name
        assert errors_of(validator, ncp) == [], name
        config = _json.loads(ncp["spec"]["rdmaSharedDevicePlugin"]["config"])
        entry = config["configList"][0]
        assert entry["selectors"]["linkTypes"] == ["infiniband"] and entry["selectors"]["ifNames"]
        rdma = operator_rdma(p)
        if name == "estate":  # Kubernetes-only image: the Network Operator's DOCA driver container
            assert ncp["spec"]["ofedDriver"]["image"] == "doca-driver"
            assert rdma == {"enabled": True, "useHostMofed": False}
        else:  # the lab's image is shared with Slurm groups and carries the set's DOCA-OFED: host MOFED
            assert "ofedDriver" not in ncp["spec"]
            assert rdma == {"enabled": True, "useHostMofed": True}
    lab_cfg = _json.loads(plans["lab"].nic_cluster_policy["spec"]["rdmaSharedDevicePlugin"]["config"])
    assert lab_cfg["configList"][0]["resourceName"] == "rdma_shared_device_ib0"
    assert lab_cfg["configList"][0]["selectors"]["ifNames"] == [f"ibp{i}" for i in range(8)]
    bad = copy.deepcopy(plans["lab"].nic_cluster_policy)
    bad["spec"]["rdmaSharedDevicePlugin"]["resourceNames"] = ["x"]
    assert errors_of(validator, bad)


def test_host_mofed(lab_data, tmp_path):
    """A set that pins doca and an image that carries the set's DOCA-OFED (hardware with HCAs): no driver
    container, GPU Operator uses the host's (the lab as it is)."""
    r = variant(lab_data, tmp_path, lambda d: None)
    p = k8s.plan(r)
    assert "ofedDriver" not in p.nic_cluster_policy["spec"]
    assert operator_rdma(p) == {"enabled": True, "useHostMofed": True}


# ---------------------------------------------------------------- dedicated tenants on Kubernetes

def _owned_flavors(p) -> dict[str, str]:
    """ResourceFlavor -> the tenant whose nodes it selects (from the rendered objects only)."""
    return {o["metadata"]["name"]: o["spec"]["nodeLabels"][common.L_TENANT] for o in p.kueue_objects
            if o["kind"] == "ResourceFlavor" and common.L_TENANT in o["spec"]["nodeLabels"]}


def test_dedicated_flavor_is_referenced_only_by_its_tenants_queues(plans, examples):
    """From the rendered objects: `secure` owns `secure-infer` (lab-dedicated); its nodes carry its label
    and NoSchedule taint, only its flavor selects and tolerates them, and only ClusterQueues admitting
    its namespace alone list that flavor. No other flavor tolerates a tenant taint."""
    checked = 0
    for name, p in plans.items():
        d = examples[name].definition
        owned = _owned_flavors(p)
        flavors = {o["metadata"]["name"]: o for o in p.kueue_objects if o["kind"] == "ResourceFlavor"}
        groups = p.nodes["groups"]
        for fname, fl in flavors.items():
            tol = [t for t in fl["spec"].get("tolerations", []) if t["key"] == common.L_TENANT]
            if fname not in owned:
                assert tol == [], fname
                continue
            tenant = owned[fname]
            ns = d.tenants[tenant].kubernetes.namespace
            assert tol == [{"key": common.L_TENANT, "operator": "Equal", "value": tenant, "effect": "NoSchedule"}]
            selected = [g for g, v in groups.items() if fl["spec"]["nodeLabels"].items() <= v["labels"].items()]
            assert selected, fname
            for g in selected:  # every node it selects is the tenant's and tainted for it
                assert {"key": common.L_TENANT, "value": tenant, "effect": "NoSchedule"} in groups[g]["taints"]
            for other, ofl in flavors.items():  # no other flavor selects those nodes
                if other != fname:
                    assert not any(ofl["spec"]["nodeLabels"].items() <= groups[g]["labels"].items() for g in selected)
            users = [o for o in p.kueue_objects if o["kind"] == "ClusterQueue"
                     and any(f["name"] == fname for rg in o["spec"]["resourceGroups"] for f in rg["flavors"])]
            assert users, fname
            for cq in users:
                assert cq["metadata"]["labels"][common.L_TENANT] == tenant
                assert cq["spec"]["namespaceSelector"]["matchExpressions"][0]["values"] == [ns]
            checked += 1
        # tenant-tainted nodes are selected by their owner's flavor only
        for g, v in groups.items():
            for t in v["taints"]:
                if t["key"] == common.L_TENANT:
                    assert owned.get(v["labels"].get(common.L_FLAVOR)) == t["value"], g
    assert checked == 1  # lab-dedicated's secure-h100
    assert _owned_flavors(plans["lab-dedicated"]) == {"secure-h100": "secure"}
    assert _owned_flavors(plans["lab"]) == _owned_flavors(plans["estate"]) == {}


def test_dedicated_flavor_shared_is_located(lab_data, tmp_path):
    """Another tenant's queue on the dedicated flavor: an error at that queue's `flavor`, with a hint."""
    data = dedicated_kubernetes(lab_data)
    data["kubernetes"]["kueue"]["queues"]["nlp-serve"]["flavor"] = "secure-h100"
    result = validate_file(dump_yaml(data, tmp_path / "def.yaml"), MATRICES, TODAY)
    found = [f for f in result.findings if f.code == "dedicated-flavor-shared"]
    assert [f.dotted for f in found] == ["kubernetes.kueue.queues.nlp-serve.flavor"], \
        [(f.code, f.message) for f in result.findings]
    assert found[0].line > 0 and "secure" in found[0].message and found[0].hint


def test_pkey_attachment_matches_opensm_partition(plans, examples, dedicated_path):
    """The secure tenant's NetworkAttachmentDefinition: strict-valid against the CRD, the same PKey
    OpenSM's partitions.conf gives its HCA ports (Slurm and Kubernetes nodes alike)."""
    from clusterdef import tenancy
    from clusterdef.build import build_tree

    validator = crd_validator(REF / "k8s-network" / "networks-crd.yaml")
    crd = yaml_safe.load((REF / "k8s-network" / "networks-crd.yaml").read_text())
    r = examples["lab-dedicated"]
    nads = [o for o in plans["lab-dedicated"].tenants["secure"] if o["kind"] == "NetworkAttachmentDefinition"]
    assert len(nads) == 1
    nad = nads[0]
    assert nad["apiVersion"] == f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"
    assert nad["metadata"]["namespace"] == "secure"
    assert errors_of(validator, {"spec": nad["spec"]}) == []
    assert errors_of(validator, {"spec": {**nad["spec"], "pkey": "0x1"}})  # strict: unknown fields fail
    config = json.loads(nad["spec"]["config"])
    key = tenancy.pkey(r.definition, "secure")
    assert config["type"] == "ib-sriov" and config["ibKubernetesEnabled"] is True
    assert config["pkey"] == f"0x{key:04x}"
    partitions = build_tree(validate_file(dedicated_path, MATRICES, TODAY), ["network"])[0][
        "network/opensm/partitions.conf"]
    lines = [x for x in partitions.splitlines() if x.startswith("secure=")]  # definitions OpenSM merges by PKey
    assert lines and all(x.startswith(f"secure={config['pkey']},") for x in lines)
    for guid in r.definition.nodes["secure-infer"].addressing.mac.port_guids[0].split(";"):
        assert f"{guid}=full" in "\n".join(lines)
    # shared tenants get none; nor does a tenant whose pods run on no node of its own
    assert not [o for name in ("lab", "estate", "lab-dedicated") for t, objs in plans[name].tenants.items()
                if (name, t) != ("lab-dedicated", "secure") for o in objs if o["kind"] == "NetworkAttachmentDefinition"]


def test_rdma_with_network_policy_only_is_an_error(lab_data, tmp_path):
    data = dedicated_kubernetes(lab_data)
    data["tenants"]["secure"]["isolation"]["network"] = "network-policy"
    result = validate_file(dump_yaml(data, tmp_path / "def.yaml"), MATRICES, TODAY)
    found = [f for f in result.errors if f.code == "dedicated-not-isolated"
             and f.dotted == "tenants.secure.isolation.network"]
    assert found and "RDMA" in found[0].message and "partition-key" in found[0].hint, \
        [(f.code, f.message) for f in result.findings]
    # without RDMA for pods, network-policy is enough on Kubernetes (Slurm nodes still need a partition)
    data["kubernetes"]["network_operator"]["rdma_shared_device_plugin"] = False
    result = validate_file(dump_yaml(data, tmp_path / "def2.yaml"), MATRICES, TODAY)
    assert not [f for f in result.findings if "RDMA" in f.message]


def test_tenant_storage_class_volume_and_quota(plans, examples):
    """Every tenant whose filesystem is mounted where its pods run: its own StorageClass (no provisioner),
    a local PersistentVolume of <mount>/<tenant> on those groups pre-bound to its claim, and
    requests.storage = its quota in the namespace's ResourceQuota."""
    checked = 0
    for name, p in plans.items():
        d = examples[name].definition
        for tname, objs in p.tenants.items():
            t = d.tenants[tname]
            by = {o["kind"]: o for o in objs}
            hard = by["ResourceQuota"]["spec"]["hard"]
            fs = d.filesystems[t.storage.filesystem] if t.storage else None
            groups = {g for q in t.kubernetes.queues for g in d.kubernetes.kueue.flavors[
                d.kubernetes.kueue.queues[q].flavor].node_groups} & set(fs.node_groups if fs else ())
            if not groups:
                assert "StorageClass" not in by and "requests.storage" not in hard
                continue
            sc, pv, pvc = by["StorageClass"], by["PersistentVolume"], by["PersistentVolumeClaim"]
            assert sc["provisioner"] == "kubernetes.io/no-provisioner"
            size = f"{t.storage.quota_tib:g}Ti"
            assert hard["requests.storage"] == size == pv["spec"]["capacity"]["storage"]
            assert hard[f"{sc['metadata']['name']}.storageclass.storage.k8s.io/requests.storage"] == size
            assert pv["spec"]["local"]["path"] == f"{fs.mount}/{tname}"
            assert pv["spec"]["storageClassName"] == sc["metadata"]["name"] == pvc["spec"]["storageClassName"]
            assert pv["spec"]["claimRef"]["namespace"] == t.kubernetes.namespace == pvc["metadata"]["namespace"]
            assert pv["spec"]["claimRef"]["name"] == pvc["metadata"]["name"]
            assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
            sel = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
            assert sel["key"] == common.L_GROUP and set(sel["values"]) == groups
            checked += 1
    assert checked >= 2 + 3  # the lab's two tenants with namespaces, lab-dedicated's three


def test_partition_key_pods_on_shared_nodes_is_a_gap(lab_data, tmp_path):
    """The dedicated tenant's queue moved to the shared flavor: its pods would share nodes (device) and
    use RDMA through HCA ports outside its partition (network); both located errors, no NAD rendered."""
    data = dedicated_kubernetes(lab_data)
    data["kubernetes"]["kueue"]["queues"]["secure-serve"]["flavor"] = "h100"
    data["kubernetes"]["kueue"]["queues"]["secure-serve"]["nominal_gpus"] = 0
    result = validate_file(dump_yaml(data, tmp_path / "def.yaml"), MATRICES, TODAY)
    gaps = {f.dotted: f for f in result.errors if f.code == "dedicated-not-isolated"}
    assert set(gaps) == {"tenants.secure.isolation.device", "tenants.secure.isolation.network"}, \
        [(f.code, f.message) for f in result.findings]
    assert "h100" in gaps["tenants.secure.isolation.device"].message
    assert "HCA ports" in gaps["tenants.secure.isolation.network"].message
    assert "node_groups" in gaps["tenants.secure.isolation.network"].hint


def test_admission_policy_refuses_other_tenants_tolerations(plans, examples):
    """The rendered ValidatingAdmissionPolicy: strict-valid (kubernetes-validate), bound to the tenants'
    namespaces only, and its CEL expressions, evaluated by a CEL implementation (cel-python) on pods,
    refuse another tenant's toleration, a toleration of every taint and a pod naming its node, while the
    owner's pods (with the toleration Kueue adds from its flavor) and other tenants' plain pods pass."""
    import celpy
    import kubernetes_validate

    from clusterdef.render.kubernetes import admission

    p, r = plans["lab-dedicated"], examples["lab-dedicated"]
    assert [o["kind"] for o in p.admission] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    for obj in p.admission:
        kubernetes_validate.validate(obj, r.set.components.kubernetes, strict=True)
    assert plans["estate"].admission == plans["lab"].admission == []  # no tenant owns Kubernetes nodes there
    policy, binding = p.admission
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"] and policy["spec"]["failurePolicy"] == "Fail"
    sel = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert sel == [{"key": common.L_TENANT, "operator": "Exists"}]
    for objs in p.tenants.values():  # every tenant namespace is selected
        assert common.L_TENANT in objs[0]["metadata"]["labels"]

    env = celpy.Environment()
    programs = [env.program(env.compile(v["expression"])) for v in policy["spec"]["validations"]]
    flavor = next(o for o in p.kueue_objects if o["kind"] == "ResourceFlavor" and o["metadata"]["name"] == "secure-h100")

    def allowed(namespace: str, spec: dict, operation: str = "CREATE") -> bool:
        tenant = next(t for t, objs in p.tenants.items() if objs[0]["metadata"]["name"] == namespace)
        ns = {"metadata": {"name": namespace, "labels": p.tenants[tenant][0]["metadata"]["labels"]}}
        act = {"object": celpy.json_to_cel({"spec": spec}), "namespaceObject": celpy.json_to_cel(ns),
               "request": celpy.json_to_cel({"operation": operation})}
        return all(bool(prog.evaluate(act)) for prog in programs)

    own = {"tolerations": flavor["spec"]["tolerations"], "nodeSelector": flavor["spec"]["nodeLabels"]}
    assert allowed("secure", own)                       # the owner's pod as Kueue admits it
    assert not allowed("nlp", own)                      # the same pod in another tenant's namespace
    assert allowed("nlp", {"tolerations": [dict(common.GPU_TOLERATION)]})
    assert allowed("nlp", {})
    assert not allowed("nlp", {"tolerations": [{"operator": "Exists"}]})
    assert not allowed("nlp", {"tolerations": [{"key": common.L_TENANT, "operator": "Exists"}]})
    assert not allowed("vision", {"nodeName": "ksgpu01"})
    assert allowed("vision", {"nodeName": "kgpu01"}, "UPDATE")  # binding a scheduled pod is not a CREATE
    assert len(programs) == len(admission.VALIDATIONS) == 3


def test_flavor_mixing_owned_and_shared_groups(lab_data, tmp_path):
    data = dedicated_kubernetes(lab_data)
    data["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "secure-infer"]
    result = validate_file(dump_yaml(data, tmp_path / "def.yaml"), MATRICES, TODAY)
    found = [f for f in result.errors if f.code == "tenant-nodes-shared"]
    assert [f.dotted for f in found] == ["kubernetes.kueue.flavors.h100.node_groups"], \
        [(f.code, f.message) for f in result.findings]
    assert "infer" in found[0].message and found[0].hint and found[0].line > 0


def test_every_file_the_isolation_table_names_is_rendered_on_kubernetes(dedicated_path):
    """lab-dedicated: no gap, and each Kubernetes file the table names for `secure` is in the tree."""
    from clusterdef import tenancy
    from clusterdef.build import build_tree

    result = validate_file(dedicated_path, MATRICES, TODAY)
    tree = build_tree(result)[0]
    te = tenancy.enforcement(result.definition)["secure"]
    assert not te.gaps
    named = {f for layer in te.layers.values() for f in layer.files if f.startswith("kubernetes/")}
    assert {"kubernetes/nodes/labels-taints.yaml", "kubernetes/kueue/resourceflavors.yaml",
            "kubernetes/admission/dedicated-nodes.yaml", "kubernetes/tenants/secure.yaml"} <= named
    assert named <= set(tree)


@pytest.mark.slow
def test_opensm_puts_the_kubernetes_node_in_the_nads_pkey(lab_data, tmp_path):
    """OpenSM under ibsim, with lab-dedicated's rendered partitions.conf: the HCA ports of the tenant's
    Kubernetes node (ksgpu01) hold, as a full member, the PKey its namespace's NetworkAttachmentDefinition
    names, as its Slurm nodes' ports do; the shared Kubernetes nodes' ports do not."""
    from test_tenancy import Sim, _need, ca_ports

    from clusterdef.build import build_tree
    from clusterdef.fabric import ibsim

    _need("ibsim", "ibsim-run", "ibnetdiscover", "opensm", "smpquery")
    data = dedicated_kubernetes(lab_data)
    sim = Sim(ibsim.net_file(load(dump_yaml(data, tmp_path / "a.yaml")).definition, "ib0"), tmp_path)
    try:
        ports = ca_ports(sim.run("ibnetdiscover"))
        # the definition's port GUIDs are the fabric's (as an operator copies them from ibstat)
        data["nodes"]["secure"]["addressing"]["mac"]["port_guids"] = [
            ";".join(g for g, _ in ports[h]) for h in ("sgpu01", "sgpu02")]
        data["nodes"]["secure-infer"]["addressing"]["mac"]["port_guids"] = [";".join(g for g, _ in ports["ksgpu01"])]
        result = validate_file(dump_yaml(data, tmp_path / "b.yaml"), MATRICES, TODAY)
        tree = build_tree(result)[0]
        (tmp_path / "partitions.conf").write_text(tree["network/opensm/partitions.conf"])
        nad = next(doc for doc in yaml_safe.load_all(tree["kubernetes/tenants/secure.yaml"])
                   if doc["kind"] == "NetworkAttachmentDefinition")
        key = int(json.loads(nad["spec"]["config"])["pkey"], 16)
        sim.run("opensm", "-o", "-P", str(tmp_path / "partitions.conf"), "-f", str(tmp_path / "osm.log"), "-s", "0")
        full = f"0x{key | 0x8000:04x}"
        tables = {}
        for host, host_ports in ca_ports(sim.run("ibnetdiscover")).items():
            for _guid, lid in host_ports:
                tables.setdefault(host, []).append(
                    set(re.findall(r"0x[0-9a-f]{4}", sim.run("smpquery", "pkeys", str(lid)))) - {"0x0000"})
        assert len(tables["ksgpu01"]) == 8 and all(full in t and "0x7fff" in t for t in tables["ksgpu01"])
        assert all(full in t for h in ("sgpu01", "sgpu02") for t in tables[h])
        assert all(t == {"0x7fff"} for h in ("kgpu01", "kgpu02", "gpu001") for t in tables[h])
    finally:
        sim.close()
# ---------------------------------------------------------------- NVLink domains (GB200)

CD_CRDS = sorted((REF / "nvidia-dra").glob("resource.nvidia.com_computedomains-*.json"))


def test_compute_domains_validate_against_crd():
    """clusters/gb200.yaml: one ComputeDomain (IMEX) per tenant reaching NVLink groups, strict against the
    DRA driver's CRD (v0.4.0 and the old chart's v25.12.0, which requires numNodes); the lab has none."""
    assert len(CD_CRDS) == 2
    gb = k8s.plan(load(CLUSTERS / "gb200.yaml"))
    (cd,) = gb.compute_domains
    assert cd["metadata"] == {"name": "nvl72", "namespace": "llm", "labels": {"clusterdef.dev/tenant": "llm"}}
    assert cd["spec"] == {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "nvl72-imex-channel"},
                                                     "allocationMode": "Single"}}
    for path in CD_CRDS:
        validator = crd_validator(path)
        assert errors_of(validator, cd) == [], path.name
        bad = copy.deepcopy(cd)
        bad["spec"]["channel"]["resourceClaimTemplates"] = bad["spec"]["channel"].pop("resourceClaimTemplate")
        assert errors_of(validator, bad), path.name  # strict: a misspelt field fails
    assert k8s.plan(load(CLUSTERS / "lab.yaml")).compute_domains == []
    tree = k8s.render(load(CLUSTERS / "gb200.yaml"))
    assert "kind: ComputeDomain" in tree["kubernetes/nvidia-dra/computedomains.yaml"]


def test_gb200_kueue_rack_is_the_nvlink_domain():
    """On the rail fabric, the Kueue levels are block (scalable unit), rack, host; a group in NVLink
    domains is labelled with its domain as the rack, so a job required on one rack stays in one NVL72."""
    gb = k8s.plan(load(CLUSTERS / "gb200.yaml"))
    (topo,) = [o for o in gb.kueue_objects if o["kind"] == "Topology"]
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [
        "clusterdef.dev/fabric-block", "clusterdef.dev/rack", "kubernetes.io/hostname"]
    assert gb.nodes["topology"]["ib0"]["nodes"] == [
        {"group": "mnnvl-r03", "hosts": "gb[037-054]",
         "labels": {"clusterdef.dev/fabric-block": "su1", "clusterdef.dev/rack": "rack03"}}]
