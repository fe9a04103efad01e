"""`clusterdef drift`: which nodes are off the validated set, from their facts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, add_definition, add_drain_prom, add_format, add_matrices, add_today, \
    add_verb, check_outputs, err, out, print_findings, today as day, valid, write_file


def add(verbs: Any) -> None:
    sub = add_verb(verbs, "drift", drift)
    add_definition(sub)
    sub.add_argument("--facts", type=Path, required=True, default=None, metavar="FACTS",
                     help="A facts JSON file (one node or a list) or a folder of them.")
    add_format(sub, help="Report format.")
    add_drain_prom(sub)
    add_matrices(sub)
    add_today(sub)


def drift(definition: Path, facts: Path, fmt: str, drain: Optional[Path], prom: Optional[Path],
          matrices: Optional[Path], today: Optional[str]) -> None:
    """Which nodes are off the validated set. Exit 0 all on-matrix, 1 when any node is off-matrix, 2 on bad
    input or facts that name none of the definition's hosts."""
    from .. import drift as dr
    from .. import hostlist
    from ..validate.pipeline import validate_file

    check_outputs(drain, prom)
    d, matrix = valid(validate_file(definition, matrices, day(today)))
    try:
        facts_list = dr.read_facts(facts)
    except dr.FactsError as exc:
        print_findings(exc.findings, {})
        raise SystemExit(EXIT_BAD)
    vs = matrix.sets[d.cluster.matrix]
    report = dr.compare(d, vs, facts_list)
    if not report.nodes:  # facts of another cluster, or none: "all on-matrix" would be a false all-clear
        seen = f"{len(report.strangers)} fact(s), for hosts such as {report.strangers[0]}" if report.strangers \
            else "no facts"
        err.print(f"[red]error[/] {escape(str(facts))}: {escape(seen)}; none names a host of {escape(str(definition))}")
        err.print("  hint: point --facts at this cluster's facts (collected by the gpu_facts role; "
                  "docs/facts-format.md)")
        raise SystemExit(EXIT_BAD)
    if drain:
        lines = dr.drain_lines(report, dr.spared_namespaces(d), d.upgrade.drain.timeout_minutes)
        write_file(drain, "".join(line + "\n" for line in lines))
    if prom:
        write_file(prom, dr.prometheus(report))
    if fmt == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        for n in report.off_matrix:
            out.print(f"[red]off-matrix[/] {escape(n.host)} ({escape(n.group)}, {escape(n.control_plane)}): "
                      + ", ".join(f"{escape(m.component)} {escape(m.actual)} (set {escape(vs.name)}: "
                                  f"{escape(m.expected)})" for m in n.off))
        for h in report.strangers:
            err.print(f"[yellow]warning[/] facts for {escape(str(h))}, which is not in {escape(str(definition))}")
        unknown = [n for n in report.nodes if n.unknown]
        if unknown:
            out.print(f"[yellow]{len(unknown)} node(s)[/] reported some versions as unknown (see --format json)")
        if report.missing:
            folded = hostlist.fold(report.missing)
            out.print(f"[yellow]without facts[/] ({len(report.missing)}): {escape(folded)}")
        out.print(f"{len(report.nodes)} node(s) checked against {escape(str(vs.name))}: "
                  f"{len(report.off_matrix)} off-matrix, {len(report.missing)} without facts")
    if report.off_matrix:
        raise SystemExit(EXIT_WARN)
