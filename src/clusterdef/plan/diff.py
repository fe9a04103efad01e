"""Model diff (every changed field, classified by disruption with the affected nodes) and
file-tree diff (unified diffs plus a semantic summary of Kubernetes objects)."""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass

from .. import hostlist
from ..model import Definition
from .transition import LIVE, NONE, REBOOT, REFLASH, RESTART


@dataclass
class Change:
    path: tuple
    old: object
    new: object
    disruption: str
    hosts: list[str]
    why: str

    @property
    def dotted(self) -> str:
        return ".".join(str(p) for p in self.path)

    def to_json(self) -> dict:
        return {"path": self.dotted, "from": self.old, "to": self.new, "disruption": self.disruption,
                "nodes": len(self.hosts), "hosts": hostlist.fold(self.hosts) if self.hosts else "",
                "why": self.why}


_MISSING = "<absent>"


def _walk(old, new, path=()):
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(old) + [k for k in new if k not in old]:
            yield from _walk(old.get(k, _MISSING), new.get(k, _MISSING), path + (k,))
    elif old != new:
        yield path, old, new


def _group_hosts(d: Definition, groups) -> list[str]:
    out: list[str] = []
    for g in groups:
        if g in d.nodes:
            out.extend(hostlist.names(d.nodes[g].hosts))
    return out


def classify(path: tuple, old: Definition, new: Definition) -> tuple[str, list[str], str]:
    """(disruption class, affected hosts, why) for one changed field."""
    head = path[0]
    sub = path[1] if len(path) > 1 else None
    rest = path[2] if len(path) > 2 else None
    if head == "hardware":
        groups = {g for d in (old, new) for g, n in d.nodes.items() if n.hardware == sub}
        hosts = _group_hosts(new, groups) or _group_hosts(old, groups)
        if rest == "firmware" or rest == "platform":
            return REFLASH, hosts, "the firmware a node type carries changed: reflash and power-cycle its nodes"
        return RESTART, hosts, "node hardware facts feed slurm.conf/gres.conf: restart slurmctld and slurmd"
    if head == "images" and rest == "published":
        return NONE, [], "the boot server keeps another earlier build: nothing on the nodes changes"
    if head == "images":
        groups = {g for d in (old, new) for g, n in d.nodes.items() if n.image == sub}
        return REBOOT, _group_hosts(new, groups) or _group_hosts(old, groups), \
            "a new node image: drain, reboot into it"
    if head == "nodes":
        g = sub
        if rest == "hosts" or len(path) == 2:
            o = set(hostlist.names(old.nodes[g].hosts)) if g in old.nodes else set()
            n = set(hostlist.names(new.nodes[g].hosts)) if g in new.nodes else set()
            return RESTART, sorted(o ^ n), "nodes added or removed: provision them and restart slurmctld " \
                "(node list) or join/cordon them in Kubernetes"
        hosts = _group_hosts(new, [g])
        if rest == "boot" and g is not None:  # rest is set only when sub (the group) is
            ob = old.nodes[g].boot if g in old.nodes else {}
            nb = new.nodes[g].boot
            return LIVE, sorted(h for h in set(ob) | set(nb) if ob.get(h) != nb.get(h)), \
                "boot pointers: the hosts boot the build they point at from their next reboot"
        if rest == "roles":
            return LIVE, hosts, "the group's extra roles: playbooks/group-roles.yml runs them on its hosts"
        if rest in ("image", "hardware", "control_plane", "provisioning"):
            return REBOOT, hosts, "the image, hardware type, owner or provisioning mode changed: drain and reboot"
        if rest == "addressing":
            return LIVE, hosts, "provisioning addresses: reload DHCP/PXE; takes effect at the next boot"
        return LIVE, hosts, "labels, taints or placement: applied live"
    if head == "network":
        if sub == "provisioning":
            return RESTART, [], "provisioning services (DHCP/TFTP/HTTP) restart"
        return LIVE, [], "fabric topology: topology.conf and scheduler placement, `scontrol reconfigure`"
    if head == "slurm":
        if sub in ("controllers", "accounting", "passthrough"):
            return RESTART, [], "controller or accounting settings: restart slurmdbd/slurmctld"
        return LIVE, [], "partitions, QOS, priority, health check: `scontrol reconfigure`, no job is touched"
    if head == "kubernetes":
        if sub == "gpu_operator" and rest in ("mig_strategy", "mig_profile"):
            kube_groups = [g for g, n in new.nodes.items() if n.control_plane == "kubernetes"]
            return REBOOT, _group_hosts(new, kube_groups), "MIG layout change resets the GPUs: drain the nodes first"
        if sub in ("gpu_operator", "network_operator"):
            kube_groups = [g for g, n in new.nodes.items() if n.control_plane == "kubernetes"]
            return RESTART, _group_hosts(new, kube_groups), "operator settings: its pods restart on every GPU node"
        return LIVE, [], "Kueue queues/quotas and labels: applied live through the API server"
    if head == "tenants":
        return LIVE, [], "tenant quotas and accounts: Slurm associations and Kubernetes quotas, applied live"
    return NONE, [], "policy or description only"


