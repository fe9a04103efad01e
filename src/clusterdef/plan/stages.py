"""The rollout stages of a plan, from what the change touches (`Scope`): image build and
publish, prepare (the rollback point), canary and rollback drill, the control plane, the
waves, and the boot defaults. Each builder is one stage kind; make_plan (plan/__init__.py)
puts them in order. Stateless groups whose image gets a new build are reimaged (boot pointer,
reboot) rather than upgraded in place."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import hostlist
from ..model import Definition
from ..render.kubernetes.common import L_DRIVER_POOL
from ..render.kubernetes.gpu_operator import (UPGRADE_DONE, UPGRADE_FAILED, UPGRADE_SKIP, UPGRADE_STATE, canary_pool,
                                              pools_of, upgrade_policy)
from .diff import Change
from .images import kept_builds
from ..knowledge.services import host_services, service_hosts
from ..knowledge.services import table as service_table
from .rollout import Stage, choose_canary, stage_gates, waves
from .transition import LAYERS, LIVE, REBOOT, REFLASH, RESTART, Problem, Transition

HOW = {"firmware": "reflash, power-cycle", "driver": "reboot", "cuda-nccl": "reboot into the image",
       "container-toolkit": "restart containerd", "kubernetes": "restart kubelet", "slurm": "restart slurmd"}


def host_order(d: Definition):
    order = {h: i for i, h in enumerate(h for g in d.nodes.values() for h in hostlist.names(g.hosts))}
    return lambda h: order.get(h, 1 << 30)


def nodes_by_group(d: Definition, layer_changes: list[dict], changes: list[Change]) -> dict[str, set[str]]:
    """The nodes that need a node-level stage (a layer or change that reboots, reflashes or
    restarts them), by node group."""
    node_hosts: set[str] = set()
    for lc in layer_changes:
        if lc["disruption"] in (REBOOT, REFLASH, RESTART):
            node_hosts.update(lc["_hosts"])
    for c in changes:
        if c.disruption in (REBOOT, REFLASH):
            node_hosts.update(h for h in c.hosts)
    group_of = {h: g for g, n in d.nodes.items() for h in hostlist.names(n.hosts)}
    by_group: dict[str, set[str]] = {}
    for h in node_hosts:
        if h in group_of:
            by_group.setdefault(group_of[h], set()).add(h)
    return by_group


@dataclass
class Scope:
    """What the change touches, read by every stage builder."""

    d: Definition
    new_set_name: str
    layer_changes: list[dict]
    changes: list[Change]
    rb_set: str | None
    by_group: dict[str, set[str]]
    new_builds: dict
    old_builds: dict
    rebuilt: set[str]
    gate_list: list[str]
    # GPU Operator driver pools whose NVIDIADriver moves: pool -> (driver, new driver); and the
    # rollback target's driver per pool (a drill returns a canary by label only to the pool's driver)
    moved: dict[str, tuple[str, str]] = field(default_factory=dict)
    rb_pools: dict[str, str] = field(default_factory=dict)
    # the target set's recorded baselines (`Baseline` entries) and their file: each stage's collective gate
    baselines: list = field(default_factory=list)
    baseline_file: str | None = None
    # operator-owned Kubernetes GPU nodes no canary moves, held out of the driver upgrade (hold_stage): host -> pool
    held: dict[str, str] = field(default_factory=dict)
    group_of: dict[str, str] = field(init=False)
    pool_of: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.group_of = {h: g for g, n in self.d.nodes.items() for h in hostlist.names(n.hosts)}
        self.pool_of = pools_of(self.d)

    def driver_of(self, group: str) -> dict:
        """The moving driver pool of `group` (its canary labels), or {}."""
        pool = self.pool_of.get(group) if group else None
        return {"pool": pool, "canary": canary_pool(pool)} if pool in self.moved else {}

    def driver_steps(self, hosts: list[str], driver: dict, how: str) -> list[str]:
        """Kubernetes canary steps: `to` applies the pool's canary NVIDIADriver and labels the hosts into
        it; `back` labels them back into the pool (its NVIDIADriver still runs the old driver); `again`
        labels them into the canary once more."""
        if not driver:
            return []
        pool, canary = driver["pool"], driver["canary"]
        frm, to = self.moved[pool]
        label = f"label {hostlist.fold(hosts)} {L_DRIVER_POOL}="
        if how == "back":
            return [f"{label}{pool}: back on NVIDIADriver {pool} (driver {frm}, the rollback target's)"]
        move = [f"{label}{canary}: the GPU Operator moves them to driver {to} (its upgrade controller drains "
                f"them); the rest of pool {pool} stays on driver {frm}"]
        if how == "again":
            return move
        return [f"apply NVIDIADriver {canary} of the new tree (driver {to}); NVIDIADriver {pool} keeps driver "
                f"{frm} until the control-plane stage", *move]

    def gates_for(self, hosts: list[str]) -> list[str]:
        """The gates of a stage on `hosts`: those of their control plane, on them (rollout.stage_gates)."""
        groups = list(dict.fromkeys(self.group_of[h] for h in hosts if h in self.group_of))
        return stage_gates(self.d, hosts, groups, self.baseline_file, self.baselines)

    def stage_group(self, hosts) -> str:
        groups = {self.group_of.get(h) for h in hosts}
        return next(iter(groups)) or "" if len(groups) == 1 else ""

    def provisioning(self, group: str) -> str:
        return self.d.nodes[group].provisioning if group else ""

    def reimaged(self, group: str) -> bool:
        """A stateless group whose image gets a new build: its stages point hosts and reboot."""
        return bool(group) and self.d.nodes[group].provisioning == "stateless" and self.d.nodes[group].image in \
            self.rebuilt

    def back_build(self, group: str):
        """The build a stateless group's rollback boots: the running one when the rollback set is
        the running set, else the published build of the rollback set."""
        image = self.d.nodes[group].image
        before = self.old_builds.get(image)
        if before and before.set == self.rb_set:
            return before
        kept = [b for b in kept_builds(self.d, image, self.new_builds[image]).values() if b.set == self.rb_set]
        return kept[0] if kept else None

    def layer_steps(self, hosts: set[str], include_daemons: bool, image_layers: bool = False) -> list[str]:
        """The layers a stage applies in order; with `image_layers` (a stateless group) every layer
        but firmware is carried by the image's new build, so it is one line, not a role run."""
        steps = []
        carried: list[str] = []
        for layer, _ in LAYERS:
            parts = self._layer_parts(layer, hosts, include_daemons)
            if parts and image_layers and layer != "firmware":
                carried += parts
            elif parts:
                steps.append(f"layer {layer}: " + "; ".join(parts) + f" ({self._how(layer, hosts)}, then health check)")
        if carried:
            steps.append("in the image: " + "; ".join(carried) + " (the new build carries them)")
        return steps

    def _how(self, layer: str, hosts: set[str]) -> str:
        """How a layer takes effect on these hosts: the toolkit restarts containerd only where it runs."""
        if layer == "container-toolkit":
            restart = [h for lc in self.layer_changes if lc["component"] == "container_toolkit"
                       for h in (lc.get("_by_class") or {lc["disruption"]: lc["_hosts"]}).get(RESTART, ())]
            if not hosts.intersection(restart):
                return "package update, nothing to restart: no containerd on these nodes"
        return HOW[layer]

    def _layer_parts(self, layer: str, hosts: set[str], include_daemons: bool) -> list[str]:
        parts = []
        for lc in self.layer_changes:
            if lc["layer"] != layer or not hosts.intersection(lc["_hosts"]):
                continue
            if lc["component"] == "gpu_operator" or (
                    not include_daemons and lc["component"] in ("slurm", "kubernetes")):
                continue  # the GPU Operator is cluster-wide: the control-plane stage upgrades it
            what = lc["component"] + (f" on {lc['hardware']}" if "hardware" in lc else "")
            parts.append(f"{what} {lc['from']} -> {lc['to']}")
        by_layer = {"driver": REBOOT, "firmware": REFLASH}
        if layer in by_layer:
            parts += [f"{c.dotted}: {c.old} -> {c.new}" for c in self.changes
                      if c.disruption == by_layer[layer] and hosts.intersection(c.hosts)]
        return parts


