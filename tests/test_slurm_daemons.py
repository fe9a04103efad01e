"""The Slurm target on real Slurm daemons (../shared/TESTING.md): a slurmctld at least as
new as the set's Slurm major starts on the rendered config of both examples, for every
validated set, and `scontrol show partition/node/topology` shows exactly what the
definition says. Builds: the host's 22.05, trixie's 24.11 and sid's 26.05 (chroot). On the host's
22.05 with fake-GPU slurmds: jobs with GPUs, per-job /tmp, nodecheck's drains, and roles/node_drain
run by real ansible-playbook waiting for a running job."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterdef import hostlist
from clusterdef.model import Definition
from clusterdef.render import slurm as slurm_target
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, as_rail, dump_yaml
from slurm_helpers import Controller, Munge, Workdir, build_for, fake_gpu_slurmds

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_live, pytest.mark.slow]

SETS = sorted(p.stem for p in (MATRICES / "sets").glob("*.yaml"))


def with_set(data: dict, set_name: str, matrix) -> dict:
    data = copy.deepcopy(data)
    data["cluster"]["matrix"] = set_name
    data["cluster"]["allow_candidate"] = matrix.sets[set_name].status == "candidate"
    return data


def render(data: dict, matrix) -> tuple[Definition, dict[str, str]]:
    """The Slurm tree rendered by the library (no validation: the retired set is rendered too)."""
    d = Definition.model_validate(data)
    return d, slurm_target.render(resolve(d, matrix, CLUSTERS))


def expected(d: Definition) -> dict:
    """What scontrol must show, computed from the definition alone."""
    groups = d.groups_of("slurm")
    nodes = {}
    for g in groups.values():
        hw = d.hardware[g.hardware]
        for host in hostlist.names(g.hosts):
            nodes[host] = f"gpu:{hw.gpu.type}:{hw.gpu.count}" if hw.gpu else "(null)"
    parts = {}
    for pname, p in d.slurm.partitions.items():
        hosts = hostlist.union(groups[n].hosts for n in p.node_groups)
        parts[pname] = {"TotalNodes": str(len(hosts)), "Nodes": str(hosts), "Default": "YES" if p.default else "NO",
                        "MaxTime": p.max_time, "PriorityTier": str(p.priority_tier)}
    return {"nodes": nodes, "partitions": parts}


def slurm_time(t: str) -> str:
    """Definition time -> how scontrol prints it (D-HH:MM:SS / HH:MM:SS / MM:SS)."""
    if t in ("UNLIMITED", "INFINITE"):
        return "UNLIMITED"
    days, _, rest = t.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    if len(parts) == 1:
        secs = parts[0] * 60 if not days else parts[0] * 3600
    elif len(parts) == 2:
        secs = parts[0] * 60 + parts[1] if not days else parts[0] * 3600 + parts[1] * 60
    else:
        secs = parts[0] * 3600 + parts[1] * 60 + parts[2]
    secs += int(days or 0) * 86400
    d, r = divmod(secs, 86400)
    h, r = divmod(r, 3600)
    m, s = divmod(r, 60)
    return f"{d}-{h:02}:{m:02}:{s:02}" if d else f"{h:02}:{m:02}:{s:02}"


@pytest.fixture
def controller(request):
    """Factory: controller(build) -> (Controller, work). Everything stops at teardown."""
    started = []

    def make(build, base: str = "/tmp"):
        work = Workdir(build, base=base)
        munge = Munge(work)
        ctl = Controller(build, work, munge)
        started.append((ctl, munge, work))
        munge.start()
        return ctl

    yield make
    for ctl, munge, work in started:
        ctl.stop()
        munge.stop()
        work.cleanup()


def check_against(ctl: Controller, d: Definition, tree: dict[str, str]) -> None:
    want = expected(d)
    nodes = {r["NodeName"]: r for r in ctl.records("node")}
    assert set(nodes) == set(want["nodes"]), "node names differ from the definition's Slurm hosts"
    for name, gres in want["nodes"].items():
        assert nodes[name]["Gres"] == gres, (name, nodes[name]["Gres"])
    for name, r in list(nodes.items())[:3]:
        hw = d.hardware[next(g.hardware for g in d.groups_of("slurm").values() if name in hostlist.parse(g.hosts))]
        assert r["CPUTot"] == str(hw.cpu.cpus) and r["Sockets"] == str(hw.cpu.sockets)
        assert r["CoresPerSocket"] == str(hw.cpu.cores_per_socket)

    parts = {r["PartitionName"]: r for r in ctl.records("partition")}
    assert set(parts) == set(want["partitions"])
    for pname, w in want["partitions"].items():
        got = parts[pname]
        assert got["TotalNodes"] == w["TotalNodes"], (pname, got["TotalNodes"], w["TotalNodes"])
        assert str(hostlist.parse(got["Nodes"])) == w["Nodes"]
        assert got["Default"] == w["Default"]
        assert got["MaxTime"] == slurm_time(w["MaxTime"]), (pname, got["MaxTime"])
        assert got["PriorityTier"] == w["PriorityTier"]
        allow = d.slurm.partitions[pname].allow_accounts
        assert got["AllowAccounts"] == (",".join(allow) if allow else "ALL")

    topo = tree.get("slurm/topology.conf")
    shown = ctl.scontrol("show", "topology")
    if topo is None:
        return
    assert shown_topology(shown) == expected_topology(d), shown[:3000]


def expected_topology(d: Definition) -> dict:
    """What `scontrol show topology` must show, from the definition alone (not the rendered file):
    tree: switch -> (Level, every Slurm node below it, child switches), keeping only the switches on
    a path to Slurm nodes; rail: the scalable units as level-0 switches, spines above them, cores
    above the spines; block (and rail as blocks): block -> ("block", its Slurm nodes, BlockSize) and
    each aggregated block -> ("aggregated", its nodes, BlockSize)."""
    ours = hostlist.union(g.hosts for g in d.groups_of("slurm").values())
    g = next(g for g in d.groups_of("slurm").values() if g.placement)
    topo = d.network.fabrics[g.placement.slurm_fabric].topology
    if topo.slurm_plugin == "block":
        blocks = [(n, hostlist.parse(x).intersection(ours)) for n, x in topo.units()]
        blocks = [(n, m) for n, m in blocks if m]
        base = topo.block_sizes[0] if topo.block_sizes else len(blocks[0][1])
        out = {n: ("block", str(m), base) for n, m in blocks}
        # aggregated blocks as Slurm's block_record_validate() forms them: levels 2^k (k from
        # BlockSizes, else 0..4) up to the first that covers every block; consecutive runs of 2^k
        # blocks, a short tail run kept only where the level below cannot hold it
        mults = sorted({size // base for size in topo.block_sizes} or {1, 2, 4, 8, 16})
        levels = []
        for mult in mults:
            levels.append(mult)
            if mult >= len(blocks):
                break
        for j in range(1, len(levels)):
            run: list[int] | None = None
            runs = []
            for i in range(len(blocks)):
                if i % levels[j] == 0:
                    left = len(blocks) - i
                    run = None if levels[j] > left and levels[j - 1] >= left else [i]
                    if run is not None:
                        runs.append(run)
                elif run is not None:
                    run.append(i)
            for r in runs:
                name = hostlist.fold([blocks[i][0] for i in r])
                out[name] = ("aggregated", str(hostlist.union(str(blocks[i][1]) for i in r)), base * levels[j])
        return out
    children: dict[str, list[str]] = {}
    nodes: dict[str, object] = {}
    if topo.kind == "rail":
        units = [n for n, nodes_ in topo.units() if hostlist.parse(nodes_).intersection(ours)]
        nodes.update({n: hostlist.parse(x).intersection(ours) for n, x in topo.units() if n in units})
        spines = hostlist.names(topo.spines) if topo.spines else ()
        children.update({s: units for s in spines})
        children.update({c: list(spines) for c in (hostlist.names(topo.cores) if topo.cores else ())})
    else:
        for name, sw in topo.switches.items():
            if sw.nodes:
                nodes[name] = hostlist.parse(sw.nodes).intersection(ours)
            if sw.switches:
                children[name] = list(hostlist.names(sw.switches))
    memo: dict[str, tuple] = {}

    def walk(name: str):
        if name not in memo:
            if name in children:
                kids = [(k, walk(k)) for k in children[name]]
                kids = [(k, v) for k, v in kids if v]
                memo[name] = (1 + max(v[0] for _, v in kids), hostlist.union(str(v[1]) for _, v in kids),
                              hostlist.fold([k for k, _ in kids])) if kids else None
            else:
                memo[name] = (0, nodes[name], None) if nodes.get(name) else None
        return memo[name]

    out = {}
    for name in list(nodes) + list(children):
        v = walk(name)
        if v:
            out[name] = (v[0], str(v[1]), v[2])
    return out


def shown_topology(shown: str) -> dict:
    """`scontrol show topology` as expected_topology has it, hostlists folded the same way."""
    out = {}
    for ln in shown.splitlines():
        rec = dict(kv.split("=", 1) for kv in ln.split() if "=" in kv)
        if "SwitchName" in rec:
            kids = rec.get("Switches", "(null)")
            out[rec["SwitchName"]] = (int(rec["Level"]), str(hostlist.parse(rec["Nodes"])),
                                      None if kids in ("(null)", "") else hostlist.fold(hostlist.names(kids)))
        elif "BlockName" in rec:
            out[rec["BlockName"]] = ("block", str(hostlist.parse(rec["Nodes"])), int(rec["BlockSize"]))
        elif "AggregatedBlock" in rec:
            name = hostlist.fold(hostlist.names(rec["AggregatedBlock"]))
            out[name] = ("aggregated", str(hostlist.parse(rec["Nodes"])), int(rec["BlockSize"]))
    return out


@pytest.mark.parametrize("set_name", SETS)
def test_lab_on_every_set(set_name, lab, matrix, controller, tmp_path):
    data = with_set(lab, set_name, matrix)
    result = validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, TODAY)
    if matrix.sets[set_name].status == "retired":
        # The validator refuses a retired set; its rendered config is still exercised below. The retired
        # set also predates pinning DOCA-OFED/MFT, which the lab's image carries (image-source-missing)
        # and its pods' RDMA uses as host MOFED (rdma-no-mofed): refused for that reason too.
        codes = {f.code for f in result.errors}
        assert "matrix-retired" in codes and codes <= {"matrix-retired", "image-source-missing", "rdma-no-mofed"}, \
            [(f.code, f.message) for f in result.errors]
    else:
        assert result.ok, [(f.code, f.message) for f in result.errors]
    d, tree = render(data, matrix)
    ctl = controller(build_for(matrix.sets[set_name].slurm_major))
    ctl.write(tree)
    ctl.start()
    assert f"slurmctld version {ctl.build.version}" in ctl.log() or ctl.build.version in ctl.scontrol("version")
    check_against(ctl, d, tree)
    assert "fatal" not in ctl.log().lower()
    assert "topology: warning" not in ctl.log()


def test_estate_on_its_set(matrix, controller):
    import ruamel.yaml

    data = ruamel.yaml.YAML(typ="safe").load((CLUSTERS / "estate.yaml").read_text())
    result = validate_file(CLUSTERS / "estate.yaml", MATRICES, TODAY)
    assert result.ok
    d, tree = render(data, matrix)
    ctl = controller(build_for(matrix.sets[d.cluster.matrix].slurm_major))
    ctl.write(tree)
    ctl.start(timeout=120)
    check_against(ctl, d, tree)
    assert len(tree["slurm/slurm.conf"].splitlines()) < 120


@pytest.mark.parametrize("set_name", ["2025.01-r550", "2026.11-r595-candidate"])
def test_block_topology(set_name, lab, matrix, controller):
    """The lab's fabric as two scalable units: Slurm's topology/block shows the blocks."""
    data = with_set(lab, set_name, matrix)
    data["network"]["fabrics"]["ib0"]["topology"] = {
        "kind": "block", "block_sizes": [3, 6],
        "blocks": {"su1": {"nodes": "gpu[001-002],sgpu01"}, "su2": {"nodes": "gpu[003-004],kgpu[01-02],sgpu02"}}}
    d, tree = render(data, matrix)
    assert "BlockName=su2 Nodes=gpu[003-004],sgpu02\n" in tree["slurm/topology.conf"]
    ctl = controller(build_for(matrix.sets[set_name].slurm_major))
    ctl.write(tree)
    ctl.start()
    shown = ctl.scontrol("show", "topology")
    assert "BlockName=su1" in shown and "BlockName=su2" in shown, shown
    check_against(ctl, d, tree)


def test_gb200_nvlink_blocks(matrix, controller):
    """clusters/gb200.yaml: Slurm's topology/block has one block per NVL72 rack (18 trays) with the
    Slurm racks aggregated into one block of 36 (BlockSizes=18,36), on real slurmctld."""
    import ruamel.yaml

    data = ruamel.yaml.YAML(typ="safe").load((CLUSTERS / "gb200.yaml").read_text())
    assert validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY).ok
    d, tree = render(data, matrix)
    ctl = controller(build_for(matrix.sets[d.cluster.matrix].slurm_major))
    ctl.write(tree)
    ctl.start()
    assert expected_topology(d) == {"rack01": ("block", "gb[001-018]", 18), "rack02": ("block", "gb[019-036]", 18),
                                    "rack[01-02]": ("aggregated", "gb[001-036]", 36)}
    check_against(ctl, d, tree)
    assert "fatal" not in ctl.log().lower()


@pytest.mark.parametrize("major, sizes, blocks, code, fatal", [
    ("25.11", [3, 9], None, "block-sizes-invalid", "Invalid BlockSizes"),
    ("24.11", [4], None, "block-too-small", "children count lower than bblock_node_cnt"),
    ("25.11", None, {"su1": {"nodes": "gpu[001-002]"}, "su2": {"nodes": "gpu[003-004],kgpu[01-02],sgpu[01-02]"}},
     "block-too-small", None),  # no BlockSizes: the first block's 2 nodes are the base, fine
], ids=["not-doubling", "block-below-base", "first-block-is-base"])
def test_block_sizes_checks_match_slurmctld(major, sizes, blocks, code, fatal, lab, matrix, controller, tmp_path):
    """What slurm-block-sizes refuses is what slurmctld refuses: it stops with the fatal message.
    (A block below the base size is fatal for 24.11; 26.05 starts and shows it with a BlockSize it
    cannot hold, so the check stays an error for every major.)"""
    data = with_set(lab, "2026.07-r580", matrix)
    topo = {"kind": "block", "blocks": blocks or {
        "su1": {"nodes": "gpu[001-002],sgpu01"}, "su2": {"nodes": "gpu[003-004],kgpu[01-02],sgpu02"}}}
    if sizes:
        topo["block_sizes"] = sizes
    data["network"]["fabrics"]["ib0"]["topology"] = topo
    result = validate_file(dump_yaml(data, tmp_path / "def.yaml"), MATRICES, TODAY)
    codes = {f.code for f in result.errors}
    d, tree = render(data, matrix)
    ctl = controller(build_for(major))
    ctl.write(tree)
    if fatal is None:
        assert code not in codes, codes
        ctl.start()
        check_against(ctl, d, tree)
        return
    assert code in codes, codes
    with pytest.raises(AssertionError):
        ctl.start(timeout=20)
    assert fatal in ctl.log() + (ctl.work.host / "slurmctld.out").read_text(errors="replace")


@pytest.mark.parametrize("plugin", ["tree", "block"])
def test_rail_topology(plugin, lab, matrix, controller):
    """The lab as two rail-optimised scalable units (conftest.as_rail): Slurm sees each unit as one
    leaf switch under both spines (tree), or as one block (block); never the 16 rail leaves."""
    data = as_rail(with_set(lab, "2026.07-r580", matrix))
    if plugin == "block":
        data["network"]["fabrics"]["ib0"]["topology"].update(slurm="block", block_sizes=[3, 6])
    d, tree = render(data, matrix)
    assert "rail" not in tree["slurm/topology.conf"].split("\n", 2)[2]
    assert f"TopologyPlugin=topology/{plugin}" in tree["slurm/slurm.conf"]
    ctl = controller(build_for(matrix.sets["2026.07-r580"].slurm_major))
    ctl.write(tree)
    ctl.start()
    want = expected_topology(d)
    if plugin == "tree":
        assert want["spine02"] == (1, "gpu[001-004],sgpu[01-02]", "su[1-2]") and want["su1"][0] == 0
    else:
        assert want["su[1-2]"] == ("aggregated", "gpu[001-004],sgpu[01-02]", 6)
    check_against(ctl, d, tree)
    assert "topology: warning" not in ctl.log().lower() and "multiple leaf switches" not in ctl.log().lower()


def _probes(folder, values: dict[str, list[str]]):
    folder.mkdir()
    for comp, lines in values.items():
        p = folder / comp
        p.write_text("#!/bin/sh\n" + "".join(f"echo '{v}'\n" for v in lines))
        p.chmod(0o755)
    return folder


def test_nodecheck_drains_off_matrix_node(lab, matrix, controller, tmp_path):
    """The rendered health check against a real slurmctld, on stand-in HGX nodes (stand-in nvidia-smi,
    ibstat, dmesg, ... with real output shapes, read through the shared probe): each failed check drains
    its node with a reason naming the check, the healthy node is left alone, the repaired node is resumed,
    and a drain someone else set is not lifted."""
    import shlex
    import subprocess

    from clusterdef.probe import script as probe_script
    from standin_node import dgx_h100, install

    d, tree = render(lab, matrix)
    vs = matrix.sets[d.cluster.matrix]
    ctl = controller(build_for(vs.slurm_major))
    ctl.write(tree)
    ctl.start()
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\nexec " + shlex.join(ctl.build.argv("scontrol")) + ' "$@"\n')
    scontrol.chmod(0o755)
    script = tmp_path / "nodecheck"
    script.write_text(tree["slurm/nodecheck"])
    probe = tmp_path / "probe"
    probe.write_text(probe_script())

    def standin(name, change=None):
        node = dgx_h100(vs, "hgx-h100")
        node["kernel_log"] = []
        if change:
            change(node)
        folder = install(tmp_path / name, node)
        (folder / "scontrol").unlink()  # the real one
        (folder / "uname").write_text(f"#!/bin/sh\necho {d.images['gpu-node'].kernel}\n")
        (folder / "uname").chmod(0o755)
        return folder

    def run(host, folder):
        env = {**ctl.env, "PATH": f"{folder}:/usr/sbin:/usr/bin:/sbin:/bin", "CLUSTERDEF_NODECHECK_NODE": host,
               "CLUSTERDEF_NODECHECK_PROBE": str(probe), "CLUSTERDEF_NODECHECK_SCONTROL": str(scontrol),
               "CLUSTERDEF_NODECHECK_STATE": str(tmp_path / "nodecheck-state" / host)}
        return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)

    def node(name):
        return {r["NodeName"]: r for r in ctl.records("node")}[name]

    good = standin("good")
    ok = run("gpu001", good)
    assert ok.returncode == 0 and "not a Slurm node" not in ok.stderr, ok.stderr
    assert "DRAIN" not in node("gpu001")["State"] and node("gpu001").get("Reason", "") in ("", "(null)", "None")
    broken = {
        "gpu002": (lambda n: n["gpus"][7].update(vbios="96.00.99.00.01"),
                   "clusterdef-nodecheck: version: gpu_vbios gpu7(00000000:db:00.0) 96.00.99.00.01, set "
                   f"{vs.name} pins {vs.firmware['hgx-h100']['gpu_vbios']}"),
        "gpu003": (lambda n: n["kernel_log"].append("[ 99.1] NVRM: Xid (PCI:0000:3a:00): 48, pid=7, DBE (0x1) ECC"),
                   "clusterdef-nodecheck: xid: Xid 48 (WORKFLOW_XID_48) on PCI:0000:3a:00 since boot"),
        "sgpu01": (lambda n: n["hcas"][2].update(ports=[("Init", 400, "InfiniBand")]),
                   "clusterdef-nodecheck: ib: 7 of 8 InfiniBand ports Active at 400 Gb/s (mlx5_2/1 Init@400)"),
    }
    for host, (change, reason) in broken.items():
        r = run(host, standin(host, change))
        assert r.returncode == 1, r.stderr
        assert "DRAIN" in node(host)["State"], node(host)
        assert node(host)["Reason"].split(" [")[0] == reason, node(host)["Reason"]  # slurmctld appends [user@time]
    # A drain someone else set is not lifted; the repaired node that this check drained is.
    ctl.scontrol("update", "NodeName=gpu004", "State=DRAIN", "Reason=disk replaced")
    assert run("gpu004", good).returncode == 0
    assert "DRAIN" in node("gpu004")["State"] and node("gpu004")["Reason"].startswith("disk replaced")
    assert run("gpu002", good).returncode == 0
    assert "DRAIN" not in node("gpu002")["State"], node("gpu002")


def _on_host_slurm(matrix, set_name: str, version: str):
    """A copy of the matrix whose set runs the host's Slurm version (a 22.05 cluster)."""
    import dataclasses

    vs = matrix.sets[set_name]
    return dataclasses.replace(matrix, sets={**matrix.sets, set_name: vs.model_copy(
        update={"components": vs.components.model_copy(update={"slurm": version})})})


