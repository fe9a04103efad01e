"""`clusterdef plan`: what changes between two definitions, how disruptive each change
is, whether the set transition is allowed, and the rollout that applies it.

Both sides are validated and rendered in memory (validate_file + build_tree), so every
render target registered in TARGETS shows up in the file diffs without plan knowing it.
`make_plan` runs named steps: the target's status, the set transition (transition.py), the layer
and definition changes (diff.py), image builds (images.py), then the rollout stages (stages.py,
rollout.py). The result is one JSON-able document (`Plan.doc`); formats.py turns it into text,
Markdown or JSON, and the plan file is that JSON with the hashes of both definitions
and rendered trees.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Set
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path, PurePosixPath

from .. import __version__, hostlist
from ..build import build_tree
from ..errors import DefinitionError, Finding, Severity
from ..knowledge.services import is_service_group
from ..matrix.load import Matrix
from ..model import Definition
from ..validate.pipeline import Result, validate_file
from .diff import Change, kubernetes_summary, model_changes, tree_diff, tree_hash
from . import delivery as delivery_mod
from . import stages as stages_mod
from .images import builds_of, identity_findings, image_diff
from ..knowledge import floors
from . import estimate as estimate_mod
from . import audit as audit_mod
from . import windows as windows_mod
from .rollout import Stage, baseline_mismatch, gates, rollback_target
from ..render.kubernetes.gpu_operator import pool_drivers, rollback_pool_drivers
from .transition import (COMPONENT_DISRUPTION, LAYER_OF, LAYERS, NONE, ORDER, REFLASH, RELOAD, RESTART,
                         SEVERITY, Problem, slurm_transition, transition)
from ..resolve import resolve

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
    today: date | None = None  # the planning day (--today): the schedule starts at its first window opening

    @property
    def definition(self) -> Definition:
        assert self.result.definition is not None
        return self.result.definition

    @property
    def matrix(self) -> Matrix:
        assert self.result.matrix is not None  # a side is a definition that validated
        return self.result.matrix

    @property
    def text(self) -> str:
        return self.result.source.text if self.result.source else ""


def load_side(path: str | Path, matrices: str | Path | None, today: date, ignore: Set[str] = frozenset(),
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
    return Side(label or Path(path).name, result, tree, today)


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
    operator_owned = d.kubernetes is not None and d.kubernetes.gpu_operator.driver_owner == "operator"
    if comp in ("driver", "container_toolkit") and operator_owned:  # the operator's (gpu_operator) on Kubernetes
        return _hosts_of(d, lambda g: gpu(g) and g.control_plane != "kubernetes")
    if comp in ("driver", "cuda", "nccl", "container_toolkit"):
        return _hosts_of(d, gpu)
    if comp == "gpu_operator":  # its operands run on the Kubernetes GPU nodes
        return _hosts_of(d, lambda g: g.control_plane == "kubernetes" and gpu(g))
    if comp == "kubernetes":
        return _hosts_of(d, lambda g: g.control_plane == "kubernetes")
    if comp == "slurm":
        return _hosts_of(d, lambda g: g.control_plane == "slurm")
    if comp in ("doca", "mft"):  # on service hosts only where OpenSM runs (its image carries them)
        return _hosts_of(d, lambda g: not is_service_group(g) or "subnet-manager" in g.services)
    return _hosts_of(d, lambda g: not is_service_group(g))


def has_containerd(d: Definition, group: str) -> bool:
    """A node group runs containerd: Kubernetes nodes do, other nodes when their image carries it."""
    g = d.nodes[group]
    return g.control_plane == "kubernetes" or "containerd" in d.images[g.image].packages


def _classes(d: Definition, comp: str, hosts: list[str]) -> dict[str, list[str]]:
    """Disruption class -> the hosts it applies to, for components whose class depends on the node."""
    group_of = {h: n for n, g in d.nodes.items() for h in hostlist.names(g.hosts)}
    if comp == "container_toolkit":  # containerd restarts to load the new runtime; enroot reads it per job
        cls = {h: RESTART if has_containerd(d, group_of[h]) else NONE for h in hosts}
    elif comp == "gpu_operator":  # an operator that owns the driver reloads it on every node it manages
        owner = d.kubernetes.gpu_operator.driver_owner if d.kubernetes else "image"
        cls = {h: RELOAD if owner == "operator" else RESTART for h in hosts}
    else:
        return {}
    out: dict[str, list[str]] = {}
    for h in hosts:
        out.setdefault(cls[h], []).append(h)
    return out


def _layer_changes(old: Side, new: Side) -> list[dict]:
    """Every component and firmware pin that changes with the set, with its layer, class and nodes."""
    d, ovs, nvs = new.definition, old.matrix.sets[old.definition.cluster.matrix], \
        new.matrix.sets[new.definition.cluster.matrix]
    oc, nc = ovs.components.model_dump(), nvs.components.model_dump()
    out = []
    has = {"slurm": bool(d.slurm) and any(g.control_plane == "slurm" for g in d.nodes.values()),
           "kubernetes": any(g.control_plane == "kubernetes" for g in d.nodes.values())}
    has["gpu_operator"] = has["kubernetes"]
    for comp in nc:
        if oc.get(comp) == nc.get(comp) or not has.get(comp, True):
            continue
        hosts = _component_hosts(d, comp)
        by_class = _classes(d, comp, hosts)
        worst = max(by_class, key=SEVERITY.__getitem__) if by_class else COMPONENT_DISRUPTION.get(comp, RESTART)
        out.append({"component": comp, "layer": LAYER_OF.get(comp, "firmware"), "from": oc.get(comp),
                    "to": nc.get(comp), "disruption": worst,
                    "nodes": len(hosts), "hosts": hostlist.fold(hosts) if hosts else "", "_hosts": hosts,
                    **({"by_class": {c: {"nodes": len(h), "hosts": hostlist.fold(h)} for c, h in by_class.items()},
                        "_by_class": by_class} if len(by_class) > 1 else {})})
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
    a = pool_drivers(old.definition, old.matrix.sets, old.definition.cluster.matrix)
    b = pool_drivers(new.definition, new.matrix.sets, new.definition.cluster.matrix)
    return {p: (a[p], v) for p, v in b.items() if p in a and a[p] != v}


def _target_refusals(new_set, allow_candidate: bool) -> list[Problem]:
    """A retired target is refused; a candidate one unless the plan is for its canary only."""
    if new_set.status == "retired":
        return [Problem("plan-target-retired", f"target set {new_set.name} is retired",
                        "plan towards a validated set (`clusterdef matrix list`)")]
    if new_set.status == "candidate" and not allow_candidate:
        return [Problem("plan-target-candidate", f"target set {new_set.name} is a candidate, not validated",
                        "pass --allow-candidate to plan the canary stage only; waves need a validated set")]
    return []


def _control_planes(d: Definition) -> tuple[bool, bool]:
    """(has Slurm nodes, has Kubernetes nodes)."""
    return (d.slurm is not None and any(g.control_plane == "slurm" for g in d.nodes.values()),
            any(g.control_plane == "kubernetes" for g in d.nodes.values()))


def _point(side: Side, set_name: str) -> str:
    return (f"{side.label} (definition {_sha(side.text)[:12]}, rendered tree {tree_hash(side.tree)[:12]}, "
            f"set {set_name})")


def _order_stages(stages: list[Stage], canary: stages_mod.Canary, k8s: stages_mod.KubernetesCanaries,
                  cp_stage: list[Stage], cp_first: bool, first_step: str) -> list[Stage]:
    """Canary (and drill) before the control plane, unless the canary's image needs the new slurmctld.
    The Kubernetes driver pools' canaries always come before it: it moves the pools' own NVIDIADriver.
    The other Kubernetes GPU groups' canaries come after it (their kubelet follows the API server)."""
    if cp_first:
        cp_stage[0].steps.insert(0, first_step)
        return stages + k8s.stages + cp_stage + canary.stages + k8s.group_stages
    return stages + canary.stages + k8s.stages + cp_stage + k8s.group_stages