def boot_steps(hosts: list[str], build, why: str) -> list[str]:
    return [f"point {hostlist.fold(hosts)} at build {build.artefact} (boot pointers "
            f"ipxe/hosts/host-MAC.ipxe; {why})",
            f"reboot {hostlist.fold(hosts)}: they boot {build.artefact} (set {build.set}); nothing is "
            "installed on the nodes"]


def image_stage(image_changes: list[dict]) -> Stage:
    """Build and publish every image whose build changes, first: nothing moves until the boot
    server holds the new build beside the one it replaces."""
    steps = []
    for ic in image_changes:
        to, frm = ic["to"], ic["from"]
        what = f"{frm['version']} (set {frm['set']}) -> {to['version']} (set {to['set']})" if frm else \
            f"{to['version']} (set {to['set']}, new)"
        steps.append(f"build {to['artefact']}: image {ic['image']} {what}, `sh images/{ic['image']}/build.sh "
                     "ARTEFACT_DIR`")
        if ic["pins"]:
            steps.append(f"image {ic['image']} pins: " + "; ".join(
                f"{p['package']} {p['from'] or '(new)'} -> {p['to'] or '(dropped)'}" for p in ic["pins"]))
        if ic["packages_added"] or ic["packages_removed"]:
            steps.append(f"image {ic['image']} packages: " + ", ".join(
                [f"+{p}" for p in ic["packages_added"]] + [f"-{p}" for p in ic["packages_removed"]]))
        if ic["kernel"]["from"] != ic["kernel"]["to"]:
            steps.append(f"image {ic['image']} kernel: {ic['kernel']['from'] or '(new)'} -> {ic['kernel']['to']}")
        keep = f"; keep {frm['artefact']} (the running build)" if frm else ""
        steps.append(f"publish {to['artefact']}.vmlinuz and .initrd under images/ and the new tree's "
                     f"pxe/ipxe/images/ and pxe/published on the boot server{keep}; group defaults stay on the "
                     "running build until the boot defaults stage")
    return Stage("image build and publish", "image", steps=steps)


