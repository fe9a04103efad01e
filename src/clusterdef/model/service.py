"""Service objectives: the operating model a change is measured against (issue 31, docs/service.md).

    service:
      timezone: Europe/Berlin           # IANA zone of every time below; explicit, never the machine's
      supported_hours: {days: [mon, tue, wed, thu, fri], start: "08:00", end: "18:00"}
      maintenance_windows:
        weekly: {days: [tue], start: "06:00", hours: 4}                      # the whole cluster
        secure-night: {days: [sat], start: "22:00", hours: 8, partitions: [secure]}
      recovery:                         # per authoritative data set of the backup section
        slurm: {rpo_hours: 24, rto_minutes: 120}
      approvers:                        # directory groups that approve a change of a disruption class
        reboot: [hpc-admins]
      queue_policy:                     # what users of these partitions and queues are held to
        training: {partitions: [train], max_job_hours: 48, max_gpus_per_user: 32}
        serving: {queues: [vision-serve], reclaim_lent_gpus: false}

`plan` lays the rollout's stages out in the windows (plan/windows.py); `validate` checks the windows open,
name real node groups and partitions, and that the recovery objectives can be met by the backup schedule
(RPO) and the last passed restore rehearsal (RTO) (validate/checks_service.py). A queue policy statement is
compiled into the Slurm and Kueue settings it names (queue_policy.py) before anything else reads them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Model, Name
from .identity import DirectoryGroup
from ..types import _pattern

Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
DAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # datetime.weekday() order
# An IANA time zone name (Area/Location, UTC); that it names a zone of the tz database is a check
# (service-timezone-unknown), so the finding can say which database was asked.
ZoneName = Annotated[str, _pattern(r"^[A-Za-z][A-Za-z0-9_+-]{0,30}(/[A-Za-z0-9_+-]{1,30}){0,2}$", 64,
                                   "an IANA time zone such as Europe/Berlin, America/New_York or UTC")]
ClockTime = Annotated[str, _pattern(r"^([01][0-9]|2[0-3]):[0-5][0-9]$", 5, "a local time HH:MM, 00:00 to 23:59")]
EndTime = Annotated[str, _pattern(r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$", 5,
                                  "a local time HH:MM, 00:01 to 24:00 (the end of the day)")]
# The plan's disruption classes (plan/transition.py), by a key a YAML file can carry.
DisruptionKey = Literal["reflash", "reboot", "driver-reload", "restart", "live"]


def minutes_of(clock: str) -> int:
    h, m = clock.split(":")
    return int(h) * 60 + int(m)


class Window(Model):
    """A maintenance window: opens every listed day at `start` (local time of `service.timezone`) for
    `hours` (elapsed hours: a window across a daylight-saving change is as long as any other)."""

    days: tuple[Day, ...] = Field(max_length=7)
    start: ClockTime
    hours: float = Field(ge=0, le=168)
    node_groups: tuple[Name, ...] = Field(default=(), max_length=256)
    """The node groups it covers; with `partitions`, the union. Neither: the whole cluster."""
    partitions: tuple[Name, ...] = Field(default=(), max_length=256)
    """Slurm partitions it covers (their node groups)."""

    @property
    def whole_cluster(self) -> bool:
        return not self.node_groups and not self.partitions


class SupportedHours(Model):
    """When the operators answer: `plan` marks each stage that runs outside these hours."""

    days: tuple[Day, ...] = Field(min_length=1, max_length=7)
    start: ClockTime
    end: EndTime


class Recovery(Model):
    rpo_hours: int = Field(ge=1, le=8760)
    """Recovery point objective: the most data (in hours) a restore may lose; the backup interval must not exceed it."""
    rto_minutes: int = Field(ge=1, le=525600)
    """Recovery time objective: the longest a restore may take; the last passed rehearsal must be faster."""


class QueuePolicy(Model):
    """A queue policy statement: what every job in these Slurm partitions and Kueue ClusterQueues is held to.
    It is compiled into the settings each scheduler enforces (queue_policy.py); a setting the definition also
    gives explicitly must agree with it, and a limit a scheduler has no setting for is refused, not implied."""

    partitions: tuple[Name, ...] = Field(default=(), max_length=256)
    """Slurm partitions it covers."""
    queues: tuple[Name, ...] = Field(default=(), max_length=256)
    """Kueue ClusterQueues (kubernetes.kueue.queues) it covers."""
    max_job_hours: float | None = Field(default=None, gt=0, le=8760)
    """The longest a job may run: Slurm partition MaxTime (jobs asking more are refused at submission,
    EnforcePartLimits=ALL); on Kueue the jobs must carry kueue.x-k8s.io/max-exec-time-seconds at most this."""
    max_gpus_per_job: int | None = Field(default=None, ge=1, le=1_000_000)
    """Slurm only: MaxTRESPerJob gres/gpu on the partition's QOS."""
    max_gpus_per_user: int | None = Field(default=None, ge=1, le=1_000_000)
    """Slurm only: MaxTRESPerUser gres/gpu on the partition's QOS (Kueue quotas are per queue, not per user)."""
    reclaim_lent_gpus: bool | None = None
    """Kueue only: a pending workload of the queue preempts other queues' workloads that borrowed its
    nominal quota (ClusterQueue preemption.reclaimWithinCohort Any), or never does (Never)."""

    @model_validator(mode="after")
    def _whole_minutes(self):
        if self.max_job_hours is not None and abs(self.max_job_hours * 60 - round(self.max_job_hours * 60)) > 1e-9:
            raise ValueError("max_job_hours must be a whole number of minutes (0.5 is 30 minutes)")
        return self

    @property
    def max_job_minutes(self) -> int | None:
        return None if self.max_job_hours is None else round(self.max_job_hours * 60)


class Service(Model):
    timezone: ZoneName
    """The IANA time zone of the windows and the supported hours (no default: the machine's zone is not the site's)."""
    supported_hours: SupportedHours | None = None
    maintenance_windows: dict[Name, Window] = Field(default={}, max_length=64)
    recovery: dict[Name, Recovery] = Field(default={}, max_length=256)
    """Per authoritative data set: `slurm`, `etcd` or a name of `backup.authoritative.sets`."""
    approvers: dict[DisruptionKey, tuple[DirectoryGroup, ...]] = Field(default={})
    """Directory groups whose approval a change of each disruption class needs (listed in the plan)."""
    queue_policy: dict[Name, QueuePolicy] = Field(default={}, max_length=256)
    """Queue policy statements, compiled into the Slurm and Kueue settings (docs/service.md#queue-policy)."""
