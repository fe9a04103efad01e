"""RoCE compute fabric on the hosts (issue 29 items 1 and 7): per-rail addresses (rail i on the i-th
slice of the fabric's subnet), systemd-networkd files per host and rail, the multi-NIC sysctls, lossless
Ethernet per port (mlnx_qos, ECN sysfs) in a oneshot unit, the NCCL/UCX settings through Slurm's
TaskProlog and a ConfigMap in the tenants' namespaces. Built on the lab with its compute fabric switched
to RoCE (`roce_lab`), not a bundled example. A real systemd-networkd in a namespace with eight veth ports
standing for the rails gives each port its rendered address and the kernel's per-rail route."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import yaml

from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml
from lab_variants import roce_rails as roce_lab
from test_storage_fabric import _networkd

RAILS = [f"ens{i}" for i in range(8)]


class _Vars(yaml.SafeLoader):
    """group_vars as Ansible reads them: `!unsafe` strings are plain strings."""


_Vars.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _build(data: dict, tmp_path: Path):
    r = validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, TODAY)
    assert r.ok, [(f.code, f.dotted, f.message) for f in r.errors]
    return r, build_tree(r)[0]


def test_rail_files_addresses_sysctls_and_lossless_settings(lab, tmp_path):
    r, tree = _build(roce_lab(lab), tmp_path)
    # `secure` boots the same image without RoCE rails: the group-level files cannot go into it
    assert [(f.dotted, "RoCE sysctls and lossless Ethernet unit cannot be in the image" in f.message)
            for f in r.findings if f.code == "image-group-files"] == [("nodes.train.image", True)]
    assert "images/gpu-node/mkosi.extra/etc/sysctl.d/90-clusterdef-roce.conf" not in tree
    train = {k: v for k, v in tree.items() if k.startswith("network/roce/train/")}
    assert len([k for k in train if k.endswith(".network")]) == 4 * 8
    # gpu002 (the group's second host: offset 12) on rail 4: the 4th /19 of 10.50.0.0/16
    gpu002 = train["network/roce/train/30-clusterdef-rail-gpu002-ens3.network"]
    assert "[Match]\nName=ens3\nHost=gpu002\n" in gpu002 and "MTUBytes=9000\n" in gpu002
    assert "Address=10.50.96.12/19\n" in gpu002 and "LinkLocalAddressing=no\n" in gpu002
    assert "Address=10.50.224.14/19\n" in train["network/roce/train/30-clusterdef-rail-gpu004-ens7.network"]
    assert "Address=10.50.0.31/19\n" in tree["network/roce/infer/30-clusterdef-rail-kgpu01-ens0.network"]
    assert train["network/roce/train/90-clusterdef-roce.conf"].endswith(
        "net.ipv4.conf.all.arp_ignore = 1\nnet.ipv4.conf.default.arp_ignore = 1\n"
        "net.ipv4.conf.all.arp_announce = 2\nnet.ipv4.conf.default.arp_announce = 2\n"
        "net.ipv4.conf.all.rp_filter = 2\nnet.ipv4.conf.default.rp_filter = 2\n")
    qos = train["network/roce/train/clusterdef-roce-qos.sh"]
    # the defaults: trust dscp, PFC on priority 3 only, ECN on it, DSCP 26 -> traffic class 104
    assert "/usr/bin/mlnx_qos -i ens5 --trust dscp --pfc 0,0,0,1,0,0,0,0\n" in qos
    assert "echo 1 > /sys/class/net/ens5/ecn/roce_np/enable/3\necho 1 > /sys/class/net/ens5/ecn/roce_rp/enable/3\n" in qos
    assert "echo NCCL_IB_GID_INDEX=3\n  echo NCCL_IB_TC=104\n" in qos and 'echo "NCCL_IB_HCA==$hcas"' in qos
    assert subprocess.run(["sh", "-n"], input=qos, text=True).returncode == 0
    unit = train["network/roce/train/clusterdef-roce-qos.service"]
    assert "After=sys-subsystem-net-devices-ens0.device" in unit and "ExecStart=/bin/sh /usr/lib/clusterdef/roce/qos.sh\n" in unit
    # delivered: the rail file to its host only, sysctl/script/unit by their own rules
    delivery = yaml.safe_load(tree["delivery.json"])["files"]
    assert delivery["network/roce/train/90-clusterdef-roce.conf"]["path"] == "/etc/sysctl.d/90-clusterdef-roce.conf"
    assert delivery["network/roce/train/clusterdef-roce-qos.sh"]["path"] == "/usr/lib/clusterdef/roce/qos.sh"
    assert delivery["network/roce/train/30-clusterdef-rail-gpu002-ens3.network"]["path"] == \
        "/etc/systemd/network/30-clusterdef-rail-gpu002-ens3.network"
    group_vars = yaml.load(tree["ansible/group_vars/group_train.yml"], Loader=_Vars)["tenant_isolation_node_files"]
    rails = [f for f in group_vars if f["dest"] == "/etc/systemd/network/30-clusterdef-rail-gpu002-ens3.network"]
    assert [f["host"] for f in rails] == ["gpu002"]
    # Slurm: TaskProlog turns the node's roce.env into the task's environment; Kubernetes: a ConfigMap
    assert "TaskProlog=/usr/lib/clusterdef/slurm/task-prolog.sh\n" in tree["slurm/slurm.conf"]
    maps = [o for o in yaml.safe_load_all(tree["kubernetes/tenants/nlp.yaml"]) if o and o["kind"] == "ConfigMap"]
    assert [m["data"] for m in maps if m["metadata"]["name"] == "clusterdef-roce"] == [
        {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "104", "UCX_IB_GID_INDEX": "3", "UCX_IB_TRAFFIC_CLASS": "104"}]


def test_the_lossless_settings_come_from_the_definition(lab, tmp_path):
    d = roce_lab(lab)
    d["network"]["fabrics"]["ib0"]["lossless"] = {"pfc_priority": 5, "dscp": 46, "ecn": False}
    _, tree = _build(d, tmp_path)
    qos = tree["network/roce/train/clusterdef-roce-qos.sh"]
    assert "--trust dscp --pfc 0,0,0,0,0,1,0,0\n" in qos and "echo 0 > /sys/class/net/ens0/ecn/roce_np/enable/5\n" in qos
    assert "echo NCCL_IB_TC=184\n" in qos


def test_task_prolog_exports_the_rails_environment_and_keeps_the_jobs_own(lab, tmp_path):
    """The TaskProlog as slurmstepd runs it: `export NAME=value` lines on stdout for what the job lacks."""
    from clusterdef.render.slurm.configless import TASK_PROLOG

    _, tree = _build(roce_lab(lab), tmp_path)
    script = tree["images/gpu-node/mkosi.extra" + TASK_PROLOG]
    env = tmp_path / "roce.env"
    env.write_text("NCCL_IB_GID_INDEX=3\nNCCL_IB_TC=104\nNCCL_IB_HCA==mlx5_0:1,mlx5_3:1\nbad name=1\n")
    prolog = tmp_path / "task-prolog.sh"
    prolog.write_text(script.replace("/run/clusterdef/roce.env", str(env)))
    run = subprocess.run(["sh", str(prolog)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                         "NCCL_IB_TC": "106"})
    assert run.returncode == 0 and run.stdout == "export NCCL_IB_GID_INDEX=3\nexport NCCL_IB_HCA==mlx5_0:1,mlx5_3:1\n"


def _codes(r, code):
    return [(f.dotted, f.message) for f in r.findings if f.code == code]


def test_rails_that_cannot_be_laid_out_are_located_errors(lab, tmp_path):
    r = validate_file(dump_yaml(roce_lab(lab, "10.50.0.0/28", "10.50.0.1"), tmp_path / "a.yaml"), MATRICES, TODAY)
    assert _codes(r, "roce-rails") == [(
        "nodes.train.attachments.compute.ipv4_start",
        "fabric `ib0`'s subnet 10.50.0.0/28 cannot be split into 8 rail subnets of at least a /30 each (rail i "
        "gets the i-th equal slice)")] * 1 + [(
        "nodes.infer.attachments.compute.ipv4_start",
        "fabric `ib0`'s subnet 10.50.0.0/28 cannot be split into 8 rail subnets of at least a /30 each (rail i "
        "gets the i-th equal slice)")]
    r = validate_file(dump_yaml(roce_lab(lab, start="10.50.40.1"), tmp_path / "b.yaml"), MATRICES, TODAY)
    assert [m for p, m in _codes(r, "roce-rails") if p.startswith("nodes.train")] == [
        "node group `train`: 4 address(es) from 10.50.40.1 do not fit in rail 1's subnet 10.50.0.0/19 (fabric "
        "`ib0`'s 10.50.0.0/16 in 8 rail slice(s)); a host's address on rail i is the same offset in rail i's slice"]
    d = copy.deepcopy(lab)
    d["network"]["fabrics"]["ib0"]["lossless"] = {"pfc_priority": 3}
    r = validate_file(dump_yaml(d, tmp_path / "c.yaml"), MATRICES, TODAY)
    assert [p for p, _ in _codes(r, "fabric-interface")] == ["network.fabrics.ib0.lossless"]
    d = roce_lab(lab)
    d["network"]["fabrics"]["ib0"]["lossless"] = {"pfc_priority": 4}
    r = validate_file(dump_yaml(d, tmp_path / "e.yaml"), MATRICES, TODAY)
    assert not r.ok and any("DSCP 26 maps to priority 3" in f.message and f.dotted.startswith(
        "network.fabrics.ib0.lossless") for f in r.errors), [(f.dotted, f.message) for f in r.errors]


# networkctl is not used: it needs the system bus ("Failed to connect system bus"), which this namespace lacks
_ROUTES = "ip -4 route show table main\nkill $P\n"


def test_systemd_networkd_gives_each_rail_its_address_and_route(lab, tmp_path, monkeypatch):
    """gpu002's node, eight veth ends standing for its rails, every host's rail files of `train`: networkd
    (252 here) applies gpu002's file to each port (the others' Host= do not match), each port gets its
    rail address and the 9000 MTU, and the kernel's only route to each rail subnet is through its port."""
    import test_storage_fabric

    _, tree = _build(roce_lab(lab), tmp_path)
    files = {k: v for k, v in tree.items() if k.startswith("network/roce/train/") and k.endswith(".network")}
    monkeypatch.setattr(test_storage_fabric, "_NETWORKD", test_storage_fabric._NETWORKD.replace("kill $P\n", _ROUTES))
    # named 20-clusterdef-* here so that the helper also asserts networkd reports no line of them it cannot use
    log, out = _networkd({k.replace("30-clusterdef-", "20-clusterdef-"): v for k, v in files.items()}, tmp_path,
                         "gpu002", RAILS)
    for i, port in enumerate(RAILS):
        third = i * 32
        assert f"{port}: found matching network '/etc/systemd/network/20-clusterdef-rail-gpu002-{port}.network'" in log
        assert re.search(rf"{port}\s+inet 10\.50\.{third}\.12/19 ", out), out
        assert re.search(rf"{port}@peer{i}: .* mtu 9000 ", out), out
        assert re.search(rf"^10\.50\.{third}\.0/19 dev {port} proto kernel scope link src 10\.50\.{third}\.12", out,
                         re.M), out
    assert len(re.findall(r"^10\.50\.", out, re.M)) == 8, out  # one route per rail, no other


