"""Observability: the thresholds of the rendered Prometheus alerts that the hardware model and the
validated set do not give (queue wait, failure ratio, free space), and per-hardware overrides of the
GPU temperature and power thresholds derived from the GPU model's limits (knowledge/gpu_limits.yaml)."""

from __future__ import annotations

from pydantic import Field

from .base import Model, Name
from ..types import Fqdn


class GpuThresholds(Model):
    temperature_c: int | None = Field(default=None, ge=30, le=110)
    """Alert above this GPU temperature (default: the model's max operating temperature - margin)."""
    power_w: int | None = Field(default=None, ge=50, le=3000)
    """Alert above this power draw per GPU (default: the model's TDP x gpu_power_percent_of_tdp)."""


class Observability(Model):
    namespace: Name = "monitoring"
    """Namespace of the PrometheusRule and the node-exporter PodMonitor (where Prometheus runs)."""
    gpu_temperature_margin_c: int = Field(default=5, ge=0, le=40)
    gpu_power_percent_of_tdp: int = Field(default=100, ge=50, le=100)
    hardware: dict[Name, GpuThresholds] = Field(default={}, max_length=256)
    queue_wait_minutes: int = Field(default=60, ge=5, le=10080)
    """Pending work older than this (per partition, ClusterQueue and tenant) alerts."""
    job_failure_percent: int = Field(default=20, ge=1, le=95)
    """Share of a partition's finished jobs that failed, above which it alerts."""
    filesystem_free_percent: int = Field(default=10, ge=1, le=50)
    alertmanagers: tuple[Fqdn, ...] = Field(default=(), max_length=8)
    """Alertmanager hosts (port 9093) the Prometheus of the `prometheus` service hosts sends alerts to
    (observability/prometheus.yml); none: the alerts fire in Prometheus and are shown there only."""
    fabric_transmit_wait_per_s: int = Field(default=1_000_000, ge=1, le=10**12)
    """IB/RoCE port_transmit_wait ticks per second above which a port is congested (pause storm)."""
