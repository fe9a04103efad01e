"""clusterdef apply: real ansible-runner runs of a real plan file against the rendered lab
inventory, with stand-in playbooks (tests/fixtures/apply/playbooks/) that run on the local
connection, record each run in a log file and fail on the hosts named by `-e fail_hosts=...`.

Proves: stages run in order (canary -> gates -> rollback drill -> control plane -> wave_001 ...),
the first failing wave halts the rollout (later waves never run), the run record is written,
--check reaches Ansible's check mode, a stale plan is refused with exit 2 before anything runs,
each step's record and output name the tasks that changed (would change) on which hosts (the
stand-in role tests/fixtures/apply/roles/standin_driver changes chosen hosts), and a secret
passed with --secret-env, one that only looks like a credential, one in an unremarkable
variable and a vaulted one all reach the playbook while none of their values is anywhere on
disk afterwards."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from rich.console import Console
from cli_runner import CliRunner

from clusterdef.apply import ApplyError
from clusterdef.apply import events, secrets
from clusterdef.apply.prepare import prepare
from clusterdef.apply.report import print_changes, short_hosts
from clusterdef.apply.inventory import expand_pattern, inventory_waves
from clusterdef.apply.steps import wave_groups
from clusterdef.cli import app
from clusterdef.plan import load_side
from conftest import CLUSTERS, MATRICES, TODAY, images_tree, keep_builds, on_set_images

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


def lab(tmp: Path, set_name: str, name: str, keep: Path | None = None, stateless: bool = True) -> Path:
    """The lab on `set_name`, its image versioned for the set; `keep`: a definition whose image
    builds the boot server keeps (images.*.published); `stateless=False`: group train installed to
    disk like the others (the in-place path these tests exercise)."""
    text = (CLUSTERS / "lab.yaml").read_text()
    if not stateless:
        text = text.replace("provisioning: stateless", "provisioning: stateful", 1)
    text = text.replace(f"matrix: {CURRENT}", f"matrix: {set_name}", 1)
    text = on_set_images(text, set_name)
    if set_name == OLD:  # the older set pins no BlueField-3 firmware
        text = text.replace("firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7, bf3]",
                            "firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7]")
    if set_name == CANDIDATE:
        text = text.replace(f"rollback: {{target: {OLD}}}", f"rollback: {{target: {CURRENT}}}", 1)
    if keep is not None:
        text = keep_builds(text, images_tree(keep))
    # smoke tests that run here: the storage one fails while <tmp>/fail-storage exists
    start, end = text.index("  smoke_tests:\n"), text.index("\nbackup:")
    text = text[:start] + f"""  smoke_tests:
    gpus-visible: {{layer: hardware, argv: [/usr/bin/true]}}
    scratch-mounted: {{layer: storage, argv: [/usr/bin/test, "!", -e, {tmp}/fail-storage], node_groups: [train, infer]}}
""" + text[end:]
    out = tmp / name
    out.write_text(text)
    return out


def make_plan(tmp: Path, a: str = OLD, b: str = CURRENT, *extra: str, stateless: bool = False) -> Path:
    lab(tmp, b, "new.yaml", keep=lab(tmp, a, "old.yaml", stateless=stateless), stateless=stateless)
    pf = tmp / "lab.plan.json"
    r = runner.invoke(app, ["plan", "--from", str(tmp / "old.yaml"), "--to", str(tmp / "new.yaml"), "-m",
                            str(MATRICES), "--today", DAY, "-f", "json", "--plan-file", str(pf), *extra])
    assert r.exit_code == 0, r.output
    return pf


def apply(pf: Path, log: Path, *extra: str, playbooks: Path = FIXTURES):
    # the real smoke.yml (imported by the stand-in) runs its tests here, on the local connection
    return runner.invoke(app, ["apply", str(pf), "-m", str(MATRICES), "--today", DAY, "--playbooks", str(playbooks),
                               "-e", f"apply_log={log}", "-e", "ansible_connection=local", "-e", "ansible_become=false",
                               "-e", f"ansible_python_interpreter={sys.executable}", *extra])


def log_lines(log: Path) -> list[tuple[str, ...]]:
    """(step, stage, wave, hosts, check) per playbook run, in the order they ran."""
    if not log.exists():
        return []
    return [tuple(p.strip() for p in line.split("|")) for line in log.read_text().splitlines() if line.strip()]


def run_of(rec: dict, stage: str, action: str) -> dict:
    """The record's run of one step."""
    [run] = [x for x in rec["runs"] if (x["stage"], x["action"]) == (stage, action)]
    return run


def records(tmp: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(tmp.glob("lab.plan.run-*.json"))]