def prepare_stage(point: str, old_set: str, rb_set: str | None) -> Stage:
    """The rollback point (`point`: the old definition and tree), every node's versions, the dumps."""
    return Stage("prepare", "prepare", steps=[
        f"rollback point: {point}; apply copies both definitions and trees into its snapshot before anything runs",
        "snapshot every node's versions (snapshot.yml: gpu_facts, into the run record; a node without them "
        "halts the run)",
        "slurmdbd database dump, etcd snapshot (prepare.yml)",
        "record versions: `clusterdef drift --facts ...` shows every node on "
        f"{old_set} (or lists the exceptions)",
        f"check the rollback target {rb_set or '(none)'} is on hand (packages, images, firmware bundles)",
    ])


@dataclass
class Canary:
    hosts: list[str]
    group: str
    stages: list[Stage]
    warnings: list[Problem]


def canary_pair(s: Scope, prefix: str, hosts: list[str], group: str, switches: list[str],
                driver: dict, include_daemons: bool = False) -> tuple[list[Stage], list[Problem]]:
    """The canary stage of `hosts` and, when the policy asks, its rollback drill; `driver`: the
    driver pool the canary's labels move (a Kubernetes canary), or {}; `include_daemons`: the
    canary runs after the control plane, so it restarts slurmd/kubelet on the new version itself."""
    d, pol = s.d, s.d.upgrade
    name, drill = f"{prefix}canary", f"{prefix}rollback drill"
    drain = f"drain {hostlist.fold(hosts)} (timeout {pol.drain.timeout_minutes} min)"
    if driver and not s.reimaged(group):  # the label below moves their driver: the upgrade controller drains them
        drain = operator_drain(s, hosts)
    warnings: list[Problem] = []
    # a drill can return the canary's driver by label only when the pool's object runs the rollback driver
    drill_driver = driver if driver and s.rb_pools.get(driver["pool"]) == s.moved[driver["pool"]][0] else {}
    drill_ok = pol.rollback.exercise_on_canary and bool(s.rb_set)
    if driver and not drill_driver and drill_ok:
        # a drill that cannot move the driver back would run its gates on the new driver: none is planned
        drill_ok = False
        warnings.append(Problem("kubernetes-canary-drill", f"no rollback drill of {hostlist.fold(hosts)}: it "
                                f"cannot return their driver by label: NVIDIADriver {driver['pool']} runs "
                                f"{s.moved[driver['pool']][0]}, the rollback target {s.rb_set} gives pool "
                                f"{driver['pool']} driver {s.rb_pools.get(driver['pool'], '(none)')}",
                                "roll back to the set the cluster runs now (upgrade.rollback.target: previous)"))
    stages = []
    if s.reimaged(group):
        build = s.new_builds[d.nodes[group].image]
        stages.append(Stage(name, "canary", hosts, [
            drain, *s.driver_steps(hosts, driver, "to"),
            *s.layer_steps(set(hosts), include_daemons=True, image_layers=True),
            *boot_steps(hosts, build, "the rest of the group stays on its default")],
            s.gates_for(hosts), switches, "stateless", {"to": build.artefact}, driver))
        back = s.back_build(group)
        if drill_ok and back:
            stages.append(Stage(drill, "rollback-drill", hosts, [
                *s.driver_steps(hosts, drill_driver, "back"),
                *boot_steps(hosts, back, f"back to the rollback target {s.rb_set}"),
                "run the gates on the rollback target",
                *s.driver_steps(hosts, drill_driver, "again"),
                *boot_steps(hosts, build, f"forward to {s.new_set_name} again")],
                s.gates_for(hosts), switches, "stateless", {"to": build.artefact, "back": back.artefact}, drill_driver))
        return stages, warnings
    stages.append(Stage(name, "canary", hosts, [drain, *s.driver_steps(hosts, driver, "to"),
                                                *s.layer_steps(set(hosts), include_daemons=include_daemons)],
                        s.gates_for(hosts), switches, s.provisioning(group), {}, driver))
    if drill_ok:
        stages.append(Stage(drill, "rollback-drill", hosts, [
            *s.driver_steps(hosts, drill_driver, "back"),
            f"roll the canary back to {s.rb_set} (same layers, reverse order)",
            "run the gates on the rollback target",
            *s.driver_steps(hosts, drill_driver, "again"),
            f"re-apply {s.new_set_name} to the canary"], s.gates_for(hosts), switches, s.provisioning(group), {},
            drill_driver))
    return stages, warnings


