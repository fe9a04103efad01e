"""PXE target: a dnsmasq configuration (DHCP, TFTP for the first iPXE stage, HTTP chain
for iPXE clients by user class) and the iPXE scripts that pick each node's image.

Layout (all under `pxe/`):

    dnsmasq.conf            DHCP range, one dhcp-host per node with a known MAC, first stage
    ipxe/boot.ipxe          the entry script every node chains to; maps the boot NIC's MAC
                            to its node group with one label per host and chains the group script
    ipxe/groups/<g>.ipxe    kernel, initrd and kernel command line of one node group

Per-group scripts instead of per-host ones keep the tree small (the estate has 4,096 nodes
and 32 groups: one entry script with a label per MAC, not 4,096 files), and the MAC-to-group
map sits in the entry script rather than in DHCP options so the chain works behind any DHCP
server that hands out `ipxe/boot.ipxe` (dnsmasq here, qemu's user network in the tests, a
site's own DHCP). Pure: no disk, no network, no clock.
"""

from __future__ import annotations

from ...resolve import Resolved
from ..images import artefact
from ...quoting import guarded_env

_env = guarded_env("clusterdef.render.pxe")

# First-stage iPXE binaries served over TFTP to firmware that is not iPXE yet
# (file names as shipped by Debian's `ipxe` package in /usr/lib/ipxe/).
FIRST_STAGE = {"bios": "undionly.kpxe", "efi64": "ipxe.efi"}
# DHCP option 93 (client system architecture, RFC 4578 / IANA registry): 0 = BIOS, 7 and 9 = x86-64 UEFI.
CLIENT_ARCH = {"bios": (0,), "efi64": (7, 9)}


def server_url(resolved: Resolved) -> str:
    """Base URL of the provisioning HTTP server (the port only when it is not 80)."""
    prov = resolved.definition.network.provisioning
    return f"http://{prov.server}" + ("" if prov.http_port == 80 else f":{prov.http_port}")


def kernel_cmdline(resolved: Resolved, group: str) -> str:
    """The exact kernel command line a node of `group` boots with.

    `initrd=` names the initrd for UEFI (the EFI stub loads it by that name; harmless on BIOS),
    then the image's own arguments (console, ...), then what the node needs to find its place:
    image id with version, validated set, node group and provisioning server."""
    d = resolved.definition
    g = d.nodes[group]
    img = d.images[g.image]
    art = artefact(g.image, img)
    return " ".join([f"initrd={art}.initrd", *img.kernel_cmdline, f"clusterdef.image={art}",
                     f"clusterdef.set={resolved.set.name}", f"clusterdef.group={group}",
                     f"clusterdef.server={server_url(resolved)}"])


def _mac_label(mac: str) -> str:
    return "mac-" + mac.replace(":", "-")


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    prov = d.network.provisioning
    url = server_url(resolved)
    groups, hosts = [], []
    for gname, g in d.nodes.items():
        img = d.images[g.image]
        nodes = list(resolved.nodes(gname))
        known = [n for n in nodes if n.mac]
        hosts.extend(known)
        art = artefact(g.image, img)
        groups.append({
            "name": gname, "hosts": g.hosts, "count": len(nodes), "image": g.image, "version": img.version,
            "discover": g.addressing.mac.source == "discover", "macs": [_mac_label(n.mac) for n in known],
            "kernel": f"{url}/images/{art}.vmlinuz", "initrd": f"{url}/images/{art}.initrd",
            "cmdline": kernel_cmdline(resolved, gname),
        })
    discover = [g for g in groups if g["discover"]]
    ctx = {"cluster": d.cluster.name, "set": resolved.set.name, "prov": prov, "url": url, "groups": groups,
           "hosts": hosts, "first_stage": FIRST_STAGE, "client_arch": CLIENT_ARCH,
           "netmask": prov.subnet.netmask, "network": prov.subnet.network_address,
           "discover": discover[0] if len(discover) == 1 else None, "discover_many": discover}
    tree = {
        "pxe/dnsmasq.conf": _env.get_template("dnsmasq.conf.j2").render(ctx),
        "pxe/ipxe/boot.ipxe": _env.get_template("boot.ipxe.j2").render(ctx),
    }
    group_tpl = _env.get_template("group.ipxe.j2")
    for g in groups:
        tree[f"pxe/ipxe/groups/{g['name']}.ipxe"] = group_tpl.render({**ctx, "g": g})
    return tree