def listing(folder: Path) -> dict[str, str]:
    """Every path under `folder` with its contents' sha256 (folders: "dir"): a refused apply leaves it equal."""
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}


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
    # the pool h100 (infer) and the tenant secure own two nodes each: one at a time (max_unavailable_pct 50)
    assert waves == {"wave_000": ["gpu001", "gpu003"], "wave_001": ["gpu002", "gpu004"],
                     "wave_002": ["kgpu01"], "wave_003": ["kgpu02"], "wave_004": ["sgpu01"], "wave_005": ["sgpu02"],
                     # service hosts (docs/services.md): apart from GPU nodes, slurmdbd apart from the controller
                     "wave_006": ["mgmt01", "slurmctl01"], "wave_007": ["k8sctl01", "slurmdbd01"]}
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
    pf = make_plan(tmp_path, stateless=True)
    steps = prepare(pf, None, None, None, MATRICES, TODAY, ROOT / "playbooks").steps
    ran = [(s.stage, s.action, s.wave, s.playbook.name if s.playbook else None) for s in steps]
    assert ran[0] == ("image build and publish", "publish", "", "publish-image.yml")
    # before the first change: every node the rollout touches has its versions snapshotted
    assert ran[1] == ("prepare", "snapshot", "", "snapshot.yml")
    # ... the service hosts too: their image is rebuilt for the set (docs/services.md)
    assert sorted(steps[1].hosts) == ["gpu001", "gpu002", "gpu003", "gpu004", "k8sctl01", "kgpu01", "kgpu02",
                                      "mgmt01", "sgpu01", "sgpu02", "slurmctl01", "slurmdbd01"]
    assert steps[1].limit == "wave_000,wave_001,wave_002,wave_003,wave_004,wave_005,wave_006,wave_007"
    assert ran[2] == ("prepare", "prepare", "", None) and steps[2].skipped
    # the canary group train is stateless: the control plane goes first (its image brings slurmd), then
    # reimage.yml points the canary at the new build and reboots it; nothing is installed in place;
    # the lab lists smoke tests, so smoke.yml follows every gate
    assert ran[3] == ("control plane and cluster config", "control-plane", "", "control-plane.yml")
    # Slurm moves 25.05 -> 25.11: the transition files (every running slurmd parses them) reach the controllers
    assert ran[4] == ("deliver the transition configuration", "deliver", "", "deliver.yml")
    assert ran[5:8] == [("canary", "upgrade", "wave_000", "reimage.yml"),
                        ("canary", "gates", "wave_000", "enforce-baseline.yml"),  # no gates.yml: node admission
                        ("canary", "smoke", "wave_000", "smoke.yml")]
    assert [r[1:] for r in ran if r[0] == "rollback drill"] == [
        ("rollback", "wave_000", "reimage.yml"), ("gates", "wave_000", "enforce-baseline.yml"),
        ("smoke", "wave_000", "smoke.yml"), ("reapply", "wave_000", "reimage.yml")]
    skipped = prepare(pf, None, None, None, MATRICES, TODAY, ROOT / "playbooks", {"control-plane"}).steps
    assert [s.skipped for s in skipped if s.kind == "control-plane"] == ["skipped by --skip-stage"]
    # the stateful groups (infer, secure) keep the in-place path; the Kubernetes GPU group infer (wave_002
    # of the inventory) has its own canary, kgpu01, after the control plane, and kgpu02 follows in wave 2
    assert [(r[0], r[2], r[3]) for r in ran if r[1] == "upgrade"] == [
        ("canary", "wave_000", "reimage.yml"), ("kubernetes infer canary", "wave_002", "upgrade.yml"),
        ("wave 1", "wave_001", "reimage.yml"), ("wave 2", "wave_003", "upgrade.yml"),
        ("wave 3", "wave_004", "upgrade.yml"), ("wave 4", "wave_005", "upgrade.yml"),
        ("wave 5", "wave_006", "upgrade.yml"), ("wave 6", "wave_007", "upgrade.yml")]
    assert [s.limit for s in steps if s.action == "upgrade" and s.wave in ("wave_002", "wave_003")] == [None, None]
    # the group defaults move after the last wave, then every changed file reaches its hosts (the final Slurm
    # files, the roles' files; the Kubernetes objects are `pulumi up`'s)
    last = max(i for i, r in enumerate(ran) if r[0] == "boot defaults")
    assert ran[last] == ("boot defaults", "boot-default", "", "boot-pointer.yml")
    tail = ran[last + 1:]
    assert tail and {r[0] for r in tail} == {"deliver configuration"}
    assert ("deliver configuration", "deliver", "", "deliver.yml") in tail
    final = next(s for s in steps if s.stage == "deliver configuration" and s.action == "deliver")
    assert "slurm/slurm.conf" in {f["rel"] for f in final.vars["deliver_files"]["slurmctl01"]}
    assert steps[6].limit == "wave_000" and steps[7].limit == "wave_000"  # they target all nodes: the wave
    # capacity comes back when a canary or wave's last step passes (8 GPUs per lab node); the rollback
    # drill's nodes were already counted with the canary
    back = [(s.stage, s.action, s.gpus) for s in steps if s.returns]
    # the service hosts' waves (5 and 6) end with their services' own checks (service-gates.yml), no smoke tests
    assert back == [("canary", "smoke", 16), ("kubernetes infer canary", "smoke", 8), ("wave 1", "smoke", 16),
                    ("wave 2", "smoke", 8), ("wave 3", "smoke", 8), ("wave 4", "smoke", 8), ("wave 5", "gates", 0),
                    ("wave 6", "gates", 0)]
    assert {s.playbook.name for s in steps if s.stage in ("wave 5", "wave 6") and s.action == "gates"} == {
        "service-gates.yml"}
    # the rollback step and the gates and smoke tests right after it hold the canary to the rollback set
    held_back = [(s.stage, s.action) for s in steps if s.extravars({})["clusterdef_rollback"]]
    assert held_back == [(drill, action) for drill in ("rollback drill", "kubernetes infer rollback drill")
                         for action in ("rollback", "gates", "smoke")]
    assert [s.to_json().get("rollback") for s in steps if s.stage == "rollback drill"] == [True, True, True, None]
    canary = steps[5].extravars({"x": "1"})  # after the transition configuration
    new_build = canary["clusterdef_boot_build"]
    assert new_build.startswith("gpu-node-2026.07.1-2026.07-r580-")
    assert {k: canary[k] for k in ("x", "clusterdef_wave", "clusterdef_stage", "clusterdef_step")} == {
        "x": "1", "clusterdef_wave": "wave_000", "clusterdef_stage": "canary", "clusterdef_step": "upgrade"}
    # drain reasons name the plan and the stage (reimage.yml: clusterdef:<plan>:<stage>)
    assert canary["clusterdef_plan"] == "lab/2025.10-r580->2026.07-r580"
    # one pointer per canary host, by MAC, chaining to the new build's script for the group
    assert [(p["host"], p["path"]) for p in canary["clusterdef_boot_pointers"]] == [
        ("gpu001", "ipxe/hosts/host-52-54-00-20-00-11.ipxe"), ("gpu003", "ipxe/hosts/host-52-54-00-20-00-13.ipxe")]
    assert all(p["content"].rstrip().endswith(f"/ipxe/images/train/{new_build}.ipxe")
               for p in canary["clusterdef_boot_pointers"])
    drill = [s for s in steps if s.stage == "rollback drill"]
    assert drill[0].extravars({})["clusterdef_boot_build"].startswith("gpu-node-2025.10.1-2025.10-r580-") and \
        drill[-1].extravars({})["clusterdef_boot_build"] == new_build
    # the boot defaults: the new entry script and group defaults written, the pointers of train removed
    boot_default = next(s for s in steps if s.action == "boot-default")
    files = {p["path"]: p["content"] for p in boot_default.extravars({})["clusterdef_boot_pointers"]}
    assert files["ipxe/groups/train.ipxe"].count(new_build) >= 2 and "ipxe/boot.ipxe" in files
    assert sorted(p for p, c in files.items() if not c) == [
        f"ipxe/hosts/host-52-54-00-20-00-1{i}.ipxe" for i in range(1, 5)]
    # a playbooks folder without snapshot.yml is refused before anything runs, unless prepare is skipped
    bare = tmp_path / "bare"
    bare.mkdir()
    for pb in (ROOT / "playbooks").glob("*.yml"):
        if pb.name != "snapshot.yml":
            (bare / pb.name).write_text(pb.read_text())
    with pytest.raises(ApplyError, match="needs snapshot.yml"):
        prepare(pf, None, None, None, MATRICES, TODAY, bare)
    assert prepare(pf, None, None, None, MATRICES, TODAY, bare, {"prepare"}).steps[1].skipped


def test_stale_plan_is_refused_before_anything_runs(tmp_path):
    pf = make_plan(tmp_path)
    new = tmp_path / "new.yaml"
    new.write_text(new.read_text().replace("wave_size: 2", "wave_size: 1"))
    log = tmp_path / "apply.log"
    before = listing(tmp_path)
    for extra in ((), ("--check",)):
        r = apply(pf, log, *extra)
        assert r.exit_code == 2, r.output
        assert "the to definition changed since the plan was made" in r.output and "Traceback" not in r.output
        assert listing(tmp_path) == before  # no run record, run folder, log or lock file


def test_bad_apply_inputs(tmp_path):
    bad = tmp_path / "lab.plan.json"
    bad.write_text("{not json")
    before = listing(tmp_path)
    r = apply(bad, tmp_path / "log", "--check")
    assert r.exit_code == 2 and "not a plan file" in r.output and "Traceback" not in r.output
    assert listing(tmp_path) == before
    pf = make_plan(tmp_path)
    before = listing(tmp_path)
    r = apply(pf, tmp_path / "log", "-e", "novalue")
    assert r.exit_code == 2 and "KEY=VALUE" in r.output
    r = apply(pf, tmp_path / "log", "--skip-stage", "wave", "--check")
    assert r.exit_code == 2 and "--skip-stage" in r.output
    r = apply(pf, tmp_path / "log", "--playbooks", str(tmp_path / "nowhere"), "--check")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert listing(tmp_path) == before
    (tmp_path / "new.yaml").unlink()
    before = listing(tmp_path)
    r = apply(pf, tmp_path / "log", "--check")
    assert r.exit_code == 2 and "--to" in r.output
    assert listing(tmp_path) == before


def test_apply_without_ansible_runner_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    """ansible-runner missing (an install without the `ansible` extra): refused with exit 2 before the lock or
    the run folder is made; and when it goes missing only once the run has started, before any playbook ran,
    the run record, its journal, the run folder and the lock file that run made are removed again."""
    from clusterdef.apply import runner as runner_mod
    from clusterdef.apply.session import options, start

    pf = make_plan(tmp_path)
    before = listing(tmp_path)
    monkeypatch.setattr(runner_mod, "RUNNER", "clusterdef_test_no_such_runner")
    r = apply(pf, tmp_path / "log", "--check")
    assert r.exit_code == 2 and "ansible-runner is not installed" in r.output and "Traceback" not in r.output
    assert listing(tmp_path) == before
    # past the CLI's check (a library caller): the session wrote its rollback point, then the first run refuses
    opts = options(pf, None, None, None, FIXTURES, [], [], [], [], True, None)
    s = start(opts, None, None, None, MATRICES, TODAY)
    assert s.private_data_dir.is_dir() and (tmp_path / "lab.apply.lock").exists()
    with pytest.raises(runner_mod.RunnerMissing):
        s.run()
    s.close()
    assert listing(tmp_path) == before
    # a lock file that was there before (an earlier run's) stays; only the run's own files go
    with lock_free(tmp_path):
        pass
    before = listing(tmp_path)
    s = start(opts, None, None, None, MATRICES, TODAY)
    with pytest.raises(runner_mod.RunnerMissing):
        s.run()
    s.close()
    assert listing(tmp_path) == before and "lab.apply.lock" in before


