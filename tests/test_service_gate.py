"""Changes gated by the service objectives (issue 31, docs/service.md): the stage gate of `apply` against the
maintenance windows across Europe/Berlin's daylight-saving changes, the approvals `clusterdef approve` records
in a plan file without breaking its seal (and that count for that plan only), the changes of service.approvers
and of the windows listed as needing an approver, and apply refusing, holding and resuming on them. Pure or
with a stub runner (test_apply._stub_runner): no playbook runs here."""

from __future__ import annotations

import copy
import functools
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from clusterdef.apply import ApplyError
from clusterdef.apply import record as rec_mod
from clusterdef.apply.gate import check_stage
from clusterdef.apply.prepare import prepare, read_plan_file
from clusterdef.model import Definition
from clusterdef.plan.approvals import ApprovalError, new_record, required
from clusterdef.plan.audit import HOOKS, changes_needing_approval, checked, service_changes
from clusterdef.plan.planfile import HASH_FIELD, RECORDS, plan_hash, schema_problems
from clusterdef.windows import zone
from conftest import CLUSTERS, MATRICES, TODAY
from test_apply import CURRENT, DAY, FIXTURES, OLD, _stub_runner, app, lab, listing, runner

BERLIN = zone("Europe/Berlin")
UTC = timezone.utc
ADMINS = "hpc-admins"


# --- the stage gate, pure ------------------------------------------------------------------------

def _d(lab_data, windows: dict) -> Definition:
    data = copy.deepcopy(lab_data)
    data["service"]["maintenance_windows"] = windows
    return Definition.model_validate(data)


def _doc(minutes: int, kind: str = "wave", hosts: str = "gpu[002,004]", records=()) -> dict:
    return {"disruption": {"drain + reboot": {"changes": 1, "nodes": 2}},
            "approvals": {"drain + reboot": [ADMINS]},
            "rollout": {"stages": [{"name": "wave 1", "kind": kind, "hosts": hosts},
                                   {"name": "prepare", "kind": "prepare", "hosts": ""}],
                        "estimate": {"timeline": [{"stage": "wave 1", "minutes": minutes},
                                                  {"stage": "prepare", "minutes": 5}]}},
            HASH_FIELD: "a" * 64, RECORDS: list(records)}


def _at(y, mo, d, h, mi=0):
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


def test_the_gate_on_the_spring_forward_day(lab_data):
    """2026-03-29: a Sunday 02:30 window opens at 03:30 CEST (01:30Z), after the jump, for 2 elapsed hours."""
    d = _d(lab_data, {"sun": {"days": ["sun"], "start": "02:30", "hours": 2}})
    doc = _doc(60)
    early = check_stage(d, doc, [], "wave 1", _at(2026, 3, 29, 1, 0))  # 03:00 CEST: the wall clock passed 02:30
    assert early.reason and early.gated and "`sun`" in early.reason
    assert "would run 2026-03-29T03:00+02:00 to 2026-03-29T04:00+02:00 (60 min" in early.reason
    assert "next with room for it: `sun` at 2026-03-29T03:30+02:00" in early.reason
    assert check_stage(d, doc, [], "wave 1", _at(2026, 3, 29, 1, 30)).window == "sun"
    assert check_stage(d, doc, [], "wave 1", _at(2026, 3, 29, 2, 30)).window == "sun"  # ends at the close, 05:30
    late = check_stage(d, doc, [], "wave 1", _at(2026, 3, 29, 2, 31))
    assert late.reason and "next with room for it: `sun` at 2026-04-05T02:30+02:00" in late.reason


def test_the_gate_on_the_fall_back_day(lab_data):
    """2026-10-24/25: a Saturday 22:00 window of 8 h closes at 05:00 CET (04:00Z), not at 06:00 on the wall clock."""
    d = _d(lab_data, {"sat": {"days": ["sat"], "start": "22:00", "hours": 8}})
    doc = _doc(60)
    assert check_stage(d, doc, [], "wave 1", _at(2026, 10, 25, 2, 30)).window == "sat"  # 03:30 CET, ends 04:30
    assert check_stage(d, doc, [], "wave 1", _at(2026, 10, 25, 3, 0)).window == "sat"  # ends exactly at the close
    late = check_stage(d, doc, [], "wave 1", _at(2026, 10, 25, 3, 30))  # 04:30 CET: would end at 05:30
    assert late.reason and "2026-10-25T04:30+01:00 to 2026-10-25T05:30+01:00" in late.reason
    # the repeated hour: 02:30 CEST and 02:30 CET are an hour apart, both inside the window
    assert check_stage(d, doc, [], "wave 1", _at(2026, 10, 25, 0, 30)).window == "sat"
    assert check_stage(d, doc, [], "wave 1", _at(2026, 10, 25, 1, 30)).window == "sat"


