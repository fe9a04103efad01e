"""RoCE rails and two GPU models in one cluster (issue 29 item 7), pure: the lab variant `roce_two_models`
(tests/lab_variants.py: HGX H100 and HGX B200 groups on one RoCE fabric, one Slurm partition over both, a Kueue
tenant allowed both). The rendered tree keeps a Slurm job on one GPU model unless it asks (node Features and
job_submit.lua's table, whose behaviour on the real slurmctld test_slurm_gpu_models.py proves), orders the
tenant's flavors B200 then H100, gives both groups their rail files, and the collective gates pick the baseline
of each group's own GPU model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef.baseline.store import load_baselines
from clusterdef.build import build_tree
from clusterdef.plan.rollout import own_baseline, stage_gates
from clusterdef.render.kubernetes import kueue
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml
from lab_variants import roce_two_models


@pytest.fixture(scope="module")
def built(lab_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roce2")
    r = validate_file(dump_yaml(roce_two_models(lab_data), tmp / "lab.yaml"), MATRICES, TODAY)
    assert r.ok, [(f.code, f.dotted, f.message) for f in r.errors]
    return r, build_tree(r)[0], resolve(r.definition, r.matrix, tmp)


def test_validation_warns_once_per_mixing_partition(built):
    r, _, _ = built
    mixed = [f.dotted for f in r.findings if f.code == "partition-mixes-gpu-models"]
    assert mixed == ["slurm.partitions.train.node_groups", "slurm.partitions.debug.node_groups"]
    assert [f.dotted for f in r.findings if f.code == "nvlsm-unpinned"] == ["hardware.hgx-b200.platform"]


def test_a_slurm_job_stays_on_one_model_unless_it_asks(built):
    _, tree, _ = built
    conf = tree["slurm/slurm.conf"]
    features = {m.group(1): m.group(2).split(",") for m in re.finditer(r"^NodeName=(\S+) .*Features=(\S+)", conf, re.M)}
    assert "h100" in features["gpu[001,003]"] and "b200" in features["gpu[002,004]"], features
    assert "b200" not in features["gpu[001,003]"] and "h100" not in features["gpu[002,004]"]
    assert "JobSubmitPlugins=lua\n" in conf
    # a job naming no constraint gets "[h100|b200]" (one of them for all its nodes: sbatch(1) Matching OR)
    lua = tree["slurm/job_submit.lua"]
    assert '   ["train"] = {"h100", "b200"},\n   ["debug"] = {"h100", "b200"},\n' in lua
    assert "job_desc.features = constraint" in lua


def test_the_tenant_queue_takes_b200_then_h100(built):
    _, _, resolved = built
    cqs = {o["metadata"]["name"]: o for o in kueue.cluster_objects(resolved) if o["kind"] == "ClusterQueue"}
    flavors = [f["name"] for f in cqs["vision-serve"]["spec"]["resourceGroups"][0]["flavors"]]
    assert flavors == ["b200", "h100"]
    assert [f["name"] for f in cqs["nlp-serve"]["spec"]["resourceGroups"][0]["flavors"]] == ["h100"]
    assert cqs["vision-serve"]["spec"]["flavorFungibility"]["whenCanPreempt"] == "TryNextFlavor"
    rf = {o["metadata"]["name"]: o["spec"]["nodeLabels"] for o in kueue.cluster_objects(resolved)
          if o["kind"] == "ResourceFlavor"}
    assert rf == {"b200": {"clusterdef.dev/kueue-flavor": "b200"}, "h100": {"clusterdef.dev/kueue-flavor": "h100"}}


def test_both_models_get_their_rail_files(built):
    _, tree, _ = built
    for group, host, rail, addr in (("train", "gpu003", "ens0", "10.50.0.12/19"),
                                    ("train-b200", "gpu004", "ens7", "10.50.224.14/19"),
                                    ("infer", "kgpu01", "ens0", "10.50.0.31/19"),
                                    ("infer-b200", "kgpu02", "ens2", "10.50.64.32/19")):
        f = tree[f"network/roce/{group}/30-clusterdef-rail-{host}-{rail}.network"]
        assert f"[Match]\nName={rail}\nHost={host}\n" in f and f"Address={addr}\n" in f, (group, f)
    for group in ("train", "train-b200"):
        assert len([k for k in tree if k.startswith(f"network/roce/{group}/") and k.endswith(".network")]) == 2 * 8


def _baselines(tmp: Path, *models: str):
    entry = {"test": "all_reduce_perf", "nodes": 2, "gpus_per_node": 8, "fabric": "roce",
             "busbw_gbps": {"float/sum": {"8589934592": [350.0, 351.0]}}}
    path = tmp / "site.yaml"
    with open(path, "w") as fh:
        YAML().dump({"set": "2026.07-r580", "entries": [{**entry, "gpu_model": m} for m in models]}, fh)
    return load_baselines(path)


def test_each_group_is_held_to_its_own_models_baseline(built, tmp_path):
    _, _, resolved = built
    d = resolved.definition
    both = _baselines(tmp_path, "NVIDIA H100 80GB HBM3", "NVIDIA B200")
    assert own_baseline(d, both, "train").gpu_model == "NVIDIA H100 80GB HBM3"
    assert own_baseline(d, both, "train-b200").gpu_model == "NVIDIA B200"
    only_h100 = _baselines(tmp_path, "NVIDIA H100 80GB HBM3")
    assert own_baseline(d, only_h100, "train-b200") is None  # never the other model's
    gates = stage_gates(d, ["gpu002"], ["train-b200"], "site.yaml", only_h100)
    assert any("no baseline of the target set was taken on B200-SXM-180GB over roce" in g for g in gates), gates
    gates = stage_gates(d, ["gpu002"], ["train-b200"], "site.yaml", both)
    assert any("--node-group train-b200 --fabric roce" in g for g in gates), gates
