"""GPU models (generations) per Slurm partition and Kueue flavor: which mix nodes of several models.

A model is the hardware's GPU type (`hardware.<name>.gpu.type`): the Slurm GRES type and one of
each node's Features (render/slurm: Features=<group>,<hardware>,<gpu type>). A partition whose
node groups carry more than one type mixes models; job_submit.lua keeps a job that names no
constraint on one of them (sbatch(1) --constraint, "Matching OR": `[h100|h200]`)."""

from __future__ import annotations

from .model.definition import Definition


def group_models(d: Definition, groups) -> list[str]:
    """The distinct GPU types of node groups, in their order (groups that do not resolve, or have no
    GPU, add nothing)."""
    out: list[str] = []
    for gname in groups:
        g = d.nodes.get(gname)
        hw = d.hardware.get(g.hardware) if g else None
        if hw is not None and hw.gpu is not None and hw.gpu.type not in out:
            out.append(hw.gpu.type)
    return out


def partition_models(d: Definition, partition: str) -> list[str]:
    """The distinct GPU types of a partition's node groups, in the order the partition lists its groups."""
    return group_models(d, d.slurm.partitions[partition].node_groups if d.slurm else [])


def gpu_partitions(d: Definition) -> dict[str, list[str]]:
    """Partition -> its GPU types, for every partition with GPU nodes."""
    if d.slurm is None:
        return {}
    return {p: models for p in d.slurm.partitions if (models := partition_models(d, p))}


def mixed_partitions(d: Definition) -> dict[str, list[str]]:
    """Partition -> its GPU types, for the partitions that mix models."""
    return {p: m for p, m in gpu_partitions(d).items() if len(m) > 1}


def mixed_flavors(d: Definition) -> dict[str, list[str]]:
    """Kueue flavor -> its GPU types, for the flavors over node groups of several models."""
    if d.kubernetes is None:
        return {}
    return {f: m for f, fl in d.kubernetes.kueue.flavors.items() if len(m := group_models(d, fl.node_groups)) > 1}