def test_live_fake_cluster(lab, matrix, controller, tmp_path):
    """slurmctld + one slurmd per lab node (host Slurm, config rendered for its major) with
    fake /dev/nvidia* in a private mount namespace: nodes go IDLE, a 2-node job with
    --gres=gpu:h100:2 runs, and cgroups refuse a GPU the job was not given."""
    from slurm_helpers import free_port, host_build, stop, wait_for

    build = host_build()
    m = _on_host_slurm(matrix, lab["cluster"]["matrix"], build.version)
    d, tree = render(lab, m)
    assert f"for Slurm {build.major}" in tree["slurm/slurm.conf"]
    hosts = [h for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)]
    ctl = controller(build)
    ports = {h: free_port() for h in hosts}
    ctl.write(tree, node_ports=ports)
    ctl.start()
    gpus = d.hardware["hgx-h100"].gpu.count
    w = ctl.work
    slurmds = fake_gpu_slurmds(build, ctl.env, w.host, hosts, gpus)
    try:
        def idle():
            r = build.run("sinfo", "-h", "-N", "-o", "%N %T", env=ctl.env, check=False)
            states = dict(ln.split() for ln in r.stdout.splitlines() if ln.strip())
            return states and all(states.get(h, "").startswith("idle") for h in hosts)
        wait_for(idle, 60, "all lab nodes IDLE", slurmds, w.host / "slurmd.out")
        gres = f"gpu:{d.hardware['hgx-h100'].gpu.type}:2"
        r = build.run("srun", "-N2", "-n2", f"--gres={gres}", "-p", "train", "-t", "1",
                      "sh", "-c", 'echo "$(hostname) $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"',
                      env=ctl.env, timeout=120, check=False)
        assert r.returncode == 0, r.stderr + "".join(
            f"\n== {p.name}\n" + p.read_text(errors="replace")[-1500:] for p in sorted(w.host.glob("slurmd-*.log")))
        assert len(r.stdout.splitlines()) == 2, r.stdout + r.stderr
        assert [ln.split()[-1] for ln in r.stdout.splitlines()] == ["0,1", "0,1"], r.stdout
        assert len({ln.split()[1] for ln in r.stdout.splitlines()}) == 2, r.stdout
        # One GPU given: opening it reaches the (absent) driver, another is refused by the device cgroup.
        probe = ('for i in 0 5; do if exec 3</dev/nvidia$i; then echo "$i open"; '
                 'else echo "$i refused"; fi 2>&1; done')
        r = build.run("srun", "-N1", "--gres=gpu:1", "-p", "train", "-t", "1", "bash", "-c",
                      probe + ' 2>&1; echo "cvd=$CUDA_VISIBLE_DEVICES"', env=ctl.env, timeout=120, check=False)
        out = r.stdout + r.stderr
        assert "cvd=0" in out, out
        assert "Operation not permitted" in out and "/dev/nvidia5" in out, out
        assert "/dev/nvidia0: Operation not permitted" not in out, out
    finally:
        stop(slurmds)