def test_a_stage_outside_its_window_needs_an_approval_by_a_named_group(lab_data):
    d = _d(lab_data, {"train": {"days": ["tue"], "start": "08:00", "hours": 4, "partitions": ["train"]},
                      "all": {"days": ["mon"], "start": "18:00", "hours": 4}})
    tuesday_night = _at(2026, 12, 1, 20)
    v = check_stage(d, _doc(90), [], "wave 1", tuesday_night)
    assert "stage `wave 1` would run 2026-12-01T21:00+01:00" in v.reason
    assert "its maintenance window `train` or `all`" in v.reason and "(next with room for it: `all` at 2026-12-07T18:00" \
        in v.reason
    assert f"an approval by {ADMINS} (service.approvers, drain + reboot): clusterdef approve PLAN --stage 'wave 1' " \
           f"--group {ADMINS}" in v.reason
    mine = {"group": ADMINS, "by": "alice", "at": "2026-12-01T19:00:00Z", "why": "urgent", "covers": {"stage": "wave 1"},
            HASH_FIELD: "a" * 64}
    ok = check_stage(d, _doc(90, records=[mine]), [mine], "wave 1", tuesday_night)
    assert (ok.reason, ok.approval) == ("", mine)
    for other in ({**mine, "group": "users"}, {**mine, "covers": {"stage": "wave 2"}}):
        assert check_stage(d, _doc(90), [other], "wave 1", tuesday_night).reason  # another group, another stage
    # a stage that changes nothing running needs no window; a group no window covers is named
    assert not check_stage(d, _doc(90), [], "prepare", tuesday_night).gated
    train_only = _d(lab_data, {"train": {"days": ["tue"], "start": "08:00", "hours": 4, "partitions": ["train"]}})
    sec = check_stage(train_only, _doc(30, hosts="sgpu01"), [], "wave 1", _at(2026, 12, 1, 8))
    assert "outside a window over node group(s) secure (the definition has none)" in sec.reason
    # the control plane needs a whole-cluster window; the restart class has no approvers: the worst class's approve
    cp = check_stage(d, _doc(5, kind="control-plane", hosts=""), [], "wave 1", _at(2026, 12, 1, 9))
    assert "its maintenance window `all`" in cp.reason and "(service.approvers, daemon restart)" in cp.reason
    # without approvers for any class of the plan, nobody can approve it: it runs only inside its window
    bare = {**_doc(90), "approvals": {}}
    assert "names no group that could approve it" in check_stage(d, bare, [], "wave 1", tuesday_night).reason


def test_a_definition_without_windows_gates_nothing(lab_data):
    data = copy.deepcopy(lab_data)
    data.pop("service")
    v = check_stage(Definition.model_validate(data), _doc(600), [], "wave 1", _at(2026, 12, 1, 3))
    assert v == type(v)(gated=False)


# --- changes needing an approver (audit) ---------------------------------------------------------

def test_service_changes_need_the_old_approvers(lab_data):
    old = Definition.model_validate(lab_data)
    data = copy.deepcopy(lab_data)
    s = data["service"]
    s["approvers"]["reboot"] = ["ops-leads"]
    s["maintenance_windows"]["gpu"]["hours"] = 10
    s["maintenance_windows"].pop("secure-weekend")
    s["maintenance_windows"]["night"] = {"days": ["wed"], "start": "23:00", "hours": 2, "node_groups": ["infer"]}
    new = Definition.model_validate(data)
    got = {(e["kind"], e["subject"]): e for e in changes_needing_approval(old, new)}
    assert set(got) == {("service.approvers", "reboot"), ("service.maintenance_windows", "gpu"),
                        ("service.maintenance_windows", "night"), ("service.maintenance_windows", "secure-weekend")}
    assert {e["group"] for e in got.values()} == {ADMINS}  # those in power before the change approve it
    assert got[("service.approvers", "reboot")]["why"] == "approvers of reboot changes: hpc-admins -> ops-leads"
    assert got[("service.maintenance_windows", "gpu")]["why"] == (
        "maintenance window gpu changed: tue,thu 08:00 for 8 h (node groups infer; partitions train) -> "
        "tue,thu 08:00 for 10 h (node groups infer; partitions train)")
    assert "removed" in got[("service.maintenance_windows", "secure-weekend")]["why"]
    assert changes_needing_approval(old, old) == []


