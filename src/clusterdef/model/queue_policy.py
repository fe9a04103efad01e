"""Queue policy statements (`service.queue_policy`, docs/service.md#queue-policy) compiled into the
settings each scheduler enforces when the definition is built (Definition's validator), so no reader sees
anything else:

    max_job_hours      Slurm: the partition's MaxTime        Kueue: the queue's max_execution_s (admission policy)
    max_gpus_per_job   Slurm: MaxTRESPerJob gres/gpu on the partition's QOS
    max_gpus_per_user  Slurm: MaxTRESPerUser gres/gpu on the partition's QOS
    reclaim_lent_gpus  Kueue: the queue's reclaim_within_cohort (Any or Never)

A setting the definition gives itself must say the same as the statement (else `queue-policy-conflict`,
at the setting); two statements over one setting must agree; a limit a scheduler has no setting for is
refused (`queue-policy-not-enforceable`), never dropped. The compiled definition is what
definition.resolved.json shows."""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple

from ..errors import Finding, error
from .base import slurm_minutes, slurm_time
from .kubernetes import Kubernetes
from .service import QueuePolicy, Service
from .slurm import Slurm


class Sections(NamedTuple):
    """The definition's sections the statements read and set."""
    service: Service | None
    slurm: Slurm | None
    kubernetes: Kubernetes | None


GPU = "gres/gpu"
SLURM_ONLY = ("max_gpus_per_job", "max_gpus_per_user")
KUEUE_ONLY = ("reclaim_lent_gpus",)


