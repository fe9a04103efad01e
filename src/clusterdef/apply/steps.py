"""The steps of a plan's rollout (`clusterdef apply`): each rollout stage becomes one or more steps,
each step one `ansible-playbook` run on one upgrade wave group of the *rendered* inventory
(`ansible/inventory/hosts.yml`, `upgrade_waves` > `wave_000` (canary), `wave_001`...):

| plan stage | steps (playbook in the playbooks folder) |
|---|---|
| image build and publish | `publish-image.yml` when present (new builds onto the boot server), else skipped |
| prepare | `prepare.yml` when the folder has one, else recorded as skipped |
| canary | `upgrade.yml` on the canary wave, then the gates; stateless: `reimage.yml` (point, reboot) |
| rollback drill | `rollback.yml`, the gates, `upgrade.yml` again (re-apply the target); stateless: |
| | `reimage.yml` pointing back at the rollback build, the gates, `reimage.yml` forward again |
| control plane and cluster config | `control-plane.yml` (required unless `--skip-stage control-plane`) |
| hold the driver pools | `driver-pool.yml`: the pools' nodes no canary moves labelled out of the driver upgrade |
| wave N | `upgrade.yml` on the wave, then the gates; stateless: `reimage.yml`, then the gates; a wave of |
| | held nodes first runs `driver-pool.yml` releasing them and waiting for their upgrade state |
| boot defaults | `boot-pointer.yml`: the new tree's group defaults and entry script, and the stages' pointers removed |
| driver pool P | `driver-pool.yml`: the Kubernetes canary hosts labelled back into GPU Operator driver pool P |

A canary or rollback drill of a GPU Operator driver pool (`driver` in the stage) runs `driver-pool.yml`
first: the canary applies the new tree's `<pool>.canary` NVIDIADriver and labels its hosts into it, the
drill labels them back into the pool (still on the old driver), runs the gates, and labels them forward
again. The objects and labels (`clusterdef_nvidia_drivers`, `clusterdef_driver_labels`) come from the new
rendered tree (DriverPools), never from the plan file. The other nodes of a moving pool are held before the
control-plane stage (`clusterdef_driver_hold`: `nvidia.com/gpu-driver-upgrade.skip=true`) and released by
their wave (`clusterdef_driver_release`: the label removed, then the wait for the GPU Operator's upgrade
controller, which drains them; clusterdef does not). Those node names are the stage's hosts found in the
rendered inventory's upgrade waves (wave_groups), passed as extra vars, never templated into a command.

Stateless steps carry `clusterdef_boot_pointers` (a list of `{host, path, content}` under the boot
server's HTTP root; empty content removes the file) and `clusterdef_boot_build` (the artefact),
both computed from the new definition (BootPointers), never read from the plan file.

Gates are `gates.yml` (site specific: NCCL vs baseline, Slurm job, GPU pod) when present, else
`enforce-baseline.yml` limited to the wave (health and drift through node_admission).
Every run gets `clusterdef_wave`, `clusterdef_stage`, `clusterdef_step` and `clusterdef_rollback`
as extra vars; `clusterdef_rollback` is true for `rollback.yml` and the gates right after it, so
the gates hold the nodes to the rollback set rather than putting the target back.
Nothing here runs Ansible or prints: prepare.py builds the steps from a checked plan file,
record.py runs them, cli/apply.py shows them.
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml import YAML

from .. import hostlist
from ..plan import Side
from . import ApplyError

GATES = ("gates.yml", "enforce-baseline.yml")
STAGE_KINDS = ("image", "prepare", "canary", "rollback-drill", "control-plane", "wave", "boot-default", "driver-pool",
               "driver-hold", "deliver", "nodes")
SKIPPABLE = ("image", "prepare", "control-plane", "nodes")


@dataclass
class Step:
    stage: str          # the plan stage's name ("canary", "wave 1", ...)
    kind: str           # the plan stage's kind
    action: str         # prepare | upgrade | gates | rollback | reapply | control-plane
    playbook: Path | None  # None: skipped (reason in `skipped`)
    wave: str = ""      # inventory group (wave_NNN) or "" for cluster-wide steps
    hosts: list[str] = field(default_factory=list)
    limit: str | None = None
    skipped: str = ""
    rollback: bool = False  # the step runs against the rollback set (rollback.yml and the gates after it)
    vars: dict = field(default_factory=dict)  # extra vars of this step (boot pointers of a stateless stage)
    returns: bool = False  # the wave's last step: when it succeeds, its nodes are back in service
    gpus: int = 0          # the GPUs of `hosts` (capacity returned when `returns`)
    plan: str = ""         # the plan, as drain reasons name it: clusterdef:<plan>:<stage> (<cluster>/<from>-><to>)

    @property
    def label(self) -> str:
        return f"{self.stage}: {self.action}" + (f" {self.wave}" if self.wave else "")

    def extravars(self, extra: dict) -> dict:
        return {**extra, **self.vars, "clusterdef_wave": self.wave or "none", "clusterdef_stage": self.stage,
                "clusterdef_step": self.action, "clusterdef_rollback": self.rollback,
                **({"clusterdef_plan": self.plan} if self.plan else {})}

    def to_json(self) -> dict:
        return {"stage": self.stage, "kind": self.kind, "action": self.action,
                "playbook": str(self.playbook) if self.playbook else None, "wave": self.wave,
                "hosts": hostlist.fold(self.hosts) if self.hosts else "", "nodes": len(self.hosts),
                "limit": self.limit, **({"skipped": self.skipped} if self.skipped else {}),
                **({"rollback": True} if self.rollback else {}),
                **({"returns_capacity": True, "gpus": self.gpus} if self.returns else {}),
                **({"boot_build": self.vars["clusterdef_boot_build"]} if "clusterdef_boot_build" in self.vars else {})}


# --------------------------------------------------------------------------- waves (reading them: inventory.py)

def wave_groups(stage: dict, waves: dict[str, list[str]]) -> list[tuple[str, list[str], str | None]]:
    """(group, hosts, limit) covering the stage's hosts: usually exactly one whole wave group;
    a stage with only some of a group's hosts (nodes the change does not touch are left out
    of the plan) gets a limit to its hosts."""
    want = list(hostlist.names(stage["hosts"])) if stage.get("hosts") else []
    wanted = set(want)
    out = []
    covered: set[str] = set()
    for group, hosts in waves.items():
        mine = [h for h in hosts if h in wanted]
        if mine:
            covered.update(mine)
            out.append((group, mine, None if len(mine) == len(hosts) else ",".join(mine)))
    missing = [h for h in want if h not in covered]
    if missing:
        raise ApplyError([f"stage {stage['name']!r}: {hostlist.fold(missing)} belong to no upgrade wave of the "
                          "rendered inventory"], "render the ansible target (it writes upgrade_waves) and plan again")
    return out


# --------------------------------------------------------------------------- plan -> steps

def _delivery_steps(stage: dict, playbooks: Path, deliveries: "Deliveries | None", problems: list[str]) -> list[Step]:
    """A `deliver` stage: deliver.yml per step of files it installs, the role's playbook for files a role
    carries; Kubernetes objects are `pulumi up`'s (CI), recorded as such."""
    out = []
    for d in stage.get("delivery", []):
        if not d["files"]:  # only removals: nothing to install (the plan names them for review)
            continue
        if d["via"] == "pulumi":
            out.append(Step(stage["name"], stage["kind"], "pulumi", None, skipped="Kubernetes objects: `pulumi up` of "
                            "infra/ (the CI job that previews and applies them), not ansible"))
            continue
        pb = _playbook(playbooks, d["playbook"])
        if pb is None:
            problems.append(f"stage {stage['name']!r} needs {d['playbook']} in {playbooks}, which has none")
            continue
        if d["via"] == "deliver":
            if deliveries is None:
                problems.append(f"stage {stage['name']!r} delivers files and needs the new tree's delivery.json")
                continue
            try:
                out.append(Step(stage["name"], stage["kind"], "deliver", pb,
                                vars=deliveries.transition(d["files"]) if d.get("transition") else
                                deliveries.deliver(d["files"], d.get("remove_accounts"))))
                daemons = sorted({x for names in d.get("restarts", {}) for x in ("slurmctld", "slurmd")
                                  if x in names.split()})
                if daemons:  # keys scontrol reconfigure does not apply (plan/delivery.py: slurm_restarts)
                    rpb = _playbook(playbooks, "slurm-restart.yml")
                    if rpb is None:
                        problems.append(f"stage {stage['name']!r} needs slurm-restart.yml in {playbooks}")
                    else:
                        out.append(Step(stage["name"], stage["kind"], "slurm-restart", rpb,
                                        vars={"clusterdef_slurm_restart": daemons}))
            except ApplyError as exc:
                problems.extend(exc.reasons)
        else:  # a role's playbook installs them from the rendered group_vars
            out.append(Step(stage["name"], stage["kind"], f"deliver {d['playbook'].removesuffix('.yml')}", pb))
    return out