def canary_stages(s: Scope) -> Canary:
    """The canary across leaf switches and, when the policy exercises it, the rollback drill on it."""
    if not s.by_group:
        return Canary([], "", [], [])
    _, hosts, switches, cw = choose_canary(s.d, sorted(s.by_group, key=list(s.d.nodes).index))
    group = s.stage_group(hosts)
    stages, warnings = canary_pair(s, "", hosts, group, switches, s.driver_of(group))
    return Canary(hosts, group, stages, [Problem("canary-placement", w, "adjust upgrade.canary") for w in cw]
                  + warnings)


@dataclass
class KubernetesCanaries:
    """Kubernetes GPU nodes get a canary before the rest. Where the GPU Operator owns the driver,
    a canary in every driver pool the change moves: a few of the pool's hosts run the new driver
    through the pool's canary NVIDIADriver while the rest stays on the old (`stages`, before the
    control plane, which moves the pools' own objects). Where the image or the driver role owns it,
    a canary in every other Kubernetes GPU group the change reaches (`group_stages`, after the
    control plane: the new kubelet may not be newer than the API server)."""

    hosts: dict[str, list[str]]  # pool -> its canary hosts (the main canary's when it is in the pool)
    stages: list[Stage]
    warnings: list[Problem]
    shared: str = ""  # the pool the main canary is in, if any
    group_hosts: dict[str, list[str]] = field(default_factory=dict)  # group -> its canary hosts
    group_stages: list[Stage] = field(default_factory=list)

    def all_hosts(self) -> set[str]:
        return set().union(*self.hosts.values(), *self.group_hosts.values())


