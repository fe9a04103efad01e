"""Secrets by reference only: slurmdbd.conf carries a vault variable's name, the role resolves it, no
secret value reaches a rendered tree, and a literal secret in the definition is refused."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from lab_variants import without_governed_data
from ruamel.yaml import YAML

from clusterdef.build import build_tree
from clusterdef.render.slurm.slurmdbd import KEYS, PATH
from clusterdef.source import load_text
from clusterdef.validate.pipeline import validate_file, validate_source
from clusterdef.validate.secrets import looks_secret
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, dump_yaml

MAN = ROOT.parent / "shared" / "reference" / "slurm" / "docs" / "slurmdbd.conf.5"  # beside the checkout, if there
FAKE_VAULT = {"vault_slurmdbd_pass": "Zq8-fake-dbd-pass-4711", "vault_munge_key": "fake-munge-key-0815",
              "vault_slurmdbd_storage_pass": "fake-default-dbd-pass-2342"}


def tree_of(name: str) -> dict[str, str]:
    result = validate_file(CLUSTERS / f"{name}.yaml", MATRICES, TODAY)
    assert result.ok, result.findings
    return build_tree(result)[0]


@pytest.fixture(scope="module")
def lab_tree():
    return tree_of("lab")


def run(data, matrix, tmp_path: Path):
    path = dump_yaml(data, tmp_path / "def.yaml")
    return validate_source(load_text(path.read_text(), str(path)), matrix, TODAY, CLUSTERS)


def test_lab_slurmdbd_conf_references_the_vault_variable(lab_tree):
    text = lab_tree[PATH]
    lines = dict(ln.split("=", 1) for ln in text.splitlines() if ln and not ln.startswith("#"))
    assert list(lines) == list(KEYS)
    assert lines["StoragePass"] == "{{ vault_slurmdbd_pass }}"  # secrets.refs.slurmdbd_storage_pass of the lab
    assert lines["DbdHost"] == "slurmdbd01" and lines["DbdPort"] == "6819"
    assert lines["StorageType"] == "accounting_storage/mysql" and lines["AuthType"] == "auth/munge"
    assert not any(v in text for v in FAKE_VAULT.values())
    # Jinja only in the StoragePass line
    assert [ln for ln in text.splitlines() if "{" in ln] == ["StoragePass={{ vault_slurmdbd_pass }}"]


@pytest.mark.skipif(not MAN.is_file(), reason="no slurmdbd.conf(5) reference")
def test_every_key_is_in_slurmdbd_conf_man_page():
    man = MAN.read_text()
    for key in KEYS:
        assert re.search(rf"\\fB{key}\\f", man), f"{key} is not a slurmdbd.conf key"


def test_group_vars_carry_the_same_template_and_jinja_resolves_it(lab_tree):
    gv = YAML(typ="safe").load(lab_tree["ansible/group_vars/slurmdbd.yml"])
    conf = gv["slurm_control_plane_slurmdbd_conf"]
    assert conf == lab_tree[PATH]
    out = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True).from_string(conf).render(
        **FAKE_VAULT)
    assert f"StoragePass={FAKE_VAULT['vault_slurmdbd_pass']}\n" in out
    assert out.replace(FAKE_VAULT["vault_slurmdbd_pass"], "{{ vault_slurmdbd_pass }}") == conf


def test_role_task_resolves_the_vault_variable_with_real_ansible(lab_tree, tmp_path):
    """The role's own task (owner/group dropped: not root) run by ansible-playbook on localhost, the
    variable held in a vault-encrypted vars file opened with --vault-id: the file written is 0600 and
    has the password; nothing of it is in Ansible's output (no_log)."""
    playbook = shutil.which("ansible-playbook", path=str(Path(__file__).parents[1] / ".venv" / "bin")) \
        or shutil.which("ansible-playbook")
    vault = shutil.which("ansible-vault", path=str(Path(playbook).parent)) if playbook else None
    if not playbook or not vault:
        pytest.skip("ansible-playbook not installed")
    y = YAML(typ="safe")
    tasks = y.load((ROOT / "roles/slurm_control_plane/tasks/main.yml").read_text())
    task = next(t for t in tasks if t["name"].startswith("Install slurmdbd.conf"))
    task.pop("notify")
    task["ansible.builtin.copy"] = {k: v for k, v in task["ansible.builtin.copy"].items() if k not in ("owner", "group")}
    (tmp_path / "gv.yml").write_text(lab_tree["ansible/group_vars/slurmdbd.yml"])
    (tmp_path / "pw").write_text("vault-test-password\n")
    vars_file = tmp_path / "vault.yml"
    vars_file.write_text("".join(f"{k}: {v}\n" for k, v in FAKE_VAULT.items()))
    subprocess.run([vault, "encrypt", "--vault-id", f"test@{tmp_path / 'pw'}", str(vars_file)], check=True,
                   capture_output=True)
    assert FAKE_VAULT["vault_slurmdbd_pass"] not in vars_file.read_text()
    dest = tmp_path / "slurmdbd.conf"
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars_files": [str(tmp_path / "gv.yml"), str(vars_file)],
             "vars": {"slurm_control_plane_daemon": "slurmdbd", "slurm_control_plane_slurmdbd_conf_path": str(dest)},
             "tasks": [task]}]
    dump_yaml(play, tmp_path / "play.yml")
    r = subprocess.run([playbook, "-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}", "--vault-id", f"test@{tmp_path / 'pw'}", str(tmp_path / "play.yml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    written = dest.read_text()
    assert f"StoragePass={FAKE_VAULT['vault_slurmdbd_pass']}\n" in written
    assert "{{" not in written
    assert dest.stat().st_mode & 0o777 == 0o600
    assert FAKE_VAULT["vault_slurmdbd_pass"] not in r.stdout + r.stderr


@pytest.mark.parametrize("name", ["lab", "estate"])
def test_no_secret_value_in_rendered_tree(name):
    tree = tree_of(name)
    assert PATH in tree
    for rel, text in tree.items():
        for value in FAKE_VAULT.values():
            assert value not in text, f"{value} in {rel}"
        assert "hunter2" not in text


@pytest.mark.parametrize(("where", "key", "value"), [
    (("slurm", "accounting"), "storage_pass", "hunter2"),
    (("slurm", "passthrough"), "AccountingStoragePass", "hunter2"),
    (("kubernetes",), "api_token", "abc123"),
    (("cluster",), "password", 123456),
])
def test_secret_literal_fires(lab, matrix, tmp_path, where, key, value):
    node = lab
    for p in where:
        node = node.setdefault(p, {})
    node[key] = value
    result = run(lab, matrix, tmp_path)
    codes = [(f.code, f.path) for f in result.findings]
    assert ("secret-literal", where + (key,)) in codes, codes
    assert all(c == "secret-literal" for c, _ in codes), codes  # not an unknown-field beside it
    f = next(f for f in result.findings if f.code == "secret-literal")
    assert "secrets.refs" in f.hint and f.line > 0


def test_secret_literal_leaves_names_alone(lab, matrix, tmp_path):
    lab["nodes"]["infer"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    lab["nodes"]["infer"]["labels"] = {"example.com/api-token": "public", "key": "v"}
    result = run(lab, matrix, tmp_path)
    assert result.ok and not [f for f in result.findings if f.code == "secret-literal"], result.findings


@pytest.mark.parametrize("key", ["password", "Password", "storage_pass", "api_token", "AccountingStoragePass",
                                 "munge-key", "credentials", "client_secret"])
def test_looks_secret(key):
    assert looks_secret(key)


@pytest.mark.parametrize("key", ["pkey", "mac", "keys", "passthrough", "monkey", "tokens_per_s", "storage_port",
                                 "key_file_count_x"])
def test_not_secret(key):
    assert not looks_secret(key)


def test_backend_unknown(lab, matrix, tmp_path):
    lab["secrets"]["backend"] = "hashicorp-vault"
    result = run(lab, matrix, tmp_path)
    f = [f for f in result.findings if f.code == "secret-backend-unknown"]
    assert f and f[0].path == ("secrets", "backend") and "ansible-vault" in f[0].hint and f[0].line > 0


@pytest.mark.parametrize("var", ["vault_x }}{{ lookup('pipe','id')", "Vault", "1abc", "a-b", ""])
def test_ref_must_be_a_variable_name(lab, matrix, tmp_path, var):
    lab["secrets"]["refs"]["slurmdbd_storage_pass"] = var
    result = run(lab, matrix, tmp_path)
    assert not result.ok
    assert any(f.path == ("secrets", "refs", "slurmdbd_storage_pass") for f in result.errors), result.findings


def test_default_variable_without_ref(lab, matrix, tmp_path):
    del lab["secrets"]
    without_governed_data(lab)  # they name directory groups
    del lab["identity"]  # its LDAP bind password needs a ref (ref-secret); this test is about slurmdbd's default
    result = run(lab, matrix, tmp_path)
    assert result.ok
    tree = build_tree(result)[0]
    assert "StoragePass={{ vault_slurmdbd_storage_pass }}\n" in tree[PATH]
