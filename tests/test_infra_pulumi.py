"""The Pulumi program in infra/ under Pulumi's own mocks (preview=False, so apply callbacks run).

The Pulumi CLI cannot run here, so the program runs in-process with mocked resource monitors: the
assertions are on what the program asks the engine to create (type tokens, names, inputs)."""

from __future__ import annotations

import sys

import pulumi
import pytest
from pulumi.runtime.mocks import MockMonitor
from ruamel.yaml import YAML

from clusterdef.render import kubernetes as k8s
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, dump_yaml
from lab_variants import dedicated_kubernetes, driver_pool_canary

sys.path.insert(0, str(ROOT / "infra"))


class Mocks(pulumi.runtime.Mocks):
    def __init__(self):
        self.created: list[tuple[str, str, dict]] = []
        self.depends: dict[str, set[str]] = {}  # resource name -> names of what it waits for (dependsOn)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.created.append((args.typ, args.name, dict(args.inputs)))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(MockMonitor):
    """The mock engine, also noting each registration's dependencies (the URNs the SDK sends after
    expanding depends_on, components into their children)."""

    def RegisterResource(self, request):
        self.mocks.depends[request.name] = {urn.rsplit("::", 1)[-1] for urn in request.dependencies}
        return super().RegisterResource(request)


def run_program(path, mocks: Mocks | None = None) -> list[tuple[str, str, dict]]:
    mocks = mocks or Mocks()
    pulumi.runtime.set_mocks(mocks, preview=False, monitor=RecordingMonitor(mocks))
    import program  # infra/program.py, imported after the mocks are in place

    @pulumi.runtime.test
    def deploy():
        program.deploy(path, MATRICES, TODAY)
        return pulumi.Output.from_input(True)

    deploy()
    return mocks.created


def rendered(path) -> dict[str, str]:
    result = validate_file(path, MATRICES, TODAY)
    return k8s.render(resolve(result.definition, result.matrix, path.parent))


def as_floats(node):
    """Mocks receive numbers as floats: compare after the same conversion."""
    if isinstance(node, dict):
        return {k: as_floats(v) for k, v in node.items()}
    if isinstance(node, list):
        return [as_floats(v) for v in node]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        return node
    return float(node)


VARIANTS = {"lab-dedicated": dedicated_kubernetes, "lab-canary": driver_pool_canary}  # tests/lab_variants.py


@pytest.fixture(scope="module", params=["lab", "estate", "lab-dedicated", "lab-canary"])
def deployed_with_deps(request, tmp_path_factory, lab_data):
    if request.param in VARIANTS:
        path = dump_yaml(VARIANTS[request.param](lab_data), tmp_path_factory.mktemp("variant") / f"{request.param}.yaml")
    else:
        path = CLUSTERS / f"{request.param}.yaml"
    mocks = Mocks()
    return request.param, run_program(path, mocks), rendered(path), mocks.depends


@pytest.fixture(scope="module")
def deployed(deployed_with_deps):
    return deployed_with_deps[:3]


def by_type(created, typ):
    return {name: inputs for t, name, inputs in created if t == typ}


def test_components_and_types(deployed):
    example, created, tree = deployed
    types = {t for t, _, _ in created}
    assert {"clusterdef:kubernetes:GpuOperator", "clusterdef:kubernetes:NetworkOperator",
            "clusterdef:kubernetes:Kueue", "clusterdef:kubernetes:Tenant",
            "kubernetes:helm.sh/v3:Release", "kubernetes:core/v1:Namespace", "kubernetes:core/v1:ResourceQuota",
            "kubernetes:core/v1:LimitRange", "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
            "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
            "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"} <= types
    tenants = {n.removeprefix("tenant-") for n in by_type(created, "clusterdef:kubernetes:Tenant")}
    assert tenants == {rel.split("/")[-1].removesuffix(".yaml") for rel in tree if rel.startswith("kubernetes/tenants/")}
    names = [(t, n) for t, n, _ in created]
    assert len(names) == len(set(names)), "a resource name is used twice"


