"""Drift: which nodes run versions other than the validated set says they should.

Input is the JSON the `gpu_facts` Ansible role writes per node (docs/facts-format.md):

    {"host": "gpu001", "collected_at": "2026-11-30T02:00:00Z",
     "versions": {"driver": "580.126.20", "cuda": "13.0.2", "nccl": "2.30.4",
                  "container_toolkit": "1.19.1", "kernel": "6.8.0-60-generic",
                  "slurm": "25.11.7", "kubelet": "v1.34.2",
                  "firmware": {"bmc": "...", "gpu_vbios": "...", ...}}}

Any version may be "unknown" (the probe could not read it; the fact's optional `reasons` maps
the component to why): such a component is off-matrix, as it is for the first-boot baseline,
nodecheck and admission (fail closed: a version nobody can read is not a validated one). It is
listed under `unknown` too, with the reason. A component missing from the facts counts the same.
A fact file holds one such object or a JSON list of them; a directory is read file by file (*.json).

Pure apart from reading the facts: outputs (report, drain list, Prometheus text) are
returned as data or text for the CLI to print or write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import hostlist
from .errors import Finding, Severity
from .knowledge.services import checked_components, is_service_group
from .limits import InputError, load_json, read_text
from .quoting import prom_label, shell
from .model import Definition
from .matrix.model import ValidatedSet

UNKNOWN = "unknown"
SOFTWARE = ("driver", "cuda", "nccl", "container_toolkit")
TAINT_KEY = "clusterdef.dev/off-matrix"


@dataclass(frozen=True)
class Expected:
    group: str
    control_plane: str
    platform: str
    versions: dict[str, str]  # component -> version ("firmware.bmc" for firmware)
    services: tuple[str, ...] = ()  # a service host's services (docs/services.md): checked only for what it runs


@dataclass
class Mismatch:
    component: str
    expected: str
    actual: str
    reason: str = ""


@dataclass
class NodeReport:
    host: str
    group: str
    control_plane: str
    off: list[Mismatch] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    collected_at: str = ""
    services: tuple[str, ...] = ()


@dataclass
class DriftReport:
    set: str
    nodes: list[NodeReport]
    missing: list[str]  # hosts in the definition without facts
    strangers: list[str]  # hosts in the facts that the definition does not know

    @property
    def off_matrix(self) -> list[NodeReport]:
        return [n for n in self.nodes if n.off]

    def to_json(self) -> dict:
        return {
            "set": self.set,
            "checked": len(self.nodes),
            "off_matrix": len(self.off_matrix),
            "missing": hostlist.fold(self.missing) if self.missing else "",
            "missing_count": len(self.missing),
            "unknown_hosts": sorted(self.strangers),
            "nodes": [{"host": n.host, "group": n.group, "control_plane": n.control_plane,
                       "collected_at": n.collected_at,
                       "off": [{"component": m.component, "expected": m.expected, "actual": m.actual,
                                **({"reason": m.reason} if m.reason else {})} for m in n.off],
                       "unknown": n.unknown} for n in self.off_matrix],
            "unknown_components": {n.host: n.unknown for n in self.nodes if n.unknown},
        }


def expectations(definition: Definition, vs: ValidatedSet) -> dict[str, Expected]:
    """Per node group: what every node of it must run."""
    c = vs.components
    out = {}
    for gname, g in definition.nodes.items():
        hw = definition.hardware[g.hardware]
        if is_service_group(g):
            out[gname] = _service_expected(definition, vs, gname)
            continue
        want = {k: getattr(c, k) for k in SOFTWARE}
        want["kernel"] = definition.images[g.image].kernel
        if g.control_plane == "slurm":
            want["slurm"] = c.slurm
        else:
            want["kubelet"] = c.kubernetes
        pins = vs.firmware.get(hw.platform, {})
        for comp in hw.firmware:
            if comp in pins:
                want[f"firmware.{comp}"] = pins[comp]
        out[gname] = Expected(gname, g.control_plane, hw.platform, want)
    return out


GPU_FIRMWARE = ("gpu_vbios", "nvswitch")


def _service_expected(definition: Definition, vs: ValidatedSet, gname: str) -> Expected:
    """A service host (docs/services.md) runs no GPU stack: its kernel, the Slurm release of slurmctld/slurmdbd,
    kubelet on a Kubernetes control-plane node, and the firmware its hardware type pins (never a GPU's)."""
    c = vs.components
    g = definition.nodes[gname]
    hw = definition.hardware[g.hardware]
    want = {"kernel": definition.images[g.image].kernel}
    versions = {"slurm": c.slurm, "kubelet": c.kubernetes}
    for comp in checked_components(g.services):
        want[comp] = versions[comp]
    pins = vs.firmware.get(hw.platform, {})
    for comp in hw.firmware:
        if comp in pins and comp not in GPU_FIRMWARE:
            want[f"firmware.{comp}"] = pins[comp]
    return Expected(gname, g.control_plane, hw.platform, want, tuple(g.services))


# What a collector may report as a version. Facts come from the nodes themselves, so anything
# else (a command substitution, a newline, a 10 MB string) is reported masked and cut, never as is.
# Devices that disagree are reported as their distinct versions joined by commas (the collector does that).
_PLAIN_VERSION = re.compile(r"^[0-9A-Za-z.+~:_-]{1,64}(,[0-9A-Za-z.+~:_-]{1,64}){0,15}$")


def _shown(value: str) -> str:
    """A node-reported value as it may appear in reports, drain reasons and metrics."""
    if _PLAIN_VERSION.fullmatch(value):
        return value
    return "unprintable:" + re.sub(r"[^0-9A-Za-z.+~:_-]", "?", value[:40])


def _shown_host(value: str) -> str:
    """A host name from the facts as it may appear in a report: a host name, or masked (escape sequences
    and other control characters never reach the terminal)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}", value):
        return value
    return "unprintable:" + re.sub(r"[^0-9A-Za-z._-]", "?", value[:40])


def _reason_text(value) -> str:
    """A node-reported reason as it may appear in a report: printable ASCII, cut to 160 characters."""
    return re.sub(r"[^0-9A-Za-z .,:;_/()+=*^$\[\]-]", "?", str(value)[:160])


def _norm(component: str, value: str) -> str:
    value = str(value).strip()
    if component in ("kubelet", "slurm", "gpu_operator"):
        return value.lstrip("v")
    return value


class FactsError(Exception):
    def __init__(self, findings: list[Finding]):
        super().__init__("; ".join(f"{f.where}: {f.message}" for f in findings))
        self.findings = findings


def _bad(file: str, line: int, message: str, hint: str) -> Finding:
    return Finding("facts-invalid", Severity.ERROR, (), message, hint, file=file, line=line, column=1 if line else 0)


FORMAT_HINT = "each fact is {\"host\": ..., \"collected_at\": ..., \"versions\": {...}}; see docs/facts-format.md"


def _skip_space(text: str, i: int) -> int:
    """The index of the first character at or after `i` that is not JSON whitespace."""
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    return i


def _item_lines(path: Path) -> list[int]:
    """The 1-based line on which each fact of a facts file starts: one for a single object, one per item of
    a list. Read again only when a fact is refused (the file passed load_json's limits already)."""
    import json

    try:
        text = read_text(path, "facts")
    except InputError:
        return []
    i = _skip_space(text, 0)
    if not text.startswith("[", i):
        return [text.count("\n", 0, i) + 1]
    decoder, starts = json.JSONDecoder(), []
    i = _skip_space(text, i + 1)
    while i < len(text) and text[i] != "]":
        starts.append(i)
        try:
            _, i = decoder.raw_decode(text, i)
        except ValueError:
            break
        i = _skip_space(text, i)
        if text.startswith(",", i):
            i = _skip_space(text, i + 1)
    lines, line, last = [], 1, 0
    for start in starts:
        line += text.count("\n", last, start)
        last = start
        lines.append(line)
    return lines


def _line_of(cache: dict[Path, list[int]], path: Path, item: int) -> int:
    if path not in cache:
        cache[path] = _item_lines(path)
    return cache[path][item] if item < len(cache[path]) else 0


def read_facts(path: str | Path) -> list[tuple[str, dict]]:
    """(file, fact) pairs from a file or a directory of *.json. Raises FactsError with
    every problem (file:line) when any file is not valid facts."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise FactsError([_bad(str(path), 0, f"no *.json fact files in {path}",
                                   "point --facts at the folder the gpu_facts role writes to")])
    else:
        files = [path]  # load_json refuses a missing file, a FIFO or a device by name
    facts: list[tuple[str, dict]] = []
    problems: list[Finding] = []
    for f in files:
        try:
            data = load_json(f, "facts")
        except InputError as exc:
            problems.extend(exc.findings)
            continue
        items = data if isinstance(data, list) else [data]
        lines: dict[Path, list[int]] = {}  # read once, when the file's first fact is refused
        for i, item in enumerate(items):
            where = f"{f}" + (f" [{i}]" if isinstance(data, list) else "")
            if not isinstance(item, dict) or not isinstance(item.get("host"), str) or not item["host"]:
                problems.append(_bad(str(f), _line_of(lines, f, i), f"{where}: a fact needs a non-empty string `host`",
                                     FORMAT_HINT))
                continue
            versions = item.get("versions")
            if not isinstance(versions, dict) or not isinstance(versions.get("firmware", {}), dict):
                problems.append(_bad(str(f), _line_of(lines, f, i),
                                     f"{where}: `versions` must be a mapping (with `firmware` a mapping)", FORMAT_HINT))
                continue
            facts.append((str(f), item))
    if problems:
        raise FactsError(problems)
    return facts


def compare(definition: Definition, vs: ValidatedSet, facts: list[tuple[str, dict]]) -> DriftReport:
    groups = expectations(definition, vs)
    owner: dict[str, str] = {}
    for gname, g in definition.nodes.items():
        for host in hostlist.names(g.hosts):
            owner[host] = gname
    reports: list[NodeReport] = []
    seen: set[str] = set()
    strangers: list[str] = []
    for _, fact in facts:
        host = fact["host"]
        group = owner.get(host)
        if group is None:
            strangers.append(_shown_host(host))
            continue
        seen.add(host)
        exp = groups[group]
        versions = fact["versions"]
        firmware = versions.get("firmware") or {}
        raw_reasons = fact.get("reasons")
        reasons = raw_reasons if isinstance(raw_reasons, dict) else {}
        rep = NodeReport(host, group, exp.control_plane, collected_at=str(fact.get("collected_at", "")),
                         services=exp.services)
        for comp, want in exp.versions.items():
            if comp.startswith("firmware."):
                got = firmware.get(comp[9:], UNKNOWN)
            else:
                got = versions.get(comp, UNKNOWN)
            got = UNKNOWN if got is None else str(got)
            if got == UNKNOWN or got == "":
                rep.unknown.append(comp)
                present = (comp[9:] in firmware) if comp.startswith("firmware.") else (comp in versions)
                why = reasons.get(comp)
                rep.off.append(Mismatch(comp, want, UNKNOWN, _reason_text(why) if why
                                        else ("unreadable" if present else "not in the facts")))
            elif _norm(comp, got) != _norm(comp, want):
                rep.off.append(Mismatch(comp, want, _shown(got)))
        reports.append(rep)
    missing = [h for h in owner if h not in seen]
    return DriftReport(vs.name, reports, missing, strangers)


def _reason(n: NodeReport) -> str:
    parts = [f"{m.component} {m.actual}!={m.expected}" for m in n.off]
    text = "clusterdef off-matrix: " + ", ".join(parts)
    return text.replace('"', "'")[:250]


def spared_namespaces(definition: Definition) -> tuple[str, ...]:
    """Namespaces whose pods repair an off-matrix node (GPU Operator, Network Operator): a drain must
    leave them running."""
    k = definition.kubernetes
    if k is None:
        return ()
    out = [k.gpu_operator.namespace]
    if k.network_operator.enabled:
        out.append(k.network_operator.namespace)
    return tuple(out)


def drain_lines(report: DriftReport, spare: tuple[str, ...] = ("gpu-operator", "nvidia-network-operator"),
                timeout_minutes: int = 120) -> list[str]:
    """Shell lines, every argument shell-quoted: `scontrol update ... State=DRAIN` for Slurm-owned
    nodes (nodes with the same reason folded into one hostlist); for Kubernetes-owned nodes a
    NoSchedule taint naming the components (NoExecute would also evict the GPU Operator's own
    pods, which repair an off-matrix driver) and a `kubectl drain` that evicts the workloads.
    kubectl drain has no namespace filter: it spares the operator namespaces (`spare`) because their
    pods on a GPU node are DaemonSet pods (driver, toolkit, device plugin, validator, MOFED), which
    `--ignore-daemonsets` leaves running; the trailing comment names them. The drain waits at most
    `timeout_minutes` (the definition's upgrade.drain.timeout_minutes)."""
    by_reason: dict[str, list[str]] = {}
    lines: list[str] = []
    for n in report.off_matrix:
        if n.control_plane == "slurm" and not n.services:
            by_reason.setdefault(_reason(n), []).append(n.host)
    for reason, hosts in by_reason.items():
        lines.append(f"scontrol update {shell('NodeName=' + hostlist.fold(hosts))} State=DRAIN "
                     f"{shell('Reason=' + reason)}")
    names = ", ".join(re.sub(r"[^a-z0-9-]", "?", ns) for ns in spare)
    note = f"  # --ignore-daemonsets keeps the repair pods of {names}" if spare else ""
    for n in report.off_matrix:
        if n.control_plane == "kubernetes" and not n.services:  # a control-plane node is reported, not drained
            value = "-".join(sorted({m.component.replace("firmware.", "fw-").replace("_", "-") for m in n.off}))[:63]
            taint = f"{TAINT_KEY}={value.strip('-')}:NoSchedule"
            lines.append(f"kubectl taint nodes {shell(n.host)} {shell(taint)} --overwrite")
            lines.append(f"kubectl drain {shell(n.host)} --ignore-daemonsets --delete-emptydir-data "
                         f"{shell(f'--timeout={int(timeout_minutes)}m')}{note}")
    return lines


_label = prom_label


def prometheus(report: DriftReport) -> str:
    """Prometheus text exposition format (for node_exporter's textfile collector)."""
    out = [
        "# HELP clusterdef_drift_nodes_checked Nodes whose facts were compared with the validated set.",
        "# TYPE clusterdef_drift_nodes_checked gauge",
        f'clusterdef_drift_nodes_checked{{set="{_label(report.set)}"}} {len(report.nodes)}',
        "# HELP clusterdef_drift_nodes_off_matrix Nodes running at least one component off the validated set.",
        "# TYPE clusterdef_drift_nodes_off_matrix gauge",
        f'clusterdef_drift_nodes_off_matrix{{set="{_label(report.set)}"}} {len(report.off_matrix)}',
        "# HELP clusterdef_drift_nodes_missing Nodes of the definition without facts.",
        "# TYPE clusterdef_drift_nodes_missing gauge",
        f'clusterdef_drift_nodes_missing{{set="{_label(report.set)}"}} {len(report.missing)}',
        "# HELP clusterdef_node_off_matrix 1 for each node component that differs from the validated set.",
        "# TYPE clusterdef_node_off_matrix gauge",
    ]
    for n in report.off_matrix:
        for m in n.off:
            out.append(f'clusterdef_node_off_matrix{{node="{_label(n.host)}",group="{_label(n.group)}",'
                       f'component="{_label(m.component)}",expected="{_label(m.expected)}",'
                       f'actual="{_label(m.actual)}"}} 1')
    out.append("# HELP clusterdef_node_component_unknown 1 for each node component the collector could not read.")
    out.append("# TYPE clusterdef_node_component_unknown gauge")
    for n in report.nodes:
        for comp in n.unknown:
            out.append(f'clusterdef_node_component_unknown{{node="{_label(n.host)}",group="{_label(n.group)}",'
                       f'component="{_label(comp)}"}} 1')
    return "\n".join(out) + "\n"


def facts_for(definition: Definition, vs: ValidatedSet, collected_at: str = "2026-11-30T02:00:00Z") -> list[dict]:
    """On-matrix facts for every node of a definition (for tests, benchmarks and docs)."""
    groups = expectations(definition, vs)
    out = []
    for gname, g in definition.nodes.items():
        exp = groups[gname]
        versions: dict = {k: v for k, v in exp.versions.items() if not k.startswith("firmware.")}
        if "kubelet" in versions:
            versions["kubelet"] = "v" + versions["kubelet"].lstrip("v")
        versions["firmware"] = {k[9:]: v for k, v in exp.versions.items() if k.startswith("firmware.")}
        for host in hostlist.names(g.hosts):
            out.append({"host": host, "collected_at": collected_at,
                        "versions": {**versions, "firmware": dict(versions["firmware"])}})
    return out
