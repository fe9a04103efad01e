"""NVLink domains per hardware platform (nvlink_domains.yaml): compute trays and GPUs per domain."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..source import safe_yaml

DATA = Path(__file__).with_name("nvlink_domains.yaml")


@dataclass(frozen=True)
class NvlinkDomain:
    platform: str
    trays: int
    gpus_per_tray: int
    gpus: int
    cpu_arch: str


@lru_cache(maxsize=1)
def table() -> dict[str, NvlinkDomain]:
    raw = safe_yaml().load(DATA.read_text())["platforms"]
    return {k: NvlinkDomain(k, int(v["trays"]), int(v["gpus_per_tray"]), int(v["gpus"]), str(v["cpu_arch"]))
            for k, v in raw.items()}


def domain_for(platform: str) -> NvlinkDomain | None:
    return table().get(platform)
