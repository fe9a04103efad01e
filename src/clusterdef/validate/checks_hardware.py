"""What the hardware is against what the set pins: NVSwitches (Fabric Manager, NSCQ, the NVLink check)
follow from the hardware (gpu.nvswitch, else knowledge/platforms.yaml), and their firmware is checked
only where the set pins it and the hardware lists it."""

from __future__ import annotations

from typing import Iterable

from packaging.version import Version

from ..errors import Finding, Severity
from ..knowledge.images import operator_owns_driver
from ..knowledge.platforms import has_nvswitch, known_for, needs_nvlsm, platform_for, table
from .registry import Context, check


@check("hardware-nvswitch")
def hardware_nvswitch(ctx: Context) -> Iterable[Finding]:
    vs = ctx.chosen_set
    for hname, hw in ctx.definition.hardware.items():
        if hw.gpu is None:
            continue
        at = ("hardware", hname)
        nvswitch = has_nvswitch(hw)
        p = platform_for(hw.platform)
        if hw.gpu.nvswitch is None and known_for(hw) is None:
            what = (f"platform `{hw.platform}` has {p.gpus} GPUs per node, this hardware {hw.gpu.count}"
                    if p is not None else f"platform `{hw.platform}` is not one clusterdef knows")
            yield Finding("hardware-nvswitch-unknown", Severity.WARNING, (*at, "gpu"),
                          f"{what}: whether these nodes carry NVSwitches is unknown, so they get no Fabric "
                          "Manager, no NSCQ and no NVLink check",
                          f"state it: hardware.{hname}.gpu.nvswitch: true (HGX/DGX 8-GPU baseboards) or false; "
                          f"known platforms: {', '.join(sorted(table()))}")
        if "nvswitch" in hw.firmware and not nvswitch:
            i = hw.firmware.index("nvswitch")
            why = ("gpu.nvswitch is false" if hw.gpu.nvswitch is False else
                   f"platform `{hw.platform}` has no NVSwitch in the node (its NVLink switches are in the "
                   "rack's switch trays)" if p is not None and not p.nvswitch else
                   "nothing says the nodes carry NVSwitches (see hardware-nvswitch-unknown)")
            yield Finding("hardware-nvswitch-contradiction", Severity.ERROR, (*at, "firmware", i),
                          f"hardware `{hname}` lists `nvswitch` firmware but has no NVSwitch: {why}",
                          "remove `nvswitch` from firmware, or set gpu.nvswitch: true if the nodes carry NVSwitches "
                          "(Fabric Manager and NSCQ follow gpu.nvswitch, never the firmware list)")
        if nvswitch and "nvswitch" not in hw.firmware and vs is not None:
            pinned = vs.firmware.get(hw.platform, {}).get("nvswitch")
            if pinned is not None:
                yield Finding("hardware-nvswitch-firmware-unchecked", Severity.WARNING, (*at, "firmware"),
                              f"hardware `{hname}` has NVSwitches and set `{vs.name}` pins their firmware for platform "
                              f"`{hw.platform}` ({pinned}), but its firmware list leaves it out: first boot, node "
                              "admission and drift never check it",
                              f"add `nvswitch` to hardware.{hname}.firmware")
            else:
                yield Finding("hardware-nvswitch-firmware-unchecked", Severity.WARNING, (*at, "platform"),
                              f"set `{vs.name}` pins no NVSwitch firmware for platform `{hw.platform}`: the NVSwitch "
                              f"firmware of hardware `{hname}` is checked nowhere (Fabric Manager and NSCQ are "
                              "installed all the same, from the hardware)",
                              f"pin `nvswitch` for `{hw.platform}` in the set once NVIDIA's bundle contents for it are "
                              "known, or choose a set that pins it; until then read it on a node with `nvfwupd "
                              "show_version` and compare by hand")


@check("hardware-driver-floor")
def hardware_driver_floor(ctx: Context) -> Iterable[Finding]:
    """A platform's first supported driver (platforms.yaml min_driver) against the set's driver."""
    vs = ctx.chosen_set
    if vs is None:
        return
    for hname, hw in ctx.definition.hardware.items():
        p = platform_for(hw.platform)
        if hw.gpu is None or p is None or p.min_driver is None:
            continue
        if Version(vs.components.driver) < Version(p.min_driver):
            yield Finding("hardware-driver-floor", Severity.ERROR, ("hardware", hname, "platform"),
                          f"set `{vs.name}` runs driver {vs.components.driver}, older than {p.min_driver}, the first "
                          f"driver for platform `{hw.platform}`",
                          f"choose a set with driver {p.min_driver} or later (`clusterdef matrix list`)")


# shared/reference/compat/packages.yaml nvswitch_stack[0]: "nvlsm + infiniband-diags for >=570 (NVLink5)"
NVLSM_FIRST_BRANCH = 570


@check("hardware-nvlsm")
def hardware_nvlsm(ctx: Context) -> Iterable[Finding]:
    """Fourth-generation NVSwitch nodes (NVLink 5: HGX/DGX B200, B300; platforms.yaml nvlink_gen) run NVIDIA's
    NVLink Subnet Manager beside Fabric Manager. A set whose driver branch predates it cannot bring their NVLink
    fabric up (error); a set that pins no nvlsm version leaves the image to take whatever the repository
    offers at build time (warning, once per node type: no set pins one yet, the reference has no version).
    Where the GPU Operator owns the driver, its driver container starts NVLSM itself: nothing to say."""
    d, vs = ctx.definition, ctx.chosen_set
    if vs is None:
        return
    for hname, hw in d.hardware.items():
        if not needs_nvlsm(hw):
            continue
        images = {g.image for g in d.nodes.values() if g.hardware == hname and g.image in d.images}
        if not images or all(operator_owns_driver(d, i) for i in images):
            continue
        at = ("hardware", hname, "platform")
        branch = int(vs.components.driver.split(".")[0])
        if branch < NVLSM_FIRST_BRANCH:
            yield Finding("hardware-nvlsm-driver", Severity.ERROR, at,
                          f"hardware `{hname}` has fourth-generation NVSwitches (NVLink 5), which need NVIDIA's "
                          "NVLink Subnet Manager beside Fabric Manager, first shipped for driver branch "
                          f"R{NVLSM_FIRST_BRANCH}; "
                          f"set `{vs.name}` runs driver {vs.components.driver}",
                          f"choose a set with driver R{NVLSM_FIRST_BRANCH} or later (`clusterdef matrix list`)")
            continue
        yield Finding("nvlsm-unpinned", Severity.WARNING, at,
                      f"hardware `{hname}` has fourth-generation NVSwitches (NVLink 5): its image installs nvlsm and "
                      f"infiniband-diags unpinned, since set `{vs.name}` pins no nvlsm version (no set does yet: the "
                      "shared reference has none); a rebuild may take a newer nvlsm than the one tested",
                      "keep the image build's package list (mkosi's manifest) with the validated build and compare "
                      "`dpkg-query -W nvlsm` on the first node of each new build")
