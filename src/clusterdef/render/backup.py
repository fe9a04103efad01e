"""Backup target: the backup plan of the definition's `backup` section for restic (docs/backup.md).

    backup/plan.json                       what is authoritative (per role: host, paths, tag) and what is
                                           reproducible (excluded), schedule, retention: the plan as data
    backup/restic.password.j2              Ansible template: `{{ <password_ref> }}` (install 0600 root at
                                           /etc/clusterdef/backup/restic.password); no secret is here
    backup/slurmdbd/my.cnf.j2              Ansible template: MySQL client options of slurmdbd's StorageUser,
                                           the password `{{ <secrets.refs.slurmdbd_storage_pass> }}`
    backup/<role>/backup.sh                one snapshot of the role's data, then `restic forget --prune`
    backup/<role>/restore.sh               the matching restore (asks for --yes: it replaces live data)
    backup/<role>/clusterdef-backup-<role>.service/.timer   runs backup.sh on the schedule

Roles, each on the host that has its data (the plan, the inventory's `backup` group and
group_vars/backup.yml name it):
- `slurmdbd` (the accounting host, slurm.accounting.host, else the first controller: where slurmdbd
  runs): `mysqldump --single-transaction` of the accounting database. With StorageHost=localhost the
  database is on that host; with another StorageHost the dump connects to it from the slurmdbd host,
  the one host the StorageUser is granted from and known to reach it (slurmdbd itself connects from
  there), and the dump needs nothing installed on the database server.
- `slurm` (the primary controller, where slurmctld writes StateSaveLocation): a copy of it.
  The two snapshots are minutes apart at most (one timer schedule); slurmctld resends to slurmdbd what
  the database lacks of the jobs it holds.
- `etcd` (`etcdctl snapshot save` on a control-plane host), `set-<name>` (each authoritative set's paths). Every `restic backup`
excludes the scratch filesystems' mounts and the declared reproducible paths.

Why restic rather than BorgBackup: restic's repository backends (sftp, REST server, S3-compatible
object stores) need no server-side install of the tool, `restic dump` streams a single file (the
SQL dump) out of a snapshot, and `forget --keep-within*` states retention as durations, which the
`backup-retention-short` check compares with the schedule. Both are in Debian (restic 0.14 on bookworm).

The scripts take overrides from the environment for a rehearsal or a test (never needed in service):
CLUSTERDEF_BACKUP_ETC, CLUSTERDEF_BACKUP_STAGE, RESTIC_REPOSITORY, RESTIC_PASSWORD_FILE,
CLUSTERDEF_SLURM_STATE, CLUSTERDEF_RESTORE_DB, CLUSTERDEF_ETCD_DATA, ETCDCTL_ENDPOINTS/CACERT/CERT/KEY.
Pure: no disk, no network. Every value from the definition is shell-quoted (quoting.shell)."""

from __future__ import annotations

import json

from .. import datasets
from ..errors import present
from ..knowledge.backup import backup_packages
from ..knowledge.slurm import live_state_dir
from ..model.backup import Backup
from ..model.secrets import SLURMDBD_STORAGE_PASS
from ..quoting import UnsafeValue, shell, systemd
from ..resolve import Resolved
from .yamlout import Unsafe

ETC = "/etc/clusterdef/backup"
LIB = "/usr/lib/clusterdef/backup"
STAGE = "/var/lib/clusterdef/backup"
UNITS = "/etc/systemd/system"


def _backup(resolved: Resolved) -> Backup:
    return present(resolved.definition.backup, "backup")


def state_save_location(resolved: Resolved) -> str:
    return live_state_dir(resolved.definition)


def excludes(resolved: Resolved) -> list[str]:
    """Reproducible paths: every scratch filesystem's mount and the declared reproducible paths."""
    d = resolved.definition
    out = [f.mount for f in d.filesystems.values() if f.scratch]
    out += list(_backup(resolved).reproducible)
    return list(dict.fromkeys(out))


def forget_args(b: Backup) -> list[str]:
    """restic forget's --keep-within* flags from the retention (durations relative to the latest snapshot)."""
    r = b.retention
    flags = [("--keep-within", r.within_days), ("--keep-within-daily", r.daily_days),
             ("--keep-within-weekly", r.weekly_days), ("--keep-within-monthly", r.monthly_days)]
    return [f"{flag} {days}d" for flag, days in flags if days]


