#!/usr/bin/env python3
"""Benchmark clusterdef where users feel it: pre-commit (validate), pull request (plan), render at scale.

    .venv/bin/python benchmarks/bench_render.py              # table; exit 1 when a target is missed
    .venv/bin/python benchmarks/bench_render.py --no-fail --json /tmp/bench.json

One run prints:

* start-up, whole process: `validate clusters/lab.yaml` (what the pre-commit hook runs) and `render
  clusters/estate.yaml` (every target, to a fresh folder), beside the floors they stand on;
* plan, whole process: `plan --from OLD --to NEW -f markdown` between two sets of the generated 4,096-node
  estate (2025.10-r580 -> 2026.07-r580, the old builds kept as `images.*.published` as a real change
  has them): what a pull request's check runs; median wall and peak RSS;
* for each size (1024, 4096, 16384 nodes; scripts/gen_estate.py, 48 tenants), generated into a temporary
  folder: `python -m clusterdef validate|render` as real subprocesses, REPEATS times each (median wall
  seconds, peak RSS of that one child), and the same work in-process, imports and interpreter start-up
  excluded, split into parse, matrix, model, checks and render.

Targets (checked on the 4096-node estate, the size of clusters/estate.yaml): `clusterdef render` CLI
wall <= 1.0 s, peak RSS of validate and render <= 200 MB, and the render CLI wall grows at most 2.5x
from 1024 to 16384 nodes: the median ratio of --pairs paired runs (both sizes back to back, order
alternating). The start-up targets of the earlier quality issue (lab validate 0.15 s,
estate render 0.30 s) were withdrawn by issue 30 (they lie below the floor of the pydantic model):
those figures are printed, never failed on. The speed-up against the peer users would otherwise run
is benchmarks/bench_peer.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.dont_write_bytecode = True  # keep scripts/ free of __pycache__

from gen_estate import generate  # noqa: E402
from bytecode import compile_bytecode  # noqa: E402

SIZES = (1024, 4096, 16384)
TENANTS = 48
TODAY = "2026-11-30"
MATRICES = ROOT / "matrices"
TARGET_WALL_S = 1.0      # 4096 nodes: render CLI wall (validate + render in one command)
TARGET_RSS_MB = 200.0    # 4096 nodes: peak RSS of either command
TARGET_TARGET_S = 0.5    # 4096 nodes: the slurm and kubernetes targets each, in-process
TARGET_RATIO = 2.5       # render CLI wall, 16384 / 1024 nodes (issue 30)
# Withdrawn by issue 30 (below the floor of the pydantic model): printed beside the figures, never failed on.
TARGET_LAB_VALIDATE_S = 0.15   # `clusterdef validate clusters/lab.yaml`, whole process, median wall
TARGET_ESTATE_RENDER_S = 0.30  # `clusterdef render clusters/estate.yaml` (all targets), whole process, median wall
PLAN_NODES = 4096
PLAN_SETS = ("2025.10-r580", "2026.07-r580")  # old -> new: the repository's previous and current validated sets
IMAGE_VERSIONS = {"2025.10-r580": "2025.10.1", "2026.07-r580": "2026.07.1"}  # an image version belongs to one set
# What every verb stands on: the interpreter, then its libraries (`import pydantic` alone is lazy:
# BaseModel is what loads pydantic's core), then the definition's typed model, its classes built and
# its validator compiled by pydantic, which validate needs before it reads a line of the file.
FLOORS = {"python": "pass",
          "libraries": "from pydantic import BaseModel; import rich.console, ruamel.yaml, ClusterShell.NodeSet",
          "typed model": "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'; "
                         "import rich.console, ruamel.yaml, ClusterShell.NodeSet; "
                         "from clusterdef.model import Definition; from clusterdef.matrix.model import ValidatedSet; "
                         "Definition.model_rebuild(); ValidatedSet.model_rebuild()"}


def run_cpu(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Run a command once; (wall seconds, CPU seconds of the child: user + system from wait4)."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            out.seek(0)
            raise SystemExit(f"{' '.join(cmd)} failed: {out.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def bench_start(repeats: int, work: Path) -> dict:
    """Whole-process figures of the bundled examples beside the floors they stand on (median wall
    and median CPU of `repeats` runs; a fresh output folder per render, as a first render has)."""
    cases = {f"floor: {k}": [sys.executable, "-c", v] for k, v in FLOORS.items()}
    cases["validate lab"] = [sys.executable, "-m", "clusterdef", "validate", "clusters/lab.yaml"]
    out = {}
    for name, cmd in cases.items():
        runs = [run_cpu(cmd, ROOT) for _ in range(repeats)]
        out[name] = {"wall_s": statistics.median(w for w, _ in runs), "cpu_s": statistics.median(c for _, c in runs)}
    runs = [run_cpu([sys.executable, "-m", "clusterdef", "render", "clusters/estate.yaml", "-o",
                     str(work / f"estate-{i}")], ROOT) for i in range(repeats)]
    out["render estate"] = {"wall_s": statistics.median(w for w, _ in runs),
                            "cpu_s": statistics.median(c for _, c in runs)}
    return out


def _on_set(text: str, set_name: str) -> str:
    """The generated estate (on 2026.07-r580) moved to `set_name`: its matrix, its image versions, and for the
    older set the firmware it tracks (2025.10-r580 pins no BlueField-3 firmware), as tests/test_plan.py does."""
    text = text.replace(f"matrix: {PLAN_SETS[1]}", f"matrix: {set_name}", 1)
    text = text.replace('\n    version: "2026.07.1"\n', f'\n    version: "{IMAGE_VERSIONS[set_name]}"\n')
    if set_name == PLAN_SETS[0]:
        text = text.replace("firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7, bf3]",
                            "firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7]")
    return text


def plan_pair(work: Path) -> tuple[Path, Path]:
    """(old, new) definitions of the generated PLAN_NODES-node estate on PLAN_SETS; the new one keeps the old
    image builds on the boot server (`images.<image>.published`), as a change that reaches review has them."""
    import re

    from clusterdef.build import build_tree
    from clusterdef.plan.images import builds_of
    from clusterdef.validate.pipeline import validate_file

    folder = work / "plan"
    text = generate(PLAN_NODES, TENANTS, folder, "estate").read_text(encoding="utf-8")
    old = folder / "estate-old.yaml"
    old.write_text(_on_set(text, PLAN_SETS[0]), encoding="utf-8")
    result = validate_file(old, MATRICES, date.fromisoformat(TODAY))
    if not result.ok:
        raise SystemExit(f"{old}: {[f.code for f in result.errors]}")
    new_text = _on_set(text, PLAN_SETS[1])
    for name, b in builds_of(build_tree(result, ["images"])[0]).items():
        new_text, n = re.subn(rf'(\n  {re.escape(name)}:\n    version: "[^"\n]*"\n)',
                              lambda m, b=b: m.group(1) + f'    published: {{"{b.version}": {{set: {b.set}, '
                                                          f'digest: "{b.digest}"}}}}\n', new_text, count=1)
        if n != 1:
            raise SystemExit(f"no image {name} in the generated estate")
    new = folder / "estate-new.yaml"
    new.write_text(new_text, encoding="utf-8")
    return old, new


def bench_plan(repeats: int, work: Path) -> dict:
    """`clusterdef plan --from OLD --to NEW -f markdown` (the pull-request check), whole process, REPEATS runs."""
    old, new = plan_pair(work)
    walls, rss = [], []
    for _ in range(repeats):
        wall, peak, rc = run_cli(["plan", "--from", str(old), "--to", str(new), "-f", "markdown",
                                  "--matrices", str(MATRICES), "--today", TODAY], old.parent)
        if rc != 0:
            raise SystemExit(f"clusterdef plan failed (exit {rc})")
        walls.append(wall)
        rss.append(peak)
    return {"nodes": PLAN_NODES, "from": PLAN_SETS[0], "to": PLAN_SETS[1], "wall_s": statistics.median(walls),
            "walls_s": walls, "rss_mb": max(rss)}


def run_cli(args: list[str], cwd: Path) -> tuple[float, float, int]:
    """Run `python -m clusterdef ARGS` once; return (wall seconds, peak RSS in MB, exit code).

    Peak RSS: os.wait4() returns the resource usage of exactly the child it reaped, so its
    ru_maxrss is that process's own high-water mark (KiB on Linux). getrusage(RUSAGE_CHILDREN)
    would not do: its ru_maxrss is the maximum over *all* children reaped so far, a running
    maximum rather than a sum, so deltas between runs are meaningless. The CLI starts no
    grandchildren, so the child's own peak is the whole command's peak.
    """
    cmd = [sys.executable, "-m", "clusterdef", *args]
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen consistent
        if proc.returncode != 0:
            out.seek(0)
            sys.stderr.write(out.read().decode(errors="replace")[-4000:])
    return wall, usage.ru_maxrss / 1024, proc.returncode


def in_process(defn: Path, out_dir: Path) -> dict[str, float]:
    """The work of `validate` then `render`, timed per stage, with every import already done."""
    from clusterdef import __version__, hostlist
    from clusterdef.errors import Severity
    from clusterdef.matrix.load import load_matrix
    from clusterdef.model import Definition
    from clusterdef.render import TARGETS
    from clusterdef.resolve import resolve
    from clusterdef.source import load_file
    from clusterdef.validate.registry import Context, run_checks
    from clusterdef.writer import sha256, write_tree

    from clusterdef.render import yamlout

    # the lru_caches: a warm cache would hide from repeats the cost a single process pays
    for fn in [*vars(hostlist).values(), *vars(yamlout).values()]:
        if callable(getattr(fn, "cache_clear", None)):
            fn.cache_clear()
    t = {}
    t0 = time.perf_counter()
    source = load_file(defn)
    t1 = time.perf_counter()
    matrix, mfind = load_matrix(MATRICES)
    t2 = time.perf_counter()
    d = Definition.model_validate(source.data)
    t3 = time.perf_counter()
    findings = run_checks(Context(d, matrix, date.fromisoformat(TODAY), defn.parent))
    t4 = time.perf_counter()
    errors = [f.code for f in findings + mfind if f.severity is Severity.ERROR]  # warnings: as the CLI, rendered
    if errors:
        raise SystemExit(f"{defn}: unexpected errors: {errors}")
    resolved = resolve(d, matrix, defn.parent)
    tree = {}
    for name, render_target in TARGETS.items():  # render_all, one target at a time to time each
        ts = time.perf_counter()
        tree.update(render_target(resolved))
        t[f"target:{name}"] = time.perf_counter() - ts
    tree["definition.resolved.json"] = json.dumps({"definition": d.model_dump(mode="json"),
                                                   "set": resolved.set.model_dump(mode="json")},
                                                  indent=2, sort_keys=True) + "\n"
    write_tree(out_dir, tree, {"clusterdef": __version__, "cluster": d.cluster.name, "set": d.cluster.matrix,
                               "definition": {"file": str(defn), "sha256": sha256(source.text)},
                               "targets": sorted(TARGETS)})
    t5 = time.perf_counter()
    t.update(parse=t1 - t0, matrix=t2 - t1, model=t3 - t2, checks=t4 - t3, render=t5 - t4)
    t["validate"] = t4 - t0
    t["total"] = t5 - t0
    return t


def bench_size(nodes: int, repeats: int, work: Path) -> dict:
    folder = work / f"n{nodes}"
    defn = generate(nodes, TENANTS, folder, "estate").resolve()
    common = ["--matrices", str(MATRICES), "--today", TODAY]
    res: dict = {"nodes": nodes, "gpus": nodes * 8, "tenants": TENANTS,
                 "yaml_bytes": defn.stat().st_size}
    for verb, extra in (("validate", []), ("render", ["-o", str(folder / "out-cli")])):
        walls, rss = [], []
        for _ in range(repeats):
            wall, peak, rc = run_cli([verb, str(defn), *common, *extra], folder)
            if rc != 0:
                raise SystemExit(f"clusterdef {verb} failed on {nodes} nodes (exit {rc})")
            walls.append(wall)
            rss.append(peak)
        res[f"{verb}_wall_s"] = statistics.median(walls)
        res[f"{verb}_walls_s"] = walls
        res[f"{verb}_rss_mb"] = max(rss)
    stages = [in_process(defn, folder / "out-lib") for _ in range(repeats)]
    res["in_process_s"] = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
    return res


def bench_pairs(pairs: int, work: Path) -> dict:
    """The 16384/1024 render ratio from paired runs: each pair renders both sizes back to back (the order
    alternating from pair to pair, so a drift of the machine's load weighs on both), and the ratio is the
    median of the pairs' own ratios, not a ratio of medians taken minutes apart."""
    common = ["--matrices", str(MATRICES), "--today", TODAY]
    defs = {n: generate(n, TENANTS, work / f"pair{n}", "estate").resolve() for n in (1024, 16384)}
    ratios, walls = [], {1024: [], 16384: []}
    for i in range(pairs):
        for n in ((1024, 16384) if i % 2 == 0 else (16384, 1024)):
            wall, _, rc = run_cli(["render", str(defs[n]), *common, "-o", str(work / f"pair{n}" / "out")],
                                  work / f"pair{n}")
            if rc != 0:
                raise SystemExit(f"clusterdef render failed on {n} nodes (exit {rc})")
            walls[n].append(wall)
        ratios.append(walls[16384][-1] / walls[1024][-1])
    return {"pairs": pairs, "ratios": ratios, "ratio_median": statistics.median(ratios),
            "walls_1024_s": walls[1024], "walls_16384_s": walls[16384]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--no-fail", action="store_true", help="report only; exit 0 even when a target is missed")
    p.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement, median reported (default 3)")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="node counts (default 1024 4096 16384)")
    p.add_argument("--pairs", type=int, default=9, help="paired 1024/16384 render runs for the ratio (default 9)")
    a = p.parse_args(argv)

    compile_bytecode()  # as an installed wheel has it (bytecode.py)
    results = []
    with tempfile.TemporaryDirectory(prefix="clusterdef-bench-") as tmp:
        print("... start-up", file=sys.stderr, flush=True)
        start = bench_start(max(a.repeats, 5), Path(tmp))
        print(f"... plan {PLAN_SETS[0]} -> {PLAN_SETS[1]}, {PLAN_NODES} nodes", file=sys.stderr, flush=True)
        plan = bench_plan(a.repeats, Path(tmp))
        for n in a.sizes:
            print(f"... {n} nodes", file=sys.stderr, flush=True)
            results.append(bench_size(n, a.repeats, Path(tmp)))
        pairs = None
        if 1024 in a.sizes and 16384 in a.sizes and a.pairs > 0:
            print(f"... {a.pairs} paired renders, 1024 and 16384 nodes", file=sys.stderr, flush=True)
            pairs = bench_pairs(a.pairs, Path(tmp))

    hdr = (f"{'nodes':>6} {'GPUs':>6} | {'validate':>8} {'render':>8} {'rss MB':>7} | "
           f"{'parse':>6} {'matrix':>6} {'model':>6} {'checks':>7} {'render':>7} {'total':>7}")
    print(f"CLI: median wall s of {a.repeats} runs (python -m clusterdef, start-up included), max peak RSS; "
          f"in-process: median s, imports excluded")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        ip = r["in_process_s"]
        print(f"{r['nodes']:>6} {r['gpus']:>6} | {r['validate_wall_s']:>8.3f} {r['render_wall_s']:>8.3f} "
              f"{max(r['validate_rss_mb'], r['render_rss_mb']):>7.1f} | {ip['parse']:>6.3f} {ip['matrix']:>6.3f} "
              f"{ip['model']:>6.3f} {ip['checks']:>7.3f} {ip['render']:>7.3f} {ip['total']:>7.3f}")

    by_n = {r["nodes"]: r for r in results}
    failures = []
    summary: dict = {"start": start, "plan": plan}
    print(f"start-up, whole process (median of {max(a.repeats, 5)} runs): "
          + "; ".join(f"{k} {v['wall_s']:.3f} s wall, {v['cpu_s']:.3f} s CPU" for k, v in start.items()))
    print(f"(withdrawn targets, not checked: validate lab <= {TARGET_LAB_VALIDATE_S} s, "
          f"render estate <= {TARGET_ESTATE_RENDER_S} s)")
    print(f"plan {plan['from']} -> {plan['to']}, {plan['nodes']} nodes, -f markdown, whole process: "
          f"median wall {plan['wall_s']:.3f} s of {a.repeats}, peak RSS {plan['rss_mb']:.1f} MB")
    if 1024 in by_n and 16384 in by_n:
        medians = by_n[16384]["render_wall_s"] / by_n[1024]["render_wall_s"]
        ip_ratio = by_n[16384]["in_process_s"]["total"] / by_n[1024]["in_process_s"]["total"]
        summary.update(render_ratio_of_medians_16384_1024=medians, in_process_ratio_16384_1024=ip_ratio)
        if pairs:
            ratio = pairs["ratio_median"]
            summary.update(render_ratio_16384_1024=ratio, render_ratio_pairs=pairs)
            print(f"render CLI wall 16384/1024 nodes, median of {pairs['pairs']} paired runs: {ratio:.2f}x "
                  f"(target <= {TARGET_RATIO}; pairs {min(pairs['ratios']):.2f}-{max(pairs['ratios']):.2f}x); "
                  f"ratio of the medians above {medians:.2f}x; in-process validate+render: {ip_ratio:.2f}x")
            if ratio > TARGET_RATIO:
                failures.append(f"render wall ratio 16384/1024 (paired) = {ratio:.2f} > {TARGET_RATIO}")
    if 4096 in by_n:
        r = by_n[4096]
        wall = r["render_wall_s"]
        both = r["validate_wall_s"] + r["render_wall_s"]
        rss = max(r["validate_rss_mb"], r["render_rss_mb"])
        summary.update(wall_4096_s=wall, validate_plus_render_commands_4096_s=both, rss_4096_mb=rss)
        print(f"4096 nodes: render CLI wall (validates first) {wall:.3f} s (target <= {TARGET_WALL_S}); "
              f"separate validate + render commands {both:.3f} s; "
              f"peak RSS {rss:.1f} MB (target <= {TARGET_RSS_MB})")
        if wall > TARGET_WALL_S:
            failures.append(f"4096-node render wall {wall:.3f} s > {TARGET_WALL_S} s")
        if rss > TARGET_RSS_MB:
            failures.append(f"4096-node peak RSS {rss:.1f} MB > {TARGET_RSS_MB} MB")
    if 4096 in by_n:
        per_target = {k.split(":", 1)[1]: v for k, v in by_n[4096]["in_process_s"].items() if k.startswith("target:")}
        print("4096 nodes, in-process render time per target (ms): "
              + ", ".join(f"{k} {v * 1000:.1f}" for k, v in per_target.items()))
        summary.update(target_ms_4096={k: v * 1000 for k, v in per_target.items()})
        for name in ("slurm", "kubernetes"):  # issue targets: each under 0.5 s on the large example
            if per_target.get(name, 0) > TARGET_TARGET_S:
                failures.append(f"4096-node {name} target render {per_target[name]:.3f} s > {TARGET_TARGET_S} s")
    for f in failures:
        print(f"MISSED: {f}")

    if a.json:
        Path(a.json).write_text(json.dumps({
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
            "repeats": a.repeats, "results": results, "summary": summary,
            "targets": {"wall_4096_s": TARGET_WALL_S, "rss_4096_mb": TARGET_RSS_MB,
                        "render_ratio_16384_1024": TARGET_RATIO},
            "withdrawn_targets": {"validate_lab_s": TARGET_LAB_VALIDATE_S, "render_estate_s": TARGET_ESTATE_RENDER_S},
            "missed": failures}, indent=2) + "\n", encoding="utf-8")
    return 1 if failures and not a.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
