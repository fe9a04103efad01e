"""RoCE on the hosts: the compute fabric's rail addresses, the multi-NIC sysctls, lossless Ethernet per
port, and the NCCL/UCX environment jobs get (docs/network.md).

    network/roce/<group>/                         per node group with a RoCE compute attachment that
                                                  gives addresses, or a RoCE storage attachment:
        30-clusterdef-rail-<host>-<port>.network  one per host and rail port, `[Match] Name=<port>
                                                  Host=<host>`: the host's address on its rail's subnet
                                                  (rail i: the i-th equal slice of the fabric's subnet,
                                                  `rail_subnets`), the fabric's MTU. The rail's connected
                                                  route is the only route to the rail subnet, through
                                                  that port: rail i's traffic stays on rail i. A routed
                                                  fabric (`rail_addressing: routed`): a /31 per port and
                                                  a route to the rail's aggregate through the switch
        90-clusterdef-roce.conf                   sysctl.d: arp_ignore=1, arp_announce=2, rp_filter=2
                                                  (several ports of one host on one L2/L3 fabric)
        clusterdef-roce-qos.sh                    per RoCE port: mlnx_qos trust and PFC, ECN (DCQCN) on
                                                  the PFC priority; writes /run/clusterdef/roce.env
                                                  (NCCL_IB_HCA/UCX_NET_DEVICES from the rails' RDMA
                                                  devices, found in sysfs, GID index, traffic class)
        clusterdef-roce-qos.service               oneshot, after the ports' netdevs exist, at every boot

Slurm jobs get /run/clusterdef/roce.env through TaskProlog (render/slurm: task-prolog.sh); Kubernetes
pods through the ConfigMap `clusterdef-roce` in their tenant's namespace (render/kubernetes/tenants.py).
A node group a VLAN tenant owns gets no rail files: the VLAN file takes its ports (render/network,
network/vlan/), and site addressing on the VLAN is not in the definition."""

from __future__ import annotations

import shlex
from ipaddress import IPv4Address, IPv4Interface, IPv4Network

from ...fabric.rails import qos_ports, rail_addresses, rail_fabric, rail_ports, rail_route
from ...model.network import Fabric, Lossless
from ...quoting import unit_name
from ...resolve import Resolved

SYSCTL = "/etc/sysctl.d/90-clusterdef-roce.conf"
SCRIPT = "/usr/lib/clusterdef/roce/qos.sh"
UNIT = "clusterdef-roce-qos.service"
ENV = "/run/clusterdef/roce.env"
MLNX_QOS = "/usr/bin/mlnx_qos"
GID_INDEX = 3
"""RoCEv2 with an IPv4 address: GID index 3 of a port with no IPv6 address of its own (0 and 1: the
default GID, RoCE v1 and v2; 2 and 3: the IPv4 address, RoCE v1 and v2). LinkLocalAddressing=no keeps
the kernel from adding IPv6 GIDs ahead of it."""


def _rail_network(host: str, port: str, rail: int, address: IPv4Interface, f: Fabric, head: str,
                  route: tuple[IPv4Network, IPv4Address] | None = None) -> str:
    """One host's rail port (systemd.network(5)): matched by interface and host name, its address on the
    rail subnet (the kernel adds the connected route through this port), no IPv6 link-local address
    (no IPv6 GIDs ahead of the IPv4 one, GID_INDEX). Not RequiredForOnline: a rail that is down must not
    hold network-online.target for every service of the node (a health check must catch it: nodecheck
    does not check RoCE ports yet, issue 29 item 3)."""
    link = f"MTUBytes={f.mtu}\n" if f.mtu else ""
    what = (f"aggregate {route[0]}, a /31 to the leaf switch at {route[1]}" if route
            else f"subnet {address.network}")
    # routed: systemd.network(5) [Route] Destination= and Gateway=; the gateway is the other end of the /31,
    # on-link through the /31's connected route (RFC 3021 point-to-point)
    routes = f"\n[Route]\nDestination={route[0]}\nGateway={route[1]}\n" if route else ""
    return (head + f"# rail {rail}: {what}\n[Match]\nName={port}\nHost={host}\n\n"
            f"[Link]\n{link}RequiredForOnline=no\n\n"
            f"[Network]\nAddress={address.with_prefixlen}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n" + routes)


