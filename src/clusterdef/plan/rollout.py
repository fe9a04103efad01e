"""Rollout planning: layer order, canary pool across leaf switches (or blocks, or the scalable units
of a rail-optimised fabric), validation gates, topology-aligned waves with drain (whole leaves,
blocks or units per wave), and the rollback target exercised on the canary."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from .. import hostlist
from ..fabric.layout import leaves
from ..knowledge.floors import group_limit
from ..knowledge.services import gpu_groups, is_service_group, service_waves
from ..matrix.load import Matrix
from ..model import Definition
from ..model.upgrade import SMOKE_LAYERS


@dataclass
class Stage:
    name: str
    kind: str  # image | prepare | control-plane | canary | rollback-drill | wave | boot-default | driver-pool
    #            | driver-hold | deliver | nodes | admit
    hosts: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    provisioning: str = ""  # the stage's node group's: stateless stages point hosts at a build and reboot
    boot: dict = field(default_factory=dict)  # artefacts: to (the new build), back (rollback), groups (defaults)
    # GPU Operator driver pool of a Kubernetes canary: pool (its NVIDIADriver) and canary (`<pool>.canary`)
    driver: dict = field(default_factory=dict)
    # delivery steps (plan/delivery.py) of a `deliver` stage: rendered files onto the hosts that use them
    delivery: list[dict] = field(default_factory=list)
    services: list[str] = field(default_factory=list)  # a wave of service hosts: the services its gates check

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "nodes": len(self.hosts),
                "hosts": hostlist.fold(self.hosts) if self.hosts else "", "switches": self.switches,
                "steps": self.steps, "gates": self.gates, "provisioning": self.provisioning, "boot": self.boot,
                **({"driver": self.driver} if self.driver else {}),
                **({"delivery": self.delivery} if self.delivery else {}),
                **({"services": self.services} if self.services else {})}


def choose_canary(definition: Definition, affected_groups: list[str], group: str | None = None,
                  nodes: int | None = None) -> tuple[str, list[str], list[str], list[str]]:
    """(group, hosts, switches, warnings). Round-robin across the leaves of the canary group so
    that a multi-node collective crosses the fabric. `group` and `nodes` override the policy's
    (a Kubernetes driver pool's canary: in the pool, leaving some of it as the rest)."""
    policy = definition.upgrade.canary
    if nodes is not None:
        policy = policy.model_copy(update={"nodes": nodes})
    warnings: list[str] = []
    workers = gpu_groups(definition)  # the canary is never a service host (no GPU collective to run)
    group = group or (policy.node_group if policy.node_group in workers else None)
    if group is None:
        candidates = [g for g in affected_groups if g in workers] or list(workers) or list(definition.nodes)
        slurm = [g for g in candidates if definition.nodes[g].control_plane == "slurm"]
        group = (slurm or candidates)[0]
    by_leaf = [(name, hosts) for name, hosts in leaves(definition, group) if name != "-"] or \
        leaves(definition, group)
    placed = [n for n, _ in by_leaf if n != "-"]
    if len(placed) < policy.min_leaf_switches:
        g = definition.nodes[group]
        fabric = definition.network.fabrics.get(g.placement.fabric) if g.placement else None
        unit = {"rail": "scalable unit(s)", "block": "block(s)"}.get(fabric.topology.kind if fabric else "",
                                                                      "leaf switch(es)")
        warnings.append(f"canary group {group} is on {len(placed)} {unit}, fewer than "
                        f"upgrade.canary.min_leaf_switches={policy.min_leaf_switches}: the collective test "
                        "will not cross the fabric")
    use = by_leaf[:max(policy.min_leaf_switches, 1)]
    hosts: list[str] = []
    switches: list[str] = []
    i = 0
    while len(hosts) < policy.nodes and any(i < len(h) for _, h in use):
        for name, h in use:
            if i < len(h) and len(hosts) < policy.nodes:
                hosts.append(h[i])
                if name not in switches:
                    switches.append(name)
        i += 1
    if len(hosts) < policy.nodes:
        warnings.append(f"canary group {group} has only {len(hosts)} node(s) on the chosen switches; "
                        f"policy asks for {policy.nodes}")
    return group, hosts, switches, warnings


def waves(definition: Definition, hosts_by_group: dict[str, set[str]],
          skip: set[str]) -> list[tuple[list[str], list[str]]]:
    """Waves of at most `wave_size` nodes, and of no more than `max_unavailable_pct` of any partition, tenant's
    node groups or Kubernetes pool (floors.group_limit), that follow the topology: whole leaf switches (or
    blocks) fill a wave; a leaf larger than a wave is split. Groups never share a wave. Service hosts
    come last, in waves that keep one Slurm controller and an etcd quorum up (services.service_waves)."""
    out: list[tuple[list[str], list[str]]] = []
    services: list[str] = []
    for group in definition.nodes:
        want = hosts_by_group.get(group)
        if not want:
            continue
        if is_service_group(definition.nodes[group]):
            services += [h for h in hostlist.names(definition.nodes[group].hosts) if h in want and h not in skip]
            continue
        size = group_limit(definition, group)[0]
        cur: list[str] = []
        cur_sw: list[str] = []
        for name, hosts in leaves(definition, group):
            hosts = [h for h in hosts if h in want and h not in skip]
            if not hosts:
                continue
            if cur and len(cur) + len(hosts) > size:
                out.append((cur, cur_sw))
                cur, cur_sw = [], []
            while len(hosts) > size:
                out.append((hosts[:size], [name]))
                hosts = hosts[size:]
            cur += hosts
            cur_sw.append(name)
        if cur:
            out.append((cur, cur_sw))
    return out + [(w, []) for w in service_waves(definition, services, definition.upgrade.wave_size)]


def gates(definition: Definition, has_slurm: bool, has_k8s: bool, baseline: str | None) -> list[str]:
    """The rollout's gates in summary (the plan's `rollout.gates`); each stage's own, on its nodes and of its
    control plane, are `stage_gates`."""
    tol = definition.upgrade.baseline_tolerance.busbw_drop_pct
    out = ["node health check (GPUs visible, ECC, NVLink/fabric links, RDMA devices)",
           "drift: `clusterdef drift` shows the nodes on the target set"]
    if baseline:
        out.append(f"NCCL all_reduce_perf across the nodes vs baseline ({baseline}): "
                   f"`clusterdef baseline compare`, large messages within {tol:g}%, #wrong = 0")
    else:
        out.append("NCCL all_reduce_perf across the nodes (the target set has no baseline: record one)")
    if has_slurm:
        out.append("Slurm job (Slurm stages): `srun --nodelist=<the stage's nodes> --gres=gpu:<type>:N` completes")
    if has_k8s:
        out.append("Kubernetes GPU pod (Kubernetes stages): a pod requesting nvidia.com/gpu on each of the stage's "
                   "nodes runs nvidia-smi")
    for name, t in sorted(definition.upgrade.smoke_tests.items(), key=lambda kv: SMOKE_LAYERS.index(kv[1].layer)):
        where = f" on {', '.join(t.node_groups)}" if t.node_groups else ""
        out.append(f"smoke {t.layer}/{name}{where}: `{shlex.join(t.argv)}` exits 0 within {t.timeout_seconds} s")
    return out


def stage_gates(definition: Definition, hosts: list[str], groups: list[str], baseline_file: str | None,
                baselines: list) -> list[str]:
    """The gates of one node stage, on its own nodes (`hosts`, of node groups `groups`): Slurm nodes get a
    Slurm job, Kubernetes nodes a GPU pod pinned to each node, never the other's; the collective is compared
    with the set's baseline taken on the stage's own GPU and fabric, or says there is none; the smoke tests
    of its groups. `baselines`: the set's recorded entries (`Baseline`), from `baseline_file`."""
    d = definition
    where = hostlist.fold(hosts)
    tol = d.upgrade.baseline_tolerance.busbw_drop_pct
    out = [f"node health check on {where} (GPUs visible, ECC, NVLink/fabric links, RDMA devices)",
           f"drift: `clusterdef drift` shows {where} on the target set"]
    gpu_groups_ = [g for g in groups if d.hardware[d.nodes[g].hardware].gpu is not None]
    if gpu_groups_:
        group = gpu_groups_[0]
        own = own_baseline(d, baselines, group)
        if own is not None:
            out.append(f"NCCL all_reduce_perf across {where} vs the {own.test} baseline of set {own.set} on "
                       f"{group}'s hardware and fabric ({own.nodes} nodes, {baseline_file}): "
                       f"`{_compare_command(d, own, group)}`, large messages within {tol:g}%, #wrong = 0")
        else:
            out.append(f"NCCL all_reduce_perf across {where} (no baseline of the target set was taken on "
                       f"{_hardware_words(d, group)}: nothing to compare with; record one)")
    slurm = [g for g in groups if d.nodes[g].control_plane == "slurm"]
    k8s = [g for g in groups if d.nodes[g].control_plane == "kubernetes"]
    for g in slurm:
        gpu = d.hardware[d.nodes[g].hardware].gpu
        mine = [h for h in hosts if h in set(hostlist.names(d.nodes[g].hosts))]
        gres = f" --gres=gpu:{gpu.type}:{gpu.count}" if gpu else ""
        out.append(f"Slurm job: `srun --nodelist={hostlist.fold(mine)} --nodes={len(mine)}{gres}` on "
                   f"{hostlist.fold(mine)} completes")
    for g in k8s:
        gpu = d.hardware[d.nodes[g].hardware].gpu
        mine = [h for h in hosts if h in set(hostlist.names(d.nodes[g].hosts))]
        what = f"requesting nvidia.com/gpu: {gpu.count} runs nvidia-smi" if gpu else "runs"
        out.append(f"Kubernetes pod on each of {hostlist.fold(mine)} (spec.nodeName) {what}")
    for name, t in sorted(d.upgrade.smoke_tests.items(), key=lambda kv: SMOKE_LAYERS.index(kv[1].layer)):
        if t.node_groups and not set(t.node_groups) & set(groups):
            continue
        out.append(f"smoke {t.layer}/{name} on {where}: `{shlex.join(t.argv)}` exits 0 within {t.timeout_seconds} s")
    return out


def _compare_command(definition: Definition, own, group: str) -> str:
    """The comparison the gate runs: against the site's file (upgrade.baseline) or the set's, for the
    group and its fabric kind, so `baseline compare` refuses a run on another GPU model or fabric
    (baseline/compare.py hardware_problems)."""
    g = definition.nodes[group]
    fabric = definition.network.fabrics.get(g.placement.fabric) if g.placement else None
    src = (f"--baseline {shlex.quote(definition.upgrade.baseline)}" if definition.upgrade.baseline
           else f"--set {shlex.quote(own.set)}")
    kind = f" --fabric {fabric.kind}" if fabric and fabric.kind in ("infiniband", "roce", "ethernet") else ""
    return f"clusterdef baseline compare LOG {src} --node-group {shlex.quote(group)}{kind}"


def _hardware_words(definition: Definition, group: str) -> str:
    g = definition.nodes[group]
    gpu = definition.hardware[g.hardware].gpu
    fabric = definition.network.fabrics.get(g.placement.fabric) if g.placement else None
    return f"{gpu.model if gpu else 'no GPU'} over {fabric.kind if fabric else 'no fabric'}"


def own_baseline(definition: Definition, baselines: list, group: str):
    """The set's baseline entry taken on `group`'s GPU and fabric kind (the group's own entries first, then
    those of no group), or None."""
    mine = [b for b in baselines if b.node_group == group] or [b for b in baselines if not b.node_group]
    return next((b for b in mine if not _differences(definition, b, group)), None)


def _differences(definition: Definition, b, group: str) -> list[str]:
    import re

    g = definition.nodes[group]
    gpu = definition.hardware[g.hardware].gpu
    fabric = definition.network.fabrics.get(g.placement.fabric) if g.placement else None
    other = []
    if gpu and b.gpu_model and not re.search(rf"\b{re.escape(gpu.type)}\b", b.gpu_model, re.IGNORECASE):
        other.append(f"GPU {b.gpu_model} (the canary's: {gpu.model})")
    if fabric and b.fabric and b.fabric != fabric.kind:
        other.append(f"fabric {b.fabric} (the canary's: {fabric.kind})")
    return other


def rollback_target(definition: Definition, matrix: Matrix, old_set: str, new_set: str) -> tuple[str, list[str]]:
    """The set to return to under pressure: `previous` is the set the cluster runs now when it is
    validated, else the newest validated set other than the target."""
    problems: list[str] = []
    target = definition.upgrade.rollback.target
    if target == "previous":
        vs = matrix.sets.get(old_set)
        if vs is not None and vs.status == "validated":
            return old_set, problems
        valid = sorted(n for n, s in matrix.sets.items() if s.status == "validated" and n != new_set)
        if valid:
            return valid[-1], problems
        problems.append("no validated set to roll back to")
        return "", problems
    if target == new_set:
        problems.append(f"rollback target {target} is the upgrade target itself")
    return target, problems


def baseline_mismatch(definition: Definition, baselines: list, group: str) -> list[str]:
    """Where the recorded baseline the gate compares with was taken on another GPU or another kind of
    fabric than the canary's group has: a comparison of different hardware (`baselines`: the set's
    entries, `Baseline` objects; those of the group, else those of no group)."""
    if not group:
        return []
    mine = [b for b in baselines if b.node_group == group] or [b for b in baselines if not b.node_group]
    out = []
    for b in mine:
        other = _differences(definition, b, group)
        if other:
            out.append(f"the {b.test} baseline of set {b.set} ({b.nodes} nodes) was taken on another "
                       + " and ".join(other) + f": the canary gate on {group} compares different hardware")
    return out
