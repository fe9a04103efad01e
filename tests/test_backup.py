"""The backup target (render/backup.py), its checks, the rehearsal record, and the restore drill
executed on real software (docs/backup.md):

- restore drill: MariaDB + slurmdbd loaded with the rendered qos.sh and accounts.cfg, slurmctld
  (host Slurm) with pending jobs (held, and waiting on a dependency); the rendered
  backup/slurmdbd/backup.sh (the database dump, on the accounting host) and backup/slurm/backup.sh
  (StateSaveLocation, on the controller) write to a local restic repository under the hosts the
  rendering names; the database is dropped and the StateSaveLocation removed; the rendered
  restore.sh scripts bring them back; `sacctmgr show assoc/qos`
  equal what was loaded and slurmctld comes back with the same pending jobs. Then `clusterdef drill`
  rehearses into a scratch database and state folder and records the result, which `validate` reads.
- etcd: a real etcd member, the rendered backup/etcd/backup.sh (etcdctl snapshot save) and
  restore.sh (snapshot restore into the data directory), the key is back.

The only adjustments to rendered files are the test machine's: the MySQL client options point at
the test's MariaDB (root, no password), and the vault variables are resolved with Jinja as Ansible
would (`{{ vault_restic_password }}` -> a random test password)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from clusterdef.model import Definition
from clusterdef.render import backup as backup_target
from clusterdef.render import slurm as slurm_target
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml
from slurm_helpers import (MariaDB, accounting_cluster, free_port, host_build, missing, stop, stop_all,
                           wait_for)
from test_slurm_accounting import accounting_lab, table

REPO = Path(__file__).resolve().parents[1]


def _tree(data: dict, matrix) -> tuple[Definition, dict[str, str]]:
    d = Definition.model_validate(data)
    return d, backup_target.render(resolve(d, matrix, CLUSTERS))


def _codes(data: dict, tmp_path: Path, today: date = TODAY) -> list:
    result = validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, today)
    return result.findings


# --- render -------------------------------------------------------------------------------------


def test_lab_plan_names_authoritative_and_reproducible(lab, matrix):
    d, tree = _tree(lab, matrix)
    plan = json.loads(tree["backup/plan.json"])
    assert set(plan["authoritative"]) == {"slurmdbd", "slurm", "etcd", "set-cluster-repo", "set-registry",
                                          "data-imagenet-eu", "data-secure-weights"}  # datasets: their own retention
    # the dump where the database is (slurmdbd's host, StorageHost=localhost), the state copy where
    # slurmctld writes it
    assert plan["authoritative"]["slurmdbd"]["host"] == d.slurm.accounting.host == "slurmdbd01"
    assert plan["authoritative"]["slurm"]["host"] == d.slurm.controllers[0] == "slurmctl01"
    assert plan["authoritative"]["etcd"]["host"] == d.backup.authoritative.etcd.host
    # every scratch mount and every declared reproducible path is excluded, and only those
    assert plan["reproducible"] == ["/scratch", "/var/cache/apt", "/var/lib/containerd"]
    for role in plan["authoritative"]:
        script = tree[f"backup/{role}/backup.sh"]
        assert "--exclude /scratch --exclude /var/cache/apt --exclude /var/lib/containerd" in script, role
        if role.startswith("data-"):  # a dataset keeps its snapshots exactly its retention_days
            days = d.datasets[role.removeprefix("data-")].retention_days
            assert f'restic forget --host "$HOST" --tag "$TAG" --keep-within {days}d --prune' in script, role
            continue
        assert ("restic forget --host \"$HOST\" --tag \"$TAG\" --keep-within 2d --keep-within-daily 14d "
                "--keep-within-weekly 56d --keep-within-monthly 365d --prune") in script, role
        assert f"TAG=clusterdef-lab-{role}\n" in script
        assert "--yes" in tree[f"backup/{role}/restore.sh"]
        for name in (f"clusterdef-backup-{role}.service", f"clusterdef-backup-{role}.timer"):
            assert f"backup/{role}/{name}" in tree
    dump, slurm = tree["backup/slurmdbd/backup.sh"], tree["backup/slurm/backup.sh"]
    assert "mysqldump --defaults-extra-file=\"$ETC/slurmdbd/my.cnf\" --single-transaction --quick slurm_acct_db" in dump
    assert "HOST=slurmdbd01\n" in dump and "STATE=" not in dump
    assert "STATE=${CLUSTERDEF_SLURM_STATE:-/var/lib/slurm/slurmctld}" in slurm and "mysqldump" not in slurm
    assert "HOST=slurmctl01\n" in slurm
    assert "etcdctl snapshot save" in tree["backup/etcd/backup.sh"]
    assert "/srv/git/lab" in tree["backup/set-cluster-repo/backup.sh"]


def test_each_job_on_the_host_that_has_its_data(lab, matrix):
    """The dump runs where slurmdbd runs (slurmdbd.conf's DbdHost), connecting to StorageHost as
    slurmdbd does: localhost there when the database is local, the database server otherwise (the
    StorageUser is granted from slurmdbd's host). The state copy runs on the primary controller. The
    inventory's backup group and group_vars place each job on its host (roles/backup installs a job
    on the host named in it)."""
    from clusterdef.render.ansible.render import variables

    def rendered(data):
        d = Definition.model_validate(data)
        r = resolve(d, matrix, CLUSTERS)
        return r, backup_target.render(r), backup_target.install(r)

    def conf(tree, key):
        return re.search(rf"^{key}=(.*)$", tree["slurm/slurmdbd.conf.j2"], re.M)[1]

    r, tree, jobs = rendered(lab)
    st = slurm_target.render(r)
    assert jobs["slurmdbd"]["host"] == conf(st, "DbdHost") == "slurmdbd01" and conf(st, "StorageHost") == "localhost"
    assert "host=localhost\n" in tree["backup/slurmdbd/my.cnf.j2"]
    assert jobs["slurm"]["host"] == "slurmctl01"
    assert [f["dest"] for f in jobs["slurmdbd"]["secrets"]][-1] == "/etc/clusterdef/backup/slurmdbd/my.cnf"
    assert not any("my.cnf" in f["dest"] for f in jobs["slurm"]["secrets"])
    group = variables(r)["backup"]["backup_jobs"]
    assert {k: v["host"] for k, v in group.items()}["slurmdbd"] == "slurmdbd01"
    # a separate database server: the dump still runs on slurmdbd's host, against that server
    lab["slurm"]["accounting"]["storage_host"] = "db01.lab.example"
    r, tree, jobs = rendered(lab)
    assert jobs["slurmdbd"]["host"] == "slurmdbd01" and "host=db01.lab.example\n" in tree["backup/slurmdbd/my.cnf.j2"]
    # no accounting host: slurmdbd runs on the first controller, and so does the dump
    del lab["slurm"]["accounting"]["host"]
    _, _, jobs = rendered(lab)
    assert jobs["slurmdbd"]["host"] == jobs["slurm"]["host"] == "slurmctl01"


def _role_packages(jobs: dict, host: str) -> list[str]:
    """What roles/backup's apt task installs on `host` with these rendered backup_jobs (the role's own Jinja)."""
    from role_jinja import task_values

    hostvars = {"backup_jobs": json.loads(json.dumps(jobs)), "backup_host_name": host}  # plain str, not !unsafe
    mine = task_values("backup", "ansible.builtin.set_fact", "backup_mine", hostvars)[0]
    return [p for names in task_values("backup", "ansible.builtin.apt", "name", hostvars, {"backup_mine": mine})
            for p in names]


def _commands_run(script: str, commands: list[str]) -> set[str]:
    """Those of `commands` a shell script calls (comment lines aside)."""
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    return {c for c in commands if re.search(rf"(^|[\s;|&(]){re.escape(c)}(\s|$)", code, re.M)}


def test_each_host_installs_what_its_jobs_run(lab, matrix):
    """roles/backup installs, on each job's host, the packages carrying the commands its rendered scripts
    call (knowledge/backup_packages.yaml), and nothing a job there does not call: restic everywhere, the
    MariaDB client where the accounting database is dumped, etcdctl only where etcd is snapshotted."""
    from clusterdef.knowledge.backup import backup_packages
    from clusterdef.render.ansible.render import variables

    carried = backup_packages()["commands"]
    r = resolve(Definition.model_validate(lab), matrix, CLUSTERS)
    tree, jobs = backup_target.render(r), variables(r)["backup"]["backup_jobs"]
    for role, job in jobs.items():
        scripts = tree[f"backup/{role}/backup.sh"] + tree[f"backup/{role}/restore.sh"]
        called = {pkg for pkg, cmds in carried.items() if _commands_run(scripts, cmds)}
        assert called == set(job["packages"]), (role, called, job["packages"])
    hosts = {job["host"] for job in jobs.values()}
    installs = {h: sorted(_role_packages(jobs, h)) for h in sorted(hosts)}
    assert installs == {"k8sctl01": ["etcd-client", "restic"], "mgmt01": ["restic"], "registry01": ["restic"],
                        "slurmctl01": ["restic"], "slurmdbd01": ["mariadb-client", "restic"],
                        # the datasets' jobs, on their filesystems' admin hosts (storage.admin_host)
                        "kgpu01": ["restic"], "sgpu01": ["restic"]}, installs
    assert _role_packages(jobs, "gpu001") == []  # a host without a job installs nothing
    # no etcd job: etcdctl nowhere
    del lab["backup"]["authoritative"]["etcd"]
    jobs = variables(resolve(Definition.model_validate(lab), matrix, CLUSTERS))["backup"]["backup_jobs"]
    assert "etcd" not in jobs
    assert not [h for h in {j["host"] for j in jobs.values()} if "etcd-client" in _role_packages(jobs, h)]
    assert sorted(_role_packages(jobs, "slurmdbd01")) == ["mariadb-client", "restic"]


def test_secrets_only_by_reference(lab, matrix):
    lab["backup"]["repository"]["password_ref"] = "vault_lab_restic"
    d, tree = _tree(lab, matrix)
    assert tree["backup/restic.password.j2"] == "{{ vault_lab_restic }}\n"
    cnf = tree["backup/slurmdbd/my.cnf.j2"]
    assert "password={{ vault_slurmdbd_pass }}\n" in cnf and "user=slurm\n" in cnf
    # No other Jinja anywhere: the scripts and units are plain files.
    for rel, text in tree.items():
        if not rel.endswith(".j2"):
            assert "{{" not in text and "{%" not in text, rel


def test_scripts_parse_and_calendar_is_systemds(lab, matrix, tmp_path):
    _, tree = _tree(lab, matrix)
    for rel, text in tree.items():
        if rel.endswith(".sh"):
            r = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
            assert r.returncode == 0, (rel, r.stderr)
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    for hours, at in ((24, 2), (6, 3), (168, 1), (1, 0)):
        lab["backup"]["schedule"] = {"interval_hours": hours, "at_hour": at}
        lab["backup"]["retention"] = {"within_days": 30}
        _, tree = _tree(lab, matrix)
        cal = re.search(r"^OnCalendar=(.*)$", tree["backup/slurm/clusterdef-backup-slurm.timer"], re.M)[1]
        r = subprocess.run(["systemd-analyze", "calendar", "--iterations=3", cal], capture_output=True, text=True)
        assert r.returncode == 0, (cal, r.stderr)
        nexts = [ln.split(":", 1)[1].strip() for ln in r.stdout.splitlines() if "Next elapse" in ln or
                 re.match(r"\s+Iter\. #\d", ln)]
        assert len(nexts) == 3, r.stdout
        from datetime import datetime
        stamps = [datetime.strptime(" ".join(n.split()[1:3]), "%Y-%m-%d %H:%M:%S") for n in nexts]
        assert {(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])} == {hours * 3600}, (cal, r.stdout)
        assert all(s.hour % min(hours, 24) == at % min(hours, 24) for s in stamps), (cal, r.stdout)


def test_values_past_the_types_stay_data(lab, matrix, tmp_path):
    """The second wall: a path or URL the types would refuse (built without validation here) is
    still one shell word; running the script's assignments creates no marker file."""
    marker = tmp_path / "pwned"
    d = Definition.model_validate(lab)
    evil_set = d.backup.authoritative.sets["cluster-repo"].model_copy(update={"paths": (f"/srv/$(touch {marker})",)})
    evil = d.backup.model_copy(update={
        "repository": d.backup.repository.model_copy(update={"url": f"/r';touch {marker};'"}),
        "authoritative": d.backup.authoritative.model_copy(update={"sets": {"cluster-repo": evil_set}})})
    tree = backup_target.render(resolve(d.model_copy(update={"backup": evil}), matrix, CLUSTERS))
    script = tree["backup/set-cluster-repo/backup.sh"]
    assert f"'/srv/$(touch {marker})'" in script
    # run it with restic standing in as `echo`: the words reach it unexpanded
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "restic").write_text('#!/bin/sh\nprintf "%s\\n" "$@" >>"$ARGS"\n')
    (bin_dir / "restic").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGS": str(tmp_path / "args"), "CLUSTERDEF_BACKUP_ETC": str(tmp_path)}
    r = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert f"/srv/$(touch {marker})" in (tmp_path / "args").read_text().splitlines()
    r = subprocess.run(["sh", "-c", script.split("HOST=")[0] + 'printf %s "$RESTIC_REPOSITORY"'], env=env,
                       capture_output=True, text=True)
    assert r.stdout == f"/r';touch {marker};'" and not marker.exists()


