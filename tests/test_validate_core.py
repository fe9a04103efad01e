"""The validation core outside the check modules, finding by finding: the pipeline (validate_source,
validate_file, ordering, Result), the check registry and its Context, schema and text findings
(validate/schema.py), literal secrets (validate/secrets.py), the text and JSON report
(validate/report.py) and the cycle walk (validate/graph.py). Codes, paths, messages, hints and
report lines are written out by hand. Issue #18: the mutants of these modules that the corpus,
test_checks.py and the CLI tests let through."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError
from rich.console import Console

from clusterdef.errors import Finding, Severity
from clusterdef.model import Definition
from clusterdef.source import Source, load_text
from clusterdef.validate.graph import cycles, describe, last_defined
from clusterdef.validate.pipeline import Result, _order, validate_file, validate_source
from clusterdef.validate.registry import CHECKS, Context, check, run_checks
from clusterdef.validate.report import excerpt, group, print_text, summary_line, to_json
from clusterdef.validate.schema import schema_findings, text_findings
from clusterdef.validate.secrets import looks_secret, secret_findings
from conftest import CLUSTERS, MATRICES, TODAY
from test_checks import run

E, W, N = Severity.ERROR, Severity.WARNING, Severity.INFO
LAB = (CLUSTERS / "lab.yaml").read_text()
CTRL_HINT = ("definitions are plain one-line text: remove the character (a newline in a value would add lines "
             "to rendered files)")
SECRET_HINT = ("keep the value in an Ansible Vault file and reference it by name under `secrets.refs` "
               "(e.g. secrets: {backend: ansible-vault, refs: {slurmdbd_storage_pass: vault_slurmdbd_pass}})")
TYPE_HINT = "check the field's type in `clusterdef schema`"
VALUE_HINT = "see `clusterdef schema` for allowed values"
NAME_HINT = "names are lower-case letters, digits and '-', start and end alphanumeric, at most 63 characters"


def _all(result):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings]


def _errors_of(adapter, data):
    with pytest.raises(ValidationError) as exc:
        adapter.validate_python(data)
    return exc.value


# --------------------------------------------------------------------------- schema findings, kind by kind


def test_a_number_where_text_belongs_says_quote_it(lab, matrix, tmp_path):
    for value, shown in ((5, "5"), (5.5, "5.5")):
        lab["cluster"]["name"] = value
        assert _all(run(lab, matrix, tmp_path)) == [
            ("type-error", E, ("cluster", "name"), f"name: expected text, got the number {shown}",
             f'quote it: YAML reads {shown} as a number (write "{shown}")')]
    # a list where text belongs is a plain type error, not a number to quote
    lab["cluster"]["name"] = [1]
    assert _all(run(lab, matrix, tmp_path)) == [
        ("type-error", E, ("cluster", "name"), "name: Input should be a valid string (got [1])", TYPE_HINT)]


def test_a_number_as_a_mapping_key_names_the_mapping_and_key(lab, matrix, tmp_path):
    lab["hardware"][5] = copy.deepcopy(lab["hardware"]["hgx-h100"])
    assert _all(run(lab, matrix, tmp_path)) == [
        ("type-error", E, ("hardware", 5), "hardware[5]: expected text, got the number 5",
         'quote it: YAML reads 5 as a number (write "5")')]


def test_parsing_type_and_value_errors(lab, matrix, tmp_path):
    hw = lab["hardware"]["hgx-h100"]
    hw["memory_gib"] = "lots"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("type-error", E, ("hardware", "hgx-h100", "memory_gib"),
         "memory_gib: Input should be a valid integer, unable to parse string as an integer (got 'lots')",
         TYPE_HINT)]
    hw["memory_gib"] = -1
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("hardware", "hgx-h100", "memory_gib"),
         "memory_gib: Input should be greater than or equal to 1 (got -1)", VALUE_HINT)]
    hw["memory_gib"] = 2048
    lab["slurm"]["controllers"] = "slurmctl01"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("type-error", E, ("slurm", "controllers"), "controllers: Input should be a valid tuple (got 'slurmctl01')",
         TYPE_HINT)]
    lab["slurm"]["controllers"] = []
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("slurm", "controllers"),
         "controllers: Tuple should have at least 1 item after validation, not 0 (got [])", VALUE_HINT)]
    lab["slurm"]["controllers"] = ["slurmctl01"]
    lab["nodes"] = []
    assert _all(run(lab, matrix, tmp_path)) == [
        ("type-error", E, ("nodes",), "nodes: Input should be a valid dictionary (got [])", TYPE_HINT)]


def test_an_item_error_is_reported_without_the_too_short_it_causes(lab, matrix, tmp_path):
    lab["slurm"]["controllers"] = ["Bad Name"]
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("slurm", "controllers", 0), "controllers[0]: 'Bad Name' does not match the expected format",
         "write a DNS name: labels of lower-case letters, digits and '-' joined by dots (ctl1.lab.example)")]
    lab["slurm"]["controllers"] = [5]
    assert _all(run(lab, matrix, tmp_path)) == [
        ("type-error", E, ("slurm", "controllers", 0), "controllers[0]: expected text, got the number 5",
         'quote it: YAML reads 5 as a number (write "5")')]


def test_unknown_and_missing_fields(lab, matrix, tmp_path):
    lab["cluster"]["sitte"] = "x"  # close to `site`
    assert _all(run(lab, matrix, tmp_path)) == [
        ("unknown-field", E, ("cluster", "sitte"), "unknown field `sitte` in cluster", "did you mean `site`?")]
    del lab["cluster"]["sitte"]
    lab["cluster"]["zzqqyy"] = 1  # close to nothing
    assert _all(run(lab, matrix, tmp_path)) == [
        ("unknown-field", E, ("cluster", "zzqqyy"), "unknown field `zzqqyy` in cluster",
         "remove `zzqqyy`; see `clusterdef schema` for the fields allowed here")]
    del lab["cluster"]["zzqqyy"]
    del lab["cluster"]["name"]
    assert _all(run(lab, matrix, tmp_path)) == [
        ("missing-field", E, ("cluster", "name"), "missing required field `name` in cluster",
         "add `name:` under cluster")]


def test_a_missing_top_level_section_is_placed_in_the_top_level(lab, matrix, tmp_path):
    del lab["nodes"]
    assert _all(run(lab, matrix, tmp_path)) == [
        ("missing-field", E, ("nodes",), "missing required field `nodes` in the top level",
         "add `nodes:` under the top level")]


def test_an_unknown_field_deep_in_a_union_member_names_its_parent(lab, matrix, tmp_path):
    lab["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf01"]["nodez"] = "x"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("unknown-field", E, ("network", "fabrics", "ib0", "topology", "switches", "leaf01", "nodez"),
         "unknown field `nodez` in network.fabrics.ib0.topology.switches.leaf01", "did you mean `nodes`?")]


def test_union_tags_wrong_and_missing(lab, matrix, tmp_path):
    topo = lab["network"]["fabrics"]["ib0"]["topology"]
    topo["kind"] = "mesh"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("network", "fabrics", "ib0", "topology", "kind"),
         "topology: kind 'mesh' is not one of 'tree', 'block', 'rail'", "set `kind` to one of 'tree', 'block', 'rail'")]
    del topo["kind"]
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("network", "fabrics", "ib0", "topology"),
         "topology: kind {'switches': {'leaf01': {'nodes': 'gpu[001-002],sgpu01'},... is not one of the "
         "documented kinds", "set `kind` to one of the documented kinds")]


def test_pattern_mismatches_take_the_pattern_hint_and_macs_their_own(lab, matrix, tmp_path):
    lab["cluster"]["name"] = "Bad Name"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("cluster", "name"), "name: 'Bad Name' does not match the expected format", NAME_HINT)]
    lab["cluster"]["name"] = "lab"
    macs = lab["nodes"]["train"]["addressing"]["mac"]["macs"]
    macs[1] = "52-54-00-20-00-ab"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("nodes", "train", "addressing", "mac", "macs", 1),
         "macs[1]: '52-54-00-20-00-ab' does not match the expected format",
         "MAC addresses are lower-case and colon-separated, e.g. 52:54:00:12:34:56")]
    macs[1] = "52:54:00:20:00:AB"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("invalid-value", E, ("nodes", "train", "addressing", "mac", "macs", 1),
         "macs[1]: MAC '52:54:00:20:00:AB' has upper-case letters (write 52:54:00:20:00:ab)",
         "MAC addresses are lower-case and colon-separated, in a `list` as in a CSV inventory (docs/provisioning.md)")]


def test_values_are_shown_whole_up_to_60_characters(lab, matrix, tmp_path):
    lab["cluster"]["name"] = "A" * 58  # repr 60 characters: whole
    assert _all(run(lab, matrix, tmp_path))[0][3] == f"name: '{'A' * 58}' does not match the expected format"
    lab["cluster"]["name"] = "A" * 59  # repr 61: cut to 57 and "..."
    assert _all(run(lab, matrix, tmp_path))[0][3] == f"name: '{'A' * 56}... does not match the expected format"


def test_schema_findings_at_the_root_of_other_shapes():
    # the top of the data itself, and an item of a top-level list, have no parent to name
    exc = _errors_of(TypeAdapter(int), "x")
    assert [(f.code, f.path, f.message, f.hint) for f in schema_findings(exc, "x")] == [
        ("type-error", (), "<root>: Input should be a valid integer, unable to parse string as an integer (got 'x')",
         TYPE_HINT)]
    assert [(f.path, f.message) for f in schema_findings(exc, "x", ("pre",))] == [
        (("pre",), "pre: Input should be a valid integer, unable to parse string as an integer (got 'x')")]
    exc = _errors_of(TypeAdapter(list[int]), ["x"])
    assert [(f.code, f.path, f.message) for f in schema_findings(exc, ["x"])] == [
        ("type-error", (0,), "[0]: Input should be a valid integer, unable to parse string as an integer (got 'x')")]
    assert [(f.path, f.message) for f in schema_findings(exc, ["x"], ("pre",))] == [
        (("pre", 0), "pre[0]: Input should be a valid integer, unable to parse string as an integer (got 'x')")]
    with pytest.raises(ValidationError) as err:
        Definition.model_validate([])
    assert [(f.code, f.path, f.message, f.hint) for f in schema_findings(err.value, [])] == [
        ("type-error", (), "<root>: Input should be a valid dictionary or instance of Definition (got [])", TYPE_HINT)]


# --------------------------------------------------------------------------- the text net


def test_control_characters_in_values_keys_and_list_items(lab, matrix, tmp_path):
    lab["cluster"]["description"] = "a\u200bb"
    lab["cluster"]["x\u202ey"] = "v"
    lab["images"]["gpu-node"]["packages"][1] = "ch\x07rony"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("control-character", E, ("cluster", "description"),
         "description: the value 'a\\u200bb' contains U+200B, a control, bidi or zero-width character", CTRL_HINT),
        ("control-character", E, ("cluster", "x\u202ey"),
         "x\u202ey: the key 'x\\u202ey' contains U+202E, a control, bidi or zero-width character", CTRL_HINT),
        ("control-character", E, ("images", "gpu-node", "packages", 1),
         "packages[1]: the value 'ch\\x07rony' contains U+0007, a control, bidi or zero-width character", CTRL_HINT)]


def test_text_findings_name_the_first_bad_character():
    # the order is the walk's (the pipeline sorts findings by place)
    data = {"a": {"k": "x\x01y\x02"}, "b": ["ok", ["z\x03"]], "c\x04": 1, 5: "n\x05"}
    assert [(f.code, f.severity, f.path, f.message) for f in text_findings(data)] == [
        ("control-character", E, ("a", "k"),
         "k: the value 'x\\x01y\\x02' contains U+0001, a control, bidi or zero-width character"),
        ("control-character", E, ("b", 1, 0),
         "1[0]: the value 'z\\x03' contains U+0003, a control, bidi or zero-width character"),
        ("control-character", E, (5,), "5: the value 'n\\x05' contains U+0005, a control, bidi or zero-width character"),
        ("control-character", E, ("c\x04",),
         "c\x04: the key 'c\\x04' contains U+0004, a control, bidi or zero-width character")]
    assert [f.path for f in text_findings(["a\x01"], ("top",))] == [("top", 0)]
    assert text_findings(["a\x01"])[0].message.startswith("0: the value")  # no parent to name
    assert text_findings("x\x01") == [] and text_findings(None) == [] and text_findings(5) == []


def test_a_control_character_hides_the_schema_error_at_its_path_only(lab, matrix, tmp_path):
    lab["cluster"]["name"] = "a\x01b"  # also a pattern mismatch: one finding for it
    lab["cluster"]["zzz"] = 1
    assert _all(run(lab, matrix, tmp_path)) == [
        ("control-character", E, ("cluster", "name"),
         "name: the value 'a\\x01b' contains U+0001, a control, bidi or zero-width character", CTRL_HINT),
        ("unknown-field", E, ("cluster", "zzz"), "unknown field `zzz` in cluster",
         "remove `zzz`; see `clusterdef schema` for the fields allowed here")]


def test_a_control_character_stops_before_the_checks(lab, matrix, tmp_path):
    lab["cluster"]["description"] = "a\x01b"  # the model's own error at this path is not repeated
    lab["nodes"]["train"]["hardware"] = "nope"  # a ref-hardware finding if the checks ran
    result = run(lab, matrix, tmp_path)
    assert _all(result) == [
        ("control-character", E, ("cluster", "description"),
         "description: the value 'a\\x01b' contains U+0001, a control, bidi or zero-width character", CTRL_HINT)]
    assert result.definition is None and not result.ok


# --------------------------------------------------------------------------- literal secrets


def test_a_secret_that_is_also_control_text_is_one_finding(lab, matrix, tmp_path):
    lab["cluster"]["password"] = "x\x01"
    assert _all(run(lab, matrix, tmp_path)) == [
        ("control-character", E, ("cluster", "password"),
         "password: the value 'x\\x01' contains U+0001, a control, bidi or zero-width character", CTRL_HINT)]


def test_a_secret_beside_an_unknown_field(lab, matrix, tmp_path):
    lab["cluster"]["password"] = "x"
    lab["cluster"]["zzz"] = 1
    assert _all(run(lab, matrix, tmp_path)) == [
        ("secret-literal", E, ("cluster", "password"),
         "password: a literal secret in the definition (it would be in git and in every rendered tree)", SECRET_HINT),
        ("unknown-field", E, ("cluster", "zzz"), "unknown field `zzz` in cluster",
         "remove `zzz`; see `clusterdef schema` for the fields allowed here")]


def test_the_secrets_section_is_references_even_as_a_scalar(lab, matrix, tmp_path):
    lab["secrets"] = "hunter2"  # `secrets` is a credential word, but the section is never a literal
    assert _all(run(lab, matrix, tmp_path)) == [
        ("type-error", E, ("secrets",), "secrets: Input should be a valid dictionary or instance of Secrets "
         "(got 'hunter2')", TYPE_HINT)]


def test_secret_findings_walk_every_mapping_and_list():
    data = {
        "a": {"password": "p", "api_token": 12, "ratio_key": 1.5, "secret": True, "pwd": "", "pass": None,
              "token": {"x": 1}},
        "l": [{"client_secret": "s"}, "plain", 7],
        "nodes": {"token": "t", "g": {"labels": {"token": "v"}, "taints": [{"key": "k"}], "key": "k2"}},
        "kubernetes": {"node_labels": {"passwd": "v"}, "passwd": "w"},
        "secrets": {"refs": {"password": "vault_x"}},
        3: "int keys are not names",
    }
    msg = "{}: a literal secret in the definition (it would be in git and in every rendered tree)"
    found = secret_findings(data)  # in the walk's order (the pipeline sorts findings by place)
    assert [(f.code, f.severity, f.path, f.message, f.hint) for f in found] == [
        ("secret-literal", E, ("a", "ratio_key"), msg.format("ratio_key"), SECRET_HINT),
        ("secret-literal", E, ("a", "api_token"), msg.format("api_token"), SECRET_HINT),
        ("secret-literal", E, ("a", "password"), msg.format("password"), SECRET_HINT),
        ("secret-literal", E, ("l", 0, "client_secret"), msg.format("client_secret"), SECRET_HINT),
        ("secret-literal", E, ("nodes", "g", "key"), msg.format("key"), SECRET_HINT),
        ("secret-literal", E, ("nodes", "token"), msg.format("token"), SECRET_HINT),
        ("secret-literal", E, ("kubernetes", "passwd"), msg.format("passwd"), SECRET_HINT)]


def test_secret_findings_of_data_that_is_not_a_collection():
    assert secret_findings(None) == [] and secret_findings(5) == [] and secret_findings("password") == []
    assert [f.path for f in secret_findings([{"token": "t"}])] == [(0, "token")]


@pytest.mark.parametrize("key, secret", [
    ("key", True), ("Token", True), ("x.passphrase", True), ("a/pwd", True), ("tls-privatekey", True),
    ("privateKey", True), ("APIKey", True), ("dbPass", True), ("secrets", True),
    ("public_key", False), ("publicKey", False), ("public-token", False), ("publicity_key", True),
    ("my_public_key_x", False), ("", False), ("_-./", False), ("keyring", False), ("token_count", False),
])
def test_looks_secret_by_the_last_word(key, secret):
    assert looks_secret(key) is secret


# --------------------------------------------------------------------------- the pipeline


def test_data_that_is_not_a_mapping(matrix):
    for text, where in (("- a\n- b\n", (1, 1)), ("", (0, 0)), ("# nothing\n", (1, 1))):
        result = validate_source(load_text(text, "x.yaml"), matrix, TODAY)
        assert [(f.code, f.severity, f.path, f.message, f.hint, f.file, f.line, f.column) for f in result.findings] == [
            ("not-a-mapping", E, (),
             "the definition must be a YAML mapping with `cluster`, `hardware`, `images`, `nodes` and `network`",
             "start from clusters/lab.yaml", "x.yaml", *where)]
        assert result.definition is None and result.matrix is matrix and result.file == "x.yaml"


def test_findings_are_ordered_by_place_then_severity_then_code_once_each():
    def f(code, sev, file="a", line=1, col=1):
        return Finding(code, sev, (), "m", "", file, line, col)

    given = [f("z", N), f("y", W), f("x", E), f("b", E), f("b", E), f("q", E, "a", 1, 0), f("c", E, "a", 0, 5),
             f("d", N, "0", 9, 9), f("e", E, "a", 2, 1)]
    assert [(x.code, x.severity) for x in _order(given)] == [
        ("d", N), ("c", E), ("q", E), ("b", E), ("x", E), ("y", W), ("z", N), ("e", E)]


def test_result_ok_errors_and_warnings(lab, matrix, tmp_path):
    e = Finding("e", E, (), "m")
    w = Finding("w", W, (), "m")
    i = Finding("i", N, (), "m")
    good = run(lab, matrix, tmp_path)
    assert good.ok and good.definition is not None and good.matrix is matrix
    assert Result("f", None, good.definition, matrix, [w, i]).ok
    assert not Result("f", None, good.definition, matrix, [w, e]).ok
    assert not Result("f", None, None, matrix, []).ok  # nothing validated is not ok
    r = Result("f", None, None, None, [i, e, w, e])
    assert r.errors == [e, e] and r.warnings == [w]


def _inventory_lab(tmp_path: Path) -> Path:
    # infer's list of MACs and port GUIDs becomes an inventory file with both
    start = LAB.index('mac:\n        source: list\n        macs: ["52:54:00:20:00:31"')
    end = LAB.index("    placement:", start)
    text = LAB[:start] + "mac: {source: inventory, file: macs.csv}\n" + LAB[end:]
    guids = [";".join(f"0x0002c90300c{i}000{p}" for p in range(1, 9)) for i in (1, 2)]
    (tmp_path / "macs.csv").write_text(f"host,mac,port_guids\nkgpu01,52:54:00:20:00:31,{guids[0]}\n"
                                       f"kgpu02,52:54:00:20:00:32,{guids[1]}\n")
    path = tmp_path / "def.yaml"
    path.write_text(text)
    return path


def test_files_named_by_the_definition_are_read_beside_it(matrix, tmp_path):
    path = _inventory_lab(tmp_path)
    source = load_text(path.read_text(), str(path))
    assert validate_source(source, matrix, TODAY).findings == []
    elsewhere = validate_source(load_text(path.read_text(), str(path)), matrix, TODAY, CLUSTERS)
    assert [(f.code, f.path) for f in elsewhere.findings] == [
        ("mac-inventory", ("nodes", "infer", "addressing", "mac", "file"))]
    result = validate_file(path, MATRICES, TODAY)
    assert result.ok and result.findings == [] and result.file == str(path) and result.source.file == str(path)
    assert set(result.matrix.sets) == set(matrix.sets) and result.definition.cluster.name == "lab"


def test_validate_file_that_cannot_be_read_or_parsed(tmp_path):
    missing = tmp_path / "nope.yaml"
    result = validate_file(missing, MATRICES, TODAY)
    assert (result.file, result.source, result.definition, result.matrix) == (str(missing), None, None, None)
    assert [f.severity for f in result.findings] == [E] and result.findings[0].file == str(missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster:\n  name: [lab\n")
    result = validate_file(bad, MATRICES, TODAY)
    assert (result.file, result.definition, result.matrix) == (str(bad), None, None)
    assert (result.source.file, result.source.text, result.source.data) == (str(bad), "cluster:\n  name: [lab\n", None)
    assert [(f.code, f.file, f.line) for f in result.findings] == [("yaml-syntax", str(bad), 2)]


def test_validate_file_without_matrices(tmp_path, monkeypatch):
    path = tmp_path / "def.yaml"
    path.write_text(LAB)
    hint = "pass --matrices DIR or set CLUSTERDEF_MATRICES to the folder holding sets/ and compat/"
    (tmp_path / "m").mkdir()  # a folder without sets/
    result = validate_file(path, tmp_path / "m", TODAY)
    assert (result.file, result.source.file, result.definition, result.matrix) == (str(path), str(path), None, None)
    assert [(f.code, f.severity, f.path, f.message, f.hint, f.file, f.line, f.column) for f in result.findings] == [
        ("matrices-not-found", E, ("cluster", "matrix"), f"no matrices directory found at {tmp_path / 'm'}", hint,
         str(path), 7, 3)]
    monkeypatch.delenv("CLUSTERDEF_MATRICES", raising=False)
    monkeypatch.chdir(tmp_path)
    result = validate_file(path, None, TODAY)  # no site folder: the sets bundled with clusterdef
    assert result.ok and result.matrix.folders == {"bundled": MATRICES}
    import clusterdef.matrix.load as load

    monkeypatch.setattr(load, "bundled_matrices", lambda: None)
    result = validate_file(path, None, TODAY)
    assert [(f.code, f.message, f.hint) for f in result.findings] == [
        ("matrices-not-found", "no matrices directory found beside or above the definition, and none bundled", hint)]
    monkeypatch.setenv("CLUSTERDEF_MATRICES", str(MATRICES))
    assert validate_file(path, None, TODAY).ok


def test_matrix_findings_come_with_the_definition_findings_in_order(tmp_path):
    root = tmp_path / "matrices"
    shutil.copytree(MATRICES, root)
    (root / "sets" / "zz-broken.yaml").write_text("a: [\n")
    d = tmp_path / "d"
    d.mkdir()
    path = d / "lab.yaml"
    path.write_text(LAB.replace("    hardware: hgx-h100\n    image: gpu-node\n    control_plane: slurm\n    "
                                "provisioning", "    hardware: nope\n    image: gpu-node\n    control_plane: slurm\n"
                                "    provisioning", 1))
    result = validate_file(path, root, TODAY)
    assert [(f.code, f.file) for f in result.findings] == [
        ("ref-hardware", str(path)), ("yaml-syntax", str(root / "sets" / "zz-broken.yaml"))]
    assert result.definition is not None and not result.ok


# --------------------------------------------------------------------------- the registry and its context


def test_run_checks_runs_only_the_named_checks(lab, matrix):
    lab["nodes"]["train"]["hardware"] = "nope"
    lab["slurm"]["partitions"]["train"]["node_groups"] = ["train", "nope"]
    ctx = Context(Definition.model_validate(lab), matrix, TODAY, CLUSTERS)
    everything = {f.code for f in run_checks(ctx)}
    assert {"ref-hardware", "ref-node-group"} <= everything
    assert run_checks(ctx, []) == []
    only = run_checks(ctx, iter(["references"]))
    assert only and {f.code for f in only} <= {"ref-hardware", "ref-node-group"}
    assert {f.code for f in only} == {"ref-hardware", "ref-node-group"}


def test_a_check_name_registers_once():
    @check("zz-test-only-check")
    def mine(ctx):
        return []

    try:
        assert CHECKS["zz-test-only-check"] is mine
        with pytest.raises(RuntimeError, match=r"^check 'zz-test-only-check' registered twice$"):
            check("zz-test-only-check")(lambda ctx: [])
        assert CHECKS["zz-test-only-check"] is mine
    finally:
        del CHECKS["zz-test-only-check"]


def test_context_counts_gpus_and_nodes(lab, matrix):
    lab["hardware"]["cpu-box"] = {k: v for k, v in copy.deepcopy(lab["hardware"]["hgx-h100"]).items() if k != "gpu"}
    lab["nodes"]["secure"]["hardware"] = "cpu-box"  # no GPUs
    lab["nodes"]["infer"]["hardware"] = "nope"  # unknown hardware: no GPUs counted
    ctx = Context(Definition.model_validate(lab), matrix, TODAY)
    assert (ctx.gpus_in("train"), ctx.gpus_in("infer"), ctx.gpus_in("secure"), ctx.total_gpus) == (32, 0, 0, 32)
    assert ctx.chosen_set is matrix.sets["2026.07-r580"]
    assert {k: str(v) for k, v in ctx.group_nodes.items()} == {
        "train": "gpu[001-004]", "infer": "kgpu[01-02]", "secure": "sgpu[01-02]", "ctl": "slurmctl01",
        "acct": "slurmdbd01", "mgmt": "mgmt01", "k8sctl": "k8sctl01"}
    assert str(ctx.all_nodes) == "gpu[001-004],k8sctl01,kgpu[01-02],mgmt01,sgpu[01-02],slurmctl01,slurmdbd01"
    assert {k: str(v) for k, v in ctx.fabric_nodes.items()} == {"ib0": "gpu[001-004],kgpu[01-02],sgpu[01-02]"}
    assert ctx.base_dir == Path.cwd() and ctx.definition_file == ""
    lab["cluster"]["matrix"] = "1999.01-none"
    assert Context(Definition.model_validate(lab), matrix, TODAY).chosen_set is None


def test_context_reads_only_inventory_files(lab, matrix, tmp_path):
    (tmp_path / "macs.csv").write_text("host,mac\nkgpu01,52:54:00:20:00:31\nkgpu02,52:54:00:20:00:32\n")
    lab["nodes"]["infer"]["addressing"]["mac"] = {"source": "inventory", "file": "macs.csv"}
    ctx = Context(Definition.model_validate(lab), matrix, TODAY, tmp_path)
    (inv,) = ctx.inventories.values()
    assert inv.macs == {"kgpu01": "52:54:00:20:00:31", "kgpu02": "52:54:00:20:00:32"} and inv.problems == ()
    assert list(ctx.inventories) == [tmp_path / "macs.csv"]


# --------------------------------------------------------------------------- the report


def _console(**kw) -> Console:
    return Console(**{"width": 200, "highlight": False, "soft_wrap": True, "emoji": False, "color_system": None, **kw})


def _text(findings, sources, console=None) -> str:
    console = console or _console()
    with console.capture() as cap:
        print_text(console, findings, sources)
    return cap.get()


def test_summary_counts_errors_and_warnings_only():
    e, w, i = (Finding("c", s, (), "m") for s in (E, W, N))
    assert summary_line([]) == "0 errors, 0 warnings"
    assert summary_line([e, i]) == "1 error, 0 warnings"
    assert summary_line([w, i, i]) == "0 errors, 1 warning"
    assert summary_line([e, e, w, w, i]) == "2 errors, 2 warnings"


def test_excerpt_cuts_around_the_column():
    assert excerpt("a" * 100, 50) == ("a" * 100, 50)  # exactly the width: whole
    assert excerpt("a\tb", 3) == ("a b", 3)  # a tab is one column
    text = "".join(chr(65 + i % 26) for i in range(101))
    assert excerpt(text, 1) == (text[:100] + "…", 1)
    assert excerpt(text, 0) == (text[:100] + "…", 0)
    text = "x" * 300
    assert excerpt(text, 150, 90) == ("…" + "x" * 90 + "…", 32)  # start 150-1-30 = 119, col 150-119+1
    assert excerpt(text, 300, 90) == ("…" + "x" * 90, 91)  # start clamped to 300-90 = 210: col 300-210+1
    assert excerpt(text, 31, 90) == ("x" * 90 + "…", 31)  # start 31-1-30 = 0


def test_excerpt_start_of_one():
    text = "".join(chr(65 + i % 26) for i in range(101))
    assert excerpt(text, 35) == ("…" + text[1:101], 35)  # start 35-1-33 = 1: cut the first character


def test_group_by_file_code_severity_and_hint():
    a = Finding("c", E, ("a",), "1", "h", "f")
    b = Finding("c", E, ("b",), "2", "h", "g")
    c = Finding("c", W, ("c",), "3", "h", "f")
    d = Finding("c", E, ("d",), "4", "h", "f")
    e = Finding("c", E, ("e",), "5", "other", "f")
    f = Finding("k", E, ("f",), "6", "h", "f")
    assert group([a, b, c, d, e, f]) == [[a, d], [b], [c], [e], [f]]
    assert group([]) == []


SRC_TEXT = "a:\n  b: 12345\n  c: x\n"


def test_print_text_one_finding_with_its_line_and_caret():
    f = Finding("x-code", E, ("a", "b"), "the message [x]", "do [this]", "f.yaml", 2, 5)
    out = _text([f], {"f.yaml": Source("f.yaml", SRC_TEXT)})
    assert out.splitlines() == [
        "f.yaml:2:5: error x-code at a.b",
        "  the message [x]",
        "      2 |   b: 12345",
        "        |     ^",
        "  hint: do [this]"]


def test_print_text_without_source_line_column_or_hint():
    src = {"f.yaml": Source("f.yaml", SRC_TEXT)}
    no_col = Finding("w-code", W, ("a",), "msg", "", "f.yaml", 3, 0)
    assert _text([no_col], src).splitlines() == [
        "f.yaml:3:1: warning w-code at a", "  msg", "      3 |   c: x"]
    no_line = Finding("i-code", N, (), "msg", "h", "f.yaml", 0, 0)
    assert _text([no_line], src).splitlines() == ["f.yaml: info i-code at <root>", "  msg", "  hint: h"]
    beyond = Finding("i-code", N, (), "msg", "h", "f.yaml", 9, 1)  # past the end of the text
    assert _text([beyond], src).splitlines() == ["f.yaml:9:1: info i-code at <root>", "  msg", "  hint: h"]
    other_file = Finding("e-code", E, ("a",), "msg", "h", "g.yaml", 2, 1)
    assert _text([other_file], src).splitlines() == ["g.yaml:2:1: error e-code at a", "  msg", "  hint: h"]


def _members(n: int) -> list[Finding]:
    return [Finding("m", E, ("l", i), f"item {i}", "h", "f.yaml", i + 1, 1) for i in range(n)]


def test_print_text_lists_the_others_of_a_group_up_to_twenty():
    out = _text(_members(2), {}).splitlines()
    assert out == ["f.yaml:1:1: error m at l[0] (and 1 more like it)", "  item 0", "  - f.yaml:2:1: item 1", "  hint: h"]
    out = _text(_members(21), {}).splitlines()
    assert out[0] == "f.yaml:1:1: error m at l[0] (and 20 more like it)"
    assert out[2:] == [f"  - f.yaml:{i + 1}:1: item {i}" for i in range(1, 21)] + ["  hint: h"]
    out = _text(_members(22), {}).splitlines()
    assert out[0] == "f.yaml:1:1: error m at l[0] (and 21 more like it)"
    assert out[2:] == ([f"  - f.yaml:{i + 1}:1: item {i}" for i in range(1, 21)]
                       + ["  - ... 1 more (--format json lists every finding)", "  hint: h"])


def test_print_text_never_highlights_source_or_listed_items():
    console = _console(color_system="standard", force_terminal=True, highlight=True)
    f = Finding("x", E, ("a", "b"), "m", "", "f.yaml", 2, 5)
    g = Finding("x", E, ("a", "c"), "value 777", "", "f.yaml", 3, 3)
    lines = _text([f, g], {"f.yaml": Source("f.yaml", SRC_TEXT)}, console).splitlines()
    (src_line,) = [ln for ln in lines if "12345" in ln]
    assert src_line.endswith(" |\x1b[0m   b: 12345"), repr(src_line)
    (item,) = [ln for ln in lines if "777" in ln]
    assert item.endswith(": value 777"), repr(item)


def test_json_report_is_exact():
    f = Finding("x-code", W, ("a", 0), "msg", "hint", "f.yaml", 2, 5)
    assert to_json("f.yaml", [f], True) == """{
  "file": "f.yaml",
  "ok": true,
  "summary": "0 errors, 1 warning",
  "findings": [
    {
      "code": "x-code",
      "severity": "warning",
      "path": "a[0]",
      "file": "f.yaml",
      "line": 2,
      "column": 5,
      "message": "msg",
      "hint": "hint"
    }
  ]
}"""
    assert json.loads(to_json("g", [], False)) == {"file": "g", "ok": False, "summary": "0 errors, 0 warnings",
                                                    "findings": []}


# --------------------------------------------------------------------------- cycles


def test_cycles_in_edge_order_one_per_closing_edge():
    parent = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["e"], "e": ["d"], "f": ["a"], "g": []}
    assert cycles(parent, lambda n: parent[n]) == [["a", "b", "c"], ["d", "e"]]
    # the walk starts where `nodes` says: the same cycle from another member
    assert cycles(["b", "a", "c"], lambda n: parent[n]) == [["b", "c", "a"]]
    # a walk that reaches a finished part of the graph closes no cycle there
    assert cycles(["f", "a", "b", "c"], lambda n: parent[n]) == [["a", "b", "c"]]
    assert cycles(["a", "b", "c", "f"], lambda n: parent[n]) == [["a", "b", "c"]]


def test_cycles_with_several_successors():
    graph = {"a": ["b", "c"], "b": ["d"], "c": ["d", "a"], "d": []}  # a diamond, and c back to a
    assert cycles(graph, lambda n: graph[n]) == [["a", "c"]]
    graph = {"a": ["a", "x", "b"], "b": ["a", "b"]}  # self-edges and an unknown node are skipped
    assert cycles(["a", "b"], lambda n: graph[n]) == [["a", "b"]]
    graph = {"a": ["b"], "b": ["c", "a"], "c": ["b", "a"]}  # three edges close cycles
    assert cycles(graph, lambda n: graph[n]) == [["b", "c"], ["a", "b", "c"], ["a", "b"]]
    assert cycles([], lambda n: []) == []


def test_last_defined_and_describe():
    order = {"a": 0, "b": 1, "c": 2}
    assert last_defined(["c", "a", "b"], order) == "c" and last_defined(["a", "b"], order) == "b"
    assert describe(["a", "b", "c"]) == "`a` -> `b` -> `c` -> `a`"
    assert describe(["a", "b", "c"], "b") == "`b` -> `c` -> `a` -> `b`"
    assert describe(["a", "b", "c"], "c") == "`c` -> `a` -> `b` -> `c`"
    assert describe(["a", "b", "c"], "a") == "`a` -> `b` -> `c` -> `a`"
    assert describe(["a", "b"], "z") == "`a` -> `b` -> `a`"
    assert describe(["a"]) == "`a` -> `a`"


def test_a_secret_the_model_accepts_still_stops_before_the_checks(lab, matrix, tmp_path):
    lab["slurm"]["passthrough"] = {"AccountingStoragePass": "hunter2"}  # free-form: the model lets it through
    lab["nodes"]["train"]["hardware"] = "nope"  # a ref-hardware finding if the checks ran
    result = run(lab, matrix, tmp_path)
    assert _all(result) == [
        ("secret-literal", E, ("slurm", "passthrough", "AccountingStoragePass"),
         "AccountingStoragePass: a literal secret in the definition (it would be in git and in every rendered tree)",
         SECRET_HINT)]
    assert result.definition is None and not result.ok


def test_checks_know_the_definition_file(matrix, tmp_path):
    path = tmp_path / "def.yaml"
    path.write_text(LAB)
    (tmp_path / "def.rehearsal.json").write_text("not json")  # the restore rehearsal record beside it
    result = validate_source(load_text(LAB, str(path)), matrix, TODAY)
    assert [(f.code, f.severity, f.path, f.hint) for f in result.findings] == [
        ("backup-rehearsal-stale", W, ("backup", "rehearsal", "max_age_days"),
         "run `clusterdef drill def.yaml` (it rewrites a valid record), or remove def.rehearsal.json")]
    assert result.ok  # a warning only


def test_a_boolean_where_text_is_expected_is_called_a_boolean(lab, matrix, tmp_path):
    # isinstance(True, int) holds: this was reported as "got the number True"
    lab["cluster"]["name"] = True
    found = [(f.code, f.path, f.message, f.hint) for f in run(lab, matrix, tmp_path).findings]
    assert found == [("type-error", ("cluster", "name"), "name: expected text, got the boolean true",
                      'quote it: YAML reads an unquoted true as a boolean (write "true")')]


def test_long_messages_source_lines_and_hints_are_never_wrapped_on_a_narrow_terminal():
    # a CI log is often 80 columns or less: a wrapped message or excerpt line breaks copy-paste and grep
    src = load_text("name: " + "x" * 70 + "\n", "n.yaml")
    words = " ".join(["word"] * 20)
    f = Finding("c", E, ("name",), "message " + words, "hint " + words, file="n.yaml", line=1, column=7)
    g = Finding("c", E, ("name",), "message " + words, "hint " + words, file="n.yaml", line=1, column=9)
    out = _text([f, g], {"n.yaml": src}, _console(width=40, soft_wrap=False)).splitlines()
    assert f"  message {words}" in out
    assert "      1 | name: " + "x" * 70 in out
    assert f"  - n.yaml:1:9: message {words}" in out
    assert f"  hint: hint {words}" in out
