"""Service hosts (docs/services.md): management and control-plane hosts declared with `services`, on
GPU-less hardware, each service with the section it needs, and the Slurm controllers and accounting
host declared where they run."""

from __future__ import annotations

from typing import Iterable

from .. import hostlist
from ..errors import Finding, error, warning
from ..knowledge.services import group_of_host, is_service_group, table
from .registry import Context, check

KUBE_SERVICES = ("kube-control-plane", "etcd")


def _short(name: str) -> str:
    return name.split(".", 1)[0]


@check("service-groups")
def service_groups(ctx: Context) -> Iterable[Finding]:
    """Each service group: GPU-less, its services' sections present, the right control plane."""
    d = ctx.definition
    t = table()
    cpu_only = next((n for n, h in d.hardware.items() if h.gpu is None), None)
    use = (f"give the group a hardware type without `gpu`: `hardware: {cpu_only}`" if cpu_only else
           "add a hardware type without `gpu` under `hardware:`, e.g. `mgmt-server: {platform: mgmt-server, "
           "cpu: {sockets: 1, cores_per_socket: 16, threads_per_core: 2}, memory_gib: 128}`, and use it")
    for gname, g in d.nodes.items():
        hw = d.hardware.get(g.hardware)
        if g.services and hw is not None and hw.gpu is not None:
            yield error("service-on-gpu-hardware", ("nodes", gname, "services"),
                        f"node group `{gname}` runs services ({', '.join(g.services)}) on hardware `{g.hardware}`, "
                        f"which has {hw.gpu.count} GPU(s): a service host carries no GPU stack",
                        use + ", or drop `services` to make it a GPU group")
        if g.control_plane == "none" and not g.services:
            yield error("service-none-without-services", ("nodes", gname, "control_plane"),
                        f"node group `{gname}` has control_plane none but no services: it would run nothing",
                        "list what its hosts run, e.g. `services: [slurmctld]`, or set `control_plane: slurm`")
        if g.control_plane == "slurm" and g.services:
            yield error("service-control-plane", ("nodes", gname, "control_plane"),
                        f"node group `{gname}` runs services but is a Slurm worker group (control_plane slurm): "
                        "its hosts would be Slurm nodes",
                        "service hosts have `control_plane: none` (a Kubernetes control plane: "
                        "`control_plane: kubernetes` with `services: [kube-control-plane, etcd]`)")
        if g.control_plane == "kubernetes" and g.services and "kube-control-plane" not in g.services:
            yield error("service-control-plane", ("nodes", gname, "services"),
                        f"node group `{gname}` (control_plane kubernetes) runs {', '.join(g.services)} but not "
                        "kube-control-plane: only a Kubernetes control-plane node joins the cluster as a service host",
                        "add it, e.g. `services: [kube-control-plane, etcd]`, or use `control_plane: none`")
        for i, s in enumerate(g.services):
            if s == "kube-control-plane" and g.control_plane != "kubernetes":
                yield error("service-control-plane", ("nodes", gname, "services", i),
                            f"node group `{gname}` runs kube-control-plane but its control_plane is "
                            f"{g.control_plane}: a Kubernetes control-plane node is part of the Kubernetes cluster",
                            "`control_plane: kubernetes`")
            section = t[s].get("section")
            if section and getattr(d, section) is None:
                yield (error("service-needs-slurm", ("nodes", gname, "services", i),
                             f"node group `{gname}` runs {s}, but the definition has no `slurm` section",
                             f"add a `slurm` section (controllers, partitions), or drop {s} from `services`")
                       if section == "slurm" else
                       error("service-needs-kubernetes", ("nodes", gname, "services", i),
                             f"node group `{gname}` runs {s}, but the definition has no `kubernetes` section",
                             f"add a `kubernetes` section, e.g. `kubernetes: {{}}`, or drop {s} from `services`"))
            if s in g.services[:i]:
                yield error("service-duplicate", ("nodes", gname, "services", i),
                            f"node group `{gname}` lists {s} twice",
                            f"`services: [{', '.join(dict.fromkeys(g.services))}]`")


