"""Slurm: controllers, partitions, QOS, accounting, priority, health check, passthrough keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Name, SlurmTime


class Partition(Model):
    node_groups: tuple[str, ...] = Field(min_length=1)
    default: bool = False
    max_time: SlurmTime = "UNLIMITED"
    priority_tier: int = Field(default=1, ge=0, le=65533)
    qos: str | None = None
    """Partition QOS (a name in slurm.qos)."""
    allow_accounts: tuple[str, ...] = ()
    """Slurm accounts allowed to submit; empty means all."""
    max_nodes: int | None = Field(default=None, ge=1)
    """Largest job in nodes; anything above 1 makes this a multi-node partition."""


class Qos(Model):
    priority: int = Field(default=0, ge=0)
    max_tres_per_user: dict[str, int] = {}
    """e.g. {"gres/gpu": 16}"""
    max_wall: SlurmTime | None = None
    preempt: tuple[str, ...] = ()
    """QOS names this QOS may preempt."""
    preempt_mode: Literal["off", "cancel", "requeue", "suspend"] = "off"


class Accounting(Model):
    storage: Literal["slurmdbd", "none"] = "slurmdbd"
    host: str = ""
    port: int = Field(default=6819, ge=1, le=65535)
    enforce: tuple[Literal["associations", "limits", "qos", "safe", "wckeys"], ...] = (
        "associations", "limits", "qos", "safe",
    )


class Priority(Model):
    weight_fairshare: int = Field(default=10000, ge=0)
    weight_age: int = Field(default=1000, ge=0)
    weight_qos: int = Field(default=10000, ge=0)
    weight_job_size: int = Field(default=0, ge=0)
    weight_partition: int = Field(default=1000, ge=0)
    decay_half_life: str = "7-0"


class HealthCheck(Model):
    enabled: bool = True
    interval_s: int = Field(default=300, ge=10)
    node_state: Literal["ANY", "IDLE", "ALLOC", "MIXED", "CYCLE"] = "ANY"
    program: str = "/usr/sbin/clusterdef-nodecheck"


class Slurm(Model):
    controllers: tuple[str, ...] = Field(min_length=1)
    partitions: dict[Name, Partition] = Field(min_length=1)
    qos: dict[Name, Qos] = {}
    accounting: Accounting = Accounting()
    priority: Priority = Priority()
    health_check: HealthCheck = HealthCheck()
    passthrough: dict[str, str | int | bool] = {}
    """Rare slurm.conf keys emitted as written (checked against the keyword list of the set's major)."""
