"""Output is written all or nothing; stale files vanish; foreign folders are never replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdef import writer
from clusterdef.writer import OutputError, write_tree


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_writes_tree_and_manifest(tmp_path):
    out = write_tree(tmp_path / "out", {"a.txt": "A\n", "sub/b.txt": "B\n"}, {"cluster": "x"})
    assert (out / "a.txt").read_text() == "A\n" and (out / "sub" / "b.txt").read_text() == "B\n"
    m = json.loads((out / "manifest.json").read_text())
    assert m["cluster"] == "x"
    assert m["files"]["a.txt"]["sha256"] == writer.sha256("A\n")
    assert set(m["files"]) == {"a.txt", "sub/b.txt"}


def test_replaces_and_prunes_stale_files(tmp_path):
    write_tree(tmp_path / "out", {"old.txt": "1", "keep.txt": "1"}, {})
    write_tree(tmp_path / "out", {"keep.txt": "2"}, {})
    assert not (tmp_path / "out" / "old.txt").exists()
    assert (tmp_path / "out" / "keep.txt").read_text() == "2"
    assert leftovers(tmp_path) == []


def test_refuses_foreign_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("mine")
    with pytest.raises(OutputError, match="not written by clusterdef"):
        write_tree(tmp_path / "out", {"a": "b"}, {})
    assert (tmp_path / "out" / "precious.txt").read_text() == "mine"


@pytest.mark.parametrize("rel", ["../escape.txt", "/etc/passwd", "manifest.json"])
def test_refuses_paths_outside_tree(tmp_path, rel):
    with pytest.raises(OutputError):
        write_tree(tmp_path / "out", {rel: "x"}, {})
    assert not (tmp_path / "out").exists()


def test_failure_midway_keeps_old_tree(tmp_path, monkeypatch):
    write_tree(tmp_path / "out", {"a.txt": "old"}, {})
    real = Path.write_text
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", flaky)
    with pytest.raises(OSError):
        write_tree(tmp_path / "out", {"a.txt": "new", "b.txt": "new"}, {})
    monkeypatch.undo()
    assert (tmp_path / "out" / "a.txt").read_text() == "old"
    assert not (tmp_path / "out" / "b.txt").exists()
    assert leftovers(tmp_path) == []


def test_single_file_atomic(tmp_path):
    writer.write_file_atomic(tmp_path / "s.json", "{}\n")
    assert (tmp_path / "s.json").read_text() == "{}\n"
    assert leftovers(tmp_path) == []