def test_a_rollback_point_that_cannot_be_written_is_removed(tmp_path, monkeypatch):
    """Writing the rollback point fails half way (a full disk, a folder in the way): apply exits 2, and the
    part written, the run folder and the lock file are gone."""
    from clusterdef.apply import snapshot
    from clusterdef.writer import OutputError

    pf = make_plan(tmp_path)
    before = listing(tmp_path)
    real = snapshot.write

    def half(pdd, old, new):
        real(pdd, old, None)  # the old side written
        raise OutputError(f"{pdd}/snapshot/to: no space left on device")
    monkeypatch.setattr(snapshot, "write", half)
    r = apply(pf, tmp_path / "log", "--check")
    assert r.exit_code == 2 and "no space left on device" in r.output and "nothing was run" in r.output, r.output
    assert listing(tmp_path) == before


def test_a_removed_lock_file_is_not_held_twice(tmp_path, monkeypatch):
    """A refused apply removes the lock file it made while holding it; a process that had opened that file
    before and locks it after must not count as the holder (another one may lock the path's new file): acquire
    locks the file the path names. Stand-in: the first open returns a file already unlinked from the path."""
    from clusterdef.apply import lock

    path = lock.lock_path(tmp_path, "lab")
    path.write_text("")
    stale = os.open(path, os.O_RDWR)
    alive = os.dup(stale)  # keeps the unlinked file (and its inode number) in use after acquire closes `stale`
    path.unlink()
    opened = iter([(stale, False)])
    real = lock._open
    monkeypatch.setattr(lock, "_open", lambda p: next(opened, None) or real(p))
    held = lock.acquire(tmp_path, "lab", "x.plan.json")
    try:
        assert held.created and path.exists() and os.fstat(held._fd).st_ino == os.stat(path).st_ino
        assert os.fstat(held._fd).st_ino != os.fstat(alive).st_ino  # not the unlinked file
        with pytest.raises(lock.LockHeld):
            lock.acquire(tmp_path, "lab")
    finally:
        held.release(remove=True)
        os.close(alive)
    assert not path.exists()  # made by that acquire: removed
    path.write_text("")
    lock.acquire(tmp_path, "lab").release(remove=True)
    assert path.exists()  # there before: kept


# --------------------------------------------------------------------------- real ansible-runner runs

@pytest.mark.slow
def test_apply_runs_the_stages_in_order_and_records_them(tmp_path):
    need_ansible_runner()
    pf = make_plan(tmp_path, stateless=True)
    log = tmp_path / "apply.log"
    r = apply(pf, log)
    assert r.exit_code == 0, r.output
    got = [(step, stage, wave, hosts) for step, stage, wave, hosts, check in log_lines(log)]
    # first the image: both builds (the new one and the rollback target's) are on the boot server
    publish = got.pop(0)
    assert publish[:3] == ("publish", "image build and publish", "none")
    assert [a.rsplit("-", 1)[0] for a in publish[3].split(",")] == [
        "gpu-node-2025.10.1-2025.10-r580", "gpu-node-2026.07.1-2026.07-r580", "mgmt-2025.10.1-2025.10-r580",
        "mgmt-2026.07.1-2026.07-r580"]
    # last the changed files, once every node runs the new set (the final Slurm files among them): deliver.yml
    # and the roles' playbooks (the stand-ins log each run)
    delivered = []
    while got[-1][1] == "deliver configuration":
        delivered.insert(0, got.pop())
    assert delivered and ("deliver", "deliver configuration", "none", "localhost") in delivered
    # before them the group defaults: entry script, the group defaults, train's four pointers removed
    last = got.pop()
    assert last[:3] == ("boot-default", "boot defaults", "none")
    assert last[3].startswith("boot.ipxe,train.ipxe,infer.ipxe,secure.ipxe,") and last[3].endswith(
        ",".join(f"host-52-54-00-20-00-1{i}.ipxe" for i in range(1, 5)))
    transition = ("deliver", "deliver the transition configuration", "none", "localhost")
    assert got.index(transition) == got.index(("control-plane", "control plane and cluster config", "none",
                                               "localhost")) + 1
    got.remove(transition)
    services = [g for g in got if g[1] in ("wave 5", "wave 6")]
    assert services == [("upgrade", "wave 5", "wave_006", "mgmt01,slurmctl01"),
                        ("gates", "wave 5", "wave_006", "mgmt01,slurmctl01"),
                        ("upgrade", "wave 6", "wave_007", "k8sctl01,slurmdbd01"),
                        ("gates", "wave 6", "wave_007", "k8sctl01,slurmdbd01")]
    got = [g for g in got if g not in services]
    assert got == [
        ("snapshot", "prepare", "none", "gpu001,gpu002,gpu003,gpu004,k8sctl01,kgpu01,kgpu02,mgmt01,sgpu01,sgpu02,"
                                        "slurmctl01,slurmdbd01"),
        ("prepare", "prepare", "none", "localhost"),
        ("control-plane", "control plane and cluster config", "none", "localhost"),
        ("upgrade", "canary", "wave_000", "gpu001,gpu003"),
        ("gates", "canary", "wave_000", "gpu001,gpu003"),
        ("smoke", "canary", "wave_000", "gpu001,gpu003"),
        ("rollback", "rollback drill", "wave_000", "gpu001,gpu003"),
        ("gates", "rollback drill", "wave_000", "gpu001,gpu003"),
        ("smoke", "rollback drill", "wave_000", "gpu001,gpu003"),
        ("reapply", "rollback drill", "wave_000", "gpu001,gpu003"),
        # the Kubernetes GPU group's own canary (its driver comes with the image): one of its two nodes
        ("upgrade", "kubernetes infer canary", "wave_002", "kgpu01"),
        ("gates", "kubernetes infer canary", "wave_002", "kgpu01"),
        ("smoke", "kubernetes infer canary", "wave_002", "kgpu01"),
        ("rollback", "kubernetes infer rollback drill", "wave_002", "kgpu01"),
        ("gates", "kubernetes infer rollback drill", "wave_002", "kgpu01"),
        ("smoke", "kubernetes infer rollback drill", "wave_002", "kgpu01"),
        ("reapply", "kubernetes infer rollback drill", "wave_002", "kgpu01"),
        ("upgrade", "wave 1", "wave_001", "gpu002,gpu004"),
        ("gates", "wave 1", "wave_001", "gpu002,gpu004"),
        ("smoke", "wave 1", "wave_001", "gpu002,gpu004"),
        ("upgrade", "wave 2", "wave_003", "kgpu02"),
        ("gates", "wave 2", "wave_003", "kgpu02"),
        ("smoke", "wave 2", "wave_003", "kgpu02"),
        # the tenant secure's two nodes one at a time (upgrade.max_unavailable_pct: 50)
        ("upgrade", "wave 3", "wave_004", "sgpu01"),
        ("gates", "wave 3", "wave_004", "sgpu01"),
        ("smoke", "wave 3", "wave_004", "sgpu01"),
        ("upgrade", "wave 4", "wave_005", "sgpu02"),
        ("gates", "wave 4", "wave_005", "sgpu02"),
        ("smoke", "wave 4", "wave_005", "sgpu02"),
    ]
    assert {line[4] for line in log_lines(log)} == {"check=False"}
    [rec] = records(tmp_path)
    assert rec["status"] == "succeeded" and rec["halted_at"] is None and rec["not_run"] == []
    assert rec["from_set"] == OLD and rec["to_set"] == CURRENT and rec["check"] is False
    runs = rec["runs"]
    ran = [x for x in runs if x["status"] != "skipped"]  # the Kubernetes objects are `pulumi up`'s, recorded as such
    assert len(ran) == len(log_lines(log))
    assert [x["action"] for x in runs if x["status"] == "skipped"] == ["pulumi"]
    assert [(x["stage"], x["action"], x["wave"]) for x in runs][:1] == [("image build and publish", "publish", "")]
    for x in ran:
        assert x["rc"] == 0 and x["status"] == "successful" and x["start"] <= x["end"]
        assert (Path(x["artifact_dir"]) / "stdout").is_file() and (Path(x["artifact_dir"]) / "rc").read_text() == "0"
    assert runs[5]["hosts"] == "gpu[001,003]" and runs[5]["nodes"] == 2
    assert [x["start"] for x in runs] == sorted(x["start"] for x in runs)
    # the rollback point: both definitions and rendered trees copied before anything ran, hashes as in the plan
    plan = json.loads(pf.read_text())
    snap = rec["snapshot"]
    assert rec["rollback_point"] == plan["rollout"]["rollback"]["point"]
    assert rec["rollback_point"]["tree_sha256"] == plan["from"]["tree_sha256"] == snap["from"]["tree_sha256"]
    for side in ("from", "to"):
        folder = Path(snap["dir"]) / side
        assert snap[side]["definition_sha256"] == plan[side]["definition_sha256"]
        assert hashlib.sha256((folder / "definition.yaml").read_bytes()).hexdigest() == plan[side]["definition_sha256"]
        manifest = json.loads((folder / "manifest.json").read_text())
        assert len(manifest) == snap[side]["files"] > 50
        assert all(hashlib.sha256((folder / "tree" / rel).read_bytes()).hexdigest() == h for rel, h in manifest.items())
    # every node's versions, from the facts files snapshot.yml fetched, grouped
    assert snap["versions"] == [{"hosts": "gpu[001-004],k8sctl01,kgpu[01-02],mgmt01,sgpu[01-02],slurmctl01,slurmdbd01", "count": 12,
                                 "versions": {"driver": "570.86.15", "firmware": {}}}]
    assert snap["versions_missing"] == ""
    # smoke results per test and host, in layer order; the storage test only where its node groups are
    smoke = [x for x in runs if x["action"] == "smoke"]
    assert [t["test"] for t in smoke[0]["smoke"]] == ["gpus-visible", "scratch-mounted"]
    assert smoke[0]["smoke"][0] == {"test": "gpus-visible", "layer": "hardware", "ok": "gpu[001,003]", "failed": "",
                                    "skipped": ""}
    wave4 = {t["test"]: t for t in smoke[-1]["smoke"]}
    assert wave4["scratch-mounted"]["ok"] == "" and wave4["scratch-mounted"]["skipped"] == "sgpu02"
    # capacity back in service wave by wave (8 GPUs a node), the rollback drill not counted twice
    assert [(c["stage"], c["nodes"], c["gpus"], c["gpus_returned"]) for c in rec["capacity"]] == [
        ("canary", 2, 16, 16), ("kubernetes infer canary", 1, 8, 24), ("wave 1", 2, 16, 40), ("wave 2", 1, 8, 48),
        ("wave 3", 1, 8, 56), ("wave 4", 1, 8, 64), ("wave 5", 2, 0, 64),
        ("wave 6", 2, 0, 64)]  # the service hosts have no GPUs
    assert "capacity back in service: 2 nodes, 16 GPUs" in r.output