def kubernetes_canaries(s: Scope, canary: Canary) -> KubernetesCanaries:
    """The driver pools' canaries; `kubernetes_group_canaries` adds the groups'."""
    out = KubernetesCanaries({}, [], [])
    for pool in s.moved:
        if canary.group and s.pool_of.get(canary.group) == pool:
            out.hosts[pool], out.shared = canary.hosts, pool  # the canary above is in this pool
            continue
        groups = [g for g in s.d.nodes if s.pool_of.get(g) == pool]
        members = [h for g in groups for h in hostlist.names(s.d.nodes[g].hosts)]
        if len(members) < 2:
            out.warnings.append(Problem("kubernetes-canary", f"driver pool {pool} has {len(members)} node(s): no "
                                        "canary before the rest", "add nodes to the pool's groups"))
            continue
        out.hosts[pool] = _own_canary(s, out, out.stages, pool, groups, len(members),
                                      {"pool": pool, "canary": canary_pool(pool)}, include_daemons=False)
    return out


def _own_canary(s: Scope, out: KubernetesCanaries, into: list[Stage], name: str, groups: list[str], members: int,
                driver: dict, include_daemons: bool, among: set[str] | None = None) -> list[str]:
    """A Kubernetes canary of `upgrade.canary.nodes` hosts of `groups` (at most all but one of their
    `members`; only hosts in `among` when given), its stages into `into`, its warnings into `out`."""
    _, picked, switches, cw = choose_canary(s.d, groups, group=groups[0],
                                            nodes=min(s.d.upgrade.canary.nodes, members - 1))
    hosts = [h for h in picked if among is None or h in among]
    out.warnings += [Problem("canary-placement", w, "adjust upgrade.canary") for w in cw]
    stages, warnings = canary_pair(s, f"kubernetes {name} ", hosts, s.stage_group(hosts), switches, driver,
                                   include_daemons=include_daemons)
    into += stages
    out.warnings += warnings
    return hosts


def kubernetes_group_canaries(s: Scope, canary: Canary, out: KubernetesCanaries, daemons: bool) -> None:
    """Into `out`: a canary (and drill) in every Kubernetes GPU group the pools' canaries do not
    cover. `daemons`: they come after an upgraded control plane and restart kubelet on the new
    version; in a canary-only plan without one they keep their daemons, as the main canary does."""
    for group in _unpooled_kubernetes_gpu_groups(s, canary):
        changed = s.by_group[group]
        if len(changed) < 2:
            out.warnings.append(Problem("kubernetes-canary", f"Kubernetes GPU group {group} has {len(changed)} "
                                        "node(s) to change: no canary before the rest",
                                        "add nodes to the group, or make it the canary (upgrade.canary.node_group)"))
            continue
        kubelet = [lc["to"] for lc in s.layer_changes
                   if lc["component"] == "kubernetes" and changed & set(lc["_hosts"])]
        if not daemons and kubelet and s.reimaged(group):
            out.warnings.append(Problem("kubernetes-canary", f"Kubernetes GPU group {group}'s new build carries "
                                        f"kubelet {kubelet[0]}, which may not run before the API server moves, and "
                                        "this plan has no control-plane stage: no canary before the rest",
                                        "validate the set, then plan again: the full plan upgrades the control plane "
                                        "before this canary"))
            continue
        out.group_hosts[group] = _own_canary(s, out, out.group_stages, group, [group], len(changed), {},
                                             include_daemons=daemons, among=changed)


def _unpooled_kubernetes_gpu_groups(s: Scope, canary: Canary) -> list[str]:
    """Kubernetes groups with GPUs that the change reaches on the nodes, outside the main canary's
    group and outside every moving driver pool (whose canary NVIDIADriver covers them)."""
    return [g for g, n in s.d.nodes.items()
            if n.control_plane == "kubernetes" and g in s.by_group and g != canary.group
            and s.pool_of.get(g) not in s.moved and s.d.hardware[n.hardware].gpu is not None]


