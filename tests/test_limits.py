"""Bounded reads: only regular files, a size limit per kind, and YAML/JSON refused before
they are built when nested too deep, alias-bombed or carrying huge integers."""

from __future__ import annotations

import os

import pytest

from clusterdef import baseline, limits
from clusterdef.inventory import read_inventory
from clusterdef.limits import InputError
from clusterdef.source import load_file, load_text


def code_of(exc: pytest.ExceptionInfo) -> str:
    return exc.value.findings[0].code


def bomb(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 "x"']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("make, code", [
    (lambda t: t, "file-not-regular"),
    (lambda t: t / "pipe", "file-not-regular"),
    (lambda t: "/dev/zero", "file-not-regular"),
    (lambda t: t / "no" / "such.yaml", "file-not-found"),
])
def test_only_regular_files(tmp_path, fifo, make, code):
    path = make(tmp_path)
    with pytest.raises(InputError) as exc:
        load_file(path)
    f = exc.value.findings[0]
    assert f.code == code and f.file == str(path) and str(path) in f.message and f.hint


def test_size_limit_reads_at_most_limit_plus_one(tmp_path, monkeypatch):
    monkeypatch.setitem(limits.LIMITS, "definition", 10)
    (tmp_path / "ok.yaml").write_text("a: 123456")  # 9 bytes
    (tmp_path / "big.yaml").write_text("a: 1234567890")
    assert load_file(tmp_path / "ok.yaml").data == {"a": 123456}
    with pytest.raises(InputError) as exc:
        load_file(tmp_path / "big.yaml")
    assert code_of(exc) == "file-too-large"


def test_alias_bomb_refused_quickly():
    with pytest.raises(InputError) as exc:
        load_text(bomb(), "bomb.yaml")
    f = exc.value.findings[0]
    assert f.code == "yaml-aliases" and f.file == "bomb.yaml" and f.line > 1


def test_nested_aliases_counted_at_full_expansion():
    # 6 levels of 9 aliases are only 45 alias events but expand to 9**5 = 59,049 copies each
    text = bomb(7, 9)
    with pytest.raises(InputError) as exc:
        load_text(text, "b.yaml")
    assert code_of(exc) == "yaml-aliases"


def test_modest_aliases_are_fine():
    data = load_text("base: &b {cores: 8}\nx: *b\ny: *b\n", "ok.yaml").data
    assert data["x"] == {"cores": 8}


@pytest.mark.parametrize("text, code, line", [
    ("a:\n  b: " + "[" * 400 + "]" * 400 + "\n", "nesting-too-deep", 2),
    ("a: 1\nb: " + "9" * 5000 + "\n", "number-too-long", 2),
    ("a: -" + "9" * 101 + "\n", "number-too-long", 1),
])
def test_yaml_structure_limits(text, code, line):
    with pytest.raises(InputError) as exc:
        load_text(text, "x.yaml")
    f = exc.value.findings[0]
    assert (f.code, f.line) == (code, line)


def test_quoted_long_number_is_text():
    assert load_text('a: "' + "9" * 500 + '"\n').data["a"] == "9" * 500


@pytest.mark.parametrize("text, code, line", [
    ("[\n" + "[" * 400 + "]" * 400 + "]", "nesting-too-deep", 2),
    ('{"a":\n ' + "9" * 5000 + "}", "number-too-long", 2),
    ('{"a": "' + "[" * 400 + '", "b": 1.' + "5" * 200 + "}", None, 0),
    ('{"a": ', "json-syntax", 1),
])
def test_json_limits(tmp_path, text, code, line):
    p = tmp_path / "f.json"
    p.write_text(text)
    if code is None:
        assert limits.load_json(p, "facts")["a"].startswith("[")
        return
    with pytest.raises(InputError) as exc:
        limits.load_json(p, "facts")
    f = exc.value.findings[0]
    assert (f.code, f.line, f.file) == (code, line, str(p))


def test_inventory_fifo_and_device_are_problems_not_hangs(fifo):
    for path in (fifo, "/dev/zero"):
        inv = read_inventory(path)
        (problem,) = inv.report("macs.csv")
        assert inv.macs == {} and not inv.readable and problem.startswith("macs.csv is ")
        assert "not a regular file" in problem and str(path) not in problem


def test_log_device_refused(fifo):
    for path in (fifo, "/dev/zero"):
        with pytest.raises(baseline.BaselineError, match="not a regular file"):
            baseline.parse_file(path)


@pytest.mark.parametrize("text, field", [
    ("- 1\n", "mapping"),
    ("set: s\nentries: 5\n", "entries"),
    ("set: s\nentries: [3]\n", "entries[0]"),
    ("test: t\nnodes: .inf\nbusbw_gbps: {1024: 1.0}\n", "nodes"),
    ("test: t\nnodes: true\nbusbw_gbps: {1024: 1.0}\n", "nodes"),
    ("test: t\nnodes: 2\nbusbw_gbps: [1, 2]\n", "busbw_gbps"),
    ("test: t\nnodes: 2\nbusbw_gbps: {1024: .nan}\n", "busbw_gbps"),
    ("test: t\nnodes: 2\nbusbw_gbps: {x: 1}\n", "busbw_gbps"),
    ("test: [t]\nnodes: 2\nbusbw_gbps: {1: 1}\n", "test"),
    ("test: t\nnodes: 2\nbusbw_gbps: {1: 1}\navg_busbw_gbps: fast\n", "avg_busbw_gbps"),
    (bomb(), "yaml-aliases"),
    ("a: " + "[" * 100 + "]" * 100, "nesting-too-deep"),
])
def test_malformed_baseline_files(tmp_path, text, field):
    p = tmp_path / "b.yaml"
    p.write_text(text)
    with pytest.raises(baseline.BaselineError) as exc:
        baseline.load_baselines(p)
    assert str(p) in str(exc.value) and field in str(exc.value)
    if text.startswith("set: s\nentries"):
        entry = {"set": "s", "test": "t", "node_group": "", "nodes": 2, "busbw_gbps": {"1": 1.0}}
        with pytest.raises(baseline.BaselineError):
            baseline.record(p, entry)


def test_log_with_huge_numbers_is_noise_not_valueerror():
    text = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    text += "9" * 5000 + " 256 float sum -1 10.0 0.1 0.1 0 10.0 0.1 0.1 0\n"
    assert baseline.parse(text) == [] or all(not r.rows for r in baseline.parse(text))


def test_a_log_is_streamed_with_no_size_limit_and_bounded_lines(tmp_path, monkeypatch):
    """A log is not refused for its size (NCCL_DEBUG=INFO from thousands of ranks is hundreds of MiB): it is
    read a line at a time; a line past MAX_STREAM_LINE is one empty line, read past, never held."""
    monkeypatch.setattr(limits, "MAX_STREAM_LINE", 64)
    p = tmp_path / "x.log"
    p.write_bytes(b"first\r\nsecond\rthird\n" + b"x" * 1000 + b"\nafter \xff\nlast")
    assert list(limits.iter_lines(p, "log")) == ["first", "second", "third", "", "after \ufffd", "last"]
    assert "log" not in limits.LIMITS
