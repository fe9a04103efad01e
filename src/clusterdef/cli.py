"""Command line: one thin function per verb. Only this module prints."""

from __future__ import annotations

import json
import sys
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Validate a GPU cluster definition and compile it into everything that builds the cluster.")
matrix_app = typer.Typer(no_args_is_help=True, help="Validated version sets.")
app.add_typer(matrix_app, name="matrix")

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

EXIT_OK, EXIT_WARN, EXIT_BAD = 0, 1, 2


class Format(str, Enum):
    text = "text"
    json = "json"


MatricesOpt = typer.Option(None, "--matrices", "-m", help="Folder with sets/ and compat/ (default: nearest matrices/ "
                           "beside or above the definition, or $CLUSTERDEF_MATRICES).")
TodayOpt = typer.Option(None, "--today", help="Date for lifecycle checks, YYYY-MM-DD (default: today).",
                        metavar="DATE")


def _today(value: Optional[str]) -> date:
    if not value:
        return date.today()
    try:
        return date.fromisoformat(value)
    except ValueError:
        err.print(f"[red]error[/]: --today {value!r} is not a date; use YYYY-MM-DD")
        raise typer.Exit(EXIT_BAD)


def _report(result, fmt: Format, console: Console) -> None:
    from .validate.report import print_text, summary_line, to_json

    if fmt is Format.json:
        sys.stdout.write(to_json(result.file, result.findings, result.ok) + "\n")
        return
    print_text(console, result.findings, {result.file: result.source} if result.source else {})
    if result.findings:
        console.print(f"{result.file}: {summary_line(result.findings)}")


@app.command()
def validate(
    definition: Path = typer.Argument(..., help="Cluster definition (YAML)."),
    matrices: Optional[Path] = MatricesOpt,
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when there are warnings."),
    today: Optional[str] = TodayOpt,
) -> None:
    """Check a definition. Exit 0 when clean, 1 on warnings with --strict, 2 on errors."""
    from .validate.pipeline import validate_file

    result = validate_file(definition, matrices, _today(today))
    _report(result, fmt, out if fmt is Format.json else err)
    if not result.ok:
        raise typer.Exit(EXIT_BAD)
    if fmt is Format.text and not result.findings:
        out.print(f"[green]ok[/] {definition}: cluster {result.definition.cluster.name}, "
                  f"set {result.definition.cluster.matrix}")
    if strict and result.warnings:
        raise typer.Exit(EXIT_WARN)


