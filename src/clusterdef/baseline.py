"""nccl-tests output: parse real logs, record a performance baseline per validated set,
node group and node count, and compare a new run against it with a tolerance per
message-size band.

Parsing never raises: every log yields runs that carry either figures or the reason
the run failed or is incomplete. The parser keys on the shape of result rows rather
than on exact header text, so it holds across nccl-tests formats from the NCCL 1.x era
(2018) to v2.18 (2026), with MPI/srun prefixes, NCCL_DEBUG lines and other noise
interleaved.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .limits import InputError, check_yaml, read_bytes, read_text

# --------------------------------------------------------------------------- parsing

# `[1,0]<stdout>:` (Open MPI --tag-output, may appear mid-line), `0: ` (srun -l).
_MPI_PREFIX = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
_SRUN_PREFIX = re.compile(r"^\s*\d+:\s(?=\s*[#0-9A-Za-z])")
_PARAMS = re.compile(r"^#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)(.*)$")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*nccl-library=(\d+))?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[[^\]]*\]\s+(.+?)\s*$")
_NCCL_VERSION = re.compile(r"\bNCCL version\s+(\d+\.\d+\.\d+)(?:\+(\S+))?")
_NCCL1 = re.compile(r"compiled with NCCL\s+(\d+(?:\.\d+)*)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_COLUMNS = re.compile(r"^#\s*(size|bytes)\s+(count|N)\b")
_FAILURE = re.compile(r"(Test NCCL failure|NCCL failure|Test CUDA failure|CUDA failure|Test failure|"
                      r"MPI_ABORT|Segmentation fault|Bus error)")
_TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
          "fp8_e4m3", "fp8_e5m2", "f8e4m3", "f8e5m2", "char", "int", "uint", "bf16", "fp16", "fp32", "fp64"}


def _num(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


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

    def busbw(self) -> dict[int, float]:
        """Out-of-place bus bandwidth per message size (bytes -> GB/s)."""
        return {r.size: r.out_of_place.busbw_gbps for r in self.rows if r.out_of_place.busbw_gbps is not None}

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
    if len(tokens) < 11 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    lead, tail = tokens[:-8], tokens[-8:]
    if len(lead) < 3 or len(lead) > 5:
        return None
    dtype = lead[2]
    if dtype not in _TYPES and not re.fullmatch(r"[a-z][a-z0-9_]*", dtype):
        return None
    redop, root = "", None
    for extra in lead[3:]:
        if re.fullmatch(r"-?\d+", extra):
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


def parse(text: str) -> list[Run]:
    """Every run in an nccl-tests log, in order. Never raises."""
    runs: list[Run] = []
    run: Run | None = None
    stage = 0  # 0 nothing, 1 version, 2 starting, 3 params, 4 devices/columns, 5 rows, 6 footer

    def start(lineno: int) -> Run:
        nonlocal run, stage
        run = Run(first_line=lineno)
        runs.append(run)
        stage = 0
        return run

    try:
        lines = text.splitlines()
    except Exception:  # pragma: no cover - text is a str
        return []
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
        m = _PARAMS.match(s)
        if m:
            r = start(lineno) if run is None or stage >= 3 else run
            r.threads, r.gpus_per_process = int(m.group(1)), int(m.group(2))
            r.min_bytes, r.max_bytes = int(m.group(3)), int(m.group(4))
            v = re.search(r"validation:\s*(\d+)", m.group(5))
            r.validation = bool(int(v.group(1))) if v else None
            stage = 3
            continue
        m = _RANK.match(s)
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
        if s[0].isdigit():
            row = _row(s, (run.check_column if run else "") or "#wrong")
            if row is not None:
                r = run if run is not None and stage <= 5 else start(lineno)
                r.rows.append(row)
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
    wrong = [r.size for r in run.rows if (r.out_of_place.wrong or 0) > 0 or (r.in_place.wrong or 0) > 0]
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
                      + ", ".join(_size_name(s) for s in wrong[:8]) + ("..." if len(wrong) > 8 else ""))
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
    """Parse a log read within the log size limit; BaselineError names a file that is not one."""
    try:
        data = read_bytes(path, "log")
    except InputError as exc:
        raise BaselineError(_why(exc)) from None
    return parse(data.decode("utf-8", errors="replace"))


def _size_name(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


size_name = _size_name

# --------------------------------------------------------------------------- baselines

# Size bands and their default tolerated busbw drop (percent). Small messages are
# latency-bound and noisy; large ones measure the fabric and get the policy value.
BANDS = (("small", 0, 1 << 20), ("medium", 1 << 20, 256 << 20), ("large", 256 << 20, 1 << 62))
DEFAULT_TOLERANCE = {"small": 25.0, "medium": 10.0, "large": 5.0}


def band(size: int) -> str:
    return next(name for name, lo, hi in BANDS if lo <= size < hi)


class BaselineError(ValueError):
    """A log or baseline file that cannot be read; the message names the file and the problem."""


def _why(exc: InputError) -> str:
    f = exc.findings[0]
    return f"{f.where}: {f.code} {f.message} ({f.hint})"


def _read_yaml(path: Path, rt: bool = False):
    """A baseline file's data, read and checked within limits (round-trip data when rt)."""
    from ruamel.yaml import YAML, YAMLError

    try:
        text = read_text(path, "baseline")
        check_yaml(text, str(path))
        return YAML(typ="rt" if rt else "safe").load(text)
    except InputError as exc:
        raise BaselineError(_why(exc)) from None
    except YAMLError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc}") from None


