"""Pulumi program: deploys the Kubernetes side of a clusterdef definition (GPU Operator, Network
Operator, Kueue, tenants). Stack config `clusterdef:definition` names the definition file; every
resource argument comes from clusterdef's pure renderers (the same data `clusterdef render` writes)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pulumi  # noqa: E402

from program import deploy  # noqa: E402

deploy(pulumi.Config("clusterdef").get("definition") or "clusters/lab.yaml")
