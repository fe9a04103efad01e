"""Day 0: the bring-up plan of a new cluster (`clusterdef plan --to DEF` with no old definition), carried out
by `clusterdef apply` like any change:

1. image build and publish      every image's build onto the boot server (publish-image.yml)
2. control plane                on the service hosts (installed first, as the boot server every node boots from
                                must be): the boot server's software, slurmdbd and its database, then the
                                controllers (control-plane.yml; slurmctld starts once its files arrive)
3. deliver configuration        every rendered file of the `config` stage onto its hosts (deliver.yml: the
                                consumer's check, then in place, then the daemon started or reloaded: dnsmasq,
                                slurmctld (after `qos.sh names` on the controller where a partition has a QOS),
                                then the accounts and QOS limits in slurmdbd, OpenSM, Prometheus), the roles'
                                files (backup, storage admin), the Kubernetes objects (`pulumi up`, CI)
4. boot defaults                the iPXE entry script and every group's default boot on the boot server
5. nodes                        nodes power on and boot (stateless: their image over PXE; stateful: installed and
                                brought to the set's layers), Slurm nodes' configless slurmd, then admission; then
                                the files roles put on the nodes (identity, mounts, networkd)

The document has the plan file's shape: the `from` side is empty (no definition, no tree) and `bringup` is true,
so apply checks it the same way (hashes, re-derived plan, forgery) and has no rollback point to snapshot."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from .. import __version__, hostlist
from .delivery import describe as delivery_describe
from .delivery import steps as delivery_steps
from .diff import tree_hash
from .images import image_diff
from .rollout import Stage

if TYPE_CHECKING:
    from . import Plan

EMPTY = {"file": "", "set": "", "status": "", "definition_sha256": hashlib.sha256(b"").hexdigest(),
         "tree_sha256": tree_hash({})}


def _control_plane(side) -> list[str]:
    d = side.definition
    vs = side.matrix.sets[d.cluster.matrix]
    steps = []
    if d.slurm is not None:
        a = d.slurm.accounting
        if a.storage == "slurmdbd" and a.host:
            steps.append(f"slurmdbd {vs.components.slurm} on {a.host}: packages, slurmdbd.conf (StoragePass from the "
                         "vault), started")
        steps.append(f"slurmctld {vs.components.slurm} on {', '.join(d.slurm.controllers)}: packages; it starts when "
                     "its files arrive (deliver configuration)")
    if d.kubernetes is not None:
        steps.append(f"Kubernetes {vs.components.kubernetes} control plane and the GPU Operator "
                     f"{vs.components.gpu_operator}: `pulumi up` of infra/ after the API server is up (CI)")
    return steps


def make_bringup(new) -> "Plan":
    """The bring-up plan document of `new` (a plan.Side); plan/__init__.py seals and formats it like any plan."""
    from . import Plan, _side_doc, _target_refusals, delivery_stage

    d = new.definition
    vs = new.matrix.sets[d.cluster.matrix]
    refusals = _target_refusals(vs, allow_candidate=False)
    images = image_diff({}, new.tree, d.model_copy(update={"images": {}}), d)
    from .stages import image_stage

    stages: list[Stage] = [image_stage(images)] if images else []
    cp = _control_plane(new)
    if cp:
        stages.append(Stage("control plane", "control-plane", steps=cp))
    # the control plane and nodes stages run control-plane.yml and enforce-baseline.yml (nodecheck) themselves
    dsteps = [s for s in delivery_steps({}, new.tree, rels=sorted(new.tree))
              if s["playbook"] not in ("control-plane.yml", "nodecheck.yml")]
    config = [s for s in dsteps if s["stage"] == "config"]
    node_files = [s for s in dsteps if s["stage"] == "nodes"]
    if config:
        stages.append(delivery_stage("deliver configuration", config))
    groups = [g for g in d.nodes if f"pxe/ipxe/groups/{g}.ipxe" in new.tree]
    if groups:
        stages.append(Stage("boot defaults", "boot-default", steps=[
            f"publish pxe/ipxe/boot.ipxe and the default boot of node group(s) {', '.join(groups)} on the boot server"],
            boot={"groups": ",".join(groups)}))
    # the worker nodes; the service hosts are up before the control plane stage (installed first, like the
    # boot server every other node boots from)
    workers = {g: n for g, n in d.nodes.items() if not n.services}
    hosts = [h for g in workers.values() for h in hostlist.names(g.hosts)]
    stateless = [g for g, n in workers.items() if n.provisioning == "stateless"]
    stateful = [g for g, n in workers.items() if n.provisioning == "stateful"]
    steps = []
    if stateless:
        steps.append(f"node group(s) {', '.join(stateless)} power on and boot their default image over PXE (stateless)")
    if stateful:
        steps.append(f"node group(s) {', '.join(stateful)} installed: the set's layers (firmware compared, driver, "
                     "CUDA, NCCL, toolkit), Slurm nodes their configless slurmd")
    steps.append("every node admitted against the set (node_admission: resumed or uncordoned only when on-matrix)")
    # the files roles put on the nodes (identity, mounts, networkd) once they are up: part of the nodes stage
    steps += [delivery_describe(s) for s in node_files]
    stages.append(Stage("nodes", "nodes", hosts, steps, delivery=node_files))
    doc = {
        "plan_format": 1, "clusterdef": __version__, "cluster": d.cluster.name, "bringup": True,
        "from": dict(EMPTY), "to": _side_doc(new, vs),
        "refused": bool(refusals), "refusals": [p.to_json() for p in refusals], "warnings": [],
        "canary_only": False,
        "set_change": {"from": "", "to": vs.name, "to_status": vs.status, "layers": []},
        "compatibility": None, "changes": [], "images": images, "disruption": {},
        "rollout": {"layer_order": [], "canary": {"hosts": "", "nodes": 0}, "kubernetes_canaries": [],
                    "waves": 0, "waves_withheld": 0, "wave_size": d.upgrade.wave_size, "gates": [],
                    "rollback": {"target": None, "exercised_on_canary": False,
                                 "point": {"file": "", "set": "", "definition_sha256": EMPTY["definition_sha256"],
                                           "tree_sha256": EMPTY["tree_sha256"]}},
                    "stages": [s.to_json() for s in stages]},
        # day 0: every file is new; the plan lists them (the tree itself is the review), no diffs
        "files": [{"path": rel, "status": "added", "added": text.count("\n"), "removed": 0, "diff": "",
                   "header_only": False} for rel, text in sorted(new.tree.items())],
        "kubernetes_objects": [],
    }
    return Plan(doc, refusals)