@dataclass
class Baseline:
    set: str
    test: str
    nodes: int
    gpus_per_node: int | None
    busbw_gbps: dict[int, float]
    node_group: str = ""
    avg_busbw_gbps: float | None = None
    source: str = ""

    def key(self) -> tuple:
        return (self.test, self.node_group, self.nodes)


def _entry(data: dict, where: str, set_name: str) -> Baseline:
    """One entry, every field type-checked so a malformed file is a message naming the field."""
    def bad(field: str, want: str) -> BaselineError:
        return BaselineError(f"{where}: `{field}` must be {want} (got {data.get(field)!r:.60}); an entry needs "
                             "test, nodes and busbw_gbps {size: GB/s}")

    def count(field: str) -> int:
        v = data.get(field)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 1 << 31:
            raise bad(field, "a positive whole number")
        return v

    def gbps(v) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError
        return float(v)

    if not isinstance(data.get("test"), str):  # "" when the log did not name its test
        raise bad("test", "the nccl-tests name (e.g. all_reduce_perf)")
    bw = data.get("busbw_gbps")
    if not isinstance(bw, dict) or not bw:
        raise bad("busbw_gbps", "a mapping of message size (bytes) to GB/s")
    try:
        busbw = {int(k): gbps(v) for k, v in bw.items()}
    except (TypeError, ValueError, OverflowError):
        raise bad("busbw_gbps", "sizes in bytes mapped to finite, non-negative GB/s") from None
    try:
        avg = None if data.get("avg_busbw_gbps") is None else gbps(data["avg_busbw_gbps"])
    except ValueError:
        raise bad("avg_busbw_gbps", "a finite, non-negative GB/s figure") from None
    return Baseline(set=str(data.get("set", set_name)), test=data["test"], nodes=count("nodes"),
                    gpus_per_node=None if data.get("gpus_per_node") is None else count("gpus_per_node"),
                    busbw_gbps=busbw, node_group=str(data.get("node_group", "") or ""),
                    avg_busbw_gbps=avg, source=str(data.get("source", "")))


def load_baselines(path: str | Path) -> list[Baseline]:
    """A baseline file: the top-level entry (the original format) plus optional `entries:`
    (one per node group / node count / test)."""
    path = Path(path)
    data = _read_yaml(path)
    _check_shape(data, path)
    set_name = str(data.get("set", path.stem))
    out = []
    if "test" in data:
        out.append(_entry(data, str(path), set_name))
    for i, e in enumerate(data.get("entries") or []):
        out.append(_entry(e, f"{path}: entries[{i}]", set_name))
    return out