def model_changes(old: Definition, new: Definition) -> list[Change]:
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    out = []
    for path, o, n in _walk(a, b):
        if path == ("cluster", "matrix"):
            continue  # the set change has its own section
        disruption, hosts, why = classify(path, old, new)
        out.append(Change(path, o if o != _MISSING else None, n if n != _MISSING else None, disruption,
                          hosts, why))
    return out


# --------------------------------------------------------------------------- file trees

def tree_hash(tree: dict[str, str]) -> str:
    h = hashlib.sha256()
    for rel in sorted(tree):
        h.update(rel.encode() + b"\0" + hashlib.sha256(tree[rel].encode()).hexdigest().encode() + b"\n")
    return h.hexdigest()


@dataclass
class FileDiff:
    path: str
    status: str  # changed | added | removed
    diff: str
    added: int
    removed: int
    header_only: bool = False  # only the leading comment changed (the set named in it): no behaviour

    def to_json(self) -> dict:
        return {"path": self.path, "status": self.status, "added": self.added, "removed": self.removed,
                "diff": self.diff, "header_only": self.header_only}


COMMENT_MARKS = ("#", "//", ";", "--", "<!--")


def _header_lines(lines: list[str]) -> int:
    """How many leading lines are comments (the generated-by header, a shebang included)."""
    n = 0
    while n < len(lines) and lines[n].lstrip().startswith(COMMENT_MARKS):
        n += 1
    return n


def header_only(a: list[str], b: list[str]) -> bool:
    """True when two versions differ only inside their leading comment block: same body after it."""
    ha, hb = _header_lines(a), _header_lines(b)
    return ha > 0 and hb > 0 and a[ha:] == b[hb:] and a[:ha] != b[:hb]


def tree_diff(old: dict[str, str], new: dict[str, str]) -> list[FileDiff]:
    out = []
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a == b:
            continue
        status = "added" if a is None else "removed" if b is None else "changed"
        a_lines, b_lines = (a or "").splitlines(), (b or "").splitlines()
        lines = list(difflib.unified_diff(a_lines, b_lines, f"a/{rel}", f"b/{rel}", lineterm="", n=2))
        added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
        removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
        out.append(FileDiff(rel, status, "\n".join(lines) + ("\n" if lines else ""), added, removed,
                            status == "changed" and header_only(a_lines, b_lines)))
    return out


def _k8s_objects(text: str) -> dict[tuple, dict]:
    from ruamel.yaml import YAML

    out: dict[tuple, dict] = {}
    try:
        docs = list(YAML(typ="safe").load_all(text))
    except Exception:  # a file that is not YAML has no objects to summarise
        return out
    for doc in docs:
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind", "").endswith("List") else [doc]
        for obj in items or []:
            if isinstance(obj, dict) and "kind" in obj and isinstance(obj.get("metadata"), dict):
                md = obj["metadata"]
                out[(obj["kind"], md.get("namespace", ""), md.get("name", ""))] = obj
    return out


def kubernetes_summary(old: dict[str, str], new: dict[str, str], files: list[FileDiff]) -> list[dict]:
    """Kubernetes objects added, removed or changed (with the changed field paths) in the
    YAML/JSON files that differ."""
    out: list[dict] = []
    for f in files:
        if not f.path.endswith((".yaml", ".yml", ".json")):
            continue
        a, b = _k8s_objects(old.get(f.path, "")), _k8s_objects(new.get(f.path, ""))
        for key in sorted(set(a) | set(b)):
            kind, ns, name = key
            entry = {"file": f.path, "kind": kind, "namespace": ns, "name": name}
            if key not in a:
                out.append({**entry, "change": "added", "fields": []})
            elif key not in b:
                out.append({**entry, "change": "removed", "fields": []})
            elif a[key] != b[key]:
                fields = [".".join(str(p) for p in path) for path, _, _ in _walk(a[key], b[key])]
                out.append({**entry, "change": "changed", "fields": fields[:20]
                            + ([f"... {len(fields) - 20} more"] if len(fields) > 20 else [])})
    return out


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)
