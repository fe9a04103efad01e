"""Network target: the tenant isolation the fabric enforces.

    network/opensm/partitions.conf   OpenSM partitions (format: OpenSM's partition-config.txt):
                                     the Default partition (0x7fff) with every end port a limited
                                     member (the subnet manager and switches full), so IPoIB
                                     management still reaches the SM but two end ports cannot talk
                                     through it; one partition per tenant isolated by partition key,
                                     its HCA ports full members and no other port a member.

Pure: the port GUIDs come from the resolved inventory (MAC inventory column 3 or `port_guids`)."""

from __future__ import annotations

from ... import tenancy
from ...resolve import Resolved


def partitions_conf(resolved: Resolved) -> str:
    d = resolved.definition
    out = [f"# OpenSM partitions of cluster {d.cluster.name} (set {resolved.set.name}); rendered by clusterdef, "
           "do not edit.\n",
           "# Load with: opensm -P partitions.conf (or PARTITION_CONFIG_FILE in opensm.conf).\n",
           "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;\n"]
    for tenant in tenancy.pkey_tenants(d):
        guids = [g for grp in tenancy.owned_groups(d, tenant)
                 for host in resolved.port_guids(grp).values() for g in host]
        members = ", ".join(f"{g}=full" for g in guids)
        out.append(f"# tenant {tenant}: {len(guids)} port(s) of node groups "
                   f"{', '.join(tenancy.owned_groups(d, tenant))}\n")
        out.append(f"{tenant}=0x{tenancy.pkey(d, tenant):04x}, ipoib : {members} ;\n")
    return "".join(out)


def render(resolved: Resolved) -> dict[str, str]:
    if not tenancy.pkey_tenants(resolved.definition):
        return {}
    return {"network/opensm/partitions.conf": partitions_conf(resolved)}
