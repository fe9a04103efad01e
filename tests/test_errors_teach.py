"""Errors that teach (issue #17): messages that name what is wrong and the field to use, findings
grouped by cause in the text report, excerpts cut around the column, tables readable at 80 columns,
rich markup never eating literal text."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from cli_runner import CliRunner

from clusterdef.errors import Finding, Severity
from clusterdef.inventory import read_inventory
from clusterdef.source import load_text
from clusterdef.validate.pipeline import validate_source
from clusterdef.validate.report import excerpt, print_text
from conftest import CLUSTERS, MATRICES, TODAY

REPO = Path(__file__).resolve().parents[1]
LAB = (CLUSTERS / "lab.yaml").read_text()
runner = CliRunner()


def _validate(text: str, tmp_path: Path, matrix):
    path = tmp_path / "def.yaml"
    path.write_text(text)
    return validate_source(load_text(text, str(path)), matrix, TODAY, tmp_path)


def _codes(result) -> list[tuple[str, str]]:
    return [(f.code, f.message) for f in result.findings]


def test_node_twice_names_the_switch_it_is_already_under(matrix, tmp_path):
    text = LAB.replace('leaf02: {nodes: "gpu[003-004],kgpu[01-02],sgpu02"}', 'leaf02: {nodes: "gpu[002-004],kgpu[01-02],sgpu02"}')
    assert text != LAB
    (f,) = [f for f in _validate(text, tmp_path, matrix).findings if f.code == "topology-node-twice"]
    assert f.message == "switch `leaf02` lists gpu002, already attached to switch `leaf01` in this fabric"
    # the hint names both switches and points at the rail-optimised kind
    assert "`leaf01`" in f.hint and "`leaf02`" in f.hint
    assert "kind: rail" in f.hint and "docs/fabric.md" in f.hint


@pytest.mark.parametrize("key, where, field", [
    ("OverSubscribe", "partition parameter (on a PartitionName= line)", "slurm.partitions.<name>"),
    ("ExclusiveUser", "partition parameter (on a PartitionName= line)", "slurm.partitions.<name>"),
    ("AllowAccounts", "partition parameter (on a PartitionName= line)", "slurm.partitions.<name>.allow_accounts"),
    ("Features", "node parameter (on a NodeName= line)", "nodes.<group> and hardware"),
    ("Weight", "node parameter (on a NodeName= line)", "nodes.<group> and hardware.<type>"),
])
def test_passthrough_partition_and_node_keys_name_the_field(matrix, tmp_path, key, where, field):
    text = LAB.replace("  controllers: [slurmctl01]\n", f"  controllers: [slurmctl01]\n  passthrough: {{{key}: x}}\n")
    (f,) = [f for f in _validate(text, tmp_path, matrix).findings if f.path[:2] == ("slurm", "passthrough")]
    assert f.code == "slurm-key-misplaced"
    assert f.message == f"`{key}` is a {where}, not a top-level slurm.conf key (Slurm 25.11)"
    assert field in f.hint
    assert "not a slurm.conf key" not in f.message


def test_a_qos_that_preempts_itself_is_located(matrix, tmp_path):
    text = LAB.replace("preempt: [normal]", "preempt: [normal, large]")
    result = _validate(text, tmp_path, matrix)
    (f,) = [f for f in result.findings if f.code == "qos-preempt-self"]
    assert f.severity is Severity.ERROR and f.path == ("slurm", "qos", "large", "preempt", 1)
    assert f.line == text.splitlines().index("    large: {priority: 100, preempt: [normal, large], "
                                             "preempt_mode: requeue}") + 1
    assert f.column == 46


def test_yaml_tab_error_says_tab(tmp_path):
    from clusterdef.errors import DefinitionError

    text = LAB.replace("  name: lab\n", "\tname: lab\n", 1)
    with pytest.raises(DefinitionError) as exc:
        load_text(text, "t.yaml")
    (f,) = exc.value.findings
    assert f.code == "yaml-syntax" and "tab" in f.message and "tab" in f.hint and f.line == 6 and f.column == 1
    assert LAB.splitlines()[5] == "  name: lab"  # the line the tab replaced the indentation of


def test_upper_case_macs_are_refused_alike_in_lists_and_inventories(matrix, tmp_path):
    # inline list
    text = LAB.replace('"52:54:00:20:00:12"', '"52:54:00:20:00:AB"')
    (f,) = _validate(text, tmp_path, matrix).findings
    assert f.code == "invalid-value" and "upper-case" in f.message and "52:54:00:20:00:ab" in f.message
    # CSV inventory: the same rule (it used to lower-case silently)
    csv = tmp_path / "macs.csv"
    g2 = ";".join(f"0x0002c90300c2000{i}" for i in range(1, 9))   # kgpu02's port GUIDs, as in the lab
    csv.write_text(f"host,mac,port_guids\nkgpu01,52:54:00:20:00:3A,{g2.replace('c2', 'c1')}\n"
                   f"kgpu02,52:54:00:20:00:32,{g2}\n")
    inv = read_inventory(csv)
    assert inv.macs == {"kgpu02": "52:54:00:20:00:32"}
    assert inv.report("macs.csv") == ["macs.csv:2: MAC '52:54:00:20:00:3A' has upper-case letters; MAC addresses "
                                      "are lower-case and colon-separated, as in a `list` (write 52:54:00:20:00:3a)"]
    start = LAB.index('        source: list\n        macs: ["52:54:00:20:00:31", "52:54:00:20:00:32"]')
    end = LAB.index("    placement:", start)
    text = LAB[:start] + "        source: inventory\n        file: macs.csv\n" + LAB[end:]
    (f,) = _validate(text, tmp_path, matrix).findings
    assert f.code == "mac-inventory" and "upper-case" in f.message


def _render(findings, sources, width=100) -> str:
    console = Console(width=width, record=True, highlight=False, soft_wrap=True, emoji=False)
    with console.capture() as cap:
        print_text(console, findings, sources)
    return cap.get()


def test_repeated_findings_are_grouped_and_long_lines_cut(matrix, tmp_path):
    macs = ", ".join(f'"52:54:00:20:01:{i:02X}"' for i in range(160, 192))  # a0..bf: 32 upper-case MACs
    text = LAB.replace("hosts: gpu[001-004]", "hosts: gpu[001-032]", 1)
    text = re.sub(r'macs: \["52:54:00:20:00:11".*?\]', f"macs: [{macs}]", text, count=1)
    result = _validate(text, tmp_path, matrix)
    assert [f.code for f in result.findings] == ["invalid-value"] * 32  # JSON lists each one
    line = text.splitlines()[result.findings[0].line - 1]
    assert len(line) > 680
    out = _render(result.findings, {result.file: result.source})
    lines = out.splitlines()
    assert lines[0].endswith("error invalid-value at nodes.train.addressing.mac.macs[0] (and 31 more like it)")
    at = result.findings[0].line
    assert out.count("hint:") == 1 and len([ln for ln in lines if re.match(rf"^\s+{at} \|", ln)]) == 1
    assert sum(1 for ln in lines if ln.startswith("  - ")) == 21  # 20 items, then "... 11 more"
    assert "  - ... 11 more (--format json lists every finding)" in lines
    assert max(len(ln) for ln in lines if "|" in ln) < 120  # the 700-character line is cut


def test_excerpt_keeps_the_caret_on_its_character():
    text = "x" * 300 + "HERE" + "y" * 300
    cut, col = excerpt(text, 301, 80)
    assert cut.startswith("…") and cut.endswith("…") and len(cut) == 82 and cut[col - 1:col + 3] == "HERE"
    assert excerpt("short", 3) == ("short", 3)
    cut, col = excerpt("a" * 200, 0, 50)
    assert col == 0 and cut == "a" * 50 + "…"


def test_different_causes_are_not_grouped():
    a = Finding("mac-count", Severity.ERROR, ("a",), "one", "hint a", "f.yaml", 1, 1)
    b = Finding("mac-count", Severity.ERROR, ("b",), "two", "hint b", "f.yaml", 2, 1)
    c = Finding("ref-switch", Severity.ERROR, ("c",), "three", "hint a", "f.yaml", 3, 1)
    out = _render([a, b, c], {})
    assert out.count("hint:") == 3 and "more like it" not in out


@pytest.mark.spawns
def test_matrix_list_is_readable_at_80_columns_when_piped():
    env = {**os.environ, "COLUMNS": "80", "CLUSTERDEF_MATRICES": str(MATRICES)}
    r = subprocess.run([sys.executable, "-m", "clusterdef", "matrix", "list", "--today", TODAY.isoformat()],
                       capture_output=True, text=True, env=env, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    for name, status in (("2025.01-r550", "retired"), ("2026.07-r580", "validated"),
                         ("2026.11-r595-candidate", "candidate")):
        assert re.search(rf"^{re.escape(name)}  status {status}, driver ", r.stdout, re.M), r.stdout
    assert all(len(ln) <= 80 for ln in r.stdout.splitlines())
    wide = subprocess.run([sys.executable, "-m", "clusterdef", "matrix", "list", "--today", TODAY.isoformat()],
                          capture_output=True, text=True, env={**env, "COLUMNS": "200"}, timeout=60, cwd=REPO)
    assert re.search(r"2026\.11-r595-candidate\s+candidate\s+595\.91\.07", wide.stdout), wide.stdout


def test_markup_never_eats_literal_text(tmp_path, monkeypatch):
    """The ansible-runner hint `pip install 'clusterdef[ansible]'` keeps its `[ansible]`."""
    from clusterdef.apply import record as run_mod
    from clusterdef.apply.runner import RunnerMissing
    from test_apply import apply, make_plan

    pf = make_plan(tmp_path)

    def missing(*a, **k):
        raise RunnerMissing("ansible-runner is not installed: pip install 'clusterdef[ansible]'")

    monkeypatch.setattr(run_mod, "execute", missing)
    r = apply(pf, tmp_path / "log", "--check")
    assert r.exit_code == 2, r.output
    assert "pip install 'clusterdef[ansible]'" in r.output
