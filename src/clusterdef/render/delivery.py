"""The delivery map (`delivery.json`): for every rendered file, the hosts that consume it, where it
goes, the check its consumer runs on it before it is installed and the action that makes it take
effect. The rules are data (delivery.yaml beside this module); this module matches them against the
rendered tree. A file no rule covers is an error at render time: a renderer that adds a file adds
its delivery too.

Read by plan (each changed file becomes a delivery step of its rule's stage, with the action's
disruption) and by apply (playbooks/deliver.yml installs the `deliver` files through roles/deliver)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from ..source import safe_yaml

from ..resolve import Resolved
from .slurm import binds_qos

FILE = "delivery.json"
FORMAT = 1
VIAS = ("deliver", "role", "image", "boot", "pulumi", "control", "review")
STAGES = ("config", "image", "boot-default", "nodes")
BOOT_ROOT = "/srv/http"  # the boot server's HTTP root (playbooks/boot-pointer.yml: clusterdef_boot_root)


class Undelivered(Exception):
    """Rendered files that no delivery rule covers (a renderer added a file without its delivery)."""

    def __init__(self, paths: list[str]):
        super().__init__(", ".join(paths))
        self.paths = paths


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    spec: dict


def _regex(glob: str) -> re.Pattern:
    """`{name}` one segment (captured), `**` the rest of the path (captured as `rest`), `*` within a segment."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**", i):
            out.append("(?P<rest>.+)")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "{":
            end = glob.index("}", i)
            out.append(f"(?P<{glob[i + 1:end]}>[^/]+?)")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


@cache
def rules() -> tuple[dict, dict, tuple[Rule, ...]]:
    """(checks, actions, rules) from delivery.yaml."""
    doc = safe_yaml().load(files("clusterdef.render").joinpath("delivery.yaml").read_text())
    for name, a in doc["actions"].items():
        if a.get("before") and a["before"]["when"] not in CONDITIONS:
            raise ValueError(f"delivery.yaml: action {name}: before.when {a['before']['when']!r} is not one of "
                             f"{', '.join(CONDITIONS)}")
    return doc["checks"], doc["actions"], tuple(Rule(_regex(r["files"]), r) for r in doc["rules"])


def context(resolved: Resolved) -> dict[str, str]:
    """Values the rules' `{...}` fields may name besides a pattern's captures."""
    s = resolved.definition.slurm
    accounts = "slurmdbd" if s and s.accounting.storage == "slurmdbd" and s.accounting.host else "slurm_controllers[0]"
    return {"boot_root": BOOT_ROOT, "accounts_host": accounts,
            "health_check": s.health_check.program if s else "/usr/sbin/clusterdef-nodecheck"}


# The `when` of an action's `before`: what of the definition makes that step needed.
CONDITIONS = {
    # some partition carries a QOS (slurm.conf QOS= and AllowQos=), which slurmctld needs in the database
    "partition-qos": lambda resolved: bool(resolved.definition.slurm) and binds_qos(resolved.definition.slurm),
}


def conditions(resolved: Resolved) -> frozenset[str]:
    """The CONDITIONS that hold for `resolved`."""
    return frozenset(name for name, holds in CONDITIONS.items() if holds(resolved))


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], text)


def entry(rel: str, values: dict[str, str], holds: frozenset[str] = frozenset()) -> dict | None:
    """The delivery of one rendered file, or None when no rule covers it. `holds`: the CONDITIONS that hold
    (an action's `before` is in the entry only when its `when` is among them)."""
    checks, actions, all_rules = rules()
    for rule in all_rules:
        m = rule.pattern.match(rel)
        if not m:
            continue
        r, v = rule.spec, {**values, **{k: x for k, x in m.groupdict().items() if x is not None}}
        out: dict = {"via": r["via"]}
        if r.get("role"):
            out["role"] = r["role"]
        if r["via"] != "review":  # a node group's inventory group is group_<name> with '-' as '_' (render/ansible)
            hv = {**v, **({"group": re.sub(r"[^A-Za-z0-9_]", "_", v["group"])} if "group" in v else {})}
            out["hosts"] = _fill(r.get("hosts", ""), hv)
        if r.get("path"):
            out.update(path=_fill(r["path"], v), owner=r.get("owner", "root"), group=r.get("group", "root"),
                       mode=r.get("mode", "0644"))
        if r.get("stage"):
            out["stage"] = r["stage"]
        if r.get("check"):
            c = checks[r["check"]]
            out["check"] = {"name": r["check"], "argv": list(c["argv"]), "what": c["what"]}
        if r.get("action"):
            a = actions[r["action"]]
            out["action"] = {"name": r["action"], "argv": [list(x) for x in a["argv"]], "once": bool(a.get("once")),
                             "on": _fill(a.get("on", ""), v), "unit": a.get("unit", ""),
                             "inactive": a.get("inactive", ""), "disruption": a["disruption"],
                             "what": a["what"]}
            b = a.get("before")
            if b and b["when"] in holds:
                out["action"]["before"] = {"argv": [list(x) for x in b["argv"]], "what": b["what"]}
        if r.get("why"):
            out["why"] = r["why"]
        return out
    return None


# Who declares the hosts of an inventory group a rule names, for the hint when it has none.
DECLARE = {"boot_server": "a node group with services [boot-server]",
           "subnet_managers": "a node group with services [subnet-manager]",
           "prometheus": "a node group with services [prometheus]",
           "kube_control_plane": "a node group with services [kube-control-plane]",
           "slurm_controllers": "slurm.controllers", "slurmdbd": "slurm.accounting.host",
           "backup": "a backup section", "tenant_storage_admin": "a filesystem with tenants' quotas"}


def inventory_groups(hosts_yml: str) -> set[str]:
    """The group names of a rendered ansible/inventory/hosts.yml (every mapping key that is a plain name)."""
    return set(re.findall(r"^\s*([A-Za-z0-9_]+):\s*$", hosts_yml, re.M))


def unplaced(pattern: str, groups: set[str]) -> str:
    """Why `pattern` names no host of the inventory ('' when every group it names exists)."""
    for part in re.split(r"[:,]", pattern):
        if part.startswith("!"):  # excluding a group the inventory lacks excludes nothing
            continue
        name = re.sub(r"\[[-0-9:]*\]$", "", part.lstrip("&"))
        if name and name not in groups:
            return f"the inventory has no {name} group: declare {DECLARE.get(name, 'its hosts')}"
    return ""


def delivery_map(resolved: Resolved, tree: dict[str, str]) -> dict:
    """Every file of `tree` (and delivery.json itself) with its delivery; Undelivered when a file has none.
    With the ansible target rendered, a file whose hosts the inventory lacks says so (`unplaced`)."""
    values, holds = context(resolved), conditions(resolved)
    inv = tree.get("ansible/inventory/hosts.yml")
    groups = inventory_groups(inv) if inv is not None else None
    out: dict[str, dict] = {}
    missing = []
    for rel in sorted([*tree, FILE]):
        e = entry(rel, values, holds)
        if e is None:
            missing.append(rel)
            continue
        if groups is not None and e.get("hosts") and (why := unplaced(e["hosts"], groups)):
            e["unplaced"] = why
        out[rel] = e
    if missing:
        raise Undelivered(missing)
    _, actions, _ = rules()
    return {"format": FORMAT, "cluster": resolved.definition.cluster.name, "action_order": list(actions),
            "files": out}


def render(resolved: Resolved, tree: dict[str, str]) -> str:
    return json.dumps(delivery_map(resolved, tree), indent=1, sort_keys=True) + "\n"