@app.command()
def render(
    definition: Path = typer.Argument(..., help="Cluster definition (YAML)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output folder (default: out/<cluster name>)."),
    target: Optional[list[str]] = typer.Option(None, "--target", "-t", help="Render only these targets."),
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Validate, then write the rendered tree atomically (with manifest and resolved definition)."""
    from .build import build_tree
    from .render import TARGETS
    from .validate.pipeline import validate_file
    from .writer import OutputError, write_tree

    unknown = [t for t in target or [] if t not in TARGETS]
    if unknown:
        err.print(f"[red]error[/]: unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
        raise typer.Exit(EXIT_BAD)
    result = validate_file(definition, matrices, _today(today))
    _report(result, Format.text, err)
    if not result.ok:
        err.print("[red]nothing written[/]: fix the errors above first")
        raise typer.Exit(EXIT_BAD)
    d = result.definition
    tree, meta = build_tree(result, target)
    dest = output or Path("out") / d.cluster.name
    try:
        write_tree(dest, tree, meta)
    except (OutputError, OSError) as exc:
        err.print(f"[red]error[/]: cannot write {dest}: {exc}")
        err.print("  [green]hint:[/] choose another --output, or remove the folder")
        raise typer.Exit(EXIT_BAD)
    out.print(f"[green]rendered[/] {len(tree) + 1} files for cluster {d.cluster.name} into {dest}")


@app.command()
def schema(
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
) -> None:
    """Print the JSON Schema of the definition (for editors: yaml-language-server modeline)."""
    from .schema import definition_schema

    text = json.dumps(definition_schema(), indent=2, sort_keys=True) + "\n"
    if output:
        from .writer import write_file_atomic
        write_file_atomic(output, text)
    else:
        sys.stdout.write(text)


def _load_matrix(matrices: Optional[Path]):
    from .matrix.load import find_matrices, load_matrix
    from .validate.report import print_text

    root = matrices or find_matrices(None)
    if root is None or not (Path(root) / "sets").is_dir():
        err.print("[red]error[/]: no matrices folder found; pass --matrices DIR or set CLUSTERDEF_MATRICES")
        raise typer.Exit(EXIT_BAD)
    matrix, findings = load_matrix(root)
    if findings:
        print_text(err, findings, {})
        raise typer.Exit(EXIT_BAD)
    return matrix


@matrix_app.command("list")
def matrix_list(matrices: Optional[Path] = MatricesOpt, today: Optional[str] = TodayOpt,
                fmt: Format = typer.Option(Format.text, "--format", "-f")) -> None:
    """List validated sets, their status, versions and consistency."""
    from rich.table import Table

    from .matrix.checks import check_set

    m = _load_matrix(matrices)
    day = _today(today)
    rows = []
    for name, vs in sorted(m.sets.items()):
        problems = check_set(vs, m.compat, day)
        rows.append((vs, problems))
    if fmt is Format.json:
        sys.stdout.write(json.dumps([{"name": vs.name, "status": vs.status,
                                      "components": vs.components.model_dump(exclude_none=True),
                                      "problems": [p._asdict() | {"severity": p.severity.value} for p in probs]}
                                     for vs, probs in rows], indent=2) + "\n")
        return
    table = Table(title=f"validated sets in {m.root}")
    for col in ("set", "status", "driver", "CUDA", "NCCL", "toolkit", "GPU Operator", "Kubernetes", "Slurm", "checks"):
        table.add_column(col)
    colour = {"validated": "green", "candidate": "yellow", "retired": "dim"}
    for vs, probs in rows:
        c = vs.components
        checks = "[green]ok[/]" if not probs else "[red]" + ", ".join(p.code for p in probs) + "[/]"
        table.add_row(vs.name, f"[{colour[vs.status]}]{vs.status}[/]", c.driver, c.cuda, c.nccl,
                      c.container_toolkit, c.gpu_operator, c.kubernetes, c.slurm, checks)
    out.print(table)


@matrix_app.command("show")
def matrix_show(name: str = typer.Argument(..., help="Set name."), matrices: Optional[Path] = MatricesOpt,
                today: Optional[str] = TodayOpt,
                fmt: Format = typer.Option(Format.text, "--format", "-f")) -> None:
    """Show one set: every component, firmware per platform, provenance and its checks."""
    from difflib import get_close_matches

    from .matrix.checks import check_set

    m = _load_matrix(matrices)
    vs = m.sets.get(name)
    if vs is None:
        close = get_close_matches(name, list(m.sets), n=1)
        err.print(f"[red]error[/]: no set named {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
        raise typer.Exit(EXIT_BAD)
    problems = check_set(vs, m.compat, _today(today))
    if fmt is Format.json:
        sys.stdout.write(json.dumps({**vs.model_dump(mode="json"), "file": str(m.set_files[name]),
                                     "problems": [p.message for p in problems]}, indent=2) + "\n")
        return
    out.print(f"[bold]{vs.name}[/] ({vs.status}) {vs.summary}")
    out.print(f"file: {m.set_files[name]}")
    for k, v in vs.components.model_dump(exclude_none=True).items():
        out.print(f"  {k:<18} {v}")
    for platform, pins in sorted(vs.firmware.items()):
        out.print(f"  firmware {platform}: " + ", ".join(f"{c}={v}" for c, v in sorted(pins.items())))
    if vs.baseline:
        out.print(f"  baseline: {vs.baseline}")
    for src in vs.provenance.sources:
        out.print(f"  source: {src}")
    for p in problems:
        out.print(f"  [red]{p.severity.value}[/] {p.code}: {p.message} [green]hint:[/] {p.hint}")
    if problems and any(p.severity.value == "error" for p in problems):
        raise typer.Exit(EXIT_BAD)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