def test_private_tmp_per_job(lab, matrix, controller):
    """The rendered per-job /tmp and /dev/shm on one slurmd (several slurmd on one host race on the
    plugin's base mount; one is what a real node runs): job_container/tmpfs with job_container.conf,
    rendered for the host's 22.05, and PrologFlags=Contain. Two jobs at once on one node each see
    only their own file in /tmp and /dev/shm, and neither reaches the node's.

    namespace/linux (from 25.11, namespace.yaml) is not run: the debootstrap roots of newer Slurm
    carry no slurmd (scripts/deps.d/20-slurm.sh), and with one built here (sid, slurmd 26.05.5
    in the chroot) the job's namespace was created but its step never started (srun hung);
    test_slurm_render checks namespace.yaml against namespace.yaml(5)."""
    from slurm_helpers import free_port, host_build, stop, wait_for

    build = host_build()
    d, tree = render(lab, _on_host_slurm(matrix, lab["cluster"]["matrix"], build.version))
    assert "JobContainerType=job_container/tmpfs\n" in tree["slurm/slurm.conf"]
    assert "BasePath=/var/lib/slurm/job_tmp\n" in tree["slurm/job_container.conf"]
    assert "PrologFlags=Contain\n" in tree["slurm/slurm.conf"]
    hosts = [h for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)]
    node = hosts[0]
    ctl = controller(build, base="/var/tmp")  # the job's /tmp is its own: spool and output elsewhere
    ctl.write(tree, node_ports={h: free_port() for h in hosts}, job_container=True)
    ctl.start()
    w = ctl.work
    slurmd = fake_gpu_slurmds(build, ctl.env, w.host, [node], d.hardware["hgx-h100"].gpu.count)
    try:
        def idle():
            r = build.run("sinfo", "-h", "-n", node, "-o", "%T", env=ctl.env, check=False)
            return r.stdout.strip().startswith("idle")
        wait_for(idle, 60, f"{node} IDLE", slurmd, w.host / "slurmd.out")
        out = w.path("job-%j.out")
        mark = f"{w.host.name}-$SLURM_JOB_ID"  # unique to this run, in case a file escaped to the node
        # Each job writes its file, says so in the work folder (not in /tmp, which is its own), and
        # lists /tmp and /dev/shm only once both jobs have written theirs: they overlap for sure.
        probe = (f'echo x > /tmp/{mark}; echo x > /dev/shm/{mark}; touch {w.path("started")}-$SLURM_JOB_ID; '
                 f'for i in $(seq 100); do [ $(ls {w.path("")} | grep -c ^started-) -ge 2 ] && break; sleep 0.2; done; '
                 'echo "tmp:$(ls /tmp | tr "\\n" " ")"; echo "shm:$(ls /dev/shm | tr "\\n" " ")"')
        slurmd_log = w.host / f"slurmd-{node}.log"

        def submit() -> str:
            # --chdir: the job starts in the work folder, which it sees; by default it starts in the submitter's
            # folder, and a checkout under /tmp is hidden by the job's own /tmp (slurmstepd then writes "couldn't
            # chdir ... going to /tmp instead" into the output this test compares exactly).
            r = build.run("sbatch", "--parsable", "--no-requeue", "-p", "train", "-w", node, "-t", "1", "--gres=gpu:1",
                          f"--chdir={w.inside}", "-o", out, "--wrap", probe, env=ctl.env)
            return r.stdout.strip().split(";")[0]

        def queued(job: str) -> bool:
            return job in build.run("squeue", "-h", "-o", "%i", env=ctl.env).stdout.split()

        ids, lost = [], []
        while len(ids) < 2:
            # The second is submitted once the first runs. Measured here (22.05, one slurmd in a private
            # mount namespace): about one job in two loses its container (`_create_ns: ns base mount
            # failed: Invalid argument`, binding /proc/PID/ns/mnt onto the holder file) and is killed
            # before its script runs; such a job is submitted again (at most 10 times).
            job = submit()
            started = w.host / f"started-{job}"
            wait_for(lambda started=started, job=job: started.exists() or not queued(job), 30, f"job {job} started",
                     slurmd, slurmd_log)
            if started.exists():
                ids.append(job)
                continue
            lost.append(job)
            log = slurmd_log.read_text(errors="replace")
            assert f"[{job}.extern] error: _create_ns: ns base mount failed" in log and len(lost) <= 10, log[-2000:]

        def done() -> bool:
            return all((w.host / f"job-{j}.out").exists() and "shm:" in (w.host / f"job-{j}.out").read_text()
                       for j in ids)
        wait_for(done, 30, "both jobs' output", slurmd, w.host / f"slurmd-{node}.log")
        for j in ids:
            text = (w.host / f"job-{j}.out").read_text()
            seen = {ln.split(":", 1)[0]: ln.split(":", 1)[1].split() for ln in text.splitlines() if ":" in ln}
            # its own file only: not the other job's (running at the same time), not the node's
            mine = [f"{w.host.name}-{j}"]
            assert seen == {"tmp": mine, "shm": mine}, text
        assert not any(build.host_path(f"{p}/{w.host.name}-{j}").exists() for p in ("/tmp", "/dev/shm") for j in ids)
        log = slurmd_log.read_text(errors="replace")
        assert not any(f"[{j}.extern] error" in log for j in ids), log[-2000:]
    finally:
        stop(slurmd)


