"""Upgrade policy: canary, waves, drain, baseline tolerances, rollback."""

from __future__ import annotations

from pydantic import Field

from .base import Model, Name
from .types import SetName


class Canary(Model):
    nodes: int = Field(default=2, ge=2, le=131072)
    """At least two nodes so the collective test crosses the fabric."""
    min_leaf_switches: int = Field(default=2, ge=1, le=4096)
    node_group: Name | None = None


class Drain(Model):
    timeout_minutes: int = Field(default=120, ge=1, le=10080)
    grace_seconds: int = Field(default=300, ge=0, le=86400)


class Tolerances(Model):
    busbw_drop_pct: float = Field(default=5.0, ge=0, le=100)
    """A slowdown beyond this against the recorded baseline fails the gate."""


class Rollback(Model):
    target: SetName = "previous"
    """`previous` (the last validated set) or a set name."""
    exercise_on_canary: bool = True


class Upgrade(Model):
    canary: Canary = Canary()
    wave_size: int = Field(default=64, ge=1, le=131072)
    max_parallel_waves: int = Field(default=1, ge=1, le=1024)
    kubernetes_wave_size: int = Field(default=1, ge=1, le=131072)
    """Kubernetes GPU nodes the GPU Operator upgrades at once (its maxParallelUpgrades and maxUnavailable)."""
    drain: Drain = Drain()
    baseline_tolerance: Tolerances = Tolerances()
    rollback: Rollback = Rollback()
