"""Data protection (the `backup` section, docs/backup.md): nothing reproducible is backed up, the
retention keeps more than the latest restore point, what is declared exists, and the restore
has been rehearsed recently."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..rehearsal import RecordError, last_passed, read_record, record_path
from ..errors import Finding, error, warning
from .registry import Context, check


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


@check("backup-scope")
def backup_scope(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    b = d.backup
    if b is None:
        return
    scratch = {f.mount: fs for fs, f in d.filesystems.items() if f.scratch}
    for name, s in b.authoritative.sets.items():
        for i, p in enumerate(s.paths):
            where = ("backup", "authoritative", "sets", name, "paths", i)
            fs = next((fs for mount, fs in scratch.items() if _under(p, mount)), None)
            if fs is not None:
                yield error("backup-includes-scratch", where,
                            f"`{p}` is on scratch filesystem `{fs}` ({d.filesystems[fs].mount}), which is reproducible "
                            "and expires: it is excluded from every backup",
                            "keep authoritative data off scratch (move it to a filesystem without `scratch: true`) "
                            "and drop this path; scratch mounts are excluded automatically")
                continue
            cache = next((r for r in b.reproducible if _under(p, r)), None)
            if cache is not None:
                yield error("backup-includes-scratch", where,
                            f"`{p}` is under `{cache}`, declared reproducible in backup.reproducible: "
                            "it is excluded from every backup",
                            "drop the path from the set, or remove it from backup.reproducible if it is authoritative")
    if "slurm" in b.authoritative.model_fields_set and b.authoritative.slurm and d.slurm is None:
        yield error("backup-slurm-absent", ("backup", "authoritative", "slurm"),
                    "backup.authoritative.slurm is true but the definition has no `slurm` section: "
                    "there is no accounting database or StateSaveLocation to back up",
                    "remove `slurm: true`, or add the slurm section")


@check("backup-rehearsal-target")
def backup_rehearsal_target(ctx: Context) -> Iterable[Finding]:
    """The rehearsal restores into a scratch target; the live database or StateSaveLocation would be replaced."""
    from ..knowledge.slurm import live_state_dir

    d = ctx.definition
    b = d.backup
    if b is None or d.slurm is None:
        return
    r = b.rehearsal
    if d.slurm.accounting.storage == "slurmdbd" and r.database == d.slurm.accounting.storage_loc:
        yield error("backup-rehearsal-live", ("backup", "rehearsal", "database"),
                    f"the rehearsal database `{r.database}` is the live accounting database "
                    "(slurm.accounting.storage_loc): the drill drops and recreates it",
                    "name a scratch database, e.g. slurm_acct_db_rehearsal")
    live = live_state_dir(d)
    if _under(r.state_dir, live) or _under(live, r.state_dir):
        yield error("backup-rehearsal-live", ("backup", "rehearsal", "state_dir"),
                    f"the rehearsal state folder `{r.state_dir}` overlaps slurmctld's StateSaveLocation `{live}`: "
                    "the drill replaces it",
                    "use a scratch folder such as /var/tmp/clusterdef-rehearsal/slurmctld")


@check("backup-retention")
def backup_retention(ctx: Context) -> Iterable[Finding]:
    b = ctx.definition.backup
    if b is None:
        return
    interval, window = b.schedule.interval_hours, b.retention.window_hours
    if window <= interval:
        yield error("backup-retention-short", ("backup", "retention"),
                    f"the retention keeps snapshots for {window} h, not longer than the {interval} h between backups: "
                    "each backup's predecessor is forgotten by the next forget, so only the latest restore "
                    "point ever survives (a corrupted or deleted-data backup cannot be stepped back from)",
                    f"keep at least two intervals: e.g. within_days: {max(2, -(-2 * interval // 24))}, "
                    "or add daily_days / weekly_days / monthly_days")


@check("backup-rehearsal")
def backup_rehearsal(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    b = d.backup
    if b is None or not ctx.definition_file or not (b.authoritative.slurm and d.slurm is not None):
        return
    where = ("backup", "rehearsal", "max_age_days")
    path = record_path(ctx.base_dir / Path(ctx.definition_file).name)
    limit = b.rehearsal.max_age_days
    try:
        last = last_passed(read_record(path))
    except RecordError as exc:
        yield warning("backup-rehearsal-stale", where, f"the restore rehearsal record cannot be read: {exc}",
                      f"run `clusterdef drill {Path(ctx.definition_file).name}` (it rewrites a valid record), "
                      f"or remove {path.name}")
        return
    if last is None:
        adopted = b.rehearsal.adopted
        if adopted is not None and (ctx.today - adopted).days <= limit:
            return  # the first rehearsal is not due yet
        yield warning("backup-rehearsal-stale", where,
                      f"the restore has never been rehearsed successfully (no passed run in {path.name})"
                      + (f", and the first was due {limit} days after backup.rehearsal.adopted ({adopted.isoformat()})"
                         if adopted else ""),
                      f"run `clusterdef drill {Path(ctx.definition_file).name}` on the controller; "
                      f"it records the result in {path.name} (commit it)")
        return
    age = (ctx.today - last).days
    if age > limit:
        yield warning("backup-rehearsal-stale", where,
                      f"the last passed restore rehearsal was {age} days ago ({last.isoformat()}), "
                      f"more than backup.rehearsal.max_age_days ({limit})",
                      f"run `clusterdef drill {Path(ctx.definition_file).name}` again and commit {path.name}")
