"""Management segmentation: the BMC network (network.management) is reachable from no tenant's pods
and from no service the provisioning network runs. The rendered NetworkPolicy egress is evaluated
address by address with ipaddress (not grepped); `management-exposed` fires on a definition whose
tenant asks for a network inside the BMC subnet and on none of the examples; the rendered dnsmasq,
run in a network namespace of its own, answers TFTP on the provisioning address and not on a BMC
network address of the same host."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef import segmentation
from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml

MGMT = ipaddress.ip_network("10.31.0.0/24")  # gb200's network.management.subnet


def _gb200() -> dict:
    return YAML(typ="safe").load((CLUSTERS / "gb200.yaml").read_text())


def _result(data: dict, tmp_path: Path, name: str = "gb200.yaml"):
    return validate_file(dump_yaml(data, tmp_path / name), MATRICES, TODAY)


def _policies(tree: dict[str, str]) -> list[dict]:
    return [o for rel, text in tree.items() if rel.startswith("kubernetes/tenants/")
            for o in YAML(typ="safe").load_all(text) if isinstance(o, dict) and o.get("kind") == "NetworkPolicy"]


def _egress_reaches(policies: list[dict], addr) -> bool:
    """Whether any egress rule lets a pod reach `addr` outside the cluster (ipBlock peers only: a
    namespaceSelector selects pods, never a BMC)."""
    for p in policies:
        for rule in p["spec"].get("egress", []):
            for peer in rule.get("to", []):
                block = peer.get("ipBlock")
                if block and addr in ipaddress.ip_network(block["cidr"]) and not any(
                        addr in ipaddress.ip_network(e) for e in block.get("except", [])):
                    return True
    return False


@pytest.mark.parametrize("name", ["lab", "estate", "gb200"])
def test_examples_expose_no_management_network(name):
    result = validate_file(CLUSTERS / f"{name}.yaml", MATRICES, TODAY)
    assert result.ok
    assert not [f for f in result.findings if f.code in ("management-exposed", "management-subnet")]


def test_rendered_egress_never_reaches_a_bmc(tmp_path):
    """gb200's shared tenant keeps egress everywhere (0.0.0.0/0) except the BMC subnet: every one of
    its 256 addresses is unreachable, addresses outside it are reachable; the policy is strict-valid.
    Given its own networks (10.0.0.0/8, holding the BMC subnet), it reaches those only, the same cut."""
    import kubernetes_validate

    data = _gb200()
    data["tenants"]["llm"]["kubernetes"]["egress_cidrs"] = ["10.0.0.0/8", "192.0.2.0/24"]
    for variant in (_gb200(), data):
        result = _result(variant, tmp_path)
        assert result.ok, [f.message for f in result.errors]
        tree = build_tree(result, ["kubernetes"])[0]
        policies = _policies(tree)
        egress = [p for p in policies if p["metadata"]["name"] == "allow-egress-networks"]
        assert len(egress) == 1
        kubernetes_validate.validate(egress[0], "1.34.2", strict=True)
        assert not [a for a in MGMT if _egress_reaches(policies, a)]
        assert _egress_reaches(policies, ipaddress.ip_address("10.8.1.1"))
    assert _egress_reaches(_policies(build_tree(_result(_gb200(), tmp_path), ["kubernetes"])[0]),
                           ipaddress.ip_address("8.8.8.8"))
    assert not _egress_reaches(policies, ipaddress.ip_address("8.8.8.8"))  # its declared networks only


def test_lab_without_a_bmc_network_keeps_its_policies():
    """No network.management and no egress_cidrs: no egress ipBlock is rendered (shared tenants'
    egress stays open as before, dedicated ones keep only DNS and their namespace)."""
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    assert not [p for p in _policies(build_tree(result, ["kubernetes"])[0])
                if p["metadata"]["name"] == "allow-egress-networks"]


def test_management_exposed_fires_on_a_network_inside_the_bmc_subnet(tmp_path):
    data = _gb200()
    data["tenants"]["llm"]["kubernetes"]["egress_cidrs"] = ["10.8.0.0/16", "10.31.0.128/25"]
    hits = [f for f in _result(data, tmp_path).findings if f.code == "management-exposed"]
    assert [(f.severity.value, tuple(f.path)) for f in hits] == [
        ("error", ("tenants", "llm", "kubernetes", "egress_cidrs", 1))], hits
    assert "10.31.0.128/25" in hits[0].message and hits[0].hint
    data["tenants"]["llm"]["kubernetes"]["egress_cidrs"] = ["10.0.0.0/8"]  # holds it: cut out, no finding
    assert not [f for f in _result(data, tmp_path).findings if f.code == "management-exposed"]


def test_reaches_agrees_with_address_by_address_evaluation():
    """segmentation.reaches (the check's and renderer's) against the exhaustive evaluation."""
    blocks = [{"cidr": "0.0.0.0/0"}, {"cidr": "0.0.0.0/0", "except": [str(MGMT)]},
              {"cidr": "0.0.0.0/0", "except": ["10.31.0.0/25", "10.31.0.128/25"]},
              {"cidr": "0.0.0.0/0", "except": ["10.31.0.0/25"]}, {"cidr": "10.31.0.64/26"},
              {"cidr": "10.32.0.0/16"}, {"cidr": "10.0.0.0/8", "except": ["10.31.0.0/16"]}]
    for b in blocks:
        exhaustive = any(_egress_reaches([{"spec": {"egress": [{"to": [{"ipBlock": b}]}]}}], a) for a in MGMT)
        assert segmentation.reaches(b, MGMT) == exhaustive, b


TFTP_PROBE = """
import socket, sys
for addr in sys.argv[1:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    # not connected: the server answers from a port of its own (the transfer's TID)
    s.sendto(b"\\x00\\x01nothing-here\\x00octet\\x00", (addr, 69))
    try:
        data = s.recvfrom(512)[0]
        print(addr, "answered", data[:2].hex())
    except (ConnectionRefusedError, TimeoutError) as exc:
        print(addr, "silent", type(exc).__name__)
"""

NETNS = """
set -e
ip link set lo up
ip addr add {server}/24 dev lo
ip addr add {bmc}/24 dev lo
dnsmasq --keep-in-foreground --conf-file={conf} --user=root --pid-file={tmp}/dnsmasq.pid \
  --dhcp-leasefile={tmp}/leases --log-facility={tmp}/dnsmasq.log &
sleep 1
{python} {probe} {server} {bmc}
kill %1
"""


def _tftp_answers(conf_text: str, tmp_path: Path, server: str, bmc: str) -> dict[str, str]:
    (tmp_path / "tftp").mkdir(exist_ok=True)
    (tmp_path / "dnsmasq.conf").write_text(re.sub(r"(?m)^tftp-root=.*$", f"tftp-root={tmp_path / 'tftp'}", conf_text))
    (tmp_path / "probe.py").write_text(TFTP_PROBE)
    script = NETNS.format(server=server, bmc=bmc, conf=tmp_path / "dnsmasq.conf", tmp=tmp_path,
                          python=sys.executable, probe=tmp_path / "probe.py")
    r = subprocess.run(["unshare", "--net", "--", "bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + (tmp_path / "dnsmasq.log").read_text()
    return {ln.split()[0]: ln.split()[1] for ln in r.stdout.splitlines() if ln.split()[:1] in ([server], [bmc])}


def test_dnsmasq_answers_only_on_the_provisioning_address(tmp_path):
    """The boot server has legs in the provisioning network and the BMC network. The rendered dnsmasq
    (listen-address + bind-interfaces, rendered because network.management is declared) answers a TFTP
    read on the provisioning address and stays silent on the BMC one; without those two lines (the
    check can fail) it answers on both."""
    if os.geteuid() != 0 or not shutil.which("dnsmasq") or not shutil.which("unshare"):
        pytest.skip("needs root, dnsmasq and unshare (a network namespace of its own)")
    tree = build_tree(validate_file(CLUSTERS / "gb200.yaml", MATRICES, TODAY), ["pxe"])[0]
    conf = tree["pxe/dnsmasq.conf"]
    assert subprocess.run(["dnsmasq", "--test", "-C", "/dev/stdin"], input=conf, text=True,
                          capture_output=True).returncode == 0
    server, bmc = "10.30.0.2", "10.31.0.2"
    assert _tftp_answers(conf, tmp_path, server, bmc) == {server: "answered", bmc: "silent"}
    open_conf = conf.replace(f"listen-address={server}\n", "").replace("bind-interfaces\n", "")
    assert _tftp_answers(open_conf, tmp_path, server, bmc) == {server: "answered", bmc: "answered"}
