"""Recorded approvals in a plan file (`clusterdef approve`, docs/service.md#recorded-approvals).

An approval is a record in the plan file's `approval_records` list: who (`by`), for which directory group
(`group`), when (`at`, UTC), why (`why`) and what it covers: one stage run outside its maintenance window
(`{"stage": NAME}`), one disruption class of the plan (`{"class": "reboot"}`, a key of `service.approvers`)
or one change needing an approver (`{"change": {"kind", "subject"}}`, plan/audit.py). The seal
(`plan_sha256`) leaves the list out, so recording an approval does not change what was reviewed; each
record carries the seal it approves (`plan_sha256`), so a record copied into another plan names another
plan and is refused. The records are claims of whoever can write the file: no signature vouches for `by`.

Which groups may approve what comes from the sealed plan alone:
- a class: the groups `approvals` lists for it (service.approvers);
- a stage: the groups of the stage's class (the control-plane stage restarts daemons: `restart`; a stage
  that takes nodes out of service: the plan's worst drain class, else its worst class), else, when
  `service.approvers` names none for that class, the groups of the plan's worst class that names some;
- a change: the groups its entries in `changes_needing_approval` name.
Pure: the clock is passed in."""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timezone

from .audit import by_change
from .planfile import HASH_FIELD, RECORDS
from .transition import LIVE, NONE, ORDER, REBOOT, REFLASH, RELOAD, RESTART

CLASS_KEYS = {"reflash": REFLASH, "reboot": REBOOT, "driver-reload": RELOAD, "restart": RESTART, "live": LIVE}
NODE_KINDS = ("canary", "rollback-drill", "wave", "driver-pool")  # as plan/windows.NODES
CLUSTER_KINDS = ("control-plane",)
WHO = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@+-]{0,127}")  # a directory user name or mail address
WHY_MAX = 500
MAX_RECORDS = 256


class ApprovalError(ValueError):
    """Why an approval cannot be recorded (one line each)."""

    def __init__(self, reasons: list[str], hint: str = ""):
        super().__init__("; ".join(reasons))
        self.reasons, self.hint = reasons, hint


def show(value, limit: int = 60) -> str:
    """A hostile value for a message: a quoted string with control characters escaped, cut short."""
    from .planfile import _show

    return _show(value, limit)


def _stage(doc: dict, name: str) -> dict | None:
    return next((s for s in doc["rollout"]["stages"] if s.get("name") == name), None)


def stage_class(doc: dict, stage: dict) -> str | None:
    """The disruption class a stage runs (None: it changes nothing running, no window needed)."""
    if stage.get("kind") in CLUSTER_KINDS:
        return RESTART
    if stage.get("kind") not in NODE_KINDS:
        return None
    classes = [c for c in ORDER if c in doc.get("disruption", {}) and c != NONE]
    return next((c for c in classes if c in (REFLASH, REBOOT, RELOAD)), classes[0] if classes else REBOOT)


def stage_groups(doc: dict, stage: dict) -> tuple[str | None, list[str]]:
    """(class, the groups that may approve running the stage outside its window)."""
    cls = stage_class(doc, stage)
    listed = doc.get("approvals") or {}
    if cls is None:
        return None, []
    if cls in listed:
        return cls, list(listed[cls])
    worst = next((c for c in ORDER if c in listed), None)
    return cls, list(listed[worst]) if worst else []


def eligible(doc: dict, covers: dict) -> tuple[list[str], str]:
    """(groups that may give this approval, why none may: "" when some may) from the sealed plan."""
    if "stage" in covers:
        st = _stage(doc, covers["stage"])
        if st is None:
            return [], f"the plan has no stage {show(covers['stage'])}"
        cls, groups = stage_groups(doc, st)
        if cls is None:
            return [], f"stage {show(st['name'])} changes nothing running: it needs no window and no approval"
        return groups, "" if groups else f"service.approvers names no group for the plan's classes ({cls})"
    if "class" in covers:
        cls = CLASS_KEYS.get(covers["class"])
        if cls is None or cls not in doc.get("disruption", {}):
            return [], f"the plan has no change of class {show(covers['class'])}"
        groups = list((doc.get("approvals") or {}).get(cls, []))
        return groups, "" if groups else f"service.approvers names no group for {covers['class']}"
    ch = covers.get("change") or {}
    key = (str(ch.get("kind", "")), str(ch.get("subject", "")))
    entries = by_change(doc.get("changes_needing_approval") or []).get(key, [])
    if not entries:
        return [], f"the plan lists no change needing approval {show(ch.get('kind'))} {show(ch.get('subject'))}"
    groups = [e["group"] for e in entries if e["group"]]
    return groups, "" if groups else "nobody is named to approve it (service.approvers, identity.admin_groups)"


