"""`clusterdef isolation` and `clusterdef access`: what the definition grants whom, and what enforces it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, TABLE_FORMATS, add_definition, add_format, add_matrices, add_today, \
    add_verb, err, out, report, today as day, valid


def add_isolation(verbs: Any) -> None:
    sub = add_verb(verbs, "isolation", isolation)
    add_definition(sub)
    add_format(sub, TABLE_FORMATS, help="Report format.")
    add_matrices(sub)
    add_today(sub)


def add_access(verbs: Any) -> None:
    sub = add_verb(verbs, "access", access)
    add_definition(sub)
    add_format(sub, TABLE_FORMATS, help="Report format.")
    add_matrices(sub)
    add_today(sub)


def isolation(definition: Path, fmt: str, matrices: Optional[Path], today: Optional[str]) -> None:
    """Per tenant and layer: the isolation claimed, the mechanism that enforces it and the rendered file.
    Exit 0 when every claim is enforced, 1 when one is not, 2 on bad input."""
    from .. import tenancy
    from ..validate.pipeline import validate_file

    result = validate_file(definition, matrices, day(today))
    if result.definition is None:
        report(result, "text", err)
        raise SystemExit(EXIT_BAD)
    table = tenancy.enforcement(result.definition)
    if fmt == "json":
        sys.stdout.write(json.dumps(tenancy.to_json(table), indent=2, sort_keys=True) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(tenancy.to_markdown(table))
    else:
        for name, te in table.items():
            out.print(f"[bold]{escape(name)}[/] ({te.level})")
            for layer, lay in te.layers.items():
                mark = "[red]NOT ENFORCED[/]" if lay.shortfall else "[green]enforced[/]" if lay.mechanisms else "-"
                out.print(f"  {layer:<12} {escape(lay.claim):<22} {mark}")
                for m in lay.mechanisms:
                    out.print(f"      {escape(m)}")
                if lay.files:
                    out.print(f"      files: {escape(', '.join(lay.files))}")
                if lay.shortfall:
                    out.print(f"      [red]gap[/]: {escape(lay.shortfall)}")
    if any(te.gaps for te in table.values()):
        raise SystemExit(EXIT_WARN)


def access(definition: Path, fmt: str, matrices: Optional[Path], today: Optional[str]) -> None:
    """Who can do what, per layer (nodes, Slurm, Kubernetes), and the rendered file that grants it.
    Exit 0, or 2 on bad input."""
    from .. import access as access_table
    from ..resolve import resolve
    from ..validate.pipeline import validate_file

    d, matrix = valid(validate_file(definition, matrices, day(today)))
    grants = access_table.table(resolve(d, matrix, definition.parent))
    if fmt == "json":
        sys.stdout.write(json.dumps(access_table.to_json(grants), indent=2, sort_keys=True) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(access_table.to_markdown(grants))
    else:
        for g in grants:
            out.print(f"[bold]{escape(g.who)}[/] {g.layer}")
            for c in g.can:
                out.print(f"    {escape(c)}")
            if g.files:
                out.print(f"    files: {escape(', '.join(g.files))}")
