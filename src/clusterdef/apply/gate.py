"""The service objectives gate `clusterdef apply` (issue 31, docs/service.md#apply-the-gate).

Before a stage that takes nodes out of service (canary, rollback drill, wave, driver pool) or restarts the
control plane starts, `check_stage` asks whether it fits, from the instant it would start and for its minutes
of the plan's estimate (as plan/windows.py lays it out), inside an opening of a maintenance window that
covers it (a whole-cluster window for the control plane, one over every node group of its hosts for the
others). When it does not, it starts only with an approval recorded in the plan file for that stage by a
group that may approve it (plan/approvals.py); otherwise the verdict's reason names the stage, when it would
run, the window it needs (and when that opens next with room) and the groups that must approve.
A definition without maintenance windows gates nothing. Pure: the instant is passed in (`clock`)."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from ..plan.approvals import by_group, stage_groups
from ..plan.windows import HORIZON, fitting, host_groups, usable
from ..windows import openings, zone


@dataclass(frozen=True)
class Verdict:
    reason: str = ""  # "": the stage may start
    approval: dict | None = None  # the record that lets it start outside its window
    window: str | None = None  # the window it runs in
    gated: bool = True  # False: the stage needs no window (or the definition has none)


def clock(now: datetime | None) -> Callable[[], datetime]:
    """The real time, or `now` (apply --now) moving on with the time elapsed since."""
    if now is None:
        return lambda: datetime.now(timezone.utc)
    t0 = time.monotonic()
    return lambda: now + timedelta(seconds=time.monotonic() - t0)


def stage_minutes(doc: dict, name: str) -> int:
    """The stage's minutes in the plan's estimate (0 when the estimate does not list it)."""
    rows = ((doc["rollout"].get("estimate") or {}).get("timeline")) or []
    return next((r["minutes"] for r in rows if r.get("stage") == name), 0)


def _local(at: datetime, tz) -> str:
    return at.astimezone(tz).isoformat(timespec="minutes")


def check_stage(d, doc: dict, records: list[dict], name: str, at: datetime) -> Verdict:
    """Whether stage `name` of the plan `doc` may start at `at` on definition `d` (the new side)."""
    s = d.service
    tz = zone(s.timezone) if s is not None else None
    st = next((x for x in doc["rollout"]["stages"] if x.get("name") == name), None)
    if s is None or not s.maintenance_windows or tz is None or st is None:
        return Verdict(gated=False)
    windows = usable(d)
    scope, fit = fitting(st, windows, host_groups(d))
    if scope is None:
        return Verdict(gated=False)
    length = timedelta(minutes=stage_minutes(doc, name))
    end = at + length
    for n in fit:
        if any(o <= at and end <= c for o, c in openings(windows[n][0], tz, at, at + timedelta(seconds=1))):
            return Verdict(window=n)
    cls, groups = stage_groups(doc, st)
    approval = by_group(records, {"stage": name}, groups)
    if approval is not None:
        return Verdict(approval=approval)
    room = sorted((max(at, o), n) for n in fit for o, c in openings(windows[n][0], tz, at, at + HORIZON)
                  if c - max(at, o) >= length)
    if fit:
        need = (f"its maintenance window {' or '.join(f'`{n}`' for n in fit)}"
                + (f" (next with room for it: `{room[0][1]}` at {_local(room[0][0], tz)})" if room else
                   " (none of its openings is long enough)"))
    else:
        need = ("a whole-cluster window" if scope == "cluster" else
                f"a window over node group(s) {', '.join(scope)}") + " (the definition has none)"
    head = (f"stage `{name}` would run {_local(at, tz)} to {_local(end, tz)} ({stage_minutes(doc, name)} min, the "
            f"plan's estimate), outside {need}")
    if not groups:
        return Verdict(reason=f"{head}; service.approvers names no group that could approve it, so it runs only "
                              "inside its window")
    return Verdict(reason=f"{head}; running it now needs an approval by {' or '.join(groups)} "
                          f"(service.approvers, {cls}): clusterdef approve PLAN --stage {shlex.quote(name)} "
                          f"--group {shlex.quote(groups[0])} --by WHO --why TEXT")
