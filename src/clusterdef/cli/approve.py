"""`clusterdef approve`: record an approval in a reviewed plan file (plan/approvals.py, docs/service.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, add_verb, err, instant, out, write_file


def add(verbs: Any) -> None:
    sub = add_verb(verbs, "approve", approve)
    sub.add_argument("plan_file", help="Plan file written by `clusterdef plan --plan-file`.", type=Path,
                     metavar="PLAN_FILE")
    sub.add_argument("--group", required=True, metavar="GROUP",
                     help="The directory group the approval is given for (one the plan names for what it covers).")
    sub.add_argument("--by", required=True, metavar="WHO", help="Who approves: a user name or mail address.")
    sub.add_argument("--why", required=True, metavar="TEXT", help="Why, one line (at most 500 characters).")
    what = sub.add_mutually_exclusive_group(required=True)
    what.add_argument("--stage", default=None, metavar="STAGE",
                      help="Approve running this stage outside its maintenance window.")
    what.add_argument("--class", dest="class_", default=None, metavar="CLASS",
                      help="Approve the plan's changes of this disruption class (reflash, reboot, driver-reload, "
                           "restart, live: a key of service.approvers).")
    what.add_argument("--change", default=None, metavar="KIND:SUBJECT",
                      help="Approve a change the plan lists as needing an approver (e.g. "
                           "service.maintenance_windows:gpu).")
    sub.add_argument("--now", default=None, metavar="NOW",
                     help="When the approval is given, ISO 8601 with a zone (default: the real time).")


def approve(plan_file: Path, group: str, by: str, why: str, stage: Optional[str], class_: Optional[str],
            change: Optional[str], now: Optional[str]) -> None:
    """Record an approval in a plan file: who, for which directory group, when, why, and what it covers (a stage
    run outside its maintenance window, a disruption class, or a change needing an approver). The plan's seal
    (plan_sha256) is unchanged; the approval names it, so it counts for this plan only. Exit 0 recorded, 2 refused
    (nothing written)."""
    from datetime import datetime, timezone

    from ..apply import ApplyError
    from ..apply.prepare import read_plan_file
    from ..plan.approvals import ApprovalError, new_record, show
    from ..plan.formats import to_json
    from ..plan.planfile import RECORDS
    from ..writer import updating

    at = instant("--now", now) or datetime.now(timezone.utc)
    if change is not None:
        kind, sep, subject = change.partition(":")
        covers: dict = {"change": {"kind": kind, "subject": subject}} if sep else {}
    else:
        covers = {"stage": stage} if stage is not None else {"class": class_}
    with updating(plan_file):  # two approvers at once: the second reads the first's record, and adds its own
        try:
            if not covers:
                raise ApprovalError([f"--change {show(change, 40)}: use KIND:SUBJECT as the plan lists it"])
            doc = read_plan_file(plan_file)
            rec = new_record(doc, group, by, why, covers, at)
        except (ApplyError, ApprovalError) as exc:
            for reason in exc.reasons:
                err.print(f"[red]refused[/]: {escape(reason)}")
            if exc.hint:
                err.print(f"  [green]hint:[/] {escape(exc.hint)}")
            raise SystemExit(EXIT_BAD)
        doc[RECORDS] = [*(doc.get(RECORDS) or []), rec]
        write_file(plan_file, to_json(doc))  # as `plan --plan-file` writes it; exit 2 naming the file otherwise
    # who and why are the approver's words: shown quoted and escaped, never as markup or terminal codes
    out.print(f"[green]approved[/] {escape(rec['at'])}: {escape(show(rec['by'], 40))} for {escape(rec['group'])}: "
              f"{escape(_what(covers))}, because {escape(show(rec['why'], 120))}")


def _what(covers: dict) -> str:
    from ..plan.approvals import covered

    return covered(covers)
