"""Slurm: controllers, partitions, QOS, accounting, priority, health check, passthrough keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Name, SlurmTime
from ..types import AbsPath, DbName, Fqdn, SlurmKey, SlurmValue, Tres, TresCount, UserName, Weight


class Partition(Model):
    node_groups: tuple[Name, ...] = Field(min_length=1)
    default: bool = False
    max_time: SlurmTime = "UNLIMITED"
    priority_tier: int = Field(default=1, ge=0, le=65533)
    qos: Name | None = None
    """Partition QOS (a name in slurm.qos)."""
    allow_accounts: tuple[Name, ...] = ()
    """Slurm accounts allowed to submit; empty means all."""
    max_nodes: int | None = Field(default=None, ge=1, le=131072)
    oversubscribe: Literal["no", "exclusive", "yes", "force"] | None = None
    """OverSubscribe: `exclusive` gives whole nodes to each job (training partitions)."""
    exclusive_user: bool = False
    """ExclusiveUser: nodes are never shared between users."""
    privileged: bool = False
    """Root-equivalent: the site's Prolog gives a job's user root on its nodes here. Only the groups of a
    `privileged` approval naming it may submit (AllowGroups; none without one: `privileged-without-approval`),
    and each job has its nodes to itself (OverSubscribe=EXCLUSIVE)."""
    """Largest job in nodes; anything above 1 makes this a multi-node partition."""


class Qos(Model):
    priority: Weight = 0
    max_tres_per_user: dict[Tres, TresCount] = {}
    """e.g. {"gres/gpu": 16}"""
    max_tres_per_job: dict[Tres, TresCount] = {}
    """MaxTRESPerJob, e.g. {"gres/gpu": 8}: a job asking more stays pending (QOSMaxGRESPerJob)."""
    max_wall: SlurmTime | None = None
    preempt: tuple[Name, ...] = ()
    """QOS names this QOS may preempt."""
    preempt_mode: Literal["off", "cancel", "requeue", "suspend"] = "off"


class Accounting(Model):
    storage: Literal["slurmdbd", "none"] = "slurmdbd"
    host: Fqdn | Literal[""] = ""
    port: int = Field(default=6819, ge=1, le=65535)
    """DbdPort: where slurmdbd listens."""
    storage_host: Fqdn = "localhost"
    """StorageHost: the MySQL/MariaDB server slurmdbd writes to."""
    storage_port: int = Field(default=3306, ge=1, le=65535)
    storage_user: UserName = "slurm"
    """StorageUser; its password is never here: `secrets.refs.slurmdbd_storage_pass` names the vault variable."""
    storage_loc: DbName = "slurm_acct_db"
    """StorageLoc: the database name (MySQL names: letters, digits, '_')."""
    enforce: tuple[Literal["associations", "limits", "qos", "safe", "wckeys"], ...] = (
        "associations", "limits", "qos", "safe",
    )


class Priority(Model):
    weight_fairshare: Weight = 10000
    weight_age: Weight = 1000
    weight_qos: Weight = 10000
    weight_job_size: Weight = 0
    weight_partition: Weight = 1000
    decay_half_life: SlurmTime = "7-0"


class HealthCheck(Model):
    enabled: bool = True
    interval_s: int = Field(default=300, ge=10, le=86400)
    node_state: Literal["ANY", "IDLE", "ALLOC", "MIXED", "CYCLE"] = "ANY"
    program: AbsPath = "/usr/sbin/clusterdef-nodecheck"


class Slurm(Model):
    controllers: tuple[Fqdn, ...] = Field(min_length=1, max_length=8)
    partitions: dict[Name, Partition] = Field(min_length=1)
    qos: dict[Name, Qos] = {}
    accounting: Accounting = Field(default_factory=Accounting)
    priority: Priority = Field(default_factory=Priority)
    health_check: HealthCheck = Field(default_factory=HealthCheck)
    passthrough: dict[SlurmKey, SlurmValue | bool | TresCount] = {}
    """Rare slurm.conf keys emitted as written (checked against the keyword list of the set's major)."""

    # A partition's `qos` binds a tier to it: its jobs run under that QOS (job_submit.lua gives it to a
    # job that names none; AllowQos refuses another partition's tier there). Slurm alone would run them
    # under the association's DefaultQOS: a partition QOS lends only its limits (qos.shtml, Partition QOS).

    def dbd_host(self) -> str:
        """Where slurmdbd runs: slurm.conf's AccountingStorageHost, slurmdbd.conf's DbdHost (the accounting
        host, else the first controller)."""
        return self.accounting.host or self.controllers[0]

    def free_qos(self) -> list[str]:
        """QOS no partition is bound to: tiers a job asks for with --qos, in any partition."""
        bound = {p.qos for p in self.partitions.values() if p.qos}
        return [q for q in self.qos if q not in bound]

    def allow_qos(self, partition: str) -> list[str]:
        """AllowQos of a partition: its QOS and the free ones; none (all) for a partition without a QOS."""
        p = self.partitions[partition]
        return [p.qos, *self.free_qos()] if p.qos else []

    def qos_partitions(self, qos: str) -> list[str]:
        """Partitions where jobs of a QOS run: every partition for a free QOS, else the ones bound to it."""
        if qos in self.free_qos():
            return list(self.partitions)
        return [n for n, p in self.partitions.items() if p.qos == qos]
