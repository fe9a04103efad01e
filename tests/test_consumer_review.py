"""docs/consumers.md reviews every artefact class the render writes (issue 27, item 1).

The classes are glob patterns over the paths of the three examples' golden delivery maps (`*` one path
segment or part of one, `**` any number of segments). Every rendered path falls in exactly one class,
every class is rendered by some example, and every class has a row of its own in docs/consumers.md (the
pattern, in backticks, in the row's first cell) that names a test. So a new artefact class fails here
until its consumer has been reviewed and the row written.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "consumers.md"
EXAMPLES = ("lab", "estate", "gb200")

CLASSES = (
    # control machine: inventory and group_vars of the roles
    "ansible/inventory/hosts.yml",
    "ansible/group_vars/all.yml",
    "ansible/group_vars/backup.yml",
    "ansible/group_vars/cp_*.yml",
    "ansible/group_vars/group_*.yml",
    "ansible/group_vars/hw_*.yml",
    "ansible/group_vars/service_hosts.yml",
    "ansible/group_vars/slurm_control_plane.yml",
    "ansible/group_vars/slurmdbd.yml",
    "ansible/group_vars/tenant_storage_admin.yml",
    # backup jobs
    "backup/*/backup.sh",
    "backup/*/restore.sh",
    "backup/*/clusterdef-backup-*.service",
    "backup/*/clusterdef-backup-*.timer",
    "backup/slurmdbd/my.cnf.j2",
    "backup/restic.password.j2",
    "backup/plan.json",
    # the tree's own records
    "definition.resolved.json",
    "delivery.json",
    "versions.json",
    # identity
    "identity/nsswitch.conf",
    "identity/slurm-users.sh",
    "identity/sssd/*.conf.j2",
    "identity/sudoers.d/clusterdef-admins",
    # images (mkosi trees)
    "images/*/build.sh",
    "images/*/sign.sh",
    "images/*/identity",
    "images/*/verify/init",
    "images/*/verify/minisign.pub",
    "images/*/mkosi.conf",
    "images/*/mkosi.conf.d/50-nvidia.conf",
    "images/*/mkosi.conf.d/60-set.conf",
    "images/*/mkosi.conf.d/60-slurm-node-access.conf",
    "images/*/mkosi.conf.d/65-identity.conf",
    "images/*/mkosi.skeleton/etc/apt/preferences.d/*.pref",
    "images/*/mkosi.skeleton/etc/apt/sources.list.d/*.list",
    "images/*/mkosi.extra/etc/default/slurmd",
    "images/*/mkosi.extra/etc/systemd/system/slurmd.service.d/clusterdef-configless.conf",
    "images/*/mkosi.extra/etc/nsswitch.conf",
    "images/*/mkosi.extra/etc/sudoers.d/clusterdef-admins",
    "images/*/mkosi.extra/etc/pam.d/sshd",
    "images/*/mkosi.extra/etc/security/clusterdef-admins.conf",
    "images/*/mkosi.extra/etc/systemd/network/20-clusterdef-storage-*.network",
    "images/*/mkosi.extra/etc/systemd/system/*.mount",
    "images/*/mkosi.extra/etc/systemd/system/remote-fs.target.d/*.mount.conf",
    "images/*/mkosi.extra/etc/systemd/system/multi-user.target.d/clusterdef-nvidia-fabricmanager.service.conf",
    "images/*/mkosi.extra/etc/systemd/system/clusterdef-baseline.service",
    "images/*/mkosi.extra/etc/systemd/system/multi-user.target.d/clusterdef-baseline.conf",
    "images/*/mkosi.extra/usr/lib/clusterdef/firstboot-baseline",
    "images/*/mkosi.extra/usr/lib/clusterdef/baseline/**",
    "images/*/mkosi.extra/usr/lib/clusterdef/probe",
    "images/*/mkosi.extra/usr/sbin/clusterdef-nodecheck",
    "images/*/mkosi.extra/etc/systemd/system/clusterdef-roce-qos.service",
    "images/*/mkosi.extra/etc/systemd/system/multi-user.target.d/clusterdef-roce-qos.service.conf",
    "images/*/mkosi.extra/usr/lib/clusterdef/roce/qos.sh",
    # tables for people and the site's systems
    "inventory/hosts",
    "inventory/nodes.csv",
    "inventory/attachments.csv",
    # Kubernetes
    "kubernetes/gpu-operator/values.yaml",
    "kubernetes/gpu-operator/nvidiadrivers.yaml",
    "kubernetes/network-operator/values.yaml",
    "kubernetes/network-operator/nicclusterpolicy.yaml",
    "kubernetes/nvidia-dra/values.yaml",
    "kubernetes/nvidia-dra/computedomains.yaml",
    "kubernetes/identity/authentication-config.yaml",
    "kubernetes/identity/cluster-admins.yaml",
    "kubernetes/image-policy/policy.yaml",
    "kubernetes/kueue/manager-config.yaml",
    "kubernetes/kueue/clusterqueues.yaml",
    "kubernetes/kueue/cohorts.yaml",
    "kubernetes/kueue/resourceflavors.yaml",
    "kubernetes/kueue/topologies.yaml",
    "kubernetes/kueue/workloadpriorityclasses.yaml",
    "kubernetes/nodes/labels-taints.yaml",
    "kubernetes/tenants/*.yaml",
    "kubernetes/admission/privileged-pods.yaml",
    "kubernetes/admission/dataset-claims.yaml",
    "kubernetes/data/*.yaml",
    # fabric and storage networks
    "network/opensm/partitions.conf",
    "network/storage/*/20-clusterdef-storage-*.network",
    "network/roce/*/clusterdef-roce-qos.sh",
    "network/roce/*/clusterdef-roce-qos.service",
    # observability
    "observability/prometheus.yml",
    "observability/rules/*.yml",
    "observability/targets/*.yml",
    "observability/dcgm/dcgm-metrics.csv",
    "observability/kubernetes/podmonitors.yaml",
    "observability/kubernetes/servicemonitors.yaml",
    "observability/kubernetes/prometheusrule.yaml",
    # boot server
    "pxe/dnsmasq.conf",
    "pxe/ipxe/boot.ipxe",
    "pxe/ipxe/groups/*.ipxe",
    "pxe/ipxe/images/*/*.ipxe",
    "pxe/published",
    # Slurm
    "slurm/slurm.conf",
    "slurm/gres.conf",
    "slurm/cgroup.conf",
    "slurm/topology.conf",
    "slurm/namespace.yaml",
    "slurm/job_submit.lua",
    "slurm/accounts.cfg",
    "slurm/qos.sh",
    "slurm/nodecheck",
    "slurm/slurmdbd.conf.j2",
    # storage
    "storage/mounts/*/*.mount",
    "storage/*/quota.sh",
    "storage/*/dataset-*.sh",
    "storage/*/scratch-cleanup.sh",
    "storage/*/clusterdef-scratch-*.service",
    "storage/*/clusterdef-scratch-*.timer",
)


def glob_regex(pattern: str) -> re.Pattern:
    """`**` any run of path segments, `*` any run of characters within one segment."""
    parts = re.split(r"(\*\*|\*)", pattern)
    body = "".join({"**": ".+", "*": "[^/]+"}.get(p, re.escape(p)) for p in parts)
    return re.compile(body + r"\Z")


def rendered_paths() -> set[str]:
    paths: set[str] = set()
    for example in EXAMPLES:
        delivery = json.loads((ROOT / "tests" / "golden" / example / "delivery.json").read_text())
        paths |= set(delivery["files"])
    return paths


def review_rows(text: str) -> list[list[str]]:
    """The cells of every table row of the review (header and separator rows left out)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or re.fullmatch(r"[|\s:-]+", line):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if cells[0] != "artefact":
            rows.append(cells)
    return rows


