"""The delivery steps of a plan: every rendered file that changes becomes part of a step that puts it on
the hosts that consume it (the new tree's delivery.json), with the disruption of the action that makes it
take effect. Files carried by images and by the boot server's stages are delivered by those stages; files
only clusterdef or people read have no step.

A slurm.conf change is absorbed by `scontrol reconfigure` unless it touches a key slurm.conf(5) says needs
a daemon restart, or the node lines (knowledge/slurm_restart.yaml): the step then says which daemons restart
and why."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files

from ..source import safe_yaml

from ..render.delivery import FILE
from .transition import LIVE, NONE, RESTART, SEVERITY

# delivery.yaml's disruption words -> the plan's disruption classes
CLASSES = {"live": LIVE, "restart": RESTART, "none": NONE}

# via -> the playbook that carries the step (role files: the role's own playbook)
PLAYBOOKS = {"deliver": "deliver.yml"}
ROLE_PLAYBOOKS = {"backup": "backup.yml", "identity": "identity.yml", "tenant_isolation": "tenant-isolation.yml",
                  "slurm_control_plane": "control-plane.yml", "slurm_nodecheck": "nodecheck.yml"}
STEPPED = ("deliver", "role", "pulumi")  # image and boot files move with the image and boot-default stages
_PARAM = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(.*?)\s*$")


@cache
def _restart() -> dict:
    return safe_yaml().load(files("clusterdef.knowledge").joinpath("slurm_restart.yaml").read_text())


def _slurm_params(text: str) -> tuple[dict[str, str], list[str]]:
    """(key -> value of the top-level parameters, node lines) of a slurm.conf; keys folded to lower case
    (the parser is case-insensitive)."""
    params, nodes = {}, []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        if line.strip().lower().startswith("nodename="):
            nodes.append(line.strip())
        elif line.strip() and not line.strip().lower().startswith(("partitionname=", "nodeset=")):
            m = _PARAM.fullmatch(line)
            if m:
                params[m.group(1).lower()] = m.group(2)
    return params, nodes


def slurm_restarts(old: str, new: str) -> dict[str, list[str]]:
    """Daemon set ("slurmctld and slurmd", "slurmctld", "slurmd") -> the changed keys that need it restarted."""
    (op, on), (np_, nn) = _slurm_params(old), _slurm_params(new)
    changed = {k for k in set(op) | set(np_) if op.get(k) != np_.get(k)}
    out: dict[str, list[str]] = {}
    data = _restart()
    for daemons, keys in data["keys"].items():
        hit = [k for k in keys if k.lower() in changed]
        if hit:
            out[daemons.replace("_", " ")] = hit
    if on != nn:
        out.setdefault(data["node_lines"].replace("_", " "), []).append("node lines (NodeName)")
    return out


_ACCOUNT = re.compile(r"^Account - '([^']+)'", re.M)


def accounts(accounts_cfg: str) -> set[str]:
    """The accounts an accounts.cfg (sacctmgr load format) creates."""
    return set(_ACCOUNT.findall(accounts_cfg))


def _map(tree: dict[str, str]) -> dict[str, dict]:
    return json.loads(tree[FILE])["files"] if FILE in tree else {}


def steps(old_tree: dict[str, str], new_tree: dict[str, str], rels: list[str] | None = None) -> list[dict]:
    """The delivery steps for the files that differ between the trees (or for `rels`, day 0: every file),
    in delivery.json's terms: one step per (stage, via, playbook), files sorted, actions in their order."""
    new_map, old_map = _map(new_tree), _map(old_tree)
    if rels is None:
        rels = sorted(r for r in set(old_tree) | set(new_tree) if old_tree.get(r) != new_tree.get(r))
    grouped: dict[tuple, dict] = {}
    for rel in rels:
        e = new_map.get(rel) or old_map.get(rel)
        if e is None or e["via"] not in STEPPED:
            continue
        playbook = PLAYBOOKS.get(e["via"]) or ROLE_PLAYBOOKS.get(e.get("role", ""), "") if e["via"] != "pulumi" else ""
        key = (e.get("stage", "config"), e["via"], playbook)
        st = grouped.setdefault(key, {"stage": key[0], "via": e["via"], "playbook": playbook, "files": [],
                                      "removed": [], "unplaced": {}, "hosts": [], "actions": {}, "restarts": {},
                                      "remove_accounts": []})
        if e.get("unplaced"):  # no host takes it: named in the plan, not run
            st["unplaced"][rel] = e["unplaced"]
            continue
        (st["files"] if rel in new_map else st["removed"]).append(rel)
        for part in (e.get("hosts") or "").split(":"):
            if part and part not in st["hosts"]:
                st["hosts"].append(part)
        a = e.get("action")
        if a:
            before = f" (first: {a['before']['what']})" if a.get("before") else ""
            st["actions"][a["name"]] = {"name": a["name"], "disruption": CLASSES[a["disruption"]],
                                        "what": a["what"] + before}
        if rel == "slurm/slurm.conf" and rel in old_tree and rel in new_tree:
            st["restarts"] = slurm_restarts(old_tree[rel], new_tree[rel])
        if rel == "slurm/accounts.cfg":  # sacctmgr load only adds and modifies: a removal is its own explicit step
            st["remove_accounts"] = sorted(accounts(old_tree.get(rel, "")) - accounts(new_tree.get(rel, "")))
    out = []
    for st in grouped.values():
        actions = list(st["actions"].values())
        worst = max((a["disruption"] for a in actions), key=SEVERITY.__getitem__, default=NONE)
        if st["restarts"]:
            worst = max(worst, RESTART, key=SEVERITY.__getitem__)
        out.append({**st, "actions": actions, "disruption": worst, "hosts": ":".join(st["hosts"])})
    order = ("image", "config", "nodes", "boot-default")
    return sorted(out, key=lambda s: (order.index(s["stage"]) if s["stage"] in order else 9, s["via"]))


