"""`clusterdef fabric check`: the as-built InfiniBand cabling against the definition."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, add_definition, add_drain_prom, add_format, add_group, add_matrices, \
    add_today, add_verb, bad_path, check_outputs, out, print_findings, today as day, valid, write_file

HELP = "InfiniBand fabric: the as-built cabling against the definition."


def add(verbs: Any) -> None:
    group = add_group(verbs, "fabric", HELP)
    sub = add_verb(group, "check", fabric_check)
    add_definition(sub)
    sub.add_argument("--ibnetdiscover", type=Path, required=True, default=None, metavar="IBNETDISCOVER",
                     help="Output of `ibnetdiscover` (default format).")
    sub.add_argument("--fabric", default=None, metavar="FABRIC",
                     help="Fabric name (default: the only InfiniBand fabric).")
    add_format(sub, help="Report format.")
    add_drain_prom(sub)
    add_matrices(sub)
    add_today(sub)


def fabric_check(definition: Path, ibnetdiscover: Path, fabric: Optional[str], fmt: str, drain: Optional[Path],
                 prom: Optional[Path], matrices: Optional[Path], today: Optional[str]) -> None:
    """Hosts cabled to the wrong leaf, missing and degraded links, nodes the definition does not know.
    Exit 0 when the fabric is as declared, 1 when anything is off, 2 on bad input."""
    from ..fabric import check as fc
    from ..fabric.layout import FabricError, layout
    from ..limits import InputError
    from ..validate.pipeline import validate_file

    check_outputs(drain, prom)
    d, _ = valid(validate_file(definition, matrices, day(today)))
    try:
        lay = layout(d, fabric)
    except FabricError as exc:
        bad_path(str(exc))
    try:
        topo = fc.read(ibnetdiscover)
    except InputError as exc:
        print_findings(exc.findings, {})
        raise SystemExit(EXIT_BAD)
    report = fc.compare(lay, topo)
    if drain:
        write_file(drain, "".join(line + "\n" for line in fc.drain_lines(report)))
    if prom:
        write_file(prom, fc.prometheus(report))
    if fmt == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        for i in report.issues:
            out.print(f"[red]{i.kind}[/] {escape(i.text()[len(i.kind) + 1:])}")
        out.print(f"fabric {escape(report.fabric)}: {report.links_checked} link(s) checked, "
                  f"{len(report.issues)} issue(s)")
    if report.issues:
        raise SystemExit(EXIT_WARN)
