"""The only module that writes rendered output: all or nothing, and only over its own folders.

The tree is written into a temporary sibling `.NAME.new-XXXXXXXX`, then swapped into place,
so a reader sees either the old tree or the new one, stale files vanish, and a failure
leaves the old tree untouched.

- The swap is one `renameat2(RENAME_EXCHANGE)` (Linux 3.15+, glibc 2.28+, called through
  ctypes): the output path names the old tree until the instant it names the new one.
  Where libc or the filesystem lacks it, the fallback is two renames (old tree to
  `.NAME.old-XXXXXXXX`, new tree into place), with a moment in which the path is missing.
- An existing folder is replaced only when it is clusterdef's own: its manifest.json is
  clusterdef's (generator marker and schema version), names the same cluster, and lists
  exactly the files present, each with its recorded sha256. Anything else (a foreign
  folder, an extra, missing or edited file) is refused with OutputError naming the folder
  and what differs. An empty folder holds nothing to lose and is replaced.
- A symlink as the output path is refused: swapping it would replace the link and leave
  its target stale, and following it would write wherever the link points.
- A write that fails removes the folders it made for the output (the missing parents of the
  path), so a failure leaves the filesystem as it was; folders that were there stay.
- Leftovers of a run killed mid-write are removed on the next run: `.NAME.new-*` siblings
  (the name mkdtemp gives, not locked by a live run) and `.NAME.old-*` siblings that hold a
  clusterdef manifest. Nothing else is ever removed.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

MANIFEST = "manifest.json"
GENERATOR = "clusterdef"
MANIFEST_SCHEMA = 1
RENAME_EXCHANGE, AT_FDCWD = 2, -100


class OutputError(Exception):
    """The output cannot be written safely; the message names the path and why."""


def sha256(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def manifest(tree: dict[str, str], meta: dict) -> str:
    files = {rel: {"sha256": sha256(content), "bytes": len(content.encode())} for rel, content in sorted(tree.items())}
    return json.dumps({**meta, "generator": GENERATOR, "manifest_schema": MANIFEST_SCHEMA, "files": files},
                      indent=2, sort_keys=True) + "\n"


def _read_manifest(folder: Path) -> dict | None:
    """The folder's manifest when it is clusterdef's, else None."""
    from .limits import InputError, load_json

    try:
        doc = load_json(folder / MANIFEST, "manifest")
    except InputError:
        return None
    ok = (isinstance(doc, dict) and doc.get("generator") == GENERATOR and doc.get("manifest_schema") == MANIFEST_SCHEMA
          and isinstance(doc.get("files"), dict))
    return doc if ok else None


def _file_sha256(path: Path) -> str | None:
    """sha256 of a regular file (never following a link or blocking on a FIFO), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _differences(out: Path, listed: dict) -> list[str]:
    """What in `out` differs from its manifest: extra, missing or edited entries."""
    present: set[str] = set()
    dirs: set[str] = set()
    for root, dnames, fnames in os.walk(out):  # does not follow symlinked folders
        rel_root = Path(root).relative_to(out)
        dirs.update((rel_root / d).as_posix() for d in dnames if not (Path(root) / d).is_symlink())
        present.update((rel_root / n).as_posix() for n in fnames)
        present.update((rel_root / d).as_posix() for d in dnames if (Path(root) / d).is_symlink())
    present.discard(MANIFEST)
    needed_dirs = {p.as_posix() for rel in listed for p in Path(rel).parents if p.name}
    problems = [f"extra {rel}" for rel in sorted(present - set(listed))]
    problems += [f"extra folder {d}" for d in sorted(dirs - needed_dirs)]
    problems += [f"missing {rel}" for rel in sorted(set(listed) - present)]
    for rel in sorted(present & set(listed)):
        entry = listed[rel]
        if not isinstance(entry, dict) or _file_sha256(out / rel) != entry.get("sha256"):
            problems.append(f"edited {rel}")
    return problems


def _check_targets(out: Path, doc: dict, tree: dict[str, str], meta: dict) -> None:
    """A render of some targets over a tree that holds others would delete the others' files: refused,
    naming the targets and the files. (Keeping them is not offered: the tree's delivery map, resolved
    definition and manifest describe one render of one definition, which a merged tree would not be.)"""
    old, new = doc.get("targets"), meta.get("targets")
    if not isinstance(old, list) or not isinstance(new, list):
        return
    dropped = sorted(str(t) for t in set(old) - set(new))
    if not dropped:
        return
    lost = sorted(set(doc["files"]) - set(tree))
    shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
    raise OutputError(f"{out} holds the targets {', '.join(dropped)}, which this render does not write: replacing "
                      f"it would delete {len(lost)} of their files ({shown or 'none listed'}); render every target "
                      f"the tree holds (no --target, or --target for each of {', '.join(sorted(map(str, old)))}), "
                      "or write these targets to another --output")