def driver_pool_stages(s: Scope, k8s: KubernetesCanaries) -> list[Stage]:
    """After the waves: each pool's canary hosts labelled back into the pool, whose NVIDIADriver runs
    the new driver now."""
    out = []
    for pool, hosts in k8s.hosts.items():
        _, to = s.moved[pool]
        out.append(Stage(f"driver pool {pool}", "driver-pool", hosts, [
            f"label {hostlist.fold(hosts)} {L_DRIVER_POOL}={pool}: back in pool {pool}, whose NVIDIADriver "
            f"runs driver {to} now as {canary_pool(pool)} does (the operator restarts their driver pods "
            "under the pool's object)"], [], [], "", {}, {"pool": pool, "canary": canary_pool(pool)}))
    return out


def control_plane_steps(s: Scope, t: Transition | None, gpu_operator: tuple[str, str], has_k8s: bool,
                        canary: Canary, k8s: KubernetesCanaries | None = None, delivered: bool = False) -> list[str]:
    """slurmdbd/slurmctld hop by hop, the API server minor by minor, the GPU Operator, the live and
    restart changes, and the canary's own daemons when it is upgraded in place. `delivered`: the plan has a
    delivery stage, which carries the live changes (their files and the reconfigure or reload)."""
    steps: list[str] = []
    if t:
        for i, hop in enumerate(t.slurm):
            steps.append(f"slurmdbd -> {hop.version} (first; database conversion, dump taken in prepare)")
            steps.append(f"slurmctld -> {hop.version}")
            if i != len(t.slurm) - 1:
                steps.append(f"slurmd -> {hop.version} on every Slurm node (rolling restart, jobs keep "
                             "running) before the next hop")
        steps += [f"kube-apiserver and control plane -> {m}" for m in t.apiserver]
        ogo, ngo = gpu_operator
        if has_k8s and ogo != ngo:
            steps.append(f"GPU Operator {ogo} -> {ngo} (Helm upgrade with the rendered values)")
    for pool, (frm, to) in s.moved.items():
        held = [h for h, p in s.held.items() if p == pool]
        rest = (f"the GPU Operator's upgrade controller leaves the held nodes {hostlist.fold(held)} ({UPGRADE_SKIP}"
                "=true) on the old driver until their wave releases them" if held else
                f"the GPU Operator upgrades the rest of pool {pool}, maxParallelUpgrades at a time")
        steps.append(f"NVIDIADriver {pool}: driver {frm} -> {to} (`pulumi up` of the new tree, after its canary "
                     f"passed): {rest}")
    steps += [f"{c.disruption}: {c.dotted}" + (f" ({len(c.hosts)} nodes)" if c.hosts else "")
              for c in s.changes if c.disruption == RESTART or (c.disruption == LIVE and not delivered)]
    if steps and canary.hosts and not s.reimaged(canary.group):
        for lc in s.layer_changes:
            if lc["component"] not in ("slurm", "kubernetes"):
                continue
            mine = [h for h in canary.hosts if h in set(lc["_hosts"])]
            if mine:
                steps.append(f"{'slurmd' if lc['component'] == 'slurm' else 'kubelet'} -> {lc['to']} on the "
                             f"canary {hostlist.fold(mine)}")
    for pool, khosts in (k8s.hosts.items() if k8s else ()):  # their kubelet moves with the control plane
        if k8s is not None and pool == k8s.shared:
            continue
        for lc in s.layer_changes:
            mine = [h for h in khosts if h in set(lc["_hosts"])]
            if lc["component"] == "kubernetes" and mine:
                steps.append(f"kubelet -> {lc['to']} on the canary {hostlist.fold(mine)}")
    return steps


def control_plane_first(s: Scope, canary: Canary) -> bool:
    """A stateless canary boots the new slurmd with its image: slurmctld must be upgraded first
    (slurmctld may be newer than slurmd, never older)."""
    slurm_moves = any(lc["component"] == "slurm" for lc in s.layer_changes)
    return s.reimaged(canary.group) and slurm_moves and s.d.nodes[canary.group].control_plane == "slurm"


