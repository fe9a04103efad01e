"""Storage fabric on the nodes: each host's storage interface as systemd-networkd files (address in
the fabric's subnet, MTU, IPoIB mode), in the image for stateless nodes and from roles/tenant_isolation
for stateful ones, the filesystem's mount waiting for that interface. Proven by a real systemd-networkd
in namespaces of its own (the host's name in a UTS namespace) and a real ansible-playbook run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml


def _gb200() -> dict:
    return YAML(typ="safe").load((CLUSTERS / "gb200.yaml").read_text())


def _tree(data: dict, tmp_path: Path, name: str = "gb200.yaml"):
    r = validate_file(dump_yaml(data, tmp_path / name), MATRICES, TODAY)
    assert r.ok, [(f.code, f.dotted, f.message) for f in r.errors]
    return r, build_tree(r)[0]


def _ipoib(data: dict) -> dict:
    """gb200 with its storage network on InfiniBand (IPoIB, connected mode, 64K MTU), trays stateless."""
    data["hardware"]["gb200-tray"]["nics"][1] = {"name": "ibs", "kind": "infiniband", "speed_gbps": 400,
                                                 "role": "storage"}
    data["network"]["fabrics"]["stor0"].update(kind="infiniband", ipoib_mode="connected", mtu=65520)
    for g in data["nodes"].values():
        g["attachments"]["storage"]["nic"] = "ibs"
        g["provisioning"] = "stateless"
    return data


# Run systemd-networkd on the given files in network, mount and UTS namespaces of its own: the host
# name $3, a veth end per port named $4.. (the node's ports), the files in /etc/systemd/network (a tmpfs
# there), a read-only sysfs of the namespace (networkd does not wait for udev), debug log to $2.
_NETWORKD = r"""set -e
conf=$1; log=$2; hostname "$3"; shift 3
ip link set lo up
n=0; for p in "$@"; do ip link add "$p" type veth peer name peer$n; ip link set peer$n up; n=$((n+1)); done
mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd; }
mkdir -p /run/systemd/netif /run/systemd/network
chown systemd-network: /run/systemd/netif
mount -t tmpfs tmpfs /etc/systemd/network
cp "$conf"/* /etc/systemd/network/
mount -t tmpfs tmpfs /usr/lib/systemd/network
mount -t sysfs -o ro sysfs /sys
SYSTEMD_LOG_LEVEL=debug /lib/systemd/systemd-networkd >"$log" 2>&1 &
P=$!
want='configuring -> configured'; [ $# -gt 0 ] || want='Enumeration completed'
for i in $(seq 50); do grep -q -e "$want" "$log" && break; sleep 0.1; done
sleep 0.2
for p in "$@"; do ip -o link show "$p"; ip -o addr show "$p"; done
kill $P
"""


def _networkd(files: dict[str, str], tmp_path: Path, host: str, ports: list[str], clean: bool = True) -> tuple[str, str]:
    """(networkd's debug log, `ip` output) for `files` on a node named `host` with `ports`; `clean`:
    networkd reports no line of them it cannot use."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("unshare and ip are needed")
    if os.geteuid() != 0 or not Path("/lib/systemd/systemd-networkd").exists():
        pytest.skip("systemd-networkd in namespaces of its own needs root and systemd-networkd")
    conf = tmp_path / f"conf-{host}"
    conf.mkdir(parents=True)
    for rel, text in files.items():
        (conf / rel.rsplit("/", 1)[1]).write_text(text)
    log = tmp_path / f"networkd-{host}.log"
    run = subprocess.run(["unshare", "-n", "-m", "-u", "--propagation", "private", "sh", "-c", _NETWORKD, "sh",
                          str(conf), str(log), host, *ports], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    text = log.read_text()
    # networkd names the file and line of every key or section it cannot use
    assert clean is not bool(re.search(r"20-clusterdef-[^:\s]+:\d+:", text)), text
    return text, run.stdout


def test_gb200_storage_interfaces_rendered_per_host(tmp_path):
    """clusters/gb200.yaml (RoCE storage, MTU 9000): one .network per host, on the storage NIC,
    with the host's address of the attachments inventory; the NFS mount waits for that interface."""
    r = validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY)
    tree = build_tree(r)[0]
    files = {k: v for k, v in tree.items() if k.startswith("network/storage/")}
    assert len(files) == 54 and "network/storage/train-r02/20-clusterdef-storage-gb019.network" in files
    gb019 = files["network/storage/train-r02/20-clusterdef-storage-gb019.network"]
    assert "[Match]\nName=bf3s\nHost=gb019\n" in gb019 and "Address=10.40.0.29/24\n" in gb019
    assert "MTUBytes=9000\n" in gb019
    mount = tree["storage/mounts/train-r01/data.mount"]
    assert "Wants=systemd-networkd-wait-online@bf3s.service\nAfter=systemd-networkd-wait-online@bf3s.service\n" \
        in mount and "network-online.target" not in mount
    # the image the three groups share carries every host's file (each matches one host only)
    extra = "images/grace-node/mkosi.extra/etc/systemd/network/"
    assert sorted(k for k in tree if k.startswith(extra)) == sorted(extra + k.rsplit("/", 1)[1] for k in files)


def test_roce_storage_interface_configured_by_systemd_networkd(tmp_path):
    """A real systemd-networkd on a node named gb001 with every host's file of its group: gb001's
    matches (the others' conditions do not), and the port gets the address and the 9000 MTU."""
    r = validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY)
    tree = build_tree(r)[0]
    files = {k: v for k, v in tree.items() if k.startswith("network/storage/train-r01/")}
    log, ip = _networkd(files, tmp_path, "gb001", ["bf3s"])
    assert "bf3s: found matching network '/etc/systemd/network/20-clusterdef-storage-gb001.network'" in log, log
    assert "20-clusterdef-storage-gb002.network: Conditions in the file do not match the system environment" in log
    assert re.search(r"bf3s\s+inet 10\.40\.0\.11/24 ", ip), ip
    assert re.search(r"bf3s@peer0: .* mtu 9000 ", ip), ip


def test_ipoib_storage_interface_loaded_by_systemd_networkd(tmp_path):
    """An InfiniBand storage fabric in connected mode: the port's .network stacks an IPoIB interface,
    whose .netdev networkd loads as Kind=ipoib with Mode=connected and MTU 65520, and whose per-host
    .network carries the address; the mount waits for that interface. There is no IB HCA here (a veth
    parent makes networkd 252 abort on its Ethernet address), so networkd runs without the port: it
    loads every file, the .netdev as an IPoIB netdev, with no line it cannot use; a wrong mode is named."""
    data = _ipoib(_gb200())
    r, tree = _tree(data, tmp_path)
    files = {k: v for k, v in tree.items() if k.startswith("network/storage/train-r01/")}
    base = "network/storage/train-r01/20-clusterdef-storage-"
    assert "[Network]\nIPoIB=ibs.st\n" in files[base + "ibs.network"]
    assert "Kind=ipoib\nMTUBytes=65520\n\n[IPoIB]\nMode=connected\n" in files[base + "ibs.st.netdev"]
    assert "[Match]\nName=ibs.st\nHost=gb001\n" in files[base + "gb001.network"]
    assert "After=systemd-networkd-wait-online@ibs.st.service" in tree["storage/mounts/train-r01/data.mount"]
    # stateless: the image carries the files, and PID 1 gets the host name from DHCP via iPXE
    assert "images/grace-node/mkosi.extra/etc/systemd/network/20-clusterdef-storage-ibs.st.netdev" in tree
    assert "systemd.hostname=${hostname}" in tree["pxe/ipxe/groups/train-r01.ipxe"]
    log, _ = _networkd(files, tmp_path, "gb001", [])
    assert 'ibs.st: loaded "ipoib"' in log and "Enumeration completed" in log, log
    assert "20-clusterdef-storage-gb002.network: Conditions in the file do not match" in log, log
    bad = {**files, base + "ibs.st.netdev": files[base + "ibs.st.netdev"].replace("Mode=connected", "Mode=reliable")}
    log, _ = _networkd(bad, tmp_path / "bad", "gb001", [], clean=False)
    assert re.search(r"20-clusterdef-storage-ibs\.st\.netdev:\d+: Failed to parse IPoIB mode", log), log


def test_tenant_isolation_installs_only_the_hosts_own_storage_interface(tmp_path):
    """roles/tenant_isolation on gb001 and gb019 (local connection, rendered inventory and group_vars):
    each installs its group's mount unit and its own storage .network, exactly as rendered, and no
    other host's."""
    ansible = Path(sys.executable).parent / "ansible-playbook"
    if not ansible.exists():
        pytest.skip("ansible-playbook is not installed")
    r = validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY)
    tree = build_tree(r)[0]
    for rel, text in tree.items():
        if rel.startswith("ansible/"):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
    play = tmp_path / "play.yml"
    play.write_text("- hosts: gb001,gb019\n  gather_facts: false\n  roles: [tenant_isolation]\n")
    extra = json.dumps({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                        "tenant_isolation_root": str(tmp_path / "root") + "/{{ inventory_hostname }}"})
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(Path(__file__).resolve().parents[1] / "roles"),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOST_KEY_CHECKING": "0"}
    run = subprocess.run([str(ansible), "-i", str(tmp_path / "ansible"), str(play), "-e", extra], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    for host, group in (("gb001", "train-r01"), ("gb019", "train-r02")):
        net = tmp_path / "root" / host / "etc/systemd/network"
        assert sorted(p.name for p in net.iterdir()) == [f"20-clusterdef-storage-{host}.network"]
        assert (net / f"20-clusterdef-storage-{host}.network").read_text() == \
            tree[f"network/storage/{group}/20-clusterdef-storage-{host}.network"]
        assert (tmp_path / "root" / host / "etc/systemd/system/data.mount").read_text() == \
            tree[f"storage/mounts/{group}/data.mount"]


@pytest.mark.parametrize("mutate, code, path", [
    (lambda d: d["network"]["fabrics"]["stor0"].update(subnet="10.30.0.0/23"), "storage-subnet",
     "network.fabrics.stor0.subnet"),
    (lambda d: d["network"]["fabrics"]["stor0"].update(ipoib_mode="connected"), "fabric-interface",
     "network.fabrics.stor0.ipoib_mode"),
    (lambda d: _ipoib(d)["network"]["fabrics"]["stor0"].update(ipoib_mode="datagram"), "fabric-interface",
     "network.fabrics.stor0.mtu"),
    (lambda d: d["filesystems"]["data"].update(network="ib0"), "filesystem-network", "filesystems.data.network"),
    (lambda d: d["nodes"]["mnnvl-r03"]["attachments"].pop("storage"), "filesystem-network",
     "filesystems.data.network"),
])
def test_storage_fabric_mistakes_are_located(mutate, code, path, tmp_path):
    data = _gb200()
    mutate(data)
    r = validate_file(dump_yaml(data, tmp_path / "gb200.yaml"), MATRICES, TODAY)
    hits = [f for f in r.errors if f.code == code]
    assert hits and hits[0].dotted == path, [(f.code, f.dotted, f.message) for f in r.errors]
