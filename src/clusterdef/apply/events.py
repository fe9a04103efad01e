"""What ansible-runner's events say, summed up for the run record: which tasks changed (in
check mode: would change) on which hosts (`ChangeSummary`, with a diff excerpt per task), and
each smoke test's result per host (`SmokeResults`). Memory grows with hosts x tasks, never with
events or output sizes."""

from __future__ import annotations

import difflib
import json
import re
from typing import Callable, Iterable

_CHANGE_EVENTS = frozenset({"runner_on_ok", "runner_on_failed", "runner_on_async_ok"})
DIFF_MAX_LINES, DIFF_MAX_CHARS, DIFF_MAX_LINE = 40, 4000, 240


def task_label(data: dict) -> str:
    """`role : task` as Ansible prints it (the bare task name outside roles)."""
    task = str(data.get("task") or data.get("task_action") or "?").strip()
    role = str(data.get("role") or "").strip()
    return f"{role} : {task}" if role and not task.startswith(f"{role} : ") else task


def _diffs(res: dict) -> list:
    """The diffs of one task result: its own, or its changed loop items'."""
    out: list = []
    for r in [res, *[x for x in res.get("results") or [] if isinstance(x, dict) and x.get("changed")]]:
        d = r.get("diff")
        for one in (d if isinstance(d, list) else [d]) if d else []:
            if one not in out:  # loop items often repeat the same diff
                out.append(one)
    return out


