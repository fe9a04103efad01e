"""When the maintenance windows and supported hours of `service` are open, as instants (docs/service.md).

Local times are read in `service.timezone` with the tz database Python's zoneinfo reads (the system's
/usr/share/zoneinfo, or the tzdata package). A window opens at its local start and stays open for its
`hours` of elapsed time, so a window that spans a daylight-saving change is as long as any other. A start
that does not exist on a spring-forward day (02:30 in Europe/Berlin on the last Sunday of March) opens when
the clock reaches it after the jump (03:30 local, the same instant as 02:30 in the offset before); a start
that occurs twice on a fall-back day opens at the first (PEP 495 fold=0). Pure: no clock."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .model.service import DAYS, SupportedHours, Window, minutes_of

WEEK = 7 * 1440


def zone(name: str) -> ZoneInfo | None:
    """The zone of an IANA name, None when the tz database has no such zone."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def local_instant(day: date, clock: str, tz: ZoneInfo) -> datetime:
    """The UTC instant of a local wall-clock time on a day (see the module's note on DST days)."""
    m = minutes_of(clock)
    wall = datetime.combine(day + timedelta(days=m // 1440), time(m % 1440 // 60, m % 60), tzinfo=tz)
    return wall.astimezone(timezone.utc)


def openings(window: Window, tz: ZoneInfo, since: datetime, until: datetime) -> list[tuple[datetime, datetime]]:
    """(open, close) in UTC of each opening of the window that is still open at `since` or opens before `until`."""
    if not window.days or window.hours <= 0:
        return []
    length = timedelta(hours=window.hours)
    first = since.astimezone(tz).date() - timedelta(days=8)  # a window up to 168 h long opened last week
    out = []
    day = first
    while True:
        if DAYS[day.weekday()] in window.days:
            start = local_instant(day, window.start, tz)
            if start >= until:
                break
            if start + length > since:
                out.append((start, start + length))
        elif local_instant(day, "00:00", tz) >= until:
            break
        day += timedelta(days=1)
    return out


def week_spans(window: Window) -> list[tuple[int, int]]:
    """The window's openings as minutes of a local week (Monday 00:00 = 0), split where they wrap past Sunday."""
    out = []
    for d in window.days:
        a = DAYS.index(d) * 1440 + minutes_of(window.start)
        b = a + round(window.hours * 60)
        out += [(a, min(b, WEEK))] + ([(0, b - WEEK)] if b > WEEK else [])
    return out


def overlap(a: Window, b: Window) -> bool:
    """Whether two windows are open at once in some week (local wall clock)."""
    return any(x0 < y1 and y0 < x1 for x0, x1 in week_spans(a) for y0, y1 in week_spans(b))


def staffed(hours: SupportedHours, tz: ZoneInfo, at: datetime) -> bool:
    """Whether an instant falls in the supported hours."""
    local = at.astimezone(tz)
    m = local.hour * 60 + local.minute
    return DAYS[local.weekday()] in hours.days and minutes_of(hours.start) <= m < minutes_of(hours.end)


def groups_of(window: Window, definition) -> frozenset[str]:
    """The node groups a window covers: every group for a whole-cluster window, else its node groups and
    the node groups of its partitions (names that are neither are left to service-window-scope-unknown)."""
    if window.whole_cluster:
        return frozenset(definition.nodes)
    parts = definition.slurm.partitions if definition.slurm is not None else {}
    out = {g for g in window.node_groups if g in definition.nodes}
    out |= {g for p in window.partitions if p in parts for g in parts[p].node_groups}
    return frozenset(out)