def _disruption_summary(layer_changes: list[dict], changes: list[Change]) -> dict[str, dict]:
    """Per disruption class (worst first): how many changes have it, and how many nodes it is the
    worst disruption of. A node counts once, under its worst class: driver, CUDA and NCCL (or one
    image build carrying them all) are one drain and one reboot of that node, not three."""
    worst: dict[str, str] = {}
    counts: dict[str, int] = {}

    def hit(cls: str, hosts) -> None:
        counts[cls] = counts.get(cls, 0) + 1
        for h in hosts:
            if h not in worst or SEVERITY[cls] > SEVERITY[worst[h]]:
                worst[h] = cls

    for lc in layer_changes:
        for cls, hosts in (lc.get("_by_class") or {lc["disruption"]: lc["_hosts"]}).items():
            hit(cls, hosts)
    for c in changes:
        hit(c.disruption, c.hosts)
    return {cls: {"changes": counts[cls], "nodes": sum(1 for w in worst.values() if w == cls)}
            for cls in ORDER if cls in counts}


def _gate_baselines(d: Definition, matrix: Matrix, vs, base_dir: Path) -> tuple[list, str | None]:
    """The baseline entries the collective gates compare with, and their file as the plan names it: the
    site's own (`upgrade.baseline`, beside the definition) when the definition names one, else the target
    set's in the shared matrices. [] without a file; an unreadable one is refused by validation
    (upgrade-baseline-invalid) or, for the set's, the gate's own problem."""
    from ..baseline import BaselineError, load_baselines

    if d.upgrade.baseline:
        path, label = base_dir / d.upgrade.baseline, f"{d.upgrade.baseline} (upgrade.baseline)"
    elif vs.baseline:
        path, label = matrix.set_root(vs.name) / vs.baseline, vs.baseline
    else:
        return [], None
    try:
        return load_baselines(path), label
    except BaselineError:
        return [], label


