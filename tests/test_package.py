"""What the package carries (pure parts; the built wheel and collection: tests/test_package_install.py):
the bundled matrices under a site folder, `matrix list` naming where each set comes from, the
clusterdef.cluster collection's role references and where apply finds its playbooks."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import shutil
import sys

from cli_runner import CliRunner

from clusterdef.apply import collection
from clusterdef.apply.prepare import find_playbooks
from clusterdef.apply.runner import _env
from clusterdef.cli import app
from clusterdef.matrix.load import bundled_matrices, load_matrix, matrices_root
from conftest import MATRICES, ROOT

runner = CliRunner()
SET = "2026.07-r580"


def build_collection_module():
    path = ROOT / "scripts" / "build-collection"
    loader = importlib.machinery.SourceFileLoader("build_collection", str(path))
    spec = importlib.util.spec_from_loader("build_collection", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- bundled matrices


def test_a_checkout_bundles_the_repositorys_matrices(tmp_path, monkeypatch):
    assert bundled_matrices() == MATRICES
    monkeypatch.delenv("CLUSTERDEF_MATRICES", raising=False)
    monkeypatch.chdir(tmp_path)
    assert matrices_root(None, tmp_path / "def.yaml") == MATRICES  # no site folder: the bundled one
    assert matrices_root(tmp_path / "m", None) == tmp_path / "m"  # -m wins, even when it is wrong
    (tmp_path / "matrices" / "sets").mkdir(parents=True)
    assert matrices_root(None, tmp_path / "def.yaml") == tmp_path / "matrices"


def test_a_site_folder_extends_and_overrides_the_bundled_sets(tmp_path):
    site = tmp_path / "matrices"
    (site / "sets").mkdir(parents=True)
    own = (MATRICES / "sets" / f"{SET}.yaml").read_text()
    (site / "sets" / f"{SET}.yaml").write_text(own.replace("summary: ", "summary: site copy; ", 1))
    (site / "sets" / "2027.01-site.yaml").write_text(own.replace(f"name: {SET}", "name: 2027.01-site", 1))
    m, findings = load_matrix(site)
    assert findings == []
    assert m.root == site and m.folders == {"bundled": MATRICES, "site": site}
    bundled = {p.stem for p in (MATRICES / "sets").glob("*.yaml")}
    assert set(m.sets) == bundled | {"2027.01-site"}
    assert m.origins == {**dict.fromkeys(bundled - {SET}, "bundled"), SET: "site", "2027.01-site": "site"}
    assert m.sets[SET].summary.startswith("site copy; ")
    assert m.set_root(SET) == site and m.set_root("2025.10-r580") == MATRICES  # baselines: the set's own folder
    # compat files the site leaves out are the bundled ones; one it has replaces the bundled file whole
    bundled_m, _ = load_matrix(MATRICES)
    assert m.compat == bundled_m.compat
    (site / "compat").mkdir()
    (site / "compat" / "nccl-cuda.yaml").write_text("releases: []\n")
    m2, _ = load_matrix(site)
    assert m2.compat.nccl == () and m2.compat.slurm == bundled_m.compat.slurm


def test_matrix_list_says_where_each_set_comes_from(tmp_path, monkeypatch):
    site = tmp_path / "matrices"
    (site / "sets").mkdir(parents=True)
    shutil.copy(MATRICES / "sets" / f"{SET}.yaml", site / "sets")
    r = runner.invoke(app, ["matrix", "list", "-m", str(site), "--today", "2026-11-30", "-f", "json"])
    assert r.exit_code == 0, r.output
    rows = {row["name"]: (row["from"], row["file"]) for row in json.loads(r.stdout)}
    assert rows[SET] == ("site", str(site / "sets" / f"{SET}.yaml"))
    assert rows["2025.10-r580"] == ("bundled", str(MATRICES / "sets" / "2025.10-r580.yaml"))
    r = runner.invoke(app, ["matrix", "list", "-m", str(site), "--today", "2026-11-30"])
    assert r.exit_code == 0, r.output
    assert f"bundled: {MATRICES}" in r.stdout.replace("\n", "") and f"site: {site}" in r.stdout.replace("\n", "")
    start = r.stdout.index(f"{SET}  ")  # a narrow console: one record per set, wrapped
    record = " ".join(r.stdout[start:r.stdout.find("\n20", start)].split())
    assert record.endswith("from site"), record


# --------------------------------------------------------------------------- the collection


def test_role_references_are_qualified_and_the_unknown_named():
    bc = build_collection_module()
    text = """- name: Nodes
  hosts: all
  roles:
    - role: firmware
      tags: [fw]
    - role: someone.else.role
  tasks:
    - name: Drain
      ansible.builtin.include_role:
        name: node_drain
        tasks_from: main
    - name: Loop
      ansible.builtin.include_role:
        name: "{{ item }}"
    - name: Mine
      ansible.builtin.import_role:
        name: my_own_role
    - name: Not a role
      ansible.builtin.debug:
        msg: node_drain