def _check_shape(data, path: Path) -> None:
    if not isinstance(data, dict):
        raise BaselineError(f"{path}: a baseline file is a mapping with set, test, nodes and busbw_gbps")
    entries = data.get("entries") or []
    if not isinstance(entries, list):
        raise BaselineError(f"{path}: `entries` must be a list of baseline entries")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise BaselineError(f"{path}: entries[{i}] is not a mapping")


def baseline_from_run(run: Run, set_name: str, node_group: str = "", source: str = "") -> dict:
    return {
        "set": set_name, "test": run.test, "node_group": node_group, "nodes": run.nodes,
        "gpus_per_node": run.gpus_per_node, "source": source,
        "busbw_gbps": {str(k): v for k, v in run.busbw().items()},
        "avg_busbw_gbps": run.avg_busbw_gbps,
    }


def record(path: str | Path, entry: dict) -> str:
    """Add or replace an entry (same test, node group and node count) in a baseline file and
    return the new text. A file in the original single-entry format keeps its top-level entry."""
    from io import StringIO

    from ruamel.yaml import YAML

    y = YAML()
    y.default_flow_style = False
    path = Path(path)
    data = _read_yaml(path, rt=True) if path.exists() else None
    if data:
        _check_shape(data, path)
    else:
        data = {"set": entry["set"]}
    key = (entry["test"], entry.get("node_group", ""), entry["nodes"])
    top_key = (data.get("test"), data.get("node_group", "") or "", data.get("nodes"))
    if "test" not in data or top_key == key:
        for k, v in entry.items():
            data[k] = v
    else:
        entries = data.setdefault("entries", [])
        for i, e in enumerate(entries):
            if (e.get("test"), e.get("node_group", "") or "", e.get("nodes")) == key:
                entries[i] = entry
                break
        else:
            entries.append(entry)
    buf = StringIO()
    y.dump(data, buf)
    return buf.getvalue()


def pick(baselines: list[Baseline], run: Run, node_group: str = "") -> Baseline | None:
    """The baseline for this run: same test and node count, preferring the node group."""
    same = [b for b in baselines if b.test == run.test and b.nodes == run.nodes]
    for b in same:
        if node_group and b.node_group == node_group:
            return b
    return next((b for b in same if not b.node_group), same[0] if same else None)


@dataclass
class SizeResult:
    size: int
    band: str
    baseline_gbps: float
    measured_gbps: float
    drop_pct: float
    tolerance_pct: float
    ok: bool


@dataclass
class Comparison:
    test: str
    set: str
    ok: bool
    problems: list[str]
    sizes: list[SizeResult]

    def to_json(self) -> dict:
        return asdict(self)


def compare(run: Run, base: Baseline, tolerance: dict[str, float] | None = None) -> Comparison:
    """Compare a run with its baseline. Fails on a failed/incomplete run, any #wrong, a size
    whose busbw dropped beyond its band's tolerance, or no common sizes."""
    tol = {**DEFAULT_TOLERANCE, **(tolerance or {})}
    problems: list[str] = []
    if run.status != "ok":
        problems.append(f"run {run.status}: {run.reason}")
    elif run.wrong_total:
        problems.append(f"{run.wrong_total:g} wrong elements (#wrong)")
    if run.test and run.test != base.test:
        problems.append(f"run is {run.test}, baseline is {base.test}")
    if run.nodes != base.nodes:
        problems.append(f"run spans {run.nodes} nodes, baseline {base.nodes}")
    sizes: list[SizeResult] = []
    measured = run.busbw()
    for size in sorted(set(measured) & set(base.busbw_gbps)):
        want, got = base.busbw_gbps[size], measured[size]
        drop = 0.0 if want <= 0 else round((want - got) / want * 100.0, 2)
        limit = tol[band(size)]
        ok = drop <= limit
        sizes.append(SizeResult(size, band(size), want, got, drop, limit, ok))
        if not ok:
            problems.append(f"{_size_name(size)}: busbw {got:g} GB/s is {drop:g}% below the baseline "
                            f"{want:g} GB/s (tolerance {limit:g}% for {band(size)} messages)")
    if not sizes:
        problems.append("no message size in common with the baseline")
    return Comparison(run.test, base.set, not problems, problems, sizes)
