"""Service objectives (docs/service.md): the window instants across daylight-saving changes, the checks of
the `service` section (time zone, windows, RPO against the backup interval, RTO against the last passed
rehearsal), and the rollout laid out in the maintenance windows (plan/windows.py). Pure: no clock."""

from __future__ import annotations

import copy
import json
from datetime import date, datetime, timedelta, timezone

import pytest
from cli_runner import CliRunner

from clusterdef.cli import app
from clusterdef.errors import Severity
from clusterdef.model import Definition
from clusterdef.model.service import Window
from clusterdef.plan.formats import schedule_lines
from clusterdef.plan.windows import layout, recorded_start
from clusterdef.validate.pipeline import validate_file
from clusterdef.windows import local_instant, openings, overlap, zone
from conftest import MATRICES, TODAY, dump_yaml

BERLIN = zone("Europe/Berlin")
UTC = timezone.utc


# --- instants -----------------------------------------------------------------------------------

def test_a_start_the_spring_forward_skips_opens_after_the_jump():
    """2026-03-29, Europe/Berlin: 02:00 CET jumps to 03:00 CEST; a 02:30 window opens at 03:30 CEST (01:30Z)."""
    w = Window(days=("sun",), start="02:30", hours=2)
    (o, c), = openings(w, BERLIN, datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 3, 30, tzinfo=UTC))
    assert o == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert o.astimezone(BERLIN).strftime("%H:%M %Z") == "03:30 CEST"
    assert c - o == timedelta(hours=2)  # elapsed hours, not wall-clock hours
    # the Sunday before and after: 02:30 local exists, in CET and CEST
    assert local_instant(date(2026, 3, 22), "02:30", BERLIN) == datetime(2026, 3, 22, 1, 30, tzinfo=UTC)
    assert local_instant(date(2026, 4, 5), "02:30", BERLIN) == datetime(2026, 4, 5, 0, 30, tzinfo=UTC)


def test_a_start_the_fall_back_repeats_opens_at_the_first():
    """2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice and the window opens at the first."""
    assert local_instant(date(2026, 10, 25), "02:30", BERLIN) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    w = Window(days=("sat",), start="22:00", hours=8)  # across the change: still 8 h of elapsed time
    (o, c), = openings(w, BERLIN, datetime(2026, 10, 24, tzinfo=UTC), datetime(2026, 10, 25, tzinfo=UTC))
    assert (o, c - o) == (datetime(2026, 10, 24, 20, 0, tzinfo=UTC), timedelta(hours=8))
    assert c.astimezone(BERLIN).strftime("%H:%M") == "05:00"  # 06:00 on the wall clock of a normal night


def test_overlap_sees_a_window_that_wraps_past_sunday():
    sun = Window(days=("sun",), start="22:00", hours=4)
    assert overlap(sun, Window(days=("mon",), start="01:00", hours=1))
    assert not overlap(sun, Window(days=("mon",), start="02:00", hours=1))
    assert not overlap(Window(days=("tue",), start="06:00", hours=2), Window(days=("tue",), start="08:00", hours=2))


def test_unknown_zones_are_none():
    assert zone("Mars/Olympus_Mons") is None and zone("../../etc/passwd") is None
    assert zone("UTC") is not None


# --- checks -------------------------------------------------------------------------------------

def _validate(lab_data, tmp_path, edit, today=TODAY, record=None):
    data = copy.deepcopy(lab_data)
    edit(data["service"], data)
    path = dump_yaml(data, tmp_path / "lab.yaml")
    if record is not None:
        (tmp_path / "lab.rehearsal.json").write_text(json.dumps({"format": "clusterdef-rehearsal/1",
                                                                 "rehearsals": record}))
    return validate_file(path, MATRICES, today)


def _one(result, code):
    hits = [f for f in result.findings if f.code == code]
    assert len(hits) == 1, [(f.code, f.message) for f in result.findings]
    f = hits[0]
    assert f.message and f.hint and f.line > 0 and f.file.endswith("lab.yaml")
    return f


