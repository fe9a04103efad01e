"""`clusterdef plan`: what changes between two definitions, how disruptive each change
is, whether the set transition is allowed, and the rollout that applies it.

Both sides are validated and rendered in memory (validate_file + build_tree), so every
render target registered in TARGETS shows up in the file diffs without plan knowing it.
The result is one JSON-able document (`Plan.doc`); formats.py turns it into text,
Markdown or JSON, and the plan file is that JSON with the hashes of both definitions
and rendered trees.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path, PurePosixPath

from .. import __version__, hostlist
from ..build import build_tree
from ..errors import DefinitionError, Finding, Severity
from ..model import Definition
from ..validate.pipeline import Result, validate_file
from .diff import Change, kubernetes_summary, model_changes, tree_diff, tree_hash
from .images import builds_of, identity_findings, image_diff, kept_builds
from ..render.kubernetes.common import L_DRIVER_POOL
from ..render.kubernetes.gpu_operator import canary_pool, pool_drivers, pools_of
from .rollout import Stage, choose_canary, gates, rollback_target, waves
from .transition import (COMPONENT_DISRUPTION, LAYER_OF, LAYERS, LIVE, NONE, REBOOT, REFLASH, RESTART, SEVERITY,
                         Problem, transition)

PLAN_FORMAT = 1
# Lifecycle findings about the set a cluster runs today do not stop planning the way off it.
FROM_SIDE_IGNORED = {"matrix-retired", "matrix-candidate", "matrix-driver-eol", "matrix-slurm-eos",
                     "rollback-not-validated", "rollback-unknown-set"}


class PlanInputError(Exception):
    """A side that cannot be validated or read; carries the findings (file:line, hint)."""

    def __init__(self, findings: list[Finding], sources: dict | None = None):
        super().__init__("; ".join(f"{f.where}: {f.code} {f.message}" for f in findings))
        self.findings = findings
        self.sources = sources or {}


@dataclass
class Side:
    label: str  # the file name (or ref:path) shown in the plan
    result: Result
    tree: dict[str, str]

    @property
    def definition(self) -> Definition:
        assert self.result.definition is not None
        return self.result.definition

    @property
    def text(self) -> str:
        return self.result.source.text if self.result.source else ""


def load_side(path: str | Path, matrices: str | Path | None, today: date, ignore: set[str] = frozenset(),
              label: str | None = None) -> Side:
    result = validate_file(path, matrices, today)
    if ignore:
        result.findings = [f for f in result.findings if f.code not in ignore]
    if not result.ok:
        raise PlanInputError(result.errors or result.findings,
                             {result.file: result.source} if result.source else {})
    try:
        tree, _ = build_tree(result)
    except DefinitionError as exc:
        raise PlanInputError(exc.findings, {result.file: result.source}) from None
    return Side(label or Path(path).name, result, tree)


def _git(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise PlanInputError([Finding("plan-git", Severity.ERROR, (), f"git {' '.join(args)} failed: "
                                      f"{proc.stderr.strip() or proc.stdout.strip()}",
                                      "pass a ref that exists (e.g. origin/main after `git fetch`), or use "
                                      "--from OLD.yaml")])
    return proc.stdout


def _check_ref(ref: str) -> None:
    """A ref is data: one starting with `-` would be read by git as an option (`--output=FILE`)."""
    if not ref or ref.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in ref):
        raise PlanInputError([Finding("plan-git-ref", Severity.ERROR, (), f"{ref!r} is not a git ref",
                                      "pass a branch, tag or commit (e.g. origin/main); a ref never starts with '-'",
                                      "--base")])


def _base_commit(ref: str, top: Path) -> str:
    """The commit `ref` names, resolved with the ref after --end-of-options; git is then only
    given the commit id."""
    _check_ref(ref)
    return _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], top).strip()


def _mac_problem(file: str) -> str:
    """Why a MAC inventory path from the base definition may not be read ('' when it may):
    it must stay inside the definition's folder."""
    p = PurePosixPath(file)
    if not file or any(ord(c) < 32 or ord(c) == 127 for c in file) or "\\" in file:
        return "is empty or holds control characters or backslashes"
    if p.is_absolute():
        return "is an absolute path"
    if ".." in p.parts:
        return "climbs out with '..'"
    return ""


