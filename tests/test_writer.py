"""Output is written all or nothing; stale files vanish; foreign folders are never replaced."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
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


def test_a_failed_write_removes_the_folders_it_made(tmp_path, monkeypatch):
    """A tree or file write that fails leaves no folder it made for the output (nor a temporary file); the
    folders that were there stay."""
    real = Path.write_text

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_text", full)
    (tmp_path / "kept").mkdir()
    with pytest.raises(OSError):
        write_tree(tmp_path / "kept" / "a" / "b" / "out", {"x.txt": "x"}, {})
    monkeypatch.setattr(Path, "write_text", real)
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]

    def no_rename(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writer.os, "replace", no_rename)
    with pytest.raises(OutputError, match="No space left"):
        writer.write_file_atomic(tmp_path / "kept" / "c" / "d" / "plan.json", "{}\n")
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]


def test_single_file_atomic(tmp_path):
    writer.write_file_atomic(tmp_path / "s.json", "{}\n")
    assert (tmp_path / "s.json").read_text() == "{}\n"
    assert leftovers(tmp_path) == []


# --------------------------------------------------------------------------- only its own folders

def render(out: Path, tree=None, cluster="lab") -> Path:
    return write_tree(out, tree or {"a.txt": "A\n", "sub/b.txt": "B\n"}, {"cluster": cluster})


def test_manifest_carries_generator_and_schema(tmp_path):
    m = json.loads((render(tmp_path / "out") / "manifest.json").read_text())
    assert (m["generator"], m["manifest_schema"], m["cluster"]) == ("clusterdef", writer.MANIFEST_SCHEMA, "lab")


@pytest.mark.parametrize("manifest_text", [
    '{"name": "my-web-app", "short_name": "app", "start_url": "/"}\n',  # a PWA's manifest.json
    "not json at all",
    '{"generator": "clusterdef", "files": {}}',  # no schema version
])
def test_refuses_folder_with_foreign_manifest(tmp_path, manifest_text):
    site = tmp_path / "out"
    site.mkdir()
    (site / "manifest.json").write_text(manifest_text)
    (site / "index.html").write_text("<html>")
    with pytest.raises(OutputError, match=f"{site}.*not written by clusterdef"):
        render(site)
    assert (site / "index.html").read_text() == "<html>"


def test_refuses_tree_of_another_cluster(tmp_path):
    render(tmp_path / "out", cluster="lab")
    with pytest.raises(OutputError, match="cluster 'lab', not 'estate'"):
        render(tmp_path / "out", cluster="estate")


@pytest.mark.parametrize("change, what", [
    (lambda o: (o / "a.txt").write_text("edited by hand\n"), "edited a.txt"),
    (lambda o: (o / "sub" / "notes.md").write_text("mine"), "extra sub/notes.md"),
    (lambda o: (o / "sub" / "b.txt").unlink(), "missing sub/b.txt"),
    (lambda o: (o / "keep").mkdir(), "extra folder keep"),
    (lambda o: (o / "link").symlink_to("/etc"), "extra link"),
    (lambda o: ((o / "a.txt").unlink(), os.mkfifo(o / "a.txt")), "edited a.txt"),
])
def test_refuses_changed_tree_naming_the_difference(tmp_path, change, what):
    out = render(tmp_path / "out")
    change(out)
    with pytest.raises(OutputError, match=f"{out} was changed.*{what}"):
        render(out, {"a.txt": "new\n"})
    assert (out / "manifest.json").exists() and leftovers(tmp_path) == []


def test_refuses_symlink_as_output_path(tmp_path):
    real = render(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(OutputError, match="is a symlink"):
        render(tmp_path / "link", {"a.txt": "new\n"})
    assert (real / "a.txt").read_text() == "A\n" and (tmp_path / "link").is_symlink()


# --------------------------------------------------------------------------- the swap

def test_exchange_keeps_old_tree_in_place_until_the_swap(tmp_path, monkeypatch):
    out = render(tmp_path / "out", {"a.txt": "old\n"})
    real, seen = writer._exchange, []

    def watching(new, target):
        # everything is written, yet the output path still names the complete old tree
        seen.append(((target / "a.txt").read_text(), (new / "a.txt").read_text()))
        assert writer._read_manifest(target) is not None
        return real(new, target)

    monkeypatch.setattr(writer, "_exchange", watching)
    render(out, {"a.txt": "new\n"})
    assert seen == [("old\n", "new\n")]
    assert (out / "a.txt").read_text() == "new\n" and leftovers(tmp_path) == []


def test_output_path_never_missing_during_swaps(tmp_path):
    out = render(tmp_path / "out", {"a.txt": "0"})
    if not writer._exchange(tmp_path / "out", tmp_path / "out"):
        pytest.skip("renameat2(RENAME_EXCHANGE) not available here")
    stop, missing = threading.Event(), []

    def reader():
        while not stop.is_set():
            if not os.path.exists(out / "manifest.json"):
                missing.append(1)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(40):
            render(out, {"a.txt": str(i)})
    finally:
        stop.set()
        t.join()
    assert missing == []


def test_two_rename_fallback(tmp_path, monkeypatch):
    out = render(tmp_path / "out", {"a.txt": "old\n"})
    monkeypatch.setattr(writer, "_exchange", lambda a, b: False)
    render(out, {"a.txt": "new\n"})
    assert (out / "a.txt").read_text() == "new\n" and leftovers(tmp_path) == []


# --------------------------------------------------------------------------- leftovers of killed runs

def test_stale_siblings_of_a_crash_are_cleaned_and_nothing_else(tmp_path):
    out = render(tmp_path / "out")
    half_new = tmp_path / ".out.new-abc12_yz"
    (half_new / "sub").mkdir(parents=True)
    (half_new / "sub" / "b.txt").write_text("half")
    old = tmp_path / ".out.old-k3j4h5g6"
    shutil.copytree(out, old)
    keep = {
        ".out.old-nomanif1": None,  # an .old- name without a clusterdef manifest
        ".out.new-toolong123": None,  # not the 8-character mkdtemp suffix
        ".other.new-abcdefgh": None,  # another output's name
        ".out.new-notadir1": "file",
    }
    for name, kind in keep.items():
        (tmp_path / name).write_text("x") if kind else (tmp_path / name).mkdir()
    render(out, {"a.txt": "new\n"})
    assert leftovers(tmp_path) == sorted(keep)


def test_folder_of_a_live_run_is_left_alone(tmp_path):
    render(tmp_path / "out")
    live = tmp_path / ".out.new-livelive"
    live.mkdir()
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        render(tmp_path / "out", {"a.txt": "new\n"})
        assert live.is_dir()
    finally:
        os.close(fd)
    render(tmp_path / "out", {"a.txt": "newer\n"})
    assert not live.exists()


def test_kill_9_mid_write_is_cleaned_next_run(tmp_path):
    out = render(tmp_path / "out", {"a.txt": "old\n"})
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from clusterdef import writer\n"
        "real = Path.write_text\n"
        "def slow(self, *a, **k):\n"
        "    real(self, *a, **k); time.sleep(60)\n"
        "Path.write_text = slow\n"
        f"writer.write_tree({str(out)!r}, {{'a.txt': 'new', 'b.txt': 'new'}}, {{'cluster': 'lab'}})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        for _ in range(200):
            if any(p.name.startswith(".out.new-") and any(p.iterdir()) for p in tmp_path.iterdir()):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the writer never started")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert [n for n in leftovers(tmp_path) if n.startswith(".out.new-")]
    assert (out / "a.txt").read_text() == "old\n"
    render(out, {"a.txt": "next\n"})
    assert leftovers(tmp_path) == [] and (out / "a.txt").read_text() == "next\n"


# --------------------------------------------------------------------------- single files

@pytest.mark.parametrize("make", [
    lambda p: p.mkdir(),
    lambda p: os.mkfifo(p),
])
def test_single_file_refuses_folder_and_fifo(tmp_path, make):
    target = tmp_path / "plan.json"
    make(target)
    with pytest.raises(OutputError, match=str(target)):
        writer.write_file_atomic(target, "{}\n")
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_single_file_refuses_device():
    with pytest.raises(OutputError, match="/dev/null exists and is not a regular file"):
        writer.write_file_atomic("/dev/null", "x")


def test_single_file_through_symlink_writes_target(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    writer.write_file_atomic(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"


# --------------------------------------------------------------------------- a render of some targets (issue 30)

def test_a_render_of_fewer_targets_is_refused_naming_what_it_would_delete(tmp_path):
    out = tmp_path / "out"
    full = {"slurm/slurm.conf": "s\n", "pxe/a.ipxe": "p\n", "pxe/b.ipxe": "p\n", "delivery.yaml": "d\n"}
    write_tree(out, full, {"cluster": "lab", "targets": ["pxe", "slurm"]})
    before = (out / "manifest.json").read_text()
    with pytest.raises(OutputError) as exc:
        write_tree(out, {"slurm/slurm.conf": "s2\n", "delivery.yaml": "d2\n"}, {"cluster": "lab", "targets": ["slurm"]})
    message = str(exc.value)
    assert "holds the targets pxe, which this render does not write" in message
    assert "delete 2 of their files (pxe/a.ipxe, pxe/b.ipxe)" in message
    assert (out / "manifest.json").read_text() == before and (out / "pxe" / "a.ipxe").is_file()
    assert leftovers(tmp_path) == []
    # the same targets, or more, replace the tree and prune its stale files
    write_tree(out, {"slurm/slurm.conf": "s3\n", "pxe/a.ipxe": "p\n"}, {"cluster": "lab", "targets": ["pxe", "slurm"]})
    assert not (out / "pxe" / "b.ipxe").exists()
    write_tree(out, {"slurm/slurm.conf": "s3\n", "pxe/a.ipxe": "p\n", "images/x": "i\n"},
               {"cluster": "lab", "targets": ["images", "pxe", "slurm"]})
    assert (out / "images" / "x").is_file()
