"""clusterdef plan between the repository's real sets, for both examples (golden Markdown),
the stepped Slurm path, the Kubernetes minor rule and the refusals.

Refresh the golden Markdown after an intended change with
`CLUSTERDEF_REFRESH_GOLDEN=1 .venv/bin/pytest tests/test_plan.py` and review the diff."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_runner import CliRunner

from clusterdef.cli import app
from clusterdef.matrix.load import load_matrix
from clusterdef.plan import FROM_SIDE_IGNORED, check_plan_file, load_side, make_plan
from clusterdef.plan.formats import to_json, to_markdown, to_text
from clusterdef.plan.transition import kubernetes_hop_problem, kubernetes_path, slurm_path
from conftest import CLUSTERS, MATRICES, TODAY, images_tree, keep_builds, on_set_images

GOLDEN = Path(__file__).parent / "golden_plan"
REFRESH = os.environ.get("CLUSTERDEF_REFRESH_GOLDEN") == "1"
OLD, CURRENT, CANDIDATE = "2025.10-r580", "2026.07-r580", "2026.11-r595-candidate"
runner = CliRunner()


def _text(example: str, set_name: str, rollback: str | None = None) -> str:
    text = (CLUSTERS / f"{example}.yaml").read_text()
    text = text.replace(f"matrix: {CURRENT}", f"matrix: {set_name}", 1)
    text = on_set_images(text, set_name)  # an image version belongs to one set
    if set_name in (OLD, "2024.06-test"):  # the older sets pin no BlueField-3 firmware: not tracked back then
        text = text.replace("firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7, bf3]",
                            "firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7]")
    if rollback:
        text = text.replace("rollback: {target: 2025.10-r580}", f"rollback: {{target: {rollback}}}", 1)
    return text


def variant(tmp: Path, example: str, set_name: str, rollback: str | None = None, keep="auto") -> Path:
    """The example definition running `set_name` (same folder layout, so MAC inventories resolve).
    `keep`: the rendered tree whose image builds the boot server keeps (`images.*.published`);
    "auto" keeps the builds of the example on OLD (the examples' rollback target)."""
    for csv in CLUSTERS.glob("*.csv"):
        if not (tmp / csv.name).exists():
            shutil.copyfile(csv, tmp / csv.name)
    text = _text(example, set_name, rollback)
    if keep == "auto" and set_name != OLD:
        base = tmp / f"{example}-{OLD}-kept.yaml"
        base.write_text(_text(example, OLD))
        keep = images_tree(base)
    if isinstance(keep, dict):
        text = keep_builds(text, keep)
    out = tmp / f"{example}-{set_name}.yaml"
    out.write_text(text)
    return out


def plan_between(tmp: Path, example: str, a: str, b: str, allow_candidate: bool = False, matrices=MATRICES):
    old = load_side(variant(tmp, example, a, keep=None), matrices, TODAY, FROM_SIDE_IGNORED)
    new = load_side(variant(tmp, example, b, rollback=a if b == CANDIDATE else None, keep=old.tree), matrices,
                    TODAY, {"matrix-candidate"})
    return make_plan(old, new, allow_candidate)


CASES = [("lab", OLD, CURRENT), ("lab", CURRENT, CANDIDATE), ("estate", OLD, CURRENT), ("estate", CURRENT, CANDIDATE)]


@pytest.mark.parametrize("example, a, b", CASES, ids=[f"{e}-{a}-to-{b}" for e, a, b in CASES])
def test_golden_markdown(tmp_path, example, a, b):
    p = plan_between(tmp_path, example, a, b, allow_candidate=True)
    assert not p.refused, p.refusals
    md = to_markdown(p.doc)
    assert len(md) < 60000, "the plan's comment stays under 60,000 characters (GitHub holds 65,536)"
    assert "ends here" not in md, "a bundled example's plan fits whole, without the cut note"
    golden = GOLDEN / f"{example}-{a}-to-{b}.md"
    if REFRESH:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(md)
    assert golden.is_file(), f"missing {golden}: run CLUSTERDEF_REFRESH_GOLDEN=1 pytest tests/test_plan.py"
    assert md == golden.read_text(), "plan Markdown changed: refresh the golden files and review the diff"


def test_lab_old_to_current_content(tmp_path):
    doc = plan_between(tmp_path, "lab", OLD, CURRENT).doc
    layers = {lc["component"]: lc for lc in doc["set_change"]["layers"]}
    assert layers["driver"]["from"] == "580.95.05" and layers["driver"]["to"] == "580.126.20"
    assert layers["driver"]["disruption"] == "drain + reboot" and layers["driver"]["nodes"] == 8
    # kubelet moves on the GPU nodes and on the control-plane node k8sctl01 (docs/services.md)
    assert layers["slurm"]["nodes"] == 6 and layers["kubernetes"]["nodes"] == 3
    assert layers["firmware.cx7"]["disruption"] == "reflash + power cycle"
    order = [lc["layer"] for lc in doc["set_change"]["layers"]]
    assert order == sorted(order, key=doc["rollout"]["layer_order"].index)
    ro = doc["rollout"]
    assert ro["canary"]["hosts"] == "gpu[001,003]"  # one node on each of leaf01 and leaf02
    canary = next(s for s in ro["stages"] if s["kind"] == "canary")
    assert canary["switches"] == ["leaf01", "leaf02"]
    kinds = [s["kind"] for s in ro["stages"]]
    # the image is built and published first; the canary group (train) is stateless, so its image
    # brings the new slurmd and the control plane goes before it; the Kubernetes GPU group (infer, whose
    # driver the image carries) gets its own canary and drill after it; the group defaults move last
    # the service hosts (their image is rebuilt for the set) come last, in waves of their own; Slurm moves from
    # 25.05 to 25.11, so the transition files (every running slurmd parses them) go right after the control
    # plane and the final files, with the rest of the changed files, once every node runs the new set
    # the tenant secure's two nodes go one at a time (upgrade.max_unavailable_pct: 50): one more wave
    assert kinds == ["image", "prepare", "control-plane", "deliver", "canary", "rollback-drill", "canary",
                     "rollback-drill", "wave", "wave", "wave", "wave", "wave", "wave", "boot-default", "deliver"]
    first, last = ro["stages"][3], ro["stages"][-1]
    assert first["name"] == "deliver the transition configuration" and first["delivery"][0]["transition"]
    assert set(first["delivery"][0]["files"]) == set(doc["slurm_transition"]["files"])
    assert last["name"] == "deliver configuration"
    assert "slurm/slurm.conf" in {f for st in last["delivery"] for f in st["files"]}
    assert {k: v for k, v in ro["rollback"].items() if k != "point"} == {"target": OLD, "exercised_on_canary": True}
    # the rollback point is the running definition and its rendered tree, as the plan's from side records them
    assert ro["rollback"]["point"] == {"file": doc["from"]["file"], "set": OLD,
                                       "definition_sha256": doc["from"]["definition_sha256"],
                                       "tree_sha256": doc["from"]["tree_sha256"]}
    assert any(g.startswith("smoke rdma/hca-ports: `/usr/bin/ibv_devinfo --list` exits 0") for g in ro["gates"])
    cp = ro["stages"][2]["steps"]
    assert cp.index("slurmdbd -> 25.11.7 (first; database conversion, dump taken in prepare)") < \
        cp.index("slurmctld -> 25.11.7")
    waves = [s for s in ro["stages"] if s["kind"] == "wave"]
    assert [w["hosts"] for w in waves] == ["gpu[002,004]", "kgpu02", "sgpu01", "sgpu02", "mgmt01,slurmctl01",
                                           "k8sctl01,slurmdbd01"]
    assert all(w["steps"][0].startswith("drain ") for w in waves[:4])
    # service hosts (docs/services.md): nothing to drain, their services' own checks, no GPU gate
    for w in waves[4:]:
        assert w["steps"][0].startswith("take ") and not any("NCCL" in g or "GPU" in g for g in w["gates"])
    assert waves[4]["gates"][0] == "slurmctld: `scontrol ping` reports the controllers UP"
    assert "down for this wave (no other host runs it): slurmctld" in waves[4]["steps"][0]
    assert any(g.startswith("etcd: ") for g in waves[5]["gates"])
    assert any("NCCL all_reduce_perf" in g and "5%" in g for g in ro["gates"])
    assert any("Slurm job" in g for g in ro["gates"]) and any("GPU pod" in g for g in ro["gates"])
    paths = {f["path"] for f in doc["files"]}
    assert {"versions.json", "definition.resolved.json"} <= paths
    assert all(f["diff"].startswith("--- a/") for f in doc["files"])
    assert doc["from"]["definition_sha256"] != doc["to"]["definition_sha256"]
    assert "[bold]plan[/] lab" in to_text(doc)
    json.loads(to_json(doc))


def test_files_whose_only_change_is_the_header_comment_fold_into_one_line(tmp_path):
    doc = plan_between(tmp_path, "lab", OLD, CURRENT).doc
    by_path = {f["path"]: f for f in doc["files"]}
    # cgroup.conf names the set only in its generated-by line; slurm.conf's body changes too
    cgroup = by_path["slurm/cgroup.conf"]
    assert cgroup["header_only"] and cgroup["diff"].count("\n-# ") == 1 and cgroup["added"] == 1
    assert not by_path["slurm/slurm.conf"]["header_only"] and not by_path["versions.json"]["header_only"]
    headers = sorted(p for p, f in by_path.items() if f["header_only"])
    md, text = to_markdown(doc), to_text(doc)
    line = next(ln for ln in md.splitlines() if "differ only in their header comment" in ln)
    assert line.startswith(f"{len(headers)} file(s) ") and "<code>slurm/cgroup.conf</code>" in line
    assert "<summary><code>slurm/cgroup.conf</code>" not in md  # no diff of its own
    assert "<summary><code>slurm/slurm.conf</code>" in md  # a small diff is shown before long ones
    assert "a/slurm/cgroup.conf" not in text and "a/slurm/slurm.conf" in text


def test_markdown_fits_a_pull_request_comment_for_any_change(tmp_path):
    doc = plan_between(tmp_path, "lab", OLD, CURRENT).doc
    assert len(to_markdown(doc)) < 60000
    huge = {**doc, "changes": doc["changes"] * 4000 or [{"path": "x", "dotted": "x", "old": "a", "new": "b",
                                                          "disruption": "live reconfigure", "nodes": 0}] * 4000}
    md = to_markdown(huge)
    assert len(md) <= 60000 and md.rstrip().endswith("the workflow's artifact).")
    assert md.count("```") % 2 == 0 and md.count("<details>") == md.count("</details>")


def test_a_cut_comment_ends_after_a_whole_block(tmp_path):
    """Past the limit, the comment ends where no code block and no <details> is open: the last diff is
    whole or absent, never an empty block that reads as "no change"."""
    doc = plan_between(tmp_path, "lab", OLD, CURRENT).doc
    big = "\n".join(f"+line {i} " + "x" * 60 for i in range(400))
    files = [{**doc["files"][0], "path": f"f{i:03d}.conf", "diff": big, "added": 400, "removed": 0,
              "header_only": False} for i in range(300)]
    md = to_markdown({**doc, "files": files, "changes": doc["changes"] * 300})
    body = md[:md.index("> [!NOTE]")].rstrip("\n")
    assert len(md) <= 60000
    assert body.count("```") % 2 == 0 and body.count("<details>") == body.count("</details>")
    assert body.endswith(("</details>", "```")) or not body.endswith("```diff")
    for block in body.split("```diff")[1:]:
        assert block.split("```")[0].strip(), "an empty diff block"


def test_rollout_of_many_waves_is_one_item_per_run_of_like_waves(tmp_path):
    doc = plan_between(tmp_path, "estate", OLD, CURRENT).doc
    md = to_markdown(doc)
    stages = doc["rollout"]["stages"]
    waves = [s for s in stages if s["kind"] == "wave"]
    assert len(waves) > 20
    items = [ln for ln in md.splitlines() if ln.startswith("1. **wave")]
    assert len(items) < len(waves) / 4, items
    # every wave's hosts are still named in the folded items (the JSON keeps one stage per wave)
    from clusterdef.hostlist import expand
    named = {h for ln in items for h in expand(ln.split("`")[1])}
    assert named == {h for w in waves for h in expand(w["hosts"])}


def test_header_only_needs_the_same_body():
    from clusterdef.plan.diff import header_only

    assert header_only(["# set a", "x = 1"], ["# set b", "x = 1"])
    assert header_only(["#!/bin/sh", "# set a", "true"], ["#!/bin/sh", "# set b", "true"])
    assert not header_only(["# set a", "x = 1"], ["# set b", "x = 2"])
    assert not header_only(["x = 1"], ["x = 2"])  # no header at all
    assert not header_only(["# set a", "x = 1"], ["# set a", "x = 1"])  # nothing differs


def test_plan_classes_match_what_each_change_does(tmp_path):
    doc = plan_between(tmp_path, "lab", OLD, CURRENT).doc
    layers = {lc["component"]: lc for lc in doc["set_change"]["layers"]}
    # MFT is a tools package (flashed with before the firmware, nothing to restart)
    assert (layers["mft"]["layer"], layers["mft"]["disruption"]) == ("firmware", "no runtime change")
    # DOCA-OFED is kernel modules: the driver layer, drain and reboot
    assert (layers["doca"]["layer"], layers["doca"]["disruption"]) == ("driver", "drain + reboot")
    # containerd restarts only where it runs: the Kubernetes nodes (the lab's Slurm images have none)
    assert layers["container_toolkit"]["by_class"] == {
        "daemon restart": {"nodes": 2, "hosts": "kgpu[01-02]"},
        "no runtime change": {"nodes": 6, "hosts": "gpu[001-004],sgpu[01-02]"}}
    # the lab's images carry the driver: a GPU Operator upgrade restarts its operands on the GPU nodes
    assert (layers["gpu_operator"]["disruption"], layers["gpu_operator"]["nodes"]) == ("daemon restart", 2)
    # each node once, at its worst (every lab GPU node reflashes): not once per driver, CUDA and NCCL
    assert doc["disruption"]["reflash + power cycle"]["nodes"] == 8
    # ... and the four service hosts reboot into their new image (no GPU layer reaches them)
    assert doc["disruption"]["drain + reboot"]["nodes"] == 4
    assert sum(v["nodes"] for v in doc["disruption"].values()) == 12
    assert doc["disruption"]["drain + reboot"]["changes"] == 6  # driver, doca, cuda, nccl, both images listed
    waves = {s["hosts"]: s["steps"] for s in doc["rollout"]["stages"] if s["kind"] == "wave"}
    toolkit = {h: next(x for x in st if x.startswith("layer container-toolkit")) for h, st in waves.items()
               if any(x.startswith("layer container-toolkit") for x in st)}
    assert "restart containerd" in toolkit["kgpu02"]
    assert "no containerd on these nodes" in toolkit["sgpu01"] and "no containerd" in toolkit["sgpu02"]
    md = to_markdown(doc)
    assert "| container-toolkit | container_toolkit |" in md and "daemon restart on 2; no runtime change on 6" in md


def test_a_gpu_operator_that_owns_the_driver_reloads_it(tmp_path):
    est = plan_between(tmp_path, "estate", OLD, CURRENT).doc
    el = {lc["component"]: lc for lc in est["set_change"]["layers"]}
    # the estate's GPU Operator owns the Kubernetes nodes' driver: its upgrade reloads it on each of them,
    # and the host driver layer is the Slurm nodes' only
    assert (el["gpu_operator"]["disruption"], el["gpu_operator"]["nodes"]) == ("drain + driver reload", 1024)
    assert el["driver"]["nodes"] == el["container_toolkit"]["nodes"] == 3072


def test_the_gate_warns_when_the_baseline_was_taken_on_other_hardware(tmp_path):
    from clusterdef.baseline import Baseline
    from clusterdef.plan.rollout import baseline_mismatch

    doc = plan_between(tmp_path, "lab", OLD, CURRENT).doc
    warned = [w for w in doc["warnings"] if w["code"] == "baseline-hardware"]
    assert len(warned) == 1 and "NVIDIA H200" in warned[0]["message"] and "fabric roce" in warned[0]["message"]
    assert "infiniband" in warned[0]["message"] and "--fabric KIND" in warned[0]["hint"]
    d = load_side(variant(tmp_path, "lab", CURRENT), MATRICES, TODAY).definition

    def base(model: str, fabric: str, group: str = "") -> Baseline:
        return Baseline("s", "all_reduce_perf", 2, 8, {}, node_group=group, gpu_model=model, fabric=fabric)

    assert baseline_mismatch(d, [base("NVIDIA H100 80GB HBM3", "infiniband")], "train") == []
    assert baseline_mismatch(d, [base("", "")], "train") == []  # not recorded: nothing to compare
    assert len(baseline_mismatch(d, [base("NVIDIA H200", "infiniband")], "train")) == 1
    assert len(baseline_mismatch(d, [base("NVIDIA H100 80GB HBM3", "ethernet")], "train")) == 1
    assert baseline_mismatch(d, [base("NVIDIA GH100", "infiniband")], "train") != []  # a word, not a substring
    # the group's own baseline wins over the cluster's
    both = [base("NVIDIA H200", "roce"), base("NVIDIA H100 80GB HBM3", "infiniband", "train")]
    assert baseline_mismatch(d, both, "train") == []


def test_a_recorded_baseline_names_its_gpu_and_fabric(tmp_path):
    from cli_runner import CliRunner as Runner

    from clusterdef.baseline import BaselineError, load_baselines

    log = Path(__file__).parent / "fixtures" / "nccl-tests" / "h200-2node-np2-g8-v2.18.3-ucxwarn.log"
    out = tmp_path / "b.yaml"
    r = Runner().invoke(app, ["baseline", "record", str(log), "--set", CURRENT, "--fabric", "infiniband",
                              "-o", str(out), "--matrices", str(MATRICES)])
    assert r.exit_code == 0, r.output
    (b,) = load_baselines(out)
    assert (b.gpu_model, b.fabric) == ("NVIDIA H200", "infiniband")
    r = Runner().invoke(app, ["baseline", "record", str(log), "--set", CURRENT, "--fabric", "token-ring",
                              "-o", str(out), "--matrices", str(MATRICES)])
    assert r.exit_code == 2 and "token-ring" in r.stderr
    out.write_text(out.read_text().replace("fabric: infiniband", "fabric: carrier-pigeon"))
    with pytest.raises(BaselineError, match="fabric"):
        load_baselines(out)


def test_estate_waves_follow_topology(tmp_path):
    from clusterdef import hostlist

    doc = plan_between(tmp_path, "estate", OLD, CURRENT).doc
    ro = doc["rollout"]
    assert ro["canary"]["nodes"] == 8
    assert len(next(s for s in ro["stages"] if s["kind"] == "canary")["switches"]) >= 2
    waves = [s for s in ro["stages"] if s["kind"] == "wave"]
    assert all(w["nodes"] <= 128 for w in waves)
    canaries = [s for s in ro["stages"] if s["kind"] == "canary"]  # Slurm's and the Kubernetes driver pool's
    assert [c["nodes"] for c in canaries] == [8, 8]
    # every GPU node once: the Slurm nodes' host driver, the Kubernetes nodes' through the GPU Operator
    layers = {lc["component"]: lc["nodes"] for lc in doc["set_change"]["layers"]}
    assert sum(w["nodes"] for w in waves) + 16 == layers["driver"] + layers["gpu_operator"] == 4096
    # su01 is also the whole debug partition (128 nodes): waves of at most 32 (25%), whole leaves of 16
    assert waves[0]["switches"] == ["leaf001", "leaf002"] and waves[0]["nodes"] == 24  # the canary took 8
    assert [w["nodes"] for w in waves[1:4]] == [32, 32, 32]
    # the dedicated tenant speech (su24, 128 nodes) is split over four waves, keeping 96 nodes at worst
    speech = [w for w in waves if set(hostlist.names(w["hosts"])) & {"gpu2945"} or
              set(hostlist.names(w["hosts"])) <= set(hostlist.names("gpu[2945-3072]"))]
    assert [w["nodes"] for w in speech] == [32, 32, 32, 32]
    floor = next(f for f in ro["floors"] if (f["kind"], f["name"]) == ("tenant", "speech"))
    assert (floor["nodes"], floor["lowest_nodes"], floor["lowest_pct"]) == (128, 96, 75.0)
    md = to_markdown(doc)
    assert "tenant speech 96/128 nodes (75%)" in md
    # the duration estimate: every stage end to end, and the chart GitHub renders
    est = ro["estimate"]
    assert est["minutes"] == sum(x["minutes"] for x in est["timeline"]) and len(est["timeline"]) == len(ro["stages"])
    assert est["lowest_nodes"] == 4096 - 128 and "Lowest in service: 3968 of 4096 GPU nodes." in md
    assert "```mermaid\nxychart-beta\n" in md


def test_candidate_is_canary_only_and_steps_kubernetes(tmp_path):
    doc = plan_between(tmp_path, "lab", CURRENT, CANDIDATE, allow_candidate=True).doc
    assert doc["canary_only"] and doc["rollout"]["waves_withheld"] == 6  # 4 of GPU nodes, 2 of service hosts
    assert not [s for s in doc["rollout"]["stages"] if s["kind"] == "wave"]
    # the stateless canary boots the candidate's slurmd: the control plane moves before it, with a warning
    cp = next(s for s in doc["rollout"]["stages"] if s["kind"] == "control-plane")
    assert cp["steps"][0].startswith("before the canary: its image gpu-node-2026.11.1-2026.11-r595-candidate-")
    assert [w["code"] for w in doc["warnings"]].count("canary-needs-control-plane") == 1
    assert doc["compatibility"]["apiserver_path"] == ["1.35", "1.36.0"]  # 1.34 -> 1.36 passes 1.35
    assert doc["compatibility"]["kubelet_path"] == ["1.36.0"]  # kubelets only after the API server


def test_unvalidated_and_retired_targets_are_refused(tmp_path):
    p = plan_between(tmp_path, "lab", CURRENT, CANDIDATE, allow_candidate=False)
    assert [r.code for r in p.refusals] == ["plan-target-candidate"]
    from clusterdef.plan import PlanInputError

    with pytest.raises(PlanInputError) as exc:  # a retired target is already a definition error
        plan_between(tmp_path, "lab", OLD, "2025.01-r550")
    assert "matrix-retired" in {f.code for f in exc.value.findings}


def test_downgrade_refused(tmp_path):
    p = plan_between(tmp_path, "lab", CURRENT, OLD)
    codes = {r.code for r in p.refusals}
    assert {"slurm-downgrade", "k8s-downgrade"} <= codes


def test_kubernetes_never_skips_a_minor(matrix):
    c = matrix.compat
    problem = kubernetes_hop_problem(c, "1.33.0", "1.35.0")
    assert problem.code == "k8s-skip-minor" and "1.34" in problem.hint
    assert kubernetes_hop_problem(c, "1.33.0", "1.34.2") is None
    api, kubelet, problems = kubernetes_path(c, "1.33.0", "1.35.0")
    assert api == ["1.34", "1.35.0"] and kubelet == ["1.35.0"] and not problems
    # kubelets may trail by at most 3 minors: a 5-minor jump moves them in two steps, never ahead
    api, kubelet, _ = kubernetes_path(c, "1.30.1", "1.35.0")
    assert api == ["1.31", "1.32", "1.33", "1.34", "1.35.0"] and kubelet == ["1.33", "1.35.0"]


def test_slurm_stepped_path_from_compat(matrix):
    c = matrix.compat
    hops, problems = slurm_path(c, "24.11.0", "26.05.3")  # 24.11 is in 26.05's compatible_prior
    assert [h.version for h in hops] == ["26.05.3"] and not problems
    hops, problems = slurm_path(c, "24.05.8", "26.05.3")  # outside the window: step through 25.11
    assert [h.version for h in hops] == ["25.11.7", "26.05.3"] and not problems
    assert hops[0].order == ("slurmdbd", "slurmctld", "slurmd")
    hops, _ = slurm_path(c, "23.02.8", "25.11.7")
    assert [h.version for h in hops] == ["24.11.7", "25.11.7"]
    _, problems = slurm_path(c, "25.11.7", "25.05.0")
    assert problems[0].code == "slurm-downgrade"


def test_stepped_slurm_in_a_plan(tmp_path):
    """A set on Slurm 24.05 -> 26.05 (24.05 is outside 26.05's window): the plan steps through 25.11."""
    m = tmp_path / "matrices"
    shutil.copytree(MATRICES, m)
    text = (m / "sets" / f"{OLD}.yaml").read_text().replace(f"name: {OLD}", "name: 2024.06-test")
    text = text.replace('slurm: "25.05.0"', 'slurm: "24.05.8"')
    (m / "sets" / "2024.06-test.yaml").write_text(text)
    assert not load_matrix(m)[1]
    p = plan_between(tmp_path, "lab", "2024.06-test", CANDIDATE, allow_candidate=True, matrices=m)
    assert [h["version"] for h in p.doc["compatibility"]["slurm_path"]] == ["25.11.7", "26.05.3"]
    assert any("stepped through 25.11.7 -> 26.05.3" in c for c in p.doc["compatibility"]["checks"])
    # with a validated target the control-plane stage runs slurmd through the intermediate hop
    text = (m / "sets" / f"{CANDIDATE}.yaml").read_text().replace("status: candidate", "status: validated")
    (m / "sets" / f"{CANDIDATE}.yaml").write_text(text)
    p = plan_between(tmp_path, "lab", "2024.06-test", CANDIDATE, matrices=m)
    cp = next(s for s in p.doc["rollout"]["stages"] if s["kind"] == "control-plane")["steps"]
    assert cp[0].startswith("before the canary")
    assert cp[1:5] == ["slurmdbd -> 25.11.7 (first; database conversion, dump taken in prepare)",
                      "slurmctld -> 25.11.7",
                      "slurmd -> 25.11.7 on every Slurm node (rolling restart, jobs keep running) before the next hop",
                      "slurmdbd -> 26.05.3 (first; database conversion, dump taken in prepare)"]


def test_model_changes_are_classified(tmp_path):
    old = variant(tmp_path, "lab", CURRENT)
    text = old.read_text()
    text = text.replace('version: "2026.07.1"', 'version: "2026.07.2"')
    text = text.replace("max_job_hours: 48,", "max_job_hours: 72,")  # the queue policy statement: MaxTime
    text = text.replace("nominal_gpus: 8, cohort: lab, workload_class: inference}",
                        "nominal_gpus: 4, cohort: lab, workload_class: inference}", 1)
    new = tmp_path / "lab-new.yaml"
    new.write_text(text)
    p = make_plan(load_side(old, MATRICES, TODAY), load_side(new, MATRICES, TODAY))
    changes = {c["path"]: c for c in p.doc["changes"]}
    assert changes["images.gpu-node.version"]["disruption"] == "drain + reboot"
    assert changes["images.gpu-node.version"]["nodes"] == 8
    assert changes["slurm.partitions.train.max_time"]["disruption"] == "live reconfigure"
    assert changes["service.queue_policy.training.max_job_hours"]["disruption"] == "no runtime change"
    assert changes["kubernetes.kueue.queues.vision-serve.nominal_gpus"]["disruption"] == "live reconfigure"
    assert p.doc["set_change"]["layers"] == [] and p.doc["compatibility"] is None
    assert p.doc["rollout"]["waves"] >= 1  # the image change still rolls out in waves


def test_stale_plan_file_detected(tmp_path):
    old, new = variant(tmp_path, "lab", OLD), variant(tmp_path, "lab", CURRENT)
    a, b = load_side(old, MATRICES, TODAY, FROM_SIDE_IGNORED), load_side(new, MATRICES, TODAY)
    doc = make_plan(a, b).doc
    assert check_plan_file(doc, a.text, b.text, a.tree, b.tree) == []
    new.write_text(new.read_text().replace("wave_size: 2", "wave_size: 1"))
    b2 = load_side(new, MATRICES, TODAY)
    reasons = check_plan_file(doc, a.text, b2.text, a.tree, b2.tree)
    assert "the to definition changed since the plan was made" in reasons


def test_cli_plan_formats_and_plan_file(tmp_path):
    old, new = variant(tmp_path, "lab", OLD), variant(tmp_path, "lab", CURRENT)
    pf = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--from", str(old), "--to", str(new), "--today", "2026-11-30",
                            "--format", "markdown", "--plan-file", str(pf)])
    assert r.exit_code == 0, r.output
    # every changed file is named: with its diff, or (past the Markdown diff budget) on one line
    assert "```mermaid" in r.stdout and "<code>versions.json</code> (changed" in r.stdout
    doc = json.loads(pf.read_text())
    assert doc["to"]["tree_sha256"] and doc["from"]["set"] == OLD
    r = runner.invoke(app, ["plan", "--from", str(old), "--to", str(new), "--today", "2026-11-30", "-f", "json"])
    assert json.loads(r.stdout)["cluster"] == "lab"


