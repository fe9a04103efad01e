"""Network target: the tenant isolation the fabric enforces.

    network/opensm/partitions.conf   OpenSM partitions (format: OpenSM's partition-config.txt):
                                     the Default partition (0x7fff) with every end port a limited
                                     member (the subnet manager and switches full), so IPoIB
                                     management still reaches the SM but two end ports cannot talk
                                     through it; one partition per tenant isolated by partition key,
                                     its HCA ports full members and no other port a member.

    network/vlan/<group>/                    per node group of a tenant isolated by VLAN, systemd-networkd
                                             files for each Ethernet/RoCE compute or storage interface
                                             (install into /etc/systemd/network/):
        10-clusterdef-<if>.network           the interface carries the tenant's VLAN and no address of
                                             its own (untagged traffic goes nowhere)
        10-clusterdef-<vlan if>.netdev       the VLAN interface (Kind=vlan, Id=<the tenant's VLAN id>)
        10-clusterdef-<vlan if>.network      brings it up with an IPv6 link-local address (a RoCE GID);
                                             site addressing is not in the definition
                                             (systemd.network(5), systemd.netdev(5))

Pure: the port GUIDs come from the resolved inventory (MAC inventory column 3 or `port_guids`)."""

from __future__ import annotations

from ... import tenancy
from ...resolve import Resolved


GUIDS_PER_LINE = 16  # a definition line stays under 512 characters


def partitions_conf(resolved: Resolved) -> str:
    d = resolved.definition
    out = [f"# OpenSM partitions of cluster {d.cluster.name} (set {resolved.set.name}); rendered by clusterdef, "
           "do not edit.\n",
           "# Load with: opensm -P partitions.conf (or PARTITION_CONFIG_FILE in opensm.conf).\n",
           "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;\n"]
    for tenant in tenancy.pkey_tenants(d):
        guids = [g for grp in tenancy.owned_groups(d, tenant)
                 for host in resolved.port_guids(grp).values() for g in host]
        out.append(f"# tenant {tenant}: {len(guids)} port(s) of node groups "
                   f"{', '.join(tenancy.owned_groups(d, tenant))}\n")
        # OpenSM reads the file in short line buffers: a line of a thousand GUIDs is cut mid-GUID
        # ("bad PortGUID") and OpenSM falls back to its default config, every port a full member of
        # one partition. So the ports go GUIDS_PER_LINE to a definition; definitions with the same
        # PKey are merged (partition-config.txt: "If PKey is repeated ... merged").
        head = f"{tenant}=0x{tenancy.pkey(d, tenant):04x}, ipoib : "
        for i in range(0, max(len(guids), 1), GUIDS_PER_LINE):
            out.append(head + ", ".join(f"{g}=full" for g in guids[i:i + GUIDS_PER_LINE]) + " ;\n")
    return "".join(out)


def vlan_name(iface: str, vid: int, index: int) -> str:
    """`<if>.<vid>` when it fits Linux's 15 characters, else `vlan<vid>.<index>` (unique per node)."""
    name = f"{iface}.{vid}"
    return name if len(name) <= 15 else f"vlan{vid}.{index}"


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
            for i, iface in enumerate(tenancy.vlan_interfaces(d, g)):
                v = vlan_name(iface, vid, i)
                base = f"network/vlan/{g}/10-clusterdef-"
                out[f"{base}{iface}.network"] = (
                    head + f"[Match]\nName={iface}\n\n[Link]\nRequiredForOnline=no\n\n"
                    f"[Network]\nVLAN={v}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n")
                out[f"{base}{v}.netdev"] = head + f"[NetDev]\nName={v}\nKind=vlan\n\n[VLAN]\nId={vid}\n"
                out[f"{base}{v}.network"] = (
                    head + f"[Match]\nName={v}\n\n[Link]\nRequiredForOnline=no\n\n"
                    "[Network]\nLinkLocalAddressing=ipv6\nIPv6AcceptRA=no\n")
    return out


def render(resolved: Resolved) -> dict[str, str]:
    tree = vlan_files(resolved)
    if tenancy.pkey_tenants(resolved.definition):
        tree["network/opensm/partitions.conf"] = partitions_conf(resolved)
    return tree