def test_the_glob_keeps_to_its_segment():
    assert glob_regex("images/*/identity").match("images/gpu-node/identity")
    assert not glob_regex("images/*/identity").match("images/gpu-node/verify/identity")
    assert glob_regex("images/*/baseline/**").match("images/mgmt/baseline/devices/hgx-h100")
    assert not glob_regex("slurm/slurm.conf").match("slurm/slurmXconf")
    assert not glob_regex("pxe/published").match("pxe/published.old")


def test_every_rendered_path_is_in_exactly_one_class():
    regexes = {pattern: glob_regex(pattern) for pattern in CLASSES}
    wrong = {}
    for path in sorted(rendered_paths()):
        classes = [p for p, rx in regexes.items() if rx.match(path)]
        if len(classes) != 1:
            wrong[path] = classes
    assert not wrong, f"paths in no class or in several (add a class and its review row): {wrong}"


def test_every_class_is_rendered_by_an_example():
    paths = rendered_paths()
    stale = [p for p in CLASSES if not any(glob_regex(p).match(path) for path in paths)]
    assert not stale, f"classes no example renders: {stale}"


def test_every_class_has_a_review_row_naming_a_test():
    rows = review_rows(DOC.read_text())
    reviewed = {}
    for cells in rows:
        for pattern in re.findall(r"`([^`]+)`", cells[0]):
            reviewed.setdefault(pattern, []).append(cells)
    missing = [p for p in CLASSES if p not in reviewed]
    assert not missing, f"artefact classes without a row in docs/consumers.md: {missing}"
    untested = [p for p in CLASSES for cells in reviewed[p] if len(cells) != 5 or not cells[4]]
    assert not untested, f"rows without their five cells or a test cell: {untested}"


