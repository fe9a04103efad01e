"""`clusterdef apply PLAN --resume`: which run record to continue and whether it may be continued.

The record to continue is the one named (`--run RECORD`) or the newest `<plan>.run-*.json` beside the
plan file. It is continued only when what it started with is what there is now: the plan's hash, both
definitions' and both rendered trees' hashes (recorded at its start, in `plan_sha256` and `snapshot`),
the rollback point's files on disk (the playbooks read the tree from there), and the options that shape
the steps (check mode, stages skipped, playbooks folder, extra vars, secret and vault names, forks).
Anything else is refused with the reason, before anything runs. Nothing here runs or prints.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from . import ApplyError

# options recorded at a run's start that a resumption must repeat (or leave out: then the recorded ones hold)
RESUMED_OPTIONS = ("playbooks", "extravars", "secret_env", "vault_ids", "forks", "skip", "check")


def records_of(plan_file: Path) -> list[Path]:
    plan_file = Path(plan_file).resolve()
    return sorted(plan_file.parent.glob(f"{plan_file.stem}.run-*.json"))


def load(path: Path) -> dict:
    """A run record (bounded like every file clusterdef reads)."""
    from ..limits import InputError, load_json

    try:
        rec = load_json(Path(path), "run record")
    except InputError as exc:
        f = exc.findings[0]
        raise ApplyError([f"cannot read the run record {f.where}: {f.message}"],
                         "name another with --run RECORD, or apply without --resume") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("runs"), list) or "snapshot" not in rec:
        raise ApplyError([f"{path}: not a run record of clusterdef apply"], "name the plan's run-*.json with --run")
    if rec.get("record_format") != 2:
        raise ApplyError([f"{path}: a run record of format {rec.get('record_format')!r} cannot be resumed "
                          "(it was written before runs could be resumed)"], "apply the plan without --resume")
    return rec


def latest(plan_file: Path) -> Path:
    """The newest run record of the plan file (by its start time, then its name)."""
    found = []
    for path in records_of(plan_file):
        try:
            started = str(json.loads(path.read_text(encoding="utf-8")[:1 << 20]).get("started") or "")
        except (OSError, ValueError, AttributeError):
            started = ""
        found.append((started, path.name, path))
    if not found:
        raise ApplyError([f"no run of {plan_file} to resume (no {Path(plan_file).stem}.run-*.json beside it)"],
                         "apply it without --resume, or name the record with --run RECORD")
    return max(found)[2]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def changes(rec: dict, doc: dict, old, new) -> list[str]:
    """Why `rec` is not a run of this plan on these definitions (empty: it is)."""
    out = []
    if rec.get("plan_sha256") != doc.get("plan_sha256"):
        out.append("the plan changed since the run started (plan_sha256 "
                   f"{str(rec.get('plan_sha256'))[:12]} then, {str(doc.get('plan_sha256'))[:12]} now)")
    snap = rec.get("snapshot") or {}
    for side, s in (("from", old), ("to", new)):
        then = snap.get(side)
        if s is None or then is None:
            if (s is None) != (then is None):
                out.append(f"the run {'had' if then else 'had no'} {side} side; "
                           f"the plan now {'has' if s else 'has no'}")
            continue
        if then.get("definition_sha256") != _sha(s.text.encode("utf-8")):
            out.append(f"the {side} definition changed since the run started")
        from ..plan.diff import tree_hash

        if then.get("tree_sha256") != tree_hash(s.tree):
            out.append(f"the {side} rendered tree changed since the run started")
        folder = Path(snap.get("dir") or ".") / side
        bad = [rel for rel, text in s.tree.items() if not _same(folder / "tree" / rel, text)]
        if bad:
            out.append(f"the rollback point's {side} tree on disk ({folder}) differs from the rendered tree in "
                       f"{len(bad)} file(s): {', '.join(sorted(bad)[:5])}")
    return out


def _same(path: Path, text: str) -> bool:
    try:
        return path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def option_changes(rec: dict, given: dict) -> list[str]:
    """The options given now that differ from the run's (an option left out takes the run's value)."""
    out = []
    for name in RESUMED_OPTIONS:
        if name in given and given[name] != rec.get(name):
            out.append(f"{name}: {given[name]!r} now, {rec.get(name)!r} when the run started")
    return out