class _Ledger:
    """The settings the statements set: (kind, object, field) -> (value, statement, value as shown), so that two
    statements over one setting are compared, and the explicit setting of the definition is compared once."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str, str], tuple[Any, str, str]] = {}
        self.findings: list[Finding] = []

    def set(self, key: tuple[str, str, str], value: Any, statement: str, where: tuple, shown: str,
            explicit: Any = None, explicit_path: tuple = (), explicit_shown: str = "") -> None:
        kind, obj, field = key
        if key in self.values:
            other, by, other_shown = self.values[key]
            if other != value:
                self.findings.append(error(
                    "queue-policy-conflict", where,
                    f"queue policy `{statement}` sets {kind} `{obj}` {field} to {shown}; `{by}` sets it to "
                    f"{other_shown}",
                    "one setting, one value: make the statements agree, or cover the object in one of them"))
            return
        self.values[key] = (value, statement, shown)
        if explicit is not None and explicit != value:
            self.findings.append(error(
                "queue-policy-conflict", explicit_path,
                f"{kind} `{obj}` {field} is {explicit_shown}, but queue policy `{statement}` says {shown}",
                f"drop {explicit_path[-1]} here (the statement sets it), or change the statement"))


def _unknown(name: str, where: tuple, kind: str, value: str, section: str, known: list[str],
             none_hint: str) -> Finding:
    """A statement covering a partition or queue the definition does not define."""
    return error("queue-policy-scope-unknown", where,
                 f"queue policy `{name}` covers {kind} `{value}`, which {section} does not define",
                 f"name one of: {', '.join(known)}" if known else none_hint)


def _slurm(d: Sections, name: str, st: QueuePolicy, led: _Ledger, where: tuple) -> Iterator[Finding]:
    parts = d.slurm.partitions if d.slurm is not None else {}
    qos = d.slurm.qos if d.slurm is not None else {}
    covered = set(st.partitions)
    for i, p in enumerate(st.partitions):
        if p not in parts:
            yield _unknown(name, where + ("partitions", i), "partition", p, "slurm.partitions", list(parts),
                           "the definition has no Slurm partitions: cover Kueue queues (queues) instead")
            continue
        part = parts[p]
        minutes = st.max_job_minutes
        if minutes is not None:
            given: float | str | None = None  # what the definition says itself, if it does
            if "max_time" in part.model_fields_set:
                m = slurm_minutes(part.max_time)
                given = "UNLIMITED" if m is None else m
            led.set(("partition", p, "max_time"), minutes, name, where + ("max_job_hours",),
                    f"{st.max_job_hours:g} h ({slurm_time(minutes)})", explicit=given,
                    explicit_path=("slurm", "partitions", p, "max_time"), explicit_shown=part.max_time)
        limits = {f: getattr(st, f) for f in SLURM_ONLY if getattr(st, f) is not None}
        if not limits:
            continue
        if part.qos is None or part.qos not in qos:
            yield error("queue-policy-needs-qos", where + ("partitions", i),
                        f"queue policy `{name}` limits GPUs per {' and per '.join(f.rsplit('_', 1)[1] for f in limits)} "
                        f"in partition `{p}`, which has no QOS: Slurm keeps those limits in a QOS",
                        f"give the partition one (slurm.partitions.{p}.qos, a QOS of slurm.qos): the rendered "
                        "job_submit.lua makes it the QOS of the partition's jobs")
            continue
        for other, op in parts.items():
            if op.qos == part.qos and other not in covered:
                yield error("queue-policy-qos-shared", where + ("partitions", i),
                            f"partition `{p}`'s QOS `{part.qos}` is also partition `{other}`'s, which queue policy "
                            f"`{name}` does not cover: its GPU limits would hold there too",
                            f"cover `{other}` in the statement as well, or give one of them a QOS of its own")
                break
        q = qos[part.qos]
        for field, value in limits.items():
            qfield = "max_tres_per_job" if field == "max_gpus_per_job" else "max_tres_per_user"
            have = getattr(q, qfield)
            led.set(("QOS", part.qos, f"{qfield}.{GPU}"), value, name, where + (field,), str(value),
                    explicit=have.get(GPU), explicit_path=("slurm", "qos", part.qos, qfield, GPU),
                    explicit_shown=str(have.get(GPU)))


def _kueue(d: Sections, name: str, st: QueuePolicy, led: _Ledger, where: tuple) -> Iterator[Finding]:
    queues = d.kubernetes.kueue.queues if d.kubernetes is not None else {}
    for i, qn in enumerate(st.queues):
        if qn not in queues:
            yield _unknown(name, where + ("queues", i), "queue", qn, "kubernetes.kueue.queues", list(queues),
                           "the definition has no Kueue queues: cover Slurm partitions (partitions) instead")
            continue
        q = queues[qn]
        if st.max_job_minutes is not None:
            seconds = st.max_job_minutes * 60
            led.set(("queue", qn, "max_execution_s"), seconds, name, where + ("max_job_hours",),
                    f"{seconds} s ({st.max_job_hours:g} h)",
                    explicit=q.max_execution_s if "max_execution_s" in q.model_fields_set else None,
                    explicit_path=("kubernetes", "kueue", "queues", qn, "max_execution_s"),
                    explicit_shown=f"{q.max_execution_s} s")
        if st.reclaim_lent_gpus is not None:
            mode = "Any" if st.reclaim_lent_gpus else "Never"
            led.set(("queue", qn, "reclaim_within_cohort"), mode, name, where + ("reclaim_lent_gpus",), mode,
                    explicit=q.reclaim_within_cohort if "reclaim_within_cohort" in q.model_fields_set else None,
                    explicit_path=("kubernetes", "kueue", "queues", qn, "reclaim_within_cohort"),
                    explicit_shown=q.reclaim_within_cohort)


def _shape(name: str, st: QueuePolicy, where: tuple) -> Iterator[Finding]:
    if not st.partitions and not st.queues:
        yield error("queue-policy-scope-empty", where, f"queue policy `{name}` covers no partition and no queue",
                    "list the Slurm partitions (partitions) and/or Kueue ClusterQueues (queues) it holds")
    if all(getattr(st, f) is None for f in ("max_job_hours",) + SLURM_ONLY + KUEUE_ONLY):
        yield error("queue-policy-says-nothing", where, f"queue policy `{name}` sets no limit",
                    "give it max_job_hours, max_gpus_per_job, max_gpus_per_user or reclaim_lent_gpus, or remove it")
    for f in SLURM_ONLY:
        if getattr(st, f) is not None and st.queues:
            yield error("queue-policy-not-enforceable", where + (f,),
                        f"queue policy `{name}` sets {f} on Kueue queues ({', '.join(st.queues)}): Kueue's quotas "
                        "are per ClusterQueue, no Kueue setting holds a user or a single job to a GPU count",
                        "state it in a statement for partitions only; a queue's own cap is its nominal_gpus and "
                        "borrowing_limit_gpus")
    if st.reclaim_lent_gpus is not None and st.partitions:
        yield error("queue-policy-not-enforceable", where + ("reclaim_lent_gpus",),
                    f"queue policy `{name}` sets reclaim_lent_gpus on Slurm partitions ({', '.join(st.partitions)}): "
                    "Slurm accounts do not lend GPUs to each other (GrpTRES is a cap), so there is nothing to reclaim",
                    "state it in a statement for queues only; Slurm's tiers preempt by QOS (slurm.qos.<name>.preempt)")


def compile_policy(d: Sections) -> tuple[Sections, list[Finding]]:
    """The sections with every statement compiled into its settings, and the findings (errors) that stop a
    statement from meaning what it says."""
    statements = d.service.queue_policy if d.service is not None else {}
    if not statements:
        return d, []
    led = _Ledger()
    findings: list[Finding] = []
    for name, st in statements.items():
        where = ("service", "queue_policy", name)
        findings += _shape(name, st, where)
        findings += _slurm(d, name, st, led, where)
        findings += _kueue(d, name, st, led, where)
    findings += led.findings
    return _compiled(d, led.values), findings


def _compiled(d: Sections, values: dict[tuple[str, str, str], tuple[Any, str, str]]) -> Sections:
    parts: dict[str, dict] = {}
    qos: dict[str, dict] = {}
    queues: dict[str, dict] = {}
    for (kind, obj, field), (value, _, _) in values.items():
        if kind == "partition":
            parts.setdefault(obj, {})[field] = slurm_time(value)
        elif kind == "QOS":
            qfield, tres = field.split(".", 1)
            qos.setdefault(obj, {}).setdefault(qfield, {})[tres] = value
        else:
            queues.setdefault(obj, {})[field] = value
    slurm, kubernetes = d.slurm, d.kubernetes
    if slurm is not None and (parts or qos):
        new_parts = {n: p.model_copy(update=parts[n]) if n in parts else p for n, p in slurm.partitions.items()}
        new_qos = {n: q.model_copy(update={f: {**getattr(q, f), **v} for f, v in qos[n].items()}) if n in qos else q
                   for n, q in slurm.qos.items()}
        slurm = slurm.model_copy(update={"partitions": new_parts, "qos": new_qos})
    if kubernetes is not None and queues:
        k = kubernetes
        new_queues = {n: q.model_copy(update=queues[n]) if n in queues else q for n, q in k.kueue.queues.items()}
        kubernetes = k.model_copy(update={"kueue": k.kueue.model_copy(update={"queues": new_queues})})
    return Sections(d.service, slurm, kubernetes)