def _snapshot_limit(touched: list[tuple[str, list[str], str | None]], waves: dict[str, list[str]]) -> str:
    """The limit covering every touched host: a wave group by name when its hosts are all touched
    (by one stage or by several: a Kubernetes group's canary and its wave), else its touched hosts."""
    hit: dict[str, set[str]] = {}
    for group, hosts, _ in touched:
        hit.setdefault(group, set()).update(hosts)
    return ",".join(g if hit[g] == set(waves[g]) else ",".join(h for h in waves[g] if h in hit[g])
                    for g in waves if g in hit)


def _playbook(playbooks: Path, *names: str) -> Path | None:
    for n in names:
        if (playbooks / n).is_file():
            return playbooks / n
    return None


class BootPointers:
    """The files a stateless stage writes on the boot server (paths under its HTTP root): a boot
    pointer per host to a build the new definition keeps, and at the end the group defaults."""

    def __init__(self, new: Side):
        from ..render import pxe
        from ..resolve import resolve

        d = new.definition
        self.pxe = pxe
        self.tree = new.tree
        self.resolved = resolve(d, new.matrix, Path(new.result.file).parent)
        self.group_of = {h: g for g, n in d.nodes.items() for h in hostlist.names(n.hosts)}
        self.builds = {b.artefact: b for img in d.images for b in pxe.builds(self.resolved, img).values()}
        # boot-pointer.yml and publish-image.yml run on the inventory's boot server (services: [boot-server])
        hosts_yml = new.tree.get("ansible/inventory/hosts.yml", "")
        self.server = {"clusterdef_boot_server": "boot_server"} if re.search(r"^\s+boot_server:", hosts_yml, re.M) \
            else {}

    def point(self, hosts: list[str], artefact: str) -> dict:
        build = self.builds.get(artefact)
        if build is None:
            raise ApplyError([f"build {artefact} is not kept by the new definition"], "plan again")
        files = []
        for h in hosts:
            g = self.group_of[h]
            mac = self.resolved.macs.get(g, {}).get(h)
            if not mac:
                raise ApplyError([f"host {h} has no MAC: a boot pointer is found by MAC"], "list the group's MACs")
            files.append({"host": h, "path": self.pxe.pointer_path(mac),
                          "content": self.pxe.host_pointer(self.resolved, h, g, mac, build)})
        return {**self.server, "clusterdef_boot_build": artefact, "clusterdef_boot_pointers": files}

    def defaults(self, groups: list[str], hosts: list[str]) -> dict:
        files = [{"host": "", "path": rel[len("pxe/"):], "content": self.tree[rel]}
                 for rel in ["pxe/ipxe/boot.ipxe", *(f"pxe/ipxe/groups/{g}.ipxe" for g in groups)]]
        for h in hosts:  # pointers of the stateless stages, now the same as the default: removed
            mac = self.resolved.macs.get(self.group_of[h], {}).get(h)
            if mac:
                files.append({"host": h, "path": self.pxe.pointer_path(mac), "content": ""})
        return {**self.server, "clusterdef_boot_pointers": files}

    def publish(self) -> dict:
        files = [{"host": "", "path": rel[len("pxe/"):], "content": text} for rel, text in sorted(self.tree.items())
                 if rel.startswith("pxe/ipxe/images/") or rel == "pxe/published"]
        images = self.resolved.definition.images
        # signed images: their checksum file, its signature and the verifier initrd go with them (sign.sh)
        signed = sorted(a for a, b in self.builds.items() if images[b.name].signing is not None)
        return {**self.server, "clusterdef_boot_pointers": files, "clusterdef_artefacts": sorted(self.builds),
                "clusterdef_signed_artefacts": signed}


