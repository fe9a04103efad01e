"""Golden trees: every example in clusters/ renders exactly to tests/golden/<cluster>/.

Refresh after an intended change with `scripts/refresh-golden` and review the diff."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from clusterdef.writer import MANIFEST, manifest, write_tree
from conftest import CLUSTERS, MATRICES, TODAY

GOLDEN = Path(__file__).parent / "golden"
REFRESH = os.environ.get("CLUSTERDEF_REFRESH_GOLDEN") == "1"
EXAMPLES = sorted(p for p in CLUSTERS.glob("*.yaml"))


def rendered(example: Path) -> dict[str, str]:
    result = validate_file(example, MATRICES, TODAY)
    assert result.ok, [f.message for f in result.findings]
    tree, meta = build_tree(result)
    return {**tree, MANIFEST: manifest(tree, meta)}


def on_disk(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def readable_diff(want: dict[str, str], got: dict[str, str], limit: int = 80) -> str:
    out = []
    for rel in sorted(set(want) | set(got)):
        if want.get(rel) != got.get(rel):
            lines = list(difflib.unified_diff(want.get(rel, "").splitlines(), got.get(rel, "").splitlines(),
                                              f"golden/{rel}", f"rendered/{rel}", lineterm="", n=1))
            out.extend(lines[:limit] + ([f"... ({len(lines) - limit} more lines)"] if len(lines) > limit else []))
    return "\n".join(out)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_golden_tree(example):
    got = rendered(example)
    root = GOLDEN / example.stem
    if REFRESH:
        result = validate_file(example, MATRICES, TODAY)
        write_tree(root, *build_tree(result))
    want = on_disk(root) if root.is_dir() else {}
    assert want, f"no golden tree for {example.name}: run scripts/refresh-golden"
    assert want == got, "rendered tree differs from golden (scripts/refresh-golden to accept):\n" + readable_diff(want, got)


def test_gb200_golden_has_the_nvlink_domains():
    """The GB200 example's golden tree (clusters/gb200.yaml): one Slurm block per NVL72 rack with valid
    BlockSizes, a ComputeDomain for the Kubernetes tenant, the rail fabric's Kueue levels."""
    root = GOLDEN / "gb200"
    assert (root / "slurm" / "topology.conf").read_text().splitlines()[2:] == [
        "BlockName=rack01 Nodes=gb[001-018]", "BlockName=rack02 Nodes=gb[019-036]", "BlockSizes=18,36"]
    assert "TopologyPlugin=topology/block" in (root / "slurm" / "slurm.conf").read_text()
    assert "kind: ComputeDomain" in (root / "kubernetes" / "nvidia-dra" / "computedomains.yaml").read_text()
    assert "nodeLabel: clusterdef.dev/rack" in (root / "kubernetes" / "kueue" / "topologies.yaml").read_text()
