"""Each named check, parametrized: one mutation of the valid lab -> the expected finding."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from clusterdef.errors import Severity
from clusterdef.source import load_text
from clusterdef.validate.pipeline import validate_source
from clusterdef.validate.registry import CHECKS
from conftest import CLUSTERS, TODAY, dump_yaml
from lab_variants import mixed_flavor, mixed_generations


def run(data, matrix, tmp_path: Path, base_dir: Path = CLUSTERS):
    """Validate `data` written to tmp_path/def.yaml; relative files (inventories, keys) are read from
    `base_dir` (default: clusters/, where the lab's own files are)."""
    path = dump_yaml(data, tmp_path / "def.yaml")
    return validate_source(load_text(path.read_text(), str(path)), matrix, TODAY, base_dir)


def test_lab_is_clean(lab, matrix, tmp_path):
    result = run(lab, matrix, tmp_path)
    assert result.ok and result.findings == []


def test_checks_registered_by_name():
    from clusterdef.validate.registry import load_checks

    load_checks()
    assert {"references", "node-ownership", "addressing", "topology", "matrix", "tenant-capacity",
            "tenant-isolation", "kueue", "multinode-topology", "slurm-partitions", "sections", "tenant-names",
            "slurm-account-tree", "kubernetes-cohort-tree"} <= set(CHECKS)


def set_(path, value):
    def mutate(d):
        node = d
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return mutate


def delete(path):
    def mutate(d):
        node = d
        for p in path[:-1]:
            node = node[p]
        del node[path[-1]]
    return mutate


def chain(*fns):
    def mutate(d):
        for fn in fns:
            fn(d)
    return mutate


CASES = [
    ("ref-hardware", set_(["nodes", "train", "hardware"], "hgx-h200"), ("nodes", "train", "hardware"), Severity.ERROR),
    ("ref-image", set_(["nodes", "infer", "image"], "cpu-node"), ("nodes", "infer", "image"), Severity.ERROR),
    ("ref-fabric", set_(["nodes", "train", "placement", "fabric"], "ib9"), ("nodes", "train", "placement", "fabric"), Severity.ERROR),
    ("ref-node-group", set_(["slurm", "partitions", "train", "node_groups"], ["trian"]), ("slurm", "partitions", "train", "node_groups", 0), Severity.ERROR),
    ("partition-not-slurm", set_(["slurm", "partitions", "debug", "node_groups"], ["infer"]), ("slurm", "partitions", "debug", "node_groups", 0), Severity.ERROR),
    ("flavor-not-kubernetes", set_(["kubernetes", "kueue", "flavors", "h100", "node_groups"], ["train"]), ("kubernetes", "kueue", "flavors", "h100", "node_groups", 0), Severity.ERROR),
    ("ref-qos", set_(["slurm", "partitions", "train", "qos"], "premium"), ("slurm", "partitions", "train", "qos"), Severity.ERROR),
    ("ref-qos", set_(["slurm", "qos", "large", "preempt"], ["scavenger"]), ("slurm", "qos", "large", "preempt", 0), Severity.ERROR),
    ("ref-account", set_(["slurm", "partitions", "train", "allow_accounts"], ["vision", "robotics"]), ("slurm", "partitions", "train", "allow_accounts", 1), Severity.ERROR),
    ("ref-queue", set_(["tenants", "nlp", "kubernetes", "queues"], ["nlp-train"]), ("tenants", "nlp", "kubernetes", "queues", 0), Severity.ERROR),
    ("ref-flavor", set_(["kubernetes", "kueue", "queues", "nlp-serve", "flavor"], "a100"), ("kubernetes", "kueue", "queues", "nlp-serve", "flavor"), Severity.ERROR),
    ("ref-cohort", set_(["kubernetes", "kueue", "queues", "nlp-serve", "cohort"], "prod"), ("kubernetes", "kueue", "queues", "nlp-serve", "cohort"), Severity.ERROR),
    ("node-in-two-groups", lambda d: d["nodes"].__setitem__("spare", {**d["nodes"]["train"], "hosts": "gpu004",
                                                                      "addressing": {"ipv4_start": "10.20.0.90", "mac": {"source": "discover"}}}),
     ("nodes", "spare", "hosts"), Severity.ERROR),
    ("node-two-control-planes", chain(set_(["nodes", "infer", "hosts"], "gpu[004-005]"),
                                      set_(["network", "fabrics", "ib0", "topology", "switches", "leaf02", "nodes"], "gpu[003-005]")),
     ("nodes", "infer", "hosts"), Severity.ERROR),
    ("ip-outside-subnet", set_(["nodes", "infer", "addressing", "ipv4_start"], "10.20.1.5"), ("nodes", "infer", "addressing", "ipv4_start"), Severity.ERROR),
    ("ip-outside-subnet", set_(["nodes", "infer", "addressing", "ipv4_start"], "10.20.0.254"), ("nodes", "infer", "addressing", "ipv4_start"), Severity.ERROR),
    ("ip-duplicate", set_(["nodes", "infer", "addressing", "ipv4_start"], "10.20.0.13"), ("nodes", "infer", "addressing", "ipv4_start"), Severity.ERROR),
    ("ip-duplicate", set_(["network", "provisioning", "server"], "10.20.0.12"), None, Severity.ERROR),
    ("mac-count", set_(["nodes", "infer", "addressing", "mac", "macs"], ["52:54:00:20:00:31"]), ("nodes", "infer", "addressing", "mac", "macs"), Severity.ERROR),
    ("mac-duplicate", set_(["nodes", "infer", "addressing", "mac", "macs"], ["52:54:00:20:00:11", "52:54:00:20:00:32"]), ("nodes", "infer", "addressing", "mac"), Severity.ERROR),
    ("mac-inventory", set_(["nodes", "infer", "addressing", "mac"], {"source": "inventory", "file": "no-such.csv"}), ("nodes", "infer", "addressing", "mac", "file"), Severity.ERROR),
    ("topology-unknown-host", set_(["network", "fabrics", "ib0", "topology", "switches", "leaf01", "nodes"], "gpu[001-002,009]"), None, Severity.ERROR),
    ("topology-node-twice", set_(["network", "fabrics", "ib0", "topology", "switches", "leaf01", "nodes"], "gpu[001-003]"), None, Severity.ERROR),
    ("ref-switch", set_(["network", "fabrics", "ib0", "topology", "switches", "spine01", "switches"], "leaf[01-03]"), None, Severity.ERROR),
    ("switch-empty", set_(["network", "fabrics", "ib0", "topology", "switches", "spine02"], {}), None, Severity.ERROR),
    ("qos-preempt-mode-unused", set_(["slurm", "qos", "normal", "preempt_mode"], "requeue"), ("slurm", "qos", "normal", "preempt_mode"), Severity.WARNING),
    ("secret-ref-unused", set_(["secrets", "refs", "munge_key"], "vault_munge_key"), ("secrets", "refs", "munge_key"), Severity.WARNING),
    ("mig-profile-exceeds-memory", set_(["hardware", "hgx-h100", "gpu", "mig_profiles"], ["1g.10gb", "7g.800gb"]), ("hardware", "hgx-h100", "gpu", "mig_profiles", 1), Severity.ERROR),
    ("tenant-filesystem-not-mounted", set_(["filesystems", "scratch", "node_groups"], ["train", "infer"]), ("tenants", "secure", "storage", "filesystem"), Severity.WARNING),
    # train boots stateless from gpu-node, shared with infer and secure: its mount unit cannot be in the image
    ("image-group-files", chain(set_(["filesystems", "scratch", "source"], "/dev/disk/by-label/scratch"),
                                set_(["filesystems", "scratch", "node_groups"], ["train"])), ("nodes", "train", "image"), Severity.WARNING),
    ("partition-default-twice", set_(["slurm", "partitions", "debug", "default"], True), ("slurm", "partitions", "debug", "default"), Severity.ERROR),
    ("partition-no-default", delete(["slurm", "partitions", "train", "default"]), ("slurm", "partitions"), Severity.WARNING),
    # train and debug over an H100 and an H200 group (tests/lab_variants.py): one warning per partition
    ("partition-mixes-gpu-models", lambda d: d.update(mixed_generations(d)), ("slurm", "partitions", "train", "node_groups"), Severity.WARNING),
    # the flavor h100 over an H100 and an H200 group (tests/lab_variants.py)
    ("flavor-mixes-gpu-models", lambda d: d.update(mixed_flavor(d)), ("kubernetes", "kueue", "flavors", "h100", "node_groups"), Severity.ERROR),
    ("partition-no-topology", delete(["nodes", "train", "placement"]), ("slurm", "partitions", "train"), Severity.WARNING),
    ("partition-no-topology", set_(["network", "fabrics", "ib0", "topology", "switches", "leaf01", "nodes"], "gpu001"), ("slurm", "partitions", "train"), Severity.WARNING),
    ("training-without-gang", set_(["kubernetes", "kueue", "queues", "nlp-serve", "workload_class"], "training"), ("kubernetes", "kueue", "queues", "nlp-serve", "gang"), Severity.ERROR),
    ("mig-strategy", set_(["kubernetes", "gpu_operator"], {"mig_strategy": "none", "mig_profile": "1g.10gb"}), None, Severity.ERROR),
    ("mig-profile-unsupported", set_(["kubernetes", "gpu_operator"], {"mig_strategy": "single", "mig_profile": "1g.12gb"}), None, Severity.ERROR),
    ("quota-reserved-over-capacity", set_(["tenants", "nlp", "quota", "reserved_gpus"], 40), ("tenants",), Severity.ERROR),
    ("quota-burst-oversubscribed", set_(["tenants", "nlp", "quota", "burst_gpus"], 16), ("tenants",), Severity.WARNING),
    ("queue-over-tenant-quota", set_(["kubernetes", "kueue", "queues", "nlp-serve", "nominal_gpus"], 24), ("tenants", "nlp", "kubernetes", "queues"), Severity.ERROR),
    # the capacity ledger (tests/test_capacity.py has each message): nlp on Kubernetes only, its queue holds 8
    ("tenant-reserved-unreachable", chain(delete(["tenants", "nlp", "slurm"]), set_(["tenants", "nlp", "quota", "reserved_gpus"], 12)), ("tenants", "nlp", "quota", "reserved_gpus"), Severity.ERROR),
    ("tenant-burst-unreachable", chain(delete(["tenants", "nlp", "slurm"]), set_(["tenants", "nlp", "quota"], {"reserved_gpus": 8, "burst_gpus": 4})), ("tenants", "nlp", "quota", "burst_gpus"), Severity.WARNING),
    ("reserved-sold-twice", chain(set_(["tenants", "vision", "quota", "reserved_gpus"], 40), set_(["tenants", "secure", "quota"], {"reserved_gpus": 0, "burst_gpus": 16})), ("tenants", "vision", "quota", "reserved_gpus"), Severity.ERROR),
    ("capacity-unusable", set_(["tenants", "secure", "quota", "reserved_gpus"], 8), ("tenants", "secure", "isolation", "node_groups"), Severity.WARNING),
    ("dedicated-not-isolated", set_(["tenants", "secure", "isolation", "network"], "none"), ("tenants", "secure", "isolation", "network"), Severity.ERROR),
    ("dedicated-not-isolated", delete(["tenants", "secure", "storage"]), ("tenants", "secure", "isolation", "storage"), Severity.ERROR),
    # what is rendered decides: a partition key is per port, so without nodes of its own the tenant has none
    ("dedicated-not-isolated", set_(["tenants", "secure", "isolation", "node_groups"], []), ("tenants", "secure", "isolation", "network"), Severity.ERROR),
    ("dedicated-not-isolated", set_(["tenants", "secure", "isolation", "network"], "network-policy"), ("tenants", "secure", "isolation", "network"), Severity.ERROR),
    ("isolation-not-enforced", set_(["tenants", "nlp", "isolation", "device"], "whole-node"), ("tenants", "nlp", "isolation", "device"), Severity.WARNING),
    ("tenant-nodes-shared", set_(["slurm", "partitions", "secure", "allow_accounts"], []), ("slurm", "partitions", "secure", "allow_accounts"), Severity.ERROR),
    ("tenant-nodes-shared", set_(["slurm", "partitions", "train", "node_groups"], ["train", "secure"]), ("slurm", "partitions", "train", "allow_accounts"), Severity.ERROR),
    ("pkey-collision", chain(set_(["tenants", "secure", "isolation", "pkey"], 0x100),
                             set_(["tenants", "nlp", "isolation"], {"level": "dedicated", "device": "whole-node", "network": "partition-key", "storage": "project-quota", "pkey": 0x100, "node_groups": ["train"]})),
     ("tenants", "secure", "isolation", "pkey"), Severity.ERROR),
    ("port-guid-missing", delete(["nodes", "secure", "addressing", "mac", "port_guids"]), ("nodes", "secure", "addressing", "mac", "port_guids"), Severity.ERROR),
    ("quota-over-filesystem", set_(["filesystems", "scratch", "size_tib"], 50), ("filesystems", "scratch", "size_tib"), Severity.ERROR),
    ("quota-unsupported-filesystem", set_(["filesystems", "scratch", "kind"], "nfs"), ("tenants", "vision", "storage", "filesystem"), Severity.ERROR),
    ("ref-filesystem", set_(["tenants", "nlp", "storage", "filesystem"], "nope"), ("tenants", "nlp", "storage", "filesystem"), Severity.ERROR),
    ("ref-node-group", set_(["tenants", "secure", "isolation", "node_groups"], ["nope"]), ("tenants", "secure", "isolation", "node_groups", 0), Severity.ERROR),
    ("quota-reserved-over-capacity", set_(["tenants", "secure", "quota", "reserved_gpus"], 100), ("tenants",), Severity.ERROR),
    ("matrix-unknown-set", set_(["cluster", "matrix"], "2026.07-r585"), ("cluster", "matrix"), Severity.ERROR),
    ("matrix-retired", set_(["cluster", "matrix"], "2025.01-r550"), ("cluster", "matrix"), Severity.ERROR),
    ("matrix-candidate", set_(["cluster", "matrix"], "2026.11-r595-candidate"), ("cluster", "matrix"), Severity.ERROR),
    ("rollback-unknown-set", set_(["upgrade", "rollback", "target"], "2024.01-r535"), ("upgrade", "rollback", "target"), Severity.ERROR),
    ("rollback-not-validated", set_(["upgrade", "rollback", "target"], "2025.01-r550"), ("upgrade", "rollback", "target"), Severity.ERROR),
    ("firmware-platform-unpinned", set_(["hardware", "hgx-h100", "platform"], "hgx-b300"), ("hardware", "hgx-h100", "platform"), Severity.ERROR),
    ("firmware-component-unpinned", set_(["hardware", "hgx-h100", "firmware"], ["bmc", "psu"]), ("hardware", "hgx-h100", "firmware", 1), Severity.ERROR),
    ("slurm-missing", delete(["slurm"]), ("nodes", "train", "control_plane"), Severity.ERROR),
    ("tenant-slurm-without-slurm", delete(["slurm"]), ("tenants", "vision", "slurm"), Severity.ERROR),
    ("slurm-without-nodes", chain(set_(["nodes", "train", "control_plane"], "kubernetes"), delete(["nodes", "secure"]),
                                  delete(["slurm", "partitions", "secure"]), delete(["tenants", "secure"]),
                                  delete(["filesystems"]),
                                  set_(["slurm", "partitions", "train", "node_groups"], ["infer"])), ("slurm",), Severity.ERROR),
    # structure: hierarchies are trees, and one tenant per account / namespace
    ("account-parent-self", set_(["tenants", "nlp", "slurm", "parent"], "nlp"), ("tenants", "nlp", "slurm", "parent"), Severity.ERROR),
    ("account-parent-self", set_(["tenants", "nlp", "slurm", "account"], "root"), ("tenants", "nlp", "slurm", "account"), Severity.ERROR),
    ("account-parent-cycle", chain(set_(["tenants", "vision", "slurm", "parent"], "nlp"), set_(["tenants", "nlp", "slurm", "parent"], "vision")),
     ("tenants", "nlp", "slurm", "parent"), Severity.ERROR),
    ("tenant-account-shared", set_(["tenants", "nlp", "slurm", "account"], "vision"), ("tenants", "nlp", "slurm", "account"), Severity.ERROR),
    ("tenant-namespace-shared", set_(["tenants", "nlp", "kubernetes", "namespace"], "vision"), ("tenants", "nlp", "kubernetes", "namespace"), Severity.ERROR),
    ("cohort-parent-self", set_(["kubernetes", "kueue", "cohorts", "lab"], {"parent": "lab"}), ("kubernetes", "kueue", "cohorts", "lab", "parent"), Severity.ERROR),
    ("cohort-parent-cycle", set_(["kubernetes", "kueue", "cohorts"], {"lab": {"parent": "org"}, "org": {"parent": "lab"}}),
     ("kubernetes", "kueue", "cohorts", "org", "parent"), Severity.ERROR),
    ("switch-self", set_(["network", "fabrics", "ib0", "topology", "switches", "spine01", "switches"], "leaf[01-02],spine01"),
     ("network", "fabrics", "ib0", "topology", "switches", "spine01", "switches"), Severity.ERROR),
    ("switch-cycle", chain(set_(["network", "fabrics", "ib0", "topology", "switches", "spine01", "switches"], "leaf[01-02],spine02"),
                           set_(["network", "fabrics", "ib0", "topology", "switches", "spine02"], {"switches": "spine01"})),
     ("network", "fabrics", "ib0", "topology", "switches", "spine02", "switches"), Severity.ERROR),
    # codes that had no triggering test before tests/test_codes_covered.py (issue #18 item 7)
    ("partition-qos-not-granted", set_(["tenants", "nlp", "slurm", "qos"], ["large"]), ("tenants", "nlp", "slurm", "qos"), Severity.ERROR),
    ("qos-preempt-unreachable", chain(set_(["slurm", "partitions", "secure", "qos"], "large"),
                                      set_(["tenants", "secure", "slurm", "qos"], ["normal", "large"])),
     ("slurm", "qos", "large", "preempt", 0), Severity.ERROR),
    ("qos-preempt-suspend-tier", chain(set_(["slurm", "partitions", "debug", "qos"], "large"),
                                       set_(["slurm", "partitions", "debug", "priority_tier"], 1),
                                       set_(["slurm", "qos", "large", "preempt_mode"], "suspend")),
     ("slurm", "qos", "large", "preempt", 0), Severity.ERROR),
    ("qos-preempt-off", set_(["slurm", "qos", "large", "preempt_mode"], "off"), ("slurm", "qos", "large", "preempt_mode"), Severity.WARNING),
    ("slurm-topology-fabrics", chain(
        set_(["network", "fabrics", "ib1"], {"kind": "infiniband", "topology": {"kind": "tree", "switches": {"leaf11": {"nodes": "sgpu[01-02]"}}}}),
        set_(["network", "fabrics", "ib0", "topology", "switches", "leaf01", "nodes"], "gpu[001-002]"),
        set_(["network", "fabrics", "ib0", "topology", "switches", "leaf02", "nodes"], "gpu[003-004],kgpu[01-02]"),
        set_(["nodes", "secure", "placement", "fabric"], "ib1")), ("nodes",), Severity.WARNING),
    ("alert-threshold-no-gpu", chain(
        set_(["hardware", "cpu-box"], {"platform": "hgx-h100", "cpu": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2},
                                       "memory_gib": 512, "nics": [{"name": "eno1", "kind": "ethernet", "speed_gbps": 25, "role": "provisioning"}]}),
        set_(["observability"], {"hardware": {"cpu-box": {"power_w": 500}}})), ("observability", "hardware", "cpu-box"), Severity.ERROR),
    ("dedicated-filesystem-shared", set_(["filesystems", "scratch", "owner"], "secure"), ("filesystems", "scratch", "node_groups"), Severity.ERROR),
    ("owned-nodes-not-whole", set_(["tenants", "secure", "isolation", "device"], "mig"), ("tenants", "secure", "isolation", "device"), Severity.WARNING),
    ("ref-tenant", set_(["filesystems", "scratch", "owner"], "nope"), ("filesystems", "scratch", "owner"), Severity.ERROR),
    # service hosts (docs/services.md)
    ("service-on-gpu-hardware", set_(["nodes", "ctl", "hardware"], "hgx-h100"), ("nodes", "ctl", "services"), Severity.ERROR),
    ("service-none-without-services", delete(["nodes", "mgmt", "services"]), ("nodes", "mgmt", "control_plane"), Severity.ERROR),
    ("service-control-plane", set_(["nodes", "ctl", "control_plane"], "slurm"), ("nodes", "ctl", "control_plane"), Severity.ERROR),
    ("service-control-plane", set_(["nodes", "mgmt", "control_plane"], "kubernetes"), ("nodes", "mgmt", "services"), Severity.ERROR),
    ("service-control-plane", set_(["nodes", "k8sctl", "control_plane"], "none"), ("nodes", "k8sctl", "services", 0), Severity.ERROR),
    ("service-needs-kubernetes", chain(delete(["kubernetes"]), set_(["nodes", "mgmt", "services"], ["etcd"])),
     ("nodes", "mgmt", "services", 0), Severity.ERROR),
    ("service-needs-slurm", chain(delete(["slurm"]), delete(["backup"]), set_(["nodes", "train", "control_plane"], "kubernetes"),
                                  set_(["nodes", "secure", "control_plane"], "kubernetes")),
     ("nodes", "ctl", "services", 0), Severity.ERROR),
    ("service-duplicate", set_(["nodes", "mgmt", "services"], ["prometheus", "boot-server", "prometheus"]),
     ("nodes", "mgmt", "services", 2), Severity.ERROR),
    ("image-service-shared", set_(["nodes", "acct", "image"], "gpu-node"), ("nodes", "acct", "image"), Severity.ERROR),
    ("service-host-undeclared", set_(["nodes", "ctl", "services"], ["prometheus"]), ("slurm", "controllers", 0), Severity.ERROR),
    ("service-host-undeclared", set_(["nodes", "acct", "services"], ["prometheus"]), ("slurm", "accounting", "host"), Severity.ERROR),
    ("service-hosts-outside", set_(["slurm", "controllers"], ["slurmctl01", "slurmctl02"]), ("slurm", "controllers", 1), Severity.WARNING),
    ("service-host-unlisted", set_(["slurm", "controllers"], ["gpu001"]), ("nodes", "ctl", "services", 0), Severity.ERROR),
    ("service-group-gpu-pool", set_(["kubernetes", "kueue", "flavors", "h100", "node_groups"], ["infer", "k8sctl"]),
     ("kubernetes", "kueue", "flavors", "h100", "node_groups", 1), Severity.ERROR),
    ("service-group-gpu-pool", set_(["upgrade", "canary", "node_group"], "ctl"), ("upgrade", "canary", "node_group"), Severity.ERROR),
    ("etcd-even-members", chain(set_(["nodes", "k8sctl", "hosts"], "k8sctl[01-02]"),
                                set_(["nodes", "k8sctl", "addressing", "mac", "macs"], ["52:54:00:20:00:06", "52:54:00:20:00:07"])),
     ("nodes", "k8sctl", "services", 1), Severity.WARNING),
    ("boot-server-address", set_(["network", "provisioning", "server"], "10.20.0.9"), ("nodes", "mgmt", "addressing", "ipv4_start"), Severity.ERROR),
    # etcd beside the API server wants 4 + 2 cores (etcd's and kubeadm's own figures, knowledge/services.yaml)
    ("service-host-undersized", set_(["hardware", "mgmt-server", "cpu", "cores_per_socket"], 4), ("hardware", "mgmt-server", "cpu"), Severity.WARNING),
    # the accounting host's MariaDB: Slurm's 4 GiB buffer-pool floor is at most half the host
    ("service-host-undersized", set_(["hardware", "mgmt-server", "memory_gib"], 6), ("hardware", "mgmt-server", "memory_gib"), Severity.WARNING),
    ("unknown-field", set_(["hardware", "hgx-h100", "memory_gb"], 2048), ("hardware", "hgx-h100", "memory_gb"), Severity.ERROR),
    ("missing-field", delete(["nodes", "train", "image"]), ("nodes", "train", "image"), Severity.ERROR),
    ("type-error", set_(["images", "gpu-node", "version"], 2026.07), ("images", "gpu-node", "version"), Severity.ERROR),
    ("invalid-value", set_(["nodes", "train", "control_plane"], "both"), ("nodes", "train", "control_plane"), Severity.ERROR),
    ("invalid-value", set_(["nodes", "train", "addressing", "mac", "source"], "csv"), ("nodes", "train", "addressing", "mac", "source"), Severity.ERROR),
    ("invalid-value", set_(["nodes", "train", "hosts"], "gpu[001-"), ("nodes", "train", "hosts"), Severity.ERROR),
    # regulated data and privileged workloads (validate/checks_data.py, docs/data.md)
    ("dataset-path-outside-filesystem", set_(["datasets", "imagenet-eu", "path"], "/scratch/imagenet"), ("datasets", "imagenet-eu", "path"), Severity.ERROR),
    ("dataset-path-outside-filesystem", set_(["datasets", "imagenet-eu", "path"], "/projects"), ("datasets", "imagenet-eu", "path"), Severity.ERROR),
    ("dataset-filesystem-unknown", set_(["datasets", "imagenet-eu", "filesystem"], "nas"), ("datasets", "imagenet-eu", "filesystem"), Severity.ERROR),
    ("dataset-filesystem-unknown", set_(["datasets", "imagenet-eu", "destinations", "filesystems"], ["scratch", "tape"]), ("datasets", "imagenet-eu", "destinations", "filesystems", 1), Severity.ERROR),
    ("dataset-tenant-unknown", set_(["datasets", "imagenet-eu", "tenants"], ["vision", "audio"]), ("datasets", "imagenet-eu", "tenants", 1), Severity.ERROR),
    ("dataset-node-group-unknown", set_(["datasets", "imagenet-eu", "destinations", "node_groups"], ["infer", "gpu"]), ("datasets", "imagenet-eu", "destinations", "node_groups", 1), Severity.ERROR),
    ("dataset-destination-unmounted", set_(["datasets", "imagenet-eu", "destinations", "node_groups"], ["infer", "train"]), ("datasets", "imagenet-eu", "destinations", "node_groups", 1), Severity.ERROR),
    ("dataset-tenant-unreachable", set_(["datasets", "secure-weights", "tenants"], ["secure", "nlp"]), ("datasets", "secure-weights", "tenants", 1), Severity.ERROR),
    ("dataset-quota-unsupported", set_(["filesystems", "projects", "kind"], "nfs"), ("datasets", "imagenet-eu", "quota_tib"), Severity.ERROR),
    ("dataset-group-unresolved", delete(["identity", "directory"]), ("datasets", "imagenet-eu", "tenants"), Severity.ERROR),
    ("dataset-reader-missing", chain(set_(["datasets", "imagenet-eu", "tenants"], []), set_(["datasets", "imagenet-eu", "groups"], [])), ("datasets", "imagenet-eu"), Severity.WARNING),
    ("dataset-filesystem-wider", set_(["datasets", "imagenet-eu", "destinations", "node_groups"], []), ("datasets", "imagenet-eu", "destinations", "node_groups"), Severity.WARNING),
    ("dataset-copy-unguarded", set_(["datasets", "imagenet-eu", "destinations", "filesystems"], []), ("datasets", "imagenet-eu", "destinations", "filesystems"), Severity.WARNING),
    ("dataset-backup-missing", delete(["backup"]), ("datasets", "imagenet-eu", "backup"), Severity.WARNING),
    ("dataset-retention-exceeded", set_(["backup", "authoritative", "sets", "cluster-repo", "paths"], ["/srv/git/lab", "/secure-data/models"]), ("backup", "authoritative", "sets", "cluster-repo", "paths", 1), Severity.ERROR),
    ("privileged-without-approval", delete(["privileged", "debug-root"]), ("slurm", "partitions", "debug", "privileged"), Severity.ERROR),
    ("privileged-approval-unknown", set_(["privileged", "vision-node-debug", "kubernetes", "tenants"], ["vision", "secure"]), ("privileged", "vision-node-debug", "kubernetes", "tenants", 1), Severity.ERROR),
    ("privileged-approval-unknown", set_(["privileged", "debug-root", "slurm", "partitions"], ["debug", "train"]), ("privileged", "debug-root", "slurm", "partitions", 1), Severity.ERROR),
    ("privileged-approval-unknown", set_(["privileged", "debug-root", "slurm", "partitions"], ["debug", "gpu"]), ("privileged", "debug-root", "slurm", "partitions", 1), Severity.ERROR),
    ("privileged-approval-refused", set_(["tenants", "vision", "kubernetes", "pod_security"], "baseline"), ("privileged", "vision-node-debug", "kubernetes", "tenants", 0), Severity.ERROR),
    ("privileged-approval-empty", chain(set_(["privileged", "debug-root", "slurm", "partitions"], []), set_(["privileged", "debug-root", "slurm", "admin_level"], "None")), ("privileged", "debug-root", "slurm"), Severity.WARNING),
]


