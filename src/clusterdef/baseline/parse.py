"""nccl-tests output: parse real logs into runs of result rows (store.py records and
compares them).

Parsing never raises: every log yields runs that carry either figures or the reason
the run failed or is incomplete. The parser keys on the shape of result rows rather
than on exact header text, so it holds across nccl-tests formats from the NCCL 1.x era
(2018) to v2.18 (2026), with MPI/srun prefixes, NCCL_DEBUG lines and other noise
interleaved.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from ..limits import InputError, iter_lines
from ..textnum import decimal, is_digits

# --------------------------------------------------------------------------- parsing

# `[1,0]<stdout>:` (Open MPI --tag-output, may appear mid-line), `0: ` (srun -l).
_MPI_PREFIX = re.compile(r"\[[0-9]+,[0-9]+\]<std(?:out|err)>:")
_SRUN_PREFIX = re.compile(r"^\s*[0-9]+:\s(?=\s*[#0-9A-Za-z])")
_PARAMS = re.compile(r"^#?\s*nThread\s+([0-9]+)\s+nGpus\s+([0-9]+)\s+minBytes\s+([0-9]+)\s+maxBytes\s+([0-9]+)(.*)$")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*nccl-library=([0-9]+))?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_RANK = re.compile(r"^#?\s*Rank\s+([0-9]+)\s+(?:Group\s+[0-9]+\s+)?(?:Pid\s+[0-9]+\s+)?"
                   r"on\s+(\S+)\s+device\s+([0-9]+)\s+"
                   r"\[[^\]]*\]\s+(.+?)\s*$")
_NCCL_VERSION = re.compile(r"\bNCCL version\s+([0-9]+\.[0-9]+\.[0-9]+)(?:\+(\S+))?")
_NCCL1 = re.compile(r"compiled with NCCL\s+([0-9]+(?:\.[0-9]+)*)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*([0-9]+)\s*(OK|FAILED)?")
_COLUMNS = re.compile(r"^#\s*(size|bytes)\s+(count|N)\b")
_FAILURE = re.compile(r"(Test NCCL failure|NCCL failure|Test CUDA failure|CUDA failure|Test failure|"
                      r"MPI_ABORT|Segmentation fault|Bus error)")
_TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
          "fp8_e4m3", "fp8_e5m2", "f8e4m3", "f8e5m2", "char", "int", "uint", "bf16", "fp16", "fp32", "fp64"}


def _num(token: str) -> float | None:
    return decimal(token)


Key = tuple[int, str, str]  # (message size in bytes, datatype, reduction op or "")


class BaselineError(ValueError):
    """A log or baseline file that cannot be read; the message names the file and the problem."""


def _why(exc: InputError) -> str:
    f = exc.findings[0]
    return f"{f.where}: {f.code} {f.message} ({f.hint})"


@dataclass
class Half:
    """One half of a result row (out-of-place or in-place)."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: float | None  # `#wrong` count; None when N/A or when the column is an old-style error
    error: float | None = None  # old `error` column (max abs error) or NCCL1 `res`


@dataclass
class Row:
    size: int
    count: int
    type: str
    redop: str
    root: int | None
    out_of_place: Half
    in_place: Half


