"""What a delivery step sends to playbooks/deliver.yml: per host, the files delivery.json gives it (the new
tree's copy under the apply snapshot is the source, so Ansible never templates a rendered file) and the
actions those files trigger, in delivery.json's action order. Host patterns are read against the rendered
inventory the way ansible-playbook reads them (Hosts); the tests compare the two on every pattern of the map."""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import ApplyError

DELIVERY = "delivery.json"


class Hosts:
    """Host patterns over the rendered inventory, as ansible-playbook reads them for the patterns delivery.yaml
    uses: `a:b` (union), `a:&b` (intersection), `a:!b` (difference), `a[0]` (the first host), a group's hosts
    through its children, host ranges `gpu[001:004]`. Hosts keep inventory order."""

    def __init__(self, hosts_yml: str):
        from ruamel.yaml import YAML

        from .inventory import expand_pattern

        data = YAML(typ="safe", pure=True).load(hosts_yml) or {}
        direct: dict[str, list[str]] = {}    # a group's own hosts, over every place it appears
        children: dict[str, list[str]] = {}  # and its child groups
        self.order: dict[str, int] = {}

        def collect(name: str, node) -> None:
            node = node or {}
            for p in node.get("hosts") or {}:
                for h in expand_pattern(str(p)):
                    direct.setdefault(name, []).append(h)
                    self.order.setdefault(h, len(self.order))
            for child, sub in (node.get("children") or {}).items():
                children.setdefault(name, []).append(child)
                collect(child, sub)
            direct.setdefault(name, [])

        collect("all", data.get("all") or {})
        self.groups: dict[str, list[str]] = {}

        def resolve(name: str, seen: frozenset = frozenset()) -> list[str]:
            if name not in self.groups:
                hosts = list(direct.get(name, []))
                for child in children.get(name, []):
                    if child not in seen:
                        hosts += resolve(child, seen | {name})
                self.groups[name] = sorted(dict.fromkeys(hosts), key=self.order.__getitem__)
            return self.groups[name]

        for name in direct:
            resolve(name)

    def _one(self, term: str) -> list[str]:
        m = re.fullmatch(r"(.+?)\[([0-9]+)\]", term)
        name, index = (m.group(1), int(m.group(2))) if m else (term, None)
        hosts = self.groups.get(name, [name] if name in self.order else [])
        return hosts[index:index + 1] if index is not None else hosts

    def __call__(self, pattern: str) -> list[str]:
        """The hosts of `pattern`; none when it names a group or host the inventory lacks."""
        from ..render.delivery import unplaced

        if not pattern or unplaced(pattern, set(self.groups) | set(self.order)):
            return []
        out: list[str] = []
        for term in pattern.split(":"):
            if term.startswith("&"):
                keep = set(self._one(term[1:]))
                out = [h for h in out if h in keep]
            elif term.startswith("!"):
                drop = set(self._one(term[1:]))
                out = [h for h in out if h not in drop]
            else:
                out += [h for h in self._one(term) if h not in out]
        return sorted(out, key=self.order.__getitem__)


def _with_before_programs(per_host: dict[str, list[dict]], actions: dict[str, dict[str, dict]], entries: dict,
                          src: dict[str, str], tree_dir: Path, hosts: Hosts) -> None:
    """An action's `before` runs a delivered program (qos.sh names on a controller): the host gets that file in
    this step too, even when it did not change (a host that never had it, or a step of other files), so the
    program there is the new tree's. Unchanged, it triggers nothing."""
    by_path = {e["path"]: (rel, e) for rel, e in entries.items() if e["via"] == "deliver" and e.get("path")}
    for h, acts in actions.items():
        for a in acts.values():
            for argv in a["before"]:
                rel, e = by_path.get(argv[0], (None, None))
                if e is None or h not in hosts(e["hosts"]) or any(f["rel"] == rel for f in per_host.get(h, [])):
                    continue
                per_host.setdefault(h, []).append(_file(rel, e, src, tree_dir))


