"""The backup checks (validate/checks_backup.py) finding by finding: code, path, message and hint
written out by hand, for the branches the bad-input corpus and test_backup.py do not take.
backup-includes-scratch (a mount itself, the second scratch filesystem, scratch before reproducible,
every path of a set), backup-slurm-absent (set, left out, false), backup-rehearsal-live (storage
none, a StateSaveLocation from passthrough, either folder inside the other), backup-retention-short
at, below and above the interval, and backup-rehearsal-stale from the record beside the definition:
unreadable, never passed (with and without `adopted`, at and past the day the first is due), and
the age of the last passed run at and past max_age_days; none of them without the Slurm role or
without a definition file. Issue #18: the mutants of these checks that the corpus and
test_backup.py let through."""

from __future__ import annotations

import json
from datetime import date, timedelta

from clusterdef.errors import Severity
from clusterdef.source import load_text
from clusterdef.validate.pipeline import validate_source
from conftest import TODAY, dump_yaml
from test_checks import run

CODES = ("backup-includes-scratch", "backup-slurm-absent", "backup-rehearsal-live", "backup-retention-short",
         "backup-rehearsal-stale")
SCRATCH_HINT = ("keep authoritative data off scratch (move it to a filesystem without `scratch: true`) and drop "
                "this path; scratch mounts are excluded automatically")
CACHE_HINT = "drop the path from the set, or remove it from backup.reproducible if it is authoritative"
STALE = ("backup", "rehearsal", "max_age_days")
NEVER_HINT = ("run `clusterdef drill lab.yaml` on the controller; it records the result in lab.rehearsal.json "
              "(commit it)")


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def _backup_findings(result):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in CODES]


def _validate(data, matrix, tmp_path, today: date = TODAY, file: str | None = None):
    """Validate `data` as tmp_path/lab.yaml, so that its rehearsal record is tmp_path/lab.rehearsal.json."""
    path = dump_yaml(data, tmp_path / "lab.yaml")
    return validate_source(load_text(path.read_text(), str(path) if file is None else file), matrix, today, tmp_path)


def _record(tmp_path, *entries):
    (tmp_path / "lab.rehearsal.json").write_text(
        json.dumps({"format": "clusterdef-rehearsal/1", "rehearsals": list(entries)}), encoding="utf-8")


def _entry(day: date, result: str = "passed") -> dict:
    return {"date": f"{day.isoformat()}T03:00:00Z", "result": result, "checks": []}


def _without_slurm(lab):
    del lab["slurm"]
    for t in lab["tenants"].values():
        t.pop("slurm", None)
    for n in lab["nodes"].values():
        n["control_plane"] = "kubernetes"
    return lab


def _scratch(path, fs, mount):
    return (f"`{path}` is on scratch filesystem `{fs}` ({mount}), which is reproducible and expires: it is "
            "excluded from every backup")


def _cache(path, cache):
    return (f"`{path}` is under `{cache}`, declared reproducible in backup.reproducible: it is excluded from "
            "every backup")


# --- backup-scope ----------------------------------------------------------------------------------


def test_every_path_of_every_set_is_looked_at(lab, matrix, tmp_path):
    sets = lab["backup"]["authoritative"]["sets"]
    sets["cluster-repo"]["paths"] = ["/srv/git/lab", "/scratch", "/var/cache/apt", "/srv/ok"]
    sets["registry"]["paths"] = ["/var/lib/containerd/io/x", "/scratch/nlp/ckpt"]
    where = ("backup", "authoritative", "sets")
    assert _found(run(lab, matrix, tmp_path), "backup-includes-scratch") == [
        (Severity.ERROR, (*where, "cluster-repo", "paths", 1), _scratch("/scratch", "scratch", "/scratch"),
         SCRATCH_HINT),
        (Severity.ERROR, (*where, "cluster-repo", "paths", 2), _cache("/var/cache/apt", "/var/cache/apt"),
         CACHE_HINT),
        (Severity.ERROR, (*where, "registry", "paths", 0), _cache("/var/lib/containerd/io/x", "/var/lib/containerd"),
         CACHE_HINT),
        (Severity.ERROR, (*where, "registry", "paths", 1), _scratch("/scratch/nlp/ckpt", "scratch", "/scratch"),
         SCRATCH_HINT)]


