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
    assert len(report.nodes) == 12 and not report.off_matrix and not report.missing
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(_write(tmp_path, facts)),
                            "--today", "2026-11-30"])
    assert r.exit_code == 0, r.output
    assert "12 node(s) checked against 2026.07-r580: 0 off-matrix" in r.output


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
    assert doc["off_matrix"] == 4 and doc["checked"] == 11 and doc["missing"] == "gpu001"
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


# --------------------------------------------------------------------------- independent oracle
# What a lab node on 2026.07-r580 runs, copied by hand from matrices/sets/2026.07-r580.yaml (components,
# firmware.hgx-h100) and clusters/lab.yaml (the gpu-node image's kernel): not derived from
# drift.expectations(), so a component compare() stops checking fails here.
LAB_SOFTWARE = {"driver": "580.126.20", "cuda": "13.0.2", "nccl": "2.30.4", "container_toolkit": "1.19.1",
                "kernel": "6.8.0-60-generic"}
LAB_FIRMWARE = {"bmc": "HGX-22.10-1-rc36", "sbios": "01.07.08", "gpu_vbios": "96.00.68.00.01",
                "nvswitch": "96.10.38.00.01", "cx7": "28.47.2682"}
# (host, component, expected as the report names it, an off-matrix value a node could report)
OFF = [(h, c, want, off) for h in ("gpu001", "kgpu01", "sgpu02") for c, want, off in [
    ("driver", "580.126.20", "580.95.05"), ("cuda", "13.0.2", "12.8.1"), ("nccl", "2.30.4", "2.28.9"),
    ("container_toolkit", "1.19.1", "1.17.8"), ("kernel", "6.8.0-60-generic", "6.8.0-31-generic"),
    ("firmware.bmc", "HGX-22.10-1-rc36", "HGX-22.10-1-rc30"), ("firmware.sbios", "01.07.08", "01.05.03"),
    ("firmware.gpu_vbios", "96.00.68.00.01", "96.00.5E.00.01"),
    ("firmware.nvswitch", "96.10.38.00.01", "96.10.35.00.01"), ("firmware.cx7", "28.47.2682", "28.46.1006")]] + [
    ("gpu003", "slurm", "25.11.7", "25.11.6"), ("sgpu01", "slurm", "25.11.7", "24.11.1"),
    ("kgpu02", "kubelet", "1.34.2", "v1.34.1")] + [
    # service hosts (docs/services.md): only what they run
    ("slurmctl01", "slurm", "25.11.7", "25.05.0"), ("slurmdbd01", "slurm", "25.11.7", "24.11.1"),
    ("k8sctl01", "kubelet", "1.34.2", "v1.33.4"), ("mgmt01", "kernel", "6.8.0-60-generic", "6.8.0-31-generic")]
# What a lab service host reports: its kernel and what its services run, no GPU stack nor GPU firmware.
SERVICE_FACTS = {"slurmctl01": {"slurm": "25.11.7"}, "slurmdbd01": {"slurm": "25.11.7"}, "mgmt01": {},
                 "k8sctl01": {"kubelet": "v1.34.2"}}


def _lab_fact(host: str) -> dict:
    if host in SERVICE_FACTS:
        return {"host": host, "collected_at": "2026-11-30T02:00:00Z",
                "versions": {"kernel": "6.8.0-60-generic", **SERVICE_FACTS[host], "firmware": {}}}
    plane = {"kubelet": "v1.34.2"} if host.startswith("kgpu") else {"slurm": "25.11.7"}
    return {"host": host, "collected_at": "2026-11-30T02:00:00Z",
            "versions": {**LAB_SOFTWARE, **plane, "firmware": dict(LAB_FIRMWARE)}}


LAB_HOSTS = ["gpu001", "gpu002", "gpu003", "gpu004", "kgpu01", "kgpu02", "sgpu01", "sgpu02",
             "slurmctl01", "slurmdbd01", "mgmt01", "k8sctl01"]


def test_hand_written_lab_facts_are_on_matrix(lab_result):
    vs = lab_result.matrix.sets["2026.07-r580"]
    report = drift.compare(lab_result.definition, vs, [("x", _lab_fact(h)) for h in LAB_HOSTS])
    assert [n.host for n in report.nodes] == LAB_HOSTS
    assert report.off_matrix == [] and report.missing == [] and report.strangers == []
    assert {n.host: n.group for n in report.nodes} == {
        "gpu001": "train", "gpu002": "train", "gpu003": "train", "gpu004": "train",
        "kgpu01": "infer", "kgpu02": "infer", "sgpu01": "secure", "sgpu02": "secure",
        "slurmctl01": "ctl", "slurmdbd01": "acct", "mgmt01": "mgmt", "k8sctl01": "k8sctl"}
    # a kubelet reports a leading v, the set does not: the same version
    assert {n.host: n.control_plane for n in report.nodes}["kgpu01"] == "kubernetes"


