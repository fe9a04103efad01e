"""Observability: per-hardware alert thresholds against the GPU model's limits
(knowledge/gpu_limits.yaml), GPU models whose limits are unknown, and known models whose data file entry
leaves a figure null because the shared reference does not give it (B300)."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error, warning
from ..knowledge.gpu_limits import limits_for
from .registry import Context, check


@check("observability-thresholds")
def thresholds(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    base = ("observability", "hardware")
    for hname, t in d.observability.hardware.items():
        hw = d.hardware.get(hname)
        if hw is None:
            yield error("ref-hardware", base + (hname,),
                        f"observability thresholds for hardware `{hname}`, which is not defined",
                        f"use one of: {', '.join(d.hardware)}")
            continue
        if hw.gpu is None:
            yield error("alert-threshold-no-gpu", base + (hname,),
                        f"hardware `{hname}` has no GPU, so GPU alert thresholds mean nothing",
                        "drop this entry")
            continue
        lim = limits_for(hw.gpu.model)
        if lim is None:
            continue
        if t.temperature_c is not None and lim.max_operating_c is not None and t.temperature_c > lim.max_operating_c:
            yield error("alert-threshold-out-of-range", base + (hname, "temperature_c"),
                        f"GPU temperature alert at {t.temperature_c} C is above the {hw.gpu.model}'s maximum "
                        f"operating temperature of {lim.max_operating_c} C: the GPU throttles before it fires",
                        f"set temperature_c to at most {lim.max_operating_c} (default: "
                        f"{lim.max_operating_c - d.observability.gpu_temperature_margin_c})")
        if t.power_w is not None and lim.tdp_w is not None and t.power_w > lim.tdp_w:
            yield error("alert-threshold-out-of-range", base + (hname, "power_w"),
                        f"GPU power alert at {t.power_w} W is above the {hw.gpu.model}'s TDP of {lim.tdp_w} W: "
                        "the power cap keeps the draw below it, so it never fires",
                        f"set power_w to at most {lim.tdp_w}")


@check("observability-gpu-limits")
def gpu_limits(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    for hname, hw in d.hardware.items():
        if hw.gpu is None:
            continue
        lim = limits_for(hw.gpu.model)
        if lim is not None:
            yield from _incomplete(d, hname, hw, lim)
            continue
        t = d.observability.hardware.get(hname)
        if t and t.temperature_c and t.power_w:
            continue
        yield warning("gpu-limits-unknown", ("hardware", hname, "gpu", "model"),
                      f"no limits known for GPU model `{hw.gpu.model}`: its temperature and power alerts are "
                      "not rendered",
                      "add the model to src/clusterdef/knowledge/gpu_limits.yaml with a source, or set "
                      f"observability.hardware.{hname}.temperature_c and power_w")


# what is not rendered when a figure is unknown, and what the definition may set instead
_LOST = {"max_operating_c": ("maximum operating temperature", "the temperature alert", "temperature_c"),
         "tdp_w": ("TDP", "the power alert", "power_w"),
         "nvlink_links": ("NVLink link count", "nodecheck's NVLink link check and the link count in the NVLink "
                          "alerts' runbooks", None)}


def _incomplete(d, hname: str, hw, lim) -> Iterable[Finding]:
    """A known model whose entry leaves figures null (the reference lacks them): say which, and what is
    therefore not rendered; a threshold the definition sets stands in for the alert's figure."""
    t = d.observability.hardware.get(hname)

    def replaced(f: str) -> bool:
        over = _LOST[f][2]
        return bool(t is not None and over is not None and getattr(t, over))
    lost = [f for f in lim.unknown() if not replaced(f)]
    if not lost:
        return
    what = ", ".join(_LOST[f][0] for f in lost)
    sets = [f"observability.hardware.{hname}.{_LOST[f][2]}" for f in lost if _LOST[f][2]]
    yield warning("gpu-limits-incomplete", ("hardware", hname, "gpu", "model"),
                  f"GPU model `{hw.gpu.model}` ({lim.family}): {lim.missing or 'figures missing'}. Without its "
                  f"{what}, not rendered for hardware `{hname}`: {'; '.join(_LOST[f][1] for f in lost)}",
                  (f"set {' and '.join(sets)}" if sets else "nothing in the definition replaces it")
                  + f"; or add the figure with its source to src/clusterdef/knowledge/gpu_limits.yaml ({lim.family})")
