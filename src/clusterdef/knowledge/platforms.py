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
    min_driver: str | None = None


@lru_cache(maxsize=1)
def table() -> dict[str, Platform]:
    raw = YAML(typ="safe").load(DATA.read_text(encoding="utf-8"))["platforms"]
    return {k: Platform(k, int(v["gpus"]), bool(v["nvswitch"]), str(v["nvlink"]),
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
