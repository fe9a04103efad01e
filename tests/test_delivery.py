"""The delivery map (delivery.json): every rendered file of every example names the hosts that use it, where it
goes, the check its consumer runs and the action that makes it take effect; a file without a rule is an error
at render time. The map agrees with what the roles install (their group_vars), its host patterns are groups of
the rendered inventory, and its checks are the consumers' own, run here on the rendered files where the consumer
is installed (dnsmasq, promtool, visudo, Slurm's parser)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef.build import build_tree
from clusterdef.errors import DefinitionError
from clusterdef.render import delivery
from clusterdef.render.ansible.render import ROOT as ANSIBLE
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, dump_yaml

EXAMPLES = sorted(CLUSTERS.glob("*.yaml"))


def _tree(path: Path) -> dict[str, str]:
    result = validate_file(path, MATRICES, TODAY)
    assert result.ok, [f.message for f in result.errors]
    return build_tree(result)[0]


@pytest.fixture(scope="module", params=EXAMPLES, ids=[p.stem for p in EXAMPLES])
def tree(request) -> dict[str, str]:
    return _tree(request.param)


def _map(tree: dict[str, str]) -> dict[str, dict]:
    return json.loads(tree[delivery.FILE])["files"]


def test_every_rendered_file_has_a_delivery(tree):
    files = _map(tree)
    assert sorted(files) == sorted(tree)
    for rel, e in files.items():
        assert e["via"] in delivery.VIAS, rel
        if e["via"] in ("deliver", "role", "boot"):
            assert e["path"].startswith("/") and e["mode"] in ("0644", "0600", "0640", "0750", "0755", "0440"), rel
            assert e["hosts"], rel
        if e["via"] in ("review", "control"):
            assert "path" not in e and e.get("why"), rel


def test_a_file_no_rule_covers_is_a_render_error(monkeypatch):
    from clusterdef.render import TARGETS

    real = TARGETS["versions"]
    monkeypatch.setitem(TARGETS, "versions", lambda r: {**real(r), "versions/extra.txt": "x\n"})
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    with pytest.raises(DefinitionError) as exc:
        build_tree(result)
    f = exc.value.findings[0]
    assert f.code == "render-undelivered" and "versions/extra.txt" in f.message and "delivery.yaml" in f.hint


def test_a_partial_render_maps_only_its_files():
    result = validate_file(CLUSTERS / "lab.yaml", MATRICES, TODAY)
    tree, _ = build_tree(result, ["slurm"])
    files = _map(tree)
    assert set(files) == set(tree) and "slurm/slurm.conf" in files
    assert "unplaced" not in files["slurm/slurm.conf"]  # no inventory rendered: nothing to say about hosts


def test_slurm_is_configless(tree):
    conf = tree.get("slurm/slurm.conf")
    if conf is None:
        pytest.skip("no Slurm")
    assert "SlurmctldParameters=enable_configless\n" in conf
    files = _map(tree)
    assert files["slurm/slurm.conf"]["hosts"] == "slurm_controllers:slurmdbd"
    assert files["slurm/slurm.conf"]["action"]["name"] == "slurm-reconfigure"
    for rel in ("slurm/gres.conf", "slurm/cgroup.conf"):
        assert files[rel]["hosts"] == "slurm_controllers" and files[rel]["path"] == "/etc/" + rel
    # every Slurm image and the stateful Slurm nodes' role fetch it from the controllers
    defaults = [t for rel, t in tree.items() if rel.endswith("mkosi.extra/etc/default/slurmd")]
    controllers = json.loads(tree["definition.resolved.json"])["definition"]["slurm"]["controllers"]
    want = "--conf-server " + ",".join(f"{c}:6817" for c in controllers)
    assert defaults and all(want in t for t in defaults)
    cp = YAML(typ="safe").load(tree[f"{ANSIBLE}/group_vars/cp_slurm.yml"].replace("!unsafe ", ""))
    assert {f["dest"] for f in cp["slurm_node_files"]} == {"/etc/default/slurmd",
                                                            "/etc/systemd/system/slurmd.service.d/"
                                                            "clusterdef-configless.conf"}


def _role_dests(tree: dict[str, str]) -> dict[str, set[str]]:
    """group_vars file -> every `dest` a role installs from it."""
    out: dict[str, set[str]] = {}

    def walk(node, acc):
        if isinstance(node, dict):
            if "dest" in node:
                acc.add(node["dest"])
            for v in node.values():
                walk(v, acc)
        elif isinstance(node, list):
            for v in node:
                walk(v, acc)

    for rel, text in tree.items():
        if rel.startswith(f"{ANSIBLE}/group_vars/"):
            acc: set[str] = set()
            walk(YAML(typ="safe").load(text.replace("!unsafe ", "")), acc)
            out[rel] = acc
    return out


def test_files_a_role_carries_are_where_the_role_puts_them(tree):
    """For backup, tenant isolation and identity, delivery.json's path is a `dest` in the group_vars of the
    hosts it names: the map and the role agree on where each file lands."""
    dests = _role_dests(tree)
    every = set().union(*dests.values())
    checked = 0
    for rel, e in _map(tree).items():
        if e["via"] == "role" and e["role"] in ("backup", "tenant_isolation", "identity"):
            assert e["path"] in every, f"{rel}: {e['path']} is installed by no role's group_vars"
            checked += 1
    if any(r.startswith(("backup/", "storage/", "identity/sssd")) for r in tree):
        assert checked


def test_hosts_are_groups_of_the_rendered_inventory(tree):
    groups = delivery.inventory_groups(tree[f"{ANSIBLE}/inventory/hosts.yml"])
    for rel, e in _map(tree).items():
        if not e.get("hosts"):
            continue
        why = delivery.unplaced(e["hosts"], groups)
        assert e.get("unplaced", "") == why, rel
        if why:  # named in the plan as not delivered, with what to declare
            assert "declare" in why


def _check_argv(e: dict, path: Path) -> list[str]:
    return [a.replace("{file}", str(path)) for a in e["check"]["argv"]]


@pytest.mark.parametrize("rel,tool", [("pxe/dnsmasq.conf", "dnsmasq"), ("observability/rules/gpu.yml", "promtool"),
                                      ("observability/prometheus.yml", "promtool"),
                                      ("identity/sudoers.d/clusterdef-admins", "visudo")])
def test_the_consumers_check_accepts_the_rendered_file_and_refuses_a_broken_one(rel, tool, tmp_path):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (scripts/install-test-deps installs it)")
    tree = _tree(CLUSTERS / "lab.yaml")
    e = _map(tree)[rel]
    good = tmp_path / "good"
    good.write_text(tree[rel])
    ok = subprocess.run(_check_argv(e, good), capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad"
    broken = {"dnsmasq": "dhcp-range=nonsense\n", "visudo": "%% ALL=(ALL\n",
              "promtool": "  - alert: [\n" if "rules" in rel else "scrape_configs: 5\n"}
    bad.write_text(tree[rel] + broken[tool])
    refused = subprocess.run(_check_argv(e, bad), capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0


def test_slurm_conf_check_is_slurms_own_parser(tmp_path):
    """The check scontrol runs reads the whole file: an unknown key is refused, a known one passes."""
    if shutil.which("scontrol") is None:
        pytest.skip("scontrol is not installed")
    e = _map(_tree(CLUSTERS / "lab.yaml"))["slurm/slurm.conf"]
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nSlurmctldParameters=enable_configless\n"
                    "NodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=n[1-2]\n")
    assert subprocess.run(_check_argv(e, conf), capture_output=True, timeout=60).returncode == 0
    conf.write_text(conf.read_text() + "NotASlurmKey=1\n")
    out = subprocess.run(_check_argv(e, conf), capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "NotASlurmKey" in out.stderr


def test_a_definition_without_service_hosts_says_what_is_not_delivered(lab, tmp_path):
    """Files whose consumers the definition does not place are marked, with what to declare."""
    for g in [g for g, n in lab["nodes"].items() if n.get("services")]:
        del lab["nodes"][g]
    tree = _tree(dump_yaml(lab, tmp_path / "lab.yaml"))
    files = _map(tree)
    assert "boot_server" in files["pxe/dnsmasq.conf"]["unplaced"]
    assert "services [prometheus]" in files["observability/rules/gpu.yml"]["unplaced"]
    assert "unplaced" not in files["slurm/slurm.conf"]


def test_prometheus_loads_exactly_the_rule_files_and_target_lists_delivered(tree):
    """prometheus.yml's rule_files glob and file_sd paths match where the map puts the rule and target files,
    so every delivered alert rule is loaded and every target list scraped."""
    import fnmatch

    files = _map(tree)
    cfg = YAML(typ="safe").load(tree["observability/prometheus.yml"])
    rules = [e["path"] for rel, e in files.items() if rel.startswith("observability/rules/")]
    assert rules and all(any(fnmatch.fnmatch(p, g) for g in cfg["rule_files"]) for p in rules)
    scraped = {f for job in cfg["scrape_configs"] for sd in job["file_sd_configs"] for f in sd["files"]}
    assert scraped == {e["path"] for rel, e in files.items() if rel.startswith("observability/targets/")}
    assert files["observability/prometheus.yml"]["path"] == "/etc/prometheus/prometheus.yml"


def test_alertmanagers_reach_prometheus_yml(lab, tmp_path):
    lab.setdefault("observability", {})["alertmanagers"] = ["am1.lab.example", "am2.lab.example"]
    cfg = YAML(typ="safe").load(_tree(dump_yaml(lab, tmp_path / "lab.yaml"))["observability/prometheus.yml"])
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["am1.lab.example:9093",
                                                                                  "am2.lab.example:9093"]


def test_host_patterns_mean_what_they_mean_to_ansible(tree):
    """apply's reading of each host pattern of the map equals ansible-core's own InventoryManager's."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    from clusterdef.apply.delivery import Hosts

    import tempfile

    text = tree[f"{ANSIBLE}/inventory/hosts.yml"]
    with tempfile.TemporaryDirectory() as tmp:
        inv = Path(tmp) / "hosts.yml"
        inv.write_text(text)
        real = InventoryManager(loader=DataLoader(), sources=[str(inv)])
        ours = Hosts(text)
        patterns = {e["hosts"] for e in _map(tree).values() if e.get("hosts") and not e.get("unplaced")}
        patterns |= {"slurm_controllers[0]", "cp_slurm:!prov_stateless", "nodes:&cp_slurm"}
        assert patterns
        for p in sorted(patterns):
            want = [h.name for h in real.get_hosts(pattern=p)]
            assert sorted(ours(p)) == sorted(want), p
            if p.endswith("[0]"):
                assert ours(p) == want, p


