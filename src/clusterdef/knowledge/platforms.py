"""What a hardware platform is (platforms.yaml): GPUs per node, NVSwitches in the node, NVLink scope.

The NVSwitch stack (Fabric Manager, NSCQ) and nodecheck's NVLink check follow from what the hardware
is, never from which firmware components a validated set happens to pin for the platform."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ruamel.yaml import YAML

DATA = Path(__file__).with_name("platforms.yaml")


@dataclass(frozen=True)
class Platform:
    name: str
    gpus: int
    nvswitch: bool
    nvlink: str
    nvlink_gen: int
    min_driver: str | None = None


@lru_cache(maxsize=1)
def table() -> dict[str, Platform]:
    raw = YAML(typ="safe").load(DATA.read_text(encoding="utf-8"))["platforms"]
    return {k: Platform(k, int(v["gpus"]), bool(v["nvswitch"]), str(v["nvlink"]), int(v["nvlink_gen"]),
                        str(v["min_driver"]) if v.get("min_driver") else None) for k, v in raw.items()}


def platform_for(name: str) -> Platform | None:
    return table().get(name)


def known_for(hardware) -> Platform | None:
    """The table's entry for a GPU node type, when it describes that node: the platform is in the table
    and the node has the platform's GPU count (an HGX H100 4-GPU board has no NVSwitch, the 8-GPU one has)."""
    p = platform_for(hardware.platform)
    return p if p is not None and hardware.gpu is not None and hardware.gpu.count == p.gpus else None


def has_nvswitch(hardware) -> bool:
    """The node type carries NVSwitches of its own: `gpu.nvswitch` where the definition states it, else
    the platform's entry (at the platform's GPU count); a node without GPUs, or one the table does not
    describe, has none (validation warns: `hardware-nvswitch-unknown`)."""
    if hardware.gpu is None:
        return False
    if hardware.gpu.nvswitch is not None:
        return hardware.gpu.nvswitch
    p = known_for(hardware)
    return p is not None and p.nvswitch


NVLSM_FROM_GEN = 5  # NVLink 5: fourth-generation NVSwitches, managed through NVLSM (platforms.yaml nvlink_gen)


def nvlink_gen(hardware) -> int | None:
    """The NVLink generation of a GPU node type: its platform's (at the platform's GPU count), else its GPU
    model's (knowledge/gpu_limits.yaml), else unknown."""
    from .gpu_limits import limits_for

    if hardware.gpu is None:
        return None
    p = known_for(hardware)
    if p is not None:
        return p.nvlink_gen
    lim = limits_for(hardware.gpu.model)
    return lim.nvlink_gen if lim is not None else None


def needs_nvlsm(hardware) -> bool:
    """The node carries fourth-generation NVSwitches (NVLink 5: HGX/DGX B200, B300) of its own, so NVIDIA's
    NVLink Subnet Manager runs beside Fabric Manager on it (platforms.yaml nvlink_gen). GB200/GB300 compute
    trays have no NVSwitch of their own (their NVLSM runs on the switch trays): none."""
    gen = nvlink_gen(hardware)
    return has_nvswitch(hardware) and gen is not None and gen >= NVLSM_FROM_GEN
