"""Rail-optimised scalable units and NVLink domains without daemons: validation, the Slurm topology
text, Kueue levels, the canary and waves (the daemons: test_slurm_daemons.py; ibsim:
test_fabric_check.py)."""

from __future__ import annotations

import copy

from clusterdef.model import Definition
from clusterdef.plan import rollout
from clusterdef.render import slurm as slurm_target
from clusterdef.render.kubernetes import topology as k8s_topology
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml


def _validate(data, tmp_path):
    return validate_file(dump_yaml(data, tmp_path / "def.yaml"), MATRICES, TODAY)


def test_rail_lab_validates_and_renders(rail_lab, matrix, tmp_path):
    r = _validate(rail_lab, tmp_path)
    assert r.ok and r.findings == [], [(f.code, f.message) for f in r.findings]
    tree = slurm_target.render(resolve(r.definition, matrix, CLUSTERS))
    assert tree["slurm/topology.conf"].splitlines()[2:] == [
        "SwitchName=su1 Nodes=gpu[001-002],sgpu01", "SwitchName=su2 Nodes=gpu[003-004],sgpu02",
        "SwitchName=spine01 Switches=su[1-2]", "SwitchName=spine02 Switches=su[1-2]"]
    assert "TopologyPlugin=topology/tree" in tree["slurm/slurm.conf"]


def test_rail_with_cores_and_as_blocks(rail_lab, matrix, tmp_path):
    rail_lab["network"]["fabrics"]["ib0"]["topology"]["cores"] = "core01"
    d = _validate(rail_lab, tmp_path).definition
    conf = slurm_target.render(resolve(d, matrix, CLUSTERS))["slurm/topology.conf"]
    assert conf.splitlines()[-1] == "SwitchName=core01 Switches=spine[01-02]"
    rail_lab["network"]["fabrics"]["ib0"]["topology"].update(slurm="block", block_sizes=[3, 6])
    r = _validate(rail_lab, tmp_path)
    assert r.ok, [(f.code, f.message) for f in r.errors]
    tree = slurm_target.render(resolve(r.definition, matrix, CLUSTERS))
    assert tree["slurm/topology.conf"].splitlines()[2:] == [
        "BlockName=su1 Nodes=gpu[001-002],sgpu01", "BlockName=su2 Nodes=gpu[003-004],sgpu02", "BlockSizes=3,6"]
    assert "TopologyPlugin=topology/block" in tree["slurm/slurm.conf"]


def test_rail_kueue_levels_canary_and_waves(rail_lab):
    d = Definition.model_validate(rail_lab)

    class R:  # the Kubernetes topology helpers read resolved.definition only
        definition = d

    (topo,) = k8s_topology.topologies(R, ["ib0"])
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [
        "clusterdef.dev/fabric-block", "clusterdef.dev/rack", "kubernetes.io/hostname"]
    assert k8s_topology.node_labels(R, ["infer"])["ib0"]["nodes"] == [
        {"group": "infer", "hosts": "kgpu[01-02]",
         "labels": {"clusterdef.dev/fabric-block": "su2", "clusterdef.dev/rack": "r02"}}]
    # the canary's min_leaf_switches counts scalable units: one node from each unit
    group, hosts, switches, warnings = rollout.choose_canary(d, ["train"])
    assert (group, hosts, switches, warnings) == ("train", ["gpu001", "gpu003"], ["su1", "su2"], [])
    # waves take whole units (wave_size 2: one unit of train per wave)
    assert rollout.waves(d, {"train": {"gpu001", "gpu002", "gpu003", "gpu004"}}, set()) == [
        (["gpu001", "gpu002"], ["su1"]), (["gpu003", "gpu004"], ["su2"])]
    one = copy.deepcopy(rail_lab)
    one["network"]["fabrics"]["ib0"]["topology"]["scalable_units"] = {
        "su1": {"nodes": "gpu[001-004],kgpu[01-02],sgpu[01-02]"}}
    _, _, _, warnings = rollout.choose_canary(Definition.model_validate(one), ["train"])
    assert warnings == ["canary group train is on 1 scalable unit(s), fewer than upgrade.canary.min_leaf_switches=2: "
                        "the collective test will not cross the fabric"]


def test_node_in_two_units_gets_the_unit_hint(rail_lab, tmp_path):
    rail_lab["network"]["fabrics"]["ib0"]["topology"]["scalable_units"]["su2"]["nodes"] += ",gpu001"
    (f,) = [f for f in _validate(rail_lab, tmp_path).errors if f.code == "topology-node-twice"]
    assert "scalable unit `su1`" in f.message and "one scalable unit" in f.hint