def test_helm_values_equal_rendered_files(deployed):
    """What Pulumi gives Helm is the values file `clusterdef render` writes, after parsing."""
    example, created, tree = deployed
    releases = by_type(created, "kubernetes:helm.sh/v3:Release")
    y = YAML(typ="safe")
    gpu = releases["gpu-operator-release"]
    assert gpu["values"] == as_floats(y.load(tree["kubernetes/gpu-operator/values.yaml"]))
    assert gpu["chart"] == "gpu-operator" and gpu["version"] == "26.3.3" and gpu["namespace"] == "gpu-operator"
    net = releases["network-operator-release"]
    assert net["values"] == as_floats(y.load(tree["kubernetes/network-operator/values.yaml"]))
    policies = by_type(created, "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert [as_floats(v) for v in policies.values()] == [
        as_floats(y.load(tree["kubernetes/network-operator/nicclusterpolicy.yaml"]))]
    kueue = releases["kueue-release"]
    cfg = kueue["values"]["managerConfig"]["controllerManagerConfigYaml"]
    assert y.load(cfg) == y.load(tree["kubernetes/kueue/manager-config.yaml"])
    assert set(gpu["values"]) >= {"driver", "toolkit", "devicePlugin", "dcgmExporter", "mig"}


def test_nvidia_drivers_and_their_canaries_deployed(deployed):
    """Where the GPU Operator owns the driver (the estate), Pulumi creates every rendered NVIDIADriver:
    the pool's and its canary's (`default.canary`, selecting the nodes a rollout labels into it), as
    rendered; the lab's images carry the driver, so it gets none."""
    example, created, tree = deployed
    drivers = by_type(created, "kubernetes:nvidia.com/v1alpha1:NVIDIADriver")
    if example in ("lab", "lab-dedicated"):  # the lab's images carry the driver
        assert drivers == {} and "kubernetes/gpu-operator/nvidiadrivers.yaml" not in tree
        return
    rendered = [d for d in YAML(typ="safe").load_all(tree["kubernetes/gpu-operator/nvidiadrivers.yaml"]) if d]
    pools = {"estate": ["default"], "lab-canary": ["canary", "default"]}[example]
    assert set(drivers) == {f"gpu-operator-nvidiadriver-{p}{c}" for p in pools for c in ("", ".canary")}
    for obj in rendered:
        got = drivers[f"gpu-operator-nvidiadriver-{obj['metadata']['name']}"]
        assert as_floats({k: got[k] for k in ("apiVersion", "kind", "metadata", "spec")}) == as_floats(obj)
    assert drivers["gpu-operator-nvidiadriver-default.canary"]["spec"]["nodeSelector"] == {
        "clusterdef.dev/driver-pool": "default.canary"}
    assert drivers["gpu-operator-nvidiadriver-default"]["spec"]["nodeSelector"] == {
        "clusterdef.dev/driver-pool": "default"}
    values = by_type(created, "kubernetes:helm.sh/v3:Release")["gpu-operator-release"]["values"]
    assert values["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": False}