@pytest.mark.parametrize("code, mutate, path, severity", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_check_finds(code, mutate, path, severity, lab, matrix, tmp_path):
    mutate(lab)
    result = run(lab, matrix, tmp_path)
    hits = [f for f in result.findings if f.code == code]
    assert hits, f"expected {code}, got {[(f.code, f.message) for f in result.findings]}"
    hit = hits[0]
    assert hit.severity is severity
    assert hit.hint and hit.message
    if path is not None:
        assert hit.path == path
    assert hit.file.endswith("def.yaml") and hit.line > 0
    # the line and column point at the key the path names (or its parent, for missing keys)
    assert hit.column > 0
    assert (hit.line, hit.column) == result.source.locate(hit.path)
    if hit.path in result.source.positions() and isinstance(hit.path[-1], str):
        assert hit.path[-1] in result.source.line_text(hit.line)
        assert result.source.line_text(hit.line)[hit.column - 1:].startswith(hit.path[-1])


STRUCTURE = ("account-parent-self", "account-parent-cycle", "tenant-account-shared", "tenant-namespace-shared",
             "cohort-parent-self", "cohort-parent-cycle", "switch-self", "switch-cycle")


@pytest.mark.parametrize("i", [i for i, c in enumerate(CASES) if c[0] in STRUCTURE],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES) if c[0] in STRUCTURE])
def test_structure_finding_is_the_only_one_and_blocks_render(i, lab, matrix, tmp_path):
    """Each structural mistake is one error, and the render path (build_tree) is never reached with it."""
    from clusterdef.build import build_tree

    code, mutate, _, _ = CASES[i]
    mutate(lab)
    result = run(lab, matrix, tmp_path)
    assert [f.code for f in result.findings] == [code], [(f.code, f.message) for f in result.findings]
    with pytest.raises(ValueError):
        build_tree(result)