@pytest.mark.slow
def test_first_failing_wave_halts_the_rollout(tmp_path):
    need_ansible_runner()
    pf = make_plan(tmp_path)
    log = tmp_path / "apply.log"
    r = apply(pf, log, "-e", "fail_hosts=gpu004")
    assert r.exit_code == 1, r.output
    assert "halted" in r.output and "wave 1: upgrade wave_001" in r.output and "gpu004" in r.output
    steps = [(step, stage) for step, stage, _, _, _ in log_lines(log)]
    assert steps[-1] == ("upgrade", "wave 1")  # failed there: no gates, and wave 2 never ran
    assert not any(st == "wave 2" for _, st in steps) and ("gates", "wave 1") not in steps
    assert ("reapply", "kubernetes infer rollback drill") in steps  # the Kubernetes canary ran before wave 1
    [rec] = records(tmp_path)
    assert rec["status"] == "failed" and rec["halted_at"] == "wave 1: upgrade wave_001"
    last = rec["runs"][-1]
    assert last["rc"] != 0 and last["failed_hosts"] == ["gpu004"] and "injected failure" in last["failures"][0]
    not_run = [(x["stage"], x["action"]) for x in rec["not_run"]]
    assert not_run[:9] == [
        ("wave 1", "gates"), ("wave 1", "smoke"), ("wave 2", "upgrade"), ("wave 2", "gates"), ("wave 2", "smoke"),
        ("wave 3", "upgrade"), ("wave 3", "gates"), ("wave 3", "smoke"), ("wave 4", "upgrade")]
    # nor the service hosts' waves, the group defaults or the delivery of the changed files
    assert {st for st, _ in not_run[9:]} == {"wave 4", "wave 5", "wave 6", "boot defaults", "deliver configuration"}
    assert [c["stage"] for c in rec["capacity"]] == ["canary", "kubernetes infer canary"]  # wave 1's are not back
    assert all(x["rc"] == 0 for x in rec["runs"][:-1])


@pytest.mark.slow
def test_missing_versions_and_a_failing_smoke_test_halt_the_rollout(tmp_path):
    """No node changes before every node's versions are on record; a smoke test that fails on the
    canary halts it there, with the failing test, its hosts and its exit code in the record."""
    need_ansible_runner()
    pf = make_plan(tmp_path)
    log = tmp_path / "apply.log"
    r = apply(pf, log, "-e", "snapshot_skip_hosts=gpu004,sgpu02")
    assert r.exit_code == 1, r.output
    assert [x[0] for x in log_lines(log)] == ["publish", "snapshot"]  # nothing after it ran
    [rec] = records(tmp_path)
    assert rec["halted_at"] == "prepare: snapshot" and rec["runs"][-1]["failed_hosts"] == ["gpu004", "sgpu02"]
    assert "no versions recorded for 2 host(s)" in rec["runs"][-1]["failures"][-1]
    # every host the rollout touches, the service hosts too (their image is rebuilt for the set): 12 less 2
    assert rec["snapshot"]["versions_missing"] == "gpu004,sgpu02" and rec["snapshot"]["versions"][0]["count"] == 10
    assert rec["capacity"] == []

    Path(rec["private_data_dir"]).rename(tmp_path / "first-run")
    Path(records(tmp_path) and sorted(tmp_path.glob("lab.plan.run-*.json"))[0]).unlink()
    log.unlink()
    (tmp_path / "fail-storage").write_text("")
    r = apply(pf, log)
    assert r.exit_code == 1, r.output
    assert "smoke storage/scratch-mounted: failed gpu[001,003]" in r.output
    [rec] = records(tmp_path)
    assert rec["halted_at"] == "canary: smoke wave_000"
    last = rec["runs"][-1]
    tests = {t["test"]: t for t in last["smoke"]}
    assert tests["gpus-visible"]["ok"] == "gpu[001,003]" and tests["gpus-visible"]["failed"] == ""
    assert tests["scratch-mounted"]["failed"] == "gpu[001,003]"
    assert tests["scratch-mounted"]["first_failure"].startswith(("gpu001: rc 1", "gpu003: rc 1"))
    assert rec["capacity"] == [] and rec["not_run"][0]["stage"] == "rollback drill"


# --------------------------------------------------------------------------- change summary (fast)

def ev(kind: str, host: str, task: str, changed: bool = False, role: str = "", **res) -> dict:
    return {"event": kind, "event_data": {"host": host, "task": task, "role": role, "task_action": "copy",
                                          "res": {"changed": changed, **res}}}


def test_change_summary_folds_thousands_of_hosts_into_tasks_and_groups():
    hosts = [f"gpu{i:04d}" for i in range(1, 2001)]
    s = events.ChangeSummary()
    for h in hosts:
        s.add({"event": "runner_on_start", "event_data": {"host": h, "task": "Install the driver packages"}})
        s.add(ev("runner_on_ok", h, "Install the driver packages", True, role="nvidia_driver",
                 diff=[{"before": "driver 570\n", "after": "driver 580\n", "before_header": "/etc/x",
                        "after_header": "/etc/x"}]))
        s.add(ev("runner_item_on_ok", h, "Pin", True))  # items are summed up by the task's own result
        s.add(ev("runner_on_ok", h, "Pin", h <= "gpu0500", results=[{"changed": h <= "gpu0500", "item": 1}]))
        s.add(ev("runner_on_ok", h, "Read facts", False))
    s.add(ev("runner_on_failed", "gpu0007", "Restart", True, role="nvidia_driver", msg="boom"))
    out = s.to_json(reached=[*hosts, "gpu2001"], failed=["gpu2001"])
    assert [(c["n"], c["task"], c["hosts"], c["count"]) for c in out["changes"]] == [
        (1, "nvidia_driver : Install the driver packages", "gpu[0001-2000]", 2000),
        (2, "Pin", "gpu[0001-0500]", 500),
        (3, "nvidia_driver : Restart", "gpu0007", 1)]
    first = out["changes"][0]
    assert first["diff_host"] == "gpu0001" and "-driver 570" in first["diff"] and "+driver 580" in first["diff"]
    assert "diff" not in out["changes"][1]
    assert out["change_groups"] == [{"hosts": "gpu[0501-2000]", "count": 1500, "tasks": [1]},
                                    {"hosts": "gpu[0001-0006,0008-0500]", "count": 499, "tasks": [1, 2]},
                                    {"hosts": "gpu0007", "count": 1, "tasks": [1, 2, 3]}]
    assert (out["hosts_reached"], out["hosts_changed"], out["hosts_unchanged"]) == (2001, 2000, "")
    quiet = events.ChangeSummary()
    quiet.add(ev("runner_on_ok", "a1", "Read facts"))
    assert quiet.to_json(["a1", "a2"]) == {"hosts_reached": 2, "hosts_changed": 0, "hosts_unchanged": "a[1-2]",
                                           "changes": [], "change_groups": []}


