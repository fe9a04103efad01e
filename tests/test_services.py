"""Service hosts (docs/services.md): management and control-plane hosts with no GPU stack. The rendered
inventory groups them by service and keeps them out of every GPU role; no rollout wave, in the rendered
inventory (render/ansible waves) nor in the plan (plan/rollout.waves), mixes them with GPU nodes, holds two
Slurm controllers, the slurmdbd host with a controller, or more etcd members than quorum spares."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterdef import hostlist
from clusterdef.model import Definition
from clusterdef.plan import rollout
from clusterdef.probe import __file__ as probe_pkg
from clusterdef.render.ansible.render import inventory, variables
from clusterdef.render.ansible.render import waves as inventory_waves
from clusterdef.resolve import resolve
from conftest import CLUSTERS

LAB = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())
SERVICE_GROUPS = ("ctl", "acct", "mgmt", "k8sctl")


# ---------------------------------------------------------------- inventory

def test_inventory_has_one_group_per_service_and_no_gpu_role(lab_resolved):
    inv = inventory(lab_resolved, variables(lab_resolved))["all"]["children"]
    hosts = {name: hostlist.names(",".join(p.replace(":", "-") for p in g["hosts"]))
             for name, g in [*inv.items(), *inv["slurm_control_plane"]["children"].items()] if "hosts" in g}
    assert hosts["slurm_controllers"] == ("slurmctl01",) and hosts["slurmdbd"] == ("slurmdbd01",)
    assert hosts["boot_server"] == hosts["subnet_managers"] == hosts["prometheus"] == ("mgmt01",)
    assert hosts["kube_control_plane"] == hosts["etcd"] == ("k8sctl01",)
    # service hosts are not `nodes` (enforce-baseline's GPU admission) nor in a cp_* group (GPU roles)
    assert set(inv["service_hosts"]["children"]) == {f"group_{g}" for g in SERVICE_GROUPS}
    assert not set(inv["nodes"]["children"]) & set(inv["service_hosts"]["children"])
    for cp in ("cp_slurm", "cp_kubernetes"):
        assert not set(inv[cp]["children"]) & set(inv["service_hosts"]["children"]), cp
    assert "cp_none" not in inv
    gv = variables(lab_resolved)
    assert "hw_mgmt_server" not in gv, "no firmware or GPU facts for a GPU-less service type"
    assert not [g for g in gv if g.startswith("group_") and g[6:] in SERVICE_GROUPS
                and {"slurm_nodecheck_script", "nvidia_driver_version"} & set(gv[g])]


def test_playbooks_keep_gpu_roles_off_service_hosts():
    """enforce-baseline runs on `nodes` only; the upgrade's node admission (GPU facts) skips service hosts;
    identity and the group roles reach them too."""
    root = Path(__file__).resolve().parents[1] / "playbooks"
    plays = {p.name: YAML(typ="safe").load(p.read_text()) for p in root.glob("*.yml")}
    assert all(play["hosts"] == "nodes" for play in plays["enforce-baseline.yml"] if "hosts" in play)
    admission = [r for play in plays["upgrade.yml"] if "roles" in play for r in play["roles"]
                 if r["role"] == "node_admission"]
    assert admission and all("'service_hosts' not in group_names" in r["when"] for r in admission)
    assert plays["identity.yml"][0]["hosts"] == plays["group-roles.yml"][0]["hosts"] == "nodes:service_hosts"


# ---------------------------------------------------------------- waves: generated layouts

def _group(hosts: str, services: list[str], control_plane: str = "none") -> dict:
    return {"hosts": hosts, "hardware": "mgmt-server", "image": "mgmt", "control_plane": control_plane,
            "services": services, "addressing": {"ipv4_start": "10.20.0.100", "mac": {"source": "discover"}}}


@st.composite
def layouts(draw):
    """The lab's GPU groups with generated service groups: 1-3 controllers (one group or one each), slurmdbd
    apart or on the first controller, 1-7 etcd members (with kube-control-plane, alone, or split between
    the two), 0-3 other service hosts; groups in any order, any wave size, any subset of hosts affected."""
    data = copy.deepcopy(LAB)
    for g in SERVICE_GROUPS:
        del data["nodes"][g]
    groups: dict[str, dict] = {}
    n_ctl = draw(st.integers(1, 3))
    dbd_on_ctl = draw(st.booleans())
    ctls = [f"ctl{i}" for i in range(1, n_ctl + 1)]
    if draw(st.booleans()) and not dbd_on_ctl:
        groups["ctl"] = _group(f"ctl[1-{n_ctl}]", ["slurmctld"])
    else:
        for i, h in enumerate(ctls):
            groups[f"ctl{i}"] = _group(h, ["slurmctld", "slurmdbd"] if dbd_on_ctl and i == 0 else ["slurmctld"])
    if not dbd_on_ctl:
        groups["acct"] = _group("dbd1", ["slurmdbd"])
    n_etcd = draw(st.integers(1, 7))
    with_cp = draw(st.integers(0, n_etcd))
    if with_cp:
        groups["k8sctl"] = _group(f"etcd[1-{with_cp}]", ["kube-control-plane", "etcd"], "kubernetes")
    if n_etcd - with_cp:
        groups["etcd"] = _group(f"etcd[{with_cp + 1}-{n_etcd}]", ["etcd"])
    n_misc = draw(st.integers(0, 3))
    if n_misc:
        groups["mgmt"] = _group(f"mgmt[1-{n_misc}]", ["boot-server", "prometheus"])
    names = list(groups) + list(data["nodes"])
    order = draw(st.permutations(names))
    data["nodes"] = {n: groups.get(n) or data["nodes"][n] for n in order}
    data["slurm"]["controllers"] = ctls
    data["slurm"]["accounting"]["host"] = "ctl1" if dbd_on_ctl else "dbd1"
    data["upgrade"]["wave_size"] = draw(st.integers(1, 8))
    data["upgrade"]["max_unavailable_pct"] = draw(st.integers(1, 100))
    return Definition.model_validate(data), draw(st.randoms(use_true_random=False))


def _check_waves(d: Definition, waves: list[list[str]], expect: list[str], canary: bool = False) -> None:
    """The oracle, written apart from knowledge.services.wave_ok."""
    svc = {h: set(g.services) for g in d.nodes.values() if g.services for h in hostlist.names(g.hosts)}
    ctl = {h for h, s in svc.items() if "slurmctld" in s}
    dbd = {h for h, s in svc.items() if "slurmdbd" in s}
    etcd = {h for h, s in svc.items() if "etcd" in s}
    spare = max(1, (len(etcd) - 1) // 2)  # 1 or 2 members: one at a time is all there is
    flat = [h for w in waves for h in w]
    assert sorted(flat) == sorted(expect), "every host exactly once"
    for i, w in enumerate(waves):
        assert len(w) <= d.upgrade.wave_size or (canary and i == 0)  # the canary has its own size
        kinds = {h in svc for h in w}
        assert len(kinds) == 1, f"service hosts and GPU nodes in one wave: {w}"
        assert len(ctl & set(w)) <= 1, f"two controllers in one wave: {w}"
        assert not (dbd & set(w) and (ctl & set(w)) - dbd), f"slurmdbd with a controller: {w}"
        assert len(etcd & set(w)) <= spare, f"etcd quorum lost: {w}"
        if not (canary and i == 0):  # no wave takes more than max_unavailable_pct of any capacity domain
            for name, hosts in _domains(d).items():
                most = max(1, len(hosts) * d.upgrade.max_unavailable_pct // 100)
                assert len(hosts & set(w)) <= most, f"{name}: {len(hosts & set(w))} of {len(hosts)} down in {w}"


def _domains(d: Definition) -> dict[str, set[str]]:
    """Partitions, tenants' owned node groups and Kueue flavors (GPU groups only), apart from knowledge.floors."""
    gpu = {n for n, g in d.nodes.items() if not g.services and g.control_plane != "none"}

    def hosts(groups) -> set[str]:
        return {h for n in groups if n in gpu for h in hostlist.names(d.nodes[n].hosts)}

    out = {f"partition {n}": hosts(p.node_groups) for n, p in (d.slurm.partitions.items() if d.slurm else ())}
    out.update({f"tenant {n}": hosts(t.isolation.node_groups) for n, t in d.tenants.items()})
    if d.kubernetes:
        out.update({f"pool {n}": hosts(f.node_groups) for n, f in d.kubernetes.kueue.flavors.items()})
    return {k: v for k, v in out.items() if v}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts())
