"""The plan's duration estimate and capacity over time: the rollout's stages laid end to end (apply runs them
one at a time), each with the minutes `upgrade.timing` and `upgrade.drain` give it and the GPU nodes it holds out
of service, and a Mermaid xychart of the nodes in service over time that GitHub renders in the plan comment.

A wave (or canary) takes drain + move + gates: the drain is `drain.timeout_minutes` (the most apply waits for the
jobs to end, so the estimate is an upper bound on it; benchmarks/bench_rollout.py replays a job load instead),
the move is a reboot (in place) or an image boot (stateless), the gates `timing.gates_minutes`. A rollback drill
moves back, runs the gates, and moves forward again. Cluster-wide stages and service hosts' waves take
`timing.step_minutes` and hold no GPU node out. Pure: no clock, no I/O."""

from __future__ import annotations

from .. import hostlist

HOLDS = ("canary", "rollback-drill", "wave")  # stages that take GPU nodes out of service


def stage_minutes(stage: dict, up) -> int:
    t = up.timing
    move = t.image_boot_minutes if stage.get("provisioning") == "stateless" else t.reboot_minutes
    if stage["kind"] == "wave" and stage.get("services"):
        return t.step_minutes
    if stage["kind"] in ("canary", "wave"):
        return up.drain.timeout_minutes + move + t.gates_minutes
    if stage["kind"] == "rollback-drill":
        return 2 * move + t.gates_minutes
    return t.step_minutes


def estimate(stages: list[dict], up, gpu_nodes: int) -> dict:
    """`minutes` in all, the `timing` assumed and a `timeline`: per stage its start and minutes (from 0) and the
    GPU nodes it holds out of service."""
    timeline, at = [], 0
    for st in stages:
        m = stage_minutes(st, up)
        down = st["nodes"] if st["kind"] in HOLDS and not st.get("services") else 0
        timeline.append({"stage": st["name"], "start": at, "minutes": m, "nodes_down": down})
        at += m
    lowest = gpu_nodes - max((x["nodes_down"] for x in timeline), default=0)
    return {"minutes": at, "gpu_nodes": gpu_nodes, "lowest_nodes": lowest,
            "timing": {**up.timing.model_dump(), "drain_minutes": up.drain.timeout_minutes},
            "timeline": timeline}


def duration(minutes: int) -> str:
    d, rest = divmod(int(minutes), 1440)
    h, m = divmod(rest, 60)
    return " ".join(p for p in (f"{d} d" if d else "", f"{h} h" if h else "", f"{m} min" if m or not (d or h)
                                                                               else "") if p)


def chart(est: dict, points: int = 24) -> list[str]:
    """Mermaid xychart-beta lines: GPU nodes in service over the estimate, `points` bins, each showing the
    lowest of its bin (a dip shorter than a bin still shows)."""
    total, n = est["minutes"], est["gpu_nodes"]
    if not total or not n:
        return []
    width = total / points
    low = []
    for i in range(points):
        a, b = i * width, (i + 1) * width
        down = max((x["nodes_down"] for x in est["timeline"] if x["start"] < b and x["start"] + x["minutes"] > a),
                   default=0)
        low.append(n - down)
    hours = [f"{(i * width) / 60:.1f}" for i in range(points)]
    return ["```mermaid", "xychart-beta",
            f'  title "GPU nodes in service, estimate {duration(total)}"',
            f'  x-axis "hours from the start" [{", ".join(hours)}]',
            f'  y-axis "nodes" {min(low) - (min(low) % 10) if min(low) > 10 else 0} --> {n}',
            f"  line [{', '.join(str(v) for v in low)}]", "```"]


def gpu_nodes(definition) -> int:
    from ..knowledge.services import gpu_groups

    return sum(len(hostlist.names(g.hosts)) for g in gpu_groups(definition).values())