def test_diff_excerpt_is_bounded_and_secrets_are_blanked():
    big = {"before": "".join(f"line {i}\n" for i in range(500)), "after": "", "after_header": "/etc/big"}
    text = events.diff_text([big, {"prepared": "never reached"}])
    assert len(text.splitlines()) == events.DIFF_MAX_LINES + 1 and text.endswith("more lines)")
    assert "never reached" not in text
    assert events.diff_text([{"before": {"state": "absent"}, "after": {"state": "file"}}]).count('"state"') == 2
    assert events.diff_text([{"prepared": "x" * 10000}], max_chars=100).endswith("more lines)")
    s = events.ChangeSummary()
    s.add(ev("runner_on_ok", "n1", "Template", True, diff={"before": "", "after": "password=hunter22\n"}))
    redact = secrets.redactor(secrets.secret_values({"DB_PASSWORD": "hunter22"}))
    assert "hunter22" not in json.dumps(s.to_json(["n1"], redact=redact))


def test_withheld_environment():
    env = {"PATH": "/bin", "HOME": "/root", "LANG": "C", "LC_ALL": "C.UTF-8", "ANSIBLE_FORKS": "50",
           "ANSIBLE_ROLES_PATH": "/r", "ANSIBLE_VAULT_PASSWORD_FILE": "/v", "ANSIBLE_NET_PASSWORD": "p",
           "ANSIBLE_BECOME_PASS": "p", "ANSIBLE_SSH_PASS": "p", "ANSIBLE_SITE_SETTING": "x", "AWX_X": "x",
           "RUNNER_X": "x", "PYTHONSTARTUP": "/s.py", "LC_SECRET": "x", "HTTPS_PROXY": "http://u:p@proxy",
           "NVFWUPD_TARGET": "ip=1,user=u,pw=p", "GITHUB_TOKEN": "t", "MY_VAR": "x"}
    # an explicit list of harmless names: no prefix (ANSIBLE_*, AWX_*, RUNNER_*, PYTHON*, LC_*) passes by itself
    assert secrets.withheld_names(env, ["LANG"]) == [
        "ANSIBLE_BECOME_PASS", "ANSIBLE_NET_PASSWORD", "ANSIBLE_SITE_SETTING", "ANSIBLE_SSH_PASS",
        "ANSIBLE_VAULT_PASSWORD_FILE", "AWX_X", "GITHUB_TOKEN", "HTTPS_PROXY", "LANG", "LC_SECRET", "MY_VAR",
        "NVFWUPD_TARGET", "PYTHONSTARTUP", "RUNNER_X"]
    assert secrets.looks_like_credential("ANSIBLE_BECOME_PASS") and secrets.looks_like_credential("SSH_PASS_X")
    assert not secrets.looks_like_credential("PASSENGER_COUNT") and not secrets.looks_like_credential("BYPASS")
    assert secrets.secret_values({"GITHUB_TOKEN": "abcd1234", "OTHER": "zzzz", "X_TOKEN": "true", "Y": "yyyyyyyyy"},
                                 ["OTHER"]) == ["abcd1234", "zzzz"]


