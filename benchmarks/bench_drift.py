"""Drift at scale: 10,000 nodes' facts (one JSON file per node, as the gpu_facts role writes
them) read and compared with the validated set; prints wall time per phase.

    .venv/bin/python benchmarks/bench_drift.py [NODES]

Not a timed unit test: shared CI machines vary too much. The target is under 1 s for
10,000 nodes (read + compare + drain list + Prometheus text)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from clusterdef import drift
from clusterdef.validate.pipeline import validate_file

ROOT = Path(__file__).resolve().parents[1]


def main(n: int = 10_000) -> None:
    result = validate_file(ROOT / "clusters" / "estate.yaml", ROOT / "matrices", date(2026, 11, 30))
    assert result.ok, [f.message for f in result.errors]
    d = result.definition
    vs = result.matrix.sets[d.cluster.matrix]
    base = drift.facts_for(d, vs)
    facts = []
    for i in range(n):  # the estate has 4,096 nodes: beyond it, repeat hosts (they are compared all the same)
        f = json.loads(json.dumps(base[i % len(base)]))
        if i % 97 == 0:
            f["versions"]["driver"] = "580.95.05"
        facts.append(f)
    with tempfile.TemporaryDirectory() as tmp:
        for i, f in enumerate(facts):
            (Path(tmp) / f"{i:05d}-{f['host']}.json").write_text(json.dumps(f))
        t0 = time.perf_counter()
        read = drift.read_facts(tmp)
        t1 = time.perf_counter()
        report = drift.compare(d, vs, read)
        t2 = time.perf_counter()
        lines = drift.drain_lines(report)
        prom = drift.prometheus(report)
        t3 = time.perf_counter()
    print(f"nodes={n} files={len(read)} off_matrix={len(report.off_matrix)} drain_lines={len(lines)} "
          f"prom_bytes={len(prom)}")
    print(f"read {t1 - t0:.3f} s, compare {t2 - t1:.3f} s, outputs {t3 - t2:.3f} s, total {t3 - t0:.3f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