def test_switch_under_two_spines_is_a_tree(lab, matrix, tmp_path):
    """A fat tree lists a leaf under each of its spines (the estate does): not a finding."""
    lab["network"]["fabrics"]["ib0"]["topology"]["switches"]["spine02"] = {"switches": "leaf[01-02]"}
    assert run(lab, matrix, tmp_path).findings == []


def test_cycle_walk_is_iterative_and_linear():
    """A 200,000-long parent chain closed into one cycle: one cycle, no recursion limit, each node's
    edges asked for once (a walk count, not a wall-clock budget: the machine's load does not decide it)."""
    from collections import Counter

    from clusterdef.validate.graph import cycles

    n = 200_000
    parent = {i: (i + 1) % n for i in range(n)}
    asked: Counter = Counter()

    def edges(a):
        asked[a] += 1
        return (parent[a],)

    found = cycles(parent, edges)
    assert len(asked) == n and set(asked.values()) == {1}
    assert len(found) == 1 and len(found[0]) == n
    chain_only = {i: i + 1 for i in range(n)}  # ends outside the graph: no cycle
    assert cycles(chain_only, lambda a: (chain_only[a],)) == []
    assert cycles({"a": None}, lambda a: ("a",)) == []  # self-edges are the caller's own code


def test_renderers_refuse_what_they_would_drop(lab, matrix):
    """Reached without validation, the Slurm renderers raise rather than silently drop accounts or spines."""
    from clusterdef.model import Definition
    from clusterdef.knowledge import slurm as keywords
    from clusterdef.render.slurm import accounts_cfg, topology_conf
    from clusterdef.resolve import resolve

    cyc = copy.deepcopy(lab)
    cyc["tenants"]["vision"]["slurm"]["parent"] = "nlp"
    cyc["tenants"]["nlp"]["slurm"]["parent"] = "vision"
    shared = copy.deepcopy(lab)
    shared["tenants"]["nlp"]["slurm"]["account"] = "vision"
    loop = copy.deepcopy(lab)
    loop["network"]["fabrics"]["ib0"]["topology"]["switches"]["spine01"]["switches"] = "leaf[01-02],spine01"
    resolved = [resolve(Definition.model_validate(d), matrix, CLUSTERS) for d in (cyc, shared, loop)]
    for r in resolved[:2]:
        with pytest.raises(ValueError):
            accounts_cfg(r)
    kw = keywords.for_major(resolved[2].set.slurm_major)
    with pytest.raises(ValueError):
        topology_conf(resolved[2], kw)


