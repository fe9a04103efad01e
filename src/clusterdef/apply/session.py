"""`clusterdef apply` from its options to the finished run record, without printing: the options
checked (`options`: extra vars, secrets, stages to skip, the playbooks folder), the plan file
prepared and the rollback point written (`start`), then the steps run (`Session.run`, progress
through callbacks). Errors say that nothing has run: OptionError for the options, ApplyError for
the plan, writer.OutputError for the rollback point."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Callable, Optional

from . import ApplyError, gate, lock, record, resume
from .prepare import Prepared, find_playbooks, prepare
from .secrets import option_problems
from .steps import SKIPPABLE


class OptionError(Exception):
    """The options cannot be used (each problem one line); `warnings` came before them."""

    def __init__(self, problems: list[str], warnings: Optional[list[str]] = None):
        super().__init__("; ".join(problems))
        self.problems = problems
        self.warnings = warnings or []


@dataclass(frozen=True)
class Options:
    plan_file: Path
    playbooks: Path
    extra: dict[str, str] = field(default_factory=dict)
    secret_env: list[str] = field(default_factory=list)
    vault_ids: list[str] = field(default_factory=list)
    skip: frozenset[str] = frozenset()
    check: bool = False
    forks: Optional[int] = None
    warnings: list[str] = field(default_factory=list)  # to show; nothing refused


def extra_vars(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` pairs (the value may hold `=`); OptionError on the first without a key."""
    extra: dict[str, str] = {}
    for kv in pairs:
        key, sep, value = kv.partition("=")
        if not sep or not key.strip():
            raise OptionError([f"--extra-var {kv!r}: use KEY=VALUE"])
        extra[key.strip()] = value
    return extra


def options(plan_file: Path, to: Optional[Path], from_: Optional[Path], base: Optional[str],
            playbooks: Optional[Path], extra_var: list[str], secret_env: list[str], vault_ids: list[str],
            skip_stage: list[str], check: bool, forks: Optional[int]) -> Options:
    """The options checked in the order a user fixes them; OptionError at the first kind that is wrong."""
    extra = extra_vars(extra_var)
    problems, warnings = option_problems(secret_env, vault_ids, extra, os.environ)
    if problems:
        raise OptionError(problems, warnings)
    bad_skip = [s for s in skip_stage if s not in SKIPPABLE]
    if bad_skip:
        raise OptionError([f"--skip-stage {', '.join(bad_skip)}: only {' or '.join(SKIPPABLE)} can be skipped"],
                          warnings)
    if from_ is not None and base is not None:
        raise OptionError(["give at most one of --from OLD.yaml or --base GIT_REF"], warnings)
    pb_dir = playbooks or find_playbooks(to or plan_file)
    if pb_dir is None or not pb_dir.is_dir():
        raise OptionError([f"no playbooks folder {pb_dir or ''}; pass --playbooks DIR"], warnings)
    return Options(plan_file, pb_dir, extra, list(secret_env), list(vault_ids), frozenset(skip_stage), check, forks,
                   warnings)


def recorded_options(opts: dict, rec: dict) -> dict:
    """`--resume`: the options left out on the command line (None) take the run's recorded values; extra
    vars are the run's with the given ones over them (start refuses any that differ from the run's)."""
    names = {"playbooks": "playbooks", "secret_env": "secret_env", "vault_ids": "vault_ids", "skip_stage": "skip",
             "forks": "forks"}
    out = dict(opts)
    for opt, key in names.items():
        if out.get(opt) is None and rec.get(key) is not None:
            out[opt] = Path(rec[key]) if opt == "playbooks" else rec[key]
    extravars = rec.get("extravars")
    recorded = extravars if isinstance(extravars, dict) else {}
    out["extra_var"] = [f"{k}={v}" for k, v in recorded.items()] + list(out.get("extra_var") or [])
    if not out.get("check"):
        out["check"] = bool(rec.get("check"))
    return out


