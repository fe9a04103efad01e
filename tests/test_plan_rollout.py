"""Unit tests of the rollout and transition rules (plan/rollout.py, plan/transition.py) on constructed
inputs: the lab definition with one policy changed, compatibility facts written out here, validated
sets built in place. Every expected value is written out by hand from those inputs (clusters/lab.yaml:
train gpu[001-002] on leaf01 and gpu[003-004] on leaf02, infer kgpu[01-02] on leaf02, secure sgpu01 on
leaf01 and sgpu02 on leaf02), never computed by the code under test (issue #18)."""

from __future__ import annotations

import copy
from pathlib import Path

from clusterdef.baseline import Baseline
from clusterdef.matrix.compat import Compat
from clusterdef.matrix.load import Matrix
from clusterdef.matrix.model import CudaDriverRow, KubernetesSkew, OperatorRelease, SlurmRelease, ValidatedSet
from clusterdef.model import Definition
from clusterdef.plan import rollout
from clusterdef.plan.transition import (Problem, SlurmHop, Transition, kubernetes_hop_problem, kubernetes_path,
                                        slurm_path, transition)

TRAIN = ["gpu001", "gpu002", "gpu003", "gpu004"]


def lab_with(lab: dict, **upgrade) -> Definition:
    """The lab definition with `upgrade.<key>` replaced (dicts merged one level deep); `lab` is left as is."""
    lab = copy.deepcopy(lab)
    upgrade.setdefault("max_unavailable_pct", 100)  # the topology alone; floors: test_waves_keep_capacity_floors
    for k, v in upgrade.items():
        if isinstance(v, dict) and isinstance(lab["upgrade"].get(k), dict):
            lab["upgrade"][k] = {**lab["upgrade"][k], **v}
        else:
            lab["upgrade"][k] = v
    return Definition.model_validate(lab)


# --------------------------------------------------------------------------- Stage.to_json


def test_stage_to_json_is_every_field_and_the_folded_hosts():
    s = rollout.Stage("wave 1", "wave", ["gpu002", "gpu001"], ["drain"], ["health"], ["leaf01"], "stateless",
                      {"to": "b1"})
    assert s.to_json() == {"name": "wave 1", "kind": "wave", "nodes": 2, "hosts": "gpu[001-002]",
                           "switches": ["leaf01"], "steps": ["drain"], "gates": ["health"],
                           "provisioning": "stateless", "boot": {"to": "b1"}}
    assert rollout.Stage("image", "image").to_json() == {
        "name": "image", "kind": "image", "nodes": 0, "hosts": "", "switches": [], "steps": [], "gates": [],
        "provisioning": "", "boot": {}}
    pool = {"pool": "default", "canary": "default.canary"}
    assert rollout.Stage("c", "canary", ["kgpu01"], driver=pool).to_json()["driver"] == pool


# --------------------------------------------------------------------------- choose_canary


def test_canary_takes_one_node_per_leaf_round_robin(lab):
    d = lab_with(lab)  # canary: {nodes: 2, min_leaf_switches: 2, node_group: train}
    assert rollout.choose_canary(d, ["infer"]) == ("train", ["gpu001", "gpu003"], ["leaf01", "leaf02"], [])
    # more nodes than leaves: the second round goes back to leaf01, then leaf02
    assert rollout.choose_canary(d, [], nodes=3) == ("train", ["gpu001", "gpu003", "gpu002"],
                                                     ["leaf01", "leaf02"], [])
    assert rollout.choose_canary(d, [], nodes=4)[1] == ["gpu001", "gpu003", "gpu002", "gpu004"]
    group, hosts, switches, warnings = rollout.choose_canary(d, [], nodes=5)
    assert (group, hosts, switches) == ("train", ["gpu001", "gpu003", "gpu002", "gpu004"], ["leaf01", "leaf02"])
    assert warnings == ["canary group train has only 4 node(s) on the chosen switches; policy asks for 5"]
    # `group` overrides the policy's node group
    assert rollout.choose_canary(d, [], group="secure") == ("secure", ["sgpu01", "sgpu02"],
                                                            ["leaf01", "leaf02"], [])


def test_canary_policy_nodes_and_leaves(lab):
    d = lab_with(lab, canary={"nodes": 3})
    assert rollout.choose_canary(d, []) == ("train", ["gpu001", "gpu003", "gpu002"], ["leaf01", "leaf02"], [])
    # the argument overrides the policy's count
    assert rollout.choose_canary(d, [], nodes=2)[1] == ["gpu001", "gpu003"]
    # one leaf asked for: the canary stays on the first leaf
    d = lab_with(lab, canary={"min_leaf_switches": 1})
    assert rollout.choose_canary(d, []) == ("train", ["gpu001", "gpu002"], ["leaf01"], [])
    d = lab_with(lab, canary={"min_leaf_switches": 1, "nodes": 3})
    assert rollout.choose_canary(d, []) == (
        "train", ["gpu001", "gpu002"], ["leaf01"],
        ["canary group train has only 2 node(s) on the chosen switches; policy asks for 3"])


def test_canary_on_fewer_leaves_than_asked_warns(lab):
    d = lab_with(lab)
    assert rollout.choose_canary(d, [], group="infer") == (
        "infer", ["kgpu01", "kgpu02"], ["leaf02"],
        ["canary group infer is on 1 leaf switch(es), fewer than upgrade.canary.min_leaf_switches=2: the "
         "collective test will not cross the fabric"])
    d = lab_with(lab, canary={"min_leaf_switches": 3, "nodes": 4})
    assert rollout.choose_canary(d, []) == (
        "train", ["gpu001", "gpu003", "gpu002", "gpu004"], ["leaf01", "leaf02"],
        ["canary group train is on 2 leaf switch(es), fewer than upgrade.canary.min_leaf_switches=3: the "
         "collective test will not cross the fabric"])


