#!/usr/bin/env python3
"""Paired runs of clusterdef against the peer users would otherwise run, for the 4,096-node estate.

    .venv/bin/python benchmarks/bench_peer.py                 # exit 1 when the speed-up is under 20x
    .venv/bin/python benchmarks/bench_peer.py --pairs 9 --no-fail --json /tmp/peer.json

A: `python -m clusterdef render clusters/estate.yaml` (4,096 nodes, every target) into a fresh folder.
B: the peer: `ansible-playbook` of the stackhpc openhpc role's "Template slurm.conf" task for 4,096 hosts
   (../shared/bench/peer-openhpc/: its README says how it is set up; nothing of the role is kept in this
   repository), its slurm.conf removed before each run so the task writes it ("changed").

Each pair runs A and B back to back, A first in even pairs and B first in odd ones, so that a change of
the machine's load between pairs touches both sides of a pair alike (the machine this runs on is shared);
one warm-up pair is discarded. Printed: each pair's wall times and ratio A/B, the median of the ratios,
and the speed-up 1 / median. Target: a speed-up of at least 20x (issue 30).

When the peer is not set up (no openhpc/ role folder, no inventory of 4,096 hosts, or no virtual
environment with ansible-playbook and community.general), it prints how to set it up and exits 0.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bytecode import compile_bytecode  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PEER = Path(os.environ.get("CLUSTERDEF_PEER_DIR", ROOT.parent / "shared" / "bench" / "peer-openhpc"))
HOSTS = 4096
TARGET_SPEEDUP = 20.0
DEFINITION = ROOT / "clusters" / "estate.yaml"


def peer_venv(peer: Path) -> Path:
    """The peer's virtual environment's bin/ (as run_bench.py: PEER_VENV_BIN, else ../venv/bin)."""
    return Path(os.environ.get("PEER_VENV_BIN", peer / ".." / "venv" / "bin")).resolve()


def missing(peer: Path, venv: Path) -> list[str]:
    """What the peer set-up lacks (empty when it is ready)."""
    out = []
    if not (peer / "openhpc").is_dir():
        out.append(f"{peer / 'openhpc'}/ (the stackhpc/ansible-role-openhpc role)")
    if not (peer / "roles" / "openhpc_slurmconf" / "tasks" / "main.yml").is_file():
        out.append(f"{peer / 'roles/openhpc_slurmconf/tasks/main.yml'} (the role's slurm.conf task)")
    if not (peer / "inventories" / str(HOSTS) / "hosts.yml").is_file():
        out.append(f"{peer / 'inventories' / str(HOSTS) / 'hosts.yml'} (gen_inventory.py {HOSTS})")
    if not (venv / "ansible-playbook").is_file():
        out.append(f"{venv / 'ansible-playbook'} (a virtual environment with ansible)")
    elif not glob.glob(str(venv.parent / "lib" / "python*" / "site-packages" / "ansible_collections" / "community"
                           / "general")):
        out.append(f"community.general in {venv.parent} (pip install ansible)")
    return out


def setup_help(peer: Path, venv: Path, lacks: list[str]) -> str:
    return "\n".join([
        f"the peer in {peer} is not set up; it lacks:", *(f"  - {m}" for m in lacks),
        f"set it up as {peer / 'README.md'} says (nothing of the role is kept in this repository):",
        f"  1. fetch stackhpc/ansible-role-openhpc (measured at 6ca0fe7) and extract it as {peer / 'openhpc'}/",
        f"  2. python3 -m venv {venv.parent} && {venv / 'pip'} install ansible jmespath",
        "  3. roles/openhpc_slurmconf/: symlinks defaults vars templates filter_plugins -> the role's folders, and",
        "     tasks/main.yml with only the role's 'Template slurm.conf' task, delegate_to: localhost, run_once: true",
        f"  4. python3 {peer / 'gen_inventory.py'} {HOSTS}",
        "(or point CLUSTERDEF_PEER_DIR and PEER_VENV_BIN at a set-up copy)",
    ])


def timed(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, int, str]:
    """(wall seconds, exit code, output tail) of one run."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, _ = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        return wall, os.waitstatus_to_exitcode(status), out.read().decode(errors="replace")[-4000:]


def run_a(work: Path, i: int) -> float:
    wall, rc, text = timed([sys.executable, "-m", "clusterdef", "render", str(DEFINITION), "-o",
                            str(work / f"estate-{i}")], ROOT)
    if rc != 0:
        raise SystemExit(f"clusterdef render failed (exit {rc}):\n{text}")
    return wall


def run_b(peer: Path, venv: Path) -> float:
    conf = peer / "out" / f"slurm.conf.{HOSTS}"
    conf.unlink(missing_ok=True)  # so the task writes it, as run_bench.py does
    env = dict(os.environ, ANSIBLE_CONFIG=str(peer / "ansible.cfg"))
    wall, rc, text = timed([str(venv / "ansible-playbook"), "-i", str(peer / "inventories" / str(HOSTS) / "hosts.yml"),
                            str(peer / "slurmconf.yml")], peer, env)
    if rc != 0 or "changed: [" not in text:
        raise SystemExit(f"the peer's playbook failed or wrote nothing (exit {rc}):\n{text}")
    return wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=5, help="timed pairs after one warm-up pair (default 5)")
    p.add_argument("--no-fail", action="store_true", help="report only; exit 0 even under the target")
    p.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    a = p.parse_args(argv)

    compile_bytecode()  # as an installed wheel has it (bytecode.py)
    venv = peer_venv(PEER)
    lacks = missing(PEER, venv)
    if lacks:
        print(setup_help(PEER, venv, lacks))
        print("peer not set up; skipped")
        return 0

    pairs = []
    with tempfile.TemporaryDirectory(prefix="clusterdef-peer-") as tmp:
        for i in range(a.pairs + 1):
            if i % 2 == 0:
                wa = run_a(Path(tmp), i)
                wb = run_b(PEER, venv)
            else:
                wb = run_b(PEER, venv)
                wa = run_a(Path(tmp), i)
            if i == 0:
                print(f"warm-up pair: A {wa:.3f} s, B {wb:.3f} s (discarded)", flush=True)
                continue
            pairs.append((wa, wb))
            print(f"pair {i} ({'AB' if i % 2 == 0 else 'BA'}): A {wa:.3f} s  B {wb:.3f} s  A/B {wa / wb:.4f}",
                  flush=True)
    ratio = statistics.median(wa / wb for wa, wb in pairs)
    speedup = 1 / ratio
    print(f"A: clusterdef render {DEFINITION.relative_to(ROOT)} (every target): "
          f"wall min {min(w for w, _ in pairs):.3f} median {statistics.median(w for w, _ in pairs):.3f} s")
    print(f"B: ansible-playbook openhpc slurm.conf, {HOSTS} hosts: wall min {min(w for _, w in pairs):.3f} "
          f"median {statistics.median(w for _, w in pairs):.3f} s")
    print(f"median A/B over {len(pairs)} pairs: {ratio:.4f}, speed-up {speedup:.1f}x (target >= {TARGET_SPEEDUP}x)")
    missed = speedup < TARGET_SPEEDUP
    if missed:
        print(f"MISSED: speed-up {speedup:.1f}x < {TARGET_SPEEDUP}x")
    if a.json:
        Path(a.json).write_text(json.dumps({"date": date.today().isoformat(), "cpus": os.cpu_count(),
                                            "pairs": pairs, "median_ratio": ratio, "speedup": speedup,
                                            "target_speedup": TARGET_SPEEDUP, "missed": missed}, indent=2) + "\n",
                                encoding="utf-8")
    return 1 if missed and not a.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
