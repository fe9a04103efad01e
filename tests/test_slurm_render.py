"""The Slurm target's renderers without daemons: every emitted key exists in the keyword
lists of the set's Slurm major, the shapes the definition asks for, and the render time
of the large example."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef.model import Definition
from clusterdef.render import slurm as slurm_target
from clusterdef.knowledge import slurm as keywords
from clusterdef.resolve import resolve
from conftest import CLUSTERS, MATRICES

SETS = sorted(p.stem for p in (MATRICES / "sets").glob("*.yaml"))
EXAMPLES = ("lab", "estate")
REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "slurm"


@pytest.fixture(scope="module")
def examples() -> dict[str, dict]:
    return {n: YAML(typ="safe").load((CLUSTERS / f"{n}.yaml").read_text()) for n in EXAMPLES}


def render(data: dict, matrix, set_name: str | None = None) -> dict[str, str]:
    data = copy.deepcopy(data)
    if set_name:
        data["cluster"]["matrix"] = set_name
        data["cluster"]["allow_candidate"] = True
    return slurm_target.render(resolve(Definition.model_validate(data), matrix, CLUSTERS))


def keys_of(line: str) -> list[str]:
    return [tok.split("=", 1)[0] for tok in line.split() if "=" in tok]


def body(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("set_name", SETS)
def test_every_emitted_key_exists_for_the_major(example, set_name, examples, matrix):
    tree = render(examples[example], matrix, set_name)
    major = matrix.sets[set_name].slurm_major
    kw = keywords.for_major(major)
    assert kw is not None and keywords.release_for(major).startswith(major), (major, kw and kw.version)
    bad = []
    for line in body(tree["slurm/slurm.conf"]):
        first = keys_of(line)[0]
        table = {"NodeName": kw.node, "PartitionName": kw.partition, "NodeSet": kw.nodeset}.get(first)
        if table is None:
            assert len(keys_of(line)) == 1, line
            table = kw.parameters
        bad += [(line, k) for k in keys_of(line) if k.lower() not in table]
    for line in body(tree["slurm/cgroup.conf"]):
        bad += [(line, k) for k in keys_of(line) if k.lower() not in kw.cgroup]
    for line in body(tree["slurm/gres.conf"]):
        bad += [(line, k) for k in keys_of(line) if k.lower() not in kw.gres]
    topo = tree.get("slurm/topology.conf")
    if topo:
        plugin = next(ln.split("/")[1] for ln in body(tree["slurm/slurm.conf"]) if ln.startswith("TopologyPlugin="))
        for line in body(topo):
            bad += [(line, k) for k in keys_of(line) if k.lower() not in kw.topology[plugin]]
    assert not bad, f"keys unknown to Slurm {kw.version}: {bad}"


def test_nearest_older_list():
    assert keywords.release_for("25.05") == "25.05.8"
    assert keywords.release_for("24.08") == "24.05.8"  # no such major: the nearest older list
    assert keywords.release_for("27.05") == "26.05.3"
    assert keywords.release_for("21.08") is None
    assert "blocksizes" in keywords.for_major("24.11").topology["block"]
    assert "block" not in keywords.for_major("22.05").topology


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="shared/reference is not beside the checkout")
def test_keyword_copies_match_the_reference():
    """The packaged lists are exact copies of the reference data, .source included; the plugin lists,
    which the reference lacks, were extracted from the same SchedMD/slurm tag and commit."""
    pkg = Path(keywords.__file__).parent / "slurm_keywords"
    for version in keywords.available():
        for f in (pkg / version).iterdir():
            if f.name.startswith("plugins.txt"):
                continue
            assert f.read_bytes() == (REFERENCE / version / f.name).read_bytes(), f"{version}/{f.name}"
        tag = (REFERENCE / version / "slurm.conf.parameters.accepted.txt.source").read_text()
        mine = (pkg / version / "plugins.txt.source").read_text()
        for field in ("tag", "commit"):
            assert re.search(rf"^{field}: (\S+)", mine, re.M)[1] == re.search(rf"^{field}: (\S+)", tag, re.M)[1]


def test_spine_above_a_kubernetes_only_leaf_is_kept(examples, matrix):
    """A leaf with no Slurm node gets no line, and must not hold back the spine above it."""
    data = copy.deepcopy(examples["lab"])
    switches = data["network"]["fabrics"]["ib0"]["topology"]["switches"]
    switches.update(leaf02={"nodes": "gpu[003-004]"}, leaf03={"nodes": "kgpu[01-02]"},
                    spine01={"switches": "leaf[01-03]"})
    topo = render(data, matrix)["slurm/topology.conf"]
    assert "SwitchName=spine01 Switches=leaf[01-02]\n" in topo
    assert "leaf03" not in topo


def test_lab_tree_shapes(examples, matrix):
    tree = render(examples["lab"], matrix)
    assert set(tree) == {f"slurm/{n}" for n in
                         ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf", "qos.sh", "accounts.cfg", "nodecheck", "job_submit.lua",
                                   "namespace.yaml", "slurmdbd.conf.j2")}  # namespace.yaml: a dedicated tenant
    conf = tree["slurm/slurm.conf"]
    assert "NodeName=gpu[001-004] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2" in conf
    assert "Gres=gpu:h100:8" in conf and "GresTypes=gpu\n" in conf and "SelectType=select/cons_tres\n" in conf
    assert "kgpu" not in conf + tree["slurm/topology.conf"], "Kubernetes-owned nodes must not be in Slurm's config"
    assert "PartitionName=train Nodes=train Default=YES MaxTime=2-00:00:00 PriorityTier=1 QOS=normal" in conf
    assert "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n" in conf
    assert "HealthCheckProgram=/usr/sbin/clusterdef-nodecheck\nHealthCheckInterval=300\n" in conf
    assert tree["slurm/gres.conf"].splitlines()[-2:] == ["NodeName=gpu[001-004] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
                                                         "NodeName=sgpu[01-02] Name=gpu Type=h100 File=/dev/nvidia[0-7]"]
    cg = tree["slurm/cgroup.conf"]
    assert all(f"{k}=yes" in cg for k in ("ConstrainDevices", "ConstrainCores", "ConstrainRAMSpace"))
    assert "SwitchName=spine01 Switches=leaf[01-02]" in tree["slurm/topology.conf"]
    acc = tree["slurm/accounts.cfg"]
    # vision: reserved 16 + burst 8; its Kueue queue can hold 8 on Kubernetes (nominal 8; its borrowing limit of 8
    # can borrow nothing: nlp-serve lends 0 and the flavor is full), Slurm the other 16, and 8 of its reservation
    assert ("Account - 'vision':Description='vision':Organization='vision':Fairshare=8:GrpTRES=gres/gpu=16:"
            "QOS='normal,large':DefaultQOS='normal'\n") in acc
    qos = tree["slurm/qos.sh"]
    # normal jobs are preempted by `large` with requeue: the mode belongs to the preempted QOS in Slurm
    assert "name=normal set Priority=10 MaxTRESPerUser=gres/gpu=32" in qos and "PreemptMode=requeue" in qos
    assert "name=large set Priority=100 MaxTRESPerUser=gres/gpu=-1 MaxWall=-1 Preempt=normal" in qos


def test_passthrough_wins_and_keeps_case(examples, matrix):
    data = copy.deepcopy(examples["lab"])
    data["slurm"]["passthrough"] = {"schedulertype": "sched/builtin", "MaxArraySize": 4001, "EnforcePartLimits": True}
    conf = render(data, matrix)["slurm/slurm.conf"]
    assert "schedulertype=sched/builtin\n" in conf and "SchedulerType=" not in conf
    assert "MaxArraySize=4001\n" in conf and "EnforcePartLimits=YES\n" in conf


def test_no_gpus_no_gres(examples, matrix):
    data = copy.deepcopy(examples["lab"])
    data["hardware"]["hgx-h100"].pop("gpu")
    data["kubernetes"] = None
    tree = render(data, matrix)
    assert "slurm/gres.conf" not in tree and "GresTypes" not in tree["slurm/slurm.conf"]
    # no GPU: kernel and slurmd only, the InfiniBand ports, and no GPU health checks
    assert ("expect_train() {\n  echo version kernel 6.8.0-60-generic\n  echo version slurm 25.11.7\n"
            "  echo 'ib 8 400'\n}") in tree["slurm/nodecheck"]


def test_nested_tenant_accounts(examples, matrix):
    data = copy.deepcopy(examples["lab"])
    data["tenants"]["nlp"]["slurm"]["parent"] = "research"
    data["tenants"]["vision"]["slurm"]["parent"] = "nlp"
    data["tenants"]["vision"]["slurm"]["users"] = ["alice", "bob"]
    acc = render(data, matrix)["slurm/accounts.cfg"].splitlines()
    order = [ln.split("'")[1] for ln in acc if ln.startswith(("Account", "Parent"))]
    assert order == ["root", "research", "secure", "research", "nlp", "nlp", "vision", "vision"], order
    assert "User - 'alice':DefaultAccount='vision'" in acc


def test_estate_slurm_conf_stays_folded(examples, matrix):
    """4,096 nodes must not mean 4,096 lines (render time: benchmarks/bench_render.py)."""
    d = Definition.model_validate(examples["estate"])
    tree = slurm_target.render(resolve(d, matrix, CLUSTERS))
    lines = tree["slurm/slurm.conf"].splitlines()
    assert len(lines) < 120
    assert sum(ln.startswith("NodeName=") for ln in lines) == len(d.groups_of("slurm"))


def test_topology_block_needs_a_major_with_it(examples, matrix):
    """A set on Slurm 22.05 (no topology/block): the block fabric is refused, the tree is not."""
    import dataclasses
    from datetime import date

    from clusterdef.validate.registry import Context, run_checks

    vs = matrix.sets["2026.07-r580"]
    old = vs.model_copy(update={"name": "old-2205", "components": vs.components.model_copy(update={"slurm": "22.05.8"})})
    m = dataclasses.replace(matrix, sets={**matrix.sets, "old-2205": old})
    data = copy.deepcopy(examples["lab"])
    data["cluster"]["matrix"] = "old-2205"
    tree_codes = {f.code for f in run_checks(Context(Definition.model_validate(data), m, date(2026, 11, 30)))}
    assert "slurm-topology-unsupported" not in tree_codes
    data["network"]["fabrics"]["ib0"]["topology"] = {"kind": "block", "blocks": {"su1": {"nodes": "gpu[001-004]"}}}
    found = [f for f in run_checks(Context(Definition.model_validate(data), m, date(2026, 11, 30)))
             if f.code == "slurm-topology-unsupported"]
    assert found and found[0].path == ("network", "fabrics", "ib0", "topology", "kind"), found
    assert "slurm/topology.conf" not in slurm_target.render(resolve(Definition.model_validate(data), m, CLUSTERS))


@pytest.mark.parametrize("set_name", SETS)
def test_per_job_tmp_config_follows_the_sets_slurm(examples, matrix, set_name):
    """A dedicated tenant's private /tmp and /dev/shm: job_container/tmpfs and job_container.conf up
    to 25.05, namespace/linux and namespace.yaml from 25.11, each key documented in that file's
    man page (job_container.conf(5), namespace.yaml(5)), with PrologFlags=Contain."""
    tree = render(examples["lab"], matrix, set_name)
    conf = tree["slurm/slurm.conf"]
    assert "PrologFlags=Contain\n" in conf
    major = tuple(int(x) for x in matrix.sets[set_name].components.slurm.split(".")[:2])
    new = major >= (25, 11)
    if new:
        assert "NamespaceType=namespace/linux\n" in conf and "JobContainerType" not in conf
        assert "slurm/job_container.conf" not in tree
        doc = YAML(typ="safe").load(tree["slurm/namespace.yaml"])
        assert doc == {"defaults": {"auto_base_path": True, "base_path": "/var/lib/slurm/job_tmp", "dirs": "/tmp,/dev/shm"}}
        man = REFERENCE / "docs" / "namespace.yaml.5"
        keys = ["defaults", *doc["defaults"]]
    else:
        assert "JobContainerType=job_container/tmpfs\n" in conf and "NamespaceType" not in conf
        assert "slurm/namespace.yaml" not in tree
        lines = dict(ln.split("=", 1) for ln in body(tree["slurm/job_container.conf"]))
        assert lines == {"AutoBasePath": "true", "BasePath": "/var/lib/slurm/job_tmp"}
        man = REFERENCE / "docs" / "job_container.conf.5"
        keys = list(lines)
    if man.is_file():
        text = man.read_text()
        for key in keys:
            assert f"\\fB{key}\\f" in text, f"{key} is not in {man.name}"
