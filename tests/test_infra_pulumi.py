"""The Pulumi program in infra/ under Pulumi's own mocks (preview=False, so apply callbacks run).

The Pulumi CLI cannot run here, so the program runs in-process with mocked resource monitors: the
assertions are on what the program asks the engine to create (type tokens, names, inputs)."""

from __future__ import annotations

import sys

import pulumi
import pytest
from ruamel.yaml import YAML

from clusterdef.render import kubernetes as k8s
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, dump_yaml
from lab_variants import dedicated_kubernetes

sys.path.insert(0, str(ROOT / "infra"))


class Mocks(pulumi.runtime.Mocks):
    def __init__(self):
        self.created: list[tuple[str, str, dict]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.created.append((args.typ, args.name, dict(args.inputs)))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def run_program(path) -> list[tuple[str, str, dict]]:
    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, preview=False)
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


@pytest.fixture(scope="module", params=["lab", "estate", "lab-dedicated"])
def deployed(request, tmp_path_factory, lab_data):
    if request.param == "lab-dedicated":  # the lab's dedicated tenant on Kubernetes too (tests/lab_variants.py)
        path = dump_yaml(dedicated_kubernetes(lab_data), tmp_path_factory.mktemp("dedicated") / "lab-dedicated.yaml")
    else:
        path = CLUSTERS / f"{request.param}.yaml"
    return request.param, run_program(path), rendered(path)


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
        assert quotas["tenant-vision-resourcequota-gpu-quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "16"
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
    rel = "kubernetes/admission/dedicated-nodes.yaml"
    if rel not in tree:
        assert example in ("lab", "estate") and not policies and not bindings
        return
    assert example == "lab-dedicated"
    want = list(y.load_all(tree[rel]))
    assert policies["admission-policy"]["spec"] == as_floats(want[0]["spec"])
    assert bindings["admission-binding"]["spec"] == as_floats(want[1]["spec"])
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