def test_gb200_roce_storage_port_gets_the_lossless_settings_only():
    """clusters/gb200.yaml: one RoCE storage port (bf3s) per tray, no RoCE compute fabric: the port gets
    trust, PFC and ECN; no rails, no sysctls (one port), no job environment, no TaskProlog."""
    from conftest import CLUSTERS

    r = validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY)
    tree = build_tree(r)[0]
    files = sorted(k for k in tree if k.startswith("network/roce/train-r01/"))
    assert files == ["network/roce/train-r01/clusterdef-roce-qos.service", "network/roce/train-r01/clusterdef-roce-qos.sh"]
    qos = tree["network/roce/train-r01/clusterdef-roce-qos.sh"]
    assert "/usr/bin/mlnx_qos -i bf3s --trust dscp --pfc 0,0,0,1,0,0,0,0\n" in qos and "roce.env" not in qos
    assert "TaskProlog" not in tree["slurm/slurm.conf"]
    assert "Wants=clusterdef-roce-qos.service\n" in tree[
        "images/grace-node/mkosi.extra/etc/systemd/system/multi-user.target.d/clusterdef-roce-qos.service.conf"]


def _routed(lab: dict, start: str = "10.50.0.11") -> dict:
    d = roce_lab(lab, start=start)
    d["network"]["fabrics"]["ib0"]["rail_addressing"] = "routed"
    return d