def test_repository_url_with_a_password_is_refused(lab, tmp_path):
    lab["backup"]["repository"]["url"] = "rest:https://restic:hunter2@backup01:8000/lab"
    found = [f for f in _codes(lab, tmp_path) if f.severity.value == "error"]
    assert [f.path for f in found] == [("backup", "repository", "url")], found
    assert "password" in found[0].message and "password_ref" in found[0].message


# --- checks -------------------------------------------------------------------------------------


def test_checks(lab, tmp_path):
    def codes(data):
        return {(f.code, f.path) for f in _codes(data, tmp_path) if f.severity.value == "error"}

    ok = json.loads(json.dumps(lab))
    assert codes(ok) == set()
    # retention shorter than (or as long as) the interval
    bad = json.loads(json.dumps(lab))
    del bad["service"]["recovery"]  # a weekly backup misses the lab's RPO too (service-rpo-unmet: test_service.py)
    bad["backup"]["schedule"] = {"interval_hours": 168}
    bad["backup"]["retention"] = {"daily_days": 3}
    assert codes(bad) == {("backup-retention-short", ("backup", "retention"))}
    bad["backup"]["retention"] = {"within_days": 7}
    assert codes(bad) == {("backup-retention-short", ("backup", "retention"))}
    bad["backup"]["retention"] = {"within_days": 7, "weekly_days": 28}
    assert codes(bad) == set()
    # a set on scratch, a set under a reproducible path
    bad = json.loads(json.dumps(lab))
    bad["backup"]["authoritative"]["sets"]["registry"]["paths"] = ["/var/lib/registry", "/scratch/vision/ckpt"]
    assert codes(bad) == {("backup-includes-scratch", ("backup", "authoritative", "sets", "registry", "paths", 1))}
    bad["backup"]["authoritative"]["sets"]["registry"]["paths"] = ["/var/lib/containerd/io"]
    assert codes(bad) == {("backup-includes-scratch", ("backup", "authoritative", "sets", "registry", "paths", 0))}
    # /scratchy is not /scratch
    bad["backup"]["authoritative"]["sets"]["registry"]["paths"] = ["/scratchy"]
    assert codes(bad) == set()
    # a rehearsal target that is the live database or overlaps StateSaveLocation
    bad = json.loads(json.dumps(lab))
    bad["backup"]["rehearsal"] = {"state_dir": "/var/lib/slurm"}
    assert codes(bad) == {("backup-rehearsal-live", ("backup", "rehearsal", "state_dir"))}
    bad["backup"]["rehearsal"] = {"database": "slurm_acct_db", "state_dir": "/var/lib/slurm/slurmctld/x"}
    assert codes(bad) == {("backup-rehearsal-live", ("backup", "rehearsal", "state_dir")),
                          ("backup-rehearsal-live", ("backup", "rehearsal", "database"))}
    # slurm: true without a slurm section
    bad = json.loads(json.dumps(lab))
    del bad["slurm"]
    for t in bad["tenants"].values():
        t.pop("slurm", None)
    for n in bad["nodes"].values():
        n["control_plane"] = "kubernetes"
    assert ("backup-slurm-absent", ("backup", "authoritative", "slurm")) in codes(bad)
    del bad["backup"]["authoritative"]["slurm"]
    assert not any(c == "backup-slurm-absent" for c, _ in codes(bad))


