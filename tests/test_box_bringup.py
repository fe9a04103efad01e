"""The lab brought up on a cluster of containers through `clusterdef plan --to` (the bring-up plan) and
`clusterdef apply`, then changed on day 2 through plan and apply, checked with the real clients (issue 26).

The definition is the lab's Slurm side (tests/lab_variants.py `box`): its controller, accounting host and
management host (boot server, Prometheus) and six GPU nodes, on a site set that pins the Slurm release the
containers carry (Debian trixie's 24.11.5). What the containers cannot be is said here and in docs/box.md:
- they do not PXE-boot: the `nodes` stage is skipped and each compute container "boots" its group's image by
  taking the image's configless slurmd files (images/<image>/mkosi.extra/etc/default/slurmd and the unit
  drop-in, as rendered) and starting slurmd, which is what the booted image does;
- they have no cgroups and no GPU driver: the definition passes proctrack/linuxproc, task/none and
  jobacct_gather/none through slurm.passthrough and turns the health check off (nodecheck needs a GPU driver);
- they have no InfiniBand and no filesystem of the lab's: no subnet manager, backup or filesystems, so the
  dedicated tenant is shared here (it keeps its partition and nodes).
Everything else is the real roles and playbooks run by apply through the podman connection."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from box_cluster import image_versions, running_box, wait_for
from conftest import MATRICES, ROOT, dump_yaml
from lab_variants import box as box_variant

pytestmark = [pytest.mark.box, pytest.mark.slow]

SET = "2026.07-r580-box"
VAULT_PASSWORD = "box-vault"          # a throwaway vault inside the test's own folder
DB_PASSWORD = "box-db-password"      # MariaDB inside a container on an internal network, gone with it
USERS = {"vision-users": ["alice"], "nlp-users": ["bob"], "secure-users": ["carol"], "media-users": ["dave"],
         "hpc-admins": ["hpcadm"]}


def _site_matrices(tmp: Path, slurm: str) -> Path:
    """The project's sets plus the site's own: 2026.07-r580 on the Slurm release the box carries."""
    out = tmp / "matrices"
    shutil.copytree(MATRICES, out)
    doc = YAML(typ="safe").load((MATRICES / "sets" / "2026.07-r580.yaml").read_text())
    doc["name"], doc["components"]["slurm"] = SET, slurm
    doc["summary"] = f"2026.07-r580 with the Slurm release of the box's containers ({slurm})"
    dump_yaml(doc, out / "sets" / f"{SET}.yaml")
    return out


def _playbooks(tmp: Path) -> tuple[Path, Path]:
    """A cluster repository's playbooks folder: the project's playbooks and roles, plus the site's vault."""
    from ansible.parsing.vault import VaultLib, VaultSecret

    root = tmp / "site"
    (root / "playbooks" / "group_vars" / "all").mkdir(parents=True)
    for pb in (ROOT / "playbooks").glob("*.yml"):
        shutil.copyfile(pb, root / "playbooks" / pb.name)  # copies: Ansible reads group_vars beside the real file
    (root / "roles").symlink_to(ROOT / "roles")
    secrets = f"vault_slurmdbd_pass: {DB_PASSWORD}\nvault_ldap_bind_password: unused-in-the-box\n"
    (root / "playbooks" / "group_vars" / "all" / "vault.yml").write_bytes(
        VaultLib([("box", VaultSecret(VAULT_PASSWORD.encode()))]).encrypt(secrets, vault_id="box"))
    pw = tmp / "vault-pass"
    pw.write_text(VAULT_PASSWORD + "\n")
    return root / "playbooks", pw


def _cli(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """clusterdef in its own process group: on a timeout the ansible-playbook runs it started go too (left
    behind, they would keep changing the box and take the CPU from the rest of the suite)."""
    argv = [sys.executable, "-m", "clusterdef", *args]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _render(defn: Path, matrices: Path, out: Path) -> dict[str, str]:
    r = _cli("render", str(defn), "--matrices", str(matrices), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    return {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.is_file()}


def _apply(box, plan: Path, defn: Path, matrices: Path, playbooks: Path, vault: Path, *more: str):
    env = {**box.ansible_env(), "ANSIBLE_FORKS": "10"}
    r = _cli("apply", str(plan), "--to", str(defn), "--matrices", str(matrices), "--playbooks", str(playbooks),
             "--vault-id", f"box@{vault}", *more, env=env, timeout=2400)
    return r


def _hosts(tree: dict[str, str]) -> list[dict]:
    """The box's hosts from the rendered inventory table (name, provisioning address, GPUs)."""
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(tree["inventory/nodes.csv"])))
    gpus = {name: hw["gpu"]["count"] if hw.get("gpu") else 0
            for name, hw in json.loads(tree["definition.resolved.json"])["definition"]["hardware"].items()}
    from clusterdef.apply.delivery import Hosts

    # the boot server serves DHCP: dnsmasq needs CAP_NET_ADMIN, as on the real host
    boot = set(Hosts(tree["ansible/inventory/hosts.yml"])("boot_server"))
    return [{"name": r["host"], "ip": r["ipv4"], "gpus": gpus[r["hardware"]],
             "caps": ("NET_ADMIN",) if r["host"] in boot else ()} for r in rows]