def materialise_base(ref: str, definition: str | Path, workdir: Path) -> Path:
    """Write the definition as it is at git `ref` (and the MAC inventories it names, from the
    same ref, else from the working tree) into `workdir`; return the file path. The inventory
    paths come from the old definition, hostile like any input: each must be a relative path
    inside the definition's folder, and neither git nor the working tree may lead it out
    through a symbolic link."""
    from ..source import load_file

    _check_ref(ref)  # before any git command
    definition = Path(definition).resolve()
    if shutil.which("git") is None:
        raise PlanInputError([Finding("plan-git", Severity.ERROR, (), "--base needs git, which is not installed",
                                      "install git or use --from OLD.yaml")])
    top = Path(_git(["rev-parse", "--show-toplevel"], definition.parent).strip())
    commit = _base_commit(ref, top)
    rel = definition.relative_to(top).as_posix()
    text = _git(["show", f"{commit}:{rel}"], top)
    out = workdir / definition.name
    out.write_text(text, encoding="utf-8")
    try:
        source = load_file(out)
    except Exception:
        return out  # validation reports the problem with its line
    data, folder = source.data, definition.parent.resolve()
    for name, group in (data.get("nodes") or {}).items() if isinstance(data, dict) else []:
        mac = ((group or {}).get("addressing") or {}).get("mac") if isinstance(group, dict) else None
        mac = mac if isinstance(mac, dict) else {}
        if mac.get("source") != "inventory" or not isinstance(mac.get("file"), str):
            continue
        where = ("nodes", name, "addressing", "mac", "file")
        file = mac["file"]
        why = _mac_problem(file)
        src_rel = (PurePosixPath(rel).parent / file).as_posix()
        if not why:
            mode = _git(["--literal-pathspecs", "ls-tree", "-z", commit, "--", src_rel], top).split(" ", 1)[0]
            local = (definition.parent / file).resolve()
            if mode == "120000":
                why = "is a symbolic link in git"
            elif not mode and local.is_file() and not local.is_relative_to(folder):
                why = f"leads out of {folder} through a symbolic link"
        if why:
            located = replace(source, file=f"{ref}:{rel}")
            line, col = located.locate(where)
            raise PlanInputError([Finding("plan-base-mac-file", Severity.ERROR, where,
                                          f"the MAC inventory {file!r} at {ref} {why}",
                                          "name a file in the definition's folder or below it, by a relative "
                                          "path (e.g. inventory/macs.csv)", located.file, line, col)],
                                 {located.file: located})
        dest = workdir / file
        dest.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["git", "show", f"{commit}:{src_rel}"], cwd=top, capture_output=True, timeout=60)
        if proc.returncode == 0:
            dest.write_bytes(proc.stdout)
        elif (definition.parent / file).is_file():
            shutil.copyfile(definition.parent / file, dest)
    return out


@dataclass
class Plan:
    doc: dict
    refusals: list[Problem] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return bool(self.refusals)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _hosts_of(d: Definition, pred) -> list[str]:
    out: list[str] = []
    for g in d.nodes.values():
        if pred(g):
            out.extend(hostlist.names(g.hosts))
    return out


def _component_hosts(d: Definition, comp: str) -> list[str]:
    gpu = lambda g: d.hardware[g.hardware].gpu is not None  # noqa: E731
    if comp in ("driver", "cuda", "nccl", "container_toolkit"):
        return _hosts_of(d, gpu)
    if comp in ("kubernetes", "gpu_operator"):
        return _hosts_of(d, lambda g: g.control_plane == "kubernetes")
    if comp == "slurm":
        return _hosts_of(d, lambda g: g.control_plane == "slurm")
    return _hosts_of(d, lambda g: True)