def _entry(day: date, result: str = "passed") -> dict:
    return {"date": f"{day.isoformat()}T03:00:00Z", "result": result, "checks": []}


def test_rehearsal_record_is_read_by_validate(lab, tmp_path):
    record = tmp_path / "lab.rehearsal.json"

    def stale(today=TODAY):
        return [f for f in _codes(lab, tmp_path, today) if f.code == "backup-rehearsal-stale"]

    assert stale() == []  # never rehearsed, but the first rehearsal is due 30 days after `adopted`
    adopted = date.fromisoformat(str(lab["backup"]["rehearsal"]["adopted"]))
    assert stale(adopted + timedelta(days=30)) == []
    due = stale(adopted + timedelta(days=31))
    assert len(due) == 1 and "never" in due[0].message and "adopted" in due[0].message
    del lab["backup"]["rehearsal"]["adopted"]  # without it, never rehearsed warns at once
    found = stale()
    assert len(found) == 1 and "never" in found[0].message
    assert found[0].path == ("backup", "rehearsal", "max_age_days") and found[0].severity.value == "warning"
    assert found[0].line > 0 and found[0].file.endswith("lab.yaml")
    record.write_text(json.dumps({"format": "clusterdef-rehearsal/1", "rehearsals": [
        _entry(TODAY - timedelta(days=10)), _entry(TODAY - timedelta(days=1), "failed")]}))
    assert stale() == []  # a passed run 10 days ago is within 30 days; the failed one counts for nothing
    late = stale(TODAY + timedelta(days=21))
    assert len(late) == 1 and "31 days ago" in late[0].message
    lab["backup"]["rehearsal"]["max_age_days"] = 40
    assert stale(TODAY + timedelta(days=21)) == []
    record.write_text("{not json")
    broken = stale()
    assert len(broken) == 1 and "cannot be read" in broken[0].message


