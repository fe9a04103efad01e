"""The CLI as a user runs it: exit codes, formats, atomic render, schema, matrix verbs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_runner import CliRunner

from clusterdef.cli import app
from conftest import CLUSTERS, ROOT, dump_yaml

runner = CliRunner()
LAB = str(CLUSTERS / "lab.yaml")


def cli(*args):
    return runner.invoke(app, [*args])


def test_validate_clean_exits_0():
    r = cli("validate", LAB, "--today", "2026-11-30")
    assert r.exit_code == 0, r.output
    assert "ok" in r.output


def test_validate_warnings_exit_1_only_with_strict(lab, tmp_path):
    del lab["slurm"]["partitions"]["train"]["default"]
    path = str(dump_yaml(lab, tmp_path / "warn.yaml"))
    assert cli("validate", path, "--today", "2026-11-30").exit_code == 0
    r = cli("validate", path, "--strict", "--today", "2026-11-30")
    assert r.exit_code == 1
    assert "partition-no-default" in r.output


def test_validate_json(lab, tmp_path):
    lab["nodes"]["train"]["image"] = "gpu-nod"
    path = str(dump_yaml(lab, tmp_path / "bad.yaml"))
    r = cli("validate", path, "--format", "json", "--today", "2026-11-30")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    f = doc["findings"][0]
    assert f["code"] == "ref-image" and f["path"] == "nodes.train.image" and f["line"] > 0
    assert "gpu-node" in f["hint"]


def test_text_report_shows_offending_line(lab, tmp_path):
    lab["nodes"]["train"]["image"] = "gpu-nod"
    path = dump_yaml(lab, tmp_path / "bad.yaml")
    r = subprocess.run([sys.executable, "-m", "clusterdef", "validate", str(path)], capture_output=True, text=True)
    assert r.returncode == 2
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.strip() == "image: gpu-nod")
    # validate's report is its output: stdout, so `validate DEF > report.txt` keeps it (issue 30)
    assert f"bad.yaml:{line}:" in r.stdout
    assert "image: gpu-nod" in r.stdout and "hint:" in r.stdout and "Traceback" not in r.stdout + r.stderr


def test_process_exit_keeps_codes_and_flushes_redirected_output(lab, tmp_path):
    """cli.main leaves a bounded verb with os._exit after flushing: output redirected to a file (fully
    buffered) arrives whole, every exit code is kept, and a long-running verb exits the ordinary way."""
    def run(*args, out_name="out.txt"):
        out = tmp_path / out_name
        with out.open("w") as fh:
            r = subprocess.run([sys.executable, "-m", "clusterdef", *args], stdout=fh, stderr=subprocess.PIPE,
                               text=True)
        return r.returncode, out.read_text(), r.stderr

    code, text, _ = run("validate", LAB, "--format", "json", "--today", "2026-11-30")
    assert code == 0 and json.loads(text)["ok"] is True
    del lab["slurm"]["partitions"]["train"]["default"]
    warn = str(dump_yaml(lab, tmp_path / "warn.yaml"))
    code, text, _ = run("validate", warn, "--strict", "--today", "2026-11-30")
    assert code == 1 and "partition-no-default" in text
    code, text, err = run("render", str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "o"))
    assert code == 2 and "does not exist" in text + err and not (tmp_path / "o").exists()
    code, text, _ = run("render", LAB, "-o", str(tmp_path / "tree"), "--today", "2026-11-30")
    assert code == 0 and text.startswith("rendered ") and (tmp_path / "tree" / "manifest.json").is_file()
    code, text, err = run("baseline", "parse", str(tmp_path / "missing.log"))  # long-running: sys.exit
    assert code == 2 and "Traceback" not in err
    code, _, err = run("no-such-verb")  # argparse's own exit, before any verb
    assert code == 2 and "invalid choice" in err


def test_render_writes_tree_manifest_and_resolved(tmp_path):
    out = tmp_path / "out"
    r = cli("render", LAB, "-o", str(out), "--today", "2026-11-30")
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["set"] == "2026.07-r580"
    for rel in manifest["files"]:
        assert (out / rel).is_file()
    resolved = json.loads((out / "definition.resolved.json").read_text())
    assert resolved["set"]["components"]["driver"] == "580.126.20"
    assert resolved["definition"]["cluster"]["name"] == "lab"


def test_render_only_selected_target(tmp_path):
    out = tmp_path / "out"
    assert cli("render", LAB, "-o", str(out), "-t", "versions", "--today", "2026-11-30").exit_code == 0
    assert (out / "versions.json").is_file() and not (out / "inventory").exists()
    assert cli("render", LAB, "-o", str(out), "-t", "nope").exit_code == 2



def test_render_of_one_target_over_a_full_tree_is_refused_and_keeps_it(tmp_path):
    """Issue 30: `render -t slurm` over a full tree deleted the other targets' files."""
    out = tmp_path / "out"
    assert cli("render", LAB, "-o", str(out), "--today", "2026-11-30").exit_code == 0
    before = (out / "manifest.json").read_text()
    files = json.loads(before)["files"]
    r = cli("render", LAB, "-o", str(out), "-t", "slurm", "--today", "2026-11-30")
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "which this render does not write" in text and "pxe" in text and "inventory" in text
    kept = [rel for rel in files if not rel.startswith("slurm/")]
    assert f"delete {len(kept) - 2} of their files" in text  # less delivery.yaml and the resolved definition
    assert (out / "manifest.json").read_text() == before
    assert all((out / rel).is_file() for rel in files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left beside it either


def test_render_of_bad_input_writes_nothing_and_keeps_old_tree(lab, tmp_path):
    out = tmp_path / "out"
    assert cli("render", LAB, "-o", str(out), "--today", "2026-11-30").exit_code == 0
    before = (out / "manifest.json").read_text()
    lab["nodes"]["train"]["hardware"] = "missing"
    bad = str(dump_yaml(lab, tmp_path / "bad.yaml"))
    r = cli("render", bad, "-o", str(out), "--today", "2026-11-30")
    assert r.exit_code == 2
    assert (out / "manifest.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "out"]


def test_render_refuses_foreign_output_dir(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    r = cli("render", LAB, "-o", str(tmp_path / "mine"), "--today", "2026-11-30")
    assert r.exit_code == 2
    assert (tmp_path / "mine" / "notes.txt").read_text() == "x"


def test_missing_file_exit_2():
    r = cli("validate", "no/such.yaml")
    assert r.exit_code == 2 and "file-not-found" in r.output


def test_committed_schema_is_current_and_validates_examples():
    import jsonschema
    from ruamel.yaml import YAML

    committed = json.loads((ROOT / "schema" / "clusterdef.schema.json").read_text())
    r = cli("schema")
    assert r.exit_code == 0
    assert json.loads(r.stdout) == committed, "run: clusterdef schema -o schema/clusterdef.schema.json"
    validator = jsonschema.Draft202012Validator(committed)
    for example in sorted(CLUSTERS.glob("*.yaml")):
        data = YAML(typ="safe").load(example.read_text())
        assert list(validator.iter_errors(data)) == [], example.name
        assert example.read_text().startswith("# yaml-language-server: $schema=../schema/clusterdef.schema.json")


def test_schema_rejects_unknown_fields():
    import jsonschema

    from ruamel.yaml import YAML

    schema = json.loads((ROOT / "schema" / "clusterdef.schema.json").read_text())
    lab = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())
    jsonschema.validate(lab, schema)  # the valid lab passes: a failure below is the unknown field's
    lab["cluster"]["colour"] = 1
    with pytest.raises(jsonschema.ValidationError) as exc:
        jsonschema.validate(lab, schema)
    assert exc.value.validator == "additionalProperties" and list(exc.value.absolute_path) == ["cluster"]
    assert "colour" in exc.value.message


def test_matrix_list_and_show():
    r = cli("matrix", "list", "--format", "json", "--today", "2026-11-30")
    assert r.exit_code == 0
    sets = {s["name"]: s for s in json.loads(r.stdout)}
    assert sets["2026.07-r580"]["status"] == "validated" and sets["2026.07-r580"]["problems"] == []
    # retired is a status, not a problem: its Slurm 24.11.0 is in the knowledge base, so no matrix-slurm-unknown
    assert sets["2025.01-r550"]["status"] == "retired" and sets["2025.01-r550"]["problems"] == []
    assert sets["2026.11-r595-candidate"]["status"] == "candidate"
    assert sorted(sets) == ["2025.01-r550", "2025.10-r580", "2026.07-r580", "2026.11-r595-candidate"]
    r = cli("matrix", "show", "2026.07-r580", "--today", "2026-11-30")
    assert r.exit_code == 0 and "580.126.20" in r.output and "hgx-h100" in r.output
    r = cli("matrix", "show", "2026.07-r58")
    assert r.exit_code == 2 and "2026.07-r580" in r.output