def _plan_steps(tmp_path, change) -> list[dict]:
    from clusterdef.plan import delivery as plan_delivery

    lab = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())
    old = _tree(CLUSTERS / "lab.yaml")
    change(lab)
    new = _tree(dump_yaml(lab, tmp_path / "lab.yaml"))
    return plan_delivery.steps(old, new)


def test_a_partition_change_is_a_live_reconfigure_and_a_plugin_change_restarts_the_daemons(tmp_path):
    from clusterdef.plan.transition import LIVE, RESTART

    def partition(d):
        d["slurm"]["partitions"]["long"] = {"node_groups": ["train"], "max_time": "7-00:00:00"}

    [st] = [s for s in _plan_steps(tmp_path, partition) if s["via"] == "deliver"]
    assert "slurm/slurm.conf" in st["files"] and st["restarts"] == {} and st["disruption"] == LIVE
    assert [a["name"] for a in st["actions"]][-1] == "slurm-reconfigure"

    def plugin(d):
        d["slurm"]["passthrough"] = {"SelectTypeParameters": "CR_Core"}

    [st] = [s for s in _plan_steps(tmp_path, plugin) if s["via"] == "deliver"]
    assert st["restarts"] == {"slurmctld and slurmd": ["SelectTypeParameters"]} and st["disruption"] == RESTART


