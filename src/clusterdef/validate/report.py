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


EXCERPT_WIDTH = 100  # source excerpts longer than this are cut around the column
MAX_ITEMS = 20  # items listed under a grouped finding; the JSON report lists every finding


def excerpt(text: str, column: int, width: int = EXCERPT_WIDTH) -> tuple[str, int]:
    """`text` cut to about `width` characters around `column` (1-based; 0 = the start), with `…` where
    it was cut, and the column of the same character in the cut text."""
    text = text.expandtabs(1)
    if len(text) <= width:
        return text, column
    col = max(column, 1)
    start = max(0, min(col - 1 - width // 3, len(text) - width))
    end = start + width
    out = ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
    return out, (col - start + (1 if start else 0)) if column else 0


def group(findings: list[Finding]) -> list[list[Finding]]:
    """Findings with the same file, code, severity and hint (the same cause, e.g. 32 upper-case MACs)
    as one group each, in order of their first member."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.file, f.code, f.severity, f.hint), []).append(f)
    return list(groups.values())


def print_text(console: Console, findings: list[Finding], sources: dict[str, Source]) -> None:
    """One entry per group of findings with the same code and cause: the first finding with its
    source line and hint, then the others as a list (`file:line:col: message`)."""
    for members in group(findings):
        f = members[0]
        more = f" (and {len(members) - 1} more like it)" if len(members) > 1 else ""
        console.print(f"[bold]{escape(f.where)}[/]: [{STYLE[f.severity]}]{f.severity.value}[/] "
                      f"[{STYLE[f.severity]}]{escape(f.code)}[/] at [cyan]{escape(f.dotted)}[/]{more}")
        console.print(f"  {escape(f.message)}", soft_wrap=True)
        src = sources.get(f.file)
        text = src.line_text(f.line) if src and f.line else ""
        if text:
            cut, col = excerpt(text, f.column)
            console.print(f"  [dim]{f.line:>5} |[/] {escape(cut)}", highlight=False, soft_wrap=True)
            if col:
                console.print(f"  [dim]      |[/] {' ' * (col - 1)}[{STYLE[f.severity]}]^[/]", highlight=False)
        for other in members[1:MAX_ITEMS + 1]:
            console.print(f"  - [bold]{escape(other.where)}[/]: {escape(other.message)}", highlight=False,
                          soft_wrap=True)
        if len(members) > MAX_ITEMS + 1:
            console.print(f"  - ... {len(members) - MAX_ITEMS - 1} more (--format json lists every finding)")
        if f.hint:
            console.print(f"  [green]hint:[/] {escape(f.hint)}", soft_wrap=True)


def to_json(file: str, findings: list[Finding], ok: bool) -> str:
    return json.dumps({
        "file": file,
        "ok": ok,
        "summary": summary_line(findings),
        "findings": [f.to_json() for f in findings],
    }, indent=2)