def _lines(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines()
    return json.dumps(value, indent=2, sort_keys=True, default=str).splitlines()


def diff_text(diffs: list, max_lines: int = DIFF_MAX_LINES, max_chars: int = DIFF_MAX_CHARS) -> str:
    """A unified diff of Ansible's `diff` results (before/after with headers, or `prepared`
    text), cut to `max_lines` lines and `max_chars` characters."""
    lines: list[str] = []
    for d in diffs:
        if len(lines) > max_lines:
            break
        if isinstance(d, str):
            lines += d.splitlines()
        elif isinstance(d, dict) and d.get("prepared"):
            lines += _lines(d["prepared"])
        elif isinstance(d, dict) and ("before" in d or "after" in d):
            lines += difflib.unified_diff(_lines(d.get("before")), _lines(d.get("after")),
                                          str(d.get("before_header") or "before"),
                                          str(d.get("after_header") or "after"), lineterm="")
    lines = [line if len(line) <= DIFF_MAX_LINE else line[:DIFF_MAX_LINE] + " ..." for line in lines]
    more = len(lines) - max_lines
    text = "\n".join(lines[:max_lines])
    if len(text) > max_chars:
        text = text[:max_chars].rsplit("\n", 1)[0]
        more = max(more, 1)
    return text + (f"\n... ({more} more lines)" if more > 0 else "")


def fold(hosts) -> str:
    from .. import hostlist

    hosts = list(hosts)
    if not hosts:
        return ""
    try:
        return hostlist.fold(hosts)
    except Exception:  # noqa: BLE001 - a name NodeSet cannot parse: list them as they are
        return ",".join(sorted(hosts))


class ChangeSummary:
    """Which tasks changed (in check mode: would change) on which hosts, fed one ansible-runner
    event at a time. It keeps a host set per changed task and one diff excerpt per task (from
    the first host whose result has one), so memory grows with hosts x changed tasks, never
    with events or diff sizes."""

    def __init__(self) -> None:
        self._tasks: dict[str, dict] = {}

    def add(self, event: dict) -> None:
        if event.get("event") not in _CHANGE_EVENTS:
            return
        data = event.get("event_data") or {}
        res, host = data.get("res"), data.get("host")
        if not host or not isinstance(res, dict) or not res.get("changed"):
            return
        label = task_label(data)
        task = self._tasks.get(label)
        if task is None:
            task = self._tasks[label] = {"action": data.get("resolved_action") or data.get("task_action") or "",
                                         "hosts": set(), "diff": "", "diff_host": ""}
        task["hosts"].add(host)
        if not task["diff"]:
            text = diff_text(_diffs(res))
            if text:
                task["diff"], task["diff_host"] = text, host

    def to_json(self, reached: Iterable[str] = (), failed: Iterable[str] = (),
                redact: Callable[[str], str] = lambda s: s) -> dict:
        """`changes`: one entry per changed task in the order they ran (`n` from 1, task, action,
        folded hosts, count, diff excerpt and the host it came from); `change_groups`: hosts
        with the same set of changed tasks (`tasks`: their `n`), largest group first;
        `hosts_reached`, `hosts_changed` and `hosts_unchanged` (folded: reached, not failed,
        nothing changed)."""
        changes: list[dict] = []
        per_host: dict[str, list[int]] = {}
        for n, (label, task) in enumerate(self._tasks.items(), 1):
            entry = {"n": n, "task": label, "action": task["action"], "hosts": fold(task["hosts"]),
                     "count": len(task["hosts"])}
            if task["diff"]:
                entry.update(diff=redact(task["diff"]), diff_host=task["diff_host"])
            changes.append(entry)
            for h in task["hosts"]:
                per_host.setdefault(h, []).append(n)
        groups: dict[tuple[int, ...], list[str]] = {}
        for h, numbers in per_host.items():
            groups.setdefault(tuple(numbers), []).append(h)
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        reached, failed = list(dict.fromkeys(reached)), set(failed)
        unchanged = [h for h in reached if h not in per_host and h not in failed]
        return {"hosts_reached": len(reached), "hosts_changed": len(per_host), "hosts_unchanged": fold(unchanged),
                "changes": changes,
                "change_groups": [{"hosts": fold(hs), "count": len(hs), "tasks": list(ns)} for ns, hs in ordered]}


SMOKE_TASK = "Clusterdef smoke tests"  # the looped task of playbooks/smoke.yml
_ITEM_EVENTS = {"runner_item_on_ok": "ok", "runner_item_on_failed": "failed", "runner_item_on_skipped": "skipped"}
_PRINTABLE = re.compile(r"[^\x20-\x7e]+")


class SmokeResults:
    """Per smoke test (a loop item of SMOKE_TASK): the hosts it passed, failed and skipped on, and
    the first failure's exit code and output tail (node output: printable ASCII only, cut short).
    Memory grows with tests x hosts, never with output sizes."""

    def __init__(self) -> None:
        self._tests: dict[str, dict] = {}

    def add(self, event: dict) -> None:
        outcome = _ITEM_EVENTS.get(event.get("event", ""))
        data = event.get("event_data") or {}
        if outcome is None or str(data.get("task", "")).strip() != SMOKE_TASK:
            return
        res, host = data.get("res") or {}, data.get("host") or ""
        item = res.get("item") if isinstance(res, dict) else None
        if not isinstance(item, dict) or not host:
            return
        name = _PRINTABLE.sub(" ", str(item.get("name", "?")))[:64]
        test = self._tests.setdefault(name, {"layer": _PRINTABLE.sub(" ", str(item.get("layer", "")))[:16],
                                             "ok": set(), "failed": set(), "skipped": set(), "first_failure": ""})
        test[outcome].add(host)
        if outcome == "failed" and not test["first_failure"]:
            tail = _PRINTABLE.sub(" ", str(res.get("stderr") or res.get("stdout") or res.get("msg") or ""))
            test["first_failure"] = f"{host}: rc {res.get('rc')}: {tail[-240:].strip()}"

    def to_json(self, redact: Callable[[str], str] = lambda s: s) -> list[dict]:
        return [{"test": name, "layer": t["layer"], "ok": fold(t["ok"]), "failed": fold(t["failed"]),
                 "skipped": fold(t["skipped"]), **({"first_failure": redact(t["first_failure"])}
                                                    if t["first_failure"] else {})}
                for name, t in self._tests.items()]

