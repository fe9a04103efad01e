"""clusterdef apply: real ansible-runner runs of a real plan file against the rendered lab
inventory, with stand-in playbooks (tests/fixtures/apply/playbooks/) that run on the local
connection, record each run in a log file and fail on the hosts named by `-e fail_hosts=...`.

Proves: stages run in order (canary -> gates -> rollback drill -> control plane -> wave_001 ...),
the first failing wave halts the rollout (later waves never run), the run record is written,
--check reaches Ansible's check mode, and a stale plan is refused with exit 2 before anything runs."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterdef.cli import app
from clusterdef.plan import load_side
from clusterdef.plan.apply import ApplyError, expand_pattern, inventory_waves, prepare, wave_groups
from conftest import CLUSTERS, MATRICES, TODAY

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "apply" / "playbooks"
OLD, CURRENT, CANDIDATE = "2025.10-r580", "2026.07-r580", "2026.11-r595-candidate"
DAY = TODAY.isoformat()
runner = CliRunner()


def need_ansible_runner() -> None:
    ok = importlib.util.find_spec("ansible_runner") is not None and \
        (Path(sys.executable).parent / "ansible-playbook").exists()
    if not ok:
        if os.environ.get("CI"):
            pytest.fail("ansible-runner / ansible-playbook missing in CI (pip install -e '.[test]')")
        pytest.skip("ansible-runner or ansible-playbook is not installed")


def lab(tmp: Path, set_name: str, name: str) -> Path:
    text = (CLUSTERS / "lab.yaml").read_text()
    text = text.replace(f"matrix: {CURRENT}", f"matrix: {set_name}", 1)
    if set_name == OLD:  # the older set pins no BlueField-3 firmware
        text = text.replace("firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7, bf3]",
                            "firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7]")
    if set_name == CANDIDATE:
        text = text.replace(f"rollback: {{target: {OLD}}}", f"rollback: {{target: {CURRENT}}}", 1)
    out = tmp / name
    out.write_text(text)
    return out


def make_plan(tmp: Path, a: str = OLD, b: str = CURRENT, *extra: str) -> Path:
    lab(tmp, a, "old.yaml"), lab(tmp, b, "new.yaml")
    pf = tmp / "lab.plan.json"
    r = runner.invoke(app, ["plan", "--from", str(tmp / "old.yaml"), "--to", str(tmp / "new.yaml"), "-m",
                            str(MATRICES), "--today", DAY, "-f", "json", "--plan-file", str(pf), *extra])
    assert r.exit_code == 0, r.output
    return pf


def apply(pf: Path, log: Path, *extra: str, playbooks: Path = FIXTURES):
    return runner.invoke(app, ["apply", str(pf), "-m", str(MATRICES), "--today", DAY, "--playbooks", str(playbooks),
                               "-e", f"apply_log={log}", *extra])


def log_lines(log: Path) -> list[tuple[str, ...]]:
    """(step, stage, wave, hosts, check) per playbook run, in the order they ran."""
    if not log.exists():
        return []
    return [tuple(p.strip() for p in line.split("|")) for line in log.read_text().splitlines() if line.strip()]


def records(tmp: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(tmp.glob("lab.plan.run-*.json"))]


# --------------------------------------------------------------------------- pure parts (fast)

def test_inventory_patterns_expand_like_ansible():
    assert expand_pattern("gpu[001:004]") == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert expand_pattern("n[1:10:4]") == ["n1", "n5", "n9"]
    assert expand_pattern("r[a:b]n[01:02]") == ["ran01", "ran02", "rbn01", "rbn02"]
    assert expand_pattern("login1") == ["login1"]
    with pytest.raises(ValueError):
        expand_pattern("x[aa:bz]")


def rendered_inventory(example: str) -> str:
    return load_side(CLUSTERS / f"{example}.yaml", MATRICES, TODAY).tree["ansible/inventory/hosts.yml"]


def test_rendered_inventory_waves():
    waves = inventory_waves(rendered_inventory("lab"))
    assert waves == {"wave_000": ["gpu001", "gpu003"], "wave_001": ["gpu002", "gpu004"],
                     "wave_002": ["kgpu01", "kgpu02"]}
    estate = inventory_waves(rendered_inventory("estate"))
    hosts = [h for hs in estate.values() for h in hs]
    assert len(estate) > 10 and len(hosts) == len(set(hosts)) and list(estate)[0] == "wave_000"


def test_plan_stage_maps_to_wave_groups():
    waves = {"wave_000": ["a1", "a3"], "wave_001": ["a2", "a4"], "wave_002": ["b1", "b2"]}
    assert wave_groups({"name": "wave 1", "hosts": "a[2,4]"}, waves) == [("wave_001", ["a2", "a4"], None)]
    # a plan wave holding only the changed nodes of an inventory wave is limited to them
    assert wave_groups({"name": "wave 1", "hosts": "a4,b1"}, waves) == [("wave_001", ["a4"], "a4"),
                                                                      ("wave_002", ["b1"], "b1")]
    with pytest.raises(ApplyError, match="c1 belong to no upgrade wave"):
        wave_groups({"name": "wave 9", "hosts": "c1"}, waves)


def test_real_playbooks_map_including_the_control_plane(tmp_path):
    pf = make_plan(tmp_path)
    steps = prepare(pf, None, None, None, MATRICES, TODAY, ROOT / "playbooks").steps
    ran = [(s.stage, s.action, s.wave, s.playbook.name if s.playbook else None) for s in steps]
    assert ran[0] == ("prepare", "prepare", "", None) and steps[0].skipped
    assert ran[1] == ("canary", "upgrade", "wave_000", "upgrade.yml")
    assert ran[2] == ("canary", "gates", "wave_000", "enforce-baseline.yml")  # no gates.yml: node admission
    assert [r[1] for r in ran if r[0] == "rollback drill"] == ["rollback", "gates", "reapply"]
    # playbooks/control-plane.yml (slurmdbd, then slurm_controllers) runs cluster-wide, without a wave
    assert ("control plane and cluster config", "control-plane", "", "control-plane.yml") in ran
    skipped = prepare(pf, None, None, None, MATRICES, TODAY, ROOT / "playbooks", {"control-plane"}).steps
    assert [s.skipped for s in skipped if s.kind == "control-plane"] == ["skipped by --skip-stage"]
    assert [r[2] for r in ran if r[1] == "upgrade"] == ["wave_000", "wave_001", "wave_002"]
    assert steps[2].limit == "wave_000"  # enforce-baseline.yml targets all nodes: limit to the wave


def test_stale_plan_is_refused_before_anything_runs(tmp_path):
    pf = make_plan(tmp_path)
    new = tmp_path / "new.yaml"
    new.write_text(new.read_text().replace("wave_size: 2", "wave_size: 1"))
    log = tmp_path / "apply.log"
    r = apply(pf, log)
    assert r.exit_code == 2, r.output
    assert "the to definition changed since the plan was made" in r.output and "Traceback" not in r.output
    assert not log.exists() and not records(tmp_path) and not list(tmp_path.glob("*.apply-*"))


def test_bad_apply_inputs(tmp_path):
    bad = tmp_path / "lab.plan.json"
    bad.write_text("{not json")
    r = apply(bad, tmp_path / "log")
    assert r.exit_code == 2 and "not a plan file" in r.output and "Traceback" not in r.output
    pf = make_plan(tmp_path)
    r = apply(pf, tmp_path / "log", "-e", "novalue")
    assert r.exit_code == 2 and "KEY=VALUE" in r.output
    r = apply(pf, tmp_path / "log", "--skip-stage", "wave")
    assert r.exit_code == 2 and "--skip-stage" in r.output
    (tmp_path / "new.yaml").unlink()
    r = apply(pf, tmp_path / "log")
    assert r.exit_code == 2 and "--to" in r.output
    assert not records(tmp_path)


# --------------------------------------------------------------------------- real ansible-runner runs

@pytest.mark.slow
def test_apply_runs_the_stages_in_order_and_records_them(tmp_path):
    need_ansible_runner()
    pf = make_plan(tmp_path)
    log = tmp_path / "apply.log"
    r = apply(pf, log)
    assert r.exit_code == 0, r.output
    got = [(step, stage, wave, hosts) for step, stage, wave, hosts, check in log_lines(log)]
    assert got == [
        ("prepare", "prepare", "none", "localhost"),
        ("upgrade", "canary", "wave_000", "gpu001,gpu003"),
        ("gates", "canary", "wave_000", "gpu001,gpu003"),
        ("rollback", "rollback drill", "wave_000", "gpu001,gpu003"),
        ("gates", "rollback drill", "wave_000", "gpu001,gpu003"),
        ("reapply", "rollback drill", "wave_000", "gpu001,gpu003"),
        ("control-plane", "control plane and cluster config", "none", "localhost"),
        ("upgrade", "wave 1", "wave_001", "gpu002,gpu004"),
        ("gates", "wave 1", "wave_001", "gpu002,gpu004"),
        ("upgrade", "wave 2", "wave_002", "kgpu01,kgpu02"),
        ("gates", "wave 2", "wave_002", "kgpu01,kgpu02"),
    ]
    assert {line[4] for line in log_lines(log)} == {"check=False"}
    [rec] = records(tmp_path)
    assert rec["status"] == "succeeded" and rec["halted_at"] is None and rec["not_run"] == []
    assert rec["from_set"] == OLD and rec["to_set"] == CURRENT and rec["check"] is False
    runs = rec["runs"]
    assert [(x["stage"], x["action"], x["wave"]) for x in runs] == [(s, a, w if w != "none" else "")
                                                                   for a, s, w, _ in got]
    for x in runs:
        assert x["rc"] == 0 and x["status"] == "successful" and x["start"] <= x["end"]
        assert (Path(x["artifact_dir"]) / "stdout").is_file() and (Path(x["artifact_dir"]) / "rc").read_text() == "0"
    assert runs[1]["hosts"] == "gpu[001,003]" and runs[1]["nodes"] == 2
    assert [x["start"] for x in runs] == sorted(x["start"] for x in runs)


@pytest.mark.slow
def test_first_failing_wave_halts_the_rollout(tmp_path):
    need_ansible_runner()
    pf = make_plan(tmp_path)
    log = tmp_path / "apply.log"
    r = apply(pf, log, "-e", "fail_hosts=gpu004")
    assert r.exit_code == 1, r.output
    assert "halted" in r.output and "wave 1: upgrade wave_001" in r.output and "gpu004" in r.output
    steps = [(step, wave) for step, _, wave, _, _ in log_lines(log)]
    assert steps[-1] == ("upgrade", "wave_001")  # failed there: no gates, and wave 2 never ran
    assert not any(w == "wave_002" for _, w in steps) and ("gates", "wave_001") not in steps
    [rec] = records(tmp_path)
    assert rec["status"] == "failed" and rec["halted_at"] == "wave 1: upgrade wave_001"
    last = rec["runs"][-1]
    assert last["rc"] != 0 and last["failed_hosts"] == ["gpu004"] and "injected failure" in last["failures"][0]
    assert [(x["stage"], x["action"]) for x in rec["not_run"]] == [("wave 1", "gates"), ("wave 2", "upgrade"),
                                                                  ("wave 2", "gates")]
    assert all(x["rc"] == 0 for x in rec["runs"][:-1])


@pytest.mark.slow
def test_check_mode_previews_a_canary_only_candidate_plan(tmp_path):
    need_ansible_runner()
    pf = make_plan(tmp_path, CURRENT, CANDIDATE, "--allow-candidate")
    log = tmp_path / "apply.log"
    r = apply(pf, log, "--check")
    assert r.exit_code == 0, r.output
    lines = log_lines(log)
    assert [(x[0], x[2]) for x in lines] == [("prepare", "none"), ("upgrade", "wave_000"), ("gates", "wave_000"),
                                             ("rollback", "wave_000"), ("gates", "wave_000"), ("reapply", "wave_000")]
    assert {x[4] for x in lines} == {"check=True"}  # ansible_check_mode was on in every run
    [rec] = records(tmp_path)
    assert rec["check"] is True and rec["status"] == "succeeded"
    cmd = json.loads((Path(rec["runs"][1]["artifact_dir"]) / "command").read_text())["command"]
    assert "--check" in cmd and "--diff" in cmd
