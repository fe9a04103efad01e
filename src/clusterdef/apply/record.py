"""A plan's steps run in order (`execute`): halt at the first failing one, and keep a JSON run
record up to date after every step, so that a record exists even when the process is
interrupted. Progress goes to callbacks (cli.py draws it with report.py); nothing here prints.
The record and the private data dir sit beside the plan file (`run_paths`)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from .. import __version__
from ..writer import write_file_atomic
from .events import fold
from .runner import RunResult, run_playbook

RECORD_FORMAT = 1


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ident(i: int, step) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{i:02d}-{step.stage}-{step.action}-{step.wave or 'all'}")


def execute(steps, private_data_dir: Path, inventory: Path, record_path: Path, header: dict, extravars: dict,
            check: bool = False, on_step: Callable | None = None, on_event: Callable | None = None,
            on_done: Callable | None = None, run: Callable = run_playbook, secret_env: Iterable[str] = (),
            vault_ids: Iterable[str] = (), forks: int | None = None) -> dict:
    """Run `steps` in order; stop at the first that fails. The run record (JSON, rewritten after
    every step) lists what ran: stage, wave, hosts, rc, start/end, artifact dir, which tasks
    changed (would change) on which hosts; and what did not run."""
    record = {"record_format": RECORD_FORMAT, "clusterdef": __version__, **header, "check": check,
              "private_data_dir": str(private_data_dir), "inventory": str(inventory),
              "started": _now(), "finished": None, "status": "running", "halted_at": None, "runs": [],
              "capacity": [], "not_run": []}
    returned = {"nodes": 0, "gpus": 0}

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
                         limit=step.limit, ident=_ident(i, step), on_event=on_event, secret_env=secret_env,
                         vault_ids=vault_ids, forks=forks)
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
        if step.action == "snapshot" and result.ok:
            _record_versions(record, step, result, check)
        entry.update(result.summary())
        record["runs"].append(entry)
        if step.returns and result.ok:  # the wave passed its gates and smoke tests: its nodes are back
            returned["nodes"] += len(step.hosts)
            returned["gpus"] += step.gpus
            record["capacity"].append({"stage": step.stage, "wave": step.wave, "hosts": fold(step.hosts),
                                       "nodes": len(step.hosts), "gpus": step.gpus, "at": _now(),
                                       "nodes_returned": returned["nodes"], "gpus_returned": returned["gpus"]})
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