@pytest.mark.parametrize("host, component, expected, actual", OFF, ids=[f"{h}-{c}" for h, c, _, _ in OFF])
def test_every_pinned_component_off_matrix_is_reported(lab_result, host, component, expected, actual):
    vs = lab_result.matrix.sets["2026.07-r580"]
    facts = [_lab_fact(h) for h in LAB_HOSTS]
    fact = next(f for f in facts if f["host"] == host)
    if component.startswith("firmware."):
        fact["versions"]["firmware"][component.split(".", 1)[1]] = actual
    else:
        fact["versions"][component] = actual
    report = drift.compare(lab_result.definition, vs, [("x", f) for f in facts])
    assert [(n.host, [(m.component, m.expected, m.actual, m.reason) for m in n.off]) for n in report.off_matrix] == [
        (host, [(component, expected, actual, "")])]
    assert report.nodes[LAB_HOSTS.index(host)].unknown == []
    # the same component missing from the facts: off-matrix and unknown, "not in the facts"
    if component.startswith("firmware."):
        del fact["versions"]["firmware"][component.split(".", 1)[1]]
    else:
        del fact["versions"][component]
    report = drift.compare(lab_result.definition, vs, [("x", f) for f in facts])
    (node,) = report.off_matrix
    assert [(m.component, m.expected, m.actual, m.reason) for m in node.off] == [
        (component, expected, "unknown", "not in the facts")]
    assert node.unknown == [component]


def test_facts_for_is_the_hand_written_lab(lab_result):
    """facts_for (used by tests, benchmarks and docs) writes exactly what a lab node reports."""
    vs = lab_result.matrix.sets["2026.07-r580"]
    assert drift.facts_for(lab_result.definition, vs) == [_lab_fact(h) for h in LAB_HOSTS]
    assert drift.facts_for(lab_result.definition, vs, "2026-12-01T00:00:00Z")[0]["collected_at"] == \
        "2026-12-01T00:00:00Z"
    groups = drift.expectations(lab_result.definition, vs)
    assert groups["infer"] == drift.Expected("infer", "kubernetes", "hgx-h100", {
        **LAB_SOFTWARE, "kubelet": "1.34.2", **{f"firmware.{k}": v for k, v in LAB_FIRMWARE.items()}})


@pytest.mark.parametrize("value, actual, reason", [
    ("unknown", "unknown", "unreadable"),  # the probe ran and could not read it
    ("", "unknown", "unreadable"),
    (None, "unknown", "unreadable"),
    ("13.0.2 ", None, None),  # whitespace around a version is not a difference
    ("v13.0.2", "v13.0.2", ""),  # a leading v is only dropped for kubelet and slurm
    ("13.0.2$(id)", "unprintable:13.0.2??id?", ""),
    ("x" * 41 + "$", "unprintable:" + "x" * 40, ""),
])
def test_unreadable_and_unprintable_values(lab_result, value, actual, reason):
    vs = lab_result.matrix.sets["2026.07-r580"]
    fact = _lab_fact("gpu001")
    fact["versions"]["cuda"] = value
    (node,) = drift.compare(lab_result.definition, vs, [("x", fact)]).nodes
    if actual is None:
        assert node.off == [] and node.unknown == []
        return
    assert [(m.component, m.expected, m.actual, m.reason) for m in node.off] == [("cuda", "13.0.2", actual, reason)]
    assert node.unknown == (["cuda"] if actual == "unknown" else [])


def test_reasons_are_used_only_when_a_mapping_and_are_masked(lab_result):
    vs = lab_result.matrix.sets["2026.07-r580"]
    fact = _lab_fact("gpu001")
    fact["versions"]["nccl"] = "unknown"
    fact["versions"]["firmware"]["cx7"] = "unknown"
    fact["reasons"] = {"nccl": "no libnccl2\n$(id)" + "y" * 200}
    (node,) = drift.compare(lab_result.definition, vs, [("x", fact)]).nodes
    reasons = {m.component: m.reason for m in node.off}
    assert reasons == {"nccl": ("no libnccl2?$(id)" + "y" * 200)[:160], "firmware.cx7": "unreadable"}
    fact["reasons"] = ["nccl"]  # not a mapping: ignored
    (node,) = drift.compare(lab_result.definition, vs, [("x", fact)]).nodes
    assert {m.component: m.reason for m in node.off} == {"nccl": "unreadable", "firmware.cx7": "unreadable"}
    assert node.unknown == ["nccl", "firmware.cx7"]