@check("service-images")
def service_images(ctx: Context) -> Iterable[Finding]:
    """An image is for service hosts or for GPU nodes, never both: a service image carries no NVIDIA stack,
    a GPU image carries it all."""
    d = ctx.definition
    on_gpu = {o.image for o in d.nodes.values() if not is_service_group(o)}
    own = next((i for i in d.images if i not in on_gpu), None)  # an image no GPU group boots
    for gname, g in d.nodes.items():
        if not is_service_group(g):
            continue
        gpu = [n for n, o in d.nodes.items() if o.image == g.image and not is_service_group(o)]
        if gpu:
            yield error("image-service-shared", ("nodes", gname, "image"),
                        f"service group `{gname}` boots image `{g.image}`, which GPU group(s) {', '.join(gpu)} "
                        "boot too: "
                        "the image would carry the whole NVIDIA stack on the service hosts (or none on the GPU nodes)",
                        f"give the service hosts their own image: `image: {own}`" if own else
                        f"give the service hosts their own image: a copy of `{g.image}` under `images:` with another "
                        "name (its packages: only what the hosts need), and `image: <that name>`")


@check("slurm-service-hosts")
def slurm_service_hosts(ctx: Context) -> Iterable[Finding]:
    """slurm.controllers and slurm.accounting.host run where a group declares slurmctld / slurmdbd."""
    d = ctx.definition
    s = d.slurm
    if s is None:
        return
    where = group_of_host(d)
    short = {_short(h): h for h in where}
    listed: list[tuple[str, tuple, str]] = [("slurmctld", ("slurm", "controllers", i), c)
                                            for i, c in enumerate(s.controllers)]
    if s.accounting.storage == "slurmdbd" and s.accounting.host:
        listed.append(("slurmdbd", ("slurm", "accounting", "host"), s.accounting.host))
    outside = []
    for service, path, name in listed:
        host = name if name in where else short.get(_short(name))
        if host is None:
            outside.append((path, name))
            continue
        gname = where[host]
        if service not in d.nodes[gname].services:
            yield error("service-host-undeclared", path,
                        f"{name} is a host of node group `{gname}`, which does not run {service}",
                        f"declare it in the group, e.g. `services: [{service}]` with `control_plane: none` on "
                        "GPU-less hardware")
    if outside:
        path, _ = outside[0]
        names = ", ".join(n for _, n in outside)
        yield warning("service-hosts-outside", path,
                      f"the Slurm daemon host(s) {names} are in no node group: clusterdef installs their files but "
                      "cannot keep them out of one rollout wave, nor give them an image",
                      "declare them as service hosts: a node group with `control_plane: none` and "
                      "`services: [slurmctld]` (or `[slurmdbd]`) on GPU-less hardware")
    controllers = {_short(c) for c in s.controllers}
    account = _short(s.accounting.host) if s.accounting.storage == "slurmdbd" else ""
    for gname, g in d.nodes.items():
        for i, svc in enumerate(g.services):
            want = controllers if svc == "slurmctld" else {account} if svc == "slurmdbd" else None
            if want is None:
                continue
            missing = [h for h in hostlist.names(g.hosts) if _short(h) not in want]
            if missing:
                key = "slurm.controllers" if svc == "slurmctld" else "slurm.accounting.host"
                yield error("service-host-unlisted", ("nodes", gname, "services", i),
                            f"node group `{gname}` runs {svc} on {', '.join(missing)}, which {key} does not name",
                            f"name them there, e.g. `controllers: [{', '.join(missing)}]`" if svc == "slurmctld"
                            else f"`accounting: {{storage: slurmdbd, host: {missing[0]}}}`")


