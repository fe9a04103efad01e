"""A plan's steps run in order (`execute`): halt at the first failing one. The run record (JSON) is
the rollout's state: it is written durably (a temporary file, fsync, rename, fsync of the folder)
when each step starts and when it ends, and every start and end is also appended, fsync'ed, to an
append-only journal beside it (`<record>.events`), so that a record survives the process being
killed at any point. `clusterdef apply --resume` (resume.py) passes the record back in: the steps
recorded as finished OK are kept, and the run continues at the first step that is not (a step
recorded as started but never finished runs again: every step is idempotent, docs/apply.md).
Progress goes to callbacks (cli/apply.py draws it with report.py); nothing here prints.
The record and the private data dir sit beside the plan file (`run_paths`)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from .. import __version__
from .events import fold
from .runner import RunResult, run_playbook

RECORD_FORMAT = 2
DONE = ("successful", "skipped")  # a step recorded with one of these is not run again on --resume


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ident(i: int, step, attempt: int = 1) -> str:
    base = f"{i:02d}-{step.stage}-{step.action}-{step.wave or 'all'}" + (f"-r{attempt}" if attempt > 1 else "")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", base)


def write_durable(path: Path, text: str) -> None:
    """`text` into `path` so that after a crash the file holds either the old or the new text, and the
    new one once this returns: a temporary sibling, fsync, rename over the file, fsync of the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def journal_path(record_path: Path) -> Path:
    return Path(record_path).with_name(Path(record_path).name + ".events")


