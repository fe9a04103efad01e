"""Network target: the tenant isolation the fabric enforces.

    network/opensm/partitions.conf   OpenSM partitions (format: OpenSM's partition-config.txt), rendered
                                     when a tenant is isolated by partition key. Two ports can talk when
                                     they share a PKey and at least one of them is a full member of it
                                     (two limited members cannot: partition-config.txt; InfiniBand
                                     Architecture spec vol. 1, 10.9 Partitioning), so:
        Default=0x7fff               every end port a limited member, the subnet manager's port (SELF)
                                     and the switches full: every port reaches the SM (SA queries, the
                                     SM host's IPoIB) and no two end ports talk through it;
        shared=0x0001, indx0         the HCA ports of every host on an InfiniBand fabric that no
                                     partition-key tenant owns, full members: shared nodes talk to
                                     each other (RDMA, IPoIB), whatever tenant's job runs on them;
        <tenant>=<pkey>, indx0       one per partition-key tenant, its hosts' HCA ports full members,
                                     no other port a member: its nodes talk to each other and to the
                                     SM, and share no key with a full member elsewhere.
                                     Every end port is a full member of exactly one partition, and
                                     `indx0` puts that key at P_Key index 0 (Default moves to index 1):
                                     the kernel's IPoIB parent interface takes its key from index 0,
                                     NCCL uses P_Key index NCCL_IB_PKEY (default 0) and UCX's
                                     UCX_IB_PKEY=auto the first key with full membership, so jobs use
                                     the right key without being told. OpenSM has no "all ports but
                                     these" (ALL, ALL_CAS ... only add ports, osm_prtn_config.c), so
                                     the shared partition lists its ports by GUID: every host on the
                                     fabric needs its port GUIDs in the inventory (`port-guid-missing`).

    network/vlan/<group>/                    per node group of a tenant isolated by VLAN, systemd-networkd
                                             files for each Ethernet/RoCE compute or storage interface
                                             (install into /etc/systemd/network/):
        10-clusterdef-<if>.network           the interface carries the tenant's VLAN and no address of
                                             its own (untagged traffic goes nowhere); this, the .netdev
                                             and the VLAN's .network carry the MTU of the port's fabric
                                             (`vlan_mtu`). A storage attachment on such a port is refused
                                             by validate (isolation-cuts-storage, tenancy.storage_cuts)
        10-clusterdef-<vlan if>.netdev       the VLAN interface (Kind=vlan, Id=<the tenant's VLAN id>)
        10-clusterdef-<vlan if>.network      brings it up with an IPv6 link-local address (a RoCE GID);
                                             site addressing is not in the definition
                                             (systemd.network(5), systemd.netdev(5))

    network/storage/<group>/                 per node group with a storage attachment that gives addresses
                                             (`attachments.storage.ipv4_start`), systemd-networkd files
                                             (install into /etc/systemd/network/):
        20-clusterdef-storage-<host>.network one per host, `[Match] Name=<port> Host=<host>`: the
                                             host's address in the storage fabric's subnet on the
                                             attachment's first port, the fabric's MTU, and for an
                                             InfiniBand fabric the IPoIB mode (`[IPoIB] Mode=`). The
                                             base IPoIB interface is the kernel's (no .netdev); every
                                             file matches one host only, so an image carries them all

    network/roce/<group>/                    RoCE rail addresses, sysctls, lossless Ethernet: see roce.py

Pure: the port GUIDs come from the resolved inventory (MAC inventory column 3 or `port_guids`)."""

from __future__ import annotations

from ... import hostlist, tenancy
from ...errors import present
from ...model.network import Fabric
from ...resolve import Resolved


GUIDS_PER_LINE = 16  # a definition line stays under 512 characters


def _partition(name: str, key: int, guids: list[str], comment: str) -> list[str]:
    """One partition, its ports full members, its key at P_Key index 0 (`indx0`). OpenSM reads the file
    in short line buffers: a line of a thousand GUIDs is cut mid-GUID ("bad PortGUID") and OpenSM falls
    back to its default config, every port a full member of one partition. So the ports go
    GUIDS_PER_LINE to a definition; definitions with the same PKey are merged (partition-config.txt:
    "If PKey is repeated ... merged")."""
    head = f"{name}=0x{key:04x}, ipoib, indx0 : "
    return [comment] + [head + ", ".join(f"{g}=full" for g in guids[i:i + GUIDS_PER_LINE]) + " ;\n"
                        for i in range(0, max(len(guids), 1), GUIDS_PER_LINE)]


