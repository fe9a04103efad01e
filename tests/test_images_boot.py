"""Image identity, boot pointers and provisioning modes (docs/provisioning.md): artefact names
carry (image, version, set, digest); a version belongs to one set; the boot server keeps the
rollback target's build; per-host boot pointers; stateless groups never run package roles.
QEMU proof: tests/test_pxe_boot.py::test_canary_pointer_and_rollback_switch_exactly_one_host."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from cli_runner import CliRunner

from clusterdef.cli import app
from clusterdef.knowledge.roles import roles
from clusterdef.plan import FROM_SIDE_IGNORED, PlanInputError, load_side, make_plan
from clusterdef.render.images import identities
from clusterdef.render.pxe import builds, pointer_path
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY, images_tree, keep_builds, on_set_images

OLD, CURRENT = "2025.10-r580", "2026.07-r580"
runner = CliRunner()


def lab_on(tmp: Path, set_name: str, name: str, version_for_set: bool = True, keep: Path | None = None) -> Path:
    text = (CLUSTERS / "lab.yaml").read_text().replace(f"matrix: {CURRENT}", f"matrix: {set_name}", 1)
    if set_name == OLD:
        text = text.replace("firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7, bf3]",
                            "firmware: [bmc, sbios, gpu_vbios, nvswitch, cx7]")
    if version_for_set:
        text = on_set_images(text, set_name)
    if keep is not None:
        text = keep_builds(text, images_tree(keep))
    out = tmp / name
    out.write_text(text)
    return out


def plan_cli(old: Path, new: Path):
    return runner.invoke(app, ["plan", "--from", str(old), "--to", str(new), "-m", str(MATRICES), "--today",
                               TODAY.isoformat(), "-f", "json"])


def test_a_version_reused_for_another_set_is_a_located_error(tmp_path):
    """The lab moved from OLD to CURRENT without a new image version: no plan, exit 2, the line
    of images.gpu-node.version in the new file, and a hint naming the running build to keep."""
    old = lab_on(tmp_path, OLD, "old.yaml", version_for_set=False)
    new = lab_on(tmp_path, CURRENT, "new.yaml", version_for_set=False)
    r = plan_cli(old, new)
    assert r.exit_code == 2, r.output
    line = next(i for i, t in enumerate(new.read_text().splitlines(), 1) if 'version: "2026.07.1"' in t)
    assert f"new.yaml:{line}:" in r.output and "image-version-reused" in r.output and "Traceback" not in r.output
    before = identities(resolve(validate_file(old, MATRICES, TODAY).definition,
                                validate_file(old, MATRICES, TODAY).matrix, tmp_path))["gpu-node"]
    assert before.digest in r.output and "images.gpu-node.published" in r.output


def test_a_stateless_rollback_needs_its_build_kept(tmp_path):
    """train is stateless: its rollback boots the running build, so the new definition must keep it."""
    old = lab_on(tmp_path, OLD, "old.yaml")
    new = lab_on(tmp_path, CURRENT, "new.yaml")
    a, b = load_side(old, MATRICES, TODAY, FROM_SIDE_IGNORED), load_side(new, MATRICES, TODAY)
    try:
        make_plan(a, b)
        raise AssertionError("no image-rollback-not-kept")
    except PlanInputError as exc:
        [f] = exc.findings
    assert f.code == "image-rollback-not-kept" and f.path == ("images", "gpu-node")
    assert f.line == next(i for i, t in enumerate(new.read_text().splitlines(), 1) if t == "  gpu-node:")
    assert "2025.10.1" in f.hint and 'set: "2025.10-r580"' in f.hint
    # the hint pastes as it reads: the fragment is YAML whose digest stays a string (an all-digit one too)
    pasted = YAML(typ="safe").load(f.hint.split("published: ", 1)[1])
    [(version, build)] = pasted.items()
    assert version == "2025.10.1" and isinstance(build["digest"], str) and build["set"] == "2025.10-r580"
    # with the running build kept, the same plan goes through: image first, then the rollout
    new = lab_on(tmp_path, CURRENT, "new.yaml", keep=old)
    doc = make_plan(a, load_side(new, MATRICES, TODAY)).doc
    assert doc["rollout"]["stages"][0]["kind"] == "image"
    img, mgmt = doc["images"]  # the service hosts' image moves with the set too (docs/services.md)
    assert mgmt["image"] == "mgmt" and mgmt["stateless_groups"] == []
    assert {p["package"] for p in mgmt["pins"]} == {"doca-ofed", "mft", "kubeadm", "kubectl", "kubelet",
                                                    "slurm-smd-client", "slurm-smd-slurmctld", "slurm-smd-slurmdbd"}
    assert img["from"]["version"] == "2025.10.1" and img["to"]["version"] == "2026.07.1"
    assert img["stateless_groups"] == ["train"]
    pins = {p["package"]: (p["from"], p["to"]) for p in img["pins"]}
    assert pins["nvidia-open"] == ("580.95.05-*", "580.126.20-*") and pins["libnccl2"][1] == "2.30.4-*+cuda13.0"
    drill = next(s for s in doc["rollout"]["stages"] if s["kind"] == "rollback-drill")
    assert drill["provisioning"] == "stateless" and drill["boot"]["back"] == img["from"]["artefact"]
    assert drill["steps"][0].startswith(f"point gpu[001,003] at build {img['from']['artefact']}")
    # the stateful waves keep the in-place layers, the stateless one points and reboots
    waves = [s for s in doc["rollout"]["stages"] if s["kind"] == "wave"]
    # the stateless train group first (its image), then the stateful ones, each split by the capacity floors
    assert [w["provisioning"] for w in waves] == ["stateless"] + ["stateful"] * (len(waves) - 1)
    assert len(waves) == doc["rollout"]["waves"] >= 5
    assert not any(step.startswith("layer driver") for step in waves[0]["steps"])
    assert any(step.startswith("layer driver") for step in waves[1]["steps"])
    # the group defaults move after the last wave; the changed files are delivered after that
    assert [s["kind"] for s in json.loads(json.dumps(doc))["rollout"]["stages"]][-2:] == ["boot-default", "deliver"]


def test_published_builds_and_boot_pointers_render(tmp_path):
    """A published build gets its own script per group and a line in the manifest; a declared boot
    pointer is a per-host file, by MAC, chaining to that script; the entry script tries a host's
    pointer before the group default."""
    old = lab_on(tmp_path, OLD, "old.yaml")
    text = lab_on(tmp_path, CURRENT, "new.yaml", keep=old).read_text()
    text = text.replace("    provisioning: stateless", '    boot: {gpu004: "2025.10.1"}\n    provisioning: stateless', 1)
    new = tmp_path / "new.yaml"
    new.write_text(text)
    result = validate_file(new, MATRICES, TODAY)
    assert result.ok, [f.message for f in result.findings]
    from clusterdef.build import build_tree

    tree = build_tree(result, ["pxe", "images"])[0]
    resolved = resolve(result.definition, result.matrix, tmp_path)
    kept = builds(resolved, "gpu-node")
    assert set(kept) == {"2026.07.1", "2025.10.1"} and kept["2025.10.1"].set == OLD
    old_art = kept["2025.10.1"].artefact
    for g in ("train", "infer", "secure"):
        assert f"clusterdef.set={OLD}" in tree[f"pxe/ipxe/images/{g}/{old_art}.ipxe"]
    assert [ln.split()[0] for ln in tree["pxe/published"].splitlines() if not ln.startswith("#")] == \
        sorted(b.artefact for b in [*kept.values(), *builds(resolved, "mgmt").values()])
    pointer = tree["pxe/" + pointer_path("52:54:00:20:00:14")]
    assert pointer.rstrip().endswith(f"chain --replace --autofree http://10.20.0.2/ipxe/images/train/{old_art}.ipxe")
    assert [k for k in tree if k.startswith("pxe/ipxe/hosts/")] == ["pxe/ipxe/hosts/host-52-54-00-20-00-14.ipxe"]
    assert ("chain --replace --autofree http://10.20.0.2/ipxe/hosts/host-${netX/mac:hexhyp}.ipxe || "
            "chain --replace --autofree http://10.20.0.2/ipxe/groups/train.ipxe") in tree["pxe/ipxe/boot.ipxe"]


def test_inventory_separates_the_provisioning_modes(tmp_path):
    """prov_stateless / prov_stateful groups, and a group's extra roles in its group_vars (a role that
    installs nothing is fine on the stateless group)."""
    text = (CLUSTERS / "lab.yaml").read_text().replace(
        "    provisioning: stateless", "    roles: [gpu_facts]\n    provisioning: stateless", 1)
    (tmp_path / "lab.yaml").write_text(text)
    result = validate_file(tmp_path / "lab.yaml", MATRICES, TODAY)
    assert result.ok, [f.message for f in result.findings]
    from clusterdef.build import build_tree

    tree = build_tree(result, ["ansible"])[0]
    inv = YAML(typ="safe").load(tree["ansible/inventory/hosts.yml"])["all"]["children"]
    assert list(inv["prov_stateless"]["children"]) == ["group_train"]
    assert list(inv["prov_stateful"]["children"]) == ["group_infer", "group_secure", "group_ctl", "group_acct",
                                                      "group_mgmt", "group_k8sctl"]
    top = {rel: [ln.split(":")[0] for ln in text.splitlines() if ln[:1].isalpha()]
           for rel, text in tree.items() if rel.startswith("ansible/group_vars/group_")}
    # the stateless group's own identity files (its sssd.conf) ride along; roles only where named
    assert top["ansible/group_vars/group_train.yml"] == ["identity_files", "clusterdef_group_roles"]
    assert tree["ansible/group_vars/group_train.yml"].endswith("clusterdef_group_roles:\n- gpu_facts\n")
    assert "clusterdef_group_roles" not in top["ansible/group_vars/group_infer.yml"]


def test_package_roles_never_run_on_stateless_nodes():
    """Every play of the real playbooks that runs a role installing packages limits it to prov_stateful."""
    for pb in ("upgrade.yml", "rollback.yml", "enforce-baseline.yml"):
        for play in YAML(typ="safe").load((ROOT / "playbooks" / pb).read_text()):
            for role in play.get("roles", []) or []:
                name = role["role"] if isinstance(role, dict) else role
                if roles()[name]["installs_packages"]:
                    assert "'prov_stateful' in group_names" in role.get("when", ""), (pb, name)


def test_roles_data_matches_the_roles_tasks():
    """knowledge/roles.yaml lists every role of roles/, and says installs_packages exactly when a task
    file of the role uses apt, package or dpkg."""
    pattern = re.compile(r"^\s*-?\s*(ansible\.builtin\.)?(apt|package|dpkg_selections):", re.M)
    found = {}
    for role in sorted(p for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir()):
        found[role.name] = any(pattern.search(t.read_text()) for t in (role / "tasks").rglob("*.yml"))
    assert {r: v["installs_packages"] for r, v in roles().items()} == found


@pytest.mark.slow
def test_boot_pointer_playbook_writes_removes_and_refuses(tmp_path):
    """playbooks/boot-pointer.yml, run by ansible-playbook on localhost: writes a pointer, removes
    one whose content is empty, and refuses a path outside the HTTP root's ipxe/ folder."""
    import subprocess
    import sys

    pb = Path(sys.executable).parent / "ansible-playbook"
    if not pb.exists():
        pytest.skip("ansible-playbook is not installed")
    root = tmp_path / "root"
    (root / "ipxe/hosts").mkdir(parents=True)
    (root / "ipxe/hosts/host-52-54-00-20-00-12.ipxe").write_text("old\n")

    def run(pointers):
        extra = {"clusterdef_boot_root": str(root), "clusterdef_boot_become": False,
                 "clusterdef_boot_pointers": pointers, "ansible_python_interpreter": sys.executable}
        (tmp_path / "vars.json").write_text(json.dumps(extra))
        return subprocess.run([str(pb), "-i", "localhost,", "-c", "local", "-e", f"@{tmp_path / 'vars.json'}",
                               str(ROOT / "playbooks" / "boot-pointer.yml")], capture_output=True, text=True,
                              timeout=120)

    r = run([{"host": "gpu001", "path": "ipxe/hosts/host-52-54-00-20-00-11.ipxe", "content": "#!ipxe\nchain x\n"},
             {"host": "gpu002", "path": "ipxe/hosts/host-52-54-00-20-00-12.ipxe", "content": ""}])
    assert r.returncode == 0, r.stdout[-2000:]
    assert (root / "ipxe/hosts/host-52-54-00-20-00-11.ipxe").read_text() == "#!ipxe\nchain x\n"
    assert not (root / "ipxe/hosts/host-52-54-00-20-00-12.ipxe").exists()
    r = run([{"host": "", "path": "ipxe/../../escaped.ipxe", "content": "x"}])
    assert r.returncode != 0 and "refusing boot server path" in r.stdout
    assert not (tmp_path / "escaped.ipxe").exists()
