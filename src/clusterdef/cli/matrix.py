"""`clusterdef matrix list|show`: the validated version sets."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.console import Console
from rich.markup import escape

from .common import EXIT_BAD, add_format, add_group, add_matrices, add_today, add_verb, err, load_matrix, out, \
    today as day

HELP = "Validated version sets."


def add(verbs: Any) -> None:
    group = add_group(verbs, "matrix", HELP)
    sub = add_verb(group, "list", matrix_list)
    add_matrices(sub)
    add_today(sub)
    add_format(sub)
    sub = add_verb(group, "show", matrix_show)
    sub.add_argument("name", help="Set name.", metavar="NAME")
    add_matrices(sub)
    add_today(sub)
    add_format(sub)


def matrix_list(matrices: Optional[Path], today: Optional[str], fmt: str) -> None:
    """List validated sets, their status, versions and consistency."""

    from ..matrix.checks import check_set

    m = load_matrix(matrices)
    when = day(today)
    rows = []
    for _, vs in sorted(m.sets.items()):
        problems = check_set(vs, m.compat, when)
        rows.append((vs, problems))
    if fmt == "json":
        sys.stdout.write(json.dumps([{"name": vs.name, "status": vs.status, "from": m.origins[vs.name],
                                      "file": str(m.set_files[vs.name]),
                                      "components": vs.components.model_dump(exclude_none=True),
                                      "problems": [p._asdict() | {"severity": p.severity.value} for p in probs]}
                                     for vs, probs in rows], indent=2) + "\n")
        return
    colour = {"validated": "green", "candidate": "yellow", "retired": "dim"}
    body = []
    for vs, probs in rows:
        c = vs.components
        checks = "[green]ok[/]" if not probs else "[red]" + escape(", ".join(p.code for p in probs)) + "[/]"
        body.append([escape(vs.name), f"[{colour[vs.status]}]{vs.status}[/]"]
                    + [escape(str(v)) for v in (c.driver, c.cuda, c.nccl, c.container_toolkit, c.gpu_operator,
                                                c.kubernetes, c.slurm)] + [checks, m.origins[vs.name]])
    print_table(out, "validated sets in " + escape("; ".join(f"{o}: {p}" for o, p in m.folders.items())),
                ["set", "status", "driver", "CUDA", "NCCL", "toolkit", "GPU Operator", "Kubernetes", "Slurm",
                 "checks", "from"], body)


def print_table(console: Console, title: str, headers: list[str], rows: list[list[str]]) -> None:
    """A table (cells are rich markup, data already escaped) when it fits the console's width;
    otherwise one record per row, `first cell  header value, header value, ...`, wrapped at
    word boundaries, so nothing is cut to `2025…` when piped or in an 80-column CI log."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    widths = [max([len(h)] + [Text.from_markup(r[i]).cell_len for r in rows]) for i, h in enumerate(headers)]
    if sum(widths) + 3 * len(widths) + 1 <= console.width:
        table = Table(title=title, box=box.SIMPLE_HEAD)
        for h in headers:
            table.add_column(h, no_wrap=True)
        for r in rows:
            table.add_row(*r)
        console.print(table)
        return
    console.print(title)
    for r in rows:
        console.print(f"[bold]{r[0]}[/]  " + ", ".join(f"{escape(h)} {v}" for h, v in zip(headers[1:], r[1:])),
                      soft_wrap=False, overflow="fold")


def matrix_show(name: str, matrices: Optional[Path], today: Optional[str], fmt: str) -> None:
    """Show one set: every component, firmware per platform, provenance and its checks."""
    from difflib import get_close_matches

    from ..matrix.checks import check_set

    m = load_matrix(matrices)
    vs = m.sets.get(name)
    if vs is None:
        close = get_close_matches(name, list(m.sets), n=1)
        err.print(f"[red]error[/]: no set named {escape(repr(name))}"
                  + (f"; did you mean {escape(repr(close[0]))}?" if close else ""))
        raise SystemExit(EXIT_BAD)
    problems = check_set(vs, m.compat, day(today))
    if fmt == "json":
        sys.stdout.write(json.dumps({**vs.model_dump(mode="json"), "file": str(m.set_files[name]),
                                     "problems": [p.message for p in problems]}, indent=2) + "\n")
        return
    out.print(f"[bold]{escape(str(vs.name))}[/] ({escape(str(vs.status))}) {escape(str(vs.summary))}")
    out.print(f"file: {escape(str(m.set_files[name]))} ({m.origins[name]})")
    for k, v in vs.components.model_dump(exclude_none=True).items():
        out.print(f"  {k:<18} {escape(str(v))}")
    for platform, pins in sorted(vs.firmware.items()):
        out.print(f"  firmware {escape(str(platform))}: "
                  + ", ".join(f"{escape(str(c))}={escape(str(v))}" for c, v in sorted(pins.items())))
    if vs.baseline:
        out.print(f"  baseline: {escape(str(vs.baseline))}")
    for src in vs.provenance.sources:
        out.print(f"  source: {escape(str(src))}")
    for p in problems:
        out.print(f"  [red]{escape(str(p.severity.value))}[/] {escape(str(p.code))}: {escape(str(p.message))} "
                  f"[green]hint:[/] {escape(str(p.hint))}")
    if problems and any(p.severity.value == "error" for p in problems):
        raise SystemExit(EXIT_BAD)