def _boot(box, tree: dict[str, str], definition: dict) -> None:
    """Each Slurm node "boots" its group's image: the image's configless slurmd files, then slurmd."""
    from clusterdef import hostlist

    for g in definition["nodes"].values():
        if g.get("control_plane") != "slurm":
            continue
        extra = f"images/{g['image']}/mkosi.extra"
        files = {rel[len(extra):]: text for rel, text in tree.items() if rel.startswith(extra + "/etc/default/slurmd")
                 or rel.startswith(extra + "/etc/systemd/system/slurmd.service.d/")}
        assert "/etc/default/slurmd" in files, f"image {g['image']} carries no configless slurmd"
        for host in hostlist.names(g["hosts"]):
            for path, text in files.items():
                box.put(host, path, text)
            box.exec(host, ["systemctl", "daemon-reload"], check=True)
            box.exec(host, ["systemctl", "enable", "--now", "slurmd"], check=True)


def bring_up(tmp: Path, lab_data: dict, stack) -> dict:
    """The box started (stopped by `stack`), then `plan --to` and `apply` of the bring-up plan (the `nodes` stage
    stands in: see the module docstring). Runs in a thread from the session's start (box_bringup.py)."""
    slurm = image_versions()["slurmctld"].split("-")[0]
    matrices = _site_matrices(tmp, slurm)
    playbooks, vault = _playbooks(tmp)
    data = box_variant(copy.deepcopy(lab_data), SET)
    defn = dump_yaml(data, tmp / "lab.yaml")
    tree = _render(defn, matrices, tmp / "out")
    b = stack.enter_context(running_box(_hosts(tree), client="slurmctl01"))
    b.users(USERS)
    t = time.monotonic()
    plan = tmp / "bringup.json"
    r = _cli("plan", "--to", str(defn), "--matrices", str(matrices), "--plan-file", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(plan.read_text())
    assert doc["bringup"] and [s["kind"] for s in doc["rollout"]["stages"]] == [
        "image", "control-plane", "deliver", "boot-default", "nodes"]
    r = _apply(b, plan, defn, matrices, playbooks, vault, "--skip-stage", "nodes")
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:] + b.diagnostics(["slurmctl01", "slurmdbd01", "mgmt01"])
    _boot(b, tree, data)
    nodes = [h for h, spec in b.hosts.items() if spec.gpus]
    wait_for("every node idle", lambda: all(
        st.startswith("idle") for p in b.sinfo().values() for st in p["nodes"].values()), 60,
        diagnostics=lambda: b.diagnostics(nodes[:2], ["slurmd"]))
    b.timings["bringup"] = time.monotonic() - t
    return {"box": b, "tmp": tmp, "matrices": matrices, "playbooks": playbooks, "vault": vault, "defn": defn,
            "data": data, "tree": tree, "plan": doc, "apply": r.stdout}


@pytest.fixture(scope="module")
def brought_up(box_bringup):
    """The bring-up started with the session (box_bringup.py): its result, or its failure."""
    return box_bringup.result()


def test_bringup_puts_every_rendered_file_where_its_consumer_reads_it(brought_up):
    b, tree = brought_up["box"], brought_up["tree"]
    files = json.loads(tree["delivery.json"])["files"]
    delivered = {rel: e for rel, e in files.items() if e["via"] == "deliver" and not e.get("unplaced")}
    assert {"slurm/slurm.conf", "slurm/gres.conf", "slurm/accounts.cfg", "pxe/dnsmasq.conf",
            "observability/prometheus.yml"} <= set(delivered)
    from clusterdef.apply.delivery import Hosts

    hosts = Hosts(tree["ansible/inventory/hosts.yml"])
    for rel, e in delivered.items():
        for h in hosts(e["hosts"]):
            b.assert_file(h, e["path"], tree[rel], owner=e["owner"], group=e["group"], mode=int(e["mode"], 8))
    # every configless slurmd runs with the controller's copy of slurm.conf and gres.conf
    for node in ("gpu001", "sgpu02"):
        b.assert_file(node, "/run/slurm/conf/slurm.conf", tree["slurm/slurm.conf"])
        b.assert_file(node, "/run/slurm/conf/gres.conf", tree["slurm/gres.conf"])
    # the boot server serves the iPXE chain and starts dnsmasq with the delivered configuration
    b.assert_file("mgmt01", "/srv/http/ipxe/boot.ipxe", tree["pxe/ipxe/boot.ipxe"])
    b.wait_active("mgmt01", "dnsmasq")
    assert b.exec("mgmt01", ["busybox", "wget", "-q", "-O", "-", "http://127.0.0.1/ipxe/boot.ipxe"],
                  check=True).stdout == tree["pxe/ipxe/boot.ipxe"]
    # Prometheus runs the delivered configuration and has loaded every rendered alert rule
    b.wait_active("mgmt01", "prometheus")
    rules = wait_for("Prometheus rules loaded", lambda: _prometheus_alerts(b), 60)
    want = {r["alert"] for rel, text in tree.items() if rel.startswith("observability/rules/")
            for g in YAML(typ="safe").load(text)["groups"] for r in g["rules"] if "alert" in r}
    assert want and want <= rules


