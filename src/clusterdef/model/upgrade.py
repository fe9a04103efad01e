"""Upgrade policy: canary, waves, drain, baseline tolerances, rollback."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, field_validator

from .base import Model, Name
from ..types import CommandArg, RelPath, SetName

# The order smoke tests run in after each step that changed nodes: a later layer is only meaningful
# when the ones below it work (no NCCL test on a node whose GPUs or HCAs are missing).
SmokeLayer = Literal["hardware", "storage", "rdma", "collective", "application"]
SMOKE_LAYERS = get_args(SmokeLayer)


class Canary(Model):
    nodes: int = Field(default=2, ge=2, le=131072)
    """At least two nodes so the collective test crosses the fabric."""
    min_leaf_switches: int = Field(default=2, ge=1, le=4096)
    node_group: Name | None = None


class Drain(Model):
    timeout_minutes: int = Field(default=120, ge=1, le=10080)
    grace_seconds: int = Field(default=300, ge=0, le=86400)
    running_jobs: Literal["finish", "requeue"] = "finish"
    """What a Slurm node's reboot does with the jobs running on it (docs/rollout.md, "Draining"): `finish` waits
    for them (`scontrol reboot ASAP`: no new job starts there), `requeue` requeues them (`scontrol requeue`) and
    reboots once they left. Never killed either way."""


class Timing(Model):
    """What the plan's duration estimate assumes (docs/upgrades.md, "Duration and capacity over time"); measure
    your own and set them. A wave takes its drain (drain.timeout_minutes, the bound apply waits), its move
    (reboot or image boot) and its gates."""
    reboot_minutes: int = Field(default=15, ge=1, le=1440)
    """An in-place reboot, POST to the node back in service (an 8-GPU server's POST with its BMC, NVSwitch and
    HCA firmware checks takes most of it)."""
    image_boot_minutes: int = Field(default=10, ge=1, le=1440)
    """A stateless node pointed at a new build: network boot of the image, no package installation."""
    gates_minutes: int = Field(default=20, ge=0, le=1440)
    """Health check, NCCL test across the wave, Slurm job, GPU pod and smoke tests."""
    step_minutes: int = Field(default=5, ge=0, le=1440)
    """A cluster-wide step (prepare, control plane, delivery, boot defaults) and a service hosts' wave."""


class Tolerances(Model):
    busbw_drop_pct: float = Field(default=5.0, ge=0, le=100)
    """A slowdown beyond this against the recorded baseline fails the gate."""


class Rollback(Model):
    target: SetName = "previous"
    """`previous` (the last validated set) or a set name."""
    exercise_on_canary: bool = True


class SmokeTest(Model):
    """A command `clusterdef apply` runs on every node of a wave after its gates (playbooks/smoke.yml),
    as argv without a shell; a non-zero exit fails the wave. Its result per host is in the run record."""
    layer: SmokeLayer
    argv: list[CommandArg] = Field(min_length=1, max_length=64)
    """The program (an absolute path) and its arguments, one per item."""
    timeout_seconds: int = Field(default=600, ge=1, le=86400)
    node_groups: list[Name] = Field(default_factory=list, max_length=1024)
    """Only on these node groups' hosts (empty: every host of the wave)."""

    @field_validator("argv")
    @classmethod
    def _program_is_absolute(cls, argv: list[str]) -> list[str]:
        if not argv[0].startswith("/") or any(p in ("", ".", "..") for p in argv[0].split("/")[1:]):
            raise ValueError(f"the program {argv[0]!r} must be an absolute path (/usr/bin/nvidia-smi): "
                             "no PATH lookup on the node")
        return argv


class Upgrade(Model):
    canary: Canary = Field(default_factory=Canary)
    wave_size: int = Field(default=64, ge=1, le=131072)
    max_parallel_waves: int = Field(default=1, ge=1, le=1024)
    max_unavailable_pct: int = Field(default=25, ge=1, le=100)
    """The most of any Slurm partition, tenant-owned node group or Kueue flavor (pool) one wave takes down, in
    percent, rounded down, at least one node; the canary (`canary.nodes`) is its own policy. 25: the GPU
    Operator's default for its own driver upgrades (upgradePolicy.maxUnavailable, values-v26.3.3.yaml), so a
    tenant keeps at least three quarters of what it bought while the rollout runs."""
    kubernetes_wave_size: int = Field(default=1, ge=1, le=131072)
    """Kubernetes GPU nodes the GPU Operator upgrades at once (its maxParallelUpgrades and maxUnavailable)."""
    drain: Drain = Field(default_factory=Drain)
    timing: Timing = Field(default_factory=Timing)
    baseline_tolerance: Tolerances = Field(default_factory=Tolerances)
    baseline: RelPath | None = None
    """The site's own recorded baseline file (beside the definition), which the collective gates compare
    with instead of the target set's baseline in the shared matrices. Every entry names the GPU model and
    fabric kind it was taken on (`clusterdef baseline record LOG --set S --node-group G --fabric KIND -o
    FILE`); each stage is compared with the entry of its own GPU model and fabric, never another's."""
    rollback: Rollback = Field(default_factory=Rollback)
    smoke_tests: dict[Name, SmokeTest] = Field(default_factory=dict, max_length=256)
    """Run in layer order (hardware, storage, rdma, collective, application) after every gate."""