def test_canary_unit_word_follows_the_fabric_kind(lab):
    blocks = copy.deepcopy(lab)
    blocks["network"]["fabrics"]["ib0"]["topology"] = {
        "kind": "block", "blocks": {"b1": {"nodes": "gpu[001-004],kgpu[01-02],sgpu[01-02]"}}}
    d = lab_with(blocks)
    assert rollout.choose_canary(d, []) == (
        "train", ["gpu001", "gpu002"], ["b1"],
        ["canary group train is on 1 block(s), fewer than upgrade.canary.min_leaf_switches=2: the collective "
         "test will not cross the fabric"])
    rail = copy.deepcopy(lab)
    rail["network"]["fabrics"]["ib0"]["topology"] = {
        "kind": "rail", "rails": 8, "spines": "spine[01-02]",
        "scalable_units": {"su1": {"nodes": "gpu[001-004],kgpu[01-02],sgpu[01-02]"}}}
    assert rollout.choose_canary(lab_with(rail), [])[3] == [
        "canary group train is on 1 scalable unit(s), fewer than upgrade.canary.min_leaf_switches=2: the "
        "collective test will not cross the fabric"]
    unplaced = copy.deepcopy(lab)  # no placement: no fabric, every host under "-"
    del unplaced["nodes"]["train"]["placement"]
    assert rollout.choose_canary(lab_with(unplaced), []) == (
        "train", ["gpu001", "gpu002"], ["-"],
        ["canary group train is on 0 leaf switch(es), fewer than upgrade.canary.min_leaf_switches=2: the "
         "collective test will not cross the fabric"])


def test_canary_ignores_hosts_off_the_fabric_when_some_are_on_it(lab):
    lab["network"]["fabrics"]["ib0"]["topology"]["switches"] = {
        "leaf01": {"nodes": "gpu001,sgpu01"}, "leaf02": {"nodes": "gpu003,kgpu[01-02],sgpu02"},
        "spine01": {"switches": "leaf[01-02]"}}
    d = lab_with(lab, canary={"nodes": 4, "min_leaf_switches": 3})
    # gpu002 and gpu004 are on no leaf: the canary is picked from the placed hosts only
    assert rollout.choose_canary(d, []) == (
        "train", ["gpu001", "gpu003"], ["leaf01", "leaf02"],
        ["canary group train is on 2 leaf switch(es), fewer than upgrade.canary.min_leaf_switches=3: the "
         "collective test will not cross the fabric",
         "canary group train has only 2 node(s) on the chosen switches; policy asks for 4"])



def test_canary_round_robin_over_leaves_of_different_sizes(lab):
    lab["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf01"]["nodes"] = "gpu001,sgpu01"
    d = lab_with(lab, canary={"nodes": 3})
    # leaf01 has one train host, leaf02 two: the second round takes leaf02's second only
    assert rollout.choose_canary(d, []) == ("train", ["gpu001", "gpu003", "gpu004"], ["leaf01", "leaf02"], [])

def test_canary_group_without_a_policy_group_prefers_slurm(lab):
    lab["upgrade"]["canary"].pop("node_group")
    d = lab_with(lab)
    # the first affected Slurm group, else the first affected group, else the first group
    assert rollout.choose_canary(d, ["infer", "secure"])[:3] == ("secure", ["sgpu01", "sgpu02"],
                                                                 ["leaf01", "leaf02"])
    assert rollout.choose_canary(d, ["infer"])[:3] == ("infer", ["kgpu01", "kgpu02"], ["leaf02"])
    assert rollout.choose_canary(d, [])[:2] == ("train", ["gpu001", "gpu003"])
    # a policy group the definition does not have is ignored the same way
    lab["upgrade"]["canary"]["node_group"] = "gone"
    assert rollout.choose_canary(Definition.model_validate(lab), ["infer", "secure"])[0] == "secure"


# --------------------------------------------------------------------------- waves


def test_waves_fill_whole_leaves_up_to_the_wave_size(lab):
    want = {"train": set(TRAIN)}
    d = lab_with(lab, wave_size=4)  # both leaves of train fit exactly
    assert rollout.waves(d, want, set()) == [(TRAIN, ["leaf01", "leaf02"])]
    d = lab_with(lab, wave_size=3)  # leaf02 would overflow: a wave per leaf
    assert rollout.waves(d, want, set()) == [(["gpu001", "gpu002"], ["leaf01"]), (["gpu003", "gpu004"], ["leaf02"])]
    d = lab_with(lab, wave_size=2)
    assert rollout.waves(d, want, {"gpu001"}) == [(["gpu002"], ["leaf01"]), (["gpu003", "gpu004"], ["leaf02"])]
    # a leaf of exactly a wave is a wave of its own; the next one starts afresh
    assert rollout.waves(d, want, {"gpu004"}) == [(["gpu001", "gpu002"], ["leaf01"]), (["gpu003"], ["leaf02"])]
    d = lab_with(lab, wave_size=3)  # one left over on leaf01 shares a wave with leaf02
    assert rollout.waves(d, want, {"gpu001"}) == [(["gpu002", "gpu003", "gpu004"], ["leaf01", "leaf02"])]


def test_waves_split_a_leaf_larger_than_a_wave(lab):
    d = lab_with(lab, wave_size=1)
    assert rollout.waves(d, {"train": set(TRAIN)}, set()) == [
        (["gpu001"], ["leaf01"]), (["gpu002"], ["leaf01"]), (["gpu003"], ["leaf02"]), (["gpu004"], ["leaf02"])]
    lab["nodes"]["train"]["hosts"] = "gpu[001-005]"
    lab["nodes"]["train"]["addressing"]["mac"]["macs"].append("52:54:00:20:00:15")
    lab["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf01"]["nodes"] = "gpu[001-002],gpu005,sgpu01"
    d = lab_with(lab, wave_size=2)  # leaf01 has three train hosts: two, then one joined by leaf02's
    assert rollout.waves(d, {"train": {"gpu001", "gpu002", "gpu005", "gpu003"}}, set()) == [
        (["gpu001", "gpu002"], ["leaf01"]), (["gpu005", "gpu003"], ["leaf01", "leaf02"])]