def _prometheus_alerts(b) -> set[str]:
    r = b.exec("mgmt01", ["busybox", "wget", "-q", "-O", "-", "http://127.0.0.1:9090/api/v1/rules"])
    if r.returncode != 0:
        return set()
    data = json.loads(r.stdout)["data"]["groups"]
    return {rule["name"] for g in data for rule in g["rules"] if rule["type"] == "alerting"}


def test_partitions_and_associations_are_the_definitions(brought_up):
    b, data, tree = brought_up["box"], brought_up["data"], brought_up["tree"]
    # the accounting database runs with the settings Slurm's accounting guide asks for (rendered from the host)
    settings = YAML(typ="safe").load(tree["ansible/group_vars/slurmdbd.yml"])["slurm_control_plane_database"]["settings"]
    live = b.exec("slurmdbd01", ["mariadb", "-N", "-B", "-e", "SELECT @@innodb_buffer_pool_size, "
                                 "@@innodb_log_file_size, @@innodb_lock_wait_timeout, @@max_allowed_packet"],
                  check=True).stdout.split()
    mib = 1024 * 1024
    assert live == [str(int(settings["innodb_buffer_pool_size"][:-1]) * mib),
                    str(int(settings["innodb_log_file_size"][:-1]) * mib), "900", str(16 * mib)], live
    parts = b.sinfo()
    assert set(parts) == set(data["slurm"]["partitions"])
    assert set(parts["secure"]["nodes"]) == {"sgpu01", "sgpu02"} and parts["train"]["default"]
    assoc = b.assoc()
    accounts = {a["Account"] for a in assoc if not a["User"]}
    assert {t["slurm"]["account"] for t in data["tenants"].values() if "slurm" in t} <= accounts
    users = {(a["User"], a["Account"]) for a in assoc if a["User"]}
    assert {("alice", "vision"), ("bob", "nlp"), ("carol", "secure")} <= users
    accounts_cfg = brought_up["tree"]["slurm/accounts.cfg"]
    for a in assoc:
        if a["Account"] == "secure" and not a["User"]:
            assert "gres/gpu=16" in a["GrpTRES"] and "GrpTRES=gres/gpu=16" in accounts_cfg


def test_each_tenant_runs_where_it_may_and_is_refused_elsewhere(brought_up):
    b = brought_up["box"]
    ok = [b.submit("alice", "train", account="vision", gres="gpu:2"), b.submit("bob", "debug", account="nlp"),
          b.submit("carol", "secure", account="secure", gres="gpu:8")]
    for job in ok:
        rec = b.wait_job(job, "COMPLETED", timeout=90)
        assert rec["JobState"] == "COMPLETED"
    # the GPUs each job was given are in the accounting records slurmdbd keeps
    alloc = {r["JobID"]: r["AllocTRES"] for r in b.sacct()}
    assert "gres/gpu=2" in alloc[ok[0].id] and "gres/gpu=8" in alloc[ok[2].id], alloc
    refused = b.submit("alice", "secure", account="vision")
    assert refused.id is None and "partition" in refused.refused.lower()
    stranger = b.submit("alice", "train", account="nlp")
    assert stranger.id is None and "account" in stranger.refused.lower()