def test_kubelet_and_slurm_versions_ignore_a_leading_v(lab_result):
    vs = lab_result.matrix.sets["2026.07-r580"]
    slurm, kube = _lab_fact("gpu001"), _lab_fact("kgpu01")
    slurm["versions"]["slurm"] = "v25.11.7"
    kube["versions"]["kubelet"] = "1.34.2"
    report = drift.compare(lab_result.definition, vs, [("x", slurm), ("x", kube)])
    assert report.off_matrix == []


def test_report_json_in_full(lab_result):
    vs = lab_result.matrix.sets["2026.07-r580"]
    facts = [_lab_fact(h) for h in LAB_HOSTS if h not in ("gpu002", "gpu003")]
    facts[0]["versions"]["driver"] = "580.95.05"
    facts[0]["collected_at"] = "2026-11-29T02:00:00Z"
    facts[1]["versions"]["nccl"] = "unknown"
    facts.append({"host": "zz01", "versions": {}})
    facts.append({"host": "aa01", "versions": {}})
    doc = drift.compare(lab_result.definition, vs, [("x", f) for f in facts]).to_json()
    assert doc == {
        "set": "2026.07-r580", "checked": 10, "off_matrix": 2, "missing": "gpu[002-003]", "missing_count": 2,
        "unknown_hosts": ["aa01", "zz01"],
        "nodes": [
            {"host": "gpu001", "group": "train", "control_plane": "slurm", "collected_at": "2026-11-29T02:00:00Z",
             "off": [{"component": "driver", "expected": "580.126.20", "actual": "580.95.05"}], "unknown": []},
            {"host": "gpu004", "group": "train", "control_plane": "slurm", "collected_at": "2026-11-30T02:00:00Z",
             "off": [{"component": "nccl", "expected": "2.30.4", "actual": "unknown", "reason": "unreadable"}],
             "unknown": ["nccl"]}],
        "unknown_components": {"gpu004": ["nccl"]},
    }
    clean = drift.compare(lab_result.definition, vs, [("x", _lab_fact(h)) for h in LAB_HOSTS]).to_json()
    assert clean["missing"] == "" and clean["missing_count"] == 0 and clean["nodes"] == []
    (no_time,) = drift.compare(lab_result.definition, vs, [("x", {"host": "gpu001", "versions": {}})]).nodes
    assert no_time.collected_at == ""


def test_prometheus_text_in_full():
    node = drift.NodeReport("gpu001", "train", "slurm", [drift.Mismatch("driver", "580.126.20", "580.95.05"),
                                                           drift.Mismatch("firmware.cx7", "28.47.2682", "unknown")],
                            ["firmware.cx7"])
    fine = drift.NodeReport("gpu002", "train", "slurm")
    text = drift.prometheus(drift.DriftReport('s"1', [node, fine], ["gpu003", "gpu004", "gpu005"], []))
    assert text == "\n".join([
        "# HELP clusterdef_drift_nodes_checked Nodes whose facts were compared with the validated set.",
        "# TYPE clusterdef_drift_nodes_checked gauge",
        'clusterdef_drift_nodes_checked{set="s\\"1"} 2',
        "# HELP clusterdef_drift_nodes_off_matrix Nodes running at least one component off the validated set.",
        "# TYPE clusterdef_drift_nodes_off_matrix gauge",
        'clusterdef_drift_nodes_off_matrix{set="s\\"1"} 1',
        "# HELP clusterdef_drift_nodes_missing Nodes of the definition without facts.",
        "# TYPE clusterdef_drift_nodes_missing gauge",
        'clusterdef_drift_nodes_missing{set="s\\"1"} 3',
        "# HELP clusterdef_node_off_matrix 1 for each node component that differs from the validated set.",
        "# TYPE clusterdef_node_off_matrix gauge",
        'clusterdef_node_off_matrix{node="gpu001",group="train",component="driver",expected="580.126.20",'
        'actual="580.95.05"} 1',
        'clusterdef_node_off_matrix{node="gpu001",group="train",component="firmware.cx7",expected="28.47.2682",'
        'actual="unknown"} 1',
        "# HELP clusterdef_node_component_unknown 1 for each node component the collector could not read.",
        "# TYPE clusterdef_node_component_unknown gauge",
        'clusterdef_node_component_unknown{node="gpu001",group="train",component="firmware.cx7"} 1',
    ]) + "\n"