def test_waves_never_mix_groups_and_skip_what_is_not_wanted(lab):
    d = lab_with(lab, wave_size=4)
    # definition order (train, infer, secure), not the order of the mapping; a group with nothing to do
    # is passed over, and so is a leaf with none of the wanted hosts
    want = {"secure": {"sgpu02"}, "infer": set(), "train": {"gpu004", "gpu003"}}
    assert rollout.waves(d, want, set()) == [(["gpu003", "gpu004"], ["leaf02"]), (["sgpu02"], ["leaf02"])]
    assert rollout.waves(d, {"train": {"gpu003"}}, {"gpu003"}) == []
    assert rollout.waves(d, {"infer": {"kgpu01", "kgpu02"}, "secure": {"sgpu01", "sgpu02"}}, {"kgpu01"}) == [
        (["kgpu02"], ["leaf02"]), (["sgpu01", "sgpu02"], ["leaf01", "leaf02"])]


def test_waves_keep_capacity_floors(lab):
    """A dedicated tenant's nodes are split over several waves: no wave takes more than max_unavailable_pct of a
    partition, tenant or Kubernetes pool; the plan says the lowest each keeps."""
    from clusterdef.knowledge import floors

    secure = {"secure": {"sgpu01", "sgpu02"}}
    assert [w for w, _ in rollout.waves(lab_with(lab, wave_size=8), secure, set())] == [["sgpu01", "sgpu02"]]
    d = lab_with(lab, wave_size=8, max_unavailable_pct=50)  # the tenant secure owns two nodes: one at a time
    assert [w for w, _ in rollout.waves(d, secure, set())] == [["sgpu01"], ["sgpu02"]]
    assert floors.group_limit(d, "secure") == (1, ("partition", "secure"))
    assert floors.group_limit(d, "train") == (2, ("partition", "train"))
    assert [w for w, _ in rollout.waves(d, {"train": set(TRAIN)}, set())] == [TRAIN[:2], TRAIN[2:]]
    low = {(x["kind"], x["name"]): x for x in floors.lowest(d, [["sgpu01"], ["sgpu02"], TRAIN[:2]])}
    assert low[("tenant", "secure")] == {"kind": "tenant", "name": "secure", "nodes": 2, "gpus": 16,
                                         "lowest_nodes": 1, "lowest_gpus": 8, "lowest_pct": 50.0}
    assert low[("partition", "train")]["lowest_nodes"] == 2 and low[("pool", "h100")]["lowest_nodes"] == 2
    assert floors.cap(128, 25) == 32 and floors.cap(3, 25) == 1 and floors.cap(4, 100) == 4


# --------------------------------------------------------------------------- gates


def test_gates_lab_with_a_baseline(lab):
    d = lab_with(lab)
    assert rollout.gates(d, True, True, "baselines/b.yaml") == [
        "node health check (GPUs visible, ECC, NVLink/fabric links, RDMA devices)",
        "drift: `clusterdef drift` shows the nodes on the target set",
        "NCCL all_reduce_perf across the nodes vs baseline (baselines/b.yaml): `clusterdef baseline compare`, "
        "large messages within 5%, #wrong = 0",
        "Slurm job (Slurm stages): `srun --nodelist=<the stage's nodes> --gres=gpu:<type>:N` completes",
        "Kubernetes GPU pod (Kubernetes stages): a pod requesting nvidia.com/gpu on each of the stage's nodes runs "
        "nvidia-smi",
        "smoke hardware/gpus-and-links: `/usr/bin/nvidia-smi nvlink --status` exits 0 within 60 s",
        "smoke storage/scratch-mounted on train, infer: `/usr/bin/findmnt --mountpoint /scratch` exits 0 "
        "within 600 s",
        "smoke rdma/hca-ports: `/usr/bin/ibv_devinfo --list` exits 0 within 60 s"]


def test_gates_without_baseline_or_schedulers_and_smoke_in_layer_order(lab):
    smoke = {  # neither in name order nor in layer order as written
        "b-app": {"layer": "application", "argv": ["/opt/app/run", "two words"], "timeout_seconds": 5},
        "c-hw": {"layer": "hardware", "argv": ["/usr/bin/true"]},
        "a-nccl": {"layer": "collective", "argv": ["/usr/bin/nccl"], "node_groups": ["train"]}}
    lab["upgrade"]["smoke_tests"] = smoke
    d = lab_with(lab, baseline_tolerance={"busbw_drop_pct": 2.5})
    assert rollout.gates(d, False, False, None) == [
        "node health check (GPUs visible, ECC, NVLink/fabric links, RDMA devices)",
        "drift: `clusterdef drift` shows the nodes on the target set",
        "NCCL all_reduce_perf across the nodes (the target set has no baseline: record one)",
        "smoke hardware/c-hw: `/usr/bin/true` exits 0 within 600 s",
        "smoke collective/a-nccl on train: `/usr/bin/nccl` exits 0 within 600 s",
        "smoke application/b-app: `/opt/app/run 'two words'` exits 0 within 5 s"]
    g = rollout.gates(d, True, False, "x.yaml")
    assert g[2] == ("NCCL all_reduce_perf across the nodes vs baseline (x.yaml): `clusterdef baseline compare`, "
                    "large messages within 2.5%, #wrong = 0")
    assert g[3].startswith("Slurm job (Slurm stages): `srun --nodelist=") and not g[4].startswith("Kub")
    g = rollout.gates(d, False, True, "")  # an empty baseline path is no baseline
    assert g[2].endswith("(the target set has no baseline: record one)") and g[3].startswith("Kubernetes GPU pod")


# --------------------------------------------------------------------------- rollback_target


def _vs(name: str, status: str = "validated", **components) -> ValidatedSet:
    base = {"driver": "580.95.05", "cuda": "13.0.2", "nccl": "2.27.7", "container_toolkit": "1.18.0",
            "gpu_operator": "v25.10.0", "kubernetes": "1.34.2", "slurm": "25.11.7"}
    return ValidatedSet(name=name, status=status, components={**base, **components})


def _matrix(**statuses: str) -> Matrix:
    return Matrix(Path("."), {n: _vs(n, s) for n, s in statuses.items()})