def test_the_lab_service_section_validates(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: None)
    assert r.ok and not [f for f in r.findings if f.code.startswith("service-")]


def test_unknown_time_zone(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: s.update(timezone="Europe/Atlantis"))
    f = _one(r, "service-timezone-unknown")
    assert f.severity is Severity.ERROR and f.path == ("service", "timezone") and not r.ok


def test_a_time_zone_is_required(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: s.pop("timezone"))
    assert not r.ok and any(f.path == ("service", "timezone") for f in r.errors)


@pytest.mark.parametrize("window, field", [({"days": [], "start": "06:00", "hours": 4}, "days"),
                                           ({"days": ["tue"], "start": "06:00", "hours": 0}, "hours")])
def test_a_window_that_never_opens(lab_data, tmp_path, window, field):
    r = _validate(lab_data, tmp_path, lambda s, d: s["maintenance_windows"].update(never=window))
    f = _one(r, "service-window-never-opens")
    assert f.severity is Severity.ERROR and f.path == ("service", "maintenance_windows", "never", field)


def test_a_window_naming_unknown_scope(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: s["maintenance_windows"].update(
        x={"days": ["mon"], "start": "01:00", "hours": 1, "node_groups": ["nope"], "partitions": ["train", "gone"]}))
    paths = sorted(f.path for f in r.findings if f.code == "service-window-scope-unknown")
    assert paths == [("service", "maintenance_windows", "x", "node_groups", 0),
                     ("service", "maintenance_windows", "x", "partitions", 1)]


def test_overlapping_windows_in_one_scope_warn(lab_data, tmp_path):
    # the lab's `gpu` window (partition train, node group infer) is open Tuesdays 08:00-16:00
    r = _validate(lab_data, tmp_path, lambda s, d: s["maintenance_windows"].update(
        train={"days": ["tue"], "start": "15:00", "hours": 2, "partitions": ["train"]}))
    f = _one(r, "service-window-overlap")
    assert f.severity is Severity.WARNING and r.ok and "`gpu` and `train`" in f.message
    r = _validate(lab_data, tmp_path, lambda s, d: s["maintenance_windows"].update(
        train={"days": ["tue"], "start": "16:00", "hours": 2, "partitions": ["train"]}))
    assert not [f for f in r.findings if f.code == "service-window-overlap"]


def test_supported_hours_that_end_before_they_start(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: s["supported_hours"].update(start="18:00", end="08:00"))
    assert _one(r, "service-hours-empty").path == ("service", "supported_hours", "end")


def test_rpo_shorter_than_the_backup_interval(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: s["recovery"]["slurm"].update(rpo_hours=4))
    f = _one(r, "service-rpo-unmet")
    assert f.severity is Severity.ERROR and f.path == ("service", "recovery", "slurm", "rpo_hours")
    assert "backup every 24 h cannot meet an RPO of 4 h" in f.message and "interval_hours" in f.hint
    ok = _validate(lab_data, tmp_path, lambda s, d: (s["recovery"]["slurm"].update(rpo_hours=4),
                                                     d["backup"]["schedule"].update(interval_hours=4)))
    assert not [f for f in ok.findings if f.code == "service-rpo-unmet"]


def test_recovery_of_an_unknown_data_set(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: s["recovery"].update(home={"rpo_hours": 24, "rto_minutes": 60}))
    f = _one(r, "service-recovery-unknown-set")
    assert "cluster-repo" in f.hint and "slurm" in f.hint


def _passed(seconds, day="2026-11-29T10:00:00Z"):
    return {"date": day, "result": "passed", "seconds": seconds, "checks": []}


def test_rto_against_the_last_passed_rehearsal(lab_data, tmp_path):
    slow = [_passed(600, "2026-11-01T10:00:00Z"), _passed(9000),  # the newest passed one counts
            {"date": "2026-11-30T10:00:00Z", "result": "failed", "seconds": 60}]
    f = _one(_validate(lab_data, tmp_path, lambda s, d: None, record=slow), "service-rto-unmet")
    assert f.severity is Severity.ERROR and "150.0 min" in f.message and "120 min" in f.message
    assert f.path == ("service", "recovery", "slurm", "rto_minutes")
    fast = [_passed(9000, "2026-11-01T10:00:00Z"), _passed(600)]
    r = _validate(lab_data, tmp_path, lambda s, d: None, record=fast)
    assert not [f for f in r.findings if f.code.startswith("service-rto")]