def test_cli_refusals_and_bad_input(tmp_path):
    cur, cand = variant(tmp_path, "lab", CURRENT), variant(tmp_path, "lab", CANDIDATE)
    r = runner.invoke(app, ["plan", "--from", str(cur), "--to", str(cand), "--today", "2026-11-30"])
    assert r.exit_code == 2 and "--allow-candidate" in r.output
    r = runner.invoke(app, ["plan", "--from", str(cur), "--to", str(cand), "--today", "2026-11-30",
                            "--allow-candidate"])
    assert r.exit_code == 0, r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(cur.read_text().replace("wave_size: 2", "wave_size: -1"))
    r = runner.invoke(app, ["plan", "--from", str(cur), "--to", str(bad), "--today", "2026-11-30"])
    assert r.exit_code == 2 and "bad.yaml:" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["plan", "--from", str(cur), "--base", "main", "--to", str(cur)])
    assert r.exit_code == 2 and "at most one of --from" in r.output
    r = runner.invoke(app, ["plan", "--to", str(cur), "--today", "2026-11-30"])  # no old side: day 0
    assert r.exit_code == 0 and "bring-up plan lab" in r.output, r.output


def test_cli_base_git_ref(tmp_path):
    git = shutil.which("git")
    if git is None:
        if os.environ.get("CI"):
            pytest.fail("git is missing in CI")
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "matrices").symlink_to(MATRICES)
    d = repo / "lab.yaml"
    d.write_text(variant(tmp_path, "lab", OLD).read_text())
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for cmd in (["init", "-q"], ["add", "lab.yaml"], ["commit", "-qm", "old"]):
        subprocess.run([git, *cmd], cwd=repo, check=True, env=env)
    d.write_text(variant(tmp_path, "lab", CURRENT).read_text())
    r = runner.invoke(app, ["plan", "--base", "HEAD", "--to", str(d), "--today", "2026-11-30", "-f", "json",
                            "--matrices", str(MATRICES)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["from"]["set"] == OLD and doc["from"]["file"] == "HEAD:lab.yaml" and doc["to"]["set"] == CURRENT
    r = runner.invoke(app, ["plan", "--base", "no-such-ref", "--to", str(d), "--matrices", str(MATRICES)])
    assert r.exit_code == 2 and "no-such-ref" in r.output


def _repo(tmp_path: Path, mac_file: str, link_to: Path | None = None) -> tuple[Path, Path, dict]:
    """A git repository holding clusters/lab.yaml (the old set) whose train group reads its MACs
    from `mac_file` (committed as a symbolic link to `link_to` if given); the working tree then
    moves to the current set."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "clusters" / "macs").mkdir(parents=True)
    (repo / "matrices").symlink_to(MATRICES)
    d = repo / "clusters" / "lab.yaml"
    text = variant(tmp_path, "lab", OLD).read_text()
    # train's list of MACs and port GUIDs (the shared InfiniBand partition lists its ports) becomes a file
    start = text.index('mac:\n        source: list\n        macs: ["52:54:00:20:00:11"')
    end = text.index("    placement:", start)
    d.write_text(text[:start] + f"mac: {{source: inventory, file: {json.dumps(mac_file)}}}\n" + text[end:])
    (repo / "clusters" / "macs" / "train.csv").write_text("host,mac,port_guids\n" + "".join(
        f"gpu00{i},52:54:00:20:00:1{i}," + ";".join(f"0x0002c90300b{i}000{p}" for p in range(1, 9)) + "\n"
        for i in range(1, 5)))
    if link_to:
        (d.parent / mac_file).symlink_to(link_to)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "old"]):
        subprocess.run([git, *cmd], cwd=repo, check=True, env=env)
    d.write_text(variant(tmp_path, "lab", CURRENT).read_text())
    return repo, d, env


def test_base_ref_is_never_a_git_option(tmp_path):
    repo, d, _ = _repo(tmp_path, "macs/train.csv")
    for ref in ("--output=" + str(tmp_path / "written"), "-h", "HEAD\n--output=x", ""):
        r = runner.invoke(app, ["plan", f"--base={ref}", "--to", str(d), "--matrices", str(MATRICES)])
        assert r.exit_code == 2 and "plan-git-ref" in r.output and "is not a git ref" in r.output, r.output
        assert "Traceback" not in r.output
    assert not (tmp_path / "written").exists() and not list(repo.rglob("x"))
    r = runner.invoke(app, ["plan", "--base", "HEAD~5", "--to", str(d), "--matrices", str(MATRICES)])
    assert r.exit_code == 2 and "HEAD~5^{commit}" in r.output


def test_base_mac_inventory_is_copied_from_the_definitions_folder(tmp_path):
    from clusterdef.plan import materialise_base

    repo, d, _ = _repo(tmp_path, "macs/train.csv")
    out = tmp_path / "work"
    out.mkdir()
    materialise_base("HEAD", d, out)
    assert (out / "macs" / "train.csv").read_text().startswith("host,mac,port_guids\ngpu001,")
    r = runner.invoke(app, ["plan", "--base", "HEAD", "--to", str(d), "--today", "2026-11-30", "-f", "json",
                            "--matrices", str(MATRICES)])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("mac_file,why", [
    ("../../outside.csv", "climbs out with '..'"),
    ("macs/../../outside.csv", "climbs out with '..'"),
    ("/etc/passwd", "is an absolute path"),
    ("link.csv", "is a symbolic link in git"),
    ("wt-link.csv", "leads out of"),
])
def test_base_mac_inventory_outside_the_definitions_folder_is_refused(tmp_path, mac_file, why):
    (tmp_path / "outside.csv").write_text("host,mac\nsecret,00:00:00:00:00:00\n")
    # link.csv is committed as a symbolic link pointing out of the folder
    repo, d, env = _repo(tmp_path, mac_file, tmp_path / "outside.csv" if mac_file == "link.csv" else None)
    if mac_file == "wt-link.csv":  # not in git: only the working tree's symbolic link
        (repo / "clusters" / "wt-link.csv").symlink_to(tmp_path / "outside.csv")
    r = runner.invoke(app, ["plan", "--base", "HEAD", "--to", str(d), "--matrices", str(MATRICES)])
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert "plan-base-mac-file" in out and why in out and "HEAD:clusters/lab.yaml:" in out, out
    assert "nodes.train.addressing.mac.file" in out and "Traceback" not in out
    assert "secret" not in out  # the file outside was never read into the plan


# --------------------------------------------------------------------------- Kubernetes GPU nodes: a canary first

NVD = "kubernetes/gpu-operator/nvidiadrivers.yaml"


def _build_of(tree: dict[str, str], image: str):
    from clusterdef.plan.images import builds_of

    return builds_of(tree)[image]


def _estate_sides(tmp: Path):
    old = load_side(variant(tmp, "estate", OLD, keep=None), MATRICES, TODAY, FROM_SIDE_IGNORED)
    new = load_side(variant(tmp, "estate", CURRENT, keep=old.tree), MATRICES, TODAY, {"matrix-candidate"})
    return old, new


def _nvidia_drivers(tree: dict[str, str]) -> dict[str, dict]:
    from ruamel.yaml import YAML

    return {o["metadata"]["name"]: o for o in YAML(typ="safe").load_all(tree[NVD]) if o}


def _node_labels(tree: dict[str, str]) -> dict[str, dict[str, str]]:
    """host -> its labels, as kubelet registers them (kubernetes/nodes/labels-taints.yaml)."""
    from ruamel.yaml import YAML

    from clusterdef import hostlist

    groups = YAML(typ="safe").load(tree["kubernetes/nodes/labels-taints.yaml"])["groups"]
    return {h: g["labels"] for g in groups.values() for h in hostlist.names(g["hosts"])}


def _drivers_run(objects: dict[str, dict], labels: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """host -> the driver versions of every NVIDIADriver whose nodeSelector selects it (the operator
    runs one driver per node: exactly one must match)."""
    return {h: [o["spec"]["version"] for o in objects.values()
                if all(lab.get(k) == v for k, v in o["spec"]["nodeSelector"].items())] for h, lab in labels.items()}


def test_kubernetes_driver_canary_before_the_rest(tmp_path):
    """The estate (GPU Operator owns the driver): the plan gives pool `default` a canary of its own
    before the control-plane stage moves the pool's NVIDIADriver, and labels its hosts back at the end.
    With the rendered objects and node labels: in every phase each Kubernetes GPU node is selected by
    exactly one NVIDIADriver (the canary's and the rest's selectors are disjoint and cover the pool),
    the canary runs the new driver while the rest stays on the old one, the drill puts the canary back
    on the old one, and after the control plane every node's object is the new one's (the held nodes take
    it in their wave: test_operator_owned_nodes_are_held_then_released_wave_by_wave). Slurm nodes are selected by
    none. The objects are strict-valid against the set's operator NVIDIADriver CRD."""
    from clusterdef import hostlist
    from test_kubernetes_render import REF, chart_tag, crd_validator, errors_of

    old, new = _estate_sides(tmp_path)
    doc = make_plan(old, new).doc
    stages = doc["rollout"]["stages"]
    names = [s["name"] for s in stages]
    kc, drill = stages[names.index("kubernetes default canary")], stages[names.index("kubernetes default rollback drill")]
    cp = names.index("control plane and cluster config")
    assert names.index("canary") < names.index("kubernetes default canary") < names.index(drill["name"]) < cp
    assert kc["kind"] == "canary" and drill["kind"] == "rollback-drill"
    assert kc["driver"] == drill["driver"] == {"pool": "default", "canary": "default.canary"}
    assert names[-2] == "driver pool default" and stages[-2]["kind"] == "driver-pool"
    assert names[-1] == "deliver configuration"  # the changed files once every node runs the new set
    d = new.definition
    k8s = {h for g in d.nodes.values() if g.control_plane == "kubernetes" and d.hardware[g.hardware].gpu
           for h in hostlist.names(g.hosts)}
    canary = set(hostlist.names(kc["hosts"]))
    assert len(canary) == d.upgrade.canary.nodes and canary < k8s and len(kc["switches"]) >= 2
    assert set(hostlist.names(stages[-2]["hosts"])) == canary == set(hostlist.names(drill["hosts"]))
    waved = {h for s in stages if s["kind"] == "wave" for h in hostlist.names(s["hosts"])}
    assert not waved & canary and k8s - canary <= waved
    old_v, new_v = old.result.matrix.sets[OLD].components.driver, new.result.matrix.sets[CURRENT].components.driver
    assert old_v != new_v
    assert f"NVIDIADriver default: driver {old_v} -> {new_v} (`pulumi up` of the new tree" in \
        " ".join(stages[cp]["steps"])

    before, after = _nvidia_drivers(old.tree), _nvidia_drivers(new.tree)
    assert set(after) == {"default", "default.canary"}
    tag = new.result.matrix.sets[CURRENT].components.gpu_operator  # the set's operator release
    # the CRD kept in the repository (tests/reference), so the test runs wherever the checkout lives
    validator = crd_validator(REF / "gpu-operator" / f"nvidia.com_nvidiadrivers-{chart_tag(tag)}.json")
    for obj in after.values():
        assert errors_of(validator, obj) == [], obj["metadata"]["name"]
    rendered = _node_labels(new.tree)
    relabelled = {h: {**lab, "clusterdef.dev/driver-pool": kc["driver"]["canary"]} if h in canary else lab
                  for h, lab in rendered.items()}
    # the canary stage: the new tree's default.canary applied, the pool's own object still the old tree's
    phases = {"canary": ({**before, "default.canary": after["default.canary"]}, relabelled),
              "drill": ({**before, "default.canary": after["default.canary"]}, rendered),
              "control plane": (after, relabelled), "driver pool": (after, rendered)}
    for phase, (objects, labels) in phases.items():
        run = _drivers_run(objects, labels)
        assert all(len(run[h]) == 1 for h in k8s), phase  # disjoint and covering
        assert not any(run[h] for h in set(run) - k8s), phase  # Slurm's nodes: no operator driver
        want = {h: [new_v if phase in ("control plane", "driver pool") or (phase == "canary" and h in canary)
                    else old_v] for h in k8s}
        assert {h: run[h] for h in k8s} == want, phase


def test_kubernetes_canary_apply_steps(tmp_path):
    """apply runs driver-pool.yml around the canary's own steps: the canary's NVIDIADriver and labels
    first, the drill back into the pool before rollback.yml and into the canary again before the
    reapply, and the canary hosts back into the pool last; objects and labels from the new tree."""
    from clusterdef import hostlist
    from clusterdef.apply.inventory import inventory_waves
    from clusterdef.apply.steps import Deliveries, DriverPools, steps_for_plan
    from conftest import ROOT

    old, new = _estate_sides(tmp_path)
    doc = make_plan(old, new).doc
    hosts_yml = new.tree["ansible/inventory/hosts.yml"]
    steps = steps_for_plan(doc, inventory_waves(hosts_yml), ROOT / "playbooks", pools=DriverPools(new),
                           deliveries=Deliveries(new, hosts_yml))
    mine = [s for s in steps if s.stage.startswith("kubernetes default") or s.stage == "driver pool default"]
    assert [(s.stage.replace("kubernetes default ", ""), s.action, s.playbook.name) for s in mine] == [
        ("canary", "driver", "driver-pool.yml"), ("canary", "upgrade", "upgrade.yml"),
        ("canary", "gates", "enforce-baseline.yml"),
        ("rollback drill", "driver-back", "driver-pool.yml"), ("rollback drill", "rollback", "rollback.yml"),
        ("rollback drill", "gates", "enforce-baseline.yml"),
        ("rollback drill", "driver-again", "driver-pool.yml"), ("rollback drill", "reapply", "upgrade.yml"),
        ("driver pool default", "driver-pool", "driver-pool.yml")]
    canary = sorted(hostlist.names(doc["rollout"]["stages"][[s["name"] for s in doc["rollout"]["stages"]].index(
        "kubernetes default canary")]["hosts"]))
    first, back, again, last = (s.extravars({}) for s in mine if s.action.startswith("driver"))
    assert [o["metadata"]["name"] for o in first["clusterdef_nvidia_drivers"]] == ["default.canary"]
    assert first["clusterdef_nvidia_drivers"][0] == _nvidia_drivers(new.tree)["default.canary"]
    assert sorted(x["node"] for x in first["clusterdef_driver_labels"]) == canary
    for v, pool in ((first, "default.canary"), (back, "default"), (again, "default.canary"), (last, "default")):
        assert {x["pool"] for x in v["clusterdef_driver_labels"]} == {pool}
    assert back["clusterdef_nvidia_drivers"] == again["clusterdef_nvidia_drivers"] == \
        last["clusterdef_nvidia_drivers"] == []
    assert all(s.limit is None for s in mine if s.action.startswith("driver"))


@pytest.mark.slow
def test_driver_pool_playbook_with_a_stand_in_kubectl(tmp_path):
    """playbooks/driver-pool.yml with real ansible-playbook (local connection) and a stand-in kubectl
    that records its argv and stdin: the NVIDIADriver goes to `kubectl apply -f -` as JSON, each node
    gets `kubectl label --overwrite node N clusterdef.dev/driver-pool=V`, the play waits for the
    operator's upgrade-done; a second run against a cluster that already has them changes nothing; a
    hostile node name is refused before kubectl runs."""
    import sys

    from conftest import ROOT

    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    log = tmp_path / "kubectl.log"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
same = os.path.exists({str(tmp_path / "applied")!r})
data = sys.stdin.read() if args[:3] == ["apply", "--filename", "-"] else ""
open({str(log)!r}, "a").write(json.dumps({{"argv": args, "stdin": data}}) + "\\n")
if args[0] == "apply":
    print("nvidiadriver.nvidia.com/" + json.loads(data)["metadata"]["name"] + (" unchanged" if same else " configured"))
elif args[0] == "label":
    print("node/" + args[3] + (" not labeled" if same else " labeled"))
elif args[0] == "get":
    print("upgrade-done", end="")
""")
    kubectl.chmod(0o755)
    obj = {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "default.canary"},
           "spec": {"driverType": "gpu", "version": "580.126.20", "nodeSelector": {
               "clusterdef.dev/driver-pool": "default.canary"}}}
    extra = {"ansible_python_interpreter": sys.executable, "clusterdef_kubectl": str(kubectl),
             "clusterdef_nvidia_drivers": [obj], "clusterdef_driver_labels": [
                 {"node": "gpu3073", "pool": "default.canary"}, {"node": "gpu3089", "pool": "default.canary"}]}
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0",
           "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}

    def run(vars_: dict):
        return subprocess.run([str(ansible), "-i", "localhost,", "-c", "local", str(ROOT / "playbooks/driver-pool.yml"),
                               "-e", json.dumps(vars_)], env=env, capture_output=True, text=True, timeout=300)

    r = run(extra)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    calls = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert calls[0]["argv"] == ["apply", "--filename", "-"] and json.loads(calls[0]["stdin"]) == obj
    assert [c["argv"] for c in calls[1:3]] == [
        ["label", "--overwrite", "node", "gpu3073", "clusterdef.dev/driver-pool=default.canary"],
        ["label", "--overwrite", "node", "gpu3089", "clusterdef.dev/driver-pool=default.canary"]]
    assert [c["argv"][:3] for c in calls[3:]] == [["get", "node", "gpu3073"], ["get", "node", "gpu3089"]]
    assert "changed=2" in r.stdout, r.stdout[-2000:]  # the apply task and the label task
    (tmp_path / "applied").write_text("")
    r = run(extra)
    assert r.returncode == 0 and "changed=0" in r.stdout, (r.stdout + r.stderr)[-3000:]
    log.unlink()
    r = run({**extra, "clusterdef_driver_labels": [{"node": "gpu1 --all", "pool": "default"}]})
    assert r.returncode != 0 and "refusing" in r.stdout and not log.exists(), r.stdout[-2000:]


def test_kubernetes_canary_group_carries_the_driver_pool(tmp_path):
    """When the plan's canary group is itself in the moving driver pool (upgrade.canary.node_group a
    Kubernetes group), that canary stage and its drill carry the pool's labels; no second canary."""
    from clusterdef import hostlist

    for name in (OLD, CURRENT):
        path = variant(tmp_path, "estate", name, keep=None)
        path.write_text(path.read_text().replace("node_group: su01}", "node_group: su25}", 1))
    old = load_side(tmp_path / f"estate-{OLD}.yaml", MATRICES, TODAY, FROM_SIDE_IGNORED)
    text = keep_builds((tmp_path / f"estate-{CURRENT}.yaml").read_text(), old.tree)
    (tmp_path / f"estate-{CURRENT}.yaml").write_text(text)
    new = load_side(tmp_path / f"estate-{CURRENT}.yaml", MATRICES, TODAY, {"matrix-candidate"})
    stages = make_plan(old, new).doc["rollout"]["stages"]
    names = [s["name"] for s in stages]
    assert not [n for n in names if n.startswith("kubernetes ")], names
    canary, drill = stages[names.index("canary")], stages[names.index("rollback drill")]
    assert canary["driver"] == drill["driver"] == {"pool": "default", "canary": "default.canary"}
    assert set(hostlist.names(canary["hosts"])) <= set(hostlist.names("gpu[3073-3200]"))
    assert canary["steps"][1].startswith("apply NVIDIADriver default.canary of the new tree")
    assert stages[-2]["name"] == "driver pool default" and stages[-2]["hosts"] == canary["hosts"]


def test_kubernetes_gpu_group_canary_where_the_image_owns_the_driver(tmp_path):
    """The lab's image carries the driver (no GPU Operator driver pool moves), so its Kubernetes GPU
    group `infer` gets a canary and drill of its own: after the control plane (its kubelet follows the
    API server), before every wave, on hosts no wave repeats, and upgrading kubelet itself. The rest of
    the group follows in a wave; apply runs upgrade.yml limited to the canary host. A canary-only plan
    keeps it, and a group with one node to change gets a warning instead of a canary."""
    from clusterdef import hostlist
    from clusterdef.apply.inventory import inventory_waves
    from clusterdef.apply.steps import BootPointers, Deliveries, steps_for_plan
    from conftest import ROOT

    p = plan_between(tmp_path, "lab", OLD, CURRENT)
    doc = p.doc
    stages = doc["rollout"]["stages"]
    names = [s["name"] for s in stages]
    kc, drill = stages[names.index("kubernetes infer canary")], stages[names.index("kubernetes infer rollback drill")]
    assert (kc["kind"], drill["kind"]) == ("canary", "rollback-drill") and "driver" not in kc
    first_wave = next(i for i, s in enumerate(stages) if s["kind"] == "wave")
    assert names.index("control plane and cluster config") < names.index(kc["name"]) < names.index(drill["name"]) \
        < first_wave
    infer = {"kgpu01", "kgpu02"}  # clusters/lab.yaml's infer group
    canary = set(hostlist.names(kc["hosts"]))
    waved = {h for s in stages if s["kind"] == "wave" for h in hostlist.names(s["hosts"])}
    assert canary and canary < infer and not canary & waved and infer - canary <= waved
    assert any(x.startswith("layer kubernetes: kubernetes 1.33.0 -> 1.34.2 (restart kubelet") for x in kc["steps"])
    assert doc["rollout"]["kubernetes_canaries"] == [{"by": "node-group", "name": "infer", "hosts": kc["hosts"],
                                                      "nodes": len(canary)}]
    assert f"group infer `{kc['hosts']}`" in to_markdown(doc)

    side = load_side(tmp_path / f"lab-{CURRENT}.yaml", MATRICES, TODAY, {"matrix-candidate"})
    hosts_yml = side.tree["ansible/inventory/hosts.yml"]
    steps = steps_for_plan(doc, inventory_waves(hosts_yml), ROOT / "playbooks", boot=BootPointers(side),
                           deliveries=Deliveries(side, hosts_yml))
    mine = [(s.action, s.playbook.name) for s in steps if s.stage == "kubernetes infer canary"]
    assert mine == [("upgrade", "upgrade.yml"), ("gates", "enforce-baseline.yml")]
    # the h100 pool's floor (50% of two nodes) puts kgpu01 in an inventory wave of its own: no --limit needed
    assert {(s.wave, s.limit) for s in steps if s.stage == "kubernetes infer canary" and s.action == "upgrade"} == {
        ("wave_002", None)} and kc["hosts"] == "kgpu01"

    (tmp_path / "cand").mkdir()
    cand = plan_between(tmp_path / "cand", "lab", CURRENT, CANDIDATE, allow_candidate=True).doc
    cnames = [s["name"] for s in cand["rollout"]["stages"]]
    assert "kubernetes infer canary" in cnames and not [s for s in cand["rollout"]["stages"] if s["kind"] == "wave"]

    from clusterdef.plan import stages as st

    scope = st.Scope(side.definition, CURRENT, [], [], None, {"infer": {"kgpu01"}}, {}, {}, set(), [])
    out = st.kubernetes_canaries(scope, st.Canary([], "", [], []))
    st.kubernetes_group_canaries(scope, st.Canary([], "", [], []), out, daemons=True)
    assert not out.group_stages and not out.group_hosts
    assert [(w.code, w.message) for w in out.warnings] == [
        ("kubernetes-canary", "Kubernetes GPU group infer has 1 node(s) to change: no canary before the rest")]

    # a stateless group whose new build brings a newer kubelet, in a plan without a control-plane stage
    d = side.definition
    stateless = d.model_copy(update={"nodes": {**d.nodes, "infer": d.nodes["infer"].model_copy(
        update={"provisioning": "stateless"})}})
    kube = {"component": "kubernetes", "layer": "kubernetes", "from": "1.34.2", "to": "1.36.0",
            "disruption": "daemon restart", "_hosts": ["kgpu01", "kgpu02"]}
    image = d.nodes["infer"].image
    for daemons, staged in ((False, False), (True, True)):
        scope = st.Scope(stateless, CURRENT, [kube], [], None, {"infer": {"kgpu01", "kgpu02"}}, {}, {}, {image}, [])
        out = st.kubernetes_canaries(scope, st.Canary([], "", [], []))
        if staged:  # after the control plane: the canary boots the new build by pointer (needs the build)
            scope.new_builds = {image: _build_of(side.tree, image)}
        st.kubernetes_group_canaries(scope, st.Canary([], "", [], []), out, daemons=daemons)
        assert bool(out.group_stages) is staged, daemons
        assert any("no control-plane stage" in w.message for w in out.warnings) is not staged


def _named_pool_lab(tmp: Path, set_name: str, keep: dict | None) -> Path:
    """The lab with the GPU Operator owning the driver and a named driver pool `fast` (groups infer and
    canary: three nodes) pinned to `set_name`, rolled back to OLD (a named target)."""
    from ruamel.yaml import YAML

    from clusterdef.plan.images import builds_of
    from lab_variants import driver_pool_canary

    d = driver_pool_canary(YAML(typ="safe", pure=True).load(_text("lab", set_name)))
    d["kubernetes"]["gpu_operator"]["driver_pools"] = {"fast": {"node_groups": ["infer", "canary"],
                                                                "matrix": set_name}}
    d["upgrade"]["rollback"] = {"target": OLD}
    for name, b in builds_of(keep or {}).items():
        d["images"][name]["published"] = {b.version: {"set": b.set, "digest": b.digest}}
    out = tmp / f"lab-pool-{set_name}.yaml"
    out.write_text(json.dumps(d, indent=1))  # JSON is YAML
    return out


def test_named_driver_pool_drill_returns_the_canary_to_the_rollback_driver(tmp_path):
    """A named driver pool moving 580.95.05 -> 580.126.20 with the rollback target 2025.10-r580 (which pins
    580.95.05): the drill labels the pool's canary back into the pool (whose NVIDIADriver still runs
    580.95.05) before its gates, and forward again after; no warning names the new driver as the target's.
    When the target gives the pool another driver than its object runs, no drill is planned (its gates would
    run on the new driver) and the warning names the target's driver."""
    from clusterdef.plan import stages as st

    old = load_side(_named_pool_lab(tmp_path, OLD, None), MATRICES, TODAY, FROM_SIDE_IGNORED)
    new = load_side(_named_pool_lab(tmp_path, CURRENT, old.tree), MATRICES, TODAY, {"matrix-candidate"})
    doc = make_plan(old, new).doc
    assert not [w for w in doc["warnings"] if w["code"] == "kubernetes-canary-drill"]
    stages = {s["name"]: s for s in doc["rollout"]["stages"]}
    drill = stages["kubernetes fast rollback drill"]
    assert drill["driver"] == {"pool": "fast", "canary": "fast.canary"}
    assert drill["steps"][0] == ("label kgpu[01-02] clusterdef.dev/driver-pool=fast: back on NVIDIADriver fast "
                                 "(driver 580.95.05, the rollback target's)")
    assert drill["steps"].index("run the gates on the rollback target") == 2  # after the move back
    assert drill["steps"][3].startswith("label kgpu[01-02] clusterdef.dev/driver-pool=fast.canary")
    # gates by kind, on the stage's own nodes: the Kubernetes canary no srun, the Slurm canary no GPU pod
    kgates, sgates = stages["kubernetes fast canary"]["gates"], stages["canary"]["gates"]
    assert "Kubernetes pod on each of kgpu[01-02] (spec.nodeName) requesting nvidia.com/gpu: 8 runs nvidia-smi" \
        in kgates and not any("srun" in g for g in kgates)
    assert "Slurm job: `srun --nodelist=gpu[001,003] --nodes=2 --gres=gpu:h100:8` on gpu[001,003] completes" \
        in sgates and not any("Kubernetes" in g for g in sgates)

    # the target gives the pool another driver than its NVIDIADriver runs: no drill, the right driver named
    scope = st.Scope(new.definition, CURRENT, [], [], OLD, {"infer": {"kgpu01", "kgpu02"}}, {}, {}, set(), [],
                     moved={"fast": ("580.95.05", "580.126.20")}, rb_pools={"fast": "550.144.03"})
    stages_, warnings = st.canary_pair(scope, "kubernetes fast ", ["kgpu01", "kgpu02"], "infer", [],
                                       {"pool": "fast", "canary": "fast.canary"})
    assert [s.kind for s in stages_] == ["canary"]
    assert [(w.code, w.message) for w in warnings] == [(
        "kubernetes-canary-drill", "no rollback drill of kgpu[01-02]: it cannot return their driver by label: "
        "NVIDIADriver fast runs 580.95.05, the rollback target 2025.10-r580 gives pool fast driver 550.144.03")]


def _operator_owned(d) -> set[str]:
    """The Kubernetes GPU nodes whose driver the GPU Operator owns."""
    from clusterdef import hostlist

    if d.kubernetes is None or d.kubernetes.gpu_operator.driver_owner != "operator":
        return set()
    return {h for g in d.nodes.values() if g.control_plane == "kubernetes" and d.hardware[g.hardware].gpu
            for h in hostlist.names(g.hosts)}


def _check_hold_and_release(doc: dict, owned: set[str], values: dict) -> set[str]:
    """Every operator-owned Kubernetes GPU node that no canary moves is held before the control-plane stage
    and released in exactly one wave, whose drain line is the upgrade controller's (its drain spec the rendered
    values'); no stage drains an operator-owned node through clusterdef. Returns the held nodes."""
    from clusterdef import hostlist

    stages = doc["rollout"]["stages"]
    kinds = [s["kind"] for s in stages]
    canaries = {h for s in stages if s["kind"] == "canary" and s.get("driver") for h in hostlist.names(s["hosts"])}
    holds = [s for s in stages if s["kind"] == "driver-hold"]
    held = {h for s in holds for h in hostlist.names(s["hosts"])}
    assert held == owned - canaries
    if held:
        assert len(holds) == 1 and kinds.index("driver-hold") + 1 == kinds.index("control-plane")
        assert all(f"{hostlist.fold(sorted(held))} nvidia.com/gpu-driver-upgrade.skip=true" in x
                   for x in holds[0]["steps"])
    released: dict[str, int] = {}
    drain = values["driver"]["upgradePolicy"]["drain"]
    for s in stages:
        hosts = set(hostlist.names(s["hosts"])) if s["hosts"] else set()
        drains = [x for x in s["steps"] if x.startswith("drain ")]
        if not hosts & owned or s["kind"] not in ("canary", "wave"):
            continue
        # the one drain line of a stage on operator-owned nodes is the upgrade controller's, never clusterdef's
        assert len(drains) == 1 and drains[0] == s["steps"][0], s["name"]
        assert drains[0].startswith(f"drain {s['hosts']}: by the GPU Operator's upgrade controller, not clusterdef "
                                    f"(upgradePolicy drain: timeoutSeconds {drain['timeoutSeconds']}, force "
                                    f"{str(drain['force']).lower()}, deleteEmptyDir "
                                    f"{str(drain['deleteEmptyDir']).lower()};"), s["name"]
        if s["kind"] == "wave":
            assert hosts <= held and s["driver"]["pool"], s["name"]
            assert s["steps"][1].startswith("release them: remove nvidia.com/gpu-driver-upgrade.skip from each")
            assert "nvidia.com/gpu-driver-upgrade-state=upgrade-done" in s["steps"][1]
            for h in hosts:
                released[h] = released.get(h, 0) + 1
    assert released == {h: 1 for h in held}
    if held:  # the control-plane stage releases the pool's new driver to the canary only
        cp = stages[kinds.index("control-plane")]
        assert any(f"leaves the held nodes {hostlist.fold(sorted(held))}" in x for x in cp["steps"])
    return held


@pytest.mark.parametrize("example", ["lab", "estate", "gb200"])
def test_operator_owned_nodes_are_held_then_released_wave_by_wave(tmp_path, example):
    """Issue 28: the GPU Operator's upgrade controller is the drain authority of the nodes whose driver it
    owns. For the three examples: every such node no canary moves is labelled out of the driver upgrade
    (nvidia.com/gpu-driver-upgrade.skip=true) before the control-plane stage moves its pool's NVIDIADriver,
    released in exactly one wave, whose drain is the controller's with the rendered values' drain spec, and no
    stage drains one through clusterdef. The estate (driver_owner: operator) holds nodes; apply runs
    driver-pool.yml for the hold and first in each of those waves, with the node names of the inventory."""
    from ruamel.yaml import YAML

    from clusterdef.apply.inventory import inventory_waves
    from clusterdef.apply.steps import Deliveries, DriverPools, steps_for_plan
    from conftest import ROOT

    doc = plan_between(tmp_path, example, OLD, CURRENT).doc
    new = load_side(tmp_path / f"{example}-{CURRENT}.yaml", MATRICES, TODAY, {"matrix-candidate"})
    values = YAML(typ="safe", pure=True).load(new.tree["kubernetes/gpu-operator/values.yaml"])
    owned = _operator_owned(new.definition)
    held = _check_hold_and_release(doc, owned, values)
    assert bool(held) is (example == "estate")  # the estate's operator owns the driver; the others' images do
    if not held:
        assert not [s for s in doc["rollout"]["stages"] if s["kind"] == "wave" and s.get("driver")]
        return
    hosts_yml = new.tree["ansible/inventory/hosts.yml"]
    waves = inventory_waves(hosts_yml)
    steps = steps_for_plan(doc, waves, ROOT / "playbooks", pools=DriverPools(new),
                           deliveries=Deliveries(new, hosts_yml))
    hold = [s for s in steps if s.kind == "driver-hold"]
    assert [(s.action, s.playbook.name) for s in hold] == [("driver-hold", "driver-pool.yml")]
    in_inventory = [h for hs in waves.values() for h in hs]
    assert hold[0].vars == {"clusterdef_driver_hold": [h for h in in_inventory if h in held]}
    released = []
    for stage in {s.stage for s in steps if s.kind == "wave" and s.action == "driver-release"}:
        mine = [s for s in steps if s.stage == stage]
        assert [s.action for s in mine][:2] == ["driver-release", "upgrade"], stage  # released first
        assert mine[0].playbook.name == "driver-pool.yml" and mine[0].limit is None
        assert mine[0].vars == {"clusterdef_driver_release": mine[0].hosts}
        released += mine[0].hosts
    assert sorted(released) == sorted(held)
    assert step_index(steps, "driver-hold") < step_index(steps, "control-plane")


def step_index(steps, action: str) -> int:
    return next(i for i, s in enumerate(steps) if s.action == action)


def _pool_lab(tmp: Path, pool_set: str) -> Path:
    """The lab on CURRENT with the GPU Operator owning the driver of its Kubernetes GPU groups, pool `fast`
    (infer, canary: three nodes) pinned to `pool_set`: between two of them only the pool's driver moves."""
    from ruamel.yaml import YAML

    from lab_variants import driver_pool_canary

    for csv in CLUSTERS.glob("*.csv"):
        shutil.copyfile(csv, tmp / csv.name)
    d = driver_pool_canary(YAML(typ="safe", pure=True).load(_text("lab", CURRENT)))
    d["kubernetes"]["gpu_operator"]["driver_pools"] = {"fast": {"node_groups": ["infer", "canary"],
                                                                "matrix": pool_set}}
    out = tmp / f"lab-pool-only-{pool_set}.yaml"
    out.write_text(json.dumps(d, indent=1))  # JSON is YAML
    return out


def test_only_the_operator_driver_moves_the_held_nodes_get_a_wave(tmp_path):
    """Only a driver pool's driver moves (the cluster's set stays): the nodes no canary moves got no wave at
    all before (the control-plane stage released the new driver to them through the upgrade controller).
    Now they are held before it and released by a wave of their own, drained by the controller only."""
    from ruamel.yaml import YAML

    old = load_side(_pool_lab(tmp_path, OLD), MATRICES, TODAY, FROM_SIDE_IGNORED)
    new = load_side(_pool_lab(tmp_path, CURRENT), MATRICES, TODAY, {"matrix-candidate"})
    doc = make_plan(old, new).doc
    assert not doc["set_change"]["layers"]  # the cluster's set does not move: the pool's driver alone
    values = YAML(typ="safe", pure=True).load(new.tree["kubernetes/gpu-operator/values.yaml"])
    held = _check_hold_and_release(doc, _operator_owned(new.definition), values)
    assert held == {"kgpu03"}
    wave = next(s for s in doc["rollout"]["stages"] if s["kind"] == "wave")
    assert wave["hosts"] == "kgpu03" and wave["driver"] == {"pool": "fast", "canary": "fast.canary"}
    assert "NVIDIADriver fast" in wave["steps"][1] and "driver 580.126.20" in wave["steps"][1]


@pytest.mark.slow
def test_driver_pool_playbook_holds_and_releases_with_a_stand_in_kubectl(tmp_path):
    """playbooks/driver-pool.yml with real ansible-playbook and a stand-in kubectl recording its argv: the hold
    labels each node `nvidia.com/gpu-driver-upgrade.skip=true`, the release removes the label node by node and
    reads each node's upgrade state; a node in upgrade-failed fails the play naming it (and only it); a
    hostile node name is refused before kubectl runs."""
    import sys

    from conftest import ROOT

    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    log = tmp_path / "kubectl.log"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
open({str(log)!r}, "a").write(json.dumps(args) + "\\n")
if args[0] == "label":
    print("node/" + args[-2] + (" unlabeled" if args[-1].endswith("-") else " labeled"))
elif args[0] == "get":
    print("upgrade-failed" if args[2] == "gpu3078" else "upgrade-done", end="")
""")
    kubectl.chmod(0o755)
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0",
           "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}

    def run(vars_: dict):
        extra = {"ansible_python_interpreter": sys.executable, "clusterdef_kubectl": str(kubectl),
                 "clusterdef_driver_wait_s": 60, **vars_}
        return subprocess.run([str(ansible), "-i", "localhost,", "-c", "local", str(ROOT / "playbooks/driver-pool.yml"),
                               "-e", json.dumps(extra)], env=env, capture_output=True, text=True, timeout=300)

    r = run({"clusterdef_driver_hold": ["gpu3077", "gpu3078"]})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert [json.loads(ln) for ln in log.read_text().splitlines()] == [
        ["label", "--overwrite", "node", "gpu3077", "nvidia.com/gpu-driver-upgrade.skip=true"],
        ["label", "--overwrite", "node", "gpu3078", "nvidia.com/gpu-driver-upgrade.skip=true"]]
    log.unlink()
    r = run({"clusterdef_driver_release": ["gpu3077", "gpu3078"]})
    assert r.returncode != 0
    assert [json.loads(ln) for ln in log.read_text().splitlines()] == [
        ["label", "node", "gpu3077", "nvidia.com/gpu-driver-upgrade.skip-"],
        ["label", "node", "gpu3078", "nvidia.com/gpu-driver-upgrade.skip-"],
        ["get", "node", "gpu3077", "--output", "jsonpath={.metadata.labels.nvidia\\.com/gpu-driver-upgrade-state}"],
        ["get", "node", "gpu3078", "--output", "jsonpath={.metadata.labels.nvidia\\.com/gpu-driver-upgrade-state}"]]
    failed = next(ln for ln in r.stdout.splitlines() if "driver upgrade failed on" in ln)
    assert "gpu3078" in failed and "gpu3077" not in failed, r.stdout[-2000:]
    log.unlink()
    r = run({"clusterdef_driver_release": ["gpu1 --all"]})
    assert r.returncode != 0 and "refusing" in r.stdout and not log.exists(), r.stdout[-2000:]