"""
    out, left = bc.qualify(text, {"firmware", "node_drain"})
    assert "    - role: clusterdef.cluster.firmware\n      tags: [fw]\n" in out
    assert "        name: clusterdef.cluster.node_drain\n        tasks_from: main\n" in out
    assert "name: \"{{ item if '.' in item else 'clusterdef.cluster.' ~ item }}\"" in out
    assert "    - name: Drain\n" in out and "        msg: node_drain\n" in out  # task names and values stay
    assert left == [(6, "someone.else.role"), (17, "my_own_role")]


def test_the_assembled_collection_names_every_role_by_its_fqcn(tmp_path):
    bc = build_collection_module()
    assert bc.assemble(tmp_path / "c") == []
    tree = tmp_path / "c"
    assert {p.name for p in (tree / "roles").iterdir()} == {p.name for p in (ROOT / "roles").iterdir() if p.is_dir()}
    assert not list(tree.rglob("molecule"))
    for path in [*(tree / "playbooks").glob("*.yml"), *(tree / "roles").rglob("*.yml")]:
        _, left = bc.qualify(path.read_text(), set())
        assert left == [], path  # nothing short is left, whatever the role
    assert "version: 0.1.0" in (tree / "galaxy.yml").read_text()


def test_apply_finds_the_installed_collections_playbooks(tmp_path, monkeypatch):
    installed = tmp_path / "colls" / "ansible_collections" / "clusterdef" / "cluster"
    (installed / "playbooks").mkdir(parents=True)
    (installed / "playbooks" / "upgrade.yml").write_text("---\n")
    (installed / "MANIFEST.json").write_text("{}")
    definition = tmp_path / "site" / "lab.yaml"
    definition.parent.mkdir()
    monkeypatch.chdir(definition.parent)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "ansible_collections" not in p])
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(tmp_path / "nothing"))
    assert find_playbooks(definition) is None
    for value in (tmp_path / "colls", tmp_path / "colls" / "ansible_collections"):
        monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", f"{tmp_path / 'nothing'}:{value}")
        assert find_playbooks(definition) == installed / "playbooks"
    # a playbooks/ folder beside the definition comes first
    (definition.parent / "playbooks").mkdir()
    (definition.parent / "playbooks" / "upgrade.yml").write_text("---\n")
    assert find_playbooks(definition) == definition.parent / "playbooks"
    # the run puts the collection's folder on the collections path, first
    env = _env(installed / "playbooks" / "upgrade.yml", None)
    assert env["ANSIBLE_COLLECTIONS_PATH"].split(":")[0] == str(tmp_path / "colls")
    assert "ANSIBLE_COLLECTIONS_PATH" not in _env(definition.parent / "playbooks" / "upgrade.yml", None)


def test_collection_search_without_ansible_core(monkeypatch):
    monkeypatch.setitem(sys.modules, "ansible.config.manager", None)  # import fails: the [ansible] extra missing
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATHS", raising=False)
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", "/a:/b")
    assert collection.configured_paths() == ["/a", "/b"]
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH")
    assert collection.configured_paths() == list(collection.DEFAULT_PATHS)

