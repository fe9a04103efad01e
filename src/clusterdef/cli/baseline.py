"""`clusterdef baseline parse|record|compare`: nccl-tests runs against recorded baselines."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, FABRIC_KINDS, add_format, add_group, add_matrices, add_verb, bad_path, \
    check_outputs, choice, err, load_matrix, out, write_file

HELP = "nccl-tests performance baselines."


def add(verbs: Any) -> None:
    group = add_group(verbs, "baseline", HELP)
    sub = add_verb(group, "parse", baseline_parse, long_running=True)
    sub.add_argument("log", help="nccl-tests output.", type=Path, metavar="LOG")
    add_format(sub)

    sub = add_verb(group, "record", baseline_record)
    sub.add_argument("log", help="nccl-tests output of a good run.", type=Path, metavar="LOG")
    sub.add_argument("--set", dest="set_name", required=True, default=None, metavar="SET",
                     help="Validated set the run was taken on.")
    sub.add_argument("--node-group", default="", metavar="NODE_GROUP", help="Node group the run used.")
    sub.add_argument("--test", default=None, metavar="TEST", help="Which run when the log has several.")
    sub.add_argument("--output", "-o", type=Path, default=None, metavar="OUTPUT",
                     help="Baseline file (default: the set's baseline).")
    add_fabric(sub, "Fabric the collective crossed; plan warns when a canary's differs.")
    add_matrices(sub)

    sub = add_verb(group, "compare", baseline_compare)
    sub.add_argument("log", help="nccl-tests output of the new run.", type=Path, metavar="LOG")
    sub.add_argument("--set", dest="set_name", default=None, metavar="SET", help="Set whose baseline to use.")
    sub.add_argument("--baseline", dest="baseline_file", type=Path, default=None, metavar="BASELINE",
                     help="Baseline file.")
    sub.add_argument("--node-group", default="", metavar="NODE_GROUP")
    sub.add_argument("--test", default=None, metavar="TEST")
    sub.add_argument("--tolerance", action="append", default=None, metavar="TOLERANCE",
                     help="BAND=PCT, bands small (<1 MiB), medium (<256 MiB), large; repeatable.")
    add_fabric(sub, "Fabric kind the run's collective crossed: a baseline of another kind is not compared.")
    add_format(sub)
    add_matrices(sub)


def add_fabric(sub: Any, help: str) -> None:
    sub.add_argument("--fabric", type=choice(*FABRIC_KINDS), default=None,
                     metavar="{" + ",".join(FABRIC_KINDS) + "}", help=help)


def _parse_log(log: Path):
    from ..baseline import BaselineError, parse_file

    try:
        return parse_file(log)
    except BaselineError as exc:
        bad_path(str(exc))


def _run_line(r) -> str:
    from ..baseline import series_name, size_name, size_range

    what = escape(f"{r.test or 'unknown test'}: {r.nodes} node(s), {r.ranks} rank(s), "
                  f"{', '.join(r.gpu_models) or '?'}")
    if r.status == "ok":
        series = r.series()
        sizes = sorted({row.size for row in r.rows})
        kinds = ", ".join(series_name(*s) for s in series[:6]) + (", ..." if len(series) > 6 else "")
        line = (f"[green]ok[/] {what}; {len(r.rows)} rows, {len(sizes)} sizes {size_range(sizes)} x "
                f"{len(series)} datatype/op ({escape(kinds)})")
        peak = r.peak()
        if peak:
            bw, row, half = peak
            line += (f", peak busbw {bw:g} GB/s ({size_name(row.size)} {escape(series_name(row.type, row.redop))} "
                     f"{half})")
        return line + f", avg {r.avg_busbw_gbps:g} GB/s"
    return f"[red]{r.status}[/] {what}: {escape(r.reason)}"


def baseline_parse(log: Path, fmt: str) -> None:
    """Parse an nccl-tests log. Exit 0 when every run is ok, 1 when a run failed or is incomplete."""
    runs = _parse_log(log)
    if fmt == "json":
        sys.stdout.write(json.dumps([r.to_json() for r in runs], indent=2) + "\n")
    else:
        if not runs:
            out.print(f"[red]no nccl-tests run[/] found in {escape(str(log))}")
        for r in runs:
            out.print(_run_line(r))
    if not runs or any(r.status != "ok" for r in runs):
        raise SystemExit(EXIT_WARN)


def _one_run(log: Path, test: Optional[str]):
    from ..baseline import BaselineError, choose_run

    try:
        return choose_run(_parse_log(log), test, log)
    except BaselineError as exc:
        bad_path(str(exc))


def _baseline_file(set_name: str, matrices: Optional[Path]) -> Path:
    m = load_matrix(matrices)
    vs = m.sets.get(set_name)
    if vs is None:
        err.print(f"[red]error[/]: no set named {escape(repr(set_name))} in {escape(str(m.root))}")
        raise SystemExit(EXIT_BAD)
    from ..baseline import set_baseline_path

    return set_baseline_path(m.set_root(set_name), set_name, vs.baseline)


def baseline_record(log: Path, set_name: str, node_group: str, test: Optional[str], output: Optional[Path],
                    fabric: Optional[str], matrices: Optional[Path]) -> None:
    """Record a run as the baseline of a set, node group and node count (refuses a failed run). The GPU
    model is taken from the log."""
    from ..baseline import BaselineError, baseline_from_run, record

    check_outputs(output)
    run = _one_run(log, test)
    if run.status != "ok":
        err.print(f"[red]refused[/]: cannot record a baseline from a {escape(run.status)} run: {escape(run.reason)}")
        raise SystemExit(EXIT_BAD)
    dest = output or _baseline_file(set_name, matrices)
    check_outputs(dest)
    try:
        text = record(dest, baseline_from_run(run, set_name, node_group, source=log.name, fabric=fabric or ""))
    except BaselineError as exc:
        bad_path(str(exc))
    write_file(dest, text)
    out.print(f"[green]recorded[/] {escape(run.test)} on {run.nodes} node(s) for {escape(set_name)} in "
              f"{escape(str(dest))}")


def baseline_compare(log: Path, set_name: Optional[str], baseline_file: Optional[Path], node_group: str,
                     test: Optional[str], tolerance: Optional[list[str]], fabric: Optional[str], fmt: str,
                     matrices: Optional[Path]) -> None:
    """Compare a run with the recorded baseline. Exit 0 within tolerance, 1 on a regression, #wrong or a
    failed run (even when nothing errored), 2 on bad input."""
    from ..baseline import BaselineError, compare, load_baselines, parse_tolerance, pick, series_name, size_name

    try:
        tol = parse_tolerance(tolerance or [])
    except BaselineError as exc:
        bad_path(str(exc))
    if (set_name is None) == (baseline_file is None):
        err.print("[red]error[/]: give exactly one of --set NAME or --baseline FILE")
        raise SystemExit(EXIT_BAD)
    if baseline_file is not None:
        path = baseline_file
    else:
        assert set_name is not None  # exactly one of them, checked above
        path = _baseline_file(set_name, matrices)
    try:
        baselines = load_baselines(path)
    except BaselineError as exc:
        bad_path(str(exc))
    run = _one_run(log, test)
    kind = fabric or ""
    base = pick(baselines, run, node_group, kind)
    if base is None:
        known = ", ".join(f"{b.test}/{b.node_group or '-'}/{b.nodes}" for b in baselines)
        err.print(f"[red]error[/]: {escape(str(path))} has no baseline for {escape(run.test or 'this test')} on "
                  f"{run.nodes} node(s); "
                  f"known (test/node group/nodes): {escape(str(known))}")
        raise SystemExit(EXIT_BAD)
    result = compare(run, base, tol, kind)
    if fmt == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        for s in result.sizes:
            colour = "green" if s.ok else "red"
            kind = escape(f"{series_name(s.type, s.redop) or '-':<12} {s.half:<12}")
            out.print(f"  {size_name(s.size):>10} {kind} {s.band:<6} baseline {s.baseline_gbps:>8g} measured "
                      f"{s.measured_gbps:>8g} GB/s  [{colour}]{(-s.drop_pct if s.drop_pct else 0.0):+.2f}%[/] "
                      f"(tolerance {s.tolerance_pct:g}%)")
        for p in result.problems:
            out.print(f"[red]regression[/] {escape(p)}")
        out.print(("[green]pass[/]" if result.ok else "[red]FAIL[/]") + f": {run.test or base.test} vs baseline "
                  f"of {base.set} ({path})")
    if not result.ok:
        raise SystemExit(EXIT_WARN)
