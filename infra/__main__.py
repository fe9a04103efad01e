"""Pulumi program: reads the same definition clusterdef validates and renders.

Today it validates the definition and exports the validated set it runs; the
Kubernetes resources (GPU Operator, Network Operator, Kueue, tenants) are built
from the pure renderers once the Kubernetes target exists (issue 4)."""

from __future__ import annotations

import pulumi

from clusterdef.validate.pipeline import validate_file

config = pulumi.Config("clusterdef")
definition_file = config.get("definition") or "clusters/lab.yaml"
result = validate_file(definition_file)
if not result.ok:
    raise pulumi.RunError("\n".join(f"{f.where}: {f.code}: {f.message} (hint: {f.hint})" for f in result.errors))

pulumi.export("cluster", result.definition.cluster.name)
pulumi.export("validated_set", result.definition.cluster.matrix)
pulumi.export("components", result.matrix.sets[result.definition.cluster.matrix].components.model_dump(exclude_none=True))