def test_a_path_on_scratch_and_reproducible_is_named_once_as_scratch(lab, matrix, tmp_path):
    lab["backup"]["reproducible"] = ["/scratch/cache"]
    lab["backup"]["authoritative"]["sets"]["registry"]["paths"] = ["/scratch/cache/x", "/scratch/cache"]
    where = ("backup", "authoritative", "sets", "registry", "paths")
    assert _found(run(lab, matrix, tmp_path), "backup-includes-scratch") == [
        (Severity.ERROR, (*where, 0), _scratch("/scratch/cache/x", "scratch", "/scratch"), SCRATCH_HINT),
        (Severity.ERROR, (*where, 1), _scratch("/scratch/cache", "scratch", "/scratch"), SCRATCH_HINT)]


def test_the_scratch_filesystem_that_holds_the_path_is_named(lab, matrix, tmp_path):
    lab["filesystems"]["fast"] = {"kind": "xfs", "mount": "/fast", "node_groups": ["train"], "scratch": True}
    lab["filesystems"]["home"] = {"kind": "xfs", "mount": "/home", "node_groups": ["train"]}
    lab["backup"]["authoritative"]["sets"]["registry"]["paths"] = ["/home/x", "/fast/a/b", "/fastx"]
    assert _found(run(lab, matrix, tmp_path), "backup-includes-scratch") == [
        (Severity.ERROR, ("backup", "authoritative", "sets", "registry", "paths", 1),
         _scratch("/fast/a/b", "fast", "/fast"), SCRATCH_HINT)]


def test_a_reproducible_path_ending_in_other_letters_is_not_a_parent(lab, matrix, tmp_path):
    lab["backup"]["reproducible"] = ["/var/cacheX"]
    lab["backup"]["authoritative"]["sets"]["registry"]["paths"] = ["/var/cache/x", "/var/cacheX/y"]
    assert _found(run(lab, matrix, tmp_path), "backup-includes-scratch") == [
        (Severity.ERROR, ("backup", "authoritative", "sets", "registry", "paths", 1),
         _cache("/var/cacheX/y", "/var/cacheX"), CACHE_HINT)]


def test_slurm_true_without_a_slurm_section(lab, matrix, tmp_path):
    _without_slurm(lab)
    assert lab["backup"]["authoritative"]["slurm"] is True
    assert _backup_findings(run(lab, matrix, tmp_path)) == [(
        "backup-slurm-absent", Severity.ERROR, ("backup", "authoritative", "slurm"),
        "backup.authoritative.slurm is true but the definition has no `slurm` section: there is no accounting "
        "database or StateSaveLocation to back up",
        "remove `slurm: true`, or add the slurm section")]
    # the default (true) without the key is not a claim; false is no claim either
    del lab["backup"]["authoritative"]["slurm"]
    assert _backup_findings(run(lab, matrix, tmp_path)) == []
    lab["backup"]["authoritative"]["slurm"] = False
    assert _backup_findings(run(lab, matrix, tmp_path)) == []


def test_no_backup_section_no_backup_finding(lab, matrix, tmp_path):
    del lab["backup"]
    assert _backup_findings(_validate(lab, matrix, tmp_path)) == []


# --- backup-rehearsal-target -----------------------------------------------------------------------


def _live_state(state_dir, live):
    return (Severity.ERROR, ("backup", "rehearsal", "state_dir"),
            f"the rehearsal state folder `{state_dir}` overlaps slurmctld's StateSaveLocation `{live}`: the drill "
            "replaces it",
            "use a scratch folder such as /var/tmp/clusterdef-rehearsal/slurmctld")


def test_the_live_database_and_state_folder_word_for_word(lab, matrix, tmp_path):
    lab["backup"]["rehearsal"].update(database="slurm_acct_db", state_dir="/var/lib/slurm/slurmctld")
    assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == [
        (Severity.ERROR, ("backup", "rehearsal", "database"),
         "the rehearsal database `slurm_acct_db` is the live accounting database (slurm.accounting.storage_loc): "
         "the drill drops and recreates it",
         "name a scratch database, e.g. slurm_acct_db_rehearsal"),
        _live_state("/var/lib/slurm/slurmctld", "/var/lib/slurm/slurmctld")]


