"""PXE target: a dnsmasq configuration (DHCP, TFTP for the first iPXE stage, HTTP chain
for iPXE clients by user class) and the iPXE scripts that pick each node's image.

Layout (all under `pxe/`):

    dnsmasq.conf            DHCP range, one dhcp-host per node with a known MAC, first stage
    ipxe/boot.ipxe          the entry script every node chains to; maps the boot NIC's MAC to its
                            node group with one label per host; a group's hosts first try their
                            own boot pointer, then fall back to the group's default
    ipxe/groups/<g>.ipxe    the group's default: kernel, initrd and command line of the image's
                            current build
    ipxe/images/<g>/<artefact>.ipxe
                            the same for every build the boot server keeps (current and
                            `images.<image>.published`): what a boot pointer chains to
    ipxe/hosts/host-<mac>.ipxe
                            a per-host boot pointer (MAC with '-', as iPXE's ${net0/mac:hexhyp}):
                            one `chain` to a build's script. Rendered for `nodes.<g>.boot`; the
                            canary, the waves and the rollback drill write theirs (host_pointer)
    published               the artefacts the boot server must hold, one per line

Per-group defaults keep the tree small (the estate has 4,096 nodes and 32 groups: one entry
script with a label per MAC, not 4,096 files); a host gets a file only while it is pointed
away from its group's default. The MAC-to-group map sits in the entry script rather than in
DHCP options so the chain works behind any DHCP server that hands out `ipxe/boot.ipxe`
(dnsmasq here, qemu's user network in the tests, a site's own DHCP). Pure: no disk, no network, no clock.
"""

from __future__ import annotations

from ... import hostlist
from ...resolve import Resolved
from ..images import ImageIdentity, identities, published_identity
from ..network import storage_addressed
from ...quoting import Quoted, guarded_env, plain_all, word

_env = guarded_env("clusterdef.render.pxe")

# First-stage iPXE binaries served over TFTP to firmware that is not iPXE yet
# (file names as shipped by Debian's `ipxe` package in /usr/lib/ipxe/).
FIRST_STAGE = {"bios": "undionly.kpxe", "efi64": "ipxe.efi"}
# DHCP option 93 (client system architecture, RFC 4578 / IANA registry): 0 = BIOS, 7 and 9 = x86-64 UEFI.
CLIENT_ARCH = {"bios": (0,), "efi64": (7, 9)}
# dnsmasq tag of each image architecture's UEFI firmware (amd64 keeps BIOS too); codes and binaries
# per architecture are data: render/images/architectures.yaml.
UEFI_TAG = {"amd64": "efi64", "arm64": "efi-arm64"}


def first_stages(resolved: Resolved) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
    """(tag -> first-stage binary, tag -> DHCP client architectures) for the architectures of the images
    the node groups boot: BIOS and x86-64 UEFI for amd64, ARM64 UEFI (11) for arm64."""
    from ..images import architectures

    d = resolved.definition
    used = sorted({d.images[g.image].architecture for g in d.nodes.values() if g.image in d.images} or {"amd64"})
    files: dict[str, str] = {}
    codes: dict[str, tuple[int, ...]] = {}
    for arch in used:
        if arch == "amd64":
            files["bios"], codes["bios"] = FIRST_STAGE["bios"], CLIENT_ARCH["bios"]
        a = architectures()[arch]
        files[UEFI_TAG[arch]], codes[UEFI_TAG[arch]] = a["first_stage"], tuple(a["client_arch"])
    return files, codes
# The one iPXE expansion clusterdef writes into a command line (the host name from DHCP option 12).
HOSTNAME_ARG = "systemd.hostname=${hostname}"


def server_url(resolved: Resolved) -> str:
    """Base URL of the provisioning HTTP server (the port only when it is not 80)."""
    prov = resolved.definition.network.provisioning
    return f"http://{prov.server}" + ("" if prov.http_port == 80 else f":{prov.http_port}")


def builds(resolved: Resolved, image: str, ids: dict[str, ImageIdentity] | None = None) -> dict[str, ImageIdentity]:
    """version -> identity of every build of `image` the boot server keeps: the current one and
    the published ones."""
    ids = identities(resolved) if ids is None else ids
    img = resolved.definition.images[image]
    out = {img.version: ids[image]}
    for version, entry in img.published.items():
        out.setdefault(version, published_identity(image, version, entry))
    return out


def kernel_cmdline(resolved: Resolved, group: str, build: ImageIdentity | None = None) -> str:
    """The exact kernel command line a node of `group` boots with (its image's current build, or
    `build`, an earlier one the boot server keeps).

    `initrd=` names the initrd for UEFI (the EFI stub loads it by that name; harmless on BIOS),
    then the image's own arguments (console, ...), then what the node needs to find its place:
    the build's artefact name, the set it was built for, node group and provisioning server."""
    d = resolved.definition
    g = d.nodes[group]
    img = d.images[g.image]
    build = build or identities(resolved)[g.image]
    art = build.artefact
    first = f"{art}.verify.initrd" if img.signing else f"{art}.initrd"  # a signed image: the verifier first
    # A stateless node's storage interface file matches its host name (network/storage/): PID 1 sets
    # it from the command line before networkd starts; iPXE expands ${hostname} from DHCP option 12
    # (dnsmasq's dhcp-host name).
    named = [HOSTNAME_ARG] if g.provisioning == "stateless" and storage_addressed(d, group) else []
    return " ".join([f"initrd={first}", *img.kernel_cmdline, *named, f"clusterdef.image={art}",
                     f"clusterdef.set={build.set}", f"clusterdef.group={group}",
                     f"clusterdef.server={server_url(resolved)}"])