def covered(covers: dict) -> str:
    """What a record covers, for a message."""
    if "stage" in covers:
        return f"stage {show(covers['stage'])} outside its window"
    if "class" in covers:
        return f"{show(covers['class'])} changes"
    ch = covers.get("change") or {}
    return f"change {show(ch.get('kind'))} {show(ch.get('subject'))}"


def record_problems(doc: dict, records: list[dict]) -> list[str]:
    """Why the file's approval records cannot be used with this plan (its structure is the schema's)."""
    out = []
    for i, r in enumerate(records):
        where = f"{RECORDS}[{i}] ({covered(r['covers'])} by {show(r['by'], 40)})"
        if r["plan_sha256"] != doc.get(HASH_FIELD):
            out.append(f"{where}: recorded for another plan (plan_sha256 {show(r['plan_sha256'][:12])}), not this "
                       f"one ({doc.get(HASH_FIELD, '')[:12]}): an approval covers only the plan it was given for")
            continue
        groups, why = eligible(doc, r["covers"])
        if r["group"] not in groups:
            out.append(f"{where}: group {show(r['group'], 40)} may not approve it"
                       + (f" ({why})" if why else f" (the plan names {', '.join(groups)})"))
    return out


def new_record(doc: dict, group: str, by: str, why: str, covers: dict, at: datetime) -> dict:
    """A record for the plan `doc` (sealed, untouched), its inputs checked; ApprovalError otherwise."""
    problems = []
    if not WHO.fullmatch(by or ""):
        problems.append(f"--by {show(by, 40)}: a user name or mail address of letters, digits and . _ @ + - "
                        "(at most 128)")
    text = why or ""
    if not text.strip() or len(text) > WHY_MAX or any(ord(c) < 32 or ord(c) == 127 for c in text):
        problems.append(f"--why {show(text, 40)}: one line of 1 to {WHY_MAX} printable characters")
    if doc.get(HASH_FIELD) is None:
        problems.append("the plan file has no plan_sha256")
    else:
        from .planfile import plan_hash

        if doc[HASH_FIELD] != plan_hash(doc):
            problems.append("plan_sha256 does not match the plan document: it was edited after `clusterdef plan` "
                            "wrote it, so it is not the plan that was reviewed")
    groups, reason = eligible(doc, covers)
    if reason:
        problems.append(f"{covered(covers)}: {reason}")
    elif group not in groups:
        problems.append(f"--group {show(group, 40)} may not approve {covered(covers)}: the plan names "
                        f"{', '.join(groups)}")
    if len(doc.get(RECORDS) or []) >= MAX_RECORDS:
        problems.append(f"the plan file already holds {MAX_RECORDS} approvals")
    if problems:
        raise ApprovalError(problems, "approve the plan file `clusterdef plan --plan-file` wrote, for what it lists")
    rec = {"group": group, "by": by, "at": at.astimezone(timezone.utc).isoformat(timespec="seconds")
           .replace("+00:00", "Z"), "why": text, "covers": covers, "plan_sha256": doc[HASH_FIELD]}
    same = [r for r in doc.get(RECORDS) or [] if {**r, "at": "", "why": ""} == {**rec, "at": "", "why": ""}]
    if same:
        raise ApprovalError([f"{show(by, 40)} already approved {covered(covers)} for {group} (at {same[0]['at']})"])
    return rec


def by_group(records: list[dict], covers: dict, groups: list[str]) -> dict | None:
    """The first record covering `covers` by one of `groups`."""
    return next((r for r in records if r["covers"] == covers and r["group"] in groups), None)


def required(doc: dict, records: list[dict]) -> tuple[list[dict], list[str]]:
    """(the records that give the plan's required approvals, one line per required approval missing):
    each disruption class `approvals` lists, and each change of `changes_needing_approval`."""
    used, missing = [], []
    keys = {v: k for k, v in CLASS_KEYS.items()}
    for cls, groups in (doc.get("approvals") or {}).items():
        r = by_group(records, {"class": keys[cls]}, groups)
        if r is None:
            missing.append(f"the plan has {cls} changes and no recorded approval by {' or '.join(groups)} "
                           f"(service.approvers.{keys[cls]}): clusterdef approve PLAN --class {keys[cls]} "
                           f"--group {groups[0]} --by WHO --why TEXT")
        else:
            used.append(r)
    for (kind, subject), entries in by_change(doc.get("changes_needing_approval") or []).items():
        groups = [e["group"] for e in entries if e["group"]]
        r = by_group(records, {"change": {"kind": kind, "subject": subject}}, groups)
        if r is None:
            who = " or ".join(groups) if groups else "nobody (name service.approvers or identity.admin_groups)"
            missing.append(f"{entries[0]['why']} ({kind} {show(subject, 60)}) needs an approval by {who}: "
                           f"clusterdef approve PLAN --change {shlex.quote(f'{kind}:{subject}')} --group "
                           f"{shlex.quote(groups[0]) if groups else 'G'} --by WHO --why TEXT")
        else:
            used.append(r)
    return used, missing