def _layer_changes(old: Side, new: Side) -> list[dict]:
    """Every component and firmware pin that changes with the set, with its layer, class and nodes."""
    d, ovs, nvs = new.definition, old.result.matrix.sets[old.definition.cluster.matrix], \
        new.result.matrix.sets[new.definition.cluster.matrix]
    oc, nc = ovs.components.model_dump(), nvs.components.model_dump()
    out = []
    has = {"slurm": bool(d.slurm) and any(g.control_plane == "slurm" for g in d.nodes.values()),
           "kubernetes": any(g.control_plane == "kubernetes" for g in d.nodes.values())}
    has["gpu_operator"] = has["kubernetes"]
    for comp in nc:
        if oc.get(comp) == nc.get(comp) or not has.get(comp, True):
            continue
        hosts = _component_hosts(d, comp)
        out.append({"component": comp, "layer": LAYER_OF.get(comp, "firmware"), "from": oc.get(comp),
                    "to": nc.get(comp), "disruption": COMPONENT_DISRUPTION.get(comp, RESTART),
                    "nodes": len(hosts), "hosts": hostlist.fold(hosts) if hosts else "", "_hosts": hosts})
    for hname, hw in d.hardware.items():
        groups_hosts = _hosts_of(d, lambda g, hname=hname: g.hardware == hname)
        if not groups_hosts:
            continue
        for comp in hw.firmware:
            a = ovs.firmware.get(hw.platform, {}).get(comp)
            b = nvs.firmware.get(hw.platform, {}).get(comp)
            if a != b:
                out.append({"component": f"firmware.{comp}", "hardware": hname, "platform": hw.platform,
                            "layer": "firmware", "from": a, "to": b, "disruption": REFLASH,
                            "nodes": len(groups_hosts), "hosts": hostlist.fold(groups_hosts),
                            "_hosts": groups_hosts})
    order = [name for name, _ in LAYERS]
    return sorted(out, key=lambda lc: order.index(lc["layer"]))


def moved_pools(old: Side, new: Side) -> dict[str, tuple[str, str]]:
    """GPU Operator driver pool -> (driver, new driver) for the pools whose NVIDIADriver changes driver,
    where the operator owns the driver on both sides."""
    assert old.result.matrix is not None and new.result.matrix is not None  # both sides validated
    a = pool_drivers(old.definition, old.result.matrix.sets, old.definition.cluster.matrix)
    b = pool_drivers(new.definition, new.result.matrix.sets, new.definition.cluster.matrix)
    return {p: (a[p], v) for p, v in b.items() if p in a and a[p] != v}


def _host_order(d: Definition):
    order = {h: i for i, h in enumerate(h for g in d.nodes.values() for h in hostlist.names(g.hosts))}
    return lambda h: order.get(h, 1 << 30)


def _image_steps(image_changes: list[dict], old_builds: dict) -> list[str]:
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
    return steps


