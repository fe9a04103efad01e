"""`clusterdef validate`: check a definition and report its findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, add_definition, add_format, add_matrices, add_today, add_verb, out, report, \
    today as day, validated


def add(verbs: Any) -> None:
    sub = add_verb(verbs, "validate", validate)
    add_definition(sub)
    add_matrices(sub)
    add_format(sub, help="Output format.")
    sub.add_argument("--strict", action="store_true", default=False, help="Exit 1 when there are warnings.")
    add_today(sub)


def validate(definition: Path, matrices: Optional[Path], fmt: str, strict: bool, today: Optional[str]) -> None:
    """Check a definition. Exit 0 when clean, 1 on warnings with --strict, 2 on errors."""
    from ..validate.pipeline import validate_file

    result = validate_file(definition, matrices, day(today))
    report(result, fmt, out)  # the report is what validate is for: stdout (`validate DEF > report.txt`)
    if not result.ok:
        raise SystemExit(EXIT_BAD)
    d, _ = validated(result)
    if fmt == "text" and not result.findings:
        out.print(f"[green]ok[/] {escape(str(definition))}: cluster {escape(str(d.cluster.name))}, "
                  f"set {escape(str(d.cluster.matrix))}")
    if strict and result.warnings:
        raise SystemExit(EXIT_WARN)