def test_issue_block_sizes_with_three_blocks_is_refused(lab, tmp_path):
    """The issue's case: BlockSizes=32,64,128 with three blocks of 32 Slurm nodes."""
    lab["nodes"]["train"]["hosts"] = "gpu[001-096]"
    lab["nodes"]["train"]["addressing"] = {"ipv4_start": "10.20.0.100", "mac": {"source": "discover"}}
    lab["network"]["provisioning"]["subnet"] = "10.20.0.0/23"
    lab["network"]["fabrics"]["ib0"]["topology"] = {"kind": "block", "block_sizes": [32, 64, 128], "blocks": {
        "b1": {"nodes": "gpu[001-032]"}, "b2": {"nodes": "gpu[033-064]"},
        "b3": {"nodes": "gpu[065-096],kgpu[01-02],sgpu[01-02]"}}}
    r = _validate(lab, tmp_path)
    (f,) = [f for f in r.errors if f.code == "block-sizes-count"]
    assert f.path == ("network", "fabrics", "ib0", "topology", "block_sizes", 2)
    assert "aggregates 4 blocks of 32 nodes" in f.message and "3 block(s)" in f.message
    assert "up to 64" in f.hint
    lab["network"]["fabrics"]["ib0"]["topology"]["block_sizes"] = [32, 64]
    assert not [f for f in _validate(lab, tmp_path).errors if f.code.startswith("block-")]


def test_gb200_validates_strictly(tmp_path):
    """clusters/gb200.yaml: no finding but one (its image is built for arm64, the Grace trays' CPUs). Without
    `architecture: arm64` each group is an image-arch error (tests/bad/1723-image-arch.yaml). The one: its
    Slurm controller and accounting host are in no node group (service-hosts-outside, docs/services.md), a
    warning, which `clusterdef validate --strict` turns into exit 1."""
    import subprocess
    import sys

    r = validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY)
    assert r.ok and [(f.code, f.path) for f in r.findings] == [("service-hosts-outside", ("slurm", "controllers", 0))]
    run = subprocess.run([sys.executable, "-m", "clusterdef", "validate", "--strict", str(CLUSTERS / "gb200.yaml")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "service-hosts-outside" in run.stdout + run.stderr, run.stdout + run.stderr


# ------------------------------------------------------------------ several networks per node (attachments)

def test_gb200_attachments_and_the_bmc_network(tmp_path):
    """clusters/gb200.yaml: every tray on compute (rail IB), storage (RoCE), BMC and provisioning; the
    attachments inventory lists each host's NIC and address per network, and the provisioning dnsmasq
    (checked by the real `dnsmasq --test`) names no BMC address and no range in the BMC subnet."""
    import csv
    import ipaddress
    import shutil
    import subprocess

    from clusterdef.build import build_tree

    r = validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY)
    tree, _ = build_tree(r)
    rows = list(csv.DictReader(tree["inventory/attachments.csv"].splitlines()))
    assert len(rows) == 54 * 4
    by = {(row["host"], row["role"]): row for row in rows}
    assert by[("gb019", "storage")] == {"host": "gb019", "group": "train-r02", "role": "storage", "network": "stor0",
                                        "kind": "roce", "nic": "bf3s", "ports": "bf3s", "speed_gbps": "200",
                                        "ipv4": "10.40.0.29",
                                        "subnet": "10.40.0.0/24"}
    assert by[("gb054", "management")]["ipv4"] == "10.31.0.64" and by[("gb054", "management")]["nic"] == "bmc"
    assert by[("gb001", "compute")]["ports"] == "ibp0 ibp1 ibp2 ibp3"
    assert by[("gb001", "provisioning")]["ipv4"] == "10.30.0.11"
    bmc_net = ipaddress.ip_network("10.31.0.0/24")
    conf = tree["pxe/dnsmasq.conf"]
    assert not [ln for ln in conf.splitlines() if "10.31." in ln and not ln.startswith("#")]  # comments may say why
    for line in conf.splitlines():
        for word in line.replace(",", " ").replace("=", " ").split():
            try:
                addr = ipaddress.ip_address(word)
            except ValueError:
                continue  # a word that is not an address
            assert addr not in bmc_net, line
    if shutil.which("dnsmasq"):
        path = tmp_path / "dnsmasq.conf"
        path.write_text(conf)
        t = subprocess.run(["dnsmasq", "--test", "-C", str(path)], capture_output=True, text=True, timeout=60)
        assert t.returncode == 0 and "syntax check OK" in t.stderr + t.stdout, t.stderr
    # the lab declares no attachments: each group gets those its NICs imply (provisioning, compute)
    lab = build_tree(validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY))[0]
    lab_rows = list(csv.DictReader(lab["inventory/attachments.csv"].splitlines()))
    assert {(r["host"], r["role"]) for r in lab_rows if r["host"] == "gpu001"} == {("gpu001", "provisioning"),
                                                                                   ("gpu001", "compute")}
    gpu001 = {r["role"]: r for r in lab_rows if r["host"] == "gpu001"}
    assert (gpu001["provisioning"]["nic"], gpu001["provisioning"]["speed_gbps"], gpu001["provisioning"]["ipv4"]) == \
        ("eno1", "25", "10.20.0.11")
    assert (gpu001["compute"]["network"], gpu001["compute"]["ports"].split()[0]) == ("ib0", "ibp0")


