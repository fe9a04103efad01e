"""The estate's set change replayed against a simulated job load: rollout duration and the lowest capacity kept,
for the waves of before the capacity floors (wave_size alone: `max_unavailable_pct: 100`) and for the engine's
waves (the estate's floors, `max_unavailable_pct` 25). Prints both; a script, not a timed test.

    .venv/bin/python benchmarks/bench_rollout.py [--runs N] [--seed S]

The model (documented in benchmarks/README.md, "bench_rollout"):

* every GPU node runs jobs back to back; when its wave starts, Slurm's `reboot ASAP` drains it: it takes no new
  job and waits for the one it runs. The job's length L is drawn from a mix of log-normals (60% short, median
  30 min; 30% medium, median 4 h; 10% long, median 24 h; sigma 0.8; capped at the partition's 2-day limit), and
  the node is caught at a uniform point of it (a renewal process seen at a random time: the job running then is
  drawn length-biased, its remainder uniform in [0, L]);
* a wave waits for its slowest node, at most `drain.timeout_minutes` + `grace_seconds` (then the job is
  requeued), then reboots (`timing.reboot_minutes`) and runs its gates (`timing.gates_minutes`); the canary the
  same, the rollback drill two moves and the gates; waves run one after another, as `clusterdef apply` runs them;
* capacity is the GPU nodes that take new work: a node is out from the start of its wave's drain to the end of
  its gates. The lowest is taken over the whole rollout, for the estate and for its worst tenant and partition.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
import statistics
import sys
from datetime import date
from pathlib import Path

from clusterdef import hostlist
from clusterdef.knowledge import floors
from clusterdef.knowledge.services import gpu_groups
from clusterdef.plan import rollout
from clusterdef.validate.pipeline import validate_file

ROOT = Path(__file__).resolve().parents[1]
MIX = ((0.6, 30.0), (0.3, 240.0), (0.1, 1440.0))  # (share, median minutes)
SIGMA, CAP = 0.8, 2 * 1440.0


def job_length(rnd: random.Random) -> float:
    r, acc, pick = rnd.random(), 0.0, MIX[-1][1]
    for share, median in MIX:
        acc += share
        if r <= acc:
            pick = median
            break
    return min(CAP, rnd.lognormvariate(0.0, SIGMA) * pick)


class Residuals:
    """The remaining minutes of the job a node runs at a random instant: a length-biased pick from `sample`
    (bisect on the cumulative lengths), its remainder uniform."""

    def __init__(self, sample: list[float]):
        self.sample = sample
        self.cum = list(itertools.accumulate(sample))

    def draw(self, rnd: random.Random) -> float:
        i = bisect.bisect_left(self.cum, rnd.random() * self.cum[-1])
        return rnd.random() * self.sample[min(i, len(self.sample) - 1)]


def plan_waves(d, pct: int) -> list[list[str]]:
    """Canary, then the waves, as the plan makes them for every GPU node."""
    d = d.model_copy(update={"upgrade": d.upgrade.model_copy(update={"max_unavailable_pct": pct})})
    want = {g: set(hostlist.names(n.hosts)) for g, n in gpu_groups(d).items()}
    _, canary, _, _ = rollout.choose_canary(d, list(want))
    return [canary] + [w for w, _ in rollout.waves(d, want, set(canary))]


def replay(d, waves: list[list[str]], rnd: random.Random, jobs: Residuals) -> tuple[float, float]:
    """(rollout hours, node-hours out of service) of one run."""
    up, t = d.upgrade, d.upgrade.timing
    bound = up.drain.timeout_minutes + up.drain.grace_seconds / 60
    at = out = 0.0
    for i, wave in enumerate(waves):
        took = max(min(jobs.draw(rnd), bound) for _ in wave) + t.reboot_minutes + t.gates_minutes
        if i == 0 and up.rollback.exercise_on_canary:
            took += 2 * t.reboot_minutes + t.gates_minutes  # the rollback drill on the canary
        at += took
        out += took * len(wave)
    return at / 60, out / 60


def lowest(d, waves: list[list[str]]) -> tuple[int, int, dict, dict]:
    total = sum(len(hostlist.names(n.hosts)) for n in gpu_groups(d).values())
    low = floors.lowest(d, waves)
    tenant = min((x for x in low if x["kind"] == "tenant"), key=lambda x: x["lowest_pct"])
    part = min((x for x in low if x["kind"] in ("partition", "pool")), key=lambda x: x["lowest_pct"])
    return total, total - max(len(w) for w in waves), tenant, part


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    result = validate_file(ROOT / "clusters" / "estate.yaml", ROOT / "matrices", date(2026, 11, 30))
    if not result.ok:
        print("the estate does not validate", file=sys.stderr)
        return 1
    d = result.definition
    rnd = random.Random(args.seed)
    sample = [job_length(rnd) for _ in range(20000)]
    jobs = Residuals(sample)
    print(f"job lengths: median {statistics.median(sample):.0f} min, mean {statistics.fmean(sample):.0f} min, "
          f"p99 {sorted(sample)[int(0.99 * len(sample))]:.0f} min; drain bound "
          f"{d.upgrade.drain.timeout_minutes} min + {d.upgrade.drain.grace_seconds} s; reboot "
          f"{d.upgrade.timing.reboot_minutes} min, gates {d.upgrade.timing.gates_minutes} min; {args.runs} runs")
    print(f"{'waves':<34} {'waves':>5} {'largest':>7} {'hours p50':>9} {'p90':>6} {'node-h out':>10} "
          f"{'lowest GPU nodes':>17} {'worst tenant':>22} {'worst partition/pool':>26}")
    pct_now = d.upgrade.max_unavailable_pct
    for label, pct in (("before (wave_size only)", 100), (f"engine (max_unavailable_pct {pct_now})", pct_now)):
        waves = plan_waves(d, pct)
        runs = [replay(d, waves, random.Random(args.seed + r), jobs) for r in range(args.runs)]
        hours = sorted(h for h, _ in runs)
        total, low, tenant, part = lowest(d, waves)
        print(f"{label:<34} {len(waves):>5} {max(len(w) for w in waves):>7} {statistics.median(hours):>9.1f} "
              f"{hours[int(0.9 * len(hours))]:>6.1f} {statistics.median(o for _, o in runs):>10.0f} "
              f"{f'{low}/{total}':>17} "
              f"{tenant['name'] + ' ' + str(tenant['lowest_nodes']) + '/' + str(tenant['nodes']):>22} "
              f"{part['name'] + ' ' + str(part['lowest_nodes']) + '/' + str(part['nodes']):>26}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
