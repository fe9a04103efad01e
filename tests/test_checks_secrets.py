"""The secrets checks (validate/checks_secrets.py) finding by finding: code, path, message and hint
written out by hand. secret-backend-unknown (the bad-input corpus has no case of it), and
secret-ref-unused for each source of a read purpose (Slurm's slurmdbd, the LDAP bind password) and
for none at all. Issue #18: the mutants of these checks that the corpus and test_secrets.py let
through."""

from __future__ import annotations

from clusterdef.errors import Severity
from test_checks import run

UNUSED_HINT = ("read today: {}; remove the ref (a secret that is named but never placed gives a false sense "
               "that it is managed)")


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def _unused(purpose, read):
    return (Severity.WARNING, ("secrets", "refs", purpose),
            f"no rendered file or role reads the secret `{purpose}`", UNUSED_HINT.format(read))


def test_an_unknown_backend_is_the_one_finding(lab, matrix, tmp_path):
    lab["secrets"]["backend"] = "hashicorp-vault"
    result = run(lab, matrix, tmp_path)
    assert [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings] == [(
        "secret-backend-unknown", Severity.ERROR, ("secrets", "backend"),
        "secret backend `hashicorp-vault` is not supported",
        "use `ansible-vault` (apply passes --vault-id by reference); another store such as HashiCorp Vault can "
        "feed the vault variables through a vault-id client script")]


def test_the_backend_name_is_matched_exactly(lab, matrix, tmp_path):
    lab["secrets"]["backend"] = "ansible-vault-2"
    assert [f[2] for f in _found(run(lab, matrix, tmp_path), "secret-backend-unknown")] == [
        "secret backend `ansible-vault-2` is not supported"]


def test_refs_nothing_reads_name_every_purpose_read_sorted(lab, matrix, tmp_path):
    lab["secrets"]["refs"]["munge_key"] = "vault_munge_key"
    lab["secrets"]["refs"]["aaa_first"] = "vault_aaa"
    result = run(lab, matrix, tmp_path)
    read = "ldap_bind_password, slurmdbd_storage_pass"
    assert _found(result, "secret-ref-unused") == [_unused("munge_key", read), _unused("aaa_first", read)]
    assert result.ok  # a warning only


def test_without_slurm_the_slurmdbd_ref_is_unused(lab, matrix, tmp_path):
    del lab["slurm"]
    assert _found(run(lab, matrix, tmp_path), "secret-ref-unused") == [
        _unused("slurmdbd_storage_pass", "ldap_bind_password")]


def test_a_directory_without_a_bind_password_reads_none(lab, matrix, tmp_path):
    del lab["identity"]["directory"]["bind_password_ref"]
    del lab["identity"]["directory"]["bind_dn"]
    assert _found(run(lab, matrix, tmp_path), "secret-ref-unused") == [
        _unused("ldap_bind_password", "slurmdbd_storage_pass")]


def test_identity_without_a_directory_reads_no_bind_password(lab, matrix, tmp_path):
    del lab["identity"]["directory"]
    assert _found(run(lab, matrix, tmp_path), "secret-ref-unused") == [
        _unused("ldap_bind_password", "slurmdbd_storage_pass")]


def test_nothing_read_at_all_says_none(lab, matrix, tmp_path):
    del lab["slurm"]
    del lab["identity"]
    assert _found(run(lab, matrix, tmp_path), "secret-ref-unused") == [
        _unused("slurmdbd_storage_pass", "none"), _unused("ldap_bind_password", "none")]