class DriverPools:
    """What a Kubernetes canary stage sends to driver-pool.yml: NVIDIADriver objects of the new rendered
    tree (kubernetes/gpu-operator/nvidiadrivers.yaml) and node labels (clusterdef.dev/driver-pool)."""

    FILE = "kubernetes/gpu-operator/nvidiadrivers.yaml"

    def __init__(self, new: Side):
        text = new.tree.get(self.FILE, "")
        self.objects = {o["metadata"]["name"]: o for o in YAML(typ="safe", pure=True).load_all(text) if o}

    def label(self, hosts: list[str], value: str, apply: tuple[str, ...] = ()) -> dict:
        missing = [n for n in apply if n not in self.objects]
        if missing:
            raise ApplyError([f"the new tree has no NVIDIADriver {', '.join(missing)}"], "render the kubernetes target")
        return {"clusterdef_nvidia_drivers": [self.objects[n] for n in apply],
                "clusterdef_driver_labels": [{"node": h, "pool": value} for h in hosts]}


class Deliveries:
    """What a `deliver` stage's steps send to their playbooks: deliver.yml gets each host's files and actions
    (apply/delivery.py) from the new tree, read on the control machine from the apply snapshot."""

    TREE = "{{ clusterdef_tree_dir }}"  # session.start: the snapshot's to/tree
    TRANSITION = "{{ clusterdef_transition_dir }}"  # session.start: the Slurm transition files of the plan

    def __init__(self, new: Side, hosts_yml: str):
        from .delivery import Hosts

        self.new = new
        self.tree = new.tree
        self.hosts = Hosts(hosts_yml)

    def deliver(self, files: list[str], remove_accounts: list[str] | None = None) -> dict:
        from .delivery import payload

        return payload(self.tree, Path(self.TREE), files, self.hosts, remove_accounts)

    def transition(self, files: list[str]) -> dict:
        """The Slurm transition files (the plan's slurm_transition), delivered as their final namesakes are."""
        from ..render import delivery
        from ..resolve import resolve
        from .delivery import payload

        d = self.new.definition
        resolved = resolve(d, self.new.matrix, Path(self.new.result.file).resolve().parent)
        values, holds = delivery.context(resolved), delivery.conditions(resolved)
        entries = {rel: e for rel in files if (e := delivery.entry(rel, values, holds)) is not None}
        return payload(self.tree, Path(self.TREE), files, self.hosts, other=(entries, self.TRANSITION))


