"""The image-policy check (validate/checks_supply_chain.py) finding by finding: code, path, message
and hint written out by hand, for the branches the bad-input corpus does not take: registries not
given at all, require_signatures given explicitly (true and false), no policy or no Kubernetes at
all, and every kind of invalid key (an inline key that is no key, a file that is not PEM, a file that
does not exist: an InputError), each at its own path, beside a valid key file. Issue #18: the
mutants of this check that the corpus and test_image_policy.py let through."""

from __future__ import annotations

from clusterdef.errors import Severity
from test_checks import run

WHERE = ("kubernetes", "image_policy")
NO_REGISTRIES = ("the image policy allows no registry, so every tenant pod would be refused",
                 "list the registries tenants pull from (registries: [nvcr.io/nvidia, registry.example/team]); "
                 "images from anywhere else are refused")
NO_KEYS = ("signatures are required but no key is given to verify them",
           "add `keys: {release: {public_key_file: keys/cosign.pub}}` (the public key the images are signed with), "
           "or set require_signatures: false for an allow-list only")
KEY_HINT = ("give the PEM public key (`cosign generate-key-pair` writes cosign.pub; `openssl pkey -pubout` turns "
            "a private key's file into one)")


def _policy(result):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings
            if f.code.startswith("image-policy")]


def test_no_registries_given_at_all_is_located_at_the_policy(lab, matrix, tmp_path):
    lab["kubernetes"]["image_policy"] = {"require_signatures": True}
    assert _policy(run(lab, matrix, tmp_path)) == [
        ("image-policy-no-registries", Severity.ERROR, WHERE) + NO_REGISTRIES,
        ("image-policy-no-keys", Severity.ERROR, WHERE + ("require_signatures",)) + NO_KEYS]


def test_signatures_required_with_a_key_or_not_required_without_one(lab, matrix, tmp_path):
    lab["kubernetes"]["image_policy"]["require_signatures"] = True
    assert _policy(run(lab, matrix, tmp_path)) == []
    lab["kubernetes"]["image_policy"] = {"registries": ["nvcr.io/nvidia"], "require_signatures": False}
    assert _policy(run(lab, matrix, tmp_path)) == []


def test_no_policy_and_no_kubernetes_find_nothing(lab, matrix, tmp_path):
    del lab["kubernetes"]["image_policy"]
    result = run(lab, matrix, tmp_path)
    assert _policy(result) == [] and result.ok
    del lab["kubernetes"]
    assert _policy(run(lab, matrix, tmp_path)) == []


def test_every_invalid_key_is_named_at_its_own_field(lab, matrix, tmp_path):
    body = lab["kubernetes"]["image_policy"]["keys"]["lab-release"]["public_key"]
    (tmp_path / "good.pub").write_text(f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n")
    (tmp_path / "bad.pub").write_text("hello\n")
    lab["kubernetes"]["image_policy"]["keys"] = {
        "inline": {"public_key": "A" * 44},
        "good": {"public_key_file": "good.pub"},
        "gone": {"public_key_file": "missing.pub"},
        "bad": {"public_key_file": "bad.pub"},
        "fine": {"public_key": body},
    }
    keys = WHERE + ("keys",)
    assert _policy(run(lab, matrix, tmp_path, base_dir=tmp_path)) == [
        ("image-policy-key-invalid", Severity.ERROR, keys + ("inline", "public_key"),
         "the inline key is not a public key (ValueError)", KEY_HINT),
        ("image-policy-key-invalid", Severity.ERROR, keys + ("gone", "public_key_file"),
         f"{tmp_path}/missing.pub does not exist", KEY_HINT),
        ("image-policy-key-invalid", Severity.ERROR, keys + ("bad", "public_key_file"),
         "bad.pub is not a PEM public key (ValueError)", KEY_HINT)]
