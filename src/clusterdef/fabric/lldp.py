"""`clusterdef fabric check --lldp`: the as-built Ethernet (RoCE) fabric as each host's lldpd sees it
(`lldpctl -f json`, one file per host) against the cabling the definition declares (fabric.layout
with kind `roce`: port i of a host is its i-th compute RoCE interface, cabled to `host.leaf_of(i)`).

The format is lldpd's `json` writer (src/client/json_writer.c, lldpd commit da2ab0b5): a tree of
tags where an array of one element is replaced by that element and an object with a `name` key
becomes `{name: object}`. So `lldp.interface` is `{"eth0": {...}}` with one neighbor and a list of
such one-key objects with several; a neighbor's `chassis` is `{"<sysname>": {...}}` when the switch
sends a system name and the bare object otherwise; `port.id` is `{"type": ..., "value": ...}`; the
switch port's MAU type is `port.auto-negotiation.current` ("400GbaseR - 400GBASE-R ...",
src/lib/atoms/port.c) when the switch sends the 802.3 MAC/PHY TLV. `-f json0` (every tag an
array) is refused with a hint.

Reported with fabric.check's kinds and Issue/Report, so the drain lines and Prometheus file are the
InfiniBand check's:
  wrong-leaf / wrong-rail  the neighbor on a host's port i is not `leaf_of(i)` (wrong-rail: a rail
                           leaf of the same fabric for another rail)
  missing-link             no neighbor on the port, or no lldpctl file for the host
  degraded-link            the switch port's MAU type is below the NIC's speed_gbps (lldpd names
                           MAU types up to 400G; a faster link, or one without the TLV, is checked for
                           its cabling only)
  unexpected-link          a second neighbor on one port, or another interface of the host cabled
                           to a switch of this fabric
  unknown-node             a file whose host is not on the fabric
Switch-to-switch cables are not seen from the hosts and are not checked.

Every string from a file is hostile: compared as is, shown only masked (check._shown)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import Finding, Severity
from ..limits import InputError, load_json
from .check import KINDS, Issue, Report, _shown
from .layout import Layout

MAX_FILES = 65536
MAX_INTERFACES = 1024  # per host file
_MAU_G = re.compile(r"^([0-9]{1,4})(?:p([0-9]))?G(?:ig)?base", re.IGNORECASE)
_MAU_M = re.compile(r"^([0-9]{1,5})base", re.IGNORECASE)


class LldpError(InputError):
    """lldpctl output that cannot be read (one located finding)."""


def _bad(file: str, where: str, message: str) -> LldpError:
    return LldpError([Finding("lldp-invalid", Severity.ERROR, (), f"{where}: {message}" if where else message,
                              "pass the output of `lldpctl -f json` (show neighbors), one file per host named "
                              "after the host (gpu001.json)", file=file)])


@dataclass(frozen=True)
class Neighbor:
    chassis: str  # the switch's system name ("" when it sends none); raw, never shown unmasked
    port: str  # the switch port's id (its descr when the id is missing); raw
    mau: str  # the switch port's MAU type as lldpd names it ("" when not sent); raw

    @property
    def gbps(self) -> float | None:
        return mau_gbps(self.mau)


def mau_gbps(mau: str) -> float | None:
    """Gb/s of an lldpd MAU type name ("400GbaseR - ...", "2p5GbaseX", "1000BaseTFD"); None when
    not one."""
    m = _MAU_G.match(mau)
    if m:
        return int(m.group(1)) + (int(m.group(2)) / 10 if m.group(2) else 0)
    m = _MAU_M.match(mau)
    return int(m.group(1)) / 1000 if m else None


def _text(value, file: str, where: str) -> str:
    """A JSON string, or the `value` of lldpd's {"type", "value"} object."""
    if isinstance(value, dict):
        value = value.get("value", "")
    if not isinstance(value, str):
        raise _bad(file, where, f"expected a string, found {type(value).__name__}")
    return value


def _obj(value, file: str, where: str) -> dict:
    if not isinstance(value, dict):
        raise _bad(file, where, f"expected an object, found {type(value).__name__}")
    return value


def _neighbor(body: dict, file: str, where: str) -> Neighbor:
    chassis = _obj(body.get("chassis", {}), file, where + ".chassis")
    name = ""
    if len(chassis) == 1:
        (key, inner), = chassis.items()
        if isinstance(inner, dict) and "id" in inner:  # {"<sysname>": {"id": ..., ...}}
            name = key
    port = _obj(body.get("port", {}), file, where + ".port")
    pid = _text(port.get("id", ""), file, where + ".port.id") or _text(port.get("descr", ""), file,
                                                                         where + ".port.descr")
    auto = port.get("auto-negotiation")
    mau = _text(_obj(auto, file, where + ".port.auto-negotiation").get("current", ""), file,
                where + ".port.auto-negotiation.current") if auto is not None else ""
    return Neighbor(name, pid, mau)


