"""Regulated data and privileged workloads (issue 31 items 3 and 4, docs/data.md): what the lab's `datasets`
and `privileged` sections render, what the consumers do with it (the admission policies evaluated by the
k8s_semantics oracle; the ACL script run by setfacl on a tmpfs for an authorised and an unauthorised user),
and the located findings on bad input."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

import k8s_semantics as ks
from clusterdef.build import build_tree
from clusterdef.validate.pipeline import validate_file
from conftest import MATRICES, TODAY, dump_yaml

yaml = YAML(typ="safe")


def build(data: dict, tmp: Path):
    r = validate_file(dump_yaml(data, tmp / "def.yaml"), MATRICES, TODAY)
    return r, (build_tree(r)[0] if r.ok else {})


def docs(text: str) -> list[dict]:
    return [d for d in yaml.load_all(text) if d]


def k8s_version(r) -> str:
    return r.matrix.sets[r.definition.cluster.matrix].components.kubernetes


def findings(r, code: str) -> list:
    return [f for f in r.findings if f.code == code]


@pytest.fixture(scope="module")
def lab_built(tmp_path_factory, lab_data):
    r, tree = build(copy.deepcopy(lab_data), tmp_path_factory.mktemp("lab"))
    assert r.ok, [(f.code, f.message) for f in r.errors]
    return r, tree


def pod(spec: dict) -> dict:
    spec = {"containers": [{"name": "main", "image": "registry.lab.example/ml/app:1"}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


# ---- privileged workloads: Kubernetes

def test_privileged_pods_only_where_an_approval_names_the_tenant(lab_built):
    """The lab approves host-network and host-pid for tenant vision. The rendered policy (strict-valid at the
    set's Kubernetes) refuses, through the oracle's ValidatingAdmissionPolicy semantics, every root-equivalent
    feature in nlp, and in vision all but the two approved; the platform's own namespaces are out of scope.
    Pod Security (the namespaces' enforce level) agrees: nlp's baseline refuses host networking too, vision's
    `privileged` leaves it to this policy."""
    r, tree = lab_built
    policy, binding = docs(tree["kubernetes/admission/privileged-pods.yaml"])
    for obj in (policy, binding):
        kubernetes_validate.validate(obj, k8s_version(r), strict=True)
    ns = {t: docs(tree[f"kubernetes/tenants/{t}.yaml"])[0] for t in ("vision", "nlp")}

    def admitted(tenant: str, spec: dict) -> bool:
        return ks.vap_admits(policy, binding, ns[tenant], pod(spec))

    host_net, host_pid = {"hostNetwork": True}, {"hostPID": True}
    privileged = {"containers": [{"name": "m", "image": "x", "securityContext": {"privileged": True}}]}
    host_path = {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}
    sys_admin = {"containers": [{"name": "m", "image": "x", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}
    host_port = {"containers": [{"name": "m", "image": "x", "ports": [{"containerPort": 80, "hostPort": 80}]}]}
    ephemeral = {"ephemeralContainers": [{"name": "dbg", "image": "x", "securityContext": {"privileged": True}}]}
    plain = {"containers": [{"name": "m", "image": "x", "securityContext": {"capabilities": {"add": ["CHOWN"]}}}]}
    assert admitted("nlp", {}) and admitted("vision", {}) and admitted("nlp", plain)
    for spec in (host_net, host_pid, privileged, host_path, sys_admin, host_port, ephemeral, {"hostIPC": True}):
        assert not admitted("nlp", spec), spec
    assert admitted("vision", host_net) and admitted("vision", host_pid) and admitted("vision", host_port)
    for spec in (privileged, host_path, sys_admin, ephemeral, {"hostIPC": True}):
        assert not admitted("vision", spec), spec
    # the operators' namespaces are not bound (their daemon sets need the node)
    gpu_op = {"metadata": {"name": "gpu-operator", "labels": {}}}
    assert ks.vap_violations(policy, binding, gpu_op, pod(privileged)) is None
    # a namespace nobody declared (default) is bound: refused
    assert not ks.vap_admits(policy, binding, {"metadata": {"name": "default"}}, pod(host_net))
    # Pod Security as rendered: nlp baseline refuses host networking; vision is privileged (this policy decides)
    levels = {t: o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] for t, o in ns.items()}
    assert levels == {"vision": "privileged", "nlp": "baseline"}
    assert ks.pod_security_violations(levels["nlp"], pod(host_net))
    assert not ks.pod_security_violations(levels["vision"], pod(host_net))


def test_without_approvals_no_namespace_runs_privileged_pods(lab, tmp_path):
    lab["privileged"].pop("vision-node-debug")
    r, tree = build(lab, tmp_path)
    policy, binding = docs(tree["kubernetes/admission/privileged-pods.yaml"])
    vision = docs(tree["kubernetes/tenants/vision.yaml"])[0]
    assert vision["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert not ks.vap_admits(policy, binding, vision, pod({"hostNetwork": True}))
    assert "namespaceObject" not in json.dumps(policy["spec"]["validations"])  # no namespace is named


def test_privileged_pod_security_without_approval_is_refused(lab, tmp_path):
    lab["privileged"].pop("vision-node-debug")
    lab["tenants"]["nlp"]["kubernetes"]["pod_security"] = "privileged"
    r, _ = build(lab, tmp_path)
    (f,) = findings(r, "tenant-privileged-pods")
    assert f.dotted == "tenants.nlp.kubernetes.pod_security" and f.line > 0 and "approval" in f.hint
    lab["privileged"]["nlp-debug"] = {"approver": "hpc-admins", "reference": "CHG-1",
                                      "kubernetes": {"tenants": ["nlp"], "features": ["host-network"]}}
    r2, _ = build(lab, tmp_path)
    assert not findings(r2, "tenant-privileged-pods") and r2.ok


# ---- privileged workloads: Slurm

def test_root_equivalent_partition_only_for_approved_groups(lab_built, lab, tmp_path):
    _, tree = lab_built
    line = next(x for x in tree["slurm/slurm.conf"].splitlines() if x.startswith("PartitionName=debug "))
    assert "AllowGroups=hpc-debug" in line and "OverSubscribe=EXCLUSIVE" in line
    train = next(x for x in tree["slurm/slurm.conf"].splitlines() if x.startswith("PartitionName=train "))
    assert "AllowGroups" not in train
    users = tree["identity/slurm-users.sh"]
    assert "members hpc-debug" in users and "set adminlevel=Operator" in users
    # the approval withdrawn: nobody but root may submit, and validation says why, where
    lab["privileged"].pop("debug-root")
    r, _ = build(lab, tmp_path)
    (f,) = findings(r, "privileged-without-approval")
    assert f.dotted == "slurm.partitions.debug.privileged" and f.line > 0 and "AllowGroups=root" in f.message
    r2 = validate_file(tmp_path / "def.yaml", MATRICES, TODAY)
    assert not r2.ok


def test_approved_slurm_admin_level_kept_and_others_demoted(lab_built, tmp_path):
    """The sync script run against a stand-in sacctmgr (a shell function logging its calls) and a stand-in
    getent: the approved group's member gets Operator, the admin Administrator, and a stray holder is demoted."""
    _, tree = lab_built
    log = tmp_path / "calls"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "getent").write_text("#!/bin/sh\ncase \"$2\" in hpc-admins) echo 'hpc-admins:x:1:alice' ;; "
                                   "hpc-debug) echo 'hpc-debug:x:2:bob' ;; *) echo \"$2:x:3:\" ;; esac\n")
    (bindir / "sacctmgr").write_text(f"#!/bin/sh\necho \"$*\" >>{log}\ncase \"$*\" in *'show user format=user,adminlevel'*) "
                                     "printf 'alice|Administrator\\nbob|Operator\\nmallory|Operator\\n' ;; "
                                     "*'show user where name=bob'*|*'show user where name=alice'*) echo x ;; esac\n")
    for f in bindir.iterdir():
        f.chmod(0o755)
    script = tmp_path / "slurm-users.sh"
    script.write_text(tree["identity/slurm-users.sh"])
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    subprocess.run(["sh", str(script)], check=True, env=env, timeout=20)
    calls = log.read_text()
    assert 'modify user where name=bob set adminlevel=Operator' in calls
    assert 'modify user where name=alice set adminlevel=Administrator' in calls
    assert 'modify user where name=mallory set adminlevel=None' in calls
    assert 'name=bob set adminlevel=None' not in calls and 'name=alice set adminlevel=None' not in calls


# ---- regulated data: rendering

def test_dataset_mounted_only_on_authorised_node_groups(lab_built):
    _, tree = lab_built
    units = {p for p in tree if p.startswith("storage/mounts/") and "datasets-" in p}
    assert units == {r"storage/mounts/infer/datasets-imagenet\x2deu.mount",
                     r"storage/mounts/secure/datasets-secure\x2dweights.mount"}
    # the filesystems too: each only where its datasets may go
    assert {p for p in tree if p.startswith("storage/mounts/") and "datasets-" not in p and "scratch" not in p} == {
        "storage/mounts/infer/projects.mount", r"storage/mounts/secure/secure\x2ddata.mount"}
    text = tree[r"storage/mounts/infer/datasets-imagenet\x2deu.mount"]
    assert "What=/projects/datasets/imagenet-eu\nWhere=/datasets/imagenet-eu\nType=none\nOptions=bind,ro\n" in text


def test_dataset_claim_only_in_authorised_namespaces(lab_built):
    r, tree = lab_built
    objs = docs(tree["kubernetes/data/imagenet-eu.yaml"])
    assert {(o["kind"], o["metadata"].get("namespace")) for o in objs} == {
        ("PersistentVolume", None), ("PersistentVolumeClaim", "vision"), ("NetworkPolicy", "vision")}
    for o in objs:
        kubernetes_validate.validate(o, k8s_version(r), strict=True)
    pv = next(o for o in objs if o["kind"] == "PersistentVolume")
    assert pv["spec"]["claimRef"]["namespace"] == "vision" and pv["spec"]["local"]["path"] == "/projects/datasets/imagenet-eu"
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["infer"]
    np = next(o for o in objs if o["kind"] == "NetworkPolicy")
    assert np["spec"]["podSelector"] == {"matchLabels": {"clusterdef.dev/dataset": "imagenet-eu"}}
    assert {"ipBlock": {"cidr": "192.0.2.0/24"}} in np["spec"]["egress"][-1]["to"]
    assert "kubernetes/data/secure-weights.yaml" not in tree  # its tenant has no namespace
    assert not any("imagenet" in t for t in (tree["kubernetes/tenants/nlp.yaml"],))


def test_dataset_claim_needs_the_dataset_label(lab_built):
    """Every pod that mounts a dataset claim carries the dataset's label, so its egress policy selects it."""
    _, tree = lab_built
    policy, binding = docs(tree["kubernetes/admission/dataset-claims.yaml"])
    vision = docs(tree["kubernetes/tenants/vision.yaml"])[0]
    vol = {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "dataset-imagenet-eu", "readOnly": True}}]}
    unlabelled = pod(vol)
    labelled = copy.deepcopy(unlabelled)
    labelled["metadata"]["labels"] = {"clusterdef.dev/dataset": "imagenet-eu"}
    wrong = copy.deepcopy(unlabelled)
    wrong["metadata"]["labels"] = {"clusterdef.dev/dataset": "other"}
    assert ks.vap_admits(policy, binding, vision, labelled)
    assert not ks.vap_admits(policy, binding, vision, unlabelled)
    assert not ks.vap_admits(policy, binding, vision, wrong)
    assert ks.vap_admits(policy, binding, vision, pod({}))


