"""One playbook through ansible-runner (`run_playbook`): check + diff mode on request, the
secrets through a pipe (see secrets.py), and its events summed up (events.py) into a
`RunResult`. Nothing here prints."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .events import ChangeSummary, SmokeResults
from .secrets import WITHHELD, WRAPPER, EnvPipe, redactor, secret_values, withheld_names


class RunnerMissing(RuntimeError):
    """ansible-runner is not installed (the `ansible` extra)."""


RUNNER = "ansible_runner"  # the module runs go through (a name, so a test can stand in a missing one)


def require(playbooks: Path) -> None:
    """RunnerMissing unless ansible-runner imports and ansible-playbook is on the PATH that runs of the
    playbooks in `playbooks` get: apply asks before it takes the lock or writes anything."""
    if importlib.util.find_spec(RUNNER) is None:
        raise RunnerMissing("ansible-runner is not installed: pip install 'clusterdef[ansible]'")
    if shutil.which("ansible-playbook", path=_env(Path(playbooks) / "upgrade.yml", None)["PATH"]) is None:
        raise RunnerMissing("ansible-playbook is not on PATH: pip install 'clusterdef[ansible]'")



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
    changes: dict = field(default_factory=dict)  # ChangeSummary.to_json()
    smoke: list = field(default_factory=list)     # SmokeResults.to_json()

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.status == "successful"

    def summary(self) -> dict:
        counts = {k: sum((self.stats.get(k) or {}).values()) for k in ("ok", "changed", "failures", "dark", "skipped")}
        return {"rc": self.rc, "status": self.status, "artifact_dir": self.artifact_dir, "events": self.events,
                "tasks": counts, "failed_hosts": self.failed_hosts, "unreachable_hosts": self.unreachable_hosts,
                "failures": self.failures, **self.changes, **({"smoke": self.smoke} if self.smoke else {})}


def _env(playbook: Path, envvars: dict | None) -> dict:
    """ansible-playbook from this Python's environment first on PATH, and the roles beside the
    playbooks folder on the roles path; a playbook of an installed collection gets its collections
    folder first on the collections path (its roles are named clusterdef.cluster.<role>)."""
    from .collection import collections_root

    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "ANSIBLE_NOCOLOR": "1"}
    roles = Path(playbook).resolve().parent.parent / "roles"
    if roles.is_dir():
        env["ANSIBLE_ROLES_PATH"] = os.pathsep.join(
            p for p in (str(roles), os.environ.get("ANSIBLE_ROLES_PATH", "")) if p)
    collections = collections_root(playbook)
    if collections is not None:
        env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
            p for p in (str(collections), os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")) if p)
    return {**env, **(envvars or {})}


def run_playbook(private_data_dir: str | Path, playbook: str | Path, inventory: str | Path, extravars: dict,
                 check: bool = False, limit: str | None = None, ident: str | None = None,
                 envvars: dict | None = None, on_event: Callable[[dict], None] | None = None,
                 secret_env: Iterable[str] = (), vault_ids: Iterable[str] = (), forks: int | None = None) -> RunResult:
    """Run one playbook. `check` runs Ansible's check + diff mode. Artifacts (stdout, events,
    rc, command) land in `<private_data_dir>/artifacts/<ident>/`; nothing in `env/`. The
    variables named in `secret_env` (and every other one that is not plainly harmless, see
    `withheld_names`) reach ansible-playbook through a pipe and are recorded nowhere;
    `vault_ids` (`[label@]file-or-script`) go on the command line as `--vault-id`; `forks` (how many
    hosts Ansible works on at once; None: Ansible's configuration, ANSIBLE_FORKS or ansible.cfg)
    as `--forks`."""
    try:
        ansible_runner = importlib.import_module(RUNNER)
    except ImportError as exc:
        raise RunnerMissing("ansible-runner is not installed: pip install 'clusterdef[ansible]'") from exc
    pdd = Path(private_data_dir)
    pdd.mkdir(parents=True, exist_ok=True)
    playbook = Path(playbook).resolve()
    env = _env(playbook, envvars)
    ansible_playbook = shutil.which("ansible-playbook", path=env["PATH"])
    if ansible_playbook is None:
        raise RunnerMissing("ansible-playbook is not on PATH: pip install 'clusterdef[ansible]'")
    secret_env = list(secret_env)
    withheld = [n for n in withheld_names(os.environ, secret_env) if n not in env]
    redact = redactor(secret_values(os.environ, secret_env))
    failures: list[str] = []
    failed: list[str] = []
    unreachable: list[str] = []
    changes = ChangeSummary()
    smoke = SmokeResults()
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
        changes.add(event)
        smoke.add(event)
        if on_event is not None:
            on_event(event)
        return True

    args = ["--check", "--diff"] if check else []
    for vault_id in vault_ids:
        args += ["--vault-id", vault_id]
    if forks:
        args += ["--forks", str(forks)]
    with EnvPipe({n: os.environ[n] for n in withheld}) as pipe:
        kwargs = dict(private_data_dir=str(pdd), project_dir=str(playbook.parent), inventory=str(inventory),
                      extravars=extravars, envvars={**env, **{n: WITHHELD for n in withheld}}, quiet=True,
                      event_handler=handler, ident=ident, suppress_env_files=True, binary=sys.executable,
                      cmdline=shlex.join(["-P", "-m", WRAPPER, "--env-from", pipe.path, "--",
                                          ansible_playbook, *args, str(playbook)]))
        if limit:
            kwargs["limit"] = limit
        r = ansible_runner.run(**kwargs)
    stats = r.stats or {}
    return RunResult(rc=r.rc if r.rc is not None else -1, status=r.status or "unknown",
                     artifact_dir=str(r.config.artifact_dir), stats=stats, failed_hosts=failed,
                     unreachable_hosts=unreachable, events=count, failures=[redact(f) for f in failures],
                     changes=changes.to_json(stats.get("processed") or {}, failed + unreachable, redact),
                     smoke=smoke.to_json(redact))