def _baseline_warnings(d: Definition, baselines: list, vs, group: str) -> list[Problem]:
    """The gate compares the canary's collective with the recorded baseline: warn when that was taken on
    another GPU or fabric kind."""
    out = " -o " + d.upgrade.baseline if d.upgrade.baseline else ""
    return [Problem("baseline-hardware", w, "record a baseline on the canary's hardware: `clusterdef baseline "
                    f"record LOG --set {vs.name} --node-group {group} --fabric KIND{out}`")
            for w in baseline_mismatch(d, baselines, group)]


def delivery_stage(name: str, dsteps: list[dict]) -> Stage:
    return Stage(name, "deliver", steps=[delivery_mod.describe(s) for s in dsteps], delivery=dsteps)


def _with_delivery(stages: list[Stage], dsteps: list[dict], transition: dict | None, canary_only: bool
                   ) -> tuple[list[Stage], list[Problem]]:
    """Where the changed files are delivered, as stages of their own:
    - a configuration change alone: after the control plane stage, else after prepare;
    - a rollout (canary, waves): after its last node stage, when every node runs the new set; while the Slurm
      major moves, the transition files (every running slurmd parses them) right after the control plane, and
      the final ones after the last wave;
    - a canary-only plan: withheld with the waves (the candidate's files would reach nodes it does not run on)."""
    warnings: list[Problem] = []
    cp = next((i + 1 for i, s in enumerate(stages) if s.kind == "control-plane"), None)
    out = list(stages)
    if transition and cp is not None:
        out.insert(cp, delivery_stage("deliver the transition configuration",
                                      [delivery_mod.transition_step(transition)]))
    if not dsteps:
        return out, warnings
    nodes = [i for i, s in enumerate(out) if s.kind in ("canary", "rollback-drill", "wave", "boot-default",
                                                         "driver-pool")]
    if canary_only:
        warnings.append(Problem("delivery-withheld", "the changed files are not delivered by a canary-only plan: "
                                f"{', '.join(f for st in dsteps for f in st['files'][:3])}...",
                                "plan again once the target set is validated: its waves deliver them"))
        return out, warnings
    if nodes:
        at = nodes[-1] + 1
    elif cp is not None:
        at = cp + (1 if transition else 0)
    else:
        at = next((i + 1 for i, s in enumerate(out) if s.kind == "prepare"), 0)
    out.insert(at, delivery_stage("deliver configuration", dsteps))
    return out, warnings


