"""`clusterdef fabric check --lldp`: the RoCE lab (tests/roce_lab.py, two rail-optimised units of 8
rails) against `lldpctl -f json` of each host (tests/fixtures/lldp/, built in lldpd's json format:
see its README). Clean as declared; a swapped cable pair, an unplugged cable and a link trained at
200 Gb/s are reported exactly, with the drain lines and Prometheus file of the InfiniBand check.
Pure: no lldpd runs here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_runner import CliRunner
from clusterdef.cli import app
from clusterdef.fabric import lldp as fl
from clusterdef.fabric.layout import FabricError, layout
from clusterdef.validate.pipeline import validate_file
from roce_lab import roce_lab

FIX = Path(__file__).resolve().parent / "fixtures" / "lldp"
EXPECTED = [("wrong-rail", "gpu001", 1), ("wrong-rail", "gpu001", 2), ("missing-link", "gpu003", 5),
            ("degraded-link", "kgpu01", 3)]


@pytest.fixture(scope="module")
def rail(tmp_path_factory):
    path = roce_lab(tmp_path_factory.mktemp("roce") / "roce-rail.yaml", rail=True)
    r = validate_file(path)
    assert r.ok, [(f.code, f.message) for f in r.findings]
    return path, r.definition


def cli(*args: str):
    """The verb in-process (cli_runner): exit code as returncode, stdout, stderr."""
    r = CliRunner().invoke(app, [*args, "--today", "2026-11-30"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception  # no traceback
    r.returncode = r.exit_code
    return r


def test_layout_of_roce_fabric(rail):
    _, d = rail
    lay = layout(d, None, kind="roce")
    assert lay.hosts["gpu003"].ifaces == tuple(f"roce{i}" for i in range(8))
    assert lay.hosts["gpu003"].leaf_of(5) == "su2-rail5"
    with pytest.raises(FabricError, match="no InfiniBand fabric.*check them with --lldp"):
        layout(d, None)
    with pytest.raises(FabricError, match=r"is roce, not InfiniBand \(check it with --lldp\)"):
        layout(d, "ib0")


def test_clean_and_faults_cli(rail, tmp_path):
    path, _ = rail
    drain, prom = tmp_path / "drain.sh", tmp_path / "fabric.prom"
    r = cli("fabric", "check", str(path), "--lldp", str(FIX / "clean"), "--drain", str(drain),
            "--prometheus", str(prom), "-f", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["issues"] == [] and doc["links_checked"] == 8 * 8
    assert drain.read_text() == ""
    assert 'clusterdef_fabric_links_checked{fabric="ib0"} 64' in prom.read_text()

    r = cli("fabric", "check", str(path), "--lldp", str(FIX / "faults"), "--drain", str(drain),
            "--prometheus", str(prom), "-f", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    issues = json.loads(r.stdout)["issues"]
    assert [(i["kind"], i["node"], i["port"]) for i in issues] == EXPECTED
    assert issues[0]["expected"] == "su1-rail1" and issues[0]["actual"] == "su1-rail2 port swp1 on roce0"
    assert issues[1]["expected"] == "su1-rail2" and issues[1]["actual"] == "su1-rail1 port swp1 on roce1"
    assert issues[2]["expected"] == "cable from roce4 to su2-rail5"
    assert issues[3]["actual"] == "200 Gb/s (200GbaseCR4)"
    assert drain.read_text().splitlines() == [
        "scontrol update NodeName=gpu001 State=DRAIN 'Reason=clusterdef fabric: wrong-rail'",
        "scontrol update NodeName=gpu003 State=DRAIN 'Reason=clusterdef fabric: missing-link'",
        "kubectl taint nodes kgpu01 clusterdef.dev/fabric=degraded-link:NoSchedule --overwrite",
    ]
    assert 'clusterdef_fabric_issues{fabric="ib0",kind="wrong-rail"} 2' in prom.read_text()
    text = cli("fabric", "check", str(path), "--lldp", str(FIX / "faults"))
    assert text.returncode == 1 and "4 issue(s)" in text.stdout


def test_one_file_and_missing_hosts(rail, tmp_path):
    """One host's file: that host is checked, every other host's ports are missing."""
    _, d = rail
    lay = layout(d, None, kind="roce")
    report = fl.compare(lay, fl.read(FIX / "clean" / "gpu002.json"))
    assert report.links_checked == 8
    assert {i.node for i in report.issues} == set(lay.hosts) - {"gpu002"}
    assert {i.actual for i in report.issues} == {"no lldpctl output"}


def _doc(iface: str = "roce0", switch: str = "su1-rail1", port: str = "swp1", mau: str | None = None) -> dict:
    p: dict = {"id": {"type": "ifname", "value": port}, "descr": port, "ttl": "120"}
    if mau is not None:
        p["auto-negotiation"] = {"supported": False, "enabled": False, "current": mau}
    return {"lldp": {"interface": {iface: {"via": "LLDP", "rid": "1", "chassis": {
        switch: {"id": {"type": "mac", "value": "00:00:00:00:00:02"}, "descr": "x"}}, "port": p}}}}


def test_single_interface_object_and_unnamed_chassis():
    """lldpd collapses a one-element list: one neighbor is `interface: {name: {...}}`; a chassis
    without a system name is the bare object."""
    got = fl.parse(_doc(mau="100GbaseCR4 - 100GBASE-R PCS/PMA over 4 lane shielded copper"))
    assert got == {"roce0": [fl.Neighbor("su1-rail1", "swp1", "100GbaseCR4 - 100GBASE-R PCS/PMA over 4 lane "
                                                              "shielded copper")]}
    assert got["roce0"][0].gbps == 100
    unnamed = {"lldp": {"interface": {"roce0": {"chassis": {"id": {"type": "mac", "value": "00:00:00:00:00:02"},
                                                            "descr": "x"}, "port": {"id": {"type": "mac",
                                                                                           "value": "m"}}}}}}
    assert fl.parse(unnamed)["roce0"][0].chassis == ""
    assert fl.parse({"lldp": {}}) == {}


@pytest.mark.parametrize(("mau", "gbps"), [("400GbaseR - x", 400), ("2p5GbaseX - x", 2.5), ("10GigBaseR - x", 10),
                                           ("1000BaseTFD - x", 1), ("unknown", None), ("", None)])
def test_mau_speed(mau, gbps):
    assert fl.mau_gbps(mau) == gbps


def test_hostile_strings_are_masked(rail, tmp_path):
    _, d = rail
    lay = layout(d, None, kind="roce")
    hostile = "$(touch /tmp/pwned)\x1b[2J\u202e"
    views = {"gpu001": fl.parse(_doc("roce0", hostile, hostile, hostile)), hostile: {}}
    report = fl.compare(lay, views)
    wrong = [i for i in report.issues if i.node == "gpu001" and i.port == 1]
    assert wrong[0].kind == "wrong-leaf" and wrong[0].actual.startswith("unprintable:")
    unknown = [i for i in report.issues if i.kind == "unknown-node"]
    assert len(unknown) == 1 and unknown[0].node.startswith("unprintable:")
    from clusterdef.fabric import check as fc
    for line in [i.text() for i in report.issues] + fc.drain_lines(report) + fc.prometheus(report).splitlines():
        assert "$(" not in line and "\x1b" not in line and "\u202e" not in line


def test_second_neighbor_and_other_interface_on_the_fabric(rail):
    _, d = rail
    lay = layout(d, None, kind="roce")
    view = fl.parse(json.loads((FIX / "clean" / "gpu001.json").read_text()))
    view["roce0"].append(fl.Neighbor("rogue-switch", "eth9", ""))
    view["eno2"] = [fl.Neighbor("su1-rail3.fabric.example", "swp40", "")]  # FQDN: its first label
    report = fl.compare(lay, {**fl.read(FIX / "clean"), "gpu001": view})
    assert [(i.kind, i.node, i.port) for i in report.issues] == [("unexpected-link", "gpu001", 0),
                                                                   ("unexpected-link", "gpu001", 1)]


@pytest.mark.parametrize(("text", "where"), [
    ('{"lldp": [{"interface": []}]}', "json0"),
    ('{"other": 1}', 'no top-level "lldp"'),
    ('{"lldp": {"interface": "eth0"}}', "lldp.interface: expected an object or a list"),
    ('{"lldp": {"interface": {"eth0": {"port": {"id": 5}}}}}', "lldp.interface.eth0.port.id: expected a string"),
    ('{"lldp": {"interface": [{"eth0": {}}, {"eth1": []}]}}', "lldp.interface[1].eth1: expected an object"),
    ('{"lldp": {"interface": {"eth0": {"chassis": "x"}}}}', "lldp.interface.eth0.chassis"),
])
def test_refuses_with_the_json_path(tmp_path, text, where):
    f = tmp_path / "gpu001.json"
    f.write_text(text)
    with pytest.raises(fl.LldpError) as exc:
        fl.read(f)
    finding = exc.value.findings[0]
    assert finding.code == "lldp-invalid" and finding.file == str(f) and where in finding.message


def test_cli_bad_input(rail, tmp_path):
    path, _ = rail
    bad = tmp_path / "lldp"
    shutil.copytree(FIX / "clean", bad)
    (bad / "gpu002.json").write_text('{"lldp": {"interface": [\n  {"roce0": }\n]}}\n')
    r = cli("fabric", "check", str(path), "--lldp", str(bad))
    assert r.returncode == 2 and "json-syntax" in r.stderr and "gpu002.json:2" in r.stderr
    assert "Traceback" not in r.stderr
    (bad / "gpu002.json").write_text('{"lldp": []}')
    r = cli("fabric", "check", str(path), "--lldp", str(bad))
    assert r.returncode == 2 and "lldp-invalid" in r.stderr and "json0" in r.stderr and "Traceback" not in r.stderr
    r = cli("fabric", "check", str(path), "--lldp", str(FIX / "clean"), "--ibnetdiscover", str(FIX / "make.py"))
    assert r.returncode == 2 and "give one of" in r.stderr
    r = cli("fabric", "check", str(path), "--ibnetdiscover", str(FIX / "make.py"))
    assert r.returncode == 2 and "no InfiniBand fabric" in r.stderr and "--lldp" in r.stderr
    r = cli("fabric", "check", str(path), "--lldp", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
