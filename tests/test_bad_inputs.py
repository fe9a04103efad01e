"""Bad-input corpus: every tests/bad/*.yaml is a complete definition with exactly one
thing broken. Its header names the finding the real CLI must report and the line it
must point at:

    # expect: <finding-code>
    # expect: <another code>   (only when the one break necessarily causes it too)
    # line: <1-based line>     (of the first expected finding)
    # column: <1-based column>  (optional: then the finding must point at this column too)
    # why: <one sentence>
    # xfail: <reason>          (optional: a known validator bug; both checks xfail)
    # xfail-text: <reason>     (optional: a bug of the text format only)

The command line runs in this process (tests/cli_runner.py: the same `main` a user's
`clusterdef` calls, its exit code and both output streams), once per file and format in a
session fixture: 400 interpreter starts cost about 100 s of CI, the in-process runs a few
seconds. A sample of files also runs as a real subprocess and must report exactly the same.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BAD = REPO / "tests" / "bad"
TODAY = "2026-11-30"
CASES = sorted(BAD.glob("*.yaml"))

HEADER = re.compile(r"^#\s*(expect|line|column|why|xfail|xfail-text):\s*(.*?)\s*$")


@dataclass(frozen=True)
class Header:
    codes: tuple[str, ...]  # the EXACT set of error codes the file must produce; the first is located
    line: int
    why: str
    xfail: str | None
    xfail_text: str | None
    column: int | None = None

    @property
    def code(self) -> str:
        return self.codes[0]


def read_header(path: Path) -> Header:
    fields: dict[str, str] = {}
    codes: list[str] = []
    for text in path.read_text(encoding="utf-8").splitlines():
        m = HEADER.match(text)
        if not m:
            break
        fields[m[1]] = m[2]
        if m[1] == "expect":
            codes.append(m[2])
    missing = {"expect", "line", "why"} - set(fields)
    assert not missing, f"{path.name}: header lacks {sorted(missing)}"
    return Header(tuple(codes), int(fields["line"]), fields["why"], fields.get("xfail"),
                  fields.get("xfail-text"), int(fields["column"]) if "column" in fields else None)


def _env() -> dict[str, str]:
    return {**os.environ, "CLUSTERDEF_MATRICES": str(REPO / "matrices")}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterdef", *args], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=120)


def validate(path: Path, fmt: str) -> subprocess.CompletedProcess:
    return cli("validate", str(path), "--format", fmt, "--today", TODAY)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


def validate_here(path: Path, fmt: str) -> Run:
    """`clusterdef validate` in this process; an exception that escaped the CLI is reported as
    the traceback a user would have seen."""
    import traceback

    from cli_runner import CliRunner

    from clusterdef.cli import app

    r = CliRunner().invoke(app, ["validate", str(path), "--format", fmt, "--today", TODAY])
    crash = "" if r.exception is None or isinstance(r.exception, SystemExit) else \
        "Traceback (most recent call last):\n" + "".join(traceback.format_exception(r.exception))
    return Run(r.exit_code, r.stdout, r.stderr + crash)


class _Runs:
    """A corpus file validated in one format when a test asks for it, every time it asks (about
    20 ms): each test runs its own validation, so mutmut credits the checks to every test that
    reads their findings (a run shared through a cache is credited to the first test only)."""

    def __getitem__(self, key: tuple[str, str]) -> Run:
        name, fmt = key
        saved = os.environ.get("CLUSTERDEF_MATRICES")
        os.environ["CLUSTERDEF_MATRICES"] = str(REPO / "matrices")
        try:
            run = validate_here(BAD / name, fmt)
        finally:
            if saved is None:
                os.environ.pop("CLUSTERDEF_MATRICES")
            else:
                os.environ["CLUSTERDEF_MATRICES"] = saved
        return run


@pytest.fixture(scope="session")
def runs() -> _Runs:
    return _Runs()


SAMPLE = [p for p in CASES if p.name.startswith(("001-", "501-", "701-"))] + CASES[-1:]


@pytest.mark.spawns
@pytest.mark.parametrize("path", SAMPLE, ids=[p.name for p in SAMPLE])
def test_a_real_process_reports_the_same(path: Path, runs):
    """The in-process runs stand for real processes: the same exit code and the same report."""
    assert len(SAMPLE) >= 3
    for fmt in ("json", "text"):
        real, here = validate(path, fmt), runs[(path.name, fmt)]
        assert (real.returncode, real.stdout, real.stderr) == (here.returncode, here.stdout, here.stderr), fmt


def _params(text: bool = False):
    out = []
    for path in CASES:
        header = read_header(path)
        reason = header.xfail or (header.xfail_text if text else None)
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        out.append(pytest.param(path, header, id=path.name, marks=marks))
    return out


def test_corpus_is_large_enough():
    assert len(CASES) >= 40, f"only {len(CASES)} bad-input cases in {BAD}"


def test_headers_are_well_formed():
    for path in CASES:
        header = read_header(path)
        for code in header.codes:
            assert re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", code), f"{path.name}: bad code {code!r}"
        assert len(set(header.codes)) == len(header.codes), f"{path.name}: a code named twice"
        n_lines = len(path.read_text(encoding="utf-8").splitlines())
        assert 1 <= header.line <= n_lines, f"{path.name}: line {header.line} outside the file"
        if header.column is not None:
            width = len(path.read_text(encoding="utf-8").splitlines()[header.line - 1])
            assert 1 <= header.column <= width, f"{path.name}: column {header.column} outside line {header.line}"
        assert "yaml-language-server" not in path.read_text(encoding="utf-8"), path.name


@pytest.mark.parametrize(("path", "header"), _params())
def test_json_report(path: Path, header: Header, runs):
    """exit 2, no traceback, the expected finding at the expected line, with a hint."""
    r = runs[(path.name, "json")]
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    report = json.loads(r.stdout)
    assert report["ok"] is False
    findings = report["findings"]
    seen = [(f["code"], f["line"]) for f in findings]
    # exactly one thing is broken: no finding from elsewhere (an older lab, a second break)
    errors = sorted({f["code"] for f in findings if f["severity"] == "error"})
    assert errors == sorted(header.codes), f"{path.name} must report exactly {list(header.codes)}; got {seen}"
    matching = [f for f in findings if f["code"] == header.code and f["line"] == header.line]
    assert matching, f"expected {header.code} at line {header.line} ({header.why}); got {seen}"
    if header.column is not None:
        at = [f for f in matching if f["column"] == header.column]
        assert at, f"expected {header.code} at {header.line}:{header.column}; got columns {[f['column'] for f in matching]}"
        matching = at
    f = matching[0]
    assert f["file"].endswith(path.name), f["file"]
    assert f["severity"] == "error"
    assert f["hint"].strip(), f"{header.code} at line {header.line} has no hint"
    assert f["message"].strip()


GOLDEN = REPO / "tests" / "golden_bad"
REFRESH = os.environ.get("CLUSTERDEF_REFRESH_GOLDEN") == "1"


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_every_finding_is_the_reviewed_one(path: Path, runs):
    """Every finding of the file, warnings included, with its exact message, hint, line and column,
    against tests/golden_bad/ (`CLUSTERDEF_REFRESH_GOLDEN=1` rewrites it: review the diff). What a
    user reads is part of the contract: a changed word shows up in review."""
    # the checkout's own path (in messages about files beside the definition) is written <repo>
    report = json.loads(runs[(path.name, "json")].stdout.replace(str(REPO), "<repo>"))
    got = [{k: v for k, v in f.items() if k != "file"} | {"file": Path(f["file"]).name} for f in report["findings"]]
    golden = GOLDEN / f"{path.stem}.json"
    if REFRESH:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert got == json.loads(golden.read_text(encoding="utf-8")), f"refresh with CLUSTERDEF_REFRESH_GOLDEN=1 and review {golden}"


@pytest.mark.parametrize(("path", "header"), _params(text=True))
def test_text_report(path: Path, header: Header, runs):
    """The same finding as `file:line:` with its code in the report on stdout (`validate DEF > report.txt`
    keeps it), no traceback."""
    t = runs[(path.name, "text")]
    assert "Traceback" not in t.stderr + t.stdout, t.stderr
    assert t.returncode == 2, f"exit {t.returncode}\n{t.stdout}\n{t.stderr}"
    located = [ln for ln in t.stdout.splitlines() if f"{path.name}:{header.line}:" in ln]
    assert located, f"no `{path.name}:{header.line}:` in the report on stdout:\n{t.stdout}\nstderr:\n{t.stderr}"
    assert any(header.code in ln for ln in located), f"`{header.code}` not on the located line(s): {located}"
    if header.column is not None:
        at = f"{path.name}:{header.line}:{header.column}:"
        assert any(at in ln and header.code in ln for ln in located), f"no `{at}` with `{header.code}`: {located}"


@pytest.mark.spawns
def test_render_of_bad_file_writes_nothing(tmp_path):
    bad = next(p for p in CASES if read_header(p).code == "matrix-unknown-set")
    out = tmp_path / "out"
    r = cli("render", str(bad), "-o", str(out), "--today", TODAY)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stderr}"
    assert "matrix-unknown-set" in r.stderr
    assert not out.exists(), f"render created {out} for an invalid definition"
    assert list(tmp_path.iterdir()) == []