def test_day2_change_reaches_the_cluster_and_keeps_running_jobs(brought_up):
    """A new partition, a changed QOS limit and a new tenant through plan and apply, while a job runs."""
    b, tmp = brought_up["box"], brought_up["tmp"]
    running = b.submit("alice", "train", account="vision", gres="gpu:1", command="sleep 600", time_limit="30")
    b.wait_job(running, "RUNNING", timeout=60)
    data = copy.deepcopy(brought_up["data"])
    data["slurm"]["partitions"]["long"] = {"node_groups": ["train"], "max_time": "7-00:00:00"}
    data["slurm"]["qos"]["normal"]["max_tres_per_user"] = {"gres/gpu": 24}
    data["tenants"]["nlp"]["quota"]["reserved_gpus"] = 8  # sold capacity moves to the new tenant
    data["tenants"]["media"] = {"quota": {"reserved_gpus": 8, "burst_gpus": 0}, "isolation": {"level": "shared"},
                                "slurm": {"account": "media", "qos": ["normal"]}}
    data["identity"]["tenant_groups"]["media"] = ["media-users"]
    new = dump_yaml(data, tmp / "lab-day2.yaml")
    old = tmp / "lab-day1.yaml"
    shutil.copyfile(brought_up["defn"], old)
    plan = tmp / "day2.json"
    r = _cli("plan", "--from", str(old), "--to", str(new), "--matrices", str(brought_up["matrices"]),
             "--plan-file", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(plan.read_text())
    assert [s["kind"] for s in doc["rollout"]["stages"]] == ["prepare", "deliver"]
    r = _apply(b, plan, new, brought_up["matrices"], brought_up["playbooks"], brought_up["vault"], "--from", str(old))
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    tree = _render(new, brought_up["matrices"], tmp / "out-day2")
    b.assert_file("slurmctl01", "/etc/slurm/slurm.conf", tree["slurm/slurm.conf"])
    wait_for("partition long", lambda: "long" in b.sinfo(), 30)
    qos = {q["Name"]: q for q in b.qos()}
    per_user = next(v for k, v in qos["normal"].items() if k.startswith("MaxTRESP"))  # sacctmgr: MaxTRESPU
    assert "gres/gpu=24" in per_user, qos["normal"]
    assoc = b.assoc()
    assert ("dave", "media") in {(a["User"], a["Account"]) for a in assoc if a["User"]}
    grp = {a["Account"]: a["GrpTRES"] for a in assoc if not a["User"] and a["Account"] in ("nlp", "media")}
    assert set(grp) == {"nlp", "media"} and all("gres/gpu=" in v for v in grp.values()), grp
    rec = b.job(running.id)
    assert rec["JobState"] == "RUNNING" and rec.get("Restarts", "0") == "0", rec
    b.wait_job(b.submit("dave", "long", account="media", gres="gpu:1"), "COMPLETED", timeout=90)
    b.slurm(["scancel", running.id])


def test_a_refused_check_stops_before_the_next_host_and_keeps_the_previous_file(brought_up):
    """deliver.yml with a slurm.conf Slurm's parser refuses: the first host's check fails with the consumer's
    message, its file stays as it was, nothing staged is left, and the next host is never touched."""
    from clusterdef.apply.delivery import Hosts, payload

    b, tree, tmp = brought_up["box"], brought_up["tree"], brought_up["tmp"]
    broken = dict(tree)
    broken["slurm/slurm.conf"] = tree["slurm/slurm.conf"] + "NotASlurmKey=1\n"
    src = tmp / "broken-tree"
    (src / "slurm").mkdir(parents=True)
    (src / "slurm" / "slurm.conf").write_text(broken["slurm/slurm.conf"])
    # the controller's `qos.sh names` (slurm-reconfigure's before: the lab's partition train has QOS normal)
    # travels with any step that runs it: payload sends the new tree's qos.sh along
    (src / "slurm" / "qos.sh").write_text(tree["slurm/qos.sh"])
    inv = tmp / "hosts.yml"
    inv.write_text(tree["ansible/inventory/hosts.yml"])
    extra = payload(broken, src, ["slurm/slurm.conf"], Hosts(tree["ansible/inventory/hosts.yml"]))
    assert extra["clusterdef_deliver_hosts"] == "slurmctl01,slurmdbd01"
    (tmp / "extra.json").write_text(json.dumps(extra))
    before = {h: b.get(h, "/etc/slurm/slurm.conf") for h in ("slurmctl01", "slurmdbd01")}
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                        str(ROOT / "playbooks" / "deliver.yml"), "-e", f"@{tmp / 'extra.json'}"],
                       capture_output=True, text=True, timeout=600,
                       env={**b.ansible_env(), "ANSIBLE_ROLES_PATH": str(ROOT / "roles")})
    assert r.returncode != 0
    assert "delivery refused on slurmctl01" in r.stdout and "NotASlurmKey" in r.stdout, r.stdout[-3000:]
    assert "slurmdbd01" not in r.stdout.split("delivery refused on slurmctl01")[1].split("PLAY RECAP")[0]
    for h, text in before.items():
        assert b.get(h, "/etc/slurm/slurm.conf") == text
    assert b.exec("slurmctl01", ["test", "-e", "/var/lib/clusterdef/deliver/staged/etc/slurm/slurm.conf"]).returncode
    assert b.slurm(["scontrol", "ping"]).stdout.count("UP")
