"""`clusterdef plan`: the reviewed change from one definition to another (or the day-0 bring-up)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, add_format, instant, add_matrices, add_today, add_verb, check_outputs, err, out, \
    print_findings, today as day, write_file

PLAN_FORMATS = ("text", "markdown", "json")


def add(verbs: Any) -> None:
    sub = add_verb(verbs, "plan", plan)
    sub.add_argument("--to", type=Path, required=True, default=None, metavar="TO", help="The new definition (YAML).")
    sub.add_argument("--from", dest="from_", type=Path, default=None, metavar="FROM",
                     help="The old definition (YAML).")
    sub.add_argument("--base", default=None, metavar="BASE",
                     help="Compare with the --to file as it is at this git ref (e.g. origin/main) instead of --from.")
    add_format(sub, PLAN_FORMATS, help="text, markdown (PR comment) or json.")
    sub.add_argument("--plan-file", "-o", type=Path, default=None, metavar="PLAN_FILE",
                     help="Write the plan file (JSON with the hashes of both definitions and rendered trees) here.")
    sub.add_argument("--allow-candidate", action="store_true", default=False,
                     help="Allow a candidate target set; the plan then covers the canary stage only.")
    add_matrices(sub)
    add_today(sub)
    sub.add_argument("--start", default=None, metavar="START",
                     help="When the rollout starts, ISO 8601 with a zone (2026-12-08T07:00+01:00), to lay the stages "
                          "out in the maintenance windows (default: the first window opening of --today).")


def start_time(value: Optional[str]):
    """--start: an ISO 8601 instant with its zone (a bare local time would be read in the machine's zone)."""
    return instant("--start", value)


def plan(to: Path, from_: Optional[Path], base: Optional[str], fmt: str, plan_file: Optional[Path],
         allow_candidate: bool, matrices: Optional[Path], today: Optional[str], start: Optional[str]) -> None:
    """Plan the change from one definition to another: set change, compatibility, disruption, rollout, file
    diffs; with neither --from nor --base, the bring-up plan of a new cluster (day 0). Exit 0 with a plan, 2 when
    refused or on bad input."""
    from ..plan import FROM_SIDE_IGNORED, PlanInputError, base_side, load_side, make_plan
    from ..plan.formats import to_json, to_markdown, to_text
    from ..plan.planfile import seal

    if from_ is not None and base is not None:
        err.print("[red]error[/]: give at most one of --from OLD.yaml or --base GIT_REF (neither: a bring-up plan)")
        raise SystemExit(EXIT_BAD)
    check_outputs(plan_file)
    when = day(today)
    begin = start_time(start)
    try:
        if from_ is None and base is None:  # day 0: the bring-up plan of a new cluster
            from ..plan.bringup import make_bringup

            p = make_bringup(load_side(to, matrices, when))
        else:
            # a candidate target is the plan's decision (refused without --allow-candidate), not a definition error
            new = load_side(to, matrices, when, {"matrix-candidate"})
            if base is not None:  # --base "" is refused there, not ignored
                old = base_side(base, to, matrices, when)
            else:
                assert from_ is not None  # one of them, checked above
                old = load_side(from_, matrices, when, FROM_SIDE_IGNORED)
            p = make_plan(old, new, allow_candidate, begin)  # image identity across the two sides: located errors
    except PlanInputError as exc:
        print_findings(exc.findings, exc.sources)
        err.print("[red]no plan[/]: fix the definition errors above first")
        raise SystemExit(EXIT_BAD)
    if fmt == "json":
        sys.stdout.write(to_json(p.doc))
    elif fmt == "markdown":
        sys.stdout.write(to_markdown(p.doc))
    else:
        out.print(to_text(p.doc))
    if p.refused:
        for r in p.refusals:
            err.print(f"[red]refused[/] {escape(str(r.code))}: {escape(str(r.message))}  "
                      f"[green]hint:[/] {escape(str(r.hint))}")
        raise SystemExit(EXIT_BAD)
    if plan_file:
        write_file(plan_file, to_json(seal(p.doc)))  # sealed: apply checks the whole document
        err.print(f"plan file written to {escape(str(plan_file))}")