def test_dataset_backup_keeps_its_retention(lab_built):
    _, tree = lab_built
    script = tree["backup/data-imagenet-eu/backup.sh"]
    assert "--keep-within 365d --prune" in script and "'/projects/datasets/imagenet-eu'" not in script
    assert "/projects/datasets/imagenet-eu" in script and "--keep-within-monthly" not in script
    plan = json.loads(tree["backup/plan.json"])
    assert plan["authoritative"]["data-secure-weights"]["retention_days"] == 90


def test_hostile_group_names_are_quoted(lab, tmp_path):
    lab["datasets"]["imagenet-eu"]["groups"] = ["Domain Users"]
    r, tree = build(lab, tmp_path)
    assert r.ok, [(f.code, f.message) for f in r.errors]
    script = tree["storage/projects/dataset-imagenet-eu.sh"]
    assert "setfacl -R -m 'u::rwX,g::---,o::---,g:vision-users:rX,g:Domain Users:rX' \"$dir\"" in script
    lab["datasets"]["imagenet-eu"]["groups"] = ["x'; rm -rf /"]
    r2, _ = build(lab, tmp_path)
    assert not r2.ok and r2.errors[0].line > 0


# ---- regulated data: validation (the located findings are in tests/test_checks.py CASES)

def test_access_answers_who_reads_a_dataset_and_from_where(tmp_path):
    from cli_runner import CliRunner
    from clusterdef.cli import app
    from conftest import CLUSTERS

    def run_cli(args):
        return CliRunner().invoke(app, args)

    res = run_cli(["access", CLUSTERS / "lab.yaml", "--dataset", "imagenet-eu", "--format", "json",
                   "--today", TODAY.isoformat()])
    assert res.exit_code == 0, res.output
    a = json.loads(res.stdout)
    assert [(x["group"], x["file"]) for x in a["readers"]] == [
        ("vision-users", "storage/projects/dataset-imagenet-eu.sh"), ("imagenet-licensed", "storage/projects/dataset-imagenet-eu.sh")]
    assert [w["node_group"] for w in a["node_groups"]] == ["infer"]
    assert [(n["namespace"], n["file"]) for n in a["namespaces"]] == [("vision", "kubernetes/data/imagenet-eu.yaml")]
    assert a["filesystem_also_on"] == []
    bad = run_cli(["access", CLUSTERS / "lab.yaml", "--dataset", "nope", "--today", TODAY.isoformat()])
    assert bad.exit_code == 2 and "nope" in bad.output


