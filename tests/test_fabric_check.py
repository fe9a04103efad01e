"""`clusterdef fabric check` and the ibsim net file (clusterdef.fabric).

The proof runs the real simulator: the lab fabric's net file in `ibsim`, `ibnetdiscover` (through
ibsim-run, attached at the subnet manager's HCA) prints the as-built fabric, and `fabric check`
reads it: clean when the net file is the definition's, and exactly the injected faults (two
swapped cables, one missing link, one degraded link) when it is not. The parser tests use output
captured from such a run (tests/fixtures/ibnetdiscover/)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab_variants import without_governed_data

from clusterdef.fabric import check as fc
from clusterdef.fabric import ibsim
from clusterdef.fabric.layout import FabricError, layout
from clusterdef.validate.pipeline import validate_file

REPO = Path(__file__).resolve().parents[1]
def _lab_without_secure() -> Path:
    """The lab as the captured fixtures saw it: without the `secure` tenant's two nodes (its fabric
    then has the 6 hosts and 50 cables the captures in tests/fixtures/ibnetdiscover/ hold)."""
    import tempfile

    from ruamel.yaml import YAML

    data = YAML(typ="safe").load((REPO / "clusters" / "lab.yaml").read_text())
    without_governed_data(data)  # its datasets and approvals name the secure tenant and node group
    del data["nodes"]["secure"], data["slurm"]["partitions"]["secure"], data["tenants"]["secure"]
    data["filesystems"]["scratch"]["node_groups"].remove("secure")
    data.get("identity", {}).get("tenant_groups", {}).pop("secure", None)
    data.get("service", {}).get("maintenance_windows", {}).pop("secure-weekend", None)  # its partition is gone
    for sw in data["network"]["fabrics"]["ib0"]["topology"]["switches"].values():
        if "nodes" in sw:
            sw["nodes"] = ",".join(p for p in sw["nodes"].split(",") if not p.startswith("sgpu"))
    out = Path(tempfile.mkdtemp(prefix="cdfabric-")) / "lab.yaml"
    YAML().dump(data, out)
    return out


LAB = _lab_without_secure()
FIX = REPO / "tests" / "fixtures" / "ibnetdiscover"
FAULTS = ibsim.Faults(swap=((("gpu001", 1), ("gpu003", 1)),), drop=(("gpu002", 2),),
                      degrade=(ibsim.Degrade(("kgpu01", 3), width=1),))
EXPECTED = [("wrong-leaf", "gpu001", 1), ("wrong-leaf", "gpu003", 1), ("missing-link", "gpu002", 2),
            ("degraded-link", "kgpu01", 3)]


@pytest.fixture(scope="module")
def lab():
    r = validate_file(LAB)
    assert r.ok
    return r.definition


def need_ibsim() -> None:
    """ibsim, ibsim-run and ibnetdiscover. In CI a missing tool is a failure, not a skip."""
    missing = [t for t in ("ibsim", "ibsim-run", "ibnetdiscover") if shutil.which(t) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} missing in CI: scripts/deps.d/30-fabric.sh must install "
                        "ibsim-utils and infiniband-diags")
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install -y ibsim-utils opensm infiniband-diags; "
                    "scripts/install-test-deps does it)")


def discover(net_text: str, work: Path, sm: str) -> str:
    """Run ibsim on `net_text` and return what ibnetdiscover prints; ibsim is ended by its pid."""
    net = work / "fabric.net"
    net.write_text(net_text)
    env = {**os.environ, "IBSIM_SOCKNAME": f"clusterdef-{os.getpid()}-{work.name}"[:100]}
    log = open(work / "ibsim.log", "w")
    sim = subprocess.Popen(["ibsim", "-s", "-n", str(net)], stdout=log, stderr=subprocess.STDOUT, env=env,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while "Network simulator ready" not in (work / "ibsim.log").read_text():
            assert sim.poll() is None, (work / "ibsim.log").read_text()
            assert time.monotonic() < deadline, "ibsim did not come up"
            time.sleep(0.05)
        r = subprocess.run(["ibsim-run", "ibnetdiscover"], env={**env, "SIM_HOST": sm},
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout
    finally:
        os.kill(sim.pid, signal.SIGTERM)
        sim.wait(timeout=10)
        log.close()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterdef", *args, "--today", "2026-11-30"],
                          capture_output=True, text=True, timeout=120)


def test_proof_clean_and_faults(lab, tmp_path):
    need_ibsim()
    sm = ibsim.sm_hca(lab, "ib0")
    (tmp_path / "clean").mkdir()
    (tmp_path / "faults").mkdir()
    clean = tmp_path / "clean.txt"
    clean.write_text(discover(ibsim.net_file(lab, "ib0"), tmp_path / "clean", sm))
    drain, prom = tmp_path / "drain.sh", tmp_path / "fabric.prom"
    r = cli("fabric", "check", str(LAB), "--ibnetdiscover", str(clean), "--drain", str(drain),
            "--prometheus", str(prom), "-f", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["issues"] == [] and doc["links_checked"] == 6 * 8 + 2
    assert drain.read_text() == ""
    assert 'clusterdef_fabric_links_checked{fabric="ib0"} 50' in prom.read_text()

    bad = tmp_path / "faults.txt"
    bad.write_text(discover(ibsim.net_file(lab, "ib0", FAULTS), tmp_path / "faults", sm))
    r = cli("fabric", "check", str(LAB), "--ibnetdiscover", str(bad), "--drain", str(drain), "-f", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    issues = json.loads(r.stdout)["issues"]
    assert [(i["kind"], i["node"], i["port"]) for i in issues] == EXPECTED
    assert issues[0]["expected"] == "leaf01" and issues[0]["actual"].startswith("leaf02 port ")
    assert issues[1]["expected"] == "leaf02" and issues[1]["actual"].startswith("leaf01 port ")
    assert issues[3]["actual"] == "1xHDR (50 Gb/s)"
    assert drain.read_text().splitlines() == [
        "scontrol update 'NodeName=gpu[001,003]' State=DRAIN 'Reason=clusterdef fabric: wrong-leaf'",
        "scontrol update NodeName=gpu002 State=DRAIN 'Reason=clusterdef fabric: missing-link'",
        "kubectl taint nodes kgpu01 clusterdef.dev/fabric=degraded-link:NoSchedule --overwrite",
    ]
    text = cli("fabric", "check", str(LAB), "--ibnetdiscover", str(bad))
    assert text.returncode == 1 and "4 issue(s)" in text.stdout and "[0x" in text.stdout


# ------------------------------------------------------------------ net file (pure)

def test_net_file_is_deterministic_and_complete(lab):
    text = ibsim.net_file(lab, "ib0")
    assert text == ibsim.net_file(lab, "ib0")
    records = [ln for ln in text.splitlines() if ln.startswith(("Switch", "Hca"))]
    assert records[0] == 'Hca\t1 "sm-ib0"'  # first record: ibsim's default attachment point
    assert 'Switch\t17 "leaf01"' in records and 'Switch\t33 "leaf02"' in records  # 2x8 / 4x8 hosts + uplink
    assert 'Hca\t8 "gpu001"' in records and len(records) == 1 + 3 + 6
    # each cable is written at both ends with the same rate
    assert '[17]\t"spine01"[1]\t\t# lid 0 8xHDR' in text and '[1]\t"leaf01"[17]\t\t# lid 0 8xHDR' in text
    assert ibsim.hca_names(lab) == {h: h for h in ("gpu001", "gpu002", "gpu003", "gpu004", "kgpu01", "kgpu02")}
    assert ibsim.hca_name(lab, "ib0", "kgpu01") == "kgpu01"


def test_rated_link():
    assert ibsim.rated_link(400) == (8, "HDR")  # 4xNDR is beyond ibsim 0.10: same rate on 8 lanes
    assert ibsim.rated_link(400, max_speed="NDR") == (4, "NDR")
    assert ibsim.rated_link(200) == (4, "HDR")
    assert ibsim.rated_link(100) == (4, "EDR")
    with pytest.raises(FabricError):
        ibsim.rated_link(800)


def _cables(text: str) -> set[tuple[str, str]]:
    """(record name, port line) pairs of a net file."""
    out, node = set(), ""
    for ln in text.splitlines():
        if ln.startswith(("Switch", "Hca")):
            node = ln.split('"')[1]
        elif ln.startswith("["):
            out.add((node, ln.split("\t\t#")[0] + " " + ln.rsplit(" ", 1)[-1]))
    return out


def test_faults_change_only_their_cables(lab):
    clean, bad = _cables(ibsim.net_file(lab, "ib0")), _cables(ibsim.net_file(lab, "ib0", FAULTS))
    assert sorted(clean - bad) == sorted([
        ("gpu001", '[1]\t"leaf01"[1] 8xHDR'), ("leaf01", '[1]\t"gpu001"[1] 8xHDR'),  # swapped
        ("gpu003", '[1]\t"leaf02"[1] 8xHDR'), ("leaf02", '[1]\t"gpu003"[1] 8xHDR'),
        ("gpu002", '[2]\t"leaf01"[10] 8xHDR'), ("leaf01", '[10]\t"gpu002"[2] 8xHDR'),  # dropped
        ("kgpu01", '[3]\t"leaf02"[19] 8xHDR'), ("leaf02", '[19]\t"kgpu01"[3] 8xHDR')])  # degraded
    assert sorted(bad - clean) == sorted([
        ("gpu001", '[1]\t"leaf02"[1] 8xHDR'), ("leaf02", '[1]\t"gpu001"[1] 8xHDR'),
        ("gpu003", '[1]\t"leaf01"[1] 8xHDR'), ("leaf01", '[1]\t"gpu003"[1] 8xHDR'),
        ("kgpu01", '[3]\t"leaf02"[19] 1xHDR'), ("leaf02", '[19]\t"kgpu01"[3] 1xHDR')])
    with pytest.raises(FabricError):
        ibsim.net_file(lab, "ib0", ibsim.Faults(drop=(("gpu001", 9),)))


def test_block_topology(lab):
    from clusterdef.model.network import BlockTopology

    blocks = BlockTopology.model_validate({"kind": "block", "blocks": {
        "su1": {"nodes": "gpu[001-004]"}, "su2": {"nodes": "kgpu[01-02]"}}})
    fabric = lab.network.fabrics["ib0"].model_copy(update={"topology": blocks})
    d = lab.model_copy(update={"network": lab.network.model_copy(update={"fabrics": {"ib0": fabric}})})
    lay = layout(d, "ib0")
    assert lay.switches == ("su1", "su2", "ib0-core") and lay.uplinks == (("su1", "ib0-core"), ("su2", "ib0-core"))
    text = ibsim.net_file(d, "ib0")
    assert 'Switch\t3 "ib0-core"' in text and '[1]\t"ib0-core"[3]' in text  # the SM on the core


# ------------------------------------------------------------------ parser and check on captured output

def test_parse_captured_clean(lab):
    topo = fc.read(FIX / "lab-clean.txt")
    kinds = sorted(n.kind for n in topo.nodes.values())
    assert kinds == ["Ca"] * 7 + ["Switch"] * 3
    assert len(topo.links) == 2 * (6 * 8 + 2 + 1)  # both ends of every cable
    report = fc.compare(layout(lab, "ib0"), topo)
    assert report.ok and report.links_checked == 50


def test_check_captured_faults(lab):
    report = fc.compare(layout(lab, "ib0"), fc.read(FIX / "lab-faults.txt"))
    assert [(i.kind, i.node, i.port) for i in report.issues] == EXPECTED


def _edit(old: str, new: str) -> str:
    text = (FIX / "lab-clean.txt").read_text()
    assert old in text
    return text.replace(old, new)


def test_unknown_and_hostile_nodes(lab):
    hostile = '$(touch /tmp/pwned)"; rm -rf / #\u202e'
    text = _edit('# "kgpu02"\n', f'# "{hostile}"\n').replace('# "kgpu02" lid', f'# "{hostile}" lid')
    report = fc.compare(layout(lab, "ib0"), fc.parse(text))
    kinds = [(i.kind, i.node) for i in report.issues]
    assert ("unknown-node", "unprintable:$(touch?/tmp/pwned)\";?rm?-rf?/?#?") not in kinds  # masked:
    unknown = [i for i in report.issues if i.kind == "unknown-node"]
    assert len(unknown) == 1 and unknown[0].node.startswith("unprintable:") and "$(" not in unknown[0].node
    assert unknown[0].guid.startswith("0x")
    assert [i.kind for i in report.issues if i.node == "kgpu02"] == ["missing-link"] * 8
    for line in fc.drain_lines(report) + fc.prometheus(report).splitlines():
        assert "$(" not in line and "\u202e" not in line and "rm -rf" not in line


def test_duplicate_and_unexpected(lab):
    text = _edit('# "kgpu02"\n', '# "kgpu01 mlx5_1"\n')
    report = fc.compare(layout(lab, "ib0"), fc.parse(text))
    assert {i.kind for i in report.issues} == {"duplicate-node", "missing-link"}


def test_missing_uplink(lab):
    text = (FIX / "lab-clean.txt").read_text()
    lines = [ln for ln in text.splitlines() if '"spine01"' not in ln or "base port" in ln]
    lines = [ln for ln in lines if not ('"leaf0' in ln and ln.startswith("[") and "S-" in ln.split("#")[0]
                                         and "spine" not in ln and "(" not in ln)]
    report = fc.compare(layout(lab, "ib0"), fc.parse("\n".join(lines)))
    assert [(i.kind, i.node) for i in report.issues] == [("missing-link", "leaf01"), ("missing-link", "leaf02")]


@pytest.mark.parametrize("text", [
    "",
    "hello world\n",
    '[1]\t"S-0000000000200000"[1]\t\t# "leaf01" lid 0 4xHDR\n',  # a port before any node
    'Switch\t36 "S-0000000000200000"\t\t# "leaf01" base port 0 lid 0 lmc 0\n[99]\t"H-01"[1](2)\t# "x" lid 0 4xHDR\n',
    'Switch\t36 "S-0000000000200000"\t\t# "leaf01" base port 0 lid 0 lmc 0\n[1]\t"H-01"[1](2)\t# "x" lid 0 3xHDR\n',
    'Switch\t36 "S-0000000000200000"\t\t# "leaf01" base port 0 lid 0 lmc 0\n[1]\t"H-01"[1](2)\t# "x" lid 0 4xZZZ\n',
    'Ca\t2 "H-00000000001000zz"\t\t# "gpu001"\n',
    "Ca\t2 " + '"H-0000000000100000"' + "\t# " + "x" * 5000 + "\n",
], ids=["empty", "prose", "orphan-port", "port-range", "width", "speed", "guid", "long-line"])
def test_parse_refuses(text):
    with pytest.raises(fc.IbnetError) as exc:
        fc.parse(text, "f.txt")
    f = exc.value.findings[0]
    assert f.code == "ibnetdiscover-invalid" and f.file == "f.txt"


def test_cli_bad_input(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("Switch garbage\n")
    r = cli("fabric", "check", str(LAB), "--ibnetdiscover", str(bad))
    assert r.returncode == 2 and "ibnetdiscover-invalid" in r.stderr and "Traceback" not in r.stderr
    r = cli("fabric", "check", str(LAB), "--ibnetdiscover", str(FIX / "lab-clean.txt"), "--fabric", "nope")
    assert r.returncode == 2 and "no fabric 'nope'" in r.stderr


# ------------------------------------------------------------------ rail-optimised scalable units

RAIL_FAULTS = ibsim.Faults(swap=((("gpu001", 1), ("gpu001", 2)),), drop=(("gpu003", 5),),
                           degrade=(ibsim.Degrade(("kgpu01", 3), width=1),))
RAIL_EXPECTED = [("wrong-rail", "gpu001", 1), ("wrong-rail", "gpu001", 2), ("missing-link", "gpu003", 5),
                 ("degraded-link", "kgpu01", 3)]


@pytest.fixture(scope="module")
def rail_def(tmp_path_factory):
    """The lab as two rail-optimised scalable units of 8 rails under two spines (conftest.as_rail)."""
    from ruamel.yaml import YAML

    from conftest import as_rail, dump_yaml

    data = as_rail(YAML(typ="safe").load((REPO / "clusters" / "lab.yaml").read_text()))
    path = dump_yaml(data, tmp_path_factory.mktemp("rail") / "rail.yaml")
    r = validate_file(path)
    assert r.ok, [(f.code, f.message) for f in r.findings]
    return path, r.definition


def test_rail_layout(rail_def):
    _, d = rail_def
    lay = layout(d, "ib0")
    assert lay.kind == "rail" and len(lay.switches) == 2 * 8 + 2
    assert lay.hosts["gpu003"].leaf_of(5) == "su2-rail5" and lay.hosts["sgpu01"].leaf_of(8) == "su1-rail8"
    assert ("su2-rail8", "spine02") in lay.uplinks and len(lay.uplinks) == 16 * 2
    text = ibsim.net_file(d, "ib0")
    # rail leaf: its unit's hosts on port i of each, then the two spines
    assert 'Switch\t5 "su1-rail3"\n[1]\t"gpu001"[3]\t\t# lid 0 8xHDR\n[2]\t"gpu002"[3]' in text
    assert 'Switch\t17 "spine01"' in text and 'Switch\t16 "spine02"' in text  # 16 leaves (+ the SM on spine01)


def test_rail_proof_clean_and_faults(rail_def, tmp_path):
    """2 units x 8 rails in ibsim: clean as rendered; a rail swap inside one node (HCA 1 and 2 on each
    other's rail leaf), one missing cable and one degraded link are reported exactly."""
    need_ibsim()
    path, d = rail_def
    sm = ibsim.sm_hca(d, "ib0")
    (tmp_path / "clean").mkdir()
    (tmp_path / "faults").mkdir()
    clean = tmp_path / "clean.txt"
    clean.write_text(discover(ibsim.net_file(d, "ib0"), tmp_path / "clean", sm))
    r = cli("fabric", "check", str(path), "--ibnetdiscover", str(clean), "-f", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["issues"] == [] and doc["links_checked"] == 8 * 8 + 16 * 2

    bad = tmp_path / "faults.txt"
    bad.write_text(discover(ibsim.net_file(d, "ib0", RAIL_FAULTS), tmp_path / "faults", sm))
    drain = tmp_path / "drain.sh"
    r = cli("fabric", "check", str(path), "--ibnetdiscover", str(bad), "--drain", str(drain), "-f", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    issues = json.loads(r.stdout)["issues"]
    assert [(i["kind"], i["node"], i["port"]) for i in issues] == RAIL_EXPECTED
    assert issues[0]["expected"] == "su1-rail1" and issues[0]["actual"].startswith("su1-rail2 port ")
    assert issues[1]["expected"] == "su1-rail2" and issues[1]["actual"].startswith("su1-rail1 port ")
    assert issues[2]["expected"] == "cable to su2-rail5"
    assert drain.read_text().splitlines() == [
        "scontrol update NodeName=gpu001 State=DRAIN 'Reason=clusterdef fabric: wrong-rail'",
        "scontrol update NodeName=gpu003 State=DRAIN 'Reason=clusterdef fabric: missing-link'",
        "kubectl taint nodes kgpu01 clusterdef.dev/fabric=degraded-link:NoSchedule --overwrite",
    ]


def test_rail_swap_across_units_is_wrong_leaf(rail_def):
    """The same rail in another unit is the wrong leaf, not the wrong rail (pure: the net file as
    ibnetdiscover would see it is not needed to classify)."""
    _, d = rail_def
    lay = layout(d, "ib0")
    topo = fc.Topology()
    guid = {n: i + 1 for i, n in enumerate(sorted(lay.names))}
    for n in lay.names:
        topo.nodes[guid[n]] = fc.Node("Switch" if n in lay.switches else "Ca", guid[n], 64, n, 0)
    net = ibsim.inject(ibsim.build(d, "ib0"), ibsim.Faults(swap=((("gpu001", 4), ("gpu003", 4)),)))
    for link in net.links:
        for a, b in ((link.a, link.b), (link.b, link.a)):
            topo.links[fc.Port(guid[a[0]], a[1])] = (fc.Port(guid[b[0]], b[1]), link.width, link.speed)
    report = fc.compare(lay, topo)
    assert [(i.kind, i.node, i.port, i.expected) for i in report.issues] == [
        ("wrong-leaf", "gpu001", 4, "su1-rail4"), ("wrong-leaf", "gpu003", 4, "su2-rail4")]
