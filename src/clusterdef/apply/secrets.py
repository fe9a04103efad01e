"""Secrets of `clusterdef apply`: passed by name, never onto disk.

ansible-runner writes the *whole* environment of every run into `artifacts/<ident>/command`
(`{"command", "cwd", "env"}`), and, unless told not to, the envvars/extravars/cmdline it is
given into `env/` of the private data dir. So the runner (runner.run_playbook) passes
`suppress_env_files=True` (nothing in `env/`), and shows ansible-runner only the values of an
explicit list of harmless variables (PATH, HOME, locale, some PYTHON* and Ansible path and
output settings: `_RECORDED_NAMES`). Every other variable, and every name given as
`secret_env`, reaches ansible-playbook through a named pipe instead (`EnvPipe`): ansible-runner
starts `python -P -m clusterdef.apply.secrets --env-from FIFO -- ansible-playbook ...`
(`exec_with_env`), which reads the values from the pipe (a FIFO holds no data on disk; the same
trick ansible-runner uses for SSH keys), puts them into its environment and execs
ansible-playbook. The recorded environment holds the placeholder `WITHHELD` for those names.
Extra vars (`-e`) are *not* secret: they are on the recorded command line and in the run record,
so `option_problems` refuses one that carries a secret before anything runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping

WRAPPER = "clusterdef.apply.secrets"  # the module ansible-runner starts instead of ansible-playbook
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
_REFERENCE = re.compile(r"_(FILE|PATH|DIR|SOCK)\Z")



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
    """`python -m clusterdef.apply.secrets --env-from FIFO -- PROGRAM [ARGS...]`: read the withheld
    variables from FIFO, put back each one whose value is the WITHHELD placeholder (those that
    ansible-runner set itself stay as it set them), and exec PROGRAM."""
    if len(argv) < 4 or argv[0] != "--env-from" or argv[2] != "--":
        print("usage: python -m clusterdef.apply.secrets --env-from FIFO -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        values = json.loads(f.read() or b"{}")
    for name, value in values.items():
        if os.environ.get(name) == WITHHELD:
            os.environ[name] = value
    os.execv(argv[3], argv[3:])
    return 127  # pragma: no cover - execv does not return



_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PASSWORD_KEY = re.compile(r"^ansible_.*pass|password|passwd|become_pass", re.IGNORECASE)


def option_problems(secret_env: list[str], vault_ids: list[str], extra: dict[str, str],
                    environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of apply's secret options, before anything runs. Problems: a
    --secret-env that is not set, a --vault-id that nobody can answer or that does not exist, and
    an -e value that carries a secret (it would be recorded). Warnings: -e keys that look like
    credentials."""
    problems, warnings = [], []
    for name in secret_env:
        if not _NAME.fullmatch(name):
            problems.append(f"--secret-env {name!r}: give the name of an environment variable, not its value")
        elif name not in environ:
            problems.append(f"--secret-env {name}: not set in the environment")
    for vid in vault_ids:
        source = vid.split("@", 1)[1] if "@" in vid else vid
        if source == "prompt":
            problems.append(f"--vault-id {vid}: nobody can answer a prompt under ansible-runner; give a password "
                            "file or a client script")
        elif not Path(source).expanduser().is_file():
            problems.append(f"--vault-id {vid}: no such file {source}")
    values = secret_values(environ, secret_env)
    for key, value in extra.items():
        if _PASSWORD_KEY.search(key):
            # Ansible's own credentials (ansible_become_pass, ansible_password...) would be recorded verbatim
            problems.append(f"-e {key}: a password as an extra var is recorded (run record, ansible-runner's "
                            "command file): pass it with --secret-env NAME (e.g. ANSIBLE_BECOME_PASS) instead")
        elif any(v in value for v in values):
            problems.append(f"-e {key}: the value holds a secret from the environment; -e values are recorded "
                            "(run record, ansible-runner's command file): pass it with --secret-env NAME instead")
        elif looks_like_credential(key):
            warnings.append(f"-e {key}: extra vars are recorded in the run record and in ansible-runner's "
                            "artifacts; pass secrets with --secret-env NAME or --vault-id")
    return problems, warnings


if __name__ == "__main__":  # the wrapper ansible-runner starts: see exec_with_env
    sys.exit(exec_with_env(sys.argv[1:]))
