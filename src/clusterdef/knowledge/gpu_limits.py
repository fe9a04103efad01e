"""Per-GPU-model limits (gpu_limits.yaml): TDP, maximum operating temperature, NVLink links per GPU."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..source import safe_yaml

DATA = Path(__file__).with_name("gpu_limits.yaml")


@dataclass(frozen=True)
class GpuLimits:
    family: str
    tdp_w: int
    max_operating_c: int
    nvlink_links: int


@lru_cache(maxsize=1)
def table() -> dict[str, GpuLimits]:
    raw = safe_yaml().load(DATA.read_text())["models"]
    return {k: GpuLimits(k, int(v["tdp_w"]), int(v["max_operating_c"]), int(v["nvlink_links"]))
            for k, v in raw.items()}


def limits_for(model: str) -> GpuLimits | None:
    """The limits of a GPU model name (e.g. H100-SXM5-80GB), matched by the longest family prefix."""
    m = model.upper()
    hits = [k for k in table() if m.startswith(k.upper())]
    return table()[max(hits, key=len)] if hits else None
