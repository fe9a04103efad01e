"""`clusterdef apply`: run a reviewed plan, step by step, with its progress and run record."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, add_matrices, add_today, add_verb, err, instant, min_int, out, \
    print_findings, print_warnings, today as day


def add(verbs: Any) -> None:
    sub = add_verb(verbs, "apply", apply, long_running=True)
    sub.add_argument("plan_file", help="Plan file written by `clusterdef plan --plan-file`.", type=Path,
                     metavar="PLAN_FILE")
    sub.add_argument("--to", type=Path, default=None, metavar="TO",
                     help="The new definition (default: the plan's file name beside the plan file or in the working "
                          "directory).")
    sub.add_argument("--from", dest="from_", type=Path, default=None, metavar="FROM",
                     help="The old definition (default: as for --to).")
    sub.add_argument("--base", default=None, metavar="BASE",
                     help="The old definition is --to at this git ref (default when the plan was made with --base).")
    sub.add_argument("--playbooks", type=Path, default=None, metavar="PLAYBOOKS",
                     help="Playbooks folder (upgrade.yml, rollback.yml, gates.yml or enforce-baseline.yml, "
                          "control-plane.yml, prepare.yml); default: the nearest playbooks/ beside or above the "
                          "definition, else the installed clusterdef.cluster collection's.")
    sub.add_argument("--check", action="store_true", default=False,
                     help="Preview: Ansible check + diff mode, nothing changes.")
    sub.add_argument("--skip-stage", action="append", default=None, metavar="SKIP_STAGE",
                     help="Record a stage as done by hand instead of running it: prepare or control-plane; "
                          "repeatable.")
    sub.add_argument("--extra-var", "-e", action="append", default=None, metavar="EXTRA_VAR",
                     help="KEY=VALUE passed to every playbook run; recorded (run record, artifacts), so never a "
                          "secret; repeatable.")
    sub.add_argument("--secret-env", action="append", default=None, metavar="NAME",
                     help="Pass this environment variable to the playbooks without recording its value anywhere "
                          "(read it with lookup('ansible.builtin.env', NAME) in a no_log task); repeatable.")
    sub.add_argument("--vault-id", action="append", default=None, metavar="[LABEL@]FILE",
                     help="Ansible Vault password file or client script for every run, passed by reference; "
                          "repeatable.")
    sub.add_argument("--forks", type=min_int(1), default=None, metavar="FORKS",
                     help="Hosts Ansible works on at once in each run (default: Ansible's configuration, 5 unless "
                          "ANSIBLE_FORKS or ansible.cfg says otherwise); size it to the wave.")
    sub.add_argument("--resume", action="store_true", default=False,
                     help="Continue the newest run of this plan (or --run) at its first step not finished OK, once "
                          "the plan, both definitions and rendered trees are shown unchanged; options left out take "
                          "the run's values.")
    sub.add_argument("--run", dest="run_record", type=Path, default=None, metavar="RECORD",
                     help="With --resume: the run record to continue (default: the newest <plan>.run-*.json).")
    sub.add_argument("--now", default=None, metavar="NOW",
                     help="The time the run starts, ISO 8601 with a zone, for the maintenance-window gate "
                          "(default: the real time); the gate's clock moves on from it.")
    add_matrices(sub)
    add_today(sub)


def apply(plan_file: Path, to: Optional[Path], from_: Optional[Path], base: Optional[str], playbooks: Optional[Path],
          check: bool, skip_stage: Optional[list[str]], extra_var: Optional[list[str]],
          secret_env: Optional[list[str]], vault_id: Optional[list[str]], forks: Optional[int], resume: bool,
          run_record: Optional[Path], matrices: Optional[Path], today: Optional[str],
          now: Optional[str] = None) -> None:
    """Run a reviewed plan through ansible-runner: canary, gates, rollback drill, control plane, waves; halt at
    the first failing step. After each step it shows which tasks changed (with --check: would change) on which
    hosts. Writes a run record beside the plan file; --resume continues it. One apply of a cluster at a time.
    A stage outside its maintenance window (service) starts only with a recorded approval (`clusterdef approve`);
    --check previews are not gated.
    Exit 0 done, 1 halted on a failure, 2 a stale or refused plan, a missing approval, a stage outside its window,
    a run that cannot be resumed, another apply running, or bad input (nothing more run)."""
    from ..apply import ApplyError, runner
    from ..apply.session import OptionError, options, recorded_options, start
    from ..writer import OutputError

    given: dict[str, Any] = {"playbooks": playbooks, "extra_var": extra_var, "secret_env": secret_env,
                             "vault_ids": vault_id, "skip_stage": skip_stage, "check": check, "forks": forks}
    resume_from = None
    try:
        if run_record is not None and not resume:
            raise ApplyError(["--run names a run record to continue: give --resume with it"])
        if resume:
            from ..apply import resume as resuming

            resume_from = run_record or resuming.latest(plan_file)
            given = recorded_options(given, resuming.load(resume_from))
    except ApplyError as exc:
        for reason in exc.reasons:
            err.print(f"[red]refused[/]: {escape(reason)}")
        if exc.hint:
            err.print(f"  [green]hint:[/] {escape(exc.hint)}")
        raise SystemExit(EXIT_BAD)
    check = bool(given["check"])
    at = instant("--now", now)
    try:
        opts = options(plan_file, to, from_, base, given["playbooks"], given["extra_var"] or [],
                       given["secret_env"] or [], given["vault_ids"] or [], given["skip_stage"] or [], check,
                       given["forks"])
    except OptionError as exc:
        print_warnings(exc.warnings)
        for p in exc.problems:
            err.print(f"[red]error[/]: {escape(p)}")
        raise SystemExit(EXIT_BAD)
    print_warnings(opts.warnings)
    try:
        runner.require(opts.playbooks)  # before the lock and the run folder: a refusal leaves nothing behind
    except runner.RunnerMissing as exc:
        err.print(f"[red]error[/]: {escape(str(exc))} (nothing was run)")
        raise SystemExit(EXIT_BAD)
    try:
        session = start(opts, to, from_, base, matrices, day(today), resume_from, at)
    except ApplyError as exc:
        if exc.findings:
            print_findings(exc.findings, exc.sources)
        for reason in exc.reasons:
            err.print(f"[red]refused[/]: {escape(reason)}")
        if exc.hint:
            err.print(f"  [green]hint:[/] {escape(exc.hint)}")
        raise SystemExit(EXIT_BAD)
    except OutputError as exc:
        err.print(f"[red]error[/]: {escape(str(exc))} (nothing was run)")
        raise SystemExit(EXIT_BAD)
    print_warnings(session.notes)
    try:
        _run(session, plan_file, check, secret_env)
    finally:
        session.close()


def _run(session, plan_file: Path, check: bool, secret_env) -> None:
    """apply, once the plan is prepared and the cluster's lock held: the steps with their progress."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from ..apply import report
    from ..apply.runner import RunnerMissing

    doc, steps = session.prep.doc, session.prep.steps
    mode = " (check mode: nothing changes)" if check else ""
    if session.complete:
        out.print(f"[green]already complete[/]: {escape(str(session.record_path))} finished all "
                  f"{len(steps)} steps of {escape(str(plan_file))}; nothing to resume")
        return
    err.print(f"applying {escape(str(plan_file))}: {escape(str(doc['from'].get('set')))} -> "
              f"{escape(str(doc['to'].get('set')))} on {escape(str(doc.get('cluster')))}, "
              f"{len(steps)} steps{escape(str(mode))}")
    if session.resumed is not None:
        at = f"step {session.first + 1}/{len(steps)}: {steps[session.first].label}" if session.first < len(steps) \
            else "its end (every step finished; the record is closed)"
        err.print(f"resuming {escape(str(session.record_path))} ({escape(str(session.resumed.get('status')))}) at "
                  f"{escape(at)}")
    if secret_env:
        err.print(f"secret environment, values recorded nowhere: {escape(', '.join(secret_env))}")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total}"), TimeElapsedColumn(), console=err, transient=True) as progress:
        bar = progress.add_task("starting", total=len(steps), completed=session.first)
        current = {"label": ""}

        def on_step(i, step) -> None:
            current["label"] = escape(step.label)
            progress.update(bar, description=current["label"])

        def on_event(event) -> None:
            data = event.get("event_data") or {}
            if event.get("event") == "playbook_on_task_start" and data.get("task"):
                progress.update(bar, description=f"{current['label']}: {escape(data['task'])}")

        def on_done(i, step, result) -> None:
            report.print_step(progress.console, step, result, check)
            progress.advance(bar)

        try:
            record = session.run(on_step, on_event, on_done)
        except RunnerMissing as exc:
            err.print(f"[red]error[/]: {escape(str(exc))}")
            raise SystemExit(EXIT_BAD)
    err.print(f"run record: {escape(str(session.record_path))}")
    if record["status"] == "held":  # a stage outside its window, not approved: nothing of it ran
        err.print(f"[red]refused[/]: {escape(record['holds'][-1]['reason'])}")
        out.print(f"[yellow]held[/] before {escape(record['halted_at'] or '?')}; continue with: clusterdef apply "
                  f"{escape(str(plan_file))} --resume (once the window opens or the approval is recorded)")
        raise SystemExit(EXIT_BAD)
    if record["status"] != "succeeded":
        not_run = ", ".join(dict.fromkeys(r["stage"] for r in record["not_run"])) or "nothing"
        out.print(f"[red]halted[/] at {escape(record['halted_at'] or '?')}; not run: {escape(not_run)}")
        out.print(f"  continue with: clusterdef apply {escape(str(plan_file))} --resume")
        raise SystemExit(EXIT_WARN)
    out.print(f"[green]applied[/] {escape(str(plan_file))}{escape(str(mode))}: {len(record['runs'])} steps")