def partitions_conf(resolved: Resolved) -> str:
    d = resolved.definition
    out = [f"# OpenSM partitions of cluster {d.cluster.name} (set {resolved.set.name}); rendered by clusterdef, "
           "do not edit.\n",
           "# Load with: opensm -P partitions.conf (or PARTITION_CONFIG_FILE in opensm.conf).\n",
           "# Every end port is a full member of one partition (at P_Key index 0) and a limited member of Default:\n",
           "# two ports talk only when one of them is a full member of a key they share.\n",
           "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;\n"]
    shared = tenancy.shared_ib_groups(d)
    guids = [g for grp in shared for host in resolved.port_guids(grp).values() for g in host]
    out += _partition("shared", tenancy.SHARED_PKEY, guids,
                      f"# shared: {len(guids)} port(s) of node groups {', '.join(shared) or '(none)'}\n")
    for tenant in tenancy.pkey_tenants(d):
        owned = tenancy.owned_groups(d, tenant)
        guids = [g for grp in owned for host in resolved.port_guids(grp).values() for g in host]
        out += _partition(tenant, tenancy.pkey(d, tenant), guids,
                          f"# tenant {tenant}: {len(guids)} port(s) of node groups {', '.join(owned)}\n")
    return "".join(out)


def vlan_name(iface: str, vid: int, index: int) -> str:
    """`<if>.<vid>` when it fits Linux's 15 characters, else `vlan<vid>.<index>` (unique per node)."""
    name = f"{iface}.{vid}"
    return name if len(name) <= 15 else f"vlan{vid}.{index}"


def vlan_mtu(d, group: str, nic: str) -> str:
    """`MTUBytes=<the fabric's MTU>\\n` for a VLAN port, its VLAN's .netdev and .network ("" when the NIC's
    fabric sets none; systemd.network(5) [Link] MTUBytes=, systemd.netdev(5) [NetDev] MTUBytes=). The port
    needs it: no other .network applies to it (networkd applies the first that matches). The VLAN says it
    too, rather than hang on an order: networkd 252/255 creates a stacked netdev only once its port's link
    settings are applied (netdev.c, link_is_ready_to_create_stacked_netdev_one: set_link_messages), and
    the kernel gives a VLAN created without an MTU its port's (net/8021q/vlan_netlink.c vlan_newlink), but
    never follows a later change of the port's, and refuses a VLAN MTU above it (vlan_dev_change_mtu)."""
    f = d.network.fabrics.get(tenancy.nic_fabric(d, group, nic) or "")
    return f"MTUBytes={f.mtu}\n" if f is not None and f.mtu else ""