def test_a_tenant_removed_is_an_explicit_account_removal(tmp_path):
    from clusterdef.plan import delivery as plan_delivery

    def drop(d):
        del d["tenants"]["nlp"]
        del d["identity"]["tenant_groups"]["nlp"]
        d["kubernetes"]["kueue"]["queues"].pop("nlp-serve")
        d["service"]["queue_policy"]["serving"]["queues"].remove("nlp-serve")

    [st] = [s for s in _plan_steps(tmp_path, drop) if s["via"] == "deliver"]
    assert st["remove_accounts"] == ["nlp"]
    assert "remove Slurm account(s) nlp" in plan_delivery.describe(st) and "running or pending jobs" in \
        plan_delivery.describe(st)


def test_apply_sends_each_host_its_files_and_actions_in_the_maps_order():
    """deliver.yml's payload: files per host from the new tree, the reconfigure once on the first controller,
    the accounts on the accounting host after it (its load needs the TRES slurmctld registers)."""
    from clusterdef.apply.delivery import Hosts, payload

    tree = _tree(CLUSTERS / "lab.yaml")
    files = ["slurm/slurm.conf", "slurm/gres.conf", "slurm/accounts.cfg", "slurm/qos.sh"]
    p = payload(tree, Path("/snap/tree"), files, Hosts(tree[f"{ANSIBLE}/inventory/hosts.yml"]), ["gone"])
    assert list(p["deliver_files"]) == ["slurmctl01", "slurmdbd01"]
    assert p["clusterdef_deliver_hosts"] == "slurmctl01,slurmdbd01"
    ctl = {f["rel"]: f for f in p["deliver_files"]["slurmctl01"]}
    # qos.sh on the controller too: the lab's partition train has QOS normal, `qos.sh names` runs there first
    assert set(ctl) == {"slurm/slurm.conf", "slurm/gres.conf", "slurm/qos.sh"} and ctl["slurm/gres.conf"]["src"] == \
        "/snap/tree/slurm/gres.conf"
    assert ctl["slurm/slurm.conf"]["check"][:2] == ["env", "SLURM_CONF={file}"]
    assert {f["rel"] for f in p["deliver_files"]["slurmdbd01"]} == {"slurm/slurm.conf", "slurm/accounts.cfg",
                                                                    "slurm/qos.sh"}
    assert [a["name"] for a in p["deliver_actions"]["slurmctl01"]] == ["slurm-reconfigure"]
    assert p["deliver_actions"]["slurmctl01"][0]["before"] == [["/etc/slurm/clusterdef/qos.sh", "names"]]
    assert [a["name"] for a in p["deliver_actions"]["slurmdbd01"]] == ["slurm-accounts"]
    assert p["deliver_remove_accounts"] == {"slurmdbd01": ["gone"]}