def test_rollback_previous_is_the_running_set_when_validated(lab):
    d = lab_with(lab, rollback={"target": "previous"})
    m = _matrix(**{"2025.10-a": "validated", "2026.01-b": "validated", "2026.07-c": "validated"})
    assert rollout.rollback_target(d, m, "2025.10-a", "2026.07-c") == ("2025.10-a", [])


def test_rollback_previous_else_the_newest_validated_other_than_the_target(lab):
    d = lab_with(lab, rollback={"target": "previous"})
    m = _matrix(**{"2026.01-b": "validated", "2024.01-z": "validated", "2026.09-d": "validated",
                   "2025.10-a": "retired", "2026.07-c": "candidate", "2026.08-x": "retired"})
    # the running set is retired: the newest validated set other than the target itself
    assert rollout.rollback_target(d, m, "2025.10-a", "2026.09-d") == ("2026.01-b", [])
    assert rollout.rollback_target(d, m, "2026.07-c", "2024.01-z") == ("2026.09-d", [])
    assert rollout.rollback_target(d, m, "not-in-matrix", "2026.07-c") == ("2026.09-d", [])
    only = _matrix(**{"2025.10-a": "retired", "2026.07-c": "validated"})
    assert rollout.rollback_target(d, only, "2025.10-a", "2026.07-c") == ("", ["no validated set to roll back to"])


def test_rollback_named_target(lab):
    d = lab_with(lab, rollback={"target": "2025.10-a"})
    m = _matrix(**{"2025.10-a": "retired"})  # a named target is taken as written
    assert rollout.rollback_target(d, m, "2026.01-b", "2026.07-c") == ("2025.10-a", [])
    assert rollout.rollback_target(d, m, "2026.01-b", "2025.10-a") == (
        "2025.10-a", ["rollback target 2025.10-a is the upgrade target itself"])


# --------------------------------------------------------------------------- baseline_mismatch


def test_baseline_mismatch_message_and_no_group(lab):
    d = lab_with(lab)
    b = Baseline("2026.07-c", "all_reduce_perf", 2, 8, {}, gpu_model="NVIDIA H200", fabric="roce")
    assert rollout.baseline_mismatch(d, [b], "train") == [
        "the all_reduce_perf baseline of set 2026.07-c (2 nodes) was taken on another GPU NVIDIA H200 (the "
        "canary's: H100-SXM5-80GB) and fabric roce (the canary's: infiniband): the canary gate on train compares "
        "different hardware"]
    assert rollout.baseline_mismatch(d, [b], "") == []
    # another group's baseline is not the canary group's
    other = Baseline("2026.07-c", "all_reduce_perf", 2, 8, {}, node_group="secure", gpu_model="NVIDIA H200")
    assert rollout.baseline_mismatch(d, [other], "train") == []
    assert len(rollout.baseline_mismatch(d, [other], "secure")) == 1
    # the GPU type matches whatever the case
    same = Baseline("s", "all_reduce_perf", 2, 8, {}, gpu_model="nvidia h100 80gb hbm3", fabric="infiniband")
    assert rollout.baseline_mismatch(d, [same], "train") == []
    # a group on no fabric: only the GPU is compared
    del lab["nodes"]["train"]["placement"]
    roce = Baseline("s", "all_reduce_perf", 2, 8, {}, gpu_model="NVIDIA H100 80GB HBM3", fabric="roce")
    assert rollout.baseline_mismatch(lab_with(lab), [roce], "train") == []


def test_stage_gates_follow_the_stage_control_plane_nodes_and_hardware(lab):
    """A Slurm stage gets a Slurm job on its nodes and no GPU pod; a Kubernetes stage a pod pinned to each of
    its nodes and no srun; the collective uses the baseline taken on the group's own GPU and fabric, else says
    there is none; smoke tests limited to other groups are left out (lab: train is Slurm, infer Kubernetes,
    both H100-SXM5-80GB x8 on InfiniBand)."""
    lab["upgrade"]["smoke_tests"] = {"t": {"layer": "hardware", "argv": ["/usr/bin/true"], "node_groups": ["train"]}}
    d = lab_with(lab)
    h200 = Baseline("2026.07-c", "all_reduce_perf", 2, 8, {}, gpu_model="NVIDIA H200", fabric="roce")
    h100 = Baseline("2026.07-c", "all_reduce_perf", 4, 8, {}, gpu_model="NVIDIA H100 80GB HBM3", fabric="infiniband")
    assert rollout.stage_gates(d, ["gpu001", "gpu003"], ["train"], "baselines/b.yaml", [h200, h100]) == [
        "node health check on gpu[001,003] (GPUs visible, ECC, NVLink/fabric links, RDMA devices)",
        "drift: `clusterdef drift` shows gpu[001,003] on the target set",
        "NCCL all_reduce_perf across gpu[001,003] vs the all_reduce_perf baseline of set 2026.07-c on train's "
        "hardware and fabric (4 nodes, baselines/b.yaml): `clusterdef baseline compare LOG --set 2026.07-c "
        "--node-group train --fabric infiniband`, large messages within 5%, "
        "#wrong = 0",
        "Slurm job: `srun --nodelist=gpu[001,003] --nodes=2 --gres=gpu:h100:8` on gpu[001,003] completes",
        "smoke hardware/t on gpu[001,003]: `/usr/bin/true` exits 0 within 600 s"]
    k = rollout.stage_gates(d, ["kgpu01", "kgpu02"], ["infer"], "baselines/b.yaml", [h200])
    assert k == [
        "node health check on kgpu[01-02] (GPUs visible, ECC, NVLink/fabric links, RDMA devices)",
        "drift: `clusterdef drift` shows kgpu[01-02] on the target set",
        "NCCL all_reduce_perf across kgpu[01-02] (no baseline of the target set was taken on H100-SXM5-80GB over "
        "infiniband: nothing to compare with; record one)",
        "Kubernetes pod on each of kgpu[01-02] (spec.nodeName) requesting nvidia.com/gpu: 8 runs nvidia-smi"]
    assert not any("srun" in g for g in k)


# --------------------------------------------------------------------------- slurm_path