SYSCTLS = (
    # kernel Documentation/networking/ip-sysctl.rst: arp_ignore 1 "reply only if the target IP address is
    # local address configured on the incoming interface"; arp_announce 2 "always use the best local address
    # for this target" (the port's own); rp_filter 2 "loose mode": a packet is dropped only when its source
    # is not reachable through any interface. NVIDIA's multi-port RoCE host guidance sets the same three.
    ("net.ipv4.conf.all.arp_ignore", "1"),
    ("net.ipv4.conf.default.arp_ignore", "1"),
    ("net.ipv4.conf.all.arp_announce", "2"),
    ("net.ipv4.conf.default.arp_announce", "2"),
    ("net.ipv4.conf.all.rp_filter", "2"),
    ("net.ipv4.conf.default.rp_filter", "2"),
)


def sysctl_conf(head: str) -> str:
    return head + "".join(f"{k} = {v}\n" for k, v in SYSCTLS)


def pfc_flags(q: Lossless) -> str:
    """`mlnx_qos --pfc`: one 0/1 per priority 0..7, 1 on the PFC priority only."""
    return ",".join("1" if p == q.pfc_priority else "0" for p in range(8))


def traffic_class(q: Lossless) -> int:
    """The IPv4 TOS byte of the RDMA traffic: DSCP in its upper six bits (NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS)."""
    return q.dscp * 4


def job_env(q: Lossless) -> dict[str, str]:
    """What every job's NCCL/UCX get on a RoCE fabric, besides the rail devices (NCCL docs, env.html:
    NCCL_IB_GID_INDEX, NCCL_IB_TC; UCX: UCX_IB_GID_INDEX, UCX_IB_TRAFFIC_CLASS)."""
    tc = str(traffic_class(q))
    return {"NCCL_IB_GID_INDEX": str(GID_INDEX), "NCCL_IB_TC": tc,
            "UCX_IB_GID_INDEX": str(GID_INDEX), "UCX_IB_TRAFFIC_CLASS": tc}


def qos_script(d, group: str, head: str) -> str:
    """Per RoCE port: trust and PFC with DOCA's mlnx_qos, ECN on the PFC priority through the mlx5
    driver's sysfs files; then the job environment with the rails' RDMA devices (each port's
    /sys/class/net/<port>/device/infiniband/<dev>, the path rdma-core's ibdev2netdev reads)."""
    ports = qos_ports(d, group)
    rails = rail_ports(d, group)
    q = next((f.qos for p, f in ports if p in rails and f.qos), None)
    lines = [head, "set -eu\n", f"mkdir -p {shlex.quote(ENV.rsplit('/', 1)[0])}\n"]
    for port, f in ports:
        lq = f.qos
        assert lq is not None
        qp = shlex.quote(port)
        lines.append(f"{MLNX_QOS} -i {qp} --trust {lq.trust} --pfc {pfc_flags(lq)}\n")
        for side in ("roce_np", "roce_rp"):
            path = shlex.quote(f"/sys/class/net/{port}/ecn/{side}/enable/{lq.pfc_priority}")
            lines.append(f"echo {1 if lq.ecn else 0} > {path}\n")
    if q is not None and rails:
        lines.append("hcas=\nfor port in " + " ".join(shlex.quote(p) for p in rails) + "; do\n"
                     "  for dev in /sys/class/net/\"$port\"/device/infiniband/*; do\n"
                     "    if [ -e \"$dev\" ]; then hcas=\"${hcas:+$hcas,}${dev##*/}:1\"; fi\n"
                     "  done\ndone\n")
        env = job_env(q)
        lines.append(f"tmp={shlex.quote(ENV)}.tmp\n{{\n"
                     + "".join(f"  echo {shlex.quote(f'{k}={v}')}\n" for k, v in env.items())
                     + "  echo \"NCCL_IB_HCA==$hcas\"\n  echo \"UCX_NET_DEVICES=$hcas\"\n"
                     f"}} > \"$tmp\"\nmv \"$tmp\" {shlex.quote(ENV)}\n")
    return "".join(lines)