def on_calendar(b: Backup) -> str:
    """The systemd OnCalendar expression of the schedule (systemd.time(7))."""
    s = b.schedule
    if s.interval_hours == 168:
        return f"Sun *-*-* {s.at_hour:02d}:00:00"
    if s.interval_hours == 24:
        return f"*-*-* {s.at_hour:02d}:00:00"
    return f"*-*-* {s.at_hour % s.interval_hours:02d}/{s.interval_hours}:00:00"


def accounting_host(resolved: Resolved) -> str:
    """Where slurmdbd runs (slurm.conf's AccountingStorageHost, slurmdbd.conf's DbdHost)."""
    s = present(resolved.definition.slurm, "slurm")
    return s.dbd_host()


def database_host(resolved: Resolved) -> str:
    """The host of the accounting database: slurmdbd's own host when StorageHost is localhost."""
    a = present(resolved.definition.slurm, "slurm").accounting
    return accounting_host(resolved) if a.storage_host == "localhost" else a.storage_host


def roles(resolved: Resolved) -> dict[str, dict]:
    """role -> {host, what, paths}: what each role's backup.sh puts in its snapshot, on the host that
    has it (the database dump where slurmdbd runs, StateSaveLocation on the primary controller)."""
    d = resolved.definition
    a = _backup(resolved).authoritative
    out: dict[str, dict] = {}
    if a.slurm and d.slurm is not None:
        acc = d.slurm.accounting
        if acc.storage == "slurmdbd":
            out["slurmdbd"] = {
                "host": accounting_host(resolved),
                "what": [f"accounting database {acc.storage_loc} on {database_host(resolved)}:{acc.storage_port} "
                         "(mysqldump --single-transaction)"],
                "paths": [f"{STAGE}/slurmdbd"]}
        out["slurm"] = {"host": d.slurm.controllers[0], "what": ["StateSaveLocation " + state_save_location(resolved)],
                        "paths": [f"{STAGE}/slurm"]}
    if a.etcd is not None:
        out["etcd"] = {"host": a.etcd.host, "what": ["etcd snapshot (etcdctl snapshot save)"],
                       "paths": [f"{STAGE}/etcd"]}
    for name, s in a.sets.items():
        out[f"set-{name}"] = {"host": s.host, "what": [f"{s.kind} {name}"], "paths": list(s.paths)}
    from .storage import admin_host

    for name, ds in d.datasets.items():
        host = admin_host(d, ds.filesystem) if ds.filesystem in d.filesystems else None
        if datasets.backed_up(d, name) and host is not None:
            out[datasets.backup_role(name)] = {
                "host": host, "what": [f"{ds.kind} {name} ({ds.classification}), kept {ds.retention_days} days"],
                "paths": [ds.path], "retention_days": ds.retention_days}
    return out


def _tag(resolved: Resolved, role: str) -> str:
    return f"clusterdef-{resolved.definition.cluster.name}-{role}"


def _head(resolved: Resolved, role: str, what: str) -> list[str]:
    d = resolved.definition
    host = roles(resolved)[role]["host"]
    return [
        "#!/bin/sh\n",
        f"# {what}, role {role} on host {host}, cluster {d.cluster.name}; rendered by clusterdef (docs/backup.md).\n",
        "set -eu\n",
        "umask 077\n",
        f"ETC=${{CLUSTERDEF_BACKUP_ETC:-{ETC}}}\n",
        f"STAGE=${{CLUSTERDEF_BACKUP_STAGE:-{STAGE}}}/{role}\n",
        f"RESTIC_REPOSITORY=${{RESTIC_REPOSITORY:-{shell(_backup(resolved).repository.url)}}}\n",
        'RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}\n',
        "export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE\n",
        f"HOST={shell(host)}\n",
        f"TAG={shell(_tag(resolved, role))}\n",
    ]