def test_tenant_quota_and_namespaces(deployed):
    example, created, tree = deployed
    y = YAML(typ="safe")
    quotas = by_type(created, "kubernetes:core/v1:ResourceQuota")
    queues = by_type(created, "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")
    for rel, text in tree.items():
        if not rel.startswith("kubernetes/tenants/"):
            continue
        tenant = rel.split("/")[-1].removesuffix(".yaml")
        docs = list(y.load_all(text))
        ns = docs[0]["metadata"]["name"]
        q = quotas[f"tenant-{tenant}-resourcequota-gpu-quota"]
        assert q["metadata"]["namespace"] == ns
        want = next(d for d in docs if d["kind"] == "ResourceQuota")["spec"]["hard"]["requests.nvidia.com/gpu"]
        assert q["spec"]["hard"]["requests.nvidia.com/gpu"] == want
        for d in docs:
            if d["kind"] == "LocalQueue":
                lq = queues[f"tenant-{tenant}-localqueue-{d['metadata']['name']}"]
                assert lq["metadata"]["namespace"] == ns and lq["spec"]["clusterQueue"] == d["spec"]["clusterQueue"]
    if example == "lab":
        # vision: its queue's 8 nominal; its borrowingLimit of 8 can borrow nothing (nlp-serve lends 0, the flavor is full)
        assert quotas["tenant-vision-resourcequota-gpu-quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"
        assert quotas["tenant-nlp-resourcequota-gpu-quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"


def test_cluster_queue_quota_numbers(deployed):
    example, created, tree = deployed
    y = YAML(typ="safe")
    cqs = by_type(created, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    want = list(y.load_all(tree["kubernetes/kueue/clusterqueues.yaml"]))
    assert len(cqs) == len(want)
    for cq in want:
        got = cqs[f"kueue-clusterqueue-{cq['metadata']['name']}"]
        assert got["spec"] == as_floats(cq["spec"])


def test_tenant_storage_and_ib_network_deployed(deployed):
    """The tenant's StorageClass, PersistentVolume, claim and (lab: secure) NetworkAttachmentDefinition
    are created with the rendered objects' fields."""
    example, created, tree = deployed
    y = YAML(typ="safe")
    kinds = {"StorageClass": "kubernetes:storage.k8s.io/v1:StorageClass",
             "PersistentVolume": "kubernetes:core/v1:PersistentVolume",
             "PersistentVolumeClaim": "kubernetes:core/v1:PersistentVolumeClaim",
             "NetworkAttachmentDefinition": "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"}
    seen = {k: 0 for k in kinds}
    for rel, text in tree.items():
        if not rel.startswith("kubernetes/tenants/"):
            continue
        tenant = rel.split("/")[-1].removesuffix(".yaml")
        for doc in y.load_all(text):
            if doc["kind"] not in kinds:
                continue
            got = by_type(created, kinds[doc["kind"]])[f"tenant-{tenant}-{doc['kind'].lower()}-{doc['metadata']['name']}"]
            assert got["metadata"] == doc["metadata"]
            if doc["kind"] == "StorageClass":
                assert (got["provisioner"], got["volumeBindingMode"], got["reclaimPolicy"]) == \
                    (doc["provisioner"], doc["volumeBindingMode"], doc["reclaimPolicy"])
            else:
                assert got["spec"] == as_floats(doc["spec"])
            seen[doc["kind"]] += 1
    if example == "lab":
        assert seen == {"StorageClass": 2, "PersistentVolume": 2, "PersistentVolumeClaim": 2,
                        "NetworkAttachmentDefinition": 0}
    if example == "lab-dedicated":
        assert seen == {"StorageClass": 3, "PersistentVolume": 3, "PersistentVolumeClaim": 3,
                        "NetworkAttachmentDefinition": 1}


def test_admission_policy_deployed(deployed):
    example, created, tree = deployed
    y = YAML(typ="safe")
    policies = by_type(created, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    bindings = by_type(created, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
    files = {"kubernetes/admission/dedicated-nodes.yaml": "admission",
             "kubernetes/admission/privileged-pods.yaml": "privileged_pods",      # every example (docs/data.md)
             "kubernetes/admission/dataset-claims.yaml": "dataset_admission"}     # where a dataset is in a namespace
    assert ("kubernetes/admission/dedicated-nodes.yaml" in tree) == (example == "lab-dedicated")
    assert "kubernetes/admission/privileged-pods.yaml" in tree
    for rel, key in files.items():
        if rel not in tree:
            assert f"{key}-policy" not in policies and f"{key}-binding" not in bindings
            continue
        want = list(y.load_all(tree[rel]))
        assert policies[f"{key}-policy"]["spec"] == as_floats(want[0]["spec"])
        assert bindings[f"{key}-binding"]["spec"] == as_floats(want[1]["spec"])
    assert len(policies) == len(bindings) == sum(rel in tree for rel in files)


def test_datasets_deployed_in_their_namespaces_only(deployed_with_deps):
    example, created, tree, depends = deployed_with_deps
    y = YAML(typ="safe")
    rels = sorted(r for r in tree if r.startswith("kubernetes/data/"))
    assert bool(rels) == (example in ("lab", "lab-dedicated", "lab-canary"))
    for rel in rels:
        name = rel.removeprefix("kubernetes/data/").removesuffix(".yaml")
        for o in y.load_all(tree[rel]):
            ns = o["metadata"].get("namespace", "cluster")
            res = f"dataset-{name}-{o['kind'].lower()}-{ns}"
            got = {n: i for t, n, i in created if n == res}
            assert got, res
            if ns != "cluster":  # after its tenant's namespace
                assert any(d.startswith("tenant-") or d == ns for d in depends[res]), (res, depends[res])


def test_cluster_admin_binding_deployed_for_admin_groups_only(deployed):
    """The lab (and its variant) declares identity: one ClusterRoleBinding of cluster-admin, to its
    admin group; the estate declares none, and gets none."""
    example, created, tree = deployed
    crbs = by_type(created, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    if example.startswith("lab"):
        assert list(crbs) == ["cluster-admins"]
        crb = crbs["cluster-admins"]
        assert crb["roleRef"]["name"] == "cluster-admin"
        assert [s["name"] for s in crb["subjects"]] == ["oidc:hpc-admins"]
        assert crb == as_floats(YAML(typ="safe").load(tree["kubernetes/identity/cluster-admins.yaml"]))
    else:
        assert crbs == {}


def test_image_policy_deployed(deployed):
    """The lab's image policy reaches Pulumi as the rendered ClusterImagePolicy and ConfigMap."""
    example, created, tree = deployed
    cips = by_type(created, "kubernetes:policy.sigstore.dev/v1beta1:ClusterImagePolicy")
    if example.startswith("lab"):
        docs = [d for d in YAML(typ="safe").load_all(tree["kubernetes/image-policy/policy.yaml"]) if d]
        assert [as_floats(v) for v in cips.values()] == [as_floats(docs[0])]
        assert cips["image-policy-clusterimagepolicy"]["spec"]["images"][0]["glob"] == "nvcr.io/nvidia/**"
    else:
        assert cips == {}


def test_nvidia_drivers_deployed_after_the_operator(deployed_with_deps):
    """One NVIDIADriver per driver pool, with the rendered objects' content, created only after the GPU
    Operator's Helm release (which installs their CRD); none without pools."""
    example, created, tree, depends = deployed_with_deps
    drivers = by_type(created, "kubernetes:nvidia.com/v1alpha1:NVIDIADriver")
    rel = "kubernetes/gpu-operator/nvidiadrivers.yaml"
    if example in ("lab", "lab-dedicated"):  # the lab's images carry the driver
        assert rel not in tree and drivers == {}
        return
    want = {d["metadata"]["name"]: d for d in YAML(typ="safe").load_all(tree[rel]) if d}
    assert sorted(want) == (["canary", "canary.canary", "default", "default.canary"] if example == "lab-canary"
                            else ["default", "default.canary"])
    assert {n.removeprefix("gpu-operator-nvidiadriver-"): v for n, v in drivers.items()} == \
        {n: as_floats(d) for n, d in want.items()}
    if example == "lab-canary":  # the canary pool pins another set
        assert drivers["gpu-operator-nvidiadriver-canary"]["spec"]["version"] != \
            drivers["gpu-operator-nvidiadriver-default"]["spec"]["version"]
    for name in drivers:
        assert depends[name] == {"gpu-operator-release"}
    values = by_type(created, "kubernetes:helm.sh/v3:Release")["gpu-operator-release"]["values"]
    assert values["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": False}


def test_depends_on_ordering(deployed_with_deps):
    """Each release after its namespace, CRD objects after the release that installs their CRD, tenant
    queues after Kueue's objects, the claim after its volume after its class, the binding after its policy."""
    example, created, tree, depends = deployed_with_deps
    assert depends["gpu-operator-release"] == {"gpu-operator-namespace"}
    assert depends["network-operator-release"] == {"network-operator-namespace"}
    assert depends["network-operator-nicclusterpolicy"] == {"network-operator-release"}
    kueue_objects = {n for t, n, _ in created if t.startswith("kubernetes:kueue.x-k8s.io/") and n.startswith("kueue-")}
    assert kueue_objects and all(depends[n] == {"kueue-release"} for n in kueue_objects)
    tenants = {n.removeprefix("tenant-") for n in by_type(created, "clusterdef:kubernetes:Tenant")}
    for t, name, _ in created:
        tenant = max((x for x in tenants if name.startswith(f"tenant-{x}-")), key=len, default=None)
        if t.startswith("clusterdef:") or tenant is None or name == f"tenant-{tenant}-namespace":
            continue
        deps = depends[name]
        assert f"tenant-{tenant}-namespace" in deps, name
        if t.startswith("kubernetes:kueue.x-k8s.io/"):  # the Kueue component, expanded into its children
            assert {"kueue-release"} | kueue_objects <= deps, name
        kind = t.rsplit(":", 1)[-1]
        if kind in ("PersistentVolume", "PersistentVolumeClaim"):
            before = {"PersistentVolume": "storageclass", "PersistentVolumeClaim": "persistentvolume"}[kind]
            assert any(d.startswith(f"tenant-{tenant}-{before}-") for d in deps), name
    if example == "lab-dedicated":
        assert depends["admission-binding"] == {"admission-policy"}


def test_gb200_deploys_the_dra_driver_before_its_compute_domains(monkeypatch):
    """clusters/gb200.yaml (a Kubernetes group in NVLink domains): the program installs NVIDIA's DRA
    driver chart (name, version, NVIDIA's repository, its namespace) with the rendered values, then
    each ComputeDomain with the release and its tenant's namespace among its dependencies (the URNs the
    engine is given, recorded from the mock monitor's RegisterResource)."""
    from pulumi.runtime import mocks as pmocks

    from clusterdef.render.kubernetes import nvidia_dra

    deps: dict[str, list[str]] = {}
    original = pmocks.MockMonitor.RegisterResource

    def record(self, request):
        deps[request.name] = list(request.dependencies)
        return original(self, request)

    monkeypatch.setattr(pmocks.MockMonitor, "RegisterResource", record)
    path = CLUSTERS / "gb200.yaml"
    created = run_program(path)
    tree = rendered(path)
    release = by_type(created, "kubernetes:helm.sh/v3:Release")["nvidia-dra-release"]
    assert (release["chart"], release["version"], release["namespace"]) == \
        ("nvidia-dra-driver-gpu", "25.12.0", "nvidia-dra-driver-gpu")
    assert release["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    values = YAML(typ="safe").load(tree["kubernetes/nvidia-dra/values.yaml"])
    assert release["values"] == as_floats(values)
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert values["nvidiaDriverRoot"] == "/"  # the gb200 image carries the driver (driver_owner: image)
    term = values["kubeletPlugin"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "clusterdef.dev/node-group", "operator": "In", "values": ["mnnvl-r03"]}]}]
    domains = by_type(created, "kubernetes:resource.nvidia.com/v1beta1:ComputeDomain")
    assert [as_floats(v) for v in domains.values()] == \
        [as_floats(o) for o in YAML(typ="safe").load_all(tree["kubernetes/nvidia-dra/computedomains.yaml"])]
    assert list(domains) == ["nvidia-dra-computedomain-llm-nvl72"]
    urns = deps["nvidia-dra-computedomain-llm-nvl72"]
    assert any(u.endswith("::nvidia-dra-release") for u in urns), urns
    assert any(u.endswith("::tenant-llm-namespace") for u in urns), urns
    assert any(u.endswith("::nvidia-dra-namespace") for u in deps["nvidia-dra-release"])
    assert nvidia_dra.CHART_VERSION == release["version"]


def test_no_dra_driver_without_nvlink_domains(deployed):
    """The lab and the estate have no NVLink domains: no DRA driver release, no values file."""
    example, created, tree = deployed
    assert "nvidia-dra-release" not in by_type(created, "kubernetes:helm.sh/v3:Release")
    assert "kubernetes/nvidia-dra/values.yaml" not in tree


GOLDEN = ROOT / "tests" / "golden"
# Files the map marks `pulumi` that hold no Kubernetes objects but a chart's input, and where the program puts them.
CHART_INPUTS = {"kubernetes/gpu-operator/values.yaml": ("gpu-operator-release", None),
                "kubernetes/network-operator/values.yaml": ("network-operator-release", None),
                "kubernetes/nvidia-dra/values.yaml": ("nvidia-dra-release", None),
                "kubernetes/kueue/manager-config.yaml": ("kueue-release", "managerConfig.controllerManagerConfigYaml")}


def _identity(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name")


@pytest.mark.parametrize("example", ["lab", "estate", "gb200"])
def test_every_file_the_map_delivers_through_pulumi_is_created_by_the_program(example):
    """delivery.json's `pulumi` files (the golden map, which test_golden keeps equal to a fresh render):
    every object of every such file is a resource the program creates, with the same content, and every
    chart input is the values its release is given. A file the map marks `pulumi` that the program does not
    read is a file nothing delivers."""
    import json

    y = YAML(typ="safe")
    files = {rel for rel, e in json.loads((GOLDEN / example / "delivery.json").read_text())["files"].items()
             if e["via"] == "pulumi"}
    assert files, example
    created = run_program(CLUSTERS / f"{example}.yaml")
    made = {_identity(inputs): inputs for t, _, inputs in created if not t.startswith("clusterdef:")}
    releases = by_type(created, "kubernetes:helm.sh/v3:Release")
    for rel in sorted(files):
        text = (GOLDEN / example / rel).read_text()
        if rel in CHART_INPUTS:
            name, key = CHART_INPUTS[rel]
            assert name in releases, f"{example}: {rel} is marked pulumi but no release {name} is created"
            given = releases[name]["values"]
            if key:
                for part in key.split("."):
                    given = given[part]
                given = y.load(given)
            assert given == as_floats(y.load(text)), f"{example}: release {name} is not given {rel}"
            continue
        objs = [o for o in y.load_all(text) if o]
        assert objs, f"{example}: {rel} holds no Kubernetes object"
        for o in objs:
            assert _identity(o) in made, f"{example}: {rel}: {_identity(o)} is marked pulumi but never created"
            got = {k: v for k, v in made[_identity(o)].items() if k in o}
            assert got == as_floats(o), f"{example}: {rel}: {_identity(o)} is created with other content"


def test_monitors_wait_for_the_releases_that_make_their_namespaces(deployed_with_deps):
    example, created, tree, depends = deployed_with_deps
    monitors = {n: i for t, n, i in created if t.startswith("kubernetes:monitoring.coreos.com/v1:")}
    assert monitors
    for name, inputs in monitors.items():
        ns = inputs["metadata"]["namespace"]
        if ns == "kueue-system":
            assert "kueue-release" in depends[name], name
        elif ns == "gpu-operator":
            assert "gpu-operator-release" in depends[name], name