def test_all_findings_reported_at_once(lab, matrix, tmp_path):
    lab["nodes"]["train"]["hardware"] = "nope"
    lab["nodes"]["infer"]["image"] = "nope"
    lab["tenants"]["secure"]["isolation"]["network"] = "none"
    codes = {f.code for f in run(lab, matrix, tmp_path).findings}
    assert {"ref-hardware", "ref-image", "dedicated-not-isolated"} <= codes


def test_schema_errors_all_reported(lab, matrix, tmp_path):
    lab["hardware"]["hgx-h100"]["memory_gb"] = 1
    del lab["nodes"]["infer"]["image"]
    codes = [f.code for f in run(lab, matrix, tmp_path).findings]
    assert "unknown-field" in codes and "missing-field" in codes


def test_unknown_field_suggests_the_right_name(lab, matrix, tmp_path):
    lab["hardware"]["hgx-h100"]["memory_gb"] = 1
    f = next(f for f in run(lab, matrix, tmp_path).findings if f.code == "unknown-field")
    assert "memory_gib" in f.hint


def test_slurm_eos_is_a_warning(matrix):
    from clusterdef.matrix.checks import check_set
    from datetime import date

    vs = matrix.sets["2025.10-r580"]
    problems = check_set(vs, matrix.compat, date(2027, 1, 15))
    assert [(p.code, p.severity) for p in problems] == [("matrix-slurm-eos", Severity.WARNING)]


def test_eol_driver_branch_is_an_error_unless_retired(matrix):
    from clusterdef.matrix.checks import check_set

    retired = matrix.sets["2025.01-r550"]
    assert "matrix-driver-eol" not in {p.code for p in check_set(retired, matrix.compat, TODAY)}
    revived = retired.model_copy(update={"status": "validated"})
    problems = {p.code: p for p in check_set(revived, matrix.compat, TODAY)}
    assert problems["matrix-driver-eol"].severity is Severity.ERROR
    assert "R550" in problems["matrix-driver-eol"].message