def _backup_tail(resolved: Resolved, paths: str, dataset: str | None = None) -> list[str]:
    b = _backup(resolved)
    if dataset is None:
        exclude = "".join(f" --exclude {shell(p)}" for p in excludes(resolved))
        forget = " ".join(forget_args(b))
        why = "backup.retention"
    else:  # a dataset's own policy: nothing of it is excluded, no snapshot outlives its retention
        path = resolved.definition.datasets[dataset].path
        exclude = "".join(f" --exclude {shell(p)}" for p in excludes(resolved)
                          if not (path == p or path.startswith(p.rstrip("/") + "/")))
        forget = f"--keep-within {resolved.definition.datasets[dataset].retention_days}d"
        why = f"datasets.{dataset}.retention_days"
    return [
        "# The repository is created on the first run (a wrong password fails here, it never re-creates).\n",
        "restic cat config >/dev/null 2>&1 || restic init\n",
        f'restic backup --host "$HOST" --tag "$TAG"{exclude} {paths}\n',
        f"# Retention ({why}), for this role's snapshots only.\n",
        f'restic forget --host "$HOST" --tag "$TAG" {forget} --prune\n' if forget else
        "# no retention rule: nothing is forgotten\n",
    ]


def _restore_head(resolved: Resolved, role: str, what: str, replaces: str) -> list[str]:
    return _head(resolved, role, f"Restore of {what}") + [
        f"# Replaces {replaces}. Asks for --yes (or CLUSTERDEF_RESTORE_CONFIRM=yes).\n",
        'if [ "${1:-}" != --yes ] && [ "${CLUSTERDEF_RESTORE_CONFIRM:-}" != yes ]; then\n'
        f'  echo "clusterdef: this replaces {replaces}; run it again with --yes" >&2\n'
        "  exit 2\n"
        "fi\n",
        "SNAPSHOT=${CLUSTERDEF_RESTORE_SNAPSHOT:-latest}\n",
        'TMP=$(mktemp -d "${TMPDIR:-/tmp}/clusterdef-restore.XXXXXX")\n',
        "trap 'rm -rf \"$TMP\"' EXIT\n",
        'restic restore "$SNAPSHOT" --host "$HOST" --tag "$TAG" --target "$TMP"\n',
        'SRC="$TMP$STAGE"\n',
    ]


def _set_aside() -> str:
    """Shell function: move a path aside (never deleted by a restore) before replacing it."""
    return ('aside() { [ ! -e "$1" ] || mv "$1" "$1.pre-restore.$(date -u +%Y%m%dT%H%M%SZ)"; }\n')


def slurmdbd_backup(resolved: Resolved) -> str:
    a = present(resolved.definition.slurm, "slurm").accounting
    out = _head(resolved, "slurmdbd", "Backup of the Slurm accounting database")
    out += [
        'mkdir -p "$STAGE"\n',
        f"# The accounting database {a.storage_loc} on {database_host(resolved)}: one consistent InnoDB transaction,\n",
        "# no table locks; connected as slurmdbd's StorageUser from slurmdbd's host (my.cnf, from the vault).\n",
        f'mysqldump --defaults-extra-file="$ETC/slurmdbd/my.cnf" --single-transaction --quick {shell(a.storage_loc)}'
        ' >"$STAGE/accounting.sql.tmp"\n',
        'mv "$STAGE/accounting.sql.tmp" "$STAGE/accounting.sql"\n',
    ]
    return "".join(out + _backup_tail(resolved, '"$STAGE"'))


def slurmdbd_restore(resolved: Resolved) -> str:
    a = present(resolved.definition.slurm, "slurm").accounting
    out = _restore_head(resolved, "slurmdbd", "the Slurm accounting database", "the accounting database")
    out.insert(2, "# Stop slurmctld and slurmdbd first; afterwards start slurmdbd, then slurmctld.\n")
    out += [
        f"DB=${{CLUSTERDEF_RESTORE_DB:-{shell(a.storage_loc)}}}\n",
        'case "$DB" in ""|[0-9]*|*[!A-Za-z0-9_]*) echo "clusterdef: $DB is not a database name" >&2; exit 2;; esac\n',
        '[ -f "$SRC/accounting.sql" ] || { echo "clusterdef: the snapshot has no accounting.sql" >&2; exit 1; }\n',
        'sql() { mysql --defaults-extra-file="$ETC/slurmdbd/my.cnf" "$@"; }\n',
        'sql -e "DROP DATABASE IF EXISTS \\`$DB\\`; CREATE DATABASE \\`$DB\\`"\n',
        'sql "$DB" <"$SRC/accounting.sql"\n',
        'echo "clusterdef: restored $SNAPSHOT of $TAG"\n',
    ]
    return "".join(out)


