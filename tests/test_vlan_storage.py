"""A VLAN tenant and its storage on the nodes' ports (tests/lab_variants.py `vlan_roce`): the tenant's VLAN
carries its fabric's MTU in every file; a storage attachment on a port the VLAN takes is refused
(isolation-cuts-storage), and `clusterdef isolation` calls the claim not enforced for the same reason,
from the same function (tenancy.storage_cuts). A real systemd-networkd 252 shows why the combination
is refused: it applies the VLAN's .network to the port and never the storage address."""

from __future__ import annotations

import re
from pathlib import Path

from clusterdef import tenancy
from clusterdef.build import build_tree
from clusterdef.render import network
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml
from lab_variants import vlan_roce
from test_storage_fabric import _networkd

HEAD = ("# Rendered by clusterdef: VLAN 2101 of tenant secure on node groups secure of cluster lab; install into "
        "/etc/systemd/network/.\n")


def _validate(data: dict, tmp_path: Path):
    return validate_file(dump_yaml(data, tmp_path / "lab.yaml"), MATRICES, TODAY)


def _port(port: str, mtu: str) -> str:
    return (HEAD + f"[Match]\nName={port}\n\n[Link]\n{mtu}RequiredForOnline=no\n\n"
            f"[Network]\nVLAN={port}.2101\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n")


def _netdev(port: str, mtu: str) -> str:
    return HEAD + f"[NetDev]\nName={port}.2101\nKind=vlan\n{mtu}\n[VLAN]\nId=2101\n"


def _vlan(port: str, mtu: str) -> str:
    return (HEAD + f"[Match]\nName={port}.2101\n\n[Link]\n{mtu}RequiredForOnline=no\n\n"
            "[Network]\nLinkLocalAddressing=ipv6\nIPv6AcceptRA=no\n")


def test_vlan_files_carry_the_fabric_mtu_and_storage_stays_on_infiniband(lab, tmp_path):
    """Storage over InfiniBand (IPoIB: no VLAN on it): validate passes, the RoCE compute ports and
    their VLANs get roce0's 9000 MTU, the unattached RoCE port (no fabric) none, the storage address
    lands on ibs with stor0's MTU, and the isolation table calls the VLAN enforced."""
    r = _validate(vlan_roce(lab, "ibs"), tmp_path)
    assert r.ok and [f.code for f in r.findings] == ["slurm-topology-fabrics"], [(f.code, f.message) for f in r.findings]
    tree = build_tree(r, ["network"])[0]
    nine = "MTUBytes=9000\n"
    base = "network/vlan/secure/10-clusterdef-"
    want = {f"{base}{p}{ext}": text for p, mtu in (("ens1f0", nine), ("ens1f1", nine), ("ens2", ""))
            for ext, text in ((".network", _port(p, mtu)), (".2101.netdev", _netdev(p, mtu)),
                              (".2101.network", _vlan(p, mtu)))}
    assert {k: v for k, v in tree.items() if k.startswith("network/vlan/")} == want
    assert tree["network/storage/secure/20-clusterdef-storage-sgpu02.network"] == (
        "# Rendered by clusterdef: host sgpu02 (node group secure) of cluster lab on storage fabric stor0 (IPoIB) "
        "through ibs; install into /etc/systemd/network/.\n[Match]\nName=ibs\nHost=sgpu02\n\n[Link]\nMTUBytes=2044\n"
        "RequiredForOnline=yes\n\n[Network]\nAddress=10.40.0.42/24\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n")
    assert tenancy.storage_cuts(r.definition) == []
    net = tenancy.enforcement(r.definition)["secure"].layers["network"]
    assert (net.gap, net.cut, net.files) == ("", "", ("network/vlan/secure/",))