def test_the_rehearsal_record_is_written_whole_through_a_fresh_temporary_file(tmp_path, monkeypatch):
    """append_record writes a new temporary sibling and renames it: a file or link at the old fixed name
    `<record>.tmp` is never written through, and a failed write leaves the record as it was and no temporary."""
    from clusterdef import drill, writer

    record = tmp_path / "lab.rehearsal.json"
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's\n")
    (tmp_path / "lab.rehearsal.json.tmp").symlink_to(victim)
    drill.append_record(record, _entry(TODAY))
    assert victim.read_text() == "someone else's\n"
    assert [r["date"] for r in drill.read_record(record)] == [f"{TODAY.isoformat()}T03:00:00Z"]
    before = sorted(p.name for p in tmp_path.iterdir())

    def full(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writer.os, "replace", full)
    with pytest.raises(writer.OutputError, match="No space left"):
        drill.append_record(record, _entry(TODAY, "failed"))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert [r["result"] for r in drill.read_record(record)] == ["passed"]


# --- the restore drill, executed -------------------------------------------------------------------


def _need(*tools: str) -> None:
    for tool in tools:
        if not shutil.which(tool):
            missing(f"{tool} (scripts/deps.d/85-backup.sh installs it)")


def _resolve_vault(text: str, **variables: str) -> str:
    """What the Ansible template task does with a `.j2` file: resolve the vault variables."""
    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True).from_string(text).render(
        **variables)