def slurm_backup(resolved: Resolved) -> str:
    out = _head(resolved, "slurm", "Backup of the Slurm controller's StateSaveLocation")
    out.append(f"STATE=${{CLUSTERDEF_SLURM_STATE:-{shell(state_save_location(resolved))}}}\n")
    out.append('mkdir -p "$STAGE"\n')
    out += [
        "# StateSaveLocation (queued jobs, their scripts, reservations): slurmctld replaces each state\n",
        "# file by a rename, so every copied file is whole.\n",
        'rm -rf "$STAGE/state.tmp"\n',
        'cp -a "$STATE" "$STAGE/state.tmp"\n',
        'rm -rf "$STAGE/state"\n',
        'mv "$STAGE/state.tmp" "$STAGE/state"\n',
    ]
    return "".join(out + _backup_tail(resolved, '"$STAGE"'))


def slurm_restore(resolved: Resolved) -> str:
    out = _restore_head(resolved, "slurm", "the Slurm controller's StateSaveLocation", "StateSaveLocation")
    out.insert(2, "# Stop slurmctld first (and restore the accounting database, backup/slurmdbd, before it starts).\n")
    out.append(f"STATE=${{CLUSTERDEF_SLURM_STATE:-{shell(state_save_location(resolved))}}}\n")
    out.append('[ -d "$SRC/state" ] || { echo "clusterdef: the snapshot has no $STAGE/state" >&2; exit 1; }\n')
    out += [
        _set_aside(),
        'aside "$STATE"\n',
        'mkdir -p "$(dirname "$STATE")"\n',
        'cp -a "$SRC/state" "$STATE"\n',
        'echo "clusterdef: restored $SNAPSHOT of $TAG"\n',
    ]
    return "".join(out)


def my_cnf(resolved: Resolved) -> str:
    d = resolved.definition
    a = present(d.slurm, "slurm").accounting
    var = d.secrets.var(SLURMDBD_STORAGE_PASS)
    if not var.isidentifier():  # VaultVar's pattern makes this unreachable from a validated definition
        raise UnsafeValue(f"{var[:60]!r} is not an Ansible variable name")
    return ("# MySQL client options of the backup (rendered by clusterdef): an Ansible template, installed\n"
            f"# 0600 root at {ETC}/slurmdbd/my.cnf on {accounting_host(resolved)} (slurmdbd's host, which\n"
            "# reaches StorageHost as slurmdbd does); the password is resolved from the vault at apply time.\n"
            "[client]\n"
            f"host={a.storage_host}\n"
            f"port={a.storage_port}\n"
            f"user={a.storage_user}\n"
            f"password={{{{ {var} }}}}\n")


def etcd_backup(resolved: Resolved) -> str:
    e = present(_backup(resolved).authoritative.etcd, "backup.authoritative.etcd")
    out = _head(resolved, "etcd", "Backup of Kubernetes state (etcd)")
    out += [
        "export ETCDCTL_API=3\n",
        f"export ETCDCTL_ENDPOINTS=${{ETCDCTL_ENDPOINTS-{shell(e.endpoint)}}}\n",
        f"export ETCDCTL_CACERT=${{ETCDCTL_CACERT-{shell(e.pki_dir + '/ca.crt')}}}\n",
        f"export ETCDCTL_CERT=${{ETCDCTL_CERT-{shell(e.pki_dir + '/healthcheck-client.crt')}}}\n",
        f"export ETCDCTL_KEY=${{ETCDCTL_KEY-{shell(e.pki_dir + '/healthcheck-client.key')}}}\n",
        'mkdir -p "$STAGE"\n',
        "# A point-in-time snapshot of the member's keyspace, checked before it replaces the last one.\n",
        'rm -f "$STAGE/snapshot.db.tmp"\n',
        'etcdctl snapshot save "$STAGE/snapshot.db.tmp" >/dev/null\n',
        'etcdctl --write-out=table snapshot status "$STAGE/snapshot.db.tmp"\n',
        'mv "$STAGE/snapshot.db.tmp" "$STAGE/snapshot.db"\n',
    ]
    return "".join(out + _backup_tail(resolved, '"$STAGE"'))


