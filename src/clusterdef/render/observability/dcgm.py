"""The dcgm-exporter counters list: dcgm-exporter's default counters with every field the rendered
rules read enabled. The GPU Operator values carry it as dcgmExporter.config (name, create, data: the
chart creates the ConfigMap and points the exporter at it; render/kubernetes/gpu_operator.py); Slurm
nodes run dcgm-exporter with `-f` on the same file (observability/dcgm/dcgm-metrics.csv)."""

from __future__ import annotations

import re
from pathlib import Path

from ...resolve import Resolved

CONFIGMAP = "clusterdef-dcgm-metrics"
CSV_KEY = "dcgm-metrics.csv"  # the ConfigMap key the GPU Operator reads (and the rendered file name)
DEFAULTS = Path(__file__).with_name("dcgm-default-counters.csv")
_FIELD = re.compile(r"^(#\s*)?(DCGM_[A-Z0-9_]+)\s*,")
_METRIC = re.compile(r"\bDCGM_[A-Z0-9_]+\b")


def dcgm_metrics(resolved: Resolved) -> set[str]:
    """DCGM fields the rendered alerts read."""
    from .alertrules import alerts

    return {m for a in alerts(resolved) for m in _METRIC.findall(a.expr)}


def counters_csv(resolved: Resolved) -> str:
    need = dcgm_metrics(resolved)
    out, seen = [], set()
    for line in DEFAULTS.read_text().splitlines():
        m = _FIELD.match(line)
        if m and m.group(1) and m.group(2) in need:
            line = line[m.end(1):]
        if m:
            seen.add(m.group(2))
        out.append(line)
    missing = sorted(need - seen)
    if missing:
        raise ValueError(f"DCGM fields not in dcgm-exporter's default counters list: {missing}")
    return "\n".join(out) + "\n"