class RoleOnSlurm:
    """A role run by real ansible-playbook (local connection, the lab's rendered inventory and group_vars)
    against slurmctld + one fake-GPU slurmd of the host's 22.05 for `node`: scontrol on PATH (the roles'
    default) reaches this cluster through SLURM_CONF; `path_first` goes before it on PATH."""

    def __init__(self, lab, matrix, controller, tmp_path, node: str = "gpu001", path_first: str = ""):
        from clusterdef.render.ansible.render import render as render_ansible
        from slurm_helpers import free_port, host_build

        self.ansible = Path(sys.executable).parent / "ansible-playbook"
        if not self.ansible.exists():
            pytest.skip("ansible-playbook is not installed")
        self.build = build = host_build()
        self.d, tree = render(lab, _on_host_slurm(matrix, lab["cluster"]["matrix"], build.version))
        self.node, self.tmp = node, tmp_path
        hosts = [h for g in self.d.groups_of("slurm").values() for h in hostlist.names(g.hosts)]
        self.ctl = controller(build)
        self.ctl.write(tree, node_ports={h: free_port() for h in hosts})
        self.ctl.start()
        for rel, text in render_ansible(resolve(self.d, matrix, CLUSTERS)).items():  # inventory, group_vars
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        assert (tmp_path / "ansible" / "group_vars" / "cp_slurm.yml").is_file()
        self.env = {**self.ctl.env, "ANSIBLE_ROLES_PATH": str(Path(__file__).resolve().parents[1] / "roles"),
                    "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "HOME": str(tmp_path),
                    "PATH": f"{path_first}:{self.ctl.env['PATH']}" if path_first else self.ctl.env["PATH"]}
        self.slurmd = fake_gpu_slurmds(build, self.ctl.env, self.ctl.work.host, [node],
                                       self.d.hardware["hgx-h100"].gpu.count)

    def wait_idle(self):
        from slurm_helpers import wait_for

        wait_for(lambda: self.record()["State"].startswith("IDLE"), 60, f"{self.node} IDLE", self.slurmd,
                 self.ctl.work.host / "slurmd.out")

    def record(self) -> dict:
        return next(r for r in self.ctl.records("node") if r["NodeName"] == self.node)

    def playbook(self, role: str, extra: dict, log: Path) -> subprocess.Popen:
        play = self.tmp / f"{role}.yml"
        play.write_text(f"- hosts: {self.node}\n  gather_facts: false\n  roles: [{role}]\n")
        extra = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **extra}
        return subprocess.Popen([str(self.ansible), "-i", str(self.tmp / "ansible"), str(play), "-e", json.dumps(extra)],
                                env=self.env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)

    def finished(self, role: str, extra: dict, name: str, rc: int = 0) -> str:
        from slurm_helpers import stop

        log = self.tmp / f"{name}.log"
        proc = self.playbook(role, extra, log)
        try:
            proc.wait(timeout=180)
        finally:
            stop(proc)
        assert proc.returncode == rc, log.read_text()[-4000:]
        return log.read_text()

    def stop(self):
        from slurm_helpers import stop

        stop(self.slurmd)