SLURM = (
    SlurmRelease(major="23.11", released="2023-11-21", compatible_prior=("23.02", "22.05"), latest="23.11.11"),
    SlurmRelease(major="24.05", released="2024-05-30", compatible_prior=("23.11", "23.02"), latest="24.05.8"),
    SlurmRelease(major="24.11", released="2024-11-29", compatible_prior=("24.05", "23.11", "23.02"),
                 latest="24.11.7"),
    SlurmRelease(major="25.05", released="2025-05-29", compatible_prior=("24.11", "24.05", "23.11"),
                 latest="25.05.8"),
    SlurmRelease(major="25.11", released="2025-11-06", compatible_prior=("25.05", "24.11", "24.05"),
                 latest="25.11.7"),
    SlurmRelease(major="26.05", released="2026-05-26", compatible_prior=("25.11", "25.05", "24.11"),
                 latest="26.05.3"),
    SlurmRelease(major="26.11", compatible_prior=("26.05", "25.11", "25.05")),  # not released
)
CUDA = (CudaDriverRow(cuda="12.8.1", min_driver="570.124.06"), CudaDriverRow(cuda="13.0.0", min_driver="580.65.06"),
        CudaDriverRow(cuda="13.0.2", min_driver="580.95.05"))
OPERATORS = (
    OperatorRelease(gpu_operator="v1.0.0", driver_default="570.1", container_toolkit="1.0", k8s_min="1.30",
                    k8s_max="1.34"),
    OperatorRelease(gpu_operator="v2.0.0", driver_default="580.1", container_toolkit="1.1", k8s_min="1.34",
                    k8s_max="1.36"),
    OperatorRelease(gpu_operator="v3.0.0", driver_default="580.1", container_toolkit="1.1", k8s_min="1.20"),
)
COMPAT = Compat(cuda_driver=CUDA, gpu_operator=OPERATORS, slurm=SLURM)


def hops(path: list[SlurmHop]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(h.version, h.major, h.order) for h in path]


ORDER = ("slurmdbd", "slurmctld", "slurmd")


def test_slurm_same_version_same_major_and_one_hop():
    assert slurm_path(COMPAT, "25.11.7", "25.11.7") == ([], [])
    # a maintenance release of the same major: one hop, whatever the compatible_prior lists
    assert [hops(p) for p in slurm_path(COMPAT, "25.11.2", "25.11.7")] == [[("25.11.7", "25.11", ORDER)], []]
    assert [hops(p) for p in slurm_path(COMPAT, "24.11.0", "26.05.3")] == [[("26.05.3", "26.05", ORDER)], []]
    assert [hops(p) for p in slurm_path(COMPAT, "23.11.11", "24.05.1")] == [[("24.05.1", "24.05", ORDER)], []]


def test_slurm_steps_through_the_furthest_released_major():
    path, problems = slurm_path(COMPAT, "24.05.8", "26.05.3")
    assert hops(path) == [("25.11.7", "25.11", ORDER), ("26.05.3", "26.05", ORDER)] and problems == []
    # two steps: 23.11 -> 25.05 (the furthest that accepts 23.11) -> 26.05
    path, problems = slurm_path(COMPAT, "23.11.11", "26.05.3")
    assert hops(path) == [("25.05.8", "25.05", ORDER), ("26.05.3", "26.05", ORDER)] and problems == []


def test_slurm_downgrade_is_refused():
    assert slurm_path(COMPAT, "25.11.7", "25.05.8") == ([], [Problem(
        "slurm-downgrade", "Slurm 25.11.7 -> 25.05.8 is a downgrade of the major release",
        "Slurm does not support downgrading slurmdbd/slurmctld state; restore from the pre-upgrade snapshot "
        "instead")])
    # within a major, an older maintenance release is one hop, not a major downgrade
    assert hops(slurm_path(COMPAT, "25.11.7", "25.11.2")[0]) == [("25.11.2", "25.11", ORDER)]


def test_slurm_unknown_major_and_no_path():
    assert slurm_path(COMPAT, "25.11.7", "27.05.1") == ([], [Problem(
        "slurm-unknown-major", "Slurm 27.05 is not in matrices/compat/slurm-releases.yaml",
        "add the release with its compatible_prior list")])
    assert slurm_path(COMPAT, "21.08.8", "26.05.3") == ([], [Problem(
        "slurm-no-path", "no upgrade path from Slurm 21.08 to 26.05: no released major accepts 21.08",
        "add intermediate releases to matrices/compat/slurm-releases.yaml")])
    # an intermediate release that is not released (or has no maintenance release) is no step
    gap = Compat(slurm=(
        SlurmRelease(major="30.05", released="2030-05-01", compatible_prior=(), latest="30.05.1"),
        SlurmRelease(major="30.11", compatible_prior=("30.05",), latest="30.11.1"),
        SlurmRelease(major="31.05", released="2031-05-01", compatible_prior=("30.05",)),
        SlurmRelease(major="31.11", released="2031-11-01", compatible_prior=("31.05", "30.11"), latest="31.11.1")))
    assert slurm_path(gap, "30.05.1", "31.11.1") == ([], [Problem(
        "slurm-no-path", "no upgrade path from Slurm 30.05 to 31.11: no released major accepts 30.05",
        "add intermediate releases to matrices/compat/slurm-releases.yaml")])


def test_slurm_path_stops_with_the_hops_so_far():
    # 32.05 -> 32.11 is a step; nothing newer accepts 32.11 on the way to 34.05 (32.11 listing itself
    # is no step: a hop goes to a newer major)
    c = Compat(slurm=(
        SlurmRelease(major="32.05", released="2032-05-01", compatible_prior=(), latest="32.05.1"),
        SlurmRelease(major="32.11", released="2032-11-01", compatible_prior=("32.05", "32.11"), latest="32.11.4"),
        SlurmRelease(major="34.05", released="2034-05-01", compatible_prior=("33.11",), latest="34.05.1")))
    path, problems = slurm_path(c, "32.05.1", "34.05.1")
    assert hops(path) == [("32.11.4", "32.11", ORDER)]
    assert problems == [Problem("slurm-no-path", "no upgrade path from Slurm 32.11 to 34.05: no released major "
                                "accepts 32.11", "add intermediate releases to matrices/compat/slurm-releases.yaml")]