def hold(s: Scope, k8s: KubernetesCanaries) -> None:
    """Into `s.held`: the Kubernetes GPU nodes of every moving driver pool that no canary moves. The
    control-plane stage moves the pool's NVIDIADriver; with `autoUpgrade` the GPU Operator's upgrade
    controller would then upgrade them all on its own, outside the waves and their gates. Held with its
    skip label, each waits until its wave releases it (GPU Operator docs, gpu-driver-upgrades.html)."""
    moved = set(k8s.all_hosts())
    s.held = {h: pool for g, pool in s.pool_of.items() if pool in s.moved
              for h in hostlist.names(s.d.nodes[g].hosts) if h not in moved}


def operator_drain(s: Scope, hosts: list[str]) -> str:
    """The drain line of operator-owned nodes whose driver moves: the upgrade controller's, with its drain
    spec from the rendered values (render/kubernetes/gpu_operator.py upgrade_policy)."""
    pol = upgrade_policy(s.d)
    drain, pods = pol["drain"], pol["gpuPodDeletion"]
    return (f"drain {hostlist.fold(hosts)}: by the GPU Operator's upgrade controller, not clusterdef (upgradePolicy "
            f"drain: timeoutSeconds {drain['timeoutSeconds']}, force {str(drain['force']).lower()}, deleteEmptyDir "
            f"{str(drain['deleteEmptyDir']).lower()}; gpuPodDeletion timeoutSeconds {pods['timeoutSeconds']}; "
            f"maxParallelUpgrades {pol['maxParallelUpgrades']})")


def hold_stage(s: Scope) -> Stage | None:
    """Before the control-plane stage: the held nodes labelled out of the driver upgrade, pool by pool."""
    if not s.held:
        return None
    hosts = sorted(s.held, key=host_order(s.d))
    steps = [f"label {hostlist.fold([h for h in hosts if s.held[h] == pool])} {UPGRADE_SKIP}=true: the GPU "
             f"Operator's upgrade controller leaves them on driver {frm} when NVIDIADriver {pool} moves to {to}; "
             "each wave releases its own" for pool, (frm, to) in s.moved.items() if pool in s.held.values()]
    return Stage("hold the driver pools", "driver-hold", hosts, steps)


def wave_list(s: Scope, canary: Canary, k8s: KubernetesCanaries | None = None) -> list:
    """The waves of the nodes the change reaches and of the held nodes (each wave releases its own)."""
    by_group = {g: set(h) for g, h in s.by_group.items()}
    for h in s.held:
        by_group.setdefault(s.group_of[h], set()).add(h)
    return waves(s.d, by_group, set(canary.hosts) | (k8s.all_hosts() if k8s else set()))


def release_steps(s: Scope, hosts: list[str], pool: str) -> list[str]:
    """A wave of held nodes: the GPU Operator's upgrade controller drains them (its upgradePolicy, the
    rendered values' own), never clusterdef too; the wave waits for each node's upgrade state."""
    _, to = s.moved[pool]
    return [operator_drain(s, hosts),
            f"release them: remove {UPGRADE_SKIP} from each; the upgrade controller cordons and drains each, moves it "
            f"to driver {to} (NVIDIADriver {pool}) and uncordons it; wait for {UPGRADE_STATE}={UPGRADE_DONE} on "
            f"each ({UPGRADE_FAILED} halts the rollout naming the node)"]