@pytest.fixture(scope="module")
def defined_tests() -> set[str]:
    names = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        names |= set(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.M))
    return names


def test_every_test_the_review_names_exists(defined_tests):
    text = DOC.read_text()
    files = set(re.findall(r"tests/(test_\w+\.py)", text))
    absent_files = sorted(f for f in files if not (ROOT / "tests" / f).is_file())
    names = set(re.findall(r"::(test_\w+)", text))
    absent = sorted(names - defined_tests)
    assert not absent_files and not absent, f"the review names tests that do not exist: {absent_files} {absent}"


def _unit_dirs() -> dict[tuple[str, str], list[str]]:
    """(example, folder) -> the rendered service and timer units in it (a timer beside its service)."""
    dirs: dict[tuple[str, str], list[str]] = {}
    for example in EXAMPLES:
        delivery = json.loads((ROOT / "tests" / "golden" / example / "delivery.json").read_text())
        for path in delivery["files"]:
            if path.endswith((".service", ".timer")):
                folder, _, name = path.rpartition("/")
                dirs.setdefault((example, folder), []).append(name)
    return dirs


def _verify(folder: Path) -> subprocess.CompletedProcess:
    units = sorted(str(u) for u in folder.iterdir())
    return subprocess.run(["systemd-analyze", "verify", "--man=no", *units], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_systemd_accepts_every_rendered_service_and_timer(tmp_path):
    """The backup, scratch-expiry and first-boot units (and the timers' OnCalendar=): `systemd-analyze verify`
    (Debian 12's systemd 252; the nodes run Ubuntu 24.04's 255) loads each with its service and refuses a bad
    setting. The mount units are verified in tests/test_tenancy.py."""
    dirs = _unit_dirs()
    assert {name for names in dirs.values() for name in names} >= {
        "clusterdef-backup-slurm.timer", "clusterdef-scratch-scratch.timer", "clusterdef-baseline.service"}
    for (example, folder), names in sorted(dirs.items()):
        out = tmp_path / example / folder
        out.mkdir(parents=True)
        for name in names:
            (out / name).write_text((ROOT / "tests" / "golden" / example / folder / name).read_text())
        r = _verify(out)
        assert r.returncode == 0 and not r.stderr.strip(), (example, folder, r.stderr)
    # the check can fail: a timer whose calendar systemd cannot parse
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    (bad / "x.timer").write_text("[Timer]\nOnCalendar=dailyy\n")
    assert _verify(bad).returncode != 0
