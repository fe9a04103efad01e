"""The rollout laid out in the maintenance windows of `service` (docs/service.md).

The stages run one after another (as `clusterdef apply` runs them), each for the minutes of the plan's estimate
(plan/estimate.py, `upgrade.timing`), from a start instant (`plan --start`, default: the first window opening
from the start of the planning day). A stage that takes nodes out of service (canary, rollback drill, wave,
driver pool) runs inside an opening of a window that covers every node group of its hosts; the control-plane
stage (slurmctld, slurmdbd, the API server and the GPU Operator restart for everyone) inside a whole-cluster
window. Such a stage waits for the first opening that still has room for all of it. The other stages (image
build, prepare, configuration delivery, boot defaults, the driver hold) change nothing running and run at
once. A disruptive stage no window can hold is placed at the next opening of the longest window that covers
it (or at once when none covers it) and listed as outside, with what it would need: a window over its
node groups, or a longer one (the hours, and how many openings of the longest window it spans).
Pure: the start is given, no clock."""

from __future__ import annotations

import math
from datetime import date, datetime, time, timedelta

from .. import hostlist
from ..windows import groups_of, openings, staffed, zone

NODES = ("canary", "rollback-drill", "wave", "driver-pool")  # drain or take their hosts out of service
CLUSTER = ("control-plane",)  # restarts the cluster's control daemons: a whole-cluster window
HORIZON = timedelta(days=15)  # weekly windows: two weeks reach every opening of every window


def first_opening(d, after: datetime) -> datetime | None:
    """The first instant at or after `after` at which a maintenance window opens (None without windows)."""
    tz = zone(d.service.timezone)
    if tz is None:
        return None
    found = [o for w in d.service.maintenance_windows.values()
             for o, _ in openings(w, tz, after, after + HORIZON) if o >= after]
    return min(found, default=None)


def default_start(d, today: date) -> datetime | None:
    """The first window opening from the start of `today` in the service's zone."""
    return first_opening(d, datetime.combine(today, time(0), tzinfo=zone(d.service.timezone)))


def _groups(group_of: dict[str, str], hosts: str) -> frozenset[str]:
    return frozenset(group_of[h] for h in (hostlist.names(hosts) if hosts else []) if h in group_of)


def usable(d) -> dict:
    """The windows that open, by name: (window, the node groups it covers)."""
    return {n: (w, groups_of(w, d)) for n, w in d.service.maintenance_windows.items() if w.days and w.hours > 0}


def host_groups(d) -> dict[str, str]:
    return {h: g for g, ng in d.nodes.items() for h in hostlist.names(ng.hosts)}


def fitting(st: dict, windows: dict, group_of: dict[str, str]) -> tuple[str | list[str] | None, list[str]]:
    """(the stage's scope: "cluster", its node groups, or None when it needs no window; the windows that
    cover it): a whole-cluster window for the control plane, one over every node group of its hosts for
    a stage that takes nodes out of service."""
    if st["kind"] in CLUSTER:
        return "cluster", [n for n, (w, _) in windows.items() if w.whole_cluster]
    if st["kind"] in NODES:
        groups = _groups(group_of, st["hosts"])
        return sorted(groups), [n for n, (_, g) in windows.items() if groups <= g]
    return None, []


def layout(d, stages: list[dict], timeline: list[dict], start: datetime) -> dict:
    """The schedule: per stage its start and end (ISO 8601 in the service's zone), the window it runs in or,
    when it runs outside every window, what it needs; with supported hours, whether it starts inside them."""
    s = d.service
    tz = zone(s.timezone)
    assert tz is not None  # schedule() lays out only a known zone
    windows = usable(d)
    group_of = host_groups(d)
    cursor = start
    rows = []
    for st, t in zip(stages, timeline):
        length = timedelta(minutes=t["minutes"])
        row: dict = {"stage": st["name"]}
        scope, fit = fitting(st, windows, group_of)
        at, window, needs = cursor, None, None
        if scope is not None:
            opens = sorted((o, c, n) for n in fit for o, c in openings(windows[n][0], tz, cursor, cursor + HORIZON))
            room = next(((max(cursor, o), n) for o, c, n in opens if c - max(cursor, o) >= length), None)
            if room:
                at, window = room
            elif not fit:
                needs = ("a whole-cluster window" if scope == "cluster"
                         else f"a window over node group(s) {', '.join(scope)}")
            else:
                longest = max(fit, key=lambda n: windows[n][0].hours)
                hours = windows[longest][0].hours
                needs = (f"a window of at least {math.ceil(length / timedelta(hours=1))} h "
                         f"(`{longest}` is {hours:g} h; the stage spans {math.ceil(length / timedelta(hours=hours))} "
                         "of its openings)")
                at = next((max(cursor, o) for o, _, n in opens if n == longest), cursor)
        row.update({"scope": scope, "start": at.astimezone(tz).isoformat(),
                    "end": (at + length).astimezone(tz).isoformat(), "window": window})
        if needs:
            row["outside"] = needs
        if s.supported_hours is not None:
            row["staffed"] = staffed(s.supported_hours, tz, at)
        rows.append(row)
        cursor = at + length
    return {"timezone": s.timezone, "start": start.astimezone(tz).isoformat(),
            "end": cursor.astimezone(tz).isoformat(), "outside": sum(1 for r in rows if "outside" in r),
            "stages": rows}


def schedule(d, stages: list[dict], timeline: list[dict], start: datetime | None, today: date | None) -> dict | None:
    """The layout when the definition has maintenance windows (and a known zone), else None."""
    if d.service is None or not d.service.maintenance_windows or zone(d.service.timezone) is None:
        return None
    start = start or (default_start(d, today) if today is not None else None)
    if start is None:  # no window ever opens (an error of validate), or no day to start from
        return None
    return layout(d, stages, timeline, start)


def recorded_start(doc: dict) -> datetime | None:
    """The start a plan file's schedule was laid out from (apply derives the plan again from it), else None."""
    text = ((doc.get("rollout") or {}).get("schedule") or {}).get("start")
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def approvals(d, disruption: dict) -> dict[str, list[str]]:
    """Per disruption class of the plan (worst first), the directory groups `service.approvers` names for it."""
    from .transition import LIVE, REBOOT, REFLASH, RELOAD, RESTART

    if d.service is None or not d.service.approvers:
        return {}
    classes = {"reflash": REFLASH, "reboot": REBOOT, "driver-reload": RELOAD, "restart": RESTART, "live": LIVE}
    by_class = {classes[k]: list(v) for k, v in d.service.approvers.items()}
    return {c: by_class[c] for c in disruption if c in by_class}
