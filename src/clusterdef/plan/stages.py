"""The rollout stages of a plan, from what the change touches (`Scope`): image build and
publish, prepare (the rollback point), canary and rollback drill, the control plane, the
waves, and the boot defaults. Each builder is one stage kind; make_plan (plan/__init__.py)
puts them in order. Stateless groups whose image gets a new build are reimaged (boot pointer,
reboot) rather than upgraded in place."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import hostlist
from ..model import Definition
from .diff import Change
from .images import kept_builds
from .rollout import Stage, choose_canary, waves
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
    group_of: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.group_of = {h: g for g, n in self.d.nodes.items() for h in hostlist.names(n.hosts)}

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
                steps.append(f"layer {layer}: " + "; ".join(parts) + f" ({HOW[layer]}, then health check)")
        if carried:
            steps.append("in the image: " + "; ".join(carried) + " (the new build carries them)")
        return steps

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


def canary_stages(s: Scope) -> Canary:
    """The canary across leaf switches and, when the policy exercises it, the rollback drill on it."""
    if not s.by_group:
        return Canary([], "", [], [])
    d, pol = s.d, s.d.upgrade
    _, hosts, switches, cw = choose_canary(d, sorted(s.by_group, key=list(d.nodes).index))
    warnings = [Problem("canary-placement", w, "adjust upgrade.canary") for w in cw]
    group = s.stage_group(hosts)
    drain = f"drain {hostlist.fold(hosts)} (timeout {pol.drain.timeout_minutes} min)"
    stages = []
    if s.reimaged(group):
        build = s.new_builds[d.nodes[group].image]
        stages.append(Stage("canary", "canary", hosts, [
            drain, *s.layer_steps(set(hosts), include_daemons=True, image_layers=True),
            *boot_steps(hosts, build, "the rest of the group stays on its default")],
            s.gate_list, switches, "stateless", {"to": build.artefact}))
        back = s.back_build(group)
        if pol.rollback.exercise_on_canary and s.rb_set and back:
            stages.append(Stage("rollback drill", "rollback-drill", hosts, [
                *boot_steps(hosts, back, f"back to the rollback target {s.rb_set}"),
                "run the gates on the rollback target",
                *boot_steps(hosts, build, f"forward to {s.new_set_name} again")],
                s.gate_list, switches, "stateless", {"to": build.artefact, "back": back.artefact}))
    else:
        stages.append(Stage("canary", "canary", hosts, [drain, *s.layer_steps(set(hosts), include_daemons=False)],
                            s.gate_list, switches, s.provisioning(group)))
        if pol.rollback.exercise_on_canary and s.rb_set:
            stages.append(Stage("rollback drill", "rollback-drill", hosts, [
                f"roll the canary back to {s.rb_set} (same layers, reverse order)",
                "run the gates on the rollback target",
                f"re-apply {s.new_set_name} to the canary"], s.gate_list, switches, s.provisioning(group)))
    return Canary(hosts, group, stages, warnings)


def control_plane_steps(s: Scope, t: Transition | None, gpu_operator: tuple[str, str], has_k8s: bool,
                        canary: Canary) -> list[str]:
    """slurmdbd/slurmctld hop by hop, the API server minor by minor, the GPU Operator, the live and
    restart changes, and the canary's own daemons when it is upgraded in place."""
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
    steps += [f"{c.disruption}: {c.dotted}" + (f" ({len(c.hosts)} nodes)" if c.hosts else "")
              for c in s.changes if c.disruption in (LIVE, RESTART)]
    if steps and canary.hosts and not s.reimaged(canary.group):
        for lc in s.layer_changes:
            if lc["component"] not in ("slurm", "kubernetes"):
                continue
            mine = [h for h in canary.hosts if h in set(lc["_hosts"])]
            if mine:
                steps.append(f"{'slurmd' if lc['component'] == 'slurm' else 'kubelet'} -> {lc['to']} on the "
                             f"canary {hostlist.fold(mine)}")
    return steps


def control_plane_first(s: Scope, canary: Canary) -> bool:
    """A stateless canary boots the new slurmd with its image: slurmctld must be upgraded first
    (slurmctld may be newer than slurmd, never older)."""
    slurm_moves = any(lc["component"] == "slurm" for lc in s.layer_changes)
    return s.reimaged(canary.group) and slurm_moves and s.d.nodes[canary.group].control_plane == "slurm"


def wave_list(s: Scope, canary: Canary) -> list:
    return waves(s.d, s.by_group, set(canary.hosts))


def wave_stages(s: Scope, wave_hosts: list) -> list[Stage]:
    """One stage per topology-aligned wave: drain, the layers (or reimage), resume."""
    d, stages = s.d, []
    for i, (hosts, switches) in enumerate(wave_hosts, 1):
        g = s.stage_group(hosts)
        drain = (f"drain {hostlist.fold(hosts)} (timeout {d.upgrade.drain.timeout_minutes} min, "
                 f"grace {d.upgrade.drain.grace_seconds} s)")
        resume = "resume the nodes; halt the rollout here if any gate fails"
        if s.reimaged(g):
            build = s.new_builds[d.nodes[g].image]
            stages.append(Stage(f"wave {i}", "wave", hosts, [
                drain, *s.layer_steps(set(hosts), include_daemons=True, image_layers=True),
                *boot_steps(hosts, build, "only this wave's hosts"), resume], s.gate_list, switches,
                "stateless", {"to": build.artefact}))
        else:
            stages.append(Stage(f"wave {i}", "wave", hosts, [drain, *s.layer_steps(set(hosts), include_daemons=True),
                                                              resume], s.gate_list, switches, s.provisioning(g)))
    return stages


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