def test_routed_rails_get_a_31_and_a_route_to_the_rails_aggregate(lab, tmp_path, monkeypatch):
    """`rail_addressing: routed`: each port the odd end of a /31 to its leaf (hosts 2 apart from ipv4_start,
    the same offset in each rail's slice), a route to the rail's aggregate through the switch's end; and
    systemd-networkd in a namespace installs exactly that: per port its /31 and one route to its rail."""
    import test_storage_fabric

    _, tree = _build(_routed(lab), tmp_path)
    gpu002 = tree["network/roce/train/30-clusterdef-rail-gpu002-ens3.network"]
    assert "# rail 4: aggregate 10.50.96.0/19, a /31 to the leaf switch at 10.50.96.12\n" in gpu002
    assert "Address=10.50.96.13/31\n" in gpu002
    assert gpu002.endswith("\n[Route]\nDestination=10.50.96.0/19\nGateway=10.50.96.12\n")
    assert "Address=10.50.224.17/31\n" in tree["network/roce/train/30-clusterdef-rail-gpu004-ens7.network"]
    assert "Address=10.50.0.33/31\n" in tree["network/roce/infer/30-clusterdef-rail-kgpu02-ens0.network"]
    rows = [ln.split(",") for ln in tree["inventory/attachments.csv"].splitlines() if ",train,compute," in ln]
    assert [(r[0], r[8]) for r in rows] == [("gpu001", "10.50.0.11"), ("gpu002", "10.50.0.13"),
                                            ("gpu003", "10.50.0.15"), ("gpu004", "10.50.0.17")]  # rail 1, 2 apart
    files = {k: v for k, v in tree.items() if k.startswith("network/roce/train/") and k.endswith(".network")}
    monkeypatch.setattr(test_storage_fabric, "_NETWORKD", test_storage_fabric._NETWORKD.replace("kill $P\n", _ROUTES))
    log, out = _networkd({k.replace("30-clusterdef-", "20-clusterdef-"): v for k, v in files.items()}, tmp_path,
                         "gpu002", RAILS)
    for i, port in enumerate(RAILS):
        third = i * 32
        assert re.search(rf"{port}\s+inet 10\.50\.{third}\.13/31 ", out), out
        assert re.search(rf"^10\.50\.{third}\.0/19 via 10\.50\.{third}\.12 dev {port} proto static", out, re.M), out
        assert re.search(rf"^10\.50\.{third}\.12/31 dev {port} proto kernel scope link src 10\.50\.{third}\.13", out,
                         re.M), out
    assert len(re.findall(r"^10\.50\.", out, re.M)) == 16, out  # per rail: the /31 and the aggregate, no other