def test_the_service_section_removed_or_adopted(lab_data):
    with_service = Definition.model_validate(lab_data)
    data = copy.deepcopy(lab_data)
    data.pop("service")
    without = Definition.model_validate(data)
    removed = service_changes(with_service, without)
    assert {(e["kind"], e["subject"]) for e in removed} >= {("service.approvers", "reboot"),
                                                           ("service.timezone", "timezone")}
    assert {e["group"] for e in removed} == {ADMINS}
    data.pop("identity")
    nobody = Definition.model_validate(data)
    adopted = service_changes(nobody, with_service)  # the new rules' approvers approve their adoption
    assert adopted and {e["group"] for e in adopted} == {ADMINS}
    windows_only = copy.deepcopy(lab_data)
    windows_only["service"].pop("approvers")
    windows_only.pop("identity")
    unnamed = service_changes(nobody, Definition.model_validate(windows_only))
    assert unnamed and {e["group"] for e in unnamed} == {""}  # listed; apply refuses it: nobody may approve


@pytest.mark.parametrize("bad", [{"kind": "x", "subject": "y", "group": "g"},
                                 {"kind": "Data", "subject": "y", "group": "g", "why": "w"},
                                 {"kind": "data", "subject": "", "group": "g", "why": "w"},
                                 {"kind": "data", "subject": "y\x1b[2J", "group": "g", "why": "w"},
                                 {"kind": "data", "subject": "y", "group": "g", "why": "w" * 501},
                                 {"kind": "data", "subject": 3, "group": "g", "why": "w"}, "text"])
def test_a_hook_entry_of_the_wrong_shape_is_a_programming_error(bad):
    with pytest.raises(ValueError):
        checked(bad)


def test_another_concern_drops_into_the_hooks(lab_data):
    """The shape governance.changes_needing_approval returns: listed, grouped, required by apply."""
    d = Definition.model_validate(lab_data)

    def datasets(old, new):
        return [{"kind": "dataset.classification", "subject": "genomics", "group": "data-stewards",
                 "why": "classification restricted -> export-controlled"},
                {"kind": "dataset.classification", "subject": "genomics", "group": "security",
                 "why": "classification restricted -> export-controlled"}]
    entries = changes_needing_approval(d, d, (*HOOKS, datasets))
    assert [e["group"] for e in entries] == ["data-stewards", "security"]
    doc = {"changes_needing_approval": entries}
    used, missing = required(doc, [])
    assert not used and len(missing) == 1 and "needs an approval by data-stewards or security" in missing[0]
    assert "clusterdef approve PLAN --change dataset.classification:genomics --group data-stewards" in missing[0]
    rec = {"group": "security", "by": "bob", "at": "x", "why": "ok", HASH_FIELD: "a" * 64,
           "covers": {"change": {"kind": "dataset.classification", "subject": "genomics"}}}
    assert required(doc, [rec]) == ([rec], [])


# --- plan files with the service section -----------------------------------------------------------

SERVICE = (CLUSTERS / "lab.yaml").read_text()
SERVICE = SERVICE[SERVICE.index("\nservice:\n"):SERVICE.index("\nbackup:")]


def _with_service(path: Path, edit=lambda s: s) -> Path:
    text = path.read_text()
    at = text.index("\nbackup:")
    path.write_text(text[:at] + edit(SERVICE) + text[at:])
    return path


def plan_with_service(tmp: Path, start: str = "2026-12-07T18:00+01:00", edit_new=lambda s: s) -> Path:
    """The lab OLD -> CURRENT (test_apply) with the lab's service section on both sides."""
    old = _with_service(lab(tmp, OLD, "old.yaml", stateless=False))
    _with_service(lab(tmp, CURRENT, "new.yaml", keep=old, stateless=False), edit_new)
    pf = tmp / "lab.plan.json"
    r = runner.invoke(app, ["plan", "--from", str(old), "--to", str(tmp / "new.yaml"), "-m", str(MATRICES), "--today",
                            DAY, "-f", "json", "--plan-file", str(pf), "--start", start])
    assert r.exit_code == 0, r.output
    return pf


def approve(pf: Path, *args: str, by: str = "alice", why: str = "reviewed in the change board",
            now: str = "2026-12-04T10:00+01:00"):
    return runner.invoke(app, ["approve", str(pf), "--by", by, "--why", why, "--now", now, *args])


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("planned")
    pf = plan_with_service(tmp)
    return tmp, pf.read_text()


