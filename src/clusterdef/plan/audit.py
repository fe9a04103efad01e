"""Changes that need an approver (issue 31, docs/service.md#audit): the plan lists, between the from and
to definitions, every change of the rules that govern changes, each as {"kind", "subject", "group", "why"}
(`changes_needing_approval` in the plan file). Entries with the same kind and subject are alternatives:
the change is approved when one of their groups has approved it (`clusterdef approve --change`), and
`clusterdef apply` refuses a plan with a change no listed group has approved.

Each hook is `hook(old: Definition, new: Definition) -> list[dict]`; HOOKS lists them: the service
section's own changes (here) and every change of a dataset's classification or authorisations and of a
privileged-workload approval (`governance.changes_needing_approval`). Every entry a hook returns is checked
here: four strings, bounded; a hook that breaks the shape is a programming error (ValueError), never a plan. Pure."""

from __future__ import annotations

import re
from typing import Callable

from .. import governance

KEYS = ("kind", "subject", "group", "why")
KIND = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
LIMITS = {"kind": 64, "subject": 256, "group": 256, "why": 500}
APPROVERS, WINDOWS, TIMEZONE = "service.approvers", "service.maintenance_windows", "service.timezone"


def governing_groups(old, new) -> list[str]:
    """Who approves a change of the rules: the groups the old definition names in `service.approvers`
    (those in power when the change is made), else the new definition's (the rules adopted), else the
    administrators of `identity.admin_groups` (old, then new). Empty: nobody is named."""
    for d in (old, new):
        if d is not None and d.service is not None and d.service.approvers:
            return sorted({g for groups in d.service.approvers.values() for g in groups})
    for d in (old, new):
        if d is not None and d.identity is not None:
            return sorted(d.identity.admin_groups)
    return []


def _window(w) -> str:
    if w is None:
        return "none"
    scope = ([f"node groups {', '.join(w.node_groups)}"] if w.node_groups else []) + \
        ([f"partitions {', '.join(w.partitions)}"] if w.partitions else [])
    return f"{','.join(w.days) or 'no day'} {w.start} for {w.hours:g} h ({'; '.join(scope) or 'whole cluster'})"


def service_changes(old, new) -> list[dict]:
    """The approvers of each disruption class, the time zone and each maintenance window that differ."""
    so, sn = getattr(old, "service", None), getattr(new, "service", None)
    ao, an = (so.approvers if so else {}), (sn.approvers if sn else {})
    wo, wn = (so.maintenance_windows if so else {}), (sn.maintenance_windows if sn else {})
    found: list[tuple[str, str, str]] = []
    for cls in sorted({*ao, *an}):
        if tuple(ao.get(cls, ())) != tuple(an.get(cls, ())):
            found.append((APPROVERS, cls, f"approvers of {cls} changes: {', '.join(ao.get(cls, ())) or 'none'} -> "
                                          f"{', '.join(an.get(cls, ())) or 'none'}"))
    tz_o, tz_n = (so.timezone if so else None), (sn.timezone if sn else None)
    if tz_o != tz_n and (wo or wn):  # every window's local times move with the zone
        found.append((TIMEZONE, "timezone", f"the windows' time zone: {tz_o or 'none'} -> {tz_n or 'none'}"))
    for name in sorted({*wo, *wn}):
        a, b = wo.get(name), wn.get(name)
        if a != b:
            what = "added" if a is None else "removed" if b is None else "changed"
            found.append((WINDOWS, name, f"maintenance window {name} {what}: {_window(a)} -> {_window(b)}"))
    groups = governing_groups(old, new) or [""]  # "": nobody is named; apply refuses it with a hint
    return [{"kind": k, "subject": s, "group": g, "why": w} for k, s, w in found for g in groups]


HOOKS: tuple[Callable, ...] = (service_changes, governance.changes_needing_approval)


def checked(entry) -> dict:
    """One hook entry, its shape enforced (ValueError otherwise)."""
    if not isinstance(entry, dict) or set(entry) != set(KEYS) or not all(isinstance(entry[k], str) for k in KEYS):
        raise ValueError(f"a change needing approval must be a dict of strings {KEYS}, not {entry!r:.200}")
    for k in KEYS:
        if len(entry[k]) > LIMITS[k] or any(ord(c) < 32 or ord(c) == 127 for c in entry[k]):
            raise ValueError(f"a change needing approval: {k} is too long or holds control characters")
    if not KIND.fullmatch(entry["kind"]) or not entry["subject"]:
        raise ValueError(f"a change needing approval: kind {entry['kind']!r:.80} or an empty subject")
    return {k: entry[k] for k in KEYS}


def changes_needing_approval(old, new, hooks: tuple[Callable, ...] = HOOKS) -> list[dict]:
    """Every hook's entries, checked, without duplicates, in a stable order (kind, subject, group)."""
    out = {tuple(e[k] for k in KEYS): e for hook in hooks for e in map(checked, hook(old, new))}
    return [out[k] for k in sorted(out)]


def by_change(entries: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """The entries grouped by (kind, subject): the alternatives of one change."""
    out: dict[tuple[str, str], list[dict]] = {}
    for e in entries:
        out.setdefault((e["kind"], e["subject"]), []).append(e)
    return out