def test_no_rehearsal_on_record_warns_once_the_first_is_due(lab_data, tmp_path):
    # the lab adopted its backup plan on 2026-12-01 (max_age_days 30): not due on TODAY, due 31 days later
    assert not [f for f in _validate(lab_data, tmp_path, lambda s, d: None).findings if f.code.startswith("service-")]
    late = TODAY + timedelta(days=40)
    f = _one(_validate(lab_data, tmp_path, lambda s, d: None, today=late), "service-rto-unrehearsed")
    assert f.severity is Severity.WARNING and "never been measured" in f.message
    f = _one(_validate(lab_data, tmp_path, lambda s, d: None, record=[{"date": "2026-12-20T10:00:00Z",
                                                                      "result": "failed", "seconds": 5}],
                       today=late), "service-rto-unrehearsed")


def test_a_data_set_the_drill_does_not_rehearse_warns(lab_data, tmp_path):
    r = _validate(lab_data, tmp_path, lambda s, d: s["recovery"].update(
        registry={"rpo_hours": 24, "rto_minutes": 60}))
    f = _one(r, "service-rto-unrehearsed")
    assert f.path == ("service", "recovery", "registry", "rto_minutes") and "registry" in f.message


def test_validate_exits_2_on_a_service_error(lab_data, tmp_path):
    data = copy.deepcopy(lab_data)
    data["service"]["recovery"]["slurm"]["rpo_hours"] = 4
    r = CliRunner().invoke(app, ["validate", str(dump_yaml(data, tmp_path / "lab.yaml")), "--matrices",
                                 str(MATRICES), "--today", TODAY.isoformat()])
    assert r.exit_code == 2 and "service-rpo-unmet" in r.output


# --- the layout ---------------------------------------------------------------------------------

def _d(lab_data, windows, hours=None) -> Definition:
    data = copy.deepcopy(lab_data)
    data["service"]["maintenance_windows"] = windows
    if hours is not None:
        data["service"]["supported_hours"] = hours
    return Definition.model_validate(data)


STAGES = [{"name": "prepare", "kind": "prepare", "hosts": ""},
          {"name": "control plane", "kind": "control-plane", "hosts": ""},
          {"name": "wave 1", "kind": "wave", "hosts": "gpu[002,004]"},
          {"name": "wave 2", "kind": "wave", "hosts": "sgpu01"}]
MONDAY = datetime(2026, 11, 30, 0, 0, tzinfo=BERLIN)


def _timeline(*minutes):
    return [{"stage": s["name"], "minutes": m} for s, m in zip(STAGES, minutes)]