def fresh(planned, tmp_path: Path) -> Path:
    """The module's plan and its definitions, copied (planning once keeps these tests fast)."""
    src, text = planned
    for name in ("old.yaml", "new.yaml"):
        (tmp_path / name).write_text((src / name).read_text())
    pf = tmp_path / "lab.plan.json"
    pf.write_text(text)
    return pf


def test_an_approval_is_recorded_outside_the_seal(planned, tmp_path):
    pf = fresh(planned, tmp_path)
    before = json.loads(pf.read_text())
    r = approve(pf, "--class", "reboot", "--group", ADMINS)
    assert r.exit_code == 0, r.output
    assert 'approved 2026-12-04T09:00:00Z: "alice" for hpc-admins: "reboot" changes, because "reviewed in the ' \
           'change board"' in " ".join(r.output.split())
    doc = json.loads(pf.read_text())
    assert doc[HASH_FIELD] == before[HASH_FIELD] == plan_hash(doc)  # the seal of what was reviewed is intact
    assert {k: v for k, v in doc.items() if k != RECORDS} == before and not schema_problems(doc)
    assert doc[RECORDS] == [{"group": ADMINS, "by": "alice", "at": "2026-12-04T09:00:00Z",
                             "why": "reviewed in the change board", "covers": {"class": "reboot"},
                             HASH_FIELD: before[HASH_FIELD]}]
    prep = prepare(pf, None, None, None, MATRICES, TODAY, FIXTURES)
    assert prep.approvals == doc[RECORDS]
    # the same approval twice is refused; an approval for the stage of a wave is recorded too
    assert approve(pf, "--class", "reboot", "--group", ADMINS).exit_code == 2
    assert approve(pf, "--stage", "wave 3", "--group", ADMINS).exit_code == 0
    assert len(json.loads(pf.read_text())[RECORDS]) == 2