@dataclass
class Session:
    """A prepared apply: the re-derived plan, its steps, where the record goes, the cluster's lock
    (held until `close`); nothing has run yet except the rollback point's snapshot. `resumed`: the
    run record being continued (`first`: the index of its first step not finished OK)."""

    opts: Options
    prep: Prepared
    record_path: Path
    private_data_dir: Path
    inventory: Path
    header: dict
    extra: dict[str, str]
    held: Optional[lock.ClusterLock] = None
    resumed: Optional[dict] = None
    first: int = 0
    gate: Optional[Callable] = None  # gate.check_stage on the clock, before each stage (None: nothing gated)
    approvals: list[dict] = field(default_factory=list)  # the recorded approvals the plan requires, used
    notes: list[str] = field(default_factory=list)  # check mode: what a real run would be refused for

    @property
    def complete(self) -> bool:
        """A resumed run that had already finished every step."""
        return self.resumed is not None and self.first >= len(self.prep.steps) and \
            self.resumed.get("status") == "succeeded"

    def run(self, on_step: Callable | None = None, on_event: Callable | None = None,
            on_done: Callable | None = None) -> dict:
        """Run the steps (record.execute); the finished run record. Raises runner.RunnerMissing; a new run
        refused so before any playbook ran leaves nothing behind (`discard`)."""
        from .runner import RunnerMissing

        o = self.opts
        ran = False

        def done(i, step, result) -> None:
            nonlocal ran
            ran = ran or result is not None  # None: a step recorded as skipped, nothing run
            if on_done:
                on_done(i, step, result)
        try:
            return record.execute(self.prep.steps, self.private_data_dir, self.inventory, self.record_path,
                                  self.header, self.extra, o.check, on_step, on_event, done, secret_env=o.secret_env,
                                  vault_ids=o.vault_ids, forks=o.forks, resume=self.resumed, gate=self.gate,
                                  approvals=self.approvals)
        except RunnerMissing:
            if self.resumed is None and not ran:
                self.discard()
            raise

    def discard(self) -> None:
        """A new run refused before any playbook ran: remove what it wrote (run record, journal, private data
        dir, the lock file if it made it) and release the lock. A resumed run's record is never removed."""
        if self.resumed is None:
            _remove_run(self.record_path, self.private_data_dir)
        if self.held is not None:
            self.held.release(remove=True)
            self.held = None

    def close(self) -> None:
        if self.held is not None:
            self.held.release()
            self.held = None


def _remove_run(record_path: Path, pdd: Path) -> None:
    record_path.unlink(missing_ok=True)
    record.journal_path(record_path).unlink(missing_ok=True)
    shutil.rmtree(pdd, ignore_errors=True)


def start(opts: Options, to: Optional[Path], from_: Optional[Path], base: Optional[str], matrices: Optional[Path],
          today: date, resume_from: Optional[Path] = None, now: Optional[datetime] = None) -> Session:
    """Prepare the plan (ApplyError: refused, nothing run) and take the cluster's lock (ApplyError when
    another apply holds it). A new run writes the rendered inventory and the rollback point (both
    definitions and rendered trees) beside the plan file before anything runs; `resume_from` (a run
    record) is continued instead, once it is shown to be a run of this plan on these definitions.
    The service objectives (gate.py) are checked first: the plan's required approvals recorded, and the
    first stage to run inside its window at `now` (default: the real time) or approved to run outside.
    A `--check` preview is not gated (nothing is disrupted, and an approver may want to see it before
    approving); what a real run would be refused for is in the session's `notes`."""
    prep = prepare(opts.plan_file, to, from_, base, matrices, today, opts.playbooks, set(opts.skip))
    if opts.check:
        notes = []
        try:
            _required_approvals(prep)
            _gate_first(prep, 0, _gate(prep, gate.clock(now)))
        except ApplyError as exc:
            notes = [f"check mode, not enforced: a real run would be refused: {r}" for r in exc.reasons]
        session = _started(opts, prep, resume_from, None)
        session.notes = notes
        return session
    used = _required_approvals(prep)
    session = _started(opts, prep, resume_from, _gate(prep, gate.clock(now)))
    session.approvals = used
    return session


def _started(opts: Options, prep: Prepared, resume_from: Optional[Path], check: Optional[Callable]) -> Session:
    """The cluster's lock taken, the first stage gated (`check`), the run written or the record to resume read."""
    try:
        held = lock.acquire(Path(opts.plan_file).resolve().parent, prep.doc.get("cluster") or "", opts.plan_file)
    except lock.LockHeld as exc:
        raise ApplyError([str(exc)], "nothing was run; wait for that apply to end (the lock of one that was killed "
                         "is released with its process), then resume with --resume") from None
    try:
        if resume_from is not None:
            session = _resumed(opts, prep, Path(resume_from))
            _gate_first(prep, session.first, check)
        else:
            _gate_first(prep, 0, check)  # before the rollback point is written
            session = _fresh(opts, prep)
    except BaseException:
        held.release(remove=True)  # refused (or failed to write the rollback point): nothing ran
        raise
    session.held, session.gate = held, check
    return session


def _required_approvals(prep: Prepared) -> list[dict]:
    """The recorded approvals the plan requires (each class service.approvers names for it, each change
    needing an approver); ApplyError naming every one missing. A bring-up plan requires none."""
    from ..plan.approvals import required

    if prep.old is None:
        return []
    used, missing = required(prep.doc, prep.approvals)
    if missing:
        raise ApplyError([f"{prep.doc.get('cluster')}: {m}" for m in missing], "nothing was run; the approver "
                         "records the approval in the plan file (`clusterdef approve`, docs/service.md), then apply "
                         "it again")
    return used