@check("etcd-quorum")
def etcd_quorum(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    members = [(gname, h) for gname, g in d.nodes.items() if "etcd" in g.services for h in hostlist.names(g.hosts)]
    if members and len(members) % 2 == 0:
        gname = members[0][0]
        yield warning("etcd-even-members", ("nodes", gname, "services", d.nodes[gname].services.index("etcd")),
                      f"{len(members)} etcd members: an even count tolerates no more failures than "
                      f"{len(members) - 1} would ({(len(members) - 1) // 2}) and one more vote is needed for quorum",
                      "run an odd number of etcd members, e.g. 3 or 5 hosts in the group with `services: [etcd]`")


@check("service-groups-not-gpu-pools")
def service_groups_not_gpu_pools(ctx: Context) -> Iterable[Finding]:
    """A service group is in no Kueue flavor, GPU Operator driver pool, tenant's owned nodes nor the upgrade canary:
    it has no GPUs."""
    d = ctx.definition
    refs: list[tuple[tuple, str, str]] = []
    if d.kubernetes is not None:
        k = d.kubernetes
        refs += [(("kubernetes", "kueue", "flavors", f, "node_groups", i), g, f"Kueue flavor `{f}`")
                 for f, fl in k.kueue.flavors.items() for i, g in enumerate(fl.node_groups)]
        refs += [(("kubernetes", "gpu_operator", "driver_pools", p, "node_groups", i), g, f"driver pool `{p}`")
                 for p, pool in k.gpu_operator.driver_pools.items() for i, g in enumerate(pool.node_groups)]
    refs += [(("tenants", t, "isolation", "node_groups", i), g, f"tenant `{t}`'s owned nodes")
             for t, ten in d.tenants.items() for i, g in enumerate(ten.isolation.node_groups)]
    if d.upgrade.canary.node_group:  # the canary runs a multi-node GPU collective
        refs.append((("upgrade", "canary", "node_group"), d.upgrade.canary.node_group, "the upgrade canary"))
    example = next((n for n, g in d.nodes.items() if not is_service_group(g)), "<a GPU group>")
    for path, gname, what in refs:
        g = d.nodes.get(gname)
        if g is not None and g.services:
            yield error("service-group-gpu-pool", path,
                        f"{what} names `{gname}`, a group of service hosts ({', '.join(g.services)}): it has no GPUs "
                        "to offer", f"name GPU node groups only, e.g. `node_group: {example}`"
                        if path[-1] == "node_group" else f"name GPU node groups only, e.g. `node_groups: [{example}]`")


@check("boot-server-address")
def boot_server_address(ctx: Context) -> Iterable[Finding]:
    """The boot server is the host dnsmasq.conf and the iPXE chain name (network.provisioning.server): a
    boot-server host at another address would serve DHCP that points every node at a server that is not there."""
    d = ctx.definition
    server = str(d.network.provisioning.server)
    for gname, g in d.nodes.items():
        if "boot-server" not in g.services:
            continue
        hosts = hostlist.names(g.hosts)
        first = g.addressing.ipv4_start
        addrs = {h: str(first + i) for i, h in enumerate(hosts)}
        if server not in addrs.values():
            yield error("boot-server-address", ("nodes", gname, "addressing", "ipv4_start"),
                        f"node group `{gname}` runs boot-server, but none of its hosts ({', '.join(hosts)}: "
                        f"{', '.join(addrs.values())}) has the provisioning server's address {server}, which "
                        "dnsmasq.conf and the iPXE chain send every node to",
                        f"give the boot server that address: `ipv4_start: {server}` (or set "
                        f"network.provisioning.server to {addrs[hosts[0]]})")


@check("service-host-size")
def service_host_size(ctx: Context) -> Iterable[Finding]:
    """A service host's hardware against what its services need together (knowledge/services.yaml `needs`,
    each from the service's own documentation): etcd beside the API server on four cores is slow to answer
    heartbeats and the control plane flaps; a small accounting host cannot give MariaDB the buffer pool
    Slurm's accounting guide asks for."""
    d = ctx.definition
    t = table()
    for gname, g in d.nodes.items():
        hw = d.hardware.get(g.hardware)
        if not g.services or hw is None:
            continue
        needs = [(s, t[s]["needs"]) for s in g.services if t.get(s, {}).get("needs")]
        for what, have, unit, path in (
                ("cores", hw.cpu.sockets * hw.cpu.cores_per_socket, "core(s)", ("hardware", g.hardware, "cpu")),
                ("memory_gib", hw.memory_gib, "GiB", ("hardware", g.hardware, "memory_gib"))):
            parts = [(s, n[what]) for s, n in needs if n.get(what)]
            want = sum(v for _, v in parts)
            if have < want:
                yield warning("service-host-undersized", path,
                              f"node group `{gname}` runs {', '.join(s for s, _ in parts)} on hardware `{g.hardware}` "
                              f"with {have} {unit}; together they need {want} "
                              f"({', '.join(f'{s} {v}' for s, v in parts)}: each service's own documentation, "
                              "knowledge/services.yaml)",
                              f"give the group hardware with at least {want} {unit}, or spread the services "
                              "over more groups")