def etcd_restore(resolved: Resolved) -> str:
    e = present(_backup(resolved).authoritative.etcd, "backup.authoritative.etcd")
    out = _restore_head(resolved, "etcd", "Kubernetes state (etcd)", "the etcd member's data directory")
    out.insert(2, "# Stop kube-apiserver and etcd first (move their static pod manifests away); one member:\n"
                  "# a multi-member cluster is restored member by member with each one's name and peer URL.\n")
    out += [
        f"DATA=${{CLUSTERDEF_ETCD_DATA:-{shell(e.data_dir)}}}\n",
        f"NAME=${{CLUSTERDEF_ETCD_NAME:-{shell(e.host.split('.')[0])}}}\n",
        f"PEER=${{CLUSTERDEF_ETCD_PEER:-{shell(f'https://{e.host}:2380')}}}\n",
        '[ -f "$SRC/snapshot.db" ] || { echo "clusterdef: the snapshot has no snapshot.db" >&2; exit 1; }\n',
        'rm -rf "$DATA.restoring"\n',
        "# etcd 3.5+ ships the offline restore as etcdutl; etcd 3.4 (bookworm) has it in etcdctl.\n",
        "if command -v etcdutl >/dev/null 2>&1; then RESTORE=etcdutl; else RESTORE=etcdctl; export ETCDCTL_API=3; fi\n",
        '$RESTORE snapshot restore "$SRC/snapshot.db" --data-dir "$DATA.restoring" --name "$NAME" '
        '--initial-cluster "$NAME=$PEER" --initial-advertise-peer-urls "$PEER"\n',
        _set_aside(),
        'aside "$DATA"\n',
        'mv "$DATA.restoring" "$DATA"\n',
        'echo "clusterdef: restored $SNAPSHOT of $TAG"\n',
    ]
    return "".join(out)


def set_backup(resolved: Resolved, name: str) -> str:
    s = _backup(resolved).authoritative.sets[name]
    out = _head(resolved, f"set-{name}", f"Backup of {s.kind} {name}")
    return "".join(out + _backup_tail(resolved, " ".join(shell(p) for p in s.paths)))


def data_backup(resolved: Resolved, name: str) -> str:
    ds = resolved.definition.datasets[name]
    out = _head(resolved, datasets.backup_role(name), f"Backup of {ds.kind} {name} ({ds.classification})")
    return "".join(out + _backup_tail(resolved, shell(ds.path), dataset=name))


def set_restore(resolved: Resolved, name: str) -> str:
    return _paths_restore(resolved, f"set-{name}", _backup(resolved).authoritative.sets[name].kind, name)


def data_restore(resolved: Resolved, name: str) -> str:
    return _paths_restore(resolved, datasets.backup_role(name), resolved.definition.datasets[name].kind, name)


def _paths_restore(resolved: Resolved, role: str, kind: str, name: str) -> str:
    out = _head(resolved, role, f"Restore of {kind} {name}") + [
        "# Restores the paths in place (CLUSTERDEF_RESTORE_TARGET=DIR restores under DIR instead).\n",
        'if [ "${1:-}" != --yes ] && [ "${CLUSTERDEF_RESTORE_CONFIRM:-}" != yes ]; then\n'
        f'  echo "clusterdef: this overwrites the files of {name}; run it again with --yes" >&2\n'
        "  exit 2\n"
        "fi\n",
        "SNAPSHOT=${CLUSTERDEF_RESTORE_SNAPSHOT:-latest}\n",
        'restic restore "$SNAPSHOT" --host "$HOST" --tag "$TAG" --target "${CLUSTERDEF_RESTORE_TARGET:-/}"\n',
        'echo "clusterdef: restored $SNAPSHOT of $TAG"\n',
    ]
    return "".join(out)


def units(resolved: Resolved, role: str) -> dict[str, str]:
    b = _backup(resolved)
    name = f"clusterdef-backup-{role}"
    cluster = resolved.definition.cluster.name
    return {
        f"{name}.service": (f"# Rendered by clusterdef: backup role {role} of cluster {cluster}.\n[Unit]\n"
                            f"Description=clusterdef backup {systemd(role)}\n"
                            "Wants=network-online.target\nAfter=network-online.target\n\n"
                            "[Service]\nType=oneshot\nNice=10\nIOSchedulingClass=idle\n"
                            f"ExecStart=/bin/sh {LIB}/{role}/backup.sh\n"),
        f"{name}.timer": (f"# Rendered by clusterdef: backup.schedule, every {b.schedule.interval_hours} h.\n[Unit]\n"
                          f"Description=clusterdef backup {systemd(role)} schedule\n\n"
                          f"[Timer]\nOnCalendar={on_calendar(b)}\nRandomizedDelaySec=10min\nPersistent=true\n\n"
                          "[Install]\nWantedBy=timers.target\n"),
    }


