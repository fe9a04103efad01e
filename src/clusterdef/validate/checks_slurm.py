"""Slurm: keys valid for the set's Slurm major, GPU partitions, topology the major supports."""

from __future__ import annotations

from difflib import get_close_matches
from typing import Iterable

from .. import generations
from ..errors import Finding, error, warning
from ..knowledge import slurm as keywords
from .registry import Context, check

# Keys clusterdef writes as lines of their own, never as a passthrough parameter.
_LINE_KEYS = {"nodename", "partitionname", "nodeset", "downnodes", "frontendname", "poweraction", "slurmctldhost"}


def _major(ctx: Context) -> str | None:
    return ctx.chosen_set.slurm_major if ctx.chosen_set else None


@check("slurm-major")
def slurm_major(ctx: Context) -> Iterable[Finding]:
    vs = ctx.chosen_set
    if ctx.definition.slurm is None or vs is None:
        return
    major = vs.slurm_major
    if keywords.release_for(major) is None:
        yield error("slurm-major-unknown", ("cluster", "matrix"),
                    f"set {vs.name} runs Slurm {major}, older than every keyword list clusterdef has",
                    f"choose a set with Slurm {keywords.available()[0].rsplit('.', 1)[0]} or newer")


def _key_hint(key: str, major: str, kw: keywords.Keywords) -> str:
    where = keywords.majors_with_parameter(key)
    if where:
        newer = [v for v in where if keywords._key(v) > keywords._key(kw.version)]
        if newer and len(newer) == len(where):
            return (f"`{key}` exists from Slurm {newer[0].rsplit('.', 1)[0]}; this set runs {major}: "
                    "choose a newer set or drop it")
        return (f"`{key}` was removed after Slurm {where[-1].rsplit('.', 1)[0]}; this set runs {major}: "
                "drop it or use its replacement (see the Slurm release notes)")
    close = get_close_matches(key.lower(), list(kw.parameters), n=1)
    if close:
        return f"did you mean `{kw.spelled[close[0]]}`?"
    return f"see slurm.conf(5) of Slurm {major} for the keys it accepts"


# Partition and node parameters the definition has a field for (PartitionName=/NodeName= lines are
# rendered from these; passthrough keys are top-level slurm.conf keys only).
_PARTITION_FIELDS = {"allowaccounts": "allow_accounts", "maxtime": "max_time", "maxnodes": "max_nodes",
                     "prioritytier": "priority_tier", "qos": "qos", "default": "default", "nodes": "node_groups"}
_NODE_FIELDS = {
    "features": "nodes.<group> and hardware: each node's Features are its node group, hardware and GPU type "
                "names, so constrain jobs with those (sbatch --constraint=<group>)",
    "gres": "hardware.<type>.gpu (Gres=gpu:<type>:<count> is rendered from it)",
    "cpus": "hardware.<type>.cpu", "sockets": "hardware.<type>.cpu", "corespersocket": "hardware.<type>.cpu",
    "threadspercore": "hardware.<type>.cpu", "realmemory": "hardware.<type>.memory_gib",
}


def _misplaced(key: str, major: str, kw: keywords.Keywords) -> tuple[str, str]:
    """Message and hint for a passthrough key that is a PartitionName= or NodeName= parameter."""
    low = key.lower()
    if low in kw.partition:
        message = (f"`{key}` is a partition parameter (on a PartitionName= line), not a top-level slurm.conf key "
                   f"(Slurm {major})")
        if low in _PARTITION_FIELDS:
            return message, f"set it per partition: slurm.partitions.<name>.{_PARTITION_FIELDS[low]}"
        return message, (f"partition settings belong under slurm.partitions.<name>; the definition has no field "
                         f"for `{key}` yet, so drop it from passthrough (passthrough writes top-level keys only)")
    message = f"`{key}` is a node parameter (on a NodeName= line), not a top-level slurm.conf key (Slurm {major})"
    if low in _NODE_FIELDS:
        return message, f"it comes from {_NODE_FIELDS[low]}"
    return message, (f"node lines are rendered from nodes.<group> and hardware.<type>; the definition has no field "
                     f"for `{key}` yet, so drop it from passthrough (passthrough writes top-level keys only)")