# --------------------------------------------------------------------------- Kubernetes


def test_kubernetes_hop_problem_rules():
    c = COMPAT
    assert kubernetes_hop_problem(c, "1.33.0", "1.34.2") is None
    assert kubernetes_hop_problem(c, "1.33.5", "1.33.0") is None  # a patch back is no minor downgrade
    assert kubernetes_hop_problem(c, "1.33.0", "1.33.0") is None
    assert kubernetes_hop_problem(c, "1.34.2", "1.33.0") == Problem(
        "k8s-downgrade", "Kubernetes 1.34.2 -> 1.33.0 downgrades the API server minor",
        "Kubernetes does not support minor downgrades; restore the etcd snapshot taken before the upgrade instead")
    assert kubernetes_hop_problem(c, "1.30.1", "1.33.0") == Problem(
        "k8s-skip-minor", "Kubernetes 1.30.1 -> 1.33.0 skips minor release(s): the API server must be upgraded "
        "one minor at a time", "step through 1.31, 1.32")
    assert kubernetes_hop_problem(c, "1.33.0", "2.0.0") == Problem(
        "k8s-skip-minor", "Kubernetes 1.33.0 -> 2.0.0 skips minor release(s): the API server must be upgraded "
        "one minor at a time", "step through every minor in between")
    skip = Compat(kubernetes=KubernetesSkew(apiserver_skip_minor=True))
    assert kubernetes_hop_problem(skip, "1.30.1", "1.33.0") is None
    assert kubernetes_hop_problem(skip, "1.33.0", "2.0.0").code == "k8s-skip-minor"
    assert kubernetes_hop_problem(skip, "1.34.0", "1.33.0").code == "k8s-downgrade"


def test_kubernetes_path_minors_and_kubelet_steps():
    assert kubernetes_path(COMPAT, "1.34.2", "1.34.2") == ([], [], [])
    assert kubernetes_path(COMPAT, "1.34.1", "1.34.2") == (["1.34.2"], ["1.34.2"], [])
    assert kubernetes_path(COMPAT, "1.33.0", "1.34.2") == (["1.34.2"], ["1.34.2"], [])
    assert kubernetes_path(COMPAT, "1.30.1", "1.33.0") == (["1.31", "1.32", "1.33.0"], ["1.33.0"], [])
    assert kubernetes_path(COMPAT, "1.30.1", "1.34.0") == (["1.31", "1.32", "1.33", "1.34.0"], ["1.33", "1.34.0"],
                                                           [])
    two = Compat(kubernetes=KubernetesSkew(kubelet_max_minor_older=2))
    assert kubernetes_path(two, "1.30.1", "1.35.0") == (
        ["1.31", "1.32", "1.33", "1.34", "1.35.0"], ["1.32", "1.34", "1.35.0"], [])
    one = Compat(kubernetes=KubernetesSkew(kubelet_max_minor_older=1))
    assert kubernetes_path(one, "1.32.0", "1.34.1")[1] == ["1.33", "1.34.1"]


def test_kubernetes_path_refusals():
    down = kubernetes_path(COMPAT, "1.34.2", "1.33.0")
    assert down == ([], [], [Problem(
        "k8s-downgrade", "Kubernetes 1.34.2 -> 1.33.0 downgrades the API server minor",
        "Kubernetes does not support minor downgrades; restore the etcd snapshot taken before the upgrade instead")])
    major = kubernetes_path(COMPAT, "1.33.0", "2.1.0")
    assert major == ([], [], [Problem(
        "k8s-skip-minor", "Kubernetes 1.33.0 -> 2.1.0 skips minor release(s): the API server must be upgraded "
        "one minor at a time", "step through every minor in between")])


# --------------------------------------------------------------------------- transition


def test_transition_stepped_slurm_kubernetes_operator_range_and_cuda():
    old = _vs("2026.01-a", slurm="24.05.8", kubernetes="1.33.0", gpu_operator="v1.0.0", cuda="12.8.1",
              driver="570.124.06")
    new = _vs("2026.07-b", slurm="26.05.3", kubernetes="1.35.0", gpu_operator="v2.0.0", cuda="13.0.2",
              driver="580.95.05")
    t = transition(COMPAT, old, new, True, True)
    assert t.to_json() == {
        "slurm_path": [{"version": "25.11.7", "major": "25.11", "order": list(ORDER)},
                       {"version": "26.05.3", "major": "26.05", "order": list(ORDER)}],
        "apiserver_path": ["1.34", "1.35.0"],
        "kubelet_path": ["1.35.0"],
        "checks": [
            "Slurm 24.05.8 -> 26.05.3 crosses more majors than the upgrade window (3) allows: stepped through "
            "25.11.7 -> 26.05.3",
            "Kubernetes API server 1.33.0 -> 1.34 -> 1.35.0 (one minor at a time); kubelets follow: 1.35.0",
            "driver 580.95.05 satisfies CUDA 13.0.2 (needs >= 580.95.05)",
            "driver 580.95.05 also runs the old CUDA 12.8.1 between the driver and CUDA layers"],
        "refusals": [],
        # the running operator (1.30-1.34) does not cover 1.35; the target's (1.34-1.36) covers both steps
        "warnings": [{"code": "k8s-operator-range", "message": "GPU Operator v1.0.0 (running) supports Kubernetes "
                      "1.30-1.34, not 1.35.0 reached during the upgrade",
                      "hint": "upgrade the GPU Operator before (or with) that API server step"}]}