def test_env_pipe_hands_values_to_the_program_only(tmp_path):
    env = {**os.environ, "CLUSTERDEF_PIPE_TEST": secrets.WITHHELD, "CLUSTERDEF_PIPE_KEPT": "set by runner"}
    with secrets.EnvPipe({"CLUSTERDEF_PIPE_TEST": "the value", "CLUSTERDEF_PIPE_KEPT": "not this"}) as pipe:
        assert not Path(pipe.path).is_file()  # a FIFO: no data on disk
        out = subprocess.run([sys.executable, "-m", "clusterdef.apply.secrets", "--env-from", pipe.path, "--",
                              sys.executable, "-c", "import os; print(os.environ['CLUSTERDEF_PIPE_TEST'], '|', "
                              "os.environ['CLUSTERDEF_PIPE_KEPT'])"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert out.stdout.strip() == "the value | set by runner", out.stderr
    assert not Path(pipe.dir).exists()
    unread = secrets.EnvPipe({"A": "b" * 200000})  # nobody reads it: close() must not hang
    unread.close()
    assert not Path(unread.dir).exists()


def test_change_table_stays_small():
    changes = {"hosts_reached": 4000, "hosts_changed": 3990, "hosts_unchanged": "gpu[3991-4000]",
               "changes": [{"n": n, "task": f"role : task {n}", "count": 2000,
                            "hosts": events.fold(f"gpu{i:04d}" for i in range(1, 4000, 2))} for n in range(1, 31)],
               "change_groups": [{"hosts": f"n{g:03d}", "count": 1, "tasks": [1, 2, 3, 5]} for g in range(1, 21)]}
    console = Console(record=True, width=120)
    print_changes(console, changes, check=True)
    text = console.export_text()
    assert "would change: 30 tasks on 3990 of 4000 hosts" in text
    assert "role : task 10 " in text and "role : task 11 " not in text and "... and 20 more tasks" in text
    assert re.search(r"gpu\[0001,0003,0005,0007,0009,0011,0013,0015,\.\.\.\]\s+2000/4000", text)
    assert re.search(r"n001\s+4 tasks would change \(#1-3,5\)", text)
    assert "... and 12 more host groups" in text and "n009" not in text
    assert re.search(r"gpu\[3991-4000\]\s+nothing would change", text)
    assert len(text.splitlines()) < 30 and max(len(line) for line in text.splitlines()) <= 120
    assert short_hosts("gpu[0001,0003,0005,0007,0009,0011,0013,0015,0017,0019]", 30) == \
        "gpu[0001,0003,0005,0007,0009,...]"
    assert short_hosts("a1,b[1-2],c3,d4,e5", 10) == "a1,b[1-2],..."
    console = Console(record=True, width=120)
    print_changes(console, {"hosts_reached": 2, "hosts_changed": 0, "hosts_unchanged": "a[1-2]", "changes": [],
                             "change_groups": []}, check=False)
    assert console.export_text().strip() == "nothing changed on 2 hosts"


def test_secret_options_are_checked_before_anything_runs(tmp_path, monkeypatch):
    pf = make_plan(tmp_path)
    log = tmp_path / "apply.log"
    monkeypatch.delenv("CLUSTERDEF_NOT_SET", raising=False)
    before = listing(tmp_path)
    r = apply(pf, log, "--secret-env", "CLUSTERDEF_NOT_SET", "--check")
    assert r.exit_code == 2 and "--secret-env CLUSTERDEF_NOT_SET: not set" in r.output
    r = apply(pf, log, "--secret-env", "pw=hunter2")
    assert r.exit_code == 2 and "name of an environment variable" in r.output
    r = apply(pf, log, "--vault-id", "prod@prompt")
    assert r.exit_code == 2 and "prompt" in r.output
    r = apply(pf, log, "--vault-id", str(tmp_path / "missing"))
    assert r.exit_code == 2 and "no such file" in r.output
    monkeypatch.setenv("CLUSTERDEF_TEST_SECRET", "abcd-1234-efgh")
    r = apply(pf, log, "--secret-env", "CLUSTERDEF_TEST_SECRET", "-e", "bmc=user:abcd-1234-efgh")
    assert r.exit_code == 2 and "-e bmc: the value holds a secret" in r.output and "abcd-1234" not in r.output
    r = apply(pf, log, "-e", "api_token=x", "--skip-stage", "wave")
    assert r.exit_code == 2 and "warning" in r.output and "-e api_token: extra vars are recorded" in r.output
    for key in ("ansible_become_pass", "ansible_become_password", "ansible_password", "ANSIBLE_SSH_PASS",
                "ansible_sudo_pass", "db_password", "become_pass"):
        r = apply(pf, log, "-e", f"{key}=x")
        out = " ".join(r.output.split())
        assert r.exit_code == 2 and f"-e {key}: a password as an extra var is recorded" in out, out
        assert "--secret-env" in out
    assert listing(tmp_path) == before


# --------------------------------------------------------------------------- change summary and secrets (real runs)

def canary_plan(tmp: Path) -> tuple[Path, Path]:
    """A canary-only candidate plan, and the stand-in driver's state folder with gpu003 already
    at the driver the stand-in installs (so only gpu001 has something to change)."""
    need_ansible_runner()
    state = tmp / "state"
    state.mkdir()
    (state / "gpu003.driver").write_text("driver 580.95.05\n")
    return make_plan(tmp, CURRENT, CANDIDATE, "--allow-candidate"), state


@pytest.mark.slow
def test_check_mode_previews_a_canary_only_plan_and_shows_which_tasks_would_change(tmp_path):
    """One check-mode run of a canary-only candidate plan (one apply: each costs about 17 playbook runs):
    the steps it would run, ansible_check_mode and --forks in every run, smoke tests recorded as skipped,
    and which tasks would change on which hosts."""
    pf, state = canary_plan(tmp_path)
    log = tmp_path / "apply.log"
    r = apply(pf, log, "--check", "--forks", "7", "-e", f"apply_state_dir={state}", "-e", "apply_hold_hosts=gpu001")
    assert r.exit_code == 0, r.output
    lines = log_lines(log)
    assert [(x[0], x[2]) for x in lines] == [("publish", "none"), ("snapshot", "none"), ("prepare", "none"),
                                             ("upgrade", "wave_000"), ("gates", "wave_000"), ("smoke", "wave_000"),
                                             ("rollback", "wave_000"), ("gates", "wave_000"), ("smoke", "wave_000"),
                                             ("reapply", "wave_000"),
                                             # the Kubernetes GPU group's canary (kgpu01 of wave_002) and drill
                                             ("upgrade", "wave_002"), ("gates", "wave_002"), ("smoke", "wave_002"),
                                             ("rollback", "wave_002"), ("gates", "wave_002"), ("smoke", "wave_002"),
                                             ("reapply", "wave_002")]
    assert {x[4] for x in lines} == {"check=True"}  # ansible_check_mode was on in every run
    assert sorted(p.name for p in state.iterdir()) == ["gpu003.driver"]  # check mode wrote nothing
    [rec] = records(tmp_path)
    assert rec["check"] is True and rec["status"] == "succeeded"
    cmd = json.loads((Path(run_of(rec, "canary", "upgrade")["artifact_dir"]) / "command").read_text())["command"]
    assert "--check" in cmd and "--diff" in cmd
    assert cmd[cmd.index("--forks") + 1] == "7" and rec["forks"] == 7  # --forks reaches every ansible-playbook run
    # smoke tests do not run in check mode: recorded as skipped
    assert {t["test"]: t["skipped"] for t in run_of(rec, "canary", "smoke")["smoke"]} == {
        "gpus-visible": "gpu[001,003]", "scratch-mounted": "gpu[001,003]"}
    canary, gates = run_of(rec, "canary", "upgrade"), run_of(rec, "canary", "gates")
    assert (canary["action"], canary["hosts"]) == ("upgrade", "gpu[001,003]")
    assert [(c["n"], c["task"], c["hosts"], c["count"]) for c in canary["changes"]] == [
        (1, "standin_driver : Install the driver packages", "gpu001", 1),
        (2, "standin_driver : Hold the driver packages", "gpu001", 1)]
    assert "+driver 580.95.05" in canary["changes"][0]["diff"] and canary["changes"][0]["diff_host"] == "gpu001"
    assert canary["change_groups"] == [{"hosts": "gpu001", "count": 1, "tasks": [1, 2]}]
    assert (canary["hosts_reached"], canary["hosts_changed"], canary["hosts_unchanged"]) == (2, 1, "gpu003")
    assert gates["changes"] == [] and gates["hosts_unchanged"] == "gpu[001,003]"
    assert run_of(rec, "rollback drill", "reapply")["changes"] == canary["changes"]
    out = r.output
    assert "would change: 2 tasks on 1 of 2 hosts" in out
    assert re.search(r"1\s+standin_driver : Install the driver packages\s+gpu001\s+1/2", out)
    assert re.search(r"2\s+standin_driver : Hold the driver packages\s+gpu001\s+1/2", out)
    assert re.search(r"gpu001\s+2 tasks would change \(#1-2\)", out)
    assert re.search(r"gpu003\s+nothing would change", out)
    assert "nothing would change on 2 hosts" in out  # the gates


@pytest.mark.slow
def test_real_run_shows_what_changed_and_reapply_is_idempotent(tmp_path):
    pf, state = canary_plan(tmp_path)
    r = apply(pf, tmp_path / "apply.log", "-e", f"apply_state_dir={state}", "-e", "apply_hold_hosts=gpu003")
    assert r.exit_code == 0, r.output
    assert (state / "gpu001.driver").read_text() == "driver 580.95.05\n"
    [rec] = records(tmp_path)
    canary, reapply = run_of(rec, "canary", "upgrade"), run_of(rec, "rollback drill", "reapply")
    assert [(c["task"], c["hosts"]) for c in canary["changes"]] == [
        ("standin_driver : Install the driver packages", "gpu001"), ("standin_driver : Hold the driver packages",
                                                                     "gpu003")]
    assert "diff" not in canary["changes"][0]  # no --diff outside check mode
    assert canary["change_groups"] == [{"hosts": "gpu001", "count": 1, "tasks": [1]},
                                       {"hosts": "gpu003", "count": 1, "tasks": [2]}]
    assert canary["hosts_unchanged"] == ""
    assert reapply["action"] == "reapply"
    assert [(c["task"], c["hosts"]) for c in reapply["changes"]] == [("standin_driver : Hold the driver packages",
                                                                      "gpu003")]
    assert reapply["hosts_unchanged"] == "gpu001"
    out = r.output
    assert "changed: 2 tasks on 2 of 2 hosts" in out and "would change" not in out
    assert re.search(r"gpu001\s+1 task changed \(#1\)", out) and re.search(r"gpu003\s+1 task changed \(#2\)", out)
    assert "changed: 1 task on 1 of 2 hosts" in out and re.search(r"gpu001\s+no change", out)
    assert "nothing changed on 2 hosts" in out


def vault_file(path: Path, password: str, text: str) -> None:
    from ansible.parsing.vault import VaultLib, VaultSecret

    path.write_bytes(VaultLib([("test", VaultSecret(password.encode()))]).encrypt(text, vault_id="test"))


@pytest.mark.slow
def test_secrets_reach_the_playbook_and_never_the_disk(tmp_path, monkeypatch):
    need_ansible_runner()
    plan_dir, keys = tmp_path / "plan", tmp_path / "keys"
    plan_dir.mkdir(), keys.mkdir(mode=0o700)
    tag = uuid.uuid4().hex
    values = {"CLUSTERDEF_TEST_SECRET": f"named-{tag}",          # --secret-env
              "CLUSTERDEF_TEST_API_TOKEN": f"token-{tag}",        # looks like a credential, not named
              "CLUSTERDEF_TEST_PROXY": f"http://u:pw-{tag}@proxy:3128",  # looks like nothing in particular
              # Ansible's own credential variables, and an ANSIBLE_* setting nobody listed as harmless
              "ANSIBLE_BECOME_PASS": f"become-{tag}", "ANSIBLE_BECOME_PASSWORD": f"becomepw-{tag}",
              "ANSIBLE_PASSWORD": f"connpw-{tag}", "ANSIBLE_SSH_PASS": f"sshpw-{tag}",
              "ANSIBLE_CLUSTERDEF_TEST_SETTING": f"setting-{tag}"}
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    local_temp = tmp_path / f"ansible-local-{tag}"  # a harmless Ansible setting: recorded
    monkeypatch.setenv("ANSIBLE_LOCAL_TEMP", str(local_temp))
    vault_password, vaulted, env_vault_password = f"vaultpw-{tag}", f"vaulted-{tag}", f"envvault-{tag}"
    (keys / "vault-pass").write_text(vault_password + "\n")
    (keys / "env-vault-pass").write_text(env_vault_password + "\n")  # the file's name is no secret, its contents are
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(keys / "env-vault-pass"))
    vault_file(plan_dir / "secrets.vault.yml", vault_password, f"vaulted_secret: {vaulted}\n")
    pf, _ = canary_plan(plan_dir)
    slog = plan_dir / "secrets.log"
    r = apply(pf, plan_dir / "apply.log", "--secret-env", "CLUSTERDEF_TEST_SECRET",
              "--vault-id", f"test@{keys / 'vault-pass'}", "-e", f"apply_vault_file={plan_dir / 'secrets.vault.yml'}",
              "-e", f"apply_secret_log={slog}", "-e", f"apply_secret_names={','.join(values)},vault")
    assert r.exit_code == 0, r.output
    assert "secret environment, values recorded nowhere: CLUSTERDEF_TEST_SECRET" in r.output
    # every value reached ansible-playbook: the playbook logged its sha256 (upgrade and reapply)
    sha = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in [*values.items(), ("vault", vaulted)]}
    lines = sorted(slog.read_text().splitlines())
    assert lines == sorted(f"{step} {wave} {k} {h}" for step in ("upgrade", "reapply")
                           for wave in ("wave_000", "wave_002") for k, h in sha.items())
    # ... and no value is in any file apply, ansible-runner or Ansible wrote: the plan folder (private data
    # dir, run record, logs) and Ansible's local temp folder; only keys/ holds the password files themselves
    secret_texts = [*values.values(), vaulted, vault_password, env_vault_password]
    seen_plain = scanned = 0
    for f in tmp_path.rglob("*"):
        if f.is_file() and keys not in f.parents:
            data = f.read_bytes()
            assert not [s for s in secret_texts if s.encode() in data], f
            seen_plain += str(local_temp).encode() in data
            scanned += 1
    assert seen_plain and scanned > 20  # the scan does see the recorded environment
    [rec] = records(plan_dir)
    assert rec["secret_env"] == ["CLUSTERDEF_TEST_SECRET"] and rec["vault_ids"] == [f"test@{keys / 'vault-pass'}"]
    assert rec["extravars"]["apply_secret_names"].startswith("CLUSTERDEF_TEST_SECRET")  # -e values are recorded
    pdd = Path(rec["private_data_dir"])
    assert not (pdd / "env").exists()  # no env/envvars, env/extravars, env/cmdline
    command = json.loads((Path(rec["runs"][1]["artifact_dir"]) / "command").read_text())
    assert all(command["env"][k] == secrets.WITHHELD for k in [*values, "ANSIBLE_VAULT_PASSWORD_FILE"])
    assert command["env"]["ANSIBLE_LOCAL_TEMP"] == str(local_temp)
    argv = command["command"]
    assert argv[1:5] == ["-P", "-m", "clusterdef.apply.secrets", "--env-from"] and "--vault-id" in argv
    assert not Path(argv[5]).parent.exists()  # the pipe's folder is gone