def make_plan(old: Side, new: Side, allow_candidate: bool = False) -> Plan:
    d = new.definition
    matrix = new.result.matrix
    old_set = matrix.sets.get(old.definition.cluster.matrix) or old.result.matrix.sets[old.definition.cluster.matrix]
    new_set = matrix.sets[d.cluster.matrix]
    refusals: list[Problem] = []
    warnings: list[Problem] = []

    if new_set.status == "retired":
        refusals.append(Problem("plan-target-retired", f"target set {new_set.name} is retired",
                                "plan towards a validated set (`clusterdef matrix list`)"))
    elif new_set.status == "candidate" and not allow_candidate:
        refusals.append(Problem("plan-target-candidate", f"target set {new_set.name} is a candidate, not validated",
                                "pass --allow-candidate to plan the canary stage only; waves need a validated set"))
    canary_only = new_set.status == "candidate"

    has_slurm = d.slurm is not None and any(g.control_plane == "slurm" for g in d.nodes.values())
    has_k8s = any(g.control_plane == "kubernetes" for g in d.nodes.values())
    t = transition(matrix.compat, old_set, new_set, has_slurm, has_k8s) if old_set.name != new_set.name else None
    if t:
        refusals += t.refusals
        warnings += t.warnings

    layer_changes = _layer_changes(old, new) if t else []
    changes: list[Change] = model_changes(old.definition, d)
    rb_set, rb_problems = rollback_target(d, matrix, old_set.name, new_set.name)
    image_changes = image_diff(old.tree, new.tree, old.definition, d)
    located = identity_findings(old, new, rb_set, {i["image"] for i in image_changes})
    if located:
        raise PlanInputError(located, {new.result.file: new.result.source} if new.result.source else {})

    # ---- nodes that need a node-level stage, by group, and the layers they take
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

    new_builds, old_builds = builds_of(new.tree), builds_of(old.tree)
    rebuilt = {i["image"] for i in image_changes}

    def stage_group(hosts) -> str:
        groups = {group_of.get(h) for h in hosts}
        return next(iter(groups)) if len(groups) == 1 else ""

    def reimaged(group: str) -> bool:
        """A stateless group whose image gets a new build: its stages point hosts and reboot."""
        return bool(group) and d.nodes[group].provisioning == "stateless" and d.nodes[group].image in rebuilt

    def back_build(group: str):
        """The build a stateless group's rollback boots: the running one when the rollback set is
        the running set, else the published build of the rollback set."""
        image = d.nodes[group].image
        before = old_builds.get(image)
        if before and before.set == rb_set:
            return before
        kept = [b for b in kept_builds(d, image, new_builds[image]).values() if b.set == rb_set]
        return kept[0] if kept else None

    def boot_steps(hosts: list[str], group: str, build, why: str) -> list[str]:
        return [f"point {hostlist.fold(hosts)} at build {build.artefact} (boot pointers "
                f"ipxe/hosts/host-MAC.ipxe; {why})",
                f"reboot {hostlist.fold(hosts)}: they boot {build.artefact} (set {build.set}); nothing is "
                "installed on the nodes"]

    def layer_steps(hosts: set[str], include_daemons: bool, image_layers: bool = False) -> list[str]:
        """The layers a stage applies in order; with `image_layers` (a stateless group) every layer
        but firmware is carried by the image's new build, so it is one line, not a role run."""
        steps = []
        carried: list[str] = []
        for layer, _ in LAYERS:
            parts = []
            for lc in layer_changes:
                if lc["layer"] != layer or not hosts.intersection(lc["_hosts"]):
                    continue
                if lc["component"] == "gpu_operator" or (
                        not include_daemons and lc["component"] in ("slurm", "kubernetes")):
                    continue  # the GPU Operator is cluster-wide: the control-plane stage upgrades it
                what = lc["component"] + (f" on {lc['hardware']}" if "hardware" in lc else "")
                parts.append(f"{what} {lc['from']} -> {lc['to']}")
            if layer == "driver":
                for c in changes:
                    if c.disruption == REBOOT and hosts.intersection(c.hosts):
                        parts.append(f"{c.dotted}: {c.old} -> {c.new}")
            if layer == "firmware":
                for c in changes:
                    if c.disruption == REFLASH and hosts.intersection(c.hosts):
                        parts.append(f"{c.dotted}: {c.old} -> {c.new}")
            if parts and image_layers and layer != "firmware":
                carried += parts
                continue
            if parts:
                how = {"firmware": "reflash, power-cycle", "driver": "reboot", "cuda-nccl": "reboot into the image",
                       "container-toolkit": "restart containerd", "kubernetes": "restart kubelet",
                       "slurm": "restart slurmd"}[layer]
                steps.append(f"layer {layer}: " + "; ".join(parts) + f" ({how}, then health check)")
        if carried:
            steps.append("in the image: " + "; ".join(carried) + " (the new build carries them)")
        return steps

    stages: list[Stage] = []
    for p in rb_problems:
        warnings.append(Problem("rollback-target", p, "set upgrade.rollback.target to a validated set"))
    baseline = new_set.baseline
    gate_list = gates(d, has_slurm, has_k8s, baseline)
    if image_changes:
        stages.append(Stage("image build and publish", "image", steps=_image_steps(image_changes, old_builds)))
    stages.append(Stage("prepare", "prepare", steps=[
        f"rollback point: {old.label} (definition {_sha(old.text)[:12]}, rendered tree {tree_hash(old.tree)[:12]}, "
        f"set {old_set.name}); apply copies both definitions and trees into its snapshot before anything runs",
        "snapshot every node's versions (snapshot.yml: gpu_facts, into the run record; a node without them "
        "halts the run)",
        "slurmdbd database dump, etcd snapshot (prepare.yml)",
        "record versions: `clusterdef drift --facts ...` shows every node on "
        f"{old_set.name} (or lists the exceptions)",
        f"check the rollback target {rb_set or '(none)'} is on hand (packages, images, firmware bundles)",
    ]))
    affected_groups = sorted(by_group, key=list(d.nodes).index)
    # GPU Operator driver pools whose NVIDIADriver moves to another driver (the operator owns the driver)
    moved = moved_pools(old, new)
    pool_of = pools_of(d)
    rb_pools = pool_drivers(d, matrix.sets, rb_set) if rb_set else {}

    def driver_of(group: str) -> dict:
        pool = pool_of.get(group) if group else None
        return {"pool": pool, "canary": canary_pool(pool)} if pool in moved else {}

    def driver_steps(hosts: list[str], driver: dict, how: str) -> list[str]:
        """Kubernetes canary steps: `to` applies the pool's canary NVIDIADriver and labels the hosts into
        it; `back` labels them back into the pool (its NVIDIADriver still runs the old driver); `again`
        labels them into the canary once more."""
        if not driver:
            return []
        pool, canary = driver["pool"], driver["canary"]
        frm, to = moved[pool]
        hosts_ = hostlist.fold(hosts)
        label = f"label {hosts_} {L_DRIVER_POOL}="
        if how == "back":
            return [f"{label}{pool}: back on NVIDIADriver {pool} (driver {frm}, the rollback target's)"]
        move = [f"{label}{canary}: the GPU Operator moves them to driver {to} (its upgrade controller drains "
                f"them); the rest of pool {pool} stays on driver {frm}"]
        if how == "again":
            return move
        return [f"apply NVIDIADriver {canary} of the new tree (driver {to}); NVIDIADriver {pool} keeps driver "
                f"{frm} until the control-plane stage", *move]

    def canary_pair(prefix: str, hosts: list[str], group: str, switches: list[str], driver: dict) -> list[Stage]:
        """The canary stage of `hosts` and, when the policy asks, its rollback drill."""
        pol = d.upgrade
        name, drill = f"{prefix}canary", f"{prefix}rollback drill"
        drain = f"drain {hostlist.fold(hosts)} (timeout {pol.drain.timeout_minutes} min)"
        # a drill can return the canary's driver by label only when the pool's object runs the rollback driver
        drill_driver = driver if driver and rb_pools.get(driver["pool"]) == moved[driver["pool"]][0] else {}
        if driver and not drill_driver and pol.rollback.exercise_on_canary and rb_set:
            warnings.append(Problem("kubernetes-canary-drill", f"the rollback drill of {hostlist.fold(hosts)} "
                                    f"cannot return their driver by label: NVIDIADriver {driver['pool']} runs "
                                    f"{moved[driver['pool']][0]}, the rollback target {rb_set} pins "
                                    f"{rb_pools.get(driver['pool'], '(none)')}",
                                    "roll back to the set the cluster runs now (upgrade.rollback.target: previous)"))
        out = []
        if reimaged(group):
            build = new_builds[d.nodes[group].image]
            out.append(Stage(name, "canary", hosts, [
                drain, *driver_steps(hosts, driver, "to"),
                *layer_steps(set(hosts), include_daemons=True, image_layers=True),
                *boot_steps(hosts, group, build, "the rest of the group stays on its default")],
                gate_list, switches, "stateless", {"to": build.artefact}, driver))
            back = back_build(group)
            if pol.rollback.exercise_on_canary and rb_set and back:
                out.append(Stage(drill, "rollback-drill", hosts, [
                    *driver_steps(hosts, drill_driver, "back"),
                    *boot_steps(hosts, group, back, f"back to the rollback target {rb_set}"),
                    "run the gates on the rollback target",
                    *driver_steps(hosts, drill_driver, "again"),
                    *boot_steps(hosts, group, build, f"forward to {new_set.name} again")],
                    gate_list, switches, "stateless", {"to": build.artefact, "back": back.artefact}, drill_driver))
            return out
        prov = d.nodes[group].provisioning if group else ""
        out.append(Stage(name, "canary", hosts, [drain, *driver_steps(hosts, driver, "to"),
                                                 *layer_steps(set(hosts), include_daemons=False)],
                         gate_list, switches, prov, {}, driver))
        if pol.rollback.exercise_on_canary and rb_set:
            out.append(Stage(drill, "rollback-drill", hosts, [
                *driver_steps(hosts, drill_driver, "back"),
                f"roll the canary back to {rb_set} (same layers, reverse order)",
                "run the gates on the rollback target",
                *driver_steps(hosts, drill_driver, "again"),
                f"re-apply {new_set.name} to the canary"], gate_list, switches, prov, {}, drill_driver))
        return out

    canary_hosts: list[str] = []
    canary_stages: list[Stage] = []
    canary_group = ""
    if by_group:
        group, canary_hosts, switches, cw = choose_canary(d, affected_groups)
        warnings += [Problem("canary-placement", w, "adjust upgrade.canary") for w in cw]
        canary_group = stage_group(canary_hosts)
        canary_stages = canary_pair("", canary_hosts, canary_group, switches, driver_of(canary_group))
    # Kubernetes GPU nodes get a canary of their own in every driver pool the upgrade moves: a few of the
    # pool's hosts run the new driver through the pool's canary NVIDIADriver while the rest stays on the old.
    k8s_canary: dict[str, list[str]] = {}
    k8s_stages: list[Stage] = []
    for pool in moved:
        if canary_group and pool_of.get(canary_group) == pool:
            k8s_canary[pool] = canary_hosts  # the canary above is in this pool
            continue
        groups = [g for g in d.nodes if pool_of.get(g) == pool]
        members = [h for g in groups for h in hostlist.names(d.nodes[g].hosts)]
        if len(members) < 2:
            warnings.append(Problem("kubernetes-canary", f"driver pool {pool} has {len(members)} node(s): no "
                                    "canary before the rest", "add nodes to the pool's groups"))
            continue
        _, khosts, kswitches, cw = choose_canary(d, groups, group=groups[0],
                                                 nodes=min(d.upgrade.canary.nodes, len(members) - 1))
        warnings += [Problem("canary-placement", w, "adjust upgrade.canary") for w in cw]
        k8s_canary[pool] = khosts
        k8s_stages += canary_pair(f"kubernetes {pool} ", khosts, stage_group(khosts), kswitches,
                                  {"pool": pool, "canary": canary_pool(pool)})
    # A stateless canary boots the new slurmd with its image: slurmctld must be upgraded first
    # (slurmctld may be newer than slurmd, never older).
    slurm_moves = any(lc["component"] == "slurm" for lc in layer_changes)
    cp_first = reimaged(canary_group) and slurm_moves and d.nodes[canary_group].control_plane == "slurm"
    cp_steps: list[str] = []
    if t:
        for i, hop in enumerate(t.slurm):
            last = i == len(t.slurm) - 1
            cp_steps.append(f"slurmdbd -> {hop.version} (first; database conversion, dump taken in prepare)")
            cp_steps.append(f"slurmctld -> {hop.version}")
            if not last:
                cp_steps.append(f"slurmd -> {hop.version} on every Slurm node (rolling restart, jobs keep "
                                "running) before the next hop")
        for m in t.apiserver:
            cp_steps.append(f"kube-apiserver and control plane -> {m}")
        ogo, ngo = old_set.components.gpu_operator, new_set.components.gpu_operator
        if has_k8s and ogo != ngo:
            cp_steps.append(f"GPU Operator {ogo} -> {ngo} (Helm upgrade with the rendered values)")
    for pool, (frm, to) in moved.items():
        cp_steps.append(f"NVIDIADriver {pool}: driver {frm} -> {to} (`pulumi up` of the new tree, after its canary "
                        f"passed): the GPU Operator upgrades the rest of pool {pool}, maxParallelUpgrades at a time")
    for c in changes:
        if c.disruption in (LIVE, RESTART):
            cp_steps.append(f"{c.disruption}: {c.dotted}" + (f" ({len(c.hosts)} nodes)" if c.hosts else ""))
    if cp_steps and canary_hosts and not reimaged(canary_group):
        daemons = [lc for lc in layer_changes if lc["component"] in ("slurm", "kubernetes")]
        for lc in daemons:
            mine = [h for h in canary_hosts if h in set(lc["_hosts"])]
            if mine:
                cp_steps.append(f"{'slurmd' if lc['component'] == 'slurm' else 'kubelet'} -> {lc['to']} on the "
                                f"canary {hostlist.fold(mine)}")
    for khosts in k8s_canary.values():  # their kubelet moves with the control plane, as the canary's
        if khosts is canary_hosts:
            continue
        for lc in layer_changes:
            mine = [h for h in khosts if h in set(lc["_hosts"])]
            if lc["component"] == "kubernetes" and mine:
                cp_steps.append(f"kubelet -> {lc['to']} on the canary {hostlist.fold(mine)}")
    cp_stage = [Stage("control plane and cluster config", "control-plane", [], cp_steps,
                      gate_list[2:] if canary_hosts else [])] if cp_steps else []
    # The Kubernetes canaries come before the control-plane stage: it moves the pools' own NVIDIADriver.
    if cp_first:
        cp_stage[0].steps.insert(0, f"before the canary: its image {new_builds[d.nodes[canary_group].image].artefact} "
                                 "carries the new slurmd, and slurmctld may not be older than slurmd")
        stages += k8s_stages + cp_stage + canary_stages
    else:
        stages += canary_stages + k8s_stages + cp_stage
    wave_list = waves(d, by_group, set(canary_hosts).union(*k8s_canary.values()))
    withheld = 0
    if canary_only:
        withheld = len(wave_list)
        if cp_first:
            warnings.append(Problem("canary-needs-control-plane", "the canary boots an image with the new slurmd, "
                                    "so the control plane is upgraded before it even in a canary-only plan",
                                    "review the control-plane stage: slurmctld and slurmdbd move to the candidate"))
        else:
            stages = [s for s in stages if s.kind != "control-plane"]
    else:
        for i, (hosts, switches) in enumerate(wave_list, 1):
            g = stage_group(hosts)
            drain = (f"drain {hostlist.fold(hosts)} (timeout {d.upgrade.drain.timeout_minutes} min, "
                     f"grace {d.upgrade.drain.grace_seconds} s)")
            if reimaged(g):
                build = new_builds[d.nodes[g].image]
                stages.append(Stage(f"wave {i}", "wave", hosts, [
                    drain, *layer_steps(set(hosts), include_daemons=True, image_layers=True),
                    *boot_steps(hosts, g, build, "only this wave's hosts"),
                    "resume the nodes; halt the rollout here if any gate fails"], gate_list, switches,
                    "stateless", {"to": build.artefact}))
            else:
                stages.append(Stage(f"wave {i}", "wave", hosts, [
                    drain, *layer_steps(set(hosts), include_daemons=True),
                    "resume the nodes; halt the rollout here if any gate fails"], gate_list, switches,
                    d.nodes[g].provisioning if g else ""))
        defaults = [g for g in d.nodes if d.nodes[g].image in rebuilt]
        if defaults:
            pointed = [h for g in defaults if reimaged(g) for h in by_group.get(g, ())]
            steps = [f"switch the default boot of node group(s) {', '.join(defaults)} to the new build(s) "
                     "(publish pxe/ipxe/groups/ and pxe/ipxe/boot.ipxe of the new tree)"]
            if pointed:
                steps.append(f"remove the boot pointers of {hostlist.fold(pointed)}: the default now boots the same "
                             "build")
            stages.append(Stage("boot defaults", "boot-default", sorted(pointed, key=_host_order(d)), steps, [],
                                [], "", {"groups": ",".join(defaults)}))
        for pool, khosts in k8s_canary.items():
            frm, to = moved[pool]
            stages.append(Stage(f"driver pool {pool}", "driver-pool", khosts, [
                f"label {hostlist.fold(khosts)} {L_DRIVER_POOL}={pool}: back in pool {pool}, whose NVIDIADriver "
                f"runs driver {to} now as {canary_pool(pool)} does (the operator restarts their driver pods "
                "under the pool's object)"], [], [], "", {}, {"pool": pool, "canary": canary_pool(pool)}))

    # ---- disruption summary
    summary: dict[str, dict] = {}
    for cls in (REFLASH, REBOOT, RESTART, LIVE, NONE):
        hosts: set[str] = set()
        n = 0
        for lc in layer_changes:
            if lc["disruption"] == cls:
                n += 1
                hosts.update(lc["_hosts"])
        for c in changes:
            if c.disruption == cls:
                n += 1
                hosts.update(c.hosts)
        if n:
            summary[cls] = {"changes": n, "nodes": len(hosts)}

    files = tree_diff(old.tree, new.tree)
    doc = {
        "plan_format": PLAN_FORMAT,
        "clusterdef": __version__,
        "cluster": d.cluster.name,
        "from": {"file": old.label, "set": old_set.name, "status": old_set.status,
                 "definition_sha256": _sha(old.text), "tree_sha256": tree_hash(old.tree)},
        "to": {"file": new.label, "set": new_set.name, "status": new_set.status,
               "definition_sha256": _sha(new.text), "tree_sha256": tree_hash(new.tree)},
        "refused": bool(refusals),
        "refusals": [p.to_json() for p in refusals],
        "warnings": [p.to_json() for p in warnings],
        "canary_only": canary_only,
        "set_change": {
            "from": old_set.name, "to": new_set.name, "to_status": new_set.status,
            "layers": [{k: v for k, v in lc.items() if not k.startswith("_")} for lc in layer_changes],
        },
        "compatibility": t.to_json() if t else None,
        "changes": [c.to_json() for c in changes],
        "images": image_changes,
        "disruption": summary,
        "rollout": {
            "layer_order": [name for name, _ in LAYERS],
            "canary": {"hosts": hostlist.fold(canary_hosts) if canary_hosts else "", "nodes": len(canary_hosts)},
            "waves": len(wave_list), "waves_withheld": withheld,
            "wave_size": d.upgrade.wave_size,
            "gates": gate_list,
            "rollback": {"target": rb_set, "exercised_on_canary": bool(canary_hosts)
                         and d.upgrade.rollback.exercise_on_canary,
                         # what apply snapshots before the first change and a rollback returns to
                         "point": {"file": old.label, "set": old_set.name, "definition_sha256": _sha(old.text),
                                   "tree_sha256": tree_hash(old.tree)}},
            "stages": [s.to_json() for s in stages],
        },
        "files": [f.to_json() for f in files],
        "kubernetes_objects": kubernetes_summary(old.tree, new.tree, files),
    }
    return Plan(doc, refusals)


def severity(cls: str) -> int:
    return SEVERITY.get(cls, 0)


def check_plan_file(doc: dict, old_text: str, new_text: str, old_tree: dict, new_tree: dict) -> list[str]:
    """Reasons a plan file no longer matches the definitions and trees (empty when it does)."""
    out = []
    for side, text, tree in (("from", old_text, old_tree), ("to", new_text, new_tree)):
        rec = doc.get(side) or {}
        if rec.get("definition_sha256") != _sha(text):
            out.append(f"the {side} definition changed since the plan was made")
        if rec.get("tree_sha256") != tree_hash(tree):
            out.append(f"the rendered {side} tree changed since the plan was made")
    return out


def base_side(ref: str, definition: str | Path, matrices, today: date) -> Side:
    from ..matrix.load import find_matrices

    root = Path(matrices) if matrices else find_matrices(definition)
    with tempfile.TemporaryDirectory(prefix="clusterdef-base-") as tmp:
        path = materialise_base(ref, definition, Path(tmp))
        side = load_side(path, root, today, FROM_SIDE_IGNORED, label=f"{ref}:{Path(definition).name}")
    return side