def _backup_env(tmp_path: Path, tree: dict, db: MariaDB | None, state: Path | None) -> dict:
    etc = tmp_path / "etc-backup"
    (etc / "slurmdbd").mkdir(parents=True, exist_ok=True)
    (etc / "restic.password").write_text(_resolve_vault(tree["backup/restic.password.j2"],
                                                        vault_restic_password=secrets.token_hex(16)))
    if db is not None:
        cnf = _resolve_vault(tree["backup/slurmdbd/my.cnf.j2"], vault_slurmdbd_pass="")
        # test machine: the test's MariaDB on loopback, as root without a password
        cnf = re.sub(r"^host=.*$", "host=127.0.0.1", cnf, flags=re.M)
        cnf = re.sub(r"^port=.*$", f"port={db.port}", cnf, flags=re.M)
        cnf = re.sub(r"^user=.*$", "user=root", cnf, flags=re.M)
        (etc / "slurmdbd/my.cnf").write_text(cnf)
    env = {**os.environ, "CLUSTERDEF_BACKUP_ETC": str(etc), "CLUSTERDEF_BACKUP_STAGE": str(tmp_path / "stage"),
           "RESTIC_REPOSITORY": str(tmp_path / "repo"), "RESTIC_CACHE_DIR": str(tmp_path / "restic-cache"),
           "TMPDIR": str(tmp_path)}
    if state is not None:
        env["CLUSTERDEF_SLURM_STATE"] = str(state)
    return env


