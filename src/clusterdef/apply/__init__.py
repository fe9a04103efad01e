"""`clusterdef apply`: a reviewed plan file carried out through ansible-runner.

- prepare.py: the plan file checked (structure, staleness, forgery) and turned into steps;
- steps.py: the rollout stages as ordered playbook runs on the rendered inventory's waves;
- secrets.py: secrets by name, through a pipe, never onto disk (and the wrapper ansible-runner starts);
- runner.py: one playbook through ansible-runner;
- events.py: ansible-runner's events summed up (tasks changed per host, smoke tests);
- snapshot.py: the rollback point (both definitions and trees) and every node's versions before the first change;
- record.py: the steps run in order, halting at the first failure, with the run record (durable; resumable);
- resume.py: which run record `--resume` continues, and whether it may (plan, definitions, trees, options);
- lock.py: one apply of a cluster at a time (an flock the kernel releases with a dead holder);
- session.py: the verb from its options to the finished record (callbacks for progress);
- report.py: how a step's result is shown (the change table).

Nothing is imported here: `python -m clusterdef.apply.secrets` starts light.
"""

from __future__ import annotations


class ApplyError(Exception):
    """The plan cannot be applied as it stands (stale, refused, unreadable, no playbook, bad
    options): nothing has run. `reasons` are one line each; `findings`/`sources` carry definition
    errors."""

    def __init__(self, reasons: list[str], hint: str = "", findings=None, sources=None):
        super().__init__("; ".join(reasons))
        self.reasons = reasons
        self.hint = hint
        self.findings = findings or []
        self.sources = sources or {}