def append_event(record_path: Path, event: dict) -> None:
    """One JSON line appended (O_APPEND) and fsync'ed to the record's journal."""
    fd = os.open(journal_path(record_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (json.dumps(event, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def step_key(step) -> dict:
    """What identifies a step between a run and its resumption."""
    j = step.to_json()
    return {k: j.get(k) or "" for k in ("stage", "action", "wave", "hosts")}


def first_unfinished(record: dict, steps) -> int:
    """The index of the first step the record does not hold as finished OK (len(steps): all are).
    ValueError when a finished step of the record is not the step at its place now."""
    done: dict[int, dict] = {}
    for run in record.get("runs") or []:
        if isinstance(run, dict) and isinstance(run.get("index"), int) and run.get("status") in DONE:
            done[run["index"]] = run
    for i, step in enumerate(steps):
        run = done.get(i)
        if run is None:
            return i
        want = step_key(step)
        got = {k: run.get(k) or "" for k in want}
        if got != want:
            raise ValueError(f"step {i + 1} of the run record ({got['stage']}: {got['action']} {got['wave']}) is "
                             f"not step {i + 1} of the plan now ({want['stage']}: {want['action']} {want['wave']})")
    return len(steps)


def execute(steps, private_data_dir: Path, inventory: Path, record_path: Path, header: dict, extravars: dict,
            check: bool = False, on_step: Callable | None = None, on_event: Callable | None = None,
            on_done: Callable | None = None, run: Callable = run_playbook, secret_env: Iterable[str] = (),
            vault_ids: Iterable[str] = (), forks: int | None = None, resume: dict | None = None,
            gate: Callable | None = None, approvals: Iterable[dict] = ()) -> dict:
    """Run `steps` in order; stop at the first that fails. The run record lists what ran: stage, wave,
    hosts, rc, start/end, artifact dir, which tasks changed (would change) on which hosts; and what did
    not run. `resume`: a record of an earlier run of the same steps, continued at its first step not
    finished OK (its earlier runs of that step and after it are kept under `attempts`). `gate(i, step)`
    (gate.py) is asked before each stage starts: a verdict with a reason holds the run there (status
    `held`, the reason under `holds`; `--resume` asks again); the approvals it used and `approvals` (the
    plan's required ones) are copied into the record's `approvals` (who, group, when, why, what)."""
    if resume is None:
        record = {"record_format": RECORD_FORMAT, "clusterdef": __version__, **header, "check": check,
                  "private_data_dir": str(private_data_dir), "inventory": str(inventory),
                  "started": _now(), "finished": None, "status": "running", "halted_at": None, "runs": [],
                  "capacity": [], "not_run": [], "resumed": []}
        first = 0
    else:
        record = resume
        first = first_unfinished(record, steps)
        kept = [r for r in record.get("runs") or [] if isinstance(r.get("index"), int) and r["index"] < first
                and r.get("status") in DONE]
        record.setdefault("attempts", []).extend(r for r in record.get("runs") or [] if r not in kept)
        record.setdefault("resumed", []).append({"at": _now(), "from_step": first + 1,
                                                 "label": steps[first].label if first < len(steps) else None,
                                                 "previous_status": record.get("status")})
        record.update(runs=kept, status="running", halted_at=None, not_run=[], finished=None)
    attempt = len(record.get("resumed") or []) + 1
    returned = {"nodes": sum(c.get("nodes", 0) for c in record["capacity"]),
                "gpus": sum(c.get("gpus", 0) for c in record["capacity"])}

    def save() -> None:
        write_durable(record_path, json.dumps(record, indent=2) + "\n")

    def journal(i: int, step, event: str, **more) -> None:
        append_event(record_path, {"at": _now(), "index": i, "label": step.label, "event": event, **more})

    def approved(rec: dict) -> None:
        kept = record.setdefault("approvals", [])
        entry = {k: rec[k] for k in ("group", "by", "at", "why", "covers")}
        if entry not in kept:
            kept.append(entry)

    for a in approvals:
        approved(a)
    save()
    status = "succeeded"
    gated = None
    for i in range(first, len(steps)):
        step = steps[i]
        if gate is not None and step.playbook is not None and step.stage != gated:
            gated = step.stage
            verdict = gate(i, step)
            if verdict.approval is not None:
                approved(verdict.approval)
            if verdict.reason:  # outside its window, not approved: nothing of the stage runs
                status = "held"
                record.setdefault("holds", []).append({"at": _now(), "stage": step.stage, "reason": verdict.reason})
                record.update(halted_at=step.label, not_run=[s.to_json() for s in steps[i:]])
                break
        entry = {"index": i, "label": step.label, **step.to_json()}
        if step.playbook is None:
            entry.update(status="skipped", rc=None, start=_now(), end=_now())
            record["runs"].append(entry)
            if on_step:
                on_step(i, step)
            if on_done:
                on_done(i, step, None)
            journal(i, step, "end", status="skipped")
            save()
            continue
        if on_step:
            on_step(i, step)
        entry.update(start=_now(), status="running", pid=os.getpid())
        record["runs"].append(entry)
        journal(i, step, "start")
        save()  # a step recorded as started and never finished is run again by --resume
        try:
            result = run(private_data_dir, step.playbook, inventory, step.extravars(extravars), check=check,
                         limit=step.limit, ident=_ident(i, step, attempt), on_event=on_event, secret_env=secret_env,
                         vault_ids=vault_ids, forks=forks)
        except BaseException as exc:  # the runner broke, or an interrupt: record it, then stop
            interrupted = isinstance(exc, KeyboardInterrupt)
            entry.update(end=_now(), status="interrupted" if interrupted else "error", rc=None,
                         error=f"{type(exc).__name__}: {exc}")
            record.update(status="interrupted" if interrupted else "error", halted_at=step.label,
                          not_run=[s.to_json() for s in steps[i + 1:]], finished=_now())
            journal(i, step, "end", status=entry["status"])
            save()
            raise
        entry["end"] = _now()
        processed = set((result.stats or {}).get("processed") or {})
        missed = [h for h in step.hosts if h not in processed]
        if missed and result.ok:  # a pattern that matched nothing must not pass as success
            result.rc, result.status = 1, "failed"
            result.failures.append(f"{len(missed)} host(s) of the step were never reached: "
                                   f"{', '.join(missed[:10])}{' ...' if len(missed) > 10 else ''}")
        if step.action == "snapshot" and result.ok:
            _record_versions(record, step, result, check)
        entry.update(result.summary())
        if step.returns and result.ok:  # the wave passed its gates and smoke tests: its nodes are back
            returned["nodes"] += len(step.hosts)
            returned["gpus"] += step.gpus
            record["capacity"].append({"stage": step.stage, "wave": step.wave, "hosts": fold(step.hosts),
                                       "nodes": len(step.hosts), "gpus": step.gpus, "at": _now(),
                                       "nodes_returned": returned["nodes"], "gpus_returned": returned["gpus"]})
        journal(i, step, "end", status=entry["status"], rc=entry.get("rc"))
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


def _record_versions(record: dict, step, result: RunResult, check: bool) -> None:
    """Every host's versions from the snapshot step's facts files into the record; a host without
    them fails the step (nothing is changed on a node whose versions are not on record). In check
    mode, where a node that never ran gpu_facts has no facts yet, they are listed instead."""
    from . import snapshot

    snap = record.setdefault("snapshot", {})
    groups, missing = snapshot.versions(Path(snap.get("facts_dir") or "."), step.hosts)
    snap["versions"] = groups
    snap["versions_missing"] = fold(missing)
    if missing and not check:
        result.rc, result.status = 1, "failed"
        result.failed_hosts = list(dict.fromkeys([*result.failed_hosts, *missing]))
        result.failures.append(f"no versions recorded for {len(missing)} host(s) (snapshot/facts/<host>.json): "
                               f"{fold(missing)}")


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

