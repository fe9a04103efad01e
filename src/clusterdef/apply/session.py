"""`clusterdef apply` from its options to the finished run record, without printing: the options
checked (`options`: extra vars, secrets, stages to skip, the playbooks folder), the plan file
prepared and the rollback point written (`start`), then the steps run (`Session.run`, progress
through callbacks). Errors say that nothing has run: OptionError for the options, ApplyError for
the plan, writer.OutputError for the rollback point."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Callable, Optional

from . import record
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


@dataclass
class Session:
    """A prepared apply: the re-derived plan, its steps, where the record goes; nothing has run yet
    except the rollback point's snapshot."""

    opts: Options
    prep: Prepared
    record_path: Path
    private_data_dir: Path
    inventory: Path
    header: dict
    extra: dict[str, str]

    def run(self, on_step: Callable | None = None, on_event: Callable | None = None,
            on_done: Callable | None = None) -> dict:
        """Run the steps (record.execute); the finished run record. Raises runner.RunnerMissing."""
        o = self.opts
        return record.execute(self.prep.steps, self.private_data_dir, self.inventory, self.record_path, self.header,
                              self.extra, o.check, on_step, on_event, on_done, secret_env=o.secret_env,
                              vault_ids=o.vault_ids, forks=o.forks)


def start(opts: Options, to: Optional[Path], from_: Optional[Path], base: Optional[str], matrices: Optional[Path],
          today: date) -> Session:
    """Prepare the plan (ApplyError: refused, nothing run), write the rendered inventory and the
    rollback point (both definitions and rendered trees) beside the plan file, before anything runs."""
    from ..writer import write_file_atomic
    from . import snapshot

    prep = prepare(opts.plan_file, to, from_, base, matrices, today, opts.playbooks, set(opts.skip))
    doc = prep.doc
    record_path, pdd = record.run_paths(opts.plan_file)
    inventory = record.write_inventory(pdd, prep.inventory)
    snap = snapshot.write(pdd, prep.old, prep.new)  # the rollback point, before anything runs
    header = {"plan_file": str(opts.plan_file), "cluster": doc.get("cluster"), "from_set": doc["from"].get("set"),
              "to_set": doc["to"].get("set"), "rollback_point": doc["rollout"]["rollback"]["point"], "snapshot": snap,
              "smoke_tests": list(prep.new.definition.upgrade.smoke_tests), "playbooks": str(opts.playbooks),
              "extravars": opts.extra, "secret_env": opts.secret_env, "vault_ids": opts.vault_ids,
              "forks": opts.forks}
    # the new rendered tree as the snapshot holds it: what deliver.yml copies onto the hosts
    transition = Path(snap["dir"]) / "transition"  # the Slurm files in force while older slurmd run
    for rel, text in (doc.get("slurm_transition") or {}).get("files", {}).items():
        write_file_atomic(transition / rel, text)
    extra = {**opts.extra, "clusterdef_snapshot_dir": snap["facts_dir"],
             "clusterdef_tree_dir": str(Path(snap["dir"]) / "to" / "tree"),
             "clusterdef_transition_dir": str(transition)}
    return Session(opts, prep, record_path, pdd, inventory, header, extra)