def wave_stages(s: Scope, wave_hosts: list) -> list[Stage]:
    """One stage per topology-aligned wave: drain, the layers (or reimage), resume."""
    d, stages = s.d, []
    running = host_services(d)
    for i, (hosts, switches) in enumerate(wave_hosts, 1):
        g = s.stage_group(hosts)
        if hosts and all(h in running for h in hosts):  # service hosts: their own wave (rollout.waves)
            stages.append(service_wave(s, f"wave {i}", hosts, running))
            continue
        drain = (f"drain {hostlist.fold(hosts)} (timeout {d.upgrade.drain.timeout_minutes} min, "
                 f"grace {d.upgrade.drain.grace_seconds} s)")
        resume = "resume the nodes; halt the rollout here if any gate fails"
        pools = {s.held.get(h, "") for h in hosts}
        pool = pools.pop() if len(pools) == 1 else ""
        if pool:  # held nodes: released to the operator's upgrade controller
            release = release_steps(s, hosts, pool)
            driver = {"pool": pool, "canary": canary_pool(pool)}
            if s.reimaged(g):  # their reboot into the new build drains them once more (reimage.yml): said so
                build = s.new_builds[d.nodes[g].image]
                stages.append(Stage(f"wave {i}", "wave", hosts, [
                    *release, drain + " for the reboot into the new build (reimage.yml)",
                    *s.layer_steps(set(hosts), include_daemons=True, image_layers=True),
                    *boot_steps(hosts, build, "only this wave's hosts"), resume], s.gates_for(hosts), switches,
                    "stateless", {"to": build.artefact}, driver))
            else:
                stages.append(Stage(f"wave {i}", "wave", hosts, [
                    *release, *s.layer_steps(set(hosts), include_daemons=True),
                    "back in service: the upgrade controller uncordoned them at upgrade-done; halt the rollout here "
                    "if any gate fails"], s.gates_for(hosts), switches, s.provisioning(g), {}, driver))
            continue
        if s.reimaged(g):
            build = s.new_builds[d.nodes[g].image]
            stages.append(Stage(f"wave {i}", "wave", hosts, [
                drain, *s.layer_steps(set(hosts), include_daemons=True, image_layers=True),
                *boot_steps(hosts, build, "only this wave's hosts"), resume], s.gates_for(hosts), switches,
                "stateless", {"to": build.artefact}))
        else:
            stages.append(Stage(f"wave {i}", "wave", hosts, [drain, *s.layer_steps(set(hosts), include_daemons=True),
                                                              resume], s.gates_for(hosts), switches, s.provisioning(g)))
    return stages


def service_wave(s: Scope, name: str, hosts: list[str], running: dict[str, tuple[str, ...]]) -> Stage:
    """A wave of service hosts (docs/services.md): no jobs to drain and no GPU gates; each service's own
    check passes before the next wave, and the other controllers and etcd members keep it up meanwhile."""
    d = s.d
    services = list(dict.fromkeys(x for h in hosts for x in running[h]))
    t = service_table()
    members = service_hosts(d)
    down = [x for x in services if set(members.get(x, ())) <= set(hosts)]
    steps = [f"take {hostlist.fold(hosts)} out of service ({', '.join(services)}): never two Slurm controllers, "
             "the slurmdbd host with a controller, nor an etcd majority in one wave"
             + (f"; down for this wave (no other host runs it): {', '.join(down)}" if down else "")]
    groups = {s.group_of[h] for h in hosts}  # a service wave may hold hosts of several service groups
    modes = {d.nodes[x].provisioning for x in groups}
    images = {d.nodes[x].image for x in groups}
    if all(s.reimaged(x) for x in groups) and len(images) == 1:
        build = s.new_builds[images.pop()]
        steps += [*s.layer_steps(set(hosts), include_daemons=True, image_layers=True),
                  *boot_steps(hosts, build, "only this wave's hosts")]
        boot = {"to": build.artefact}
    else:
        steps += s.layer_steps(set(hosts), include_daemons=True)
        boot = {}
    steps.append("return the services; halt the rollout here if any gate fails")
    return Stage(name, "wave", hosts, steps, [f"{x}: {t[x]['gate']}" for x in services], [],
                 modes.pop() if len(modes) == 1 else "", boot, services=services)


def boot_default_stage(s: Scope) -> Stage | None:
    """Once every wave passed: the new builds become the groups' default boot, the pointers go."""
    d = s.d
    defaults = [g for g in d.nodes if d.nodes[g].image in s.rebuilt]
    if not defaults:
        return None
    pointed = [h for g in defaults if s.reimaged(g) for h in s.by_group.get(g, ())]
    steps = [f"switch the default boot of node group(s) {', '.join(defaults)} to the new build(s) "
             "(publish pxe/ipxe/groups/ and pxe/ipxe/boot.ipxe of the new tree)"]
    if pointed:
        steps.append(f"remove the boot pointers of {hostlist.fold(pointed)}: the default now boots the same "
                     "build")
    return Stage("boot defaults", "boot-default", sorted(pointed, key=host_order(d)), steps, [],
                 [], "", {"groups": ",".join(defaults)})