def test_storage_on_a_port_the_vlan_takes_is_refused_and_not_enforced(lab, tmp_path):
    """Storage on RoCE port ens2, which the VLAN takes: one located error with its hint (not also
    dedicated-not-isolated), and the isolation table's network claim is not enforced, both from the
    one StorageCut."""
    r = _validate(vlan_roce(lab, "ens2"), tmp_path)
    assert [(f.code, f.dotted) for f in r.errors] == [("isolation-cuts-storage", "nodes.secure.attachments.storage.nic")]
    [f] = r.errors
    assert f.message == (
        "node group `secure` attaches storage (`stor0`) to port ens2, which tenant `secure`'s VLAN 2101 takes: "
        "10-clusterdef-ens2.network (the VLAN, no address) is the first .network systemd-networkd applies to ens2, "
        "so the storage address is never set, and the switch port carries the tenant's VLAN, not the shared "
        "storage network")
    assert f.hint == ("attach storage over an InfiniBand fabric (IPoIB carries no VLAN), or isolate `secure` by "
                      "partition key instead of VLAN; clusterdef does not place storage servers on tenant VLANs")
    d = r.definition
    assert tenancy.storage_cuts(d) == [tenancy.StorageCut("vlan", "stor0", ("secure",), ("secure",), port="ens2")]
    net = tenancy.enforcement(d)["secure"].layers["network"]
    assert net.gap == "" and net.cut == (
        "its VLAN takes storage port ens2 of node group secure (storage fabric stor0): the storage address is "
        "never set there and the port carries only the VLAN")
    table = tenancy.to_json(tenancy.enforcement(d))["tenants"]["secure"]["layers"]["network"]
    assert table["enforced"] is False and table["gap"] == net.cut


def test_partition_key_cut_is_a_gap_of_the_claim_too():
    """tests/bad/1724 (lustre over InfiniBand while `secure` is isolated by partition key): the same
    StorageCut that validate reports makes `secure`'s partition-key claim not enforced."""
    bad = Path(__file__).parent / "bad" / "1724-isolation-cuts-storage.yaml"
    r = validate_file(bad, MATRICES, TODAY)
    assert [f.code for f in r.errors] == ["isolation-cuts-storage"]
    [c] = tenancy.storage_cuts(r.definition)
    assert (c.kind, c.filesystem, c.groups, c.tenants) == ("partition-key", "lustre1", ("train", "secure"), ("secure",))
    net = tenancy.enforcement(r.definition)["secure"].layers["network"]
    assert net.gap == "" and net.cut == (
        "node group(s) secure mount filesystem lustre1 over InfiniBand fabric ib0, whose servers the partition keys "
        "leave limited members of Default: they cannot reach them")
    # the other tenants claim no network isolation: nothing of theirs is called enforced
    assert all(not tenancy.enforcement(r.definition)[t].layers["network"].mechanisms for t in ("vision", "nlp"))


def test_systemd_networkd_gives_the_port_the_vlan_file_and_never_the_storage_address(lab, tmp_path):
    """Why the combination is refused, on a real systemd-networkd (252 here) with the files clusterdef
    would render for it, on a node named sgpu01 with ports ens1f0 and ens2: ens2 matches
    10-clusterdef-ens2.network (the VLAN's) and gets no storage address; each port gets its fabric's 9000
    MTU from its VLAN .network, before networkd creates the VLAN on it. This kernel has no 802.1Q, so the VLAN interfaces themselves are not created here."""
    r = _validate(vlan_roce(lab, "ens2"), tmp_path)
    resolved = resolve(r.definition, r.matrix, tmp_path)
    tree = network.render(resolved)
    files = {k: v for k, v in tree.items() if k.startswith(("network/vlan/secure/", "network/storage/secure/"))
             and "ens1f1" not in k}
    assert "network/storage/secure/20-clusterdef-storage-sgpu01.network" in files
    log, ip = _networkd(files, tmp_path, "sgpu01", ["ens1f0", "ens2"])
    assert "ens2: found matching network '/etc/systemd/network/10-clusterdef-ens2.network'" in log, log
    assert "20-clusterdef-storage-sgpu01.network" not in re.findall(r"ens2: found matching network '([^']+)'", log)[0]
    assert "10.40.0.41" not in ip and not re.search(r"ens2\s+inet ", ip), ip
    assert re.search(r"ens1f0@peer0: .* mtu 9000 ", ip) and re.search(r"ens2@peer1: .* mtu 9000 ", ip), ip
    # networkd sets the port's MTU before it creates the VLAN on it (which then starts at the port's MTU)
    assert "ens1f0: MTU is changed: 1500 → 9000" in log and log.index("ens1f0: MTU set.") < log.index(
        "ens1f0.2101: Creating"), log
    assert not re.search(r"10-clusterdef-[^:\s]+:\d+:", log), log  # no key networkd 252 cannot use