def test_rail_cores_without_spines_and_block_on_an_old_slurm(rail_lab, matrix, tmp_path):
    topo = rail_lab["network"]["fabrics"]["ib0"]["topology"]
    topo.pop("spines")
    topo["cores"] = "core01"
    codes = [(f.code, f.path[-1]) for f in _validate(rail_lab, tmp_path).errors]
    assert ("rail-no-spine", "cores") in codes and ("rail-no-spine", "scalable_units") in codes
    topo.pop("cores")
    topo["spines"] = "spine01"
    # a set on Slurm 22.05 (no topology/block): rail units as blocks are refused at `slurm`, as a tree not
    import dataclasses
    from datetime import date

    from clusterdef.validate.registry import Context, run_checks

    vs = matrix.sets["2026.07-r580"]
    old = vs.model_copy(update={"name": "old-2205", "components": vs.components.model_copy(update={"slurm": "22.05.8"})})
    m = dataclasses.replace(matrix, sets={**matrix.sets, "old-2205": old})
    rail_lab["cluster"]["matrix"] = "old-2205"

    def unsupported():
        return [f.path for f in run_checks(Context(Definition.model_validate(rail_lab), m, date(2026, 11, 30)))
                if f.code == "slurm-topology-unsupported"]

    assert unsupported() == []
    topo["slurm"] = "block"
    assert unsupported() == [("network", "fabrics", "ib0", "topology", "slurm")]


def test_a_switch_with_more_ports_than_infiniband_allows_is_refused(tmp_path):
    """The estate's leaves once held 32 DGX nodes (8 HCA ports each: 256 ports, plus 2 uplinks);
    no InfiniBand switch has more than 254 external ports, so that tree is refused at the leaf,
    and a rail fabric whose spines take every rail leaf of 32 units (256 cables) at the spines."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe")
    data = yaml.load((CLUSTERS / "estate.yaml").read_text())
    switches = data["network"]["fabrics"]["ib-compute"]["topology"]["switches"]
    switches["leaf001"] = {"nodes": "gpu[0001-0032]"}
    del switches["leaf002"]
    switches["spine001"] = switches["spine002"] = {"switches": "leaf[001,003-008]"}
    path = tmp_path / "estate.yaml"
    (tmp_path / "estate-macs.csv").write_text((CLUSTERS / "estate-macs.csv").read_text())
    dump_yaml(data, path)
    r = validate_file(path, MATRICES, TODAY)
    [f] = [f for f in r.errors if f.code == "switch-ports"]
    assert f.path == ("network", "fabrics", "ib-compute", "topology", "switches", "leaf001")
    assert "needs 258 ports (256 for the compute ports of 32 hosts, 2 for cables to other switches)" in f.message
    assert "kind: rail" in f.hint

    # the same nodes on rails: 32 units x 8 rail leaves, each cabled to every spine
    units = {f"su{i:02d}": {"nodes": f"gpu[{(i - 1) * 128 + 1:04d}-{i * 128:04d}]"} for i in range(1, 33)}
    data["network"]["fabrics"]["ib-compute"]["topology"] = {"kind": "rail", "rails": 8, "spines": "spine[01-04]",
                                                            "scalable_units": units}
    dump_yaml(data, path)
    r = validate_file(path, MATRICES, TODAY)
    [f] = [f for f in r.errors if f.code == "switch-ports"]
    assert f.path == ("network", "fabrics", "ib-compute", "topology", "spines")
    assert "switch `spine01`" in f.message and "needs 256 ports (all for cables to other switches)" in f.message