def test_the_database_is_compared_with_storage_loc(lab, matrix, tmp_path):
    lab["slurm"]["accounting"]["storage_loc"] = "acct_lab"
    lab["backup"]["rehearsal"]["database"] = "slurm_acct_db"
    assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == []
    lab["backup"]["rehearsal"]["database"] = "acct_lab"
    assert [f[1] for f in _found(run(lab, matrix, tmp_path), "backup-rehearsal-live")] == [
        ("backup", "rehearsal", "database")]
    # without slurmdbd there is no live accounting database to overwrite
    lab["slurm"]["accounting"] = {"storage": "none", "storage_loc": "acct_lab"}
    assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == []


def test_either_folder_inside_the_other_overlaps(lab, matrix, tmp_path):
    for state_dir in ("/var/lib/slurm", "/var/lib/slurm/slurmctld/rehearsal", "/var"):
        lab["backup"]["rehearsal"]["state_dir"] = state_dir
        assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == [
            _live_state(state_dir, "/var/lib/slurm/slurmctld")], state_dir
    for state_dir in ("/var/lib/slurm/slurmctld2", "/var/lib/slurm/slurmct", "/var/tmp/x"):
        lab["backup"]["rehearsal"]["state_dir"] = state_dir
        assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == [], state_dir


def test_the_state_folder_of_a_passthrough_statesavelocation(lab, matrix, tmp_path):
    lab["slurm"]["passthrough"] = {"StateSaveLocation": "/data/slurm/state"}
    lab["backup"]["rehearsal"]["state_dir"] = "/data/slurm/state/r"
    assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == [
        _live_state("/data/slurm/state/r", "/data/slurm/state")]
    lab["backup"]["rehearsal"]["state_dir"] = "/var/lib/slurm/slurmctld"
    assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == []


def test_no_rehearsal_target_check_without_slurm(lab, matrix, tmp_path):
    _without_slurm(lab)
    lab["backup"]["rehearsal"].update(database="slurm_acct_db", state_dir="/var/lib/slurm/slurmctld")
    assert _found(run(lab, matrix, tmp_path), "backup-rehearsal-live") == []


# --- backup-retention ------------------------------------------------------------------------------


def _short(window, interval, days):
    return [(Severity.ERROR, ("backup", "retention"),
             f"the retention keeps snapshots for {window} h, not longer than the {interval} h between backups: "
             "each backup's predecessor is forgotten by the next forget, so only the latest restore point ever "
             "survives (a corrupted or deleted-data backup cannot be stepped back from)",
             f"keep at least two intervals: e.g. within_days: {days}, or add daily_days / weekly_days / monthly_days")]


def test_retention_at_below_and_above_the_interval(lab, matrix, tmp_path):
    lab["backup"]["retention"] = {"within_days": 1}  # 24 h, daily backups: as long as the interval
    assert _found(run(lab, matrix, tmp_path), "backup-retention-short") == _short(24, 24, 2)
    lab["backup"]["retention"] = {"daily_days": 2}
    assert _found(run(lab, matrix, tmp_path), "backup-retention-short") == []
    lab["backup"]["schedule"] = {"interval_hours": 168}
    lab["backup"]["retention"] = {"monthly_days": 7}
    assert _found(run(lab, matrix, tmp_path), "backup-retention-short") == _short(168, 168, 14)
    lab["backup"]["retention"] = {"weekly_days": 8}
    assert _found(run(lab, matrix, tmp_path), "backup-retention-short") == []


def test_no_retention_at_all_keeps_the_latest_only(lab, matrix, tmp_path):
    lab["backup"]["schedule"] = {"interval_hours": 12}
    lab["backup"]["retention"] = {}
    assert _found(run(lab, matrix, tmp_path), "backup-retention-short") == _short(0, 12, 2)
    lab["backup"]["schedule"] = {"interval_hours": 1}
    assert _found(run(lab, matrix, tmp_path), "backup-retention-short") == _short(0, 1, 2)
    lab["backup"]["retention"] = {"within_days": 1}
    assert _found(run(lab, matrix, tmp_path), "backup-retention-short") == []


# --- backup-rehearsal ------------------------------------------------------------------------------