def test_plan_waves_keep_every_service_up(layout):
    d, rnd = layout
    all_hosts = {n: set(hostlist.names(g.hosts)) for n, g in d.nodes.items()}
    affected = {n: {h for h in hs if rnd.random() < 0.8} for n, hs in all_hosts.items()}
    affected = {n: hs for n, hs in affected.items() if hs}
    waves = [hosts for hosts, _ in rollout.waves(d, affected, set())]
    _check_waves(d, waves, [h for hs in affected.values() for h in hs])
    # the canary is never a service host
    group, hosts, _, _ = rollout.choose_canary(d, list(affected))
    assert not d.nodes[group].services and d.nodes[group].control_plane != "none"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts())
def test_inventory_waves_keep_every_service_up(layout, matrix):
    d, _ = layout
    r = resolve(d, matrix, CLUSTERS)
    waves = inventory_waves(r)
    _check_waves(d, waves, [h for g in d.nodes.values() for h in hostlist.names(g.hosts)], canary=True)
    assert not set(waves[0]) & {h for g in d.nodes.values() if g.services for h in hostlist.names(g.hosts)}


def test_the_oracle_fails_on_a_bad_wave():
    """The property above can fail: two controllers in one wave, or service hosts with GPU nodes, are caught."""
    data = copy.deepcopy(LAB)
    data["nodes"]["ctl"] = _group("slurmctl[01-02]", ["slurmctld"])
    data["slurm"]["controllers"] = ["slurmctl01", "slurmctl02"]
    d = Definition.model_validate(data)
    hosts = ["slurmctl01", "slurmctl02"]
    with pytest.raises(AssertionError, match="two controllers"):
        _check_waves(d, [hosts], hosts)
    with pytest.raises(AssertionError, match="service hosts and GPU nodes"):
        _check_waves(d, [["gpu001", "slurmctl01"]], ["gpu001", "slurmctl01"])
    with pytest.raises(AssertionError, match="slurmdbd with a controller"):
        _check_waves(d, [["slurmdbd01", "slurmctl01"]], ["slurmdbd01", "slurmctl01"])
    assert [w for w, _ in rollout.waves(d, {"ctl": set(hosts)}, set())] == [["slurmctl01"], ["slurmctl02"]]