def test_approvers_at_the_same_moment_all_keep_their_record(planned, tmp_path):
    """Eight `clusterdef approve` processes started together on one plan file: each reads, adds and writes the
    file under the plan file's lock (writer.updating), so none overwrites another's record."""
    import subprocess
    import sys

    pf = fresh(planned, tmp_path)
    people = [f"approver{i}" for i in range(8)]
    procs = [subprocess.Popen([sys.executable, "-m", "clusterdef", "approve", str(pf), "--class", "reboot", "--group",
                               ADMINS, "--by", who, "--why", "change board", "--now", "2026-12-04T10:00+01:00"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for who in people]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(people), outs
    doc = json.loads(pf.read_text())
    assert sorted(r["by"] for r in doc[RECORDS]) == people
    assert doc[HASH_FIELD] == plan_hash(doc)


@pytest.mark.parametrize("args, expected", [
    (["--class", "reboot", "--group", "users"], '--group "users" may not approve "reboot" changes: the plan names '
                                                "hpc-admins"),
    (["--class", "live", "--group", ADMINS], 'the plan has no change of class "live"'),
    (["--stage", "prepare", "--group", ADMINS], "changes nothing running: it needs no window and no approval"),
    (["--stage", "wave 99", "--group", ADMINS], 'the plan has no stage "wave 99"'),
    (["--stage", "w\x1b[31m", "--group", ADMINS], r'the plan has no stage "w\u001b[31m"'),
    (["--class", "reboot", "--group", "[red]x"], '--group "[red]x" may not approve'),
    (["--change", "service.approvers", "--group", ADMINS], "use KIND:SUBJECT"),
    (["--change", "service.approvers:reboot", "--group", ADMINS], "the plan lists no change needing approval"),
])
def test_approvals_the_plan_does_not_ask_for_are_refused(planned, tmp_path, args, expected):
    pf = fresh(planned, tmp_path)
    r = approve(pf, *args)
    assert r.exit_code == 2 and expected in " ".join(r.output.split()), r.output
    assert RECORDS not in json.loads(pf.read_text()) and "Traceback" not in r.output


@pytest.mark.parametrize("by, why, expected", [
    ("evil\x1b[31m", "ok", r'--by "evil\u001b[31m"'),
    ("alice; rm -rf /", "ok", "--by"),
    ("a" * 129, "ok", "--by"),
    ("alice", "line one\nline two", r'--why "line one\nline two"'),
    ("alice", "x" * 501, "one line of 1 to 500 printable characters"),
    ("alice", "   ", "--why"),
])
def test_hostile_who_and_why_are_refused(planned, tmp_path, by, why, expected):
    pf = fresh(planned, tmp_path)
    r = approve(pf, "--class", "reboot", "--group", ADMINS, by=by, why=why)
    assert r.exit_code == 2 and expected in r.output and "\x1b" not in r.output, r.output
    assert RECORDS not in json.loads(pf.read_text())


def test_approve_needs_a_time_with_a_zone_and_one_thing_to_cover(planned, tmp_path):
    pf = fresh(planned, tmp_path)
    r = approve(pf, "--class", "reboot", "--group", ADMINS, now="2026-12-04T10:00")
    assert r.exit_code == 2 and "--now" in r.output and "zone" in r.output
    r = approve(pf, "--class", "reboot", "--stage", "wave 1", "--group", ADMINS)
    assert r.exit_code == 2 and "not allowed with argument" in r.output
    assert RECORDS not in json.loads(pf.read_text())


def test_a_why_with_markup_is_shown_as_text(planned, tmp_path):
    pf = fresh(planned, tmp_path)
    r = approve(pf, "--class", "reboot", "--group", ADMINS, why="[red]urgent[/] `x` <b>")
    assert r.exit_code == 0 and '"[red]urgent[/] `x` <b>"' in r.output


def test_an_edited_plan_is_not_approved(planned, tmp_path):
    pf = fresh(planned, tmp_path)
    doc = json.loads(pf.read_text())
    doc["rollout"]["stages"][0]["steps"][0] = "rm -rf /"
    pf.write_text(json.dumps(doc))
    r = approve(pf, "--class", "reboot", "--group", ADMINS)
    assert r.exit_code == 2 and "plan_sha256 does not match the plan document" in " ".join(r.output.split())
    with pytest.raises(ApprovalError):
        new_record(doc, ADMINS, "alice", "ok", {"class": "reboot"}, datetime.now(UTC))


def test_an_approval_copied_to_another_plan_is_refused(planned, tmp_path):
    pf = fresh(planned, tmp_path)
    assert approve(pf, "--class", "reboot", "--group", ADMINS).exit_code == 0
    record = json.loads(pf.read_text())[RECORDS][0]
    (tmp_path / "other").mkdir()
    other = plan_with_service(tmp_path / "other", start="2026-12-08T08:00+01:00")  # another plan of the same change
    doc = json.loads(other.read_text())
    assert doc[HASH_FIELD] != record[HASH_FIELD]
    doc[RECORDS] = [record]
    other.write_text(json.dumps(doc))
    with pytest.raises(ApplyError) as exc:
        prepare(other, None, None, None, MATRICES, TODAY, FIXTURES)
    assert "recorded for another plan" in exc.value.reasons[0] and "approval_records[0]" in exc.value.reasons[0]
    # re-pointed at this plan by hand, it is still checked: a group the plan does not name is refused
    doc[RECORDS] = [{**record, HASH_FIELD: doc[HASH_FIELD], "group": "users"}]
    other.write_text(json.dumps(doc))
    with pytest.raises(ApplyError) as exc:
        prepare(other, None, None, None, MATRICES, TODAY, FIXTURES)
    assert 'group "users" may not approve it' in exc.value.reasons[0]


@pytest.mark.parametrize("record, field", [
    ({"covers": {"class": "reboot", "stage": "wave 1"}}, "covers"),
    ({"covers": {"class": "sometimes"}}, "covers.class"),
    ({"by": "x" * 200}, "by"),
    ({"plan_sha256": "nope"}, "plan_sha256"),
    ({"extra": 1}, "extra: unknown field"),
])
def test_malformed_approval_records_name_the_field(planned, tmp_path, record, field):
    pf = fresh(planned, tmp_path)
    doc = json.loads(pf.read_text())
    base = {"group": ADMINS, "by": "alice", "at": "x", "why": "y", "covers": {"class": "reboot"},
            HASH_FIELD: doc[HASH_FIELD]}
    doc[RECORDS] = [{**base, **record}]
    pf.write_text(json.dumps(doc))
    with pytest.raises(ApplyError) as exc:
        read_plan_file(pf)
    assert f"approval_records[0].{field}" in exc.value.reasons[0], exc.value.reasons


# --- apply ---------------------------------------------------------------------------------------

def _apply(pf: Path, *extra: str):
    return runner.invoke(app, ["apply", str(pf), "-m", str(MATRICES), "--today", DAY, "--playbooks", str(FIXTURES),
                               *extra])


def stub_runs(monkeypatch, run) -> None:
    """Steps run by `run` (no playbook), in a real run (not --check, which is not gated): the stub writes no
    facts, so the snapshot's versions are not read."""
    monkeypatch.setattr(rec_mod, "execute", functools.partial(rec_mod.execute, run=run))
    monkeypatch.setattr(rec_mod, "_record_versions", lambda *a: None)


def test_apply_refuses_a_plan_without_its_approvals_before_anything_runs(planned, tmp_path):
    pf = fresh(planned, tmp_path)
    before = listing(tmp_path)
    r = _apply(pf, "--now", "2026-12-07T18:00+01:00")
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "the plan has drain + reboot changes and no recorded approval by hpc-admins (service.approvers.reboot): " \
           "clusterdef approve PLAN --class reboot --group hpc-admins" in out
    assert "reflash + power cycle changes and no recorded approval by hpc-admins" in out
    assert listing(tmp_path) == before  # nothing written: no run record, no rollback point, no lock
    # approved, but at a time the first stage that needs a window would start outside it (Thursday evening)
    for cls in ("reboot", "reflash"):
        assert approve(pf, "--class", cls, "--group", ADMINS).exit_code == 0
    before = listing(tmp_path)
    r = _apply(pf, "--now", "2026-12-03T19:00+01:00")
    out = " ".join(r.output.split())
    # image and prepare change nothing running (5 min each), the canary (155 min) would start at 19:10
    assert r.exit_code == 2 and "stage `canary` would run 2026-12-03T19:10+01:00 to 2026-12-03T21:45+01:00" in out
    assert "outside its maintenance window `cluster` or `gpu` (next with room for it: `cluster` at " \
           "2026-12-07T18:00+01:00)" in out
    assert "approval by hpc-admins (service.approvers, reflash + power cycle): clusterdef approve PLAN --stage canary " \
           "--group hpc-admins" in out
    assert listing(tmp_path) == before
    assert _apply(pf, "--now", "2026-12-07T18:00").exit_code == 2  # a time without a zone is refused


def test_apply_holds_before_a_stage_outside_its_window_and_resume_rechecks_it(planned, tmp_path, monkeypatch):
    """Monday 18:00 (the lab's whole-cluster window, 4 h): the stages run on a clock that moves by their
    estimate, the run holds before the Kubernetes canary (21:45 + 155 min overruns 22:00); approved, a
    resumption runs it and holds before the next stage outside its window; the approvals are in the record."""
    from clusterdef.apply.session import _gate, options, start

    pf = fresh(planned, tmp_path)
    for cls in ("reboot", "reflash"):
        assert approve(pf, "--class", cls, "--group", ADMINS).exit_code == 0
    opts = options(pf, None, None, None, FIXTURES, [], [], [], [], False, None)
    monday = datetime(2026, 12, 7, 18, 0, tzinfo=BERLIN)
    clock = {"at": monday, "stage": None}
    calls: list[str] = []
    stub = _stub_runner(set(), calls)

    def run(pdd, playbook, inventory, extravars, **kw):  # the clock moves on by each stage's estimate
        from clusterdef.apply.gate import stage_minutes

        stage = extravars["clusterdef_stage"]
        if stage != clock["stage"]:
            if clock["stage"] is not None:
                clock["at"] += timedelta(minutes=stage_minutes(s.prep.doc, clock["stage"]))
            clock["stage"] = stage
        return stub(pdd, playbook, inventory, extravars, **kw)
    stub_runs(monkeypatch, run)

    def now():  # asked before a stage starts: the previous stage has run its estimate
        from clusterdef.apply.gate import stage_minutes

        return clock["at"] + timedelta(minutes=stage_minutes(s.prep.doc, clock["stage"]))

    s = start(opts, None, None, None, MATRICES, TODAY, now=monday)
    s.gate = _gate(s.prep, now)
    try:
        first = s.run()
    finally:
        s.close()
    assert first["status"] == "held" and first["halted_at"].startswith("kubernetes infer canary")
    [hold] = first["holds"]
    assert hold["stage"] == "kubernetes infer canary"
    assert "would run 2026-12-07T21:45+01:00 to 2026-12-08T00:20+01:00 (155 min" in hold["reason"]
    assert "`cluster` or `gpu`" in hold["reason"] and "next with room for it: `gpu` at 2026-12-08T08:00+01:00" in \
        hold["reason"] and "approval by hpc-admins" in hold["reason"]
    assert {r["stage"] for r in first["runs"]} >= {"control plane and cluster config", "canary", "rollback drill"}
    assert not any(r["stage"].startswith("kubernetes") for r in first["runs"])
    assert [a["covers"] for a in first["approvals"]] == [{"class": "reflash"}, {"class": "reboot"}]
    assert first["approvals"][0]["by"] == "alice" and first["approvals"][0]["at"] == "2026-12-04T09:00:00Z"

    # resumed at once without an approval: refused before anything runs, the record untouched
    kept = s.record_path.read_text()
    with pytest.raises(ApplyError) as exc:
        start(opts, None, None, None, MATRICES, TODAY, s.record_path, now=datetime(2026, 12, 7, 21, 45, tzinfo=BERLIN))
    assert "stage `kubernetes infer canary` would run" in exc.value.reasons[0]
    assert s.record_path.read_text() == kept

    assert approve(pf, "--stage", "kubernetes infer canary", "--group", ADMINS, why="the infer pool is idle "
                   "tonight").exit_code == 0
    clock.update(at=datetime(2026, 12, 7, 21, 45, tzinfo=BERLIN), stage=None)
    r = start(opts, None, None, None, MATRICES, TODAY, s.record_path, now=clock["at"])
    r.gate = _gate(r.prep, now)
    try:
        second = r.run()
    finally:
        r.close()
    assert second["status"] == "held" and [h["stage"] for h in second["holds"]] == \
        ["kubernetes infer canary", "kubernetes infer rollback drill"]
    assert any(x["stage"] == "kubernetes infer canary" for x in second["runs"])
    used = [a for a in second["approvals"] if a["covers"] == {"stage": "kubernetes infer canary"}]
    assert used and used[0]["why"] == "the infer pool is idle tonight" and used[0]["group"] == ADMINS

    # resumed on Tuesday morning, inside the `gpu` window: the next stage starts
    g = start(opts, None, None, None, MATRICES, TODAY, s.record_path, now=datetime(2026, 12, 8, 8, 0, tzinfo=BERLIN))
    g.close()
    assert g.prep.steps[g.first].stage == "kubernetes infer rollback drill"


def test_a_changed_window_needs_its_approval_before_apply(tmp_path):
    pf = plan_with_service(tmp_path, edit_new=lambda s: s.replace('start: "08:00", hours: 8', 'start: "07:00", '
                                                                                            'hours: 9'))
    doc = json.loads(pf.read_text())
    assert doc["changes_needing_approval"] == [
        {"kind": "service.maintenance_windows", "subject": "gpu", "group": ADMINS,
         "why": "maintenance window gpu changed: tue,thu 08:00 for 8 h (node groups infer; partitions train) -> "
                "tue,thu 07:00 for 9 h (node groups infer; partitions train)"}]
    md = runner.invoke(app, ["plan", "--from", str(tmp_path / "old.yaml"), "--to", str(tmp_path / "new.yaml"), "-m",
                             str(MATRICES), "--today", DAY, "-f", "markdown", "--start", "2026-12-07T18:00+01:00"])
    assert "### Changes needing an approver" in md.output
    assert "- service.maintenance_windows gpu: maintenance window gpu changed:" in md.output
    assert "approver: `hpc-admins`" in md.output
    for cls in ("reboot", "reflash"):
        assert approve(pf, "--class", cls, "--group", ADMINS).exit_code == 0
    r = _apply(pf, "--now", "2026-12-07T18:00+01:00")
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "(service.maintenance_windows \"gpu\") needs an approval by hpc-admins" in out
    assert "clusterdef approve PLAN --change service.maintenance_windows:gpu --group hpc-admins" in out
    assert approve(pf, "--change", "service.maintenance_windows:gpu", "--group", ADMINS).exit_code == 0
    from clusterdef.apply.session import options, start

    s = start(options(pf, None, None, None, FIXTURES, [], [], [], [], False, None), None, None, None, MATRICES, TODAY,
              now=datetime(2026, 12, 7, 18, 0, tzinfo=BERLIN))
    s.discard()
    assert {"change": {"kind": "service.maintenance_windows", "subject": "gpu"}} in [a["covers"] for a in s.approvals]


def test_apply_prints_a_hold_and_exits_2(planned, tmp_path, monkeypatch):
    """The command line (stub runner): Tuesday 08:00 is inside the `gpu` window, so the canary and its drill run;
    the control plane needs the whole-cluster window (Monday evening): held before it, exit 2, how to go on."""
    from test_apply import need_ansible_runner

    need_ansible_runner()  # apply checks that ansible-runner is there before anything else
    pf = fresh(planned, tmp_path)
    for cls in ("reboot", "reflash"):
        assert approve(pf, "--class", cls, "--group", ADMINS).exit_code == 0
    calls: list[str] = []
    stub_runs(monkeypatch, _stub_runner(set(), calls))
    r = _apply(pf, "--now", "2026-12-08T08:00+01:00")
    out = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "refused: stage `control plane and cluster config` would run 2026-12-08T08:" in out
    assert "outside its maintenance window `cluster` (next with room for it: `cluster` at 2026-12-14T18:00+01:00)" in out
    assert "held before control plane and cluster config" in out and "--resume" in out
    [rec] = [json.loads(p.read_text()) for p in tmp_path.glob("lab.plan.run-*.json")]
    assert rec["status"] == "held" and {x["stage"] for x in rec["runs"]} == {
        "image build and publish", "prepare", "canary", "rollback drill"}
    assert calls  # the stages before it ran


def test_the_plan_says_who_may_approve_a_stage_outside_its_window(lab_data):
    from clusterdef.plan.formats import schedule_lines
    from clusterdef.plan.windows import layout

    d = _d(lab_data, {"train": {"days": ["tue"], "start": "07:00", "hours": 2, "partitions": ["train"]}})
    doc = _doc(300)
    sc = layout(d, doc["rollout"]["stages"], doc["rollout"]["estimate"]["timeline"],
                datetime(2026, 11, 30, tzinfo=BERLIN))
    lines = schedule_lines({"schedule": sc}, doc)
    assert lines[1] == ("- **wave 1** (2026-12-01T07:00): needs a window of at least 5 h (`train` is 2 h; the stage "
                        "spans 3 of its openings); `apply` runs it outside only with an approval by `hpc-admins`")
    assert schedule_lines({"schedule": sc}, {**doc, "approvals": {}})[1].endswith(
        "; no group in `service.approvers` may approve running it outside")


def test_a_check_preview_is_not_gated_but_says_what_a_run_would_be_refused_for(planned, tmp_path, monkeypatch):
    from test_apply import need_ansible_runner

    need_ansible_runner()
    pf = fresh(planned, tmp_path)
    calls: list[str] = []
    monkeypatch.setattr(rec_mod, "execute", functools.partial(rec_mod.execute, run=_stub_runner(set(), calls)))
    r = _apply(pf, "--check", "--now", "2026-12-03T19:00+01:00")  # no approval, outside every window
    out = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "warning: check mode, not enforced: a real run would be refused: lab: the plan has drain + reboot " \
           "changes and no recorded approval by hpc-admins" in out
    [rec] = [json.loads(p.read_text()) for p in tmp_path.glob("lab.plan.run-*.json")]
    assert rec["status"] == "succeeded" and rec["check"] and "holds" not in rec and "approvals" not in rec


def test_a_dataset_reclassified_needs_its_stewards_approval_before_apply(tmp_path):
    """governance.changes_needing_approval is one of the plan's hooks: a dataset's classification changed between
    the definitions is listed with the dataset's approver, and apply refuses the plan until that group approved."""
    pf = plan_with_service(tmp_path, edit_new=lambda s: s)
    new = tmp_path / "new.yaml"
    text = new.read_text()
    assert "    classification: restricted\n" in text
    new.write_text(text.replace("    classification: restricted\n", "    classification: export-controlled\n", 1))
    r = runner.invoke(app, ["plan", "--from", str(tmp_path / "old.yaml"), "--to", str(new), "-m", str(MATRICES),
                            "--today", DAY, "-f", "json", "--plan-file", str(pf), "--start", "2026-12-07T18:00+01:00"])
    assert r.exit_code == 0, r.output
    entries = [e for e in json.loads(pf.read_text())["changes_needing_approval"] if e["subject"].startswith("datasets.")]
    subject = "datasets.imagenet-eu.classification"
    assert [(e["subject"], e["group"]) for e in entries] == [(subject, "data-stewards")]
    assert "restricted" in entries[0]["why"] and "export-controlled" in entries[0]["why"]
    for cls in ("reboot", "reflash"):
        assert approve(pf, "--class", cls, "--group", ADMINS).exit_code == 0
    refused = _apply(pf, "--now", "2026-12-07T18:00+01:00")
    out = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "needs an approval by data-stewards" in out, refused.output
    kind = entries[0]["kind"]
    assert approve(pf, "--change", f"{kind}:{subject}", "--group", ADMINS).exit_code != 0  # not its group
    assert approve(pf, "--change", f"{kind}:{subject}", "--group", "data-stewards").exit_code == 0
    from clusterdef.apply.session import options, start

    s = start(options(pf, None, None, None, FIXTURES, [], [], [], [], False, None), None, None, None, MATRICES, TODAY,
              now=datetime(2026, 12, 7, 18, 0, tzinfo=BERLIN))
    s.discard()
    assert {"change": {"kind": kind, "subject": subject}} in [a["covers"] for a in s.approvals]