def test_disruptive_stages_wait_for_their_window(lab_data):
    d = _d(lab_data, {"tue": {"days": ["tue"], "start": "07:00", "hours": 4},
                      "secure": {"days": ["wed"], "start": "20:00", "hours": 3, "node_groups": ["secure"]}},
           {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"})
    sc = layout(d, STAGES, _timeline(30, 60, 150, 120), MONDAY)
    rows = {r["stage"]: r for r in sc["stages"]}
    assert rows["prepare"] == {"stage": "prepare", "scope": None, "start": "2026-11-30T00:00:00+01:00",
                               "end": "2026-11-30T00:30:00+01:00", "window": None, "staffed": False}
    assert (rows["control plane"]["window"], rows["control plane"]["start"]) == ("tue", "2026-12-01T07:00:00+01:00")
    # 08:00 to 10:30 is still inside the Tuesday window (07:00-11:00)
    assert (rows["wave 1"]["window"], rows["wave 1"]["start"], rows["wave 1"]["scope"]) == \
        ("tue", "2026-12-01T08:00:00+01:00", ["train"])
    assert rows["wave 1"]["staffed"] is True
    # the secure group's stage fits neither the rest of Tuesday's window nor anything before Wednesday night
    assert (rows["wave 2"]["window"], rows["wave 2"]["start"]) == ("secure", "2026-12-02T20:00:00+01:00")
    assert rows["wave 2"]["staffed"] is False
    assert sc["outside"] == 0 and sc["end"] == "2026-12-02T22:00:00+01:00"


def test_stages_no_window_holds_are_listed_with_what_they_need(lab_data):
    d = _d(lab_data, {"train": {"days": ["tue"], "start": "07:00", "hours": 2, "partitions": ["train"]}})
    sc = layout(d, STAGES, _timeline(30, 60, 300, 60), MONDAY)
    rows = {r["stage"]: r for r in sc["stages"]}
    assert rows["control plane"]["outside"] == "a whole-cluster window" and rows["control plane"]["window"] is None
    assert rows["wave 1"]["outside"] == "a window of at least 5 h (`train` is 2 h; the stage spans 3 of its openings)"
    assert rows["wave 1"]["start"] == "2026-12-01T07:00:00+01:00"  # at the longest window's opening, overrunning it
    assert rows["wave 2"]["outside"] == "a window over node group(s) secure"
    assert sc["outside"] == 3
    md = schedule_lines({"schedule": sc})
    assert md[0].startswith("Maintenance windows (`service`, `Europe/Berlin`): from 2026-11-30T00:00 to ")
    assert "3 outside every window:" in md[0]
    assert md[2] == ("- **wave 1** (2026-12-01T07:00): needs a window of at least 5 h (`train` is 2 h; the stage "
                     "spans 3 of its openings)")
    assert len(md) == 4


def test_the_lab_plan_places_its_stages(lab_data, tmp_path):
    """The lab's own plan (the golden Markdown shows the line): every stage in a window, from --start on."""
    from test_plan import CURRENT, OLD, variant

    from clusterdef.plan import FROM_SIDE_IGNORED, load_side, make_plan

    a = load_side(variant(tmp_path, "lab", OLD), MATRICES, TODAY, FROM_SIDE_IGNORED)
    b = load_side(variant(tmp_path, "lab", CURRENT), MATRICES, TODAY)
    start = datetime(2026, 12, 3, 9, 0, tzinfo=BERLIN)  # a Thursday, inside the lab's `gpu` window
    doc = make_plan(a, b, start=start).doc
    sc = doc["rollout"]["schedule"]
    assert sc["start"] == "2026-12-03T09:00:00+01:00" and sc["outside"] == 0
    names = [s["name"] for s in doc["rollout"]["stages"]]
    assert [r["stage"] for r in sc["stages"]] == names
    rows = {r["stage"]: r for r in sc["stages"]}
    stages = {s["name"]: s for s in doc["rollout"]["stages"]}
    # the control plane in the whole-cluster window (Monday evening), the secure tenant's nodes on Saturday
    assert rows["control plane and cluster config"]["window"] == "cluster"
    assert rows["control plane and cluster config"]["start"] == "2026-12-07T18:00:00+01:00"
    by_window = {r["window"] for r in rows.values() if stages[r["stage"]]["kind"] == "wave"}
    assert by_window == {"gpu", "secure-weekend", "cluster"}
    assert all(rows[n]["window"] == "secure-weekend" for n, st in stages.items() if st["hosts"].startswith("sgpu"))
    assert recorded_start(doc) == start  # what apply lays the plan out from again
    assert doc["approvals"] == {"reflash + power cycle": ["hpc-admins"], "drain + reboot": ["hpc-admins"]}


@pytest.mark.parametrize("start", ["2026-12-08T07:00", "next tuesday"])
def test_plan_start_needs_a_zone(tmp_path, start):
    """A bare local time would be read in the machine's zone: refused before anything is planned."""
    r = CliRunner().invoke(app, ["plan", "--to", str(tmp_path / "lab.yaml"), "--from", str(tmp_path / "old.yaml"),
                                 "--start", start])
    assert r.exit_code == 2 and "--start" in r.output and "zone" in r.output