def test_three_etcd_members_go_one_at_a_time_and_five_two_at_a_time():
    from clusterdef.knowledge.services import service_waves

    for n, spare in ((3, 1), (5, 2), (7, 3)):
        data = copy.deepcopy(LAB)
        data["nodes"]["k8sctl"] = _group(f"k8sctl[1-{n}]", ["kube-control-plane", "etcd"], "kubernetes")
        d = Definition.model_validate(data)
        waves = service_waves(d, hostlist.names(d.nodes["k8sctl"].hosts), 8)
        assert [len(w) for w in waves] == [spare] * (n // spare) + ([n % spare] if n % spare else [])


# ---------------------------------------------------------------- the probe on a service host

def test_probe_reads_slurm_from_slurmctld_where_no_slurmd_runs(tmp_path):
    """The first boot and the facts of a controller read the Slurm release from slurmctld (or slurmdbd)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("sed", "head", "cat", "tr", "awk"):
        src = next((Path(p) / tool for p in ("/usr/bin", "/bin") if (Path(p) / tool).exists()), None)
        if src is not None:
            (bin_ / tool).symlink_to(src)
    fake = bin_ / "slurmctld"
    fake.write_text("#!/bin/sh\necho 'slurm 25.11.7'\n")
    fake.chmod(0o755)
    probe = Path(probe_pkg).parent / "clusterdef-probe"
    env = {"PATH": str(bin_), "LC_ALL": "C"}
    r = subprocess.run(["/bin/sh", str(probe), "slurm"], capture_output=True, text=True, env=env, timeout=30)
    assert r.stdout.splitlines() == ["slurm\tslurmctld\t25.11.7\t"], r.stdout + r.stderr
    fake.unlink()
    r = subprocess.run(["/bin/sh", str(probe), "slurm"], capture_output=True, text=True, env=env, timeout=30)
    assert r.stdout.splitlines() == ["slurm\t-\tunknown\tslurmd not installed"], r.stdout + r.stderr


@pytest.fixture(scope="module")
def lab_resolved():
    from clusterdef.validate.pipeline import validate_file
    from conftest import MATRICES, TODAY

    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    assert result.ok
    return resolve(result.definition, result.matrix, CLUSTERS)



def test_service_hosts_are_in_no_slurm_node_line_partition_gres_or_topology(lab_resolved):
    """control_plane none: never a Slurm node. slurm.conf names them only as SlurmctldHost and
    AccountingStorageHost; a Kubernetes control-plane node is in no Kueue flavor or GPU Operator pool."""
    from clusterdef.render import kubernetes as k8s
    from clusterdef.render import slurm

    tree = slurm.render(lab_resolved)
    service = ("slurmctl01", "slurmdbd01", "mgmt01", "k8sctl01")
    conf = tree["slurm/slurm.conf"]
    named = [line for line in conf.splitlines() if any(h in line for h in service)]
    assert named == ["SlurmctldHost=slurmctl01", "AccountingStorageHost=slurmdbd01"]
    for rel in ("slurm/gres.conf", "slurm/topology.conf"):
        assert not any(h in tree[rel] for h in service), rel
    kube = k8s.render(lab_resolved)
    for rel, text in kube.items():
        if rel != "kubernetes/nodes/labels-taints.yaml":
            assert "k8sctl" not in text and "mgmt01" not in text, rel


def test_hints_name_what_the_definition_has(lab, matrix, tmp_path):
    """The hint of a service group on GPU hardware names the definition's GPU-less type, and the one of an
    image shared with GPU groups names an image no GPU group boots; without them, how to add one."""
    from test_checks import run

    lab["nodes"]["ctl"]["hardware"] = "hgx-h100"
    lab["nodes"]["acct"]["image"] = "gpu-node"
    hints = {f.code: f.hint for f in run(lab, matrix, tmp_path).findings}
    assert hints["service-on-gpu-hardware"].startswith("give the group a hardware type without `gpu`: "
                                                       "`hardware: mgmt-server`")
    assert hints["image-service-shared"] == "give the service hosts their own image: `image: mgmt`"
    for g in ("acct", "mgmt", "k8sctl"):
        lab["nodes"][g].update(hardware="hgx-h100", image="gpu-node")
    lab["nodes"]["ctl"]["image"] = "gpu-node"
    del lab["hardware"]["mgmt-server"], lab["images"]["mgmt"]
    hints = {f.code: f.hint for f in run(lab, matrix, tmp_path).findings}
    assert "`mgmt-server: {platform: mgmt-server, cpu: {sockets: 1" in hints["service-on-gpu-hardware"]
    assert "a copy of `gpu-node` under `images:`" in hints["image-service-shared"]
