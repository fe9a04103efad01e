"""A plan file is data: `apply` re-derives the plan from the two definitions and refuses a plan
file that differs in any stage, host, set, gate or the refused flag, a file whose structure is
wrong (naming the field), and one whose `plan_sha256` does not match its document. Every
forgery is also tried re-sealed (the forger recomputes the hash), so the re-derivation alone
must catch it. Nothing runs: no run record, no private data dir, no playbook log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdef.apply.prepare import prepare
from clusterdef.plan.planfile import HASH_FIELD, plan_hash, seal
from conftest import MATRICES, TODAY
from test_apply import CANDIDATE, CURRENT, DAY, FIXTURES, OLD, app, apply, lab, make_plan, records, runner


def forge(pf: Path, edit, reseal: bool = True) -> Path:
    doc = json.loads(pf.read_text())
    edit(doc)
    pf.write_text(json.dumps(seal({k: v for k, v in doc.items() if k != HASH_FIELD}) if reseal else doc))
    return pf


def refused(tmp: Path, pf: Path, *expected: str) -> str:
    log = tmp / "apply.log"
    r = apply(pf, log)
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())  # rich wraps long lines
    for e in expected:
        assert e in out, out
    assert "Traceback" not in r.output
    assert not log.exists() and not records(tmp) and not list(tmp.glob("*.apply-*"))
    return out


def stage(doc: dict, name: str) -> dict:
    return next(s for s in doc["rollout"]["stages"] if s["name"] == name)


def test_untouched_plan_is_accepted_and_steps_come_from_the_definitions(tmp_path):
    pf = make_plan(tmp_path)
    doc = json.loads(pf.read_text())
    assert doc[HASH_FIELD] == plan_hash(doc)
    prep = prepare(pf, None, None, None, MATRICES, TODAY, FIXTURES)
    assert prep.doc == doc
    assert [(s.stage, s.action) for s in prep.steps][:6] == [("image build and publish", "publish"),
                                                            ("prepare", "snapshot"), ("prepare", "prepare"),
                                                            ("canary", "upgrade"), ("canary", "gates"),
                                                            ("canary", "smoke")]


def test_flipped_refused_flag_is_refused(tmp_path):
    lab(tmp_path, CURRENT, "old.yaml"), lab(tmp_path, OLD, "new.yaml")  # a downgrade: plan refuses it
    r = runner.invoke(app, ["plan", "--from", str(tmp_path / "old.yaml"), "--to", str(tmp_path / "new.yaml"),
                            "-m", str(MATRICES), "--today", DAY, "-f", "json"])
    assert r.exit_code == 2 and not list(tmp_path.glob("*.json"))
    doc = json.loads(r.stdout)
    assert doc["refused"] is True
    pf = tmp_path / "lab.plan.json"
    pf.write_text(json.dumps(doc))
    forge(pf, lambda d: d.update(refused=False, refusals=[]))
    out = refused(tmp_path, pf, "these definitions give a refused plan", "downgrade",
                  "refused: the plan file says false, the definitions give true", "refusals")
    assert "plan_sha256" not in out  # re-sealed: the re-derivation alone caught it


@pytest.mark.parametrize("reseal", [True, False])
def test_deleted_canary_stage_is_refused(tmp_path, reseal):
    pf = forge(make_plan(tmp_path), lambda d: d["rollout"]["stages"].remove(stage(d, "canary")), reseal)
    out = refused(tmp_path, pf, 'rollout.stages["canary"]: missing from the plan file')
    assert ("plan_sha256: does not match the plan document" in out) is not reseal


def test_deleted_rollback_drill_is_refused(tmp_path):
    def edit(d):
        d["rollout"]["stages"].remove(stage(d, "rollback drill"))
        d["rollout"]["rollback"]["exercised_on_canary"] = False
    refused(tmp_path, forge(make_plan(tmp_path), edit), 'rollout.stages["rollback drill"]: missing from the plan file',
            "rollout.rollback.exercised_on_canary: the plan file says false, the definitions give true")


def test_waves_pasted_into_a_canary_only_plan_are_refused(tmp_path):
    (tmp_path / "full").mkdir()
    full = json.loads(make_plan(tmp_path / "full").read_text())
    pf = make_plan(tmp_path, CURRENT, CANDIDATE, "--allow-candidate")
    waves = [s for s in full["rollout"]["stages"] if s["kind"] in ("control-plane", "wave")]

    def edit(d):
        d["rollout"]["stages"] += waves
        d.update(canary_only=False)
        d["rollout"].update(waves=len(waves) - 1, waves_withheld=0)
    refused(tmp_path, forge(pf, edit), "the plan file says false, the definitions give true",
            'rollout.stages["wave 1"]: in the plan file, not in the plan the definitions give',
            'rollout.stages["control plane and cluster config"]: in the plan file')


@pytest.mark.parametrize("what,edit,expected", [
    ("a host in a wave", lambda d: stage(d, "wave 1").update(hosts="gpu[002-003]"),
     'rollout.stages["wave 1"].hosts: the plan file says "gpu[002-003]", the definitions give "gpu[002,004]"'),
    ("the target set", lambda d: d["to"].update(set=CANDIDATE),
     f'to.set: the plan file says "{CANDIDATE}", the definitions give "{CURRENT}"'),
    ("a gate", lambda d: stage(d, "canary")["gates"].__setitem__(2, "NCCL: skipped"),
     'rollout.stages["canary"].gates[2]: the plan file says "NCCL: skipped"'),
    ("a gate removed", lambda d: stage(d, "wave 2")["gates"].pop(),
     'rollout.stages["wave 2"].gates: the plan file says'),
    ("the stage order", lambda d: d["rollout"]["stages"].reverse(), "rollout.stages: in a different order"),
    ("a wave's step", lambda d: stage(d, "wave 1")["steps"].__setitem__(0, "rm -rf /"),
     'rollout.stages["wave 1"].steps[0]: the plan file says "rm -rf /"'),
])
def test_edited_plan_contents_are_refused(tmp_path, what, edit, expected):
    refused(tmp_path, forge(make_plan(tmp_path), edit), expected)


@pytest.mark.parametrize("edit,expected", [
    (lambda d: d["rollout"].pop("canary"), "not a valid plan file: rollout.canary: missing"),
    (lambda d: d["to"].pop("tree_sha256"), "not a valid plan file: to.tree_sha256: missing"),
    (lambda d: d.pop(HASH_FIELD), "not a valid plan file: plan_sha256: missing"),
    (lambda d: d.update(refused="no"), 'not a valid plan file: refused: must be boolean, not "no"'),
    (lambda d: d["rollout"]["stages"][1].update(hosts=["gpu001"]),
     'not a valid plan file: rollout.stages[1].hosts: must be string, not ["gpu001"]'),
    (lambda d: d["rollout"]["stages"][1].update(kind="shell"),
     'rollout.stages[1].kind: must be one of ["image", "prepare", "canary", "rollback-drill", "control-plane", '
     '"wave", "boot-..., not "shell"'),
    (lambda d: d.update(plan_format=2), "plan_format: unknown version 2 (this clusterdef reads 1)"),
    (lambda d: d["from"].update(definition_sha256="x"), "from.definition_sha256: must be a sha256"),
    (lambda d: d.update({"evil\x1b[31m": 1}), r'"evil\u001b[31m": unknown field'),
])
def test_malformed_plan_files_name_the_field(tmp_path, edit, expected):
    out = refused(tmp_path, forge(make_plan(tmp_path), edit, reseal=False), expected)
    assert "\x1b" not in out


def test_truncated_and_odd_json_is_refused(tmp_path):
    pf = make_plan(tmp_path)
    text = pf.read_text()
    pf.write_text(text[: len(text) // 2])
    refused(tmp_path, pf, "lab.plan.json:", "not a plan file (invalid JSON")
    for odd in ("[]", "null", '"plan"', "[" * 100000):
        pf.write_text(odd)
        refused(tmp_path, pf, "lab.plan.json")


def test_a_file_label_pointing_elsewhere_is_not_followed(tmp_path):
    pf = make_plan(tmp_path)
    forge(pf, lambda d: d["to"].update(file="../../etc/passwd"))
    refused(tmp_path, pf, "cannot find the new definition", "--to")


def test_a_base_label_that_is_a_git_option_is_refused(tmp_path):
    pf = make_plan(tmp_path)
    written = tmp_path / "written"
    forge(pf, lambda d: d["from"].update(file=f"--output={written}:old.yaml"))
    refused(tmp_path, pf, "plan-git-ref", "is not a git ref")
    assert not written.exists()