# ---- enforcing software: setfacl on a tmpfs

def _live_ready() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mount, useradd, runuser)"
    for tool in ("setfacl", "getfacl", "useradd", "userdel", "groupadd", "groupdel", "runuser", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/deps.d/70-tenancy.sh installs acl)"
    return None


@pytest.mark.skipif(_live_ready() is not None, reason=str(_live_ready()))
def test_acl_script_lets_readers_in_and_keeps_others_out(lab, tmp_path):
    """The rendered ACL script, run on a tmpfs (POSIX ACLs) as the dataset's filesystem: a member of an
    authorised group reads the data, a user of no authorised group gets EACCES, and a file added later
    inherits the readers (default ACL)."""
    tag = f"cdt{os.getpid() % 100000}"
    reader_g, reader, other = f"{tag}r", f"{tag}a", f"{tag}b"
    lab["datasets"]["imagenet-eu"]["groups"] = [reader_g]
    lab["identity"]["tenant_groups"]["vision"] = [f"{tag}v"]
    _, tree = build(lab, tmp_path)
    mnt = Path(tempfile.mkdtemp(prefix="clusterdef-acl-"))  # under /tmp: the test users must reach it
    mnt.chmod(0o755)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(mnt)], check=True)
    made: list[list[str]] = []
    try:
        for g in (reader_g, f"{tag}v"):
            subprocess.run(["groupadd", g], check=True)
            made.append(["groupdel", g])
        subprocess.run(["useradd", "-M", "-N", "-G", reader_g, reader], check=True)
        made.append(["userdel", reader])
        subprocess.run(["useradd", "-M", "-N", other], check=True)
        made.append(["userdel", other])
        data = mnt / "datasets" / "imagenet-eu"
        data.mkdir(parents=True)
        (data / "train.csv").write_text("secret\n")
        script = tmp_path / "acl.sh"
        script.write_text(tree["storage/projects/dataset-imagenet-eu.sh"].replace(
            'lfs project', ': lfs project').replace('lfs setquota', ': lfs setquota'))  # no Lustre here
        subprocess.run(["sh", str(script)], check=True, env={**os.environ, "CLUSTERDEF_MOUNT": str(mnt)}, timeout=20)
        (data / "later.csv").write_text("added after\n")  # inherits the default ACL

        def cat(user: str, f: str) -> subprocess.CompletedProcess:
            return subprocess.run(["runuser", "-u", user, "--", "cat", str(data / f)], capture_output=True,
                                  text=True, timeout=10)

        assert cat(reader, "train.csv").stdout == "secret\n"
        assert cat(reader, "later.csv").returncode == 0
        denied = cat(other, "train.csv")
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
        assert cat(other, "later.csv").returncode != 0
        acl = subprocess.run(["getfacl", "-p", str(data / "train.csv")], capture_output=True, text=True).stdout
        assert f"group:{reader_g}:r--" in acl and "other::---" in acl
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        mnt.rmdir()
        for cmd in reversed(made):
            subprocess.run(cmd, check=False, capture_output=True)