def _check_target(out: Path, cluster, tree: dict[str, str] | None = None, meta: dict | None = None) -> None:
    if out.is_symlink():
        raise OutputError(f"{out} is a symlink; clusterdef does not write through links: pass the real folder "
                          f"({os.path.realpath(out)}) or another --output")
    if not out.exists():
        return
    if not out.is_dir():
        raise OutputError(f"{out} exists and is not a directory")
    if not any(out.iterdir()):
        return
    doc = _read_manifest(out)
    if doc is None:
        raise OutputError(f"{out} is not empty and holds no clusterdef {MANIFEST}: it was not written by clusterdef")
    if doc.get("cluster") != cluster:
        raise OutputError(f"{out} holds the rendered tree of cluster {doc.get('cluster')!r}, not {cluster!r}")
    problems = _differences(out, doc["files"])
    if problems:
        shown = ", ".join(problems[:5]) + (f" and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise OutputError(f"{out} was changed since clusterdef wrote it ({shown}); refusing to replace it")
    if tree is not None and meta is not None:
        _check_targets(out, doc, tree, meta)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False where unsupported."""
    fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if fn is None:
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # old kernel or a filesystem without it
        return False
    raise OSError(code, os.strerror(code), str(b))


def _stale(out: Path) -> list[Path]:
    """Leftovers of killed runs for this output: clusterdef's own temporary siblings only."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(new|old)-[a-z0-9_]{{8}}")
    found = []
    for p in out.parent.iterdir() if out.parent.is_dir() else ():
        m = pattern.fullmatch(p.name)
        if not m or p.is_symlink() or not p.is_dir():
            continue
        if m[1] == "old" and _read_manifest(p) is None:
            continue
        if _busy(p):
            continue
        found.append(p)
    return found


def _busy(folder: Path) -> bool:
    """True while a live run holds the folder's lock (a killed run's lock is gone with it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def write_tree(out: str | Path, tree: dict[str, str], meta: dict) -> Path:
    """Write `tree` (relative path -> text) plus a manifest to `out`, atomically."""
    out = Path(out)
    for rel in tree:
        p = Path(rel)
        if p.is_absolute() or ".." in p.parts or rel == MANIFEST:
            raise OutputError(f"refusing to write {rel!r} outside the output tree")
    try:
        made = _make_parents(out.parent)
        for p in _stale(out):
            shutil.rmtree(p, ignore_errors=True)
    except OSError as exc:
        raise OutputError(f"cannot create {out.parent}: {exc.strerror or exc}") from None
    try:
        return _write_tree(out, tree, meta)
    except BaseException:
        _unmake(made)
        raise


def _make_parents(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; the folders made, deepest first."""
    made = []
    p = Path(os.path.abspath(folder))
    while not os.path.lexists(p) and p != p.parent:
        made.append(p)
        p = p.parent
    Path(folder).mkdir(parents=True, exist_ok=True)
    return made


def _unmake(made: list[Path]) -> None:
    """Remove the folders `_make_parents` made, deepest first, while they are empty."""
    for p in made:
        try:
            p.rmdir()
        except OSError:
            return


def _write_tree(out: Path, tree: dict[str, str], meta: dict) -> Path:
    _check_target(out, meta.get("cluster"), tree, meta)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    lock = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)  # so a concurrent run's cleanup leaves this folder alone
    old = None
    try:
        for rel, content in tree.items():
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(content, encoding="utf-8")
        (tmp / MANIFEST).write_text(manifest(tree, meta), encoding="utf-8")
        os.chmod(tmp, 0o755)
        if out.exists() and _exchange(tmp, out):
            old = tmp  # the old tree now sits at the temporary name
        elif out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.rmdir(old)
            os.rename(out, old)
            try:
                os.rename(tmp, out)
            except BaseException:
                os.rename(old, out)  # put the old tree back
                old = None
                raise
        else:
            os.rename(tmp, out)
    except BaseException:
        if old is not tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(lock)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out


def check_file_target(path: str | Path) -> None:
    """OutputError unless `path` can be replaced by a regular file: missing, or a regular file
    (a folder, a FIFO or a device such as /dev/null is refused, never replaced)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path} is a folder; give a file name for the output")
    if not stat.S_ISREG(st.st_mode):  # replacing /dev/null or a FIFO would break whoever uses it
        raise OutputError(f"{path} exists and is not a regular file; give another file name")


def write_file_atomic(path: str | Path, text: str) -> None:
    """Write one file via a temporary sibling and rename (a symlink is followed to its target,
    so the link stays). OutputError names the path when it cannot be written."""
    dest = Path(os.path.realpath(path))
    check_file_target(dest)
    made: list[Path] = []
    try:
        made = _make_parents(dest.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    except OSError as exc:
        _unmake(made)
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _unmake(made)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


@contextmanager
def updating(path: str | Path) -> Iterator[None]:
    """Hold `path` for a read-modify-write (`clusterdef approve` adding a record to a plan file): an exclusive
    flock(2) on the file as it is now. write_file_atomic replaces the file by a rename, so a second updater that
    waited on the old file finds, once it has the lock, that the path names another file, and takes that one's
    lock instead: it reads what the first wrote and nothing is lost. A missing file is left to the reader."""
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            yield  # the read that follows reports it
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(path, follow_symlinks=False)
            except OSError:
                now = None
            held = os.fstat(fd)
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                yield
                return
        finally:
            os.close(fd)  # closing releases the lock
