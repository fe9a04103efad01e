"""Present findings: rich text with the offending YAML line, or JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from ..errors import Finding, Severity
from ..source import Source

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def summary_line(findings: list[Finding]) -> str:
    e = sum(f.severity is Severity.ERROR for f in findings)
    w = sum(f.severity is Severity.WARNING for f in findings)
    return f"{e} error{'s' * (e != 1)}, {w} warning{'s' * (w != 1)}"


def print_text(console: Console, findings: list[Finding], sources: dict[str, Source]) -> None:
    for f in findings:
        console.print(f"[bold]{escape(f.where)}[/]: [{STYLE[f.severity]}]{f.severity.value}[/] "
                      f"[{STYLE[f.severity]}]{escape(f.code)}[/] at [cyan]{escape(f.dotted)}[/]")
        console.print(f"  {escape(f.message)}", soft_wrap=True)
        src = sources.get(f.file)
        text = src.line_text(f.line) if src and f.line else ""
        if text:
            console.print(f"  [dim]{f.line:>5} |[/] {escape(text)}", highlight=False, soft_wrap=True)
            if f.column:
                console.print(f"  [dim]      |[/] {' ' * (f.column - 1)}[{STYLE[f.severity]}]^[/]", highlight=False)
        if f.hint:
            console.print(f"  [green]hint:[/] {escape(f.hint)}", soft_wrap=True)


def to_json(file: str, findings: list[Finding], ok: bool) -> str:
    return json.dumps({
        "file": file,
        "ok": ok,
        "summary": summary_line(findings),
        "findings": [f.to_json() for f in findings],
    }, indent=2)
