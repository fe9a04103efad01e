"""Service objectives (the `service` section, docs/service.md): the time zone exists, every maintenance
window opens and names real node groups and partitions, windows of one scope do not overlap, and the
recovery objectives can be met: the backup interval against the RPO, the last passed restore rehearsal's
duration against the RTO."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..rehearsal import RecordError, last_passed_seconds, read_record, record_path
from ..model.backup import INTERVALS
from ..errors import Finding, error, present, warning
from ..model.service import minutes_of
from ..windows import groups_of, overlap, zone
from .registry import Context, check


@check("service-timezone")
def service_timezone(ctx: Context) -> Iterable[Finding]:
    s = ctx.definition.service
    if s is not None and zone(s.timezone) is None:
        yield error("service-timezone-unknown", ("service", "timezone"),
                    f"`{s.timezone}` is not a time zone of the tz database (zoneinfo)",
                    "name an IANA zone such as Europe/Berlin, America/New_York or UTC "
                    "(`python3 -c 'import zoneinfo; print(sorted(zoneinfo.available_timezones()))'` lists them)")


@check("service-windows")
def service_windows(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    s = d.service
    if s is None:
        return
    parts = d.slurm.partitions if d.slurm is not None else {}
    for name, w in s.maintenance_windows.items():
        where = ("service", "maintenance_windows", name)
        if not w.days or w.hours <= 0:
            yield error("service-window-never-opens", where + (("days",) if not w.days else ("hours",)),
                        f"maintenance window `{name}` never opens: "
                        + ("it lists no days" if not w.days else f"it lasts {w.hours:g} hours"),
                        "give it days (mon ... sun) and a duration in hours above 0, or remove it")
        for i, g in enumerate(w.node_groups):
            if g not in d.nodes:
                yield error("service-window-scope-unknown", where + ("node_groups", i),
                            f"maintenance window `{name}` covers node group `{g}`, which `nodes` does not define",
                            f"name one of: {', '.join(d.nodes)}")
        for i, p in enumerate(w.partitions):
            if p not in parts:
                yield error("service-window-scope-unknown", where + ("partitions", i),
                            f"maintenance window `{name}` covers partition `{p}`, which `slurm.partitions` "
                            "does not define",
                            f"name one of: {', '.join(parts)}" if parts else "the definition has no Slurm "
                            "partitions: name node groups (node_groups) instead")
    items = list(s.maintenance_windows.items())
    for i, (a, wa) in enumerate(items):
        for b, wb in items[i + 1:]:
            if groups_of(wa, d) & groups_of(wb, d) and overlap(wa, wb):
                yield warning("service-window-overlap", ("service", "maintenance_windows", b),
                              f"maintenance windows `{a}` and `{b}` are open at the same time on node groups "
                              f"{', '.join(sorted(groups_of(wa, d) & groups_of(wb, d)))}",
                              "merge them into one window, or move one: `plan` treats them as separate openings")
    h = s.supported_hours
    if h is not None and minutes_of(h.end) <= minutes_of(h.start):
        yield error("service-hours-empty", ("service", "supported_hours", "end"),
                    f"supported hours end at {h.end}, not after they start ({h.start}): no hour is supported",
                    "give an end after the start on the same day (24:00 for the end of the day)")


def _sets(d) -> dict[str, str]:
    """Authoritative data sets by name -> what backs them up."""
    b = d.backup
    if b is None:
        return {}
    out = {n: f"backup.authoritative.sets.{n}" for n in b.authoritative.sets}
    if b.authoritative.slurm and d.slurm is not None:
        out["slurm"] = "backup.authoritative.slurm"
    if b.authoritative.etcd is not None:
        out["etcd"] = "backup.authoritative.etcd"
    return out


def _first_not_due(ctx: Context) -> bool:
    r = present(ctx.definition.backup, "backup").rehearsal
    return r.adopted is not None and (ctx.today - r.adopted).days <= r.max_age_days


@check("service-recovery")
def service_recovery(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    s = d.service
    if s is None or not s.recovery:
        return
    sets = _sets(d)
    seconds, unreadable = None, ""
    if "slurm" in s.recovery and ctx.definition_file:
        try:
            seconds = last_passed_seconds(read_record(record_path(ctx.base_dir / Path(ctx.definition_file).name)))
        except RecordError as exc:
            unreadable = str(exc)
    drill = f"clusterdef drill {Path(ctx.definition_file).name}" if ctx.definition_file else "clusterdef drill"
    for name, r in s.recovery.items():
        where = ("service", "recovery", name)
        if name not in sets:
            yield error("service-recovery-unknown-set", where,
                        f"recovery objectives for `{name}`, which is no authoritative data set of the backup section",
                        f"name one of: {', '.join(sets)}" if sets else
                        "add a backup section that backs it up (backup.authoritative: slurm, etcd or sets)")
            continue
        interval = present(d.backup, "backup").schedule.interval_hours  # sets is empty without one
        if r.rpo_hours < interval:
            yield error("service-rpo-unmet", where + ("rpo_hours",),
                        f"backup every {interval} h cannot meet an RPO of {r.rpo_hours} h for `{name}`: "
                        f"a failure just before the next backup loses up to {interval} h of data",
                        f"back up at least every {r.rpo_hours} h (backup.schedule.interval_hours: one of "
                        f"{', '.join(str(i) for i in INTERVALS if i <= r.rpo_hours)}), "
                        "or agree a longer RPO")
        if name != "slurm":
            yield warning("service-rto-unrehearsed", where + ("rto_minutes",),
                          f"no restore rehearsal on record for `{name}` ({sets[name]}): an RTO of {r.rto_minutes} min "
                          "is a promise nobody has timed (`clusterdef drill` rehearses the Slurm restore only)",
                          "time a restore of this data set into a scratch target and keep the record with the "
                          "definition, or drop the objective until it can be rehearsed")
        elif seconds is None and _first_not_due(ctx):
            continue  # as backup-rehearsal-stale: the first rehearsal is due max_age_days after adoption
        elif seconds is None:
            yield warning("service-rto-unrehearsed", where + ("rto_minutes",),
                          "no passed restore rehearsal with a duration on record for `slurm`"
                          + (f" ({unreadable})" if unreadable else "")
                          + f": an RTO of {r.rto_minutes} min has never been measured",
                          f"run `{drill}` on the controller; it records how long the restore took (commit the record)")
        elif seconds > r.rto_minutes * 60:
            yield error("service-rto-unmet", where + ("rto_minutes",),
                        f"the last passed restore rehearsal of `slurm` took {seconds / 60:.1f} min, "
                        f"longer than the RTO of {r.rto_minutes} min",
                        "make the restore faster (a smaller or closer repository, a local snapshot cache) and "
                        f"rehearse again with `{drill}`, or agree a longer RTO")