def _file(rel: str, e: dict, src: dict[str, str], tree_dir: Path) -> dict:
    """One file of a host in deliver.yml's terms (meta/argument_specs.yml: deliver_files)."""
    return {"rel": rel, "path": e["path"], "owner": e["owner"], "group": e["group"], "mode": e["mode"],
            "check": list(e["check"]["argv"]) if e.get("check") else [], "src": src.get(rel, f"{tree_dir}/{rel}")}


def payload(tree: dict[str, str], tree_dir: Path, files: list[str], hosts: Hosts,
            remove_accounts: list[str] | None = None, other: tuple[dict[str, dict], str] | None = None) -> dict:
    """Extra vars of deliver.yml for `files` (rel paths of the new tree, all `via: deliver`); `remove_accounts`
    go on the host that loads the accounts, after the load. `other`: (entries, folder) of files that are not
    the new tree's (the Slurm transition files), taken from that folder instead."""
    doc = json.loads(tree[DELIVERY])
    entries, order = dict(doc["files"]), doc["action_order"]
    src: dict[str, str] = {}
    if other is not None:
        entries.update(other[0])
        src = {rel: f"{other[1]}/{rel}" for rel in other[0]}
    per_host: dict[str, list[dict]] = {}
    actions: dict[str, dict[str, dict]] = {}
    once_done: dict[str, str] = {}
    problems = []
    for rel in files:
        e = entries.get(rel)
        if e is None or e["via"] != "deliver":
            problems.append(f"{rel} is not delivered by deliver.yml in the new tree's {DELIVERY}")
            continue
        if e.get("unplaced"):  # the plan names it as not delivered; nothing to run
            continue
        targets = hosts(e["hosts"])
        if not targets:
            problems.append(f"{rel}: no host of the rendered inventory matches {e['hosts']!r}")
            continue
        for h in targets:
            per_host.setdefault(h, []).append(_file(rel, e, src, tree_dir))
        a = e.get("action")
        if not a:
            continue
        runs_on = [h for h in targets if not a["on"] or h in set(hosts(a["on"]))]
        if a["once"]:
            runs_on = [once_done.setdefault(a["name"], runs_on[0])] if runs_on else []
        for h in runs_on:
            slot = actions.setdefault(h, {}).setdefault(a["name"], {
                "name": a["name"], "argv": a["argv"], "unit": a["unit"], "inactive": a["inactive"],
                "before": a.get("before", {}).get("argv", []), "triggers": []})
            slot["triggers"].append(rel)
    if problems:
        raise ApplyError(problems, "render the new tree with this clusterdef and plan again")
    _with_before_programs(per_host, actions, entries, src, tree_dir, hosts)
    missing = [h for h in actions if h not in per_host]
    if missing:  # an action runs where none of its files land: deliver.yml would never see them change
        raise ApplyError([f"actions on {', '.join(missing)} have no file there"], "fix delivery.yaml's `on`")
    if not per_host:
        return {}
    removals: dict[str, list[str]] = {}
    if remove_accounts:
        where = [h for h, acts in actions.items() if "slurm-accounts" in acts]
        if not where:
            raise ApplyError([f"accounts {', '.join(remove_accounts)} are to be removed but no host loads the "
                              "accounts in this step"])
        removals[where[0]] = list(remove_accounts)
    # hosts in the order of the first action each runs (delivery.json's action order), then the others: the
    # controllers' reconfigure (or start) comes before the accounting host's sacctmgr load, which needs the
    # gres/gpu TRES slurmctld registers when it starts
    def first_action(h: str) -> int:
        return min((order.index(a) for a in actions.get(h, {})), default=len(order))

    per_host = {h: per_host[h] for h in sorted(per_host, key=first_action)}
    ordered = {h: sorted(a.values(), key=lambda x: order.index(x["name"])) for h, a in actions.items()}
    return {"deliver_tree": str(tree_dir), "deliver_files": per_host, "deliver_remove_accounts": removals,
            "deliver_actions": ordered,
            "clusterdef_deliver_hosts": ",".join(per_host)}
