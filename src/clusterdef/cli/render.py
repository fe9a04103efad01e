"""`clusterdef render` (the rendered tree) and `clusterdef schema` (the definition's JSON Schema)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, add_definition, add_matrices, add_today, add_verb, err, out, report, today as day, \
    validated, write_file


def add(verbs: Any) -> None:
    sub = add_verb(verbs, "render", render)
    add_definition(sub)
    sub.add_argument("--output", "-o", type=Path, default=None, metavar="OUTPUT",
                     help="Output folder (default: out/<cluster name>).")
    sub.add_argument("--target", "-t", action="append", default=None, metavar="TARGET",
                     help="Render only these targets.")
    add_matrices(sub)
    add_today(sub)
    sub = add_verb(verbs, "schema", schema)
    sub.add_argument("--output", "-o", type=Path, default=None, metavar="OUTPUT",
                     help="Write to this file instead of stdout.")


def render(definition: Path, output: Optional[Path], target: Optional[list[str]], matrices: Optional[Path],
           today: Optional[str]) -> None:
    """Validate, then write the rendered tree atomically (with manifest and resolved definition)."""
    from ..build import build_tree
    from ..errors import DefinitionError
    from ..render import TARGETS
    from ..validate.pipeline import validate_file
    from ..writer import OutputError, write_tree

    unknown = [t for t in target or [] if t not in TARGETS]
    if unknown:
        err.print(f"[red]error[/]: unknown target(s) {escape(', '.join(unknown))}; known: {escape(', '.join(TARGETS))}")
        raise SystemExit(EXIT_BAD)
    result = validate_file(definition, matrices, day(today))
    report(result, "text", err)
    if not result.ok:
        err.print("[red]nothing written[/]: fix the errors above first")
        raise SystemExit(EXIT_BAD)
    d, _ = validated(result)
    try:
        tree, meta = build_tree(result, target)
    except DefinitionError as exc:
        report(type(result)(result.file, result.source, None, None, exc.findings), "text", err)
        err.print("[red]nothing written[/]")
        raise SystemExit(EXIT_BAD)
    dest = output or Path("out") / d.cluster.name
    try:
        write_tree(dest, tree, meta)
    except (OutputError, OSError) as exc:
        err.print(f"[red]error[/]: cannot write {escape(str(dest))}: {escape(str(exc))}")
        if "which this render does not write" not in str(exc):  # that message carries its own way out
            err.print("  [green]hint:[/] choose another --output, or remove the folder")
        raise SystemExit(EXIT_BAD)
    out.print(f"[green]rendered[/] {len(tree) + 1} files for cluster {escape(d.cluster.name)} into {escape(str(dest))}")


def schema(output: Optional[Path]) -> None:
    """Print the JSON Schema of the definition (for editors: yaml-language-server modeline)."""
    from ..schema import definition_schema

    text = json.dumps(definition_schema(), indent=2, sort_keys=True) + "\n"
    if output:
        write_file(output, text)
    else:
        sys.stdout.write(text)
