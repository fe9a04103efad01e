"""From a plan file to the steps that carry it out: the file's structure checked
(planfile.SCHEMA), both definitions validated and rendered again in memory and their hashes
compared with the plan's (a stale plan is refused), then the plan derived again from the
definitions: a file that differs from it in anything (a stage, host, set, gate, the refused flag)
or whose `plan_sha256` does not match is refused as forged, and the steps (steps.py) come from
the re-derived plan, never from the file. Nothing has run when it raises ApplyError."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from ruamel.yaml import YAMLError

from .. import hostlist
from ..plan.windows import recorded_start
from ..plan import FROM_SIDE_IGNORED, PlanInputError, Side, base_side, check_plan_file, load_side, make_plan
from ..plan.approvals import record_problems
from ..plan.planfile import RECORDS, forgeries, schema_problems, seal
from . import ApplyError
from .inventory import inventory_waves
from .steps import BootPointers, Deliveries, DriverPools, Step, steps_for_plan


@dataclass
class Prepared:
    doc: dict
    old: Side | None  # None: a bring-up plan (day 0)
    new: Side
    steps: list[Step]
    inventory: dict[str, str]  # relpath under ansible/ -> text, from the new rendered tree
    approvals: list[dict] = field(default_factory=list)  # the file's approval_records, each shown to be this plan's


def read_plan_file(path: Path) -> dict:
    """The plan file's document, its structure checked (every field apply relies on, typed);
    refused as a whole when the file says the plan was refused."""
    from ..limits import InputError, load_json

    hint = "pass the file `clusterdef plan --plan-file` wrote (plan again if it is from another version)"
    try:
        doc = load_json(path, "plan")  # bounded: regular files only, size, depth and number limits
    except InputError as exc:
        f = exc.findings[0]
        if f.code in ("json-syntax", "nesting-too-deep", "number-too-long"):
            raise ApplyError([f"{f.where}: not a plan file ({f.message})"], hint) from None
        raise ApplyError([f"cannot read the plan file {f.where}: {f.message}"], f.hint or hint) from None
    problems = schema_problems(doc)
    if problems:
        more = [f"... and {len(problems) - 20} more problems"] if len(problems) > 20 else []
        raise ApplyError([f"{path}: not a valid plan file: {p}" for p in problems[:20]] + more, hint)
    if doc["refused"]:
        raise ApplyError([f"{path}: the plan was refused: " + "; ".join(r["message"] for r in doc["refusals"])])
    return doc


def _locate(label: str, plan_path: Path) -> Path | None:
    if not label or label in (".", "..") or Path(label).name != label or "\\" in label:
        return None  # the plan records a bare file name: anything else points elsewhere
    for base in (Path(plan_path).parent, Path.cwd()):
        if (base / label).is_file():
            return base / label
    return None


def prepare(plan_path: Path, to: Path | None, from_: Path | None, base: str | None, matrices, today: date,
            playbooks: Path, skip: Set[str] = frozenset()) -> Prepared:
    """Read the plan file, re-render both definitions and refuse a stale plan; map the stages
    to steps. The definitions default to the plan's file names beside the plan file (or in the
    working directory); a `REF:name` from side is read from git like `plan --base`."""
    doc = read_plan_file(plan_path)
    to = to or _locate(doc["to"].get("file", ""), plan_path)
    if to is None:
        raise ApplyError([f"cannot find the new definition {doc['to'].get('file')!r} beside {plan_path}"],
                         "pass --to DEF.yaml")
    if doc.get("bringup"):
        return _prepare_bringup(doc, plan_path, to, matrices, today, playbooks, skip)
    label = doc["from"].get("file", "")
    if from_ is None and base is None:
        if ":" in label and _locate(label, plan_path) is None:
            base = label.split(":", 1)[0]
        else:
            from_ = _locate(label, plan_path)
            if from_ is None:
                raise ApplyError([f"cannot find the old definition {label!r} beside {plan_path}"],
                                 "pass --from OLD.yaml or --base GIT_REF")
    try:
        new = load_side(to, matrices, today, {"matrix-candidate"})
        if base is not None:  # --base "" is refused by base_side, as in plan
            old = base_side(base, to, matrices, today)
        else:
            assert from_ is not None  # given, or found above (else refused)
            old = load_side(from_, matrices, today, FROM_SIDE_IGNORED)
    except PlanInputError as exc:
        raise ApplyError(["a definition no longer validates"], "fix it and plan again", exc.findings, exc.sources)
    stale = check_plan_file(doc, old.text, new.text, old.tree, new.tree)
    if stale:
        raise ApplyError(stale, "the plan no longer describes these definitions: run `clusterdef plan` again, "
                         "review it, and apply the new plan file")
    # The file is only a claim: derive the plan again from the definitions and refuse any difference.
    # File names are the plan's own labels (the hashes above vouch for the contents); a candidate
    # target can only have a canary-only plan, so --allow-candidate is implied.
    old, new = replace(old, label=doc["from"]["file"]), replace(new, label=doc["to"]["file"])
    try:
        # laid out in the maintenance windows from the plan file's own start (the planning day has passed)
        derived = make_plan(old, new, allow_candidate=True, start=recorded_start(doc))
    except PlanInputError as exc:
        raise ApplyError(["the definitions no longer give a plan"], "fix them and plan again", exc.findings,
                         exc.sources)
    forged = forgeries(doc, derived.doc)
    if derived.refused:
        forged.insert(0, "these definitions give a refused plan: " + "; ".join(p.message for p in derived.refusals))
    if forged:
        raise ApplyError([f"{plan_path}: {f}" for f in forged], "the plan file is not the plan `clusterdef plan` "
                         "writes for these definitions: plan again, review it, and apply the new plan file")
    records = list(doc.get(RECORDS) or [])
    doc = seal(derived.doc)  # from here on only the re-derived plan counts
    wrong = record_problems(doc, records)  # the approvals recorded after the seal: for this plan, by a group that may
    if wrong:
        raise ApplyError([f"{plan_path}: {w}" for w in wrong], "an approval is given with `clusterdef approve` on the "
                         "plan file it approves; remove the others from approval_records")
    return replace(_steps(doc, old, new, playbooks, skip), approvals=records)


def _prepare_bringup(doc: dict, plan_path: Path, to: Path, matrices, today: date, playbooks: Path,
                     skip: Set[str]) -> Prepared:
    """A bring-up plan (day 0): no old side; the new one checked and the plan derived again as for a change."""
    from ..plan.bringup import make_bringup

    try:
        new = load_side(to, matrices, today)
    except PlanInputError as exc:
        raise ApplyError(["the definition no longer validates"], "fix it and plan again", exc.findings, exc.sources)
    stale = [p for p in check_plan_file(doc, "", new.text, {}, new.tree) if "from" not in p]
    if stale:
        raise ApplyError(stale, "the plan no longer describes this definition: run `clusterdef plan --to` again")
    new = replace(new, label=doc["to"]["file"])
    derived = make_bringup(new)
    forged = forgeries(doc, derived.doc)
    if forged:
        raise ApplyError([f"{plan_path}: {f}" for f in forged], "the plan file is not the bring-up plan `clusterdef "
                         "plan --to` writes for this definition: plan again, review it, and apply the new plan file")
    return _steps(seal(derived.doc), None, new, playbooks, skip)


def _steps(doc: dict, old: Side | None, new: Side, playbooks: Path, skip: Set[str]) -> Prepared:
    """The steps of a checked plan (its stages on the new tree's inventory)."""
    inventory = {rel[len("ansible/"):]: text for rel, text in new.tree.items() if rel.startswith("ansible/")}
    if "inventory/hosts.yml" not in inventory:
        raise ApplyError(["the rendered tree has no ansible/inventory/hosts.yml"],
                         "the ansible render target writes the inventory with the upgrade waves")
    try:
        waves = inventory_waves(inventory["inventory/hosts.yml"])
    except (YAMLError, ValueError) as exc:
        raise ApplyError([f"the rendered inventory cannot be read: {exc}"])
    boot = BootPointers(new) if any(st.get("provisioning") == "stateless" or st.get("kind") in ("image", "boot-default")
                                    for st in doc["rollout"]["stages"]) else None
    d = new.definition
    pools = DriverPools(new) if any(st.get("driver") for st in doc["rollout"]["stages"]) else None
    deliveries = Deliveries(new, inventory["inventory/hosts.yml"]) if any(
        st.get("delivery") for st in doc["rollout"]["stages"]) else None
    steps = steps_for_plan(doc, waves, Path(playbooks), skip, boot, smoke=bool(d.upgrade.smoke_tests), pools=pools,
                           deliveries=deliveries)
    per_node = {name: hw.gpu.count if hw.gpu else 0 for name, hw in d.hardware.items()}
    gpus = {h: per_node[g.hardware] for g in d.nodes.values() for h in hostlist.names(g.hosts)}
    for step in steps:
        step.gpus = sum(gpus.get(h, 0) for h in step.hosts)
    return Prepared(doc, old, new, steps, inventory)


def find_playbooks(start: Path | None) -> Path | None:
    """The nearest `playbooks/` folder beside or above `start` (the definition), else in the
    working directory, else the installed clusterdef.cluster collection's (apply/collection.py)."""
    from .collection import collection_playbooks

    here = Path(start).resolve().parent if start else Path.cwd()
    for d in (here, *here.parents, Path.cwd()):
        if (d / "playbooks" / "upgrade.yml").is_file():
            return d / "playbooks"
    return collection_playbooks()
