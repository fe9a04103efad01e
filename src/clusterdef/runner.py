"""ansible-runner driver for `clusterdef apply`.

`run_playbook` runs one playbook through ansible-runner and sums its events up, including
which tasks changed (in check mode: would change) on which hosts (`ChangeSummary`);
`execute` runs a plan's steps (clusterdef.plan.apply) in order, halts at the first failing
one, and keeps a JSON run record up to date after every step, so that a record exists even
when the process is interrupted. Nothing here prints: progress goes to callbacks (cli.py
draws it with rich).

Secrets and the disk. ansible-runner writes the *whole* environment of every run into
`artifacts/<ident>/command` (`{"command", "cwd", "env"}`), and, unless told not to, the
envvars/extravars/cmdline it is given into `env/` of the private data dir. So `run_playbook`
passes `suppress_env_files=True` (nothing in `env/`), and shows ansible-runner only the values
of an explicit list of harmless variables (PATH, HOME, locale, some PYTHON* and Ansible path
and output settings: `_RECORDED_NAMES`). Every other variable, and every name given as
`secret_env`, reaches ansible-playbook through a named pipe instead: ansible-runner starts
`python -P -m clusterdef.runner --env-from FIFO -- ansible-playbook ...`, which reads the values
from the pipe (a FIFO holds no data on disk; the same trick ansible-runner uses for SSH keys),
puts them into its environment and execs ansible-playbook. The recorded environment holds
the placeholder `WITHHELD` for those names. Extra vars (`-e`) are *not* secret: they are on
the recorded command line and in the run record.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from . import __version__
from .writer import write_file_atomic

RECORD_FORMAT = 1
WITHHELD = "<withheld by clusterdef: passed to ansible-playbook through a pipe, not recorded>"
# The only variables whose values ansible-runner may record (it writes its whole environment into
# artifacts/<run>/command): an explicit list of names known to be harmless, no prefix rule, so a new
# or site-specific ANSIBLE_*/AWX_* variable (ANSIBLE_BECOME_PASS) is withheld until listed here. Some are
# read by ansible-runner itself or needed before the wrapper's Python starts (LD_LIBRARY_PATH, PYTHONPATH).
_RECORDED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TZ", "TERM", "PWD", "TMPDIR", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES",
    "LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONUTF8",
    "PYTHONWARNINGS",
    # Ansible settings: paths, output and behaviour, never credentials (nor files holding them)
    "ANSIBLE_CONFIG", "ANSIBLE_ROLES_PATH", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS",
    "ANSIBLE_INVENTORY", "ANSIBLE_INVENTORY_ENABLED", "ANSIBLE_LIBRARY", "ANSIBLE_MODULE_UTILS",
    "ANSIBLE_FILTER_PLUGINS", "ANSIBLE_LOOKUP_PLUGINS", "ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_CALLBACKS_ENABLED",
    "ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_LOAD_CALLBACK_PLUGINS", "ANSIBLE_FORCE_COLOR", "ANSIBLE_NOCOLOR",
    "ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TEMP", "ANSIBLE_PYTHON_INTERPRETER",
    "ANSIBLE_FORKS", "ANSIBLE_TIMEOUT", "ANSIBLE_GATHERING", "ANSIBLE_PIPELINING", "ANSIBLE_RETRY_FILES_ENABLED",
    "ANSIBLE_DEPRECATION_WARNINGS", "ANSIBLE_COMMAND_WARNINGS", "ANSIBLE_SYSTEM_WARNINGS", "ANSIBLE_VERBOSITY",
    "ANSIBLE_DISPLAY_SKIPPED_HOSTS", "ANSIBLE_DISPLAY_OK_HOSTS", "ANSIBLE_CALLBACK_RESULT_FORMAT",
    "ANSIBLE_HASH_BEHAVIOUR", "ANSIBLE_NOCOWS", "ANSIBLE_REMOTE_USER", "ANSIBLE_BECOME", "ANSIBLE_BECOME_METHOD",
    "ANSIBLE_BECOME_USER", "ANSIBLE_STRATEGY",
})
_CREDENTIAL = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|(^|_)PASS($|_)|SECRET|TOKEN|CREDENTIAL|PRIVATE_KEY|API_KEY"
                         r"|ACCESS_KEY", re.IGNORECASE)
_REFERENCE = re.compile(r"_(FILE|PATH|DIR|SOCK)$")


class RunnerMissing(RuntimeError):
    """ansible-runner is not installed (the `ansible` extra)."""


# --------------------------------------------------------------------------- what changed where

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


def _fold(hosts) -> str:
    from . import hostlist

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
        changes, per_host = [], {}
        for n, (label, task) in enumerate(self._tasks.items(), 1):
            entry = {"n": n, "task": label, "action": task["action"], "hosts": _fold(task["hosts"]),
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
        return {"hosts_reached": len(reached), "hosts_changed": len(per_host), "hosts_unchanged": _fold(unchanged),
                "changes": changes,
                "change_groups": [{"hosts": _fold(hs), "count": len(hs), "tasks": list(ns)} for ns, hs in ordered]}


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
        return [{"test": name, "layer": t["layer"], "ok": _fold(t["ok"]), "failed": _fold(t["failed"]),
                 "skipped": _fold(t["skipped"]), **({"first_failure": redact(t["first_failure"])}
                                                    if t["first_failure"] else {})}
                for name, t in self._tests.items()]


# --------------------------------------------------------------------------- the environment, without secrets on disk

def looks_like_credential(name: str) -> bool:
    """A variable name that suggests a credential (`*PASSWORD*`, `*TOKEN*`, `*SECRET*`...);
    names ending in _FILE, _PATH, _DIR or _SOCK point at one and are not one."""
    return bool(_CREDENTIAL.search(name)) and not _REFERENCE.search(name)


def withheld_names(environ, secret_env: Iterable[str] = ()) -> list[str]:
    """The variables of `environ` whose values ansible-runner must not see (it records its
    whole environment): every one not on the short list of harmless names (_RECORDED_NAMES),
    and any that is named in `secret_env` or looks like a credential."""
    forced = set(secret_env)
    return sorted(name for name in environ
                  if name in forced or looks_like_credential(name) or name not in _RECORDED_NAMES)


def secret_values(environ, secret_env: Iterable[str] = ()) -> list[str]:
    """Values to blank out of what clusterdef writes itself (the run record), and that no -e
    value may contain: those of the `secret_env` variables (4 characters or more) and of the
    variables that look like credentials (8 or more: `SOME_TOKEN=true` is no secret)."""
    forced = set(secret_env)
    values = {v for k, v in environ.items()
              if (k in forced and len(v) >= 4) or (looks_like_credential(k) and len(v) >= 8)}
    values |= {v for v in [_vault_password(environ.get("ANSIBLE_VAULT_PASSWORD_FILE"))] if len(v) >= 4}
    return sorted(values, key=lambda v: (-len(v), v))


def _vault_password(path: str | None) -> str:
    """The password in a vault password file (a plain file, not a client script), '' otherwise."""
    try:
        p = Path(path).expanduser() if path else None
        if p is None or not p.is_file() or os.access(p, os.X_OK) or p.stat().st_size > 4096:
            return ""
        return p.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def redactor(values: list[str]) -> Callable[[str], str]:
    def redact(text: str) -> str:
        for v in values:
            text = text.replace(v, "********")
        return text
    return redact


class EnvPipe:
    """A named pipe in a private temporary folder that hands `values` (a JSON object) to the
    one process that reads it; the data stays in the kernel, never in a file."""

    def __init__(self, values: dict[str, str]):
        self.dir = tempfile.mkdtemp(prefix="clusterdef-env-")
        self.path = os.path.join(self.dir, "env.fifo")
        os.mkfifo(self.path, 0o600)
        self._thread = threading.Thread(target=self._serve, args=(json.dumps(values).encode(),), daemon=True)
        self._thread.start()

    def _serve(self, data: bytes) -> None:
        try:
            with open(self.path, "wb") as f:
                f.write(data)
        except OSError:
            pass

    def close(self) -> None:
        """Unblock the writer when nobody read the pipe (the command never started), drop
        what it wrote, remove the folder."""
        if self._thread.is_alive():
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                for _ in range(200):
                    try:
                        while os.read(fd, 65536):
                            pass
                    except BlockingIOError:
                        pass
                    self._thread.join(0.05)
                    if not self._thread.is_alive():
                        break
            finally:
                os.close(fd)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "EnvPipe":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def exec_with_env(argv: list[str]) -> int:
    """`python -m clusterdef.runner --env-from FIFO -- PROGRAM [ARGS...]`: read the withheld
    variables from FIFO, put back each one whose value is the WITHHELD placeholder (those that
    ansible-runner set itself stay as it set them), and exec PROGRAM."""
    if len(argv) < 4 or argv[0] != "--env-from" or argv[2] != "--":
        print("usage: python -m clusterdef.runner --env-from FIFO -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        values = json.loads(f.read() or b"{}")
    for name, value in values.items():
        if os.environ.get(name) == WITHHELD:
            os.environ[name] = value
    os.execv(argv[3], argv[3:])
    return 127  # pragma: no cover - execv does not return


# --------------------------------------------------------------------------- one playbook run

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
        import ansible_runner
    except ImportError as exc:  # pragma: no cover - depends on the installation
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
                      cmdline=shlex.join(["-P", "-m", "clusterdef.runner", "--env-from", pipe.path, "--",
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
            record["capacity"].append({"stage": step.stage, "wave": step.wave, "hosts": _fold(step.hosts),
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
    from .plan import snapshot

    snap = record.setdefault("snapshot", {})
    groups, missing = snapshot.versions(Path(snap.get("facts_dir") or "."), step.hosts)
    snap["versions"] = groups
    snap["versions_missing"] = _fold(missing)
    if missing and not check:
        result.rc, result.status = 1, "failed"
        result.failed_hosts = list(dict.fromkeys([*result.failed_hosts, *missing]))
        result.failures.append(f"no versions recorded for {len(missing)} host(s) (snapshot/facts/<host>.json): "
                               f"{_fold(missing)}")


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


if __name__ == "__main__":  # the wrapper ansible-runner starts: see exec_with_env
    sys.exit(exec_with_env(sys.argv[1:]))
