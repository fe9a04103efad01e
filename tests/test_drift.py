"""Drift: node facts (the gpu_facts role's JSON) against the validated set."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_runner import CliRunner

from clusterdef import drift
from clusterdef.cli import app
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY

FIXTURES = Path(__file__).parent / "fixtures" / "facts"
runner = CliRunner()


@pytest.fixture(scope="module")
def lab_result():
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    assert result.ok
    return result


def _facts(result):
    vs = result.matrix.sets[result.definition.cluster.matrix]
    return vs, drift.facts_for(result.definition, vs)


def _write(tmp_path, facts) -> Path:
    d = tmp_path / "facts"
    d.mkdir()
    for f in facts:
        (d / f"{f['host']}.json").write_text(json.dumps(f))
    return d


def test_all_on_matrix(lab_result, tmp_path):
    vs, facts = _facts(lab_result)
    report = drift.compare(lab_result.definition, vs, [("x", f) for f in facts])
    assert len(report.nodes) == 8 and not report.off_matrix and not report.missing
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(_write(tmp_path, facts)),
                            "--today", "2026-11-30"])
    assert r.exit_code == 0, r.output
    assert "8 node(s) checked against 2026.07-r580: 0 off-matrix" in r.output


def test_injected_off_matrix_nodes(lab_result, tmp_path):
    vs, facts = _facts(lab_result)
    by_host = {f["host"]: f for f in facts}
    by_host["gpu002"]["versions"]["driver"] = "580.95.05"  # a node replaced at 2am
    by_host["gpu003"]["versions"]["driver"] = "580.95.05"
    by_host["gpu003"]["versions"]["firmware"]["cx7"] = "28.46.1006"
    by_host["kgpu02"]["versions"]["kubelet"] = "v1.33.0"
    by_host["gpu004"]["versions"]["nccl"] = "unknown"  # unknown is off-matrix (fail closed), with the probe's reason
    by_host["gpu004"]["reasons"] = {"nccl": "no installed package matches libnccl2"}
    del by_host["gpu001"]  # no facts: missing
    facts_dir = _write(tmp_path, by_host.values())
    drain, prom = tmp_path / "drain.sh", tmp_path / "drift.prom"
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(facts_dir), "--today", "2026-11-30",
                            "--drain", str(drain), "--prometheus", str(prom), "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["off_matrix"] == 4 and doc["checked"] == 7 and doc["missing"] == "gpu001"
    off = {n["host"]: {m["component"]: (m["expected"], m["actual"]) for m in n["off"]} for n in doc["nodes"]}
    assert off == {"gpu002": {"driver": ("580.126.20", "580.95.05")},
                   "gpu003": {"driver": ("580.126.20", "580.95.05"), "firmware.cx7": ("28.47.2682", "28.46.1006")},
                   "gpu004": {"nccl": ("2.30.4", "unknown")},
                   "kgpu02": {"kubelet": ("1.34.2", "v1.33.0")}}
    reason = next(m["reason"] for n in doc["nodes"] if n["host"] == "gpu004" for m in n["off"])
    assert reason == "no installed package matches libnccl2"
    assert doc["unknown_components"] == {"gpu004": ["nccl"]}
    lines = drain.read_text().splitlines()
    assert lines == [
        "scontrol update NodeName=gpu002 State=DRAIN 'Reason=clusterdef off-matrix: driver 580.95.05!=580.126.20'",
        "scontrol update NodeName=gpu003 State=DRAIN 'Reason=clusterdef off-matrix: driver 580.95.05!=580.126.20, "
        "firmware.cx7 28.46.1006!=28.47.2682'",
        "scontrol update NodeName=gpu004 State=DRAIN 'Reason=clusterdef off-matrix: nccl unknown!=2.30.4'",
        "kubectl taint nodes kgpu02 clusterdef.dev/off-matrix=kubelet:NoSchedule --overwrite",
        "kubectl drain kgpu02 --ignore-daemonsets --delete-emptydir-data --timeout=120m"
        "  # --ignore-daemonsets keeps the repair pods of gpu-operator, nvidia-network-operator",
    ]
    # the text report names the nodes without facts
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(facts_dir), "--today", "2026-11-30"])
    assert r.exit_code == 1 and "without facts (1): gpu001" in r.output, r.output
    text = prom.read_text()
    assert 'clusterdef_drift_nodes_off_matrix{set="2026.07-r580"} 4' in text
    assert ('clusterdef_node_off_matrix{node="gpu003",group="train",component="firmware.cx7",'
            'expected="28.47.2682",actual="28.46.1006"} 1') in text
    # every sample line is valid exposition format
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+]+$')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample.match(line), line


def test_same_reason_folds_into_one_hostlist(lab_result):
    vs, facts = _facts(lab_result)
    for f in facts:
        f["versions"]["kernel"] = "6.8.0-31-generic"
    report = drift.compare(lab_result.definition, vs, [("x", f) for f in facts])
    lines = drift.drain_lines(report)
    assert lines[0].startswith("scontrol update 'NodeName=gpu[001-004],sgpu[01-02]' State=DRAIN")
    assert len(lines) == 5  # one Slurm line, a taint and a drain per Kubernetes node
    assert lines[1:] == [
        "kubectl taint nodes kgpu01 clusterdef.dev/off-matrix=kernel:NoSchedule --overwrite",
        "kubectl drain kgpu01 --ignore-daemonsets --delete-emptydir-data --timeout=120m"
        "  # --ignore-daemonsets keeps the repair pods of gpu-operator, nvidia-network-operator",
        "kubectl taint nodes kgpu02 clusterdef.dev/off-matrix=kernel:NoSchedule --overwrite",
        "kubectl drain kgpu02 --ignore-daemonsets --delete-emptydir-data --timeout=120m"
        "  # --ignore-daemonsets keeps the repair pods of gpu-operator, nvidia-network-operator",
    ]


def test_drain_spares_the_definitions_operator_namespaces(lab_result, tmp_path):
    """The namespaces come from kubernetes.gpu_operator/network_operator; run by bash with a kubectl
    stand-in, the taint is NoSchedule (never NoExecute) and the drain keeps DaemonSet pods."""
    import subprocess

    text = (CLUSTERS / "lab.yaml").read_text().replace("gpu_operator: {mig_strategy: none}",
                                                        "gpu_operator: {mig_strategy: none, namespace: gpu-op}")
    assert "namespace: gpu-op" in text
    (tmp_path / "lab.yaml").write_text(text)
    vs, facts = _facts(lab_result)
    for f in facts:
        if f["host"] == "kgpu01":
            f["versions"]["driver"] = "580.95.05"
    drain = tmp_path / "drain.sh"
    r = runner.invoke(app, ["drift", str(tmp_path / "lab.yaml"), "--facts", str(_write(tmp_path, facts)),
                            "--today", "2026-11-30", "--drain", str(drain)])
    assert r.exit_code == 1, r.output
    assert drain.read_text().splitlines() == [
        "kubectl taint nodes kgpu01 clusterdef.dev/off-matrix=driver:NoSchedule --overwrite",
        "kubectl drain kgpu01 --ignore-daemonsets --delete-emptydir-data --timeout=120m"
        "  # --ignore-daemonsets keeps the repair pods of gpu-op, nvidia-network-operator",
    ]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done >> "$ARGV_LOG"\n'
                                     'printf "\\n" >> "$ARGV_LOG"\n')
    (bin_dir / "kubectl").chmod(0o755)
    log = tmp_path / "argv"
    subprocess.run(["bash", str(drain)], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log)},
                   check=True, timeout=30)
    calls = [c.split("\0")[:-1] for c in log.read_text().splitlines()]
    assert calls == [["taint", "nodes", "kgpu01", "clusterdef.dev/off-matrix=driver:NoSchedule", "--overwrite"],
                     ["drain", "kgpu01", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120m"]]


def test_text_report_names_both_versions(lab_result, tmp_path):
    vs, facts = _facts(lab_result)
    facts[0]["versions"]["slurm"] = "25.05.0"
    facts.append({"host": "stranger01", "versions": {}})
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(_write(tmp_path, facts)),
                            "--today", "2026-11-30"])
    assert r.exit_code == 1
    assert "gpu001 (train, slurm): slurm 25.05.0 (set 2026.07-r580: 25.11.7)" in r.output
    assert "stranger01" in r.output


@pytest.mark.parametrize("content, where", [
    ('{"host": "gpu001",\n "versions": {"driver": }\n}', ":2:"),
    ('{"versions": {}}', "host"),
    ('[{"host": "gpu001", "versions": []}]', "versions"),
])
def test_bad_facts_exit_2_with_location(tmp_path, content, where):
    f = tmp_path / "bad.json"
    f.write_text(content)
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(f), "--today", "2026-11-30"])
    assert r.exit_code == 2, r.output
    assert "bad.json" in r.output and where in r.output and "Traceback" not in r.output


def test_missing_facts_path_exit_2(tmp_path):
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(tmp_path / "nope"),
                            "--today", "2026-11-30"])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_example_fixture_is_valid_and_on_matrix(lab_result):
    """tests/fixtures/facts/lab.json is the example in docs/facts-format.md."""
    vs = lab_result.matrix.sets["2026.07-r580"]
    facts = drift.read_facts(FIXTURES / "lab.json")
    report = drift.compare(lab_result.definition, vs, facts)
    assert [n.host for n in report.off_matrix] == ["gpu004", "kgpu01"]
    assert report.off_matrix[0].off[0].component == "driver"
    # kgpu01's NVSwitch firmware was unreadable: off-matrix (fail closed), not fine
    assert [(m.component, m.actual, m.reason) for m in report.off_matrix[1].off] == [
        ("firmware.nvswitch", "unknown", "nvfwupd not installed")]


HOSTILE_FACTS = ["1$(touch {m})", "1`touch {m}`", "1'; touch {m}; '", '1"; touch {m}; "', "1\ntouch {m}",
                 "1 && touch {m}", "1\\", "x" * 5000 + "$(touch {m})"]


@pytest.mark.parametrize("payload", HOSTILE_FACTS)
def test_hostile_facts_never_run_in_the_drain_file(lab_result, tmp_path, payload):
    """Facts come from the nodes: a node reporting a command as its driver version gets drained with
    a reason that is data. The drain file is run by bash here with scontrol/kubectl stand-ins that
    record their argv; the marker file must never appear and each reason is one argument."""
    import subprocess

    vs, facts = _facts(lab_result)
    marker = tmp_path / "pwned"
    by_host = {f["host"]: f for f in facts}
    by_host["gpu002"]["versions"]["driver"] = payload.format(m=marker)
    by_host["gpu003"]["versions"]["firmware"]["cx7"] = payload.format(m=marker)
    drain = tmp_path / "drain.sh"
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(_write(tmp_path, by_host.values())),
                            "--today", "2026-11-30", "--drain", str(drain)])
    assert r.exit_code == 1, r.output
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("scontrol", "kubectl"):
        (bin_dir / tool).write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done >> "$ARGV_LOG"\n'
                                    'printf "\\n" >> "$ARGV_LOG"\n')
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "argv"
    proc = subprocess.run(["bash", str(drain)], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log)},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    calls = [c.split("\0")[:-1] for c in log.read_text().splitlines()]
    assert len(calls) == len(drain.read_text().splitlines()) == 2  # one line per drained host, nothing added
    for argv in calls:
        assert argv[:1] == ["update"] and argv[2] == "State=DRAIN" and argv[3].startswith("Reason=clusterdef off-matrix:")
        assert "\n" not in argv[3] and "$(" not in argv[3] and "`" not in argv[3]


def test_drain_lines_quote_even_unmasked_values(tmp_path):
    """The second wall: drain_lines quotes every argument even if a value reached it unmasked."""
    import subprocess

    marker = tmp_path / "pwned"
    node = drift.NodeReport("gpu001", "train", "slurm")
    node.off.append(drift.Mismatch("driver", "580.126.20", f"1$(touch {marker})'\"`touch {marker}`"))
    script = "\n".join(drift.drain_lines(drift.DriftReport("s", [node], [], []))) + "\n"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text('#!/bin/sh\nprintf "%s\\n" "$#" > "$ARGV_LOG"\n')
    (bin_dir / "scontrol").chmod(0o755)
    log = tmp_path / "argv"
    subprocess.run(["bash", "-c", script], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log)},
                   check=True, timeout=30)
    assert not marker.exists()
    assert log.read_text() == "4\n"  # update, NodeName=, State=DRAIN, Reason=... : nothing split or added
