"""Signed images for tenants' pods: the rendered ClusterImagePolicy is strict-valid against the
sigstore policy-controller's CRD, its key is the definition's key byte for byte (openssl verifies a
signature made with the private half, and refuses a tampered blob), and the tenant namespaces carry
the label the controller's webhook selects on."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml

CRD = Path(__file__).parent / "reference" / "kubernetes" / "policy" / "300-clusterimagepolicy.yaml"


def _strict(schema):
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _docs(text: str) -> list[dict]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def _tree(data: dict, tmp_path: Path) -> dict[str, str]:
    r = validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, TODAY)
    assert r.ok, [(f.code, f.message) for f in r.errors]
    return build_tree(r)[0]


@pytest.fixture(scope="module")
def lab_tree():
    r = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    assert r.ok
    return build_tree(r)[0]


def test_cluster_image_policy_is_strict_valid(lab_tree):
    if not CRD.exists():
        pytest.skip(f"{CRD} is not here (../shared/reference)")
    crd = YAML(typ="safe").load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
    validator = jsonschema.Draft7Validator(_strict(version["schema"]["openAPIV3Schema"]))
    policy, config = _docs(lab_tree["kubernetes/image-policy/policy.yaml"])
    assert policy["apiVersion"] == "policy.sigstore.dev/v1beta1" and policy["kind"] == "ClusterImagePolicy"
    body = {k: v for k, v in policy.items() if k not in ("apiVersion", "kind", "metadata")}  # the API server's part
    assert [e.message for e in validator.iter_errors(body)] == []
    broken = copy.deepcopy(body)
    broken["spec"]["authorities"][0]["key"]["dataa"] = broken["spec"]["authorities"][0]["key"].pop("data")
    assert list(validator.iter_errors(broken)), "the strict schema must refuse a misspelt field"
    import kubernetes_validate

    kubernetes_validate.validate(config, "1.34.2", strict=True)
    assert config["data"] == {"no-match-policy": "deny"}
    assert [i["glob"] for i in policy["spec"]["images"]] == ["nvcr.io/nvidia/**", "registry.lab.example/ml/**"]


def test_tenant_namespaces_opt_in(lab_tree, lab, tmp_path):
    for rel in ("kubernetes/tenants/vision.yaml", "kubernetes/tenants/nlp.yaml"):
        ns = _docs(lab_tree[rel])[0]
        assert ns["kind"] == "Namespace" and ns["metadata"]["labels"]["policy.sigstore.dev/include"] == "true"
    del lab["kubernetes"]["image_policy"]
    (tmp_path / "keys").mkdir()
    tree = _tree(lab, tmp_path)
    assert "kubernetes/image-policy/policy.yaml" not in tree
    assert "policy.sigstore.dev/include" not in tree["kubernetes/tenants/vision.yaml"]


def test_rendered_key_verifies_the_signature_of_its_private_half(lab, tmp_path):
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    run = dict(check=True, capture_output=True, cwd=tmp_path)
    (tmp_path / "keys").mkdir()
    subprocess.run([openssl, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "release.key"], **run)
    subprocess.run([openssl, "ec", "-in", "release.key", "-pubout", "-out", "keys/release.pub"], **run)
    (tmp_path / "image.manifest").write_bytes(b'{"digest": "sha256:0123"}\n')
    subprocess.run([openssl, "dgst", "-sha256", "-sign", "release.key", "-out", "image.sig", "image.manifest"], **run)
    lab["kubernetes"]["image_policy"]["keys"] = {"release": {"public_key_file": "keys/release.pub"}}
    tree = _tree(lab, tmp_path)
    policy = _docs(tree["kubernetes/image-policy/policy.yaml"])[0]
    (tmp_path / "from-policy.pub").write_text(policy["spec"]["authorities"][0]["key"]["data"])

    def verify(blob: str) -> subprocess.CompletedProcess:
        return subprocess.run([openssl, "dgst", "-sha256", "-verify", "from-policy.pub", "-signature", "image.sig", blob],
                              capture_output=True, text=True, cwd=tmp_path)

    assert verify("image.manifest").stdout.strip() == "Verified OK"
    (tmp_path / "tampered").write_bytes(b'{"digest": "sha256:0124"}\n')
    assert verify("tampered").returncode != 0
    # the same key given inline (cosign.pub's base64 body on one line) renders the same policy key
    body = "".join(ln for ln in (tmp_path / "keys" / "release.pub").read_text().splitlines() if not ln.startswith("-----"))
    lab["kubernetes"]["image_policy"]["keys"] = {"release": {"public_key": body}}
    inline = _docs(_tree(lab, tmp_path)["kubernetes/image-policy/policy.yaml"])[0]
    assert inline["spec"]["authorities"] == policy["spec"]["authorities"]


def test_allow_list_without_signatures(lab, tmp_path):
    lab["kubernetes"]["image_policy"] = {"registries": ["nvcr.io/nvidia"], "require_signatures": False}
    tree = _tree(lab, tmp_path)
    policy = _docs(tree["kubernetes/image-policy/policy.yaml"])[0]
    assert policy["spec"]["authorities"] == [{"name": "allow-list", "static": {"action": "pass"}}]