def mac_file(mac: str) -> str:
    """The MAC as iPXE's `${net0/mac:hexhyp}` spells it (lower-case hex, '-')."""
    return mac.replace(":", "-")


def _mac_label(mac: str) -> str:
    return "mac-" + mac_file(mac)


def build_script(group: str, build: ImageIdentity) -> str:
    """Path (under pxe/) of the iPXE script that boots `build` for a node of `group`."""
    return f"ipxe/images/{group}/{build.artefact}.ipxe"


def pointer_path(mac: str) -> str:
    """Path (under pxe/) of a host's boot pointer."""
    return f"ipxe/hosts/host-{mac_file(mac)}.ipxe"


def host_pointer(resolved: Resolved, host: str, group: str, mac: str, build: ImageIdentity) -> str:
    """The boot pointer that sends `host` to `build` (one of the builds the boot server keeps)."""
    return _env.get_template("host.ipxe.j2").render({
        "host": host, "group": group, "mac": mac, "b": build, "cluster": resolved.definition.cluster.name,
        "url": server_url(resolved), "script": build_script(group, build)})


def _group_ctx(resolved: Resolved, gname: str, build: ImageIdentity, url: str) -> dict:
    g = resolved.definition.nodes[gname]
    return {"name": gname, "hosts": g.hosts, "count": len(hostlist.parse(g.hosts)), "image": g.image,
            "version": build.version, "build": build, "kernel": f"{url}/images/{build.artefact}.vmlinuz",
            "initrd": f"{url}/images/{build.artefact}.initrd", "cmdline": ipxe_cmdline(resolved, gname, build),
            "signed": resolved.definition.images[g.image].signing is not None,
            "verify": f"{url}/images/{build.artefact}.verify.initrd", "sums": f"{url}/images/{build.artefact}.SHA256SUMS"}


def ipxe_cmdline(resolved: Resolved, group: str, build: ImageIdentity) -> Quoted:
    """The command line for iPXE's `kernel`: every argument a plain token (word), and HOSTNAME_ARG, the
    only `${...}` iPXE is meant to expand."""
    return Quoted(" ".join(a if a == HOSTNAME_ARG else word(a, "iPXE")
                           for a in kernel_cmdline(resolved, group, build).split(" ")))


def dhcp_hosts(hosts) -> Quoted:
    """dnsmasq's fixed addresses, `dhcp-host=MAC,ADDRESS,NAME,infinite`, one line per node: built here, not
    by a loop in dnsmasq.conf.j2 (the template's per-node attribute look-ups and checks cost more than the
    line). Each line is held to the check the template's finalize makes of each value: the text around the
    values passes it, so a line passes only when its values do."""
    return Quoted("".join(line + "\n" for line in plain_all(
        [f"dhcp-host={n.mac},{n.ipv4},{n.name},infinite" for n in hosts])))


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    prov = d.network.provisioning
    url = server_url(resolved)
    ids = identities(resolved)
    groups, hosts = [], []
    for gname, g in d.nodes.items():
        nodes = list(resolved.nodes(gname))
        known = [n for n in nodes if n.mac]
        hosts.extend(known)
        groups.append({**_group_ctx(resolved, gname, ids[g.image], url),
                       "discover": g.addressing.mac.source == "discover", "macs": plain_all([_mac_label(n.mac) for n in known]),
                       "provisioning": g.provisioning})
    discover = [g for g in groups if g["discover"]]
    stages, codes = first_stages(resolved)
    ctx = {"cluster": d.cluster.name, "set": resolved.set.name, "prov": prov, "url": url, "groups": groups,
           "hosts": hosts, "dhcp_hosts": dhcp_hosts(hosts), "first_stage": stages, "client_arch": codes,
           "netmask": prov.subnet.netmask, "network": prov.subnet.network_address,
           "discover": discover[0] if len(discover) == 1 else None, "discover_many": discover,
           "management": d.network.management}
    tree = {
        "pxe/dnsmasq.conf": _env.get_template("dnsmasq.conf.j2").render(ctx),
        "pxe/ipxe/boot.ipxe": _env.get_template("boot.ipxe.j2").render(ctx),
    }
    group_tpl = _env.get_template("group.ipxe.j2")
    kept: dict[str, ImageIdentity] = {}
    for group_ctx in groups:
        gname = group_ctx["name"]
        tree[f"pxe/ipxe/groups/{gname}.ipxe"] = group_tpl.render({**ctx, "g": group_ctx, "default": True})
        gdef = d.nodes[gname]
        kept_builds = builds(resolved, gdef.image, ids)
        for build in kept_builds.values():
            kept[build.artefact] = build
            tree["pxe/" + build_script(gname, build)] = group_tpl.render(
                {**ctx, "g": _group_ctx(resolved, gname, build, url), "default": False})
        macs = resolved.macs.get(gname, {})
        for host, version in gdef.boot.items():
            if host in macs and version in kept_builds:  # validate reports the others (boot-pointer-*)
                tree["pxe/" + pointer_path(macs[host])] = host_pointer(resolved, host, gname, macs[host],
                                                                       kept_builds[version])
    tree["pxe/published"] = (
        f"# Artefacts the boot server of cluster {d.cluster.name} keeps under images/ (<artefact>.vmlinuz and\n"
        "# <artefact>.initrd): every image's current build and its published earlier builds. Never prune one listed here.\n"
        "# artefact image version set digest\n"
        + "".join(f"{b.artefact} {b.name} {b.version} {b.set} {b.digest}\n" for _, b in sorted(kept.items())))
    return tree