def test_apply_restarts_the_daemons_a_plugin_change_needs(tmp_path):
    """A slurm.conf change reconfigure does not apply gets slurm-restart.yml after its delivery, naming the
    daemons; a partition change does not."""
    from clusterdef.apply.steps import Deliveries, steps_for_plan
    from clusterdef.plan import load_side, make_plan
    from conftest import TODAY

    def side(change=None):
        lab = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())
        if change:
            change(lab)
        path = dump_yaml(lab, tmp_path / f"lab-{bool(change)}.yaml")
        return load_side(path, MATRICES, TODAY)

    old = side()
    for change, want in ((lambda d: d["slurm"]["passthrough"].update(SelectTypeParameters="CR_Core"),
                          ["slurmctld", "slurmd"]),
                         (lambda d: d["slurm"]["partitions"].update(long={"node_groups": ["train"]}), None)):
        new = side(lambda d, c=change: (d["slurm"].setdefault("passthrough", {}), c(d)))
        doc = make_plan(old, new).doc
        hosts_yml = new.tree["ansible/inventory/hosts.yml"]
        steps = steps_for_plan(doc, {}, ROOT / "playbooks", deliveries=Deliveries(new, hosts_yml))
        restart = [s for s in steps if s.action == "slurm-restart"]
        assert [s.vars["clusterdef_slurm_restart"] for s in restart] == ([want] if want else [])
        if want:
            assert steps.index(restart[0]) == 1 + next(i for i, s in enumerate(steps) if s.action == "deliver")


def _lab_without_partition_qos(tmp_path) -> dict[str, str]:
    lab = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())
    for part in lab["slurm"]["partitions"].values():
        part.pop("qos", None)
    lab["service"]["queue_policy"]["training"].pop("max_gpus_per_user")  # Slurm keeps it in a QOS
    return _tree(dump_yaml(lab, tmp_path / "lab.yaml"))


def test_a_partition_qos_is_created_on_the_controllers_before_slurmctld_reads_it(tree):
    """slurmctld exits on a partition QOS= the database lacks, at start and at reconfigure (docs/consumers.md):
    where a partition carries a QOS, slurm-reconfigure runs `qos.sh names` first on the controller that runs it,
    qos.sh is delivered there, and the whole qos.sh (limits naming gres/gpu) stays on the accounting host."""
    files = _map(tree)
    conf = files["slurm/slurm.conf"]["action"]
    partition_qos = " QOS=" in tree["slurm/slurm.conf"]
    assert ("before" in conf) == partition_qos
    if partition_qos:
        assert conf["before"]["argv"] == [["/etc/slurm/clusterdef/qos.sh", "names"]]
        assert conf["before"]["argv"][0][0] == files["slurm/qos.sh"]["path"]
        assert "slurm_controllers" in files["slurm/qos.sh"]["hosts"].split(":")
    accounts = files["slurm/qos.sh"]["action"]
    assert accounts["name"] == "slurm-accounts" and accounts["once"]
    assert accounts["on"] == files["slurm/accounts.cfg"]["hosts"] in ("slurmdbd", "slurm_controllers[0]")