@check("slurm-keys")
def slurm_keys(ctx: Context) -> Iterable[Finding]:
    s, major = ctx.definition.slurm, _major(ctx)
    if s is None or major is None:
        return
    kw = keywords.for_major(major)
    if kw is None:
        return
    for key in s.passthrough:
        path = ("slurm", "passthrough", key)
        if key.lower() in _LINE_KEYS:
            yield error("slurm-key-unknown", path,
                        f"`{key}` is a line of its own in slurm.conf, not a passthrough parameter",
                        "describe nodes, partitions and controllers in the definition (nodes, slurm.partitions, "
                        "slurm.controllers)")
        elif key.lower() not in kw.parameters and key.lower() in kw.partition | kw.node:
            yield error("slurm-key-misplaced", path, *_misplaced(key, major, kw))
        elif key.lower() not in kw.parameters:
            yield error("slurm-key-unknown", path,
                        f"`{key}` is not a slurm.conf key in Slurm {major} (the set's major; list from {kw.version})",
                        _key_hint(key, major, kw))


@check("slurm-gpu-partitions")
def slurm_gpu_partitions(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    if d.slurm is None:
        return
    for pname, p in d.slurm.partitions.items():
        groups = [(i, n) for i, n in enumerate(p.node_groups) if n in d.nodes and d.nodes[n].hardware in d.hardware]
        gpu = {n for _, n in groups if d.hardware[d.nodes[n].hardware].gpu}
        qos = d.slurm.qos.get(p.qos) if p.qos else None
        asks_gpus = qos is not None and any(k.startswith("gres/gpu") for k in qos.max_tres_per_user)
        if not gpu and not asks_gpus:
            continue
        for i, n in groups:
            if n not in gpu:
                yield error("partition-node-no-gpu", ("slurm", "partitions", pname, "node_groups", i),
                            f"GPU partition `{pname}` includes node group `{n}`, whose hardware "
                            f"`{d.nodes[n].hardware}` has no GPUs",
                            "put CPU-only node groups in a partition of their own")


@check("slurm-gpu-models")
def slurm_gpu_models(ctx: Context) -> Iterable[Finding]:
    """One warning per partition over node groups of several GPU models: the rendered job_submit.lua keeps
    a job that names no constraint on one model (docs/slurm.md, "Mixed GPU models")."""
    d = ctx.definition
    for pname, models in generations.mixed_partitions(d).items():
        alternatives = "|".join(models)
        yield warning("partition-mixes-gpu-models", ("slurm", "partitions", pname, "node_groups"),
                      f"partition `{pname}` mixes GPU models {', '.join(models)}: a job that names no "
                      f"--constraint gets --constraint=\"[{alternatives}]\" (one model per job, whichever "
                      "can start it; job_submit.lua), and a job that names one keeps it",
                      f"to choose a model, submit with --constraint={models[0]}; to let a job span models, "
                      f"--constraint=\"{alternatives}\"; or give each model a partition of its own")


@check("slurm-topology")
def slurm_topology(ctx: Context) -> Iterable[Finding]:
    d, vs = ctx.definition, ctx.chosen_set
    if d.slurm is None or vs is None:
        return
    major = vs.slurm_major
    kw = keywords.for_major(major)
    if kw is None:
        return
    fabrics = {g.placement.slurm_fabric for g in d.groups_of("slurm").values() if g.placement}
    known = [f for f in d.network.fabrics if f in fabrics]
    for fname in known:
        topo = d.network.fabrics[fname].topology
        kind = topo.slurm_plugin
        if not kw.supports_topology(kind):
            yield error("slurm-topology-unsupported",
                        ("network", "fabrics", fname, "topology", "slurm" if topo.kind == "rail" else "kind"),
                        f"Slurm {major} (set {vs.name}) has no topology/{kind} plugin",
                        "describe the fabric as a switch tree, or choose a set whose Slurm has topology/block "
                        "(23.11 or newer)")
    if len(known) > 1:
        yield warning("slurm-topology-fabrics", ("nodes",),
                      f"Slurm node groups sit on {len(known)} fabrics ({', '.join(known)}); topology.conf "
                      f"describes only `{known[0]}`",
                      "place the Slurm node groups on one fabric")


@check("slurm-preempt")
def slurm_preempt(ctx: Context) -> Iterable[Finding]:
    s = ctx.definition.slurm
    if s is None:
        return
    for qname, q in s.qos.items():
        if q.preempt and q.preempt_mode == "off":
            yield warning("qos-preempt-off", ("slurm", "qos", qname, "preempt_mode"),
                          f"QOS `{qname}` lists QOS to preempt but its preempt_mode is off",
                          "set preempt_mode: requeue (or cancel/suspend)")
        if not q.preempt and q.preempt_mode != "off":
            yield warning("qos-preempt-mode-unused", ("slurm", "qos", qname, "preempt_mode"),
                          f"QOS `{qname}` has preempt_mode {q.preempt_mode} but preempts no QOS",
                          "preempt_mode is how this QOS's jobs preempt the QOS in `preempt` (Slurm applies it to "
                          "the jobs preempted); list them, or remove preempt_mode")


@check("slurm-qos-preempt-self")
def slurm_qos_preempt_self(ctx: Context) -> Iterable[Finding]:
    """A QOS that lists itself in `preempt`: sacctmgr accepts it, and its jobs would preempt each other."""
    s = ctx.definition.slurm
    if s is None:
        return
    for qname, q in s.qos.items():
        for i, other in enumerate(q.preempt):
            if other == qname:
                yield error("qos-preempt-self", ("slurm", "qos", qname, "preempt", i),
                            f"QOS `{qname}` lists itself in `preempt`: its jobs would preempt each other",
                            "list only the lower-priority QOS it may preempt (remove its own name)")


@check("slurm-qos-tiers")
def slurm_qos_tiers(ctx: Context) -> Iterable[Finding]:
    """A partition's QOS is the tier of its jobs (job_submit.lua gives it to a job that names none, AllowQos
    keeps other partitions' tiers out): a design where that cannot hold is refused.
    - a tenant's account may submit to a partition bound to a QOS its association lacks: Slurm refuses
      every such job (Invalid qos), job_submit.lua having given it that QOS;
    - a QOS preempts another but no partition where its jobs run shares a node group with one where the
      other's run: preemption happens on shared resources only (preempt.shtml), so it never does;
    - with preempt_mode suspend, preempt/qos needs the preemptor in the same partition or in one of
      higher PriorityTier (preempt.shtml, PreemptType preempt/qos) on those shared nodes."""
    d = ctx.definition
    s = d.slurm
    if s is None:
        return
    for tname, t in d.tenants.items():
        ts = t.slurm
        if ts is None or not ts.qos:  # no list of its own: the account has every QOS of the cluster
            continue
        for pname, p in s.partitions.items():
            allowed = not p.allow_accounts or ts.account in p.allow_accounts
            if p.qos in s.qos and p.qos not in ts.qos and allowed:
                yield error("partition-qos-not-granted", ("tenants", tname, "slurm", "qos"),
                            f"tenant `{tname}` may submit to partition `{pname}`, whose jobs run under QOS "
                            f"`{p.qos}`, but its account has only {', '.join(ts.qos)}: Slurm refuses each such job "
                            "(Invalid qos)",
                            f"add `{p.qos}` to tenants.{tname}.slurm.qos, or keep the account out of the partition "
                            f"(slurm.partitions.{pname}.allow_accounts)")
    for qname, q in s.qos.items():
        if q.preempt_mode == "off":
            continue  # qos-preempt-off says so
        mine = s.qos_partitions(qname)
        for i, victim in enumerate(q.preempt):
            if victim not in s.qos or victim == qname:
                continue  # ref-qos, qos-preempt-self
            theirs = s.qos_partitions(victim)
            pairs = [(a, b) for a in mine for b in theirs
                     if set(s.partitions[a].node_groups) & set(s.partitions[b].node_groups)]
            where = (f"`{qname}` runs in {', '.join(mine)} and `{victim}` in {', '.join(theirs)}")
            if not pairs:
                yield error("qos-preempt-unreachable", ("slurm", "qos", qname, "preempt", i),
                            f"QOS `{qname}` preempts `{victim}` but their partitions share no node group ({where}): "
                            "a job preempts only jobs on the resources it needs, so this never happens",
                            "put a partition of each on the same node groups, or drop the preemption")
                continue
            if q.preempt_mode == "suspend" and not any(
                    a == b or s.partitions[a].priority_tier > s.partitions[b].priority_tier for a, b in pairs):
                yield error("qos-preempt-suspend-tier", ("slurm", "qos", qname, "preempt", i),
                            f"QOS `{qname}` suspends `{victim}`, but on the nodes they share no partition of "
                            f"`{qname}` has a higher PriorityTier than one of `{victim}` ({where}); preempt/qos "
                            "suspends only from the same partition or a higher PriorityTier",
                            f"raise the priority_tier of `{qname}`'s partition above `{victim}`'s, or use "
                            "preempt_mode: requeue")