def vlan_files(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    out: dict[str, str] = {}
    for tenant in tenancy.vlan_tenants(d):
        vid = tenancy.vlan(d, tenant)
        for g in tenancy.owned_groups(d, tenant):
            # the same text on every group of the tenant, so an image its groups share can carry it
            head = (f"# Rendered by clusterdef: VLAN {vid} of tenant {tenant} on node groups "
                    f"{', '.join(tenancy.owned_groups(d, tenant))} of cluster {d.cluster.name}; install into "
                    "/etc/systemd/network/.\n")
            for i, (iface, nic) in enumerate(tenancy.vlan_nics(d, g)):
                v = vlan_name(iface, vid, i)
                mtu = vlan_mtu(d, g, nic)
                base = f"network/vlan/{g}/10-clusterdef-"
                out[f"{base}{iface}.network"] = (
                    head + f"[Match]\nName={iface}\n\n[Link]\n{mtu}RequiredForOnline=no\n\n"
                    f"[Network]\nVLAN={v}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n")
                out[f"{base}{v}.netdev"] = head + f"[NetDev]\nName={v}\nKind=vlan\n{mtu}\n[VLAN]\nId={vid}\n"
                out[f"{base}{v}.network"] = (
                    head + f"[Match]\nName={v}\n\n[Link]\n{mtu}RequiredForOnline=no\n\n"
                    "[Network]\nLinkLocalAddressing=ipv6\nIPv6AcceptRA=no\n")
    return out


def render(resolved: Resolved) -> dict[str, str]:
    from .roce import files as roce_files

    tree = {**vlan_files(resolved), **storage_files(resolved), **roce_files(resolved)}
    if tenancy.pkey_tenants(resolved.definition):
        tree["network/opensm/partitions.conf"] = partitions_conf(resolved)
    return tree


def ipoib_child(port: str) -> str:
    """Name of the IPoIB interface networkd creates on `port` for the storage fabric's mode:
    `<port>.st` when it fits Linux's 15 characters, else `ipoib-st` (one storage port per node)."""
    name = f"{port}.st"
    return name if len(name) <= 15 else "ipoib-st"


def storage_port(d, group: str) -> tuple[str, str, Fabric] | None:
    """(port, interface, fabric) of a node group's storage attachment: the first port of the NIC that
    serves it (`<nic>` or `<nic>0`), the interface that carries the address (the port itself, or on an
    InfiniBand fabric with an `ipoib_mode` the IPoIB interface networkd creates on it with that mode),
    and the fabric. None without one (or on a bad reference: validate's attachment-* checks report those)."""
    g = d.nodes.get(group)
    a = g.attachments.get("storage") if g else None
    f = d.network.fabrics.get(a.network) if a else None
    port = tenancy.storage_port(d, group)
    if port is None or f is None or f.kind == "nvlink":
        return None
    return port, (ipoib_child(port) if f.kind == "infiniband" and f.ipoib_mode else port), f


def storage_addressed(d, group: str) -> bool:
    """The group's storage attachment gives addresses on a fabric with a subnet: it gets storage files."""
    g = d.nodes.get(group)
    a = g.attachments.get("storage") if g else None
    sp = storage_port(d, group)
    return a is not None and a.ipv4_start is not None and sp is not None and sp[2].subnet is not None


def _host_network(host: str, iface: str, f, address: str, head: str) -> str:
    """One host's storage interface (systemd.network(5)): matched by interface and host name, its
    address with the subnet's prefix, no IPv6 autoconfiguration (RoCE v2 uses the IPv4 GID)."""
    link = f"MTUBytes={f.mtu}\n" if f.mtu else ""
    return (head + f"[Match]\nName={iface}\nHost={host}\n\n[Link]\n{link}RequiredForOnline=yes\n\n"
            f"[Network]\nAddress={address}/{f.subnet.prefixlen}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n")


def _ipoib_files(port: str, child: str, f, head: str) -> dict[str, str]:
    """The port's .network stacking the IPoIB interface, and its .netdev (Kind=ipoib, the fabric's mode;
    the partition key left to the kernel: the port's own). systemd-networkd sets the IPoIB mode of an
    interface it creates (systemd.netdev(5) [IPoIB]); networkd 252 knows no [IPoIB] in .network files."""
    mtu = f"MTUBytes={f.mtu}\n" if f.mtu else ""
    return {
        f"20-clusterdef-storage-{port}.network": (
            head + f"[Match]\nName={port}\n\n[Link]\nRequiredForOnline=no\n\n"
            f"[Network]\nIPoIB={child}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n"),
        f"20-clusterdef-storage-{child}.netdev": (
            head + f"[NetDev]\nName={child}\nKind=ipoib\n{mtu}\n[IPoIB]\nMode={f.ipoib_mode}\n"),
    }


def storage_files(resolved: Resolved) -> dict[str, str]:
    """network/storage/<group>/: 20-clusterdef-storage-<host>.network for every host of every node group
    whose storage attachment gives addresses on a fabric with a subnet (and the IPoIB interface's files)."""
    d = resolved.definition
    out: dict[str, str] = {}
    for gname, g in d.nodes.items():
        if not storage_addressed(d, gname):
            continue
        a = g.attachments["storage"]
        port, iface, f = present(storage_port(d, gname), "the storage port storage_addressed found")
        start = present(a.ipv4_start, "the storage attachment's ipv4_start storage_addressed found")
        kind = f"IPoIB, {f.ipoib_mode} mode" if f.kind == "infiniband" and f.ipoib_mode else \
            ("IPoIB" if f.kind == "infiniband" else f.kind)
        base = f"network/storage/{gname}/"
        if iface != port:
            head = (f"# Rendered by clusterdef: IPoIB interface {iface} on {port}, storage fabric {a.network} of "
                    f"cluster {d.cluster.name}; install into /etc/systemd/network/.\n")
            out.update({base + n: t for n, t in _ipoib_files(port, iface, f, head).items()})
        for i, host in enumerate(hostlist.names(g.hosts)):
            head = (f"# Rendered by clusterdef: host {host} (node group {gname}) of cluster {d.cluster.name} on storage "
                    f"fabric {a.network} ({kind}) through {iface}; install into /etc/systemd/network/.\n")
            out[f"{base}20-clusterdef-storage-{host}.network"] = _host_network(host, iface, f, str(start + i),
                                                                                 head)
    return out