def test_node_drain_role_waits_for_the_running_job(lab, matrix, controller, tmp_path):
    """roles/node_drain against real slurmctld/slurmd: with a job running the node is ALLOCATED, the
    role drains it (DRAINING) and its wait loop keeps retrying until the job ends, then returns with the
    node DRAINED; `resumed` gives it back; a drain someone else set stays."""
    from slurm_helpers import stop, wait_for

    c = RoleOnSlurm(lab, matrix, controller, tmp_path)
    build, ctl, node, record = c.build, c.ctl, c.node, c.record
    drain = None
    try:
        c.wait_idle()
        release = ctl.work.host / "release"
        job = build.run("sbatch", "--parsable", "-p", "train", "-w", node, "-t", "2", "-o", "/dev/null", "--wrap",
                        f"while [ ! -e {release} ]; do sleep 0.2; done", env=ctl.env).stdout.strip().split(";")[0]
        wait_for(lambda: record()["State"] in ("ALLOCATED", "MIXED"), 30, f"job {job} running on {node}")
        drain_log = tmp_path / "drained.log"
        drain = c.playbook("node_drain", {"node_drain_state": "drained"}, drain_log)
        # the role drained the node; slurmctld keeps the job: DRAINING, shown as ALLOCATED+DRAIN
        wait_for(lambda: "DRAIN" in record()["State"], 60, "the role's scontrol update State=DRAIN", drain, drain_log)
        wait_for(lambda: "FAILED - RETRYING: [gpu001]: Wait until no job runs on the node" in drain_log.read_text(),
                 60, "the wait loop seeing the job", drain, drain_log)
        assert drain.poll() is None, drain_log.read_text()[-3000:]  # still waiting: the job runs
        assert record()["State"] in ("ALLOCATED+DRAIN", "MIXED+DRAIN"), record()
        assert job in build.run("squeue", "-h", "-o", "%i", env=ctl.env).stdout.split()
        release.touch()  # the job ends; the next look of the wait loop lets the play go on
        drain.wait(timeout=120)
        assert drain.returncode == 0, drain_log.read_text()[-4000:]
        assert job not in build.run("squeue", "-h", "-o", "%i", env=ctl.env).stdout.split()
        r = record()
        assert r["State"] == "IDLE+DRAIN" and r["Reason"].startswith("clusterdef: maintenance"), r
        # one change (the drain), no failure: the wait loop's retries ended in success
        assert re.search(rf"^{node}\s+: ok=\d+\s+changed=1\s+unreachable=0\s+failed=0 ", drain_log.read_text(), re.M)

        c.finished("node_drain", {"node_drain_state": "resumed"}, "resumed")
        # a resumed node reads NOT_RESPONDING until slurmctld's next ping of its slurmd answers
        wait_for(lambda: record()["State"] == "IDLE", 60, f"{node} IDLE after the resume")
        # a drain the role did not set is left alone
        ctl.scontrol("update", f"NodeName={node}", "State=DRAIN", "Reason=disk replaced")
        out = c.finished("node_drain", {"node_drain_state": "resumed"}, "foreign")
        assert f"{node} stays drained: reason 'disk replaced" in out, out[-3000:]
        assert record()["State"] == "IDLE+DRAIN" and record()["Reason"].startswith("disk replaced"), record()
    finally:
        stop(drain)
        c.stop()