def _sh(tmp_path: Path, tree: dict, rel: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / rel.replace("/", "_")
    script.write_text(tree[rel])
    return subprocess.run(["sh", str(script), *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def stack():
    started = []
    yield started
    stop_all(started)


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.slurm_live
def test_restore_drill(lab, matrix, stack, tmp_path):
    from test_slurm_daemons import _on_host_slurm

    _need("restic", "mysqldump", "mysql")
    build = host_build()
    data = accounting_lab(lab)
    defn = dump_yaml(data, tmp_path / "lab.yaml")
    assert validate_file(defn, MATRICES, TODAY).ok
    d = Definition.model_validate(data)
    resolved = resolve(d, _on_host_slurm(matrix, data["cluster"]["matrix"], build.version), CLUSTERS)
    tree = {**slurm_target.render(resolved), **backup_target.render(resolved)}

    work, ctl, dbd, env = accounting_cluster(build, tree, stack, "cdbackup-")
    db = dbd.db

    def accounting() -> tuple[list, list]:
        assoc = dbd.sacctmgr("show", "assoc", "-P", f"cluster={d.cluster.name}",
                             "format=account,parentname,user,grptres,fairshare,qos,defaultqos").stdout
        qos = dbd.sacctmgr("show", "qos", "-P", "format=name,priority,preempt,preemptmode,maxtrespu,maxwall").stdout
        return sorted(map(tuple, (r.values() for r in table(assoc)))), sorted(map(tuple, (r.values() for r in table(qos))))

    loaded = accounting()
    accounts = {row[0] for row in loaded[0]}
    assert {t.slurm.account for t in d.tenants.values() if t.slurm} <= accounts, loaded[0]
    assert set(d.slurm.qos) <= {row[0] for row in loaded[1]}, loaded[1]

    # Pending jobs: two held, one waiting on a dependency (no slurmd runs: nothing can start).
    def sbatch(*args) -> str:
        r = build.run("sbatch", "--parsable", "-t", "5", "-o", "/dev/null", *args, "--wrap", "sleep 30",
                      env=ctl.env, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.strip().split(";")[0]

    first = sbatch("--hold", "-A", d.tenants["nlp"].slurm.account, "-p", "train", "--gres=gpu:1", "-J", "held-nlp")
    sbatch("--hold", "-A", d.tenants["vision"].slurm.account, "-p", "debug", "--qos=large", "-J", "held-vision")
    sbatch(f"--dependency=afterok:{first}", "-A", d.tenants["nlp"].slurm.account, "-J", "after-nlp")

    def queue() -> list[str]:
        out = build.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%a|%P|%q|%b|%E", env=ctl.env).stdout
        return sorted(ln for ln in out.splitlines() if ln.strip())

    wait_for(lambda: len(queue()) == 3 and all("|PENDING|" in q for q in queue()), 20, "3 pending jobs")
    queued = queue()
    assert [q.split("|")[-1] for q in queued] == ["(null)", "(null)", f"afterok:{first}(unfulfilled)"], queued

    def held() -> set[str]:
        out = build.run("squeue", "-h", "-t", "PENDING", "-o", "%i %r", env=ctl.env).stdout
        return {ln.split()[0] for ln in out.splitlines() if ln.endswith(" JobHeldUser")}

    held_before = held()
    assert len(held_before) == 2, held_before
    # slurmctld writes job_state shortly after a change; the backup takes it while slurmctld runs.
    # A change made once all three jobs are queued (a comment on one) makes the job_state written
    # after it hold all three: a job_state written between two submissions would restore fewer.
    state = work.host / "state"
    marker = time.time()
    time.sleep(1.1)  # so that a job_state written for the change has a later mtime, at 1 s resolution too
    build.run("scontrol", "update", f"jobid={first}", "comment=backup-drill", env=ctl.env)
    wait_for(lambda: (state / "job_state").exists() and (state / "job_state").stat().st_mtime > marker
             and all(any(state.glob(f"hash.*/job.{q.split('|')[0]}")) for q in queued), 30,
             "the jobs saved in StateSaveLocation")
    time.sleep(1)

    benv = _backup_env(tmp_path, tree, db, state)
    jobs = backup_target.install(resolved)  # what group_vars/backup.yml places on each host
    for attempt in (1, 2):  # the second run exercises forget with a predecessor
        for role in ("slurmdbd", "slurm"):
            r = _sh(tmp_path, tree, f"backup/{role}/backup.sh", benv)
            assert r.returncode == 0, f"{role} backup.sh (run {attempt}) exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    for role, host in (("slurmdbd", d.slurm.accounting.host), ("slurm", d.slurm.controllers[0])):
        snaps = json.loads(subprocess.run(["restic", "snapshots", "--json", "--tag", f"clusterdef-lab-{role}"], env={
            **benv, "RESTIC_PASSWORD_FILE": benv["CLUSTERDEF_BACKUP_ETC"] + "/restic.password"},
                                          capture_output=True, text=True, check=True).stdout)
        # each snapshot is the one of the host the rendering runs its job on
        assert len(snaps) == 2 and {s["hostname"] for s in snaps} == {jobs[role]["host"]} == {host}, snaps
    assert (tmp_path / "stage/slurmdbd/accounting.sql").read_text().count("CREATE TABLE") > 10
    assert not (tmp_path / "stage/slurm/accounting.sql").exists()

    # --- disaster: the database dropped, StateSaveLocation gone ---
    ctl.stop()
    dbd.stop()
    mysql = ["mysql", "-h", "127.0.0.1", "-P", str(db.port), "-u", "root", "-N", "-B"]
    subprocess.run(mysql + ["-e", "DROP DATABASE slurm_acct_db"], check=True, timeout=60)
    assert "slurm_acct_db" not in subprocess.run(mysql + ["-e", "SHOW DATABASES"], capture_output=True, text=True,
                                                 check=True).stdout.split()
    shutil.rmtree(state)

    for role in ("slurmdbd", "slurm"):
        r = _sh(tmp_path, tree, f"backup/{role}/restore.sh", benv)
        assert r.returncode == 2 and "--yes" in r.stderr, r.stdout + r.stderr  # refuses without --yes
    assert not state.exists()
    for role in ("slurmdbd", "slurm"):
        r = _sh(tmp_path, tree, f"backup/{role}/restore.sh", benv, "--yes")
        assert r.returncode == 0, r.stdout + r.stderr

    dbd.start()
    ctl.start()
    assert accounting() == loaded
    wait_for(lambda: len(queue()) == 3, 20, "the jobs back in the queue")
    assert queue() == queued
    assert held() == held_before

    # --- `clusterdef drill`: into the declared scratch target, recorded, read by validate ---
    rehearsal = tmp_path / "rehearsal" / "slurmctld"
    denv = {**benv, "CLUSTERDEF_MATRICES": str(MATRICES)}
    denv.pop("CLUSTERDEF_SLURM_STATE")
    r = subprocess.run([sys.executable, "-m", "clusterdef", "drill", str(defn), "--state-dir", str(rehearsal),
                        "--format", "json", "--today", TODAY.isoformat()],
                       env=denv, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    entry = json.loads(r.stdout)
    assert entry["result"] == "passed" and len(entry["checks"]) == 6, entry
    assert entry["target"] == {"database": d.backup.rehearsal.database, "state_dir": str(rehearsal)}
    record = json.loads((tmp_path / "lab.rehearsal.json").read_text())
    assert record["format"] == "clusterdef-rehearsal/1" and record["rehearsals"][-1]["result"] == "passed"
    assert (rehearsal / "job_state").is_file()
    assert accounting() == loaded  # the live database was not touched
    day = date.fromisoformat(entry["date"][:10])
    stale = [f.code for f in validate_file(defn, MATRICES, day).findings]
    assert "backup-rehearsal-stale" not in stale
    later = day + timedelta(days=d.backup.rehearsal.max_age_days + 1)
    assert "backup-rehearsal-stale" in [f.code for f in validate_file(defn, MATRICES, later).findings]

    # A rehearsal that cannot restore is recorded as failed, exit 1.
    denv["RESTIC_REPOSITORY"] = str(tmp_path / "no-repo")
    r = subprocess.run([sys.executable, "-m", "clusterdef", "drill", str(defn), "--state-dir", str(rehearsal)],
                       env=denv, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert r.returncode == 1 and "failed" in r.stdout, r.stdout + r.stderr
    assert json.loads((tmp_path / "lab.rehearsal.json").read_text())["rehearsals"][-1]["result"] == "failed"
    assert "fatal" not in ctl.log().lower() and "fatal" not in dbd.log().lower()


@pytest.mark.slow
def test_etcd_snapshot_and_restore(lab, matrix, tmp_path, stack):
    _need("restic", "etcd", "etcdctl")
    _, tree = _tree(lab, matrix)
    data_dir = tmp_path / "etcd-data"
    client, peer = free_port(), free_port()

    def start():
        log = open(tmp_path / "etcd.out", "ab")
        p = subprocess.Popen(["etcd", "--name", "k8sctl01", "--data-dir", str(data_dir),
                              "--listen-client-urls", f"http://127.0.0.1:{client}",
                              "--advertise-client-urls", f"http://127.0.0.1:{client}",
                              "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                              "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                              "--initial-cluster", f"k8sctl01=http://127.0.0.1:{peer}"],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        stack.append(SimpleNamespace(stop=lambda: stop(p)))
        return p

    etcd_env = {**os.environ, "ETCDCTL_API": "3", "ETCDCTL_ENDPOINTS": f"http://127.0.0.1:{client}"}

    def ctl(*args, check=True):
        return subprocess.run(["etcdctl", *args], env=etcd_env, capture_output=True, text=True, timeout=30, check=check)

    proc = start()
    wait_for(lambda: ctl("endpoint", "health", check=False).returncode == 0, 30, "etcd healthy", proc,
             tmp_path / "etcd.out")
    ctl("put", "/registry/namespaces/vision", "tenant-vision")
    # plain HTTP on loopback: no client certificates (the rendered kubeadm paths apply when these are unset)
    benv = {**_backup_env(tmp_path, tree, None, None), "ETCDCTL_ENDPOINTS": etcd_env["ETCDCTL_ENDPOINTS"],
            "ETCDCTL_CACERT": "", "ETCDCTL_CERT": "", "ETCDCTL_KEY": "", "CLUSTERDEF_ETCD_DATA": str(data_dir),
            "CLUSTERDEF_ETCD_PEER": f"http://127.0.0.1:{peer}"}
    r = _sh(tmp_path, tree, "backup/etcd/backup.sh", benv)
    assert r.returncode == 0, r.stdout + r.stderr
    ctl("del", "/registry/namespaces/vision")
    stop(proc)
    shutil.rmtree(data_dir)
    r = _sh(tmp_path, tree, "backup/etcd/restore.sh", benv, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    proc = start()
    wait_for(lambda: ctl("endpoint", "health", check=False).returncode == 0, 30, "restored etcd healthy", proc,
             tmp_path / "etcd.out")
    assert ctl("get", "--print-value-only", "/registry/namespaces/vision").stdout.strip() == "tenant-vision"


def test_drill_refuses_bad_input(lab, tmp_path):
    """Exit 2 with a message, never a traceback, before anything is restored."""
    from cli_runner import CliRunner

    from clusterdef.cli import app

    def drill(data, *args):
        path = dump_yaml(data, tmp_path / "lab.yaml")
        return CliRunner().invoke(app, ["drill", str(path), "--today", TODAY.isoformat(), *args])

    r = drill(lab, "--database", "slurm_acct_db")
    assert r.exit_code == 2 and "live accounting database" in r.output, r.output
    r = drill(lab, "--database", "x;drop")
    assert r.exit_code == 2 and "not a database name" in r.output, r.output
    r = drill(lab, "--state-dir", "relative/dir")
    assert r.exit_code == 2 and "absolute" in r.output, r.output
    no_backup = json.loads(json.dumps(lab))
    del no_backup["backup"]
    del no_backup["service"]["recovery"]  # objectives of data sets no backup section declares: service-recovery-*
    r = drill(no_backup)
    assert r.exit_code == 2 and "nothing to rehearse" in r.output, r.output
    bad = json.loads(json.dumps(lab))
    bad["backup"]["retention"] = {}
    r = drill(bad)
    assert r.exit_code == 2 and "backup-retention-short" in r.output, r.output
    assert not (tmp_path / "lab.rehearsal.json").exists()
    assert r.exception is None or isinstance(r.exception, SystemExit)
