"""ansible-runner driver for `clusterdef apply`.

`run_playbook` runs one playbook through ansible-runner and sums its events up;
`execute` runs a plan's steps (clusterdef.plan.apply) in order, halts at the first failing
one, and keeps a JSON run record up to date after every step, so that a record exists even
when the process is interrupted. Nothing here prints: progress goes to callbacks (cli.py
draws it with rich).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from . import __version__
from .writer import write_file_atomic

RECORD_FORMAT = 1


class RunnerMissing(RuntimeError):
    """ansible-runner is not installed (the `ansible` extra)."""


@dataclass
class RunResult:
    rc: int
    status: str                       # successful | failed | timeout | canceled
    artifact_dir: str
    stats: dict = field(default_factory=dict)   # ansible's per-host counters (ok, changed, failures, dark...)
    failed_hosts: list[str] = field(default_factory=list)
    unreachable_hosts: list[str] = field(default_factory=list)
    events: int = 0
    failures: list[str] = field(default_factory=list)  # "host: task: msg", first few

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.status == "successful"

    def summary(self) -> dict:
        counts = {k: sum((self.stats.get(k) or {}).values()) for k in ("ok", "changed", "failures", "dark", "skipped")}
        return {"rc": self.rc, "status": self.status, "artifact_dir": self.artifact_dir, "events": self.events,
                "tasks": counts, "failed_hosts": self.failed_hosts, "unreachable_hosts": self.unreachable_hosts,
                "failures": self.failures}


def _env(playbook: Path, envvars: dict | None) -> dict:
    """ansible-playbook from this Python's environment first on PATH, and the roles beside the
    playbooks folder on the roles path."""
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "ANSIBLE_NOCOLOR": "1"}
    roles = Path(playbook).resolve().parent.parent / "roles"
    if roles.is_dir():
        env["ANSIBLE_ROLES_PATH"] = os.pathsep.join(
            p for p in (str(roles), os.environ.get("ANSIBLE_ROLES_PATH", "")) if p)
    return {**env, **(envvars or {})}


def run_playbook(private_data_dir: str | Path, playbook: str | Path, inventory: str | Path, extravars: dict,
                 check: bool = False, limit: str | None = None, ident: str | None = None,
                 envvars: dict | None = None, on_event: Callable[[dict], None] | None = None) -> RunResult:
    """Run one playbook. `check` runs Ansible's check + diff mode. Artifacts (stdout, events,
    rc) land in `<private_data_dir>/artifacts/<ident>/`."""
    try:
        import ansible_runner
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RunnerMissing("ansible-runner is not installed: pip install 'clusterdef[ansible]'") from exc
    pdd = Path(private_data_dir)
    pdd.mkdir(parents=True, exist_ok=True)
    playbook = Path(playbook).resolve()
    failures: list[str] = []
    failed: list[str] = []
    unreachable: list[str] = []
    count = 0

    def handler(event: dict) -> bool:
        nonlocal count
        count += 1
        kind, data = event.get("event", ""), event.get("event_data") or {}
        host = data.get("host", "")
        if kind == "runner_on_failed" and not data.get("ignore_errors"):
            if host not in failed:
                failed.append(host)
            if len(failures) < 10:
                msg = (data.get("res") or {}).get("msg", "")
                failures.append(f"{host}: {data.get('task', '?')}: {msg}".rstrip(": "))
        elif kind == "runner_on_unreachable" and host not in unreachable:
            unreachable.append(host)
        if on_event is not None:
            on_event(event)
        return True

    kwargs = dict(private_data_dir=str(pdd), project_dir=str(playbook.parent), playbook=str(playbook),
                  inventory=str(inventory), extravars=extravars, envvars=_env(playbook, envvars),
                  quiet=True, event_handler=handler, ident=ident)
    if limit:
        kwargs["limit"] = limit
    if check:
        kwargs["cmdline"] = "--check --diff"
    r = ansible_runner.run(**kwargs)
    return RunResult(rc=r.rc if r.rc is not None else -1, status=r.status or "unknown",
                     artifact_dir=str(r.config.artifact_dir), stats=r.stats or {}, failed_hosts=failed,
                     unreachable_hosts=unreachable, events=count, failures=failures)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ident(i: int, step) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{i:02d}-{step.stage}-{step.action}-{step.wave or 'all'}")


def execute(steps, private_data_dir: Path, inventory: Path, record_path: Path, header: dict, extravars: dict,
            check: bool = False, on_step: Callable | None = None, on_event: Callable | None = None,
            on_done: Callable | None = None, run: Callable = run_playbook) -> dict:
    """Run `steps` in order; stop at the first that fails. The run record (JSON, rewritten after
    every step) lists what ran: stage, wave, hosts, rc, start/end, artifact dir; and what did not."""
    record = {"record_format": RECORD_FORMAT, "clusterdef": __version__, **header, "check": check,
              "private_data_dir": str(private_data_dir), "inventory": str(inventory),
              "started": _now(), "finished": None, "status": "running", "halted_at": None, "runs": [],
              "not_run": []}

    def save() -> None:
        write_file_atomic(record_path, json.dumps(record, indent=2) + "\n")

    save()
    status = "succeeded"
    for i, step in enumerate(steps):
        entry = step.to_json()
        if step.playbook is None:
            entry.update(status="skipped", rc=None, start=_now(), end=_now())
            record["runs"].append(entry)
            if on_step:
                on_step(i, step)
            if on_done:
                on_done(i, step, None)
            save()
            continue
        if on_step:
            on_step(i, step)
        entry["start"] = _now()
        try:
            result = run(private_data_dir, step.playbook, inventory, step.extravars(extravars), check=check,
                         limit=step.limit, ident=_ident(i, step), on_event=on_event)
        except Exception as exc:  # the runner itself broke: record it, then stop
            entry.update(end=_now(), status="error", rc=None, error=f"{type(exc).__name__}: {exc}")
            record["runs"].append(entry)
            record.update(status="error", halted_at=step.label,
                          not_run=[s.to_json() for s in steps[i + 1:]], finished=_now())
            save()
            raise
        entry["end"] = _now()
        processed = set((result.stats or {}).get("processed") or {})
        missed = [h for h in step.hosts if h not in processed]
        if missed and result.ok:  # a pattern that matched nothing must not pass as success
            result.rc, result.status = 1, "failed"
            result.failures.append(f"{len(missed)} host(s) of the step were never reached: "
                                   f"{', '.join(missed[:10])}{' ...' if len(missed) > 10 else ''}")
        entry.update(result.summary())
        record["runs"].append(entry)
        if on_done:
            on_done(i, step, result)
        if not result.ok:
            status = "failed"
            record["halted_at"] = step.label
            record["not_run"] = [s.to_json() for s in steps[i + 1:]]
            save()
            break
        save()
    record.update(status=status, finished=_now())
    save()
    return record


def run_paths(plan_file: Path, when: datetime | None = None) -> tuple[Path, Path]:
    """(run record, private data dir) beside the plan file, named after it and the UTC time:
    `plan.run-20260730T101500Z.json` and `plan.apply-20260730T101500Z/`."""
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    plan_file = Path(plan_file).resolve()
    n = 1
    while True:
        tag = stamp if n == 1 else f"{stamp}-{n}"
        record = plan_file.parent / f"{plan_file.stem}.run-{tag}.json"
        pdd = plan_file.parent / f"{plan_file.stem}.apply-{tag}"
        if not record.exists() and not pdd.exists():
            break
        n += 1
    return record, pdd


def write_inventory(pdd: Path, files: dict[str, str]) -> Path:
    """Write the rendered ansible/ tree (inventory + group_vars) into the private data dir;
    return the folder to pass as inventory (so group_vars load)."""
    root = Path(pdd).resolve() / "ansible"
    for rel, text in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
    return root