def test_transition_one_hop_windows_and_target_operator_range():
    old = _vs("2026.01-a", slurm="23.11.11", kubernetes="1.32.4", gpu_operator="v9.9.9", cuda="13.0.2",
              driver="580.95.05")
    new = _vs("2026.07-b", slurm="24.05.8", kubernetes="1.33.1", gpu_operator="v2.0.0", cuda="13.0.2",
              driver="580.95.05")
    t = transition(COMPAT, old, new, True, True)
    # the running operator is unknown, the target's starts at 1.34; the same CUDA: no second driver check
    assert t.checks == [
        "Slurm 23.11.11 -> 24.05.8 is within the upgrade window (2 prior majors); slurmdbd, then slurmctld, then "
        "slurmd",
        "Kubernetes API server 1.32.4 -> 1.33.1 (one minor at a time); kubelets follow: 1.33.1",
        "driver 580.95.05 satisfies CUDA 13.0.2 (needs >= 580.95.05)"]
    assert [(w.code, w.message) for w in t.warnings] == [(
        "k8s-operator-range", "GPU Operator v2.0.0 (target) supports Kubernetes 1.34-1.36, not 1.33.1 reached "
        "during the upgrade")]
    assert t.refusals == [] and hops(t.slurm) == [("24.05.8", "24.05", ORDER)]
    new = _vs("2026.07-b", slurm="25.05.8", kubernetes="1.33.1", gpu_operator="v3.0.0")  # no k8s_max: not checked
    old = _vs("2026.01-a", slurm="24.11.7", kubernetes="1.32.4", gpu_operator="v3.0.0")
    t = transition(COMPAT, old, new, True, True)
    assert t.checks[0] == ("Slurm 24.11.7 -> 25.05.8 is within the upgrade window (3 prior majors); slurmdbd, "
                           "then slurmctld, then slurmd") and t.warnings == []


def test_transition_only_what_the_cluster_runs():
    # a Slurm and a Kubernetes downgrade, but the cluster runs neither: only the driver rules apply
    old = _vs("2026.01-a", slurm="25.11.7", kubernetes="1.35.0", cuda="13.0.0")
    new = _vs("2026.07-b", slurm="25.05.8", kubernetes="1.33.0", cuda="13.0.0", driver="580.65.06")
    t = transition(COMPAT, old, new, False, False)
    assert t.to_json() == {"slurm_path": [], "apiserver_path": [], "kubelet_path": [],
                           "checks": ["driver 580.65.06 satisfies CUDA 13.0.0 (needs >= 580.65.06)"],
                           "refusals": [], "warnings": []}
    t = transition(COMPAT, old, new, True, True)
    assert [p.code for p in t.refusals] == ["slurm-downgrade", "k8s-downgrade"]
    same = transition(COMPAT, old, old, True, True)  # nothing moves: no Slurm or Kubernetes check
    assert same.slurm == [] and same.apiserver == [] and same.kubelet == []
    assert same.checks == ["driver 580.95.05 satisfies CUDA 13.0.0 (needs >= 580.65.06)"]


def test_transition_driver_refusals():
    old = _vs("2026.01-a", cuda="12.8.1", driver="570.124.06")
    t = transition(COMPAT, old, _vs("2026.07-b", cuda="99.1.0"), False, False)
    assert t.to_json()["refusals"] == [{"code": "cuda-unknown", "message": "CUDA 99.1.0 has no minimum-driver fact",
                                        "hint": "add it to matrices/compat/cuda-driver-min.yaml"}]
    # the old CUDA still runs on the new driver in between
    assert t.checks == ["driver 580.95.05 also runs the old CUDA 12.8.1 between the driver and CUDA layers"]
    t = transition(COMPAT, old, _vs("2026.07-b", cuda="13.0.2", driver="580.82.07"), False, False)
    assert t.to_json()["refusals"] == [{
        "code": "driver-cuda", "message": "driver 580.82.07 is older than 580.95.05, the minimum for CUDA 13.0.2",
        "hint": "raise the driver in the target set"}]
    assert t.checks == ["driver 580.82.07 also runs the old CUDA 12.8.1 between the driver and CUDA layers"]
    # a new driver exactly at the old CUDA's minimum still runs it; below it, or an unknown old CUDA, no check
    t = transition(COMPAT, _vs("a", cuda="13.0.2"), _vs("b", cuda="13.0.0", driver="580.95.05"), False, False)
    assert t.checks[-1] == "driver 580.95.05 also runs the old CUDA 13.0.2 between the driver and CUDA layers"
    t = transition(COMPAT, _vs("a", cuda="13.0.2"), _vs("b", cuda="13.0.0", driver="580.82.07"), False, False)
    assert t.checks == ["driver 580.82.07 satisfies CUDA 13.0.0 (needs >= 580.65.06)"]
    t = transition(COMPAT, _vs("a", cuda="11.8.0"), _vs("b", cuda="13.0.0"), False, False)
    assert t.checks == ["driver 580.95.05 satisfies CUDA 13.0.0 (needs >= 580.65.06)"]


def test_transition_to_json_of_problems_and_hops():
    t = Transition(slurm=[SlurmHop("25.11.7", "25.11")], apiserver=["1.34"], kubelet=["1.34.2"], checks=["c"],
                   refusals=[Problem("r", "m")], warnings=[Problem("w", "n", "h")])
    assert t.to_json() == {"slurm_path": [{"version": "25.11.7", "major": "25.11", "order": list(ORDER)}],
                           "apiserver_path": ["1.34"], "kubelet_path": ["1.34.2"], "checks": ["c"],
                           "refusals": [{"code": "r", "message": "m", "hint": ""}],
                           "warnings": [{"code": "w", "message": "n", "hint": "h"}]}


def test_slurm_path_gives_up_after_twenty_hops():
    # 40.05 -> 41.05 -> ... -> 62.05, each major accepting only the one before it: 22 hops are needed,
    # the search takes 20 (40.05 -> 60.05) and stops with a problem instead of going on
    chain = tuple(SlurmRelease(major=f"{m}.05", released=f"20{m - 20}-05-01", compatible_prior=(f"{m - 1}.05",),
                               latest=f"{m}.05.1") for m in range(41, 63))
    path, problems = slurm_path(Compat(slurm=chain), "40.05.1", "62.05.1")
    assert [h.version for h in path] == [f"{m}.05.1" for m in range(41, 61)]
    assert problems == [Problem("slurm-no-path", "no upgrade path from Slurm 40.05 to 62.05", "")]