def test_without_a_partition_qos_nothing_runs_before_slurmctld(tmp_path):
    """The lab with no partition QOS: the reconfigure (or start) has no `before`, so nothing new runs there."""
    from clusterdef.apply.delivery import Hosts, payload

    tree = _lab_without_partition_qos(tmp_path)
    assert " QOS=" not in tree["slurm/slurm.conf"]
    assert "before" not in _map(tree)["slurm/slurm.conf"]["action"]
    p = payload(tree, Path("/snap/tree"), ["slurm/slurm.conf"], Hosts(tree[f"{ANSIBLE}/inventory/hosts.yml"]))
    assert p["deliver_actions"]["slurmctl01"][0]["before"] == []
    assert {f["rel"] for f in p["deliver_files"]["slurmctl01"]} == {"slurm/slurm.conf"}


def test_the_before_program_travels_with_any_step_that_runs_it():
    """A step of slurm.conf alone still puts the new tree's qos.sh on the controller that runs `qos.sh names`
    (a controller that never had it, a cluster brought up before this step existed); nothing runs the accounts
    action for it, on the controller or on the accounting host."""
    from clusterdef.apply.delivery import Hosts, payload

    tree = _tree(CLUSTERS / "lab.yaml")
    p = payload(tree, Path("/snap/tree"), ["slurm/slurm.conf"], Hosts(tree[f"{ANSIBLE}/inventory/hosts.yml"]))
    ctl = {f["rel"]: f for f in p["deliver_files"]["slurmctl01"]}
    assert set(ctl) == {"slurm/slurm.conf", "slurm/qos.sh"}
    assert (ctl["slurm/qos.sh"]["path"], ctl["slurm/qos.sh"]["mode"], ctl["slurm/qos.sh"]["src"]) == \
        ("/etc/slurm/clusterdef/qos.sh", "0755", "/snap/tree/slurm/qos.sh")
    assert {f["rel"] for f in p["deliver_files"]["slurmdbd01"]} == {"slurm/slurm.conf"}
    assert {h: [a["name"] for a in acts] for h, acts in p["deliver_actions"].items()} == \
        {"slurmctl01": ["slurm-reconfigure"]}


def test_the_role_runs_the_before_step_ahead_of_the_start_and_the_action():
    """roles/deliver: the `before` argv run after the files are in place and the units asked, ahead of the start
    of an inactive unit and of the action's argv, for the same actions those run for (a changed trigger; a
    running unit, or an inactive one the role starts), and not at all where the action has none."""
    tasks = YAML(typ="safe").load((ROOT / "roles" / "deliver" / "tasks" / "main.yml").read_text())
    block = next(t for t in tasks if "block" in t)["block"]
    names = [t["name"] for t in block]

    def index(fragment: str) -> int:
        return next(i for i, t in enumerate(block) if fragment in json.dumps(t))

    before, start, argv = index("subelements('before'"), index("systemd_service"), index("subelements('argv')")
    assert index("is-active") < before < start < argv, names
    task = block[before]
    assert task["ansible.builtin.command"]["argv"] == "{{ item.1 }}"
    assert task["when"] == ["item.0.triggers | intersect(deliver_changed) | length > 0",
                            "item.0.unit not in deliver_inactive or item.0.inactive == 'start'"]
    assert "skip_missing=true" in task["loop"]


def test_a_before_step_whose_condition_clusterdef_does_not_know_is_refused(monkeypatch, tmp_path):
    """delivery.yaml's `before.when` names a CONDITIONS entry; a misspelt one would silently never run."""
    from clusterdef.render.delivery import files as real_files

    doc = YAML(typ="safe", pure=True).load(real_files("clusterdef.render").joinpath("delivery.yaml").read_text())
    doc["actions"]["slurm-reconfigure"]["before"]["when"] = "partition_qos"
    (tmp_path / "delivery.yaml").write_text(json.dumps(doc))
    monkeypatch.setattr(delivery, "files", lambda _: tmp_path)
    delivery.rules.cache_clear()
    try:
        with pytest.raises(ValueError, match="slurm-reconfigure: before.when 'partition_qos' is not one of partition-qos"):
            delivery.rules()
    finally:
        monkeypatch.undo()
        delivery.rules.cache_clear()
    assert delivery.rules()[1]["slurm-reconfigure"]["before"]["when"] in delivery.CONDITIONS
