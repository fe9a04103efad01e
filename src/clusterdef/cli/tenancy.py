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
    sub.add_argument("--dataset", metavar="NAME", default=None,
                     help="Who can read this dataset (a name in `datasets`) and from where, with the file "
                          "that grants it.")
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


def access(definition: Path, fmt: str, matrices: Optional[Path], today: Optional[str],
           dataset: Optional[str] = None) -> None:
    """Who can do what, per layer (nodes, Slurm, Kubernetes), and the rendered file that grants it.
    With --dataset NAME: who can read that dataset and from where (groups, node groups, namespaces).
    Exit 0, or 2 on bad input (an unknown dataset too)."""
    from .. import access as access_table
    from .. import datasets
    from ..resolve import resolve
    from ..validate.pipeline import validate_file

    d, matrix = valid(validate_file(definition, matrices, day(today)))
    if dataset is not None:
        if dataset not in d.datasets:
            err.print(f"{escape(str(definition))}: no dataset {escape(repr(dataset))} in `datasets`"
                      f" (defined: {escape(', '.join(d.datasets) or 'none')})")
            raise SystemExit(EXIT_BAD)
        answer = datasets.answer(d, dataset)
        if fmt == "json":
            sys.stdout.write(json.dumps(answer, indent=2, sort_keys=True) + "\n")
        else:
            sys.stdout.write(datasets.to_markdown(answer))
        return
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
