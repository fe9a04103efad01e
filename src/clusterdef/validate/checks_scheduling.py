"""Scheduling: partitions, queues, gang admission, topology for multi-node work."""

from __future__ import annotations

from typing import Iterable

from ClusterShell.NodeSet import NodeSet

from ..errors import Finding, error, warning
from .registry import Context, check


@check("slurm-partitions")
def slurm_partitions(ctx: Context) -> Iterable[Finding]:
    s = ctx.definition.slurm
    if s is None:
        return
    defaults = [n for n, p in s.partitions.items() if p.default]
    if len(defaults) > 1:
        yield error("partition-default-twice", ("slurm", "partitions", defaults[1], "default"),
                    f"partitions {', '.join(defaults)} are all marked default",
                    "mark exactly one partition `default: true`")
    elif not defaults:
        yield warning("partition-no-default", ("slurm", "partitions"),
                      "no partition is marked default; jobs without -p will be rejected",
                      "mark one partition `default: true`")


@check("multinode-topology")
def multinode_topology(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    if d.slurm is None:
        return
    for pname, p in d.slurm.partitions.items():
        if p.max_nodes == 1:
            continue
        for gname in p.node_groups:
            g = d.nodes.get(gname)
            if g is None:
                continue
            if g.placement is None:
                yield warning("partition-no-topology", ("slurm", "partitions", pname),
                              f"multi-node partition `{pname}` uses `{gname}`, which has no fabric placement",
                              "add `placement.fabric` and the fabric's switch topology, or set max_nodes: 1")
                continue
            missing = ctx.group_nodes[gname].difference(ctx.fabric_nodes.get(g.placement.fabric, NodeSet()))
            if missing:
                yield warning("partition-no-topology", ("slurm", "partitions", pname),
                              f"multi-node partition `{pname}`: {len(missing)} node(s) of `{gname}` ({missing}) "
                              f"are on no switch or block of fabric `{g.placement.fabric}`",
                              "list them under a leaf switch or block so placement is topology-aware")


@check("kueue")
def kueue(ctx: Context) -> Iterable[Finding]:
    k = ctx.definition.kubernetes
    if k is None:
        return
    for qname, q in k.kueue.queues.items():
        if q.workload_class == "training" and not q.gang:
            yield error("training-without-gang", ("kubernetes", "kueue", "queues", qname, "gang"),
                        f"training queue `{qname}` admits workloads without gang (all-or-nothing) admission",
                        "set `gang: true` so a distributed job starts whole or not at all")
    op = k.gpu_operator
    if op.mig_profile:
        if op.mig_strategy == "none":
            yield error("mig-strategy", ("kubernetes", "gpu_operator", "mig_strategy"),
                        f"mig_profile {op.mig_profile} is set but mig_strategy is none",
                        "set mig_strategy: single or mixed")
        for gname, g in ctx.definition.groups_of("kubernetes").items():
            hw = ctx.definition.hardware.get(g.hardware)
            if hw and hw.gpu and op.mig_profile not in hw.gpu.mig_profiles:
                yield error("mig-profile-unsupported", ("kubernetes", "gpu_operator", "mig_profile"),
                            f"GPU {hw.gpu.model} of node group `{gname}` has no MIG profile {op.mig_profile}",
                            f"supported: {', '.join(hw.gpu.mig_profiles) or 'none (no MIG)'}")


@check("mig-profiles-fit")
def mig_profiles_fit(ctx: Context) -> Iterable[Finding]:
    """A MIG profile's memory (the `Ngb` of `3g.40gb`) cannot exceed the GPU's: a typo or another GPU's list."""
    for hname, hw in ctx.definition.hardware.items():
        if hw.gpu is None:
            continue
        for i, profile in enumerate(hw.gpu.mig_profiles):
            gib = int(profile.split(".")[1].split("gb")[0])
            if gib > hw.gpu.memory_gib:
                yield error("mig-profile-exceeds-memory", ("hardware", hname, "gpu", "mig_profiles", i),
                            f"MIG profile {profile} needs {gib} GB but GPU {hw.gpu.model} has {hw.gpu.memory_gib} GiB",
                            "list the profiles `nvidia-smi mig -lgip` prints for this GPU "
                            "(an H100 80GB: 1g.10gb ... 7g.80gb)")
