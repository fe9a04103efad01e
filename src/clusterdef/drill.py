"""The restore rehearsal (`clusterdef drill`) and its record beside the definition (docs/backup.md).

A rehearsal runs the *rendered* `backup/slurmdbd/restore.sh` (the accounting database, from the
snapshot the accounting host took) and `backup/slurm/restore.sh` (StateSaveLocation, from the primary
controller's snapshot) of the definition against the declared
scratch target (`backup.rehearsal.database` and `.state_dir`), never the live database or
StateSaveLocation, then checks what came back:

- the restored database holds every QOS of `slurm.qos` (qos_table) and every tenant's Slurm account
  (`<cluster>_assoc_table`), not deleted;
- the restored state folder holds slurmctld's job_state and node_state files.

Each run is appended to the record file `<definition stem>.rehearsal.json` beside the definition:

    {"format": "clusterdef-rehearsal/1",
     "rehearsals": [{"date": "2026-12-01T12:00:00Z", "result": "passed" | "failed",
                     "cluster": "lab", "definition_sha256": "...", "snapshot": "latest",
                     "target": {"database": "...", "state_dir": "..."}, "seconds": 3.1,
                     "checks": [{"name": "...", "ok": true, "detail": "..."}]}]}

`validate` reads the last *passed* entry: its date (check backup-rehearsal-stale) and its `seconds`, the
restore's duration compared with `service.recovery.slurm.rto_minutes` (check service-rto-unmet)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .errors import present
from .model import Definition
from .rehearsal import append_record, read_record, record_path
RESTORES = ("backup/slurmdbd/restore.sh", "backup/slurm/restore.sh")  # database first, as slurmdbd starts first
_DATABASE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def refusal(definition: Definition, file: str | Path, database: str | None, state_dir: str | None) -> str | None:
    """Why the drill cannot run with these options, before anything runs: nothing to rehearse (no
    Slurm role in the backup section), a scratch database that is no database name or is the live
    accounting database, a relative state folder. None when it can run."""
    d = definition
    if d.backup is None or not d.backup.authoritative.slurm or d.slurm is None:
        return (f"{file}: nothing to rehearse: the drill restores the Slurm role of the backup section "
                "(backup.authoritative.slurm with a slurm section)")
    if database is not None and not _DATABASE.fullmatch(database):
        return f"--database {database!r} is not a database name (letters, digits and '_')"
    if database is not None and d.slurm.accounting.storage == "slurmdbd" and database == d.slurm.accounting.storage_loc:
        return f"--database {database} is the live accounting database; the rehearsal restores into a scratch one"
    if state_dir is not None and not state_dir.startswith("/"):
        return f"--state-dir {state_dir!r} must be an absolute path"
    return None


@dataclass
class Outcome:
    checks: list[dict] = field(default_factory=list)
    log: str = ""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c["ok"] for c in self.checks)

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})


def _mysql(env: dict, database: str, query: str) -> subprocess.CompletedProcess:
    etc = env.get("CLUSTERDEF_BACKUP_ETC", "/etc/clusterdef/backup")
    return subprocess.run(["mysql", f"--defaults-extra-file={etc}/slurmdbd/my.cnf", "-N", "-B", "-e", query, database],
                          env=env, capture_output=True, text=True, timeout=120)


def rehearse(definition: Definition, tree: dict[str, str], *, database: str, state_dir: str,
             env: dict | None = None, timeout: float = 600) -> Outcome:
    """Run the rendered restore into the scratch target and check what came back."""
    env = {**(env if env is not None else os.environ), "CLUSTERDEF_RESTORE_DB": database,
           "CLUSTERDEF_SLURM_STATE": state_dir}
    out = Outcome()
    for rel in (r for r in RESTORES if r in tree):
        with tempfile.TemporaryDirectory(prefix="clusterdef-drill-") as tmp:
            script = Path(tmp) / "restore.sh"
            script.write_text(tree[rel])
            try:
                r = subprocess.run(["sh", str(script), "--yes"], env=env, capture_output=True, text=True,
                                   timeout=timeout)
            except subprocess.TimeoutExpired:
                out.add(f"restore: {rel}", False, f"{rel} ran past {timeout:g} s")
                return out
        out.log += r.stdout + r.stderr
        out.add(f"restore: {rel}", r.returncode == 0, f"{rel} exited {r.returncode}" + (
            "" if r.returncode == 0 else ": " + (r.stdout + r.stderr).strip()[-400:]))
        if r.returncode != 0:
            return out
    slurm = present(definition.slurm, "slurm")  # the restores are rendered only with it
    if slurm.accounting.storage == "slurmdbd":
        q = _mysql(env, database, "SELECT name FROM qos_table WHERE deleted=0")
        found = set(q.stdout.split()) if q.returncode == 0 else set()
        want = set(slurm.qos)
        out.add("database: QOS", q.returncode == 0 and want <= found,
                q.stderr.strip()[-300:] if q.returncode else f"missing {sorted(want - found)}" if want - found
                else f"{len(want)} QOS")
        table = f"`{definition.cluster.name}_assoc_table`"  # a Name: no backtick can reach it
        a = _mysql(env, database, f"SELECT DISTINCT acct FROM {table} WHERE deleted=0")
        found = set(a.stdout.split()) if a.returncode == 0 else set()
        want = {t.slurm.account for t in definition.tenants.values() if t.slurm is not None}
        out.add("database: accounts", a.returncode == 0 and want <= found,
                a.stderr.strip()[-300:] if a.returncode else f"missing {sorted(want - found)}" if want - found
                else f"{len(want)} tenant accounts")
    state = Path(state_dir)
    for name in ("job_state", "node_state"):
        f = state / name
        out.add(f"state: {name}", f.is_file() and f.stat().st_size > 0, str(f))
    return out


def entry(definition: Definition, source_sha256: str, outcome: Outcome, *, database: str, state_dir: str,
          snapshot: str, seconds: float) -> dict:
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "result": "passed" if outcome.passed else "failed",
        "cluster": definition.cluster.name,
        "definition_sha256": source_sha256,
        "snapshot": snapshot,
        "target": {"database": database, "state_dir": state_dir},
        "seconds": round(seconds, 1),
        "checks": outcome.checks,
    }


def run(result, *, database: str | None = None, state_dir: str | None = None, env: dict | None = None,
        record: bool = True) -> tuple[dict, Path]:
    """Render, rehearse, and append the result to the record beside the definition."""
    from .build import build_tree
    from .writer import sha256

    d = result.definition
    plan = d.backup.rehearsal
    database = database or plan.database
    state_dir = state_dir or plan.state_dir
    path = record_path(result.file)
    if record:
        read_record(path)  # an unreadable record fails before the rehearsal, not after it
    tree, _ = build_tree(result, ["backup"])
    start = time.monotonic()
    outcome = rehearse(d, tree, database=database, state_dir=state_dir, env=env)
    e = entry(d, sha256(result.source.text), outcome, database=database, state_dir=state_dir,
              snapshot=(env or os.environ).get("CLUSTERDEF_RESTORE_SNAPSHOT", "latest"),
              seconds=time.monotonic() - start)
    if record:
        append_record(path, e)
    e["log"] = outcome.log
    return e, path
