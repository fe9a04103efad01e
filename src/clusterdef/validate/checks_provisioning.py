"""Provisioning: what the PXE and image targets need beyond the address checks of
checks_nodes.py (duplicate MACs/IPs and addresses outside the subnet live there, and a
group without `addressing` is a schema error)."""

from __future__ import annotations

import re
from typing import Iterable

from ..errors import Finding, error
from .registry import Context, check

# A serial console speed/parity/bits spec: what is left of `console=ttyS0,115200n8` after a YAML
# flow list split it at the comma.
_CONSOLE_TAIL = re.compile(r"^\d{3,7}([noe]\d?r?)?$")
# Kernel arguments the PXE target writes itself for every node.
_RESERVED = re.compile(r"^(initrd|clusterdef\.[a-z_]+)=")


@check("provisioning")
def provisioning(ctx: Context) -> Iterable[Finding]:
    from ..render.images import bases

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
            if i and _CONSOLE_TAIL.match(argument) and img.kernel_cmdline[i - 1].startswith("console="):
                yield error("image-cmdline-split", path,
                            f"image `{name}`: kernel argument `{argument}` is the tail of "
                            f"`{img.kernel_cmdline[i - 1]},{argument}`, split at the comma",
                            f'quote it in the YAML list: ["{img.kernel_cmdline[i - 1]},{argument}", ...]')
            elif _RESERVED.match(argument):
                yield error("image-cmdline-reserved", path,
                            f"image `{name}`: kernel argument `{argument}` is set by clusterdef for every node",
                            "remove it: the PXE target adds initrd=, clusterdef.image/set/group/server")

    if prov.gateway is not None and prov.gateway not in prov.subnet:
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
