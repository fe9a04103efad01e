"""`clusterdef fabric check`: the as-built InfiniBand fabric (ibnetdiscover's default output)
against the cabling the definition declares (fabric.layout).

Reported, one `Issue` each:
  wrong-leaf       a host port cabled to a switch other than its leaf
  wrong-rail       rail-optimised fabric: a host port cabled to a rail leaf of another rail (HCA i
                   belongs on rail leaf i of its scalable unit)
  missing-link     a host port, or a declared leaf/spine cable, that is not in the fabric
  degraded-link    a link below its rated width (4x) or rate (the NIC's speed_gbps; inter-switch
                   links: the fastest host port of the fabric)
  unexpected-link  a cable the definition does not declare (a host port beyond its NIC count,
                   a switch-to-switch cable between switches that are not parent and child)
  unknown-node     a Ca or Switch whose description names no host or switch of the fabric
                   (shown with its GUID)
  duplicate-node   two nodes of the fabric with the same description (one of them is a stranger)

Nodes are matched by the first word of their node description (real HCAs describe themselves as
`gpu001 mlx5_0`; ibnetdiscover --node-name-map renames switches to the definition's names).
Every string from the file is hostile: it is parsed with anchored, bounded patterns and shown only
masked (`_shown`), and drain lines shell-quote every argument."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import hostlist
from ..errors import Finding, Severity
from ..limits import InputError, read_text
from ..quoting import prom_label, shell
from .layout import LANE_GBPS, RATED_WIDTH, WIDTHS, Layout, link_gbps

TAINT = "clusterdef.dev/fabric"
KINDS = ("wrong-leaf", "wrong-rail", "missing-link", "degraded-link", "unexpected-link", "unknown-node",
         "duplicate-node")
MAX_NODES = 1 << 20
MAX_LINE = 4096

_GUID = r"[0-9A-Fa-f]{1,16}"
_ID = r'"([HSR])-(' + _GUID + r')"'
_NODE = re.compile(r"^(Switch|Ca|Rt)\s+([0-9]{1,3})\s+" + _ID + r"(?:\s*#\s*(.*))?$")
_SW_PORT = re.compile(r"^\[([0-9]{1,3})\](?:\[ext [0-9]{1,3}\])?\s+" + _ID
                      + r"\[([0-9]{1,3})\](?:\((" + _GUID + r")\))?\s*(.*)$")
_CA_PORT = re.compile(r"^\[([0-9]{1,3})\]\((" + _GUID + r")\)\s+" + _ID
                      + r"\[([0-9]{1,3})\](?:\((" + _GUID + r")\))?\s*(.*)$")
_RATE = re.compile(r"\blid\s+[0-9]{1,5}\s+([0-9]{1,2})x([A-Z][A-Z0-9]{1,5})\s*\Z")
_SETTING = re.compile(r"^[a-z]{2,16}=\S{0,64}$")
_PLAIN = re.compile(r"^[A-Za-z0-9._:;/+-]{1,64}$")


def _shown(value: str) -> str:
    """A string from the fabric as it may appear in reports, drain reasons and metrics."""
    if _PLAIN.fullmatch(value):
        return value
    return "unprintable:" + re.sub(r"[^A-Za-z0-9._:;/+-]", "?", value[:40])


class IbnetError(InputError):
    """ibnetdiscover output that cannot be parsed (one located finding)."""


def _bad(file: str, line: int, message: str) -> IbnetError:
    return IbnetError([Finding("ibnetdiscover-invalid", Severity.ERROR, (), message,
                               "pass the output of `ibnetdiscover` (its default format, not -p or -l)",
                               file=file, line=line, column=1 if line else 0)])


@dataclass
class Node:
    kind: str  # Switch | Ca | Rt
    guid: int
    ports: int
    desc: str  # raw, never shown unmasked
    line: int

    @property
    def word(self) -> str:
        parts = self.desc.split()
        return parts[0] if parts else ""


@dataclass(frozen=True)
class Port:
    guid: int
    port: int


@dataclass
class Topology:
    nodes: dict[int, Node] = field(default_factory=dict)
    links: dict[Port, tuple[Port, int, str]] = field(default_factory=dict)  # both directions; (peer, width, speed)


def _desc(rest: str | None) -> str:
    """The quoted node description at the start of a header comment (`"gpu001 mlx5_0" ...`)."""
    if not rest:
        return ""
    m = re.match(r'^"(.*)"', rest)
    if not m:
        return ""
    text = m.group(1)
    for tail in ('" base port', '" enhanced port', '" lid'):  # a quote inside the description
        cut = text.find(tail)
        if cut >= 0:
            text = text[:cut]
    return text


def parse(text: str, file: str = "<ibnetdiscover>") -> Topology:
    """The nodes and links of ibnetdiscover's default output. Raises IbnetError (file:line) on a line
    that is none of: blank, comment, `key=value`, a node header, a port line of the current node."""
    topo = Topology()
    current: Node | None = None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if len(raw) > MAX_LINE:
            raise _bad(file, no, f"line {no} is longer than {MAX_LINE} characters")
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if current is None:
                raise _bad(file, no, "a port line before any Switch or Ca record")
            m = (_SW_PORT if current.kind == "Switch" else _CA_PORT).match(line)
            if not m:
                raise _bad(file, no, f"not a {current.kind} port line of ibnetdiscover")
            if current.kind == "Switch":
                port, _, rguid, rport, _, tail = m.groups()
            else:
                port, _, _, rguid, rport, _, tail = m.groups()
            port, rport = int(port), int(rport)
            if not 1 <= port <= current.ports or not 1 <= rport <= 254:
                raise _bad(file, no, f"port {port} of a {current.ports}-port node, or remote port {rport}")
            after = tail.rsplit('"', 1)[-1]
            r = _RATE.search(after)
            if not r or int(r.group(1)) not in WIDTHS or r.group(2) not in LANE_GBPS:
                raise _bad(file, no, "a link without a width and speed such as `4xNDR` after its lid")
            topo.links[Port(current.guid, port)] = (Port(int(rguid, 16), rport), int(r.group(1)), r.group(2))
            continue
        m = _NODE.fullmatch(line)
        if m:
            kind, ports, _, guid, rest = m.groups()
            if not 1 <= int(ports) <= 255:
                raise _bad(file, no, f"{kind} with {ports} ports")
            guid_i = int(guid, 16)
            if guid_i in topo.nodes:
                raise _bad(file, no, f"node GUID {guid_i:#018x} listed twice")
            if len(topo.nodes) >= MAX_NODES:
                raise _bad(file, no, f"more than {MAX_NODES} nodes")
            current = Node(kind, guid_i, int(ports), _desc(rest), no)
            topo.nodes[guid_i] = current
            continue
        if _SETTING.fullmatch(line):
            current = None
            continue
        raise _bad(file, no, "not a line of ibnetdiscover output")
    if not topo.nodes:
        raise _bad(file, 0, "no Switch or Ca records")
    return topo


def read(path: str | Path) -> Topology:
    return parse(read_text(path, "ibnetdiscover"), str(path))


@dataclass(frozen=True)
class Issue:
    kind: str
    node: str  # host or switch name (masked when from the file)
    port: int  # 0 for a node-level issue or a switch pair
    expected: str
    actual: str
    guid: str = ""  # 0x... of the node the issue is about, when the fabric showed it

    def text(self) -> str:
        where = f"{self.node} port {self.port}" if self.port else self.node
        guid = f" [{self.guid}]" if self.guid else ""
        return f"{self.kind} {where}{guid}: expected {self.expected}, found {self.actual}"


@dataclass
class Report:
    fabric: str
    issues: list[Issue]
    links_checked: int
    hosts: dict[str, str]  # host -> control plane, for the hosts with issues

    @property
    def ok(self) -> bool:
        return not self.issues

    def to_json(self) -> dict:
        return {"fabric": self.fabric, "links_checked": self.links_checked,
                "issues": [{"kind": i.kind, "node": i.node, "port": i.port, "expected": i.expected,
                            "actual": i.actual, "guid": i.guid} for i in self.issues],
                "counts": {k: sum(1 for i in self.issues if i.kind == k) for k in KINDS}}


def _rate(width: int, speed: str) -> str:
    return f"{width}x{speed} ({link_gbps(width, speed):g} Gb/s)"


def _below(width: int, speed: str, rated_gbps: int) -> bool:
    return width < RATED_WIDTH or link_gbps(width, speed) < rated_gbps


def compare(lay: Layout, topo: Topology) -> Report:
    hosts_by_word: dict[str, list[Node]] = {}
    switches_by_word: dict[str, list[Node]] = {}
    issues: list[Issue] = []
    name_of: dict[int, str] = {}
    for n in topo.nodes.values():
        w = n.word
        if n.kind == "Ca" and (w in lay.hosts or w == lay.sm):
            hosts_by_word.setdefault(w, []).append(n)
        elif n.kind == "Switch" and w in lay.switches:
            switches_by_word.setdefault(w, []).append(n)
        else:
            issues.append(Issue("unknown-node", _shown(n.desc) if n.desc else "(no description)", 0,
                                "a host or switch of the definition", f"{n.kind} {_shown(n.desc)}",
                                f"{n.guid:#018x}"))
    for table in (hosts_by_word, switches_by_word):
        for w, found in table.items():
            name_of[found[0].guid] = w
            for extra in found[1:]:
                issues.append(Issue("duplicate-node", w, 0, f"one node described {w}",
                                    f"{extra.kind} {extra.guid:#018x} as well as {found[0].guid:#018x}",
                                    f"{extra.guid:#018x}"))

    def peer_name(p: Port) -> str:
        if p.guid in name_of:
            return name_of[p.guid]
        n = topo.nodes.get(p.guid)
        return f"{_shown(n.desc) if n and n.desc else 'node'} {p.guid:#018x}" if n else f"GUID {p.guid:#018x}"

    checked = 0
    bad_hosts: dict[str, str] = {}
    for h, host in lay.hosts.items():
        node = hosts_by_word.get(h, [None])[0]
        guid = f"{node.guid:#018x}" if node else ""
        for p in range(1, host.ports + 1):
            link = topo.links.get(Port(node.guid, p)) if node else None
            if link is None:
                issues.append(Issue("missing-link", h, p, f"cable to {host.leaf_of(p)}",
                                    "no link" if node else "host not in the fabric", guid))
                bad_hosts[h] = host.control_plane
                continue
            checked += 1
            peer, width, speed = link
            got = name_of.get(peer.guid)
            want = host.leaf_of(p)
            if got != want:
                rails = lay.rail_of or {}
                kind = "wrong-rail" if got in rails and rails[got][1] != rails[want][1] else "wrong-leaf"
                issues.append(Issue(kind, h, p, want, f"{peer_name(peer)} port {peer.port}", guid))
                bad_hosts[h] = host.control_plane
            if _below(width, speed, host.rated_gbps):
                issues.append(Issue("degraded-link", h, p, f"4x, {host.rated_gbps} Gb/s", _rate(width, speed),
                                    guid))
                bad_hosts[h] = host.control_plane
        if node:
            for (lp, (peer, _, _)) in sorted(((k.port, v) for k, v in topo.links.items() if k.guid == node.guid)):
                if lp > host.ports:
                    issues.append(Issue("unexpected-link", h, lp, f"{host.ports} compute InfiniBand port(s)",
                                        f"port {lp} cabled to {peer_name(peer)}", guid))
    # switch to switch
    sw_guid = {w: found[0].guid for w, found in switches_by_word.items()}
    pairs: dict[frozenset, list[tuple[int, str]]] = {}
    for k, (peer, width, speed) in topo.links.items():
        a, b = name_of.get(k.guid), name_of.get(peer.guid)
        if a in sw_guid and b in sw_guid and sw_guid[a] == k.guid and sw_guid[b] == peer.guid and a < b:
            pairs.setdefault(frozenset((a, b)), []).append((width, speed))
        elif a in sw_guid and b in sw_guid and a == b and k.port < peer.port:
            pairs.setdefault(frozenset((a,)), []).append((width, speed))
    declared = {frozenset(p) for p in lay.uplinks}
    for child, parent in lay.uplinks:
        cables = pairs.get(frozenset((child, parent)), [])
        if not cables:
            issues.append(Issue("missing-link", child, 0, f"cable to {parent}", "no link",
                                f"{sw_guid[child]:#018x}" if child in sw_guid else ""))
        for width, speed in cables:
            checked += 1
            if _below(width, speed, lay.trunk_gbps):
                issues.append(Issue("degraded-link", child, 0, f"cable to {parent} at 4x, {lay.trunk_gbps} Gb/s",
                                    _rate(width, speed), f"{sw_guid[child]:#018x}"))
    for pair, cables in sorted(pairs.items(), key=lambda kv: sorted(kv[0])):
        if pair not in declared:
            names = sorted(pair)
            issues.append(Issue("unexpected-link", names[0], 0, "no cable (not parent and child)",
                                f"{len(cables)} cable(s) to {names[-1]}", f"{sw_guid[names[0]]:#018x}"))
    order = {k: i for i, k in enumerate(KINDS)}
    issues.sort(key=lambda i: (order[i.kind], i.node, i.port))
    return Report(lay.fabric, issues, checked, bad_hosts)


def _reason(kinds: list[str]) -> str:
    return ("clusterdef fabric: " + ", ".join(kinds))[:250]


def drain_lines(report: Report) -> list[str]:
    """`scontrol update ... State=DRAIN` for Slurm-owned hosts with a bad cable (hosts with the same
    reason folded), `kubectl taint ... :NoSchedule` for Kubernetes-owned ones (the Kubernetes
    counterpart of DRAIN: running work stays, nothing new lands). Only definition host names reach
    these lines, and every argument is shell-quoted."""
    kinds: dict[str, list[str]] = {}
    for i in report.issues:
        if i.node in report.hosts and i.kind not in kinds.setdefault(i.node, []):
            kinds[i.node].append(i.kind)
    by_reason: dict[str, list[str]] = {}
    lines = []
    for h, ks in kinds.items():
        if report.hosts[h] == "slurm":
            by_reason.setdefault(_reason(ks), []).append(h)
    for reason, hosts in by_reason.items():
        lines.append(f"scontrol update {shell('NodeName=' + hostlist.fold(hosts))} State=DRAIN "
                     f"{shell('Reason=' + reason)}")
    for h, ks in kinds.items():
        if report.hosts[h] == "kubernetes":
            lines.append(f"kubectl taint nodes {shell(h)} {shell(TAINT + '=' + '-'.join(ks)[:63] + ':NoSchedule')} "
                         "--overwrite")
    return lines


def prometheus(report: Report) -> str:
    f = prom_label(report.fabric)
    out = ["# HELP clusterdef_fabric_links_checked Links of the definition found in the fabric and checked.",
           "# TYPE clusterdef_fabric_links_checked gauge",
           f'clusterdef_fabric_links_checked{{fabric="{f}"}} {report.links_checked}',
           "# HELP clusterdef_fabric_issues Issues found by kind.",
           "# TYPE clusterdef_fabric_issues gauge"]
    for k in KINDS:
        count = sum(1 for i in report.issues if i.kind == k)
        out.append(f'clusterdef_fabric_issues{{fabric="{f}",kind="{k}"}} {count}')
    out += ["# HELP clusterdef_fabric_issue 1 for each issue (node, port, expected and found).",
            "# TYPE clusterdef_fabric_issue gauge"]
    for i in report.issues:
        out.append(f'clusterdef_fabric_issue{{fabric="{f}",kind="{i.kind}",node="{prom_label(i.node)}",'
                   f'port="{i.port}",expected="{prom_label(i.expected)}",actual="{prom_label(i.actual)}"}} 1')
    return "\n".join(out) + "\n"
