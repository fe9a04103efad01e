"""One `clusterdef apply` at a time per cluster: an exclusive `flock(2)` on `<cluster>.apply.lock`
in the folder the run records go to (beside the plan file), taken before anything is written and
held until the apply ends. The file says who holds it (pid, host, start time, plan file) so that a
refused apply can name the holder.

A killed apply never leaves a stale lock behind: a flock belongs to the open file description, and
the kernel drops it when the last descriptor to it is closed, which process exit (even SIGKILL) does
(flock(2): "the lock is released either by an explicit LOCK_UN operation on any of these duplicate
file descriptors, or when all such file descriptors have been closed"). The descriptor is opened
close-on-exec (Python's default, PEP 446), and ansible-runner's pexpect children close inherited
descriptors, so no playbook run keeps the lock after its apply is gone. The holder's text is only a
message: whether the lock is held is the kernel's answer, never the file's contents.

An apply refused after it took the lock (nothing run) removes the lock file if it created it, so a
refusal leaves the folder as it was. The file is unlinked while the lock is held; a process that
opened it before and takes the lock after finds that the path no longer names the file it locked
and takes the lock again on the path's file (`acquire`), so two holders never lock different files.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path


class LockHeld(Exception):
    """Another apply of the cluster holds the lock; `holder` is what it wrote (may be empty)."""

    def __init__(self, path: Path, holder: dict):
        self.path, self.holder = path, holder
        who = ", ".join(f"{k} {holder[k]}" for k in ("pid", "host", "started", "plan_file") if holder.get(k))
        super().__init__(f"another clusterdef apply of this cluster is running ({who or 'holder unknown'}; "
                         f"lock {path})")


def lock_path(folder: Path, cluster: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(cluster or "cluster")).strip(".-") or "cluster"
    return Path(folder) / f"{safe}.apply.lock"


def read_holder(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8")[:4096])
    except (OSError, ValueError):
        return {}
    return {k: str(v)[:200] for k, v in data.items()} if isinstance(data, dict) else {}


class ClusterLock:
    """The held lock; `release()` (or the process ending) drops it."""

    def __init__(self, path: Path, fd: int, created: bool = False, previous: bytes = b""):
        # created: this acquire made the file; previous: the text it held before (an earlier holder's)
        self.path, self._fd, self.created, self.previous = path, fd, created, previous

    def release(self, remove: bool = False) -> None:
        """Drop the lock; `remove` (a refused apply): leave the lock file as it was, deleted if this acquire
        created it, else with its earlier text again."""
        if self._fd >= 0:
            if remove and self.created:
                self.path.unlink(missing_ok=True)  # still held: a waiting process re-checks the path (acquire)
            elif remove:
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, self.previous, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "ClusterLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(folder: Path, cluster: str, plan_file: Path | str = "") -> ClusterLock:
    """Take the cluster's lock without waiting; LockHeld when another process holds it. The file is
    opened without truncating it, so a refused apply still reads the holder's text."""
    path = lock_path(folder, cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd, created = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockHeld(path, read_holder(path)) from None
        if _names(path, fd):
            break
        os.close(fd)  # the holder removed the file before releasing it: lock the path's file now
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "plan_file": str(plan_file),
              "started": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")}
    previous = os.pread(fd, 4096, 0)  # read_holder's bound: a holder's text is never longer
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
    os.fsync(fd)
    return ClusterLock(path, fd, created, previous)


def _open(path: Path) -> tuple[int, bool]:
    """(descriptor, whether this call created the file)."""
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644), True
        except FileExistsError:
            pass
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC), False
        except FileNotFoundError:
            continue  # removed in between: create it


def _names(path: Path, fd: int) -> bool:
    """Whether `path` still names the file open on `fd`."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