def test_node_admission_holds_the_old_driver_until_the_reboot(lab, matrix, controller, tmp_path):
    """roles/node_admission (gpu_facts' real collector and probe, then node_drain) against real
    slurmctld/slurmd, the node's tools stood in by tests/standin_node.py (scontrol stays the real one):
    after an upgrade the set's driver is installed but the old one is still loaded until the reboot
    (what reboot.yml's clusterdef_reboot=false leaves), so admission keeps the node drained with the
    driver named, and as the wave's gate (node_admission_fail_off_matrix) fails; after the stand-in
    reboot the loaded driver is the set's and admission resumes the node."""
    from slurm_helpers import wait_for
    from standin_node import dgx_h100, install, update

    vs = matrix.sets[lab["cluster"]["matrix"]]
    old = matrix.sets["2025.10-r580"].components.driver
    node = dgx_h100(vs, "hgx-h100")
    node["driver"] = old  # loaded: the module of before the upgrade
    node["packages"].update({"nvidia-open": f"{vs.components.driver}-1"})  # installed: the set's
    bindir = install(tmp_path / "standin", node)
    (bindir / "scontrol").unlink()  # Slurm's own scontrol, on this cluster
    c = RoleOnSlurm(lab, matrix, controller, tmp_path, path_first=str(bindir))
    ctl, record = c.ctl, c.record
    root = tmp_path / "root"
    extra = {"gpu_facts_path": f"{root}/var/lib/clusterdef/gpu-facts.json",
             "gpu_facts_collector": f"{root}/usr/local/libexec/clusterdef-gpu-facts",
             "gpu_facts_probe": f"{root}/usr/lib/clusterdef/probe", "node_admission_fail_off_matrix": True}
    try:
        c.wait_idle()
        ctl.scontrol("update", f"NodeName={c.node}", "State=DRAIN", f"Reason=clusterdef: driver {old} -> "
                     f"{vs.components.driver}")  # as nvidia_driver left it
        out = c.finished("node_admission", extra, "before-reboot", rc=2)
        assert f"driver {old} (want {vs.components.driver})" in out, out[-3000:]
        r = record()
        assert "DRAIN" in r["State"] and r["Reason"].startswith(f"clusterdef: off-matrix {vs.name}: driver {old}"), r
        update(bindir, lambda n: n.update(driver=vs.components.driver))  # the stand-in reboot loads the new module
        c.finished("node_admission", extra, "after-reboot")
        # a resumed node reads NOT_RESPONDING until slurmctld's next ping of its slurmd answers
        wait_for(lambda: record()["State"] == "IDLE", 60, f"{c.node} IDLE after admission resumed it")
    finally:
        c.stop()
