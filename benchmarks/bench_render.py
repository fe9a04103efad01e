#!/usr/bin/env python3
"""Benchmark `clusterdef validate` and `clusterdef render` on generated estates of 1024, 4096 and 16384 nodes.

    .venv/bin/python benchmarks/bench_render.py              # table; exit 1 when a target is missed
    .venv/bin/python benchmarks/bench_render.py --no-fail --json /tmp/bench.json

For each size the estate (scripts/gen_estate.py, 48 tenants) is generated into a temporary folder, then:

* CLI: `python -m clusterdef validate|render` as real subprocesses, REPEATS times each; median wall seconds
  and peak RSS (MB) of that one child process;
* in-process: the same work through the library functions, with imports and interpreter start-up
  excluded, split into parse (definition YAML), matrix (matrices/ YAML), model (pydantic), checks
  (semantic checks) and render (resolve + targets + resolved JSON + atomic write).

Targets (checked on the 4096-node estate, the size of clusters/estate.yaml):
  `clusterdef render` CLI wall (it validates, then renders every target) <= 1.0 s, peak RSS of
  validate and render <= 200 MB (the sum of separate validate and render runs is printed too),
  and the render CLI wall grows at most 2.0x from 1024 to 16384 nodes.
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

SIZES = (1024, 4096, 16384)
TENANTS = 48
TODAY = "2026-11-30"
MATRICES = ROOT / "matrices"
TARGET_WALL_S = 1.0      # 4096 nodes: render CLI wall (validate + render in one command)
TARGET_RSS_MB = 200.0    # 4096 nodes: peak RSS of either command
TARGET_TARGET_S = 0.5    # 4096 nodes: the slurm and kubernetes targets each, in-process
TARGET_RATIO = 2.0       # render CLI wall, 16384 / 1024 nodes
TARGET_LAB_VALIDATE_S = 0.15   # `clusterdef validate clusters/lab.yaml`, whole process, median wall
TARGET_ESTATE_RENDER_S = 0.30  # `clusterdef render clusters/estate.yaml` (all targets), whole process, median wall
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
    from clusterdef.matrix.load import load_matrix
    from clusterdef.model import Definition
    from clusterdef.render import TARGETS
    from clusterdef.resolve import resolve
    from clusterdef.source import load_file
    from clusterdef.validate.registry import Context, run_checks
    from clusterdef.writer import sha256, write_tree

    hostlist.parse.cache_clear()  # an lru_cache: a warm cache would hide the parsing cost of repeats
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
    if findings or mfind:
        raise SystemExit(f"{defn}: unexpected findings: {[f.code for f in findings + mfind]}")
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
    for verb, extra in (("validate", ["--strict"]), ("render", ["-o", str(folder / "out-cli")])):
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--no-fail", action="store_true", help="report only; exit 0 even when a target is missed")
    p.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement, median reported (default 3)")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="node counts (default 1024 4096 16384)")
    a = p.parse_args(argv)

    results = []
    with tempfile.TemporaryDirectory(prefix="clusterdef-bench-") as tmp:
        print("... start-up", file=sys.stderr, flush=True)
        start = bench_start(max(a.repeats, 5), Path(tmp))
        for n in a.sizes:
            print(f"... {n} nodes", file=sys.stderr, flush=True)
            results.append(bench_size(n, a.repeats, Path(tmp)))

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
    summary: dict = {"start": start}
    print(f"start-up, whole process (median of {max(a.repeats, 5)} runs): "
          + "; ".join(f"{k} {v['wall_s']:.3f} s wall, {v['cpu_s']:.3f} s CPU" for k, v in start.items()))
    for case, limit in (("validate lab", TARGET_LAB_VALIDATE_S), ("render estate", TARGET_ESTATE_RENDER_S)):
        if start[case]["wall_s"] > limit:
            failures.append(f"{case}: {start[case]['wall_s']:.3f} s > {limit} s")
    if 1024 in by_n and 16384 in by_n:
        ratio = by_n[16384]["render_wall_s"] / by_n[1024]["render_wall_s"]
        ip_ratio = by_n[16384]["in_process_s"]["total"] / by_n[1024]["in_process_s"]["total"]
        summary.update(render_ratio_16384_1024=ratio, in_process_ratio_16384_1024=ip_ratio)
        print(f"render CLI wall 16384/1024 nodes: {ratio:.2f}x (target <= {TARGET_RATIO}); "
              f"in-process validate+render: {ip_ratio:.2f}x")
        if ratio > TARGET_RATIO:
            failures.append(f"render wall ratio 16384/1024 = {ratio:.2f} > {TARGET_RATIO}")
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
                        "render_ratio_16384_1024": TARGET_RATIO, "validate_lab_s": TARGET_LAB_VALIDATE_S,
                        "render_estate_s": TARGET_ESTATE_RENDER_S},
            "missed": failures}, indent=2) + "\n", encoding="utf-8")
    return 1 if failures and not a.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