def test_transition_kubelets_in_two_steps():
    # five minors: the API server passes each, kubelets (at most 3 minors behind) move twice
    t = transition(COMPAT, _vs("a", kubernetes="1.30.1"), _vs("b", kubernetes="1.35.0"), False, True)
    assert (t.apiserver, t.kubelet) == (["1.31", "1.32", "1.33", "1.34", "1.35.0"], ["1.33", "1.35.0"])
    assert t.checks[0] == ("Kubernetes API server 1.30.1 -> 1.31 -> 1.32 -> 1.33 -> 1.34 -> 1.35.0 (one minor at a "
                           "time); kubelets follow: 1.33 -> 1.35.0")


# --------------------------------------------------------------------------- duration estimate


def test_estimate_lays_the_stages_end_to_end_with_the_timing(lab):
    from clusterdef.plan import estimate

    stages = [{"name": "prepare", "kind": "prepare", "nodes": 0},
              {"name": "canary", "kind": "canary", "nodes": 2, "provisioning": "stateless"},
              {"name": "rollback drill", "kind": "rollback-drill", "nodes": 2, "provisioning": "stateless"},
              {"name": "wave 1", "kind": "wave", "nodes": 2, "provisioning": "stateful"},
              {"name": "wave 2", "kind": "wave", "nodes": 2, "services": ["slurmctld"]}]
    d = lab_with(lab)
    est = estimate.estimate(stages, d.upgrade, estimate.gpu_nodes(d))
    # defaults: drain 120, image boot 10, reboot 15, gates 20, a cluster-wide step or service wave 5
    assert [(x["start"], x["minutes"], x["nodes_down"]) for x in est["timeline"]] == [
        (0, 5, 0), (5, 150, 2), (155, 40, 2), (195, 155, 2), (350, 5, 0)]
    assert (est["minutes"], est["gpu_nodes"], est["lowest_nodes"]) == (355, 8, 6)
    slow = lab_with(lab, timing={"reboot_minutes": 45, "gates_minutes": 0}, drain={"timeout_minutes": 30})
    assert estimate.estimate(stages[3:4], slow.upgrade, 8)["minutes"] == 30 + 45
    lines = estimate.chart(est, points=4)
    assert lines[:2] == ["```mermaid", "xychart-beta"] and lines[-1] == "```"
    assert 'title "GPU nodes in service, estimate 5 h 55 min"' in lines[2]
    assert lines[3] == '  x-axis "hours from the start" [0.0, 1.5, 3.0, 4.4]' and lines[5] == "  line [6, 6, 6, 6]"
    assert estimate.duration(0) == "0 min" and estimate.duration(1500) == "1 d 1 h"


def test_driver_pool_playbook_holds_and_releases_by_node_name_as_argv():
    """playbooks/driver-pool.yml, read as data: the hold labels each node of -e clusterdef_driver_hold with the
    upgrade controller's skip label, the release removes it from each node of -e clusterdef_driver_release, then
    waits for each node's upgrade state (done or failed) and fails naming the failed ones. kubectl gets argv
    lists whose node item is the loop's extra-var item alone (never a string a shell would split), the label keys
    are the ones the renderer names (gpu_operator.UPGRADE_SKIP, UPGRADE_STATE), the names are checked first,
    and no task of the play goes through a shell."""
    import re
    from pathlib import Path

    from ruamel.yaml import YAML

    from clusterdef.render.kubernetes.gpu_operator import UPGRADE_DONE, UPGRADE_FAILED, UPGRADE_SKIP, UPGRADE_STATE

    play = YAML(typ="safe", pure=True).load(
        (Path(__file__).resolve().parent.parent / "playbooks/driver-pool.yml").read_text())[0]
    tasks = play["tasks"]
    assert not [t["name"] for t in tasks if {"ansible.builtin.shell", "shell", "ansible.builtin.raw", "raw",
                                            "command", "ansible.builtin.script"} & set(t)]
    for t in tasks:
        cmd = t.get("ansible.builtin.command")
        if cmd:
            assert set(cmd) <= {"argv", "stdin"} and isinstance(cmd["argv"], list), t["name"]
    by_loop = {t.get("loop", ""): t for t in tasks if "ansible.builtin.command" in t}
    hold = by_loop["{{ clusterdef_driver_hold | default([]) }}"]
    assert hold["ansible.builtin.command"]["argv"] == ["{{ driver_pool_kubectl }}", "label", "--overwrite", "node",
                                                       "{{ item }}", f"{UPGRADE_SKIP}=true"]
    release = [t for t in tasks if t.get("loop") == "{{ clusterdef_driver_release | default([]) }}"]
    assert [t["ansible.builtin.command"]["argv"][:5] for t in release] == [
        ["{{ driver_pool_kubectl }}", "label", "node", "{{ item }}", f"{UPGRADE_SKIP}-"],
        ["{{ driver_pool_kubectl }}", "get", "node", "{{ item }}", "--output"]]
    wait = release[1]
    assert wait["ansible.builtin.command"]["argv"][5] == \
        "jsonpath={.metadata.labels." + UPGRADE_STATE.replace(".", "\\.", 1) + "}"
    assert wait["until"] == f"driver_pool_release_state.stdout in ['{UPGRADE_DONE}', '{UPGRADE_FAILED}']"
    assert tasks.index(release[0]) < tasks.index(wait)
    fail = next(t for t in tasks if "ansible.builtin.fail" in t)
    assert tasks.index(fail) > tasks.index(wait)
    assert f"selectattr('stdout', 'equalto', '{UPGRADE_FAILED}')" in fail["vars"]["driver_pool_failed"]
    assert "map(attribute='item')" in fail["vars"]["driver_pool_failed"]  # the message names the nodes
    checks = tasks[0]["ansible.builtin.assert"]["that"]
    assert tasks[0] is next(t for t in tasks if "ansible.builtin.assert" in t)
    node = "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
    for var in ("clusterdef_driver_hold", "clusterdef_driver_release"):
        assert f"({var} | default([])) | reject('match', '{node}') | list == []" in checks
    assert re.match(node, "gpu3077") and not re.match(node, "gpu1 --all") and not re.match(node, "-l=x")
