"""The only module that writes rendered output: all or nothing.

The tree is written into a temporary sibling directory, then swapped into place,
so a reader sees either the old tree or the new one, stale files vanish, and a
failure leaves the old tree untouched."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

MANIFEST = "manifest.json"


class OutputError(Exception):
    """The output directory cannot be replaced safely."""


def sha256(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def manifest(tree: dict[str, str], meta: dict) -> str:
    files = {rel: {"sha256": sha256(content), "bytes": len(content.encode())} for rel, content in sorted(tree.items())}
    return json.dumps({**meta, "files": files}, indent=2, sort_keys=True) + "\n"


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise OutputError(f"{out} is not empty and holds no {MANIFEST}: it was not written by clusterdef")


def write_tree(out: str | Path, tree: dict[str, str], meta: dict) -> Path:
    """Write `tree` (relative path -> text) plus a manifest to `out`, atomically."""
    out = Path(out)
    _check_target(out)
    for rel in tree:
        p = Path(rel)
        if p.is_absolute() or ".." in p.parts or rel == MANIFEST:
            raise OutputError(f"refusing to write {rel!r} outside the output tree")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        for rel, content in tree.items():
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(content, encoding="utf-8")
        (tmp / MANIFEST).write_text(manifest(tree, meta), encoding="utf-8")
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.rmdir(old)
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out


def write_file_atomic(path: str | Path, text: str) -> None:
    """Write one file via a temporary sibling and rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