def device_unit(port: str) -> str:
    """udev's device unit of a network interface (`systemd-escape --path` of its sysfs alias path)."""
    return unit_name(f"/sys/subsystem/net/devices/{port}").removesuffix(".mount") + ".device"


def qos_unit(d, group: str, head: str) -> str:
    """Oneshot after every port's netdev exists (udev's device unit for it, systemd.device(5)) and
    networkd configured it; RemainAfterExit so a restart reruns it (the delivery action)."""
    devs = " ".join(device_unit(p) for p, _ in qos_ports(d, group))
    return (head + f"[Unit]\nDescription=clusterdef: lossless Ethernet (trust, PFC, ECN) on the RoCE ports\n"
            f"Wants={devs}\nAfter={devs} systemd-networkd.service\n\n"
            f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh {SCRIPT}\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def files(resolved: Resolved) -> dict[str, str]:
    """network/roce/<group>/: see the module's docstring."""
    d = resolved.definition
    out: dict[str, str] = {}
    for gname, g in d.nodes.items():
        ports = qos_ports(d, gname)
        if not ports:
            continue
        base = f"network/roce/{gname}/"
        rf = rail_fabric(d, gname)
        if rf is not None and rail_ports(d, gname):
            fname, f = rf
            for host, addrs in rail_addresses(d, gname).items():
                for rail, (port, addr) in enumerate(addrs, 1):
                    head = (f"# Rendered by clusterdef: host {host} (node group {gname}) of cluster {d.cluster.name}, "
                            f"rail {rail} of RoCE fabric {fname} on {port}; install into /etc/systemd/network/.\n")
                    out[f"{base}30-clusterdef-rail-{host}-{port}.network"] = _rail_network(
                        host, port, rail, addr, f, head, rail_route(d, gname, addr))
        # no group name: groups with the same ports get the same text, so an image they share can carry it
        head = f"# Rendered by clusterdef for the RoCE ports of cluster {d.cluster.name}.\n"
        if len(ports) > 1 or rail_ports(d, gname):
            out[f"{base}90-clusterdef-roce.conf"] = sysctl_conf(head + f"# install as {SYSCTL}\n")
        out[f"{base}clusterdef-roce-qos.sh"] = qos_script(d, gname, "#!/bin/sh\n" + head + f"# install as {SCRIPT}\n")
        out[f"{base}{UNIT}"] = qos_unit(d, gname, head)
    return out


def node_files(resolved: Resolved) -> dict[str, list[dict]]:
    """Per node group: [{dest, mode, content[, host]}] of network/roce/<group>/ (a rail file is one
    host's: `host`)."""
    out: dict[str, list[dict]] = {}
    for rel, text in files(resolved).items():
        g, name = rel.split("/")[2:]
        if name.endswith(".network"):
            host = text.split("\nHost=", 1)[1].split("\n", 1)[0]
            entry = {"dest": f"/etc/systemd/network/{name}", "mode": "0644", "content": text, "host": host}
        elif name.endswith(".conf"):
            entry = {"dest": SYSCTL, "mode": "0644", "content": text}
        elif name.endswith(".sh"):
            entry = {"dest": SCRIPT, "mode": "0755", "content": text}
        else:
            entry = {"dest": f"/etc/systemd/system/{name}", "mode": "0644", "content": text}
        out.setdefault(g, []).append(entry)
    return out