def _side_doc(side: Side, vs) -> dict:
    return {"file": side.label, "set": vs.name, "status": vs.status, "definition_sha256": _sha(side.text),
            "tree_sha256": tree_hash(side.tree)}


def _slurm_transition_doc(new: Side, matrix: Matrix, old_set, has_slurm: bool) -> dict:
    """{"slurm_transition": ...} when the Slurm major changes (plan/transition.py), else {}."""
    if not has_slurm:
        return {}
    resolved = resolve(new.definition, matrix, Path(new.result.file).resolve().parent)
    doc = slurm_transition(resolved, old_set.components.slurm)
    return {"slurm_transition": doc} if doc else {}


def make_plan(old: Side, new: Side, allow_candidate: bool = False, start: datetime | None = None) -> Plan:
    """The plan document: refusals and warnings, the set change layer by layer with the transition's
    checks, the definition changes, image builds, disruption, the rollout stages and the file diffs.
    Raises PlanInputError when image identities across the sides are inconsistent (located)."""
    d = new.definition
    matrix = new.matrix
    old_set = matrix.sets.get(old.definition.cluster.matrix) or old.matrix.sets[old.definition.cluster.matrix]
    new_set = matrix.sets[d.cluster.matrix]
    refusals = _target_refusals(new_set, allow_candidate)
    warnings: list[Problem] = []
    canary_only = new_set.status == "candidate"
    has_slurm, has_k8s = _control_planes(d)
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
    baselines, baseline_file = _gate_baselines(d, matrix, new_set, Path(new.result.file).resolve().parent)
    scope = stages_mod.Scope(d, new_set.name, layer_changes, changes, rb_set,
                             stages_mod.nodes_by_group(d, layer_changes, changes), builds_of(new.tree),
                             builds_of(old.tree), {i["image"] for i in image_changes},
                             gates(d, has_slurm, has_k8s, baseline_file), moved_pools(old, new),
                             rollback_pool_drivers(old.definition, d, matrix.sets, old_set.name, rb_set)
                             if rb_set else {}, baselines, baseline_file)

    warnings += [Problem("rollback-target", p, "set upgrade.rollback.target to a validated set") for p in rb_problems]
    stages: list[Stage] = [stages_mod.image_stage(image_changes)] if image_changes else []
    stages.append(stages_mod.prepare_stage(_point(old, old_set.name), old_set.name, rb_set))
    canary = stages_mod.canary_stages(scope)
    k8s = stages_mod.kubernetes_canaries(scope, canary)
    stages_mod.hold(scope, k8s)  # the pools' other nodes wait for their wave (the control plane moves the pools)
    dsteps = delivery_mod.steps(old.tree, new.tree)
    cp_steps = stages_mod.control_plane_steps(scope, t, (old_set.components.gpu_operator,
                                                         new_set.components.gpu_operator), has_k8s, canary, k8s,
                                              delivered=bool(dsteps))
    cp_stage = [Stage("control plane and cluster config", "control-plane", [], cp_steps,
                      scope.gates_for(canary.hosts)[2:] if canary.hosts else [])] if cp_steps else []
    cp_first = stages_mod.control_plane_first(scope, canary)
    stages_mod.kubernetes_group_canaries(scope, canary, k8s, daemons=bool(cp_stage) and (cp_first or not canary_only))
    warnings += canary.warnings + k8s.warnings + _baseline_warnings(d, baselines, new_set, canary.group)
    stages = _order_stages(stages, canary, k8s, cp_stage, cp_first,
                           f"before the canary: its image {scope.new_builds[d.nodes[canary.group].image].artefact} "
                           "carries the new slurmd, and slurmctld may not be older than slurmd" if cp_first else "")
    wave_list = stages_mod.wave_list(scope, canary, k8s)
    withheld = 0
    if canary_only:  # the waves wait for the set to be validated
        withheld = len(wave_list)
        if cp_first:
            warnings.append(Problem("canary-needs-control-plane", "the canary boots an image with the new slurmd, "
                                    "so the control plane is upgraded before it even in a canary-only plan",
                                    "review the control-plane stage: slurmctld and slurmdbd move to the candidate"))
        else:
            stages = [s for s in stages if s.kind != "control-plane"]
    else:
        stages += stages_mod.wave_stages(scope, wave_list)
        boot = stages_mod.boot_default_stage(scope)
        stages += [boot] if boot else []
        stages += stages_mod.driver_pool_stages(scope, k8s)
    held = stages_mod.hold_stage(scope)
    cp_at = next((i for i, s in enumerate(stages) if s.kind == "control-plane"), None)
    if held and cp_at is not None:  # before the control plane releases the pools' new driver
        stages.insert(cp_at, held)

    if any(st.kind in ("canary", "wave") for st in stages):  # the waves install the set's health check node by node
        dsteps = [st for st in dsteps if st["playbook"] != "nodecheck.yml"]
    slurm_doc = _slurm_transition_doc(new, matrix, old_set, has_slurm)
    stages, delivery_warnings = _with_delivery(stages, dsteps, slurm_doc.get("slurm_transition"), canary_only)
    warnings += delivery_warnings
    files = tree_diff(old.tree, new.tree)
    est = estimate_mod.estimate([st.to_json() for st in stages], d.upgrade, estimate_mod.gpu_nodes(d))
    sched = windows_mod.schedule(d, [st.to_json() for st in stages], est["timeline"], start, new.today)
    disruption = _disruption_summary(layer_changes, changes)
    approvals = windows_mod.approvals(d, disruption)
    needs_approval = audit_mod.changes_needing_approval(old.definition, d)
    doc = {
        "plan_format": PLAN_FORMAT,
        "clusterdef": __version__,
        "cluster": d.cluster.name,
        "from": _side_doc(old, old_set),
        "to": _side_doc(new, new_set),
        "refused": bool(refusals),
        "refusals": [p.to_json() for p in refusals],
        "warnings": [p.to_json() for p in warnings],
        "canary_only": canary_only,
        "set_change": {
            "from": old_set.name, "to": new_set.name, "to_status": new_set.status,
            "layers": [{k: v for k, v in lc.items() if not k.startswith("_")} for lc in layer_changes],
        },
        "compatibility": t.to_json() if t else None,
        **slurm_doc,
        "changes": [c.to_json() for c in changes],
        "images": image_changes,
        "disruption": disruption,
        **({"approvals": approvals} if approvals else {}),  # service.approvers of the classes this plan has
        # changes of the rules that govern changes (service.approvers, windows; plan/audit.py HOOKS)
        **({"changes_needing_approval": needs_approval} if needs_approval else {}),
        "rollout": {
            "layer_order": [name for name, _ in LAYERS],
            "canary": {"hosts": hostlist.fold(canary.hosts) if canary.hosts else "", "nodes": len(canary.hosts)},
            "kubernetes_canaries": [{"by": by, "name": name, "hosts": hostlist.fold(hosts), "nodes": len(hosts)}
                                    for by, named in (("driver-pool", k8s.hosts), ("node-group", k8s.group_hosts))
                                    for name, hosts in named.items() if hosts],
            "waves": len(wave_list), "waves_withheld": withheld,
            "wave_size": d.upgrade.wave_size,
            "max_unavailable_pct": d.upgrade.max_unavailable_pct,
            # the lowest capacity each partition, tenant and Kubernetes pool keeps while the waves run in turn
            "floors": floors.lowest(d, [st.hosts for st in stages if st.kind in ("canary", "rollback-drill", "wave")]),
            "gates": scope.gate_list,
            "estimate": est,
            **({"schedule": sched} if sched else {}),  # the stages in the maintenance windows (service)
            "rollback": {"target": rb_set, "exercised_on_canary": bool(canary.hosts)
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
    from ..matrix.load import matrices_root

    root = matrices_root(matrices, definition)
    with tempfile.TemporaryDirectory(prefix="clusterdef-base-") as tmp:
        path = materialise_base(ref, definition, Path(tmp))
        side = load_side(path, root, today, FROM_SIDE_IGNORED, label=f"{ref}:{Path(definition).name}")
    return side