def test_taint_names_the_components_and_drain_without_spared_namespaces():
    node = drift.NodeReport("kgpu01", "infer", "kubernetes", [
        drift.Mismatch("firmware.gpu_vbios", "96.00.68.00.01", "96.00.5E.00.01"),
        drift.Mismatch("container_toolkit", "1.19.1", "1.17.8"), drift.Mismatch("driver", "1", "2")])
    lines = drift.drain_lines(drift.DriftReport("s", [node], [], []), spare=("gpu_op", "net"), timeout_minutes=45)
    assert lines == [
        "kubectl taint nodes kgpu01 clusterdef.dev/off-matrix=container-toolkit-driver-fw-gpu-vbios:NoSchedule "
        "--overwrite",
        "kubectl drain kgpu01 --ignore-daemonsets --delete-emptydir-data --timeout=45m"
        "  # --ignore-daemonsets keeps the repair pods of gpu?op, net"]
    lines = drift.drain_lines(drift.DriftReport("s", [node], [], []), spare=())
    assert lines[1] == "kubectl drain kgpu01 --ignore-daemonsets --delete-emptydir-data --timeout=120m"
    # a taint value is at most 63 characters and never ends in a dash
    node.off = [drift.Mismatch(f"firmware.c{'x' * 20}{i}", "1", "2") for i in range(4)]
    taint = drift.drain_lines(drift.DriftReport("s", [node], [], []))[0].split()[4]
    value = taint.split("=", 1)[1].rsplit(":", 1)[0]
    assert len(value) <= 63 and not value.endswith("-") and value.startswith("fw-c")
    assert value == ("-".join(f"fw-c{'x' * 20}{i}" for i in range(4)))[:63].strip("-")


def test_read_facts_findings_in_full(tmp_path):
    d = tmp_path / "facts"
    d.mkdir()
    with pytest.raises(drift.FactsError) as exc:
        drift.read_facts(d)
    (f,) = exc.value.findings
    assert (f.code, f.file, f.line, f.column, f.message, f.hint) == (
        "facts-invalid", str(d), 0, 0, f"no *.json fact files in {d}",
        "point --facts at the folder the gpu_facts role writes to")
    (d / "0.json").write_text('{"host": "gpu004",\n "versions": }')  # first: the files after it are still read
    (d / "a.json").write_text('[{"host": ""},\n  {"host": "gpu001",\n   "versions": {"firmware": []}}, {"host": 5},\n'
                              '{"host": "gpu002", "versions": {}}]')
    (d / "b.json").write_text('{"versions": {}}')
    (d / "c.json").write_text('{"host": "gpu003", "versions": {"driver": "1"}}')
    with pytest.raises(drift.FactsError) as exc:
        drift.read_facts(d)
    got = [(f.code, f.file, f.line, f.column, f.message, f.hint) for f in exc.value.findings]
    a, b = str(d / "a.json"), str(d / "b.json")
    assert got[0][1].endswith("0.json") and got[0][2] == 2  # the JSON error's line
    assert got[1:] == [  # each at the line its fact starts on
        ("facts-invalid", a, 1, 1, f"{a} [0]: a fact needs a non-empty string `host`", drift.FORMAT_HINT),
        ("facts-invalid", a, 2, 1, f"{a} [1]: `versions` must be a mapping (with `firmware` a mapping)",
         drift.FORMAT_HINT),
        ("facts-invalid", a, 3, 1, f"{a} [2]: a fact needs a non-empty string `host`", drift.FORMAT_HINT),
        ("facts-invalid", b, 1, 1, f"{b}: a fact needs a non-empty string `host`", drift.FORMAT_HINT)]
    assert str(exc.value).count("; ") == 4 and f"; {a}:1:1: {a} [0]: a fact needs" in str(exc.value)
    for bad in ("0.json", "a.json", "b.json"):
        (d / bad).unlink()
    assert [(f, x["host"]) for f, x in drift.read_facts(d)] == [(str(d / "c.json"), "gpu003")]
    assert drift.read_facts(FIXTURES / "lab.json")[0][0] == str(FIXTURES / "lab.json")