def test_smoke_results_are_per_test_and_host_and_node_output_is_tamed():
    res = events.SmokeResults()

    def item(kind, host, name, **res_):
        return {"event": kind, "event_data": {"host": host, "task": events.SMOKE_TASK,
                                              "res": {"item": {"name": name, "layer": "rdma"}, **res_}}}

    for i in range(1, 2001):
        res.add(item("runner_item_on_ok", f"gpu{i:04d}", "hca-ports"))
    res.add(item("runner_item_on_failed", "gpu0002", "ib-bw", rc=3,
                 stderr="\x1b[31mport 1 DOWN\x1b[0m\n" + "x" * 100_000 + "\u202eevil"))
    res.add(item("runner_item_on_failed", "gpu0003", "ib-bw", rc=4, stderr="second"))
    res.add({"event": "runner_item_on_ok", "event_data": {"host": "gpu0001", "task": "other task",
                                                          "res": {"item": {"name": "not-smoke"}}}})
    out = res.to_json()
    assert [t["test"] for t in out] == ["hca-ports", "ib-bw"]
    assert out[0] == {"test": "hca-ports", "layer": "rdma", "ok": "gpu[0001-2000]", "failed": "", "skipped": ""}
    fail = out[1]["first_failure"]
    assert fail.startswith("gpu0002: rc 3: ") and len(fail) < 300 and out[1]["failed"] == "gpu[0002-0003]"
    assert all(0x20 <= ord(c) < 0x7f for c in fail) and "evil" in fail


def test_versions_snapshot_groups_hosts_and_names_the_missing(tmp_path):
    from clusterdef.apply import snapshot

    for h in ("gpu001", "gpu002"):
        (tmp_path / f"{h}.json").write_text(json.dumps({"host": h, "versions": {"driver": "580.95.05", "firmware": {}}}))
    (tmp_path / "gpu003.json").write_text(json.dumps({"host": "gpu003", "versions": {"driver": "570", "firmware": {}}}))
    (tmp_path / "gpu004.json").write_text("{not json")                                   # broken: missing
    (tmp_path / "gpu005.json").write_text(json.dumps({"host": "gpu001", "versions": {}}))  # another host's: missing
    (tmp_path / "gpu006.json").write_text("[" * 100_000)                                 # hostile nesting: missing
    groups, missing = snapshot.versions(tmp_path, [f"gpu00{i}" for i in range(1, 8)])
    assert groups == [{"hosts": "gpu[001-002]", "count": 2, "versions": {"driver": "580.95.05", "firmware": {}}},
                      {"hosts": "gpu003", "count": 1, "versions": {"driver": "570", "firmware": {}}}]
    assert missing == ["gpu004", "gpu005", "gpu006", "gpu007"]


# --------------------------------------------------------------------------- lock and resumption

