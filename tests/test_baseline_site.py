"""A site's own baseline file (`upgrade.baseline`, issue 29 item 5): the plan's collective gates compare
with it instead of the target set's baseline in the shared matrices, each stage with the entry of its own
GPU model and fabric; `baseline compare` against it refuses a run of another model (baseline/compare.py);
a missing, malformed or unkeyed file is a located error."""

from __future__ import annotations

from pathlib import Path

from cli_runner import CliRunner
from ruamel.yaml import YAML

from clusterdef.cli import app
from clusterdef.plan import FROM_SIDE_IGNORED, load_side, make_plan
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY
from test_plan import CURRENT, OLD, variant

FIXTURES = Path(__file__).parent / "fixtures" / "nccl-tests"
H100 = "NVIDIA H100 80GB HBM3"
runner = CliRunner()


def site_file(tmp: Path, gpu_model: str | None = H100, fabric: str | None = "infiniband", name="site-baseline.yaml"):
    entry = {"set": CURRENT, "test": "all_reduce_perf", "node_group": "train", "nodes": 2, "gpus_per_node": 8,
             "busbw_gbps": {"float/sum": {"1048576": [25.0, 25.5], "8589934592": [350.0, 351.0]}}}
    if gpu_model:
        entry["gpu_model"] = gpu_model
    if fabric:
        entry["fabric"] = fabric
    with open(tmp / name, "w") as fh:
        YAML().dump(entry, fh)
    return tmp / name


def with_site_baseline(path: Path, rel: str = "site-baseline.yaml") -> Path:
    text = path.read_text().replace("  baseline_tolerance: {busbw_drop_pct: 5}\n",
                                    f"  baseline_tolerance: {{busbw_drop_pct: 5}}\n  baseline: {rel}\n", 1)
    assert f"baseline: {rel}" in text
    path.write_text(text)
    return path


def baseline_line(path: Path) -> int:
    """The line of the `upgrade.baseline` field with_site_baseline added (where its findings point)."""
    return path.read_text().splitlines().index("  baseline: site-baseline.yaml") + 1


def findings(path: Path) -> dict[str, tuple[str, int | None, str]]:
    r = validate_file(path, MATRICES, TODAY)
    return {f.code: (".".join(map(str, f.path)), f.line, f.message) for f in r.findings}


def test_the_plan_gates_compare_with_the_sites_file(tmp_path):
    site_file(tmp_path)
    old = load_side(variant(tmp_path, "lab", OLD, keep=None), MATRICES, TODAY, FROM_SIDE_IGNORED)
    new = load_side(with_site_baseline(variant(tmp_path, "lab", CURRENT, keep=old.tree)), MATRICES, TODAY,
                    {"matrix-candidate"})
    doc = make_plan(old, new).doc
    assert any("vs baseline (site-baseline.yaml (upgrade.baseline))" in g for g in doc["rollout"]["gates"])
    canary = next(s for s in doc["rollout"]["stages"] if s["kind"] == "canary")
    nccl = [g for g in canary["gates"] if g.startswith("NCCL")]
    assert nccl and "`clusterdef baseline compare LOG --baseline site-baseline.yaml --node-group train " \
                    "--fabric infiniband`" in nccl[0], nccl
    # the set's baseline (H200 over RoCE) is no longer what the canary is held to: no hardware warning
    assert not [w for w in doc["warnings"] if w["code"] == "baseline-hardware"]


def test_a_site_file_of_another_gpu_model_is_not_compared(tmp_path):
    site_file(tmp_path, gpu_model="NVIDIA B200")
    old = load_side(variant(tmp_path, "lab", OLD, keep=None), MATRICES, TODAY, FROM_SIDE_IGNORED)
    new = load_side(with_site_baseline(variant(tmp_path, "lab", CURRENT, keep=old.tree)), MATRICES, TODAY,
                    {"matrix-candidate"})
    doc = make_plan(old, new).doc
    warned = [w for w in doc["warnings"] if w["code"] == "baseline-hardware"]
    assert len(warned) == 1 and "NVIDIA B200" in warned[0]["message"]
    assert "-o site-baseline.yaml" in warned[0]["hint"]
    canary = next(s for s in doc["rollout"]["stages"] if s["kind"] == "canary")
    assert any("no baseline of the target set was taken on H100-SXM5-80GB over infiniband" in g
               for g in canary["gates"]), canary["gates"]


def test_compare_against_the_sites_file_refuses_another_model(tmp_path):
    """What the gate's command does with a run of another GPU model: compare.py's refusal, exit 1."""
    site = site_file(tmp_path)
    log = FIXTURES / "h200-2node-np2-g8-v2.18.3-ucxwarn.log"
    r = runner.invoke(app, ["baseline", "compare", str(log), "--baseline", str(site), "--node-group", "train",
                            "--fabric", "infiniband"])
    assert r.exit_code == 1, r.output
    assert f"baseline recorded on {H100}: baselines are per GPU model" in r.output


def test_a_missing_site_baseline_is_a_located_error(tmp_path):
    path = with_site_baseline(variant(tmp_path, "lab", CURRENT, keep=None))
    where, line, message = findings(path)["upgrade-baseline-invalid"]
    at = baseline_line(path)
    assert where == "upgrade.baseline" and line == at and "site-baseline.yaml" in message
    r = runner.invoke(app, ["validate", str(path), "--matrices", str(MATRICES)])
    assert r.exit_code == 2 and "upgrade-baseline-invalid" in r.output and f":{at}:" in r.output, r.output


def test_a_malformed_or_unkeyed_site_baseline_is_a_located_error(tmp_path):
    path = with_site_baseline(variant(tmp_path, "lab", CURRENT, keep=None))
    (tmp_path / "site-baseline.yaml").write_text("set: x\ntest: all_reduce_perf\nnodes: two\nbusbw_gbps: {}\n")
    where, _, message = findings(path)["upgrade-baseline-invalid"]
    assert where == "upgrade.baseline" and "`busbw_gbps`" in message
    site_file(tmp_path, gpu_model=None, fabric=None)
    where, line, message = findings(path)["upgrade-baseline-unkeyed"]
    assert (where, line) == ("upgrade.baseline", baseline_line(path)) and "gpu_model and fabric" in message
    site_file(tmp_path)
    assert not {"upgrade-baseline-invalid", "upgrade-baseline-unkeyed"} & set(findings(path))
