"""Regulated data (the `datasets` section, docs/data.md): who may read each dataset or model artefact and
from where, as every renderer and `clusterdef access --dataset` see it. Pure decisions; the files are
rendered by render/storage (ACL and quota script, bind-mount units), render/kubernetes/data.py
(PersistentVolume, claim and egress policy per authorised namespace) and render/backup.py (its own
retention)."""

from __future__ import annotations

from . import tenancy
from .model import Definition
from .model.data import Dataset

MOUNT_ROOT = "/datasets"


def dataset(d: Definition, name: str) -> Dataset:
    return d.datasets[name]


def relative(d: Definition, name: str) -> str | None:
    """The dataset's path relative to its filesystem's mount, or None when it is not strictly inside it
    (`dataset-path-outside-filesystem`)."""
    ds = d.datasets[name]
    fs = d.filesystems.get(ds.filesystem)
    if fs is None:
        return None
    mount = fs.mount.rstrip("/")
    parts = ds.path.split("/")
    if ds.path == mount or not ds.path.startswith(mount + "/") or ".." in parts or "." in parts:
        return None
    return ds.path[len(mount) + 1:].rstrip("/") or None


def tenant_directory_groups(d: Definition, tenant: str) -> tuple[str, ...]:
    """A tenant's POSIX groups: identity.tenant_groups (the directory, through SSSD on the nodes)."""
    return tuple(d.identity.tenant_groups.get(tenant, ())) if d.identity else ()


def reader_groups(d: Definition, name: str) -> tuple[str, ...]:
    """Directory groups that may read it: its tenants' groups, then its own `groups`."""
    ds = d.datasets[name]
    out = [g for t in ds.tenants if t in d.tenants for g in tenant_directory_groups(d, t)]
    return tuple(dict.fromkeys(out + list(ds.groups)))


def node_groups(d: Definition, name: str) -> tuple[str, ...]:
    """Node groups where it is mounted: its destinations that exist and mount its filesystem."""
    ds = d.datasets[name]
    fs = d.filesystems.get(ds.filesystem)
    if fs is None or relative(d, name) is None:
        return ()
    return tuple(g for g in ds.destinations.node_groups if g in d.nodes and g in fs.node_groups)


def tenant_groups_run(d: Definition, tenant: str) -> tuple[str, ...]:
    """Node groups the tenant's work runs on: its Slurm partitions' groups and its pods' groups."""
    t = d.tenants[tenant]
    out: list[str] = []
    if t.slurm and d.slurm:
        for p in d.slurm.partitions.values():
            if not p.allow_accounts or t.slurm.account in p.allow_accounts:
                out += [g for g in p.node_groups if g in d.nodes]
    out += tenancy.tenant_pod_groups(d, tenant)
    return tuple(dict.fromkeys(out))


def tenant_reach(d: Definition, name: str, tenant: str) -> tuple[str, ...]:
    """Node groups where the tenant's work can read the dataset."""
    mounted = node_groups(d, name)
    return tuple(g for g in tenant_groups_run(d, tenant) if g in mounted)


def namespaces(d: Definition, name: str) -> dict[str, tuple[str, ...]]:
    """Authorised tenant -> the node groups where its pods may claim the dataset (tenants with a namespace
    whose pods run where it is mounted)."""
    ds = d.datasets[name]
    mounted = node_groups(d, name)
    out = {}
    for t in ds.tenants:
        if t in d.tenants and d.tenants[t].kubernetes and d.kubernetes:
            groups = tuple(g for g in tenancy.tenant_pod_groups(d, t) if g in mounted)
            if groups:
                out[t] = groups
    return out


def project_id(d: Definition, name: str) -> int:
    ds = d.datasets[name]
    return ds.project_id if ds.project_id is not None else tenancy._derived(f"dataset/{name}", 10_000, 2_000_000_000)


def approvers(d: Definition, name: str) -> tuple[str, ...]:
    """The groups that approve a change of it (governance.py decides the same way)."""
    from .governance import dataset_approvers

    return dataset_approvers(d, name)


def acl_file(d: Definition, name: str) -> str:
    return f"storage/{d.datasets[name].filesystem}/dataset-{name}.sh"


def kubernetes_file(name: str) -> str:
    return f"kubernetes/data/{name}.yaml"


def backup_role(name: str) -> str:
    return f"data-{name}"


def backed_up(d: Definition, name: str) -> bool:
    return d.datasets[name].backup and d.backup is not None and relative(d, name) is not None


def answer(d: Definition, name: str) -> dict:
    """`clusterdef access --dataset NAME`: who can read it and from where, each with the file that grants it."""
    from .quoting import unit_name

    ds = d.datasets[name]
    readers = [{"group": g, "via": ("groups" if g in ds.groups else "tenant "
                                    + ", ".join(t for t in ds.tenants if g in tenant_directory_groups(d, t))),
                "grant": "read (POSIX ACL r-X)", "file": acl_file(d, name)} for g in reader_groups(d, name)]
    mount = ds.mount_point(name)
    where = [{"node_group": g, "mount": mount, "file": f"storage/mounts/{g}/{unit_name(mount)}"}
             for g in node_groups(d, name)]
    pods = [{"tenant": t, "namespace": d.tenants[t].kubernetes.namespace,  # type: ignore[union-attr]
             "node_groups": list(gs), "file": kubernetes_file(name)} for t, gs in namespaces(d, name).items()]
    fs = d.filesystems.get(ds.filesystem)
    also = [g for g in (fs.node_groups if fs else ()) if g in d.nodes and g not in node_groups(d, name)]
    out = {"dataset": name, "kind": ds.kind, "classification": ds.classification, "path": ds.path,
           "filesystem": ds.filesystem, "readers": readers, "node_groups": where, "namespaces": pods,
           "egress_cidrs": [str(c) for c in ds.destinations.egress_cidrs],
           "retention_days": ds.retention_days,
           # not authorised, but its filesystem is mounted there: the ACL alone keeps non-readers out
           "filesystem_also_on": also}
    if backed_up(d, name):
        out["backup"] = {"role": backup_role(name), "file": f"backup/{backup_role(name)}/backup.sh"}
    return out


def to_markdown(a: dict) -> str:
    out = [f"# {a['kind']} {a['dataset']} ({a['classification']}): {a['path']} on {a['filesystem']}", "",
           "| who | can | from | file |", "|---|---|---|---|"]
    for r in a["readers"]:
        out.append(f"| group:{r['group']} ({r['via']}) | {r['grant']} | the nodes below | `{r['file']}` |")
    for w in a["node_groups"]:
        out.append(f"| readers above | mounted read-only at {w['mount']} | node group {w['node_group']} "
                   f"| `{w['file']}` |")
    for n in a["namespaces"]:
        out.append(f"| tenant:{n['tenant']} pods | claim it read-only | namespace {n['namespace']} on "
                   f"{', '.join(n['node_groups'])} | `{n['file']}` |")
    for g in a["filesystem_also_on"]:
        out.append(f"| readers above | read through the filesystem's mount (not authorised: the ACL only) | "
                   f"node group {g} | `{a['readers'][0]['file'] if a['readers'] else '-'}` |")
    if not a["readers"]:
        out.append("| nobody | - | - | - |")
    out.append("")
    out.append("egress of its pods: " + (", ".join(a["egress_cidrs"]) or "none outside the cluster"))
    out.append(f"retention: {a['retention_days']} days"
               + (f" (backup `{a['backup']['file']}`)" if "backup" in a else ""))
    return "\n".join(out) + "\n"
