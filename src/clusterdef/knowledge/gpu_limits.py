"""Per-GPU-model limits (gpu_limits.yaml): TDP, maximum operating temperature, NVLink links per GPU and
NVLink generation. A figure the reference does not give is None (the data file says why: `missing`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..source import safe_yaml

DATA = Path(__file__).with_name("gpu_limits.yaml")


@dataclass(frozen=True)
class GpuLimits:
    family: str
    tdp_w: int | None
    max_operating_c: int | None
    nvlink_links: int | None
    nvlink_gen: int
    missing: str = ""

    def unknown(self) -> list[str]:
        """The figures the data file leaves null."""
        return [f for f in ("tdp_w", "max_operating_c", "nvlink_links") if getattr(self, f) is None]


@lru_cache(maxsize=1)
def table() -> dict[str, GpuLimits]:
    raw = safe_yaml().load(DATA.read_text())["models"]
    def num(v):
        return None if v is None else int(v)
    return {k: GpuLimits(k, num(v["tdp_w"]), num(v["max_operating_c"]), num(v["nvlink_links"]), int(v["nvlink_gen"]),
                         str(v.get("missing", ""))) for k, v in raw.items()}


def limits_for(model: str) -> GpuLimits | None:
    """The limits of a GPU model name (e.g. H100-SXM5-80GB), matched by the longest family prefix."""
    m = model.upper()
    hits = [k for k in table() if m.startswith(k.upper())]
    return table()[max(hits, key=len)] if hits else None