def test_never_rehearsed_without_adopted_warns_at_once(lab, matrix, tmp_path):
    del lab["backup"]["rehearsal"]["adopted"]
    assert _backup_findings(_validate(lab, matrix, tmp_path)) == [(
        "backup-rehearsal-stale", Severity.WARNING, STALE,
        "the restore has never been rehearsed successfully (no passed run in lab.rehearsal.json)", NEVER_HINT)]
    # failed runs and entries without a usable date are no passed run
    _record(tmp_path, _entry(TODAY, "failed"), {"result": "passed"}, {"date": "yesterday", "result": "passed"})
    assert _found(_validate(lab, matrix, tmp_path), "backup-rehearsal-stale") == [(
        Severity.WARNING, STALE,
        "the restore has never been rehearsed successfully (no passed run in lab.rehearsal.json)", NEVER_HINT)]


def test_the_first_rehearsal_is_due_max_age_days_after_adopted(lab, matrix, tmp_path):
    lab["backup"]["rehearsal"] = {"max_age_days": 7, "adopted": "2026-11-23"}  # TODAY is 2026-11-30
    assert _found(_validate(lab, matrix, tmp_path), "backup-rehearsal-stale") == []
    lab["backup"]["rehearsal"]["adopted"] = "2026-11-22"
    assert _found(_validate(lab, matrix, tmp_path), "backup-rehearsal-stale") == [(
        Severity.WARNING, STALE,
        "the restore has never been rehearsed successfully (no passed run in lab.rehearsal.json), and the first "
        "was due 7 days after backup.rehearsal.adopted (2026-11-22)", NEVER_HINT)]
    assert _found(_validate(lab, matrix, tmp_path, TODAY - timedelta(days=1)), "backup-rehearsal-stale") == []


def test_the_age_of_the_last_passed_rehearsal(lab, matrix, tmp_path):
    lab["backup"]["rehearsal"] = {"max_age_days": 20, "adopted": "2026-11-29"}
    _record(tmp_path, _entry(date(2026, 10, 1)), _entry(date(2026, 11, 10)), _entry(date(2026, 11, 20), "failed"))
    assert _found(_validate(lab, matrix, tmp_path), "backup-rehearsal-stale") == []  # 20 days: not more
    assert _found(_validate(lab, matrix, tmp_path, date(2026, 12, 1)), "backup-rehearsal-stale") == [(
        Severity.WARNING, STALE,
        "the last passed restore rehearsal was 21 days ago (2026-11-10), more than backup.rehearsal.max_age_days "
        "(20)",
        "run `clusterdef drill lab.yaml` again and commit lab.rehearsal.json")]
    # a recent plan does not excuse an old rehearsal, and a long-adopted one does not condemn a recent one
    lab["backup"]["rehearsal"]["adopted"] = "2020-01-01"
    assert _found(_validate(lab, matrix, tmp_path), "backup-rehearsal-stale") == []


def test_an_unreadable_record(lab, matrix, tmp_path):
    (tmp_path / "lab.rehearsal.json").write_text(json.dumps({"format": "other", "rehearsals": []}), encoding="utf-8")
    assert _backup_findings(_validate(lab, matrix, tmp_path)) == [(
        "backup-rehearsal-stale", Severity.WARNING, STALE,
        "the restore rehearsal record cannot be read: lab.rehearsal.json: not a clusterdef-rehearsal/1 record",
        "run `clusterdef drill lab.yaml` (it rewrites a valid record), or remove lab.rehearsal.json")]


def test_no_rehearsal_is_due_without_the_slurm_role(lab, matrix, tmp_path):
    del lab["backup"]["rehearsal"]["adopted"]
    lab["backup"]["authoritative"]["slurm"] = False  # Slurm is there, but not backed up
    assert _found(_validate(lab, matrix, tmp_path), "backup-rehearsal-stale") == []
    lab["backup"]["authoritative"]["slurm"] = True
    _without_slurm(lab)  # backed up, but there is no Slurm
    assert _found(_validate(lab, matrix, tmp_path), "backup-rehearsal-stale") == []


def test_no_rehearsal_record_without_a_definition_file(lab, matrix, tmp_path):
    del lab["backup"]["rehearsal"]["adopted"]
    assert _found(_validate(lab, matrix, tmp_path, file=""), "backup-rehearsal-stale") == []