def test_masking_keeps_upper_case_and_drain_reasons_are_cut_and_unquoted(lab_result):
    vs = lab_result.matrix.sets["2026.07-r580"]
    fact = _lab_fact("gpu001")
    fact["versions"]["driver"] = "ABC$"
    fact["versions"]["slurm"] = "X25.11.7"  # only a leading v is dropped, nothing else
    fact["versions"]["cuda"] = "unknown"
    fact["reasons"] = {"cuda": "No CUDA Toolkit"}
    (node,) = drift.compare(lab_result.definition, vs, [("x", fact)]).nodes
    assert [(m.component, m.actual, m.reason) for m in node.off] == [
        ("driver", "unprintable:ABC?", ""), ("cuda", "unknown", "No CUDA Toolkit"), ("slurm", "X25.11.7", "")]
    # a reason is one shell word with no double quote, at most 250 characters
    long = drift.NodeReport("gpu001", "train", "slurm", [drift.Mismatch(f"c{i}", '"1"', "2") for i in range(40)])
    reason = drift._reason(long)
    assert len(reason) == 250 and '"' not in reason and reason.startswith("clusterdef off-matrix: c0 2!='1', c1 ")
    # a taint value cut at 63 characters right after a dash loses the dash
    kube = drift.NodeReport("kgpu01", "infer", "kubernetes", [drift.Mismatch("firmware." + "a" * 59, "1", "2"),
                                                              drift.Mismatch("firmware.b", "1", "2")])
    taint = drift.drain_lines(drift.DriftReport("s", [kube], [], []))[0].split()[4]
    assert taint == f"clusterdef.dev/off-matrix=fw-{'a' * 59}:NoSchedule"


def test_service_hosts_are_checked_only_for_what_they_run(lab_result, tmp_path):
    """A service host's facts carry no driver, CUDA or GPU firmware: not off-matrix. A controller on the wrong
    Slurm release and a control-plane node on the wrong kubelet are reported, but never drained or tainted
    like GPU nodes (they run no jobs)."""
    vs = lab_result.matrix.sets["2026.07-r580"]
    facts = [_lab_fact(h) for h in LAB_HOSTS]
    report = drift.compare(lab_result.definition, vs, [("x", f) for f in facts])
    assert report.off_matrix == [] and report.missing == []
    exp = drift.expectations(lab_result.definition, vs)
    assert exp["ctl"].versions == {"kernel": "6.8.0-60-generic", "slurm": "25.11.7"}
    assert exp["k8sctl"].versions == {"kernel": "6.8.0-60-generic", "kubelet": "1.34.2"}
    assert exp["mgmt"].versions == {"kernel": "6.8.0-60-generic"}
    by_host = {f["host"]: f for f in facts}
    by_host["slurmctl01"]["versions"]["slurm"] = "25.05.0"
    by_host["k8sctl01"]["versions"]["kubelet"] = "v1.33.4"
    by_host["gpu001"]["versions"]["driver"] = "580.95.05"
    report = drift.compare(lab_result.definition, vs, [("x", f) for f in by_host.values()])
    assert [n.host for n in report.off_matrix] == ["gpu001", "slurmctl01", "k8sctl01"]
    lines = drift.drain_lines(report)
    assert len(lines) == 1 and "gpu001" in lines[0]
    assert not any("slurmctl01" in line or "k8sctl01" in line for line in lines)


def test_facts_of_another_cluster_are_no_all_clear(lab_result, tmp_path):
    """Facts whose hosts are none of the definition's: exit 2 with a hint, never "0 off-matrix" (exit 0)."""
    vs, facts = _facts(lab_result)
    other = [dict(f, host="other-" + f["host"]) for f in facts[:3]]
    r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(_write(tmp_path, other)),
                            "--today", "2026-11-30"])
    assert r.exit_code == 2, r.output
    assert "none names a host of" in r.output and "other-" in r.output and "hint:" in r.output
    assert "Traceback" not in r.output


def test_a_strangers_escape_sequences_never_reach_the_terminal(lab_result, tmp_path):
    """A facts file naming a host that is not in the definition, with a terminal escape in the name: the
    warning and the JSON show it masked."""
    vs, facts = _facts(lab_result)
    evil = dict(facts[0], host="x\x1b]2;owned\x07\x1b[31m")
    d = _write(tmp_path, facts)
    (d / "evil.json").write_text(json.dumps(evil))
    for fmt in ("text", "json"):
        r = runner.invoke(app, ["drift", str(CLUSTERS / "lab.yaml"), "--facts", str(d), "-f", fmt,
                                "--today", "2026-11-30"])
        assert r.exit_code == 0, r.output
        assert "\x1b" not in r.output and "\x07" not in r.output and "unprintable:x" in r.output