def steps_for_plan(doc: dict, waves: dict[str, list[str]], playbooks: Path, skip: Set[str] = frozenset(),
                   boot: BootPointers | None = None, smoke: bool = False,
                   pools: DriverPools | None = None, deliveries: Deliveries | None = None) -> list[Step]:
    """The ordered steps of the plan's rollout. Raises ApplyError (nothing has run) when a
    playbook a stage needs is missing or a stage's hosts are not in the inventory's waves.
    Stateless stages run reimage.yml with the boot pointers `boot` writes (needed then).
    The prepare stage starts with the versions snapshot (snapshot.yml on every host the rollout
    touches); `smoke`: the definition lists smoke tests, so smoke.yml runs after every gate."""
    problems: list[str] = []
    steps: list[Step] = []
    upgrade, rollback = _playbook(playbooks, "upgrade.yml"), _playbook(playbooks, "rollback.yml")
    reimage = _playbook(playbooks, "reimage.yml")
    gates = _playbook(playbooks, *GATES)
    smoke_pb = _playbook(playbooks, "smoke.yml")
    rollout = doc.get("rollout", {}).get("stages", [])
    touched = [wg for st in rollout if st.get("kind") in ("canary", "wave") for wg in wave_groups(st, waves)]

    def pointers(stage: dict, hosts: list[str], key: str) -> dict:
        if key in ("hold", "release"):  # driver-pool.yml: the upgrade controller's skip label, by node
            return {f"clusterdef_driver_{key}": list(hosts)}
        if key in ("canary", "pool", "to-canary"):  # driver-pool.yml: labels (and the canary's object)
            if pools is None:
                raise ApplyError([f"stage {stage['name']!r} moves a driver pool and needs the rendered NVIDIADrivers"])
            drv = stage["driver"]
            value = drv["pool"] if key == "pool" else drv["canary"]
            return pools.label(hosts, value, (drv["canary"],) if key == "to-canary" else ())
        if boot is None:
            raise ApplyError([f"stage {stage['name']!r} is stateless and needs the boot pointers"])
        return boot.point(hosts, stage["boot"][key])

    def need(pb: Path | None, name: str, stage: str) -> Path | None:
        if pb is None:
            problems.append(f"stage {stage!r} needs {name} in {playbooks}, which has none")
        return pb

    def per_wave(stage: dict, *actions: tuple, smoke_here: bool = True) -> None:
        if smoke and smoke_here:  # the definition's smoke tests after every gate, on the same hosts and set
            at = [i + 1 for i, a in enumerate(actions) if a[0] == "gates"]
            for i in reversed(at):
                actions = (*actions[:i], ("smoke", smoke_pb, "smoke.yml"), *actions[i:])
        drv = _playbook(playbooks, "driver-pool.yml")
        if stage.get("driver"):  # a GPU Operator driver pool's canary: labels first (the operator moves the driver)
            if stage["kind"] == "canary":
                actions = (("driver", drv, "driver-pool.yml", "to-canary"), *actions)
            elif stage["kind"] == "wave":  # held nodes: released first, the upgrade controller drains them
                actions = (("driver-release", drv, "driver-pool.yml", "release"), *actions)
            else:  # the drill: back into the pool, the rollback and its gates, then into the canary again
                cut = next(i for i, a in enumerate(actions) if a[0] == "reapply")
                actions = (("driver-back", drv, "driver-pool.yml", "pool"), *actions[:cut],
                           ("driver-again", drv, "driver-pool.yml", "canary"), *actions[cut:])
        for group, hosts, limit in wave_groups(stage, waves):
            rolled_back = False  # the gates right after rollback.yml check the rollback set, not the target
            for n, (action, pb, pb_name, *key) in enumerate(actions, 1):
                rolled_back = action == "rollback" or (rolled_back and action in ("gates", "smoke"))
                # driver-pool.yml runs where kubectl reaches the cluster: no limit to the wave's hosts
                lim = None if action.startswith("driver") else \
                    limit if action in ("upgrade", "reapply", "rollback") else (limit or group)
                steps.append(Step(stage["name"], stage["kind"], action, need(pb, pb_name, stage["name"]), group,
                                  hosts, lim, rollback=rolled_back, vars=pointers(stage, hosts, key[0]) if key else {},
                                  returns=n == len(actions) and stage["kind"] in ("canary", "wave")))

    for stage in doc.get("rollout", {}).get("stages", []):
        kind, name = stage.get("kind"), stage.get("name", "?")
        if kind not in STAGE_KINDS:
            problems.append(f"stage {name!r} has an unknown kind {kind!r} (plan file from a newer clusterdef?)")
            continue
        try:
            if kind in skip:
                steps.append(Step(name, kind, kind, None, skipped="skipped by --skip-stage"))
            elif kind == "image":
                pb = _playbook(playbooks, "publish-image.yml")
                steps.append(Step(name, kind, "publish", pb, skipped="" if pb else
                                  "no publish-image.yml: build the image and copy its artefacts, pxe/ipxe/images/ and "
                                  "pxe/published to the boot server by hand before the canary",
                                  vars=boot.publish() if boot and pb else {}))
            elif kind == "boot-default":
                pb = need(_playbook(playbooks, "boot-pointer.yml"), "boot-pointer.yml", name)
                groups = [g for g in stage.get("boot", {}).get("groups", "").split(",") if g]
                hosts = list(hostlist.names(stage["hosts"])) if stage.get("hosts") else []
                steps.append(Step(name, kind, "boot-default", pb,  # runs on the boot server, not on the hosts
                                  vars=boot.defaults(groups, hosts) if boot else {}))
            elif kind == "driver-hold":  # the pools' other nodes out of the driver upgrade until their wave
                pb = need(_playbook(playbooks, "driver-pool.yml"), "driver-pool.yml", name)
                hosts = [h for _, hs, _ in wave_groups(stage, waves) for h in hs]
                steps.append(Step(name, kind, "driver-hold", pb, hosts=hosts, vars=pointers(stage, hosts, "hold")))
            elif kind == "driver-pool":  # the Kubernetes canary hosts back into their pool (kubectl, not the hosts)
                pb = need(_playbook(playbooks, "driver-pool.yml"), "driver-pool.yml", name)
                hosts = list(hostlist.names(stage["hosts"])) if stage.get("hosts") else []
                steps.append(Step(name, kind, "driver-pool", pb, hosts=hosts, vars=pointers(stage, hosts, "pool")))
            elif kind == "wave" and stage.get("services"):  # service hosts: their services' own checks, no smoke
                service_gates = _playbook(playbooks, "service-gates.yml")
                move = ("upgrade", reimage, "reimage.yml", "to") if stage.get("provisioning") == "stateless" \
                    else ("upgrade", upgrade, "upgrade.yml")
                per_wave(stage, move, ("gates", service_gates, "service-gates.yml"), smoke_here=False)
            elif kind in ("canary", "wave") and stage.get("provisioning") == "stateless":
                per_wave(stage, ("upgrade", reimage, "reimage.yml", "to"), ("gates", gates, " or ".join(GATES)))
            elif kind == "rollback-drill" and stage.get("provisioning") == "stateless":
                per_wave(stage, ("rollback", reimage, "reimage.yml", "back"), ("gates", gates, " or ".join(GATES)),
                         ("reapply", reimage, "reimage.yml", "to"))
            elif kind == "prepare":
                if touched:  # every node's versions on record before the first change (apply.snapshot)
                    pb = _playbook(playbooks, "snapshot.yml")
                    if pb is None:
                        problems.append(f"stage {name!r} needs snapshot.yml in {playbooks} (every node's versions "
                                        "recorded before the first change), which has none; or record them by "
                                        "hand and pass --skip-stage prepare")
                    steps.append(Step(name, kind, "snapshot", pb, hosts=[h for _, hs, _ in touched for h in hs],
                                      limit=_snapshot_limit(touched, waves)))
                pb = _playbook(playbooks, "prepare.yml")
                steps.append(Step(name, kind, "prepare", pb, skipped="" if pb else
                                  "no prepare.yml: take the slurmdbd dump and the etcd snapshot by hand"))
            elif kind == "control-plane":
                pb = _playbook(playbooks, "control-plane.yml")
                if pb is None:
                    problems.append(f"stage {name!r} needs control-plane.yml in {playbooks}, which has none; "
                                    "write one, or upgrade the control plane by hand and pass "
                                    "--skip-stage control-plane")
                steps.append(Step(name, kind, "control-plane", pb))
            elif kind == "deliver":
                steps += _delivery_steps(stage, playbooks, deliveries, problems)
            elif kind == "nodes":  # bring-up: the nodes boot (or are installed), get the set's layers, are admitted
                pb = need(_playbook(playbooks, "nodes.yml"), "nodes.yml", name)
                hosts = list(hostlist.names(stage["hosts"])) if stage.get("hosts") else []
                steps.append(Step(name, kind, "nodes", pb, hosts=hosts, returns=True))
                steps += _delivery_steps(stage, playbooks, deliveries, problems)  # then the files roles put there
            elif kind in ("canary", "wave"):
                per_wave(stage, ("upgrade", upgrade, "upgrade.yml"), ("gates", gates, " or ".join(GATES)))
            elif kind == "rollback-drill":
                per_wave(stage, ("rollback", rollback, "rollback.yml"), ("gates", gates, " or ".join(GATES)),
                         ("reapply", upgrade, "upgrade.yml"))
        except ApplyError as exc:
            problems += exc.reasons
    if problems:
        raise ApplyError(list(dict.fromkeys(problems)), "nothing was run; fix the playbooks folder (--playbooks) "
                         "or the plan")
    plan = plan_name(doc)
    for st in steps:
        st.plan = plan
    return steps


def plan_name(doc: dict) -> str:
    """How drain reasons name the plan (`clusterdef:<plan>:<stage>`): cluster and the set change."""
    return f"{doc.get('cluster', '')}/{(doc.get('from') or {}).get('set', '')}->{(doc.get('to') or {}).get('set', '')}"

