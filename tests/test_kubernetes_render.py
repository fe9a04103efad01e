"""Kubernetes target: every emitted object checked against the real schemas.

- GPU Operator values: every key path exists in the chart's values.yaml of the set's release (the
  nearest release in tests/reference when the set's own is not there: v25.10.0 -> v25.10.1), and the
  ClusterPolicy spec the chart builds from them validates against the ClusterPolicy CRD.
- NVIDIADriver, Kueue objects: jsonschema against the CRD's openAPIV3Schema with unknown fields rejected.
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
from ruamel.yaml import YAML

from clusterdef import hostlist
from clusterdef.render import kubernetes as k8s
from clusterdef.render.kubernetes import common, gpu_operator, kueue
from clusterdef.resolve import Resolved, resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, dump_yaml

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
def examples() -> dict[str, Resolved]:
    return {name: load(CLUSTERS / f"{name}.yaml") for name in ("lab", "estate")}


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
    crd = json.loads(path.read_text())
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
        assert v["driver"]["rdma"]["enabled"] is True  # both examples: IB fabric + Network Operator


@pytest.fixture(scope="module")
def cluster_policy_validator():
    path = REF / "gpu-operator" / "nvidia.com_clusterpolicies-v26.7.0.json"
    crd = json.loads(path.read_text())
    schema = strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    # The chart renders every required section from its own defaults; clusterdef sets some of them.
    schema["properties"]["spec"].pop("required", None)
    return jsonschema.Draft7Validator(schema)


def cluster_policy(values: dict) -> dict:
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": gpu_operator.cluster_policy_spec(values)}


def test_cluster_policy_spec_validates(plans, cluster_policy_validator):
    for p in plans.values():
        cp = cluster_policy(p.gpu_operator_values)
        assert errors_of(cluster_policy_validator, cp) == []
        assert cp["spec"]["driver"]["upgradePolicy"]["podDeletion"]["timeoutSeconds"] == 300


def test_cluster_policy_schema_rejects_unknown_keys(plans, cluster_policy_validator):
    values = copy.deepcopy(plans["lab"].gpu_operator_values)
    values["driver"]["upgradePolicy"]["maxParallelUpgrade"] = 1  # singular: not a field
    assert any("maxParallelUpgrade" in e for e in errors_of(cluster_policy_validator, cluster_policy(values)))
    values = copy.deepcopy(plans["lab"].gpu_operator_values)
    values["mig"]["strategy"] = "double"
    assert errors_of(cluster_policy_validator, cluster_policy(values))


def test_driver_pools_canary(lab_data, tmp_path, cluster_policy_validator):
    """A canary pool runs the candidate set's driver through its own NVIDIADriver; the rest the set's."""
    def mutate(d):
        d["cluster"]["allow_candidate"] = True
        # the operator owns driver and toolkit: the Kubernetes groups get an image without them
        d["kubernetes"]["gpu_operator"]["driver_owner"] = "operator"
        d["images"]["k8s-node"] = copy.deepcopy(d["images"]["gpu-node"])
        d["images"]["k8s-node"].pop("repositories")
        d["nodes"]["infer"]["image"] = "k8s-node"
        d["nodes"]["canary"] = {**copy.deepcopy(d["nodes"]["infer"]), "hosts": "kgpu03",
                                "addressing": {"ipv4_start": "10.20.0.33",
                                               "mac": {"source": "list", "macs": ["52:54:00:20:00:33"]}}}
        d["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf02"]["nodes"] += ",kgpu03"
        d["kubernetes"]["gpu_operator"]["driver_pools"] = {
            "canary": {"node_groups": ["canary"], "matrix": "2026.11-r595-candidate"}}
    r = variant(lab_data, tmp_path, mutate)
    p = k8s.plan(r)
    drivers = {o["metadata"]["name"]: o for o in p.nvidia_drivers}
    assert set(drivers) == {"default", "canary"}
    assert drivers["default"]["spec"]["version"] == r.set.components.driver
    assert drivers["canary"]["spec"]["version"] == r.matrix.sets["2026.11-r595-candidate"].components.driver
    assert drivers["canary"]["spec"]["version"] != drivers["default"]["spec"]["version"]
    validator = crd_validator(REF / "gpu-operator" / "nvidia.com_nvidiadrivers-excerpt.json")
    for obj in p.nvidia_drivers:
        assert errors_of(validator, obj) == []
    assert errors_of(validator, {**drivers["canary"], "spec": {**drivers["canary"]["spec"], "nodeSelectors": {}}})
    assert p.gpu_operator_values["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": False}
    assert missing_in(chart_values(r.set.components.gpu_operator), p.gpu_operator_values) == []
    assert errors_of(cluster_policy_validator, cluster_policy(p.gpu_operator_values)) == []
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
    assert k8s.plan(r).gpu_operator_values["driver"]["rdma"]["enabled"] is False
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
    q = kueue.quotas(variant(lab_data, tmp_path, mutate))["vision-serve"]
    assert (q.nominal, q.lending, q.borrowing) == (8, 4, 6)  # 4 of its 8 are reserved


def test_spare_capacity_goes_to_root_cohort(plans, examples, kueue_validators):
    cohorts = {o["metadata"]["name"]: o for o in plans["estate"].kueue_objects if o["kind"] == "Cohort"}
    assert cohorts["training"]["spec"]["parentName"] == "estate"
    groups = cohorts["estate"]["spec"]["resourceGroups"]
    kq = examples["estate"].definition.kubernetes.kueue
    for fl in groups[0]["flavors"]:
        capacity = kueue.flavor_capacity(examples["estate"], fl["name"])
        used = sum(q.nominal_gpus for q in kq.queues.values() if q.flavor == fl["name"])
        gpu = next(x for x in fl["resources"] if x["name"] == common.GPU)
        assert int(gpu["nominalQuota"]) == capacity - used > 0


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
            k8s_hosts = hostlist.union(g.hosts for g in d.nodes.values()
                                       if g.control_plane == "kubernetes" and g.placement.fabric == fabric)
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
                if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
                    continue  # CRD, checked above
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


def test_tenant_quota_isolation_and_rbac(plans, examples):
    d = examples["estate"].definition
    for tname, objs in plans["estate"].tenants.items():
        t = d.tenants[tname]
        by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        ns = by[("Namespace", t.kubernetes.namespace)]
        enforce = ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        assert enforce == ("restricted" if t.isolation.level == "dedicated" else "baseline")
        hard = int(by[("ResourceQuota", "gpu-quota")]["spec"]["hard"]["requests.nvidia.com/gpu"])
        nominal = sum(d.kubernetes.kueue.queues[q].nominal_gpus for q in t.kubernetes.queues)
        assert nominal <= hard <= t.quota.reserved_gpus + t.quota.burst_gpus
        deny = by[("NetworkPolicy", "default-deny")]["spec"]
        assert deny["podSelector"] == {} and "Ingress" in deny["policyTypes"]
        assert ("Egress" in deny["policyTypes"]) == (t.isolation.level == "dedicated")
        if t.kubernetes.allow_from_namespaces:
            allow = by[("NetworkPolicy", "allow-from-namespaces")]["spec"]["ingress"][0]["from"][0]
            assert allow["namespaceSelector"]["matchExpressions"][0]["values"] == sorted(t.kubernetes.allow_from_namespaces)
        for g in t.kubernetes.groups:
            rb = by[("RoleBinding", f"{g}-edit")]
            assert rb["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}]
        assert {o["metadata"]["name"] for o in objs if o["kind"] == "LocalQueue"} == set(t.kubernetes.queues)
        assert all(o["metadata"].get("namespace", ns["metadata"]["name"]) == t.kubernetes.namespace for o in objs)


# ---------------------------------------------------------------- nodes

LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


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
    pairs = [(REF / "gpu-operator" / "nvidia.com_clusterpolicies-v26.7.0.json",
              SHARED / "gpu-operator" / "nvidia.com_clusterpolicies-v26.7.0.yaml")]
    pairs += [(p, SHARED / "kueue" / "crds-v0.19.2" / (p.stem + ".yaml")) for p in KUEUE_CRDS.values()]
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
        rdma = p.gpu_operator_values["driver"]["rdma"]
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
    assert p.gpu_operator_values["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
