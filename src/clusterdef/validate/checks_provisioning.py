"""Provisioning: what the PXE and image targets need beyond the address checks of
checks_nodes.py (duplicate MACs/IPs and addresses outside the subnet live there, and a
group without `addressing` is a schema error)."""

from __future__ import annotations

import re
from typing import Iterable

from .. import hostlist
from ..errors import Finding, Path, error
from .registry import Context, check

# A serial console speed/parity/bits spec: what is left of `console=ttyS0,115200n8` after a YAML
# flow list split it at the comma.
_CONSOLE_TAIL = re.compile(r"^[0-9]{3,7}([noe][0-9]?r?)?$")
# Kernel arguments the PXE target writes itself for every node.
_RESERVED = re.compile(r"^(initrd|clusterdef\.[a-z_]+)=")


@check("provisioning")
def provisioning(ctx: Context) -> Iterable[Finding]:
    from ..knowledge.images import bases

    d = ctx.definition
    prov = d.network.provisioning
    known = bases()
    for name, img in d.images.items():
        dist = known.get(img.distribution, {})
        releases = dist.get("releases", {})
        if img.release not in releases:
            yield error("image-release-unknown", ("images", name, "release"),
                        f"image `{name}`: there is no base recipe for {img.distribution} `{img.release}`",
                        f"known {img.distribution} releases: {', '.join(sorted(releases))}")
        for i, argument in enumerate(img.kernel_cmdline):
            path = ("images", name, "kernel_cmdline", i)
            if i and _CONSOLE_TAIL.fullmatch(argument) and img.kernel_cmdline[i - 1].startswith("console="):
                yield error("image-cmdline-split", path,
                            f"image `{name}`: kernel argument `{argument}` is the tail of "
                            f"`{img.kernel_cmdline[i - 1]},{argument}`, split at the comma",
                            f'quote it in the YAML list: ["{img.kernel_cmdline[i - 1]},{argument}", ...]')
            elif _RESERVED.match(argument):
                yield error("image-cmdline-reserved", path,
                            f"image `{name}`: kernel argument `{argument}` is set by clusterdef for every node",
                            "remove it: the PXE target adds initrd=, clusterdef.image/set/group/server")

    if prov.gateway is not None and not (prov.subnet.network_address < prov.gateway < prov.subnet.broadcast_address):
        yield error("ip-outside-subnet", ("network", "provisioning", "gateway"),
                    f"gateway {prov.gateway} is outside the provisioning subnet {prov.subnet}",
                    f"nodes reach the gateway directly: use an address inside {prov.subnet}")

    discovering = [g for g, grp in d.nodes.items() if grp.addressing.mac.source == "discover"]
    for gname in discovering:
        if prov.dynamic_range is None:
            yield error("pxe-discover-without-range", ("nodes", gname, "addressing", "mac", "source"),
                        f"node group `{gname}` discovers its MACs, but the provisioning network has no dynamic range",
                        "add network.provisioning.dynamic_range so unknown nodes get an address to boot from")
    if len(discovering) > 1:
        yield error("pxe-discover-ambiguous", ("nodes", discovering[1], "addressing", "mac", "source"),
                    f"node groups {', '.join(f'`{g}`' for g in discovering)} all discover their MACs: "
                    "an unknown node cannot be told which group to boot",
                    "let one group discover and list or inventory the MACs of the others")


@check("images-boot")
def images_boot(ctx: Context) -> Iterable[Finding]:
    """Image identity and boot pointers: a published build never shares the current version; a
    host's boot pointer names a build the boot server keeps; a stateless group runs no role that
    installs packages."""
    from ..knowledge.roles import installs_packages, roles

    d = ctx.definition
    for name, img in d.images.items():
        for version, entry in img.published.items():
            if version == img.version:
                same = entry.set == d.cluster.matrix
                yield error("image-version-reused", ("images", name, "published", version),
                            f"image `{name}`: version {version} is the current build (set {d.cluster.matrix}) "
                            f"and is also listed as published for set {entry.set}"
                            + ("" if same else ": one image version would be two builds for two sets"),
                            f"an image version belongs to one set: give the current build a new version "
                            f"(images.{name}.version), or remove {version} from images.{name}.published"
                            if not same else f"remove {version} from images.{name}.published: the current build "
                            "is always published")
    known_roles = roles()
    for gname, g in d.nodes.items():
        image = d.images.get(g.image)
        members = set(hostlist.names(g.hosts)) if g.boot else set()  # only pointers are looked up
        for host, version in g.boot.items():
            where: Path = ("nodes", gname, "boot", host)
            if host not in members:
                yield error("boot-pointer-host", where, f"node group `{gname}`: boot pointer for `{host}`, "
                            f"which is not one of its hosts ({g.hosts})",
                            "point a host of this group, or move the pointer to the group that has the host")
            elif g.addressing.mac.source == "discover":
                yield error("boot-pointer-host", where, f"node group `{gname}`: boot pointer for `{host}`, but "
                            "the group discovers its MACs, and a pointer is found by the host's MAC",
                            "list the group's MACs (addressing.mac: {source: list, ...}) or use an inventory")
            elif image is not None and version != image.version and version not in image.published:
                kept = [image.version, *image.published]
                yield error("boot-pointer-unpublished", where,
                            f"node group `{gname}`: host `{host}` points at image `{g.image}` version {version}, "
                            "which the boot server does not keep",
                            f"point it at a published build ({', '.join(kept)}), or add {version} with its set "
                            f"and digest to images.{g.image}.published")
        for i, role in enumerate(g.roles):
            where = ("nodes", gname, "roles", i)
            if role not in known_roles:
                yield error("role-unknown", where, f"node group `{gname}`: there is no role `{role}`",
                            f"roles: {', '.join(sorted(known_roles))}")
            elif g.provisioning == "stateless" and installs_packages(role):
                yield error("stateless-apt-role", where,
                            f"node group `{gname}` is stateless, but role `{role}` installs packages with apt on "
                            "its hosts: they would be lost at the next reboot, and the node would run something "
                            f"other than its image `{g.image}`",
                            f"put the packages in image `{g.image}` (images.{g.image}.packages) and drop the "
                            "role, or make the group `provisioning: stateful`")