def describe(step: dict) -> str:
    """One line of a stage's steps for a delivery step."""
    parts = []
    if step["files"]:
        what = {"deliver": "install", "role": "install", "pulumi": "apply"}[step["via"]]
        more = f" and {len(step['files']) - 6} more" if len(step["files"]) > 6 else ""
        where = f" on {step['hosts']}" if step["hosts"] else ""
        by = {"deliver": "deliver.yml: consumer's check, then in place", "role": step["playbook"] or "the role",
              "pulumi": "`pulumi up` of infra/"}[step["via"]]
        parts.append(f"{what} {', '.join(step['files'][:6])}{more}{where} ({by})")
    if step["removed"]:
        parts.append("no longer rendered (left in place, review): " + ", ".join(step["removed"]))
    for why in sorted(set(step["unplaced"].values())):
        parts.append(f"NOT DELIVERED ({why}): " + ", ".join(r for r, w in step["unplaced"].items() if w == why))
    effects = [f"{a['name']} ({a['disruption']}: {a['what']})" for a in step["actions"]]
    for daemons, keys in step["restarts"].items():
        effects.append(f"restart {daemons} ({RESTART}: {', '.join(keys)} changed; scontrol reconfigure does "
                       "not apply them; running jobs keep running)")
    if step["remove_accounts"]:
        effects.append(f"remove Slurm account(s) {', '.join(step['remove_accounts'])} and their users "
                       "(refused, with nothing removed, while any of them has running or pending jobs)")
    if step["files"]:
        parts[0] += "; then " + "; ".join(effects) if effects else "; nothing to restart or reload"
    return "; ".join(parts)


def transition_step(transition: dict) -> dict:
    """The delivery step of the Slurm transition files (plan/transition.py): onto the controllers (and the
    accounting host's slurm.conf) right after slurmctld moved, then `scontrol reconfigure`; the held-back keys
    arrive with the final files after the last wave."""
    held = sorted({h["key"] for h in transition["held_back"]})
    return {"stage": "config", "via": "deliver", "playbook": PLAYBOOKS["deliver"], "transition": True,
            "files": sorted(transition["files"]), "removed": [], "unplaced": {}, "hosts": "slurm_controllers:slurmdbd",
            "actions": [{"name": "slurm-reconfigure", "disruption": LIVE,
                         "what": "slurmctld reads the transition files, which every running slurmd parses"
                                 + (f" (held back until the last wave: {', '.join(held)})" if held else "")}],
            "restarts": {}, "remove_accounts": [], "disruption": LIVE}