def install(resolved: Resolved) -> dict[str, dict]:
    """What roles/backup installs, per role: the host that runs it, the scripts and units (as they
    are rendered here, never templated by Ansible), the files the vault fills in (the restic
    password, my.cnf; 0600 root) and the timer to enable. Paths are this module's (LIB, ETC)."""
    tree = render(resolved)
    jobs: dict[str, dict] = {}
    for role, r in roles(resolved).items():
        files = [{"dest": f"{LIB}/{role}/{n}", "mode": "0750", "content": Unsafe(tree[f"backup/{role}/{n}"])}
                 for n in ("backup.sh", "restore.sh")]
        files += [{"dest": f"{UNITS}/{u}", "mode": "0644", "content": Unsafe(text)}
                  for u, text in units(resolved, role).items()]
        secrets = [{"dest": f"{ETC}/restic.password", "content": tree["backup/restic.password.j2"]}]
        if f"backup/{role}/my.cnf.j2" in tree:
            secrets.append({"dest": f"{ETC}/{role}/my.cnf", "content": tree[f"backup/{role}/my.cnf.j2"]})
        jobs[role] = {"host": r["host"], "files": files, "secrets": secrets, "timer": f"clusterdef-backup-{role}.timer",
                      "packages": packages(role)}
    return jobs


def packages(role: str) -> list[str]:
    """The distribution packages carrying the commands a job runs (knowledge/backup_packages.yaml): restic
    everywhere, the MariaDB client where the accounting database is dumped, etcdctl where etcd is snapshotted."""
    data = backup_packages()
    kind = "set" if role.startswith(("set-", "data-")) else role
    return list(dict.fromkeys([*data["every"], *data["jobs"][kind]]))


def plan(resolved: Resolved) -> str:
    d = resolved.definition
    b = _backup(resolved)
    return json.dumps({
        "cluster": d.cluster.name,
        "tool": b.tool,
        "repository": b.repository.url,
        "password_ref": b.repository.password_ref,
        "schedule": {"interval_hours": b.schedule.interval_hours, "on_calendar": on_calendar(b)},
        "retention": {"forget": forget_args(b), "window_hours": b.retention.window_hours},
        "authoritative": {role: {**r, "tag": _tag(resolved, role)} for role, r in roles(resolved).items()},
        "reproducible": excludes(resolved),
    }, indent=2, sort_keys=True) + "\n"


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    if d.backup is None:
        return {}
    var = d.backup.repository.password_ref
    if not var.isidentifier():
        raise UnsafeValue(f"{var[:60]!r} is not an Ansible variable name")
    tree = {
        "backup/plan.json": plan(resolved),
        "backup/restic.password.j2": f"{{{{ {var} }}}}\n",
    }
    scripts = {}
    for role in roles(resolved):
        if role == "slurmdbd":
            scripts[role] = (slurmdbd_backup(resolved), slurmdbd_restore(resolved))
            tree["backup/slurmdbd/my.cnf.j2"] = my_cnf(resolved)
        elif role == "slurm":
            scripts[role] = (slurm_backup(resolved), slurm_restore(resolved))
        elif role == "etcd":
            scripts[role] = (etcd_backup(resolved), etcd_restore(resolved))
        elif role.startswith("set-"):
            name = role.removeprefix("set-")
            scripts[role] = (set_backup(resolved, name), set_restore(resolved, name))
        else:
            name = role.removeprefix("data-")
            scripts[role] = (data_backup(resolved, name), data_restore(resolved, name))
    for role, (backup_sh, restore_sh) in scripts.items():
        tree[f"backup/{role}/backup.sh"] = backup_sh
        tree[f"backup/{role}/restore.sh"] = restore_sh
        for unit, text in units(resolved, role).items():
            tree[f"backup/{role}/{unit}"] = text
    return tree