def _gate(prep: Prepared, now: Callable) -> Optional[Callable]:
    """The stage gate of this plan on the clock `now` (None for a bring-up plan): `check(i, step, ahead)`
    asks gate.check_stage whether the step's stage may start `ahead` from now."""
    if prep.old is None:
        return None
    d, doc, records = prep.new.definition, prep.doc, prep.approvals
    return lambda i, step, ahead=timedelta(0): gate.check_stage(d, doc, records, step.stage, now() + ahead)


def _gate_first(prep: Prepared, first: int, check: Optional[Callable]) -> None:
    """ApplyError when the first stage from step `first` that needs a window would start outside it: at
    now, after the estimated minutes of the stages before it that change nothing running (as the plan
    lays them out), so a run refused for its window runs nothing at all."""
    if check is None:
        return
    ahead, seen = timedelta(0), set()
    for i in range(first, len(prep.steps)):
        step = prep.steps[i]
        if step.playbook is None or step.stage in seen:
            continue
        seen.add(step.stage)
        verdict = check(i, step, ahead)
        if verdict.reason:
            raise ApplyError([verdict.reason], "nothing was run; apply it when the window opens, or record the "
                             "approval in the plan file (`clusterdef approve`, docs/service.md)")
        if verdict.gated:
            return
        ahead += timedelta(minutes=gate.stage_minutes(prep.doc, step.stage))


def _extra(opts: Options, snap: dict) -> dict:
    return {**opts.extra, "clusterdef_snapshot_dir": snap["facts_dir"],
            "clusterdef_tree_dir": str(Path(snap["dir"]) / "to" / "tree"),
            "clusterdef_transition_dir": str(Path(snap["dir"]) / "transition")}


def _fresh(opts: Options, prep: Prepared) -> Session:
    record_path, pdd = record.run_paths(opts.plan_file)
    try:
        return _write_fresh(opts, prep, record_path, pdd)
    except BaseException:
        _remove_run(record_path, pdd)  # a rollback point half written is no rollback point
        raise


def _write_fresh(opts: Options, prep: Prepared, record_path: Path, pdd: Path) -> Session:
    from ..writer import write_file_atomic
    from . import snapshot

    doc = prep.doc
    inventory = record.write_inventory(pdd, prep.inventory)
    snap = snapshot.write(pdd, prep.old, prep.new)  # the rollback point, before anything runs
    header = {"plan_file": str(opts.plan_file), "plan_sha256": doc.get("plan_sha256"), "cluster": doc.get("cluster"),
              "from_set": doc["from"].get("set"), "to_set": doc["to"].get("set"),
              "rollback_point": doc["rollout"]["rollback"]["point"], "snapshot": snap,
              "smoke_tests": list(prep.new.definition.upgrade.smoke_tests), "playbooks": str(opts.playbooks),
              "extravars": opts.extra, "secret_env": opts.secret_env, "vault_ids": opts.vault_ids,
              "forks": opts.forks, "skip": sorted(opts.skip)}
    # the new rendered tree as the snapshot holds it: what deliver.yml copies onto the hosts
    transition = Path(snap["dir"]) / "transition"  # the Slurm files in force while older slurmd run
    for rel, text in (doc.get("slurm_transition") or {}).get("files", {}).items():
        write_file_atomic(transition / rel, text)
    return Session(opts, prep, record_path, pdd, inventory, header, _extra(opts, snap))


def _resumed(opts: Options, prep: Prepared, path: Path) -> Session:
    """The run record at `path` continued: refused (ApplyError) unless it is a run of this plan, on these
    definitions and rendered trees, with these options, and its finished steps are this plan's steps."""
    rec = resume.load(path)
    given = {"playbooks": str(opts.playbooks), "extravars": opts.extra, "secret_env": opts.secret_env,
             "vault_ids": opts.vault_ids, "forks": opts.forks, "skip": sorted(opts.skip), "check": opts.check}
    why = resume.changes(rec, prep.doc, prep.old, prep.new) + resume.option_changes(rec, given)
    try:
        first = record.first_unfinished(rec, prep.steps) if not why else 0
    except ValueError as exc:
        why.append(str(exc))
    if why:
        raise ApplyError([f"{path}: cannot resume: {w}" for w in why], "nothing was run; a run continues only what "
                         "it started: plan again, review the plan, and apply the new plan file without --resume")
    snap = rec["snapshot"]
    pdd = Path(rec["private_data_dir"])
    return Session(opts, prep, path, pdd, Path(rec["inventory"]), {}, _extra(opts, snap), resumed=rec, first=first)