@dataclass
class Run:
    """One nccl-tests run (one binary) found in a log."""

    test: str = ""
    status: str = "incomplete"  # ok | failed | incomplete
    reason: str = ""
    nccl_tests_version: str = ""
    nccl_version: str = ""
    threads: int | None = None
    gpus_per_process: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    validation: bool | None = None
    check_column: str = ""  # "#wrong", "error" or "res"
    ranks: int = 0
    hosts: list[str] = field(default_factory=list)
    gpu_models: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None
    failures: list[str] = field(default_factory=list)
    first_line: int = 0

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    @property
    def gpus_per_node(self) -> int | None:
        return (self.ranks // len(self.hosts)) if self.hosts and self.ranks % len(self.hosts) == 0 else None

    @property
    def wrong_total(self) -> float:
        return sum((r.out_of_place.wrong or 0) + (r.in_place.wrong or 0) for r in self.rows)

    def busbw(self) -> dict[Key, tuple[float, float | None]]:
        """Bus bandwidth (GB/s) per (size, datatype, reduction op): (out-of-place, in-place).
        A `-d all` or `-o all` log has many rows per size; each keeps its own figures."""
        return {(r.size, r.type, r.redop): (r.out_of_place.busbw_gbps, r.in_place.busbw_gbps)
                for r in self.rows if r.out_of_place.busbw_gbps is not None}

    def series(self) -> list[tuple[str, str]]:
        """The (datatype, reduction op) pairs in the run, in log order."""
        return list(dict.fromkeys((r.type, r.redop) for r in self.rows))

    def peak(self) -> tuple[float, Row, str] | None:
        """The highest busbw over every row and both halves: (GB/s, row, "out-of-place" | "in-place")."""
        best = None
        for r in self.rows:
            for name, h in (("out-of-place", r.out_of_place), ("in-place", r.in_place)):
                if h.busbw_gbps is not None and (best is None or h.busbw_gbps > best[0]):
                    best = (h.busbw_gbps, r, name)
        return best

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(nodes=self.nodes, gpus_per_node=self.gpus_per_node, wrong_total=self.wrong_total)
        return d


def _clean(line: str) -> str:
    line = _MPI_PREFIX.sub("", line)
    line = _SRUN_PREFIX.sub("", line, count=1)
    return line.rstrip()


def _half(tokens: list[str], check: str) -> Half | None:
    t, alg, bus, last = tokens
    time_us, algbw, busbw = _num(t), _num(alg), _num(bus)
    if algbw is None or busbw is None or (time_us is None and t != "N/A"):
        return None
    wrong = error = None
    if last != "N/A":
        value = _num(last)
        if value is None:
            return None
        if check == "#wrong":
            wrong = value
        else:
            error = value
    return Half(time_us, algbw, busbw, wrong, error)


def _row(line: str, check: str) -> Row | None:
    tokens = line.split()
    if len(tokens) < 11 or not is_digits(tokens[0]) or not is_digits(tokens[1]):
        return None
    lead, tail = tokens[:-8], tokens[-8:]
    if len(lead) < 3 or len(lead) > 5:
        return None
    dtype = lead[2]
    if dtype not in _TYPES and not re.fullmatch(r"[a-z][a-z0-9_]*", dtype):
        return None
    redop, root = "", None
    for extra in lead[3:]:
        if re.fullmatch(r"-?[0-9]+", extra):
            root = int(extra)
        elif re.fullmatch(r"[a-z][a-z0-9_]*", extra):
            redop = extra
        else:
            return None
    oop, ip = _half(tail[:4], check), _half(tail[4:], check)
    if oop is None or ip is None:
        return None
    return Row(int(tokens[0]), int(tokens[1]), dtype, redop, root, oop, ip)


# Longer lines are skipped as noise: no header or row is near this, and it keeps every
# number short of Python's 4,300-digit int conversion limit.
MAX_LINE = 4096


# What one log may hold, so that a log of any size is parsed in bounded memory: a real run has a few
# dozen sizes (a `-d all -o all` sweep a few thousand rows), and a job log a handful of runs.
MAX_ROWS = 16384
MAX_RUNS = 256


def parse(text: str) -> list[Run]:
    """Every run in an nccl-tests log, in order. Never raises."""
    return parse_lines(text.splitlines())


def parse_lines(lines: Iterable[str]) -> list[Run]:
    """Every run in the lines of an nccl-tests log, in order, holding one line at a time. Never raises
    on the log's content (an error reading the file passes through)."""
    runs: list[Run] = []
    run: Run | None = None
    stage = 0  # 0 nothing, 1 version, 2 starting, 3 params, 4 devices/columns, 5 rows, 6 footer

    def start(lineno: int) -> Run:
        nonlocal run, stage
        run = Run(first_line=lineno)
        if len(runs) < MAX_RUNS:
            runs.append(run)
        elif len(runs) == MAX_RUNS:  # later runs are parsed and dropped; the last kept one says so
            runs.append(Run(first_line=lineno, failures=[f"line {lineno}: more than {MAX_RUNS} runs in one log; "
                                                          "the rest are not read"]))
        stage = 0
        return run

    for lineno, raw in enumerate(lines, 1):
        line = _clean(raw)
        s = line.strip()
        if not s or len(s) > MAX_LINE:  # a real row is ~150 characters; a longer line is noise
            continue
        if "NCCL INFO" in s or "NCCL TRACE" in s:
            continue
        m = _VERSION.match(s)
        if m:
            r = start(lineno) if run is None or stage >= 1 else run
            r.nccl_tests_version = m.group(1)
            if m.group(2) and not r.nccl_version:
                code = int(m.group(2))
                r.nccl_version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
            stage = 1
            continue
        m = _STARTING.match(s)
        if m:
            r = start(lineno) if run is None or stage >= 2 else run
            r.test = m.group(1)
            stage = 2
            continue
        m = _CONCLUDED.match(s)
        if m and run is not None:
            run.test = run.test or m.group(1)
            stage = 6
            continue
        m = _PARAMS.fullmatch(s)
        if m:
            r = start(lineno) if run is None or stage >= 3 else run
            r.threads, r.gpus_per_process = int(m.group(1)), int(m.group(2))
            r.min_bytes, r.max_bytes = int(m.group(3)), int(m.group(4))
            v = re.search(r"validation:\s*([0-9]+)", m.group(5))
            r.validation = bool(int(v.group(1))) if v else None
            stage = 3
            continue
        m = _RANK.fullmatch(s)
        if m:
            r = run if run is not None and stage <= 4 else start(lineno)
            r.ranks += 1
            host, model = m.group(2), m.group(4)
            if host not in r.hosts:
                r.hosts.append(host)
            if model not in r.gpu_models:
                r.gpu_models.append(model)
            stage = max(stage, 4)
            continue
        m = _NCCL_VERSION.search(s)
        if m and run is not None:
            run.nccl_version = m.group(1) + (f"+{m.group(2)}" if m.group(2) else "")
            continue
        m = _NCCL1.search(s)
        if m and run is not None:
            run.nccl_version = m.group(1)
            continue
        m = _COLUMNS.match(s)
        if m:
            r = run if run is not None and stage <= 4 else start(lineno)
            r.check_column = "#wrong" if "#wrong" in s else ("res" if " res" in s else "error")
            stage = 4
            continue
        m = _AVG.match(s)
        if m and run is not None:
            run.avg_busbw_gbps = _num(m.group(1))
            if m.group(2) == "FAILED":
                run.failures.append(f"line {lineno}: average bus bandwidth below NCCL_TESTS_MIN_BW")
            stage = 6
            continue
        m = _OOB.match(s)
        if m and run is not None:
            run.out_of_bounds = int(m.group(1))
            if m.group(2) == "FAILED" or run.out_of_bounds:
                run.failures.append(f"line {lineno}: {run.out_of_bounds} out-of-bounds values")
            stage = 6
            continue
        if is_digits(s[0]):
            row = _row(s, (run.check_column if run else "") or "#wrong")
            if row is not None:
                r = run if run is not None and stage <= 5 else start(lineno)
                if len(r.rows) < MAX_ROWS:
                    r.rows.append(row)
                elif len(r.failures) < 20 and not any("result rows" in f for f in r.failures):
                    r.failures.append(f"line {lineno}: more than {MAX_ROWS} result rows in one run")
                stage = 5
                continue
        if _FAILURE.search(s) and not s.startswith("#"):
            if run is None:
                start(lineno)
            assert run is not None
            if len(run.failures) < 20:
                run.failures.append(f"line {lineno}: {s[:200]}")
            continue
    runs = [r for r in runs if r.rows or r.failures or r.ranks or r.test or r.threads is not None]
    for r in runs:
        _finish(r)
    return runs


def _finish(run: Run) -> None:
    several = len(run.series()) > 1
    wrong = [_size_name(r.size) + (f" {series_name(r.type, r.redop)}" if several else "")
             for r in run.rows if (r.out_of_place.wrong or 0) > 0 or (r.in_place.wrong or 0) > 0]
    if run.failures and not [f for f in run.failures if "out-of-bounds" in f or "NCCL_TESTS_MIN_BW" in f]:
        run.status = "failed"
        run.reason = run.failures[0]
        if run.rows:
            run.reason += f" (after {len(run.rows)} result rows)"
    elif run.failures:
        run.status = "failed"
        run.reason = run.failures[0]
    elif wrong:
        run.status = "failed"
        run.reason = (f"{run.wrong_total:g} wrong elements (#wrong) at sizes "
                      + ", ".join(wrong[:8]) + ("..." if len(wrong) > 8 else ""))
    elif not run.rows:
        run.status = "incomplete"
        run.reason = "no result rows: the run stopped before its first message size"
    elif run.avg_busbw_gbps is None:
        run.status = "incomplete"
        run.reason = (f"no '# Avg bus bandwidth' line: the log ends after {len(run.rows)} rows "
                      f"(last size {_size_name(run.rows[-1].size)})")
    else:
        run.status = "ok"
        run.reason = ""


def parse_file(path: str | Path) -> list[Run]:
    """Parse a log of any size, streamed a line at a time (limits.iter_lines); BaselineError names a file
    that is not a readable regular file."""
    try:
        return parse_lines(iter_lines(path, "log"))
    except InputError as exc:
        raise BaselineError(_why(exc)) from None


def _size_name(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


size_name = _size_name


def size_range(sizes: list[int]) -> str:
    """`lo..hi` in one unit style: each end in its whole binary unit (`8 B..16 GiB`), or both in
    bytes when an end of 1 KiB or more is not a whole KiB (never `33553920 B..16777215 KiB`)."""
    if not sizes:
        return "no sizes"
    lo, hi = min(sizes), max(sizes)
    a, b = _size_name(lo), _size_name(hi)
    if any(n >= 1024 and name.endswith(" B") for n, name in ((lo, a), (hi, b))):
        a, b = f"{lo} B", f"{hi} B"
    return a if lo == hi else f"{a}..{b}"


def series_name(dtype: str, redop: str) -> str:
    return f"{dtype}/{redop}" if redop else dtype


def choose_run(runs: list[Run], test: str | None, log: str | Path) -> Run:
    """The one run of `log` to record or compare: the only one, or the one of `test`;
    BaselineError when there is none or the choice is ambiguous."""
    chosen = [r for r in runs if not test or r.test == test]
    if not chosen:
        raise BaselineError(f"no {test or 'nccl-tests'} run in {log}")
    if len(chosen) > 1:
        raise BaselineError(f"{log} holds {len(chosen)} runs ({', '.join(r.test for r in chosen)}); "
                            "choose one with --test")
    return chosen[0]