def parse(doc, file: str = "<lldpctl>") -> dict[str, list[Neighbor]]:
    """Local interface -> its neighbors, in file order. Raises LldpError naming the file and the
    JSON path of anything that is not lldpctl's json output."""
    if not isinstance(doc, dict) or "lldp" not in doc:
        raise _bad(file, "", "no top-level \"lldp\" object")
    lldp = doc["lldp"]
    if isinstance(lldp, list):
        raise _bad(file, "lldp", "a list: this is `-f json0` output; use `lldpctl -f json`")
    lldp = _obj(lldp, file, "lldp")
    entries = lldp.get("interface", [])
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, list):
        raise _bad(file, "lldp.interface", f"expected an object or a list, found {type(entries).__name__}")
    if len(entries) > MAX_INTERFACES:
        raise _bad(file, "lldp.interface", f"more than {MAX_INTERFACES} entries")
    out: dict[str, list[Neighbor]] = {}
    for i, entry in enumerate(entries):
        where = f"lldp.interface[{i}]" if len(entries) > 1 else "lldp.interface"
        for iface, body in _obj(entry, file, where).items():
            at = f"{where}.{_shown(iface)}"
            out.setdefault(iface, []).append(_neighbor(_obj(body, file, at), file, at))
    return out


def host_of(path: Path) -> str:
    """The host a file is for: its name up to the first dot (gpu001.json -> gpu001)."""
    return path.name.split(".", 1)[0]


def read(path: str | Path) -> dict[str, dict[str, list[Neighbor]]]:
    """host -> its interfaces' neighbors, from one file or every file of a folder (names starting
    with a dot are skipped). Raises LldpError / InputError (size limit, JSON syntax with line)."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if not p.name.startswith(".")) if path.is_dir() else [path]
    if not files:
        raise _bad(str(path), "", "an empty folder")
    if len(files) > MAX_FILES:
        raise _bad(str(path), "", f"more than {MAX_FILES} files")
    out: dict[str, dict[str, list[Neighbor]]] = {}
    for f in files:
        host = host_of(f)
        if host in out:
            raise _bad(str(f), "", f"a second file for host {_shown(host)}")
        out[host] = parse(load_json(f, "lldp"), str(f))
    return out


def _name(n: Neighbor, lay: Layout) -> str | None:
    """The switch of the layout the neighbor is: its system name, or that name's first label."""
    for cand in (n.chassis, n.chassis.split(".", 1)[0]):
        if cand in lay.switches:
            return cand
    return None


def _seen(n: Neighbor) -> str:
    return f"{_shown(n.chassis) if n.chassis else 'a switch without a system name'} port {_shown(n.port or '?')}"


def compare(lay: Layout, views: dict[str, dict[str, list[Neighbor]]]) -> Report:
    issues: list[Issue] = []
    bad: dict[str, str] = {}
    checked = 0
    rails = lay.rail_of or {}
    for host_name in views:
        if host_name not in lay.hosts:
            issues.append(Issue("unknown-node", _shown(host_name) if host_name else "(no name)", 0,
                                "a host of the fabric", "an lldpctl file for it"))
    for h, host in lay.hosts.items():
        view = views.get(h)
        for p in range(1, host.ports + 1):
            iface, want = host.ifaces[p - 1], host.leaf_of(p)
            found = view.get(iface, []) if view is not None else []
            if not found:
                issues.append(Issue("missing-link", h, p, f"cable from {iface} to {want}",
                                    f"no LLDP neighbor on {iface}" if view is not None else "no lldpctl output"))
                bad[h] = host.control_plane
                continue
            checked += 1
            first, got = found[0], _name(found[0], lay)
            if got != want:
                kind = "wrong-rail" if got in rails and want in rails and rails[got][1] != rails[want][1] \
                    else "wrong-leaf"
                issues.append(Issue(kind, h, p, want, f"{_seen(first)} on {iface}"))
                bad[h] = host.control_plane
            gbps = first.gbps
            if gbps is not None and gbps < host.rated_gbps:
                issues.append(Issue("degraded-link", h, p, f"{host.rated_gbps} Gb/s on {iface}",
                                    f"{gbps:g} Gb/s ({_shown(first.mau.split(' ', 1)[0])})"))
                bad[h] = host.control_plane
            for extra in found[1:]:
                issues.append(Issue("unexpected-link", h, p, f"one neighbor on {iface}", _seen(extra)))
        for iface, found in (view or {}).items():
            if iface in host.ifaces:
                continue
            for n in found:
                if _name(n, lay) is not None:
                    issues.append(Issue("unexpected-link", h, 0, f"{host.ports} compute RoCE port(s)",
                                        f"{_shown(iface)} cabled to {_seen(n)}"))
    order = {k: i for i, k in enumerate(KINDS)}
    issues.sort(key=lambda i: (order[i.kind], i.node, i.port))
    return Report(lay.fabric, issues, checked, bad)