def _hold_lock(tmp: Path) -> subprocess.Popen:
    """Another process holding the lab's apply lock in `tmp` (as a running apply does)."""
    code = ("import sys, time; from clusterdef.apply.lock import acquire; "
            "acquire(sys.argv[1], 'lab', 'other.plan.json'); print('held', flush=True); time.sleep(600)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_apply_is_refused_and_a_killed_holders_lock_is_released(tmp_path):
    from clusterdef.apply import lock

    pf = make_plan(tmp_path)
    holder = _hold_lock(tmp_path)
    try:
        r = apply(pf, tmp_path / "apply.log")
        assert r.exit_code == 2, r.output
        assert "another clusterdef apply of this cluster is running" in r.output and f"pid {holder.pid}" in r.output
        assert "other.plan.json" in r.output and "Traceback" not in r.output
        assert not records(tmp_path) and not list(tmp_path.glob("*.apply-*"))  # nothing written, nothing run
        with pytest.raises(lock.LockHeld):
            lock.acquire(tmp_path, "lab")
    finally:
        holder.kill()  # SIGKILL: no cleanup runs in the holder
        holder.wait()
    # the kernel dropped the dead holder's flock: the lock is free again, though its file is still there
    assert lock.lock_path(tmp_path, "lab").exists()
    with lock.acquire(tmp_path, "lab", pf) as held:
        assert lock.read_holder(held.path)["pid"] == str(os.getpid())
    with lock.acquire(tmp_path, "lab") as again:  # released on exit from the block: taken again here
        assert lock.read_holder(again.path)["pid"] == str(os.getpid())


def _stub_runner(fail_at: set[int], calls: list[str]):
    """A stand-in for runner.run_playbook: every host reached; the steps whose ident starts with a number
    in `fail_at` fail."""
    from clusterdef.apply.runner import RunResult

    def run(pdd, playbook, inventory, extravars, check=False, limit=None, ident="", **_):
        calls.append(ident)
        failed = int(ident.split("-", 1)[0]) in fail_at
        hosts = {h: 1 for h in ("gpu001", "gpu002", "gpu003", "gpu004", "kgpu01", "kgpu02", "sgpu01", "sgpu02",
                                "mgmt01", "slurmctl01", "slurmdbd01", "k8sctl01", "localhost")}
        return RunResult(rc=2 if failed else 0, status="failed" if failed else "successful", artifact_dir="",
                         stats={"processed": hosts})
    return run


def test_resume_continues_at_the_first_unfinished_step_and_refuses_another_run(tmp_path):
    """Pure resumption (a stub runner): a halted run continues at its failed step, earlier steps are not run
    again, a second resumption says it is complete, and a run of another plan or definition is refused."""
    from clusterdef.apply import record as rec_mod
    from clusterdef.apply.session import options, start

    pf = make_plan(tmp_path)
    opts = options(pf, None, None, None, FIXTURES, [], [], [], [], True, None)
    s = start(opts, None, None, None, MATRICES, TODAY)
    calls: list[str] = []
    fail_at = next(i for i, st in enumerate(s.prep.steps) if st.stage == "wave 1")
    try:
        first = rec_mod.execute(s.prep.steps, s.private_data_dir, s.inventory, s.record_path, s.header, s.extra,
                                True, run=_stub_runner({fail_at}, calls))
    finally:
        s.close()
    assert first["status"] == "failed" and first["halted_at"] == s.prep.steps[fail_at].label
    journal = [json.loads(x) for x in rec_mod.journal_path(s.record_path).read_text().splitlines()]
    assert [(e["index"], e["event"]) for e in journal[-2:]] == [(fail_at, "start"), (fail_at, "end")]
    ran_before = len(calls)

    r = start(opts, None, None, None, MATRICES, TODAY, s.record_path)
    try:
        assert r.first == fail_at and not r.complete and r.private_data_dir == s.private_data_dir
        done = rec_mod.execute(r.prep.steps, r.private_data_dir, r.inventory, r.record_path, r.header, r.extra, True,
                               run=_stub_runner(set(), calls), resume=r.resumed)
    finally:
        r.close()
    assert done["status"] == "succeeded" and [x["index"] for x in done["runs"]] == list(range(len(r.prep.steps)))
    # the resumption ran the failed step and what follows it, never the steps before it
    assert [int(c.split("-", 1)[0]) for c in calls[ran_before:]][0] == fail_at
    assert all(int(c.split("-", 1)[0]) >= fail_at for c in calls[ran_before:])
    assert [a["status"] for a in done["attempts"]] == ["failed"] and done["resumed"][0]["from_step"] == fail_at + 1
    assert json.loads(s.record_path.read_text()) == done  # the file is the state

    again = start(opts, None, None, None, MATRICES, TODAY, s.record_path)
    again.close()
    assert again.complete
    # killed after its last step ended but before the record was closed: resumed, nothing runs, closed
    s.record_path.write_text(json.dumps({**done, "status": "running", "finished": None}))
    last = start(opts, None, None, None, MATRICES, TODAY, s.record_path)
    try:
        assert not last.complete and last.first == len(last.prep.steps)
        closed = rec_mod.execute(last.prep.steps, last.private_data_dir, last.inventory, last.record_path,
                                 last.header, last.extra, True, run=_stub_runner(set(), calls), resume=last.resumed)
    finally:
        last.close()
    assert closed["status"] == "succeeded" and len(closed["runs"]) == len(last.prep.steps)

    # the definitions changed and were planned again: the plan file is fresh, the run is not this plan's
    new = tmp_path / "new.yaml"
    new.write_text(new.read_text().replace("wave_size: 2", "wave_size: 1"))
    r2 = runner.invoke(app, ["plan", "--from", str(tmp_path / "old.yaml"), "--to", str(new), "-m", str(MATRICES),
                             "--today", DAY, "-f", "json", "--plan-file", str(pf)])
    assert r2.exit_code == 0, r2.output
    with pytest.raises(ApplyError) as exc:
        start(opts, None, None, None, MATRICES, TODAY, s.record_path)
    why = "\n".join(exc.value.reasons)
    assert "the plan changed since the run started" in why and "the to definition changed" in why
    assert "the to rendered tree changed" in why
    with lock_free(tmp_path) as free:  # a refusal leaves the lock free: acquire would raise LockHeld
        assert free.path.name == "lab.apply.lock"


def lock_free(tmp: Path):
    from clusterdef.apply import lock

    return lock.acquire(tmp, "lab")


def test_resume_without_a_run_or_with_a_bad_one_is_refused(tmp_path):
    pf = make_plan(tmp_path)
    before = listing(tmp_path)
    r = apply(pf, tmp_path / "apply.log", "--resume")
    assert r.exit_code == 2 and "no run of" in r.output and "Traceback" not in r.output
    r = apply(pf, tmp_path / "apply.log", "--run", str(pf))
    assert r.exit_code == 2 and "give --resume" in r.output
    r = apply(pf, tmp_path / "apply.log", "--resume", "--run", str(pf))  # a plan file is no run record
    assert r.exit_code == 2 and "not a run record" in r.output and "Traceback" not in r.output
    assert listing(tmp_path) == before


def _apply_process(pf: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "clusterdef", "apply", str(pf), "-m", str(MATRICES), "--today",
                             DAY, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


@pytest.mark.slow
def test_resume_after_a_failed_step_and_after_the_apply_was_killed(tmp_path):
    """A real apply halts at a failing step; `--resume` (its options taken from the record) continues there;
    killed with SIGKILL in the middle of a step, the run is resumed by a new process (the dead one's lock
    gone) and completes; while it runs a second apply is refused; once complete, a resumption says so."""
    import signal
    import time

    need_ansible_runner()
    pf = make_plan(tmp_path, CURRENT, CANDIDATE, "--allow-candidate")  # canary only: few steps
    log, fail, hold = tmp_path / "apply.log", tmp_path / "fail", tmp_path / "hold"
    fail.write_text("")
    r = apply(pf, log, "-e", f"apply_fail_file={fail}", "-e", f"apply_hold_file={hold}")
    assert r.exit_code == 1, r.output
    assert "halted" in r.output and "canary: upgrade wave_000" in r.output and "--resume" in r.output
    [halted] = records(tmp_path)
    assert halted["status"] == "failed" and halted["runs"][-1]["status"] == "failed"
    artifacts = Path(halted["private_data_dir"]) / "artifacts"

    fail.unlink()
    hold.write_text("")
    proc = _apply_process(pf, "--resume")  # no options: the run's own (playbooks, -e ...)
    try:
        deadline = time.monotonic() + 180
        while not Path(f"{hold}.reached").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() else ""
            time.sleep(0.2)
        [rec] = records(tmp_path)  # written when the step started, before it finished
        assert rec["status"] == "running" and rec["runs"][-1]["label"] == "canary: upgrade wave_000"
        assert rec["runs"][-1]["status"] == "running" and rec["runs"][-1]["pid"] == proc.pid
        second = apply(pf, log, "-e", f"apply_fail_file={fail}", "-e", f"apply_hold_file={hold}")
        assert second.exit_code == 2 and f"pid {proc.pid}" in second.output, second.output
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    hold.unlink()
    time.sleep(1)  # an orphaned playbook run, if any, sees the hold file gone and ends
    r = apply(pf, log, "--resume")
    assert r.exit_code == 0, r.output
    assert "resuming" in r.output and "(running) at step 4/" in r.output
    [rec] = records(tmp_path)
    assert rec["status"] == "succeeded"
    assert [x["index"] for x in rec["runs"]] == list(range(len(rec["runs"])))
    assert [(a["label"], a["status"]) for a in rec["attempts"]] == [
        ("canary: upgrade wave_000", "failed"), ("canary: upgrade wave_000", "running")]
    # publish, snapshot and prepare ran once (their records are the first run's); the canary's upgrade three
    # times: failed, killed, done (one ansible-runner artifact folder per run)
    assert rec["runs"][:3] == halted["runs"][:3]
    ran = sorted(p.name for p in artifacts.iterdir())
    assert [n for n in ran if n.startswith(("00-", "01-", "02-"))] == [
        "00-image-build-and-publish-publish-all", "01-prepare-snapshot-all", "02-prepare-prepare-all"]
    assert [n for n in ran if n.startswith("03-")] == ["03-canary-upgrade-wave_000", "03-canary-upgrade-wave_000-r2",
                                                       "03-canary-upgrade-wave_000-r3"]
    assert all(n.endswith("-r3") for n in ran if n[:2].isdigit() and int(n[:2]) > 3)
    r = apply(pf, log, "--resume")
    assert r.exit_code == 0 and "already complete" in r.output
    assert sorted(p.name for p in artifacts.iterdir()) == ran  # nothing ran