def test_routed_rails_refused_where_they_cannot_be(lab, tmp_path):
    r = validate_file(dump_yaml(_routed(lab, start="10.50.0.12"), tmp_path / "a.yaml"), MATRICES, TODAY)
    assert [m for p, m in _codes(r, "roce-rails") if p.startswith("nodes.train")] == [
        "node group `train`: fabric `ib0` is routed (a /31 per port, RFC 3021): ipv4_start 10.50.0.12 is even, "
        "the switch's side of its /31; a host's side is the odd address"]
    r = validate_file(dump_yaml(_routed(lab, start="10.50.31.251"), tmp_path / "b.yaml"), MATRICES, TODAY)
    assert [m for p, m in _codes(r, "roce-rails") if p.startswith("nodes.train")] == [
        "node group `train`: 4 /31 link(s) from 10.50.31.251 (hosts 2 apart) do not fit in rail 1's aggregate "
        "10.50.0.0/19 (fabric `ib0`'s 10.50.0.0/16 in 8 rail slice(s)); a host's address on rail i is the same "
        "offset in rail i's slice"]
    d = copy.deepcopy(lab)
    d["network"]["fabrics"]["ib0"]["rail_addressing"] = "routed"
    r = validate_file(dump_yaml(d, tmp_path / "c.yaml"), MATRICES, TODAY)
    assert _codes(r, "fabric-interface") == [("network.fabrics.ib0.rail_addressing",
                                               "fabric `ib0` is infiniband: rail addressing is for RoCE rails only")]
