"""Service hosts (docs/services.md): node groups that run management or control-plane services
(`nodes.<group>.services`) rather than GPU work. What each service needs (its inventory group, packages,
the set component that pins them, the section it needs, what drift checks) is data: services.yaml.
Shared by the checks, the renderers, drift and the rollout; imports neither."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING

from ..source import safe_yaml

from .. import hostlist

if TYPE_CHECKING:
    from ..model.nodes import NodeGroup


@cache
def table() -> dict[str, dict]:
    """service -> {group, packages, with?, component?, section?, checks?, mofed?}."""
    return safe_yaml().load(files(__package__).joinpath("services.yaml").read_text(encoding="utf-8"))


def is_service_group(group) -> bool:
    """A group of service hosts: it declares services (control_plane none, or a Kubernetes control plane)."""
    return bool(group.services) or group.control_plane == "none"


def service_groups(definition) -> dict[str, NodeGroup]:
    return {n: g for n, g in definition.nodes.items() if is_service_group(g)}


def gpu_groups(definition) -> dict[str, NodeGroup]:
    """The node groups that are Slurm or Kubernetes workers (every group that is not a service group)."""
    return {n: g for n, g in definition.nodes.items() if not is_service_group(g)}


def service_hosts(definition) -> dict[str, list[str]]:
    """service -> its hosts, in definition order (a service no group runs is left out)."""
    out: dict[str, list[str]] = {}
    for g in definition.nodes.values():
        for s in g.services:
            out.setdefault(s, []).extend(h for h in hostlist.names(g.hosts) if h not in out.get(s, []))
    return out


def group_of_host(definition) -> dict[str, str]:
    """host -> its node group."""
    return {h: gname for gname, g in definition.nodes.items() for h in hostlist.names(g.hosts)}


def host_services(definition) -> dict[str, tuple[str, ...]]:
    """host -> the services it runs (service hosts only)."""
    return {h: tuple(g.services) for g in definition.nodes.values() if g.services for h in hostlist.names(g.hosts)}


def image_services(definition, image_name: str) -> tuple[str, ...] | None:
    """The services of the groups booting `image_name` when every one of them is a service group (the image
    then carries no NVIDIA stack); None when a GPU group boots it or no group does."""
    groups = [g for g in definition.nodes.values() if g.image == image_name]
    if not groups or not all(is_service_group(g) for g in groups):
        return None
    return tuple(dict.fromkeys(s for g in groups for s in g.services))


def image_packages(services) -> list[str]:
    """The distribution packages the services need that no set component pins."""
    t = table()
    return list(dict.fromkeys([*(p for s in services if not t[s].get("component") for p in t[s]["packages"]),
                               *(p for s in services for p in t[s].get("with", ()))]))


def component_packages(services, named: dict | None = None) -> dict[str, list[str]]:
    """set component -> the packages of the services it pins (slurm: slurmctld..., kubernetes: kubelet...);
    `named`: a package source's own names per service (package-sources.yaml `services`), else services.yaml's."""
    t = table()
    out: dict[str, list[str]] = {}
    for s in services:
        c = t[s].get("component")
        if c:
            out.setdefault(c, [])
            out[c].extend(p for p in (named or {}).get(s, t[s]["packages"]) if p not in out[c])
    return out


def checked_components(services) -> tuple[str, ...]:
    """What drift and the first boot compare on a host running `services` (never GPU facts)."""
    return tuple(dict.fromkeys(c for s in services for c in table()[s].get("checks", ())))


def quorum_limit(members: int) -> int:
    """The most etcd members that may be down at once without losing quorum: (n-1)//2."""
    return (members - 1) // 2


def _members(definition, service: str) -> set[str]:
    return set(service_hosts(definition).get(service, ()))


def wave_ok(definition, wave) -> bool:
    """A rollout wave keeps the services up: never service hosts together with GPU nodes, never two Slurm
    controllers, never the slurmdbd host with a controller, never more etcd members than quorum spares
    ((n-1)//2 of n; one at a time where n is 1 or 2, which lose quorum on any restart)."""
    wave = set(wave)
    hosts = host_services(definition)
    service = wave & set(hosts)
    if service and service != wave:
        return False
    ctl = wave & _members(definition, "slurmctld")
    dbd = wave & _members(definition, "slurmdbd")
    etcd = _members(definition, "etcd")
    return (len(ctl) <= 1 and not (ctl and dbd - ctl) and not (dbd and ctl - dbd)
            and len(wave & etcd) <= max(1, quorum_limit(len(etcd))))


def service_waves(definition, hosts, size: int) -> list[list[str]]:
    """Service hosts (in the given order) packed into waves of at most `size` that wave_ok accepts: each
    host joins the first wave it fits in, else opens a new one."""
    out: list[list[str]] = []
    for h in hosts:
        for wave in out:
            if len(wave) < size and wave_ok(definition, [*wave, h]):
                wave.append(h)
                break
        else:
            out.append([h])
    return out
